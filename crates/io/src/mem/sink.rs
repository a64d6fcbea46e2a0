//! The measuring sink behind a `mem` port's transmit side: per-flow counts, loss, duplicates,
//! reordering, latency, and which program marks the packets carried.

use hdrhistogram::Histogram;
use hotplane_core::wire::{IpProtocol, Stamp};
use hotplane_core::{classify, Layers, Packet};
use std::collections::BTreeMap;

/// What a sink keeps beyond counters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SinkSpec {
    /// Read the stamp of every packet (per-flow loss, latency, marks). Off for benchmarks of
    /// unstamped traffic, where it would only cost time.
    pub measure: bool,
    /// Keep a per-packet sample (flow, seq, times, mark) for the first N stamped packets.
    pub record: usize,
    /// Keep the bytes of the first N unstamped frames (acknowledgements, replies).
    pub capture: usize,
}

impl Default for SinkSpec {
    fn default() -> Self {
        Self { measure: true, record: 0, capture: 0 }
    }
}

/// One recorded packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Sample {
    pub flow: u16,
    pub seq: u64,
    pub tx_ts: u64,
    pub rx_ts: u64,
    pub mark: u16,
}

/// How often, and from when, a flow's packets carried one mark value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MarkSeen {
    pub mark: u16,
    pub packets: u64,
    /// Sequence number and transmit time of the first packet seen with this mark.
    pub first_seq: u64,
    pub first_tx_ts: u64,
}

/// Most distinct marks tracked per flow; further ones are lumped into `other_marks`.
const MAX_MARKS: usize = 8;

/// Per-flow receive state.
#[derive(Clone)]
pub struct FlowRecord {
    pub received: u64,
    pub duplicates: u64,
    pub reordered: u64,
    /// Highest sequence number seen, extended past 32-bit wrap.
    max_seq: Option<u64>,
    seen: Vec<u64>,
    pub latency: Histogram<u64>,
    pub marks: Vec<MarkSeen>,
    pub other_marks: u64,
}

impl FlowRecord {
    fn new() -> Self {
        Self {
            received: 0,
            duplicates: 0,
            reordered: 0,
            max_seq: None,
            seen: Vec::new(),
            latency: new_histogram(),
            marks: Vec::new(),
            other_marks: 0,
        }
    }

    /// Number of distinct sequence numbers received.
    pub fn unique(&self) -> u64 {
        self.received - self.duplicates
    }

    /// Highest sequence number received (extended past 32-bit wrap).
    pub fn highest_seq(&self) -> Option<u64> {
        self.max_seq
    }

    fn extend(&self, seq: u32) -> u64 {
        match self.max_seq {
            None => seq as u64,
            Some(max) => {
                let delta = seq.wrapping_sub(max as u32) as i32 as i64;
                (max as i64 + delta).max(0) as u64
            }
        }
    }

    fn note(&mut self, seq32: u32, latency: u64, mark: u16, tx_ts: u64) -> u64 {
        let seq = self.extend(seq32);
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicates += 1;
        } else {
            self.seen[word] |= 1 << bit;
        }
        self.received += 1;
        match self.max_seq {
            Some(max) if seq < max => self.reordered += 1,
            _ => self.max_seq = Some(seq),
        }
        let _ = self.latency.record(latency.max(1));
        match self.marks.iter().position(|m| m.mark == mark) {
            Some(i) => self.marks[i].packets += 1,
            None if self.marks.len() < MAX_MARKS => {
                self.marks.push(MarkSeen { mark, packets: 1, first_seq: seq, first_tx_ts: tx_ts })
            }
            None => self.other_marks += 1,
        }
        seq
    }
}

pub(crate) fn new_histogram() -> Histogram<u64> {
    // 1 ns to 60 s at 3 significant digits.
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static histogram bounds are valid")
}

/// Per-queue sink state.
pub struct Sink {
    spec: SinkSpec,
    pub flows: BTreeMap<u16, FlowRecord>,
    pub samples: Vec<Sample>,
    pub captured: Vec<Vec<u8>>,
    pub unstamped: u64,
}

impl Sink {
    pub fn new(spec: SinkSpec) -> Self {
        Self {
            samples: Vec::with_capacity(spec.record.min(1 << 24)),
            spec,
            flows: BTreeMap::new(),
            captured: Vec::new(),
            unstamped: 0,
        }
    }

    pub fn measures(&self) -> bool {
        self.spec.measure
    }

    /// Account for one transmitted packet.
    #[inline]
    pub fn note(&mut self, p: &Packet, now: u64) {
        let data = p.data();
        let transport = Layers::UDP | Layers::TCP;
        let off = if p.meta.layers & transport != 0 && p.meta.payload_off != 0 {
            p.meta.payload_off as usize
        } else {
            let mut m = p.meta;
            let key = classify(data, &mut m);
            if m.layers & transport != 0 {
                m.payload_off as usize
            } else if matches!(key.proto, IpProtocol::ICMP | IpProtocol::ICMPV6) && m.l4_off != 0 {
                // An echo request's payload follows its 8-byte header.
                m.l4_off as usize + 8
            } else {
                self.unstamped(data);
                return;
            }
        };
        let Ok(stamp) = Stamp::new_checked(data.get(off..).unwrap_or_default()) else {
            self.unstamped(data);
            return;
        };
        let (flow, tx_ts, mark) = (stamp.flow(), stamp.tx_ts(), stamp.mark());
        let latency = now.saturating_sub(tx_ts);
        let rec = self.flows.entry(flow).or_insert_with(FlowRecord::new);
        let seq = rec.note(stamp.seq(), latency, mark, tx_ts);
        if self.samples.len() < self.spec.record {
            self.samples.push(Sample { flow, seq, tx_ts, rx_ts: now, mark });
        }
    }

    fn unstamped(&mut self, data: &[u8]) {
        self.unstamped += 1;
        if self.captured.len() < self.spec.capture {
            self.captured.push(data.to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_dup_reorder_accounting() {
        let mut r = FlowRecord::new();
        for s in [0u32, 1, 3, 2, 3, 5] {
            r.note(s, 100, 0, 0);
        }
        assert_eq!(r.received, 6);
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.reordered, 1, "2 arrived after 3");
        assert_eq!(r.unique(), 5);
        assert_eq!(r.max_seq, Some(5));
    }

    #[test]
    fn sequence_wrap_is_extended() {
        let mut r = FlowRecord::new();
        r.note(u32::MAX - 1, 1, 0, 0);
        r.note(u32::MAX, 1, 0, 0);
        r.note(0, 1, 0, 0);
        assert_eq!(r.max_seq, Some(u32::MAX as u64 + 1));
        assert_eq!(r.reordered, 0);
    }

    #[test]
    fn marks_are_tracked_with_first_occurrence() {
        let mut r = FlowRecord::new();
        r.note(0, 1, 7, 10);
        r.note(1, 1, 7, 11);
        r.note(2, 1, 9, 12);
        assert_eq!(r.marks.len(), 2);
        assert_eq!(r.marks[1], MarkSeen { mark: 9, packets: 1, first_seq: 2, first_tx_ts: 12 });
    }
}
