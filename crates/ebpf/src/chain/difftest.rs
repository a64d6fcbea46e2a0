//! The differential checker: a specialised program behind its guard against the original, on
//! the same packets from the same map contents. Per packet the action, the bytes that leave and
//! the redirect target must agree, and at the end every map entry. It is what the tests, the
//! fuzz target and `hotplane ebpf chain` run before a specialisation is trusted; a mismatch
//! keeps the original and names the packet.
//!
//! Three packet sets (the brief's §5.4): samples of the assumed shape (known bits fixed, the
//! rest random or drawn from the constants the downstream compares against, so that its
//! interesting paths run), real outputs of the upstream program on generated traffic, and
//! violators (one fact of the shape broken, or the length moved past a bound) that must take
//! the original, or, where the guard does not check the broken byte, prove that the
//! specialisation never relied on it.

use super::guard::Guard;
use super::shape::PacketShape;
use super::specialise::{specialise_verified, SpecialiseOptions, Specialised};
use crate::helpers::Helpers;
use crate::insn::{class, jmp, Insn};
use crate::maps::Entry;
use crate::program::{Engine, LoadError, LoadOptions, MapRegistry, Program, ProgramSpec};
use crate::verifier::Context;
use crate::xdp;
use hotplane_core::{Packet, Pool, PoolConfig};
use std::sync::Arc;

/// The specialised program behind its guard, sharing maps with the original (as in a data
/// plane, where both are loaded from one registry).
pub struct Guarded {
    pub guard: Guard,
    /// The specialised program; in the JIT, with the guard compiled in front of it.
    pub fast: Program,
    pub original: Arc<Program>,
}

impl Guarded {
    pub fn load(
        original: &ProgramSpec,
        s: &Specialised,
        helpers: &Helpers,
        engine: Engine,
        registry: &MapRegistry,
    ) -> Result<Guarded, LoadError> {
        let opts = LoadOptions { engine, ..LoadOptions::default() };
        let original =
            Arc::new(Program::load(original, Context::Xdp, helpers, opts, Some(registry))?);
        let fast = s.load_behind(&original, helpers, opts)?;
        Ok(Guarded { guard: s.guard.clone(), fast, original })
    }

    /// The specialised program.
    pub fn fast(&self) -> &Program {
        &self.fast
    }

    /// Run `pkt` through the specialised program if the guard admits it, else the original.
    /// Returns the action and whether the guard admitted the packet.
    #[inline]
    pub fn run(&self, pkt: &mut Packet, worker: u32) -> (u64, bool) {
        if let Some(before) = self.fast.guard_misses(worker) {
            let r0 = self.fast.run_xdp(pkt, worker);
            return (r0, self.fast.guard_misses(worker) == Some(before));
        }
        if self.guard.admits(pkt.data()) {
            (self.fast.run_xdp(pkt, worker), true)
        } else {
            (self.original.run_xdp(pkt, worker), false)
        }
    }
}

/// How a difference showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Index of the packet in the sequence (the map comparison: the sequence's length).
    pub index: usize,
    pub frame: Vec<u8>,
    pub admitted: bool,
    pub what: String,
}

/// The outcome of a differential run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffReport {
    pub packets: usize,
    /// Packets the guard let into the specialised program.
    pub admitted: usize,
    pub mismatches: usize,
    /// Frames that could not be run (longer than the checker's buffers).
    pub skipped: usize,
    /// The first mismatch, for the report.
    pub first: Option<Mismatch>,
    /// The original's actions (aborted, drop, pass, tx, redirect): which paths ran.
    pub actions: [usize; 5],
}

impl DiffReport {
    pub fn absorb(&mut self, o: DiffReport) {
        self.packets += o.packets;
        self.admitted += o.admitted;
        self.mismatches += o.mismatches;
        self.skipped += o.skipped;
        for (a, b) in self.actions.iter_mut().zip(o.actions) {
            *a += b;
        }
        if self.first.is_none() {
            self.first = o.first;
        }
    }
}

/// Run `frames` through the original and through the guarded specialisation, each from fresh
/// maps that `prepare` fills the same way.
pub fn difftest(
    original: &ProgramSpec,
    s: &Specialised,
    frames: &[Vec<u8>],
    helpers: &Helpers,
    engine: Engine,
    prepare: &dyn Fn(&MapRegistry),
) -> Result<DiffReport, LoadError> {
    let candidate_maps = MapRegistry::default();
    let candidate = Guarded::load(original, s, helpers, engine, &candidate_maps)?;
    prepare(&candidate_maps);
    difftest_with(original, &candidate, frames, helpers, engine, prepare)
}

/// A specialisation to map contents ([`SpecialiseOptions::maps`]) as the checker needs it: the
/// original loaded into `registry`, `prepare` run on it, `down` specialised to `assumed` and
/// those contents; then [`Guarded::load`] into the same `registry` runs on the very maps the
/// guard's pins watch.
pub fn specialise_to_contents(
    down: &ProgramSpec,
    assumed: &super::Guarantee,
    opts: &SpecialiseOptions,
    registry: &MapRegistry,
    prepare: &dyn Fn(&MapRegistry),
) -> Result<Specialised, String> {
    let load = LoadOptions { engine: Engine::Interp, ..LoadOptions::default() };
    let original = Program::load(down, Context::Xdp, &opts.analysis.helpers, load, Some(registry))
        .map_err(|e| e.to_string())?;
    prepare(registry);
    let opts = SpecialiseOptions { maps: Some(original.maps.clone()), ..opts.clone() };
    specialise_verified(down, assumed, &opts).map_err(|e| e.to_string())
}

/// [`difftest`] against a loaded candidate whose maps are already filled (a specialisation to
/// their contents: filling them again would break its pins); the reference's fresh maps are
/// filled by `prepare`.
pub fn difftest_with(
    original: &ProgramSpec,
    candidate: &Guarded,
    frames: &[Vec<u8>],
    helpers: &Helpers,
    engine: Engine,
    prepare: &dyn Fn(&MapRegistry),
) -> Result<DiffReport, LoadError> {
    let reference_maps = MapRegistry::default();
    let opts = LoadOptions { engine, ..LoadOptions::default() };
    let reference = Program::load(original, Context::Xdp, helpers, opts, Some(&reference_maps))?;
    prepare(&reference_maps);
    let pool = checker_pool()?;
    let mut report = DiffReport::default();
    let note = |report: &mut DiffReport, m: Mismatch| {
        report.mismatches += 1;
        report.first.get_or_insert(m);
    };
    for (index, frame) in frames.iter().enumerate() {
        let (Some(mut a), Some(mut b)) = (pool.alloc(), pool.alloc()) else { break };
        if a.set_frame(frame).is_err() || b.set_frame(frame).is_err() {
            report.skipped += 1;
            continue;
        }
        report.packets += 1;
        xdp::take_redirect();
        let want = reference.run_xdp(&mut a, 0);
        let want_redirect = xdp::take_redirect();
        if let Some(n) = report.actions.get_mut(want as usize) {
            *n += 1;
        }
        let should_admit = candidate.guard.admits(b.data());
        let (got, admitted) = candidate.run(&mut b, 0);
        let got_redirect = xdp::take_redirect();
        report.admitted += usize::from(admitted);
        let what = if admitted != should_admit {
            Some(format!("the compiled guard admits it: {admitted}; the guard: {should_admit}"))
        } else if want != got {
            Some(format!("action {got} where the original returns {want}"))
        } else if a.data() != b.data() {
            Some(format!(
                "leaves as {} where the original leaves {}",
                hex::encode(b.data()),
                hex::encode(a.data())
            ))
        } else if want_redirect != got_redirect {
            Some(format!(
                "redirects to {got_redirect:?} where the original redirects to {want_redirect:?}"
            ))
        } else {
            None
        };
        if let Some(what) = what {
            note(&mut report, Mismatch { index, frame: frame.clone(), admitted, what });
        }
    }
    let dump = |p: &Program| -> Vec<(String, Vec<Entry>)> {
        p.maps
            .iter()
            .filter(|m| m.def.max_entries <= 1 << 16)
            .map(|m| (m.name.clone(), m.entries()))
            .collect()
    };
    if dump(&reference) != dump(&candidate.original) {
        let what = "the maps differ after the sequence".to_string();
        note(
            &mut report,
            Mismatch { index: frames.len(), frame: Vec::new(), admitted: false, what },
        );
    }
    Ok(report)
}

/// Packet buffers for frames up to [`MAX_FRAME`] bytes, with the usual headroom.
fn checker_pool() -> Result<Pool, LoadError> {
    let buffer_size = (MAX_FRAME + 512).div_ceil(64) * 64;
    Pool::new(PoolConfig { buffers: 4, buffer_size, ..PoolConfig::default() })
        .map_err(|e| LoadError::Invalid(format!("packet pool: {e}")))
}

impl DiffReport {
    /// Whether the run says anything: packets ran, some through the specialised program,
    /// none was skipped, none differed.
    pub fn passed(&self) -> bool {
        self.mismatches == 0 && self.skipped == 0 && self.admitted > 0
    }
}

/// A small deterministic generator (xorshift64*): the checker must be reproducible.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }
}

/// Byte strings the program compares loaded values against: each conditional jump's immediate
/// in both byte orders, as wide as its significant bytes.
pub fn dictionary(prog: &[Insn]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for i in prog {
        let conditional = matches!(i.class(), class::JMP | class::JMP32)
            && !matches!(i.op(), jmp::JA | jmp::CALL | jmp::EXIT)
            && !i.is_src_reg();
        if !conditional {
            continue;
        }
        let v = i.imm as u32;
        let width = match v {
            0..=0xff => 1,
            0x100..=0xffff => 2,
            _ => 4,
        };
        let le = v.to_le_bytes()[..width].to_vec();
        let mut be = le.clone();
        be.reverse();
        for w in [le, be] {
            if !out.contains(&w) {
                out.push(w);
            }
        }
    }
    out
}

/// The longest frame the checker builds (its packet buffers hold it).
pub const MAX_FRAME: u32 = 9000;

/// `n` packets of `shape`: lengths at and next to both bounds, near the minimum and anywhere
/// up to the maximum (at most [`MAX_FRAME`]); known bits as the shape says; the other bits random, or a dictionary string dropped at
/// a random offset.
pub fn shape_samples(
    shape: &PacketShape,
    dict: &[Vec<u8>],
    n: usize,
    rng: &mut Rng,
) -> Vec<Vec<u8>> {
    let max = shape.len.1.min(MAX_FRAME) as u64;
    let min = (shape.len.0.max(1) as u64).min(max);
    (0..n)
        .map(|k| {
            // The bounds, next to them, and anywhere between (bounds checks far from the
            // minimum must see both sides too).
            let len = match k % 6 {
                0 => min,
                1 => (min + 1).min(max),
                2 => max,
                3 => max.saturating_sub(1).max(min),
                4 => min + rng.below((max - min).min(256) + 1),
                _ => min + rng.below(max - min + 1),
            } as usize;
            let mut p: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
            for _ in 0..rng.below(6) {
                if let Some(w) = dict.get(rng.below(dict.len() as u64) as usize) {
                    let at = rng.below(len.min(96) as u64) as usize;
                    for (d, b) in p.iter_mut().skip(at).zip(w) {
                        *d = *b;
                    }
                }
            }
            impose(shape, &mut p);
            p
        })
        .collect()
}

/// The checker's packet sets for `down` specialised to `assumed`: `n` samples of the shape,
/// the upstream's outputs the caller gives, and (`violating`: a guarded specialisation) `n`
/// violators; drawn with the constants `down` compares against.
pub fn packet_sets(
    down: &ProgramSpec,
    assumed: &PacketShape,
    upstream_outputs: Vec<Vec<u8>>,
    n: usize,
    violating: bool,
    rng: &mut Rng,
) -> Vec<Vec<u8>> {
    let dict = dictionary(&down.insns);
    let mut frames = shape_samples(assumed, &dict, n, rng);
    frames.extend(upstream_outputs);
    if violating {
        frames.extend(violators(assumed, &dict, n, rng));
    }
    frames
}

/// Set the known bits of `shape` in `p`.
fn impose(shape: &PacketShape, p: &mut [u8]) {
    for (o, f) in &shape.bytes {
        if let Some(b) = p.get_mut(*o as usize) {
            *b = (*b & f.mask) | (f.value & !f.mask);
        }
    }
}

/// Packets that break the shape in one place: a known byte changed (to a dictionary string or
/// a flipped bit), or the length one past a bound.
pub fn violators(shape: &PacketShape, dict: &[Vec<u8>], n: usize, rng: &mut Rng) -> Vec<Vec<u8>> {
    let known: Vec<u16> = shape.bytes.keys().copied().collect();
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let mut p = shape_samples(shape, dict, 1, rng).pop().unwrap_or_default();
        match k % 5 {
            0 if shape.len.0 > 14 => p.truncate(shape.len.0 as usize - 1),
            1 if shape.len.1 < MAX_FRAME => p.resize(shape.len.1 as usize + 1, 0),
            2 if !dict.is_empty() && !known.is_empty() => {
                let at = known[rng.below(known.len() as u64) as usize] as usize;
                let w = &dict[rng.below(dict.len() as u64) as usize];
                for (d, b) in p.iter_mut().skip(at).zip(w) {
                    *d = *b;
                }
            }
            _ if !known.is_empty() => {
                let o = known[rng.below(known.len() as u64) as usize];
                let f = shape.byte(o);
                if let Some(b) = p.get_mut(o as usize) {
                    // Flip one known bit.
                    let known_bits = !f.mask;
                    let bit = (0..8)
                        .map(|s| 1u8 << s)
                        .filter(|b| known_bits & b != 0)
                        .nth(rng.below(known_bits.count_ones() as u64) as usize);
                    *b ^= bit.unwrap_or(0);
                }
            }
            _ => {}
        }
        out.push(p);
    }
    out
}

/// Destinations of [`traffic`] (IPv6 `2001:db8::1` to `::4`, IPv4 `10.0.0.1` to `.4`) and
/// its destination ports: few, so that services and flows configured for them are hit.
pub const TRAFFIC_HOSTS: u8 = 4;
pub const TRAFFIC_PORTS: [u16; 5] = [80, 443, 53, 5000, 8080];

/// `2001:db8::<host>`.
pub fn traffic_v6(host: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = host;
    a
}

/// Generated traffic: Ethernet with or without an 802.1Q tag; IPv4 or IPv6 (with zero to
/// three extension headers), ARP, or an unknown ethertype; TCP, UDP or ICMP; random sources,
/// destinations and ports mostly from [`TRAFFIC_HOSTS`] and [`TRAFFIC_PORTS`], random payload
/// lengths.
pub fn traffic(n: usize, rng: &mut Rng) -> Vec<Vec<u8>> {
    (0..n).map(|_| frame(rng)).collect()
}

fn frame(rng: &mut Rng) -> Vec<u8> {
    let mut p: Vec<u8> = (0..12).map(|_| rng.byte()).collect();
    if rng.below(6) == 0 {
        p.extend_from_slice(&[0x81, 0x00, 0x00, rng.byte()]);
    }
    let l4 = [6u8, 17, 1, 58][rng.below(4) as usize];
    let l4_len = match l4 {
        6 => 20,
        17 => 8,
        _ => 8,
    };
    let payload = rng.below(80) as usize;
    match rng.below(8) {
        0..=3 => {
            p.extend_from_slice(&[0x86, 0xdd]);
            let exts = if rng.below(3) == 0 { rng.below(4) as usize } else { 0 };
            let kinds = [0u8, 60, 43, 51];
            let chain: Vec<u8> = (0..exts).map(|_| kinds[rng.below(4) as usize]).collect();
            let ext_len: usize = chain.iter().map(|k| if *k == 51 { 24 } else { 8 }).sum();
            let plen = (ext_len + l4_len + payload) as u16;
            let first = chain.first().copied().unwrap_or(l4);
            p.extend_from_slice(&[0x60, 0, 0, 0]);
            p.extend_from_slice(&plen.to_be_bytes());
            p.extend_from_slice(&[first, 64]);
            p.extend((0..16).map(|_| rng.byte()));
            let host = 1 + rng.below(TRAFFIC_HOSTS as u64 + 1) as u8;
            p.extend_from_slice(&traffic_v6(host));
            for (k, kind) in chain.iter().enumerate() {
                let next = chain.get(k + 1).copied().unwrap_or(l4);
                if *kind == 51 {
                    p.extend_from_slice(&[next, 4, 0, 0]);
                    p.extend((0..20).map(|_| rng.byte()));
                } else {
                    p.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
                }
            }
        }
        4..=5 => {
            p.extend_from_slice(&[0x08, 0x00]);
            let total = (20 + l4_len + payload) as u16;
            p.extend_from_slice(&[0x45, 0]);
            p.extend_from_slice(&total.to_be_bytes());
            p.extend_from_slice(&[0, 0, 0x40, 0, 64, l4, 0, 0]);
            p.extend((0..4).map(|_| rng.byte()));
            p.extend_from_slice(&[10, 0, 0, 1 + rng.below(TRAFFIC_HOSTS as u64 + 1) as u8]);
        }
        6 => {
            p.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
            p.extend((0..20).map(|_| rng.byte()));
            return p;
        }
        _ => {
            p.extend_from_slice(&[rng.byte(), rng.byte()]);
        }
    }
    let port = |rng: &mut Rng| match rng.below(TRAFFIC_PORTS.len() as u64 + 1) as usize {
        k if k < TRAFFIC_PORTS.len() => TRAFFIC_PORTS[k].to_be_bytes(),
        _ => (rng.below(65536) as u16).to_be_bytes(),
    };
    let sport = rng.below(65536) as u16;
    p.extend_from_slice(&sport.to_be_bytes());
    let dport = port(rng);
    p.extend_from_slice(&dport);
    p.extend((4..l4_len).map(|_| rng.byte()));
    let start = p.len();
    p.extend((0..payload).map(|_| rng.byte()));
    if l4 == 17 && dport == 443u16.to_be_bytes() && payload >= 16 {
        // QUIC: a short header (DCID right after the first byte) or a long one (version,
        // DCID length 8, DCID), the DCID starting with a small server id.
        let id = [0, rng.below(TRAFFIC_HOSTS as u64 + 1) as u8];
        let header: Vec<u8> = if rng.below(2) == 0 {
            [&[0x40][..], &id].concat()
        } else {
            [&[0xc0, 0, 0, 0, 1, 8][..], &id].concat()
        };
        p[start..start + header.len()].copy_from_slice(&header);
    }
    p
}

/// What `up` lets through (`XDP_PASS`) of `frames`, as it leaves.
pub fn upstream_outputs(
    up: &ProgramSpec,
    frames: &[Vec<u8>],
    helpers: &Helpers,
    prepare: &dyn Fn(&MapRegistry),
) -> Result<Vec<Vec<u8>>, LoadError> {
    let maps = MapRegistry::default();
    let opts = LoadOptions { engine: Engine::Jit, ..LoadOptions::default() };
    let prog = Program::load(up, Context::Xdp, helpers, opts, Some(&maps))?;
    prepare(&maps);
    let pool = checker_pool()?;
    let mut out = Vec::new();
    for f in frames {
        let Some(mut p) = pool.alloc() else { break };
        if p.set_frame(f).is_ok() && prog.run_xdp(&mut p, 0) == xdp::XDP_PASS {
            out.push(p.data().to_vec());
        }
    }
    xdp::take_redirect();
    Ok(out)
}
