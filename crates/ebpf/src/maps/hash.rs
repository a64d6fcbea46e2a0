//! A preallocated open-addressing hash table with lock-free lookups.
//!
//! Slots are `[state: u32 | hash: u32][key, padded to 8][value area]` in one arena. Readers
//! probe linearly without locks: `FULL` slots with a matching hash and key are hits, `EMPTY`
//! ends the probe, `TOMB` (deleted) and `BUSY` (being filled) are skipped. Writers of one key
//! serialise on a lock striped by the key's hash, so a key is never inserted twice; writers of
//! different keys claim free slots with a compare-and-swap on the state. Deleted slots become
//! tombstones that later inserts reuse; a value pointer a program got from a lookup stays
//! valid memory but may then show another key's value (as with Linux's preallocated maps).

use super::{errno, Arena, Who, BPF_EXIST, BPF_NOEXIST};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

const EMPTY: u32 = 0;
const BUSY: u32 = 1;
const FULL: u32 = 2;
const TOMB: u32 = 3;

const STRIPES: usize = 64;
/// Spins a program waits for a contended stripe before giving up with -EBUSY.
const PROGRAM_SPINS: u32 = 4096;

/// Slots for `max_entries`: at most half full, a power of two.
pub(crate) fn capacity(max_entries: u32) -> usize {
    (max_entries as usize * 2).next_power_of_two().max(8)
}

/// Hash of a key: 8-byte words through a multiply-rotate mix (keys are small and fixed-size).
pub(crate) fn hash_key(key: &[u8]) -> u32 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h: u64 = key.len() as u64;
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(b)).wrapping_mul(K);
    }
    (h ^ (h >> 32)) as u32
}

struct Stripe(AtomicBool);

impl Stripe {
    /// Take the lock; a program gives up after a bounded spin, the control plane waits.
    fn lock(&self, who: Who) -> Option<StripeGuard<'_>> {
        let mut spins = 0u32;
        while self
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if who == Who::Program && spins > PROGRAM_SPINS {
                return None;
            }
            if spins % 64 == 0 && who == Who::Control {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
        Some(StripeGuard(self))
    }
}

struct StripeGuard<'a>(&'a Stripe);

impl Drop for StripeGuard<'_> {
    fn drop(&mut self) {
        self.0 .0.store(false, Ordering::Release);
    }
}

pub(crate) struct HashStore {
    arena: Arena,
    key_size: usize,
    key_stride: usize,
    value_stride: usize,
    slot_stride: usize,
    mask: usize,
    max_entries: usize,
    count: AtomicUsize,
    stripes: Box<[Stripe]>,
}

impl HashStore {
    pub(crate) fn new(key_size: usize, value_stride: usize, max_entries: u32) -> Self {
        let cap = capacity(max_entries);
        let key_stride = key_size.div_ceil(8) * 8;
        let slot_stride = 8 + key_stride + value_stride;
        Self {
            arena: Arena::new(cap * slot_stride),
            key_size,
            key_stride,
            value_stride,
            slot_stride,
            mask: cap - 1,
            max_entries: max_entries as usize,
            count: AtomicUsize::new(0),
            stripes: (0..STRIPES).map(|_| Stripe(AtomicBool::new(false))).collect(),
        }
    }

    pub(crate) fn arena(&self) -> &Arena {
        &self.arena
    }

    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    fn slot(&self, i: usize) -> *mut u8 {
        // SAFETY: i <= mask < capacity, so the slot lies inside the arena.
        unsafe { self.arena.base().add(i * self.slot_stride) }
    }

    fn state(&self, i: usize) -> &AtomicU32 {
        // SAFETY: slots are 8-byte aligned (the arena is u64 words and strides are multiples of
        // 8); the state word is only accessed atomically.
        unsafe { AtomicU32::from_ptr(self.slot(i) as *mut u32) }
    }

    fn stored_hash(&self, i: usize) -> &AtomicU32 {
        // SAFETY: as in `state`, 4 bytes further.
        unsafe { AtomicU32::from_ptr(self.slot(i).add(4) as *mut u32) }
    }

    fn key_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: inside the slot.
        unsafe { self.slot(i).add(8) }
    }

    pub(crate) fn value_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: inside the slot.
        unsafe { self.slot(i).add(8 + self.key_stride) }
    }

    #[inline]
    fn key_matches(&self, i: usize, key: &[u8]) -> bool {
        // SAFETY: key bytes of slot i; written before the slot became FULL (release), read
        // after observing FULL (acquire).
        let stored = unsafe { std::slice::from_raw_parts(self.key_ptr(i), self.key_size) };
        // Word by word: keys are a few bytes, and a memcmp call costs more than the compare.
        let mut a = stored.chunks_exact(8);
        let mut b = key.chunks_exact(8);
        for (x, y) in (&mut a).zip(&mut b) {
            if x != y {
                return false;
            }
        }
        a.remainder() == b.remainder()
    }

    /// The slot holding `key`.
    fn find_slot(&self, key: &[u8], h: u32) -> Option<usize> {
        let mut i = h as usize & self.mask;
        for _ in 0..=self.mask {
            match self.state(i).load(Ordering::Acquire) {
                EMPTY => return None,
                FULL if self.stored_hash(i).load(Ordering::Relaxed) == h
                    && self.key_matches(i, key) =>
                {
                    return Some(i)
                }
                _ => {}
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// Lock-free lookup: the value's address.
    pub(crate) fn find(&self, key: &[u8]) -> Option<*mut u8> {
        self.find_slot(key, hash_key(key)).map(|i| self.value_ptr(i))
    }

    pub(crate) fn find_offset(&self, key: &[u8]) -> Option<usize> {
        self.find(key).map(|p| p as usize - self.arena.base() as usize)
    }

    /// Insert or find `key` (per `flags`); returns its value area for the caller to fill, and
    /// whether the entry is new (its value area is then zeroed).
    pub(crate) fn upsert(&self, key: &[u8], flags: u64, who: Who) -> Result<(*mut u8, bool), i64> {
        let h = hash_key(key);
        let Some(_g) = self.stripes[h as usize % STRIPES].lock(who) else {
            return Err(-errno::EBUSY);
        };
        if let Some(i) = self.find_slot(key, h) {
            if flags == BPF_NOEXIST {
                return Err(-errno::EEXIST);
            }
            return Ok((self.value_ptr(i), false));
        }
        if flags == BPF_EXIST {
            return Err(-errno::ENOENT);
        }
        if self.count.fetch_add(1, Ordering::Relaxed) >= self.max_entries {
            self.count.fetch_sub(1, Ordering::Relaxed);
            return Err(-errno::E2BIG);
        }
        let mut i = h as usize & self.mask;
        for _ in 0..=self.mask {
            let s = self.state(i);
            let cur = s.load(Ordering::Relaxed);
            if (cur == EMPTY || cur == TOMB)
                && s.compare_exchange(cur, BUSY, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                self.stored_hash(i).store(h, Ordering::Relaxed);
                // SAFETY: slot i is ours (BUSY): no reader looks at its key or value until FULL.
                unsafe {
                    std::ptr::copy_nonoverlapping(key.as_ptr(), self.key_ptr(i), key.len());
                    std::ptr::write_bytes(self.value_ptr(i), 0, self.value_stride);
                }
                s.store(FULL, Ordering::Release);
                return Ok((self.value_ptr(i), true));
            }
            i = (i + 1) & self.mask;
        }
        // Unreachable while count <= max_entries < capacity, but never trust that on the fast path.
        self.count.fetch_sub(1, Ordering::Relaxed);
        Err(-errno::E2BIG)
    }

    pub(crate) fn remove(&self, key: &[u8], who: Who) -> i64 {
        let h = hash_key(key);
        let Some(_g) = self.stripes[h as usize % STRIPES].lock(who) else { return -errno::EBUSY };
        match self.find_slot(key, h) {
            Some(i) => {
                self.state(i).store(TOMB, Ordering::Release);
                self.count.fetch_sub(1, Ordering::Relaxed);
                0
            }
            None => -errno::ENOENT,
        }
    }

    /// Slots in the arena (the bound of a slot index).
    pub(crate) fn slots(&self) -> usize {
        self.mask + 1
    }

    /// Every entry's key and slot (control plane).
    pub(crate) fn slotted_keys(&self) -> Vec<(Vec<u8>, usize)> {
        (0..=self.mask)
            .filter(|&i| self.state(i).load(Ordering::Acquire) == FULL)
            .map(|i| (self.arena.read(i * self.slot_stride + 8, self.key_size), i))
            .collect()
    }

    /// Keys of every entry (control plane).
    pub(crate) fn keys(&self) -> Vec<Vec<u8>> {
        (0..=self.mask)
            .filter(|&i| self.state(i).load(Ordering::Acquire) == FULL)
            .map(|i| self.arena.read(i * self.slot_stride + 8, self.key_size))
            .collect()
    }
}
