//! Programs named after the files they came from: `hotplane push --p4 basic.p4` ends the
//! bundled source with `/*hotplane:file=basic.p4*/` on a line of its own (which moves no line
//! and no directive); the node names the program, and its diagnostics' file, after it.

use hotplane_core::kind::{name_in_comment, with_name_comment, CommentMarks};

/// P4's block comment.
const MARKS: CommentMarks = ("/*", "*/");

/// `source` as sent for the file `file_name`.
pub fn named_source(file_name: &str, source: String) -> String {
    let named = with_name_comment(source.into_bytes(), file_name, MARKS);
    String::from_utf8(named).expect("UTF-8 source and a plain name stay UTF-8")
}

/// The file name the program's source (`payload` up to a NUL, where entries may follow)
/// names itself after, if it does and the name is plain.
pub fn source_name(payload: &[u8]) -> Option<&str> {
    name_in_comment(payload.split(|&b| b == 0).next().unwrap_or_default(), MARKS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotplane_core::kind::MAX_PROGRAM_NAME;

    #[test]
    fn a_named_source_keeps_its_lines_and_its_entries_and_gives_its_name_back() {
        let src = "#include <core.p4>\ncontrol C() { apply {} }";
        let sent = named_source("basic.p4", src.to_string());
        assert!(sent.starts_with(src), "nothing before or inside the program moves");
        let mut payload = sent.into_bytes();
        assert_eq!(source_name(&payload), Some("basic.p4"));
        payload.push(0);
        payload.extend_from_slice(b"{\"table_entries\": []}");
        assert_eq!(source_name(&payload), Some("basic.p4"), "entries after the NUL");
        assert_eq!(source_name(src.as_bytes()), None);
    }

    #[test]
    fn names_that_are_not_plain_are_not_kept() {
        for bad in ["", "a/b.p4", "x*/y", "with space.p4", &"n".repeat(MAX_PROGRAM_NAME + 1)] {
            assert_eq!(named_source(bad, "x".into()), "x", "{bad:?}");
        }
        assert_eq!(source_name(b"/*hotplane:file=a b.p4*/"), None);
        assert_eq!(source_name(b"/*hotplane:file=a.p4"), None);
        assert_eq!(source_name(b"/*hotplane:file=a.p4*/ trailing code"), None);
    }
}
