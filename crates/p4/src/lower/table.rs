//! Tables, extern instances, `switch`, and table-apply results.

use super::expr::Val;
use super::{Binding, Lowerer};
use crate::ast::{self, DeclKind, ExprKind, PropertyValue};
use crate::diag::{DResult, Diagnostic, Span};
use crate::ir::{self, Expr, InstanceKind, KeyMatch, MatchKind, Place, Stmt};
use crate::types::{mask, ConstValue, Ty};

impl<'a> Lowerer<'a> {
    /// `t.apply().hit`, `.miss`, `.action_run` in an expression.
    /// Spec (actions): no table, control or parser is applied within an action.
    pub(crate) fn check_apply_allowed(&self, span: Span) -> DResult<()> {
        if self.in_action {
            return self.err(span, "tables and controls cannot be applied inside an action");
        }
        Ok(())
    }

    pub(crate) fn apply_result(
        &mut self,
        t: u32,
        m: &ast::Ident,
        pre: &mut Vec<Stmt>,
    ) -> DResult<Val> {
        self.check_apply_allowed(m.span)?;
        let slot = self.prog.slot();
        match m.name.as_str() {
            "hit" | "miss" => {
                pre.push(Stmt::Apply { table: t, hit_slot: Some(slot), action_slot: None });
                let read = Expr::Read(Place::Slot { slot, width: 1 });
                let e = if m.name == "hit" {
                    read
                } else {
                    Expr::Unary { op: ir::UnOp::Not, e: Box::new(read), width: 1 }
                };
                Ok(Val::Scalar { e, ty: Ty::Bool })
            }
            "action_run" => {
                pre.push(Stmt::Apply { table: t, hit_slot: None, action_slot: Some(slot) });
                Ok(Val::Scalar { e: Expr::Read(Place::Slot { slot, width: 32 }), ty: Ty::Bit(32) })
            }
            other => self.err(m.span, format!("a table apply result has no member `{other}`")),
        }
    }

    pub(crate) fn switch(
        &mut self,
        on: &ast::Expr,
        cases: &'a [ast::SwitchCase],
        out: &mut Vec<Stmt>,
    ) -> DResult<()> {
        // `switch (t.apply().action_run)`: labels are action names.
        let mut table = None;
        if let ExprKind::Member(call, m) = &on.kind {
            if m.name == "action_run" {
                if let ExprKind::Call { callee, .. } = &call.kind {
                    if let ExprKind::Member(t, apply) = &callee.kind {
                        if let (ExprKind::Name(tn), "apply") = (&t.kind, apply.name.as_str()) {
                            if let Some(Binding::Table(i)) = self.lookup(&tn.name) {
                                self.check_apply_allowed(on.span)?;
                                table = Some(i);
                            }
                        }
                    }
                }
            }
        }
        let value = self.expr(on, out)?;
        let Val::Scalar { e: on_expr, ty } = value else {
            return self.err(on.span, "switch needs a single value");
        };
        let defaults: Vec<&ast::Expr> = cases
            .iter()
            .flat_map(|c| &c.labels)
            .filter(|l| matches!(l.kind, ExprKind::Default))
            .collect();
        if let [_, second, ..] = defaults[..] {
            return self.err(second.span, "the switch has more than one `default` label");
        }
        let mut ir_cases = Vec::new();
        let mut default = Vec::new();
        for case in cases {
            let body = match &case.body {
                Some(b) => self.block_stmts(&b.stmts)?,
                None => Vec::new(),
            };
            let mut labels = Vec::new();
            for l in &case.labels {
                if matches!(l.kind, ExprKind::Default) {
                    continue;
                }
                let v = match table {
                    Some(t) => {
                        let ExprKind::Name(n) = &l.kind else {
                            return self.err(l.span, "expected an action name");
                        };
                        let tbl = &self.prog.tables[t as usize];
                        let found = tbl.actions.iter().find(|&&a| {
                            let full = &self.prog.actions[a as usize].name;
                            full == &n.name || full.ends_with(&format!(".{}", n.name))
                        });
                        match found {
                            Some(a) => *a as u128,
                            None => {
                                return self.err(
                                    l.span,
                                    format!("table {} has no action `{}`", tbl.name, n.name),
                                )
                            }
                        }
                    }
                    None => match self.const_eval().eval(l) {
                        Ok(ConstValue::Int(v, _)) | Ok(ConstValue::Enum(_, v)) => {
                            v & mask(ty.scalar_width(&self.types).unwrap_or(128))
                        }
                        Ok(ConstValue::Error(e)) => e as u128,
                        _ => return self.err(l.span, "switch labels must be constants"),
                    },
                };
                labels.push(v);
            }
            if case.labels.iter().any(|l| matches!(l.kind, ExprKind::Default)) {
                default = body;
            } else {
                ir_cases.push((labels, body));
            }
        }
        out.push(Stmt::Switch { on: on_expr, cases: ir_cases, default });
        Ok(())
    }

    /// Declarations inside a control: actions, tables, instances, variables, constants.
    pub(crate) fn control_local(&mut self, d: &'a ast::Decl, init: &mut Vec<Stmt>) -> DResult<()> {
        match &d.kind {
            DeclKind::Action { name, .. } => {
                let a = self.lower_action(d)?;
                self.bind(&name.name, Binding::Action(a));
            }
            DeclKind::Table { name, props } => {
                let t = self.lower_table(d, name, props)?;
                self.bind(&name.name, Binding::Table(t));
            }
            DeclKind::Instantiation { ty, args, name } => self.instantiate(d, ty, args, name)?,
            DeclKind::Variable { .. } | DeclKind::Const { .. } => self.local_decl(d, init)?,
            _ => return self.err(d.span, "this declaration is not supported inside a control"),
        }
        Ok(())
    }

    pub(crate) fn instantiate(
        &mut self,
        d: &'a ast::Decl,
        ty: &ast::Type,
        args: &[ast::Arg],
        name: &ast::Ident,
    ) -> DResult<()> {
        let ast::TypeKind::Named { name: tn, args: targs } = &ty.kind else {
            return self.err(ty.span, "expected an extern or control type");
        };
        if let Some(decl) = self.global(&tn.name) {
            if matches!(decl.kind, DeclKind::Control { .. }) {
                let qualified = format!("{}{}", self.prefix, name.name);
                let ctor = self.ctor_arguments(decl, args, d.span)?;
                self.bind(&name.name, Binding::SubControl { decl, name: qualified, ctor });
                return Ok(());
            }
        }
        let konst = |l: &Self, k: usize| -> DResult<u32> {
            match args.get(k) {
                Some(a) => l.const_eval().eval_u32(&a.value, "a size"),
                None => l.err(d.span, format!("{} needs more constructor arguments", tn.name)),
            }
        };
        let enum_member = |l: &Self, k: usize| -> DResult<String> {
            let Some(a) = args.get(k) else { return l.err(d.span, "missing argument") };
            if let ExprKind::Member(_, m) = &a.value.kind {
                return Ok(m.name.clone());
            }
            l.err(a.value.span, "expected an enum member such as CounterType.packets")
        };
        let kind = match tn.name.as_str() {
            "register" => {
                let [t] = targs.as_slice() else {
                    return self.err(ty.span, "register needs its value type: register<bit<32>>");
                };
                let width = match self.resolve(t)? {
                    Ty::Bit(w) | Ty::Int(w) if w <= 64 => w,
                    other => {
                        return self.err(
                            t.span,
                            format!(
                                "registers of {} are not supported (bit<N>, N <= 64)",
                                self.show(&other)
                            ),
                        )
                    }
                };
                InstanceKind::Register { size: konst(self, 0)?, width }
            }
            "counter" | "direct_counter" => {
                let which = enum_member(self, if tn.name == "counter" { 1 } else { 0 })?;
                let packets = which != "bytes";
                let bytes = which != "packets";
                if tn.name == "counter" {
                    InstanceKind::Counter { size: konst(self, 0)?, packets, bytes }
                } else {
                    InstanceKind::DirectCounter { packets, bytes }
                }
            }
            "meter" => InstanceKind::Meter {
                size: konst(self, 0)?,
                bytes: enum_member(self, 1)? == "bytes",
            },
            "direct_meter" => InstanceKind::DirectMeter { bytes: enum_member(self, 0)? == "bytes" },
            "action_profile" | "action_selector" => {
                self.profile_kind(&tn.name, args, &d.annotations, d.span)?
            }
            "hotplane_ebpf" => match args.first().map(|a| &a.value.kind) {
                Some(ExprKind::Str(slot)) if !slot.is_empty() => {
                    InstanceKind::ExternSlot { slot: slot.clone() }
                }
                _ => {
                    return self.err(
                        d.span,
                        "hotplane_ebpf takes the name of an extern slot: hotplane_ebpf(\"fw\")",
                    )
                }
            },
            other => return self.err(tn.span, format!("instances of `{other}` are not supported")),
        };
        let qualified = self.control_plane_name(&name.name, &d.annotations);
        self.declare_instance(&qualified, &kind, d.span)?;
        self.prog.instances.push(ir::Instance {
            name: qualified,
            kind,
            annotations: d.annotations.clone(),
            order: self.order_of(d),
        });
        let i = self.prog.instances.len() as u32 - 1;
        self.bind(&name.name, Binding::Instance(i));
        Ok(())
    }

    fn lower_table(
        &mut self,
        d: &'a ast::Decl,
        name: &ast::Ident,
        props: &'a [ast::TableProperty],
    ) -> DResult<u32> {
        let qualified = self.control_plane_name(&name.name, &d.annotations);
        let mut keys = Vec::new();
        let mut actions = Vec::new();
        let mut default_only = Vec::new();
        let mut table_only = Vec::new();
        let mut default = None;
        let mut default_is_const = false;
        let mut entries_prop = None;
        let mut size = 1024;
        let mut direct_counter = None;
        let mut direct_meter = None;
        let mut largest_wins = None;
        let mut priority_delta = None;
        let mut support_timeout = false;
        let mut implementation = None;
        let mut selector_keys = Vec::new();
        for p in props {
            match (p.name.name.as_str(), &p.value) {
                ("key", PropertyValue::Key(ks)) => {
                    for k in ks {
                        let mut pre = Vec::new();
                        let (value, ty) = self.scalar_typed(&k.expr, &mut pre)?;
                        if !pre.is_empty() {
                            return self
                                .err(k.expr.span, "table keys cannot call tables or functions");
                        }
                        let width = ty
                            .scalar_width(&self.types)
                            .ok_or_else(|| self.diag(k.expr.span, "a key needs a width"))?;
                        let kind = match k.match_kind.name.as_str() {
                            "selector" => {
                                selector_keys.push(ir::ListItem { value, width });
                                continue;
                            }
                            "exact" => MatchKind::Exact,
                            "lpm" => MatchKind::Lpm,
                            "ternary" => MatchKind::Ternary,
                            "range" => MatchKind::Range,
                            "optional" => MatchKind::Optional,
                            other => {
                                return self.err(
                                    k.match_kind.span,
                                    format!("match kind `{other}` is not supported"),
                                )
                            }
                        };
                        let key_name =
                            name_annotation(&k.annotations).unwrap_or_else(|| key_text(&k.expr));
                        keys.push(ir::TableKey { name: key_name, value, width, kind });
                    }
                }
                ("actions", PropertyValue::Actions(list)) => {
                    for a in list {
                        let idx = self.action_by_ref(&a.name)?;
                        self.bind_action_args(idx, &a.args, a.span)?;
                        actions.push(idx);
                        default_only
                            .push(a.annotations.iter().any(|x| x.name.name == "defaultonly"));
                        table_only.push(a.annotations.iter().any(|x| x.name.name == "tableonly"));
                    }
                }
                ("default_action", PropertyValue::Actions(list)) => {
                    default = list.first();
                    default_is_const = p.is_const;
                }
                ("entries", PropertyValue::Entries(es)) => entries_prop = Some((es, p.is_const)),
                ("size", PropertyValue::Expr(e)) => {
                    size = self.const_eval().eval_u32(e, "a table size")?
                }
                ("counters", PropertyValue::Expr(e)) => {
                    direct_counter = Some(self.instance_name(e))
                }
                ("meters", PropertyValue::Expr(e)) => direct_meter = Some(self.instance_name(e)),
                ("largest_priority_wins", PropertyValue::Expr(e)) => {
                    largest_wins = match self.const_eval().eval(e)? {
                        ConstValue::Bool(b) => Some((b, e.span)),
                        _ => {
                            return self.err(e.span, "largest_priority_wins must be true or false")
                        }
                    }
                }
                ("priority_delta", PropertyValue::Expr(e)) => {
                    let d = self.const_eval().eval_u32(e, "priority_delta")?;
                    if d == 0 {
                        return self.err(e.span, "priority_delta must be a positive integer");
                    }
                    priority_delta = Some(d);
                }
                ("implementation", _) => {
                    implementation = Some((self.implementation(&qualified, p, d)?, p.span))
                }
                ("support_timeout", PropertyValue::Expr(e)) => {
                    support_timeout = match self.const_eval().eval(e)? {
                        ConstValue::Bool(b) => b,
                        _ => return self.err(e.span, "support_timeout must be true or false"),
                    }
                }
                _ => {} // other properties carry no semantics here
            }
        }
        if actions.is_empty() {
            return self.err(name.span, format!("table {} has no actions", name.name));
        }
        let (default_action, default_args) = match default {
            Some(a) => {
                let idx = self.action_by_ref(&a.name)?;
                if !actions.contains(&idx) {
                    return self
                        .err(a.span, "the default action must be one of the table's actions");
                }
                (idx, self.const_args(idx, &a.args, a.span)?)
            }
            None => {
                let noaction = self
                    .global("NoAction")
                    .ok_or_else(|| self.diag(name.span, "NoAction is not declared"))?;
                let idx = self.lower_action(noaction)?;
                // The implicit default joins the list as a default-only action (as p4c does).
                if !actions.contains(&idx) {
                    actions.push(idx);
                    default_only.push(true);
                    table_only.push(false);
                }
                (idx, Vec::new())
            }
        };
        let tableconfig = d
            .annotations
            .iter()
            .find(|a| a.name.name == "tableconfig")
            .map(|a| annotation_text(&a.body));
        if direct_meter.is_some() && keys.iter().any(|k| k.kind == MatchKind::Range) {
            return self.err(
                d.span,
                "direct meters on tables with range keys are not supported (a range is stored as \
                 several entries, which would each meter at the full rate)",
            );
        }
        let implementation = match implementation {
            Some((i, span)) => {
                self.implement(&qualified, i, &actions, selector_keys.is_empty(), span)?;
                if entries_prop.is_some() {
                    return self.err(
                        d.span,
                        "a table with an action profile cannot have `entries`: its entries \
                         name members and groups, which the control plane creates",
                    );
                }
                Some(i)
            }
            None if !selector_keys.is_empty() => {
                return self
                    .err(d.span, "`selector` keys need `implementation = action_selector(...)`")
            }
            None => None,
        };
        let mut table = ir::Table {
            name: qualified,
            keys,
            actions,
            default_only,
            table_only,
            default_action,
            default_args,
            default_is_const,
            const_entries: Vec::new(),
            entries_are_const: false,
            size,
            direct_counter,
            direct_meter,
            meter_dst: None,
            tableconfig,
            support_timeout,
            implementation,
            selector_keys,
            annotations: d.annotations.clone(),
            order: self.order_of(d),
        };
        if let Some((es, is_const)) = entries_prop {
            table.entries_are_const = is_const;
            self.count_const_entries(es.len(), d.span)?;
            for e in es {
                table.const_entries.push(self.const_entry(&table, e)?);
            }
            let order = EntryOrder {
                largest_wins: largest_wins.is_none_or(|(b, _)| b),
                delta: priority_delta.unwrap_or(1),
                is_const,
            };
            let ranks = self.entry_ranks(&table, es, order)?;
            for (c, rank) in table.const_entries.iter_mut().zip(ranks) {
                c.priority = rank;
            }
        }
        self.count(crate::budget::Budget::Tables, self.prog.tables.len() + 1, "tables", d.span)?;
        self.declare_table(&table, d.span)?;
        self.prog.tables.push(table);
        Ok(self.prog.tables.len() as u32 - 1)
    }

    fn action_by_ref(&mut self, e: &ast::Expr) -> DResult<u32> {
        let (ExprKind::Name(n) | ExprKind::TopName(n)) = &e.kind else {
            return self.err(e.span, "expected an action name");
        };
        match self.lookup(&n.name) {
            Some(Binding::Action(a)) => Ok(a),
            _ => match self.global(&n.name) {
                Some(d) if matches!(d.kind, DeclKind::Action { .. }) => self.lower_action(d),
                _ => self.err(n.span, format!("no action named `{}`", n.name)),
            },
        }
    }

    /// Bind the directional parameters of a table's action to the arguments its action list
    /// gives (`actions = { set(hdr.x); }`): copy-in before the body, copy-out after it (also
    /// on `exit`), as if the table called it so. Tables binding one action must bind it to the
    /// same arguments; direct calls still run the body as declared (`unbound_bodies`).
    fn bind_action_args(&mut self, action: u32, args: &'a [ast::Arg], span: Span) -> DResult<()> {
        let a = &self.prog.actions[action as usize];
        let directional: Vec<ir::ActionParam> =
            a.params.iter().filter(|p| !p.directionless).cloned().collect();
        if directional.is_empty() {
            return Ok(());
        }
        let name = a.name.clone();
        if args.len() != directional.len() {
            return self.err(
                span,
                format!(
                    "{name}: its {} directional parameter(s) are bound in the table's action \
                     list, e.g. `{name}(hdr.x)`",
                    directional.len()
                ),
            );
        }
        // Tables that bind the action to the same locations share the one binding.
        let mut scratch = Vec::new();
        let mut key = String::new();
        for a in args {
            key.push_str(&format!("{:?};", self.expr(&a.value, &mut scratch)?));
        }
        if !scratch.is_empty() {
            return self.err(span, "bound action arguments cannot call functions or tables");
        }
        match self.bound_actions.get(&action) {
            Some(k) if *k == key => return Ok(()),
            Some(_) => {
                return self.err(
                    span,
                    format!(
                        "{name} is bound to other arguments by another table: not supported yet"
                    ),
                )
            }
            None => {
                self.bound_actions.insert(action, key);
            }
        }
        let mut body = Vec::new();
        let mut copy_out = Vec::new();
        let positions: Vec<usize> = (0..self.prog.actions[action as usize].params.len())
            .filter(|&k| !self.prog.actions[action as usize].params[k].directionless)
            .collect();
        for (k, arg) in positions.into_iter().zip(args) {
            let mut pre = Vec::new();
            // Copied in for `out` ones too: their value is undefined until written.
            let copies_out = self.prog.actions[action as usize].params[k].copy_out;
            let (v, dst) = if copies_out {
                let d = self.fixed_lvalue(&arg.value, &mut pre)?;
                (d.clone(), Some(d))
            } else {
                (self.expr(&arg.value, &mut pre)?, None)
            };
            let mut copy_in = Vec::new();
            self.pass_argument(action, k, v, dst, arg.value.span, &mut copy_in, &mut copy_out)?;
            body.extend(pre);
            body.extend(copy_in);
        }
        let old = std::mem::take(&mut self.prog.actions[action as usize].body);
        self.unbound_bodies.insert(action, old.clone());
        body.push(Stmt::Call { body: vec![Stmt::Scope(old)], copy_out });
        self.prog.actions[action as usize].body = body;
        Ok(())
    }

    fn const_args(&self, action: u32, args: &[ast::Arg], span: Span) -> DResult<Vec<u128>> {
        let all = &self.prog.actions[action as usize].params;
        // Directional parameters are bound by the action list; a default action or entry may
        // repeat those arguments (as P4 writes it) or give only the directionless ones.
        let bound = all.iter().filter(|p| !p.directionless).count();
        let params: Vec<&ir::ActionParam> = all.iter().filter(|p| p.directionless).collect();
        let args = if args.len() == all.len() && bound > 0 { &args[bound..] } else { args };
        if args.len() != params.len() {
            return self.err(
                span,
                format!(
                    "{} takes {} arguments, {} given",
                    self.prog.actions[action as usize].name,
                    params.len(),
                    args.len()
                ),
            );
        }
        args.iter()
            .zip(params)
            .map(|(a, p)| match self.const_eval().eval(&a.value)? {
                ConstValue::Int(v, _) | ConstValue::Enum(_, v) => Ok(v & mask(p.width)),
                ConstValue::Bool(b) => Ok(b as u128),
                _ => self.err(a.value.span, "action arguments in a table must be constants"),
            })
            .collect()
    }

    /// Each initial entry's priority in hotplane's terms (larger wins, all distinct), chosen so
    /// that the entry BMv2 applies is the one hotplane applies:
    /// - entries are ordered by the spec's priorities (`priority = N:`, the others numbered from
    ///   the one before by `priority_delta`, largest or smallest first as
    ///   `largest_priority_wins` says; as p4c orders them), stably;
    /// - then, as p4c's BMv2 back-end numbers them, the entry at position i (from 1) weighs
    ///   `@priority(N)` if it has that annotation, else i; the lightest wins, ties to the earlier.
    ///
    /// Tables whose keys are all exact or lpm need no priorities (the longest prefix wins): None.
    fn entry_ranks(
        &self,
        t: &ir::Table,
        es: &[ast::Entry],
        order: EntryOrder,
    ) -> DResult<Vec<Option<u32>>> {
        let given: Vec<Option<(u64, Span)>> = es
            .iter()
            .map(|e| {
                e.priority
                    .as_ref()
                    .map(|p| Ok((self.const_eval().eval_u32(p, "a priority")? as u64, p.span)))
                    .transpose()
            })
            .collect::<DResult<_>>()?;
        let needs_priorities =
            t.keys.iter().any(|k| !matches!(k.kind, MatchKind::Exact | MatchKind::Lpm));
        if let Some((_, span)) = given.iter().flatten().next() {
            if order.is_const {
                return self.err(
                    *span,
                    "entries of `const entries` cannot have priorities: they match in program order",
                );
            }
            if !needs_priorities {
                return self.err(*span, "exact and lpm keys need no entry priorities");
            }
            if given[0].is_none() {
                return self.err(
                    es[0].span,
                    "the first entry needs a priority when others have one (spec: entry priorities)",
                );
            }
        }
        if !needs_priorities {
            return Ok(vec![None; es.len()]);
        }
        // The spec's numbering, then p4c's stable sort by it.
        let mut positions: Vec<usize> = (0..es.len()).collect();
        if given.iter().any(Option::is_some) {
            let mut spec = Vec::with_capacity(es.len());
            let mut last = 0u64;
            for (i, g) in given.iter().enumerate() {
                let p = match g {
                    Some((p, _)) => *p,
                    None if order.largest_wins => {
                        last.checked_sub(order.delta as u64).ok_or_else(|| {
                            Diagnostic::new(
                                es[i].span,
                                format!(
                                    "this entry's priority would be {last} - {} (below zero)",
                                    order.delta
                                ),
                            )
                        })?
                    }
                    None => last + order.delta as u64,
                };
                spec.push(p);
                last = p;
            }
            if order.largest_wins {
                positions.sort_by_key(|&i| std::cmp::Reverse(spec[i]));
            } else {
                positions.sort_by_key(|&i| spec[i]);
            }
        }
        let mut weights = Vec::with_capacity(es.len());
        for (pos, &i) in positions.iter().enumerate() {
            let weight = match es[i].annotations.iter().find(|a| a.name.name == "priority") {
                Some(a) => match a.body.first().map(|t| &t.tok) {
                    Some(crate::lexer::Tok::Int { value, .. }) if a.body.len() == 1 => *value,
                    _ => return self.err(a.name.span, "@priority takes one integer"),
                },
                None => pos as u128 + 1,
            };
            weights.push((weight, pos, i));
        }
        weights.sort();
        let n = es.len() as u32;
        let mut ranks = vec![None; es.len()];
        for (rank, &(_, _, i)) in weights.iter().enumerate() {
            ranks[i] = Some(n - rank as u32);
        }
        Ok(ranks)
    }

    fn const_entry(&mut self, t: &ir::Table, e: &ast::Entry) -> DResult<ir::ConstEntry> {
        if e.keyset.len() != t.keys.len() {
            return self.err(
                e.span,
                format!(
                    "the entry has {} keys, table {} has {}",
                    e.keyset.len(),
                    t.name,
                    t.keys.len()
                ),
            );
        }
        let mut keys = Vec::new();
        for (k, x) in t.keys.iter().zip(&e.keyset) {
            keys.push(self.key_match(k, x)?);
        }
        let action = self.action_by_ref(&e.action.name)?;
        if !t.actions.contains(&action) {
            return self.err(e.action.span, format!("table {} has no such action", t.name));
        }
        let args = self.const_args(action, &e.action.args, e.action.span)?;
        // Set for all entries together (`entry_ranks`).
        Ok(ir::ConstEntry { keys, priority: None, action, args })
    }

    /// A constant key or select value, truncated to the key's width.
    pub(crate) fn key_value(&self, e: &ast::Expr, width: u32) -> DResult<u128> {
        match self.const_eval().eval(e)? {
            ConstValue::Int(v, _) | ConstValue::Enum(_, v) => Ok(v & mask(width)),
            ConstValue::Bool(b) => Ok(b as u128),
            ConstValue::Error(c) => Ok(c as u128),
            ConstValue::Str(_) => self.err(e.span, "a key cannot be a string"),
        }
    }

    /// A table entry's key value: an unsized literal must fit the key (a negative one stands
    /// for its two's complement, as p4c converts it); a sized one has the key's type.
    fn entry_key_value(&self, e: &ast::Expr, width: u32) -> DResult<u128> {
        if let ConstValue::Int(v, Ty::InfInt) = self.const_eval().eval(e)? {
            if width < 127 && (v as i128) > mask(width) as i128 {
                return self
                    .err(e.span, format!("{v:#x} does not fit in the {width}-bit key it matches"));
            }
        }
        self.key_value(e, width)
    }

    fn key_match(&self, k: &ir::TableKey, x: &ast::Expr) -> DResult<KeyMatch> {
        let full = mask(k.width);
        let value = |e: &ast::Expr| self.entry_key_value(e, k.width);
        Ok(match &x.kind {
            ExprKind::DontCare | ExprKind::Default => match k.kind {
                MatchKind::Range => KeyMatch::Range { lo: 0, hi: full },
                MatchKind::Lpm => KeyMatch::Prefix { value: 0, len: 0 },
                _ => KeyMatch::Mask { value: 0, mask: 0 },
            },
            ExprKind::Mask(v, m) => {
                let (v, m) = (value(v)?, value(m)?);
                if k.kind == MatchKind::Lpm {
                    let len = m.count_ones();
                    if m != (full ^ mask(k.width - len)) {
                        return self.err(x.span, "an lpm mask must be a prefix");
                    }
                    KeyMatch::Prefix { value: v & m, len }
                } else {
                    KeyMatch::Mask { value: v & m, mask: m }
                }
            }
            ExprKind::Range(lo, hi) => KeyMatch::Range { lo: value(lo)?, hi: value(hi)? },
            _ => {
                let v = value(x)?;
                match k.kind {
                    MatchKind::Lpm => KeyMatch::Prefix { value: v, len: k.width },
                    MatchKind::Range => KeyMatch::Range { lo: v, hi: v },
                    _ => KeyMatch::Mask { value: v, mask: full },
                }
            }
        })
    }
}

impl Lowerer<'_> {
    /// The name the control plane knows a declaration by: `@name("x")` is relative to the
    /// enclosing control unless it starts with a dot (then it is global), as p4c does.
    pub(crate) fn control_plane_name(
        &self,
        local: &str,
        annotations: &[ast::Annotation],
    ) -> String {
        match name_annotation(annotations) {
            Some(n) if n.starts_with('.') => n[1..].to_string(),
            Some(n) => format!("{}{n}", self.prefix),
            None => format!("{}{local}", self.prefix),
        }
    }

    /// The qualified name of the instance a table property names (`counters = hits`).
    fn instance_name(&self, e: &ast::Expr) -> String {
        if let ExprKind::Name(n) = &e.kind {
            if let Some(Binding::Instance(i)) = self.lookup(&n.name) {
                return self.prog.instances[i as usize].name.clone();
            }
        }
        key_text(e)
    }
}

/// The `@name("...")` of a declaration or key, if any.
pub(crate) fn name_annotation(annotations: &[ast::Annotation]) -> Option<String> {
    annotations.iter().find(|a| a.name.name == "name").and_then(|a| {
        match a.body.first().map(|t| &t.tok) {
            Some(crate::lexer::Tok::Str(s)) => Some(s.clone()),
            _ => None,
        }
    })
}

/// An annotation body as text (`store="dynamic", locked=true`).
pub(crate) fn annotation_text(body: &[crate::lexer::Token]) -> String {
    use crate::lexer::Tok;
    let mut s = String::new();
    for t in body {
        match &t.tok {
            Tok::Ident(n) => s.push_str(n),
            Tok::Int { value, .. } => s.push_str(&value.to_string()),
            Tok::Str(v) => {
                s.push('"');
                s.push_str(v);
                s.push('"');
            }
            Tok::Punct(p) => s.push_str(p),
            _ => {}
        }
    }
    s
}

/// How a key expression reads (`hdr.ipv4.dstAddr`): the name P4Info gives it.
pub(crate) fn key_text(e: &ast::Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) | ExprKind::TopName(n) => n.name.clone(),
        ExprKind::Member(b, m) => format!("{}.{}", key_text(b), m.name),
        ExprKind::Index(b, i) => format!("{}[{}]", key_text(b), key_text(i)),
        ExprKind::Int { value, .. } => value.to_string(),
        ExprKind::Slice { base, hi, lo } => {
            format!("{}[{}:{}]", key_text(base), key_text(hi), key_text(lo))
        }
        ExprKind::Call { callee, .. } => format!("{}()", key_text(callee)),
        _ => "key".to_string(),
    }
}

/// How a table's initial entries are ordered (its `largest_priority_wins` and
/// `priority_delta`, and whether they are `const entries`).
#[derive(Clone, Copy)]
struct EntryOrder {
    largest_wins: bool,
    delta: u32,
    is_const: bool,
}
