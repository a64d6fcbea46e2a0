//! Conditional jumps in the shape interpreter: the verifier's refinement of scalars, written
//! back through provenance into packet and stack bytes, and packet-length refinement from
//! comparisons with `data_end`.

use super::domain::*;
use crate::insn::{class, jmp, Insn};
use crate::verifier::scalar::{Scalar, Tnum};
use crate::verifier::state::{Ptr, PtrKind, Reg};
use crate::verifier::{compare32, cond_refine, negate};

/// A conditional jump: the taken and fall-through states, each `None` where impossible.
pub(super) fn branch(op: u8, i: Insn, st: AbsState) -> (Option<AbsState>, Option<AbsState>) {
    let wide = i.class() == class::JMP;
    let a = st.reg(i.dst);
    let b = if i.is_src_reg() {
        st.reg(i.src)
    } else if wide {
        Value::constant(i.imm as i64 as u64)
    } else {
        Value::constant(i.imm as u32 as u64)
    };
    match (a.reg, b.reg) {
        (Reg::Scalar(x), Reg::Scalar(y)) => scalar_branch(op, i, wide, x, y, st),
        (Reg::Ptr(p), Reg::Ptr(q)) if wide => pointer_branch(op, &p, &q, st),
        _ => (Some(st.clone()), Some(st)),
    }
}

fn set_scalar(st: &mut AbsState, r: u8, s: Scalar) {
    let mut v = st.reg(r);
    v.reg = Reg::Scalar(s);
    st.set(r, v);
}

fn scalar_branch(
    op: u8,
    i: Insn,
    wide: bool,
    x: Scalar,
    y: Scalar,
    st: AbsState,
) -> (Option<AbsState>, Option<AbsState>) {
    let fits = |s: &Scalar| s.umax < 1 << 31;
    if !(wide || fits(&x) && fits(&y)) {
        // A 32-bit comparison of values wider than 31 bits, as the verifier: decided only for
        // constants; equality with a constant also fixes the low half.
        let (xl, yl) = (x.low32(), y.low32());
        if let (Some(c), Some(d)) = (xl.as_const(), yl.as_const()) {
            return if compare32(op, c as u32, d as u32) {
                (Some(st), None)
            } else {
                (None, Some(st))
            };
        }
        if let (jmp::JEQ | jmp::JNE, Some(c)) = (op, yl.as_const()) {
            let equal = with_low32(st.clone(), i.dst, &x, c as u32);
            return if op == jmp::JEQ { (equal, Some(st)) } else { (Some(st), equal) };
        }
        return (Some(st.clone()), Some(st));
    }
    let side = |outcome: bool, mut s: AbsState| -> Option<AbsState> {
        let rel = if outcome { op } else { negate(op) };
        // cond_refine intersects known bits without checking that they agree.
        if rel == jmp::JEQ && (x.t.value ^ y.t.value) & !x.t.mask & !y.t.mask != 0 {
            return None;
        }
        let (rx, ry) = cond_refine(op, &x, &y, outcome);
        if rx.is_empty() || ry.is_empty() {
            return None;
        }
        set_scalar(&mut s, i.dst, rx);
        s.push_to_memory(i.dst).ok()?;
        if i.is_src_reg() {
            set_scalar(&mut s, i.src, ry);
            s.push_to_memory(i.src).ok()?;
        }
        Some(s)
    };
    (side(true, st.clone()), side(false, st))
}

/// `st` where the low 32 bits of register `r` (now `x`) equal `c`; `None` if they cannot.
fn with_low32(mut st: AbsState, r: u8, x: &Scalar, c: u32) -> Option<AbsState> {
    let low = u32::MAX as u64;
    if (x.t.value ^ c as u64) & !x.t.mask & low != 0 {
        return None;
    }
    let t = Tnum { value: (x.t.value & !low) | c as u64, mask: x.t.mask & !low };
    set_scalar(&mut st, r, scalar_of(t));
    st.push_to_memory(r).ok()?;
    Some(st)
}

fn pointer_branch(op: u8, p: &Ptr, q: &Ptr, st: AbsState) -> (Option<AbsState>, Option<AbsState>) {
    let (rel, pkt) = match (p.kind, q.kind) {
        (PtrKind::Packet, PtrKind::PacketEnd) => (op, p),
        (PtrKind::PacketEnd, PtrKind::Packet) => (swap_sides(op), q),
        (PtrKind::Packet, PtrKind::Packet) => {
            return match p.fixed().zip(q.fixed()).and_then(|(a, b)| compare_offsets(op, a, b)) {
                Some(true) => (Some(st), None),
                Some(false) => (None, Some(st)),
                None => (Some(st.clone()), Some(st)),
            };
        }
        _ => return (Some(st.clone()), Some(st)),
    };
    // `data + o REL data + len`, o in [lo, hi].
    let lo = pkt.off.saturating_add(pkt.var.umin.min(1 << 30) as i64);
    let hi = pkt.off.saturating_add(pkt.var.umax.min(1 << 30) as i64);
    let with_len = |rel: u8, mut s: AbsState| -> Option<AbsState> {
        s.packet.len = constrain_len(rel, lo, hi, s.packet.len)?;
        Some(s)
    };
    (with_len(rel, st.clone()), with_len(negate(rel), st))
}

/// The same comparison with its operands swapped.
fn swap_sides(op: u8) -> u8 {
    match op {
        jmp::JGT => jmp::JLT,
        jmp::JLT => jmp::JGT,
        jmp::JGE => jmp::JLE,
        jmp::JLE => jmp::JGE,
        jmp::JSGT => jmp::JSLT,
        jmp::JSLT => jmp::JSGT,
        jmp::JSGE => jmp::JSLE,
        jmp::JSLE => jmp::JSGE,
        o => o,
    }
}

fn compare_offsets(op: u8, a: i64, b: i64) -> Option<bool> {
    Some(match op {
        jmp::JEQ => a == b,
        jmp::JNE => a != b,
        jmp::JGT | jmp::JSGT => a > b,
        jmp::JGE | jmp::JSGE => a >= b,
        jmp::JLT | jmp::JSLT => a < b,
        jmp::JLE | jmp::JSLE => a <= b,
        // Bits of an address: not decided by offsets.
        _ => return None,
    })
}

/// The length interval where `o REL len` holds for some `o` in `[lo, hi]`; `None` if empty.
fn constrain_len(rel: u8, lo: i64, hi: i64, len: (u32, u32)) -> Option<(u32, u32)> {
    let (mut min, mut max) = (len.0 as i64, len.1 as i64);
    match rel {
        jmp::JGT | jmp::JSGT => max = max.min(hi - 1),
        jmp::JGE | jmp::JSGE => max = max.min(hi),
        jmp::JLT | jmp::JSLT => min = min.max(lo + 1),
        jmp::JLE | jmp::JSLE => min = min.max(lo),
        jmp::JEQ => {
            min = min.max(lo);
            max = max.min(hi);
        }
        jmp::JNE if lo == hi => {
            if min == lo {
                min += 1;
            }
            if max == lo {
                max -= 1;
            }
        }
        _ => {}
    }
    (min <= max && max >= 0).then(|| (min.max(0) as u32, max.min(u32::MAX as i64) as u32))
}
