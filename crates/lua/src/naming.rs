//! Functions named after the files they came from: `hotplane lua update ttl.lua` ends the
//! source with `--[[hotplane:file=ttl.lua]]` on a line of its own (which moves no line, and
//! leaves a byte order mark or a `#!` first line where Lua looks for them); the node names
//! the function, and its errors' chunk, after it (`ttl.lua:3: ...`).

use hotplane_core::kind::{name_in_comment, with_name_comment, CommentMarks};

/// Lua's block comment.
const MARKS: CommentMarks = ("--[[", "]]");

/// `source` as sent for the file `file_name`.
pub fn named_source(file_name: &str, source: &[u8]) -> Vec<u8> {
    with_name_comment(source.to_vec(), file_name, MARKS)
}

/// The file name a source names itself after, if it does and the name is plain.
pub fn source_name(source: &[u8]) -> Option<&str> {
    name_in_comment(source, MARKS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotplane_core::kind::MAX_PROGRAM_NAME;

    #[test]
    fn a_named_source_keeps_its_lines_and_gives_its_name_back() {
        let src = b"local x = 1\nreturn x";
        let sent = named_source("ttl.lua", src);
        assert_eq!(source_name(&sent), Some("ttl.lua"));
        assert!(sent.starts_with(src), "no line moved");
        assert_eq!(source_name(src), None);
        // Lua skips a byte order mark and a `#` first line only at the start: they stay there.
        let script = b"\xef\xbb\xbf#!/usr/bin/env luajit\nreturn 1";
        let sent = named_source("s.lua", script);
        assert!(sent.starts_with(script));
        assert_eq!(source_name(&sent), Some("s.lua"));
        assert_eq!(source_name(&named_source("t.lua", b"#!only a shebang")), Some("t.lua"));
        assert_eq!(source_name(&named_source("b.lua", b"x = '\xff'")), Some("b.lua"), "not UTF-8");
    }

    #[test]
    fn names_that_are_not_plain_are_not_kept() {
        for bad in ["", "a/b.lua", "x]]y", "with space.lua", &"n".repeat(MAX_PROGRAM_NAME + 1)] {
            assert_eq!(named_source(bad, b"return 1"), b"return 1", "{bad:?}");
            let forged = format!("return 1\n--[[hotplane:file={bad}]]");
            assert_eq!(source_name(forged.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(source_name(b"--[[hotplane:file=unterminated"), None);
        assert_eq!(source_name(b"--[[hotplane:file=a.lua]"), None);
        assert_eq!(source_name(b"--[[hotplane:file=a.lua]] return 1"), None, "code after it");
    }
}
