//! Statements compiled to closures that return how control continues.

use super::bits::{read_be, write_be};
use super::{Compiler, Ctx, Flow, StmtFn};
use crate::ir::{BinOp, Expr, Place, StackRef, Stmt};
use crate::types::mask;

impl Compiler<'_> {
    /// A sequence: stops at the first statement that does not fall through.
    pub(crate) fn block(&self, stmts: &[Stmt]) -> StmtFn {
        let mut fns: Vec<StmtFn> = stmts.iter().map(|s| self.stmt(s)).collect();
        match fns.len() {
            0 => Box::new(|_| Flow::Next),
            1 => fns.pop().expect("one statement"),
            2 => {
                let b = fns.pop().expect("two statements");
                let a = fns.pop().expect("two statements");
                Box::new(move |c| match a(c) {
                    Flow::Next => b(c),
                    f => f,
                })
            }
            _ => {
                let fns = fns.into_boxed_slice();
                Box::new(move |c| {
                    for f in fns.iter() {
                        match f(c) {
                            Flow::Next => {}
                            other => return other,
                        }
                    }
                    Flow::Next
                })
            }
        }
    }

    /// Assignments between whole-byte header fields and slots, without nested closures:
    /// `hdr.a = hdr.b` is a byte copy, `hdr.a = slot` a big-endian store, and so on.
    fn assign_direct(&self, place: &Place, e: &Expr) -> Option<StmtFn> {
        // `hdr.f = hdr.f +/- k` (a TTL decrement, a counter field): one closure, in place.
        if let Expr::Binary { op: op @ (BinOp::Add | BinOp::Sub), a, b, width, signed: false } = e {
            if let (Expr::Read(src), Expr::Const(k), Some((at, n))) =
                (&**a, &**b, self.static_bytes(place))
            {
                if src == place && n <= 16 {
                    let (k, m, sub) = (*k, mask(*width), *op == BinOp::Sub);
                    return Some(Box::new(move |c| {
                        let field = &mut c.st.hdr[at..at + n];
                        let v = read_be(field);
                        let v = if sub { v.wrapping_sub(k) } else { v.wrapping_add(k) };
                        write_be(field, v & m);
                        Flow::Next
                    }));
                }
            }
        }
        let Expr::Read(src) = e else { return None };
        if src.width() != place.width() {
            return None;
        }
        let slot = |p: &Place| match *p {
            Place::Slot { slot, .. } => Some(slot as usize),
            _ => None,
        };
        Some(match (self.static_bytes(place), slot(place), self.static_bytes(src), slot(src)) {
            (Some((d, n)), _, Some((s, _)), _) => Box::new(move |c| {
                c.st.hdr.copy_within(s..s + n, d);
                Flow::Next
            }),
            (Some((d, n)), _, _, Some(s)) if n <= 16 => Box::new(move |c| {
                let v = c.st.slots[s];
                write_be(&mut c.st.hdr[d..d + n], v);
                Flow::Next
            }),
            (_, Some(d), Some((s, n)), _) if n <= 16 => Box::new(move |c| {
                c.st.slots[d] = read_be(&c.st.hdr[s..s + n]);
                Flow::Next
            }),
            (_, Some(d), _, Some(s)) => Box::new(move |c| {
                c.st.slots[d] = c.st.slots[s];
                Flow::Next
            }),
            _ => return None,
        })
    }

    pub(crate) fn stmt(&self, s: &Stmt) -> StmtFn {
        match s {
            Stmt::Assign(place, e) => {
                // The most common shapes get a closure of their own.
                if let (&crate::ir::Place::Slot { slot, .. }, crate::ir::Expr::Const(v)) =
                    (place, e)
                {
                    let (s, v) = (slot as usize, *v);
                    return Box::new(move |c| {
                        c.st.slots[s] = v;
                        Flow::Next
                    });
                }
                if let Some(f) = self.assign_direct(place, e) {
                    return f;
                }
                let (store, e) = (self.store(place), self.expr(e));
                Box::new(move |c| {
                    let v = e(c);
                    store(c, v);
                    Flow::Next
                })
            }
            Stmt::SetValid(h, valid) => {
                let (sel, valid) = (self.hdr(h), *valid);
                Box::new(move |c| {
                    if let Some((id, _)) = sel.resolve(c) {
                        c.st.valid[id as usize] = valid;
                    }
                    Flow::Next
                })
            }
            Stmt::CopyHeader { dst, src } => {
                let bytes = self.hdr_bytes(src);
                let varbits = self.hdr_varbit(src).then(|| self.varbits());
                let (dst, src) = (self.hdr(dst), self.hdr(src));
                Box::new(move |c| {
                    if let (Some((di, doff)), Some((si, soff))) = (dst.resolve(c), src.resolve(c)) {
                        let (d, s) = (doff as usize, soff as usize);
                        c.st.hdr.copy_within(s..s + bytes, d);
                        c.st.valid[di as usize] = c.st.valid[si as usize];
                        // A varbit field's length goes with its bytes.
                        if let Some(v) = &varbits {
                            if let (Some(dv), Some(sv)) = (v[di as usize], v[si as usize]) {
                                c.st.slots[dv.len_slot as usize] = c.st.slots[sv.len_slot as usize];
                            }
                        }
                    }
                    Flow::Next
                })
            }
            Stmt::If(cond, then, els) => {
                let (cond, then) = (self.expr(cond), self.block(then));
                if els.is_empty() {
                    Box::new(move |c| if cond(c) != 0 { then(c) } else { Flow::Next })
                } else {
                    let els = self.block(els);
                    Box::new(move |c| if cond(c) != 0 { then(c) } else { els(c) })
                }
            }
            Stmt::Block(b) => self.block(b),
            Stmt::Scope(b) => {
                let b = self.block(b);
                Box::new(move |c| match b(c) {
                    Flow::Return => Flow::Next,
                    f => f,
                })
            }
            Stmt::Call { body, copy_out } => {
                let (body, copy_out) = (self.block(body), self.block(copy_out));
                Box::new(move |c| match body(c) {
                    Flow::Next => copy_out(c),
                    Flow::Exit => match copy_out(c) {
                        Flow::Next => Flow::Exit,
                        f => f,
                    },
                    f => f,
                })
            }
            &Stmt::Loop { ref body, max } => {
                let body = self.block(body);
                Box::new(move |c| {
                    for _ in 0..max {
                        match body(c) {
                            Flow::Next | Flow::Continue => {}
                            Flow::Break => break,
                            f => return f,
                        }
                    }
                    Flow::Next
                })
            }
            Stmt::Iteration(b) => {
                let b = self.block(b);
                Box::new(move |c| match b(c) {
                    Flow::Continue => Flow::Next,
                    f => f,
                })
            }
            Stmt::Break => Box::new(|_| Flow::Break),
            Stmt::Continue => Box::new(|_| Flow::Continue),
            Stmt::Exit => Box::new(|_| Flow::Exit),
            Stmt::Return => Box::new(|_| Flow::Return),
            &Stmt::Apply { table, hit_slot, action_slot } => {
                self.apply(table, hit_slot, action_slot)
            }
            Stmt::Switch { on, cases, default } => {
                let on = self.expr(on);
                let cases: Vec<(Vec<u128>, StmtFn)> =
                    cases.iter().map(|(labels, body)| (labels.clone(), self.block(body))).collect();
                let default = self.block(default);
                Box::new(move |c| {
                    let v = on(c);
                    for (labels, body) in &cases {
                        if labels.contains(&v) {
                            return body(c);
                        }
                    }
                    default(c)
                })
            }
            Stmt::StackPush { stack, count } => self.shift_stack(stack, *count, true),
            Stmt::StackPop { stack, count } => self.shift_stack(stack, *count, false),
            Stmt::Extern(x) => self.extern_call(x),
        }
    }

    /// `push_front(n)` (up) and `pop_front(n)` (down): elements move, vacated ones turn invalid.
    fn shift_stack(&self, stack: &StackRef, count: u32, up: bool) -> StmtFn {
        let first = &self.prog.headers[stack.first as usize];
        let (base, bytes) = (first.byte_off as usize, first.bytes as usize);
        let (id0, n, k) = (stack.first as usize, stack.count as usize, count as usize);
        let next = stack.next_slot as usize;
        // Elements' varbit lengths sit in consecutive slots (allocated with the elements).
        let lens = first.varbit.map(|v| v.len_slot as usize);
        Box::new(move |c| {
            let k = k.min(n);
            if up {
                c.st.hdr.copy_within(base..base + (n - k) * bytes, base + k * bytes);
                c.st.valid.copy_within(id0..id0 + n - k, id0 + k);
                c.st.valid[id0..id0 + k].fill(false);
                if let Some(l) = lens {
                    c.st.slots.copy_within(l..l + n - k, l + k);
                }
                c.st.slots[next] = (c.st.slots[next] + k as u128).min(n as u128);
            } else {
                c.st.hdr.copy_within(base + k * bytes..base + n * bytes, base);
                c.st.valid.copy_within(id0 + k..id0 + n, id0);
                c.st.valid[id0 + n - k..id0 + n].fill(false);
                if let Some(l) = lens {
                    c.st.slots.copy_within(l + k..l + n, l);
                }
                c.st.slots[next] = c.st.slots[next].saturating_sub(k as u128);
            }
            Flow::Next
        })
    }
}

/// Run a compiled control body to its end: `exit` and a top-level `return` both end it.
#[inline]
pub(crate) fn run_control(f: &StmtFn, c: &mut Ctx<'_>) {
    let _ = f(c);
}
