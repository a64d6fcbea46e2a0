//! Statements, calls (actions, functions, methods, externs) and copy-in/copy-out.

use super::expr::Val;
use super::{Binding, Lowerer, Storage};
use crate::ast::{self, DeclKind, StmtKind};
use crate::diag::{DResult, Diagnostic, Span};
use crate::ir::{Expr, HdrRef, Place, Stmt};
use crate::types::{ConstValue, Ty};

impl<'a> Lowerer<'a> {
    pub(crate) fn block_stmts(&mut self, stmts: &'a [ast::Stmt]) -> DResult<Vec<Stmt>> {
        self.push_scope();
        let mut out = Vec::new();
        let r = stmts.iter().try_for_each(|s| self.stmt(s, &mut out));
        self.pop_scope();
        r.map(|_| out)
    }

    pub(crate) fn stmt(&mut self, s: &'a ast::Stmt, out: &mut Vec<Stmt>) -> DResult<()> {
        match &s.kind {
            StmtKind::Empty => {}
            StmtKind::Block(b) => out.push(Stmt::Block(self.block_stmts(&b.stmts)?)),
            StmtKind::Assign { lhs, rhs } => {
                // The left side first, fixed before the right side's side effects.
                let dst = self.fixed_lvalue(lhs, out)?;
                let src = self.expr(rhs, out)?;
                let stmts = self.assign(&dst, src, rhs.span)?;
                out.extend(stmts);
            }
            StmtKind::CompoundAssign { op, lhs, rhs } => {
                // `a op= b` is `a = a op b` with `a` evaluated once (an index with a call in it
                // runs the call once).
                let dst = self.fixed_lvalue(lhs, out)?;
                let current = match &dst {
                    v @ Val::Scalar { .. } => v.clone(),
                    _ => return self.err(lhs.span, "compound assignment applies to single values"),
                };
                let (current, value) = self.then_expr(current, rhs, out)?;
                self.check_divisor(*op, rhs, s.span)?;
                let src = self.binary_values(
                    *op,
                    (current, lhs.span),
                    (value, rhs.span),
                    s.span,
                    s.span,
                )?;
                let stmts = self.assign(&dst, src, s.span)?;
                out.extend(stmts);
            }
            // A value-returning call used as a statement runs for its effects.
            StmtKind::Call(e) => {
                self.call(e, out)?;
            }
            StmtKind::If { cond, then, els } => {
                let c = self.condition(cond, out)?;
                let t = self.stmt_scoped(then)?;
                let e = match els {
                    Some(e) => self.stmt_scoped(e)?,
                    None => Vec::new(),
                };
                out.push(Stmt::If(c, t, e));
            }
            StmtKind::Exit => {
                // Spec (exit statement): not allowed within parsers or functions.
                if self.block == super::BlockKind::Parser {
                    return self.err(s.span, "`exit` is not allowed in a parser");
                }
                if self.in_function > 0 {
                    return self.err(s.span, "`exit` is not allowed in a function");
                }
                out.push(Stmt::Exit);
            }
            StmtKind::Return(value) => {
                match (value, self.return_target.last().cloned()) {
                    (Some(v), Some(Some(storage))) => {
                        let val = self.expr(v, out)?;
                        out.extend(self.assign(&storage_val(storage), val, v.span)?);
                    }
                    (Some(v), _) => {
                        return self.err(v.span, "`return` with a value outside a function")
                    }
                    (None, Some(Some(_))) => {
                        return self.err(s.span, "this function must return a value")
                    }
                    (None, _) => {}
                }
                out.push(Stmt::Return);
            }
            StmtKind::Switch { expr, cases } => self.switch(expr, cases, out)?,
            StmtKind::For { init, cond, update, body } => {
                self.push_scope();
                let r = self.for_loop(init, cond.as_ref(), update, body, out);
                self.pop_scope();
                r?
            }
            StmtKind::ForIn { ty, name, range, body } => {
                self.push_scope();
                let r = self.for_in(ty, name, range, body, out);
                self.pop_scope();
                r?
            }
            StmtKind::Break | StmtKind::Continue => {
                if self.loop_depth == 0 {
                    return self.err(s.span, "`break` and `continue` belong inside a `for` loop");
                }
                out.push(if matches!(s.kind, StmtKind::Break) {
                    Stmt::Break
                } else {
                    Stmt::Continue
                });
            }
            StmtKind::Decl(d) => self.local_decl(d, out)?,
        }
        Ok(())
    }

    /// `for (init; cond; update) body`: the initialisers, then a loop whose iteration checks
    /// the condition, runs the body (`continue` ends only the body) and then the updates. It
    /// runs at most 2^w + 1 times for a w-bit loop variable declared in `init`, and at most
    /// `MAX_LOOP_ITERATIONS` in any case.
    fn for_loop(
        &mut self,
        init: &'a [ast::Stmt],
        cond: Option<&'a ast::Expr>,
        update: &'a [ast::Stmt],
        body: &'a ast::Stmt,
        out: &mut Vec<Stmt>,
    ) -> DResult<()> {
        let mut max = MAX_LOOP_ITERATIONS;
        for s in init {
            if let StmtKind::Decl(d) = &s.kind {
                if let DeclKind::Variable { ty, .. } = &d.kind {
                    if let Some(w) = self.resolve(ty)?.scalar_width(&self.types) {
                        max = max.min(1u32.checked_shl(w).unwrap_or(u32::MAX).saturating_add(1));
                    }
                }
            }
            self.stmt(s, out)?;
        }
        let mut iteration = Vec::new();
        let outer = self.enter_loop(max, body.span)?;
        if let Some(c) = cond {
            let c = self.condition(c, &mut iteration)?;
            let stop = Expr::Unary { op: crate::ir::UnOp::Not, e: Box::new(c), width: 1 };
            iteration.push(Stmt::If(stop, vec![Stmt::Break], Vec::new()));
        }
        self.loop_depth += 1;
        let b = self.stmt_scoped(body);
        self.loop_depth -= 1;
        let r = (|| {
            iteration.push(Stmt::Iteration(b?));
            for s in update {
                self.stmt(s, &mut iteration)?;
            }
            Ok(())
        })();
        self.loop_work = outer;
        r?;
        out.push(Stmt::Loop { body: iteration, max });
        Ok(())
    }

    /// Account for a loop of `max` iterations inside the loops around it: their product is
    /// what one packet may run, bounded by `MAX_LOOP_WORK`. Returns the product outside it.
    fn enter_loop(&mut self, max: u32, span: Span) -> DResult<u64> {
        let outer = self.loop_work;
        let inner = outer.saturating_mul(max as u64);
        if inner > MAX_LOOP_WORK {
            return self.err(
                span,
                format!(
                    "nested loops could run {inner} iterations for one packet (at most \
                     {MAX_LOOP_WORK}): bound the loop variables more tightly"
                ),
            );
        }
        self.loop_work = inner;
        Ok(outer)
    }

    /// `for (T x in lo .. hi) body` with constant bounds: x takes each value once.
    fn for_in(
        &mut self,
        ty: &ast::Type,
        name: &ast::Ident,
        range: &ast::Expr,
        body: &'a ast::Stmt,
        out: &mut Vec<Stmt>,
    ) -> DResult<()> {
        let ast::ExprKind::Range(lo, hi) = &range.kind else {
            return self
                .err(range.span, "`for (x in ...)` is supported over a constant range lo .. hi");
        };
        let ty = self.resolve(ty)?;
        let bound = |l: &Self, e: &ast::Expr| -> DResult<u128> {
            match l.const_eval().eval(e)? {
                ConstValue::Int(v, _) => Ok(v),
                _ => l.err(e.span, "a loop bound must be an integer constant"),
            }
        };
        let (lo, hi) = (bound(self, lo)?, bound(self, hi)?);
        let count = if hi < lo { 0 } else { hi - lo + 1 };
        if count > MAX_LOOP_ITERATIONS as u128 {
            return self.err(
                range.span,
                format!(
                    "a loop of {count} iterations (hotplane runs at most {MAX_LOOP_ITERATIONS})"
                ),
            );
        }
        let Storage::Scalar { place, ty } = self.alloc(&ty, &name.name, name.span)? else {
            return self.err(name.span, "the loop variable must be a bit<N> or int<N>");
        };
        let Some(width) = ty.scalar_width(&self.types) else {
            return self.err(name.span, "the loop variable must be a bit<N> or int<N>");
        };
        self.bind(&name.name, Binding::Var(Storage::Scalar { place: place.clone(), ty }));
        out.push(Stmt::Assign(place.clone(), Expr::Const(lo & crate::types::mask(width))));
        let outer = self.enter_loop(count as u32, body.span)?;
        self.loop_depth += 1;
        let b = self.stmt_scoped(body);
        self.loop_depth -= 1;
        self.loop_work = outer;
        let next = Expr::Binary {
            op: crate::ir::BinOp::Add,
            a: Box::new(Expr::Read(place.clone())),
            b: Box::new(Expr::Const(1)),
            width,
            signed: false,
        };
        out.push(Stmt::Loop {
            body: vec![Stmt::Iteration(b?), Stmt::Assign(place, next)],
            max: count as u32,
        });
        Ok(())
    }

    fn stmt_scoped(&mut self, s: &'a ast::Stmt) -> DResult<Vec<Stmt>> {
        self.push_scope();
        let mut out = Vec::new();
        let r = self.stmt(s, &mut out);
        self.pop_scope();
        r.map(|_| out)
    }

    pub(crate) fn local_decl(&mut self, d: &'a ast::Decl, out: &mut Vec<Stmt>) -> DResult<()> {
        match &d.kind {
            DeclKind::Variable { ty, name, init } => {
                let ty = self.resolve(ty)?;
                let storage = self.alloc(&ty, &name.name, name.span)?;
                match init {
                    Some(e) => {
                        let v = self.expr(e, out)?;
                        let stmts = self.assign(&Val::Loc(storage.clone()), v, e.span)?;
                        out.extend(stmts);
                    }
                    None => out.extend(self.zero(&storage)),
                }
                self.bind(&name.name, Binding::Var(storage));
            }
            DeclKind::Const { ty, name, value } => {
                let ty = self.resolve(ty)?;
                let v = self.const_eval().eval(value)?;
                let v = self.convert_const(v, &ty, value.span)?;
                self.bind(&name.name, Binding::Const(v));
            }
            _ => return self.err(d.span, "only variables and constants can be declared here"),
        }
        Ok(())
    }

    /// Statements giving storage a defined initial value (locals are zero, headers invalid).
    pub(crate) fn zero(&self, s: &Storage) -> Vec<Stmt> {
        match s {
            Storage::Scalar { place, .. } => vec![Stmt::Assign(place.clone(), Expr::Const(0))],
            Storage::Header { hdr, .. } => vec![Stmt::SetValid(hdr.clone(), false)],
            Storage::Stack { stack, .. } => {
                let mut v: Vec<Stmt> = (0..stack.count)
                    .map(|k| Stmt::SetValid(HdrRef::Static(stack.first + k), false))
                    .collect();
                v.push(Stmt::Assign(
                    Place::Slot { slot: stack.next_slot, width: 32 },
                    Expr::Const(0),
                ));
                v
            }
            Storage::Struct { fields, .. } | Storage::Union { members: fields, .. } => {
                fields.iter().flat_map(|f| self.zero(f)).collect()
            }
        }
    }

    /// Copy a value into a location (scalars, headers, structs, stacks, lists into structs).
    pub(crate) fn assign(&self, dst: &Val, src: Val, span: Span) -> DResult<Vec<Stmt>> {
        match dst {
            Val::Scalar { e: Expr::Read(place), ty } => {
                if *ty == Ty::DontCare {
                    return Ok(Vec::new());
                }
                Ok(vec![Stmt::Assign(place.clone(), self.coerce(src, ty, span)?)])
            }
            Val::Scalar { e: Expr::Slice { e, hi, lo }, .. } => {
                let Expr::Read(base) = &**e else {
                    return self.err(span, "cannot assign to this slice");
                };
                let place = Place::Slice { base: Box::new(base.clone()), hi: *hi, lo: *lo };
                Ok(vec![Stmt::Assign(place, self.coerce(src, &Ty::Bit(hi - lo + 1), span)?)])
            }
            Val::Loc(storage) => self.assign_storage(storage, src, span),
            _ => self.err(span, "cannot assign to this"),
        }
    }

    fn assign_storage(&self, dst: &Storage, src: Val, span: Span) -> DResult<Vec<Stmt>> {
        let mismatch = || {
            Diagnostic::new(
                span,
                "the value does not have the type of the location it is assigned to",
            )
        };
        match (dst, src) {
            (Storage::Scalar { place, ty }, v) => {
                Ok(vec![Stmt::Assign(place.clone(), self.coerce(v, ty, span)?)])
            }
            (Storage::Header { hdr, ty }, Val::Loc(Storage::Header { hdr: src, ty: sty }))
                if *ty == sty =>
            {
                // A valid header copied into a union member makes the others invalid.
                let siblings = self.invalidate_siblings(hdr);
                let mut out = vec![Stmt::CopyHeader { dst: hdr.clone(), src }];
                if !siblings.is_empty() {
                    out.push(Stmt::If(Expr::IsValid(hdr.clone()), siblings, Vec::new()));
                }
                Ok(out)
            }
            (Storage::Header { hdr, ty }, Val::List(items)) => {
                // `hdr = {a, b}`: set every field and make the header valid.
                let mut out = self.invalidate_siblings(hdr);
                out.push(Stmt::SetValid(hdr.clone(), true));
                let fields = &self.types.composites[*ty].fields;
                if items.len() != fields.len() {
                    return Err(mismatch());
                }
                for (i, ((v, s), f)) in items.into_iter().zip(fields).enumerate() {
                    let (bit_off, width) = self.field_layout(*ty, i);
                    let place = Place::Field { hdr: hdr.clone(), bit_off, width };
                    out.push(Stmt::Assign(place, self.coerce(v, &f.ty, s)?));
                }
                Ok(out)
            }
            (Storage::Struct { ty, fields }, Val::Loc(Storage::Struct { ty: sty, fields: sf }))
                if *ty == sty =>
            {
                let mut out = Vec::new();
                for (d, s) in fields.iter().zip(sf) {
                    out.extend(self.assign_storage(d, storage_val(s), span)?);
                }
                Ok(out)
            }
            (Storage::Struct { fields, .. }, Val::List(items)) => {
                if items.len() != fields.len() {
                    return Err(mismatch());
                }
                let mut out = Vec::new();
                for (d, (v, s)) in fields.iter().zip(items) {
                    out.extend(self.assign_storage(d, v, s)?);
                }
                Ok(out)
            }
            (Storage::Struct { ty, fields }, Val::Struct(items)) => {
                let defs = &self.types.composites[*ty].fields;
                if items.len() != defs.len() {
                    return Err(mismatch());
                }
                let mut out = Vec::new();
                for (name, v, s) in items {
                    let i = defs.iter().position(|f| f.name == name).ok_or_else(|| {
                        Diagnostic::new(
                            s,
                            format!("{} has no field `{name}`", self.types.composites[*ty].name),
                        )
                    })?;
                    out.extend(self.assign_storage(&fields[i], v, s)?);
                }
                Ok(out)
            }
            (Storage::Stack { stack, elem }, Val::Loc(Storage::Stack { stack: src, elem: se }))
                if *elem == se && stack.count == src.count =>
            {
                let mut out: Vec<Stmt> = (0..stack.count)
                    .map(|k| Stmt::CopyHeader {
                        dst: HdrRef::Static(stack.first + k),
                        src: HdrRef::Static(src.first + k),
                    })
                    .collect();
                out.push(Stmt::Assign(
                    Place::Slot { slot: stack.next_slot, width: 32 },
                    Expr::Read(Place::Slot { slot: src.next_slot, width: 32 }),
                ));
                Ok(out)
            }
            (Storage::Union { ty, members }, Val::Loc(Storage::Union { ty: sty, members: sm }))
                if *ty == sty =>
            {
                let mut out = Vec::new();
                for (d, s) in members.iter().zip(sm) {
                    out.extend(self.assign_storage(d, Val::Loc(s), span)?);
                }
                Ok(out)
            }
            _ => Err(mismatch()),
        }
    }
}

/// A storage location read as a value.
pub(crate) fn storage_val(s: Storage) -> Val {
    match s {
        Storage::Scalar { place, ty } => Val::Scalar { e: Expr::Read(place), ty },
        other => Val::Loc(other),
    }
}

/// The most iterations one execution of a loop runs (a bound on each packet's work).
pub(crate) const MAX_LOOP_ITERATIONS: u32 = 4096;
/// The most iterations nested loops may run for one packet (two 8-bit loops: 257^2).
pub(crate) const MAX_LOOP_WORK: u64 = 1 << 17;
