//! `Slot<T>`: a hot-swappable program cell. Workers load it once per batch (one atomic load);
//! the control thread publishes a replacement and frees the old value after a grace period.

use crate::qsbr::{GraceError, Guard, Qsbr};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::time::Duration;

/// How long `replace` waits for workers before deferring the free and reporting it.
pub const DEFAULT_GRACE_TIMEOUT: Duration = Duration::from_secs(2);

/// A published value with the version it was published as.
#[derive(Debug)]
pub struct Versioned<T> {
    pub version: u64,
    pub value: T,
}

/// A hot-swappable cell. See the module docs.
pub struct Slot<T: Send + Sync + 'static> {
    current: AtomicPtr<Versioned<T>>,
    version: AtomicU64,
    qsbr: Qsbr,
}

impl<T: Send + Sync + 'static> Slot<T> {
    /// A slot holding `value` as version 1.
    pub fn new(qsbr: &Qsbr, value: T) -> Self {
        let b = Box::new(Versioned { version: 1, value });
        Self {
            current: AtomicPtr::new(Box::into_raw(b)),
            version: AtomicU64::new(1),
            qsbr: qsbr.clone(),
        }
    }

    /// The published value. One atomic load; valid until the reader's next quiescent state,
    /// which the guard's borrow of the reader enforces.
    #[inline(always)]
    pub fn load<'g>(&'g self, _guard: &'g Guard<'_>) -> &'g Versioned<T> {
        let p = self.current.load(Ordering::Acquire);
        // SAFETY: `current` always holds a pointer from Box::into_raw. An unpublished pointer
        // is freed only after a grace period, i.e. after every online reader announced a
        // quiescent state; the guard proves our reader has not done so since this load, and
        // `quiescent` needs `&mut Reader`, which cannot coexist with the guard's borrow.
        unsafe { &*p }
    }

    /// The version currently published (readable without a guard).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Publish `value` as the next version without waiting. The returned [`Retired`] frees
    /// the old value once a grace period has passed (waiting for it when dropped).
    pub fn publish(&self, value: T) -> (u64, Retired<T>) {
        let v = self.version.load(Ordering::Acquire) + 1;
        (v, self.publish_as(value, v))
    }

    /// Publish with an explicit version (to keep per-worker copies of a slot in step).
    pub fn publish_as(&self, value: T, version: u64) -> Retired<T> {
        let new = Box::into_raw(Box::new(Versioned { version, value }));
        let old = self.current.swap(new, Ordering::SeqCst);
        self.version.store(version, Ordering::Release);
        let epoch = self.qsbr.advance();
        // SAFETY: `old` came from Box::into_raw and is no longer reachable from the slot.
        Retired {
            old: Some(unsafe { NonNull::new_unchecked(old) }),
            epoch,
            qsbr: self.qsbr.clone(),
        }
    }

    /// Publish `value` and return once no worker can still be running the old one; the old value
    /// is dropped before returning. On a grace-period timeout the new value is live, the old one
    /// is freed later by a successful grace period, and the error says which workers were stuck.
    pub fn replace(&self, value: T) -> Result<u64, GraceError> {
        let (v, retired) = self.publish(value);
        retired.wait(DEFAULT_GRACE_TIMEOUT)?;
        Ok(v)
    }
}

impl<T: Send + Sync + 'static> Drop for Slot<T> {
    fn drop(&mut self) {
        let p = *self.current.get_mut();
        // SAFETY: from Box::into_raw; no reader can hold it since readers borrow the slot.
        drop(unsafe { Box::from_raw(p) });
    }
}

impl<T: Send + Sync + 'static> core::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Slot").field("version", &self.version()).finish()
    }
}

/// An unpublished value awaiting its grace period.
#[must_use = "dropping a Retired waits for the grace period; call wait() to see its outcome"]
pub struct Retired<T: Send + Sync + 'static> {
    old: Option<NonNull<Versioned<T>>>,
    epoch: u64,
    qsbr: Qsbr,
}

// SAFETY: Retired exclusively owns an unpublished Box<Versioned<T>>, and T: Send.
unsafe impl<T: Send + Sync + 'static> Send for Retired<T> {}

impl<T: Send + Sync + 'static> Retired<T> {
    /// The epoch whose completion makes the old value free-able.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Wait for the grace period and free the old value. If that fails, the value is handed to
    /// the domain's deferred list (freed by a later grace period) and the error returned.
    pub fn wait(mut self, timeout: Duration) -> Result<(), GraceError> {
        self.finish(timeout)
    }

    fn finish(&mut self, timeout: Duration) -> Result<(), GraceError> {
        let Some(old) = self.old.take() else {
            return Ok(());
        };
        // SAFETY: from Box::into_raw in publish_as; taken out of `self` exactly once.
        let boxed = unsafe { Box::from_raw(old.as_ptr()) };
        match self.qsbr.wait_for(self.epoch, timeout) {
            Ok(()) => {
                drop(boxed);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, "grace period not reached; deferring free of old program");
                self.qsbr.defer(self.epoch, boxed);
                Err(e)
            }
        }
    }
}

impl<T: Send + Sync + 'static> Drop for Retired<T> {
    fn drop(&mut self) {
        let _ = self.finish(DEFAULT_GRACE_TIMEOUT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    struct Tracked(Arc<AtomicU64>);
    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn old_value_is_freed_only_after_reader_moves_on() {
        let q = Qsbr::new();
        let drops = Arc::new(AtomicU64::new(0));
        let slot = Arc::new(Slot::new(&q, Tracked(drops.clone())));
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let release = Arc::new(AtomicBool::new(false));
        let (q2, s2, r2) = (q.clone(), slot.clone(), release.clone());
        let worker = std::thread::spawn(move || {
            let mut reader = q2.register("w");
            {
                let g = reader.guard();
                let v = s2.load(&g);
                assert_eq!(v.version, 1);
                entered_tx.send(()).unwrap();
                // Hold the old value while the writer replaces it.
                while !r2.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                assert_eq!(v.version, 1, "still readable: not freed under us");
            }
            reader.quiescent();
            let g = reader.guard();
            s2.load(&g).version
        });
        entered_rx.recv().unwrap();
        let (v, retired) = slot.publish(Tracked(drops.clone()));
        assert_eq!(v, 2);
        assert_eq!(slot.version(), 2);
        // The reader is inside its batch: the grace period cannot complete.
        assert!(q.wait_for(retired.epoch(), Duration::from_millis(30)).is_err());
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        release.store(true, Ordering::SeqCst);
        retired.wait(Duration::from_secs(10)).unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(worker.join().unwrap(), 2);
        drop(slot);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn timed_out_free_is_deferred_then_completed() {
        let q = Qsbr::new();
        let drops = Arc::new(AtomicU64::new(0));
        let slot = Slot::new(&q, Tracked(drops.clone()));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            let mut r = q2.register("slow");
            ready_tx.send(()).unwrap();
            rx.recv().unwrap();
            r.quiescent();
        });
        ready_rx.recv().unwrap();
        let (_, retired) = slot.publish(Tracked(drops.clone()));
        assert!(retired.wait(Duration::from_millis(10)).is_err());
        assert_eq!(q.deferred_count(), 1);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        tx.send(()).unwrap();
        t.join().unwrap();
        q.synchronize(Duration::from_secs(5)).unwrap();
        assert_eq!(q.deferred_count(), 0);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}
