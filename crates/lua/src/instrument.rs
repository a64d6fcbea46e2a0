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
//!
//! Where the checks go is decided on tokens from [`crate::lexer`], which follows LuaJIT's own
//! lexical rules (line ends, long brackets, escapes): a scanner that disagreed with LuaJIT about
//! where a comment ends once left a loop without a check.

use crate::lexer::{tokenize, LexError, Token, TokenKind, Tokens};

/// Names starting with this are reserved for the runtime.
pub const RESERVED_PREFIX: &str = "__hp";

/// The statement inserted at every check point.
/// `__hp_G.closed` is set once the watchdog stopped the call (see prelude.lua: it is read from
/// memory on every check, in compiled code too).
pub const CHECK: &str =
    " __hp_S.fuel=__hp_S.fuel-1 if __hp_S.fuel<0 or __hp_G.closed~=0 then __hp_X() end ";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstrumentError {
    #[error("line {line}: names starting with `__hp` are reserved (found `{name}`)")]
    Reserved { line: u32, name: String },
    #[error("line {line}: {what}")]
    Lex { line: u32, what: &'static str },
}

impl From<LexError> for InstrumentError {
    fn from(e: LexError) -> Self {
        InstrumentError::Lex { line: e.line, what: e.what }
    }
}

/// Insert fuel checks into `src` (see the module docs). Refuses reserved names. The tokens come
/// from [`crate::lexer`], which follows LuaJIT's lexical rules, so a check lands wherever LuaJIT
/// sees a loop, a `goto` or a function body, and nowhere inside a string or comment.
pub fn instrument(src: &str) -> Result<String, InstrumentError> {
    let Tokens { header, tokens } = tokenize(src)?;
    let mut out = String::with_capacity(src.len() + 256);
    // The byte order mark and a `#` first line are skipped by LuaJIT at the start of a chunk
    // only; the instrumented text is embedded in a wrapper, so they go (the line end stays).
    let mut copied = header.end;
    let mut function_pending = false;
    for (i, t) in tokens.iter().enumerate() {
        let (before, after) = match t.kind {
            TokenKind::Name if t.text.starts_with(RESERVED_PREFIX) => {
                return Err(InstrumentError::Reserved { line: t.line, name: t.text.to_string() })
            }
            // Loop bodies and `do` blocks, `repeat` bodies.
            TokenKind::Keyword if t.text == "do" || t.text == "repeat" => (false, true),
            TokenKind::Keyword if t.text == "goto" => (is_goto_statement(&tokens, i), false),
            TokenKind::Keyword if t.text == "function" => {
                function_pending = true;
                (false, false)
            }
            // The `)` closing a parameter list (parameters are names and `...`, no parentheses).
            TokenKind::Punct if function_pending && t.text == ")" => {
                function_pending = false;
                (false, true)
            }
            _ => (false, false),
        };
        let at = if before {
            t.start
        } else if after {
            t.end()
        } else {
            continue;
        };
        out.push_str(src.get(copied..at).unwrap_or(""));
        out.push_str(CHECK);
        copied = at;
    }
    out.push_str(src.get(copied..).unwrap_or(""));
    Ok(out)
}

/// Whether the `goto` at `tokens[i]` is a goto statement. LuaJIT also takes `goto` as a name
/// (`local goto = 1`, `while goto do end`, `t.goto`); it parses a goto statement only where a
/// statement starts and the next token is a name (`lj_parse.c`, `parse_stmt`). A statement
/// starts at the beginning, after a token that opens a block, or after one that can end the
/// statement before. (A check placed before a `goto` that is not a statement would make the
/// instrumented text fail to parse, a refusal; one missing before a real backward goto is caught
/// by the bytecode check.)
fn is_goto_statement(tokens: &[Token<'_>], i: usize) -> bool {
    if tokens.get(i + 1).is_none_or(|next| next.kind != TokenKind::Name) {
        return false;
    }
    let Some(prev) = i.checked_sub(1).and_then(|p| tokens.get(p)) else { return true };
    match prev.kind {
        TokenKind::Name | TokenKind::Number | TokenKind::String => true,
        TokenKind::Keyword => matches!(
            prev.text,
            "end" | "true" | "false" | "nil" | "break" | "do" | "then" | "else" | "repeat"
        ),
        TokenKind::Punct => matches!(prev.text, ")" | "]" | "}" | "..." | ";" | "::"),
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
                   for i = 1, 3 do end ::top:: if a then goto top end return t.go end";
        let out = instrument(src).unwrap();
        // function entry, while-do, repeat, for-do, goto statement
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

    /// Lexical tricks: the loop count LuaJIT sees is the check count the instrumenter inserts.
    #[test]
    fn checks_follow_luajit_tokens() {
        let cases: &[(&str, usize)] = &[
            // The finding: a comment ended by CR hid the loop after it.
            ("-- c\rwhile x do end", 1),
            ("-- c\r\nwhile x do end", 1),
            ("-- c\n\rwhile x do end", 1),
            ("--[ c\rwhile x do end", 1),
            ("--[=[ c ]] ]==] while x do end ]=] while x do end", 1),
            ("--[[ --[[ ]] while x do end", 1),
            ("local s = [==[ ]] while x do end ]=] ]==] repeat until x", 1),
            ("local s = 'a\\\rwhile x do end' repeat until x", 1),
            ("local s = \"\\z \r\n while x do end\" repeat until x", 1),
            ("local s = 'it\\'s do' repeat until x", 1),
            ("local s = \"[[\" while x do end local t = \"]]\"", 1),
            ("doé = 1 repeat until x", 1),
            ("for i = 1, 3 do end for k, v in pairs(t) do end", 2),
            ("::a:: goto a", 1),
            // `goto` as a name: no check (LuaJIT parses these as variables).
            ("while goto do end", 1),
            ("local goto = 1 x = goto y = 2", 0),
            ("t.goto = 1 local a = t.goto", 0),
            ("local function goto(goto) return goto end", 1),
            ("::goto:: x = 1", 0),
            // and as a statement after every kind of statement end
            ("x = 1 goto a ::a::", 1),
            ("f() goto a ::a:: do goto a end repeat goto a until x", 5),
            ("if x then goto a else goto a end ::a::", 2),
            ("x = y; goto a ::a:: x = {} goto a", 2),
            ("x = 'a' goto a ::a:: x = t[1] goto a", 2),
            ("x = nil goto a ::a:: x = true goto a x = ... goto a", 3),
            ("local function f() return f() end", 1),
            ("local f = function(...) end local g = function(a, b, ...) end", 2),
            ("local t = { f = function() end } function t:m(a) end function t.n() end", 3),
            ("do local x = 1 end", 1),
            ("x = 0x1e+1 repeat until x", 1),
            ("local s = [[\r]] while x do end", 1),
        ];
        for (src, want) in cases {
            let out = instrument(src).unwrap_or_else(|e| panic!("{src:?}: {e}"));
            assert_eq!(checks(&out), *want, "{src:?} became {out:?}");
        }
    }

    #[test]
    fn header_lines_are_dropped_but_their_line_end_kept() {
        assert_eq!(instrument("#!/bin/luajit\nreturn 1").unwrap(), "\nreturn 1");
        assert_eq!(instrument("\u{feff}return 1").unwrap(), "return 1");
        assert_eq!(instrument("\u{feff}# x\r\nreturn 1").unwrap(), "\r\nreturn 1");
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
