//! A P4 program as a pipeline stage: each worker runs its own [`V1Switch`] over the shared
//! compiled pipeline and tables. A packet's `egress_spec` becomes its output port index.

use hotplane_core::{Batch, Mask, Stage, Verdict, WorkerCx, MAX_WORKERS};
use hotplane_p4::exec::Pipeline;
use hotplane_p4::v1model::{InPlace, Output, Replication, V1Switch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub struct P4Stage {
    name: String,
    pipeline: Arc<Pipeline>,
    replication: Replication,
    /// Per worker: only worker `w` locks slot `w`, so the lock is never contended; it makes
    /// the per-worker state safe to reach through `&self`.
    workers: Box<[Mutex<Option<Worker>>]>,
    /// Copies beyond the first of a clone or multicast (this stage cannot allocate packets).
    pub extra_copies_dropped: AtomicU64,
    pub busy: AtomicU64,
}

struct Worker {
    switch: V1Switch,
    out: Vec<Output>,
}

impl P4Stage {
    pub fn new(name: String, pipeline: Arc<Pipeline>, replication: Replication) -> Self {
        P4Stage {
            name,
            pipeline,
            replication,
            workers: (0..MAX_WORKERS).map(|_| Mutex::new(None)).collect(),
            extra_copies_dropped: AtomicU64::new(0),
            busy: AtomicU64::new(0),
        }
    }

    pub fn pipeline(&self) -> &Arc<Pipeline> {
        &self.pipeline
    }

    pub fn replication(&self) -> &Replication {
        &self.replication
    }
}

impl Stage for P4Stage {
    fn name(&self) -> &str {
        &self.name
    }

    fn describe(&self) -> String {
        format!("p4 {} ({} tables)", self.name, self.pipeline.objects.tables.len())
    }

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let Some(slot) = self.workers.get(cx.worker) else { return };
        let Ok(mut w) = slot.try_lock() else {
            // Unreachable while workers are distinct threads; never wait on the fast path.
            self.busy.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let w = w.get_or_insert_with(|| Worker {
            switch: V1Switch::new(Arc::clone(&self.pipeline)),
            out: Vec::new(),
        });
        for i in sel.iter() {
            let Some(pkt) = batch.get_mut(i) else { continue };
            let port = pkt.meta.in_port as u32;
            let r = w.switch.process_in_place(
                pkt,
                port,
                &self.replication,
                cx.guard,
                cx.now_ns,
                &mut w.out,
            );
            match r {
                InPlace::Sent(port) => pkt.meta.out_port = port as u16,
                InPlace::Dropped => pkt.meta.verdict = Verdict::Drop,
                InPlace::Copies => {
                    let mut outs = w.out.drain(..);
                    match outs.next() {
                        Some(o) if pkt.set_frame(&o.data).is_ok() => {
                            pkt.meta.out_port = o.port as u16;
                        }
                        _ => pkt.meta.verdict = Verdict::Drop,
                    }
                    let rest = outs.count() as u64;
                    if rest > 0 {
                        self.extra_copies_dropped.fetch_add(rest, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
