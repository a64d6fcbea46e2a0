//! Turning datagrams into updates: authenticate (before parsing anything), parse, refuse
//! replays, reassemble fragments under limits, and count every refusal by its reason.

use crate::envelope::{self, EnvelopeError, Kind, UpdateHeader};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Why an update (or one fragment) was refused. The numeric value travels in acks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum Reason {
    Truncated = 1,
    BadMagic = 2,
    BadVersion = 3,
    UnknownKey = 4,
    BadMac = 5,
    Unauthenticated = 6,
    Replay = 7,
    Oversized = 8,
    Malformed = 9,
    Inconsistent = 10,
    TooManyPending = 11,
    UnsupportedKind = 12,
    BadTarget = 13,
    ApplyFailed = 14,
    TimedOut = 15,
    /// The code did not load: the verifier or a loader refused it (the message says why).
    Rejected = 16,
}

impl Reason {
    pub const ALL: [Reason; 16] = [
        Reason::Truncated,
        Reason::BadMagic,
        Reason::BadVersion,
        Reason::UnknownKey,
        Reason::BadMac,
        Reason::Unauthenticated,
        Reason::Replay,
        Reason::Oversized,
        Reason::Malformed,
        Reason::Inconsistent,
        Reason::TooManyPending,
        Reason::UnsupportedKind,
        Reason::BadTarget,
        Reason::ApplyFailed,
        Reason::TimedOut,
        Reason::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Truncated => "truncated",
            Reason::BadMagic => "bad_magic",
            Reason::BadVersion => "bad_version",
            Reason::UnknownKey => "unknown_key",
            Reason::BadMac => "bad_mac",
            Reason::Unauthenticated => "unauthenticated",
            Reason::Replay => "replay",
            Reason::Oversized => "oversized",
            Reason::Malformed => "malformed",
            Reason::Inconsistent => "inconsistent_fragment",
            Reason::TooManyPending => "too_many_pending",
            Reason::UnsupportedKind => "unsupported_kind",
            Reason::BadTarget => "bad_target",
            Reason::ApplyFailed => "apply_failed",
            Reason::TimedOut => "timed_out",
            Reason::Rejected => "rejected",
        }
    }

    pub fn code(self) -> u16 {
        self as u16
    }

    pub fn from_code(c: u16) -> Option<Self> {
        Self::ALL.iter().copied().find(|r| r.code() == c)
    }
}

impl core::fmt::Display for Reason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused datagram or update: the reason, a message for people, and what is known of its
/// identity (to address an acknowledgement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    pub message: String,
    pub key_id: Option<u32>,
    pub seq: Option<u64>,
    /// Set when the datagram's MAC verified: the ack may then be MACed with that key.
    pub authenticated: bool,
    pub no_ack: bool,
}

impl Refusal {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            key_id: None,
            seq: None,
            authenticated: false,
            no_ack: false,
        }
    }

    /// A refusal of an authenticated, parsed update (apply errors, bad targets).
    pub fn of(header: &UpdateHeader, reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            key_id: Some(header.key_id),
            seq: Some(header.seq),
            authenticated: header.key_id != 0,
            no_ack: header.flags.no_ack(),
        }
    }
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// A complete, authenticated, reassembled update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub header: UpdateHeader,
    pub payload: Vec<u8>,
}

/// What one accepted datagram produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    Complete(Update),
    /// A fragment was stored; `received` of `total` bytes are in.
    Partial {
        header: UpdateHeader,
        received: u32,
        total: u32,
    },
}

/// Receiver limits and policy.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiverConfig {
    /// Accept key-id-0 updates without a MAC. Off unless the operator says otherwise.
    pub allow_unauthenticated: bool,
    /// Largest update payload (all fragments).
    pub max_update_bytes: u32,
    /// Updates being reassembled at once.
    pub max_pending: usize,
    /// Time allowed from the first to the last fragment.
    pub reassembly_timeout: Duration,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            allow_unauthenticated: false,
            max_update_bytes: 1 << 20,
            max_pending: 16,
            reassembly_timeout: Duration::from_secs(2),
        }
    }
}

/// Counters of what the receiver saw.
#[derive(Debug, Default)]
pub struct UpdateCounters {
    pub datagrams: AtomicU64,
    pub completed: AtomicU64,
    pub partial: AtomicU64,
    refused: [AtomicU64; Reason::ALL.len() + 1],
}

impl UpdateCounters {
    pub fn refuse(&self, r: Reason) {
        self.refused[r.code() as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn refused(&self, r: Reason) -> u64 {
        self.refused[r.code() as usize].load(Ordering::Relaxed)
    }

    pub fn refused_total(&self) -> u64 {
        Reason::ALL.iter().map(|r| self.refused(*r)).sum()
    }

    /// `(reason, count)` for every reason with a non-zero count.
    pub fn refused_by_reason(&self) -> BTreeMap<&'static str, u64> {
        Reason::ALL.iter().map(|r| (r.as_str(), self.refused(*r))).filter(|(_, n)| *n > 0).collect()
    }
}

/// Most disjoint byte ranges one update in reassembly may hold. Fragments arriving in order,
/// in reverse or lightly reordered keep this small; a sender spraying tiny fragments with gaps
/// between them is refused beyond it, so storing a fragment costs at most this many range
/// steps plus its own bytes, whatever the fragment size.
pub const MAX_FRAGMENT_RANGES: usize = 64;

/// Why a fragment could not be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreError {
    /// Overlapping bytes differ from those already received.
    Conflict,
    /// The fragment would open one more disjoint range than `MAX_FRAGMENT_RANGES`.
    Scattered,
}

struct Pending {
    header: UpdateHeader,
    buf: Vec<u8>,
    /// Sorted, disjoint, non-adjacent received byte ranges [start, end), at most
    /// `MAX_FRAGMENT_RANGES` of them.
    have: Vec<(u32, u32)>,
    /// Bytes covered by `have`.
    received: u32,
    started: Instant,
}

impl Pending {
    /// Store bytes at `offset` (inside the update: the parser checked it); overlapping bytes
    /// must equal what is already there. Touching ranges merge into one.
    fn store(&mut self, offset: u32, data: &[u8]) -> Result<(), StoreError> {
        let (start, end) = (offset, offset + data.len() as u32);
        if start == end {
            return Ok(());
        }
        // Ranges [first, last) touch or overlap the new bytes.
        let first = self.have.partition_point(|r| r.1 < start);
        let last = self.have.partition_point(|r| r.0 <= end);
        for &(a, b) in &self.have[first..last] {
            let (lo, hi) = (a.max(start), b.min(end));
            if lo < hi
                && self.buf[lo as usize..hi as usize]
                    != data[(lo - start) as usize..(hi - start) as usize]
            {
                return Err(StoreError::Conflict);
            }
        }
        if first == last && self.have.len() >= MAX_FRAGMENT_RANGES {
            return Err(StoreError::Scattered);
        }
        self.buf[start as usize..end as usize].copy_from_slice(data);
        let (mut lo, mut hi, mut known) = (start, end, 0u32);
        for &(a, b) in &self.have[first..last] {
            lo = lo.min(a);
            hi = hi.max(b);
            known += b - a;
        }
        self.received += (hi - lo) - known;
        self.have.splice(first..last, [(lo, hi)]);
        Ok(())
    }

    fn complete(&self) -> bool {
        self.received as usize == self.buf.len()
    }
}

/// Stateful update receiver; owned by the control thread.
pub struct Receiver {
    cfg: ReceiverConfig,
    keys: HashMap<u32, [u8; 32]>,
    last_seq: HashMap<u32, u64>,
    pending: HashMap<(u32, u64), Pending>,
    counters: std::sync::Arc<UpdateCounters>,
}

impl Receiver {
    pub fn new(cfg: ReceiverConfig, keys: HashMap<u32, [u8; 32]>) -> Self {
        Self {
            cfg,
            keys,
            last_seq: HashMap::new(),
            pending: HashMap::new(),
            counters: Default::default(),
        }
    }

    pub fn counters(&self) -> std::sync::Arc<UpdateCounters> {
        self.counters.clone()
    }

    pub fn config(&self) -> &ReceiverConfig {
        &self.cfg
    }

    /// The key for `key_id`, to MAC acknowledgements.
    pub fn key(&self, key_id: u32) -> Option<&[u8; 32]> {
        self.keys.get(&key_id)
    }

    /// Highest sequence number applied per key (to persist replay protection).
    pub fn last_sequences(&self) -> BTreeMap<u32, u64> {
        self.last_seq.iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// Restore persisted sequence numbers (never lowers one already known).
    pub fn restore_sequences(&mut self, seqs: &BTreeMap<u32, u64>) {
        for (k, v) in seqs {
            let e = self.last_seq.entry(*k).or_insert(0);
            *e = (*e).max(*v);
        }
    }

    /// Updates being reassembled.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Accept one datagram. Every refusal is counted.
    pub fn receive(&mut self, datagram: &[u8], now: Instant) -> Result<Received, Refusal> {
        self.counters.datagrams.fetch_add(1, Ordering::Relaxed);
        let r = self.receive_inner(datagram, now);
        match &r {
            Ok(Received::Complete(_)) => {
                self.counters.completed.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Received::Partial { .. }) => {
                self.counters.partial.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.counters.refuse(e.reason),
        }
        r
    }

    /// Count a refusal decided after reception (bad target, apply failure).
    pub fn count_refusal(&self, reason: Reason) {
        self.counters.refuse(reason);
    }

    fn receive_inner(&mut self, datagram: &[u8], now: Instant) -> Result<Received, Refusal> {
        let (key_id, body, mac) = envelope::split_mac(datagram).map_err(|e| {
            let reason = match e {
                EnvelopeError::Truncated(_) => Reason::Truncated,
                EnvelopeError::BadMagic => Reason::BadMagic,
                _ => Reason::BadVersion,
            };
            Refusal::new(reason, e.to_string())
        })?;
        let seq_hint = || u64::from_be_bytes(datagram[12..20].try_into().unwrap_or([0; 8]));
        let unauth = |reason, msg: String| Refusal {
            key_id: Some(key_id),
            seq: Some(seq_hint()),
            ..Refusal::new(reason, msg)
        };
        if key_id == 0 {
            if !self.cfg.allow_unauthenticated {
                return Err(unauth(
                    Reason::Unauthenticated,
                    "unauthenticated update (key id 0) refused; set control.allow_unauthenticated = true to accept".into(),
                ));
            }
        } else {
            let Some(key) = self.keys.get(&key_id) else {
                return Err(unauth(
                    Reason::UnknownKey,
                    format!("no key with id {key_id} is configured"),
                ));
            };
            if !envelope::mac_ok(key, body, mac) {
                return Err(unauth(Reason::BadMac, "MAC does not verify".into()));
            }
        }
        // From here on the datagram is authentic (or authentication was waived).
        let frag = envelope::parse(datagram).map_err(|e| {
            let reason = match e {
                EnvelopeError::LengthMismatch { .. } => Reason::Truncated,
                EnvelopeError::Target(_) => Reason::BadTarget,
                _ => Reason::Malformed,
            };
            Refusal { authenticated: key_id != 0, ..unauth(reason, e.to_string()) }
        })?;
        let h = frag.header.clone();
        let refuse = |reason, msg: String| Refusal::of(&h, reason, msg);
        if let Some(&last) = self.last_seq.get(&key_id) {
            if h.seq <= last {
                return Err(refuse(
                    Reason::Replay,
                    format!(
                        "sequence {} is not above {last}, the last applied for key {key_id}",
                        h.seq
                    ),
                ));
            }
        }
        if frag.total_len > self.cfg.max_update_bytes {
            return Err(refuse(
                Reason::Oversized,
                format!(
                    "update of {} bytes exceeds the {}-byte limit",
                    frag.total_len, self.cfg.max_update_bytes
                ),
            ));
        }
        if let Kind::Other(c) = h.kind {
            return Err(refuse(Reason::UnsupportedKind, format!("update kind {c} is unknown")));
        }
        if frag.offset == 0 && frag.data.len() as u32 == frag.total_len {
            self.consume(key_id, h.seq);
            return Ok(Received::Complete(Update { header: h, payload: frag.data.to_vec() }));
        }
        self.expire(now);
        let id = (key_id, h.seq);
        if !self.pending.contains_key(&id) {
            if self.pending.len() >= self.cfg.max_pending {
                return Err(refuse(
                    Reason::TooManyPending,
                    format!("{} updates are already being reassembled", self.pending.len()),
                ));
            }
            self.pending.insert(
                id,
                Pending {
                    header: h.clone(),
                    buf: vec![0; frag.total_len as usize],
                    have: Vec::new(),
                    received: 0,
                    started: now,
                },
            );
        }
        let Some(p) = self.pending.get_mut(&id) else {
            return Err(refuse(Reason::Malformed, "reassembly state vanished".into()));
        };
        if p.header != h || p.buf.len() as u32 != frag.total_len {
            return Err(refuse(
                Reason::Inconsistent,
                "fragment header differs from earlier fragments".into(),
            ));
        }
        match p.store(frag.offset, frag.data) {
            Ok(()) => {}
            Err(StoreError::Conflict) => {
                return Err(refuse(
                    Reason::Inconsistent,
                    "fragment overlaps earlier bytes with different content".into(),
                ))
            }
            Err(StoreError::Scattered) => {
                return Err(refuse(
                    Reason::TooManyPending,
                    format!(
                        "fragment would leave more than {MAX_FRAGMENT_RANGES} disjoint byte ranges in reassembly; send fragments in order"
                    ),
                ))
            }
        }
        if p.complete() {
            let Some(p) = self.pending.remove(&id) else {
                return Err(refuse(Reason::Malformed, "reassembly state vanished".into()));
            };
            self.consume(key_id, h.seq);
            return Ok(Received::Complete(Update { header: p.header, payload: p.buf }));
        }
        Ok(Received::Partial { header: h, received: p.received, total: frag.total_len })
    }

    /// Mark `seq` as used for `key_id` and drop reassemblies it overtook.
    fn consume(&mut self, key_id: u32, seq: u64) {
        let last = self.last_seq.entry(key_id).or_insert(0);
        *last = (*last).max(seq);
        let last = *last;
        let before = self.pending.len();
        self.pending.retain(|(k, s), _| *k != key_id || *s > last);
        for _ in self.pending.len()..before {
            self.counters.refuse(Reason::Replay);
        }
    }

    /// Drop reassemblies older than the timeout; returns the refusals (for acks and logs).
    pub fn expire(&mut self, now: Instant) -> Vec<Refusal> {
        let timeout = self.cfg.reassembly_timeout;
        let expired: Vec<(u32, u64)> = self
            .pending
            .iter()
            .filter(|(_, p)| now.duration_since(p.started) > timeout)
            .map(|(id, _)| *id)
            .collect();
        expired
            .into_iter()
            .filter_map(|id| self.pending.remove(&id))
            .map(|p| {
                self.counters.refuse(Reason::TimedOut);
                Refusal::of(
                    &p.header,
                    Reason::TimedOut,
                    format!(
                        "only {} of {} bytes arrived within {:?}",
                        p.received,
                        p.buf.len(),
                        timeout
                    ),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{build, Flags, Target, WorkerScope};
    use hotplane_core::Position;

    const KEY: [u8; 32] = [3; 32];

    fn rx(cfg: ReceiverConfig) -> Receiver {
        Receiver::new(cfg, [(1, KEY)].into_iter().collect())
    }

    fn header(seq: u64, key_id: u32) -> UpdateHeader {
        UpdateHeader {
            kind: Kind::NativeStage,
            flags: Flags::default(),
            key_id,
            seq,
            target: Target::Position(Position::Pre),
            worker: WorkerScope::All,
        }
    }

    fn update(seq: u64, payload: &[u8], frag: usize) -> Vec<Vec<u8>> {
        build(&header(seq, 1), payload, Some(&KEY), frag).unwrap()
    }

    #[test]
    fn accepts_then_refuses_replay() {
        let mut r = rx(Default::default());
        let d = update(5, b"{}", 1400).remove(0);
        assert!(matches!(r.receive(&d, Instant::now()), Ok(Received::Complete(_))));
        let e = r.receive(&d, Instant::now()).unwrap_err();
        assert_eq!(e.reason, Reason::Replay);
        assert!(e.authenticated);
        let older = update(4, b"{}", 1400).remove(0);
        assert_eq!(r.receive(&older, Instant::now()).unwrap_err().reason, Reason::Replay);
        assert!(matches!(
            r.receive(&update(6, b"{}", 1400)[0], Instant::now()),
            Ok(Received::Complete(_))
        ));
        assert_eq!(r.counters().refused(Reason::Replay), 2);
        assert_eq!(r.last_sequences()[&1], 6);
    }

    #[test]
    fn auth_failures_are_refused_before_parsing() {
        let mut r = rx(Default::default());
        let mut d = update(1, b"{}", 1400).remove(0);
        let n = d.len();
        d[n - 1] ^= 1;
        assert_eq!(r.receive(&d, Instant::now()).unwrap_err().reason, Reason::BadMac);
        let other = build(&header(1, 9), b"{}", Some(&KEY), 1400).unwrap().remove(0);
        assert_eq!(r.receive(&other, Instant::now()).unwrap_err().reason, Reason::UnknownKey);
        let unauth = build(&header(1, 0), b"{}", None, 1400).unwrap().remove(0);
        let e = r.receive(&unauth, Instant::now()).unwrap_err();
        assert_eq!(e.reason, Reason::Unauthenticated);
        assert!(e.message.contains("allow_unauthenticated"));
        let mut open = rx(ReceiverConfig { allow_unauthenticated: true, ..Default::default() });
        assert!(matches!(open.receive(&unauth, Instant::now()), Ok(Received::Complete(_))));
        // Garbage is refused with a counter, not a crash.
        assert_eq!(r.receive(b"short", Instant::now()).unwrap_err().reason, Reason::Truncated);
        assert_eq!(r.receive(&[0u8; 80], Instant::now()).unwrap_err().reason, Reason::BadMagic);
        assert_eq!(r.counters().refused_total(), 5);
    }

    #[test]
    fn truncated_datagram_fails_the_mac() {
        let mut r = rx(Default::default());
        let d = update(1, b"{\"stage\":\"drop\"}", 1400).remove(0);
        for cut in 1..d.len() {
            let e = r.receive(&d[..d.len() - cut], Instant::now()).unwrap_err();
            assert!(matches!(e.reason, Reason::BadMac | Reason::Truncated), "cut {cut}: {e}");
        }
    }

    #[test]
    fn reassembles_out_of_order_with_duplicates() {
        let mut r = rx(Default::default());
        let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let mut frags = update(10, &payload, 1000);
        frags.reverse();
        frags.insert(2, frags[1].clone());
        let mut done = None;
        for f in &frags {
            match r.receive(f, Instant::now()).unwrap() {
                Received::Complete(u) => done = Some(u),
                Received::Partial { received, total, .. } => assert!(received < total),
            }
        }
        assert_eq!(done.unwrap().payload, payload);
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn limits_hold() {
        let mut r =
            rx(ReceiverConfig { max_update_bytes: 100, max_pending: 1, ..Default::default() });
        let big = update(1, &[0u8; 101], 1400).remove(0);
        assert_eq!(r.receive(&big, Instant::now()).unwrap_err().reason, Reason::Oversized);
        let a = update(2, &[1u8; 80], 40);
        let b = update(3, &[2u8; 80], 40);
        assert!(matches!(r.receive(&a[0], Instant::now()), Ok(Received::Partial { .. })));
        assert_eq!(r.receive(&b[0], Instant::now()).unwrap_err().reason, Reason::TooManyPending);
        // Timeout frees the slot.
        let later = Instant::now() + Duration::from_secs(3);
        let expired = r.expire(later);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].reason, Reason::TimedOut);
        assert!(matches!(r.receive(&b[0], later), Ok(Received::Partial { .. })));
    }

    #[test]
    fn conflicting_fragment_is_refused() {
        let mut r = rx(Default::default());
        let a = update(7, &[1u8; 80], 40);
        let evil = build(&header(7, 1), &[9u8; 80], Some(&KEY), 40).unwrap();
        r.receive(&a[0], Instant::now()).unwrap();
        assert_eq!(r.receive(&evil[0], Instant::now()).unwrap_err().reason, Reason::Inconsistent);
        assert!(
            matches!(r.receive(&a[1], Instant::now()), Ok(Received::Complete(u)) if u.payload == vec![1u8; 80])
        );
    }

    /// One-byte fragments at every other offset would each open a new hole in the update;
    /// reassembly keeps a bounded number of received ranges (so each fragment costs a bounded
    /// amount of work) and refuses fragments beyond it, yet the update still completes once
    /// the holes are filled.
    #[test]
    fn scattered_one_byte_fragments_are_bounded_and_still_complete() {
        let mut r = rx(Default::default());
        let payload: Vec<u8> = (0..4096u32).map(|i| (i * 13) as u8).collect();
        let frags = update(30, &payload, 1);
        assert_eq!(frags.len(), payload.len());
        let (mut stored, mut scattered) = (0, 0);
        for f in frags.iter().step_by(2) {
            match r.receive(f, Instant::now()) {
                Ok(Received::Partial { .. }) => stored += 1,
                Err(e) if e.reason == Reason::TooManyPending => {
                    assert!(e.message.contains("ranges"), "{}", e.message);
                    scattered += 1
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(stored <= 64, "{stored} disjoint one-byte fragments held at once");
        assert_eq!(stored + scattered, payload.len() / 2);
        // Sending the whole update again in order fills the holes, merging the ranges.
        let mut done = None;
        for f in &frags {
            match r.receive(f, Instant::now()) {
                Ok(Received::Complete(u)) => done = Some(u),
                Ok(Received::Partial { received, total, .. }) => assert!(received < total),
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(done.expect("update completes").payload, payload);
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn one_byte_fragments_complete_in_either_order() {
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 5) as u8).collect();
        for reverse in [false, true] {
            let mut r = rx(Default::default());
            let mut frags = update(40, &payload, 1);
            if reverse {
                frags.reverse();
            }
            let last = frags.pop().unwrap();
            for f in &frags {
                assert!(matches!(r.receive(f, Instant::now()), Ok(Received::Partial { .. })));
            }
            match r.receive(&last, Instant::now()) {
                Ok(Received::Complete(u)) => assert_eq!(u.payload, payload),
                other => panic!("reverse={reverse}: {other:?}"),
            }
        }
    }

    proptest::proptest! {
        /// Any arrival order, with duplicates: the update either completes with exactly its
        /// payload or a fragment is refused for scattering; the count of received bytes never
        /// exceeds the update. A sender that then repeats the update in order completes it
        /// within two passes: fragments before the first held range may be refused while 64
        /// ranges are held, but the first pass merges everything from that range on into one.
        #[test]
        fn reassembly_matches_the_payload_in_any_order(
            len in 1usize..600,
            frag in 1usize..50,
            order in proptest::collection::vec(proptest::num::usize::ANY, 1..1200),
        ) {
            let payload: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
            let frags = update(50, &payload, frag);
            let mut r = rx(Default::default());
            let in_order = (0..frags.len()).chain(0..frags.len());
            for pick in order.iter().map(|o| o % frags.len()).chain(in_order) {
                match r.receive(&frags[pick], Instant::now()) {
                    Ok(Received::Complete(u)) => {
                        proptest::prop_assert_eq!(u.payload, payload);
                        return Ok(());
                    }
                    Ok(Received::Partial { received, total, .. }) => {
                        proptest::prop_assert!(received < total)
                    }
                    Err(e) => proptest::prop_assert_eq!(e.reason, Reason::TooManyPending),
                }
            }
            proptest::prop_assert!(false, "two in-order passes complete the update");
        }
    }

    #[test]
    fn newer_update_overtakes_pending_one() {
        let mut r = rx(Default::default());
        let slow = update(8, &[1u8; 80], 40);
        r.receive(&slow[0], Instant::now()).unwrap();
        r.receive(&update(9, b"{}", 1400)[0], Instant::now()).unwrap();
        assert_eq!(r.pending(), 0);
        assert_eq!(r.receive(&slow[1], Instant::now()).unwrap_err().reason, Reason::Replay);
    }
}
