//! Statements and blocks.

use super::Parser;
use crate::ast::*;
use crate::diag::{DResult, Diagnostic};
use crate::lexer::Tok;

impl Parser {
    pub(crate) fn block(&mut self) -> DResult<Block> {
        let start = self.expect_punct("{")?;
        self.enter()?;
        let mut stmts = Vec::new();
        while !self.is_punct("}") {
            if self.at_eof() {
                self.leave();
                return Err(Diagnostic::new(start, "unclosed `{`"));
            }
            match self.stmt() {
                Ok(s) => stmts.push(s),
                Err(e) => {
                    self.leave();
                    return Err(e);
                }
            }
        }
        self.leave();
        self.bump();
        Ok(Block { stmts, span: self.since(start) })
    }

    pub(crate) fn stmt(&mut self) -> DResult<Stmt> {
        let start = self.span();
        let annotations = self.annotations()?;
        if self.is_punct("{") {
            let b = self.block()?;
            return Ok(Stmt { span: b.span, kind: StmtKind::Block(b) });
        }
        if self.eat_punct(";") {
            return Ok(Stmt { kind: StmtKind::Empty, span: start });
        }
        if let Tok::Ident(word) = self.peek().tok.clone() {
            match word.as_str() {
                "if" => return self.if_stmt(),
                "switch" => return self.switch_stmt(),
                "for" => return self.for_stmt(),
                "break" | "continue" => {
                    self.bump();
                    self.expect_punct(";")?;
                    let kind = if word == "break" { StmtKind::Break } else { StmtKind::Continue };
                    return Ok(Stmt { kind, span: self.since(start) });
                }
                "exit" => {
                    self.bump();
                    self.expect_punct(";")?;
                    return Ok(Stmt { kind: StmtKind::Exit, span: self.since(start) });
                }
                "return" => {
                    self.bump();
                    let value = if self.is_punct(";") { None } else { Some(self.expr()?) };
                    self.expect_punct(";")?;
                    return Ok(Stmt { kind: StmtKind::Return(value), span: self.since(start) });
                }
                "const" => {
                    let d = self.const_decl(annotations)?;
                    return Ok(Stmt { span: d.span, kind: StmtKind::Decl(Box::new(d)) });
                }
                "transition" | "state" => {
                    return Err(self.unexpected(
                        "a statement (transitions belong at the end of a parser state)",
                    ));
                }
                _ if self.at_type_start() => {
                    let d = self.var_or_instance(annotations)?;
                    return Ok(Stmt { span: d.span, kind: StmtKind::Decl(Box::new(d)) });
                }
                _ => {}
            }
        }
        let s = self.assignment_or_call(start)?;
        self.expect_punct(";")?;
        Ok(Stmt { kind: s.kind, span: self.since(start) })
    }

    /// `for (init; cond; update) body` or `for (T x in lo .. hi) body`.
    fn for_stmt(&mut self) -> DResult<Stmt> {
        let start = self.expect_kw("for")?;
        self.expect_punct("(")?;
        // `T x in ...`: a type, a name, then `in`.
        if self.at_type_start() {
            let save = self.pos;
            let ty = self.ty()?;
            if let Tok::Ident(_) = self.peek().tok {
                if matches!(&self.peek_at(1).tok, Tok::Ident(w) if w == "in") {
                    let name = self.ident("a loop variable")?;
                    self.bump();
                    let lo = self.expr()?;
                    let range = if self.eat_punct("..") {
                        let hi = self.expr()?;
                        let span = lo.span.to(hi.span);
                        Expr { kind: ExprKind::Range(Box::new(lo), Box::new(hi)), span }
                    } else {
                        lo
                    };
                    self.expect_punct(")")?;
                    self.enter()?;
                    let body = self.stmt();
                    self.leave();
                    let body = Box::new(body?);
                    return Ok(Stmt {
                        kind: StmtKind::ForIn { ty, name, range, body },
                        span: self.since(start),
                    });
                }
            }
            self.pos = save;
        }
        let mut init = Vec::new();
        while !self.eat_punct(";") {
            if !init.is_empty() {
                self.expect_punct(",")?;
            }
            let at = self.span();
            if self.at_type_start() {
                // A declaration: `bit<8> i = 0` (without its `;`).
                let d = self.loop_variable()?;
                init.push(Stmt { span: d.span, kind: StmtKind::Decl(Box::new(d)) });
            } else {
                init.push(self.assignment_or_call(at)?);
            }
        }
        let cond = if self.is_punct(";") { None } else { Some(self.expr()?) };
        self.expect_punct(";")?;
        let mut update = Vec::new();
        while !self.eat_punct(")") {
            if !update.is_empty() {
                self.expect_punct(",")?;
            }
            let at = self.span();
            update.push(self.assignment_or_call(at)?);
        }
        self.enter()?;
        let body = self.stmt();
        self.leave();
        let body = Box::new(body?);
        Ok(Stmt { kind: StmtKind::For { init, cond, update, body }, span: self.since(start) })
    }

    /// `T name = value` in a `for` header.
    fn loop_variable(&mut self) -> DResult<Decl> {
        let start = self.span();
        let ty = self.ty()?;
        let name = self.ident("a variable name")?;
        let init = if self.eat_punct("=") { Some(self.expr()?) } else { None };
        Ok(Decl {
            annotations: Vec::new(),
            kind: DeclKind::Variable { ty, name, init },
            span: self.since(start),
        })
    }

    /// An assignment, compound assignment or call, without its `;`.
    fn assignment_or_call(&mut self, start: crate::diag::Span) -> DResult<Stmt> {
        let lhs = self.expr()?;
        // Operators the lexer splits: `<<=` is `<<` `=`, `>>=` is `>` `>=`, `|+|=` is `|+|` `=`.
        let split = match self.peek().tok {
            Tok::Punct("<<") if self.glued(1, "=") => Some(BinOp::Shl),
            Tok::Punct(">") if self.glued(1, ">=") => Some(BinOp::Shr),
            Tok::Punct("|+|") if self.glued(1, "=") => Some(BinOp::AddSat),
            Tok::Punct("|-|") if self.glued(1, "=") => Some(BinOp::SubSat),
            _ => None,
        };
        if split.is_some() {
            self.bump();
        }
        let compound = split.or(match self.peek().tok {
            Tok::Punct("+=") => Some(BinOp::Add),
            Tok::Punct("-=") => Some(BinOp::Sub),
            Tok::Punct("*=") => Some(BinOp::Mul),
            Tok::Punct("/=") => Some(BinOp::Div),
            Tok::Punct("%=") => Some(BinOp::Mod),
            Tok::Punct("&=") => Some(BinOp::BitAnd),
            Tok::Punct("|=") => Some(BinOp::BitOr),
            Tok::Punct("^=") => Some(BinOp::BitXor),
            _ => None,
        });
        let kind = if let Some(op) = compound {
            self.bump();
            StmtKind::CompoundAssign { op, lhs, rhs: self.expr()? }
        } else if self.eat_punct("=") {
            StmtKind::Assign { lhs, rhs: self.expr()? }
        } else if matches!(lhs.kind, ExprKind::Call { .. }) {
            StmtKind::Call(lhs)
        } else {
            return Err(Diagnostic::new(
                lhs.span,
                "expected a statement: an assignment or a call (an expression alone does nothing)",
            ));
        };
        Ok(Stmt { kind, span: self.since(start) })
    }

    fn if_stmt(&mut self) -> DResult<Stmt> {
        let start = self.expect_kw("if")?;
        self.expect_punct("(")?;
        let cond = self.expr()?;
        self.expect_punct(")")?;
        self.enter()?;
        let then = self.stmt();
        let els = match then {
            Ok(_) if self.eat_kw("else") => Some(self.stmt().map(Box::new)),
            _ => None,
        };
        self.leave();
        let then = Box::new(then?);
        let els = els.transpose()?;
        Ok(Stmt { kind: StmtKind::If { cond, then, els }, span: self.since(start) })
    }

    fn switch_stmt(&mut self) -> DResult<Stmt> {
        let start = self.expect_kw("switch")?;
        self.expect_punct("(")?;
        let expr = self.expr()?;
        self.expect_punct(")")?;
        self.expect_punct("{")?;
        let mut cases = Vec::new();
        while !self.eat_punct("}") {
            if self.at_eof() {
                return Err(Diagnostic::new(start, "unclosed switch"));
            }
            let case_start = self.span();
            let label = if self.is_kw("default") {
                let s = self.bump().span;
                Expr { kind: ExprKind::Default, span: s }
            } else {
                self.expr()?
            };
            self.expect_punct(":")?;
            let body = if self.is_punct("{") { Some(self.block()?) } else { None };
            cases.push(SwitchCase { labels: vec![label], body, span: self.since(case_start) });
        }
        // Fold fall-through labels into the case that has the body.
        let mut folded: Vec<SwitchCase> = Vec::new();
        let mut waiting: Vec<Expr> = Vec::new();
        for mut case in cases {
            if case.body.is_none() {
                waiting.append(&mut case.labels);
                continue;
            }
            waiting.append(&mut case.labels);
            case.labels = std::mem::take(&mut waiting);
            folded.push(case);
        }
        if !waiting.is_empty() {
            // Trailing labels with no body: they do nothing, but they are still labels.
            let span = waiting[0].span;
            folded.push(SwitchCase { labels: waiting, body: None, span });
        }
        Ok(Stmt { kind: StmtKind::Switch { expr, cases: folded }, span: self.since(start) })
    }
}
