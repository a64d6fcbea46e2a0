//! `hotplane trace`: follow packets through the pipeline and say why each went where it went.
//!
//! The control thread arms the [`Tracer`] with a flow selector and a count. A worker tests one
//! relaxed atomic per batch; only when it is armed does it classify the batch against the
//! selector, copy the chosen packets' bytes, and after each position compare them (verdict,
//! output port, the header fields that changed) and collect what the stage explained of them
//! (a P4 stage: every table apply, hit or miss, and the action). Records go to a bounded
//! lock-free queue that the control thread drains; a full queue loses records (counted),
//! never stalls a worker.

use crossbeam_queue::ArrayQueue;
use hotplane_core::flowtable::FlowSelector;
use hotplane_core::{Batch, Mask, Verdict};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Records kept until the control side reads them.
pub const QUEUE: usize = 256;
/// Packets one `trace-start` may ask for.
pub const MAX_COUNT: u64 = 100_000;

/// What a trace follows, shared by the control thread and the workers.
pub struct Tracer {
    /// Packets still to record; 0: off (what workers test).
    remaining: AtomicU64,
    /// Record one matching packet in `every`.
    every: AtomicU64,
    /// Matching packets seen since armed (for `every`).
    matched: AtomicU64,
    /// Which packets; workers only `try_lock` it, and only while armed.
    selector: Mutex<FlowSelector>,
    records: ArrayQueue<TraceRecord>,
    /// Records lost to a full queue.
    lost: AtomicU64,
    /// Which trace this is: a batch picked under an earlier one does not report into it.
    generation: AtomicU64,
}

/// One traced packet: where it came in, what each position did with it, how it left.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TraceRecord {
    pub worker: usize,
    pub in_port: u16,
    pub bytes: usize,
    /// The flow as the classifier sees it (`udp 10.0.0.1:1024 -> 10.0.1.4:5000`).
    pub flow: String,
    pub stages: Vec<StageRecord>,
    /// `pass` (sent to `out_port`), `drop`, `tx` or `punt` after the last position.
    pub verdict: &'static str,
    pub out_port: u16,
}

/// What one position did with a traced packet.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StageRecord {
    pub position: &'static str,
    pub program: String,
    pub verdict: &'static str,
    pub out_port: u16,
    /// What the stage said (`table MyIngress.ipv4_lpm: hit -> MyIngress.ipv4_forward`).
    pub notes: Vec<String>,
    /// Header fields it changed (`ipv4.ttl: 64 -> 63`).
    pub changed: Vec<String>,
}

impl Default for Tracer {
    fn default() -> Self {
        Tracer {
            remaining: AtomicU64::new(0),
            every: AtomicU64::new(1),
            matched: AtomicU64::new(0),
            selector: Mutex::new(FlowSelector::any()),
            records: ArrayQueue::new(QUEUE),
            lost: AtomicU64::new(0),
            generation: AtomicU64::new(0),
        }
    }
}

impl Tracer {
    /// Follow the next `count` packets `selector` matches, one in `every` (control thread).
    /// Records not yet read are dropped.
    pub fn start(&self, selector: FlowSelector, count: u64, every: u64) {
        self.remaining.store(0, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        *self.selector.lock().unwrap_or_else(|e| e.into_inner()) = selector;
        while self.records.pop().is_some() {}
        self.lost.store(0, Ordering::Relaxed);
        self.matched.store(0, Ordering::Relaxed);
        self.every.store(every.max(1), Ordering::Relaxed);
        self.remaining.store(count.min(MAX_COUNT), Ordering::Release);
    }

    pub fn stop(&self) {
        self.remaining.store(0, Ordering::Release);
    }

    /// Records so far (at most `max`), packets still to follow, records lost.
    pub fn read(&self, max: usize) -> (Vec<TraceRecord>, u64, u64) {
        let records = std::iter::from_fn(|| self.records.pop()).take(max).collect();
        (records, self.remaining.load(Ordering::Acquire), self.lost.load(Ordering::Relaxed))
    }

    /// Whether a worker should look at its batch (one relaxed load).
    #[inline(always)]
    pub fn armed(&self) -> bool {
        self.remaining.load(Ordering::Relaxed) != 0
    }

    /// The packets of `batch` to follow, with their bytes as they arrived.
    #[cold]
    pub fn pick(&self, worker: usize, batch: &mut Batch) -> Option<TracedBatch> {
        let Ok(selector) = self.selector.try_lock().map(|s| *s) else { return None };
        let every = self.every.load(Ordering::Relaxed);
        let generation = self.generation.load(Ordering::Acquire);
        let mut traced = TracedBatch { mask: Mask::EMPTY, packets: Vec::new(), generation };
        for (i, p) in batch.iter_mut().enumerate() {
            let key = p.classify();
            if !selector.matches(&key) {
                continue;
            }
            if self.matched.fetch_add(1, Ordering::Relaxed) % every != 0 {
                continue;
            }
            // Claim one of the remaining packets; another worker may take the last one first.
            let claimed = self
                .remaining
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok();
            if !claimed {
                break;
            }
            traced.mask.insert(i);
            let record = TraceRecord {
                worker,
                in_port: p.meta.in_port,
                bytes: p.len(),
                flow: key.to_string(),
                stages: Vec::new(),
                verdict: "pass",
                out_port: p.meta.out_port,
            };
            traced.packets.push((i, p.data().to_vec(), record));
        }
        (!traced.mask.is_empty()).then_some(traced)
    }

    /// Hand finished records to the control side.
    #[cold]
    pub fn finish(&self, traced: TracedBatch, batch: &Batch) {
        if traced.generation != self.generation.load(Ordering::Acquire) {
            return; // a new trace started meanwhile
        }
        for (i, _, mut record) in traced.packets {
            if let Some(p) = batch.get(i) {
                record.verdict = verdict_name(p.meta.verdict);
                record.out_port = p.meta.out_port;
            }
            if self.records.push(record).is_err() {
                self.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The packets of one batch being followed.
pub struct TracedBatch {
    pub mask: Mask,
    /// (index in the batch, bytes before the next position, the record so far).
    packets: Vec<(usize, Vec<u8>, TraceRecord)>,
    generation: u64,
}

impl TracedBatch {
    /// Record what `position` (running `program`) did, with the stage's `notes`.
    #[cold]
    pub fn after(
        &mut self,
        position: &'static str,
        program: String,
        batch: &Batch,
        notes: &mut Vec<(usize, String)>,
    ) {
        for (i, before, record) in &mut self.packets {
            let Some(p) = batch.get(*i) else { continue };
            if record.stages.last().is_some_and(|s| s.verdict != "pass") {
                continue; // it left the pipeline at an earlier position
            }
            let now = p.data();
            record.stages.push(StageRecord {
                position,
                program: program.clone(),
                verdict: verdict_name(p.meta.verdict),
                out_port: p.meta.out_port,
                notes: notes.iter().filter(|(n, _)| n == i).map(|(_, s)| s.clone()).collect(),
                changed: changes(before, now),
            });
            *before = now.to_vec();
        }
        notes.clear();
    }
}

fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Drop => "drop",
        Verdict::Tx => "tx",
        Verdict::Punt => "punt",
    }
}

/// The header fields that differ between two frames, as `name: before -> after`; bytes that
/// differ outside the fields known here are reported by offset.
pub fn changes(before: &[u8], after: &[u8]) -> Vec<String> {
    let (a, b) = (fields(before), fields(after));
    let mut out: Vec<String> = Vec::new();
    for (name, old) in &a {
        match b.iter().find(|(n, _)| n == name) {
            Some((_, new)) if new != old => out.push(format!("{name}: {old} -> {new}")),
            None => out.push(format!("{name}: {old} -> (gone)")),
            _ => {}
        }
    }
    for (name, new) in &b {
        if !a.iter().any(|(n, _)| n == name) {
            out.push(format!("{name}: (none) -> {new}"));
        }
    }
    if before.len() != after.len() {
        out.push(format!("length: {} -> {} bytes", before.len(), after.len()));
    } else if out.is_empty() && before != after {
        let first = before.iter().zip(after).position(|(x, y)| x != y).unwrap_or(0);
        let last = before.iter().zip(after).rposition(|(x, y)| x != y).unwrap_or(first);
        out.push(format!("bytes {first}..{} changed", last + 1));
    }
    out
}

/// Ethernet, IPv4/IPv6 and UDP/TCP header fields of a frame, by name.
fn fields(f: &[u8]) -> Vec<(&'static str, String)> {
    let mac = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":");
    let be16 = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let mut out = Vec::new();
    if f.len() < 14 {
        return out;
    }
    out.push(("eth.dst", mac(&f[0..6])));
    out.push(("eth.src", mac(&f[6..12])));
    let ethertype = be16(f, 12);
    out.push(("eth.type", format!("{ethertype:#06x}")));
    let ip = &f[14..];
    let (proto, l4) = match ethertype {
        0x0800 if ip.len() >= 20 => {
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            out.push(("ipv4.tos", ip[1].to_string()));
            out.push(("ipv4.len", be16(ip, 2).to_string()));
            out.push(("ipv4.ttl", ip[8].to_string()));
            out.push(("ipv4.proto", ip[9].to_string()));
            out.push(("ipv4.checksum", format!("{:#06x}", be16(ip, 10))));
            out.push((
                "ipv4.src",
                std::net::Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]).to_string(),
            ));
            out.push((
                "ipv4.dst",
                std::net::Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]).to_string(),
            ));
            (ip[9], ip.get(ihl.max(20)..))
        }
        0x86dd if ip.len() >= 40 => {
            let addr = |at: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&ip[at..at + 16]);
                std::net::Ipv6Addr::from(b).to_string()
            };
            out.push(("ipv6.hop_limit", ip[7].to_string()));
            out.push(("ipv6.next_header", ip[6].to_string()));
            out.push(("ipv6.src", addr(8)));
            out.push(("ipv6.dst", addr(24)));
            (ip[6], ip.get(40..))
        }
        _ => return out,
    };
    if let (6 | 17, Some(l4)) = (proto, l4) {
        if l4.len() >= 4 {
            let name =
                if proto == 6 { ["tcp.sport", "tcp.dport"] } else { ["udp.sport", "udp.dport"] };
            out.push((name[0], be16(l4, 0).to_string()));
            out.push((name[1], be16(l4, 2).to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ttl: u8, dst_mac: u8) -> Vec<u8> {
        let mut f = vec![dst_mac; 6];
        f.extend([2, 0, 0, 0, 0, 1, 0x08, 0x00]);
        f.extend([0x45, 0, 0, 28, 0, 0, 0, 0, ttl, 17, 0x12, 0x34, 10, 0, 0, 1, 10, 0, 1, 4]);
        f.extend([0x04, 0x00, 0x13, 0x88, 0, 8, 0, 0]);
        f
    }

    #[test]
    fn changes_name_the_fields_that_differ() {
        assert!(changes(&frame(64, 1), &frame(64, 1)).is_empty());
        let c = changes(&frame(64, 1), &frame(63, 8));
        assert_eq!(
            c,
            vec!["eth.dst: 01:01:01:01:01:01 -> 08:08:08:08:08:08", "ipv4.ttl: 64 -> 63"]
        );
        let mut payload = frame(64, 1);
        payload.push(0);
        let mut other = payload.clone();
        other[42] = 7;
        assert_eq!(changes(&payload, &other), vec!["bytes 42..43 changed"]);
        let c = changes(&frame(64, 1), &frame(64, 1)[..20]);
        assert!(c.contains(&"length: 42 -> 20 bytes".to_string()), "{c:?}");
        assert!(c.contains(&"ipv4.ttl: 64 -> (gone)".to_string()), "{c:?}");
    }

    #[test]
    fn a_tracer_records_no_more_than_it_was_asked_for() {
        let t = Tracer::default();
        assert!(!t.armed());
        t.start(FlowSelector::any(), 3, 1);
        assert!(t.armed());
        t.stop();
        assert!(!t.armed());
        t.start(FlowSelector::any(), MAX_COUNT + 5, 0);
        assert_eq!(t.read(10).1, MAX_COUNT, "capped");
    }
}
