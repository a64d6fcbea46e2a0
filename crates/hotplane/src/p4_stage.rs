//! A P4 program as a pipeline stage: each worker runs its own [`V1Switch`] over the shared
//! compiled pipeline and tables. A packet's `egress_spec` becomes its output port index.
//!
//! The program's hotplane externs are wired here: `hotplane_ebpf("slot")` instances call the
//! code in that extern slot of the worker, `hotplane_flow_function()` the packet's flow function,
//! and `hotplane_load_from_packet()` punts the packet to the control plane as an update.

use crate::stages::Program;
use hotplane_core::xdp::XDP_ABORTED;
use hotplane_core::{
    Batch, FlowTable, Guard, Mask, Meta, Packet, Pool, PoolConfig, Slot, Stage, Verdict, WorkerCx,
    MAX_WORKERS,
};
use hotplane_ebpf::stage::XdpStage;
use hotplane_p4::exec::{Host, Pipeline};
use hotplane_p4::ir::{self, InstanceKind};
use hotplane_p4::v1model::{Output, Replication, V1Switch};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What a program's hotplane externs are wired to.
#[derive(Clone, Default)]
pub struct ExternWiring {
    /// By instance index: for a `hotplane_ebpf` instance, its extern slot on every worker.
    slots: Vec<Option<Vec<Arc<Slot<Program>>>>>,
    /// Each worker's flow table.
    flows: Vec<Arc<FlowTable>>,
}

impl ExternWiring {
    /// Find the extern slot each `hotplane_ebpf("name")` instance of `program` names.
    pub fn resolve(
        program: &ir::Program,
        externs: &BTreeMap<String, Vec<Arc<Slot<Program>>>>,
        flows: &[Arc<FlowTable>],
    ) -> Result<Self, String> {
        let slots = program
            .instances
            .iter()
            .map(|i| match &i.kind {
                InstanceKind::ExternSlot { slot } => match externs.get(slot) {
                    Some(s) => Ok(Some(s.clone())),
                    None => Err(format!(
                        "{} uses extern slot `{slot}`; declare it in [pipeline.externs] (there {})",
                        i.name,
                        match externs.len() {
                            0 => "are none".to_string(),
                            _ => format!(
                                "are {}",
                                externs.keys().cloned().collect::<Vec<_>>().join(", ")
                            ),
                        }
                    )),
                },
                _ => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        Ok(ExternWiring { slots, flows: flows.to_vec() })
    }
}

pub struct P4Stage {
    name: String,
    pipeline: Arc<Pipeline>,
    replication: Replication,
    wiring: ExternWiring,
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
    pub fn new(
        name: String,
        pipeline: Arc<Pipeline>,
        replication: Replication,
        wiring: ExternWiring,
    ) -> Self {
        P4Stage {
            name,
            pipeline,
            replication,
            wiring,
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

    fn new_worker(&self, worker: usize) -> Worker {
        let flow_ran = Arc::new(AtomicBool::new(false));
        let host = WorkerHost {
            worker,
            flow_ran: Arc::clone(&flow_ran),
            slots: self
                .wiring
                .slots
                .iter()
                .map(|s| s.as_ref().and_then(|v| v.get(worker).cloned()))
                .collect(),
            flows: self.wiring.flows.get(worker).cloned(),
            // One buffer: an extern call runs one packet at a time.
            pool: Pool::new(PoolConfig { buffers: 2, buffer_size: 10240, headroom: 128 }).ok(),
            batch: Batch::new(1),
        };
        Worker {
            switch: V1Switch::with_host(Arc::clone(&self.pipeline), Box::new(host))
                .flow_ran_flag(flow_ran),
            out: Vec::new(),
        }
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
        let Worker { switch, out } = w.get_or_insert_with(|| self.new_worker(cx.worker));
        let (guard, now) = (cx.guard, cx.now_ns);
        switch.process_batch(batch, sel, &self.replication, guard, now, out, |_, pkt, out| {
            // This stage cannot allocate packets: the first copy takes the packet's place.
            let mut outs = out.drain(..);
            match outs.next() {
                Some(o) if pkt.set_frame(&o.data).is_ok() => pkt.meta.out_port = o.port as u16,
                _ => pkt.meta.verdict = Verdict::Drop,
            }
            let rest = outs.count() as u64;
            if rest > 0 {
                self.extra_copies_dropped.fetch_add(rest, Ordering::Relaxed);
            }
        });
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// One worker's side of the program's hotplane externs.
struct WorkerHost {
    worker: usize,
    flow_ran: Arc<AtomicBool>,
    /// By instance index: this worker's extern slot.
    slots: Vec<Option<Arc<Slot<Program>>>>,
    flows: Option<Arc<FlowTable>>,
    /// A buffer to run called code on (it expects a packet); `None` if it could not be made.
    pool: Option<Pool>,
    batch: Batch,
}

impl WorkerHost {
    /// Run `stage` on `data` as a packet with metadata `meta` (already classified); copy back
    /// what it changed. XDP programs answer r0, other stages their verdict as an XDP action.
    fn run(
        &mut self,
        stage: &dyn Stage,
        data: &mut [u8],
        meta: Meta,
        guard: &Guard<'_>,
        now_ns: u64,
    ) -> u64 {
        let Some(mut p) = self.pool.as_ref().and_then(Pool::alloc) else { return XDP_ABORTED };
        if p.set_frame(data).is_err() {
            return XDP_ABORTED;
        }
        p.meta = meta;
        let code = match stage.as_any().and_then(|a| a.downcast_ref::<XdpStage>()) {
            Some(xdp) => xdp.run_one(&mut p, self.worker),
            None => {
                if self.batch.push(p).is_err() {
                    return XDP_ABORTED;
                }
                let mut cx = WorkerCx { worker: self.worker, now_ns, guard };
                stage.run(&mut self.batch, Mask::single(0), &mut cx);
                let Some(back) = self.batch.drain().next() else { return XDP_ABORTED };
                p = back;
                hotplane_core::xdp::action_of(p.meta.verdict)
            }
        };
        copy_back(&p, data);
        code
    }
}

fn copy_back(p: &Packet, data: &mut [u8]) {
    let n = data.len().min(p.len());
    data[..n].copy_from_slice(&p.data()[..n]);
}

impl Host for WorkerHost {
    fn call_slot(
        &mut self,
        instance: u32,
        data: &mut [u8],
        guard: &Guard<'_>,
        now_ns: u64,
    ) -> Option<u64> {
        let slot = self.slots.get(instance as usize)?.clone()?;
        let loaded = slot.load(guard);
        let stage = loaded.value.as_ref()?;
        let mut meta = Meta::default();
        hotplane_core::flow::classify(data, &mut meta);
        Some(self.run(stage.as_ref(), data, meta, guard, now_ns))
    }

    fn call_flow(
        &mut self,
        frame: &mut [u8],
        in_port: u32,
        guard: &Guard<'_>,
        now_ns: u64,
    ) -> Option<u64> {
        let flows = self.flows.clone()?;
        let map = flows.slot().load(guard);
        let mut meta = Meta { in_port: in_port as u16, ..Default::default() };
        let key = hotplane_core::flow::classify(frame, &mut meta);
        let f = map.value.lookup(&key)?;
        let stage = Arc::clone(&f.stage);
        self.flow_ran.store(true, Ordering::Relaxed);
        Some(self.run(stage.as_ref(), frame, meta, guard, now_ns))
    }
}
