//! Recursive-descent parser from preprocessed tokens to the [`ast`](crate::ast).
//!
//! P4 needs to know which names are types (`T x;` declares, `t.apply();` calls), so the parser
//! tracks declared type names and type parameters in scope, as p4c's lexer does. Angle brackets
//! after a name are tried as type arguments only when a type follows (`hash<bit<16>>(..)`), and
//! two adjacent `>` form a shift. Nesting is bounded so hostile input cannot overflow the stack.

mod decl;
mod expr;
mod stmt;

use std::collections::HashSet;

use crate::ast::*;
use crate::budget::{Budget, Exceeded, Limits};
use crate::diag::{DResult, Diagnostic, Span};
use crate::lexer::{Tok, Token};

/// Words that can never be used as names.
pub const KEYWORDS: &[&str] = &[
    "abstract",
    "action",
    "apply",
    "bit",
    "bool",
    "break",
    "const",
    "continue",
    "control",
    "default",
    "else",
    "entries",
    "enum",
    "error",
    "exit",
    "extern",
    "false",
    "for",
    "header",
    "header_union",
    "if",
    "in",
    "inout",
    "int",
    "match_kind",
    "out",
    "package",
    "parser",
    "return",
    "select",
    "state",
    "string",
    "struct",
    "switch",
    "table",
    "transition",
    "true",
    "tuple",
    "type",
    "typedef",
    "varbit",
    "value_set",
    "void",
];

/// Reserved words the grammar still accepts as names (p4c's `nonTypeName`): v1model itself
/// names a parameter `type`.
const CONTEXTUAL_NAMES: &[&str] =
    &["apply", "key", "actions", "state", "entries", "type", "priority"];

/// Parse a preprocessed token stream (ending in `Eof`) into a program.
pub fn parse(tokens: Vec<Token>) -> DResult<Program> {
    parse_with(tokens, &Limits::default())
}

/// [`parse`] under `limits`: nesting (parentheses, blocks, types) deeper than
/// `limits.nesting_depth`, and expression trees taller than that (a long `a + b + ...` is a
/// tall tree even though it is parsed in a loop), are refused rather than risking the stack
/// of every pass that walks them.
pub fn parse_with(tokens: Vec<Token>, limits: &Limits) -> DResult<Program> {
    let mut p = Parser::new(tokens);
    p.max_depth = limits.nesting_depth;
    let mut decls = Vec::new();
    while !p.at_eof() {
        if p.eat_punct(";") {
            continue;
        }
        decls.push(p.top_decl()?);
    }
    Ok(Program { decls })
}

/// The expressions of an annotation's body, separated by commas (`@field_list(A.b, 2)`).
pub(crate) fn annotation_exprs(body: &[Token]) -> DResult<Vec<crate::ast::Expr>> {
    let mut p = Parser::new(body.to_vec());
    let mut out = Vec::new();
    while !p.at_eof() {
        out.push(p.expr()?);
        if !p.eat_punct(",") {
            break;
        }
    }
    if !p.at_eof() {
        return Err(crate::diag::Diagnostic::new(
            p.toks[p.pos].span,
            "expected `,` between the annotation's expressions",
        ));
    }
    Ok(out)
}

pub(crate) struct Parser {
    toks: Vec<Token>,
    pos: usize,
    type_names: HashSet<String>,
    type_params: Vec<Vec<String>>,
    depth: usize,
    max_depth: usize,
}

impl Parser {
    fn new(mut toks: Vec<Token>) -> Self {
        if !toks.last().is_some_and(|t| t.tok == Tok::Eof) {
            let span = toks.last().map(|t| t.span).unwrap_or_default();
            toks.push(Token { tok: Tok::Eof, span });
        }
        // Directives the preprocessor did not consume have no meaning to the parser.
        toks.retain(|t| !matches!(t.tok, Tok::Directive(_)));
        Parser {
            toks,
            pos: 0,
            type_names: HashSet::new(),
            type_params: Vec::new(),
            depth: 0,
            max_depth: Limits::default().nesting_depth,
        }
    }

    // ---- cursor -------------------------------------------------------------------------------

    fn peek(&self) -> &Token {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> &Token {
        let last = self.toks.len() - 1;
        &self.toks[(self.pos + n).min(last)]
    }

    fn at_eof(&self) -> bool {
        self.peek().tok == Tok::Eof
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if t.tok != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn span(&self) -> Span {
        self.peek().span
    }

    /// The span from `start` to the end of the last consumed token.
    fn since(&self, start: Span) -> Span {
        let end = self.toks[self.pos.saturating_sub(1)].span;
        start.to(end)
    }

    fn is_punct(&self, p: &str) -> bool {
        self.peek().is_punct(p)
    }

    fn is_kw(&self, kw: &str) -> bool {
        self.peek().is_ident(kw)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        if self.is_punct(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn unexpected(&self, wanted: &str) -> Diagnostic {
        let t = self.peek();
        Diagnostic::new(t.span, format!("expected {wanted}, found {}", t.describe()))
    }

    fn expect_punct(&mut self, p: &str) -> DResult<Span> {
        if self.is_punct(p) {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(&format!("`{p}`")))
        }
    }

    fn expect_kw(&mut self, kw: &str) -> DResult<Span> {
        if self.is_kw(kw) {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(&format!("`{kw}`")))
        }
    }

    /// A `>` closing type arguments; a `>>` written without space counts as two.
    fn expect_close_angle(&mut self) -> DResult<()> {
        self.expect_punct(">").map(|_| ())
    }

    /// A name that is not a reserved word.
    fn ident(&mut self, what: &str) -> DResult<Ident> {
        match &self.peek().tok {
            Tok::Ident(name)
                if !KEYWORDS.contains(&name.as_str())
                    || CONTEXTUAL_NAMES.contains(&name.as_str()) =>
            {
                let t = self.bump();
                let Tok::Ident(name) = t.tok else { unreachable!("checked above") };
                Ok(Ident { name, span: t.span })
            }
            Tok::Ident(name) => Err(Diagnostic::new(
                self.span(),
                format!("expected {what}, found the reserved word `{name}`"),
            )),
            _ => Err(self.unexpected(what)),
        }
    }

    /// A name where the grammar also allows a few keywords (`apply`, `state`, ... as member names).
    fn member_name(&mut self) -> DResult<Ident> {
        match &self.peek().tok {
            Tok::Ident(_) => {
                let t = self.bump();
                let Tok::Ident(name) = t.tok else { unreachable!("checked above") };
                Ok(Ident { name, span: t.span })
            }
            _ => Err(self.unexpected("a name")),
        }
    }

    fn enter(&mut self) -> DResult<()> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(Diagnostic::over_budget(
                self.span(),
                format!("the program nests deeper than {}", self.max_depth),
                self.depth_exceeded(),
            ));
        }
        Ok(())
    }

    fn depth_exceeded(&self) -> Exceeded {
        Exceeded { budget: Budget::NestingDepth, limit: self.max_depth as u64 }
    }

    /// Refuse an expression (or type) tree of `height` nodes from root to leaf if that is over
    /// the nesting budget; `span` is where the tree is.
    fn check_height(&self, height: usize, span: Span, what: &str) -> DResult<()> {
        if height > self.max_depth {
            return Err(Diagnostic::over_budget(
                span,
                format!("{what} nests deeper than {}", self.max_depth),
                self.depth_exceeded(),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    // ---- type names ---------------------------------------------------------------------------

    fn declare_type(&mut self, name: &Ident) {
        self.type_names.insert(name.name.clone());
    }

    fn is_type_name(&self, name: &str) -> bool {
        self.type_names.contains(name)
            || self.type_params.iter().any(|s| s.iter().any(|n| n == name))
    }

    /// Does a type start at the current token?
    fn at_type_start(&self) -> bool {
        self.at_type_start_at(0)
    }

    fn at_type_start_at(&self, n: usize) -> bool {
        match &self.peek_at(n).tok {
            Tok::Ident(name) => {
                matches!(
                    name.as_str(),
                    "bit" | "int" | "varbit" | "bool" | "string" | "void" | "tuple" | "match_kind"
                ) || (name == "error" && !self.peek_at(n + 1).is_punct("."))
                    || (self.is_type_name(name) && !self.peek_at(n + 1).is_punct("."))
            }
            _ => false,
        }
    }

    /// `<A, B>` type parameters (declared as type names for the duration of the declaration).
    fn type_params(&mut self) -> DResult<Vec<Ident>> {
        let mut params = Vec::new();
        if self.eat_punct("<") {
            loop {
                params.push(self.ident("a type parameter")?);
                if !self.eat_punct(",") {
                    break;
                }
            }
            self.expect_close_angle()?;
        }
        Ok(params)
    }

    fn push_type_params(&mut self, params: &[Ident]) {
        self.type_params.push(params.iter().map(|p| p.name.clone()).collect());
    }

    fn pop_type_params(&mut self) {
        self.type_params.pop();
    }

    // ---- annotations --------------------------------------------------------------------------

    fn annotations(&mut self) -> DResult<Vec<Annotation>> {
        let mut out = Vec::new();
        while self.is_punct("@") {
            let start = self.bump().span;
            let name = self.member_name()?;
            let mut body = Vec::new();
            let (open, close) = if self.is_punct("(") {
                ("(", ")")
            } else if self.is_punct("[") {
                ("[", "]")
            } else {
                ("", "")
            };
            if !open.is_empty() && self.peek().span.lo == name.span.hi {
                self.bump();
                let mut depth = 0usize;
                loop {
                    if self.at_eof() {
                        return Err(Diagnostic::new(
                            start,
                            format!("unterminated annotation @{}", name.name),
                        ));
                    }
                    if self.is_punct(open) {
                        depth += 1;
                    } else if self.is_punct(close) {
                        if depth == 0 {
                            self.bump();
                            break;
                        }
                        depth -= 1;
                    }
                    body.push(self.bump());
                }
            }
            out.push(Annotation { span: self.since(start), name, body });
        }
        Ok(out)
    }

    // ---- types --------------------------------------------------------------------------------

    pub(crate) fn ty(&mut self) -> DResult<Type> {
        self.enter()?;
        let r = self.ty_inner();
        self.leave();
        r
    }

    fn ty_inner(&mut self) -> DResult<Type> {
        let start = self.span();
        let Tok::Ident(word) = self.peek().tok.clone() else {
            return Err(self.unexpected("a type"));
        };
        let kind = match word.as_str() {
            "bool" => {
                self.bump();
                TypeKind::Bool
            }
            "error" => {
                self.bump();
                TypeKind::Error
            }
            "string" => {
                self.bump();
                TypeKind::String
            }
            "void" => {
                self.bump();
                TypeKind::Void
            }
            "match_kind" => {
                self.bump();
                TypeKind::MatchKind
            }
            "_" => {
                self.bump();
                TypeKind::DontCare
            }
            "bit" | "int" | "varbit" => {
                self.bump();
                let width = if self.eat_punct("<") {
                    let w = if self.eat_punct("(") {
                        let e = self.expr()?;
                        self.expect_punct(")")?;
                        e
                    } else {
                        self.primary_expr()?
                    };
                    self.expect_close_angle()?;
                    w
                } else if word == "varbit" {
                    return Err(self.unexpected("`<` after varbit"));
                } else if word == "int" {
                    return Ok(Type { kind: TypeKind::InfInt, span: self.since(start) });
                } else {
                    Expr {
                        kind: ExprKind::Int { value: 1, width: None, signed: false },
                        span: start,
                    }
                };
                match word.as_str() {
                    "bit" => TypeKind::Bit(Box::new(width)),
                    "int" => TypeKind::Int(Box::new(width)),
                    _ => TypeKind::Varbit(Box::new(width)),
                }
            }
            "tuple" => {
                self.bump();
                self.expect_punct("<")?;
                let args = self.type_args_after_open()?;
                TypeKind::Tuple(args)
            }
            _ => {
                let name = self.ident("a type")?;
                if !self.is_type_name(&name.name) {
                    return Err(Diagnostic::new(
                        name.span,
                        format!("unknown type `{}`", name.name),
                    ));
                }
                let args =
                    if self.eat_punct("<") { self.type_args_after_open()? } else { Vec::new() };
                TypeKind::Named { name, args }
            }
        };
        let mut ty = Type { kind, span: self.since(start) };
        let mut height = None;
        while self.is_punct("[") {
            self.bump();
            let size = self.expr()?;
            self.expect_punct("]")?;
            // `T[1][1]...` is a tall type built in a loop, not by recursion.
            let h = 1 + height.unwrap_or_else(|| ty.height()).max(size.height());
            self.check_height(h, self.since(start), "a type")?;
            height = Some(h);
            ty = Type {
                span: self.since(start),
                kind: TypeKind::Stack { elem: Box::new(ty), size: Box::new(size) },
            };
        }
        Ok(ty)
    }

    /// `T, U>` after an opening `<` (a type argument may be `_`).
    fn type_args_after_open(&mut self) -> DResult<Vec<Type>> {
        let mut args = Vec::new();
        if self.is_punct(">") {
            self.bump();
            return Ok(args);
        }
        loop {
            args.push(self.ty()?);
            if !self.eat_punct(",") {
                break;
            }
        }
        self.expect_close_angle()?;
        Ok(args)
    }

    /// Try `<types>` here; on failure rewind and return `None`.
    fn try_type_args(&mut self) -> Option<Vec<Type>> {
        if !self.is_punct("<") {
            return None;
        }
        let next = self.peek_at(1);
        let plausible = next.is_punct(">") || next.is_ident("_") || self.at_type_start_at(1);
        if !plausible {
            return None;
        }
        let save = self.pos;
        let depth = self.depth;
        self.bump();
        match self.type_args_after_open() {
            Ok(args) => Some(args),
            Err(_) => {
                self.pos = save;
                self.depth = depth;
                None
            }
        }
    }

    // ---- parameters and arguments -------------------------------------------------------------

    fn params(&mut self) -> DResult<Vec<Param>> {
        self.expect_punct("(")?;
        let mut params = Vec::new();
        if self.eat_punct(")") {
            return Ok(params);
        }
        loop {
            let annotations = self.annotations()?;
            let direction = if self.eat_kw("inout") {
                Direction::InOut
            } else if self.eat_kw("in") {
                Direction::In
            } else if self.eat_kw("out") {
                Direction::Out
            } else {
                Direction::None
            };
            let ty = self.ty()?;
            let name = self.ident("a parameter name")?;
            let default = if self.eat_punct("=") { Some(self.expr()?) } else { None };
            params.push(Param { annotations, direction, ty, name, default });
            if !self.eat_punct(",") {
                break;
            }
        }
        self.expect_punct(")")?;
        Ok(params)
    }

    /// `(a, name = b, _)`: call arguments after the opening parenthesis has been seen.
    fn args(&mut self) -> DResult<Vec<Arg>> {
        self.expect_punct("(")?;
        let mut args = Vec::new();
        if self.eat_punct(")") {
            return Ok(args);
        }
        loop {
            let named = matches!(self.peek().tok, Tok::Ident(_)) && self.peek_at(1).is_punct("=");
            let name = if named {
                let n = self.member_name()?;
                self.bump();
                Some(n)
            } else {
                None
            };
            let value = if self.is_kw("_") {
                let s = self.bump().span;
                Expr { kind: ExprKind::DontCare, span: s }
            } else {
                self.expr()?
            };
            args.push(Arg { name, value });
            if !self.eat_punct(",") {
                break;
            }
        }
        self.expect_punct(")")?;
        Ok(args)
    }
}

#[cfg(test)]
mod tests;
