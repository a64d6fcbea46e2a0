//! The control thread: everything slow happens here, never on a worker. It drains the rings of
//! punted in-band update packets, serves control API requests, authenticates, reassembles and
//! applies updates, and queues acknowledgements back to the worker that received the update.

use crate::capture::CaptureSpec;
use crate::native::StageSpec;
use crate::observe::Observability;
use crate::registry::{InstallError, Installed, Registry};
use crossbeam_queue::ArrayQueue;
use hotplane_control::api::{Request, Response};
use hotplane_control::{
    Ack, AckStatus, Kind, Reason, Received, Receiver, Refusal, Target, Update, WorkerScope,
};
use hotplane_core::flowtable::FlowSelector;
use hotplane_core::wire::{EthernetFrame, UdpFrame};
use hotplane_core::{KindError, Program, UpdateProgram};
use hotplane_core::{Layers, Packet, Pool};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A control API request with the channel its response goes back on.
pub struct ApiCall {
    pub req: Request,
    pub reply: crossbeam_channel::Sender<Response>,
}

/// Acknowledgements a datagram alone can trigger again and again are rate-limited: refusals
/// (a replayed authenticated datagram as much as a forged one) and fragment receipts (a
/// replayed fragment of an update in reassembly). Without a key nobody can make the node send
/// traffic at will, and a captured datagram cannot be turned into a reflector. The outcome of
/// a complete update is not limited: it comes once per sequence number, which only a key
/// holder can produce.
struct TokenBucket {
    tokens: f64,
    rate: f64,
    burst: f64,
    last: Instant,
}

impl TokenBucket {
    fn take(&mut self) -> bool {
        let now = Instant::now();
        self.tokens =
            (self.tokens + now.duration_since(self.last).as_secs_f64() * self.rate).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

pub(crate) struct Control {
    pub registry: Arc<Registry>,
    pub receiver: Receiver,
    pub punts: Vec<Arc<ArrayQueue<Packet>>>,
    pub injects: Vec<Arc<ArrayQueue<Packet>>>,
    pub pools: Vec<Pool>,
    pub requests: crossbeam_channel::Receiver<ApiCall>,
    pub stop: Arc<AtomicBool>,
    pub shutdown: Arc<AtomicBool>,
    pub busy: Arc<AtomicBool>,
    pub obs: Arc<Observability>,
    pub state_file: Option<PathBuf>,
}

impl Control {
    pub fn run(mut self) {
        let mut limiter =
            TokenBucket { tokens: 100.0, rate: 100.0, burst: 100.0, last: Instant::now() };
        let mut last_expire = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            self.busy.store(true, Ordering::Release);
            let mut did = false;
            for w in 0..self.punts.len() {
                while let Some(p) = self.punts[w].pop() {
                    self.inband(w, p, &mut limiter);
                    did = true;
                }
            }
            while let Ok(call) = self.requests.try_recv() {
                // Updates are guarded in `apply`; this covers every other request (table
                // writes, P4 entries, queries): a bug answers one request, never ends the thread.
                let resp = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.handle(call.req)
                }))
                .unwrap_or_else(|_| {
                    tracing::error!(
                        "internal error while handling a request (a panic, logged above)"
                    );
                    Response::err(INTERNAL_ERROR)
                });
                let _ = call.reply.send(resp);
                did = true;
            }
            // Watchdogs run on a thread of their own (`Engine::start`), so a long request here
            // never delays them.
            for kind in self.registry.kinds.all() {
                kind.housekeeping();
            }
            if last_expire.elapsed() > Duration::from_millis(50) {
                if self.obs.capturer.expire(hotplane_core::time::now_ns()) {
                    tracing::info!("capture stopped: nobody read it for 2 s");
                }
                for r in self.receiver.expire(Instant::now()) {
                    tracing::warn!(reason = %r.reason, "{}", r.message);
                }
                last_expire = Instant::now();
            }
            if !did {
                self.busy.store(false, Ordering::Release);
                std::thread::park_timeout(Duration::from_millis(2));
            }
        }
        self.busy.store(false, Ordering::Release);
    }

    /// One punted update packet from worker `w`.
    fn inband(&mut self, w: usize, pkt: Packet, limiter: &mut TokenBucket) {
        let m = pkt.meta;
        let data = pkt.data();
        let (payload_at, udp_end) = {
            let l4 = m.l4_off as usize;
            let len =
                data.get(l4 + 4..l4 + 6).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]) as usize);
            (m.payload_off as usize, (l4 + len).min(data.len()))
        };
        if m.layers & Layers::UDP == 0 || payload_at > udp_end {
            self.receiver.count_refusal(Reason::Malformed);
            return;
        }
        let payload = &data[payload_at..udp_end];
        let started = Instant::now();
        // (ack, authenticated, no_ack, repeatable): a repeatable ack is one the same datagram
        // can trigger again, so it takes a token.
        let ack = match self.receiver.receive(payload, started) {
            Ok(Received::Complete(u)) => {
                let r = self.apply(&u, Some(w));
                self.obs.record_apply(started.elapsed());
                self.ack_for(&u, r).map(|(a, auth, no_ack)| (a, auth, no_ack, false))
            }
            Ok(Received::Partial { header, received, .. }) => Some((
                partial_ack(&header, received),
                header.key_id != 0,
                header.flags.no_ack(),
                true,
            )),
            Err(r) => {
                tracing::info!(worker = w, reason = %r.reason, "update refused: {}", r.message);
                Some((refused_ack(&r), r.authenticated, r.no_ack, true))
            }
        };
        let Some((ack, authenticated, no_ack, repeatable)) = ack else { return };
        if no_ack || (repeatable && !limiter.take()) {
            return;
        }
        let key = if authenticated { self.receiver.key(ack.key_id).copied() } else { None };
        let bytes = ack.encode(key.as_ref());
        self.reply(w, &pkt, &bytes);
    }

    fn ack_for(&mut self, u: &Update, r: Result<Installed, Refusal>) -> Option<(Ack, bool, bool)> {
        let h = &u.header;
        let target = h.target.to_string();
        let ack = match r {
            Ok(inst) => {
                self.registry.count(&target, None);
                self.persist_sequences();
                Ack {
                    status: AckStatus::Applied,
                    reason: None,
                    key_id: h.key_id,
                    seq: h.seq,
                    version: inst.version,
                    received: u.payload.len() as u32,
                    message: [inst.note, inst.warning]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join("; "),
                }
            }
            Err(refusal) => {
                tracing::info!(target = %target, reason = %refusal.reason, "update not applied: {}", refusal.message);
                self.receiver.count_refusal(refusal.reason);
                self.registry.count(&target, Some(refusal.reason.as_str()));
                self.persist_sequences();
                refused_ack(&refusal)
            }
        };
        Some((ack, h.key_id != 0, h.flags.no_ack()))
    }

    /// Queue `payload` as a UDP reply to the sender of `to`, out of the port it came in on.
    fn reply(&self, w: usize, to: &Packet, payload: &[u8]) {
        let Some(frame) = reply_frame(to, payload) else { return };
        let Some(mut p) = self.pools[w].alloc() else {
            tracing::warn!(worker = w, "no buffer for an acknowledgement");
            return;
        };
        if p.set_frame(&frame).is_err() {
            return;
        }
        p.meta.out_port = to.meta.in_port;
        if self.injects[w].push(p).is_err() {
            tracing::warn!(worker = w, "acknowledgement ring full");
        }
    }

    /// Apply a complete, authenticated update. `origin` is the worker that received it in-band.
    ///
    /// A panic while building or installing the program (a bug in a compiler or verifier that
    /// some input reaches) refuses this one update with the panic's message; the control thread
    /// and the programs that were running carry on.
    fn apply(&self, u: &Update, origin: Option<usize>) -> Result<Installed, Refusal> {
        guarded(&u.header, || self.apply_unguarded(u, origin))
    }

    fn apply_unguarded(&self, u: &Update, origin: Option<usize>) -> Result<Installed, Refusal> {
        let h = &u.header;
        let n = self.registry.worker_count();
        let workers: Vec<usize> = match h.worker {
            WorkerScope::All => (0..n).collect(),
            WorkerScope::Receiving => origin.map_or_else(|| (0..n).collect(), |o| vec![o]),
            WorkerScope::One(w) if (w as usize) < n => vec![w as usize],
            WorkerScope::One(w) => {
                return Err(Refusal::of(
                    h,
                    Reason::BadTarget,
                    format!("worker {w} does not exist ({n} workers)"),
                ))
            }
        };
        let mut note = None;
        let refuse = |e: KindError| match e {
            KindError::Rejected(m) => Refusal::of(h, Reason::Rejected, m),
            KindError::Invalid(m) => Refusal::of(h, Reason::ApplyFailed, m),
            KindError::BadTarget(m) => Refusal::of(h, Reason::BadTarget, m),
        };
        let program: Program = match h.kind {
            Kind::NativeStage => {
                let spec: StageSpec = serde_json::from_slice(&u.payload)
                    .map_err(|e| Refusal::of(h, Reason::ApplyFailed, format!("stage spec: {e}")))?;
                if let Some(fields) = self.registry.node_files(&spec) {
                    return Err(Refusal::of(
                        h,
                        Reason::ApplyFailed,
                        format!(
                            "the `{}` stage spec names a file of the node ({fields}); updates carry content, not paths: send the program itself (kinds ebpf-elf, ebpf-c, ebpf-bytecode, p4, lua, or a lua stage with `source`)",
                            spec.kind()
                        ),
                    ));
                }
                self.registry
                    .build(&spec)
                    .map_err(|e| Refusal::of(h, Reason::ApplyFailed, e.to_string()))?
            }
            Kind::SelectPredefined => {
                let id: [u8; 4] = u.payload.as_slice().try_into().map_err(|_| {
                    Refusal::of(
                        h,
                        Reason::ApplyFailed,
                        "select-predefined payload must be a 4-byte id",
                    )
                })?;
                let id = u32::from_be_bytes(id);
                Some(self.registry.predefined(id).ok_or_else(|| {
                    Refusal::of(
                        h,
                        Reason::ApplyFailed,
                        format!("no pre-defined program with id {id}"),
                    )
                })?)
            }
            Kind::Remove => None,
            other => {
                let Some(kind) = self.registry.kinds.for_update(other.code()) else {
                    return Err(Refusal::of(
                        h,
                        Reason::UnsupportedKind,
                        format!("{} updates are not supported by this build", other.name()),
                    ));
                };
                let target = h.target.to_string();
                let update = UpdateProgram {
                    kind: other.code(),
                    payload: &u.payload,
                    seq: h.seq,
                    target: &target,
                    workers: &workers,
                    no_jit: h.flags.no_jit(),
                    opt_level: h.flags.opt_level(),
                };
                let built =
                    kind.build_update(&update, &self.registry.build_cx()).map_err(refuse)?;
                note = built.note;
                built.program
            }
        };
        let installed =
            self.registry.install(&h.target, &workers, program).map_err(|e| match e {
                InstallError::BadTarget(m) => Refusal::of(h, Reason::BadTarget, m),
                InstallError::BadProgram(m) => Refusal::of(h, Reason::ApplyFailed, m),
                InstallError::Called(g) => Refusal::of(h, Reason::ApplyFailed, g.to_string()),
            })?;
        Ok(Installed { note, ..installed })
    }

    fn persist_sequences(&self) {
        let Some(path) = &self.state_file else { return };
        let seqs = self.receiver.last_sequences();
        let text = serde_json::to_string_pretty(&json!({ "last_seq": seqs })).unwrap_or_default();
        // No-follow, exclusive temporary file and an atomic rename: a planted link is replaced,
        // never written through (see `state`).
        if let Err(e) = crate::state::store(path, text.as_bytes()) {
            tracing::error!(error = %e, "cannot persist replay state");
        }
    }

    fn handle(&mut self, req: Request) -> Response {
        let workers_of = |w: Option<u16>, n: usize| -> Result<Vec<usize>, String> {
            match w {
                None => Ok((0..n).collect()),
                Some(w) if (w as usize) < n => Ok(vec![w as usize]),
                Some(w) => Err(format!("worker {w} does not exist ({n} workers)")),
            }
        };
        let n = self.registry.worker_count();
        let installed = |r: Result<Installed, InstallError>, reg: &Registry, target: &str| match r {
            Ok(i) => {
                reg.count(target, None);
                Response::ok(json!({ "version": i.version, "warning": i.warning }))
            }
            Err(e) => {
                reg.count(target, Some("api_error"));
                Response::err(e.to_string())
            }
        };
        match req {
            Request::Stats {} => {
                let mut v = self.obs.stats_json();
                for kind in self.registry.kinds.all() {
                    if let Some(stats) = kind.stats() {
                        v[kind.name()] = stats;
                    }
                }
                Response::ok(v)
            }
            Request::Slots {} => Response::ok(json!(self.registry.slots())),
            Request::Flows { worker } => match self.registry.flows(worker.unwrap_or(0) as usize) {
                Some(f) => Response::ok(Value::Array(
                    f.into_iter()
                        .map(|e| json!({"selector": e.selector, "function": e.function, "version": e.version, "packets": e.packets}))
                        .collect(),
                )),
                None => Response::err(format!("worker {} does not exist", worker.unwrap_or(0))),
            },
            Request::Predefined {} => Response::ok(Value::Array(
                self.registry.predefined_list().into_iter().map(|(id, name)| json!({"id": id, "name": name})).collect(),
            )),
            Request::Metrics {} => Response::ok(json!({ "text": self.obs.prometheus() })),
            Request::Install { target, worker, stage } => {
                let r = (|| {
                    let t: Target = target.parse().map_err(|e: hotplane_control::TargetParseError| e.to_string())?;
                    let ws = workers_of(worker, n)?;
                    let spec: StageSpec = serde_json::from_value(stage).map_err(|e| format!("stage spec: {e}"))?;
                    let prog = self.registry.build(&spec).map_err(|e| e.to_string())?;
                    Ok::<_, String>((t, ws, prog))
                })();
                match r {
                    Ok((t, ws, prog)) => installed(self.registry.install(&t, &ws, prog), &self.registry, &target),
                    Err(e) => Response::err(e),
                }
            }
            Request::Switch { target, worker, id } => {
                let r = (|| {
                    let t: Target = target.parse().map_err(|e: hotplane_control::TargetParseError| e.to_string())?;
                    let ws = workers_of(worker, n)?;
                    let prog = self.registry.predefined(id).ok_or(format!("no pre-defined program with id {id}"))?;
                    Ok::<_, String>((t, ws, prog))
                })();
                match r {
                    Ok((t, ws, prog)) => installed(self.registry.install(&t, &ws, Some(prog)), &self.registry, &target),
                    Err(e) => Response::err(e),
                }
            }
            Request::Remove { target, worker } => {
                match target.parse::<Target>().map_err(|e| e.to_string()).and_then(|t| Ok((t, workers_of(worker, n)?))) {
                    Ok((t, ws)) => installed(self.registry.install(&t, &ws, None), &self.registry, &target),
                    Err(e) => Response::err(e),
                }
            }
            Request::Update { fragments } => {
                let mut acks = Vec::new();
                for (i, f) in fragments.iter().enumerate() {
                    let Some(bytes) = decode_hex(f.trim()) else {
                        return Response::err(format!("fragments[{i}] is not hex"));
                    };
                    let started = Instant::now();
                    let ack = match self.receiver.receive(&bytes, started) {
                        Ok(Received::Complete(u)) => {
                            let r = self.apply(&u, None);
                            self.obs.record_apply(started.elapsed());
                            self.ack_for(&u, r).map(|(a, _, _)| a)
                        }
                        Ok(Received::Partial { header, received, .. }) => {
                            Some(partial_ack(&header, received))
                        }
                        Err(r) => {
                            // Logged as an in-band refusal is (the client has the ack too).
                            tracing::info!(reason = %r.reason, "update refused: {}", r.message);
                            Some(refused_ack(&r))
                        }
                    };
                    if let Some(a) = ack {
                        acks.push(ack_json(&a));
                    }
                }
                Response::ok(Value::Array(acks))
            }
            Request::TraceStart { selector, count, every } => {
                let selector = match selector.as_deref().map(str::parse).transpose() {
                    Ok(s) => s.unwrap_or_else(FlowSelector::any),
                    Err(e) => return Response::err(format!("trace: {e}")),
                };
                // Stages get ready (a P4 program compiles its traced twin) before any worker
                // can pick a packet.
                for (_, _, stage) in self.registry.installed_all() {
                    stage.prepare_trace();
                }
                self.obs.tracer.start(selector, count, every);
                Response::ok(json!({"following": count.min(crate::trace::MAX_COUNT)}))
            }
            Request::TraceRead { max } => {
                let (records, remaining, lost) = self.obs.tracer.read(max.unwrap_or(64));
                let ports: Vec<&str> = self.obs.ports.iter().map(|p| p.name.as_str()).collect();
                Response::ok(json!({
                    "records": records, "remaining": remaining, "lost": lost, "ports": ports,
                }))
            }
            Request::TraceStop {} => {
                self.obs.tracer.stop();
                Response::ok(json!("stopped"))
            }
            Request::CaptureStart { point, port, selector, count, snaplen } => {
                let names: Vec<&str> = self.obs.ports.iter().map(|p| p.name.as_str()).collect();
                let spec = CaptureSpec::from_request(
                    &point,
                    port.as_deref(),
                    selector.as_deref(),
                    snaplen,
                    &names,
                );
                match spec {
                    Ok(spec) => {
                        let (id, count) = self.obs.capturer.start(spec, count);
                        Response::ok(json!({"capturing": count, "id": id}))
                    }
                    Err(e) => Response::err(format!("capture: {e}")),
                }
            }
            Request::CaptureRead { max, id } => {
                let read = match self.obs.capturer.read(id, max.unwrap_or(1024)) {
                    Ok(read) => read,
                    Err(e) => return Response::err(format!("capture: {e}")),
                };
                let (remaining, lost, expired) = (read.remaining, read.lost, read.expired);
                let clock = wall_minus_monotonic_ns();
                let frames: Vec<Value> = read
                    .frames
                    .into_iter()
                    .map(|f| {
                        json!({
                            "time_ns": f.mono_ns.saturating_add_signed(clock),
                            "in_port": f.in_port, "out_port": f.out_port, "len": f.len,
                            "data": hex::encode(&f.data),
                        })
                    })
                    .collect();
                let ports: Vec<&str> = self.obs.ports.iter().map(|p| p.name.as_str()).collect();
                Response::ok(json!({
                    "frames": frames, "remaining": remaining, "lost": lost, "ports": ports,
                    "expired": expired,
                }))
            }
            Request::CaptureStop { id } => match self.obs.capturer.stop(id) {
                Ok(()) => Response::ok(json!("stopped")),
                Err(e) => Response::err(format!("capture: {e}")),
            },
            Request::Shutdown {} => {
                self.shutdown.store(true, Ordering::Release);
                Response::ok(json!("stopping"))
            }
            // Everything else is a program kind's operation.
            other => {
                let request = match serde_json::to_value(&other) {
                    Ok(v) => v,
                    Err(e) => return Response::err(format!("request: {e}")),
                };
                let op = request["op"].as_str().unwrap_or_default().to_string();
                match self.registry.kinds.for_op(&op) {
                    Some(kind) => match kind.request(&op, &request) {
                        Ok(v) => Response::ok(v),
                        Err(e) => Response::err(e.to_string()),
                    },
                    None => Response::err(format!("`{op}` is not available in this build (no program kind answers it)")),
                }
            }
        }
    }
}
/// What a request or update that hit a bug is answered. The panic's text and place go to the
/// node's log (the panic hook), not into the answer: an acknowledgement may travel back to a
/// remote sender, who has no business reading the node's internals.
const INTERNAL_ERROR: &str =
    "internal error (a bug: the node's log has the details; please report it)";

/// What to add to a CLOCK_MONOTONIC time to get the time of day (pcap's clock).
fn wall_minus_monotonic_ns() -> i64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    wall - hotplane_core::time::now_ns() as i64
}

/// Run `apply`, turning a panic into a refusal of the update `h` names.
fn guarded(
    h: &hotplane_control::UpdateHeader,
    apply: impl FnOnce() -> Result<Installed, Refusal>,
) -> Result<Installed, Refusal> {
    // AssertUnwindSafe: a panic abandons only the program being built; the registry's published
    // state changes only through `install`, whose slot swaps are single stores.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(apply)).unwrap_or_else(|_| {
        tracing::error!(
            seq = h.seq,
            "internal error while applying an update (a panic, logged above)"
        );
        Err(Refusal::of(h, Reason::ApplyFailed, INTERNAL_ERROR))
    })
}

fn partial_ack(h: &hotplane_control::UpdateHeader, received: u32) -> Ack {
    Ack {
        status: AckStatus::Partial,
        reason: None,
        key_id: h.key_id,
        seq: h.seq,
        version: 0,
        received,
        message: String::new(),
    }
}

fn refused_ack(r: &Refusal) -> Ack {
    Ack {
        status: AckStatus::Refused,
        reason: Some(r.reason),
        key_id: r.key_id.unwrap_or(0),
        seq: r.seq.unwrap_or(0),
        version: 0,
        received: 0,
        message: r.message.clone(),
    }
}

/// JSON form of an acknowledgement, as the control API returns it.
pub fn ack_json(a: &Ack) -> Value {
    json!({
        "status": match a.status { AckStatus::Applied => "applied", AckStatus::Partial => "partial", AckStatus::Refused => "refused" },
        "reason": a.reason.map(|r| r.as_str()),
        "key_id": a.key_id,
        "seq": a.seq,
        "version": a.version,
        "received": a.received,
        "message": a.message,
    })
}

/// A UDP frame answering `to`: addresses and ports swapped, same VLAN.
fn reply_frame(to: &Packet, payload: &[u8]) -> Option<Vec<u8>> {
    let m = &to.meta;
    let d = to.data();
    let eth = EthernetFrame::new_checked(d).ok()?;
    let l3 = m.l3_off as usize;
    let l4 = m.l4_off as usize;
    let (src_ip, dst_ip): (IpAddr, IpAddr) = if m.layers & Layers::IPV4 != 0 {
        let b = d.get(l3 + 12..l3 + 20)?;
        (IpAddr::from([b[0], b[1], b[2], b[3]]), IpAddr::from([b[4], b[5], b[6], b[7]]))
    } else if m.layers & Layers::IPV6 != 0 {
        let s: [u8; 16] = d.get(l3 + 8..l3 + 24)?.try_into().ok()?;
        let t: [u8; 16] = d.get(l3 + 24..l3 + 40)?.try_into().ok()?;
        (IpAddr::from(s), IpAddr::from(t))
    } else {
        return None;
    };
    if eth.dst_addr().0[0] & 1 != 0 {
        // An ack leaves from the node's own (unicast) address, never from a group address.
        return None;
    }
    let ports = d.get(l4..l4 + 4)?;
    let vlan = (m.layers & Layers::VLAN != 0).then(|| u16::from_be_bytes([d[14], d[15]]) & 0x0fff);
    let f = UdpFrame {
        src_mac: eth.dst_addr(),
        dst_mac: eth.src_addr(),
        vlan,
        src_ip: dst_ip,
        dst_ip: src_ip,
        src_port: u16::from_be_bytes([ports[2], ports[3]]),
        dst_port: u16::from_be_bytes([ports[0], ports[1]]),
    };
    let mut buf = vec![0u8; f.header_len() + payload.len()];
    let n = f.emit(payload, &mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// Hex text to bytes. SIMD-decoded: a 3 KB ELF update arrives as 6 KB of hex, and the
/// scalar `hex` crate spent more time on it than the verifier spent on the program.
fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    let mut bytes = vec![0; text.len() / 2];
    faster_hex::hex_decode(text.as_bytes(), &mut bytes).ok()?;
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::{decode_hex, guarded};
    use hotplane_control::{Flags, Kind, Reason, Target, UpdateHeader, WorkerScope};

    /// A bug that panics while an update is built (the red team's verifier crash killed the
    /// control thread) refuses that update and returns normally; the panic's text stays in the
    /// node's log.
    #[test]
    fn a_panic_while_applying_refuses_the_update() {
        let h = UpdateHeader {
            kind: Kind::EbpfBytecode,
            flags: Flags::default(),
            key_id: 1,
            seq: 9,
            target: Target::Position(hotplane_core::Position::Pre),
            worker: WorkerScope::All,
        };
        let refusal =
            guarded(&h, || panic!("index out of bounds: {}", 7)).expect_err("a panic is a refusal");
        assert_eq!(refusal.reason, Reason::ApplyFailed);
        assert_eq!(refusal.seq, Some(9));
        assert!(refusal.message.contains("internal error"), "{}", refusal.message);
        assert!(!refusal.message.contains("index out of bounds"), "internals stay in the log");
    }

    #[test]
    fn hex_fragments_decode_or_refuse() {
        assert_eq!(decode_hex("00ffA5").unwrap(), vec![0, 255, 0xa5]);
        assert_eq!(decode_hex("").unwrap(), Vec::<u8>::new());
        let long: String = (0..4096).map(|i| format!("{:02x}", i % 256)).collect();
        assert_eq!(
            decode_hex(&long).unwrap(),
            (0..4096).map(|i| (i % 256) as u8).collect::<Vec<_>>()
        );
        assert!(decode_hex("abc").is_none(), "odd length");
        assert!(decode_hex("zz").is_none(), "not hex");
        assert!(decode_hex("0x00").is_none(), "no prefix on the wire");
    }
}
