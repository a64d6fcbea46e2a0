//! Expressions: typing, implicit widths of literals, and lowering to IR values or locations.

use super::{Binding, Lowerer, Storage};
use crate::ast::{self, BinOp as A, ExprKind, UnOp as AU};
use crate::diag::{DResult, Diagnostic, Span};
use crate::ir::{BinOp, Expr, HdrRef, Place, Stmt, UnOp};
use crate::types::{mask, ConstValue, Ty};

/// A lowered expression.
#[derive(Clone, Debug)]
pub(crate) enum Val {
    Scalar { e: Expr, ty: Ty },
    Loc(Storage),
    List(Vec<(Val, Span)>),
    Struct(Vec<(String, Val, Span)>),
    Str(String),
}

impl Val {
    pub fn konst(v: u128, ty: Ty) -> Val {
        Val::Scalar { e: Expr::Const(v), ty }
    }
}

pub(crate) fn const_val(c: &ConstValue) -> Val {
    match c {
        ConstValue::Int(v, ty) => Val::konst(*v, ty.clone()),
        ConstValue::Bool(b) => Val::konst(*b as u128, Ty::Bool),
        ConstValue::Str(s) => Val::Str(s.clone()),
        ConstValue::Error(e) => Val::konst(*e as u128, Ty::Error),
        ConstValue::Enum(i, v) => Val::konst(*v, Ty::Enum(*i)),
    }
}

impl<'a> Lowerer<'a> {
    pub(crate) fn expr(&mut self, e: &ast::Expr, pre: &mut Vec<Stmt>) -> DResult<Val> {
        match &e.kind {
            ExprKind::Int { value, width: None, .. } => Ok(Val::konst(*value, Ty::InfInt)),
            ExprKind::Int { value, width: Some(w), signed } => {
                if *value > mask(*w) {
                    return self.err(e.span, format!("value {value} does not fit in {w} bits"));
                }
                Ok(Val::konst(*value, if *signed { Ty::Int(*w) } else { Ty::Bit(*w) }))
            }
            ExprKind::Bool(b) => Ok(Val::konst(*b as u128, Ty::Bool)),
            ExprKind::Str(s) => Ok(Val::Str(s.clone())),
            ExprKind::Name(n) | ExprKind::TopName(n) => self.name_value(n),
            ExprKind::Member(base, m) => self.member_value(base, m, e.span, pre),
            ExprKind::Index(base, index) => {
                let (stack, elem) = match self.expr(base, pre)? {
                    Val::Loc(Storage::Stack { stack, elem }) => (stack, elem),
                    Val::Loc(Storage::Struct { ty, fields }) if self.tuple_types.contains(&ty) => {
                        // A tuple's element: its index must be a constant (spec 8.12).
                        let k = self.const_eval().eval_u32(index, "a tuple index")? as usize;
                        return match fields.into_iter().nth(k) {
                            Some(f) => Ok(super::stmt::storage_val(f)),
                            None => self.err(index.span, format!("index {k} is out of range")),
                        };
                    }
                    _ => {
                        return self.err(base.span, "only header stacks and tuples can be indexed")
                    }
                };
                let hdr = match self.const_eval().eval(index) {
                    Ok(c) => {
                        let k = match c {
                            ConstValue::Int(k, _) => k,
                            _ => return self.err(index.span, "a stack index must be an integer"),
                        };
                        if k >= stack.count as u128 {
                            return self.err(
                                index.span,
                                format!("index {k} is out of range for a stack of {}", stack.count),
                            );
                        }
                        HdrRef::Static(stack.first + k as u32)
                    }
                    Err(_) => {
                        let i = self.scalar(index, pre)?;
                        HdrRef::Index(stack, Box::new(self.to_width(i, 32, index.span)?))
                    }
                };
                Ok(Val::Loc(Storage::Header { hdr, ty: elem }))
            }
            ExprKind::Slice { base, hi, lo } => {
                let (v, ty) = self.scalar_typed(base, pre)?;
                let w = match ty {
                    Ty::Bit(w) | Ty::Int(w) => w,
                    _ => {
                        return self.err(
                            base.span,
                            format!("cannot slice a value of type {}", self.show(&ty)),
                        )
                    }
                };
                let hi = self.const_eval().eval_u32(hi, "a slice bound")?;
                let lo = self.const_eval().eval_u32(lo, "a slice bound")?;
                if hi < lo || hi >= w {
                    return self.err(
                        e.span,
                        format!("slice [{hi}:{lo}] is out of range for {}", self.show(&ty)),
                    );
                }
                // A slice of a slice is one slice of the base (so that it can be assigned to).
                let (v, hi, lo) = match v {
                    Expr::Slice { e: inner, lo: base_lo, .. } => {
                        (*inner, base_lo + hi, base_lo + lo)
                    }
                    v => (v, hi, lo),
                };
                Ok(Val::Scalar {
                    e: Expr::Slice { e: Box::new(v), hi, lo },
                    ty: Ty::Bit(hi - lo + 1),
                })
            }
            ExprKind::Call { .. } => match self.call(e, pre)? {
                Some(v) => Ok(v),
                None => self.err(e.span, "this call returns no value"),
            },
            ExprKind::Unary(op, inner) => {
                let (v, ty) = self.scalar_typed(inner, pre)?;
                match (op, &ty) {
                    (AU::Not, Ty::Bool) => Ok(Val::Scalar {
                        e: Expr::Unary { op: UnOp::Not, e: Box::new(v), width: 1 },
                        ty,
                    }),
                    (AU::Plus, _) => Ok(Val::Scalar { e: v, ty }),
                    (AU::Neg | AU::BitNot, Ty::InfInt) => match (op, v) {
                        (AU::Neg, Expr::Const(c)) => Ok(Val::konst(c.wrapping_neg(), Ty::InfInt)),
                        _ => self.err(e.span, "`~` needs a value with a width"),
                    },
                    (AU::Neg | AU::BitNot, Ty::Bit(w) | Ty::Int(w)) => {
                        let op = if *op == AU::Neg { UnOp::Neg } else { UnOp::BitNot };
                        let w = *w;
                        Ok(Val::Scalar { e: Expr::Unary { op, e: Box::new(v), width: w }, ty })
                    }
                    _ => self
                        .err(e.span, format!("operator cannot be applied to {}", self.show(&ty))),
                }
            }
            ExprKind::Binary(op, a, b, op_span) => self.binary(*op, a, b, e.span, *op_span, pre),
            ExprKind::Ternary(c, a, b) => {
                let c = self.condition(c, pre)?;
                let (mut pa, mut pb) = (Vec::new(), Vec::new());
                let va = self.expr(a, &mut pa)?;
                let vb = self.expr(b, &mut pb)?;
                let (ea, eb, ty) = self.unify(va, vb, e.span)?;
                if pa.is_empty() && pb.is_empty() {
                    return Ok(Val::Scalar {
                        e: Expr::Mux { cond: Box::new(c), a: Box::new(ea), b: Box::new(eb) },
                        ty,
                    });
                }
                // Only the chosen arm is evaluated, side effects included.
                let place = self.temp(&ty, "?:", e.span)?;
                pa.push(Stmt::Assign(place.clone(), ea));
                pb.push(Stmt::Assign(place.clone(), eb));
                pre.push(Stmt::If(c, pa, pb));
                Ok(Val::Scalar { e: Expr::Read(place), ty })
            }
            ExprKind::Cast(ty, inner) => {
                let to = self.resolve(ty)?;
                let v = self.expr(inner, pre)?;
                self.cast(v, &to, e.span)
            }
            ExprKind::List(items) => {
                let mut out = Val::List(Vec::new());
                for i in items {
                    let (Val::List(mut done), v) = self.then_expr(out, i, pre)? else {
                        unreachable!("settle keeps a list a list")
                    };
                    done.push((v, i.span));
                    out = Val::List(done);
                }
                Ok(out)
            }
            ExprKind::StructInit(fields) => {
                let mut out = Val::Struct(Vec::new());
                for (n, v) in fields {
                    let (Val::Struct(mut done), x) = self.then_expr(out, v, pre)? else {
                        unreachable!("settle keeps a struct a struct")
                    };
                    done.push((n.name.clone(), x, v.span));
                    out = Val::Struct(done);
                }
                Ok(out)
            }
            ExprKind::TypeRef(_) => self.err(e.span, "a type is not a value here"),
            ExprKind::Mask(..) | ExprKind::Range(..) | ExprKind::DontCare | ExprKind::Default => {
                self.err(
                    e.span,
                    "`&&&`, `..`, `_` and `default` only appear in keysets and entries",
                )
            }
        }
    }

    fn name_value(&mut self, n: &ast::Ident) -> DResult<Val> {
        match self.lookup(&n.name) {
            Some(Binding::Var(Storage::Scalar { place, ty })) => {
                Ok(Val::Scalar { e: Expr::Read(place), ty })
            }
            Some(Binding::Var(s)) => Ok(Val::Loc(s)),
            Some(Binding::Const(c)) => Ok(const_val(&c)),
            Some(_) => self.err(n.span, format!("`{}` is not a value", n.name)),
            None => self.err(n.span, format!("`{}` is not declared", n.name)),
        }
    }

    fn member_value(
        &mut self,
        base: &ast::Expr,
        m: &ast::Ident,
        span: Span,
        pre: &mut Vec<Stmt>,
    ) -> DResult<Val> {
        // Enum members and errors.
        if let ExprKind::TypeRef(ast::Type { kind: ast::TypeKind::Error, .. }) = &base.kind {
            let code = self.types.error_code(&m.name).ok_or_else(|| {
                Diagnostic::new(m.span, format!("no error `{}` is declared", m.name))
            })?;
            return Ok(Val::konst(code as u128, Ty::Error));
        }
        if let ExprKind::Name(n) = &base.kind {
            if self.lookup(&n.name).is_none() {
                if let Some(Ty::Enum(i)) = self.types.names.get(&n.name).cloned() {
                    let def = &self.types.enums[i];
                    let (_, v) =
                        def.members.iter().find(|(x, _)| *x == m.name).ok_or_else(|| {
                            Diagnostic::new(
                                m.span,
                                format!("enum {} has no member `{}`", def.name, m.name),
                            )
                        })?;
                    return Ok(Val::konst(*v, Ty::Enum(i)));
                }
            }
        }
        // `t.apply().hit` and friends.
        if let ExprKind::Call { callee, args, .. } = &base.kind {
            if let ExprKind::Member(tbl, method) = &callee.kind {
                if method.name == "apply" {
                    if let ExprKind::Name(tn) = &tbl.kind {
                        if let Some(Binding::Table(t)) = self.lookup(&tn.name) {
                            if !args.is_empty() {
                                return self.err(base.span, "table apply takes no arguments");
                            }
                            return self.apply_result(t, m, pre);
                        }
                    }
                }
            }
        }
        match self.expr(base, pre)? {
            Val::Loc(Storage::Stack { stack, elem }) => match m.name.as_str() {
                "next" => Ok(Val::Loc(Storage::Header { hdr: HdrRef::Next(stack), ty: elem })),
                "last" => Ok(Val::Loc(Storage::Header { hdr: HdrRef::Last(stack), ty: elem })),
                "nextIndex" | "lastIndex" => Ok(Val::Scalar {
                    e: Expr::StackIndex { stack, last: m.name == "lastIndex" },
                    ty: Ty::Bit(32),
                }),
                "size" => Ok(Val::konst(stack.count as u128, Ty::Bit(32))),
                _ => self.err(m.span, format!("header stacks have no member `{}`", m.name)),
            },
            Val::Loc(s) => match self.member(&s, m)? {
                Storage::Scalar { place, ty } => Ok(Val::Scalar { e: Expr::Read(place), ty }),
                other => Ok(Val::Loc(other)),
            },
            Val::Struct(fields) => fields
                .into_iter()
                .find(|(n, ..)| *n == m.name)
                .map(|(_, v, _)| v)
                .ok_or_else(|| Diagnostic::new(m.span, format!("no field `{}`", m.name))),
            _ => self.err(span, format!("`.{}`: the value has no members", m.name)),
        }
    }

    /// Evaluate `next` after `earlier` (left to right): when `next` has side effects, `earlier`
    /// is first saved in a temporary, since reading it afterwards would see them (spec 8.17).
    pub(crate) fn then_expr(
        &mut self,
        earlier: Val,
        next: &ast::Expr,
        pre: &mut Vec<Stmt>,
    ) -> DResult<(Val, Val)> {
        let mut effects = Vec::new();
        let v = self.expr(next, &mut effects)?;
        if effects.is_empty() {
            return Ok((earlier, v));
        }
        let earlier = self.settle(earlier, next.span, pre)?;
        pre.extend(effects);
        Ok((earlier, v))
    }

    /// Storage for a temporary of scalar type `ty` (a value held across side effects).
    fn temp(&mut self, ty: &Ty, name: &str, span: Span) -> DResult<Place> {
        match self.alloc(ty, name, span)? {
            Storage::Scalar { place, .. } => Ok(place),
            _ => self.err(span, format!("expected a single value, not a {}", self.show(ty))),
        }
    }

    /// `v` read now: a scalar that is not a constant, a header or a struct is copied to a
    /// temporary. (Stacks and unions are left as locations.)
    pub(crate) fn settle(&mut self, v: Val, span: Span, pre: &mut Vec<Stmt>) -> DResult<Val> {
        match v {
            Val::Scalar { e: e @ Expr::Const(_), ty } => Ok(Val::Scalar { e, ty }),
            Val::Scalar { e, ty } if ty != Ty::InfInt => {
                let Storage::Scalar { place, ty } = self.alloc(&ty, "operand", span)? else {
                    return Ok(Val::Scalar { e, ty });
                };
                pre.push(Stmt::Assign(place.clone(), e));
                Ok(Val::Scalar { e: Expr::Read(place), ty })
            }
            Val::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (v, s) in items {
                    out.push((self.settle(v, s, pre)?, s));
                }
                Ok(Val::List(out))
            }
            Val::Struct(fields) => {
                let mut out = Vec::with_capacity(fields.len());
                for (n, v, s) in fields {
                    out.push((n, self.settle(v, s, pre)?, s));
                }
                Ok(Val::Struct(out))
            }
            // A header or struct: copied whole (with validity) into storage of its own.
            Val::Loc(storage @ (Storage::Header { .. } | Storage::Struct { .. })) => {
                let ty = match &storage {
                    Storage::Header { ty, .. } => Ty::Header(*ty),
                    Storage::Struct { ty, .. } => Ty::Struct(*ty),
                    _ => unreachable!("matched above"),
                };
                let copy = self.alloc(&ty, "operand", span)?;
                pre.extend(self.assign(&Val::Loc(copy.clone()), Val::Loc(storage), span)?);
                Ok(Val::Loc(copy))
            }
            other => Ok(other),
        }
    }

    /// `a == b` for headers, structs, unions and stacks (spec 8.16-8.18): headers are equal
    /// when both are invalid or both valid with equal fields; the others member by member.
    fn composite_eq(&self, a: Val, b: Val, span: Span) -> DResult<Expr> {
        let mismatch = || {
            Diagnostic::new(span, "`==` compares values of the same type (cast or compare fields)")
        };
        let fields = |s: &Storage| -> Vec<Val> {
            match s {
                Storage::Struct { fields, .. } | Storage::Union { members: fields, .. } => {
                    fields.iter().cloned().map(super::stmt::storage_val).collect()
                }
                Storage::Stack { stack, elem } => (0..stack.count)
                    .map(|k| {
                        Val::Loc(Storage::Header {
                            hdr: HdrRef::Static(stack.first + k),
                            ty: *elem,
                        })
                    })
                    .collect(),
                _ => Vec::new(),
            }
        };
        match (a, b) {
            (Val::Scalar { e: ea, ty: ta }, Val::Scalar { e: eb, ty: tb }) => {
                let (ea, eb, ty) =
                    self.unify(Val::Scalar { e: ea, ty: ta }, Val::Scalar { e: eb, ty: tb }, span)?;
                let width = ty.scalar_width(&self.types).ok_or_else(mismatch)?;
                Ok(Expr::Binary {
                    op: BinOp::Eq,
                    a: Box::new(ea),
                    b: Box::new(eb),
                    width,
                    signed: false,
                })
            }
            (
                Val::Loc(Storage::Header { hdr: ha, ty: ta }),
                Val::Loc(Storage::Header { hdr: hb, ty: tb }),
            ) if ta == tb => {
                let mut same = Vec::new();
                for leaf in self.header_leaves(ta) {
                    let Some((bit_off, width)) = leaf else {
                        same.push(Expr::VarbitEq(ha.clone(), hb.clone()));
                        continue;
                    };
                    let read = |hdr: &HdrRef| {
                        Expr::Read(Place::Field { hdr: hdr.clone(), bit_off, width })
                    };
                    same.push(Expr::Binary {
                        op: BinOp::Eq,
                        a: Box::new(read(&ha)),
                        b: Box::new(read(&hb)),
                        width,
                        signed: false,
                    });
                }
                let (va, vb) = (Expr::IsValid(ha), Expr::IsValid(hb));
                let both_invalid = and(not(va.clone()), not(vb.clone()));
                let both_valid = and(va, vb);
                Ok(or(both_invalid, same.into_iter().fold(both_valid, and)))
            }
            (Val::Loc(sa), Val::Loc(sb)) => {
                let same_type = match (&sa, &sb) {
                    (Storage::Struct { ty: x, .. }, Storage::Struct { ty: y, .. })
                    | (Storage::Union { ty: x, .. }, Storage::Union { ty: y, .. }) => x == y,
                    (
                        Storage::Stack { stack: x, elem: ex },
                        Storage::Stack { stack: y, elem: ey },
                    ) => ex == ey && x.count == y.count,
                    _ => false,
                };
                if !same_type {
                    return Err(mismatch());
                }
                let (fa, fb) = (fields(&sa), fields(&sb));
                let mut all = Expr::Const(1);
                for (x, y) in fa.into_iter().zip(fb) {
                    all = and(all, self.composite_eq(x, y, span)?);
                }
                Ok(all)
            }
            (Val::Loc(s @ Storage::Struct { .. }), Val::List(items))
            | (Val::List(items), Val::Loc(s @ Storage::Struct { .. })) => {
                let fs = fields(&s);
                if fs.len() != items.len() {
                    return Err(mismatch());
                }
                let mut all = Expr::Const(1);
                for (x, (y, _)) in fs.into_iter().zip(items) {
                    all = and(all, self.composite_eq(x, y, span)?);
                }
                Ok(all)
            }
            _ => Err(mismatch()),
        }
    }

    /// A scalar value (bit, int, bool, enum, error or an unsized literal).
    pub(crate) fn scalar_typed(
        &mut self,
        e: &ast::Expr,
        pre: &mut Vec<Stmt>,
    ) -> DResult<(Expr, Ty)> {
        match self.expr(e, pre)? {
            Val::Scalar { e, ty } => Ok((e, ty)),
            _ => self.err(e.span, "expected a single value, not a header, struct or list"),
        }
    }

    pub(crate) fn scalar(&mut self, e: &ast::Expr, pre: &mut Vec<Stmt>) -> DResult<Val> {
        let (e2, ty) = self.scalar_typed(e, pre)?;
        Ok(Val::Scalar { e: e2, ty })
    }

    /// A `bool` condition.
    pub(crate) fn condition(&mut self, e: &ast::Expr, pre: &mut Vec<Stmt>) -> DResult<Expr> {
        let (v, ty) = self.scalar_typed(e, pre)?;
        if ty != Ty::Bool {
            return self.err(e.span, format!("a condition must be bool, not {}", self.show(&ty)));
        }
        Ok(v)
    }

    /// Convert a scalar to exactly `width` unsigned bits (for indices and extern arguments).
    pub(crate) fn to_width(&self, v: Val, width: u32, span: Span) -> DResult<Expr> {
        match v {
            Val::Scalar { e: Expr::Const(c), ty: Ty::InfInt } => Ok(Expr::Const(c & mask(width))),
            Val::Scalar { e, ty: Ty::Bit(w) | Ty::Int(w) } if w == width => Ok(e),
            Val::Scalar { e, ty: Ty::Bit(w) } => {
                Ok(Expr::Cast { e: Box::new(e), from: w, signed: false, to: width })
            }
            // A signed index or count: sign-extended (a negative one is out of range).
            Val::Scalar { e, ty: Ty::Int(w) } => {
                Ok(Expr::Cast { e: Box::new(e), from: w, signed: true, to: width })
            }
            Val::Scalar { ty, .. } => {
                self.err(span, format!("expected bit<{width}>, found {}", self.show(&ty)))
            }
            _ => self.err(span, format!("expected bit<{width}>")),
        }
    }

    /// Convert a value to type `ty` as an assignment does (literals take the width).
    pub(crate) fn coerce(&self, v: Val, ty: &Ty, span: Span) -> DResult<Expr> {
        match (v, ty) {
            (Val::Scalar { ty: Ty::Varbit(_), .. }, _) | (_, Ty::Varbit(_)) => {
                self.err(span, super::VARBIT_ALONE)
            }
            (Val::Scalar { e: Expr::Const(c), ty: Ty::InfInt }, Ty::Bit(w) | Ty::Int(w)) => {
                Ok(Expr::Const(c & mask(*w)))
            }
            (Val::Scalar { e: Expr::Const(c), ty: Ty::InfInt }, Ty::Enum(i))
                if self.types.enums[*i].repr.is_some() =>
            {
                Ok(Expr::Const(c))
            }
            (Val::Scalar { e, ty: from }, to) if from == *to => Ok(e),
            (Val::Scalar { e, ty: Ty::Enum(i) }, to)
                if self.types.enums[i].repr.as_ref() == Some(to) =>
            {
                Ok(e)
            }
            (Val::Scalar { e, ty: from }, Ty::Enum(i))
                if self.types.enums[*i].repr.as_ref() == Some(&from) =>
            {
                Ok(e)
            }
            (Val::Scalar { ty: from, .. }, to) => self.err(
                span,
                format!("expected a value of type {}, found {}", self.show(to), self.show(&from)),
            ),
            (_, to) => self.err(span, format!("expected a value of type {}", self.show(to))),
        }
    }

    /// Bring two scalar operands to one type.
    pub(crate) fn unify(&self, a: Val, b: Val, span: Span) -> DResult<(Expr, Expr, Ty)> {
        let (Val::Scalar { e: ea, ty: ta }, Val::Scalar { e: eb, ty: tb }) = (a, b) else {
            return self.err(span, "operands must be single values");
        };
        let norm = |t: Ty| match t {
            Ty::Enum(i) => self.types.enums[i].repr.clone().unwrap_or(Ty::Enum(i)),
            t => t,
        };
        let (ta, tb) = (norm(ta), norm(tb));
        match (&ta, &tb) {
            (Ty::InfInt, Ty::InfInt) => Ok((ea, eb, Ty::InfInt)),
            (Ty::InfInt, Ty::Bit(w) | Ty::Int(w)) => Ok((lit_to(ea, *w), eb, tb)),
            (Ty::Bit(w) | Ty::Int(w), Ty::InfInt) => Ok((ea, lit_to(eb, *w), ta)),
            (x, y) if x == y => Ok((ea, eb, ta)),
            _ => self.err(
                span,
                format!(
                    "operands have different types: {} and {} (cast one of them)",
                    self.show(&ta),
                    self.show(&tb)
                ),
            ),
        }
    }

    /// `a op b` spanning `span`, the operator itself at `op_span`.
    fn binary(
        &mut self,
        op: A,
        a: &ast::Expr,
        b: &ast::Expr,
        span: Span,
        op_span: Span,
        pre: &mut Vec<Stmt>,
    ) -> DResult<Val> {
        if matches!(op, A::And | A::Or) {
            let ca = self.condition(a, pre)?;
            let mut pb = Vec::new();
            let cb = self.condition(b, &mut pb)?;
            if pb.is_empty() {
                let op = if op == A::And { BinOp::LogicAnd } else { BinOp::LogicOr };
                return Ok(Val::Scalar {
                    e: Expr::Binary {
                        op,
                        a: Box::new(ca),
                        b: Box::new(cb),
                        width: 1,
                        signed: false,
                    },
                    ty: Ty::Bool,
                });
            }
            // The right side's statements (a call, a table apply) run only when the left side
            // does not decide.
            let place = self.temp(&Ty::Bool, "&&", span)?;
            pre.push(Stmt::Assign(place.clone(), ca));
            let read = Expr::Read(place.clone());
            let undecided = if op == A::And {
                read.clone()
            } else {
                Expr::Unary { op: UnOp::Not, e: Box::new(read.clone()), width: 1 }
            };
            pb.push(Stmt::Assign(place, cb));
            pre.push(Stmt::If(undecided, pb, Vec::new()));
            return Ok(Val::Scalar { e: read, ty: Ty::Bool });
        }
        if matches!(op, A::Eq | A::Ne) {
            if let Some(eq) = self.varbit_eq(a, b, span, pre)? {
                let e = if op == A::Eq { eq } else { not(eq) };
                return Ok(Val::Scalar { e, ty: Ty::Bool });
            }
        }
        let va = self.expr(a, pre)?;
        let (va, vb) = self.then_expr(va, b, pre)?;
        self.check_divisor(op, b, op_span)?;
        self.binary_values(op, (va, a.span), (vb, b.span), span, op_span)
    }

    /// `h1.f == h2.f` for varbit fields `f` (of headers of one type), or None when an operand
    /// is not a varbit field.
    fn varbit_eq(
        &mut self,
        a: &ast::Expr,
        b: &ast::Expr,
        span: Span,
        pre: &mut Vec<Stmt>,
    ) -> DResult<Option<Expr>> {
        let (ExprKind::Member(ba, fa), ExprKind::Member(bb, fb)) = (&a.kind, &b.kind) else {
            return Ok(None);
        };
        let is_varbit = |l: &Self, ty: usize, f: &ast::Ident| {
            l.types.composites[ty]
                .field(&f.name)
                .is_some_and(|(_, d)| matches!(d.ty, Ty::Varbit(_)))
        };
        // Cheap syntactic check first: only `x.f` where `x` may be a header.
        if !matches!(ba.kind, ExprKind::Name(_) | ExprKind::Member(..) | ExprKind::Index(..))
            || !matches!(bb.kind, ExprKind::Name(_) | ExprKind::Member(..) | ExprKind::Index(..))
        {
            return Ok(None);
        }
        let mut probe = Vec::new();
        let (
            Ok(Val::Loc(Storage::Header { hdr: ha, ty: ta })),
            Ok(Val::Loc(Storage::Header { hdr: hb, ty: tb })),
        ) = (self.expr(ba, &mut probe), self.expr(bb, &mut probe))
        else {
            return Ok(None);
        };
        if !(is_varbit(self, ta, fa) && is_varbit(self, tb, fb)) {
            return Ok(None);
        }
        if ta != tb || fa.name != fb.name {
            return self.err(
                span,
                "varbit fields compare only with the same field of the same header type",
            );
        }
        pre.extend(probe);
        Ok(Some(Expr::VarbitEq(ha, hb)))
    }

    /// p4c refuses a divisor known to be zero at compile time; so does hotplane, at the operator.
    pub(crate) fn check_divisor(&self, op: A, divisor: &ast::Expr, op_span: Span) -> DResult<()> {
        if matches!(op, A::Div | A::Mod) {
            if let Ok(ConstValue::Int(0, _)) = self.const_eval().eval(divisor) {
                return Err(Diagnostic::new(op_span, crate::types::by_zero(op)));
            }
        }
        Ok(())
    }

    /// `a op b` on lowered operands (each with its span), for every operator but `&&` and `||`.
    pub(crate) fn binary_values(
        &mut self,
        op: A,
        (va, a_span): (Val, Span),
        (vb, b_span): (Val, Span),
        span: Span,
        op_span: Span,
    ) -> DResult<Val> {
        if matches!(op, A::Eq | A::Ne) && !matches!(va, Val::Scalar { .. }) {
            let eq = self.composite_eq(va, vb, span)?;
            let e = if op == A::Eq { eq } else { not(eq) };
            return Ok(Val::Scalar { e, ty: Ty::Bool });
        }
        if op == A::Concat {
            let (Val::Scalar { e: ea, ty: ta }, Val::Scalar { e: eb, ty: tb }) = (va, vb) else {
                return self.err(span, "`++` joins bit strings");
            };
            let (Some(wa), Some(wb)) = (bits_of(&ta), bits_of(&tb)) else {
                return self.err(span, "`++` needs operands with widths (cast literals)");
            };
            if wa + wb > crate::types::MAX_WIDTH {
                return self.err(span, "concatenation wider than 128 bits");
            }
            let ty = if ta.is_signed() { Ty::Int(wa + wb) } else { Ty::Bit(wa + wb) };
            return Ok(Val::Scalar {
                e: Expr::Concat { a: Box::new(ea), b: Box::new(eb), b_width: wb },
                ty,
            });
        }
        if matches!(op, A::Shl | A::Shr) {
            let (Val::Scalar { e: ea, ty: ta }, Val::Scalar { e: eb, ty: tb }) = (va, vb) else {
                return self.err(span, "shifts apply to single values");
            };
            // A constant amount must not be negative (an unsized literal holds its sign as
            // i128 bits; a signed one is taken as unsigned when positive, as p4c does); a
            // run-time amount must be unsigned.
            let negative = match (&tb, &eb) {
                (Ty::InfInt, Expr::Const(y)) => (*y as i128) < 0,
                (Ty::Int(w), Expr::Const(y)) => *w > 0 && (y >> (w - 1)) & 1 == 1,
                _ => false,
            };
            if negative {
                return self.err(b_span, "a shift amount must not be negative");
            }
            if tb.is_signed() && !matches!(eb, Expr::Const(_)) {
                return self.err(b_span, "a shift amount must be unsigned");
            }
            if ta == Ty::InfInt {
                if let (Expr::Const(x), Expr::Const(y)) = (&ea, &eb) {
                    let v = if op == A::Shl {
                        x.checked_shl(*y as u32).unwrap_or(0)
                    } else {
                        x >> (*y).min(127)
                    };
                    return Ok(Val::konst(v, Ty::InfInt));
                }
                return self.err(
                    a_span,
                    "shifting a literal by a run-time amount needs a width: cast the literal",
                );
            }
            let w = bits_of(&ta)
                .ok_or_else(|| Diagnostic::new(a_span, "shifts apply to bit<N> and int<N>"))?;
            let op = if op == A::Shl { BinOp::Shl } else { BinOp::Shr };
            return Ok(Val::Scalar {
                e: Expr::Binary {
                    op,
                    a: Box::new(ea),
                    b: Box::new(eb),
                    width: w,
                    signed: ta.is_signed(),
                },
                ty: ta,
            });
        }
        let (ea, eb, ty) = self.unify(va, vb, span)?;
        let cmp = matches!(op, A::Eq | A::Ne | A::Lt | A::Le | A::Gt | A::Ge);
        if ty == Ty::InfInt {
            // Both are literals: fold.
            let (Expr::Const(x), Expr::Const(y)) = (&ea, &eb) else {
                unreachable!("unsized values are constants")
            };
            let cv = self.const_eval().binary_pub(
                op,
                ConstValue::Int(*x, Ty::InfInt),
                ConstValue::Int(*y, Ty::InfInt),
                op_span,
            )?;
            return Ok(const_val(&cv));
        }
        let arith = !matches!(op, A::Eq | A::Ne);
        let width = match &ty {
            Ty::Bit(w) | Ty::Int(w) => *w,
            Ty::Bool | Ty::Error | Ty::Enum(_) if !arith => {
                ty.scalar_width(&self.types).unwrap_or(32)
            }
            _ => {
                return self
                    .err(span, format!("`{}` does not apply to {}", op.symbol(), self.show(&ty)))
            }
        };
        let bop = match op {
            A::Mul => BinOp::Mul,
            A::Div => BinOp::Div,
            A::Mod => BinOp::Mod,
            A::Add => BinOp::Add,
            A::Sub => BinOp::Sub,
            A::AddSat => BinOp::AddSat,
            A::SubSat => BinOp::SubSat,
            A::Lt => BinOp::Lt,
            A::Le => BinOp::Le,
            A::Gt => BinOp::Gt,
            A::Ge => BinOp::Ge,
            A::Eq => BinOp::Eq,
            A::Ne => BinOp::Ne,
            A::BitAnd => BinOp::And,
            A::BitXor => BinOp::Xor,
            A::BitOr => BinOp::Or,
            A::Shl | A::Shr | A::Concat | A::And | A::Or => unreachable!("handled above"),
        };
        if matches!(bop, BinOp::Div | BinOp::Mod) && matches!(eb, Expr::Const(0)) {
            return Err(Diagnostic::new(op_span, crate::types::by_zero(op)));
        }
        if matches!(bop, BinOp::Div | BinOp::Mod) && ty.is_signed() {
            return self.err(
                span,
                "`/` and `%` on signed values are not supported (P4 restricts them too)",
            );
        }
        let e = Expr::Binary {
            op: bop,
            a: Box::new(ea),
            b: Box::new(eb),
            width,
            signed: ty.is_signed(),
        };
        Ok(Val::Scalar { e, ty: if cmp { Ty::Bool } else { ty } })
    }

    pub(crate) fn cast(&self, v: Val, to: &Ty, span: Span) -> DResult<Val> {
        let Val::Scalar { e, ty: from } = v else {
            return self.err(span, format!("cannot cast this to {}", self.show(to)));
        };
        let from_repr = match &from {
            Ty::Enum(i) => self.types.enums[*i].repr.clone().unwrap_or(from.clone()),
            t => t.clone(),
        };
        let out = |e| Ok(Val::Scalar { e, ty: to.clone() });
        match (&from_repr, to) {
            (Ty::InfInt, Ty::Bit(w) | Ty::Int(w)) => match e {
                Expr::Const(c) => out(Expr::Const(c & mask(*w))),
                _ => self.err(span, "cannot cast"),
            },
            (Ty::InfInt, Ty::Bool) => match e {
                Expr::Const(c) if c <= 1 => out(Expr::Const(c)),
                _ => self.err(span, "only 0 and 1 cast to bool"),
            },
            (Ty::Bit(wf) | Ty::Int(wf), Ty::Bit(wt) | Ty::Int(wt)) => {
                if wf == wt {
                    out(e)
                } else {
                    out(Expr::Cast {
                        e: Box::new(e),
                        from: *wf,
                        signed: from_repr.is_signed(),
                        to: *wt,
                    })
                }
            }
            (Ty::Bool, Ty::Bit(1)) | (Ty::Bit(1), Ty::Bool) => out(e),
            (Ty::Bit(w), Ty::Enum(i)) | (Ty::Int(w), Ty::Enum(i))
                if self.types.enums[*i].repr.as_ref().and_then(bits_of) == Some(*w) =>
            {
                out(e)
            }
            (a, b) if a == b => out(e),
            _ => self.err(span, format!("cannot cast {} to {}", self.show(&from), self.show(to))),
        }
    }

    /// The place `e` denotes, fixed now: a run-time stack index in it is read into a
    /// temporary here, so that later side effects (another argument, the right-hand side, the
    /// call's body) do not move it (spec 6.8: the l-value is saved at the call).
    pub(crate) fn fixed_lvalue(&mut self, e: &ast::Expr, pre: &mut Vec<Stmt>) -> DResult<Val> {
        let v = self.lvalue(e, pre)?;
        Ok(match v {
            Val::Scalar { e: Expr::Read(place), ty } => {
                Val::Scalar { e: Expr::Read(self.fix_place(place, pre)?), ty }
            }
            Val::Scalar { e: Expr::Slice { e: inner, hi, lo }, ty } => match *inner {
                Expr::Read(place) => Val::Scalar {
                    e: Expr::Slice { e: Box::new(Expr::Read(self.fix_place(place, pre)?)), hi, lo },
                    ty,
                },
                other => Val::Scalar { e: Expr::Slice { e: Box::new(other), hi, lo }, ty },
            },
            Val::Loc(Storage::Header { hdr, ty }) => {
                Val::Loc(Storage::Header { hdr: self.fix_hdr(hdr, pre)?, ty })
            }
            other => other,
        })
    }

    fn fix_place(&mut self, place: Place, pre: &mut Vec<Stmt>) -> DResult<Place> {
        Ok(match place {
            Place::Field { hdr, bit_off, width } => {
                Place::Field { hdr: self.fix_hdr(hdr, pre)?, bit_off, width }
            }
            Place::Slice { base, hi, lo } => {
                Place::Slice { base: Box::new(self.fix_place(*base, pre)?), hi, lo }
            }
            other => other,
        })
    }

    fn fix_hdr(&mut self, hdr: HdrRef, pre: &mut Vec<Stmt>) -> DResult<HdrRef> {
        Ok(match hdr {
            HdrRef::Index(stack, index) if !matches!(*index, Expr::Const(_)) => {
                let place = self.temp(&Ty::Bit(32), "index", Span::default())?;
                pre.push(Stmt::Assign(place.clone(), *index));
                HdrRef::Index(stack, Box::new(Expr::Read(place)))
            }
            other => other,
        })
    }

    /// The place an expression denotes, for assignment and out arguments.
    pub(crate) fn lvalue(&mut self, e: &ast::Expr, pre: &mut Vec<Stmt>) -> DResult<Val> {
        match &e.kind {
            ExprKind::DontCare => {
                Ok(Val::Scalar { e: Expr::Read(Place::Discard { width: 128 }), ty: Ty::DontCare })
            }
            ExprKind::Name(_)
            | ExprKind::Member(..)
            | ExprKind::Index(..)
            | ExprKind::Slice { .. } => {
                let v = self.expr(e, pre)?;
                match &v {
                    Val::Scalar { e: Expr::Read(_), .. } | Val::Loc(_) => Ok(v),
                    Val::Scalar { e: Expr::Slice { e: inner, .. }, .. }
                        if matches!(**inner, Expr::Read(_)) =>
                    {
                        Ok(v)
                    }
                    _ => self.err(
                        e.span,
                        "cannot assign to this (it is not a variable, field or slice)",
                    ),
                }
            }
            _ => self.err(e.span, "cannot assign to this expression"),
        }
    }
}

/// Give an unsized literal a width.
fn lit_to(e: Expr, w: u32) -> Expr {
    match e {
        Expr::Const(c) => Expr::Const(c & mask(w)),
        other => other,
    }
}

pub(crate) fn bits_of(ty: &Ty) -> Option<u32> {
    match ty {
        Ty::Bit(w) | Ty::Int(w) => Some(*w),
        Ty::Bool => Some(1),
        _ => None,
    }
}

fn not(e: Expr) -> Expr {
    Expr::Unary { op: UnOp::Not, e: Box::new(e), width: 1 }
}

fn and(a: Expr, b: Expr) -> Expr {
    match (&a, &b) {
        (Expr::Const(1), _) => b,
        (_, Expr::Const(1)) => a,
        _ => Expr::Binary {
            op: BinOp::LogicAnd,
            a: Box::new(a),
            b: Box::new(b),
            width: 1,
            signed: false,
        },
    }
}

fn or(a: Expr, b: Expr) -> Expr {
    Expr::Binary { op: BinOp::LogicOr, a: Box::new(a), b: Box::new(b), width: 1, signed: false }
}
