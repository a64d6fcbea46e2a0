//! The v1model architecture (BMv2 `simple_switch` semantics) around a compiled [`Pipeline`]:
//! parser, checksum verification and ingress; then clone, resubmit, multicast or unicast;
//! egress, checksum update and deparser; then egress clone and recirculation.
//!
//! [`V1Switch::process`] handles every case with owned buffers (the STF runner, tests, and
//! packets that clone or recirculate). The data-plane stage uses the same blocks in place.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::exec::jit::Whole;
use crate::exec::{Ctx, Effects, Host, NoHost, PacketState, Pipeline, DROP_PORT};
use crate::ir::CloneKind;
use hotplane_core::batch::MaskIter;
use hotplane_core::{Batch, Guard, Mask, Packet, Verdict};
use std::sync::atomic::{AtomicBool, Ordering};

/// `standard_metadata.instance_type` values.
pub mod instance {
    pub const NORMAL: u32 = 0;
    pub const INGRESS_CLONE: u32 = 1;
    pub const EGRESS_CLONE: u32 = 2;
    pub const RECIRCULATED: u32 = 4;
    pub const REPLICATED: u32 = 5;
    pub const RESUBMITTED: u32 = 6;
}

/// Resubmissions, recirculations and clones one arriving packet may cause in all; beyond
/// this the copies are dropped and counted, so a program cannot loop forever.
pub const MAX_PASSES: usize = 64;

/// Multicast copies one arriving packet may make in all (a group may have up to 1024
/// replicas, as P4Runtime's engine allows); beyond this they are dropped and counted. They are
/// not passes: a copy goes through egress once, and cannot loop without a recirculation.
pub const MAX_MULTICAST_COPIES: usize = 1024;

/// The packet replication engine's configuration: mirroring sessions and multicast groups.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replication {
    /// Clone session -> egress port.
    pub mirror: BTreeMap<u32, u32>,
    /// Multicast group -> (replication id, egress port) copies, in order.
    pub groups: BTreeMap<u32, Vec<(u32, u32)>>,
}

/// A packet leaving the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub port: u32,
    pub data: Vec<u8>,
}

/// Counters of what the architecture did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchStats {
    pub received: u64,
    pub sent: u64,
    pub dropped: u64,
    pub cloned: u64,
    pub resubmitted: u64,
    pub recirculated: u64,
    pub replicated: u64,
    /// Copies dropped because one packet exceeded [`MAX_PASSES`], or a clone session or
    /// multicast group that does not exist.
    pub lost_copies: u64,
    pub assert_failures: u64,
    /// Packets handed to the control plane by `hotplane_load_from_packet()`.
    pub punted: u64,
}

/// Work left for one arriving packet.
enum Job {
    /// Parse and run ingress (a new, resubmitted or recirculated packet), with the metadata
    /// its field list kept.
    Ingress { data: Vec<u8>, port: u32, instance_type: u32, kept: Kept },
    /// An ingress clone: parse the original packet again, then egress.
    ParseToEgress { data: Vec<u8>, in_port: u32, port: u32, kept: Kept },
    /// A copy whose headers and metadata are already set: egress only.
    Egress {
        st: Box<PacketState>,
        data: Vec<u8>,
        payload: usize,
        port: u32,
        rid: u32,
        instance_type: u32,
    },
}

/// Metadata slots and their values that a resubmitted, recirculated or cloned packet keeps
/// (its preserved field list); empty for most.
type Kept = Vec<(usize, u128)>;

/// What running one packet in place ([`V1Switch::process_batch`]) did with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InPlace {
    /// Rewritten in place; send it out of this port.
    Sent(u32),
    Dropped,
    /// The packets leaving (none, one or several) are in `out`; the original is consumed.
    Copies,
    /// `hotplane_load_from_packet()`: hand the packet, as it arrived, to the control plane.
    Punted,
}

/// What processing one arriving packet shares: the replication configuration, the reader's
/// guard and the time, the work still queued, and where leaving packets go.
struct Run<'r, 'g> {
    pre: &'r Replication,
    guard: &'r Guard<'g>,
    now_ns: u64,
    jobs: VecDeque<Job>,
    out: &'r mut Vec<Output>,
    /// Multicast copies made so far (at most [`MAX_MULTICAST_COPIES`]).
    copies: usize,
}

/// One worker's view of a v1model switch running a pipeline.
pub struct V1Switch {
    pub pipeline: Arc<Pipeline>,
    st: PacketState,
    pub stats: SwitchStats,
    /// Multicast copies this switch may still make (the data plane sets it per batch, so that
    /// copies beyond the batch's budget are never made; unlimited by default).
    pub copy_budget: usize,
    /// What hotplane's externs call (extern slots, flow functions).
    host: Box<dyn Host + Send>,
    /// Raised by the host when a packet's flow function ran (see [`V1Switch::flow_ran_flag`]).
    flow_ran: Option<Arc<AtomicBool>>,
}

impl V1Switch {
    /// A switch whose externs find nothing installed (STF runs, benchmarks).
    pub fn new(pipeline: Arc<Pipeline>) -> Self {
        Self::with_host(pipeline, Box::new(NoHost))
    }

    /// Record the table applies of the packets that follow (`hotplane trace`), or stop.
    pub fn set_tracing(&mut self, on: bool) {
        self.st.trace = on.then(Vec::new);
    }

    /// The table applies recorded since tracing was set on (and since the last take).
    pub fn take_trace(&mut self) -> Vec<crate::exec::TableEvent> {
        self.st.trace.as_mut().map(std::mem::take).unwrap_or_default()
    }

    pub fn with_host(pipeline: Arc<Pipeline>, host: Box<dyn Host + Send>) -> Self {
        let st = pipeline.new_state();
        V1Switch {
            pipeline,
            st,
            stats: SwitchStats::default(),
            copy_budget: usize::MAX,
            host,
            flow_ran: None,
        }
    }

    /// A flag the host raises when it runs a packet's flow function: `process_batch` then
    /// counts the packet among those whose flow function ran (its answer) and lowers the flag.
    pub fn flow_ran_flag(mut self, flag: Arc<AtomicBool>) -> Self {
        self.flow_ran = Some(flag);
        self
    }

    /// Run one packet that arrived on `port`; what leaves is appended to `out`.
    pub fn process(
        &mut self,
        data: &[u8],
        port: u32,
        pre: &Replication,
        guard: &Guard<'_>,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) {
        self.stats.received += 1;
        let mut r = Run { pre, guard, now_ns, jobs: VecDeque::new(), out, copies: 0 };
        r.jobs.push_back(Job::Ingress {
            data: data.to_vec(),
            port,
            instance_type: instance::NORMAL,
            kept: Vec::new(),
        });
        self.drain(&mut r);
    }

    fn drain(&mut self, r: &mut Run<'_, '_>) {
        let mut passes = 0;
        while let Some(job) = r.jobs.pop_front() {
            let copy = matches!(job, Job::Egress { instance_type: instance::REPLICATED, .. });
            passes += usize::from(!copy);
            if passes > MAX_PASSES {
                self.stats.lost_copies += 1 + r.jobs.len() as u64;
                r.jobs.clear();
                break;
            }
            self.run_job(job, r);
        }
    }

    /// Run one packet in place, for a program without native code for whole packets (those
    /// run in [`V1Switch::run_whole`]): the common case (unicast or drop, no clone, resubmit,
    /// multicast or recirculation) rewrites `pkt` and allocates nothing. Otherwise the
    /// packets leaving are appended to `out` and the result is [`InPlace::Copies`].
    fn process_in_place(
        &mut self,
        pkt: &mut hotplane_core::Packet,
        port: u32,
        pre: &Replication,
        guard: &Guard<'_>,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) -> InPlace {
        self.stats.received += 1;
        // A plain borrow: cloning the Arc would cost two atomic operations per packet.
        let p = &*self.pipeline;
        p.reset(&mut self.st);
        let (payload, fx) = {
            let host = &mut *self.host;
            let mut c = ingress_ctx(
                p,
                &mut self.st,
                pkt.data(),
                port,
                instance::NORMAL,
                guard,
                now_ns,
                host,
            );
            p.front(&mut c);
            (c.payload, c.st.fx.take())
        };
        self.finish_in_place(pkt, port, payload, fx, pre, guard, now_ns, out)
    }

    /// The rest of [`V1Switch::process_in_place`] once ingress has run on the packet in
    /// `self.st`: punt, copies, drop, or egress and the deparser in place.
    #[allow(clippy::too_many_arguments)]
    fn finish_in_place(
        &mut self,
        pkt: &mut hotplane_core::Packet,
        port: u32,
        payload: usize,
        fx: Effects,
        pre: &Replication,
        guard: &Guard<'_>,
        now_ns: u64,
        out: &mut Vec<Output>,
    ) -> InPlace {
        let p = &*self.pipeline;
        let std = p.std;
        if fx.punt {
            self.stats.punted += 1;
            return InPlace::Punted;
        }
        let plain =
            fx.clone.is_none() && fx.resubmit.is_none() && self.st.slots[std.mcast_grp] == 0;
        if !plain {
            let data = pkt.data().to_vec();
            let mut r = Run { pre, guard, now_ns, jobs: VecDeque::new(), out, copies: 0 };
            self.after_ingress(&data, port, payload, fx, &mut r);
            self.drain(&mut r);
            return InPlace::Copies;
        }
        note(&mut self.stats, &fx);
        let spec = self.st.slots[std.egress_spec] as u32;
        if spec == DROP_PORT {
            self.stats.dropped += 1;
            return InPlace::Dropped;
        }
        let it = self.st.slots[std.instance_type] as u32;
        // An empty egress control can neither change the packet nor ask for anything.
        let fx = if p.egress_is_empty() {
            Effects::default()
        } else {
            let host = &mut *self.host;
            egress_control(p, &mut self.st, pkt.data(), payload, spec, 0, it, guard, now_ns, host)
        };
        if fx.clone.is_some() || fx.recirculate.is_some() {
            let data = pkt.data().to_vec();
            let mut r = Run { pre, guard, now_ns, jobs: VecDeque::new(), out, copies: 0 };
            self.after_egress(&data, payload, spec, fx, &mut r);
            self.drain(&mut r);
            return InPlace::Copies;
        }
        if self.st.slots[std.egress_spec] as u32 == DROP_PORT {
            self.stats.dropped += 1;
            return InPlace::Dropped;
        }
        {
            let mut c = Ctx {
                st: &mut self.st,
                pkt: pkt.data(),
                cursor: payload,
                payload,
                guard,
                now_ns,
                error: 0,
                host: &mut *self.host,
            };
            p.deparse(&mut c);
        }
        let headers = Headers::Out(&self.st.out);
        send_in_place(&mut self.stats, pkt, payload, headers, spec, fx.truncate)
    }

    /// Run the packets `sel` of `batch` in place, each as it would run alone, and record the
    /// outcome in the packet's metadata: a packet sent leaves by `meta.out_port`; one dropped
    /// or punted gets that verdict. A packet that became copies ([`InPlace::Copies`]) is left
    /// as it was and `copies(i, pkt, out)` gets it with the copies in `out`. A program with
    /// native code for whole packets runs them one after another in one frame, which spares
    /// each packet the frame's set-up.
    ///
    /// Answers the packets whose flow function a `hotplane_flow_function()` call ran (known
    /// only with a [`V1Switch::flow_ran_flag`]), so the caller's flow step can skip them.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn process_batch(
        &mut self,
        batch: &mut Batch,
        sel: Mask,
        pre: &Replication,
        guard: &Guard<'_>,
        now_ns: u64,
        out: &mut Vec<Output>,
        mut copies: impl FnMut(usize, &mut Packet, &mut Vec<Output>),
    ) -> Mask {
        let mut flows_ran = Mask::EMPTY;
        let mut todo = sel.iter();
        if self.pipeline.whole_code().is_some() {
            while let Some((i, payload)) =
                self.run_whole(batch, &mut todo, guard, now_ns, &mut flows_ran)
            {
                let Some(pkt) = batch.get_mut(i) else { continue };
                let fx = self.st.fx.take();
                let port = pkt.meta.in_port as u32;
                let r = self.finish_in_place(pkt, port, payload, fx, pre, guard, now_ns, out);
                if self.mark(pkt, i, r, &mut flows_ran) {
                    copies(i, pkt, out);
                }
            }
            return flows_ran;
        }
        for i in todo {
            let Some(pkt) = batch.get_mut(i) else { continue };
            let port = pkt.meta.in_port as u32;
            let r = self.process_in_place(pkt, port, pre, guard, now_ns, out);
            if self.mark(pkt, i, r, &mut flows_ran) {
                copies(i, pkt, out);
            }
        }
        flows_ran
    }

    /// Record `r` in the packet's metadata and packet `i` in `flows_ran` if its flow function
    /// ran (see [`V1Switch::process_batch`]); true for copies.
    #[inline(always)]
    fn mark(&self, pkt: &mut Packet, i: usize, r: InPlace, flows_ran: &mut Mask) -> bool {
        mark_packet(pkt, i, r, self.flow_ran.as_deref(), flows_ran)
    }

    /// Whole packets of `todo` in native code, one after another, until `todo` ends (`None`)
    /// or a packet is to be multicast: then its index and where its payload starts, with its
    /// state after ingress left in `self.st`.
    #[inline(always)]
    fn run_whole(
        &mut self,
        batch: &mut Batch,
        todo: &mut MaskIter,
        guard: &Guard<'_>,
        now_ns: u64,
        flows_ran: &mut Mask,
    ) -> Option<(usize, usize)> {
        let V1Switch { pipeline, st, stats, host, flow_ran, .. } = self;
        let p = &**pipeline;
        let code = p.whole_code()?;
        let std = p.std;
        let flow_ran = flow_ran.as_deref();
        let mut c =
            Ctx { st, pkt: &[], cursor: 0, payload: 0, guard, now_ns, error: 0, host: &mut **host };
        let mut run = code.begin(&mut c);
        for i in todo.by_ref() {
            let Some(pkt) = batch.get_mut(i) else { continue };
            stats.received += 1;
            let (len, in_port) = (pkt.len(), pkt.meta.in_port as u32);
            let (data, headroom) = pkt.head_ptr();
            // SAFETY: `head_ptr` gives the packet's first byte, with its `len` bytes and the
            // `headroom` bytes before it, which nothing else touches until `pkt` is used again.
            let whole = unsafe { run.packet(data, len, headroom, in_port) };
            let spec = run.slot(std.egress_spec) as u32;
            let r = match whole {
                Whole::Placed(n) => {
                    send_in_place(stats, pkt, run.payload(), Headers::Placed(n), spec, None)
                }
                Whole::Deparsed => {
                    send_in_place(stats, pkt, run.payload(), Headers::Out(run.out()), spec, None)
                }
                // Only a drop or a multicast stops a whole program after ingress.
                Whole::AfterIngress if run.slot(std.mcast_grp) == 0 => {
                    stats.dropped += 1;
                    InPlace::Dropped
                }
                Whole::AfterIngress => return Some((i, run.payload())),
            };
            // Never copies: those left the loop above.
            mark_packet(pkt, i, r, flow_ran, flows_ran);
        }
        None
    }

    fn run_job(&mut self, job: Job, r: &mut Run<'_, '_>) {
        let p = Arc::clone(&self.pipeline);
        match job {
            Job::Ingress { data, port, instance_type, kept } => {
                p.reset(&mut self.st);
                restore(&mut self.st, &kept);
                let host = &mut *self.host;
                let mut c = ingress_ctx(
                    &p,
                    &mut self.st,
                    &data,
                    port,
                    instance_type,
                    r.guard,
                    r.now_ns,
                    host,
                );
                // Whole-packet code zeroes the metadata itself: not for a packet that keeps some.
                let whole = p
                    .whole_code()
                    .filter(|_| kept.is_empty())
                    .map(|w| w.call(&mut c, port, instance_type));
                if whole.is_none() {
                    p.front(&mut c);
                }
                let payload = c.payload;
                let fx = self.st.fx.take();
                if whole == Some(Whole::Deparsed) {
                    note(&mut self.stats, &fx);
                    let packet = self.deparsed(&data, payload);
                    self.stats.sent += 1;
                    let port = self.st.slots[p.std.egress_spec] as u32;
                    r.out.push(Output { port, data: packet });
                    return;
                }
                self.after_ingress(&data, port, payload, fx, r);
            }
            Job::ParseToEgress { data, in_port, port, kept } => {
                p.reset(&mut self.st);
                let mut c = ingress_ctx(
                    &p,
                    &mut self.st,
                    &data,
                    in_port,
                    instance::INGRESS_CLONE,
                    r.guard,
                    r.now_ns,
                    &mut *self.host,
                );
                p.parse(&mut c);
                let payload = c.payload;
                // As BMv2: the clone's metadata is what its field list kept, whatever the
                // parser set.
                let (start, end) = p.program.meta_slots;
                self.st.slots[start as usize..end as usize].fill(0);
                restore(&mut self.st, &kept);
                self.egress(&data, payload, port, 0, instance::INGRESS_CLONE, r);
            }
            Job::Egress { st, data, payload, port, rid, instance_type } => {
                self.st = *st;
                self.egress(&data, payload, port, rid, instance_type, r);
            }
        }
    }

    /// What happens once ingress is over: ingress clone, resubmit, multicast, drop or unicast.
    fn after_ingress(
        &mut self,
        data: &[u8],
        port: u32,
        payload: usize,
        fx: Effects,
        r: &mut Run<'_, '_>,
    ) {
        let std = self.pipeline.std;
        note(&mut self.stats, &fx);
        if fx.punt {
            // Consumed: the data plane's stage hands it to the control plane.
            return;
        }
        let slot = |st: &PacketState, s: usize| st.slots[s] as u32;
        if let Some((CloneKind::I2E, session, keep)) = fx.clone {
            match r.pre.mirror.get(&session) {
                Some(&to) => {
                    self.stats.cloned += 1;
                    r.jobs.push_back(Job::ParseToEgress {
                        data: data.to_vec(),
                        in_port: port,
                        port: to,
                        kept: self.kept(keep),
                    });
                }
                None => self.stats.lost_copies += 1,
            }
        }
        if let Some(keep) = fx.resubmit {
            self.stats.resubmitted += 1;
            r.jobs.push_back(Job::Ingress {
                data: data.to_vec(),
                port,
                instance_type: instance::RESUBMITTED,
                kept: self.kept(keep),
            });
            return;
        }
        let group = slot(&self.st, std.mcast_grp);
        if group != 0 {
            match r.pre.groups.get(&group) {
                Some(copies) => {
                    // Within the budget of copies per arriving packet, counted before any
                    // state is cloned.
                    let room = (MAX_MULTICAST_COPIES.saturating_sub(r.copies))
                        .min(self.copy_budget)
                        .min(copies.len());
                    self.stats.lost_copies += (copies.len() - room) as u64;
                    r.copies += room;
                    self.copy_budget -= room;
                    for &(rid, to) in &copies[..room] {
                        self.stats.replicated += 1;
                        r.jobs.push_back(Job::Egress {
                            st: Box::new(self.st.clone()),
                            data: data.to_vec(),
                            payload,
                            port: to,
                            rid,
                            instance_type: instance::REPLICATED,
                        });
                    }
                }
                None => self.stats.dropped += 1,
            }
            return;
        }
        let spec = slot(&self.st, std.egress_spec);
        if spec == DROP_PORT {
            self.stats.dropped += 1;
            return;
        }
        let it = slot(&self.st, std.instance_type);
        self.egress(data, payload, spec, 0, it, r);
    }

    /// Egress processing of the packet in `self.st`, then deparse and send (or recirculate).
    #[allow(clippy::too_many_arguments)]
    fn egress(
        &mut self,
        data: &[u8],
        payload: usize,
        port: u32,
        rid: u32,
        instance_type: u32,
        r: &mut Run<'_, '_>,
    ) {
        let fx = egress_control(
            &self.pipeline,
            &mut self.st,
            data,
            payload,
            port,
            rid,
            instance_type,
            r.guard,
            r.now_ns,
            &mut *self.host,
        );
        self.after_egress(data, payload, port, fx, r);
    }

    /// Egress clone, drop, deparse, then recirculate or send.
    fn after_egress(
        &mut self,
        data: &[u8],
        payload: usize,
        port: u32,
        fx: Effects,
        r: &mut Run<'_, '_>,
    ) {
        let p = Arc::clone(&self.pipeline);
        let std = p.std;
        note(&mut self.stats, &fx);
        if let Some((CloneKind::E2E, session, keep)) = fx.clone {
            match r.pre.mirror.get(&session) {
                Some(&to) => {
                    self.stats.cloned += 1;
                    // The copy keeps the headers and its field list; the rest of its metadata
                    // starts again from zero.
                    let mut copy = self.st.clone();
                    copy.slots[..p.program.reset_slots as usize].fill(0);
                    restore(&mut copy, &self.kept(keep));
                    r.jobs.push_back(Job::Egress {
                        st: Box::new(copy),
                        data: data.to_vec(),
                        payload,
                        port: to,
                        rid: 0,
                        instance_type: instance::EGRESS_CLONE,
                    });
                }
                None => self.stats.lost_copies += 1,
            }
        }
        if self.st.slots[std.egress_spec] as u32 == DROP_PORT {
            self.stats.dropped += 1;
            return;
        }
        let mut c = Ctx {
            st: &mut self.st,
            pkt: data,
            cursor: payload,
            payload,
            guard: r.guard,
            now_ns: r.now_ns,
            error: 0,
            host: &mut *self.host,
        };
        p.deparse(&mut c);
        let mut packet = self.deparsed(data, payload);
        if let Some(len) = fx.truncate {
            packet.truncate(len as usize);
        }
        if let Some(keep) = fx.recirculate {
            self.stats.recirculated += 1;
            let in_port = self.st.slots[std.ingress_port] as u32;
            r.jobs.push_back(Job::Ingress {
                data: packet,
                port: in_port,
                instance_type: instance::RECIRCULATED,
                kept: self.kept(keep),
            });
            return;
        }
        self.stats.sent += 1;
        r.out.push(Output { port, data: packet });
    }
}

impl V1Switch {
    /// The current values of the slots `preserved[keep]` names.
    fn kept(&self, keep: u16) -> Kept {
        let slots = self.pipeline.program.preserved.get(keep as usize);
        slots.map_or_else(Vec::new, |s| {
            s.iter().map(|&slot| (slot as usize, self.st.slots[slot as usize])).collect()
        })
    }

    /// The deparsed headers (`st.out`) in front of `data`'s payload, as a new packet.
    fn deparsed(&self, data: &[u8], payload: usize) -> Vec<u8> {
        let mut packet = self.st.out.clone();
        packet.extend_from_slice(data.get(payload..).unwrap_or(&[]));
        packet
    }
}

/// Put kept metadata back after the per-packet reset.
fn restore(st: &mut PacketState, kept: &Kept) {
    for &(slot, v) in kept {
        st.slots[slot] = v;
    }
}

/// Record what became of packet `i` in its metadata (see [`V1Switch::process_batch`]); true
/// if it became copies. `flow_ran`: the host's flag that the packet's flow function ran; if it
/// is up, `i` goes into `flows_ran` and the flag comes down.
#[inline(always)]
fn mark_packet(
    pkt: &mut Packet,
    i: usize,
    r: InPlace,
    flow_ran: Option<&AtomicBool>,
    flows_ran: &mut Mask,
) -> bool {
    if let Some(flag) = flow_ran {
        // A plain load on the common path: an atomic swap per packet would cost more.
        if flag.load(Ordering::Relaxed) {
            flag.store(false, Ordering::Relaxed);
            flows_ran.insert(i);
        }
    }
    match r {
        InPlace::Sent(port) => pkt.meta.out_port = port as u16,
        InPlace::Dropped => pkt.meta.verdict = Verdict::Drop,
        InPlace::Punted => pkt.meta.verdict = Verdict::Punt,
        InPlace::Copies => return true,
    }
    false
}

/// Where a packet's deparsed headers are.
enum Headers<'o> {
    /// Already in the packet, this many bytes ending where the payload starts.
    Placed(usize),
    /// In this buffer, to be copied in front of the payload.
    Out(&'o [u8]),
}

/// Put the headers in front of the unchanged payload (see [`Headers`]); the packet leaves by
/// `port`, cut to `truncate` bytes if asked.
#[inline]
fn send_in_place(
    stats: &mut SwitchStats,
    pkt: &mut hotplane_core::Packet,
    payload: usize,
    headers: Headers<'_>,
    port: u32,
    truncate: Option<u32>,
) -> InPlace {
    let emitted = match headers {
        Headers::Placed(n) => n,
        Headers::Out(out) => out.len(),
    };
    if pkt.adjust_head(payload as isize - emitted as isize).is_err() {
        stats.dropped += 1;
        return InPlace::Dropped;
    }
    if let Headers::Out(out) = headers {
        crate::exec::bits::copy_bytes(&mut pkt.data_mut()[..emitted], out);
    }
    if let Some(len) = truncate {
        if (len as usize) < pkt.len() {
            let _ = pkt.set_len(len as usize);
        }
    }
    stats.sent += 1;
    InPlace::Sent(port)
}

fn note(stats: &mut SwitchStats, fx: &Effects) {
    if fx.assert_failed {
        stats.assert_failures += 1;
    }
    if fx.punt {
        stats.punted += 1;
    }
}

/// Set the egress metadata and run the egress control on the packet in `st`.
#[allow(clippy::too_many_arguments)]
#[inline]
fn egress_control(
    p: &Pipeline,
    st: &mut PacketState,
    data: &[u8],
    payload: usize,
    port: u32,
    rid: u32,
    instance_type: u32,
    guard: &Guard<'_>,
    now_ns: u64,
    host: &mut dyn Host,
) -> Effects {
    let std = p.std;
    {
        let s = &mut st.slots;
        s[std.egress_port] = port as u128;
        s[std.egress_spec] = 0;
        s[std.egress_rid] = rid as u128;
        s[std.instance_type] = instance_type as u128;
        s[std.egress_global_timestamp] = timestamp_us(now_ns) as u128;
    }
    let _ = st.fx.take();
    let mut c = Ctx { st, pkt: data, cursor: payload, payload, guard, now_ns, error: 0, host };
    p.egress(&mut c);
    c.st.fx.take()
}

/// v1model's timestamps (`ingress_global_timestamp`, `egress_global_timestamp`) at `now_ns`:
/// microseconds, 48 bits.
#[inline]
pub(crate) fn timestamp_us(now_ns: u64) -> u64 {
    (now_ns / 1000) & crate::types::mask(48) as u64
}

/// A context for a packet entering the parser, with the standard metadata v1model sets.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ingress_ctx<'a>(
    p: &Pipeline,
    st: &'a mut PacketState,
    data: &'a [u8],
    port: u32,
    instance_type: u32,
    guard: &'a Guard<'a>,
    now_ns: u64,
    host: &'a mut dyn Host,
) -> Ctx<'a> {
    let std = p.std;
    st.slots[std.ingress_port] = port as u128;
    st.slots[std.instance_type] = instance_type as u128;
    st.slots[std.packet_length] = data.len() as u128;
    st.slots[std.ingress_global_timestamp] = timestamp_us(now_ns) as u128;
    Ctx { st, pkt: data, cursor: 0, payload: 0, guard, now_ns, error: 0, host }
}
