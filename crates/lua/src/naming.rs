//! Functions named after the files they came from. A Lua update carries only source, so the
//! sender names it in the source itself: an inline block comment before the first line,
//! `--[[hotplane:file=ttl.lua]]`, which any Lua reads as a comment and which moves no line. The
//! node names the function, and its errors' chunk, after it (`ttl.lua:3: ...`).

/// The comment's opening; the name ends at `]]`.
const OPEN: &[u8] = b"--[[hotplane:file=";
/// Longest name kept.
pub const MAX_NAME: usize = hotplane_core::kind::MAX_PROGRAM_NAME;
use hotplane_core::kind::is_plain_program_name as is_plain;

/// Where Lua code starts: after a UTF-8 byte order mark and a first line starting with `#`
/// (`#!/usr/bin/env luajit`), which Lua skips only at the very start of a chunk.
fn code_start(source: &[u8]) -> usize {
    let bom = if source.starts_with(b"\xef\xbb\xbf") { 3 } else { 0 };
    match source[bom..].first() {
        Some(b'#') => {
            source[bom..].iter().position(|&b| b == b'\n').map_or(source.len(), |n| bom + n + 1)
        }
        _ => bom,
    }
}

/// `source` as sent for the file `file_name` (a name the node keeps if it is a plain file
/// name of at most [`MAX_NAME`] bytes).
pub fn named_source(file_name: &str, source: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(OPEN.len() + file_name.len() + 2 + source.len());
    let at = code_start(source);
    out.extend_from_slice(&source[..at]);
    if is_plain(file_name) && at > 0 && source[at - 1] != b'\n' && at == source.len() {
        out.push(b'\n'); // a `#` line and nothing after it
    }
    if is_plain(file_name) {
        out.extend_from_slice(OPEN);
        out.extend_from_slice(file_name.as_bytes());
        out.extend_from_slice(b"]]");
    }
    out.extend_from_slice(&source[at..]);
    out
}

/// The file name a source names itself after, if it does and the name is plain.
pub fn source_name(source: &[u8]) -> Option<&str> {
    let rest = source[code_start(source)..].strip_prefix(OPEN)?;
    let end = rest.iter().take(MAX_NAME + 2).position(|&b| b == b']')?;
    let name = std::str::from_utf8(&rest[..end]).ok()?;
    (rest.get(end..end + 2) == Some(b"]]") && is_plain(name)).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_source_keeps_its_lines_and_gives_its_name_back() {
        let src = b"local x = 1\nreturn x";
        let sent = named_source("ttl.lua", src);
        assert_eq!(source_name(&sent), Some("ttl.lua"));
        assert_eq!(sent.iter().filter(|&&b| b == b'\n').count(), 1, "no line added");
        assert!(sent.ends_with(src));
        assert_eq!(source_name(src), None);
        // Lua skips a byte order mark and a `#` first line only at the start: the comment
        // goes after them.
        let script = b"\xef\xbb\xbf#!/usr/bin/env luajit\nreturn 1";
        let sent = named_source("s.lua", script);
        assert!(sent
            .starts_with(b"\xef\xbb\xbf#!/usr/bin/env luajit\n--[[hotplane:file=s.lua]]return 1"));
        assert_eq!(source_name(&sent), Some("s.lua"));
        assert_eq!(source_name(&named_source("t.lua", b"#!only a shebang")), Some("t.lua"));
    }

    #[test]
    fn names_that_are_not_plain_are_not_kept() {
        for bad in ["", "a/b.lua", "x]]y", "with space.lua", &"n".repeat(MAX_NAME + 1)] {
            assert_eq!(named_source(bad, b"return 1"), b"return 1", "{bad:?}");
            if !bad.contains("]]") {
                let forged = format!("--[[hotplane:file={bad}]]return 1");
                assert_eq!(source_name(forged.as_bytes()), None, "{bad:?}");
            }
        }
        // The comment ends at the first `]]`, as Lua reads it.
        assert_eq!(source_name(b"--[[hotplane:file=x]]y]]return 1"), Some("x"));
        assert_eq!(source_name(b"--[[hotplane:file=unterminated"), None);
        assert_eq!(source_name(b"--[[hotplane:file=a.lua]"), None);
    }
}
