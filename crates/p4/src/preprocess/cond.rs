//! The integer expressions of `#if` and `#elif`.

use crate::budget::Budget;
use crate::diag::{Diagnostic, Span};
use crate::lexer::{Tok, Token};

/// Integer expressions of `#if`: C precedence, unknown identifiers are 0.
pub(super) struct CondEval<'a> {
    pub toks: &'a [Token],
    pub pos: usize,
    pub span: Span,
    /// Recursion (parentheses, unary operators, `?:`) is bounded by the nesting budget.
    pub depth: usize,
    pub max_depth: usize,
}

impl CondEval<'_> {
    fn peek_op(&self) -> Option<&'static str> {
        let t = self.toks.get(self.pos)?;
        let Tok::Punct(p) = t.tok else { return None };
        // The lexer splits `>>`; join two adjacent `>` here.
        if p == ">" {
            if let Some(n) = self.toks.get(self.pos + 1) {
                if n.is_punct(">") && n.span.lo == t.span.hi {
                    return Some(">>");
                }
            }
        }
        Some(p)
    }

    fn err(&self, msg: &str) -> Diagnostic {
        Diagnostic::new(self.toks.get(self.pos).map_or(self.span, |t| t.span), msg)
    }

    pub fn ternary(&mut self) -> Result<i128, Diagnostic> {
        self.enter()?;
        let r = self.ternary_inner();
        self.depth -= 1;
        r
    }

    fn enter(&mut self) -> Result<(), Diagnostic> {
        self.depth += 1;
        if self.depth > self.max_depth {
            self.depth -= 1;
            let exceeded = crate::budget::Exceeded {
                budget: Budget::NestingDepth,
                limit: self.max_depth as u64,
            };
            let span = self.toks.get(self.pos).map_or(self.span, |t| t.span);
            return Err(Diagnostic::over_budget(
                span,
                format!("#if expression nests deeper than {}", self.max_depth),
                exceeded,
            ));
        }
        Ok(())
    }

    fn ternary_inner(&mut self) -> Result<i128, Diagnostic> {
        let c = self.binary(0)?;
        if self.peek_op() == Some("?") {
            self.pos += 1;
            let a = self.ternary()?;
            if self.peek_op() != Some(":") {
                return Err(self.err("expected `:` in #if expression"));
            }
            self.pos += 1;
            let b = self.ternary()?;
            return Ok(if c != 0 { a } else { b });
        }
        Ok(c)
    }

    fn binary(&mut self, min_prec: u8) -> Result<i128, Diagnostic> {
        let mut lhs = self.unary()?;
        loop {
            let Some(op) = self.peek_op() else { return Ok(lhs) };
            let prec = match op {
                "||" => 1,
                "&&" => 2,
                "|" => 3,
                "^" => 4,
                "&" => 5,
                "==" | "!=" => 6,
                "<" | ">" | "<=" | ">=" => 7,
                "<<" | ">>" => 8,
                "+" | "-" => 9,
                "*" | "/" | "%" => 10,
                _ => return Ok(lhs),
            };
            if prec < min_prec.max(1) {
                return Ok(lhs);
            }
            self.pos += if op == ">>" { 2 } else { 1 };
            let rhs = self.binary(prec + 1)?;
            lhs = match op {
                "||" => (lhs != 0 || rhs != 0) as i128,
                "&&" => (lhs != 0 && rhs != 0) as i128,
                "|" => lhs | rhs,
                "^" => lhs ^ rhs,
                "&" => lhs & rhs,
                "==" => (lhs == rhs) as i128,
                "!=" => (lhs != rhs) as i128,
                "<" => (lhs < rhs) as i128,
                ">" => (lhs > rhs) as i128,
                "<=" => (lhs <= rhs) as i128,
                ">=" => (lhs >= rhs) as i128,
                "<<" => lhs.checked_shl(rhs.clamp(0, 127) as u32).unwrap_or(0),
                ">>" => lhs >> rhs.clamp(0, 127),
                "+" => lhs.wrapping_add(rhs),
                "-" => lhs.wrapping_sub(rhs),
                "*" => lhs.wrapping_mul(rhs),
                "/" | "%" if rhs == 0 => return Err(self.err("division by zero in #if expression")),
                "/" => lhs.wrapping_div(rhs),
                _ => lhs.wrapping_rem(rhs),
            };
        }
    }

    fn unary(&mut self) -> Result<i128, Diagnostic> {
        self.enter()?;
        let r = self.unary_inner();
        self.depth -= 1;
        r
    }

    fn unary_inner(&mut self) -> Result<i128, Diagnostic> {
        let Some(t) = self.toks.get(self.pos) else {
            return Err(self.err("#if expression ends early"));
        };
        self.pos += 1;
        match &t.tok {
            Tok::Int { value, .. } => Ok(*value as i128),
            Tok::Ident(_) => Ok(0),
            Tok::Punct("!") => Ok((self.unary()? == 0) as i128),
            Tok::Punct("~") => Ok(!self.unary()?),
            Tok::Punct("-") => Ok(self.unary()?.wrapping_neg()),
            Tok::Punct("+") => self.unary(),
            Tok::Punct("(") => {
                let v = self.ternary()?;
                if self.peek_op() != Some(")") {
                    return Err(self.err("expected `)` in #if expression"));
                }
                self.pos += 1;
                Ok(v)
            }
            _ => {
                self.pos -= 1;
                Err(self.err("unexpected token in #if expression"))
            }
        }
    }
}
