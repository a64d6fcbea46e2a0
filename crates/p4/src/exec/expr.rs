//! Expressions and storage locations compiled to closures. Each closure reads the packet's
//! state and returns a canonical value (masked to its width, signed values in two's
//! complement), so no operation needs to know where its operands came from.

use super::bits::{read_be, read_bits, write_be, write_bits};
use super::{Compiler, Ctx, ExprFn};
use crate::ir::{BinOp, Expr, HdrRef, Place, StackRef, UnOp};
use crate::types::{mask, sext};

/// A header reference resolved at run time (stack elements chosen by index).
#[derive(Clone)]
pub(crate) enum HdrSel {
    Static { id: u32, byte_off: u32 },
    Dynamic(std::sync::Arc<DynHdr>),
}

pub(crate) struct DynHdr {
    stack: StackRef,
    /// Byte offset of element 0 and the element size: stack elements are consecutive.
    base: u32,
    elem_bytes: u32,
    which: Which,
}

enum Which {
    Index(ExprFn),
    Next,
    Last,
}

impl HdrSel {
    /// The instance and its byte offset, or `None` for an element outside the stack.
    #[inline]
    pub fn resolve(&self, c: &Ctx<'_>) -> Option<(u32, u32)> {
        match self {
            HdrSel::Static { id, byte_off } => Some((*id, *byte_off)),
            HdrSel::Dynamic(d) => {
                let next = c.st.slots[d.stack.next_slot as usize];
                let k = match &d.which {
                    Which::Index(e) => e(c),
                    Which::Next => next,
                    Which::Last => next.checked_sub(1)?,
                };
                (k < d.stack.count as u128).then(|| {
                    let k = k as u32;
                    (d.stack.first + k, d.base + k * d.elem_bytes)
                })
            }
        }
    }
}

/// A compiled store: writes a canonical value to a place.
pub(crate) type StoreFn = Box<dyn Fn(&mut Ctx<'_>, u128) + Send + Sync>;

impl Compiler<'_> {
    pub(crate) fn hdr(&self, h: &HdrRef) -> HdrSel {
        let headers = &self.prog.headers;
        let dynamic = |stack: &StackRef, which| {
            let first = &headers[stack.first as usize];
            HdrSel::Dynamic(std::sync::Arc::new(DynHdr {
                stack: stack.clone(),
                base: first.byte_off,
                elem_bytes: first.bytes,
                which,
            }))
        };
        match h {
            HdrRef::Static(id) => {
                HdrSel::Static { id: *id, byte_off: headers[*id as usize].byte_off }
            }
            HdrRef::Index(stack, e) => dynamic(stack, Which::Index(self.expr(e))),
            HdrRef::Next(stack) => dynamic(stack, Which::Next),
            HdrRef::Last(stack) => dynamic(stack, Which::Last),
        }
    }

    /// Bytes of the header a reference names (stack elements all have their stack's type).
    /// Each header instance's varbit field, by id (for closures that resolve ids at run time).
    pub(crate) fn varbits(&self) -> std::sync::Arc<[Option<crate::ir::Varbit>]> {
        self.prog.headers.iter().map(|h| h.varbit).collect()
    }

    /// Whether the header a reference names has a varbit field.
    pub(crate) fn hdr_varbit(&self, h: &HdrRef) -> bool {
        let id = match h {
            HdrRef::Static(id) => *id,
            HdrRef::Index(s, _) | HdrRef::Next(s) | HdrRef::Last(s) => s.first,
        };
        self.prog.headers[id as usize].varbit.is_some()
    }

    pub(crate) fn hdr_bytes(&self, h: &HdrRef) -> usize {
        let id = match h {
            HdrRef::Static(id) => *id,
            HdrRef::Index(s, _) | HdrRef::Next(s) | HdrRef::Last(s) => s.first,
        };
        self.prog.headers[id as usize].bytes as usize
    }

    /// Where a field of a fixed header lies in whole bytes (byte offset in the header area,
    /// length), when it starts on a byte and is a whole number of bytes: such a field's bytes
    /// are its big-endian value, so it can be copied rather than decoded.
    pub(crate) fn static_bytes(&self, p: &Place) -> Option<(usize, usize)> {
        match p {
            &Place::Field { hdr: HdrRef::Static(id), bit_off, width }
                if bit_off % 8 == 0 && width % 8 == 0 && width > 0 =>
            {
                let byte_off = self.prog.headers[id as usize].byte_off as usize;
                Some((byte_off + bit_off as usize / 8, width as usize / 8))
            }
            _ => None,
        }
    }

    pub(crate) fn load(&self, p: &Place) -> ExprFn {
        match p {
            &Place::Slot { slot, .. } => {
                let s = slot as usize;
                Box::new(move |c| c.st.slots[s])
            }
            &Place::Field { ref hdr, bit_off, width } => match self.hdr(hdr) {
                HdrSel::Static { byte_off, .. } => {
                    let off = byte_off * 8 + bit_off;
                    let b = (off / 8) as usize;
                    match (off % 8, width) {
                        (0, 8) => Box::new(move |c| c.st.hdr[b] as u128),
                        (0, 16) => Box::new(move |c| {
                            u16::from_be_bytes([c.st.hdr[b], c.st.hdr[b + 1]]) as u128
                        }),
                        (0, 32) => Box::new(move |c| {
                            let h = &c.st.hdr[b..b + 4];
                            u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as u128
                        }),
                        (0, w) if w % 8 == 0 => {
                            let n = (w / 8) as usize;
                            Box::new(move |c| read_be(&c.st.hdr[b..b + n]))
                        }
                        _ => Box::new(move |c| read_bits(&c.st.hdr, off, width)),
                    }
                }
                sel => Box::new(move |c| match sel.resolve(c) {
                    Some((_, byte_off)) => read_bits(&c.st.hdr, byte_off * 8 + bit_off, width),
                    None => 0,
                }),
            },
            Place::Slice { base, hi, lo } => {
                let (base, lo, m) = (self.load(base), *lo, mask(hi - lo + 1));
                Box::new(move |c| (base(c) >> lo) & m)
            }
            Place::Discard { .. } => Box::new(|_| 0),
        }
    }

    pub(crate) fn store(&self, p: &Place) -> StoreFn {
        match p {
            &Place::Slot { slot, .. } => {
                let s = slot as usize;
                Box::new(move |c, v| c.st.slots[s] = v)
            }
            &Place::Field { ref hdr, bit_off, width } => match self.hdr(hdr) {
                HdrSel::Static { byte_off, .. } => {
                    let off = byte_off * 8 + bit_off;
                    let b = (off / 8) as usize;
                    match (off % 8, width) {
                        (0, 8) => Box::new(move |c, v| c.st.hdr[b] = v as u8),
                        (0, w) if w % 8 == 0 => {
                            let n = (w / 8) as usize;
                            Box::new(move |c, v| write_be(&mut c.st.hdr[b..b + n], v))
                        }
                        _ => Box::new(move |c, v| write_bits(&mut c.st.hdr, off, width, v)),
                    }
                }
                sel => Box::new(move |c, v| {
                    if let Some((_, byte_off)) = sel.resolve(c) {
                        write_bits(&mut c.st.hdr, byte_off * 8 + bit_off, width, v)
                    }
                }),
            },
            Place::Slice { base, hi, lo } => {
                let (get, set) = (self.load(base), self.store(base));
                let (lo, m) = (*lo, mask(hi - lo + 1) << *lo);
                Box::new(move |c, v| {
                    let old = get(c);
                    set(c, (old & !m) | ((v << lo) & m));
                })
            }
            Place::Discard { .. } => Box::new(|_, _| {}),
        }
    }

    pub(crate) fn expr(&self, e: &Expr) -> ExprFn {
        match e {
            &Expr::Const(v) => Box::new(move |_| v),
            Expr::Read(p) => self.load(p),
            Expr::IsValid(h) => match self.hdr(h) {
                HdrSel::Static { id, .. } => {
                    let id = id as usize;
                    Box::new(move |c| c.st.valid[id] as u128)
                }
                sel => Box::new(move |c| {
                    sel.resolve(c).is_some_and(|(id, _)| c.st.valid[id as usize]) as u128
                }),
            },
            &Expr::Unary { op, ref e, width } => {
                let e = self.expr(e);
                let m = mask(width);
                match op {
                    UnOp::Not => Box::new(move |c| e(c) ^ 1),
                    UnOp::BitNot => Box::new(move |c| !e(c) & m),
                    UnOp::Neg => Box::new(move |c| e(c).wrapping_neg() & m),
                }
            }
            &Expr::Binary { op, ref a, ref b, width, signed } => {
                self.binary(op, a, b, width, signed)
            }
            &Expr::Cast { ref e, from, signed, to } => {
                let e = self.expr(e);
                let m = mask(to);
                if signed && to > from {
                    Box::new(move |c| sext(e(c), from) as u128 & m)
                } else if to >= from {
                    e
                } else {
                    Box::new(move |c| e(c) & m)
                }
            }
            &Expr::Slice { ref e, hi, lo } => {
                let e = self.expr(e);
                let m = mask(hi - lo + 1);
                Box::new(move |c| (e(c) >> lo) & m)
            }
            &Expr::Concat { ref a, ref b, b_width } => {
                let (a, b) = (self.expr(a), self.expr(b));
                Box::new(move |c| a(c).checked_shl(b_width).unwrap_or(0) | b(c))
            }
            Expr::Mux { cond, a, b } => {
                let (cond, a, b) = (self.expr(cond), self.expr(a), self.expr(b));
                Box::new(move |c| if cond(c) != 0 { a(c) } else { b(c) })
            }
            &Expr::Lookahead { width } => Box::new(move |c| {
                let bytes = width.div_ceil(8) as usize;
                match c.pkt.get(c.cursor..c.cursor + bytes) {
                    Some(ahead) => read_bits(ahead, 0, width),
                    None => 0,
                }
            }),
            Expr::StackIndex { stack, last } => {
                let s = stack.next_slot as usize;
                if *last {
                    Box::new(move |c| c.st.slots[s].wrapping_sub(1) & mask(32))
                } else {
                    Box::new(move |c| c.st.slots[s])
                }
            }
            Expr::PacketLength => Box::new(|c| c.pkt.len() as u128),
            // Only a field list item (see `field_list`); as a value it has no bits.
            Expr::VarbitField(_) => Box::new(|_| 0),
            Expr::VarbitEq(a, b) => {
                let (a, b, varbits) = (self.hdr(a), self.hdr(b), self.varbits());
                Box::new(move |c| {
                    let (Some((ia, oa)), Some((ib, ob))) = (a.resolve(c), b.resolve(c)) else {
                        return 0;
                    };
                    let (Some(va), Some(vb)) = (varbits[ia as usize], varbits[ib as usize]) else {
                        return 0;
                    };
                    let (la, lb) =
                        (c.st.slots[va.len_slot as usize], c.st.slots[vb.len_slot as usize]);
                    if la != lb {
                        return 0;
                    }
                    let n = (la.min(va.max_bits as u128) / 8) as usize;
                    let (sa, sb) = ((oa + va.byte_off) as usize, (ob + vb.byte_off) as usize);
                    (c.st.hdr[sa..sa + n] == c.st.hdr[sb..sb + n]) as u128
                })
            }
        }
    }

    fn binary(&self, op: BinOp, a: &Expr, b: &Expr, width: u32, signed: bool) -> ExprFn {
        let m = mask(width);
        // Constant right operands are common (`ttl - 1`, `x == 0x800`): fold them in.
        if let (&Expr::Const(k), false) = (b, signed) {
            let a = self.expr(a);
            match op {
                BinOp::Add => return Box::new(move |c| a(c).wrapping_add(k) & m),
                BinOp::Sub => return Box::new(move |c| a(c).wrapping_sub(k) & m),
                BinOp::Eq => return Box::new(move |c| (a(c) == k) as u128),
                BinOp::Ne => return Box::new(move |c| (a(c) != k) as u128),
                BinOp::And => return Box::new(move |c| a(c) & k),
                _ => {}
            }
        }
        let (a, b) = (self.expr(a), self.expr(b));
        let s = move |v: u128| sext(v, width);
        match op {
            BinOp::Add => Box::new(move |c| a(c).wrapping_add(b(c)) & m),
            BinOp::Sub => Box::new(move |c| a(c).wrapping_sub(b(c)) & m),
            BinOp::Mul => Box::new(move |c| a(c).wrapping_mul(b(c)) & m),
            BinOp::Div => Box::new(move |c| a(c).checked_div(b(c)).unwrap_or(0)),
            BinOp::Mod => Box::new(move |c| a(c).checked_rem(b(c)).unwrap_or(0)),
            BinOp::AddSat if signed => Box::new(move |c| {
                let (max, min) = (sext(m >> 1, width), -sext(m >> 1, width) - 1);
                (s(a(c)).saturating_add(s(b(c))).clamp(min, max) as u128) & m
            }),
            BinOp::SubSat if signed => Box::new(move |c| {
                let (max, min) = (sext(m >> 1, width), -sext(m >> 1, width) - 1);
                (s(a(c)).saturating_sub(s(b(c))).clamp(min, max) as u128) & m
            }),
            BinOp::AddSat => Box::new(move |c| a(c).saturating_add(b(c)).min(m)),
            BinOp::SubSat => Box::new(move |c| a(c).saturating_sub(b(c))),
            BinOp::Shl => Box::new(move |c| {
                let n = b(c);
                if n >= width as u128 {
                    0
                } else {
                    (a(c) << n) & m
                }
            }),
            BinOp::Shr if signed => Box::new(move |c| {
                let n = b(c).min(127) as u32;
                (s(a(c)) >> n) as u128 & m
            }),
            BinOp::Shr => Box::new(move |c| a(c).checked_shr(b(c).min(128) as u32).unwrap_or(0)),
            BinOp::And => Box::new(move |c| a(c) & b(c)),
            BinOp::Or => Box::new(move |c| a(c) | b(c)),
            BinOp::Xor => Box::new(move |c| a(c) ^ b(c)),
            BinOp::Eq => Box::new(move |c| (a(c) == b(c)) as u128),
            BinOp::Ne => Box::new(move |c| (a(c) != b(c)) as u128),
            BinOp::Lt if signed => Box::new(move |c| (s(a(c)) < s(b(c))) as u128),
            BinOp::Le if signed => Box::new(move |c| (s(a(c)) <= s(b(c))) as u128),
            BinOp::Gt if signed => Box::new(move |c| (s(a(c)) > s(b(c))) as u128),
            BinOp::Ge if signed => Box::new(move |c| (s(a(c)) >= s(b(c))) as u128),
            BinOp::Lt => Box::new(move |c| (a(c) < b(c)) as u128),
            BinOp::Le => Box::new(move |c| (a(c) <= b(c)) as u128),
            BinOp::Gt => Box::new(move |c| (a(c) > b(c)) as u128),
            BinOp::Ge => Box::new(move |c| (a(c) >= b(c)) as u128),
            BinOp::LogicAnd => Box::new(move |c| (a(c) != 0 && b(c) != 0) as u128),
            BinOp::LogicOr => Box::new(move |c| (a(c) != 0 || b(c) != 0) as u128),
        }
    }
}
