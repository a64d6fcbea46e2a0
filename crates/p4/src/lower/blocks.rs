//! The v1model blocks: the parser (states and select), controls (locals, then the apply
//! block; sub-controls inlined), and the deparser.

use super::{Binding, BlockKind, Lowerer, Shared, Storage};
use crate::ast::{self, DeclKind, ExprKind, Transition};
use crate::budget::Budget::ParserStates;
use crate::diag::{DResult, Span};
use crate::ir::{self, KeyMatch, Stmt, Target};
use crate::types::mask;

/// Most members a value set may declare: a lookup scans them, so they stay few.
const MAX_VALUE_SET: u32 = 4096;

/// One `select` case: keysets, or a value set.
enum Case {
    Keys(Vec<KeyMatch>, Target),
    Set(u32, Target),
}

/// The transition of a `select` with value set cases: tried in order, as a chain of states.
/// Each run of keyset cases is a select whose miss goes on to the next link; each value set
/// case a [`ir::Transition::ValueSet`]. The first link is the returned transition, the rest
/// are new states (named after `state`) appended to `out`.
fn split_value_set_cases(
    keys: Vec<ir::ListItem>,
    cases: Vec<Case>,
    state: &str,
    out: &mut Vec<ir::State>,
) -> ir::Transition {
    if cases.iter().all(|c| matches!(c, Case::Keys(..))) {
        let cases = cases
            .into_iter()
            .filter_map(|c| match c {
                Case::Keys(m, t) => Some((m, t)),
                Case::Set(..) => None,
            })
            .collect();
        return ir::Transition::Select { keys, cases };
    }
    // Links: runs of keyset cases, and value sets one by one.
    let mut links: Vec<Vec<Case>> = Vec::new();
    for c in cases {
        match (&c, links.last()) {
            (Case::Keys(..), Some(last)) if matches!(last.last(), Some(Case::Keys(..))) => {
                links.last_mut().expect("a link").push(c)
            }
            _ => links.push(vec![c]),
        }
    }
    // State indices of links 1.. (link 0 is `state` itself).
    let first_new = out.len() as u32;
    let n = links.len();
    let mut transitions = Vec::with_capacity(n);
    for (i, link) in links.into_iter().enumerate() {
        let miss = (i + 1 < n).then_some(Target::State(first_new + i as u32));
        let t = match &link[..] {
            [Case::Set(set, hit)] => {
                ir::Transition::ValueSet { keys: keys.clone(), set: *set, hit: *hit, miss }
            }
            _ => {
                let mut cases: Vec<(Vec<KeyMatch>, Target)> = link
                    .into_iter()
                    .filter_map(|c| match c {
                        Case::Keys(m, t) => Some((m, t)),
                        Case::Set(..) => None,
                    })
                    .collect();
                if let Some(miss) = miss {
                    let any = keys.iter().map(|_| KeyMatch::Mask { value: 0, mask: 0 }).collect();
                    cases.push((any, miss));
                }
                ir::Transition::Select { keys: keys.clone(), cases }
            }
        };
        transitions.push(t);
    }
    let mut transitions = transitions.into_iter();
    let first = transitions.next().expect("a link");
    for (i, t) in transitions.enumerate() {
        out.push(ir::State {
            name: format!("{state}.case{}", i + 1),
            body: Vec::new(),
            transition: t,
        });
    }
    first
}

impl<'a> Lowerer<'a> {
    /// Bind a block's parameters, by position, to the shared storage.
    /// The values of `decl`'s constructor parameters for an instantiation with `args`
    /// (evaluated here, in the instantiating scope): compile-time constants of a scalar
    /// type, or the parameter's default.
    pub(crate) fn ctor_arguments(
        &mut self,
        decl: &'a ast::Decl,
        args: &[ast::Arg],
        span: Span,
    ) -> DResult<Vec<Binding<'a>>> {
        let (DeclKind::Control { name, ctor_params, .. }
        | DeclKind::Parser { name, ctor_params, .. }) = &decl.kind
        else {
            return self.err(span, "expected a parser or control");
        };
        if args.len() > ctor_params.len()
            || ctor_params[args.len()..].iter().any(|p| p.default.is_none())
        {
            return self.err(
                span,
                format!(
                    "{} takes {} constructor argument(s), {} given",
                    name.name,
                    ctor_params.len(),
                    args.len()
                ),
            );
        }
        if let Some(named) = args.iter().find_map(|a| a.name.as_ref()) {
            return self.err(
                named.span,
                "constructor arguments are given in order (named ones are not supported yet)",
            );
        }
        let mut out = Vec::with_capacity(ctor_params.len());
        for (i, p) in ctor_params.iter().enumerate() {
            // A default means what it says where the block is declared: at the top level,
            // not in the scope that instantiates it.
            let (value, here) = match (args.get(i), &p.default) {
                (Some(a), _) => (&a.value, true),
                (None, Some(d)) => (d, false),
                (None, None) => unreachable!("checked above"),
            };
            let ty = self.resolve(&p.ty)?;
            use crate::types::Ty;
            if !matches!(ty, Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Enum(_) | Ty::InfInt) {
                return self.err(
                    p.ty.span,
                    format!(
                        "constructor parameter `{}`: only bit<N>, int<N>, int, bool and enum \
                         values are supported (not {})",
                        p.name.name,
                        self.show(&ty)
                    ),
                );
            }
            let v = match here {
                true => self.const_eval().eval(value)?,
                false => crate::types::ConstEval {
                    types: &self.types,
                    consts: &self.consts,
                    locals: None,
                }
                .eval(value)?,
            };
            out.push(Binding::Const(self.convert_const(v, &ty, value.span)?));
        }
        Ok(out)
    }

    fn bind_params(&mut self, params: &'a [ast::Param], bound: &[Binding<'a>]) {
        for (p, b) in params.iter().zip(bound) {
            self.bind(&p.name.name, b.clone());
        }
    }

    pub(crate) fn parser_block(
        &mut self,
        d: &'a ast::Decl,
        sh: &Shared,
        ctor: &[Binding<'a>],
    ) -> DResult<(Vec<ir::State>, u32)> {
        let DeclKind::Parser { params, ctor_params, locals, states, .. } = &d.kind else {
            return self.err(d.span, "expected a parser");
        };
        self.block = BlockKind::Parser;
        self.push_scope();
        let bound = [
            Binding::PacketIn,
            Binding::Var(sh.hdr.clone()),
            Binding::Var(sh.meta.clone()),
            Binding::Var(sh.std.clone()),
        ];
        self.bind_params(params, &bound);
        self.bind_params(ctor_params, ctor);
        let mut out = Vec::new();
        // Value sets are named after the parser, as p4c names them in the P4Info.
        let ast::DeclKind::Parser { name, .. } = &d.kind else { unreachable!() };
        let saved_prefix = std::mem::replace(&mut self.prefix, format!("{}.", name.name));
        let r = (|| -> DResult<u32> {
            let init = self.parser_locals(locals, "")?;
            let start = self.parser_states(d, states, Target::Accept, "", &mut out)?;
            // Parser-local initialisers run before the start state.
            out[start as usize].body.splice(0..0, init);
            self.count(ParserStates, out.len(), "parser states", d.span)?;
            Ok(start)
        })();
        self.pop_scope();
        self.prefix = saved_prefix;
        self.block = BlockKind::Control;
        r.map(|start| (out, start))
    }

    /// A parser's local declarations, bound in the current scope; returns their initialisers.
    /// Parsers instantiated here become sub-parsers (named `prefix` + their name).
    fn parser_locals(&mut self, locals: &'a [ast::Decl], prefix: &str) -> DResult<Vec<Stmt>> {
        let mut init = Vec::new();
        for l in locals {
            match &l.kind {
                DeclKind::Variable { .. } | DeclKind::Const { .. } => {
                    self.local_decl(l, &mut init)?
                }
                DeclKind::ValueSet { ty, size, name } => {
                    self.value_set(l, ty, size, name, prefix)?
                }
                DeclKind::Instantiation { ty, name, args } => {
                    let sub = match &ty.kind {
                        ast::TypeKind::Named { name: tn, .. } => self.global(&tn.name),
                        _ => None,
                    };
                    match sub {
                        Some(decl) if matches!(decl.kind, DeclKind::Parser { .. }) => {
                            let name_q = format!("{prefix}{}", name.name);
                            let ctor = self.ctor_arguments(decl, args, l.span)?;
                            self.bind(&name.name, Binding::SubParser { decl, name: name_q, ctor });
                        }
                        _ => {
                            return self.err(
                                l.span,
                                "only parsers can be instantiated inside a parser (externs \
                                 such as checksums are not supported there yet)",
                            )
                        }
                    }
                }
                _ => return self.err(l.span, "this parser-local declaration is not supported"),
            }
        }
        Ok(init)
    }

    /// Lower `states` (their parser's parameters and locals bound in the current scope) into
    /// `out`, where `accept` leads to `accept` (the end of parsing for the top parser, the
    /// caller's continuation for a sub-parser). Returns the index of the start state.
    fn parser_states(
        &mut self,
        d: &'a ast::Decl,
        states: &'a [ast::ParserState],
        accept: Target,
        prefix: &str,
        out: &mut Vec<ir::State>,
    ) -> DResult<u32> {
        self.count(ParserStates, out.len() + states.len(), "parser states", d.span)?;
        let base = out.len() as u32;
        // By name: looking each transition's target up in the list would be quadratic.
        let mut by_name = std::collections::HashMap::new();
        for (i, s) in states.iter().enumerate() {
            by_name.entry(s.name.name.as_str()).or_insert(base + i as u32);
            out.push(placeholder(format!("{prefix}{}", s.name.name)));
        }
        let index = |name: &ast::Ident, l: &Self| -> DResult<Target> {
            match name.name.as_str() {
                "accept" => Ok(accept),
                "reject" => Ok(Target::Reject),
                n => match by_name.get(n) {
                    Some(&i) => Ok(Target::State(i)),
                    None => l.err(name.span, format!("no parser state named `{n}`")),
                },
            }
        };
        let Some(start) = states.iter().position(|s| s.name.name == "start") else {
            return self.err(d.span, "the parser has no `start` state");
        };
        for (i, s) in states.iter().enumerate() {
            // Statements up to a sub-parser's apply stay in this state, which then goes to the
            // sub-parser; the rest continue in a state its accept leads to.
            let mut slot = base as usize + i;
            let mut body = Vec::new();
            // A state's own declarations are visible in it (and its select) only.
            self.push_scope();
            for st in &s.stmts {
                if let Some((decl, name, ctor, args)) = self.sub_parser_apply(st) {
                    let resume = out.len() as u32;
                    out.push(placeholder(format!("{}.resume", out[slot].name)));
                    let sub_start = self.inline_parser(
                        decl,
                        &name,
                        &ctor,
                        args,
                        st.span,
                        Target::State(resume),
                        &mut body,
                        out,
                    )?;
                    out[slot].body = std::mem::take(&mut body);
                    out[slot].transition = ir::Transition::Goto(sub_start);
                    slot = resume as usize;
                } else {
                    self.stmt(st, &mut body)?;
                }
            }
            let transition = match &s.transition {
                None => ir::Transition::Reject,
                Some(Transition::Goto(n)) => goto(index(n, self)?),
                Some(Transition::Select { exprs, cases, span }) => {
                    self.count_select_cases(cases.len(), *span)?;
                    let mut keys = Vec::new();
                    for e in exprs {
                        keys.extend(self.field_list(e, &mut body)?);
                    }
                    let mut ir_cases = Vec::new();
                    for c in cases {
                        let target = index(&c.next, self)?;
                        let case = match self.value_set_case(&keys, &c.keyset)? {
                            Some(set) => Case::Set(set, target),
                            None => {
                                Case::Keys(self.select_keyset(&keys, &c.keyset, c.span)?, target)
                            }
                        };
                        ir_cases.push(case);
                    }
                    let name = out[slot].name.clone();
                    split_value_set_cases(keys, ir_cases, &name, out)
                }
            };
            self.pop_scope();
            out[slot].body = body;
            out[slot].transition = transition;
        }
        Ok(base + start as u32)
    }

    /// `p.apply(args);` of a sub-parser `p`: its declaration, name and arguments.
    fn sub_parser_apply(
        &self,
        st: &'a ast::Stmt,
    ) -> Option<(&'a ast::Decl, String, Vec<Binding<'a>>, &'a [ast::Arg])> {
        let ast::StmtKind::Call(call) = &st.kind else { return None };
        let ExprKind::Call { callee, args, .. } = &call.kind else { return None };
        let ExprKind::Member(obj, method) = &callee.kind else { return None };
        let ExprKind::Name(n) = &obj.kind else { return None };
        match self.lookup(&n.name) {
            Some(Binding::SubParser { decl, name, ctor }) if method.name == "apply" => {
                Some((decl, name, ctor, args))
            }
            _ => None,
        }
    }

    /// Splice a copy of sub-parser `decl`'s states into `out` for one apply, its accept going
    /// to `resume`; its parameters are the caller's arguments (locations, by reference; `out`
    /// ones start invalid or zero), its locals fresh. The statements that set this up go to
    /// `pre`. Returns its start state.
    #[allow(clippy::too_many_arguments)]
    fn inline_parser(
        &mut self,
        decl: &'a ast::Decl,
        name: &str,
        ctor: &[Binding<'a>],
        args: &'a [ast::Arg],
        span: Span,
        resume: Target,
        pre: &mut Vec<Stmt>,
        out: &mut Vec<ir::State>,
    ) -> DResult<u32> {
        let DeclKind::Parser { params, ctor_params, locals, states, .. } = &decl.kind else {
            return self.err(span, "not a parser");
        };
        if args.len() != params.len() {
            return self.err(
                span,
                format!("{name}.apply takes {} arguments, {} given", params.len(), args.len()),
            );
        }
        let bound = self.block_arguments(params, args, pre)?;
        let saved = std::mem::replace(&mut self.scopes, vec![std::collections::HashMap::new()]);
        let saved_calls = match self.enter_call(span) {
            Ok(s) => s,
            Err(e) => {
                self.scopes = saved;
                return Err(e);
            }
        };
        self.bind_params(params, &bound);
        self.bind_params(ctor_params, ctor);
        let prefix = format!("{name}.");
        let r = (|| -> DResult<u32> {
            pre.extend(self.parser_locals(locals, &prefix)?);
            self.parser_states(decl, states, resume, &prefix, out)
        })();
        self.leave_call(saved_calls);
        self.scopes = saved;
        r
    }

    /// `value_set<T>(size) name;` in a parser: an instance the control plane fills.
    fn value_set(
        &mut self,
        d: &'a ast::Decl,
        ty: &ast::Type,
        size: &ast::Expr,
        name: &ast::Ident,
        prefix: &str,
    ) -> DResult<()> {
        let resolved = self.resolve(ty)?;
        let field = |l: &Self, name: &str, t: &crate::types::Ty, ann: &[ast::Annotation]| {
            let Some(width) = t.scalar_width(&l.types) else {
                return l.err(ty.span, "value set members are bit strings or structs of them");
            };
            let ternary = match ann.iter().find(|a| a.name.name == "match") {
                None => false,
                Some(a) => match super::table::annotation_text(&a.body).as_str() {
                    "exact" => false,
                    "ternary" => true,
                    other => {
                        return l.err(
                            a.span,
                            format!("value set fields match exact or ternary, not `{other}`"),
                        )
                    }
                },
            };
            Ok(ir::ValueSetField { name: name.to_string(), width, ternary })
        };
        let fields = match &resolved {
            crate::types::Ty::Struct(c) => {
                let defs = self.types.composites[*c].fields.clone();
                defs.iter()
                    .map(|f| field(self, &f.name, &f.ty, &f.annotations))
                    .collect::<DResult<Vec<_>>>()?
            }
            t => vec![field(self, "", t, &[])?],
        };
        let width: u32 = fields.iter().map(|f| f.width).sum();
        if width > 128 {
            return self.err(ty.span, format!("value sets of {width} bits: at most 128"));
        }
        let size = self.const_eval().eval_u32(size, "a value set's size")?;
        if size == 0 || size > MAX_VALUE_SET {
            return self.err(
                d.span,
                format!("a value set holds 1 to {MAX_VALUE_SET} members ({size} declared)"),
            );
        }
        let qualified = self.control_plane_name(&format!("{prefix}{}", name.name), &d.annotations);
        // A sub-parser applied twice has one value set, as p4c gives it one instance.
        if let Some(i) = self.prog.instances.iter().position(|x| x.name == qualified) {
            self.bind(&name.name, Binding::Instance(i as u32));
            return Ok(());
        }
        // A member is a value and a mask of 16 bytes each.
        self.declare_state(&qualified, size as u64, 32, 0, d.span)?;
        self.prog.instances.push(ir::Instance {
            name: qualified,
            kind: ir::InstanceKind::ValueSet { size, fields },
            annotations: d.annotations.clone(),
            order: self.order_of(d),
        });
        let i = self.prog.instances.len() as u32 - 1;
        self.bind(&name.name, Binding::Instance(i));
        Ok(())
    }

    /// The value set a case's keyset names, checked against the select's keys.
    fn value_set_case(&self, keys: &[ir::ListItem], keyset: &[ast::Expr]) -> DResult<Option<u32>> {
        let [x] = keyset else { return Ok(None) };
        let ExprKind::Name(n) = &x.kind else { return Ok(None) };
        let Some(Binding::Instance(i)) = self.lookup(&n.name) else { return Ok(None) };
        let Some(ir::InstanceKind::ValueSet { fields, .. }) =
            self.prog.instances.get(i as usize).map(|inst| &inst.kind)
        else {
            return self.err(x.span, format!("`{}` is not a value set", n.name));
        };
        // A struct's fields match the keys one by one; a bit<N> set matches one key.
        let set_widths: Vec<u32> = fields.iter().map(|f| f.width).collect();
        let key_widths: Vec<u32> = keys.iter().map(|k| k.width).collect();
        if set_widths != key_widths {
            return self.err(
                x.span,
                format!(
                    "value set `{}` holds values of widths {set_widths:?}; the select's keys \
                     are {key_widths:?}",
                    n.name
                ),
            );
        }
        Ok(Some(i))
    }

    fn select_keyset(
        &self,
        keys: &[ir::ListItem],
        keyset: &[ast::Expr],
        span: Span,
    ) -> DResult<Vec<KeyMatch>> {
        if keyset.len() == 1 && matches!(keyset[0].kind, ExprKind::Default | ExprKind::DontCare) {
            return Ok(keys.iter().map(|_| KeyMatch::Mask { value: 0, mask: 0 }).collect());
        }
        if keyset.len() != keys.len() {
            return self.err(
                span,
                format!("the select has {} keys, this case {}", keys.len(), keyset.len()),
            );
        }
        keys.iter()
            .zip(keyset)
            .map(|(k, x)| {
                let full = mask(k.width);
                let value = |e: &ast::Expr| self.key_value(e, k.width);
                Ok(match &x.kind {
                    ExprKind::Default | ExprKind::DontCare => KeyMatch::Mask { value: 0, mask: 0 },
                    ExprKind::Mask(v, m) => {
                        let m = value(m)?;
                        KeyMatch::Mask { value: value(v)? & m, mask: m }
                    }
                    ExprKind::Range(lo, hi) => KeyMatch::Range { lo: value(lo)?, hi: value(hi)? },
                    _ => KeyMatch::Mask { value: value(x)?, mask: full },
                })
            })
            .collect()
    }

    /// A control bound to the shared storage: `nparams` is 2 (checksum controls) or 3.
    pub(crate) fn control_block(
        &mut self,
        d: &'a ast::Decl,
        sh: &Shared,
        nparams: usize,
        ctor: &[Binding<'a>],
    ) -> DResult<Vec<Stmt>> {
        let DeclKind::Control { name, params, .. } = &d.kind else {
            return self.err(d.span, "expected a control");
        };
        if params.len() != nparams {
            return self.err(
                name.span,
                format!(
                    "control {} must take {nparams} parameters for its V1Switch position",
                    name.name
                ),
            );
        }
        let bound = [
            Binding::Var(sh.hdr.clone()),
            Binding::Var(sh.meta.clone()),
            Binding::Var(sh.std.clone()),
        ];
        self.control_body(d, &name.name, &bound, ctor)
    }

    fn control_body(
        &mut self,
        d: &'a ast::Decl,
        qualified: &str,
        bound: &[Binding<'a>],
        ctor: &[Binding<'a>],
    ) -> DResult<Vec<Stmt>> {
        let DeclKind::Control { params, ctor_params, locals, body, .. } = &d.kind else {
            return self.err(d.span, "expected a control");
        };
        let saved_prefix = std::mem::replace(&mut self.prefix, format!("{qualified}."));
        self.push_scope();
        self.bind_params(params, bound);
        self.bind_params(ctor_params, ctor);
        let mut out = Vec::new();
        let r = (|| -> DResult<()> {
            for l in locals {
                self.control_local(l, &mut out)?;
            }
            let stmts = self.block_stmts(&body.stmts)?;
            out.push(Stmt::Scope(stmts));
            Ok(())
        })();
        self.pop_scope();
        self.prefix = saved_prefix;
        r.map(|_| out)
    }

    /// `c.apply(args)` of a control instantiated in a control: its body, inlined, with its
    /// parameters bound to the arguments' storage.
    pub(crate) fn inline_control(
        &mut self,
        decl: &'a ast::Decl,
        name: &str,
        ctor: &[Binding<'a>],
        args: &[ast::Arg],
        span: Span,
        pre: &mut Vec<Stmt>,
    ) -> DResult<()> {
        let DeclKind::Control { params, .. } = &decl.kind else {
            return self.err(span, "not a control");
        };
        if args.len() != params.len() {
            return self.err(
                span,
                format!("{name}.apply takes {} arguments, {} given", params.len(), args.len()),
            );
        }
        let bound = self.block_arguments(params, args, pre)?;
        // The sub-control's locals are declared on first application; applying it twice would
        // declare its tables twice, which P4 forbids anyway.
        if self.prog.tables.iter().any(|t| t.name.starts_with(&format!("{name}."))) {
            return self.err(span, format!("{name} is applied more than once"));
        }
        let saved = std::mem::replace(&mut self.scopes, vec![std::collections::HashMap::new()]);
        let saved_calls = match self.enter_call(span) {
            Ok(s) => s,
            Err(e) => {
                self.scopes = saved;
                return Err(e);
            }
        };
        let loops = std::mem::take(&mut self.loop_depth);
        let work = std::mem::replace(&mut self.loop_work, 1);
        let body = self.control_body(decl, name, &bound, ctor);
        self.loop_depth = loops;
        self.loop_work = work;
        let calls = self.leave_call(saved_calls);
        self.scopes = saved;
        let body = body?;
        self.check_nesting(&body, span)?;
        self.inlined(calls, crate::ir::statements(&body), span)?;
        pre.push(Stmt::Scope(body));
        Ok(())
    }

    /// The bindings of a sub-parser's or sub-control's parameters for one apply. Locations are
    /// passed by reference, which is copy-in/copy-out (spec 6.8) as long as nothing aliases:
    /// they are fixed when evaluated (a run-time index read then), `out` ones start invalid or
    /// zero, and `in` ones are copied (a scalar always; a header or struct when another
    /// argument is the same location), so a write through an `inout` alias cannot reach them.
    fn block_arguments(
        &mut self,
        params: &'a [ast::Param],
        args: &[ast::Arg],
        pre: &mut Vec<Stmt>,
    ) -> DResult<Vec<Binding<'a>>> {
        let mut bound: Vec<Option<Binding<'a>>> = Vec::new();
        let mut values = Vec::new();
        for (p, a) in params.iter().zip(args) {
            let ty = self.resolve(&p.ty)?;
            if let crate::types::Ty::Extern(..) = ty {
                // packet_in / packet_out (or an extern instance) passes as it is named.
                let b = match &a.value.kind {
                    ExprKind::Name(n) => self.lookup(&n.name),
                    _ => None,
                };
                bound.push(Some(b.unwrap_or(Binding::PacketIn)));
                values.push(None);
                continue;
            }
            let v = match p.direction {
                ast::Direction::Out | ast::Direction::InOut => self.fixed_lvalue(&a.value, pre)?,
                _ => self.expr(&a.value, pre)?,
            };
            bound.push(None);
            values.push(Some((v, ty)));
        }
        let seen: Vec<String> = values.iter().flatten().map(|(v, _)| format!("{v:?}")).collect();
        for (k, (p, a)) in params.iter().zip(args).enumerate() {
            let Some((v, ty)) = values[k].take() else { continue };
            let aliased = seen.iter().filter(|s| **s == format!("{v:?}")).count() > 1;
            let location = match &v {
                super::expr::Val::Loc(s) => Some(s.clone()),
                super::expr::Val::Scalar { e: ir::Expr::Read(place), ty } => {
                    Some(Storage::Scalar { place: place.clone(), ty: ty.clone() })
                }
                _ => None,
            };
            let input = matches!(p.direction, ast::Direction::In | ast::Direction::None);
            let by_value = input
                && (location.is_none()
                    || aliased
                    || matches!(location, Some(Storage::Scalar { .. })));
            let storage = match location {
                Some(s) if !by_value => s,
                _ if input => {
                    let s = self.alloc(&ty, &p.name.name, p.name.span)?;
                    pre.extend(self.assign(
                        &super::stmt::storage_val(s.clone()),
                        v,
                        a.value.span,
                    )?);
                    s
                }
                _ => {
                    return self.err(
                        a.value.span,
                        "out and inout arguments must be variables, fields, headers or structs",
                    )
                }
            };
            if p.direction == ast::Direction::Out {
                pre.extend(self.zero(&storage));
            }
            bound[k] = Some(Binding::Var(storage));
        }
        Ok(bound.into_iter().flatten().collect())
    }

    pub(crate) fn deparser_block(
        &mut self,
        d: &'a ast::Decl,
        sh: &Shared,
        ctor: &[Binding<'a>],
    ) -> DResult<Vec<Stmt>> {
        let DeclKind::Control { params, ctor_params, body, locals, .. } = &d.kind else {
            return self.err(d.span, "the last V1Switch argument must be a deparser control");
        };
        if params.len() != 2 {
            return self.err(d.span, "the deparser takes (packet_out, in H)");
        }
        self.block = BlockKind::Deparser;
        self.push_scope();
        self.bind_params(params, &[Binding::PacketOut, Binding::Var(sh.hdr.clone())]);
        self.bind_params(ctor_params, ctor);
        let mut out = Vec::new();
        let r = (|| -> DResult<()> {
            for l in locals {
                self.local_decl(l, &mut out)?;
            }
            out.extend(self.block_stmts(&body.stmts)?);
            Ok(())
        })();
        self.pop_scope();
        self.block = BlockKind::Control;
        r.map(|_| out)
    }
}

/// A state whose body and transition are filled in later.
fn placeholder(name: String) -> ir::State {
    ir::State { name, body: Vec::new(), transition: ir::Transition::Reject }
}

fn goto(t: Target) -> ir::Transition {
    match t {
        Target::Accept => ir::Transition::Accept,
        Target::Reject => ir::Transition::Reject,
        Target::State(i) => ir::Transition::Goto(i),
    }
}
