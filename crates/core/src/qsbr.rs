//! Quiescent-state-based reclamation (QSBR), the RCU flavour that suits run-to-completion
//! workers: a worker announces a quiescent state between batches (one load and one store on its
//! own cache line), and a writer that unpublished an object frees it once every online worker has
//! announced a quiescent state since. Readers never wait, never take a lock, and never execute a
//! read-modify-write.
//!
//! A worker that stops polling for a while (idle sleep, shutdown) goes *offline*; writers do not
//! wait for offline workers.

use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A quiescent state never announced: the reader is offline.
const OFFLINE: u64 = 0;

/// Per-reader state, written by its reader, read by writers.
struct ReaderState {
    seen: CachePadded<AtomicU64>,
    name: String,
}

struct Shared {
    epoch: CachePadded<AtomicU64>,
    /// Highest epoch known to be complete (every reader passed it); lets deferred frees skip
    /// waiting.
    completed: AtomicU64,
    readers: Mutex<Vec<Arc<ReaderState>>>,
    /// Objects whose grace period timed out, freed by a later successful grace period.
    deferred: Mutex<Vec<(u64, Box<dyn Send>)>>,
}

/// The reclamation domain: one per data plane. Cheap to clone.
#[derive(Clone)]
pub struct Qsbr {
    shared: Arc<Shared>,
}

thread_local! {
    /// Set while this thread holds an online `Reader`; a grace period waited for from such a
    /// thread would wait for itself.
    static ONLINE_READERS: Cell<u32> = const { Cell::new(0) };
}

/// Why waiting for a grace period did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraceError {
    #[error("grace period not reached within {waited_ms} ms; workers not quiescent: {stuck}")]
    Timeout { waited_ms: u64, stuck: String },
    #[error("a grace period cannot be waited for from a thread that is itself an online reader")]
    CalledFromReader,
}

impl Default for Qsbr {
    fn default() -> Self {
        Self::new()
    }
}

impl Qsbr {
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Shared {
                epoch: CachePadded::new(AtomicU64::new(1)),
                completed: AtomicU64::new(0),
                readers: Mutex::new(Vec::new()),
                deferred: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Register a reader (a worker). It starts online.
    pub fn register(&self, name: impl Into<String>) -> Reader {
        let state = Arc::new(ReaderState {
            seen: CachePadded::new(AtomicU64::new(OFFLINE)),
            name: name.into(),
        });
        self.shared.readers.lock().unwrap_or_else(|e| e.into_inner()).push(state.clone());
        OfflineReader { state, shared: self.shared.clone() }.online()
    }

    /// Start a new epoch; objects unpublished before this call may be freed once
    /// `wait_for(returned epoch)` succeeds.
    pub fn advance(&self) -> u64 {
        self.shared.epoch.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Wait until every online reader has announced a quiescent state at `epoch` or later.
    ///
    /// Spins briefly, then sleeps in short steps. Measured on 2 cores with busy-polling
    /// workers (`hotplane bench swap`): `sched_yield` hands the core to the worker for a whole
    /// scheduler slice (waits of ~2 ms), and a timer slack below the default makes each wakeup
    /// preempt the very worker being waited for (waits of several ms); plain short sleeps with
    /// the default slack give ~70 us.
    pub fn wait_for(&self, epoch: u64, timeout: Duration) -> Result<(), GraceError> {
        if self.shared.completed.load(Ordering::Acquire) >= epoch {
            return Ok(());
        }
        if ONLINE_READERS.with(|c| c.get()) > 0 {
            return Err(GraceError::CalledFromReader);
        }
        let readers: Vec<Arc<ReaderState>> =
            self.shared.readers.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let start = Instant::now();
        let mut rounds = 0u32;
        for r in &readers {
            loop {
                let seen = r.seen.load(Ordering::SeqCst);
                if seen == OFFLINE || seen >= epoch {
                    break;
                }
                rounds += 1;
                if rounds < 64 {
                    std::hint::spin_loop();
                } else {
                    if start.elapsed() > timeout {
                        let stuck = readers
                            .iter()
                            .filter(|r| {
                                let s = r.seen.load(Ordering::SeqCst);
                                s != OFFLINE && s < epoch
                            })
                            .map(|r| r.name.clone())
                            .collect::<Vec<_>>()
                            .join(", ");
                        return Err(GraceError::Timeout {
                            waited_ms: start.elapsed().as_millis() as u64,
                            stuck,
                        });
                    }
                    std::thread::sleep(Duration::from_micros(5));
                }
            }
        }
        self.shared.completed.fetch_max(epoch, Ordering::AcqRel);
        self.free_deferred(epoch);
        Ok(())
    }

    /// Whether a grace period covering `epoch` has completed, without waiting: one pass over the
    /// readers. Lets a control thread reclaim lazily from its maintenance loop.
    pub fn poll(&self, epoch: u64) -> bool {
        if self.shared.completed.load(Ordering::Acquire) >= epoch {
            return true;
        }
        let readers = self.shared.readers.lock().unwrap_or_else(|e| e.into_inner());
        let done = readers.iter().all(|r| {
            let seen = r.seen.load(Ordering::SeqCst);
            seen == OFFLINE || seen >= epoch
        });
        drop(readers);
        if done {
            self.shared.completed.fetch_max(epoch, Ordering::AcqRel);
        }
        done
    }

    /// A full grace period: advance the epoch and wait for it.
    pub fn synchronize(&self, timeout: Duration) -> Result<(), GraceError> {
        let e = self.advance();
        self.wait_for(e, timeout)
    }

    /// Keep `obj` until a grace period covering `epoch` completes, then drop it.
    pub(crate) fn defer(&self, epoch: u64, obj: Box<dyn Send>) {
        self.shared.deferred.lock().unwrap_or_else(|e| e.into_inner()).push((epoch, obj));
    }

    fn free_deferred(&self, completed: u64) {
        let ready: Vec<Box<dyn Send>> = {
            let mut d = self.shared.deferred.lock().unwrap_or_else(|e| e.into_inner());
            if d.is_empty() {
                return;
            }
            let (ready, keep): (Vec<_>, Vec<_>) = d.drain(..).partition(|(e, _)| *e <= completed);
            *d = keep;
            ready.into_iter().map(|(_, o)| o).collect()
        };
        drop(ready);
    }

    /// Objects waiting for a grace period that timed out.
    pub fn deferred_count(&self) -> usize {
        self.shared.deferred.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Number of registered readers (online or not).
    pub fn readers(&self) -> usize {
        self.shared.readers.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// An online reader (one per worker thread). Between `quiescent()` calls it may hold references
/// obtained through a [`Guard`].
pub struct Reader {
    state: Arc<ReaderState>,
    shared: Arc<Shared>,
    /// Readers are per-thread: not Sync, and moving an online reader would break the
    /// thread-local self-wait check.
    _not_send: PhantomData<*const ()>,
}

impl Reader {
    /// Announce a quiescent state: this thread holds no reference obtained before this call.
    /// Requires `&mut self`, so no `Guard` (and no reference loaded through one) can be alive.
    #[inline(always)]
    pub fn quiescent(&mut self) {
        let e = self.shared.epoch.load(Ordering::Acquire);
        // Release: every use of a reference loaded before this point happens-before a writer
        // that observes this store frees the object.
        self.state.seen.store(e, Ordering::Release);
    }

    /// Access published objects until the guard is dropped.
    #[inline(always)]
    pub fn guard(&self) -> Guard<'_> {
        Guard { _reader: PhantomData }
    }

    /// Stop being waited for (idle sleep, shutdown).
    pub fn offline(self) -> OfflineReader {
        self.state.seen.store(OFFLINE, Ordering::SeqCst);
        ONLINE_READERS.with(|c| c.set(c.get().saturating_sub(1)));
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; we move its two fields out exactly once.
        let (state, shared) =
            unsafe { (core::ptr::read(&this.state), core::ptr::read(&this.shared)) };
        OfflineReader { state, shared }
    }

    pub fn name(&self) -> &str {
        &self.state.name
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.state.seen.store(OFFLINE, Ordering::SeqCst);
        ONLINE_READERS.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// A registered reader that writers do not wait for.
pub struct OfflineReader {
    state: Arc<ReaderState>,
    shared: Arc<Shared>,
}

impl OfflineReader {
    pub fn online(self) -> Reader {
        let e = self.shared.epoch.load(Ordering::SeqCst);
        // SeqCst store then (in the caller) SeqCst-ordered pointer loads: a writer that read
        // OFFLINE here must have unpublished before this store, so we will see the new pointer.
        self.state.seen.store(e, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        ONLINE_READERS.with(|c| c.set(c.get() + 1));
        Reader { state: self.state, shared: self.shared, _not_send: PhantomData }
    }
}

/// Proof that the current thread is an online reader between two quiescent states. References
/// loaded from a `Slot` through it cannot outlive it.
pub struct Guard<'r> {
    _reader: PhantomData<&'r Reader>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn grace_waits_for_online_reader_only() {
        let q = Qsbr::new();
        let stop = Arc::new(AtomicBool::new(false));
        let passed = Arc::new(AtomicU64::new(0));
        let (q2, stop2, passed2) = (q.clone(), stop.clone(), passed.clone());
        let t = std::thread::spawn(move || {
            let mut r = q2.register("w0");
            while !stop2.load(Ordering::Relaxed) {
                r.quiescent();
                passed2.fetch_add(1, Ordering::Relaxed);
            }
        });
        while passed.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        q.synchronize(Duration::from_secs(10)).unwrap();
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
        // The reader went offline when dropped: nothing to wait for.
        q.synchronize(Duration::from_millis(1)).unwrap();
    }

    #[test]
    fn stuck_reader_times_out_with_its_name() {
        let q = Qsbr::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let (q2, done) = (q.clone(), Arc::new(AtomicBool::new(false)));
        let done2 = done.clone();
        let t = std::thread::spawn(move || {
            let _r = q2.register("stuck-worker");
            tx.send(()).unwrap();
            while !done2.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
        });
        rx.recv().unwrap();
        let err = q.synchronize(Duration::from_millis(20)).unwrap_err();
        assert!(matches!(err, GraceError::Timeout { ref stuck, .. } if stuck == "stuck-worker"));
        done.store(true, Ordering::Relaxed);
        t.join().unwrap();
    }

    #[test]
    fn reader_thread_cannot_wait_for_itself() {
        let q = Qsbr::new();
        let r = q.register("self");
        assert_eq!(q.synchronize(Duration::from_millis(1)), Err(GraceError::CalledFromReader));
        let off = r.offline();
        q.synchronize(Duration::from_millis(1)).unwrap();
        drop(off.online());
    }
}
