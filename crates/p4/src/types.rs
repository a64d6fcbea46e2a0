//! Semantic types, the program's type declarations, and compile-time constant evaluation.

use std::collections::HashMap;

use crate::ast::{self, BinOp, Expr, ExprKind, TypeKind, UnOp};
use crate::diag::{DResult, Diagnostic, Span};

/// The widest `bit<N>` / `int<N>` a value may have: values are computed in `u128`.
pub const MAX_WIDTH: u32 = 128;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Bit(u32),
    Int(u32),
    Varbit(u32),
    Bool,
    /// An integer literal without a width: arbitrary precision until it meets a typed operand.
    InfInt,
    Error,
    String,
    Void,
    MatchKind,
    Header(usize),
    Union(usize),
    Struct(usize),
    /// A header stack `T[N]`.
    Stack(Box<Ty>, u32),
    Enum(usize),
    Tuple(Vec<Ty>),
    /// An extern object type with its type arguments.
    Extern(usize, Vec<Ty>),
    /// `_` or an unconstrained type parameter.
    DontCare,
}

impl Ty {
    /// Width in bits of a scalar bit-vector, bool, enum or error value.
    pub fn scalar_width(&self, types: &Types) -> Option<u32> {
        match self {
            Ty::Bit(w) | Ty::Int(w) => Some(*w),
            Ty::Bool => Some(1),
            Ty::Error => Some(ERROR_BITS),
            Ty::Enum(i) => Some(
                types.enums[*i].repr.as_ref().and_then(|r| r.scalar_width(types)).unwrap_or(32),
            ),
            _ => None,
        }
    }

    pub fn is_signed(&self) -> bool {
        matches!(self, Ty::Int(_))
    }

    pub fn is_header_like(&self) -> bool {
        matches!(self, Ty::Header(_) | Ty::Union(_) | Ty::Stack(..))
    }
}

/// Errors are numbered in declaration order and stored in this many bits.
pub const ERROR_BITS: u32 = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompositeKind {
    Header,
    Union,
    Struct,
}

#[derive(Clone, Debug)]
pub struct FieldDef {
    pub name: String,
    pub ty: Ty,
    pub annotations: Vec<ast::Annotation>,
}

#[derive(Clone, Debug)]
pub struct Composite {
    pub name: String,
    pub kind: CompositeKind,
    pub fields: Vec<FieldDef>,
    /// The declaration's annotations (`@controller_header("packet_in")`, ...).
    pub annotations: Vec<ast::Annotation>,
    pub span: Span,
}

impl Composite {
    pub fn field(&self, name: &str) -> Option<(usize, &FieldDef)> {
        self.fields.iter().enumerate().find(|(_, f)| f.name == name)
    }
}

#[derive(Clone, Debug)]
pub struct EnumDef {
    pub name: String,
    /// The underlying type of a serializable enum (`enum bit<8> E {...}`).
    pub repr: Option<Ty>,
    pub members: Vec<(String, u128)>,
}

/// All named types of a program.
#[derive(Clone, Debug, Default)]
pub struct Types {
    pub composites: Vec<Composite>,
    pub enums: Vec<EnumDef>,
    pub errors: Vec<String>,
    pub match_kinds: Vec<String>,
    /// typedef, type, header, struct, enum, ... by name.
    pub names: HashMap<String, Ty>,
    /// Extern type names, indexed by the `usize` in [`Ty::Extern`].
    pub externs: Vec<String>,
}

impl Types {
    pub fn composite(&self, ty: &Ty) -> Option<&Composite> {
        match ty {
            Ty::Header(i) | Ty::Union(i) | Ty::Struct(i) => self.composites.get(*i),
            _ => None,
        }
    }

    /// Size in bits of a header or of a struct of bit fields (for `extract`, `emit`, digests).
    pub fn bits(&self, ty: &Ty) -> Option<u32> {
        match ty {
            Ty::Bit(w) | Ty::Int(w) => Some(*w),
            Ty::Bool => Some(1),
            Ty::Header(_) | Ty::Struct(_) => {
                let c = self.composite(ty)?;
                c.fields.iter().try_fold(0u32, |acc, f| Some(acc + self.bits(&f.ty)?))
            }
            Ty::Enum(_) | Ty::Error => ty.scalar_width(self),
            _ => None,
        }
    }

    pub fn error_code(&self, name: &str) -> Option<u32> {
        self.errors.iter().position(|e| e == name).map(|i| i as u32)
    }

    /// How a type reads in a message.
    pub fn show(&self, ty: &Ty) -> String {
        match ty {
            Ty::Bit(w) => format!("bit<{w}>"),
            Ty::Int(w) => format!("int<{w}>"),
            Ty::Varbit(w) => format!("varbit<{w}>"),
            Ty::Bool => "bool".into(),
            Ty::InfInt => "int".into(),
            Ty::Error => "error".into(),
            Ty::String => "string".into(),
            Ty::Void => "void".into(),
            Ty::MatchKind => "match_kind".into(),
            Ty::Header(i) | Ty::Union(i) | Ty::Struct(i) => self.composites[*i].name.clone(),
            Ty::Stack(t, n) => format!("{}[{n}]", self.show(t)),
            Ty::Enum(i) => self.enums[*i].name.clone(),
            Ty::Tuple(ts) => {
                format!("tuple<{}>", ts.iter().map(|t| self.show(t)).collect::<Vec<_>>().join(", "))
            }
            Ty::Extern(i, args) if args.is_empty() => self.externs[*i].clone(),
            Ty::Extern(i, args) => format!(
                "{}<{}>",
                self.externs[*i],
                args.iter().map(|t| self.show(t)).collect::<Vec<_>>().join(", ")
            ),
            Ty::DontCare => "_".into(),
        }
    }
}

/// A compile-time value.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstValue {
    /// An integer with its type (`Ty::InfInt` for an unsized literal); signed values are stored
    /// as their two's complement in `width` bits, or as i128 bits for `InfInt`.
    Int(u128, Ty),
    Bool(bool),
    Str(String),
    Error(u32),
    Enum(usize, u128),
}

/// Mask of the low `w` bits.
pub fn mask(w: u32) -> u128 {
    if w >= 128 {
        u128::MAX
    } else {
        (1u128 << w) - 1
    }
}

/// Sign-extend the low `w` bits of `v` to i128.
pub fn sext(v: u128, w: u32) -> i128 {
    if w == 0 || w >= 128 {
        return v as i128;
    }
    let shift = 128 - w;
    ((v << shift) as i128) >> shift
}

/// Evaluates constant expressions against the constants declared so far.
pub struct ConstEval<'a> {
    pub types: &'a Types,
    pub consts: &'a HashMap<String, ConstValue>,
    /// Names declared in the blocks being lowered, which shadow the top-level constants.
    pub locals: Option<&'a dyn LocalNames>,
}

/// What a name declared inside a block is, for compile-time evaluation.
pub trait LocalNames {
    /// `Some(Some(v))`: a local constant; `Some(None)`: a local that is not a constant (it
    /// shadows any top-level constant of that name); `None`: not declared locally.
    fn local_const(&self, name: &str) -> Option<Option<ConstValue>>;
}

impl ConstEval<'_> {
    pub fn eval(&self, e: &Expr) -> DResult<ConstValue> {
        let not_const = || Diagnostic::new(e.span, "expected a compile-time constant");
        Ok(match &e.kind {
            ExprKind::Int { value, width: None, .. } => ConstValue::Int(*value, Ty::InfInt),
            ExprKind::Int { value, width: Some(w), signed } => {
                if *value > mask(*w) {
                    return Err(Diagnostic::new(
                        e.span,
                        format!("value {value} does not fit in {w} bits"),
                    ));
                }
                ConstValue::Int(*value, if *signed { Ty::Int(*w) } else { Ty::Bit(*w) })
            }
            ExprKind::Bool(b) => ConstValue::Bool(*b),
            ExprKind::Str(s) => ConstValue::Str(s.clone()),
            ExprKind::Name(n) => match self.locals.and_then(|l| l.local_const(&n.name)) {
                Some(v) => v.ok_or_else(not_const)?,
                None => self.consts.get(&n.name).cloned().ok_or_else(not_const)?,
            },
            ExprKind::TopName(n) => self.consts.get(&n.name).cloned().ok_or_else(not_const)?,
            ExprKind::Member(base, member) => match &base.kind {
                ExprKind::TypeRef(ast::Type { kind: TypeKind::Error, .. }) => {
                    ConstValue::Error(self.types.error_code(&member.name).ok_or_else(|| {
                        Diagnostic::new(
                            member.span,
                            format!("no error `{}` is declared", member.name),
                        )
                    })?)
                }
                ExprKind::Name(n) => match self.types.names.get(&n.name) {
                    Some(Ty::Enum(i)) => {
                        let def = &self.types.enums[*i];
                        let (_, v) = def
                            .members
                            .iter()
                            .find(|(m, _)| *m == member.name)
                            .ok_or_else(|| {
                                Diagnostic::new(
                                    member.span,
                                    format!("enum {} has no member `{}`", def.name, member.name),
                                )
                            })?;
                        match &def.repr {
                            Some(r) => ConstValue::Int(*v, r.clone()),
                            None => ConstValue::Enum(*i, *v),
                        }
                    }
                    _ => return Err(not_const()),
                },
                _ => return Err(not_const()),
            },
            ExprKind::Cast(ty, inner) => {
                let v = self.eval(inner)?;
                let ty = resolve_type(self.types, self.consts, self.locals, ty)?;
                match (v, &ty) {
                    (ConstValue::Int(v, _), Ty::Bit(w) | Ty::Int(w)) => {
                        ConstValue::Int(v & mask(*w), ty.clone())
                    }
                    (ConstValue::Bool(b), Ty::Bit(1)) => ConstValue::Int(b as u128, ty.clone()),
                    (ConstValue::Int(v, _), Ty::Bool) => ConstValue::Bool(v != 0),
                    _ => return Err(not_const()),
                }
            }
            ExprKind::Unary(op, inner) => match (op, self.eval(inner)?) {
                (UnOp::Not, ConstValue::Bool(b)) => ConstValue::Bool(!b),
                (UnOp::Plus, v @ ConstValue::Int(..)) => v,
                (UnOp::Neg, ConstValue::Int(v, ty)) => {
                    ConstValue::Int(fit(v.wrapping_neg(), &ty), ty)
                }
                (UnOp::BitNot, ConstValue::Int(v, ty)) if ty != Ty::InfInt => {
                    ConstValue::Int(fit(!v, &ty), ty)
                }
                _ => return Err(not_const()),
            },
            ExprKind::Binary(op, a, b, op_span) => {
                self.binary(*op, self.eval(a)?, self.eval(b)?, *op_span)?
            }
            ExprKind::Ternary(c, a, b) => match self.eval(c)? {
                ConstValue::Bool(true) => self.eval(a)?,
                ConstValue::Bool(false) => self.eval(b)?,
                _ => return Err(not_const()),
            },
            ExprKind::Slice { base, hi, lo } => {
                let (
                    ConstValue::Int(v, Ty::Bit(w) | Ty::Int(w)),
                    ConstValue::Int(hi, _),
                    ConstValue::Int(lo, _),
                ) = (self.eval(base)?, self.eval(hi)?, self.eval(lo)?)
                else {
                    return Err(not_const());
                };
                if hi < lo || hi >= w as u128 {
                    return Err(Diagnostic::new(
                        e.span,
                        format!("slice [{hi}:{lo}] is out of range for {w} bits"),
                    ));
                }
                let width = (hi - lo + 1) as u32;
                ConstValue::Int((v >> lo) & mask(width), Ty::Bit(width))
            }
            _ => return Err(not_const()),
        })
    }

    /// Fold a binary operator over two constants.
    pub fn binary_pub(
        &self,
        op: BinOp,
        a: ConstValue,
        b: ConstValue,
        span: Span,
    ) -> DResult<ConstValue> {
        self.binary(op, a, b, span)
    }

    fn binary(&self, op: BinOp, a: ConstValue, b: ConstValue, span: Span) -> DResult<ConstValue> {
        use ConstValue::*;
        let bad =
            || Diagnostic::new(span, format!("cannot apply `{}` to these constants", op.symbol()));
        match (a, b) {
            (Bool(x), Bool(y)) => Ok(Bool(match op {
                BinOp::And => x && y,
                BinOp::Or => x || y,
                BinOp::Eq => x == y,
                BinOp::Ne => x != y,
                _ => return Err(bad()),
            })),
            (Int(x, tx), Int(y, ty)) => {
                if op == BinOp::Concat {
                    let (Some(wx), Some(wy)) = (width_of(&tx), width_of(&ty)) else {
                        return Err(bad());
                    };
                    if wx + wy > MAX_WIDTH {
                        return Err(Diagnostic::new(span, "concatenation wider than 128 bits"));
                    }
                    return Ok(Int((x << wy) | y, Ty::Bit(wx + wy)));
                }
                let shift = matches!(op, BinOp::Shl | BinOp::Shr);
                let ty = if shift || ty == Ty::InfInt { tx.clone() } else { ty.clone() };
                if !shift && tx != Ty::InfInt && ty != tx {
                    return Err(Diagnostic::new(
                        span,
                        format!("`{}` needs operands of the same type", op.symbol()),
                    ));
                }
                let signed = ty.is_signed() || ty == Ty::InfInt;
                let w = width_of(&ty).unwrap_or(128);
                let (sx, sy) =
                    if signed { (sext(x, w), sext(y, w)) } else { (x as i128, y as i128) };
                let v: u128 = match op {
                    BinOp::Add | BinOp::AddSat => x.wrapping_add(y),
                    BinOp::Sub | BinOp::SubSat => x.wrapping_sub(y),
                    BinOp::Mul => x.wrapping_mul(y),
                    BinOp::Div | BinOp::Mod if y == 0 => {
                        return Err(Diagnostic::new(span, by_zero(op)))
                    }
                    BinOp::Div => {
                        if signed {
                            sx.wrapping_div(sy) as u128
                        } else {
                            x / y
                        }
                    }
                    BinOp::Mod => {
                        if signed {
                            sx.wrapping_rem(sy) as u128
                        } else {
                            x % y
                        }
                    }
                    BinOp::Shl => {
                        if y >= 128 {
                            0
                        } else {
                            x << y
                        }
                    }
                    BinOp::Shr => {
                        if y >= 128 {
                            0
                        } else if signed {
                            (sx >> y) as u128
                        } else {
                            x >> y
                        }
                    }
                    BinOp::BitAnd => x & y,
                    BinOp::BitOr => x | y,
                    BinOp::BitXor => x ^ y,
                    BinOp::Eq => return Ok(Bool(x == y)),
                    BinOp::Ne => return Ok(Bool(x != y)),
                    BinOp::Lt => return Ok(Bool(if signed { sx < sy } else { x < y })),
                    BinOp::Le => return Ok(Bool(if signed { sx <= sy } else { x <= y })),
                    BinOp::Gt => return Ok(Bool(if signed { sx > sy } else { x > y })),
                    BinOp::Ge => return Ok(Bool(if signed { sx >= sy } else { x >= y })),
                    _ => return Err(bad()),
                };
                Ok(Int(fit(v, &ty), ty))
            }
            (Error(x), Error(y)) => match op {
                BinOp::Eq => Ok(Bool(x == y)),
                BinOp::Ne => Ok(Bool(x != y)),
                _ => Err(bad()),
            },
            (Enum(_, x), Enum(_, y)) => match op {
                BinOp::Eq => Ok(Bool(x == y)),
                BinOp::Ne => Ok(Bool(x != y)),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }

    /// A constant that must be a non-negative integer (widths, sizes, indices).
    pub fn eval_u32(&self, e: &Expr, what: &str) -> DResult<u32> {
        match self.eval(e)? {
            ConstValue::Int(v, ty)
                if !(ty == Ty::InfInt && (v as i128) < 0) && v <= u32::MAX as u128 =>
            {
                Ok(v as u32)
            }
            _ => Err(Diagnostic::new(
                e.span,
                format!("{what} must be a non-negative integer constant"),
            )),
        }
    }
}

fn width_of(ty: &Ty) -> Option<u32> {
    match ty {
        Ty::Bit(w) | Ty::Int(w) => Some(*w),
        _ => None,
    }
}

/// Truncate to the type's width (no-op for arbitrary-precision integers).
fn fit(v: u128, ty: &Ty) -> u128 {
    match width_of(ty) {
        Some(w) => v & mask(w),
        None => v,
    }
}

/// The error for `/` or `%` with a divisor known to be zero.
pub(crate) fn by_zero(op: BinOp) -> &'static str {
    if op == BinOp::Mod {
        "remainder by zero: the divisor of `%` is the constant 0"
    } else {
        "division by zero: the divisor of `/` is the constant 0"
    }
}

/// Resolve a syntactic type to a semantic one (type parameters must already be substituted).
/// The key generic type `name` with type arguments `args` is declared under: by structure
/// (composites by index), so that it stays short however deep types nest.
pub fn generic_key(name: &str, args: &[Ty]) -> String {
    format!("{name}<{args:?}>")
}

/// The type `t` names. Widths and sizes are evaluated with `locals` (a block's constants
/// and constructor parameters shadow the top-level ones) when given.
pub fn resolve_type(
    types: &Types,
    consts: &HashMap<String, ConstValue>,
    locals: Option<&dyn LocalNames>,
    t: &ast::Type,
) -> DResult<Ty> {
    let ev = ConstEval { types, consts, locals };
    let width = |e: &Expr, kind: &str| -> DResult<u32> {
        let w = ev.eval_u32(e, "a width")?;
        if w == 0 && kind != "varbit" {
            // bit<0> is legal P4 but carries nothing; keep it, operations on it yield 0.
            return Ok(0);
        }
        if w > MAX_WIDTH && kind != "varbit" {
            return Err(Diagnostic::new(
                e.span,
                format!("{kind}<{w}> is wider than the {MAX_WIDTH} bits hotplane supports"),
            ));
        }
        Ok(w)
    };
    Ok(match &t.kind {
        TypeKind::Bool => Ty::Bool,
        TypeKind::Error => Ty::Error,
        TypeKind::String => Ty::String,
        TypeKind::Void => Ty::Void,
        TypeKind::MatchKind => Ty::MatchKind,
        TypeKind::DontCare => Ty::DontCare,
        TypeKind::Bit(w) => Ty::Bit(width(w, "bit")?),
        TypeKind::Int(w) => Ty::Int(width(w, "int")?),
        TypeKind::InfInt => Ty::InfInt,
        TypeKind::Varbit(w) => Ty::Varbit(width(w, "varbit")?),
        TypeKind::Named { name, args } => {
            if !args.is_empty() {
                // A generic struct or header with these arguments, once declared.
                let tys = args
                    .iter()
                    .map(|a| resolve_type(types, consts, locals, a))
                    .collect::<DResult<Vec<_>>>()?;
                if let Some(t) = types.names.get(&generic_key(&name.name, &tys)) {
                    return Ok(t.clone());
                }
            }
            let base = types.names.get(&name.name).cloned().ok_or_else(|| {
                Diagnostic::new(name.span, format!("unknown type `{}`", name.name))
            })?;
            match base {
                Ty::Extern(i, _) => {
                    let args = args
                        .iter()
                        .map(|a| resolve_type(types, consts, locals, a))
                        .collect::<DResult<Vec<_>>>()?;
                    Ty::Extern(i, args)
                }
                other if args.is_empty() => other,
                _ => {
                    return Err(Diagnostic::new(
                        t.span,
                        format!(
                            "generic structs and headers (`{}<...>`) are not supported",
                            name.name
                        ),
                    ))
                }
            }
        }
        TypeKind::Stack { elem, size } => {
            let elem = resolve_type(types, consts, locals, elem)?;
            let n = ev.eval_u32(size, "a stack size")?;
            if n == 0 || n > 4096 {
                return Err(Diagnostic::new(size.span, "a header stack needs 1 to 4096 elements"));
            }
            Ty::Stack(Box::new(elem), n)
        }
        TypeKind::Tuple(ts) => Ty::Tuple(
            ts.iter().map(|a| resolve_type(types, consts, locals, a)).collect::<DResult<_>>()?,
        ),
    })
}
