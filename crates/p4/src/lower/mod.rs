//! Elaboration: checks a parsed v1model program and lowers it to the [`ir`](crate::ir).
//!
//! Names resolve to storage (slots, header instances), actions and functions are inlined at
//! direct call sites (P4 has no recursion), sub-controls are inlined where they are applied,
//! and extern calls become [`ir::Extern`] operations. Every error names the construct and
//! carries its position.

mod blocks;
mod budget;
mod calls;
mod expr;
mod methods;
mod profile;
mod stmt;
mod table;
mod types;

pub(crate) use table::annotation_text;

use std::collections::HashMap;

use crate::ast::{self, Decl, DeclKind, Ident};
use crate::budget::Limits;
use crate::diag::{DResult, Diagnostic, Span};
use crate::ir::{self, HdrRef, Place, SlotId, StackRef};
use crate::types::{resolve_type, ConstEval, ConstValue, EnumDef, FieldDef, Ty, Types};

/// Where a value of some type lives.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Storage {
    Scalar { place: Place, ty: Ty },
    Header { hdr: HdrRef, ty: usize },
    Stack { stack: StackRef, elem: usize },
    Struct { ty: usize, fields: Vec<Storage> },
    Union { ty: usize, members: Vec<Storage> },
}

/// What a name means in the current scope.
#[derive(Clone, Debug)]
pub(crate) enum Binding<'a> {
    Var(Storage),
    Const(ConstValue),
    Action(u32),
    Table(u32),
    Instance(u32),
    PacketIn,
    PacketOut,
    /// A control instantiated inside a control, applied by inlining.
    SubControl {
        decl: &'a Decl,
        name: String,
        /// Its constructor parameters' values ([`Binding::Const`]s).
        ctor: Vec<Binding<'a>>,
    },
    /// A parser instantiated inside a parser: each `apply` splices a copy of its states in.
    SubParser {
        decl: &'a Decl,
        name: String,
        ctor: Vec<Binding<'a>>,
    },
}

/// Which block is being lowered (some externs belong to one kind of block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Parser,
    Control,
    Deparser,
}

pub(crate) struct Lowerer<'a> {
    pub types: Types,
    pub consts: HashMap<String, ConstValue>,
    globals: HashMap<String, &'a Decl>,
    extern_fns: HashMap<String, Vec<&'a ast::Method>>,
    pub prog: ProgramBuilder,
    scopes: Vec<HashMap<String, Binding<'a>>>,
    /// Qualified name prefix of the control being lowered (`MyIngress.`).
    prefix: String,
    pub block: BlockKind,
    /// Where `return expr;` stores its value inside an inlined function, and its type.
    return_target: Vec<Option<Storage>>,
    /// Lowered top-level actions (by name) so that each is lowered once.
    global_actions: HashMap<String, u32>,
    /// Every lowered action's index by its qualified name.
    action_index: HashMap<String, u32>,
    /// The declaration each qualified action name was lowered from.
    action_decl_span: HashMap<String, Span>,
    /// The budgets, and what the program has used of them.
    spent: budget::Spent,
    /// How deep each struct, header and union type nests (by composite index).
    composite_depth: Vec<usize>,
    /// For each header instance that is a member of a header union, the other members: making
    /// one valid makes them invalid (spec 8.20).
    union_siblings: HashMap<u32, Vec<u32>>,
    /// Extern instances declared at the top level, by name (looked up after every scope).
    global_bindings: HashMap<String, Binding<'a>>,
    /// Generic structs, headers and unions by name, declared per use (`S<bit<8>>`).
    generic_types: HashMap<String, &'a Decl>,
    /// The composites that stand for tuple types (`tuples_as_structs`).
    pub(crate) tuple_types: std::collections::HashSet<usize>,
    /// The generic instantiations in progress, innermost last: each type parameter, what
    /// its name meant before, and the argument it is bound to.
    generic_frames: Vec<Vec<(String, Option<Ty>, Ty)>>,
    /// Actions whose directional parameters a table's action list binds, with what the
    /// arguments lower to (tables binding one alike share the binding; `bind_action_args`).
    bound_actions: HashMap<u32, String>,
    /// Digests whose data is not a struct, named `digest_N` in the order they are met.
    list_digests: u32,
    /// Storage of actions' header and struct parameters, by (action, parameter index).
    action_param_storage: HashMap<(u32, usize), Storage>,
    /// Which of those are `out` parameters (they start invalid rather than copied in).
    out_params: std::collections::HashSet<(u32, usize)>,
    /// Lowering the body of an action, or of a function: what the spec forbids there.
    in_action: bool,
    in_function: u32,
    /// How many `for` loops enclose the statement being lowered (in this body).
    loop_depth: u32,
    /// The product of the iteration bounds of those loops.
    loop_work: u64,
    /// The body of each bound action as declared, for direct calls of it.
    unbound_bodies: HashMap<u32, Vec<ir::Stmt>>,
    /// The place each direct meter (by instance index) is read into.
    pub(crate) meter_reads: HashMap<u32, Place>,
    /// Position of each declaration in the program text (includes expanded), for listing
    /// tables, actions and instances in declaration order as p4c does in P4Info.
    decl_order: HashMap<Span, u32>,
}

/// The parts of [`ir::Program`] built while lowering.
#[derive(Default)]
pub(crate) struct ProgramBuilder {
    pub headers: Vec<ir::HeaderInst>,
    pub header_bytes: u32,
    pub slots: u32,
    pub actions: Vec<ir::Action>,
    pub tables: Vec<ir::Table>,
    pub instances: Vec<ir::Instance>,
    /// The user metadata slots of each `@field_list(N)` index.
    pub field_lists: std::collections::BTreeMap<u32, Vec<SlotId>>,
    /// The slot sets resubmit, recirculate and clone preserve ([`ir::Program::preserved`]).
    pub preserved: Vec<Vec<SlotId>>,
}

impl ProgramBuilder {
    pub fn slot(&mut self) -> SlotId {
        self.slots += 1;
        self.slots - 1
    }
}

impl<'a> Lowerer<'a> {
    fn new(limits: &Limits) -> Self {
        Lowerer {
            types: Types::default(),
            consts: HashMap::new(),
            globals: HashMap::new(),
            extern_fns: HashMap::new(),
            prog: ProgramBuilder::default(),
            scopes: vec![HashMap::new()],
            prefix: String::new(),
            block: BlockKind::Control,
            return_target: Vec::new(),
            global_actions: HashMap::new(),
            action_index: HashMap::new(),
            spent: budget::Spent { limits: limits.clone(), ..Default::default() },
            composite_depth: Vec::new(),
            union_siblings: HashMap::new(),
            global_bindings: HashMap::new(),
            generic_types: HashMap::new(),
            tuple_types: Default::default(),
            generic_frames: Vec::new(),
            action_decl_span: HashMap::new(),
            bound_actions: Default::default(),
            list_digests: 0,
            action_param_storage: HashMap::new(),
            out_params: Default::default(),
            in_action: false,
            in_function: 0,
            loop_depth: 0,
            loop_work: 1,
            unbound_bodies: HashMap::new(),
            decl_order: HashMap::new(),
            meter_reads: HashMap::new(),
        }
    }

    /// Number every declaration, nested ones included, in program order.
    fn number_decls(&mut self, decls: &[Decl]) {
        for d in decls {
            let n = self.decl_order.len() as u32;
            self.decl_order.entry(d.span).or_insert(n);
            if let DeclKind::Control { locals, .. } | DeclKind::Parser { locals, .. } = &d.kind {
                self.number_decls(locals);
            }
        }
    }

    /// Where `d` stands in the program text.
    pub(crate) fn order_of(&self, d: &Decl) -> u32 {
        self.decl_order.get(&d.span).copied().unwrap_or(u32::MAX)
    }

    pub fn err<T>(&self, span: Span, msg: impl Into<String>) -> DResult<T> {
        Err(Diagnostic::new(span, msg))
    }

    pub fn const_eval(&self) -> ConstEval<'_> {
        ConstEval { types: &self.types, consts: &self.consts, locals: Some(self) }
    }

    pub fn resolve(&mut self, t: &ast::Type) -> DResult<Ty> {
        self.instantiate_generics(t)?;
        let ty = resolve_type(&self.types, &self.consts, Some(&*self), t)?;
        self.tuples_as_structs(ty, t.span)
    }

    pub fn show(&self, ty: &Ty) -> String {
        self.types.show(ty)
    }

    // ---- scopes -------------------------------------------------------------------------------

    pub fn push_scope(&mut self) {
        self.scopes.push(HashMap::new());
    }

    pub fn pop_scope(&mut self) {
        self.scopes.pop();
    }

    pub fn bind(&mut self, name: &str, b: Binding<'a>) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_string(), b);
        }
    }

    pub fn lookup(&self, name: &str) -> Option<Binding<'a>> {
        for s in self.scopes.iter().rev() {
            if let Some(b) = s.get(name) {
                return Some(b.clone());
            }
        }
        if let Some(b) = self.global_bindings.get(name) {
            return Some(b.clone());
        }
        self.consts.get(name).map(|c| Binding::Const(c.clone()))
    }

    pub fn global(&self, name: &str) -> Option<&'a Decl> {
        self.globals.get(name).copied()
    }

    pub fn extern_fn(&self, name: &str) -> Option<&Vec<&'a ast::Method>> {
        self.extern_fns.get(name)
    }

    // ---- storage ------------------------------------------------------------------------------

    /// Allocate storage for a value of type `ty` named `name` (for listings).
    pub fn alloc(&mut self, ty: &Ty, name: &str, span: Span) -> DResult<Storage> {
        Ok(match ty {
            Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Enum(_) | Ty::Error => {
                self.check_packet_state(name, span)?;
                let width = ty.scalar_width(&self.types).unwrap_or(1);
                Storage::Scalar {
                    place: Place::Slot { slot: self.prog.slot(), width },
                    ty: ty.clone(),
                }
            }
            Ty::Header(i) => {
                Storage::Header { hdr: HdrRef::Static(self.alloc_header(*i, name, span)?), ty: *i }
            }
            Ty::Stack(elem, n) => {
                let Ty::Header(h) = **elem else {
                    return self
                        .err(span, format!("stacks of {} are not supported", self.show(elem)));
                };
                let first = self.prog.headers.len() as u32;
                for k in 0..*n {
                    self.alloc_header(h, &format!("{name}[{k}]"), span)?;
                }
                let next_slot = self.prog.slot();
                Storage::Stack { stack: StackRef { first, count: *n, next_slot }, elem: h }
            }
            Ty::Struct(i) | Ty::Union(i) => {
                let fields: Vec<FieldDef> = self.types.composites[*i].fields.clone();
                let mut out = Vec::with_capacity(fields.len());
                for f in &fields {
                    out.push(self.alloc(&f.ty, &format!("{name}.{}", f.name), span)?);
                }
                if matches!(ty, Ty::Union(_)) {
                    let ids: Vec<u32> = out
                        .iter()
                        .filter_map(|m| match m {
                            Storage::Header { hdr: HdrRef::Static(id), .. } => Some(*id),
                            _ => None,
                        })
                        .collect();
                    for &id in &ids {
                        self.union_siblings
                            .insert(id, ids.iter().copied().filter(|&o| o != id).collect());
                    }
                    Storage::Union { ty: *i, members: out }
                } else {
                    Storage::Struct { ty: *i, fields: out }
                }
            }
            other => {
                return self
                    .err(span, format!("variables of type {} are not supported", self.show(other)))
            }
        })
    }

    /// Whether header type `ty` has a varbit field.
    pub(crate) fn has_varbit(&self, ty: usize) -> bool {
        self.types.composites[ty].fields.iter().any(|f| matches!(f.ty, Ty::Varbit(_)))
    }

    /// Statements that make the other members of `hdr`'s header union invalid (none when
    /// `hdr` is not a union member).
    pub(crate) fn invalidate_siblings(&self, hdr: &HdrRef) -> Vec<ir::Stmt> {
        let HdrRef::Static(id) = hdr else { return Vec::new() };
        self.union_siblings
            .get(id)
            .map(|s| s.iter().map(|&o| ir::Stmt::SetValid(HdrRef::Static(o), false)).collect())
            .unwrap_or_default()
    }

    fn alloc_header(&mut self, ty: usize, name: &str, span: Span) -> DResult<u32> {
        self.check_packet_state(name, span)?;
        let c = &self.types.composites[ty];
        let mut fields = Vec::with_capacity(c.fields.len());
        let mut off = 0u32;
        let mut varbit = None;
        for (i, f) in c.fields.iter().enumerate() {
            let w = match &f.ty {
                Ty::Bit(w) | Ty::Int(w) => *w,
                Ty::Bool => 1,
                Ty::Enum(_) | Ty::Error => f.ty.scalar_width(&self.types).unwrap_or(32),
                // A struct of bit fields (checked when the header was declared).
                Ty::Struct(_) => self.types.bits(&f.ty).unwrap_or(0),
                Ty::Varbit(w) => {
                    if i + 1 != c.fields.len() || off % 8 != 0 || w % 8 != 0 {
                        return self.err(
                            span,
                            format!(
                                "header {}: a varbit field is supported as the last field, \
                                 starting on a byte, with a maximum of whole bytes",
                                c.name
                            ),
                        );
                    }
                    varbit = Some(ir::Varbit { byte_off: off / 8, max_bits: *w, len_slot: 0 });
                    *w
                }
                other => {
                    return self.err(
                        span,
                        format!("header {}: field of type {}", c.name, self.types.show(other)),
                    )
                }
            };
            fields.push((off, w));
            off += w;
        }
        if off % 8 != 0 {
            return self.err(
                span,
                format!("header {} is {off} bits, not a whole number of bytes", c.name),
            );
        }
        let bytes = off / 8;
        if let Some(v) = &mut varbit {
            v.len_slot = self.prog.slot();
        }
        let inst = ir::HeaderInst {
            name: name.to_string(),
            ty,
            byte_off: self.prog.header_bytes,
            bytes,
            fields,
            varbit,
        };
        self.prog.header_bytes += bytes;
        self.prog.headers.push(inst);
        Ok(self.prog.headers.len() as u32 - 1)
    }

    /// Storage of field `name` in a struct, header or union storage.
    pub fn member(&self, base: &Storage, name: &Ident) -> DResult<Storage> {
        let missing = |ty: usize| {
            Diagnostic::new(
                name.span,
                format!("{} has no field `{}`", self.types.composites[ty].name, name.name),
            )
        };
        match base {
            Storage::Struct { ty, fields } | Storage::Union { ty, members: fields } => {
                let (i, _) =
                    self.types.composites[*ty].field(&name.name).ok_or_else(|| missing(*ty))?;
                Ok(fields[i].clone())
            }
            Storage::Header { hdr, ty } => {
                let (i, f) =
                    self.types.composites[*ty].field(&name.name).ok_or_else(|| missing(*ty))?;
                let (bit_off, _) = self.field_layout(*ty, i);
                Ok(self.header_bits(hdr, &f.ty, bit_off))
            }
            _ => self.err(name.span, format!("`{}`: not a struct or header", name.name)),
        }
    }

    pub fn field_layout(&self, ty: usize, field: usize) -> (u32, u32) {
        let mut off = 0;
        for (i, f) in self.types.composites[ty].fields.iter().enumerate() {
            let w = self.types.bits(&f.ty).unwrap_or(0);
            if i == field {
                return (off, w);
            }
            off += w;
        }
        (off, 0)
    }

    /// How many struct, header, union and stack levels a value of `ty` has.
    fn type_depth(&self, ty: &crate::types::Ty) -> usize {
        use crate::types::Ty;
        match ty {
            Ty::Struct(i) | Ty::Union(i) | Ty::Header(i) => {
                self.composite_depth.get(*i).copied().unwrap_or(1)
            }
            Ty::Stack(elem, _) => 1 + self.type_depth(elem),
            _ => 0,
        }
    }

    // ---- declarations -------------------------------------------------------------------------

    fn declare_types(&mut self, program: &'a ast::Program) -> DResult<()> {
        for d in &program.decls {
            self.declare(d)?;
        }
        Ok(())
    }

    fn declare(&mut self, d: &'a Decl) -> DResult<()> {
        match &d.kind {
            DeclKind::Const { ty, name, value } => {
                let ty = self.resolve(ty)?;
                let v = self.const_eval().eval(value)?;
                let v = self.convert_const(v, &ty, value.span)?;
                self.consts.insert(name.name.clone(), v);
            }
            DeclKind::Typedef { ty, name } | DeclKind::NewType { ty, name } => {
                let ty = self.resolve(ty)?;
                self.types.names.insert(name.name.clone(), ty);
            }
            DeclKind::Header { name, type_params, fields }
            | DeclKind::HeaderUnion { name, type_params, fields }
            | DeclKind::Struct { name, type_params, fields } => {
                if !type_params.is_empty() {
                    // Declared per set of type arguments where used (`instantiate_generics`).
                    self.generic_types.insert(name.name.clone(), d);
                    return Ok(());
                }
                self.declare_composite(d, &name.name, fields)?;
            }
            DeclKind::Enum { name, underlying, members } => {
                let repr = underlying.as_ref().map(|t| self.resolve(t)).transpose()?;
                let mut vals = Vec::new();
                for (i, (m, v)) in members.iter().enumerate() {
                    let value = match (v, &repr) {
                        (Some(e), Some(r)) => {
                            let c = self.const_eval().eval(e)?;
                            match self.convert_const(c, r, e.span)? {
                                ConstValue::Int(v, _) => v,
                                _ => return self.err(e.span, "enum values must be integers"),
                            }
                        }
                        _ => i as u128,
                    };
                    vals.push((m.name.clone(), value));
                }
                let index = self.types.enums.len();
                self.types.enums.push(EnumDef { name: name.name.clone(), repr, members: vals });
                self.types.names.insert(name.name.clone(), Ty::Enum(index));
            }
            DeclKind::Error { members } => {
                for m in members {
                    if !self.types.errors.contains(&m.name) {
                        self.types.errors.push(m.name.clone());
                    }
                }
            }
            DeclKind::MatchKind { members } => {
                self.types.match_kinds.extend(members.iter().map(|m| m.name.clone()));
            }
            DeclKind::Extern { name, .. } => {
                let index = self.types.externs.len();
                self.types.externs.push(name.name.clone());
                self.types.names.insert(name.name.clone(), Ty::Extern(index, Vec::new()));
                self.globals.insert(name.name.clone(), d);
            }
            DeclKind::ExternFunction(m) => {
                self.extern_fns.entry(m.name.name.clone()).or_default().push(m);
            }
            DeclKind::Action { name, .. }
            | DeclKind::Function { name, .. }
            | DeclKind::Parser { name, .. }
            | DeclKind::Control { name, .. }
            | DeclKind::ParserType { name, .. }
            | DeclKind::ControlType { name, .. }
            | DeclKind::PackageType { name, .. }
            | DeclKind::Instantiation { name, .. } => {
                if let Some(prev) = self.globals.get(&name.name) {
                    if !matches!(
                        prev.kind,
                        DeclKind::ParserType { .. } | DeclKind::ControlType { .. }
                    ) {
                        return self.err(name.span, format!("`{}` is declared twice", name.name));
                    }
                }
                self.globals.insert(name.name.clone(), d);
            }
            DeclKind::Variable { name, .. } => {
                return self.err(name.span, "variables cannot be declared at the top level")
            }
            DeclKind::Table { name, .. } | DeclKind::ValueSet { name, .. } => {
                return self
                    .err(name.span, "tables and value sets belong inside a control or parser")
            }
        }
        Ok(())
    }

    /// Give a constant the declared type (an unsized literal takes the width).
    pub fn convert_const(&self, v: ConstValue, ty: &Ty, span: Span) -> DResult<ConstValue> {
        Ok(match (v, ty) {
            (ConstValue::Int(x, Ty::InfInt), Ty::Bit(w) | Ty::Int(w)) => {
                ConstValue::Int(x & crate::types::mask(*w), ty.clone())
            }
            (ConstValue::Int(x, from), to) if from == *to => ConstValue::Int(x, from),
            (v @ ConstValue::Bool(_), Ty::Bool) => v,
            (v @ ConstValue::Error(_), Ty::Error) => v,
            (v @ ConstValue::Str(_), Ty::String) => v,
            (ConstValue::Enum(e, x), Ty::Enum(t)) if e == *t => ConstValue::Enum(e, x),
            (ConstValue::Int(x, Ty::InfInt), Ty::Enum(e))
                if self.types.enums[*e].repr.is_some() =>
            {
                ConstValue::Enum(*e, x)
            }
            (v, ty) => {
                return self
                    .err(span, format!("constant {v:?} does not have type {}", self.show(ty)));
            }
        })
    }
}

/// Check and lower a parsed program. The program must instantiate `V1Switch` as `main`.
pub fn lower(program: &ast::Program) -> DResult<ir::Program> {
    lower_with(program, &Limits::default())
}

/// [`lower`] under `limits` (see [`crate::budget`]).
pub fn lower_with(program: &ast::Program, limits: &Limits) -> DResult<ir::Program> {
    let mut l = Lowerer::new(limits);
    l.number_decls(&program.decls);
    l.declare_types(program)?;
    l.global_instances(program)?;
    l.v1switch()
}

impl<'a> Lowerer<'a> {
    /// Extern instances declared at the top level (`register<bit<8>>(256) r;`): one instance
    /// each, visible in every block, action and function.
    fn global_instances(&mut self, program: &'a ast::Program) -> DResult<()> {
        self.push_scope();
        let r = (|| {
            for d in &program.decls {
                let DeclKind::Instantiation { ty, args, name } = &d.kind else { continue };
                let ast::TypeKind::Named { name: tn, .. } = &ty.kind else { continue };
                if matches!(self.global(&tn.name).map(|g| &g.kind), Some(DeclKind::Extern { .. })) {
                    self.instantiate(d, ty, args, name)?;
                }
            }
            Ok(())
        })();
        self.global_bindings = self.scopes.pop().unwrap_or_default();
        r
    }

    fn v1switch(&mut self) -> DResult<ir::Program> {
        let Some(main) = self.global("main") else {
            return self.err(Span::default(), "the program has no `main` package instance");
        };
        let DeclKind::Instantiation { ty, args, .. } = &main.kind else {
            return self.err(main.span, "`main` must be a package instance");
        };
        let ast::TypeKind::Named { name: pkg, .. } = &ty.kind else {
            return self.err(ty.span, "`main` must instantiate V1Switch");
        };
        if pkg.name != "V1Switch" {
            return self.err(
                pkg.span,
                format!(
                    "architecture package `{}` is not supported; hotplane runs V1Switch (v1model)",
                    pkg.name
                ),
            );
        }
        if args.len() != 6 {
            return self.err(main.span, format!("V1Switch takes 6 blocks, {} given", args.len()));
        }
        let mut blocks = Vec::new();
        let mut ctors = Vec::new();
        for a in args {
            let ast::ExprKind::Call { callee, args: ctor_args, .. } = &a.value.kind else {
                return self.err(
                    a.value.span,
                    "expected a parser or control instantiation like `MyIngress()`",
                );
            };
            let ast::ExprKind::Name(n) = &callee.kind else {
                return self.err(callee.span, "expected the name of a parser or control");
            };
            let decl = self.global(&n.name).ok_or_else(|| {
                Diagnostic::new(n.span, format!("no parser or control named `{}`", n.name))
            })?;
            let ctor = self.ctor_arguments(decl, ctor_args, a.value.span)?;
            blocks.push(decl);
            ctors.push(ctor);
        }
        let DeclKind::Parser { params, .. } = &blocks[0].kind else {
            return self.err(blocks[0].span, "the first V1Switch argument must be a parser");
        };
        if params.len() != 4 {
            return self.err(
                blocks[0].span,
                "the v1model parser takes (packet_in, out H, inout M, inout standard_metadata_t)",
            );
        }
        let h_ty = self.resolve(&params[1].ty)?;
        let m_ty = self.resolve(&params[2].ty)?;
        let std_ty = self.types.names.get("standard_metadata_t").cloned().ok_or_else(|| {
            Diagnostic::new(
                blocks[0].span,
                "standard_metadata_t is not declared (include <v1model.p4>)",
            )
        })?;
        // Metadata and header stacks' next indices first: slots 0..reset are zeroed per packet.
        let std = self.alloc(&std_ty, "standard_metadata", main.span)?;
        let meta_start = self.prog.slots;
        let meta = self.alloc(&m_ty, "meta", main.span)?;
        let meta_slots = (meta_start, self.prog.slots);
        let hdr = self.alloc(&h_ty, "hdr", main.span)?;
        let reset_slots = self.prog.slots;
        self.field_lists(&meta)?;
        self.prog.preserved = vec![Vec::new()];
        let mut std_meta = ir::StdMeta::default();
        if let Storage::Struct { ty, fields } = &std {
            for (f, s) in self.types.composites[*ty].fields.iter().zip(fields) {
                if let Storage::Scalar { place: Place::Slot { slot, .. }, .. } = s {
                    std_meta.slots.insert(f.name.clone(), *slot);
                }
            }
        }
        let shared = Shared { hdr, meta, std };
        let (states, start_state) = self.parser_block(blocks[0], &shared, &ctors[0])?;
        for s in &states {
            self.check_nesting(&s.body, blocks[0].span)?;
        }
        let verify_checksum = self.control_block(blocks[1], &shared, 2, &ctors[1])?;
        self.check_nesting(&verify_checksum, blocks[1].span)?;
        let ingress = self.control_block(blocks[2], &shared, 3, &ctors[2])?;
        self.check_nesting(&ingress, blocks[2].span)?;
        let egress = self.control_block(blocks[3], &shared, 3, &ctors[3])?;
        self.check_nesting(&egress, blocks[3].span)?;
        let compute_checksum = self.control_block(blocks[4], &shared, 2, &ctors[4])?;
        self.check_nesting(&compute_checksum, blocks[4].span)?;
        let deparser = self.deparser_block(blocks[5], &shared, &ctors[5])?;
        self.check_nesting(&deparser, blocks[5].span)?;
        let mut prog = std::mem::take(&mut self.prog);
        for t in &mut prog.tables {
            let Some(name) = &t.direct_meter else { continue };
            let meter = prog.instances.iter().position(|i| &i.name == name);
            t.meter_dst = meter.and_then(|i| self.meter_reads.get(&(i as u32)).cloned());
        }
        Ok(ir::Program {
            headers: prog.headers,
            header_bytes: prog.header_bytes,
            slots: prog.slots,
            reset_slots,
            std_meta,
            states,
            start_state,
            verify_checksum,
            ingress,
            egress,
            compute_checksum,
            deparser,
            actions: prog.actions,
            tables: prog.tables,
            instances: prog.instances,
            errors: self.types.errors.clone(),
            types: self.types.clone(),
            meta_ty: m_ty,
            preserved: prog.preserved,
            meta_slots,
        })
    }

    /// Collect the `@field_list(N, ...)` annotations on the user metadata's fields (at any
    /// depth of nested structs): each index names the slots a preserving resubmit,
    /// recirculate or clone keeps.
    fn field_lists(&mut self, storage: &Storage) -> DResult<()> {
        let Storage::Struct { ty: c, fields } = storage else {
            return Ok(());
        };
        let defs = self.types.composites[*c].fields.clone();
        for (def, field) in defs.iter().zip(fields) {
            for a in def.annotations.iter().filter(|a| a.name.name == "field_list") {
                let exprs = crate::parser::annotation_exprs(&a.body)?;
                if exprs.is_empty() {
                    return self.err(a.span, "@field_list takes one or more list indices");
                }
                let mut slots = Vec::new();
                scalar_slots(field, &mut slots);
                if slots.is_empty() {
                    return self.err(
                        a.span,
                        "@field_list is supported on metadata fields and structs of them \
                         (not on headers)",
                    );
                }
                for e in &exprs {
                    let index = self.const_eval().eval_u32(e, "a field list index")?;
                    if index > u8::MAX as u32 {
                        return self.err(e.span, "field list indices are bit<8> (0 to 255)");
                    }
                    self.prog.field_lists.entry(index).or_default().extend(&slots);
                }
            }
            self.field_lists(field)?;
        }
        Ok(())
    }

    /// The index in [`ir::Program::preserved`] of this set of slots (added if new).
    pub(crate) fn preserve(&mut self, mut slots: Vec<SlotId>, span: Span) -> DResult<u16> {
        slots.sort_unstable();
        slots.dedup();
        if let Some(i) = self.prog.preserved.iter().position(|p| *p == slots) {
            return Ok(i as u16);
        }
        if self.prog.preserved.len() > u16::MAX as usize {
            return self.err(span, "more than 65536 distinct preserved field lists");
        }
        self.prog.preserved.push(slots);
        Ok((self.prog.preserved.len() - 1) as u16)
    }
}

/// Every scalar slot of a storage (struct members at any depth; headers have none).
fn scalar_slots(s: &Storage, out: &mut Vec<SlotId>) {
    match s {
        Storage::Scalar { place: Place::Slot { slot, .. }, .. } => out.push(*slot),
        Storage::Struct { fields, .. } => fields.iter().for_each(|f| scalar_slots(f, out)),
        _ => {}
    }
}

/// The storage the six v1model blocks share.
pub(crate) struct Shared {
    pub hdr: Storage,
    pub meta: Storage,
    pub std: Storage,
}

/// What is refused of varbit fields for now.
pub(crate) const VARBIT_ALONE: &str = "a varbit field is extracted, emitted, copied with its \
     header, compared with another and listed in checksums and hashes; assigning it alone or \
     using it in arithmetic is not supported yet";

impl crate::types::LocalNames for Lowerer<'_> {
    fn local_const(&self, name: &str) -> Option<Option<ConstValue>> {
        self.scopes.iter().rev().find_map(|s| s.get(name)).map(|b| match b {
            Binding::Const(c) => Some(c.clone()),
            _ => None,
        })
    }
}
