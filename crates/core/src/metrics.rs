//! Counters the fast path can bump without read-modify-write instructions.

use crate::stage::MAX_WORKERS;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter with exactly one writer (one worker). `add` is a relaxed load and store, which
/// compiles to a plain add on x86; readers on other threads see a value that is at most a few
/// increments stale, never torn.
#[derive(Debug, Default)]
pub struct LocalCounter(AtomicU64);

impl LocalCounter {
    pub const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    #[inline(always)]
    pub fn add(&self, v: u64) {
        self.0.store(self.0.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
    }

    #[inline(always)]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A counter with several writers (control thread, several workers). Slower than
/// [`LocalCounter`]; keep it off the per-packet path.
#[derive(Debug, Default)]
pub struct SharedCounter(AtomicU64);

impl SharedCounter {
    pub const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    pub fn add(&self, v: u64) {
        self.0.fetch_add(v, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One [`LocalCounter`] per worker, each on its own cache line, for state shared by all the
/// workers running one program (a `count` stage installed at `pre` on every worker).
pub struct PerWorker {
    cells: Box<[CachePadded<LocalCounter>]>,
}

impl Default for PerWorker {
    fn default() -> Self {
        Self::new()
    }
}

impl PerWorker {
    pub fn new() -> Self {
        Self { cells: (0..MAX_WORKERS).map(|_| CachePadded::new(LocalCounter::new())).collect() }
    }

    /// Add on behalf of `worker`; each worker index must have a single writer.
    #[inline(always)]
    pub fn add(&self, worker: usize, v: u64) {
        if let Some(c) = self.cells.get(worker) {
            c.add(v);
        }
    }

    pub fn get(&self, worker: usize) -> u64 {
        self.cells.get(worker).map_or(0, |c| c.get())
    }

    pub fn sum(&self) -> u64 {
        self.cells.iter().map(|c| c.get()).sum()
    }
}

impl core::fmt::Debug for PerWorker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PerWorker({})", self.sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_worker_sums_and_ignores_out_of_range() {
        let c = PerWorker::new();
        c.add(0, 2);
        c.add(3, 5);
        c.add(MAX_WORKERS + 1, 100);
        assert_eq!(c.sum(), 7);
        assert_eq!(c.get(3), 5);
    }
}
