//! Calls: actions and functions (inlined with copy-in/copy-out), methods of headers, stacks,
//! tables, packets and extern instances, and v1model's extern functions.

use super::expr::{bits_of, Val};
use super::stmt::storage_val;
use super::{Binding, Lowerer, Storage};
use crate::ast::{self, DeclKind, Direction, ExprKind};
use crate::budget::Budget;
use crate::diag::{DResult, Span};
use crate::ir::statements;
use crate::ir::{self, Expr, Place, Stmt};
use crate::types::Ty;

impl<'a> Lowerer<'a> {
    /// Lower a call; statements it needs go to `pre`. Returns its value, if it has one.
    pub(crate) fn call(&mut self, e: &ast::Expr, pre: &mut Vec<Stmt>) -> DResult<Option<Val>> {
        let ExprKind::Call { callee, type_args, args } = &e.kind else {
            return self.err(e.span, "expected a call");
        };
        match &callee.kind {
            ExprKind::Member(obj, method) => {
                self.method_call(obj, method, type_args, args, e.span, pre)
            }
            ExprKind::Name(n) | ExprKind::TopName(n) => match self.lookup(&n.name) {
                _ if self.block == super::BlockKind::Parser && self.is_action(&n.name) => self.err(
                    e.span,
                    "actions cannot be called in a parser (spec: actions run in controls)",
                ),
                Some(Binding::Action(a)) => self.inline_action(a, args, e.span, pre).map(|_| None),
                Some(_) => self.err(n.span, format!("`{}` cannot be called", n.name)),
                None => {
                    if let Some(d) = self.global(&n.name) {
                        match &d.kind {
                            DeclKind::Action { .. } => {
                                let a = self.lower_action(d)?;
                                return self.inline_action(a, args, e.span, pre).map(|_| None);
                            }
                            DeclKind::Function { .. } => {
                                return self.inline_function(d, args, e.span, pre)
                            }
                            _ => {}
                        }
                    }
                    if self.extern_fn(&n.name).is_some() {
                        return self.extern_function(n, type_args, args, e.span, pre);
                    }
                    self.err(n.span, format!("`{}` is not declared", n.name))
                }
            },
            _ => self.err(callee.span, "this cannot be called"),
        }
    }

    /// A call inside a loop of a body that loops itself: the work would multiply past what
    /// `enter_loop` accounts for.
    fn check_loop_in_loop(&self, body: &[Stmt], span: Span) -> DResult<()> {
        if self.loop_depth > 0 && ir::any_stmt(body, &mut |s| matches!(s, Stmt::Loop { .. })) {
            return self.err(
                span,
                "a call inside a loop of an action or function that loops itself is not supported",
            );
        }
        Ok(())
    }

    /// Whether `name` names an action here (a local or a top-level one).
    fn is_action(&self, name: &str) -> bool {
        match self.lookup(name) {
            Some(Binding::Action(_)) => true,
            Some(_) => false,
            None => self.global(name).is_some_and(|d| matches!(d.kind, DeclKind::Action { .. })),
        }
    }

    /// Lower an action declaration once; returns its index.
    pub(crate) fn lower_action(&mut self, d: &'a ast::Decl) -> DResult<u32> {
        let DeclKind::Action { name, .. } = &d.kind else {
            return self.err(d.span, "not an action");
        };
        let is_global = self.global(&name.name).is_some_and(|g| std::ptr::eq(g, d));
        if is_global {
            if let Some(i) = self.global_actions.get(&name.name) {
                return Ok(*i);
            }
            // A top-level action sees only top-level names, wherever it is first used.
            let saved_scopes =
                std::mem::replace(&mut self.scopes, vec![std::collections::HashMap::new()]);
            let saved_prefix = std::mem::take(&mut self.prefix);
            let r = self.lower_action_here(d);
            self.scopes = saved_scopes;
            self.prefix = saved_prefix;
            let index = r?;
            self.global_actions.insert(name.name.clone(), index);
            return Ok(index);
        }
        self.lower_action_here(d)
    }

    fn lower_action_here(&mut self, d: &'a ast::Decl) -> DResult<u32> {
        let DeclKind::Action { name, params, body } = &d.kind else {
            return self.err(d.span, "not an action");
        };
        let qualified = self.control_plane_name(&name.name, &d.annotations);
        if let Some(&i) = self.action_index.get(&qualified) {
            // The same declaration named again; another one with this control-plane name
            // would be merged into it.
            if self.action_decl_span.get(&qualified) == Some(&d.span) {
                return Ok(i);
            }
            return self.err(
                name.span,
                format!("`{qualified}`: conflicting control-plane name (another action has it)"),
            );
        }
        self.push_scope();
        let mut ir_params = Vec::new();
        let mut composite = Vec::new();
        for p in params {
            let ty = self.resolve(&p.ty)?;
            let Some(width) = bits_of(&ty).or_else(|| ty.scalar_width(&self.types)) else {
                if p.direction == Direction::None {
                    self.pop_scope();
                    return self.err(
                        p.ty.span,
                        "control-plane (directionless) action parameters must be bit<N>, \
                         int<N>, bool or enums",
                    );
                }
                // A header or struct passed in or out: storage of the action's own (actions
                // do not recurse), copied in and out at each call.
                let storage = match self.alloc(&ty, &p.name.name, p.name.span) {
                    Ok(s) => s,
                    Err(e) => {
                        self.pop_scope();
                        return Err(e);
                    }
                };
                composite.push((ir_params.len(), storage.clone(), p.direction == Direction::Out));
                ir_params.push(ir::ActionParam {
                    name: p.name.name.clone(),
                    width: 0,
                    writable: false,
                    directionless: false,
                    copy_out: matches!(p.direction, Direction::Out | Direction::InOut),
                    slot: 0,
                });
                self.bind(&p.name.name, Binding::Var(storage));
                continue;
            };
            let slot = self.prog.slot();
            let writable = p.annotations.iter().any(|a| a.name.name == "ref");
            if writable && p.direction != Direction::None {
                self.pop_scope();
                return self
                    .err(p.name.span, "@ref applies to directionless (control-plane) parameters");
            }
            ir_params.push(ir::ActionParam {
                name: p.name.name.clone(),
                width,
                writable,
                directionless: p.direction == Direction::None,
                copy_out: matches!(p.direction, Direction::Out | Direction::InOut),
                slot,
            });
            self.bind(
                &p.name.name,
                Binding::Var(Storage::Scalar { place: Place::Slot { slot, width }, ty }),
            );
        }
        // An action is lowered where it is first named, which may be inside another's body.
        let saved = match self.enter_call(d.span) {
            Ok(saved) => saved,
            Err(e) => {
                self.pop_scope();
                return Err(e);
            }
        };
        self.return_target.push(None);
        // A `break` in the body belongs to a loop in the body, not the caller's.
        let loops = std::mem::take(&mut self.loop_depth);
        let work = std::mem::replace(&mut self.loop_work, 1);
        let in_action = std::mem::replace(&mut self.in_action, true);
        let body = self.block_stmts(&body.stmts);
        self.in_action = in_action;
        self.loop_depth = loops;
        self.loop_work = work;
        self.return_target.pop();
        let calls = self.leave_call(saved);
        self.pop_scope();
        let body = body?;
        self.check_nesting(&body, d.span)?;
        let index = self.prog.actions.len();
        self.count(Budget::Actions, index + 1, "actions", d.span)?;
        self.spent.action_calls.push(calls);
        self.spent.action_statements.push(statements(&body));
        self.action_index.insert(qualified.clone(), index as u32);
        self.action_decl_span.insert(qualified.clone(), d.span);
        for (i, storage, out) in composite {
            self.action_param_storage.insert((index as u32, i), storage);
            if out {
                self.out_params.insert((index as u32, i));
            }
        }
        self.prog.actions.push(ir::Action {
            name: qualified,
            params: ir_params,
            body,
            annotations: d.annotations.clone(),
            order: self.order_of(d),
        });
        Ok(self.prog.actions.len() as u32 - 1)
    }

    /// A direct call of an action: arguments into its parameter slots, then its body.
    fn inline_action(
        &mut self,
        a: u32,
        args: &[ast::Arg],
        span: Span,
        pre: &mut Vec<Stmt>,
    ) -> DResult<()> {
        let calls = self.spent.action_calls.get(a as usize).copied().unwrap_or(0);
        let size = self.spent.action_statements.get(a as usize).copied().unwrap_or(0);
        // Charged before the body is copied: copies are what a hostile program multiplies.
        self.inlined(calls, size, span)?;
        let mut action = self.prog.actions[a as usize].clone();
        // A direct call runs the body as declared, not as a table's action list bound it.
        if let Some(body) = self.unbound_bodies.get(&a) {
            action.body = body.clone();
        }
        self.check_loop_in_loop(&action.body, span)?;
        if args.len() != action.params.len() {
            return self.err(
                span,
                format!(
                    "action {} takes {} arguments, {} given",
                    action.name,
                    action.params.len(),
                    args.len()
                ),
            );
        }
        // Arguments are evaluated left to right; one with side effects comes after the values
        // of those before it are taken. (The parameter slots are the action's own, so they are
        // written only once all arguments are known.)
        let mut values: Vec<Val> = Vec::with_capacity(args.len());
        let mut dsts: Vec<Option<Val>> = Vec::with_capacity(args.len());
        for (i, arg) in args.iter().enumerate() {
            let mut effects = Vec::new();
            // An out or inout argument's location is fixed as it is evaluated (spec 6.8).
            let copies_out = action.params.get(i).is_some_and(|p| p.copy_out);
            let (v, dst) = if copies_out {
                let d = self.fixed_lvalue(&arg.value, &mut effects)?;
                (d.clone(), Some(d))
            } else {
                (self.expr(&arg.value, &mut effects)?, None)
            };
            dsts.push(dst);
            if !effects.is_empty() {
                for earlier in values.iter_mut() {
                    let taken = std::mem::replace(earlier, Val::List(Vec::new()));
                    *earlier = self.settle(taken, arg.value.span, pre)?;
                }
                pre.extend(effects);
            }
            values.push(v);
        }
        let mut body = Vec::new();
        let mut copy_out = Vec::new();
        for (i, ((arg, v), dst)) in args.iter().zip(values).zip(dsts).enumerate() {
            self.pass_argument(a, i, v, dst, arg.value.span, &mut body, &mut copy_out)?;
        }
        if copy_out.is_empty() {
            body.push(Stmt::Scope(action.body));
        } else {
            body.push(Stmt::Call { body: vec![Stmt::Scope(action.body)], copy_out });
        }
        pre.push(Stmt::Block(body));
        Ok(())
    }

    /// Pass `value` to parameter `i` of `action`: its copy-in goes to `body`, and for `out` and
    /// `inout` parameters the copy-out to `dst` (the argument's location, fixed when it was
    /// evaluated) to `copy_out`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pass_argument(
        &mut self,
        action: u32,
        i: usize,
        value: Val,
        dst: Option<Val>,
        span: Span,
        body: &mut Vec<Stmt>,
        copy_out: &mut Vec<Stmt>,
    ) -> DResult<()> {
        let p = self.prog.actions[action as usize].params[i].clone();
        if let Some(storage) = self.action_param_storage.get(&(action, i)).cloned() {
            if self.out_params.contains(&(action, i)) {
                // An `out` header starts invalid (spec 6.8), a struct's headers too.
                body.extend(self.zero(&storage));
            } else {
                body.extend(self.assign(&storage_val(storage.clone()), value, span)?);
            }
            if let (true, Some(dst)) = (p.copy_out, &dst) {
                copy_out.extend(self.assign(dst, storage_val(storage), span)?);
            }
            return Ok(());
        }
        let place = Place::Slot { slot: p.slot, width: p.width };
        let ty = Ty::Bit(p.width);
        let v = match value {
            Val::Scalar { e, ty: Ty::Bool } if p.width == 1 => Val::Scalar { e, ty: Ty::Bit(1) },
            Val::Scalar { e, ty: Ty::Int(w) } if w == p.width => Val::Scalar { e, ty: Ty::Bit(w) },
            Val::Scalar { e, ty: Ty::Enum(_) } => Val::Scalar { e, ty: ty.clone() },
            other => other,
        };
        if let (true, Some(dst)) = (p.copy_out, dst) {
            // Read back as the argument's own type (bool, int<N>, an enum: the same bits).
            let back = match &dst {
                Val::Scalar { ty: t, .. } if t.scalar_width(&self.types) == Some(p.width) => {
                    t.clone()
                }
                _ => ty.clone(),
            };
            copy_out.extend(self.assign(
                &dst,
                Val::Scalar { e: Expr::Read(place.clone()), ty: back },
                span,
            )?);
        }
        body.push(Stmt::Assign(place, self.coerce(v, &ty, span)?));
        Ok(())
    }

    /// Inline a function: parameters get fresh storage, `return` writes the result slot.
    fn inline_function(
        &mut self,
        d: &'a ast::Decl,
        args: &[ast::Arg],
        span: Span,
        pre: &mut Vec<Stmt>,
    ) -> DResult<Option<Val>> {
        let DeclKind::Function { ret, name, type_params, params, body } = &d.kind else {
            return self.err(d.span, "not a function");
        };
        if !type_params.is_empty() {
            return self.err(name.span, "generic functions are not supported yet");
        }
        if args.len() != params.len() {
            return self.err(
                span,
                format!("{} takes {} arguments, {} given", name.name, params.len(), args.len()),
            );
        }
        let ret_ty = self.resolve(ret)?;
        // Fresh storage per call: a header or struct returned is a value of its own.
        let ret_place = match &ret_ty {
            Ty::Void => None,
            t => Some(self.alloc(t, &format!("{}.return", name.name), name.span)?),
        };
        let mut epilogue = Vec::new();
        let mut bindings = Vec::new();
        for (p, arg) in params.iter().zip(args) {
            let ty = self.resolve(&p.ty)?;
            let storage = self.alloc(&ty, &p.name.name, p.name.span)?;
            // An out or inout argument's location is fixed as it is evaluated (spec 6.8).
            let dst = match p.direction {
                Direction::Out | Direction::InOut => Some(self.fixed_lvalue(&arg.value, pre)?),
                _ => None,
            };
            match (&p.direction, &dst) {
                // Copied in as it is evaluated, before the next argument's side effects (the
                // storage is this call's own).
                (Direction::InOut, Some(d)) => pre.extend(self.assign(
                    &Val::Loc(storage.clone()),
                    d.clone(),
                    arg.value.span,
                )?),
                (Direction::Out, _) => pre.extend(self.zero(&storage)),
                _ => {
                    let v = self.expr(&arg.value, pre)?;
                    pre.extend(self.assign(&Val::Loc(storage.clone()), v, arg.value.span)?);
                }
            }
            if let Some(dst) = dst {
                epilogue.extend(self.assign(&dst, storage_val(storage.clone()), arg.value.span)?);
            }
            bindings.push((p.name.name.clone(), storage));
        }
        // The body sees the globals and its parameters, not the caller's locals.
        let saved = std::mem::replace(&mut self.scopes, vec![std::collections::HashMap::new()]);
        for (n, s) in bindings {
            self.bind(&n, Binding::Var(s));
        }
        let saved_calls = match self.enter_call(span) {
            Ok(s) => s,
            Err(e) => {
                self.scopes = saved;
                return Err(e);
            }
        };
        self.return_target.push(ret_place.clone());
        let loops = std::mem::take(&mut self.loop_depth);
        let work = std::mem::replace(&mut self.loop_work, 1);
        self.in_function += 1;
        let lowered = self.block_stmts(&body.stmts);
        self.in_function -= 1;
        self.loop_depth = loops;
        self.loop_work = work;
        self.return_target.pop();
        let calls = self.leave_call(saved_calls);
        self.scopes = saved;
        let lowered = lowered?;
        self.check_loop_in_loop(&lowered, span)?;
        self.check_nesting(&lowered, span)?;
        self.inlined(calls, statements(&lowered), span)?;
        if epilogue.is_empty() {
            pre.push(Stmt::Scope(lowered));
        } else {
            pre.push(Stmt::Call { body: vec![Stmt::Scope(lowered)], copy_out: epilogue });
        }
        Ok(ret_place.map(storage_val))
    }
}
