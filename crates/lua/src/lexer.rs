//! A Lua 5.1 / LuaJIT 2.1 tokenizer with LuaJIT's lexical rules (`lj_lex.c`).
//!
//! The step checks of [`crate::instrument`] are only as good as the token stream they are
//! placed by: a `while` that this lexer takes for comment text but LuaJIT compiles is a loop
//! without a check. So this lexer follows LuaJIT rule for rule, including the ones that are easy
//! to get wrong: a line ends at LF, CR, CRLF or LFCR (a short comment too); long brackets have
//! any level and close at the first matching `]=*]`; `--[` only opens a long comment when a
//! whole long-bracket opener follows; short strings know every escape (`\z` skips white space
//! and line ends, `\` before a line end continues the string, `\x`, `\u{}`, `\ddd`); numbers run
//! over identifier characters, dots and exponent signs (hex floats with `p`, `LL`/`ULL`/`i`
//! suffixes); bytes from 0x80 up are identifier characters; a UTF-8 byte order mark and a `#`
//! first line are skipped. Where LuaJIT would refuse the text, this lexer refuses it too (it
//! never guesses).

/// Lua's reserved words (LuaJIT's `TKDEF`). `goto` is one in LuaJIT, but its parser also
/// takes it as a name wherever a name goes; only a statement `goto name` jumps.
pub const KEYWORDS: [&str; 22] = [
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
    "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// An identifier that is not a keyword.
    Name,
    /// One of [`KEYWORDS`].
    Keyword,
    Number,
    /// A short or long string literal.
    String,
    /// Operators and punctuation: `...`, `..`, `==`, `<=`, `>=`, `~=`, `::` or one character.
    Punct,
}

/// A token: its kind, its text (quotes and brackets included) and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    pub kind: TokenKind,
    pub text: &'a str,
    /// Byte offset in the source.
    pub start: usize,
    /// Line (from 1) the token starts on, counted as LuaJIT counts.
    pub line: u32,
}

impl Token<'_> {
    pub fn end(&self) -> usize {
        self.start + self.text.len()
    }

    pub fn is_keyword(&self, word: &str) -> bool {
        self.kind == TokenKind::Keyword && self.text == word
    }

    pub fn is_punct(&self, p: &str) -> bool {
        self.kind == TokenKind::Punct && self.text == p
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct LexError {
    pub line: u32,
    pub what: &'static str,
}

/// The source split into tokens, and the byte range of the skipped header (BOM and `#` line),
/// which is only a header at the very start of a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens<'a> {
    pub header: std::ops::Range<usize>,
    pub tokens: Vec<Token<'a>>,
}

/// Split `src` into tokens by LuaJIT's rules.
pub fn tokenize(src: &str) -> Result<Tokens<'_>, LexError> {
    let mut lx = Lexer { src, b: src.as_bytes(), pos: 0, line: 1 };
    let header = lx.skip_header();
    let mut tokens = Vec::new();
    while let Some(t) = lx.next_token()? {
        tokens.push(t);
    }
    Ok(Tokens { header, tokens })
}

/// LuaJIT's `lj_char_isident`: letters, digits, `_` and every byte from 0x80.
fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

fn is_eol(c: Option<u8>) -> bool {
    matches!(c, Some(b'\n' | b'\r'))
}

/// `lj_char_isspace`: what `\z` skips.
fn is_space(c: Option<u8>) -> bool {
    matches!(c, Some(b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    line: u32,
}

impl<'a> Lexer<'a> {
    fn cur(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn at(&self, ahead: usize) -> Option<u8> {
        self.b.get(self.pos + ahead).copied()
    }

    fn err(&self, what: &'static str) -> LexError {
        LexError { line: self.line, what }
    }

    /// `lex_newline`: one of LF, CR, CRLF, LFCR.
    fn newline(&mut self) {
        let first = self.cur();
        self.pos += 1;
        if is_eol(self.cur()) && self.cur() != first {
            self.pos += 1;
        }
        self.line = self.line.saturating_add(1);
    }

    /// `lj_lex_setup`: a UTF-8 BOM, then a first line starting with `#`, are not part of the
    /// chunk. Returns their byte range.
    fn skip_header(&mut self) -> std::ops::Range<usize> {
        if self.b.starts_with(&[0xef, 0xbb, 0xbf]) {
            self.pos = 3;
        }
        if self.cur() == Some(b'#') {
            while self.cur().is_some() && !is_eol(self.cur()) {
                self.pos += 1;
            }
            let end = self.pos;
            if self.cur().is_some() {
                self.newline();
            }
            return 0..end;
        }
        0..self.pos
    }

    /// `lex_skipeq` at a `[` or `]`: the level of a long bracket (`[==[` is 2) if the same
    /// bracket follows the `=`s; otherwise `Err(count)` with the number of `=`s skipped. Leaves
    /// the position on the second bracket (or whatever stopped the `=`s).
    fn skip_eq(&mut self) -> Result<usize, usize> {
        let bracket = self.cur();
        self.pos += 1;
        let mut count = 0;
        while self.cur() == Some(b'=') {
            count += 1;
            self.pos += 1;
        }
        if self.cur() == bracket {
            Ok(count)
        } else {
            Err(count)
        }
    }

    /// `lex_longstring`, positioned on the second `[` of an opener of `level`.
    fn long_bracket(&mut self, level: usize, comment: bool) -> Result<(), LexError> {
        let start_line = self.line;
        self.pos += 1;
        loop {
            match self.cur() {
                None => {
                    return Err(LexError {
                        line: start_line,
                        what: if comment {
                            "unfinished long comment"
                        } else {
                            "unfinished long string"
                        },
                    })
                }
                Some(b']') => {
                    if self.skip_eq() == Ok(level) {
                        self.pos += 1;
                        return Ok(());
                    }
                }
                Some(b'\n' | b'\r') => self.newline(),
                Some(_) => self.pos += 1,
            }
        }
    }

    /// `lex_string`, positioned on the opening quote.
    fn short_string(&mut self) -> Result<(), LexError> {
        let delim = self.cur();
        self.pos += 1;
        while self.cur() != delim {
            match self.cur() {
                None | Some(b'\n' | b'\r') => return Err(self.err("unfinished string")),
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape()?;
                }
                Some(_) => self.pos += 1,
            }
        }
        self.pos += 1;
        Ok(())
    }

    /// One escape sequence, positioned after the backslash.
    fn escape(&mut self) -> Result<(), LexError> {
        let bad = |lx: &Self| lx.err("invalid escape sequence");
        match self.cur() {
            None => Ok(()), // The string is unfinished; the caller reports it.
            Some(b'\n' | b'\r') => {
                self.newline();
                Ok(())
            }
            Some(b'a' | b'b' | b'f' | b'n' | b'r' | b't' | b'v' | b'\\' | b'"' | b'\'') => {
                self.pos += 1;
                Ok(())
            }
            Some(b'z') => {
                self.pos += 1;
                while is_space(self.cur()) {
                    if is_eol(self.cur()) {
                        self.newline();
                    } else {
                        self.pos += 1;
                    }
                }
                Ok(())
            }
            Some(b'x') => {
                for k in 1..=2 {
                    if !self.at(k).is_some_and(|c| c.is_ascii_hexdigit()) {
                        return Err(bad(self));
                    }
                }
                self.pos += 3;
                Ok(())
            }
            Some(b'u') => {
                if self.at(1) != Some(b'{') {
                    return Err(bad(self));
                }
                self.pos += 2;
                let mut value: u32 = 0;
                loop {
                    let Some(d) = self.cur().and_then(|c| (c as char).to_digit(16)) else {
                        return Err(bad(self));
                    };
                    value = (value << 4) | d;
                    if value >= 0x11_0000 {
                        return Err(bad(self));
                    }
                    self.pos += 1;
                    if self.cur() == Some(b'}') {
                        self.pos += 1;
                        return Ok(());
                    }
                }
            }
            Some(c) if c.is_ascii_digit() => {
                let mut value = 0u32;
                for _ in 0..3 {
                    match self.cur() {
                        Some(d) if d.is_ascii_digit() => {
                            value = value * 10 + u32::from(d - b'0');
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                if value > 255 {
                    return Err(bad(self));
                }
                Ok(())
            }
            Some(_) => Err(bad(self)),
        }
    }

    /// `lex_number`, positioned on its first digit (after a leading `.`, if any).
    fn number(&mut self) {
        let mut prev = self.cur().unwrap_or(b'0');
        let mut exponent = b'e';
        if prev == b'0' && self.at(1).is_some_and(|c| c | 0x20 == b'x') {
            exponent = b'p';
        }
        self.pos += 1;
        while let Some(c) = self.cur() {
            if is_ident(c) || c == b'.' || (matches!(c, b'-' | b'+') && prev | 0x20 == exponent) {
                prev = c;
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// Skip white space and comments; the position ends on a token's first byte or the end.
    fn skip_blank(&mut self) -> Result<(), LexError> {
        loop {
            match self.cur() {
                Some(b'\n' | b'\r') => self.newline(),
                Some(b' ' | b'\t' | 0x0b | 0x0c) => self.pos += 1,
                Some(b'-') if self.at(1) == Some(b'-') => {
                    self.pos += 2;
                    if self.cur() == Some(b'[') {
                        if let Ok(level) = self.skip_eq() {
                            self.long_bracket(level, true)?;
                            continue;
                        }
                    }
                    while self.cur().is_some() && !is_eol(self.cur()) {
                        self.pos += 1;
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn next_token(&mut self) -> Result<Option<Token<'a>>, LexError> {
        self.skip_blank()?;
        let start = self.pos;
        let line = self.line;
        let Some(c) = self.cur() else { return Ok(None) };
        let kind = if c.is_ascii_digit() {
            self.number();
            TokenKind::Number
        } else if is_ident(c) {
            while self.cur().is_some_and(is_ident) {
                self.pos += 1;
            }
            let word = self.src.get(start..self.pos).unwrap_or("");
            if KEYWORDS.contains(&word) {
                TokenKind::Keyword
            } else {
                TokenKind::Name
            }
        } else {
            match c {
                b'"' | b'\'' => {
                    self.short_string()?;
                    TokenKind::String
                }
                b'[' => match self.skip_eq() {
                    Ok(level) => {
                        self.long_bracket(level, false)?;
                        TokenKind::String
                    }
                    Err(0) => TokenKind::Punct,
                    Err(_) => return Err(self.err("invalid long string delimiter")),
                },
                b'.' => {
                    if self.at(1) == Some(b'.') {
                        self.pos += if self.at(2) == Some(b'.') { 3 } else { 2 };
                        TokenKind::Punct
                    } else if self.at(1).is_some_and(|d| d.is_ascii_digit()) {
                        self.pos += 1;
                        self.number();
                        TokenKind::Number
                    } else {
                        self.pos += 1;
                        TokenKind::Punct
                    }
                }
                b'=' | b'<' | b'>' | b'~' => {
                    self.pos += if self.at(1) == Some(b'=') { 2 } else { 1 };
                    TokenKind::Punct
                }
                b':' => {
                    self.pos += if self.at(1) == Some(b':') { 2 } else { 1 };
                    TokenKind::Punct
                }
                _ => {
                    // Any other byte below 0x80 is a token of its own (the parser refuses the
                    // ones Lua has no use for).
                    self.pos += 1;
                    TokenKind::Punct
                }
            }
        };
        // Tokens end before an ASCII byte or at the end, so this is a char boundary.
        let text =
            self.src.get(start..self.pos).ok_or_else(|| self.err("token split a character"))?;
        Ok(Some(Token { kind, text, start, line }))
    }
}

#[cfg(test)]
#[path = "lexer_tests.rs"]
mod tests;
