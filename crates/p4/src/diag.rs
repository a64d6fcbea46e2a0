//! Source files, spans and diagnostics.
//!
//! Every token remembers the file and byte range it came from, so an error deep in type checking
//! still prints `file:line:col` and the offending line, as a compiler user expects.

use std::fmt;
use std::sync::Arc;

use crate::budget::Exceeded;

/// Index of a file in a [`SourceMap`].
pub type FileId = u32;

/// A byte range in one source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub file: FileId,
    pub lo: u32,
    pub hi: u32,
}

impl Span {
    pub fn new(file: FileId, lo: usize, hi: usize) -> Self {
        Span { file, lo: lo as u32, hi: hi as u32 }
    }

    /// The smallest span covering both (the first one's file wins if they differ).
    pub fn to(self, other: Span) -> Span {
        if self.file != other.file {
            return self;
        }
        Span { file: self.file, lo: self.lo.min(other.lo), hi: self.hi.max(other.hi) }
    }
}

/// One loaded source file with its line index.
#[derive(Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: Arc<str>,
    line_starts: Vec<u32>,
}

impl SourceFile {
    fn new(name: String, text: Arc<str>) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i as u32 + 1));
        SourceFile { name, text, line_starts }
    }

    /// 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let line = self.line_starts.partition_point(|&start| start <= offset).max(1) - 1;
        let start = self.line_starts[line] as usize;
        let end = (offset as usize).min(self.text.len());
        let col = self.text.get(start..end).map_or(end - start, |s| s.chars().count());
        (line + 1, col + 1)
    }

    /// The text of a 1-based line, without its newline.
    pub fn line_text(&self, line: usize) -> &str {
        let Some(&start) = self.line_starts.get(line.wrapping_sub(1)) else { return "" };
        let rest = &self.text[start as usize..];
        rest.split('\n').next().unwrap_or("").trim_end_matches('\r')
    }
}

/// All files a compilation read, in the order they were first opened.
#[derive(Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<Arc<str>>) -> FileId {
        self.files.push(SourceFile::new(name.into(), text.into()));
        (self.files.len() - 1) as FileId
    }

    pub fn file(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id as usize)
    }

    /// `file:line:col` of a span's start.
    pub fn position(&self, span: Span) -> String {
        match self.file(span.file) {
            Some(f) => {
                let (line, col) = f.line_col(span.lo);
                format!("{}:{line}:{col}", f.name)
            }
            None => "<unknown>".to_string(),
        }
    }

    /// The source text a span covers (empty if the span is not in a known file).
    pub fn snippet(&self, span: Span) -> &str {
        self.file(span.file)
            .and_then(|f| f.text.get(span.lo as usize..span.hi as usize))
            .unwrap_or("")
    }

    /// A diagnostic rendered like a compiler's: position, message, the line and a caret.
    pub fn render(&self, diag: &Diagnostic) -> String {
        let mut out = format!("{}: error: {}", self.position(diag.span), diag.message);
        if let Some(f) = self.file(diag.span.file) {
            let (line, col) = f.line_col(diag.span.lo);
            let text = f.line_text(line);
            if !text.is_empty() {
                let width = (diag.span.hi.saturating_sub(diag.span.lo) as usize).clamp(1, 80);
                let (text, caret) = quote_window(text, col - 1);
                out.push_str(&format!("\n  {text}\n  {}{}", " ".repeat(caret), "^".repeat(width)));
            }
        }
        for note in &diag.notes {
            out.push_str("\n  note: ");
            out.push_str(note);
        }
        out
    }
}

/// The longest source line a diagnostic quotes whole.
const MAX_QUOTE: usize = 160;

/// The part of `line` a diagnostic quotes, and where in it the caret goes: a long line (a
/// hostile program may be one line of megabytes) is cut to [`MAX_QUOTE`] characters around
/// the caret at character `caret`, with `...` where it was cut.
fn quote_window(line: &str, caret: usize) -> (String, usize) {
    let chars = line.chars().count();
    if chars <= MAX_QUOTE {
        return (line.to_string(), caret);
    }
    let start = caret.saturating_sub(MAX_QUOTE / 3).min(chars.saturating_sub(MAX_QUOTE));
    let mut shown: String = line.chars().skip(start).take(MAX_QUOTE).collect();
    let mut caret = caret - start;
    if start > 0 {
        shown.insert_str(0, "...");
        caret += 3;
    }
    if start + MAX_QUOTE < chars {
        shown.push_str("...");
    }
    (shown, caret)
}

/// One error found in a P4 program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub span: Span,
    pub message: String,
    pub notes: Vec<String>,
    /// The budget this error is about, if it is one.
    pub exceeded: Option<Exceeded>,
}

impl Diagnostic {
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        Diagnostic { span, message: message.into(), notes: Vec::new(), exceeded: None }
    }

    /// A budget exceeded at `span`; `what` says what went over, in the program's terms.
    pub fn over_budget(span: Span, what: impl fmt::Display, exceeded: Exceeded) -> Self {
        Diagnostic {
            span,
            message: format!("{what}: {exceeded}"),
            notes: Vec::new(),
            exceeded: Some(exceeded),
        }
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

/// The error a front-end phase returns: one or more diagnostics, already rendered with the
/// source map so the error can outlive it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    pub diagnostics: Vec<Diagnostic>,
    pub rendered: String,
    /// The first budget the program went over, if that is why it was refused.
    pub exceeded: Option<Exceeded>,
}

impl CompileError {
    pub fn new(sources: &SourceMap, diagnostics: Vec<Diagnostic>) -> Self {
        let rendered = diagnostics.iter().map(|d| sources.render(d)).collect::<Vec<_>>().join("\n");
        let exceeded = diagnostics.iter().find_map(|d| d.exceeded);
        CompileError { diagnostics, rendered, exceeded }
    }

    /// An error without a source position (a file that cannot be read).
    pub fn plain(message: String) -> Self {
        CompileError { diagnostics: Vec::new(), rendered: message, exceeded: None }
    }

    /// A budget exceeded before there is a position to show (the source is too large).
    pub fn over_budget(what: impl fmt::Display, exceeded: Exceeded) -> Self {
        let rendered = format!("{what}: {exceeded}");
        CompileError { diagnostics: Vec::new(), rendered, exceeded: Some(exceeded) }
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rendered)
    }
}

impl std::error::Error for CompileError {}

pub type DResult<T> = Result<T, Diagnostic>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_quoted_around_the_caret() {
        let line = format!("{}X{}", "a".repeat(1000), "b".repeat(1000));
        let (shown, caret) = quote_window(&line, 1000);
        assert!(shown.len() <= MAX_QUOTE + 6, "{}", shown.len());
        assert!(shown.starts_with("...") && shown.ends_with("..."));
        assert_eq!(shown.chars().nth(caret), Some('X'));
        assert_eq!(quote_window("short", 2), ("short".to_string(), 2));
        let (shown, caret) = quote_window(&line, 2000);
        assert_eq!(shown.chars().nth(caret), Some('b'));
        assert!(shown.starts_with("...") && !shown.ends_with("..."));
    }
}
