//! Programs named after the files they came from. A P4 update carries only the bundled
//! source, so `hotplane push --p4 basic.p4` names it in the source itself: a comment on a line
//! of its own after the last one, `/*hotplane:file=basic.p4*/`, which moves no line and no
//! directive. The node names the program, and its diagnostics' file, after it.

const OPEN: &str = "/*hotplane:file=";
const CLOSE: &str = "*/";
/// Longest name kept.
pub const MAX_NAME: usize = hotplane_core::kind::MAX_PROGRAM_NAME;
use hotplane_core::kind::is_plain_program_name as is_plain;

/// `source` as sent for the file `file_name` (kept only if it is a plain file name of at most
/// [`MAX_NAME`] bytes).
pub fn named_source(file_name: &str, mut source: String) -> String {
    if is_plain(file_name) {
        if !source.ends_with('\n') {
            source.push('\n');
        }
        source.push_str(OPEN);
        source.push_str(file_name);
        source.push_str(CLOSE);
        source.push('\n');
    }
    source
}

/// The file name the program's source (`payload` up to a NUL, where entries may follow)
/// names itself after, if it does and the name is plain.
pub fn source_name(payload: &[u8]) -> Option<&str> {
    let source = payload.split(|&b| b == 0).next().unwrap_or_default();
    let text = std::str::from_utf8(source).ok()?.trim_end();
    let last = text.rsplit('\n').next()?;
    let name = last.strip_prefix(OPEN)?.strip_suffix(CLOSE)?;
    is_plain(name).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for bad in ["", "a/b.p4", "x*/y", "with space.p4", &"n".repeat(MAX_NAME + 1)] {
            assert_eq!(named_source(bad, "x".into()), "x", "{bad:?}");
        }
        assert_eq!(source_name(b"/*hotplane:file=a b.p4*/"), None);
        assert_eq!(source_name(b"/*hotplane:file=a.p4"), None);
        assert_eq!(source_name(b"/*hotplane:file=a.p4*/ trailing code"), None);
    }
}
