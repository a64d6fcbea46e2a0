//! One shard of the store behind a spinlock: a std `Mutex` costs about 15 ns per lock and
//! unlock here, and a transaction's array of guards was moved and dropped with every packet.
//! A shard is locked for one bounded store operation or one bounded program run, so waiting
//! is short; workers may share a core, so a waiter yields after a bounded number of spins.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

use super::table::Table;

/// Busy-wait rounds before a waiter starts yielding its core to the holder.
const SPINS_BEFORE_YIELD: u32 = 64;

/// A shard: its lock and its table, on cache lines of their own (no false sharing between the
/// locks of neighbouring shards).
#[repr(align(64))]
pub(super) struct ShardCell {
    locked: AtomicBool,
    table: UnsafeCell<Table>,
}

// SAFETY: the table is only reached through `ShardGuard` or `ShardCell::table_unchecked`, both
// of which require the lock to be held by the caller; the lock's Acquire (on taking it) and
// Release (on giving it back) order every access of one holder before the next holder's.
// `Table` owns plain data (no thread-bound state), so it may move between threads.
unsafe impl Sync for ShardCell {}

impl ShardCell {
    pub(super) fn new(table: Table) -> ShardCell {
        ShardCell { locked: AtomicBool::new(false), table: UnsafeCell::new(table) }
    }

    /// Takes the lock (spinning, then yielding); the caller must call [`ShardCell::unlock`]
    /// exactly once afterwards (a [`ShardGuard`] or a `Txn` does, in `Drop`).
    #[inline]
    pub(super) fn lock(&self) {
        let mut spins = 0u32;
        loop {
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            // Wait on a plain load (no cache-line ping-pong) until it looks free.
            while self.locked.load(Ordering::Relaxed) {
                if spins < SPINS_BEFORE_YIELD {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Gives the lock back. Only its holder may call this.
    #[inline]
    pub(super) fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// The shard locked until the guard is dropped, if it is free now; never waits.
    #[inline]
    pub(super) fn try_guard(&self) -> Option<ShardGuard<'_>> {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(ShardGuard { cell: self })
    }

    /// Locks the shard until the guard is dropped (also during a panic's unwinding).
    #[inline]
    pub(super) fn guard(&self) -> ShardGuard<'_> {
        self.lock();
        ShardGuard { cell: self }
    }

    /// The table of a shard the caller has locked.
    ///
    /// # Safety
    /// The caller holds this shard's lock (taken with [`ShardCell::lock`] and not yet given
    /// back) and creates no other reference to the table while the returned one lives.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn table_unchecked(&self) -> &mut Table {
        // SAFETY: the caller holds the lock, so no other thread touches the table, and
        // promises no other live reference from this thread (see the function's contract).
        unsafe { &mut *self.table.get() }
    }
}

/// A locked shard for one store operation.
pub(super) struct ShardGuard<'a> {
    cell: &'a ShardCell,
}

impl Deref for ShardGuard<'_> {
    type Target = Table;

    fn deref(&self) -> &Table {
        // SAFETY: this guard holds the lock until it is dropped, and the only references to
        // the table it hands out borrow the guard itself (shared here, unique in `deref_mut`).
        unsafe { &*self.cell.table.get() }
    }
}

impl DerefMut for ShardGuard<'_> {
    fn deref_mut(&mut self) -> &mut Table {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference to the table.
        unsafe { &mut *self.cell.table.get() }
    }
}

impl Drop for ShardGuard<'_> {
    fn drop(&mut self) {
        self.cell.unlock();
    }
}
