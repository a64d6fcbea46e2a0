//! Conditional jumps: deciding them where the state fixes the outcome, refining ranges,
//! null checks of map values and packet bounds checks otherwise.

use super::arith::same_base;
use super::*;

impl Explorer<'_> {
    pub(super) fn jump(
        &mut self,
        pc: usize,
        i: Insn,
        st: &mut State,
        cp: Option<usize>,
    ) -> VResult<Next> {
        match i.op() {
            jmp::JA => {
                let t = branch_target(pc, i).unwrap_or(0) as usize;
                Ok(Next::Go(t))
            }
            jmp::EXIT => self.exit(pc, st),
            jmp::CALL => self.call(pc, i, st),
            op => {
                let t = (pc as i64 + 1 + i.off as i64) as usize;
                let wide = i.class() == class::JMP;
                let a = self.read_reg(pc, st, i.dst)?;
                let b = if i.is_src_reg() {
                    self.read_reg(pc, st, i.src)?
                } else if wide {
                    Reg::constant(i.imm as i64 as u64)
                } else {
                    Reg::constant(i.imm as u32 as u64)
                };
                let mut taken = st.clone();
                let mut fall = std::mem::replace(st, State { frames: Vec::new(), packet_min: 0 });
                let (t_ok, f_ok) = self.refine(pc, op, wide, i, a, b, &mut taken, &mut fall)?;
                match (t_ok, f_ok) {
                    (true, true) => {
                        self.fork(t, taken, cp);
                        *st = fall;
                        Ok(Next::Go(pc + 1))
                    }
                    (true, false) => {
                        *st = taken;
                        Ok(Next::Go(t))
                    }
                    (false, true) => {
                        *st = fall;
                        Ok(Next::Go(pc + 1))
                    }
                    (false, false) => Ok(Next::End),
                }
            }
        }
    }

    /// Refine both successor states of a conditional jump; returns which are reachable.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn refine(
        &mut self,
        pc: usize,
        op: u8,
        wide: bool,
        i: Insn,
        a: Reg,
        b: Reg,
        taken: &mut State,
        fall: &mut State,
    ) -> VResult<(bool, bool)> {
        match (a, b) {
            (Reg::Scalar(x), Reg::Scalar(y)) => {
                if !wide {
                    // 32-bit comparisons refine only values that fit in 31 bits (where the
                    // low halves and the whole registers order the same way).
                    let fits = |s: &Scalar| s.umax < 1 << 31;
                    if !(fits(&x) && fits(&y)) {
                        let (xa, ya) = (x.low32(), y.low32());
                        return Ok(match (xa.as_const(), ya.as_const()) {
                            (Some(c), Some(d)) => {
                                let t = compare32(op, c as u32, d as u32);
                                (t, !t)
                            }
                            _ => (true, true),
                        });
                    }
                }
                let (tx, ty) = cond_refine(op, &x, &y, true);
                let (fx, fy) = cond_refine(op, &x, &y, false);
                let t_ok = !tx.is_empty() && !ty.is_empty();
                let f_ok = !fx.is_empty() && !fy.is_empty();
                if t_ok {
                    set_scalar(taken, i.dst, tx);
                    if i.is_src_reg() {
                        set_scalar(taken, i.src, ty);
                    }
                }
                if f_ok {
                    set_scalar(fall, i.dst, fx);
                    if i.is_src_reg() {
                        set_scalar(fall, i.src, fy);
                    }
                }
                Ok((t_ok, f_ok))
            }
            // Null checks of map lookups, with 64-bit jumps only: a pointer whose low half is
            // zero is not null (a 32-bit check falls to the refusal below).
            (Reg::Ptr(p), Reg::Scalar(z))
                if wide
                    && matches!(p.kind, PtrKind::MapValueOrNull { .. })
                    && z.as_const() == Some(0) =>
            {
                let PtrKind::MapValueOrNull { map } = p.kind else { unreachable!() };
                let (null, nonnull) = match op {
                    jmp::JEQ => (&mut *taken, &mut *fall),
                    jmp::JNE => (&mut *fall, &mut *taken),
                    _ => {
                        return Err(
                            self.err(pc, "compare a map value pointer with 0 using == or != only")
                        )
                    }
                };
                null.for_each_reg(|r| {
                    if let Reg::Ptr(q) = r {
                        if q.id == p.id && matches!(q.kind, PtrKind::MapValueOrNull { .. }) {
                            *r = Reg::constant(0);
                        }
                    }
                });
                nonnull.for_each_reg(|r| {
                    if let Reg::Ptr(q) = r {
                        if q.id == p.id && matches!(q.kind, PtrKind::MapValueOrNull { .. }) {
                            q.kind = PtrKind::MapValue { map };
                        }
                    }
                });
                Ok((true, true))
            }
            // Packet bounds checks: `pkt + n <op> data_end`.
            (Reg::Ptr(p), Reg::Ptr(e)) | (Reg::Ptr(e), Reg::Ptr(p))
                if wide && p.kind == PtrKind::Packet && e.kind == PtrKind::PacketEnd =>
            {
                let pkt_left = matches!(a, Reg::Ptr(q) if q.kind == PtrKind::Packet);
                // Normalise to "pkt OP end": which branch proves pkt <= end?
                let safe_when_taken = match (op, pkt_left) {
                    (jmp::JGT, true) | (jmp::JGE, true) => Some(false), // pkt > end: safe on fall-through
                    (jmp::JLE, true) | (jmp::JLT, true) => Some(true),
                    (jmp::JLT, false) | (jmp::JLE, false) => Some(false), // end < pkt
                    (jmp::JGE, false) | (jmp::JGT, false) => Some(true),  // end >= pkt
                    _ => None,
                };
                if let Some(t) = safe_when_taken {
                    // "pkt < end" proves one byte more than "pkt <= end".
                    let strict_safe = matches!(
                        (op, pkt_left, t),
                        (jmp::JLT, true, true)
                            | (jmp::JGT, false, true)
                            | (jmp::JGE, true, false)
                            | (jmp::JLE, false, false)
                    );
                    let reach = p.off + if strict_safe { 1 } else { 0 };
                    if reach > 0 {
                        let target = if t { &mut *taken } else { &mut *fall };
                        // A check on `data` itself (id 1: read from the context, moved by
                        // constants only) bounds the packet: a later read of `data` is good
                        // for as many bytes (until a helper moves the packet).
                        if p.id == 1 && p.var.as_const() == Some(0) {
                            target.packet_min = target.packet_min.max(reach as u64);
                        }
                        target.for_each_reg(|r| {
                            if let Reg::Ptr(q) = r {
                                if q.kind == PtrKind::Packet && q.id == p.id {
                                    q.range = q.range.max(reach as u64);
                                }
                            }
                        });
                    }
                }
                Ok((true, true))
            }
            (Reg::Ptr(p), _) | (_, Reg::Ptr(p)) if matches!(p.kind, PtrKind::Map { .. }) => {
                Err(self.err(pc, "a map cannot be compared"))
            }
            // Pointers into the same object compare by their offsets, and a pointer that is
            // never null compares with 0 the same way wherever memory lies. Any other
            // comparison's outcome depends on addresses (the interpreter and the JIT, or two
            // runs, would branch differently), and a 32-bit one on where a 4 GiB boundary falls.
            (Reg::Ptr(p), Reg::Ptr(q)) if wide && same_base(&p, &q) => Ok((true, true)),
            (Reg::Ptr(_), Reg::Scalar(z)) | (Reg::Scalar(z), Reg::Ptr(_))
                if wide && z.as_const() == Some(0) =>
            {
                Ok((true, true))
            }
            (Reg::Ptr(_), _) | (_, Reg::Ptr(_)) => Err(self.err(
                pc,
                format!(
                    "comparing {} with {} depends on where memory lies; only pointers into the \
                     same object (with 64-bit jumps) or a pointer and 0 can be compared",
                    a.describe(),
                    b.describe()
                ),
            )),
            _ => Err(self.err(pc, "comparison of uninitialised values")),
        }
    }
}

pub(super) fn set_scalar(st: &mut State, r: u8, s: Scalar) {
    st.set(r, Reg::Scalar(s));
}

pub(crate) fn compare32(op: u8, a: u32, b: u32) -> bool {
    match op {
        jmp::JEQ => a == b,
        jmp::JNE => a != b,
        jmp::JGT => a > b,
        jmp::JGE => a >= b,
        jmp::JLT => a < b,
        jmp::JLE => a <= b,
        jmp::JSET => a & b != 0,
        jmp::JSGT => (a as i32) > (b as i32),
        jmp::JSGE => (a as i32) >= (b as i32),
        jmp::JSLT => (a as i32) < (b as i32),
        jmp::JSLE => (a as i32) <= (b as i32),
        _ => false,
    }
}

/// What `x OP y` being `outcome` says about x and y.
pub(crate) fn cond_refine(op: u8, x: &Scalar, y: &Scalar, outcome: bool) -> (Scalar, Scalar) {
    let (mut a, mut b) = (*x, *y);
    // Express as "a REL b holds".
    let rel = if outcome { op } else { negate(op) };
    match rel {
        jmp::JEQ => {
            let lo = a.umin.max(b.umin);
            let hi = a.umax.min(b.umax);
            let slo = a.smin.max(b.smin);
            let shi = a.smax.min(b.smax);
            let t = a.t.intersect(b.t);
            for s in [&mut a, &mut b] {
                s.umin = lo;
                s.umax = hi;
                s.smin = slo;
                s.smax = shi;
                s.t = t;
            }
        }
        jmp::JNE => {
            if let Some(c) = b.as_const() {
                if a.umin == c {
                    a.umin = c.wrapping_add(1).max(a.umin);
                    if c == u64::MAX {
                        a.umax = 0;
                        a.umin = 1;
                    }
                } else if a.umax == c {
                    a.umax = c.wrapping_sub(1);
                    if c == 0 {
                        a.umin = 1;
                        a.umax = 0;
                    }
                }
                if a.as_const() == Some(c) {
                    a.umin = 1;
                    a.umax = 0;
                }
            }
        }
        jmp::JGT => {
            a.umin = a.umin.max(b.umin.saturating_add(1));
            b.umax = b.umax.min(a.umax.saturating_sub(1));
            if a.umax == 0 {
                a.umin = 1;
                a.umax = 0;
            }
        }
        jmp::JGE => {
            a.umin = a.umin.max(b.umin);
            b.umax = b.umax.min(a.umax);
        }
        jmp::JLT => {
            a.umax = a.umax.min(b.umax.saturating_sub(1));
            b.umin = b.umin.max(a.umin.saturating_add(1));
            if b.umax == 0 {
                a.umin = 1;
                a.umax = 0;
            }
        }
        jmp::JLE => {
            a.umax = a.umax.min(b.umax);
            b.umin = b.umin.max(a.umin);
        }
        jmp::JSGT => {
            a.smin = a.smin.max(b.smin.saturating_add(1));
            b.smax = b.smax.min(a.smax.saturating_sub(1));
            if a.smax == i64::MIN {
                a.smin = 0;
                a.smax = -1;
            }
        }
        jmp::JSGE => {
            a.smin = a.smin.max(b.smin);
            b.smax = b.smax.min(a.smax);
        }
        jmp::JSLT => {
            a.smax = a.smax.min(b.smax.saturating_sub(1));
            b.smin = b.smin.max(a.smin.saturating_add(1));
            if b.smax == i64::MIN {
                a.smin = 0;
                a.smax = -1;
            }
        }
        jmp::JSLE => {
            a.smax = a.smax.min(b.smax);
            b.smin = b.smin.max(a.smin);
        }
        jmp::JSET => {
            // Taken: some bit in common, so a != 0. Not taken: a & b == 0.
            if let Some(c) = b.as_const() {
                if outcome {
                    if a.t.value & c != 0 || c != 0 && (a.t.value | a.t.mask) & c != 0 {
                        if (a.t.value | a.t.mask) & c == 0 {
                            a.umin = 1;
                            a.umax = 0;
                        }
                    } else {
                        a.umin = 1;
                        a.umax = 0;
                    }
                } else if a.t.value & c != 0 {
                    a.umin = 1;
                    a.umax = 0;
                } else {
                    a.t.mask &= !c;
                }
            }
        }
        _ => {}
    }
    if !a.is_empty() {
        a.sync();
    }
    if !b.is_empty() {
        b.sync();
    }
    (a, b)
}

/// The relation that holds when a jump is not taken (JSET's negation is handled by the caller).
pub(crate) fn negate(op: u8) -> u8 {
    match op {
        jmp::JEQ => jmp::JNE,
        jmp::JNE => jmp::JEQ,
        jmp::JGT => jmp::JLE,
        jmp::JGE => jmp::JLT,
        jmp::JLT => jmp::JGE,
        jmp::JLE => jmp::JGT,
        jmp::JSGT => jmp::JSLE,
        jmp::JSGE => jmp::JSLT,
        jmp::JSLT => jmp::JSGE,
        jmp::JSLE => jmp::JSGT,
        jmp::JSET => jmp::JSET,
        o => o,
    }
}
