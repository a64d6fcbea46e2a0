//! Declarations: types, externs, actions, functions, parsers, controls, tables, instances.

use super::Parser;
use crate::ast::*;
use crate::diag::{DResult, Diagnostic, Span};
use crate::lexer::Tok;

impl Parser {
    pub(crate) fn top_decl(&mut self) -> DResult<Decl> {
        let start = self.span();
        let annotations = self.annotations()?;
        let Tok::Ident(word) = self.peek().tok.clone() else {
            return Err(self.unexpected("a declaration"));
        };
        let kind = match word.as_str() {
            "const" => return self.const_decl(annotations),
            "typedef" | "type" => {
                self.bump();
                let ty = self.ty()?;
                let name = self.ident("a type name")?;
                self.expect_punct(";")?;
                self.declare_type(&name);
                if word == "typedef" {
                    DeclKind::Typedef { ty, name }
                } else {
                    DeclKind::NewType { ty, name }
                }
            }
            "header" | "header_union" | "struct" => {
                self.bump();
                let name = self.ident("a type name")?;
                // Declared first: a struct may not contain itself, but the error is clearer later.
                self.declare_type(&name);
                let type_params = self.type_params()?;
                self.push_type_params(&type_params);
                let fields = self.fields();
                self.pop_type_params();
                let fields = fields?;
                match word.as_str() {
                    "header" => DeclKind::Header { name, type_params, fields },
                    "header_union" => DeclKind::HeaderUnion { name, type_params, fields },
                    _ => DeclKind::Struct { name, type_params, fields },
                }
            }
            "enum" => self.enum_decl()?,
            "error" | "match_kind" => {
                self.bump();
                let members = self.name_list()?;
                if word == "error" {
                    DeclKind::Error { members }
                } else {
                    DeclKind::MatchKind { members }
                }
            }
            "extern" => self.extern_decl()?,
            "action" => self.action_decl()?,
            "parser" => self.parser_decl()?,
            "control" => self.control_decl()?,
            "package" => {
                self.bump();
                let name = self.ident("a package name")?;
                self.declare_type(&name);
                let type_params = self.type_params()?;
                self.push_type_params(&type_params);
                let params = self.params();
                self.pop_type_params();
                let params = params?;
                self.expect_punct(";")?;
                DeclKind::PackageType { name, type_params, params }
            }
            "table" => {
                return Err(self.unexpected("a declaration (tables belong inside a control)"))
            }
            _ if self.at_type_start() || self.is_type_name(&word) => {
                // A function `T name(...) {...}`, a generic function, or an instance `T(...) name;`.
                let save = self.pos;
                let ty = self.ty()?;
                if self.is_punct("(") {
                    self.pos = save;
                    return self.var_or_instance(annotations);
                }
                let name = self.ident("a function or instance name")?;
                let type_params = self.type_params()?;
                self.push_type_params(&type_params);
                let params = self.params();
                let body = params.and_then(|p| Ok((p, self.block()?)));
                self.pop_type_params();
                let (params, body) = body?;
                DeclKind::Function { ret: ty, name, type_params, params, body }
            }
            _ => {
                let t = self.peek();
                let what = if let Tok::Ident(n) = &t.tok {
                    format!("unknown type `{n}` (or a declaration this front-end does not support)")
                } else {
                    format!("expected a declaration, found {}", t.describe())
                };
                return Err(Diagnostic::new(t.span, what));
            }
        };
        Ok(Decl { annotations, kind, span: self.since(start) })
    }

    pub(crate) fn const_decl(&mut self, annotations: Vec<Annotation>) -> DResult<Decl> {
        let start = self.expect_kw("const")?;
        let ty = self.ty()?;
        let name = self.ident("a constant name")?;
        self.expect_punct("=")?;
        let value = self.expr()?;
        self.expect_punct(";")?;
        Ok(Decl { annotations, kind: DeclKind::Const { ty, name, value }, span: self.since(start) })
    }

    /// `T name [= init];` or `T(args) name;` (the type at the cursor).
    pub(crate) fn var_or_instance(&mut self, annotations: Vec<Annotation>) -> DResult<Decl> {
        let start = self.span();
        let ty = self.ty()?;
        let kind = if self.is_punct("(") {
            let args = self.args()?;
            let name = self.ident("an instance name")?;
            if self.is_punct("=") {
                return Err(Diagnostic::new(
                    self.span(),
                    "instance initialisers (`= {...}`) are not supported",
                ));
            }
            DeclKind::Instantiation { ty, args, name }
        } else {
            let name = self.ident("a variable name")?;
            let init = if self.eat_punct("=") { Some(self.expr()?) } else { None };
            DeclKind::Variable { ty, name, init }
        };
        self.expect_punct(";")?;
        Ok(Decl { annotations, kind, span: self.since(start) })
    }

    fn fields(&mut self) -> DResult<Vec<Field>> {
        self.expect_punct("{")?;
        let mut fields = Vec::new();
        while !self.eat_punct("}") {
            let annotations = self.annotations()?;
            let ty = self.ty()?;
            let name = self.member_name()?;
            self.expect_punct(";")?;
            fields.push(Field { annotations, ty, name });
        }
        Ok(fields)
    }

    /// `{ a, b, c }` (a trailing comma allowed).
    fn name_list(&mut self) -> DResult<Vec<Ident>> {
        self.expect_punct("{")?;
        let mut names = Vec::new();
        while !self.eat_punct("}") {
            names.push(self.member_name()?);
            if !self.eat_punct(",") {
                self.expect_punct("}")?;
                break;
            }
        }
        Ok(names)
    }

    fn enum_decl(&mut self) -> DResult<DeclKind> {
        self.expect_kw("enum")?;
        let underlying =
            if self.is_kw("bit") || self.is_kw("int") { Some(self.ty()?) } else { None };
        let name = self.ident("an enum name")?;
        self.declare_type(&name);
        self.expect_punct("{")?;
        let mut members = Vec::new();
        while !self.eat_punct("}") {
            let member = self.member_name()?;
            let value = if self.eat_punct("=") { Some(self.expr()?) } else { None };
            if value.is_none() && underlying.is_some() {
                return Err(Diagnostic::new(
                    member.span,
                    "members of a serializable enum need `= value`",
                ));
            }
            members.push((member, value));
            if !self.eat_punct(",") {
                self.expect_punct("}")?;
                break;
            }
        }
        Ok(DeclKind::Enum { name, underlying, members })
    }

    fn extern_decl(&mut self) -> DResult<DeclKind> {
        self.expect_kw("extern")?;
        // `extern Name {` or `extern Name<T> {` declare an object; anything else is a function.
        let is_object = matches!(self.peek().tok, Tok::Ident(_)) && {
            let save = self.pos;
            self.bump();
            let ok = self.type_params().is_ok() && self.is_punct("{");
            self.pos = save;
            ok
        };
        if !is_object {
            let m = self.method(None)?;
            self.expect_punct(";")?;
            return Ok(DeclKind::ExternFunction(m));
        }
        let name = self.ident("an extern name")?;
        self.declare_type(&name);
        let type_params = self.type_params()?;
        self.push_type_params(&type_params);
        let methods = self.extern_body(&name);
        self.pop_type_params();
        Ok(DeclKind::Extern { name, type_params, methods: methods? })
    }

    fn extern_body(&mut self, name: &Ident) -> DResult<Vec<Method>> {
        self.expect_punct("{")?;
        let mut methods = Vec::new();
        while !self.eat_punct("}") {
            if self.at_eof() {
                return Err(Diagnostic::new(name.span, "unclosed extern"));
            }
            let m = self.method(Some(name))?;
            self.expect_punct(";")?;
            methods.push(m);
        }
        Ok(methods)
    }

    /// `[abstract] RetType name<T>(params)` or a constructor `Name(params)`.
    fn method(&mut self, owner: Option<&Ident>) -> DResult<Method> {
        let start = self.span();
        let annotations = self.annotations()?;
        let is_abstract = self.eat_kw("abstract");
        let is_ctor =
            owner.is_some_and(|o| self.peek().is_ident(&o.name) && self.peek_at(1).is_punct("("));
        let (ret, name) = if is_ctor {
            (None, self.ident("a constructor")?)
        } else {
            // The return type may use the method's own type parameters (`T lookahead<T>()`):
            // find them first.
            let save = self.pos;
            let mut scan = Vec::new();
            let mut depth = 0usize;
            while !(self.at_eof() || (depth == 0 && self.is_punct("("))) {
                if self.is_punct("<") {
                    depth += 1;
                } else if self.is_punct(">") {
                    depth = depth.saturating_sub(1);
                }
                scan.push(self.bump());
            }
            self.pos = save;
            let generic: Vec<Ident> = match scan.iter().rposition(|t| t.is_punct("<")) {
                Some(open) if open > 0 && scan.last().is_some_and(|t| t.is_punct(">")) => scan
                    [open + 1..]
                    .iter()
                    .filter_map(|t| match &t.tok {
                        Tok::Ident(n) => Some(Ident { name: n.clone(), span: t.span }),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            self.push_type_params(&generic);
            let ret = self.ty();
            self.pop_type_params();
            (Some(ret?), self.member_name()?)
        };
        let type_params = self.type_params()?;
        self.push_type_params(&type_params);
        let params = self.params();
        self.pop_type_params();
        Ok(Method {
            annotations,
            is_abstract,
            ret,
            name,
            type_params,
            params: params?,
            span: self.since(start),
        })
    }

    fn action_decl(&mut self) -> DResult<DeclKind> {
        self.expect_kw("action")?;
        let name = self.ident("an action name")?;
        let params = self.params()?;
        let body = self.block()?;
        Ok(DeclKind::Action { name, params, body })
    }

    /// `parser Name<T>(params);` (a type) or `parser Name(params)(ctor) { locals states }`.
    fn parser_decl(&mut self) -> DResult<DeclKind> {
        self.generic_block("parser", Self::parser_rest)
    }

    /// `kw Name<T>` then `rest`, with the type parameters in scope while it parses.
    fn generic_block(
        &mut self,
        kw: &str,
        rest: fn(&mut Self, Ident, Vec<Ident>) -> DResult<DeclKind>,
    ) -> DResult<DeclKind> {
        self.expect_kw(kw)?;
        let name = self.ident(&format!("a {kw} name"))?;
        self.declare_type(&name);
        let type_params = self.type_params()?;
        self.push_type_params(&type_params);
        let r = rest(self, name, type_params);
        self.pop_type_params();
        r
    }

    fn parser_rest(&mut self, name: Ident, type_params: Vec<Ident>) -> DResult<DeclKind> {
        let params = self.params()?;
        if self.eat_punct(";") {
            return Ok(DeclKind::ParserType { name, type_params, params });
        }
        let ctor_params = if self.is_punct("(") { self.params()? } else { Vec::new() };
        self.expect_punct("{")?;
        let mut locals = Vec::new();
        let mut states = Vec::new();
        while !self.eat_punct("}") {
            if self.at_eof() {
                return Err(Diagnostic::new(name.span, format!("unclosed parser {}", name.name)));
            }
            let start = self.span();
            let annotations = self.annotations()?;
            if self.is_kw("state") {
                states.push(self.parser_state(annotations, start)?);
            } else if self.is_kw("const") {
                locals.push(self.const_decl(annotations)?);
            } else if self.is_kw("value_set") {
                locals.push(self.value_set(annotations)?);
            } else if self.at_type_start() {
                locals.push(self.var_or_instance(annotations)?);
            } else {
                return Err(self.unexpected("a parser state or local declaration"));
            }
        }
        Ok(DeclKind::Parser { name, type_params, params, ctor_params, locals, states })
    }

    fn value_set(&mut self, annotations: Vec<Annotation>) -> DResult<Decl> {
        let start = self.expect_kw("value_set")?;
        self.expect_punct("<")?;
        let ty = self.ty()?;
        self.expect_close_angle()?;
        self.expect_punct("(")?;
        let size = self.expr()?;
        self.expect_punct(")")?;
        let name = self.ident("a value set name")?;
        self.expect_punct(";")?;
        Ok(Decl {
            annotations,
            kind: DeclKind::ValueSet { ty, size, name },
            span: self.since(start),
        })
    }

    fn parser_state(&mut self, annotations: Vec<Annotation>, start: Span) -> DResult<ParserState> {
        self.expect_kw("state")?;
        let name = self.ident("a state name")?;
        self.expect_punct("{")?;
        let mut stmts = Vec::new();
        let mut transition = None;
        while !self.eat_punct("}") {
            if self.at_eof() {
                return Err(Diagnostic::new(name.span, format!("unclosed state {}", name.name)));
            }
            if transition.is_some() {
                return Err(self.unexpected("`}` (the transition ends the state)"));
            }
            if self.is_kw("transition") {
                transition = Some(self.transition()?);
            } else {
                stmts.push(self.stmt()?);
            }
        }
        Ok(ParserState { annotations, name, stmts, transition, span: self.since(start) })
    }

    fn transition(&mut self) -> DResult<Transition> {
        self.expect_kw("transition")?;
        if !self.is_kw("select") {
            let next = self.member_name()?;
            self.expect_punct(";")?;
            return Ok(Transition::Goto(next));
        }
        let start = self.bump().span;
        self.expect_punct("(")?;
        let mut exprs = Vec::new();
        loop {
            exprs.push(self.expr()?);
            if !self.eat_punct(",") {
                break;
            }
        }
        self.expect_punct(")")?;
        self.expect_punct("{")?;
        let mut cases = Vec::new();
        while !self.eat_punct("}") {
            if self.at_eof() {
                return Err(Diagnostic::new(start, "unclosed select"));
            }
            let case_start = self.span();
            let keyset = self.keyset()?;
            self.expect_punct(":")?;
            let next = self.member_name()?;
            self.expect_punct(";")?;
            cases.push(SelectCase { keyset, next, span: self.since(case_start) });
        }
        // `transition select(...) {...}` may or may not end with `;`.
        self.eat_punct(";");
        Ok(Transition::Select { exprs, cases, span: self.since(start) })
    }

    /// `control Name<T>(params);` (a type) or a control with locals and an `apply` block.
    fn control_decl(&mut self) -> DResult<DeclKind> {
        self.generic_block("control", Self::control_rest)
    }

    fn control_rest(&mut self, name: Ident, type_params: Vec<Ident>) -> DResult<DeclKind> {
        let params = self.params()?;
        if self.eat_punct(";") {
            return Ok(DeclKind::ControlType { name, type_params, params });
        }
        let ctor_params = if self.is_punct("(") { self.params()? } else { Vec::new() };
        self.expect_punct("{")?;
        let mut locals = Vec::new();
        loop {
            if self.at_eof() || self.is_punct("}") {
                return Err(Diagnostic::new(
                    name.span,
                    format!("control {} has no apply block", name.name),
                ));
            }
            let start = self.span();
            let annotations = self.annotations()?;
            if self.is_kw("apply") {
                self.bump();
                let body = self.block()?;
                self.expect_punct("}")?;
                return Ok(DeclKind::Control {
                    name,
                    type_params,
                    params,
                    ctor_params,
                    locals,
                    body,
                });
            }
            let kind = if self.is_kw("action") {
                self.action_decl()?
            } else if self.is_kw("table") {
                self.table_decl()?
            } else if self.is_kw("const") {
                locals.push(self.const_decl(annotations)?);
                continue;
            } else if self.at_type_start() {
                locals.push(self.var_or_instance(annotations)?);
                continue;
            } else {
                return Err(self.unexpected("an action, table, declaration or `apply`"));
            };
            locals.push(Decl { annotations, kind, span: self.since(start) });
        }
    }

    fn table_decl(&mut self) -> DResult<DeclKind> {
        self.expect_kw("table")?;
        let name = self.ident("a table name")?;
        self.expect_punct("{")?;
        let mut props = Vec::new();
        while !self.eat_punct("}") {
            if self.at_eof() {
                return Err(Diagnostic::new(name.span, format!("unclosed table {}", name.name)));
            }
            props.push(self.table_property()?);
        }
        Ok(DeclKind::Table { name, props })
    }

    fn table_property(&mut self) -> DResult<TableProperty> {
        let start = self.span();
        let annotations = self.annotations()?;
        let is_const = self.eat_kw("const");
        let name = self.member_name()?;
        self.expect_punct("=")?;
        let value = match name.name.as_str() {
            "key" => {
                self.expect_punct("{")?;
                let mut keys = Vec::new();
                while !self.eat_punct("}") {
                    let expr = self.expr()?;
                    self.expect_punct(":")?;
                    let match_kind = self.member_name()?;
                    let annotations = self.annotations()?;
                    self.expect_punct(";")?;
                    keys.push(KeyElement { annotations, expr, match_kind });
                }
                PropertyValue::Key(keys)
            }
            "actions" => {
                self.expect_punct("{")?;
                let mut actions = Vec::new();
                while !self.eat_punct("}") {
                    actions.push(self.action_ref()?);
                    self.expect_punct(";")?;
                }
                PropertyValue::Actions(actions)
            }
            "entries" => {
                self.expect_punct("{")?;
                let mut entries = Vec::new();
                while !self.eat_punct("}") {
                    if self.at_eof() {
                        return Err(Diagnostic::new(start, "unclosed entries"));
                    }
                    entries.push(self.entry()?);
                }
                PropertyValue::Entries(entries)
            }
            "default_action" => {
                let a = self.action_ref()?;
                PropertyValue::Actions(vec![a])
            }
            _ => PropertyValue::Expr(self.expr()?),
        };
        // `key`, `actions` and `entries` end with their `}`; some programs add a `;` anyway.
        let braced = matches!(name.name.as_str(), "key" | "actions" | "entries");
        if !braced || self.is_punct(";") {
            self.expect_punct(";")?;
        }
        Ok(TableProperty { annotations, is_const, name, value, span: self.since(start) })
    }

    /// `[@anno] name` or `name(args)` or `.name(args)`.
    fn action_ref(&mut self) -> DResult<ActionRef> {
        let start = self.span();
        let annotations = self.annotations()?;
        let name = if self.eat_punct(".") {
            let n = self.member_name()?;
            Expr { span: n.span, kind: ExprKind::TopName(n) }
        } else {
            let n = self.member_name()?;
            Expr { span: n.span, kind: ExprKind::Name(n) }
        };
        let args = if self.is_punct("(") { self.args()? } else { Vec::new() };
        Ok(ActionRef { annotations, name, args, span: self.since(start) })
    }

    /// `[const] [priority = N :] keyset : action(args) [@anno];`
    fn entry(&mut self) -> DResult<Entry> {
        let start = self.span();
        let mut annotations = self.annotations()?;
        let is_const = self.eat_kw("const");
        let priority = if self.is_kw("priority") && self.peek_at(1).is_punct("=") {
            self.bump();
            self.bump();
            let p = self.expr()?;
            self.expect_punct(":")?;
            Some(p)
        } else {
            None
        };
        let keyset = self.keyset()?;
        self.expect_punct(":")?;
        let action = self.action_ref()?;
        // Annotations after the action (`: a(1) @priority(3);`) belong to the entry.
        annotations.extend(self.annotations()?);
        self.expect_punct(";")?;
        Ok(Entry { annotations, is_const, priority, keyset, action, span: self.since(start) })
    }
}
