//! Expressions, with p4c's precedence: unlike C, comparisons bind looser than `&`, `^`, `|`.

use super::Parser;
use crate::ast::*;
use crate::diag::{DResult, Diagnostic};
use crate::lexer::Tok;

/// Binding power of a binary operator (higher binds tighter).
fn precedence(op: BinOp) -> u8 {
    use BinOp::*;
    match op {
        Or => 1,
        And => 2,
        Eq | Ne => 3,
        Lt | Gt | Le | Ge => 4,
        BitOr => 5,
        BitXor => 6,
        BitAnd => 7,
        Shl | Shr => 8,
        Concat | Add | Sub | AddSat | SubSat => 9,
        Mul | Div | Mod => 10,
    }
}

impl Parser {
    /// Whether the token `k` ahead is `punct` and touches the one before it (`>` `>` is a
    /// shift, `>` `>=` a compound assignment; `> >` is neither).
    pub(super) fn glued(&self, k: usize, punct: &str) -> bool {
        let (before, t) = (self.peek_at(k - 1), self.peek_at(k));
        t.is_punct(punct) && t.span.lo == before.span.hi && t.span.file == before.span.file
    }

    /// The binary operator at the cursor and how many tokens it spans.
    fn binop(&self) -> Option<(BinOp, usize)> {
        let t = self.peek();
        let Tok::Punct(p) = t.tok else { return None };
        use BinOp::*;
        let op = match p {
            "*" => Mul,
            "/" => Div,
            "%" => Mod,
            "+" => Add,
            "-" => Sub,
            // Followed by an adjacent `=`, these are compound assignments, not operators.
            "|+|" | "|-|" | "<<" if self.glued(1, "=") => return None,
            "|+|" => AddSat,
            "|-|" => SubSat,
            "<<" => Shl,
            ">" if self.glued(1, ">=") => return None,
            ">" => {
                if self.glued(1, ">") {
                    return Some((Shr, 2));
                }
                Gt
            }
            "<" => Lt,
            "<=" => Le,
            ">=" => Ge,
            "==" => Eq,
            "!=" => Ne,
            "&" => BitAnd,
            "^" => BitXor,
            "|" => BitOr,
            "++" => Concat,
            "&&" => And,
            "||" => Or,
            _ => return None,
        };
        Some((op, 1))
    }

    pub(crate) fn expr(&mut self) -> DResult<Expr> {
        self.enter()?;
        let r = self.ternary();
        self.leave();
        let e = r?;
        // Every whole expression is measured: a tree's parts may each be within the budget
        // (parentheses nest by recursion, operator chains grow in loops) and still add up.
        self.check_height(e.height(), e.span, "an expression")?;
        Ok(e)
    }

    fn ternary(&mut self) -> DResult<Expr> {
        let cond = self.binary(1)?;
        if !self.eat_punct("?") {
            return Ok(cond);
        }
        let a = self.expr()?;
        self.expect_punct(":")?;
        let b = self.expr()?;
        let span = cond.span.to(b.span);
        Ok(Expr { kind: ExprKind::Ternary(Box::new(cond), Box::new(a), Box::new(b)), span })
    }

    fn binary(&mut self, min_prec: u8) -> DResult<Expr> {
        let mut lhs = self.unary()?;
        // `a + b + c ...` is parsed in this loop but is a left-leaning tree as tall as the
        // chain is long, so its height is kept here and checked as it grows: a tree over the
        // budget is never built (dropping it would recurse as deep).
        let mut height = None;
        while let Some((op, len)) = self.binop() {
            let prec = precedence(op);
            if prec < min_prec {
                break;
            }
            let op_span = self.span().to(self.peek_at(len - 1).span);
            self.pos += len;
            self.enter()?;
            let rhs = self.binary(prec + 1);
            self.leave();
            let rhs = rhs?;
            let span = lhs.span.to(rhs.span);
            let h = 1 + height.unwrap_or_else(|| lhs.height()).max(rhs.height());
            self.check_height(h, span, "an expression")?;
            height = Some(h);
            lhs = Expr { kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs), op_span), span };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> DResult<Expr> {
        let start = self.span();
        let op = match self.peek().tok {
            Tok::Punct("!") => Some(UnOp::Not),
            Tok::Punct("~") => Some(UnOp::BitNot),
            Tok::Punct("-") => Some(UnOp::Neg),
            Tok::Punct("+") => Some(UnOp::Plus),
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            self.enter()?;
            let e = self.unary();
            self.leave();
            let e = e?;
            return Ok(Expr { span: start.to(e.span), kind: ExprKind::Unary(op, Box::new(e)) });
        }
        // A cast: `(type) expr`, recognised when a whole type and `)` follow the parenthesis.
        if self.is_punct("(") && self.at_type_start_at(1) {
            let save = self.pos;
            self.bump();
            if let Ok(ty) = self.ty() {
                if self.eat_punct(")") {
                    self.enter()?;
                    let e = self.unary();
                    self.leave();
                    let e = e?;
                    return Ok(Expr {
                        span: start.to(e.span),
                        kind: ExprKind::Cast(ty, Box::new(e)),
                    });
                }
            }
            self.pos = save;
        }
        self.postfix()
    }

    fn postfix(&mut self) -> DResult<Expr> {
        let start = self.span();
        let mut e = self.primary_expr()?;
        // `a.b[1].c()...` grows in this loop; its height is checked as in `binary`.
        let mut height = None;
        loop {
            if let Some(h) = height {
                self.check_height(h, e.span, "an expression")?;
            }
            let below = height.unwrap_or_else(|| e.height());
            if self.eat_punct(".") {
                let name = self.member_name()?;
                height = Some(below + 1);
                e = Expr { span: start.to(name.span), kind: ExprKind::Member(Box::new(e), name) };
            } else if self.eat_punct("[") {
                let index = self.expr()?;
                if self.eat_punct(":") {
                    let lo = self.expr()?;
                    self.expect_punct("]")?;
                    height = Some(1 + below.max(index.height()).max(lo.height()));
                    e = Expr {
                        span: self.since(start),
                        kind: ExprKind::Slice {
                            base: Box::new(e),
                            hi: Box::new(index),
                            lo: Box::new(lo),
                        },
                    };
                } else {
                    self.expect_punct("]")?;
                    height = Some(1 + below.max(index.height()));
                    e = Expr {
                        span: self.since(start),
                        kind: ExprKind::Index(Box::new(e), Box::new(index)),
                    };
                }
            } else if self.is_punct("(") || (self.is_punct("<") && self.callable(&e)) {
                let type_args = match self.try_type_args() {
                    Some(args) if self.is_punct("(") => args,
                    Some(_) => return Err(self.unexpected("`(` after type arguments")),
                    None if self.is_punct("(") => Vec::new(),
                    None => return Ok(e),
                };
                let args = self.args()?;
                let parts = args
                    .iter()
                    .map(|a| a.value.height())
                    .chain(type_args.iter().map(Type::height))
                    .max()
                    .unwrap_or(0);
                height = Some(1 + below.max(parts));
                e = Expr {
                    span: self.since(start),
                    kind: ExprKind::Call { callee: Box::new(e), type_args, args },
                };
            } else {
                return Ok(e);
            }
        }
    }

    /// Whether `<` after this expression may open type arguments of a call.
    fn callable(&self, e: &Expr) -> bool {
        matches!(e.kind, ExprKind::Name(_) | ExprKind::Member(..) | ExprKind::TypeRef(_))
    }

    pub(crate) fn primary_expr(&mut self) -> DResult<Expr> {
        let start = self.span();
        let tok = self.peek().tok.clone();
        let kind = match tok {
            Tok::Int { value, width, signed } => {
                self.bump();
                ExprKind::Int { value, width, signed }
            }
            Tok::Str(s) => {
                self.bump();
                ExprKind::Str(s)
            }
            Tok::Punct("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect_punct(")")?;
                return Ok(Expr { span: self.since(start), kind: e.kind });
            }
            Tok::Punct("{") => return self.list_expr(),
            Tok::Punct(".") => {
                self.bump();
                ExprKind::TopName(self.ident("a name")?)
            }
            Tok::Ident(word) => match word.as_str() {
                "true" | "false" => {
                    self.bump();
                    ExprKind::Bool(word == "true")
                }
                "_" => {
                    self.bump();
                    ExprKind::DontCare
                }
                "default" => {
                    self.bump();
                    ExprKind::Default
                }
                "error" | "bit" | "int" | "varbit" | "bool" | "tuple" => {
                    ExprKind::TypeRef(self.ty()?)
                }
                "this" => {
                    return Err(Diagnostic::new(start, "`this` is not supported"));
                }
                w if super::KEYWORDS.contains(&w) && !super::CONTEXTUAL_NAMES.contains(&w) => {
                    return Err(self.unexpected("an expression"))
                }
                _ => ExprKind::Name(self.member_name()?),
            },
            _ => return Err(self.unexpected("an expression")),
        };
        Ok(Expr { kind, span: self.since(start) })
    }

    /// `{a, b}` or `{f = a, g = b}` (an empty `{}` is an empty list).
    fn list_expr(&mut self) -> DResult<Expr> {
        let start = self.expect_punct("{")?;
        let is_struct = matches!(self.peek().tok, Tok::Ident(_)) && self.peek_at(1).is_punct("=");
        if is_struct {
            let mut fields = Vec::new();
            loop {
                if self.is_punct("}") {
                    break;
                }
                let name = self.member_name()?;
                self.expect_punct("=")?;
                fields.push((name, self.expr()?));
                if !self.eat_punct(",") {
                    break;
                }
            }
            self.expect_punct("}")?;
            return Ok(Expr { kind: ExprKind::StructInit(fields), span: self.since(start) });
        }
        let mut items = Vec::new();
        loop {
            if self.is_punct("}") {
                break;
            }
            items.push(self.expr()?);
            if !self.eat_punct(",") {
                break;
            }
        }
        self.expect_punct("}")?;
        Ok(Expr { kind: ExprKind::List(items), span: self.since(start) })
    }

    /// One element of a keyset: `default`, `_`, `e`, `e &&& m`, `lo .. hi`.
    pub(crate) fn keyset_element(&mut self) -> DResult<Expr> {
        let e = self.expr()?;
        if matches!(e.kind, ExprKind::Default | ExprKind::DontCare) {
            return Ok(e);
        }
        let ctor = if self.eat_punct("&&&") {
            ExprKind::Mask as fn(Box<Expr>, Box<Expr>) -> ExprKind
        } else if self.eat_punct("..") {
            ExprKind::Range
        } else {
            return Ok(e);
        };
        let rhs = self.expr()?;
        let span = e.span.to(rhs.span);
        Ok(Expr { kind: ctor(Box::new(e), Box::new(rhs)), span })
    }

    /// A keyset: a parenthesised tuple of elements or a single element.
    pub(crate) fn keyset(&mut self) -> DResult<Vec<Expr>> {
        if self.is_punct("(") {
            // `(a, b)` is a tuple keyset; `(a + 1)` or `(a) &&& m` is one element.
            let save = self.pos;
            self.bump();
            let mut elems = vec![self.keyset_element()?];
            while self.eat_punct(",") {
                elems.push(self.keyset_element()?);
            }
            if self.eat_punct(")") && (elems.len() > 1 || self.is_punct(":")) {
                return Ok(elems);
            }
            self.pos = save;
        }
        Ok(vec![self.keyset_element()?])
    }
}
