//! Source instrumentation: the bound on how long a flow function can run.
//!
//! LuaJIT does not call hooks from JIT-compiled code, so an instruction-count hook alone cannot
//! stop `while true do end` once it is compiled. Instead, every place where Lua code can repeat
//! gets a fuel check inserted into its source before it is compiled: after every `do` (loop
//! bodies; plain `do` blocks get one too, which is harmless), after every `repeat`, before every
//! `goto`, and at the start of every function body (recursion and tail calls). The check is
//! plain Lua, so it runs in the interpreter and in compiled traces alike; the driver refills the
//! fuel before each packet. Code without loops pays nothing.
//!
//! The checks refer to locals of the wrapper chunk whose names start with `__hp`; user code may
//! not name anything starting with `__hp`, so it cannot refill its own fuel.
//!
//! Insertions never add a newline, so line numbers in error messages match the user's source.

/// Names starting with this are reserved for the runtime.
pub const RESERVED_PREFIX: &str = "__hp";

/// The statement inserted at every check point.
pub const CHECK: &str = " __hp_S.fuel=__hp_S.fuel-1 if __hp_S.fuel<0 then __hp_X() end ";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstrumentError {
    #[error("line {line}: names starting with `__hp` are reserved (found `{name}`)")]
    Reserved { line: u32, name: String },
    #[error("line {line}: {what}")]
    Lex { line: u32, what: &'static str },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    Name(&'a str),
    /// Punctuation, numbers, strings: anything that is not a name.
    Other(&'a str),
}

/// A token and the byte range it spans.
struct Lexed<'a> {
    tok: Tok<'a>,
    end: usize,
    line: u32,
}

/// A minimal Lua 5.1 lexer: enough to tell names from strings, comments and punctuation.
struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    line: u32,
}

impl<'a> Lexer<'a> {
    fn new(src: &'a str) -> Self {
        Self { src, pos: 0, line: 1 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    fn peek(&self, ahead: usize) -> u8 {
        self.bytes().get(self.pos + ahead).copied().unwrap_or(0)
    }

    /// Length of a long bracket opener `[`, `[=`.. `[` at `at`: the number of `=`, or None.
    fn long_bracket(&self, at: usize) -> Option<usize> {
        let b = self.bytes();
        if b.get(at) != Some(&b'[') {
            return None;
        }
        let mut i = at + 1;
        while b.get(i) == Some(&b'=') {
            i += 1;
        }
        (b.get(i) == Some(&b'[')).then_some(i - at - 1)
    }

    /// Skip a long string or comment body starting at the opener; error if unterminated.
    fn skip_long(&mut self, level: usize) -> Result<(), InstrumentError> {
        let start_line = self.line;
        self.pos += level + 2;
        let close: Vec<u8> =
            std::iter::once(b']').chain(std::iter::repeat_n(b'=', level)).chain([b']']).collect();
        let b = self.bytes();
        while self.pos < b.len() {
            if b[self.pos..].starts_with(&close) {
                self.pos += close.len();
                return Ok(());
            }
            if b[self.pos] == b'\n' {
                self.line += 1;
            }
            self.pos += 1;
        }
        Err(InstrumentError::Lex { line: start_line, what: "unfinished long string or comment" })
    }

    fn skip_space_and_comments(&mut self) -> Result<(), InstrumentError> {
        loop {
            match self.peek(0) {
                b'\n' => {
                    self.line += 1;
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' | 0x0b | 0x0c => self.pos += 1,
                b'-' if self.peek(1) == b'-' => {
                    if let Some(level) = self.long_bracket(self.pos + 2) {
                        self.pos += 2;
                        self.skip_long(level)?;
                    } else {
                        while self.pos < self.src.len() && self.peek(0) != b'\n' {
                            self.pos += 1;
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn next(&mut self) -> Result<Option<Lexed<'a>>, InstrumentError> {
        self.skip_space_and_comments()?;
        let start = self.pos;
        let line = self.line;
        let b = self.bytes();
        if start >= b.len() {
            return Ok(None);
        }
        let c = b[start];
        if c == b'_' || c.is_ascii_alphabetic() {
            while self.pos < b.len() && (b[self.pos] == b'_' || b[self.pos].is_ascii_alphanumeric())
            {
                self.pos += 1;
            }
            let name = &self.src[start..self.pos];
            return Ok(Some(Lexed { tok: Tok::Name(name), end: self.pos, line }));
        }
        if c == b'"' || c == b'\'' {
            self.pos += 1;
            loop {
                match b.get(self.pos) {
                    None | Some(b'\n') => {
                        return Err(InstrumentError::Lex { line, what: "unfinished string" })
                    }
                    Some(b'\\') => {
                        if b.get(self.pos + 1) == Some(&b'\n') {
                            self.line += 1;
                        }
                        self.pos += 2;
                    }
                    Some(&q) if q == c => {
                        self.pos += 1;
                        break;
                    }
                    Some(_) => self.pos += 1,
                }
            }
        } else if let Some(level) = self.long_bracket(start) {
            self.skip_long(level)?;
        } else if c.is_ascii_digit() || (c == b'.' && self.peek(1).is_ascii_digit()) {
            // Numbers, including hex, exponents and LuaJIT's ULL/LL/i suffixes.
            while self.pos < b.len() {
                let d = b[self.pos];
                let exp_sign = (d == b'+' || d == b'-')
                    && matches!(b[self.pos - 1], b'e' | b'E' | b'p' | b'P')
                    && !(b[start..].starts_with(b"0x") && matches!(b[self.pos - 1], b'e' | b'E'));
                if d.is_ascii_alphanumeric() || d == b'.' || exp_sign {
                    self.pos += 1;
                } else {
                    break;
                }
            }
        } else {
            // Punctuation: the longest of `...`, two-character operators, or one character.
            let two = [b'.', b'=', b'~', b'<', b'>', b':'];
            self.pos += if b[start..].starts_with(b"...") {
                3
            } else if two.contains(&c) && matches!(self.peek(1), b'.' | b'=' | b':') {
                2
            } else {
                // A whole character: slicing inside a UTF-8 sequence would panic.
                self.src[start..].chars().next().map_or(1, char::len_utf8)
            };
        }
        Ok(Some(Lexed { tok: Tok::Other(&self.src[start..self.pos]), end: self.pos, line }))
    }
}

/// Insert fuel checks into `src` (see the module docs). Refuses reserved names.
pub fn instrument(src: &str) -> Result<String, InstrumentError> {
    let mut out = String::with_capacity(src.len() + 256);
    let mut copied = 0;
    let mut lex = Lexer::new(src);
    let mut prev: Option<Tok<'_>> = None;
    // After `function`: insert at the `)` closing its parameter list.
    let mut in_params = false;
    while let Some(t) = lex.next()? {
        let start = t.end - tok_len(t.tok);
        match t.tok {
            Tok::Name(n) if n.starts_with(RESERVED_PREFIX) => {
                return Err(InstrumentError::Reserved { line: t.line, name: n.to_string() })
            }
            Tok::Name("do") | Tok::Name("repeat") => {
                out.push_str(&src[copied..t.end]);
                out.push_str(CHECK);
                copied = t.end;
            }
            Tok::Name("goto") if !matches!(prev, Some(Tok::Other("." | ":"))) => {
                out.push_str(&src[copied..start]);
                out.push_str(CHECK);
                copied = start;
            }
            Tok::Name("function") => in_params = true,
            Tok::Other(")") if in_params => {
                in_params = false;
                out.push_str(&src[copied..t.end]);
                out.push_str(CHECK);
                copied = t.end;
            }
            _ => {}
        }
        prev = Some(t.tok);
    }
    out.push_str(&src[copied..]);
    Ok(out)
}

fn tok_len(t: Tok<'_>) -> usize {
    match t {
        Tok::Name(s) | Tok::Other(s) => s.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks(s: &str) -> usize {
        s.matches("__hp_X()").count()
    }

    #[test]
    fn loops_functions_and_gotos_get_checks() {
        let src = "local function f(a, b) while a do a = a - 1 end repeat b = b + 1 until b > 3 \
                   for i = 1, 3 do end ::top:: if a then goto top end return t.goto end";
        let out = instrument(src).unwrap();
        // function entry, while-do, repeat, for-do, goto statement (not the field `t.goto`)
        assert_eq!(checks(&out), 5, "{out}");
    }

    #[test]
    fn strings_and_comments_are_not_code() {
        let src = "local s = 'while do' .. \"repeat\" .. [[function() do]] --[==[ do ]==]\n\
                   -- goto do function\nreturn s";
        let out = instrument(src).unwrap();
        assert_eq!(checks(&out), 0, "{out}");
        assert_eq!(out, src);
    }

    #[test]
    fn line_numbers_are_kept() {
        let src = "return function(p)\n  while true do\n  end\nend\n";
        let out = instrument(src).unwrap();
        assert_eq!(out.lines().count(), src.lines().count());
    }

    #[test]
    fn reserved_names_are_refused() {
        let e = instrument("local x = 1\n__hp_S.fuel = 1e9").unwrap_err();
        assert_eq!(e, InstrumentError::Reserved { line: 2, name: "__hp_S".into() });
    }

    #[test]
    fn non_ascii_text_outside_strings_is_not_split() {
        // Found by the fuzzer: a multi-byte character where punctuation is expected.
        assert_eq!(instrument("x = 1 \u{e9}\u{1f600} do").unwrap().matches("__hp_X").count(), 1);
        assert_eq!(instrument("s = 'caf\u{e9}' -- \u{e9}").unwrap(), "s = 'caf\u{e9}' -- \u{e9}");
    }

    #[test]
    fn unfinished_tokens_are_errors_not_panics() {
        for s in ["x = 'abc", "x = [==[ abc ]=]", "--[[ never closed", "x = \"a\\"] {
            assert!(instrument(s).is_err(), "{s}");
        }
        // Numbers with exponents and suffixes lex as one token.
        assert_eq!(instrument("x = 1e-3 + 0x1p+4 + 5ULL").unwrap(), "x = 1e-3 + 0x1p+4 + 5ULL");
    }
}
