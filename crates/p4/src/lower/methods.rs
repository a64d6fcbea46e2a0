//! Method calls (`hdr.setValid()`, `pkt.extract(h)`, `r.read(x, i)`, `t.apply()`) and v1model's
//! extern functions (`mark_to_drop`, `hash`, checksums, `clone`, ...).

use super::expr::Val;
use super::{Binding, BlockKind, Lowerer, Storage};
use crate::ast::{self, DeclKind, ExprKind};
use crate::diag::{DResult, Diagnostic, Span};
use crate::ir::{
    CloneKind, DigestMember, DigestType, Expr, Extern, HashAlgo, HdrRef, HostTarget, InstanceKind,
    ListItem, Place, Stmt, DIGEST_BITS,
};
use crate::types::Ty;

impl<'a> Lowerer<'a> {
    pub(crate) fn method_call(
        &mut self,
        obj: &ast::Expr,
        method: &ast::Ident,
        type_args: &[ast::Type],
        args: &[ast::Arg],
        span: Span,
        pre: &mut Vec<Stmt>,
    ) -> DResult<Option<Val>> {
        let m = method.name.as_str();
        let argc = |n: usize| -> DResult<()> {
            if args.len() != n {
                return Err(Diagnostic::new(
                    span,
                    format!("{m} takes {n} arguments, {} given", args.len()),
                ));
            }
            Ok(())
        };
        if let ExprKind::Name(n) = &obj.kind {
            match self.lookup(&n.name) {
                Some(Binding::Table(t)) if m == "apply" => {
                    argc(0)?;
                    self.check_apply_allowed(span)?;
                    pre.push(Stmt::Apply { table: t, hit_slot: None, action_slot: None });
                    return Ok(None);
                }
                Some(Binding::SubControl { decl, name, ctor }) if m == "apply" => {
                    self.check_apply_allowed(span)?;
                    self.inline_control(decl, &name, &ctor, args, span, pre)?;
                    return Ok(None);
                }
                // Direct type invocation (`C.apply(x)` for a control type `C` without
                // constructor parameters): an instance named after the type, applied once.
                None if m == "apply" => {
                    if let Some(decl) = self.global(&n.name) {
                        if let DeclKind::Control { ctor_params, .. } = &decl.kind {
                            if ctor_params.is_empty() {
                                let name = format!("{}{}", self.prefix, n.name);
                                self.inline_control(decl, &name, &[], args, span, pre)?;
                                return Ok(None);
                            }
                        }
                    }
                }
                Some(Binding::Instance(i)) => return self.instance_call(i, m, args, span, pre),
                Some(Binding::PacketIn) => {
                    return self.packet_in_call(m, type_args, args, span, pre)
                }
                Some(Binding::PacketOut) if m == "emit" => {
                    argc(1)?;
                    let v = self.expr(&args[0].value, pre)?;
                    self.emit(v, args[0].value.span, pre)?;
                    return Ok(None);
                }
                _ => {}
            }
        }
        match (self.expr(obj, pre)?, m) {
            (Val::Loc(Storage::Header { hdr, .. }), "isValid") => {
                argc(0)?;
                Ok(Some(Val::Scalar { e: Expr::IsValid(hdr), ty: Ty::Bool }))
            }
            (Val::Loc(Storage::Header { hdr, .. }), "setValid" | "setInvalid") => {
                argc(0)?;
                if m == "setValid" {
                    pre.extend(self.invalidate_siblings(&hdr));
                }
                pre.push(Stmt::SetValid(hdr, m == "setValid"));
                Ok(None)
            }
            (Val::Loc(Storage::Union { members, .. }), "isValid") => {
                argc(0)?;
                let valid = members.into_iter().filter_map(|m| match m {
                    Storage::Header { hdr, .. } => Some(Expr::IsValid(hdr)),
                    _ => None,
                });
                Ok(Some(Val::Scalar { e: any_of(valid.collect()), ty: Ty::Bool }))
            }
            (Val::Loc(Storage::Stack { stack, .. }), "push_front" | "pop_front") => {
                argc(1)?;
                let count = self.const_eval().eval_u32(&args[0].value, "the count")?;
                pre.push(if m == "push_front" {
                    Stmt::StackPush { stack, count }
                } else {
                    Stmt::StackPop { stack, count }
                });
                Ok(None)
            }
            (Val::Loc(s), "minSizeInBits" | "minSizeInBytes") => {
                let ty = match s {
                    Storage::Header { ty, .. } => Ty::Header(ty),
                    Storage::Struct { ty, .. } => Ty::Struct(ty),
                    _ => return self.err(span, format!("{m} applies to headers and structs")),
                };
                let bits = self.types.bits(&ty).unwrap_or(0) as u128;
                Ok(Some(Val::konst(
                    if m == "minSizeInBits" { bits } else { bits.div_ceil(8) },
                    Ty::InfInt,
                )))
            }
            _ => self.err(method.span, format!("no method `{m}` here")),
        }
    }

    fn packet_in_call(
        &mut self,
        m: &str,
        type_args: &[ast::Type],
        args: &[ast::Arg],
        span: Span,
        pre: &mut Vec<Stmt>,
    ) -> DResult<Option<Val>> {
        if self.block != BlockKind::Parser {
            return self.err(span, format!("packet_in.{m} is only available in a parser"));
        }
        match m {
            "extract" => {
                if args.is_empty() || args.len() > 2 {
                    return self.err(span, "extract takes a header (and a varbit size)");
                }
                // `extract<T>(_)`: skip a T.
                if let (ExprKind::DontCare, [ty], 1) = (&args[0].value.kind, type_args, args.len())
                {
                    let ty = self.resolve(ty)?;
                    let bits = match ty {
                        Ty::Header(h) if !self.has_varbit(h) => self.types.bits(&ty).unwrap_or(0),
                        _ => return self.err(span, "extract<T>(_) skips a fixed-size header T"),
                    };
                    pre.push(Stmt::Extern(Extern::Advance(Expr::Const(bits as u128))));
                    return Ok(None);
                }
                let Val::Loc(Storage::Header { hdr, ty }) = self.expr(&args[0].value, pre)? else {
                    return self.err(args[0].value.span, "extract needs a header");
                };
                let varbit_bits = match args.get(1) {
                    Some(a) => {
                        let v = self.scalar(&a.value, pre)?;
                        Some(self.to_width(v, 32, a.value.span)?)
                    }
                    None => None,
                };
                if self.has_varbit(ty) != varbit_bits.is_some() {
                    return self.err(
                        span,
                        if varbit_bits.is_some() {
                            "extract(h, bits) is for headers with a varbit field"
                        } else {
                            "a header with a varbit field is extracted with its length: \
                             extract(h, bits)"
                        },
                    );
                }
                pre.extend(self.invalidate_siblings(&hdr));
                pre.push(Stmt::Extern(Extern::Extract { hdr, varbit_bits }));
                Ok(None)
            }
            "advance" => {
                let Some(arg) = args.first() else {
                    return self.err(span, "advance takes a bit count");
                };
                let v = self.scalar(&arg.value, pre)?;
                let e = self.to_width(v, 32, span)?;
                pre.push(Stmt::Extern(Extern::Advance(e)));
                Ok(None)
            }
            "lookahead" => {
                let [ty] = type_args else {
                    return self.err(span, "lookahead needs one type argument");
                };
                let ty = self.resolve(ty)?;
                let width = self.types.bits(&ty).filter(|w| *w <= 128).ok_or_else(|| {
                    self.diag(
                        span,
                        "lookahead needs a type of at most 128 bits (bit<N> or a header)",
                    )
                })?;
                // Past the end of the packet it is a parser error, as in BMv2.
                pre.push(Stmt::Extern(Extern::Need(width)));
                match ty {
                    Ty::Bit(_) | Ty::Int(_) | Ty::Bool => {
                        Ok(Some(Val::Scalar { e: Expr::Lookahead { width }, ty }))
                    }
                    Ty::Header(h) if self.has_varbit(h) => {
                        self.err(span, "lookahead of a header with a varbit field")
                    }
                    Ty::Header(h) => {
                        // A header view of the next bits: a scratch instance filled on use.
                        let storage = self.alloc(&Ty::Header(h), "lookahead", span)?;
                        let Storage::Header { hdr, .. } = &storage else {
                            unreachable!("allocated a header")
                        };
                        let HdrRef::Static(id) = hdr else { unreachable!("allocated statically") };
                        let inst = &self.prog.headers[*id as usize];
                        let place =
                            Place::Field { hdr: hdr.clone(), bit_off: 0, width: inst.bytes * 8 };
                        pre.push(Stmt::Assign(place, Expr::Lookahead { width }));
                        pre.push(Stmt::SetValid(hdr.clone(), true));
                        Ok(Some(Val::Loc(storage)))
                    }
                    Ty::Struct(st) => {
                        // A struct of scalar fields: each field its slice of the next bits.
                        let storage = self.alloc(&Ty::Struct(st), "lookahead", span)?;
                        let Storage::Struct { fields, .. } = &storage else {
                            unreachable!("allocated a struct")
                        };
                        let mut hi = width;
                        for f in fields {
                            let Storage::Scalar { place, ty } = f else {
                                return self
                                    .err(span, "lookahead of a struct of bit<N> fields only");
                            };
                            let w = ty.scalar_width(&self.types).unwrap_or(0);
                            let slice = Expr::Slice {
                                e: Box::new(Expr::Lookahead { width }),
                                hi: hi - 1,
                                lo: hi - w,
                            };
                            pre.push(Stmt::Assign(place.clone(), slice));
                            hi -= w;
                        }
                        Ok(Some(Val::Loc(storage)))
                    }
                    _ => self.err(span, "lookahead of this type is not supported"),
                }
            }
            "length" => Ok(Some(Val::Scalar { e: Expr::PacketLength, ty: Ty::Bit(32) })),
            _ => self.err(span, format!("packet_in has no method `{m}`")),
        }
    }

    pub(crate) fn diag(&self, span: Span, msg: &str) -> crate::diag::Diagnostic {
        crate::diag::Diagnostic::new(span, msg)
    }

    /// `emit` of a header, stack, union or struct of them: each header in order.
    fn emit(&mut self, v: Val, span: Span, pre: &mut Vec<Stmt>) -> DResult<()> {
        match v {
            Val::Loc(Storage::Header { hdr, .. }) => pre.push(Stmt::Extern(Extern::Emit(hdr))),
            Val::Loc(Storage::Stack { stack, .. }) => {
                for k in 0..stack.count {
                    pre.push(Stmt::Extern(Extern::Emit(HdrRef::Static(stack.first + k))));
                }
            }
            Val::Loc(Storage::Struct { fields: items, .. })
            | Val::Loc(Storage::Union { members: items, .. }) => {
                for f in items {
                    if matches!(f, Storage::Scalar { .. }) {
                        return self.err(span, "emit of a struct with non-header fields");
                    }
                    self.emit(Val::Loc(f), span, pre)?;
                }
            }
            _ => return self.err(span, "emit needs a header, stack, union or struct of headers"),
        }
        Ok(())
    }

    fn instance_call(
        &mut self,
        i: u32,
        m: &str,
        args: &[ast::Arg],
        span: Span,
        pre: &mut Vec<Stmt>,
    ) -> DResult<Option<Val>> {
        let kind = self.prog.instances[i as usize].kind.clone();
        let name = self.prog.instances[i as usize].name.clone();
        let want = |n: usize| -> DResult<()> {
            if args.len() != n {
                return Err(Diagnostic::new(
                    span,
                    format!("{name}.{m} takes {n} arguments, {} given", args.len()),
                ));
            }
            Ok(())
        };
        let op =
            match (&kind, m) {
                (InstanceKind::Register { width, .. }, "read") => {
                    want(2)?;
                    let dst = self.out_place(&args[0].value, *width, pre)?;
                    let index = self.index_arg(&args[1].value, pre)?;
                    Extern::RegisterRead { reg: i, dst, index }
                }
                (InstanceKind::Register { width, .. }, "write") => {
                    want(2)?;
                    let index = self.index_arg(&args[0].value, pre)?;
                    // Left to right: the index is read before the value's side effects.
                    let index = Val::Scalar { e: index, ty: Ty::Bit(32) };
                    let (index, v) = self.then_expr(index, &args[1].value, pre)?;
                    let Val::Scalar { e: index, .. } = index else {
                        unreachable!("an index stays a single value")
                    };
                    // register<int<N>> takes signed values, register<bit<N>> unsigned ones.
                    let signed = matches!(v, Val::Scalar { ty: Ty::Int(_), .. });
                    let ty = if signed { Ty::Int(*width) } else { Ty::Bit(*width) };
                    let value = self.coerce(v, &ty, args[1].value.span)?;
                    Extern::RegisterWrite { reg: i, index, value }
                }
                (InstanceKind::Counter { .. }, "count") => {
                    want(1)?;
                    Extern::CounterCount { counter: i, index: self.index_arg(&args[0].value, pre)? }
                }
                (InstanceKind::DirectCounter { .. }, "count") => return Ok(None),
                (InstanceKind::Meter { .. }, "execute_meter") => {
                    want(2)?;
                    let index = self.index_arg(&args[0].value, pre)?;
                    let dst = self.out_place(&args[1].value, 0, pre)?;
                    Extern::MeterExecute { meter: i, index, dst }
                }
                (InstanceKind::DirectMeter { .. }, "read") => {
                    // No code of its own (as p4c compiles it for BMv2): the table writes the colour
                    // to this place on each hit. One place per meter.
                    want(1)?;
                    let dst = self.out_place(&args[0].value, 0, pre)?;
                    match self.meter_reads.get(&i) {
                        Some(other) if *other != dst => return self.err(
                            span,
                            "a direct meter is read into one place (BMv2 writes its colour there \
                             on every hit); this read names another",
                        ),
                        _ => {
                            self.meter_reads.insert(i, dst);
                        }
                    }
                    return Ok(None);
                }
                (InstanceKind::ExternSlot { .. }, "call") => {
                    want(1)?;
                    let data = self.inout_fields(&args[0].value, pre)?;
                    return Ok(Some(self.host_call(HostTarget::Slot(i), Some(data), pre)));
                }
                (InstanceKind::ExternSlot { .. }, "call_packet") => {
                    want(0)?;
                    return Ok(Some(self.host_call(HostTarget::Slot(i), None, pre)));
                }
                _ => return self.err(span, format!("{name} has no method `{m}`")),
            };
        pre.push(Stmt::Extern(op));
        Ok(None)
    }

    /// A call out of the program whose 64-bit result is the value of the call expression.
    fn host_call(
        &mut self,
        target: HostTarget,
        data: Option<Vec<Place>>,
        pre: &mut Vec<Stmt>,
    ) -> Val {
        let dst = Place::Slot { slot: self.prog.slot(), width: 64 };
        pre.push(Stmt::Extern(Extern::HostCall { target, data, dst: dst.clone() }));
        Val::Scalar { e: Expr::Read(dst), ty: Ty::Bit(64) }
    }

    /// The fields of an `inout` argument (a header, a struct, a field), in wire order.
    fn inout_fields(&mut self, e: &ast::Expr, pre: &mut Vec<Stmt>) -> DResult<Vec<Place>> {
        let items = self.field_list(e, pre)?;
        items
            .into_iter()
            .map(|i| match i.value {
                Expr::Read(p) => Ok(p),
                _ => self.err(
                    e.span,
                    "the argument must be a header, a struct or a field (it is written back)",
                ),
            })
            .collect()
    }

    /// A bit<32> index argument.
    fn index_arg(&mut self, e: &ast::Expr, pre: &mut Vec<Stmt>) -> DResult<Expr> {
        let v = self.scalar(e, pre)?;
        self.to_width(v, 32, e.span)
    }

    /// The place an `out` argument writes; `width` 0 accepts any width.
    fn out_place(&mut self, e: &ast::Expr, width: u32, pre: &mut Vec<Stmt>) -> DResult<Place> {
        match self.lvalue(e, pre)? {
            Val::Scalar { e: Expr::Read(place), .. } => {
                if width != 0 && place.width() != width && !matches!(place, Place::Discard { .. }) {
                    return self.err(
                        e.span,
                        format!("expected a bit<{width}> location, found bit<{}>", place.width()),
                    );
                }
                Ok(place)
            }
            Val::Scalar { e: Expr::Slice { e: inner, hi, lo }, .. } => match *inner {
                Expr::Read(base) => Ok(Place::Slice { base: Box::new(base), hi, lo }),
                _ => self.err(e.span, "expected a variable or field"),
            },
            _ => self.err(e.span, "expected a variable or field"),
        }
    }

    /// The control plane's view of a digest's data: a struct's members when each is one
    /// list item (a scalar), else the items as a tuple.
    fn digest_type(&mut self, strukt: Option<usize>, data: &[ListItem]) -> DigestType {
        if let Some(ty) = strukt {
            let c = &self.types.composites[ty];
            let members: Option<Vec<DigestMember>> = c
                .fields
                .iter()
                .map(|f| {
                    let width = f.ty.scalar_width(&self.types)?;
                    let is_bool = matches!(f.ty, Ty::Bool);
                    let scalar = matches!(f.ty, Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Enum(_));
                    scalar.then(|| DigestMember { name: f.name.clone(), width, is_bool })
                })
                .collect();
            if let Some(members) = members.filter(|m| m.len() == data.len()) {
                return DigestType { name: c.name.clone(), is_struct: true, members };
            }
        }
        let name = match strukt {
            Some(ty) => self.types.composites[ty].name.clone(),
            None => {
                self.list_digests += 1;
                format!("digest_{}", self.list_digests - 1)
            }
        };
        let members = data
            .iter()
            .map(|i| DigestMember { name: String::new(), width: i.width, is_bool: false })
            .collect();
        DigestType { name, is_struct: false, members }
    }

    /// A field list argument (`{a, b, c}` or a single value or a struct).
    pub(crate) fn field_list(
        &mut self,
        e: &ast::Expr,
        pre: &mut Vec<Stmt>,
    ) -> DResult<Vec<ListItem>> {
        let v = self.expr(e, pre)?;
        let mut out = Vec::new();
        self.flatten(v, e.span, &mut out)?;
        Ok(out)
    }

    fn flatten(&self, v: Val, span: Span, out: &mut Vec<ListItem>) -> DResult<()> {
        match v {
            // A varbit field counts with its length at run time.
            Val::Scalar { e: Expr::Read(Place::Field { hdr, .. }), ty: Ty::Varbit(_) } => {
                out.push(ListItem { value: Expr::VarbitField(hdr), width: 0 });
            }
            Val::Scalar { e, ty } => {
                let Some(width) = ty.scalar_width(&self.types) else {
                    return self.err(span, "list elements need a width (cast literals, e.g. 8w0)");
                };
                out.push(ListItem { value: e, width });
            }
            Val::List(items) => {
                for (v, s) in items {
                    self.flatten(v, s, out)?;
                }
            }
            Val::Struct(items) => {
                for (_, v, s) in items {
                    self.flatten(v, s, out)?;
                }
            }
            Val::Loc(Storage::Header { hdr, ty }) => {
                for leaf in self.header_leaves(ty) {
                    let Some((bit_off, width)) = leaf else {
                        out.push(ListItem { value: Expr::VarbitField(hdr.clone()), width: 0 });
                        continue;
                    };
                    out.push(ListItem {
                        value: Expr::Read(Place::Field { hdr: hdr.clone(), bit_off, width }),
                        width,
                    });
                }
            }
            Val::Loc(Storage::Struct { fields, .. }) => {
                for f in fields {
                    self.flatten(super::stmt::storage_val(f), span, out)?;
                }
            }
            _ => return self.err(span, "this cannot be part of a field list"),
        }
        Ok(())
    }

    pub(crate) fn hash_algo(&mut self, e: &ast::Expr, pre: &mut Vec<Stmt>) -> DResult<HashAlgo> {
        let (v, _) = self.scalar_typed(e, pre)?;
        let Expr::Const(c) = v else {
            return self.err(e.span, "the algorithm must be a HashAlgorithm constant");
        };
        let name = self
            .types
            .names
            .get("HashAlgorithm")
            .and_then(|t| {
                if let Ty::Enum(i) = t {
                    self.types.enums[*i].members.get(c as usize)
                } else {
                    None
                }
            })
            .map(|(n, _)| n.clone())
            .unwrap_or_default();
        Ok(match name.as_str() {
            "crc32" => HashAlgo::Crc32,
            "crc16" => HashAlgo::Crc16,
            "identity" => HashAlgo::Identity,
            "csum16" => HashAlgo::Csum16,
            "xor16" => HashAlgo::Xor16,
            "random" => HashAlgo::Random,
            other => return self.err(e.span, format!("hash algorithm `{other}` is not supported")),
        })
    }

    pub(crate) fn extern_function(
        &mut self,
        n: &ast::Ident,
        type_args: &[ast::Type],
        args: &[ast::Arg],
        span: Span,
        pre: &mut Vec<Stmt>,
    ) -> DResult<Option<Val>> {
        let fname = n.name.clone();
        let a = |k: usize| -> DResult<&ast::Expr> {
            args.get(k)
                .map(|a| &a.value)
                .ok_or_else(|| Diagnostic::new(span, format!("{fname} needs more arguments")))
        };
        let op = match n.name.as_str() {
            "hotplane_flow_function" => {
                if !args.is_empty() {
                    return self.err(span, "hotplane_flow_function takes no arguments");
                }
                return Ok(Some(self.host_call(HostTarget::FlowFunction, None, pre)));
            }
            "hotplane_load_from_packet" => Extern::LoadFromPacket,
            "mark_to_drop" => Extern::MarkToDrop,
            "verify" => {
                if self.block != BlockKind::Parser {
                    return self.err(span, "verify is only available in a parser");
                }
                let cond = self.condition(a(0)?, pre)?;
                let (error, ty) = self.scalar_typed(a(1)?, pre)?;
                if ty != Ty::Error {
                    return self.err(a(1)?.span, "verify's second argument must be an error");
                }
                Extern::Verify { cond, error }
            }
            "hash" => {
                let dst = self.out_place(a(0)?, 0, pre)?;
                let algo = self.hash_algo(a(1)?, pre)?;
                let base = self.scalar(a(2)?, pre)?;
                let base = self.widen(base, a(2)?.span)?;
                let data = self.field_list(a(3)?, pre)?;
                let max = self.scalar(a(4)?, pre)?;
                let max = self.widen(max, a(4)?.span)?;
                Extern::Hash { dst, algo, base, data, max }
            }
            "verify_checksum"
            | "update_checksum"
            | "verify_checksum_with_payload"
            | "update_checksum_with_payload" => {
                let verify = n.name.starts_with("verify");
                let cond = self.condition(a(0)?, pre)?;
                let data = self.field_list(a(1)?, pre)?;
                let sum = self.out_place(a(2)?, 0, pre)?;
                let algo = self.hash_algo(a(3)?, pre)?;
                Extern::Checksum {
                    verify,
                    cond,
                    data,
                    sum,
                    algo,
                    with_payload: n.name.ends_with("payload"),
                }
            }
            "random" => {
                let dst = self.out_place(a(0)?, 0, pre)?;
                let w = dst.width();
                let lo = self.scalar(a(1)?, pre)?;
                let lo = self.to_width(lo, w, a(1)?.span)?;
                let hi = self.scalar(a(2)?, pre)?;
                let hi = self.to_width(hi, w, a(2)?.span)?;
                Extern::Random { dst, lo, hi }
            }
            "digest" => {
                let r = self.scalar(a(0)?, pre)?;
                let receiver = self.to_width(r, 32, a(0)?.span)?;
                // The data's type: `T` of `digest<T>`, else the struct the argument is.
                let given = match type_args {
                    [t] => Some(self.resolve(t)?),
                    _ => None,
                };
                // A tuple (a struct underneath) stays a tuple in the P4Info.
                let strukt = match (given, self.expr(a(1)?, pre)?) {
                    (Some(Ty::Struct(ty)), _) | (None, Val::Loc(Storage::Struct { ty, .. }))
                        if !self.tuple_types.contains(&ty) =>
                    {
                        Some(ty)
                    }
                    _ => None,
                };
                let data = self.field_list(a(1)?, pre)?;
                let ty = self.digest_type(strukt, &data);
                if data.iter().any(|i| i.width == 0) {
                    return self.err(a(1)?.span, "a digest cannot carry a varbit field");
                }
                if ty.bits() > DIGEST_BITS {
                    return self.err(
                        a(1)?.span,
                        format!(
                            "the digest carries {} bits; hotplane's digests carry at most \
                             {DIGEST_BITS}",
                            ty.bits()
                        ),
                    );
                }
                Extern::Digest { receiver, ty, data }
            }
            "clone" | "clone3" | "clone_preserving_field_list" => {
                let (k, _) = self.scalar_typed(a(0)?, pre)?;
                let kind = match k {
                    Expr::Const(0) => CloneKind::I2E,
                    Expr::Const(1) => CloneKind::E2E,
                    _ => {
                        return self.err(
                            a(0)?.span,
                            "the clone type must be CloneType.I2E or CloneType.E2E",
                        )
                    }
                };
                let s = self.scalar(a(1)?, pre)?;
                let session = self.to_width(s, 32, a(1)?.span)?;
                let keep = match n.name.as_str() {
                    "clone" => 0,
                    "clone3" => self.preserved_data(a(2)?, pre)?,
                    _ => self.preserved_list(a(2)?)?,
                };
                Extern::Clone { kind, session, keep }
            }
            "resubmit" | "recirculate" => {
                let keep = match args.first() {
                    Some(d) => self.preserved_data(&d.value, pre)?,
                    None => 0,
                };
                if n.name == "resubmit" {
                    Extern::Resubmit { keep }
                } else {
                    Extern::Recirculate { keep }
                }
            }
            "resubmit_preserving_field_list" => {
                Extern::Resubmit { keep: self.preserved_list(a(0)?)? }
            }
            "recirculate_preserving_field_list" => {
                Extern::Recirculate { keep: self.preserved_list(a(0)?)? }
            }
            "truncate" => {
                let v = self.scalar(a(0)?, pre)?;
                Extern::Truncate(self.to_width(v, 32, span)?)
            }
            "assert" | "assume" => Extern::Assert(self.condition(a(0)?, pre)?),
            "log_msg" => {
                let msg = match self.expr(a(0)?, pre)? {
                    Val::Str(s) => s,
                    _ => return self.err(a(0)?.span, "log_msg needs a string"),
                };
                let data = match args.get(1) {
                    Some(d) => self.field_list(&d.value, pre)?,
                    None => Vec::new(),
                };
                Extern::Log { msg, data }
            }
            other => {
                return self.err(n.span, format!("extern function `{other}` is not supported"))
            }
        };
        pre.push(Stmt::Extern(op));
        Ok(None)
    }

    /// The slots `@field_list(index)` names, for a `*_preserving_field_list(index)` call.
    fn preserved_list(&mut self, index: &ast::Expr) -> DResult<u16> {
        let i = self.const_eval().eval_u32(index, "a field list index")?;
        let slots = self.prog.field_lists.get(&i).cloned().unwrap_or_default();
        self.preserve(slots, index.span)
    }

    /// The slots the data argument of `resubmit(data)`, `recirculate(data)` or `clone3(..,
    /// data)` names: metadata fields, each kept as it is at the end of the block.
    fn preserved_data(&mut self, data: &ast::Expr, pre: &mut Vec<Stmt>) -> DResult<u16> {
        let items = self.field_list(data, pre)?;
        let mut slots = Vec::new();
        for item in items {
            match item.value {
                Expr::Read(Place::Slot { slot, .. }) => slots.push(slot),
                _ => {
                    return self.err(
                        data.span,
                        "the fields a resubmit, recirculate or clone keeps must be metadata \
                         fields (header fields and expressions cannot be preserved)",
                    )
                }
            }
        }
        self.preserve(slots, data.span)
    }

    /// An unsigned value of at most 64 bits (or a literal), as 64 bits: hash's base and max.
    fn widen(&self, v: Val, span: Span) -> DResult<Expr> {
        match v {
            Val::Scalar { e: Expr::Const(c), ty: Ty::InfInt } if c <= u64::MAX as u128 => {
                Ok(Expr::Const(c))
            }
            Val::Scalar { e, ty: Ty::Bit(w) } if w <= 64 => {
                Ok(Expr::Cast { e: Box::new(e), from: w, signed: false, to: 64 })
            }
            _ => self.err(span, "expected an unsigned value of at most 64 bits"),
        }
    }
}

/// True if any of `terms` is, as a balanced tree of `||`: a union of many members must not
/// become an expression as tall as it is wide (every pass after this one recurses on height).
fn any_of(mut terms: Vec<Expr>) -> Expr {
    if terms.is_empty() {
        return Expr::Const(0);
    }
    while terms.len() > 1 {
        let mut next = Vec::with_capacity(terms.len().div_ceil(2));
        let mut pairs = terms.into_iter();
        while let Some(a) = pairs.next() {
            next.push(match pairs.next() {
                Some(b) => Expr::Binary {
                    op: crate::ir::BinOp::LogicOr,
                    a: Box::new(a),
                    b: Box::new(b),
                    width: 1,
                    signed: false,
                },
                None => a,
            });
        }
        terms = next;
    }
    terms.pop().expect("one term left")
}
