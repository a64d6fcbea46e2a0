//! Structural checks the P4_16 spec requires and p4c's front-end makes before types are known:
//! a name declared twice in one scope, parser states named `accept` or `reject`, `switch`
//! labels (a label twice, `default` before the last label), an action listed twice in a
//! table, assignments to read-only (`in` and directionless) parameters, and functions that can
//! reach their end without returning a value.
//!
//! One pass over the AST, before lowering; it needs no types and must not depend on `lower`.

use std::collections::{HashMap, HashSet};

use crate::ast::{
    Block, Decl, DeclKind, Direction, Expr, ExprKind, Ident, Param, Program, PropertyValue,
    StmtKind, SwitchCase,
};
use crate::diag::{DResult, Diagnostic, Span};

/// Run every check on `p`; the first violation is the error.
pub fn program(p: &Program) -> DResult<()> {
    // Functions and externs may be overloaded (by their number of parameters), and `error`
    // and `match_kind` blocks extend one another: the other top-level names are unique.
    let top = p.decls.iter().filter(|d| {
        !matches!(
            d.kind,
            DeclKind::Function { .. } | DeclKind::ExternFunction(_) | DeclKind::Extern { .. }
        )
    });
    unique(top.filter_map(|d| d.kind.name()), "at the top level")?;
    p.decls.iter().try_for_each(decl)
}

fn decl(d: &Decl) -> DResult<()> {
    match &d.kind {
        DeclKind::Enum { members, .. } => unique(members.iter().map(|(n, _)| n), "in the enum"),
        DeclKind::Error { members } | DeclKind::MatchKind { members } => {
            unique(members.iter(), "in the declaration")
        }
        DeclKind::Action { params, body, .. } => {
            unique(params.iter().map(|p| &p.name), "in the parameter list")?;
            // Directionless action parameters are read-only, like `in` ones.
            read_only(params, body, |dir| matches!(dir, Direction::In | Direction::None))?;
            block(body)
        }
        DeclKind::Function { ret, params, body, .. } => {
            unique(params.iter().map(|p| &p.name), "in the parameter list")?;
            read_only(params, body, |dir| matches!(dir, Direction::In | Direction::None))?;
            block(body)?;
            let void = matches!(&ret.kind, crate::ast::TypeKind::Void);
            if !void && !returns(&body.stmts) {
                let name = d.kind.name().map_or("the function", |n| n.name.as_str());
                return err(
                    body.span,
                    format!("{name} can reach its end without returning a value"),
                );
            }
            Ok(())
        }
        DeclKind::Parser { params, ctor_params, locals, states, .. } => {
            let all_params = params.iter().chain(ctor_params);
            unique(all_params.map(|p| &p.name), "in the parameter list")?;
            unique(locals.iter().filter_map(|l| l.kind.name()), "in the parser")?;
            unique(states.iter().map(|s| &s.name), "in the parser (states)")?;
            for s in states {
                if matches!(s.name.name.as_str(), "accept" | "reject") {
                    return err(
                        s.name.span,
                        format!("`{}` is a built-in state and cannot be declared", s.name.name),
                    );
                }
                stmts(&s.stmts)?;
            }
            locals.iter().try_for_each(decl)
        }
        DeclKind::Control { params, ctor_params, locals, body, .. } => {
            let all_params = params.iter().chain(ctor_params);
            unique(all_params.map(|p| &p.name), "in the parameter list")?;
            unique(locals.iter().filter_map(|l| l.kind.name()), "in the control")?;
            locals.iter().try_for_each(decl)?;
            block(body)
        }
        DeclKind::ParserType { params, .. }
        | DeclKind::ControlType { params, .. }
        | DeclKind::PackageType { params, .. } => {
            unique(params.iter().map(|p| &p.name), "in the parameter list")
        }
        DeclKind::Table { props, .. } => {
            for p in props {
                if let PropertyValue::Actions(list) = &p.value {
                    let names = list.iter().filter_map(|a| match &a.name.kind {
                        ExprKind::Name(n) | ExprKind::TopName(n) => Some(n),
                        _ => None,
                    });
                    unique(names, "in the table's action list")?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn block(b: &Block) -> DResult<()> {
    stmts(&b.stmts)
}

/// The statements of one block: its own declarations are unique; nested blocks are checked
/// in turn (and may shadow).
fn stmts(list: &[crate::ast::Stmt]) -> DResult<()> {
    let decls = list.iter().filter_map(|s| match &s.kind {
        StmtKind::Decl(d) => d.kind.name(),
        _ => None,
    });
    unique(decls, "in this block")?;
    for s in list {
        match &s.kind {
            StmtKind::Switch { cases, .. } => switch(cases)?,
            _ => children(s).into_iter().try_for_each(stmts)?,
        }
    }
    Ok(())
}

/// The statement lists directly inside `s` (branches, blocks, case bodies, loop parts).
fn children(s: &crate::ast::Stmt) -> Vec<&[crate::ast::Stmt]> {
    match &s.kind {
        StmtKind::If { then, els, .. } => {
            let mut out = vec![std::slice::from_ref(&**then)];
            out.extend(els.iter().map(|e| std::slice::from_ref(&**e)));
            out
        }
        StmtKind::Block(b) => vec![&b.stmts[..]],
        StmtKind::Switch { cases, .. } => {
            cases.iter().filter_map(|c| c.body.as_ref()).map(|b| &b.stmts[..]).collect()
        }
        StmtKind::For { init, update, body, .. } => {
            vec![&init[..], &update[..], std::slice::from_ref(&**body)]
        }
        StmtKind::ForIn { body, .. } => vec![std::slice::from_ref(&**body)],
        _ => Vec::new(),
    }
}

/// A label at most once, and `default` only as the last label.
fn switch(cases: &[SwitchCase]) -> DResult<()> {
    let labels: Vec<&Expr> = cases.iter().flat_map(|c| &c.labels).collect();
    let defaults: Vec<&&Expr> =
        labels.iter().filter(|l| matches!(l.kind, ExprKind::Default)).collect();
    if let Some(second) = defaults.get(1) {
        return err(second.span, "a switch has more than one `default` label");
    }
    for (i, l) in labels.iter().enumerate() {
        if matches!(l.kind, ExprKind::Default) && i + 1 != labels.len() {
            return err(l.span, "`default` must be the last label of a switch");
        }
    }
    let mut seen: HashSet<String> = HashSet::new();
    for l in &labels {
        let key = match &l.kind {
            ExprKind::Name(n) | ExprKind::TopName(n) => n.name.clone(),
            ExprKind::Int { value, .. } => format!("#{value}"),
            _ => continue,
        };
        if !seen.insert(key) {
            return err(l.span, "this switch label appears twice");
        }
    }
    for c in cases {
        if let Some(b) = &c.body {
            block(b)?;
        }
    }
    Ok(())
}

/// No assignment targets a read-only parameter (`readonly(direction)`) of a body. A name the
/// body declares again anywhere is left alone (it may be a local shadowing the parameter).
fn read_only(params: &[Param], body: &Block, readonly: impl Fn(Direction) -> bool) -> DResult<()> {
    let mut declared = HashSet::new();
    declared_names(&body.stmts, &mut declared);
    let names: HashSet<&str> = params
        .iter()
        // hotplane's `@ref` parameters are written back into the table entry on purpose.
        .filter(|p| !p.annotations.iter().any(|a| a.name.name == "ref"))
        .filter(|p| readonly(p.direction) && !declared.contains(p.name.name.as_str()))
        .map(|p| p.name.name.as_str())
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    assignments(&body.stmts, &mut |lhs| match root(lhs) {
        Some(n) if names.contains(n.name.as_str()) => {
            err(lhs.span, format!("`{}` is a read-only parameter (in or directionless)", n.name))
        }
        _ => Ok(()),
    })
}

fn declared_names<'a>(list: &'a [crate::ast::Stmt], out: &mut HashSet<&'a str>) {
    for s in list {
        match &s.kind {
            StmtKind::Decl(d) => out.extend(d.kind.name().map(|n| n.name.as_str())),
            StmtKind::ForIn { name, .. } => {
                out.insert(name.name.as_str());
            }
            _ => {}
        }
        children(s).into_iter().for_each(|c| declared_names(c, out));
    }
}

/// Call `f` on the target of every assignment (plain and compound) in `list`.
fn assignments(list: &[crate::ast::Stmt], f: &mut dyn FnMut(&Expr) -> DResult<()>) -> DResult<()> {
    for s in list {
        if let StmtKind::Assign { lhs, .. } | StmtKind::CompoundAssign { lhs, .. } = &s.kind {
            f(lhs)?;
        }
        children(s).into_iter().try_for_each(|c| assignments(c, f))?;
    }
    Ok(())
}

/// The variable an lvalue is part of (`a` in `a.b[1][3:0]`).
fn root(e: &Expr) -> Option<&Ident> {
    match &e.kind {
        ExprKind::Name(n) => Some(n),
        ExprKind::Member(b, _) | ExprKind::Index(b, _) => root(b),
        ExprKind::Slice { base, .. } => root(base),
        _ => None,
    }
}

/// Whether every path through `list` ends in `return` or `exit`.
fn returns(list: &[crate::ast::Stmt]) -> bool {
    list.iter().any(|s| match &s.kind {
        StmtKind::Return(_) | StmtKind::Exit => true,
        StmtKind::Block(b) => returns(&b.stmts),
        // A literal condition decides the branch (p4c folds it before its own check).
        StmtKind::If { cond, then, .. } if matches!(cond.kind, ExprKind::Bool(true)) => {
            returns(std::slice::from_ref(then))
        }
        StmtKind::If { cond, els: Some(e), .. } if matches!(cond.kind, ExprKind::Bool(false)) => {
            returns(std::slice::from_ref(e))
        }
        StmtKind::If { then, els: Some(e), .. } => {
            returns(std::slice::from_ref(then)) && returns(std::slice::from_ref(e))
        }
        StmtKind::Switch { cases, .. } => {
            let has_default =
                cases.iter().flat_map(|c| &c.labels).any(|l| matches!(l.kind, ExprKind::Default));
            // A label without a body falls through to the next one with a body.
            has_default && cases.iter().filter_map(|c| c.body.as_ref()).all(|b| returns(&b.stmts))
        }
        _ => false,
    })
}

/// Each name at most once.
fn unique<'a>(names: impl Iterator<Item = &'a Ident>, scope: &str) -> DResult<()> {
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for n in names {
        if seen.insert(n.name.as_str(), n.span).is_some() {
            return err(n.span, format!("`{}` is declared twice {scope}", n.name));
        }
    }
    Ok(())
}

fn err<T>(span: Span, msg: impl Into<String>) -> DResult<T> {
    Err(Diagnostic::new(span, msg))
}
