//! Tokenizer cases: each is a lexical rule LuaJIT has, often one a hand-written scanner misses.

use super::TokenKind::{Keyword as K, Name as N, Number as Num, Punct as P, String as S};
use super::*;

fn toks(src: &str) -> Vec<(TokenKind, &str)> {
    tokenize(src)
        .unwrap_or_else(|e| panic!("{src:?}: {e}"))
        .tokens
        .iter()
        .map(|t| (t.kind, t.text))
        .collect()
}

fn lines(src: &str) -> Vec<u32> {
    tokenize(src).unwrap().tokens.iter().map(|t| t.line).collect()
}

fn words(src: &str) -> Vec<&str> {
    toks(src).into_iter().map(|(_, t)| t).collect()
}

#[test]
fn names_keywords_and_punctuation() {
    assert_eq!(
        toks("local x_1 = y.z:w(...) .. a ~= b"),
        vec![
            (K, "local"),
            (N, "x_1"),
            (P, "="),
            (N, "y"),
            (P, "."),
            (N, "z"),
            (P, ":"),
            (N, "w"),
            (P, "("),
            (P, "..."),
            (P, ")"),
            (P, ".."),
            (N, "a"),
            (P, "~="),
            (N, "b"),
        ]
    );
    assert_eq!(
        words("a==b<=c>=d<e>f::l::"),
        ["a", "==", "b", "<=", "c", ">=", "d", "<", "e", ">", "f", "::", "l", "::"]
    );
    for kw in KEYWORDS {
        assert_eq!(toks(kw), vec![(K, kw)]);
    }
    // Keywords are whole words only.
    assert_eq!(
        toks("dox do_ _do do1 goto_"),
        vec![(N, "dox"), (N, "do_"), (N, "_do"), (N, "do1"), (N, "goto_")]
    );
}

#[test]
fn bytes_from_0x80_are_identifier_characters() {
    // LuaJIT takes UTF-8 text in names: `doé` is one name, not `do` and something else.
    assert_eq!(toks("doé = 1"), vec![(N, "doé"), (P, "="), (Num, "1")]);
    assert_eq!(toks("é do"), vec![(N, "é"), (K, "do")]);
    assert_eq!(toks("x=1é"), vec![(N, "x"), (P, "="), (Num, "1é")]);
}

#[test]
fn every_line_end_counts_once() {
    assert_eq!(lines("a\nb\rc\r\nd\n\re\n\nf\r\rg"), [1, 2, 3, 4, 5, 7, 9]);
}

#[test]
fn short_comments_end_at_any_line_end() {
    for eol in ["\n", "\r", "\r\n", "\n\r"] {
        let src = format!("-- comment{eol}while true do end");
        assert_eq!(words(&src), ["while", "true", "do", "end"], "{src:?}");
        assert_eq!(lines(&src)[0], 2, "{src:?}");
    }
    assert!(toks("-- only a comment").is_empty());
    assert!(toks("--").is_empty());
}

#[test]
fn long_comments_of_every_level() {
    assert_eq!(words("--[[ do ]] do"), ["do"]);
    assert_eq!(words("--[==[ ]] ]=] ]===] do ]==] repeat"), ["repeat"]);
    // Nested-looking openers do not nest.
    assert_eq!(words("--[[ --[[ inner ]] do --]]"), ["do"]);
    // `--[` without a full opener is a short comment, to the line end (any line end).
    assert_eq!(words("--[ do\rwhile"), ["while"]);
    assert_eq!(words("--[= do\nwhile"), ["while"]);
    assert_eq!(words("--[==x do\r\nwhile"), ["while"]);
    // Line ends inside long comments count.
    assert_eq!(lines("--[[\r\n\n\r\r]] x"), [4]);
}

#[test]
fn long_strings_of_every_level() {
    assert_eq!(toks("[[do]]"), vec![(S, "[[do]]")]);
    assert_eq!(toks("[==[ ]] ]=] ]==] x"), vec![(S, "[==[ ]] ]=] ]==]"), (N, "x")]);
    assert_eq!(toks("[=[ a ]=]]"), vec![(S, "[=[ a ]=]"), (P, "]")]);
    // A closer that shares its first `]` with a wrong-level one.
    assert_eq!(toks("[[ a ]=]]"), vec![(S, "[[ a ]=]]")]);
    assert_eq!(toks("a[b]"), vec![(N, "a"), (P, "["), (N, "b"), (P, "]")]);
    assert_eq!(toks("a[ [[x]] ]"), vec![(N, "a"), (P, "["), (S, "[[x]]"), (P, "]")]);
    assert_eq!(lines("[[\r\n]] x"), [1, 2]);
}

#[test]
fn short_strings_and_their_escapes() {
    assert_eq!(toks(r#"'do' "while""#), vec![(S, "'do'"), (S, "\"while\"")]);
    assert_eq!(toks(r#"'it\'s' "say \"hi\"" '\\' x"#).len(), 4);
    assert_eq!(toks(r#"'a\"b' "a'b""#), vec![(S, r#"'a\"b'"#), (S, r#""a'b""#)]);
    assert_eq!(toks(r"'\x41\u{1F600}\65\0\255\a\b\f\n\r\t\v' x").len(), 2);
    // A backslash before a line end continues the string; the line end counts once.
    for eol in ["\n", "\r", "\r\n", "\n\r"] {
        let src = format!("'a\\{eol}b' x");
        assert_eq!(toks(&src).len(), 2, "{src:?}");
        assert_eq!(lines(&src), [1, 2], "{src:?}");
    }
    // `\z` skips white space, line ends included.
    assert_eq!(toks("'a\\z \r\n\t  b' do").len(), 2);
    assert_eq!(lines("'a\\z\r\n\r\n' do"), [1, 3]);
    // A quote after `\z` and spaces still ends the string.
    assert_eq!(toks("'a\\z   ' do"), vec![(S, "'a\\z   '"), (K, "do")]);
}

#[test]
fn numbers() {
    for n in [
        "3",
        "3.0",
        "3.1416",
        "314.16e-2",
        "0.31416E1",
        "0xff",
        "0x56",
        "0x1p4",
        "0x.8p-1",
        "0xA.8P+2",
        "1e+10",
        ".5",
        "5.",
        "1ULL",
        "0x10LL",
        "12i",
        "1e3i",
    ] {
        assert_eq!(toks(n), vec![(Num, n)], "{n}");
    }
    // Hex numbers take `p` exponents, decimal ones `e`: in hex, `e` is a digit and the sign
    // after it an operator.
    assert_eq!(words("0x1e+1"), ["0x1e", "+", "1"]);
    assert_eq!(words("1e+1"), ["1e+1"]);
    assert_eq!(words("1+1"), ["1", "+", "1"]);
    // Dots belong to the number (LuaJIT then refuses `1..2`; the lexer does not judge).
    assert_eq!(words("1..2"), ["1..2"]);
    assert_eq!(words("a..2"), ["a", "..", "2"]);
    assert_eq!(words("x.5"), ["x", ".5"]);
}

#[test]
fn goto_and_labels() {
    assert_eq!(
        toks("::top:: goto top"),
        vec![(P, "::"), (N, "top"), (P, "::"), (K, "goto"), (N, "top")]
    );
    assert_eq!(words("a:b::c"), ["a", ":", "b", "::", "c"]);
}

#[test]
fn header_lines_are_skipped_at_the_start_only() {
    let t = tokenize("#!/usr/bin/env luajit do\nwhile").unwrap();
    assert_eq!(t.header, 0..24);
    assert_eq!(t.tokens.iter().map(|t| (t.text, t.line)).collect::<Vec<_>>(), [("while", 2)]);
    let t = tokenize("\u{feff}#x\rdo").unwrap();
    assert_eq!((t.header, t.tokens[0].text, t.tokens[0].line), (0..5, "do", 2));
    let t = tokenize("\u{feff}do").unwrap();
    assert_eq!((t.header, t.tokens[0].text), (0..3, "do"));
    assert_eq!(tokenize("#only").unwrap(), Tokens { header: 0..5, tokens: vec![] });
    // Not at the start: `#` is the length operator.
    assert_eq!(words("x = #t"), ["x", "=", "#", "t"]);
}

#[test]
fn what_luajit_refuses_is_refused() {
    for src in [
        "'abc",
        "'abc\n'",
        "'abc\r'",
        "\"abc",
        "'\\",
        "[[ never closed",
        "[==[ closed at the wrong level ]=]",
        "--[[ never closed",
        "--[==[ ]] ]=]",
        "[=x",
        "'\\q'",
        "'\\xg0'",
        "'\\x4'",
        "'\\u{110000}'",
        "'\\u{}'",
        "'\\u41'",
        "'\\256'",
        "'\\999'",
    ] {
        assert!(tokenize(src).is_err(), "{src:?}");
    }
    // The line of the error is where LuaJIT puts it for unfinished long tokens: their start.
    assert_eq!(tokenize("\n\n--[[\n\n").unwrap_err().line, 3);
}

#[test]
fn token_spans_cover_the_source_text() {
    let src = "local s = [=[x]=] .. 'y' -- c\r\nreturn s";
    for t in tokenize(src).unwrap().tokens {
        assert_eq!(&src[t.start..t.end()], t.text);
    }
}

#[test]
fn other_bytes_are_single_tokens_and_never_split_characters() {
    assert_eq!(words("a @ b ` $"), ["a", "@", "b", "`", "$"]);
    assert_eq!(words("\0"), ["\0"]);
    // Multi-byte text anywhere, including right after punctuation.
    assert_eq!(words("(\u{1f600})"), ["(", "\u{1f600}", ")"]);
}
