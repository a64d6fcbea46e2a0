//! Action profiles and selectors: the instances (`action_profile(size)`,
//! `action_selector(algorithm, size, width)`, declared or inline in a table's
//! `implementation`) and the tables they implement.

use super::{Binding, Lowerer};
use crate::ast::{self, ExprKind, PropertyValue};
use crate::diag::{DResult, Span};
use crate::ir::{self, HashAlgo, InstanceKind};

use super::table::name_annotation;
use crate::lower::annotation_text;

/// The most members an action profile may hold.
pub const MAX_PROFILE_SIZE: u32 = 1 << 20;

impl<'a> Lowerer<'a> {
    /// The instance `action_profile(size)` or `action_selector(algorithm, size, width)`
    /// declares (by name or inline in a table's `implementation`).
    pub(super) fn profile_kind(
        &mut self,
        type_name: &str,
        args: &[ast::Arg],
        annotations: &[ast::Annotation],
        span: Span,
    ) -> DResult<InstanceKind> {
        let selector = type_name == "action_selector";
        let size_at = if selector { 1 } else { 0 };
        let expected = if selector { 3 } else { 1 };
        if args.len() != expected {
            return self.err(
                span,
                if selector {
                    "action_selector takes (HashAlgorithm, bit<32> size, bit<32> outputWidth)"
                } else {
                    "action_profile takes its size: action_profile(32w128)"
                },
            );
        }
        let size = self.const_eval().eval_u32(&args[size_at].value, "an action profile's size")?;
        if size == 0 || size > MAX_PROFILE_SIZE {
            return self.err(
                args[size_at].value.span,
                format!("an action profile holds 1 to {MAX_PROFILE_SIZE} members, not {size}"),
            );
        }
        let algo = if selector {
            let mut pre = Vec::new();
            let algo = self.hash_algo(&args[0].value, &mut pre)?;
            if algo == HashAlgo::Random {
                // A member chosen at random per packet would reorder a flow's packets.
                return self.err(
                    args[0].value.span,
                    "an action selector's hash must be a function of the packet, not random",
                );
            }
            Some(algo)
        } else {
            None
        };
        let max_group_size = match annotations.iter().find(|a| a.name.name == "max_group_size") {
            Some(a) => match annotation_text(&a.body).trim().parse::<u32>() {
                Ok(n) if n > 0 && n <= size => n,
                _ => {
                    return self.err(
                        a.name.span,
                        format!("@max_group_size must be a number from 1 to the size ({size})"),
                    )
                }
            },
            None => size,
        };
        Ok(InstanceKind::ActionProfile { size, selector: algo, max_group_size, tables: Vec::new() })
    }

    /// `implementation = p` or `implementation = action_selector(...)`: the profile instance
    /// the table's entries name members and groups of.
    pub(super) fn implementation(
        &mut self,
        table: &str,
        p: &'a ast::TableProperty,
        d: &'a ast::Decl,
    ) -> DResult<u32> {
        let PropertyValue::Expr(e) = &p.value else {
            return self.err(p.span, "implementation names an action profile or selector");
        };
        match &e.kind {
            ExprKind::Name(n) => match self.lookup(&n.name) {
                Some(Binding::Instance(i))
                    if matches!(
                        self.prog.instances[i as usize].kind,
                        InstanceKind::ActionProfile { .. }
                    ) =>
                {
                    Ok(i)
                }
                _ => self.err(n.span, format!("`{}` is not an action profile or selector", n.name)),
            },
            ExprKind::Call { callee, args, .. } => {
                let ExprKind::Name(tn) = &callee.kind else {
                    return self
                        .err(callee.span, "expected action_profile(...) or action_selector(...)");
                };
                if !matches!(tn.name.as_str(), "action_profile" | "action_selector") {
                    return self
                        .err(tn.span, "expected action_profile(...) or action_selector(...)");
                }
                // Annotations on the property (`@name`, `@max_group_size`) or on the table.
                let annotations: Vec<ast::Annotation> =
                    p.annotations.iter().chain(&d.annotations).cloned().collect();
                let kind = self.profile_kind(&tn.name, args, &annotations, e.span)?;
                let name = name_annotation(&p.annotations)
                    .map(|n| self.control_plane_name(&n, &p.annotations))
                    .unwrap_or_else(|| table.to_string());
                self.declare_instance(&name, &kind, e.span)?;
                self.prog.instances.push(ir::Instance {
                    name,
                    kind,
                    annotations: p.annotations.clone(),
                    order: self.order_of(d),
                });
                Ok(self.prog.instances.len() as u32 - 1)
            }
            _ => self.err(e.span, "implementation names an action profile or selector"),
        }
    }

    /// Record that the next table (`table`, with `actions`) is implemented by profile
    /// `instance`; tables sharing one must have the same actions (the members are theirs).
    pub(super) fn implement(
        &mut self,
        table: &str,
        instance: u32,
        actions: &[u32],
        no_selector_keys: bool,
        span: Span,
    ) -> DResult<()> {
        let next = self.prog.tables.len() as u32;
        let first = match &self.prog.instances[instance as usize].kind {
            InstanceKind::ActionProfile { tables, selector, .. } => {
                if selector.is_none() && !no_selector_keys {
                    return self
                        .err(span, "`selector` keys need an action_selector, not a profile");
                }
                tables.first().copied()
            }
            _ => return self.err(span, "implementation names an action profile or selector"),
        };
        if let Some(f) = first {
            if self.prog.tables[f as usize].actions != actions {
                return self.err(
                    span,
                    format!(
                        "table {table} shares an action profile with {} but not its actions \
                         (the members are actions of both)",
                        self.prog.tables[f as usize].name
                    ),
                );
            }
        }
        if let Some(a) = actions.iter().find(|&&a| {
            self.prog.actions[a as usize].params.iter().any(|p| p.directionless && p.writable)
        }) {
            return self.err(
                span,
                format!(
                    "action {} writes its entry (`@ref`), which a table with an action profile \
                     cannot do (its data belongs to a member)",
                    self.prog.actions[*a as usize].name
                ),
            );
        }
        if let InstanceKind::ActionProfile { tables, .. } =
            &mut self.prog.instances[instance as usize].kind
        {
            tables.push(next);
        }
        Ok(())
    }
}
