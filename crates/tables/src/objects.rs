//! The stateful objects P4 programs declare next to tables: register arrays, counter arrays,
//! meters (two-rate three-colour, RFC 2698) and digests (data plane -> control plane
//! notifications). All are safe to use from every worker at once; none ever makes a worker wait
//! for the control plane.

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};

/// An array of registers of up to 64 bits. Reads and writes are single atomic operations;
/// `update` is an atomic read-modify-write (compare-and-swap loop, lock-free).
pub struct RegisterArray {
    bits: u32,
    cells: Box<[AtomicU64]>,
}

impl RegisterArray {
    pub fn new(size: usize, bits: u32) -> Self {
        Self { bits: bits.clamp(1, 64), cells: (0..size).map(|_| AtomicU64::new(0)).collect() }
    }

    #[inline(always)]
    fn mask(&self) -> u64 {
        if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }

    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The value at `i`; out-of-range indices read 0 (as BMv2 does).
    #[inline(always)]
    pub fn read(&self, i: usize) -> u64 {
        self.cells.get(i).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Store at `i`, truncated to the register width; out-of-range writes are ignored.
    #[inline(always)]
    pub fn write(&self, i: usize, v: u64) {
        if let Some(c) = self.cells.get(i) {
            c.store(v & self.mask(), Ordering::Relaxed);
        }
    }

    /// Atomically replace the value at `i` by `f(old)`; returns the old value.
    #[inline(always)]
    pub fn update(&self, i: usize, mut f: impl FnMut(u64) -> u64) -> u64 {
        let mask = self.mask();
        match self.cells.get(i) {
            Some(c) => c
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |v| Some(f(v) & mask))
                .unwrap_or(0),
            None => 0,
        }
    }
}

/// What a counter array counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterKind {
    Packets,
    Bytes,
    PacketsAndBytes,
}

/// An array of packet/byte counters.
pub struct CounterArray {
    pub kind: CounterKind,
    cells: Box<[[AtomicU64; 2]]>,
}

impl CounterArray {
    pub fn new(size: usize, kind: CounterKind) -> Self {
        Self { kind, cells: (0..size).map(|_| [AtomicU64::new(0), AtomicU64::new(0)]).collect() }
    }

    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Count one packet of `bytes` at `i` (out-of-range indices are ignored).
    #[inline(always)]
    pub fn count(&self, i: usize, bytes: u32) {
        if let Some(c) = self.cells.get(i) {
            if self.kind != CounterKind::Bytes {
                c[0].fetch_add(1, Ordering::Relaxed);
            }
            if self.kind != CounterKind::Packets {
                c[1].fetch_add(bytes as u64, Ordering::Relaxed);
            }
        }
    }

    /// (packets, bytes) at `i`.
    pub fn read(&self, i: usize) -> (u64, u64) {
        self.cells
            .get(i)
            .map_or((0, 0), |c| (c[0].load(Ordering::Relaxed), c[1].load(Ordering::Relaxed)))
    }

    /// Set the cell at `i` (out-of-range indices are ignored): the control plane's write.
    pub fn set(&self, i: usize, packets: u64, bytes: u64) {
        if let Some(c) = self.cells.get(i) {
            c[0].store(packets, Ordering::Relaxed);
            c[1].store(bytes, Ordering::Relaxed);
        }
    }

    pub fn reset(&self, i: usize) {
        if let Some(c) = self.cells.get(i) {
            c[0].store(0, Ordering::Relaxed);
            c[1].store(0, Ordering::Relaxed);
        }
    }
}

/// The colour a meter gives a packet (RFC 2698 section 3; the values are v1model's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Color {
    Green = 0,
    Yellow = 1,
    Red = 2,
}

/// Rates and burst sizes of a two-rate three-colour meter. Units are bytes (or packets, for
/// packet meters) per second and bytes (packets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MeterRates {
    /// Committed information rate.
    pub cir: u64,
    /// Committed burst size.
    pub cbs: u64,
    /// Peak information rate (>= cir).
    pub pir: u64,
    /// Peak burst size.
    pub pbs: u64,
}

impl MeterRates {
    /// Whether a meter can take these rates (RFC 2698, and the bucket arithmetic's range).
    pub fn check(&self) -> Result<(), MeterError> {
        if self.pir < self.cir {
            return Err(MeterError::PirBelowCir { pir: self.pir, cir: self.cir });
        }
        if self.cbs == 0 || self.pbs == 0 {
            return Err(MeterError::ZeroBurst);
        }
        if self.cbs as u128 * SCALE > u64::MAX as u128
            || self.pbs as u128 * SCALE > u64::MAX as u128
        {
            return Err(MeterError::BurstTooLarge);
        }
        Ok(())
    }
}

/// Token buckets scale: tokens are kept in units of 1/1e9 byte so that `elapsed_ns * rate`
/// needs no division.
const SCALE: u128 = 1_000_000_000;

// The words of one meter: its rates (written by the control plane, one word each) and its
// buckets (written by workers under a worker-only lock). A meter is `METER_WORDS` words wherever
// it lives: in a `MeterArray` or in a table entry's body (a direct meter).
const LOCK: usize = 0;
const CIR: usize = 1;
const CBS: usize = 2;
const PIR: usize = 3;
const PBS: usize = 4;
/// Committed and peak buckets (scaled), and the time they were last filled.
const TC: usize = 5;
const TP: usize = 6;
const LAST_NS: usize = 7;
/// Rates changed: refill both buckets to their bursts at the next packet.
const RESET: usize = 8;
/// Words a meter occupies.
pub const METER_WORDS: usize = 9;

/// One meter over its words. All zero is an unconfigured meter (everything green).
#[derive(Clone, Copy)]
pub struct MeterCell<'a> {
    w: &'a [AtomicU64; METER_WORDS],
}

impl<'a> MeterCell<'a> {
    pub fn new(w: &'a [AtomicU64; METER_WORDS]) -> Self {
        Self { w }
    }

    /// Configure the meter (control plane). Both buckets start full (RFC 2698 section 3).
    pub fn set_rates(&self, r: MeterRates) -> Result<(), MeterError> {
        r.check()?;
        let w = self.w;
        w[CIR].store(r.cir, Ordering::Relaxed);
        w[CBS].store(r.cbs, Ordering::Relaxed);
        w[PIR].store(r.pir, Ordering::Relaxed);
        w[PBS].store(r.pbs, Ordering::Release);
        w[RESET].store(1, Ordering::Release);
        Ok(())
    }

    /// Unconfigure the meter: it colours everything green again (control plane).
    pub fn clear(&self) {
        let w = self.w;
        w[PBS].store(0, Ordering::Release);
        w[CIR].store(0, Ordering::Relaxed);
        w[CBS].store(0, Ordering::Relaxed);
        w[PIR].store(0, Ordering::Relaxed);
    }

    /// The rates, if configured.
    pub fn configured(&self) -> Option<MeterRates> {
        Some(self.rates()).filter(|r| r.pbs != 0)
    }

    pub fn rates(&self) -> MeterRates {
        let w = self.w;
        MeterRates {
            cir: w[CIR].load(Ordering::Relaxed),
            cbs: w[CBS].load(Ordering::Relaxed),
            pir: w[PIR].load(Ordering::Relaxed),
            pbs: w[PBS].load(Ordering::Acquire),
        }
    }

    /// Meter a packet of `bytes` at time `now_ns`. `pre_color` is the colour-aware mode's input
    /// (`None`: colour-blind).
    #[inline]
    pub fn execute(&self, bytes: u64, now_ns: u64, pre_color: Option<Color>) -> Color {
        let w = self.w;
        let pbs = w[PBS].load(Ordering::Acquire);
        if pbs == 0 {
            return Color::Green;
        }
        let (cir, cbs, pir) = (
            w[CIR].load(Ordering::Relaxed),
            w[CBS].load(Ordering::Relaxed),
            w[PIR].load(Ordering::Relaxed),
        );
        // Workers only: held for a few arithmetic operations.
        while w[LOCK].compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::hint::spin_loop();
        }
        let (cmax, pmax) = (cbs as u128 * SCALE, pbs as u128 * SCALE);
        let (mut tc, mut tp) = if w[RESET].swap(0, Ordering::Relaxed) != 0 {
            (cmax, pmax)
        } else {
            let elapsed = now_ns.saturating_sub(w[LAST_NS].load(Ordering::Relaxed)) as u128;
            (
                (w[TC].load(Ordering::Relaxed) as u128 + elapsed * cir as u128).min(cmax),
                (w[TP].load(Ordering::Relaxed) as u128 + elapsed * pir as u128).min(pmax),
            )
        };
        let b = bytes as u128 * SCALE;
        let color = if pre_color == Some(Color::Red) || tp < b {
            Color::Red
        } else if pre_color == Some(Color::Yellow) || tc < b {
            tp -= b;
            Color::Yellow
        } else {
            tp -= b;
            tc -= b;
            Color::Green
        };
        w[TC].store(tc as u64, Ordering::Relaxed);
        w[TP].store(tp as u64, Ordering::Relaxed);
        w[LAST_NS].store(now_ns, Ordering::Relaxed);
        w[LOCK].store(0, Ordering::Release);
        color
    }
}

/// An array of RFC 2698 meters. Until configured, a meter colours everything green (v1model).
pub struct MeterArray {
    meters: Box<[CachePadded<[AtomicU64; METER_WORDS]>]>,
}

/// Meter rates that RFC 2698 or the meter array does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeterError {
    #[error("meter index {0} out of range")]
    Index(usize),
    #[error("PIR {pir} must be at least CIR {cir} (RFC 2698)")]
    PirBelowCir { pir: u64, cir: u64 },
    #[error("burst sizes must be positive (RFC 2698)")]
    ZeroBurst,
    #[error("burst size too large")]
    BurstTooLarge,
}

impl MeterArray {
    pub fn new(size: usize) -> Self {
        Self {
            meters: (0..size)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.meters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.meters.is_empty()
    }

    fn cell(&self, i: usize) -> Option<MeterCell<'_>> {
        self.meters.get(i).map(|w| MeterCell::new(w))
    }

    /// Configure meter `i` (control plane). Both buckets start full (RFC 2698 section 3).
    pub fn set_rates(&self, i: usize, r: MeterRates) -> Result<(), MeterError> {
        self.cell(i).ok_or(MeterError::Index(i))?.set_rates(r)
    }

    /// Unconfigure meter `i`: it colours everything green again (control plane).
    pub fn clear(&self, i: usize) -> Result<(), MeterError> {
        self.cell(i).ok_or(MeterError::Index(i))?.clear();
        Ok(())
    }

    /// Meter `i`'s rates, if configured.
    pub fn configured(&self, i: usize) -> Option<MeterRates> {
        self.cell(i)?.configured()
    }

    pub fn rates(&self, i: usize) -> Option<MeterRates> {
        self.cell(i).map(|c| c.rates())
    }

    /// Meter a packet of `bytes` at time `now_ns` with meter `i` (green if out of range).
    pub fn execute(&self, i: usize, bytes: u64, now_ns: u64, pre_color: Option<Color>) -> Color {
        match self.cell(i) {
            Some(c) => c.execute(bytes, now_ns, pre_color),
            None => Color::Green,
        }
    }
}

/// A digest: a fixed-size record the data plane sends to the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DigestRecord {
    /// Which digest (a P4 `digest<T>` receiver id, a table's insert notification, ...).
    pub id: u32,
    /// Time of the packet that sent it.
    pub ts_ns: u64,
    pub words: [u64; 4],
}

/// Data plane -> control plane notifications over a bounded lock-free ring. A full ring drops
/// the digest and counts it: a slow controller never stalls a worker.
pub struct DigestRing {
    ring: ArrayQueue<DigestRecord>,
    sent: AtomicU64,
    dropped: AtomicU64,
}

impl DigestRing {
    pub fn new(capacity: usize) -> Self {
        Self {
            ring: ArrayQueue::new(capacity.max(1)),
            sent: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Send a digest; false (and counted) when the ring is full.
    #[inline]
    pub fn send(&self, d: DigestRecord) -> bool {
        match self.ring.push(d) {
            Ok(()) => {
                self.sent.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Take one digest (control plane).
    pub fn recv(&self) -> Option<DigestRecord> {
        self.ring.pop()
    }

    /// Take up to `max` digests.
    pub fn drain(&self, max: usize) -> Vec<DigestRecord> {
        std::iter::from_fn(|| self.ring.pop()).take(max).collect()
    }

    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn pending(&self) -> usize {
        self.ring.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_truncates_and_updates_atomically() {
        let r = RegisterArray::new(4, 8);
        r.write(1, 0x1ff);
        assert_eq!(r.read(1), 0xff);
        assert_eq!(r.update(1, |v| v + 1), 0xff);
        assert_eq!(r.read(1), 0);
        assert_eq!(r.read(99), 0);
        r.write(99, 1);
    }

    /// RFC 2698 colour-blind: CIR 1000 B/s, CBS 1500, PIR 2000 B/s, PBS 3000.
    #[test]
    fn trtcm_colours_follow_rfc2698() {
        let m = MeterArray::new(1);
        assert_eq!(m.execute(0, 100, 0, None), Color::Green, "unconfigured meters pass");
        m.set_rates(0, MeterRates { cir: 1000, cbs: 1500, pir: 2000, pbs: 3000 }).unwrap();
        // Full buckets: Tc 1500, Tp 3000.
        assert_eq!(m.execute(0, 1000, 0, None), Color::Green); // Tc 500, Tp 2000
        assert_eq!(m.execute(0, 1000, 0, None), Color::Yellow); // Tc 500, Tp 1000
        assert_eq!(m.execute(0, 1000, 0, None), Color::Yellow); // Tc 500, Tp 0
        assert_eq!(m.execute(0, 1, 0, None), Color::Red);
        // Half a second: Tc += 500 -> 1000, Tp += 1000 -> 1000.
        assert_eq!(m.execute(0, 1000, 500_000_000, None), Color::Green);
        // Colour-aware: a yellow packet never becomes green.
        assert_eq!(m.execute(0, 1, 10_000_000_000, Some(Color::Yellow)), Color::Yellow);
        assert_eq!(m.execute(0, 1, 10_000_000_000, Some(Color::Red)), Color::Red);
        assert!(m.set_rates(0, MeterRates { cir: 2, cbs: 1, pir: 1, pbs: 1 }).is_err());
    }

    #[test]
    fn digest_ring_counts_drops_instead_of_blocking() {
        let d = DigestRing::new(2);
        assert!(d.send(DigestRecord { id: 1, ..Default::default() }));
        assert!(d.send(DigestRecord { id: 2, ..Default::default() }));
        assert!(!d.send(DigestRecord { id: 3, ..Default::default() }));
        assert_eq!((d.sent(), d.dropped()), (2, 1));
        assert_eq!(d.drain(10).iter().map(|r| r.id).collect::<Vec<_>>(), vec![1, 2]);
    }
}
