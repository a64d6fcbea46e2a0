//! Values: expressions, and loads and stores of slots and header fields. Every value is an
//! `i64` holding a canonical value of at most 64 bits; `None` means "not lowered".

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::{frame, mem, Lower};
use crate::ir::{BinOp, Expr, HdrRef, Place, UnOp};
use crate::types::mask;

impl Lower<'_, '_, '_> {
    /// Whether a store to `p` can be generated (values of at most 64 bits, fixed location).
    pub(super) fn place_ok(&self, p: &Place) -> bool {
        match p {
            Place::Slot { width, .. } => *width <= 64,
            Place::Field { .. } => self.window(p).is_some(),
            Place::Slice { base, .. } => self.place_ok(base),
            Place::Discard { .. } => true,
        }
    }

    /// A fixed header field as (byte in the header area, leading bits, width), when it fits
    /// one 8-byte big-endian window.
    pub(super) fn window(&self, p: &Place) -> Option<(i32, u32, u32)> {
        let &Place::Field { hdr: HdrRef::Static(id), bit_off, width } = p else { return None };
        let off = self.c.prog.headers[id as usize].byte_off * 8 + bit_off;
        let lead = off % 8;
        (width > 0 && lead + width <= 64).then_some(((off / 8) as i32, lead, width))
    }

    pub(super) fn load(&mut self, p: &Place) -> Option<Value> {
        match p {
            &Place::Slot { slot, width } if width <= 64 => {
                let base = self.slots();
                Some(self.b.ins().load(types::I64, mem(), base, (slot * 16) as i32))
            }
            Place::Field { .. } => {
                let (at, lead, width) = self.window(p)?;
                let hdr = self.hdr();
                let ins = |b: &mut FunctionBuilder<'_>, ty| {
                    let v = b.ins().load(ty, mem(), hdr, at);
                    let v = b.ins().bswap(v);
                    b.ins().uextend(types::I64, v)
                };
                Some(match (lead, width) {
                    (0, 8) => self.b.ins().uload8(types::I64, mem(), hdr, at),
                    (0, 16) => ins(&mut self.b, types::I16),
                    (0, 32) => ins(&mut self.b, types::I32),
                    (0, w) if w % 8 == 0 && w != 64 => {
                        // Whole bytes (a MAC address): exact loads of 4, 2 and 1 bytes. A
                        // window would straddle earlier stores, and store forwarding stalls.
                        let mut v = self.k(0);
                        for (off, bytes) in pieces(w / 8) {
                            let piece = self.load_piece(hdr, (at + off) as u32, bytes);
                            let high = self.b.ins().ishl_imm(v, (bytes * 8) as i64);
                            v = self.b.ins().bor(high, piece);
                        }
                        v
                    }
                    _ => {
                        // The smallest window holding the field: it matches the granule
                        // (see `granule`) its bytes are stored in.
                        let bytes = window_bytes(lead + width);
                        let v = self.load_piece(hdr, at as u32, bytes);
                        let v = self.b.ins().ushr_imm(v, (bytes * 8 - lead - width) as i64);
                        self.trunc(v, width)
                    }
                })
            }
            Place::Slice { base, hi, lo } => {
                let v = self.load(base)?;
                let v = self.b.ins().ushr_imm(v, *lo as i64);
                Some(self.trunc(v, hi - lo + 1))
            }
            Place::Discard { .. } => Some(self.k(0)),
            Place::Slot { .. } => None,
        }
    }

    /// Store canonical `v`; the caller checked [`Self::place_ok`].
    pub(super) fn store(&mut self, p: &Place, v: Value) {
        match p {
            &Place::Slot { slot, .. } => self.store_slot(slot as usize, v),
            Place::Field { .. } => {
                let Some((at, lead, width)) = self.window(p) else { return };
                let hdr = self.hdr();
                match (lead, width) {
                    (0, 8) => {
                        self.b.ins().istore8(mem(), v, hdr, at);
                    }
                    (0, 64) => {
                        let v = self.b.ins().bswap(v);
                        self.b.ins().store(mem(), v, hdr, at);
                    }
                    (0, w) if w % 8 == 0 => {
                        // Whole bytes: exact stores, no read-modify-write of a window.
                        let mut left = w;
                        for (off, bytes) in pieces(w / 8) {
                            left -= bytes * 8;
                            let piece = self.b.ins().ushr_imm(v, left as i64);
                            self.store_be(hdr, at + off, bytes, piece);
                        }
                    }
                    _ => {
                        // Read-modify-write the smallest window holding the field.
                        let bytes = window_bytes(lead + width);
                        let shift = bytes * 8 - lead - width;
                        let m = mask(width) as u64;
                        let old = self.load_piece(hdr, at as u32, bytes);
                        let kept = self.b.ins().band_imm(old, !(m << shift) as i64);
                        let v = self.b.ins().band_imm(v, m as i64);
                        let v = self.b.ins().ishl_imm(v, shift as i64);
                        let new = self.b.ins().bor(kept, v);
                        self.store_piece(hdr, at, bytes, new);
                    }
                }
            }
            Place::Slice { base, hi, lo } => {
                let Some(old) = self.load(base) else { return };
                let m = (mask(hi - lo + 1) as u64) << lo;
                let kept = self.b.ins().band_imm(old, !m as i64);
                let v = self.b.ins().ishl_imm(v, *lo as i64);
                let v = self.b.ins().band_imm(v, m as i64);
                let new = self.b.ins().bor(kept, v);
                self.store(base, new);
            }
            Place::Discard { .. } => {}
        }
    }

    /// Store the low `bytes` (1, 2 or 4) bytes of `v` big-endian at `base + off`.
    fn store_be(&mut self, base: Value, off: i32, bytes: u32, v: Value) {
        if bytes == 1 {
            self.b.ins().istore8(mem(), v, base, off);
            return;
        }
        let ty = if bytes == 2 { types::I16 } else { types::I32 };
        let v = self.b.ins().ireduce(ty, v);
        let v = self.b.ins().bswap(v);
        self.b.ins().store(mem(), v, base, off);
    }

    /// Store the low `bytes` (1, 2, 4 or 8) bytes of `v` big-endian at `base + off`.
    fn store_piece(&mut self, base: Value, off: i32, bytes: u32, v: Value) {
        if bytes == 8 {
            let v = self.b.ins().bswap(v);
            self.b.ins().store(mem(), v, base, off);
        } else {
            self.store_be(base, off, bytes, v);
        }
    }

    /// `v` masked to `width` bits.
    pub(super) fn trunc(&mut self, v: Value, width: u32) -> Value {
        if width >= 64 {
            v
        } else {
            self.b.ins().band_imm(v, mask(width) as i64)
        }
    }

    /// `v` (canonical, `width` bits) sign-extended to 64 bits.
    pub(super) fn sext(&mut self, v: Value, width: u32) -> Value {
        if width >= 64 {
            return v;
        }
        let v = self.b.ins().ishl_imm(v, (64 - width) as i64);
        self.b.ins().sshr_imm(v, (64 - width) as i64)
    }

    pub(super) fn bool(&mut self, cc: IntCC, a: Value, b: Value) -> Value {
        let c = self.b.ins().icmp(cc, a, b);
        self.b.ins().uextend(types::I64, c)
    }

    pub(super) fn expr(&mut self, e: &Expr) -> Option<Value> {
        Some(match e {
            &Expr::Const(v) => {
                if v > u64::MAX as u128 {
                    return None;
                }
                self.k(v as u64)
            }
            Expr::Read(p) => self.load(p)?,
            &Expr::IsValid(HdrRef::Static(id)) => {
                let base = self.valid();
                self.b.ins().uload8(types::I64, mem(), base, id as i32)
            }
            &Expr::Unary { op, ref e, width } if width <= 64 => {
                let v = self.expr(e)?;
                match op {
                    UnOp::Not => self.b.ins().bxor_imm(v, 1),
                    UnOp::BitNot => {
                        let v = self.b.ins().bnot(v);
                        self.trunc(v, width)
                    }
                    UnOp::Neg => {
                        let v = self.b.ins().ineg(v);
                        self.trunc(v, width)
                    }
                }
            }
            &Expr::Binary { op, ref a, ref b, width, signed } if width <= 64 => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                self.binary(op, a, b, width, signed)?
            }
            &Expr::Cast { ref e, from, signed, to } if from <= 64 && to <= 64 => {
                let v = self.expr(e)?;
                if signed && to > from {
                    let v = self.sext(v, from);
                    self.trunc(v, to)
                } else if to >= from {
                    v
                } else {
                    self.trunc(v, to)
                }
            }
            &Expr::Slice { ref e, hi, lo } => {
                let v = self.expr(e)?;
                let v = self.b.ins().ushr_imm(v, lo as i64);
                self.trunc(v, hi - lo + 1)
            }
            &Expr::Concat { ref a, ref b, b_width } if width_bound(a)? + b_width <= 64 => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                let a = self.b.ins().ishl_imm(a, b_width as i64);
                self.b.ins().bor(a, b)
            }
            Expr::Mux { cond, a, b } => {
                let (cond, a, b) = (self.expr(cond)?, self.expr(a)?, self.expr(b)?);
                self.b.ins().select(cond, a, b)
            }
            Expr::StackIndex { stack, last } => {
                let base = self.slots();
                let v = self.b.ins().load(types::I64, mem(), base, (stack.next_slot * 16) as i32);
                if *last {
                    let v = self.b.ins().iadd_imm(v, -1);
                    self.trunc(v, 32)
                } else {
                    v
                }
            }
            Expr::PacketLength => self.b.ins().load(self.ptr, mem(), self.frame, frame::PKT_LEN),
            &Expr::Lookahead { width } if width <= 64 => self.lookahead(width),
            _ => return None,
        })
    }

    pub(super) fn binary(
        &mut self,
        op: BinOp,
        a: Value,
        b: Value,
        width: u32,
        signed: bool,
    ) -> Option<Value> {
        Some(match op {
            BinOp::Add => {
                let v = self.b.ins().iadd(a, b);
                self.trunc(v, width)
            }
            BinOp::Sub => {
                let v = self.b.ins().isub(a, b);
                self.trunc(v, width)
            }
            BinOp::Mul => {
                let v = self.b.ins().imul(a, b);
                self.trunc(v, width)
            }
            BinOp::Div | BinOp::Mod => {
                // x / 0 and x % 0 are 0, as in the closures.
                let (zero, one) = (self.k(0), self.k(1));
                let is_zero = self.b.ins().icmp_imm(IntCC::Equal, b, 0);
                let d = self.b.ins().select(is_zero, one, b);
                let v = if op == BinOp::Div {
                    self.b.ins().udiv(a, d)
                } else {
                    self.b.ins().urem(a, d)
                };
                self.b.ins().select(is_zero, zero, v)
            }
            BinOp::AddSat if !signed && width < 64 => {
                let v = self.b.ins().iadd(a, b);
                let m = self.k(mask(width) as u64);
                self.b.ins().umin(v, m)
            }
            BinOp::SubSat if !signed => {
                let (v, zero) = (self.b.ins().isub(a, b), self.k(0));
                let under = self.b.ins().icmp(IntCC::UnsignedLessThan, a, b);
                self.b.ins().select(under, zero, v)
            }
            BinOp::AddSat | BinOp::SubSat => return None,
            BinOp::Shl => {
                let (v, zero) = (self.b.ins().ishl(a, b), self.k(0));
                let v = self.trunc(v, width);
                let over =
                    self.b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, b, width as i64);
                self.b.ins().select(over, zero, v)
            }
            BinOp::Shr if signed => {
                let a = self.sext(a, width);
                let max = self.k(63);
                let n = self.b.ins().umin(b, max);
                let v = self.b.ins().sshr(a, n);
                self.trunc(v, width)
            }
            BinOp::Shr => {
                let (v, zero) = (self.b.ins().ushr(a, b), self.k(0));
                let over = self.b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, b, 64);
                self.b.ins().select(over, zero, v)
            }
            BinOp::And => self.b.ins().band(a, b),
            BinOp::Or => self.b.ins().bor(a, b),
            BinOp::Xor => self.b.ins().bxor(a, b),
            BinOp::Eq => self.bool(IntCC::Equal, a, b),
            BinOp::Ne => self.bool(IntCC::NotEqual, a, b),
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge if signed => {
                let (a, b) = (self.sext(a, width), self.sext(b, width));
                let cc = match op {
                    BinOp::Lt => IntCC::SignedLessThan,
                    BinOp::Le => IntCC::SignedLessThanOrEqual,
                    BinOp::Gt => IntCC::SignedGreaterThan,
                    _ => IntCC::SignedGreaterThanOrEqual,
                };
                self.bool(cc, a, b)
            }
            BinOp::Lt => self.bool(IntCC::UnsignedLessThan, a, b),
            BinOp::Le => self.bool(IntCC::UnsignedLessThanOrEqual, a, b),
            BinOp::Gt => self.bool(IntCC::UnsignedGreaterThan, a, b),
            BinOp::Ge => self.bool(IntCC::UnsignedGreaterThanOrEqual, a, b),
            BinOp::LogicAnd | BinOp::LogicOr => {
                let a = self.b.ins().icmp_imm(IntCC::NotEqual, a, 0);
                let b = self.b.ins().icmp_imm(IntCC::NotEqual, b, 0);
                let v = if op == BinOp::LogicAnd {
                    self.b.ins().band(a, b)
                } else {
                    self.b.ins().bor(a, b)
                };
                self.b.ins().uextend(types::I64, v)
            }
        })
    }
}

/// An upper bound on the bits of an expression's value; `None` if unknown.
fn width_bound(e: &Expr) -> Option<u32> {
    Some(match e {
        Expr::Const(v) => 128 - v.leading_zeros(),
        Expr::Read(p) => p.width(),
        Expr::IsValid(_) => 1,
        Expr::Unary { op: UnOp::Not, .. } => 1,
        Expr::Unary { width, .. } => *width,
        Expr::Binary { op, width, .. } => match op {
            BinOp::Eq
            | BinOp::Ne
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge
            | BinOp::LogicAnd
            | BinOp::LogicOr => 1,
            _ => *width,
        },
        Expr::Cast { to, .. } => *to,
        Expr::Slice { hi, lo, .. } => hi - lo + 1,
        Expr::Concat { a, b_width, .. } => width_bound(a)? + b_width,
        Expr::Mux { a, b, .. } => width_bound(a)?.max(width_bound(b)?),
        Expr::Lookahead { width } => *width,
        Expr::StackIndex { .. } | Expr::PacketLength => 32,
        Expr::VarbitEq(..) => 1,
        Expr::VarbitField(..) => 0,
    })
}

/// A run of `n` (up to 7) bytes as (offset, size) pieces of 4, 2 and 1 bytes, in order.
/// Bytes of the smallest load (1, 2, 4 or 8) holding `bits` bits from a byte's start.
fn window_bytes(bits: u32) -> u32 {
    match bits {
        0..=8 => 1,
        9..=16 => 2,
        17..=32 => 4,
        _ => 8,
    }
}

fn pieces(n: u32) -> Vec<(i32, u32)> {
    let mut at = 0;
    let mut out = Vec::with_capacity(3);
    for size in [4u32, 2, 1] {
        if at + size <= n {
            out.push((at as i32, size));
            at += size;
        }
    }
    out
}
