//! The P4_16 lexer: source text to tokens with spans.
//!
//! Keywords stay identifiers (the parser knows which names are reserved), `>>` is lexed as two
//! `>` so that `bit<bit<8>>`-style nesting needs no special case (the parser joins adjacent `>`
//! into a shift), and a line starting with `#` becomes one [`Tok::Directive`] token for the
//! preprocessor.

use crate::diag::{DResult, Diagnostic, FileId, Span};

/// Integer literals wider than this are refused with a clear error.
pub const MAX_LITERAL_BITS: u32 = 128;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    /// An integer literal; `width` and `signed` come from a `8w`/`8s` prefix.
    Int {
        value: u128,
        width: Option<u32>,
        signed: bool,
    },
    Str(String),
    Punct(&'static str),
    /// A preprocessor line: the text after `#`, continuation lines joined.
    Directive(String),
    Eof,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

impl Token {
    pub fn is_punct(&self, p: &str) -> bool {
        matches!(&self.tok, Tok::Punct(q) if *q == p)
    }

    pub fn is_ident(&self, name: &str) -> bool {
        matches!(&self.tok, Tok::Ident(n) if n == name)
    }

    /// How the token reads in a message.
    pub fn describe(&self) -> String {
        match &self.tok {
            Tok::Ident(n) => format!("`{n}`"),
            Tok::Int { value, .. } => format!("number {value}"),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Directive(d) => format!("`#{}`", d.split_whitespace().next().unwrap_or("")),
            Tok::Eof => "end of input".to_string(),
        }
    }
}

/// Punctuation, longest first so that a prefix never wins over a longer operator.
const PUNCT: &[&str] = &[
    "&&&", "|+|", "|-|", "<<", "&&", "||", "==", "!=", "<=", ">=", "++", "..", "+=", "-=", "*=",
    "/=", "%=", "&=", "|=", "^=", "{", "}", "(", ")", "[", "]", "<", ">", ";", ":", ",", ".", "=",
    "+", "-", "*", "/", "%", "&", "|", "^", "~", "!", "?", "@",
];

/// Split a file's text into tokens. The last token is always [`Tok::Eof`].
pub fn lex(file: FileId, text: &str) -> DResult<Vec<Token>> {
    Lexer { file, src: text.as_bytes(), text, pos: 0, out: Vec::new(), line_start: true }.run()
}

struct Lexer<'a> {
    file: FileId,
    src: &'a [u8],
    text: &'a str,
    pos: usize,
    out: Vec<Token>,
    /// Only whitespace and comments since the last newline: a `#` here starts a directive.
    line_start: bool,
}

impl Lexer<'_> {
    fn run(mut self) -> DResult<Vec<Token>> {
        while self.pos < self.src.len() {
            let c = self.src[self.pos];
            let start = self.pos;
            match c {
                b'\n' => {
                    self.pos += 1;
                    self.line_start = true;
                    continue;
                }
                b' ' | b'\t' | b'\r' | 0x0c | 0x0b => {
                    self.pos += 1;
                    continue;
                }
                b'/' if self.peek(1) == Some(b'/') => {
                    while self.pos < self.src.len() && self.src[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                    continue;
                }
                b'/' if self.peek(1) == Some(b'*') => {
                    match self.text[self.pos + 2..].find("*/") {
                        Some(end) => self.pos += 2 + end + 2,
                        None => return Err(self.err(start, start + 2, "unterminated comment")),
                    }
                    continue;
                }
                b'#' if self.line_start => self.directive(),
                b'"' => self.string()?,
                b'0'..=b'9' => self.number()?,
                c if c == b'_' || c.is_ascii_alphabetic() => {
                    while self.pos < self.src.len()
                        && (self.src[self.pos] == b'_'
                            || self.src[self.pos].is_ascii_alphanumeric())
                    {
                        self.pos += 1;
                    }
                    self.push(Tok::Ident(self.text[start..self.pos].to_string()), start);
                }
                _ => {
                    let rest = &self.src[self.pos..];
                    let Some(p) = PUNCT.iter().find(|p| rest.starts_with(p.as_bytes())) else {
                        let ch = self.text[self.pos..].chars().next().unwrap_or('?');
                        return Err(self.err(
                            start,
                            start + ch.len_utf8(),
                            format!("unexpected character {ch:?}"),
                        ));
                    };
                    self.pos += p.len();
                    self.push(Tok::Punct(p), start);
                }
            }
            self.line_start = false;
        }
        let end = self.src.len();
        self.out.push(Token { tok: Tok::Eof, span: Span::new(self.file, end, end) });
        Ok(self.out)
    }

    fn peek(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    fn push(&mut self, tok: Tok, start: usize) {
        self.out.push(Token { tok, span: Span::new(self.file, start, self.pos) });
    }

    fn err(&self, lo: usize, hi: usize, msg: impl Into<String>) -> Diagnostic {
        Diagnostic::new(Span::new(self.file, lo, hi), msg)
    }

    /// `#...` to the end of the line, joining lines that end in `\`; comments are dropped.
    fn directive(&mut self) {
        let start = self.pos;
        self.pos += 1;
        let mut text = String::new();
        while self.pos < self.src.len() {
            let c = self.src[self.pos];
            if c == b'\\' && matches!(self.peek(1), Some(b'\n')) {
                self.pos += 2;
                text.push(' ');
            } else if c == b'\\' && self.peek(1) == Some(b'\r') && self.peek(2) == Some(b'\n') {
                self.pos += 3;
                text.push(' ');
            } else if c == b'\n' {
                break;
            } else if c == b'/' && self.peek(1) == Some(b'/') {
                while self.pos < self.src.len() && self.src[self.pos] != b'\n' {
                    self.pos += 1;
                }
            } else if c == b'/' && self.peek(1) == Some(b'*') {
                match self.text[self.pos + 2..].find("*/") {
                    Some(end) => self.pos += 2 + end + 2,
                    None => self.pos = self.src.len(),
                }
                text.push(' ');
            } else {
                let ch = self.text[self.pos..].chars().next().unwrap_or(' ');
                text.push(ch);
                self.pos += ch.len_utf8();
            }
        }
        self.push(Tok::Directive(text), start);
    }

    fn string(&mut self) -> DResult<()> {
        let start = self.pos;
        self.pos += 1;
        let mut value = String::new();
        loop {
            let Some(&c) = self.src.get(self.pos) else {
                return Err(self.err(start, self.pos, "unterminated string"));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    break;
                }
                b'\n' => return Err(self.err(start, self.pos, "unterminated string")),
                b'\\' => {
                    let esc = self.peek(1).unwrap_or(b'\\');
                    value.push(match esc {
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'0' => '\0',
                        other => other as char,
                    });
                    self.pos += 2;
                }
                _ => {
                    let ch = self.text[self.pos..].chars().next().unwrap_or(' ');
                    value.push(ch);
                    self.pos += ch.len_utf8();
                }
            }
        }
        self.push(Tok::Str(value), start);
        Ok(())
    }

    /// `[width(w|s)]` then a decimal, `0x`, `0o`, `0d` or `0b` value, `_` allowed between digits.
    fn number(&mut self) -> DResult<()> {
        let start = self.pos;
        let mut width = None;
        let mut signed = false;
        let digits_end = self.src[self.pos..]
            .iter()
            .position(|c| !c.is_ascii_digit())
            .map_or(self.src.len(), |n| self.pos + n);
        if let Some(&marker @ (b'w' | b's')) = self.src.get(digits_end) {
            if self.src.get(digits_end + 1).is_some_and(|c| c.is_ascii_digit()) {
                let w: u32 = self.text[start..digits_end]
                    .parse()
                    .map_err(|_| self.err(start, digits_end, "literal width too large"))?;
                if w == 0 || w > MAX_LITERAL_BITS {
                    return Err(self.err(
                        start,
                        digits_end,
                        format!(
                            "literal width {w} is not supported (1 to {MAX_LITERAL_BITS} bits)"
                        ),
                    ));
                }
                width = Some(w);
                signed = marker == b's';
                self.pos = digits_end + 1;
            }
        }
        let (radix, skip) = match (self.peek(0), self.peek(1).map(|c| c.to_ascii_lowercase())) {
            (Some(b'0'), Some(b'x')) => (16, 2),
            (Some(b'0'), Some(b'o')) => (8, 2),
            (Some(b'0'), Some(b'b')) => (2, 2),
            (Some(b'0'), Some(b'd')) => (10, 2),
            _ => (10, 0),
        };
        self.pos += skip;
        let digits_start = self.pos;
        let mut value: u128 = 0;
        let mut any = false;
        while let Some(&c) = self.src.get(self.pos) {
            if c == b'_' {
                self.pos += 1;
                continue;
            }
            if !c.is_ascii_alphanumeric() {
                break;
            }
            let Some(d) = (c as char).to_digit(radix) else {
                return Err(self.err(
                    start,
                    self.pos + 1,
                    format!("invalid digit {:?} in base-{radix} literal", c as char),
                ));
            };
            value = value
                .checked_mul(radix as u128)
                .and_then(|v| v.checked_add(d as u128))
                .ok_or_else(|| {
                    self.err(start, self.pos + 1, "integer literal does not fit in 128 bits")
                })?;
            any = true;
            self.pos += 1;
        }
        if !any {
            return Err(self.err(
                start,
                self.pos.max(digits_start),
                "integer literal has no digits",
            ));
        }
        self.push(Tok::Int { value, width, signed }, start);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(0, s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn literals_with_width_and_base() {
        assert_eq!(
            toks("8w255 16s0x7f_ff 0b1010 32w0o17 48w0xFFFF_FFFF_FFFF"),
            vec![
                Tok::Int { value: 255, width: Some(8), signed: false },
                Tok::Int { value: 0x7fff, width: Some(16), signed: true },
                Tok::Int { value: 10, width: None, signed: false },
                Tok::Int { value: 15, width: Some(32), signed: false },
                Tok::Int { value: 0xffff_ffff_ffff, width: Some(48), signed: false },
                Tok::Eof
            ]
        );
    }

    #[test]
    fn shifts_are_two_tokens_and_masks_one() {
        assert_eq!(
            toks("a >> 2 &&& b"),
            vec![
                Tok::Ident("a".into()),
                Tok::Punct(">"),
                Tok::Punct(">"),
                Tok::Int { value: 2, width: None, signed: false },
                Tok::Punct("&&&"),
                Tok::Ident("b".into()),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn directives_only_at_line_start_with_continuations() {
        let t = toks("  #define X \\\n  5 // c\nx");
        assert_eq!(t[0], Tok::Directive("define X    5 ".into()));
        assert_eq!(t[1], Tok::Ident("x".into()));
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(lex(0, "8w0x1G").unwrap_err().message.contains("invalid digit"));
        assert!(lex(0, "\"abc").unwrap_err().message.contains("unterminated string"));
        assert!(lex(0, "/* x").unwrap_err().message.contains("unterminated comment"));
        assert!(lex(0, "0w1").unwrap_err().message.contains("width 0"));
        assert!(lex(0, "x $ y").unwrap_err().message.contains("unexpected character"));
        assert!(lex(0, "0x1_0000_0000_0000_0000_0000_0000_0000_0000")
            .unwrap_err()
            .message
            .contains("128 bits"));
    }
}
