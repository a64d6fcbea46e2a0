//! A P4 program as a pipeline stage: each worker runs its own [`V1Switch`] over the shared
//! compiled pipeline and tables. A packet's `egress_spec` becomes its output port index.
//!
//! The program's hotplane externs are wired here: `hotplane_ebpf("slot")` instances call the
//! code in that extern slot of the worker, `hotplane_flow_function()` the packet's flow function,
//! and `hotplane_load_from_packet()` punts the packet to the control plane as an update. Calls
//! go through [`Stage::run_one`], the calling convention between kinds, on the buffer the
//! extern assembled: whatever kind of program is in the slot, nothing is copied and the P4
//! stage never needs to know which kind it is.

use crate::chain::ParserFold;
use crate::exec::{Engine, Host, Pipeline};
use crate::ir::{self, InstanceKind};
use crate::v1model::{Output, Replication, V1Switch};
use hotplane_core::metrics::LocalCounter;
use hotplane_core::shape::PacketGuard;
use hotplane_core::{
    Batch, ExternSlots, FlowTable, Guard, KindError, Mask, Meta, Packet, Program, Qsbr, Replica,
    Slot, Stage, Verdict, WorkerCx, MAX_WORKERS,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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
        externs: &ExternSlots,
        flows: &[Arc<FlowTable>],
    ) -> Result<Self, KindError> {
        let slots = program
            .instances
            .iter()
            .map(|i| match &i.kind {
                InstanceKind::ExternSlot { slot } => match externs.get(slot) {
                    Some(s) => Ok(Some(s.clone())),
                    None => Err(KindError::Invalid(format!(
                        "{} uses extern slot `{slot}`; declare it in [pipeline.externs] (there {})",
                        i.name,
                        match externs.len() {
                            0 => "are none".to_string(),
                            _ => format!(
                                "are {}",
                                externs.keys().cloned().collect::<Vec<_>>().join(", ")
                            ),
                        }
                    ))),
                },
                _ => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        Ok(ExternWiring { slots, flows: flows.to_vec() })
    }
}

/// The program with its parser folded to what the stage before it passes ([`crate::chain`]):
/// packets its guard admits run it, the others the original. It shares every table, register
/// and counter with the original.
pub struct P4Variant {
    pub pipeline: Arc<Pipeline>,
    pub guard: PacketGuard,
    pub fold: ParserFold,
    /// The program before it, whose guarantee it was folded to.
    pub upstream: String,
}

/// Per-worker guard outcomes, on a cache line of their own.
#[derive(Debug, Default)]
#[repr(align(64))]
struct GuardCounts([LocalCounter; 2]);

/// Where the kind publishes a stage's [`P4Variant`] (made on first use, on the control thread).
pub struct ChainSlot {
    slot: Slot<Option<Arc<P4Variant>>>,
    counts: Box<[GuardCounts]>,
}

impl ChainSlot {
    pub fn slot(&self) -> &Slot<Option<Arc<P4Variant>>> {
        &self.slot
    }

    /// Packets the guard admitted and refused, over all workers.
    pub fn guard_counts(&self) -> (u64, u64) {
        let sum = |k: usize| self.counts.iter().map(|c| c.0[k].get()).sum();
        (sum(0), sum(1))
    }
}

/// Copies beyond the first one (multicast, clones) one batch may send; more are dropped and
/// counted (`copies_dropped` in the P4 kind's stats), so that one batch cannot take every
/// buffer of the worker. A full batch multicast to 128 ports fits.
pub const MAX_REPLICAS: usize = 4096;

pub struct P4Stage {
    name: String,
    pipeline: Arc<Pipeline>,
    /// The packet replication engine's sessions and groups, as the workers read them (one
    /// load per batch); P4Runtime changes them while packets flow.
    replication: Slot<Replication>,
    /// The same, for the control plane (which holds no QSBR guard); the lock also makes
    /// changes one at a time.
    replication_ctl: Mutex<Replication>,
    wiring: ExternWiring,
    /// Per worker: only worker `w` locks slot `w`, so the lock is never contended; it makes
    /// the per-worker state safe to reach through `&self`.
    workers: Box<[Mutex<Option<Worker>>]>,
    /// Copies beyond [`MAX_REPLICAS`] in one batch, dropped.
    pub extra_copies_dropped: AtomicU64,
    pub busy: AtomicU64,
    chain: OnceLock<ChainSlot>,
    /// `hotplane trace`: the program on closures, sharing this one's tables and externs, on
    /// which traced packets run (native code never records its table applies, so it costs
    /// nothing when nothing is traced). Made by the control thread when a trace starts.
    traced: OnceLock<Result<Arc<Pipeline>, String>>,
}

struct Worker {
    switch: V1Switch,
    /// The switch running `traced`, made the first time this worker traces a packet.
    tracer: Option<V1Switch>,
    out: Vec<Output>,
    /// The switch running the published variant's pipeline (which it keeps alive, so the
    /// identity test below cannot be fooled by a reused address).
    fast: Option<V1Switch>,
}

impl P4Stage {
    pub fn new(
        name: String,
        pipeline: Arc<Pipeline>,
        replication: Replication,
        wiring: ExternWiring,
        qsbr: &Qsbr,
    ) -> Self {
        P4Stage {
            name,
            pipeline,
            replication: Slot::new(qsbr, replication.clone()),
            replication_ctl: Mutex::new(replication),
            wiring,
            workers: (0..MAX_WORKERS).map(|_| Mutex::new(None)).collect(),
            extra_copies_dropped: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            chain: OnceLock::new(),
            traced: OnceLock::new(),
        }
    }

    /// The stage's variant slot, made on first use (control thread).
    pub fn chain_slot(&self, qsbr: &Qsbr) -> &ChainSlot {
        self.chain.get_or_init(|| ChainSlot {
            slot: Slot::new(qsbr, None),
            counts: (0..MAX_WORKERS).map(|_| GuardCounts::default()).collect(),
        })
    }

    /// The variant slot, if one was ever made.
    pub fn chain(&self) -> Option<&ChainSlot> {
        self.chain.get()
    }

    pub fn pipeline(&self) -> &Arc<Pipeline> {
        &self.pipeline
    }

    /// The replication engine's configuration now.
    pub fn replication(&self) -> Replication {
        self.replication_ctl.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Make `replication` the replication engine's configuration (control thread; returns once
    /// no worker uses the old one). Packets in flight meanwhile see the old or the new one.
    pub fn set_replication(
        &self,
        replication: Replication,
    ) -> Result<(), hotplane_core::qsbr::GraceError> {
        let mut ctl = self.replication_ctl.lock().unwrap_or_else(|e| e.into_inner());
        // The control side first: on a grace-period timeout the new one is live all the same.
        *ctl = replication.clone();
        self.replication.replace(replication)?;
        Ok(())
    }

    /// Read the replication engine's configuration and publish the one `f` answers, if any,
    /// with no other change in between (control thread; the lock orders it against
    /// [`P4Stage::set_replication`]).
    pub fn update_replication<T>(
        &self,
        f: impl FnOnce(&Replication) -> (T, Option<Replication>),
    ) -> (T, Result<(), hotplane_core::qsbr::GraceError>) {
        let mut ctl = self.replication_ctl.lock().unwrap_or_else(|e| e.into_inner());
        let (out, next) = f(&ctl);
        let Some(next) = next else { return (out, Ok(())) };
        *ctl = next.clone();
        (out, self.replication.replace(next).map(|_| ()))
    }

    fn new_worker(&self, worker: usize) -> Worker {
        Worker {
            switch: self.new_switch(worker, &self.pipeline),
            tracer: None,
            out: Vec::new(),
            fast: None,
        }
    }

    /// A switch running `pipeline` with this stage's externs wired for `worker`.
    fn new_switch(&self, worker: usize, pipeline: &Arc<Pipeline>) -> V1Switch {
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
        };
        V1Switch::with_host(Arc::clone(pipeline), Box::new(host)).flow_ran_flag(flow_ran)
    }

    /// What leaves for a packet: the first copy takes the packet's place; the worker sends the
    /// rest (multicast and clones) after the batch, up to [`MAX_REPLICAS`] per batch (beyond
    /// that they are counted and dropped).
    fn emit(&self, pkt: &mut Packet, out: &mut Vec<Output>, replicas: &mut Vec<Replica>) {
        let mut outs = out.drain(..);
        match outs.next() {
            Some(o) if pkt.set_frame(&o.data).is_ok() => pkt.meta.out_port = o.port as u16,
            _ => pkt.meta.verdict = Verdict::Drop,
        }
        for o in outs {
            if replicas.len() >= MAX_REPLICAS {
                self.extra_copies_dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            replicas.push(Replica { port: o.port as u16, data: o.data });
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

    fn prepare_trace(&self) {
        self.traced.get_or_init(|| {
            if self.pipeline.engine() == Engine::Closures {
                return Ok(Arc::clone(&self.pipeline));
            }
            let program = (*self.pipeline.program).clone();
            Pipeline::with_engine(program, self.pipeline.objects.share(), Engine::Closures)
                .map(Arc::new)
                .map_err(|e| e.to_string())
        });
    }

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let Some(slot) = self.workers.get(cx.worker) else { return };
        let Ok(mut w) = slot.try_lock() else {
            // Unreachable while workers are distinct threads; never wait on the fast path.
            self.busy.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // Copies beyond the batch's budget are never made (not made, then dropped).
        let worker = cx.worker;
        let state = w.get_or_insert_with(|| self.new_worker(worker));
        state.switch.copy_budget = MAX_REPLICAS;
        if let Some(f) = state.fast.as_mut() {
            f.copy_budget = MAX_REPLICAS;
        }
        if cx.trace.0 & sel.0 != 0 {
            return self.run_traced(&mut w, batch, sel, cx);
        }
        self.run_on(&mut w, batch, sel, cx);
    }
}

impl P4Stage {
    /// `hotplane trace` follows some packets of this batch: run the batch one packet at a
    /// time, in order, the traced ones on the closures twin that records their table applies.
    #[cold]
    fn run_traced(
        &self,
        w: &mut Option<Worker>,
        batch: &mut Batch,
        sel: Mask,
        cx: &mut WorkerCx<'_>,
    ) {
        for i in sel {
            let twin = match self.traced.get() {
                _ if !cx.trace.contains(i) => None,
                Some(Ok(p)) => Some(p),
                Some(Err(e)) => {
                    cx.notes.push((i, format!("not traced: {e}")));
                    None
                }
                None => {
                    cx.notes.push((i, "not traced (installed after the trace started)".into()));
                    None
                }
            };
            let Some(twin) = twin else {
                self.run_on(w, batch, Mask::single(i), cx);
                continue;
            };
            let worker = cx.worker;
            let state = w.get_or_insert_with(|| self.new_worker(worker));
            let Worker { tracer, out, switch, .. } = state;
            if tracer.as_ref().is_none_or(|sw| !Arc::ptr_eq(&sw.pipeline, twin)) {
                *tracer = Some(self.new_switch(worker, twin));
            }
            let Some(sw) = tracer.as_mut() else { continue };
            // The twin spends the batch's budget with the switch it stands in for.
            sw.copy_budget = switch.copy_budget;
            sw.set_tracing(true);
            let guard = cx.guard;
            let pre = &self.replication.load(guard).value;
            self.run_switch(sw, out, batch, Mask::single(i), pre, cx);
            switch.copy_budget = sw.copy_budget;
            let events = sw.take_trace();
            sw.set_tracing(false);
            if events.is_empty() {
                cx.notes.push((i, "no table applied".into()));
            }
            cx.notes.extend(events.iter().map(|e| (i, e.describe())));
        }
    }

    /// Run the packets `sel` selects on `switch`, the copies they make going to the worker.
    #[inline(always)]
    fn run_switch(
        &self,
        switch: &mut V1Switch,
        out: &mut Vec<Output>,
        batch: &mut Batch,
        sel: Mask,
        pre: &Replication,
        cx: &mut WorkerCx<'_>,
    ) {
        let replicas = &mut cx.replicas;
        let flows_ran =
            switch.process_batch(batch, sel, pre, cx.guard, cx.now_ns, out, |_, p, o| {
                self.emit(p, o, replicas)
            });
        cx.flows_done = Mask(cx.flows_done.0 | flows_ran.0);
    }

    /// Run the packets `sel` selects on this worker's switches.
    #[inline(always)]
    fn run_on(&self, w: &mut Option<Worker>, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let worker = cx.worker;
        let Worker { switch, out, fast, .. } = w.get_or_insert_with(|| self.new_worker(worker));
        let (guard, now) = (cx.guard, cx.now_ns);
        let pre = &self.replication.load(guard).value;
        let chain = self.chain.get();
        let variant = chain.and_then(|c| c.slot.load(guard).value.as_ref());
        let Some((v, chain)) = variant.zip(chain) else {
            self.run_switch(switch, out, batch, sel, pre, cx);
            return;
        };
        if fast.as_ref().is_none_or(|f| !Arc::ptr_eq(&f.pipeline, &v.pipeline)) {
            let mut sw = self.new_switch(worker, &v.pipeline);
            sw.copy_budget = MAX_REPLICAS;
            *fast = Some(sw);
        }
        let Some(fast) = fast.as_mut() else { return };
        let replicas = &mut cx.replicas;
        let mut admitted = 0u64;
        for i in sel {
            if v.guard.admits(batch.as_mut_slice()[i].data()) {
                admitted |= 1 << i;
            }
        }
        let hits = u64::from(admitted.count_ones());
        if let Some(c) = chain.counts.get(worker) {
            c.0[0].add(hits);
            c.0[1].add(u64::from(sel.0.count_ones()) - hits);
        }
        // Packets run in batch order, each run of consecutive packets with the same answer on
        // one switch: state the program keeps (registers, counters) sees them in order.
        let mut flows_ran = 0u64;
        let mut rest = sel.0;
        while rest != 0 {
            let first = rest.trailing_zeros();
            let admit = admitted >> first & 1 == 1;
            // The run: from `first` while the answer stays the same.
            let same = if admit { admitted } else { !admitted };
            let stop = (!same >> first).trailing_zeros().min(64 - first);
            let span =
                if first + stop >= 64 { !0u64 << first } else { ((1u64 << stop) - 1) << first };
            let run = Mask(rest & span);
            rest &= !span;
            let sw = if admit { &mut *fast } else { &mut *switch };
            let ran = sw.process_batch(batch, run, pre, guard, now, out, |_, p, o| {
                self.emit(p, o, replicas)
            });
            flows_ran |= ran.0;
        }
        // The flow step after this stage must not run those packets' functions a second time.
        cx.flows_done = Mask(cx.flows_done.0 | flows_ran);
    }
}

/// One worker's side of the program's hotplane externs.
struct WorkerHost {
    worker: usize,
    /// Raised when a packet's flow function ran; the switch lowers it as it records the packet.
    flow_ran: Arc<AtomicBool>,
    /// By instance index: this worker's extern slot.
    slots: Vec<Option<Arc<Slot<Program>>>>,
    flows: Option<Arc<FlowTable>>,
}

impl Host for WorkerHost {
    fn call_slot(
        &mut self,
        instance: u32,
        data: &mut [u8],
        guard: &Guard<'_>,
        now_ns: u64,
    ) -> Option<u64> {
        let slot = self.slots.get(instance as usize)?.as_ref()?;
        let loaded = slot.load(guard);
        let stage = loaded.value.as_ref()?;
        let mut meta = Meta::default();
        hotplane_core::flow::classify(data, &mut meta);
        let mut cx = WorkerCx::new(self.worker, now_ns, guard);
        Some(stage.run_one(data, &mut meta, &mut cx))
    }

    fn call_flow(
        &mut self,
        frame: &mut [u8],
        in_port: u32,
        guard: &Guard<'_>,
        now_ns: u64,
    ) -> Option<u64> {
        let flows = self.flows.as_ref()?;
        let map = flows.slot().load(guard);
        let mut meta = Meta { in_port: in_port as u16, ..Default::default() };
        let key = hotplane_core::flow::classify(frame, &mut meta);
        let function = map.value.lookup(&key)?;
        function.record(1);
        self.flow_ran.store(true, Ordering::Relaxed);
        let mut cx = WorkerCx::new(self.worker, now_ns, guard);
        Some(function.stage.run_one(frame, &mut meta, &mut cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Engine;
    use hotplane_core::native::DropAll;
    use hotplane_core::xdp::XDP_TX;
    use hotplane_core::{FlowChange, FlowSelector, Packet, Pool, PoolConfig, Qsbr};

    /// Asks the flow function of every IPv4 packet; port 1 if it says drop, 2 if not (or if
    /// the flow has none), 3 for packets that are not IPv4 (never asked). With `-DSLOT`, every
    /// packet's Ethernet header first goes to the program in extern slot `tag`: port 4 if that
    /// answers XDP_TX.
    const PROGRAM: &str = r#"
#include <core.p4>
#include <v1model.p4>
#include <hotplane.p4>
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata { }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
#ifdef SLOT
    hotplane_ebpf("tag") tagger;
#endif
    apply {
        sm.egress_spec = 3;
        if (hdr.ipv4.isValid()) {
            if (hotplane_flow_function() == HOTPLANE_XDP_DROP) {
                sm.egress_spec = 1;
            } else {
                sm.egress_spec = 2;
            }
        }
#ifdef SLOT
        if (tagger.call(hdr.ethernet) == HOTPLANE_XDP_TX) {
            sm.egress_spec = 4;
        }
#endif
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"#;

    /// An Ethernet frame with an IPv4/UDP packet to `dport`, or an ARP frame for `None`.
    fn frame(dport: Option<u16>) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        let Some(dport) = dport else {
            f.extend(0x0806u16.to_be_bytes());
            f.extend([0u8; 28]);
            return f;
        };
        f.extend(0x0800u16.to_be_bytes());
        f.extend([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend(1234u16.to_be_bytes());
        f.extend(dport.to_be_bytes());
        f.extend([0, 8, 0, 0]);
        f
    }

    /// A stage of another kind, as an extern slot holds it: it marks the frame it is handed
    /// in place and answers XDP_TX. Only `run_one` does anything: were the P4 stage to call
    /// `run` (through a copy into a batch), nothing would be marked.
    struct Tagger;

    impl Stage for Tagger {
        fn name(&self) -> &str {
            "tagger"
        }
        fn run(&self, _: &mut Batch, _: Mask, _: &mut WorkerCx<'_>) {}
        fn run_one(&self, frame: &mut [u8], _: &mut Meta, _: &mut WorkerCx<'_>) -> u64 {
            if let Some(b) = frame.first_mut() {
                *b = 0x42;
            }
            XDP_TX
        }
    }

    struct Setup {
        qsbr: Qsbr,
        flows: Arc<FlowTable>,
        externs: ExternSlots,
    }

    impl Setup {
        /// One worker; flows to UDP port 5000 have a function that drops.
        fn new() -> Self {
            let qsbr = Qsbr::new();
            let flows = Arc::new(FlowTable::new(&qsbr));
            let sel: FlowSelector = "dport=5000".parse().unwrap();
            let _ = flows.publish(FlowChange::Set(sel, Arc::new(DropAll)), 1).unwrap();
            let mut externs = ExternSlots::new();
            let tagger: Program = Some(Arc::new(Tagger));
            externs.insert("tag".into(), vec![Arc::new(Slot::new(&qsbr, tagger))]);
            Setup { qsbr, flows, externs }
        }

        fn stage(&self, engine: Engine, defines: &[(&str, &str)]) -> P4Stage {
            let ir = crate::compile_source("flows.p4", PROGRAM, defines).unwrap();
            let objects = crate::exec::Objects::new(&ir, &self.qsbr).unwrap();
            let pipeline = Pipeline::with_engine(ir, objects, engine).unwrap();
            let wiring = ExternWiring::resolve(
                &pipeline.program,
                &self.externs,
                std::slice::from_ref(&self.flows),
            )
            .unwrap();
            let qsbr = &self.qsbr;
            P4Stage::new("flows".into(), Arc::new(pipeline), Replication::default(), wiring, qsbr)
        }

        /// Run `frames` as one batch; the output ports, the first bytes and `flows_done`.
        fn run(&self, stage: &P4Stage, frames: &[Vec<u8>]) -> (Vec<u16>, Vec<u8>, Mask) {
            let pool =
                Pool::new(PoolConfig { buffers: 16, buffer_size: 2048, headroom: 128 }).unwrap();
            let mut batch = Batch::new(frames.len());
            for f in frames {
                let mut p: Packet = pool.alloc().unwrap();
                p.set_frame(f).unwrap();
                batch.push(p).unwrap();
            }
            let reader = self.qsbr.register("test");
            let guard = reader.guard();
            let mut cx = WorkerCx::new(0, 1, &guard);
            stage.run(&mut batch, Mask::first(frames.len()), &mut cx);
            let ports = batch.iter().map(|p| p.meta.out_port).collect();
            let first = batch.iter().map(|p| p.data()[0]).collect();
            (ports, first, cx.flows_done)
        }
    }

    /// The flow step must skip exactly the packets whose flow function the P4 program ran:
    /// not a packet the program never asked about (ARP), not one whose flow has no function.
    #[test]
    fn a_flow_function_called_from_p4_marks_exactly_its_packet() {
        let setup = Setup::new();
        let frames = [frame(None), frame(Some(5000)), frame(Some(6000)), frame(Some(5000))];
        for engine in [Engine::Closures, Engine::Native] {
            let stage = setup.stage(engine, &[]);
            let (ports, _, done) = setup.run(&stage, &frames);
            assert_eq!(ports, [3, 1, 2, 1], "{engine:?}");
            assert_eq!(done, Mask(0b1010), "{engine:?}");
            // Alone, the middle packet is not marked: the flag did not leak from a batch.
            let (ports, _, done) = setup.run(&stage, &frames[2..3]);
            assert_eq!((ports, done), (vec![2], Mask::EMPTY), "{engine:?}");
        }
    }

    /// An extern slot's program runs through `run_one` on the header the P4 program hands it,
    /// and what it writes there comes back into the P4 program.
    #[test]
    fn an_extern_slot_runs_its_program_through_run_one_in_place() {
        let setup = Setup::new();
        for engine in [Engine::Closures, Engine::Native] {
            let stage = setup.stage(engine, &[("SLOT", "1")]);
            let (ports, first, done) = setup.run(&stage, &[frame(None), frame(Some(5000))]);
            assert_eq!(ports, [4, 4], "{engine:?}");
            assert_eq!(first, [0x42, 0x42], "{engine:?}");
            assert_eq!(done, Mask(0b10), "{engine:?}");
        }
    }
}
