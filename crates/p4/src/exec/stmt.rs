//! Statements compiled to closures that return how control continues.

use super::{Compiler, Ctx, Flow, StmtFn};
use crate::ir::{StackRef, Stmt};

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
                let (dst, src) = (self.hdr(dst), self.hdr(src));
                Box::new(move |c| {
                    if let (Some((di, doff)), Some((si, soff))) = (dst.resolve(c), src.resolve(c)) {
                        let (d, s) = (doff as usize, soff as usize);
                        c.st.hdr.copy_within(s..s + bytes, d);
                        c.st.valid[di as usize] = c.st.valid[si as usize];
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
        Box::new(move |c| {
            let k = k.min(n);
            if up {
                c.st.hdr.copy_within(base..base + (n - k) * bytes, base + k * bytes);
                c.st.valid.copy_within(id0..id0 + n - k, id0 + k);
                c.st.valid[id0..id0 + k].fill(false);
                c.st.slots[next] = (c.st.slots[next] + k as u128).min(n as u128);
            } else {
                c.st.hdr.copy_within(base + k * bytes..base + n * bytes, base);
                c.st.valid.copy_within(id0 + k..id0 + n, id0);
                c.st.valid[id0 + n - k..id0 + n].fill(false);
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
