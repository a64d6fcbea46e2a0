//! Transfer functions of the shape interpreter: ALU operations (the verifier's, plus byte
//! provenance) and memory accesses (packet and stack facts, spills).

use super::domain::*;
use super::shape::ByteFact;
use crate::ctx::{xdp_field, XdpFieldKind};
use crate::insn::{alu, atomic, class, mem, Insn};
use crate::verifier::scalar::{Scalar, Tnum};
use crate::verifier::state::{Ptr, PtrKind, Reg};
use crate::verifier::{scalar_op, scalar_op32};

/// Memory a helper writes through `ptr` (`size` bytes) becomes unknown.
pub(super) fn clobber(st: &mut AbsState, ptr: Value, size: i64) {
    let Reg::Ptr(p) = ptr.reg else { return };
    match p.kind {
        PtrKind::Stack { frame } => {
            let Some(o) = p.fixed() else { return };
            let n = size.clamp(0, 512) as usize;
            if let Some(idx) = stack_index(o, n) {
                let locs = stack_locs(frame, idx, n);
                let span = Span::Stack { frame, start: idx as u16, end: (idx + n) as u16 };
                st.write(span, locs.into_iter().map(|l| (l, ByteFact::UNKNOWN)));
            }
        }
        PtrKind::Packet => {
            let (lo, hi) = packet_span(&p, 0, size);
            st.clobber_packet(lo, hi);
        }
        _ => {}
    }
}

/// Packet offsets `[lo, hi)` an access of `size` bytes at `off` from `p` may touch.
fn packet_span(p: &Ptr, off: i64, size: i64) -> (u32, u32) {
    let base = p.off.saturating_add(off);
    let lo = base.saturating_add(p.var.umin.min(1 << 30) as i64);
    let hi = base.saturating_add(p.var.umax.min(1 << 30) as i64).saturating_add(size);
    let clamp = |v: i64| v.clamp(0, u32::MAX as i64) as u32;
    (clamp(lo), clamp(hi))
}

/// The value's bytes as facts (unknown for pointers).
fn value_bytes(v: &Value, n: usize) -> Vec<ByteFact> {
    (0..n)
        .map(|i| match v.reg {
            Reg::Scalar(s) => tnum_byte(s.t, i),
            _ => ByteFact::UNKNOWN,
        })
        .collect()
}

pub(super) fn load(i: Insn, st: &mut AbsState) {
    let n = i.mem_size();
    let signed = i.mem_mode() == mem::MEMSX;
    let plain = if n == 8 || signed {
        Value::unknown()
    } else {
        Value::scalar(Scalar::urange(0, (1u64 << (8 * n)) - 1))
    };
    let off = i.off as i64;
    let v = match st.reg(i.src).reg {
        Reg::Ptr(p) => match (p.kind, p.fixed()) {
            (PtrKind::Stack { frame }, Some(o)) => match stack_index(o.saturating_add(off), n) {
                Some(idx) => {
                    let spilled = (n == 8 && idx % 8 == 0)
                        .then(|| st.frames.get(frame as usize)?.spills.get(&((idx / 8) as u16)))
                        .flatten()
                        .copied();
                    spilled.unwrap_or_else(|| st.load(&stack_locs(frame, idx, n), signed))
                }
                None => plain,
            },
            (PtrKind::Packet, Some(o)) => match packet_locs(o.saturating_add(off), n) {
                Some(locs) => st.load(&locs, signed),
                None => plain,
            },
            (PtrKind::Ctx, _) => match xdp_field(off).map(|f| f.kind) {
                Some(XdpFieldKind::Data) => Value::ptr(PtrKind::Packet, 0),
                Some(XdpFieldKind::DataEnd) => Value::ptr(PtrKind::PacketEnd, 0),
                Some(XdpFieldKind::DataMeta) => Value::ptr(PtrKind::PacketMeta, 0),
                _ => Value::scalar(Scalar::unknown32()),
            },
            _ => plain,
        },
        _ => plain,
    };
    st.set(i.dst, v);
}

pub(super) fn store(i: Insn, st: &mut AbsState, value: Value) {
    let n = i.mem_size();
    let off = i.off as i64;
    let Reg::Ptr(p) = st.reg(i.dst).reg else { return };
    let facts = value_bytes(&value, n);
    match p.kind {
        PtrKind::Stack { frame } => {
            let Some(idx) = p.fixed().and_then(|o| stack_index(o.saturating_add(off), n)) else {
                return;
            };
            let span = Span::Stack { frame, start: idx as u16, end: (idx + n) as u16 };
            st.write(span, stack_locs(frame, idx, n).into_iter().zip(facts));
            // Whole registers stored to aligned slots keep their type and provenance, as in
            // the verifier (less any claim about the bytes just overwritten).
            let whole = n == 8 && idx % 8 == 0;
            if whole && (matches!(value.reg, Reg::Ptr(_)) || i.class() == class::STX) {
                let mut spilled = value;
                for lane in &mut spilled.lanes {
                    if lane.is_some_and(|l| span.contains(l.loc)) {
                        *lane = None;
                    }
                }
                if let Some(f) = st.frames.get_mut(frame as usize) {
                    f.spills.insert((idx / 8) as u16, spilled);
                }
            }
        }
        PtrKind::Packet => {
            match p.fixed().and_then(|o| packet_locs(o.saturating_add(off), n).map(|l| (o, l))) {
                Some((o, locs)) => {
                    let start = o.saturating_add(off) as u32;
                    st.write(
                        Span::Packet { start, end: start + n as u32 },
                        locs.into_iter().zip(facts),
                    );
                }
                None => {
                    let (lo, hi) = packet_span(&p, off, n as i64);
                    st.clobber_packet(lo, hi);
                }
            }
        }
        _ => {}
    }
}

pub(super) fn atomic_op(i: Insn, st: &mut AbsState) {
    let n = i.mem_size();
    if let Reg::Ptr(p) = st.reg(i.dst).reg {
        if let (PtrKind::Stack { frame }, Some(o)) = (p.kind, p.fixed()) {
            if let Some(idx) = stack_index(o.saturating_add(i.off as i64), n) {
                let span = Span::Stack { frame, start: idx as u16, end: (idx + n) as u16 };
                let unknown = ByteFact::UNKNOWN;
                st.write(span, stack_locs(frame, idx, n).into_iter().map(|l| (l, unknown)));
            }
        }
    }
    if i.imm == atomic::CMPXCHG {
        st.set(0, Value::unknown());
    } else if i.imm & atomic::FETCH != 0 {
        let v = if n == 4 { Scalar::unknown32() } else { Scalar::UNKNOWN };
        st.set(i.src, Value::scalar(v));
    }
}

pub(super) fn alu(i: Insn, st: &mut AbsState) {
    let wide = i.class() == class::ALU64;
    let op = i.op();
    let src = if op == alu::END || op == alu::NEG {
        Value::constant(0)
    } else if i.is_src_reg() {
        st.reg(i.src)
    } else if wide {
        Value::constant(i.imm as i64 as u64)
    } else {
        Value::constant(i.imm as u32 as u64)
    };
    let dst = st.reg(i.dst);
    let out = match op {
        alu::MOV => mov(i, wide, src),
        alu::END => byte_swap(i, dst),
        _ => match (dst.reg, src.reg) {
            (Reg::Scalar(a), Reg::Scalar(b)) => {
                let s = if wide { scalar_op(op, i, &a, &b) } else { scalar_op32(op, i, &a, &b) };
                Value { reg: Reg::Scalar(s), lanes: lanes_after(op, wide, &dst, &a, &src, &b) }
            }
            (Reg::Ptr(p), Reg::Scalar(s)) if wide && (op == alu::ADD || op == alu::SUB) => {
                ptr_add(p, &s, op == alu::SUB)
            }
            (Reg::Scalar(s), Reg::Ptr(p)) if wide && op == alu::ADD => ptr_add(p, &s, false),
            (Reg::Ptr(a), Reg::Ptr(b)) if wide && op == alu::SUB => ptr_diff(&a, &b, st),
            _ => Value::unknown(),
        },
    };
    st.set(i.dst, out);
}

fn mov(i: Insn, wide: bool, src: Value) -> Value {
    match (wide, i.off, src.reg) {
        (true, 0, _) => src,
        (false, 0, Reg::Scalar(s)) => {
            Value { reg: Reg::Scalar(s.low32()), lanes: low_lanes(src.lanes, 4) }
        }
        (_, 8 | 16 | 32, Reg::Scalar(s)) => {
            let n = (i.off / 8) as usize;
            let t = sign_extend(s.t, n);
            let t = if wide { t } else { t.low32() };
            Value { reg: Reg::Scalar(scalar_of(t)), lanes: low_lanes(src.lanes, n) }
        }
        _ => Value::unknown(),
    }
}

/// The low `n` bytes of `t`, sign-extended.
fn sign_extend(t: Tnum, n: usize) -> Tnum {
    if n == 0 || n >= 8 {
        return t;
    }
    let low = (1u64 << (8 * n)) - 1;
    let sign = 1u64 << (8 * n - 1);
    let (mut value, mut mask) = (t.value & low, t.mask & low);
    if mask & sign != 0 {
        mask |= !low;
    } else if value & sign != 0 {
        value |= !low;
    }
    Tnum { value, mask }
}

fn low_lanes(mut lanes: Lanes, n: usize) -> Lanes {
    lanes.iter_mut().skip(n).for_each(|l| *l = None);
    lanes
}

/// `BPF_END`: the low 2, 4 or 8 bytes, in reverse order when swapping (`be` on this
/// little-endian host, and `bswap`), zero-extended. Exact on known bits, lanes permuted.
fn byte_swap(i: Insn, dst: Value) -> Value {
    let Reg::Scalar(s) = dst.reg else { return Value::unknown() };
    let n = match i.imm {
        16 => 2,
        32 => 4,
        _ => 8,
    };
    let swap = i.class() == class::ALU64 || i.is_src_reg();
    let mut t = Tnum { value: 0, mask: 0 };
    let mut lanes = NO_LANES;
    for (k, lane) in lanes.iter_mut().enumerate().take(n) {
        let from = if swap { n - 1 - k } else { k };
        let b = tnum_byte(s.t, from);
        t.value |= (b.value as u64) << (8 * k);
        t.mask |= (b.mask as u64) << (8 * k);
        *lane = dst.lanes[from];
    }
    Value { reg: Reg::Scalar(scalar_of(t)), lanes }
}

/// Provenance through an ALU operation: whole-byte shifts move lanes, `&` with a constant
/// masks them, `|` keeps a lane where the other side is known zero. Anything else loses it.
fn lanes_after(op: u8, wide: bool, dst: &Value, a: &Scalar, src: &Value, b: &Scalar) -> Lanes {
    let width = if wide { 8 } else { 4 };
    let mut out = NO_LANES;
    let shift = b.as_const().map(|k| (k & if wide { 63 } else { 31 }) as usize);
    match op {
        alu::LSH => {
            if let Some(k) = shift.filter(|k| k % 8 == 0) {
                let by = k / 8;
                out[by.min(width)..width].copy_from_slice(&dst.lanes[..width.saturating_sub(by)]);
            }
        }
        alu::RSH => {
            if let Some(k) = shift.filter(|k| k % 8 == 0) {
                let by = (k / 8).min(width);
                out[..width - by].copy_from_slice(&dst.lanes[by..width]);
            }
        }
        alu::AND => {
            let (lanes, c) = match (b.as_const(), a.as_const()) {
                (Some(c), _) => (&dst.lanes, c),
                (None, Some(c)) => (&src.lanes, c),
                _ => return out,
            };
            for (i, (o, lane)) in out.iter_mut().zip(lanes).take(width).enumerate() {
                let m = (c >> (8 * i)) as u8;
                *o =
                    lane.filter(|l| l.mask & m != 0).map(|l| Lane { loc: l.loc, mask: l.mask & m });
            }
        }
        alu::OR => {
            let zero = |t: Tnum, i: usize| tnum_byte(t, i) == ByteFact::known(0);
            for (i, o) in out.iter_mut().enumerate().take(width) {
                *o = if zero(b.t, i) {
                    dst.lanes[i]
                } else if zero(a.t, i) {
                    src.lanes[i]
                } else {
                    None
                };
            }
        }
        alu::ADD | alu::SUB | alu::XOR if b.as_const() == Some(0) => {
            out[..width].copy_from_slice(&dst.lanes[..width]);
        }
        _ => {}
    }
    out
}

fn ptr_add(mut p: Ptr, s: &Scalar, sub: bool) -> Value {
    match s.as_const() {
        Some(c) => {
            let c = c as i64;
            match if sub { p.off.checked_sub(c) } else { p.off.checked_add(c) } {
                Some(off) => p.off = off,
                None => return Value::unknown(),
            }
        }
        None if !sub => p.var = p.var.add(s),
        None => return Value::unknown(),
    }
    Value { reg: Reg::Ptr(p), lanes: NO_LANES }
}

/// `data_end - (data + o)` is the packet length less `o`; other differences are unknown.
fn ptr_diff(a: &Ptr, b: &Ptr, st: &AbsState) -> Value {
    if let (PtrKind::PacketEnd, PtrKind::Packet, Some(o)) = (a.kind, b.kind, b.fixed()) {
        let (lo, hi) = (st.packet.len.0 as i64 - o, st.packet.len.1 as i64 - o);
        if lo >= 0 {
            return Value::scalar(Scalar::urange(lo as u64, hi as u64));
        }
    }
    Value::unknown()
}
