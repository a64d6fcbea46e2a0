//! `mem` ports: in-process traffic for experiments, tests and benchmarks. The receive side is a
//! [`GenSpec`] generator (one share of the flows per queue: flow `i` on queue `i mod queues`),
//! the transmit side a measuring [`Sink`]. Reports are collected when the queues are dropped
//! (workers own them while running, so reading them needs no lock on the fast path).

mod gen;
mod sink;

pub use gen::{
    check_rate, parse_tcp_flags, GenSpec, GenSpecError, Proto, Vary, MAX_RATE, MIN_RATE,
};
pub use sink::{MarkSeen, Sample, SinkSpec};

use crate::{OpenCtx, Port, PortCounters, PortError};
use crossbeam_queue::ArrayQueue;
use gen::{Generator, RateControl};
use hdrhistogram::Histogram;
use hotplane_core::{classify, Batch, Meta, PoolCache};
use sink::Sink;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Configuration of a `mem` port.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemSpec {
    /// Traffic to generate; a port without `gen` receives only injected frames.
    pub gen: Option<GenSpec>,
    pub sink: SinkSpec,
}

/// Frames queued for injection per queue (update packets in experiments).
const INJECT_DEPTH: usize = 256;

struct Shared {
    name: String,
    gens: Mutex<Vec<FlowSent>>,
    sinks: Mutex<Vec<SinkResult>>,
    inject: Vec<Arc<ArrayQueue<Vec<u8>>>>,
    counters: Vec<Arc<PortCounters>>,
    /// Per queue: its generator has sent everything it will send.
    gen_done: Vec<Arc<std::sync::atomic::AtomicBool>>,
    /// What each queue's generator and sink had done at their last snapshot, while running.
    live: Mutex<Live>,
    /// The generator's rate, changed while it runs.
    rate: Arc<RateControl>,
}

/// Snapshots of the queues' generators and sinks, taken by the queues themselves about every
/// [`LIVE_EVERY_NS`] (when the lock is free: the fast path never waits for it).
#[derive(Default)]
struct Live {
    /// Per queue: its flows' ids and packets sent (tuples are looked up when reported).
    sent: BTreeMap<usize, Vec<(u16, u64)>>,
    /// Per queue: its sink's flows, the first [`LIVE_FLOWS`] of them.
    received: BTreeMap<usize, Vec<(u16, LiveFlow)>>,
    /// The flows' 5-tuples, by id, as generated (filled once).
    tuples: BTreeMap<u16, String>,
}

/// A sink's flow at a snapshot: counts, and the p99 latency for the first
/// [`LIVE_LATENCY_FLOWS`] flows (a quantile of the histogram costs a pass over it).
#[derive(Clone, Copy)]
struct LiveFlow {
    received: u64,
    duplicates: u64,
    reordered: u64,
    p99_ns: Option<u64>,
}

/// How often a queue snapshots its generator and sink for live reports.
const LIVE_EVERY_NS: u64 = 250_000_000;
/// The most flows a queue's snapshot holds, and how many of them carry a latency: a
/// snapshot costs the fast path a few microseconds, not more.
const LIVE_FLOWS: usize = 1024;
const LIVE_LATENCY_FLOWS: usize = 16;

#[derive(Debug, Clone)]
struct FlowSent {
    id: u16,
    flow: String,
    sent: u64,
}

struct SinkResult {
    flows: BTreeMap<u16, sink::FlowRecord>,
    samples: Vec<Sample>,
    captured: Vec<Vec<u8>>,
    unstamped: u64,
}

/// The experimenter's handle on a `mem` port: inject frames, read reports.
#[derive(Clone)]
pub struct MemHandle {
    shared: Arc<Shared>,
}

impl MemHandle {
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Queue a frame to be received on queue `queue` before generated traffic.
    pub fn inject_to(&self, queue: usize, frame: Vec<u8>) -> Result<(), Vec<u8>> {
        match self.shared.inject.get(queue) {
            Some(q) => q.push(frame),
            None => Err(frame),
        }
    }

    /// Queue a frame on the queue its flow hash selects (software RSS).
    pub fn inject(&self, frame: Vec<u8>) -> Result<(), Vec<u8>> {
        let mut m = Meta::default();
        classify(&frame, &mut m);
        let q = m.flow_hash as usize % self.shared.inject.len().max(1);
        self.inject_to(q, frame)
    }

    /// Live counters of each queue.
    pub fn counters(&self) -> &[Arc<PortCounters>] {
        &self.shared.counters
    }

    /// Change the generator's rate (packets per second over all its queues; `None`: as fast
    /// as possible) while it runs: each queue takes it up at its next poll. A rate the pacer
    /// cannot hold is refused, and the rate stays.
    pub fn set_rate(&self, pps: Option<f64>) -> Result<(), GenSpecError> {
        if let Some(r) = pps {
            check_rate(r)?;
        }
        self.shared.rate.set(pps);
        Ok(())
    }

    /// Stop generating until the next `set_rate`.
    pub fn pause(&self) {
        self.shared.rate.pause();
    }

    /// True once every queue's generator has sent all it will (count or duration reached).
    pub fn generator_done(&self) -> bool {
        self.shared.gen_done.iter().all(|d| d.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Merge what every queue reported. Complete once the port's queues have been dropped
    /// (the data plane stopped).
    pub fn report(&self) -> MemReport {
        MemReport::merge(std::slice::from_ref(self))
    }
}

/// Per-flow results over one or more `mem` ports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FlowReport {
    pub flow: u16,
    /// The flow's 5-tuple as generated.
    pub tuple: String,
    pub sent: u64,
    pub received: u64,
    /// Sent but never received (distinct sequence numbers).
    pub lost: u64,
    pub duplicates: u64,
    pub reordered: u64,
    /// Sequence numbers below the highest one received that never arrived: loss as a receiver
    /// alone can tell it (a capture), without the sender's count.
    pub missing: u64,
    pub latency_ns_p50: u64,
    pub latency_ns_p99: u64,
    pub latency_ns_max: u64,
    pub marks: Vec<MarkSeen>,
}

/// Results of one experiment on `mem` ports.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MemReport {
    pub flows: Vec<FlowReport>,
    /// Per-packet samples, ordered by receive time.
    #[serde(skip)]
    pub samples: Vec<Sample>,
    /// Unstamped frames seen by sinks (acknowledgements, replies), in arrival order per queue.
    #[serde(skip)]
    pub captured: Vec<Vec<u8>>,
    pub unstamped: u64,
    #[serde(skip)]
    latency: Option<Histogram<u64>>,
}

impl MemReport {
    /// Merge reports of several ports: flows are matched by stamp flow id, so traffic generated
    /// on one port and received on another is accounted end to end.
    pub fn merge(handles: &[MemHandle]) -> MemReport {
        let mut sent: BTreeMap<u16, FlowSent> = BTreeMap::new();
        let mut flows: BTreeMap<u16, sink::FlowRecord> = BTreeMap::new();
        let mut out = MemReport::default();
        for h in handles {
            add_sent(&mut sent, h.shared.gens.lock().unwrap_or_else(|e| e.into_inner()).iter());
            for s in h.shared.sinks.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                add_received(&mut flows, &s.flows);
                out.samples.extend_from_slice(&s.samples);
                out.captured.extend(s.captured.iter().cloned());
                out.unstamped += s.unstamped;
            }
        }
        out.finish(sent, flows)
    }

    /// Per-flow figures while the data plane runs, from the queues' last snapshots (at most a
    /// quarter of a second old; packets in flight count as lost until they arrive). No
    /// samples or captures.
    ///
    /// A flow received on several queues reports the highest of their p99 latencies; flows
    /// past a queue's first [`LIVE_LATENCY_FLOWS`] report none (0), past its first
    /// [`LIVE_FLOWS`] nothing until the end.
    pub fn live(handles: &[MemHandle]) -> MemReport {
        let mut sent: BTreeMap<u16, (String, u64)> = BTreeMap::new();
        let mut received: BTreeMap<u16, LiveFlow> = BTreeMap::new();
        for h in handles {
            let live = h.shared.live.lock().unwrap_or_else(|e| e.into_inner());
            for &(id, n) in live.sent.values().flatten() {
                let tuple = live.tuples.get(&id).cloned().unwrap_or_default();
                sent.entry(id).or_insert((tuple, 0)).1 += n;
            }
            for &(id, f) in live.received.values().flatten() {
                let into = received.entry(id).or_insert(LiveFlow {
                    received: 0,
                    duplicates: 0,
                    reordered: 0,
                    p99_ns: None,
                });
                into.received += f.received;
                into.duplicates += f.duplicates;
                into.reordered += f.reordered;
                into.p99_ns = into.p99_ns.max(f.p99_ns);
            }
        }
        let ids: std::collections::BTreeSet<u16> =
            sent.keys().chain(received.keys()).copied().collect();
        let flows = ids
            .into_iter()
            .map(|id| {
                let (tuple, sent) = sent.get(&id).cloned().unwrap_or_else(|| ("?".into(), 0));
                let r = received.get(&id).copied();
                let unique = r.map_or(0, |r| r.received - r.duplicates);
                FlowReport {
                    flow: id,
                    tuple,
                    sent,
                    received: r.map_or(0, |r| r.received),
                    lost: sent.saturating_sub(unique),
                    duplicates: r.map_or(0, |r| r.duplicates),
                    reordered: r.map_or(0, |r| r.reordered),
                    missing: 0,
                    latency_ns_p50: 0,
                    latency_ns_p99: r.and_then(|r| r.p99_ns).unwrap_or(0),
                    latency_ns_max: 0,
                    marks: Vec::new(),
                }
            })
            .collect();
        MemReport { flows, ..Default::default() }
    }

    /// The per-flow reports of what was sent and received, flow by flow.
    fn finish(
        mut self,
        sent: BTreeMap<u16, FlowSent>,
        flows: BTreeMap<u16, sink::FlowRecord>,
    ) -> MemReport {
        let out = &mut self;
        out.samples.sort_by_key(|s| (s.rx_ts, s.flow, s.seq));
        let mut all = sink::new_histogram();
        let ids: std::collections::BTreeSet<u16> =
            sent.keys().chain(flows.keys()).copied().collect();
        for id in ids {
            let s = sent.get(&id);
            let r = flows.get(&id);
            let received = r.map_or(0, |r| r.received);
            let unique = r.map_or(0, |r| r.unique());
            if let Some(r) = r {
                let _ = all.add(&r.latency);
            }
            out.flows.push(FlowReport {
                flow: id,
                tuple: s.map_or_else(|| "?".into(), |s| s.flow.clone()),
                sent: s.map_or(0, |s| s.sent),
                received,
                lost: s.map_or(0, |s| s.sent.saturating_sub(unique)),
                duplicates: r.map_or(0, |r| r.duplicates),
                reordered: r.map_or(0, |r| r.reordered),
                missing: r.map_or(0, |r| {
                    r.highest_seq().map_or(0, |h| (h + 1).saturating_sub(r.unique()))
                }),
                latency_ns_p50: r.map_or(0, |r| r.latency.value_at_quantile(0.5)),
                latency_ns_p99: r.map_or(0, |r| r.latency.value_at_quantile(0.99)),
                latency_ns_max: r.map_or(0, |r| r.latency.max()),
                marks: r.map_or_else(Vec::new, |r| r.marks.clone()),
            });
        }
        out.latency = Some(all);
        self
    }

    pub fn sent(&self) -> u64 {
        self.flows.iter().map(|f| f.sent).sum()
    }

    pub fn received(&self) -> u64 {
        self.flows.iter().map(|f| f.received).sum()
    }

    pub fn lost(&self) -> u64 {
        self.flows.iter().map(|f| f.lost).sum()
    }

    pub fn duplicates(&self) -> u64 {
        self.flows.iter().map(|f| f.duplicates).sum()
    }

    pub fn flow(&self, id: u16) -> Option<&FlowReport> {
        self.flows.iter().find(|f| f.flow == id)
    }

    /// Latency quantile over all flows, in nanoseconds.
    pub fn latency_ns(&self, q: f64) -> u64 {
        self.latency.as_ref().map_or(0, |h| h.value_at_quantile(q))
    }

    pub fn latency_max_ns(&self) -> u64 {
        self.latency.as_ref().map_or(0, |h| h.max())
    }
}

impl sink::FlowRecord {
    fn absorb(&mut self, o: &sink::FlowRecord) {
        // A flow is received by one queue unless it was spread by a stage; merge conservatively.
        self.received += o.received;
        self.duplicates += o.duplicates;
        self.reordered += o.reordered;
        let _ = self.latency.add(&o.latency);
        for m in o.marks.iter().copied() {
            match self.marks.iter_mut().find(|x| x.mark == m.mark) {
                Some(x) => {
                    x.packets += m.packets;
                    if m.first_tx_ts < x.first_tx_ts {
                        x.first_tx_ts = m.first_tx_ts;
                        x.first_seq = m.first_seq;
                    }
                }
                None => self.marks.push(m),
            }
        }
    }
}

/// Add generators' per-flow counts into `into`, by flow id.
fn add_sent<'a>(into: &mut BTreeMap<u16, FlowSent>, from: impl Iterator<Item = &'a FlowSent>) {
    for f in from {
        let e = into.entry(f.id).or_insert(FlowSent { id: f.id, flow: f.flow.clone(), sent: 0 });
        e.sent += f.sent;
    }
}

/// Add a sink's per-flow records into `into`, by flow id.
fn add_received(
    into: &mut BTreeMap<u16, sink::FlowRecord>,
    from: &BTreeMap<u16, sink::FlowRecord>,
) {
    for (id, rec) in from {
        match into.get_mut(id) {
            None => {
                into.insert(*id, rec.clone());
            }
            Some(r) => r.absorb(rec),
        }
    }
}

/// Receive queued injected frames (before any generated traffic); returns how many arrived.
fn receive_injected(
    inject: &ArrayQueue<Vec<u8>>,
    port: u16,
    now_ns: u64,
    batch: &mut Batch,
    cache: &mut PoolCache,
    c: &PortCounters,
) -> usize {
    let before = batch.len();
    while batch.room() > 0 {
        let Some(frame) = inject.pop() else { break };
        if !crate::deliver(&frame, port, now_ns, batch, cache, c) {
            break;
        }
    }
    batch.len() - before
}

/// One queue of a `mem` port.
pub struct MemQueue {
    name: String,
    gen: Option<Generator>,
    inject: Arc<ArrayQueue<Vec<u8>>>,
    sink: Sink,
    counters: Arc<PortCounters>,
    gen_done: Arc<std::sync::atomic::AtomicBool>,
    shared: Arc<Shared>,
    port: u16,
    queue: usize,
    /// When this queue next snapshots its generator and sink ([`Live`]).
    live_at_ns: u64,
}

impl MemQueue {
    /// Snapshot what the generator sent and the sink received, if it is time and nobody holds
    /// the snapshots (a reader does only briefly): the fast path never waits.
    #[inline]
    fn snapshot(&mut self, now_ns: u64) {
        if now_ns < self.live_at_ns {
            return;
        }
        self.live_at_ns = now_ns + LIVE_EVERY_NS;
        let mut live = match self.shared.live.try_lock() {
            Ok(l) => l,
            // A reader that panicked left the snapshots as they were: still usable.
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        if let Some(g) = &self.gen {
            if !live.sent.contains_key(&self.queue) {
                for f in &g.flows {
                    live.tuples.insert(f.id, f.frame_tuple());
                }
            }
            live.sent.insert(self.queue, g.flows.iter().map(|f| (f.id, f.sent)).collect());
        }
        if self.sink.measures() {
            let flows = self.sink.flows.iter().take(LIVE_FLOWS).enumerate().map(|(i, (&id, r))| {
                let p99_ns = (i < LIVE_LATENCY_FLOWS).then(|| r.latency.value_at_quantile(0.99));
                let flow = LiveFlow {
                    received: r.received,
                    duplicates: r.duplicates,
                    reordered: r.reordered,
                    p99_ns,
                };
                (id, flow)
            });
            live.received.insert(self.queue, flows.collect());
        }
    }
}

/// Open a `mem` port with one queue per pool (worker).
pub fn open(
    spec: &MemSpec,
    cx: &OpenCtx<'_>,
) -> Result<(Vec<Box<dyn Port>>, MemHandle), PortError> {
    let queues = cx.pools.len().max(1);
    let cfg_err = |msg: String| PortError::Config { port: cx.name.to_string(), msg };
    let max = cx.pools.first().map_or(1920, |p| p.buffer_size() - p.headroom() as usize);
    if let Some(g) = &spec.gen {
        g.validate(max).map_err(|m| cfg_err(format!("gen.{m}")))?;
    }
    let captured = match spec.gen.as_ref().and_then(|g| g.pcap.as_ref()) {
        Some(path) => Some(read_templates(path, max).map_err(cfg_err)?),
        None => None,
    };
    let rate = Arc::new(RateControl::default());
    rate.set(spec.gen.as_ref().and_then(|g| g.rate_pps));
    let inject: Vec<_> = (0..queues).map(|_| Arc::new(ArrayQueue::new(INJECT_DEPTH))).collect();
    let counters: Vec<_> = (0..queues).map(|_| Arc::new(PortCounters::default())).collect();
    let gen_done: Vec<_> =
        (0..queues).map(|_| Arc::new(std::sync::atomic::AtomicBool::new(false))).collect();
    let shared = Arc::new(Shared {
        name: cx.name.to_string(),
        gens: Mutex::new(Vec::new()),
        sinks: Mutex::new(Vec::new()),
        inject: inject.clone(),
        counters: counters.clone(),
        gen_done: gen_done.clone(),
        live: Mutex::new(Live::default()),
        rate: rate.clone(),
    });
    let mut out: Vec<Box<dyn Port>> = Vec::with_capacity(queues);
    for q in 0..queues {
        let gen = spec.gen.as_ref().map(|g| {
            let captured = captured.as_deref();
            Generator::new(g, cx.id, (q, queues), captured, rate.clone(), inject[q].clone())
        });
        if let (Some(g), Some(spec)) = (&gen, &spec.gen) {
            if spec.prebuilt {
                if let Some(pool) = cx.pools.get(q) {
                    pool.prefill(|i, buf| {
                        if let Some(f) = g.prebuilt_frame(i) {
                            buf[..f.len()].copy_from_slice(f);
                        }
                    });
                }
            }
        }
        out.push(Box::new(MemQueue {
            name: cx.name.to_string(),
            gen,
            inject: inject[q].clone(),
            sink: Sink::new(spec.sink.clone()),
            counters: counters[q].clone(),
            gen_done: gen_done[q].clone(),
            shared: shared.clone(),
            port: cx.id,
            queue: q,
            live_at_ns: 0,
        }));
    }
    Ok((out, MemHandle { shared }))
}

impl Port for MemQueue {
    fn name(&self) -> &str {
        &self.name
    }

    fn wakeup(&self) -> crate::Wakeup {
        match self.gen {
            Some(_) => crate::Wakeup::Poll,
            None => crate::Wakeup::Quiet,
        }
    }

    #[inline]
    fn recv(&mut self, batch: &mut Batch, cache: &mut PoolCache, now_ns: u64) -> usize {
        match &mut self.gen {
            Some(g) => {
                let n = g.recv(batch, cache, now_ns, &self.counters);
                if n == 0 && g.done() {
                    self.gen_done.store(true, std::sync::atomic::Ordering::Release);
                }
                self.snapshot(now_ns);
                n
            }
            None => {
                self.gen_done.store(true, std::sync::atomic::Ordering::Release);
                // A sink's queue is polled even when nothing arrives: its snapshot catches up.
                if self.sink.measures() {
                    self.snapshot(now_ns);
                }
                receive_injected(&self.inject, self.port, now_ns, batch, cache, &self.counters)
            }
        }
    }

    #[inline]
    fn send(&mut self, batch: &mut Batch, cache: &mut PoolCache, now_ns: u64) -> usize {
        let n = batch.len();
        let mut bytes = 0u64;
        let measure = self.sink.measures();
        for p in batch.drain() {
            bytes += p.len() as u64;
            if measure {
                self.sink.note(&p, now_ns);
            }
            cache.free(p);
        }
        self.counters.tx_packets.add(n as u64);
        self.counters.tx_bytes.add(bytes);
        if measure {
            self.snapshot(now_ns);
        }
        n
    }

    fn counters(&self) -> Arc<PortCounters> {
        self.counters.clone()
    }

    fn rx_done(&self) -> bool {
        self.inject.is_empty() && self.gen.as_ref().is_none_or(|g| g.done())
    }
}

impl Drop for MemQueue {
    fn drop(&mut self) {
        if let Some(g) = &self.gen {
            let mut gens = self.shared.gens.lock().unwrap_or_else(|e| e.into_inner());
            for f in &g.flows {
                gens.push(FlowSent { id: f.id, flow: f.frame_tuple(), sent: f.sent });
            }
        }
        let s = std::mem::replace(&mut self.sink, Sink::new(SinkSpec::default()));
        self.shared.sinks.lock().unwrap_or_else(|e| e.into_inner()).push(SinkResult {
            flows: s.flows,
            samples: s.samples,
            captured: s.captured,
            unstamped: s.unstamped,
        });
    }
}

/// Frames a generator may hold from one capture.
const MAX_TEMPLATES: usize = 65_536;

/// The frames of the capture at `path`, each at most `max_frame` bytes: a generator's templates.
fn read_templates(path: &std::path::Path, max_frame: usize) -> Result<Vec<Vec<u8>>, String> {
    let at = |e: &dyn std::fmt::Display| format!("gen.pcap = \"{}\": {e}", path.display());
    let file = std::fs::File::open(path).map_err(|e| at(&e))?;
    let mut reader = crate::pcap::format::CaptureReader::new(std::io::BufReader::new(file))
        .map_err(|e| at(&e))?;
    let mut frames = Vec::new();
    let mut buf = Vec::new();
    while let Some(info) = reader.next_record(&mut buf).map_err(|e| at(&e))? {
        let i = frames.len();
        if (info.orig_len as usize) > buf.len() {
            return Err(at(&format!(
                "frame {i} was cut to {} of its {} bytes when captured; a generator sends whole frames",
                buf.len(),
                info.orig_len
            )));
        }
        if buf.len() < 14 || buf.len() > max_frame {
            return Err(at(&format!(
                "frame {i} has {} bytes: from 14 to {max_frame} (a pool buffer)",
                buf.len()
            )));
        }
        if frames.len() == MAX_TEMPLATES {
            return Err(at(&format!("more than {MAX_TEMPLATES} frames")));
        }
        frames.push(buf.clone());
    }
    if frames.is_empty() {
        return Err(at(&"no frames in it"));
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::read_templates;
    use crate::pcap::format::CaptureWriter;

    /// A capture to send from is outside input: a cut, oversized, empty or absent one is
    /// refused with the file and the frame named, never sent in part.
    #[test]
    fn hostile_captures_are_refused_as_templates() {
        let dir = std::env::temp_dir().join(format!("hp-templates-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, frames: &[(&[u8], u32)]| {
            let path = dir.join(name);
            let mut w = CaptureWriter::new(std::fs::File::create(&path).unwrap(), 65535).unwrap();
            for (f, wire) in frames {
                w.write_cut(1, f, *wire).unwrap();
            }
            w.flush().unwrap();
            path
        };
        let ok = write("ok.pcap", &[(&[1; 60], 60), (&[2; 64], 64)]);
        assert_eq!(read_templates(&ok, 1920).unwrap().len(), 2);
        let cut = write("cut.pcap", &[(&[1; 60], 60), (&[2; 20], 64)]);
        assert!(read_templates(&cut, 1920)
            .unwrap_err()
            .contains("frame 1 was cut to 20 of its 64"));
        let big = write("big.pcap", &[(&[1; 2000], 2000)]);
        assert!(read_templates(&big, 1920).unwrap_err().contains("frame 0 has 2000 bytes"));
        let empty = write("empty.pcap", &[]);
        assert!(read_templates(&empty, 1920).unwrap_err().contains("no frames"));
        let garbage = dir.join("garbage.pcap");
        std::fs::write(&garbage, b"not a capture").unwrap();
        assert!(read_templates(&garbage, 1920).unwrap_err().starts_with("gen.pcap = "));
        assert!(read_templates(&dir.join("absent.pcap"), 1920).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
