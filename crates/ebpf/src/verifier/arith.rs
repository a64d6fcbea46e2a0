//! Arithmetic: scalar ranges through ALU operations, and the pointer arithmetic allowed.

use super::*;

impl Explorer<'_> {
    pub(super) fn alu(&mut self, pc: usize, i: Insn, st: &mut State) -> VResult<()> {
        let wide = i.class() == class::ALU64;
        let op = i.op();
        // Byte swaps and negation have no source operand (END's source bit picks the byte order).
        let unary = op == alu::END || op == alu::NEG;
        let src = if unary {
            Reg::constant(0)
        } else if i.is_src_reg() {
            self.read_reg(pc, st, i.src)?
        } else if wide {
            Reg::constant(i.imm as i64 as u64)
        } else {
            Reg::constant(i.imm as u32 as u64)
        };
        if op == alu::MOV {
            let v = match (wide, i.off, src) {
                (true, 0, v) => v,
                (_, 0, Reg::Scalar(s)) => Reg::Scalar(s.low32()),
                (_, 0, Reg::Ptr(_)) => {
                    return Err(self.err(
                        pc,
                        format!("r{} is a pointer: a 32-bit move would leak part of it", i.src),
                    ))
                }
                (_, _, Reg::Scalar(s)) => Reg::Scalar(match (wide, s.as_const()) {
                    (w, Some(c)) => {
                        let v = match i.off {
                            8 => c as i8 as i64 as u64,
                            16 => c as i16 as i64 as u64,
                            _ => c as i32 as i64 as u64,
                        };
                        Scalar::constant(if w { v } else { v as u32 as u64 })
                    }
                    (true, None) => Scalar::UNKNOWN,
                    (false, None) => Scalar::unknown32(),
                }),
                (_, _, _) => return Err(self.err(pc, "sign-extending move of a pointer")),
            };
            st.set(i.dst, v);
            return Ok(());
        }
        let dst = self.read_reg(pc, st, i.dst)?;
        if op == alu::END {
            let Reg::Scalar(s) = dst else {
                return Err(self.err(
                    pc,
                    format!(
                        "a byte swap of r{}, which holds {}, is not allowed",
                        i.dst,
                        dst.describe()
                    ),
                ));
            };
            st.set(i.dst, Reg::Scalar(byte_swap(i, &s)));
            return Ok(());
        }
        let result = match (dst, src) {
            (Reg::Scalar(a), Reg::Scalar(b)) => Reg::Scalar(if wide {
                scalar_op(op, i, &a, &b)
            } else {
                scalar_op32(op, i, &a, &b)
            }),
            (Reg::Ptr(p), Reg::Scalar(s)) if wide && (op == alu::ADD || op == alu::SUB) => {
                Reg::Ptr(self.ptr_add(pc, p, &s, op == alu::SUB)?)
            }
            (Reg::Scalar(s), Reg::Ptr(p)) if wide && op == alu::ADD => {
                Reg::Ptr(self.ptr_add(pc, p, &s, false)?)
            }
            (Reg::Ptr(a), Reg::Ptr(b)) if wide && op == alu::SUB && same_base(&a, &b) => {
                Reg::unknown()
            }
            (d, s) => {
                let which = if matches!(d, Reg::Ptr(_)) { i.dst } else { i.src };
                let what = if matches!(d, Reg::Ptr(_)) { d.describe() } else { s.describe() };
                return Err(self.err(
                    pc,
                    format!(
                        "{} arithmetic on r{which}, which holds {what}, is not allowed",
                        if wide { "this" } else { "32-bit" }
                    ),
                ));
            }
        };
        st.set(i.dst, result);
        Ok(())
    }
}

/// A 64-bit ALU operation on scalars (`i` gives the signedness of division).
pub(crate) fn scalar_op(op: u8, i: Insn, a: &Scalar, b: &Scalar) -> Scalar {
    let k = b.as_const();
    match op {
        alu::ADD => a.add(b),
        alu::SUB => a.sub(b),
        alu::MUL => a.mul(b),
        alu::DIV if i.off == 0 => a.div(b),
        alu::MOD if i.off == 0 => a.rem(b),
        alu::DIV | alu::MOD => match (a.as_const(), k) {
            (Some(x), Some(y)) => Scalar::constant(if op == alu::DIV {
                if y == 0 {
                    0
                } else {
                    (x as i64).wrapping_div(y as i64) as u64
                }
            } else if y == 0 {
                x
            } else {
                (x as i64).wrapping_rem(y as i64) as u64
            }),
            _ => Scalar::UNKNOWN,
        },
        alu::OR => a.or(b),
        alu::AND => a.and(b),
        alu::XOR => a.xor(b),
        alu::LSH => k.map_or(Scalar::UNKNOWN, |k| a.shl(k as u32 & 63)),
        alu::RSH => k.map_or(Scalar::UNKNOWN, |k| a.shr(k as u32 & 63)),
        alu::ARSH => match (a.as_const(), k) {
            (Some(x), Some(y)) => Scalar::constant(((x as i64) >> (y & 63)) as u64),
            _ => Scalar::UNKNOWN,
        },
        alu::NEG => a
            .as_const()
            .map_or(Scalar::UNKNOWN, |x| Scalar::constant((x as i64).wrapping_neg() as u64)),
        _ => Scalar::UNKNOWN,
    }
}

/// 32-bit operations: computed on the low halves, zero-extended. Exact for constants,
/// ranges where they fit, otherwise any 32-bit value.
pub(crate) fn scalar_op32(op: u8, i: Insn, a: &Scalar, b: &Scalar) -> Scalar {
    let (a, b) = (a.low32(), b.low32());
    if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
        let (x, y) = (x as u32, y as u32);
        let v: u32 = match op {
            alu::ADD => x.wrapping_add(y),
            alu::SUB => x.wrapping_sub(y),
            alu::MUL => x.wrapping_mul(y),
            alu::DIV if i.off == 1 => {
                if y == 0 {
                    0
                } else {
                    (x as i32).wrapping_div(y as i32) as u32
                }
            }
            alu::DIV => x.checked_div(y).unwrap_or(0),
            alu::MOD if i.off == 1 => {
                if y == 0 {
                    x
                } else {
                    (x as i32).wrapping_rem(y as i32) as u32
                }
            }
            alu::MOD => {
                if y == 0 {
                    x
                } else {
                    x % y
                }
            }
            alu::OR => x | y,
            alu::AND => x & y,
            alu::XOR => x ^ y,
            alu::LSH => x.wrapping_shl(y & 31),
            alu::RSH => x.wrapping_shr(y & 31),
            alu::ARSH => ((x as i32) >> (y & 31)) as u32,
            alu::NEG => (x as i32).wrapping_neg() as u32,
            _ => return Scalar::unknown32(),
        };
        return Scalar::constant(v as u64);
    }
    let r = match op {
        alu::AND => a.and(&b),
        alu::ADD => a.add(&b),
        // By an unknown amount (taken mod 32) the value can only shrink: anything from the
        // smallest shifted all the way down to the largest unshifted.
        alu::RSH => match b.as_const() {
            Some(k) => a.shr(k as u32 & 31),
            None => Scalar::urange(a.umin >> 31, a.umax),
        },
        alu::DIV if i.off == 0 => a.div(&b),
        alu::MOD if i.off == 0 => a.rem(&b),
        _ => Scalar::unknown32(),
    };
    if r.umax <= u32::MAX as u64 {
        r
    } else {
        Scalar::unknown32()
    }
}

impl Explorer<'_> {
    pub(super) fn ptr_add(&mut self, pc: usize, mut p: Ptr, s: &Scalar, sub: bool) -> VResult<Ptr> {
        match p.kind {
            PtrKind::PacketEnd
            | PtrKind::PacketMeta
            | PtrKind::Map { .. }
            | PtrKind::MapValueOrNull { .. } => {
                return Err(self.err(pc, "arithmetic on this pointer is not allowed (check it against null / compare it only)"));
            }
            _ => {}
        }
        if let Some(c) = s.as_const() {
            let c = c as i64;
            // Checked, not wrapping: 2^63 added to a pointer must not come back in range.
            let moved = if sub { p.off.checked_sub(c) } else { p.off.checked_add(c) };
            match moved {
                Some(off) if off.unsigned_abs() <= 1 << 29 => p.off = off,
                _ => return Err(self.err(pc, "pointer offset out of range")),
            }
            return Ok(p);
        }
        if sub {
            return Err(self.err(pc, "subtracting a variable from a pointer is not allowed"));
        }
        if matches!(p.kind, PtrKind::Ctx | PtrKind::Stack { .. }) {
            return Err(
                self.err(pc, "variable offsets into the context or the stack are not allowed")
            );
        }
        if s.umax > 1 << 29 {
            return Err(self.err(
                pc,
                "the variable added to the pointer is not bounded: mask or compare it first",
            ));
        }
        p.var = p.var.add(s);
        if p.kind == PtrKind::Packet {
            // The checked range belonged to the old pointer; this one must be checked anew.
            p.id = self.fresh_id();
            p.range = 0;
        }
        Ok(p)
    }
}

/// `BPF_END` on a scalar, as RFC 9669 defines it and both engines run it: in the ALU64 class
/// (`bswap`) and in the ALU class with the source bit (`be`, to big-endian on this
/// little-endian host) the low 16, 32 or 64 bits are swapped; in the ALU class without it (`le`)
/// they are kept. Either way the result is the low `imm` bits zero-extended, so `le64` and `be64`
/// in the 32-bit class keep all 64 bits: the operand is never truncated to 32 bits first.
pub(super) fn byte_swap(i: Insn, s: &Scalar) -> Scalar {
    let swap = i.class() == class::ALU64 || i.is_src_reg();
    if let Some(c) = s.as_const() {
        return Scalar::constant(match (swap, i.imm) {
            (true, 16) => (c as u16).swap_bytes() as u64,
            (true, 32) => (c as u32).swap_bytes() as u64,
            (true, _) => c.swap_bytes(),
            (false, 16) => c as u16 as u64,
            (false, 32) => c as u32 as u64,
            (false, _) => c,
        });
    }
    match (swap, i.imm) {
        (true, 16) => Scalar::urange(0, 0xffff),
        (true, 32) => Scalar::unknown32(),
        (true, _) => Scalar::UNKNOWN,
        (false, 16) => s.and(&Scalar::constant(0xffff)),
        (false, 32) => s.low32(),
        (false, _) => *s,
    }
}

pub(super) fn same_base(a: &Ptr, b: &Ptr) -> bool {
    match (a.kind, b.kind) {
        (
            PtrKind::Packet | PtrKind::PacketEnd | PtrKind::PacketMeta,
            PtrKind::Packet | PtrKind::PacketEnd | PtrKind::PacketMeta,
        ) => true,
        // Two lookups may return values anywhere in the map: only copies of one share a base.
        (
            PtrKind::MapValue { .. } | PtrKind::MapValueOrNull { .. },
            PtrKind::MapValue { .. } | PtrKind::MapValueOrNull { .. },
        ) => a.kind == b.kind && a.id == b.id,
        (x, y) => x == y,
    }
}
