//! A fixed pool of packet buffers carved out of one allocation, with per-worker caches so that
//! the fast path allocates and frees without touching shared state (DPDK's mempool design).

use crate::packet::Packet;
use crossbeam_queue::ArrayQueue;
use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::Arc;

/// Sizes of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PoolConfig {
    /// Number of buffers.
    pub buffers: u32,
    /// Bytes per buffer including headroom; a multiple of 64 (one cache line).
    pub buffer_size: u32,
    /// Bytes reserved in front of each frame for encapsulation (`adjust_head`).
    pub headroom: u16,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self { buffers: 4096, buffer_size: 2048, headroom: 128 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("pool needs at least one buffer")]
    Empty,
    #[error("buffer_size {0} must be a multiple of 64 between 128 and 65472")]
    BufferSize(u32),
    #[error("headroom {headroom} leaves less than 64 bytes of a {buffer_size}-byte buffer")]
    Headroom { headroom: u16, buffer_size: u32 },
    #[error("pool of {0} bytes cannot be allocated")]
    Alloc(usize),
}

/// The shared part of a pool. Lives at a stable address until every buffer is back.
pub(crate) struct PoolCore {
    arena: NonNull<u8>,
    layout: Layout,
    buffer_size: usize,
    headroom: u16,
    count: u32,
    free: ArrayQueue<u32>,
}

// SAFETY: the arena is only touched through Packets, each owning a distinct buffer; the free
// queue is a lock-free MPMC queue. Nothing else is mutable.
unsafe impl Send for PoolCore {}
// SAFETY: see above.
unsafe impl Sync for PoolCore {}

impl PoolCore {
    /// Return a buffer index to the shared free queue.
    pub(crate) fn release(&self, index: u32) {
        // The queue holds `count` entries and each index is in at most one place, so it cannot
        // be full; if it ever were, leaking one buffer is the safe outcome.
        let _ = self.free.push(index);
    }

    #[inline(always)]
    fn packet(&self, self_ptr: NonNull<PoolCore>, index: u32) -> Packet {
        // SAFETY: index < count (only indices 0..count are ever queued), so the buffer lies
        // inside the arena; it just left the free structures, so nobody else owns it.
        unsafe {
            let base =
                NonNull::new_unchecked(self.arena.as_ptr().add(index as usize * self.buffer_size));
            Packet::from_raw(base, self_ptr, index, self.buffer_size as u16, self.headroom)
        }
    }
}

impl Drop for PoolCore {
    fn drop(&mut self) {
        // SAFETY: allocated in `Pool::new` with exactly this layout.
        unsafe { alloc::dealloc(self.arena.as_ptr(), self.layout) };
    }
}

/// Frees the core once the last handle is gone, but only if every buffer came back; a packet
/// still alive somewhere keeps the memory valid by leaking it (never a dangling packet).
struct PoolOwner {
    core: NonNull<PoolCore>,
}

// SAFETY: PoolCore is Send + Sync; the owner only frees it once.
unsafe impl Send for PoolOwner {}
// SAFETY: see above.
unsafe impl Sync for PoolOwner {}

impl Drop for PoolOwner {
    fn drop(&mut self) {
        // SAFETY: the core is alive until this drop.
        let core = unsafe { self.core.as_ref() };
        let outstanding = core.count as usize - core.free.len();
        if outstanding == 0 {
            // SAFETY: created with Box::into_raw in Pool::new; no packet and no handle remain.
            drop(unsafe { Box::from_raw(self.core.as_ptr()) });
        } else {
            tracing::warn!(
                outstanding,
                "packet pool dropped with buffers still in use; leaking it"
            );
        }
    }
}

/// A handle to a packet pool. Cheap to clone; each worker takes a [`PoolCache`] from it.
#[derive(Clone)]
pub struct Pool {
    owner: Arc<PoolOwner>,
}

impl Pool {
    pub fn new(cfg: PoolConfig) -> Result<Self, PoolError> {
        if cfg.buffers == 0 {
            return Err(PoolError::Empty);
        }
        if cfg.buffer_size % 64 != 0 || !(128..=65472).contains(&cfg.buffer_size) {
            return Err(PoolError::BufferSize(cfg.buffer_size));
        }
        if cfg.headroom as u32 + 64 > cfg.buffer_size {
            return Err(PoolError::Headroom {
                headroom: cfg.headroom,
                buffer_size: cfg.buffer_size,
            });
        }
        let bytes = cfg.buffers as usize * cfg.buffer_size as usize;
        let layout = Layout::from_size_align(bytes, 64).map_err(|_| PoolError::Alloc(bytes))?;
        // SAFETY: layout has non-zero size (buffers >= 1, buffer_size >= 128). Zeroed so that a
        // frame grown by `set_len` never exposes another process's memory.
        let arena =
            NonNull::new(unsafe { alloc::alloc_zeroed(layout) }).ok_or(PoolError::Alloc(bytes))?;
        let free = ArrayQueue::new(cfg.buffers as usize);
        for i in 0..cfg.buffers {
            let _ = free.push(i);
        }
        let core = Box::new(PoolCore {
            arena,
            layout,
            buffer_size: cfg.buffer_size as usize,
            headroom: cfg.headroom,
            count: cfg.buffers,
            free,
        });
        // SAFETY: Box::into_raw never returns null.
        let core = unsafe { NonNull::new_unchecked(Box::into_raw(core)) };
        Ok(Self { owner: Arc::new(PoolOwner { core }) })
    }

    fn core(&self) -> &PoolCore {
        // SAFETY: the owner keeps the core alive while any Pool handle exists.
        unsafe { self.owner.core.as_ref() }
    }

    /// Allocate from the shared queue (slow path; workers use a `PoolCache`).
    pub fn alloc(&self) -> Option<Packet> {
        let i = self.core().free.pop()?;
        Some(self.core().packet(self.owner.core, i))
    }

    /// A per-worker cache holding up to `size` free buffers locally.
    pub fn cache(&self, size: usize) -> PoolCache {
        let size = size.clamp(1, self.capacity() as usize);
        PoolCache {
            pool: self.clone(),
            core: self.owner.core,
            local: Vec::with_capacity(size),
            size,
        }
    }

    /// Total buffers.
    pub fn capacity(&self) -> u32 {
        self.core().count
    }

    /// Buffers in the shared free queue (excludes those parked in caches).
    pub fn available(&self) -> usize {
        self.core().free.len()
    }

    pub fn buffer_size(&self) -> usize {
        self.core().buffer_size
    }

    pub fn headroom(&self) -> u16 {
        self.core().headroom
    }

    /// True if `pkt` came from this pool.
    pub fn owns(&self, pkt: &Packet) -> bool {
        pkt.core == self.owner.core
    }

    /// Run `fill` over every buffer currently free (frame area from the default headroom),
    /// e.g. to pre-build frames a generator hands out without writing them per packet.
    pub fn prefill(&self, mut fill: impl FnMut(u32, &mut [u8])) {
        let mut taken = Vec::with_capacity(self.available());
        while let Some(mut p) = self.alloc() {
            let max = p.max_len();
            let _ = p.set_len(max);
            fill(p.buffer_index(), p.data_mut());
            taken.push(p);
        }
        drop(taken);
    }
}

impl core::fmt::Debug for Pool {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pool")
            .field("capacity", &self.capacity())
            .field("available", &self.available())
            .field("buffer_size", &self.buffer_size())
            .finish()
    }
}

/// A worker's private stack of free buffers in front of the shared queue. LIFO, so the buffers
/// reused next are the ones still warm in this core's cache.
pub struct PoolCache {
    pool: Pool,
    core: NonNull<PoolCore>,
    local: Vec<u32>,
    size: usize,
}

// SAFETY: the cache holds only buffer indices it owns and a pointer to a Sync core kept alive by
// `pool`; moving it to another thread moves that ownership.
unsafe impl Send for PoolCache {}

impl PoolCache {
    #[inline]
    pub fn alloc(&mut self) -> Option<Packet> {
        let index = match self.local.pop() {
            Some(i) => i,
            None => self.refill()?,
        };
        // SAFETY: the pool handle in `self` keeps the core alive.
        Some(unsafe { self.core.as_ref() }.packet(self.core, index))
    }

    #[cold]
    fn refill(&mut self) -> Option<u32> {
        // SAFETY: kept alive by `self.pool`.
        let core = unsafe { self.core.as_ref() };
        let want = self.size.div_ceil(2);
        while self.local.len() < want {
            match core.free.pop() {
                Some(i) => self.local.push(i),
                None => break,
            }
        }
        self.local.pop()
    }

    /// Return a packet's buffer to this cache (or to its own pool if it came from another).
    #[inline]
    pub fn free(&mut self, pkt: Packet) {
        if pkt.core != self.core {
            drop(pkt);
            return;
        }
        if self.local.len() == self.size {
            self.spill();
        }
        self.local.push(pkt.index);
        core::mem::forget(pkt);
    }

    #[cold]
    fn spill(&mut self) {
        // SAFETY: kept alive by `self.pool`.
        let core = unsafe { self.core.as_ref() };
        let keep = self.size / 2;
        for i in self.local.drain(keep..) {
            core.release(i);
        }
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Free buffers held locally.
    pub fn cached(&self) -> usize {
        self.local.len()
    }
}

impl Drop for PoolCache {
    fn drop(&mut self) {
        // SAFETY: the core is alive: `self.pool` is dropped after this body runs.
        let core = unsafe { self.core.as_ref() };
        for i in self.local.drain(..) {
            core.release(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Pool {
        Pool::new(PoolConfig { buffers: 8, buffer_size: 256, headroom: 64 }).unwrap()
    }

    #[test]
    fn alloc_until_empty_then_reuse() {
        let pool = small();
        let pkts: Vec<_> = (0..8).map(|_| pool.alloc().unwrap()).collect();
        assert!(pool.alloc().is_none());
        let mut seen: Vec<_> = pkts.iter().map(|p| p.buffer_index()).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 8, "every buffer handed out once");
        drop(pkts);
        assert_eq!(pool.available(), 8);
    }

    #[test]
    fn cache_recycles_locally_and_returns_on_drop() {
        let pool = small();
        let mut cache = pool.cache(4);
        let a = cache.alloc().unwrap();
        let idx = a.buffer_index();
        cache.free(a);
        assert_eq!(cache.alloc().unwrap().buffer_index(), idx, "LIFO reuse");
        drop(cache);
        assert_eq!(pool.available(), 8);
    }

    #[test]
    fn headroom_and_tail_adjustments_are_bounded() {
        let pool = small();
        let mut p = pool.alloc().unwrap();
        assert_eq!(p.headroom(), 64);
        p.set_frame(&[1, 2, 3, 4]).unwrap();
        p.adjust_head(-4).unwrap();
        assert_eq!(p.len(), 8);
        assert_eq!(&p.data()[4..], &[1, 2, 3, 4]);
        assert!(p.adjust_head(-61).is_err());
        assert!(p.adjust_head(9).is_err());
        p.adjust_head(4).unwrap();
        assert_eq!(p.data(), &[1, 2, 3, 4]);
        assert!(p.adjust_tail(-5).is_err());
        p.adjust_tail(-4).unwrap();
        assert!(p.is_empty());
        assert!(p.adjust_tail(193).is_err());
        p.adjust_tail(192).unwrap();
        assert_eq!(p.len(), 192);
        assert!(p.set_len(193).is_err());
    }

    #[test]
    fn foreign_packets_go_home() {
        let a = small();
        let b = small();
        let mut cache = a.cache(4);
        let from_b = b.alloc().unwrap();
        cache.free(from_b);
        assert_eq!(b.available(), 8);
        assert_eq!(cache.cached(), 0);
    }

    #[test]
    fn pool_outlived_by_packet_is_leaked_not_freed() {
        let pool = small();
        let mut p = pool.alloc().unwrap();
        drop(pool);
        p.set_frame(&[9; 16]).unwrap();
        assert_eq!(p.data(), &[9; 16]);
    }

    #[test]
    fn config_is_validated() {
        let bad = |b, s, h| Pool::new(PoolConfig { buffers: b, buffer_size: s, headroom: h });
        assert_eq!(bad(0, 2048, 128).unwrap_err(), PoolError::Empty);
        assert_eq!(bad(1, 2000, 128).unwrap_err(), PoolError::BufferSize(2000));
        assert!(matches!(bad(1, 128, 100).unwrap_err(), PoolError::Headroom { .. }));
    }
}
