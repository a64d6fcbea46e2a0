//! The C-style preprocessor P4 programs rely on: `#include` (with `core.p4`, `v1model.p4` and
//! `hotplane.p4` built in), object- and function-like `#define`, `#undef`,
//! `#if/#ifdef/#ifndef/#elif/#else/#endif` with integer expressions and `defined`, and `#error`.
//! It works on tokens, so every token keeps the file and position it came from.
//!
//! Stringizing (`#x`) and token pasting (`##`) are not supported and say so.

use std::collections::HashMap;
use std::path::Path;

mod cond;

use crate::budget::{Budget, Limits};
use crate::diag::{Diagnostic, SourceMap, Span};
use crate::lexer::{lex, Tok, Token};
use cond::CondEval;

/// The architecture files shipped inside hotplane, found by `#include <name>` (and by
/// `#include "name"` when no such file exists next to the program).
pub const BUILTIN_INCLUDES: &[(&str, &str)] = &[
    ("core.p4", include_str!("../../include/core.p4")),
    ("v1model.p4", include_str!("../../include/v1model.p4")),
    ("hotplane.p4", include_str!("../../include/hotplane.p4")),
];

/// Nested includes deeper than this are assumed to be a cycle without include guards.
const MAX_INCLUDE_DEPTH: usize = 64;
const MAX_EXPANSION_DEPTH: usize = 128;

/// Where `#include` finds files that are not built in.
pub trait SourceLoader: Send {
    /// Read `name` included from the file called `from`. Returns the name the file is known by
    /// (for diagnostics) and its text, or a reason it could not be read. A file longer than
    /// `max_bytes` is refused without reading the rest (it may be a device that never ends).
    fn load(
        &mut self,
        name: &str,
        from: &str,
        max_bytes: usize,
    ) -> Result<(String, String), IncludeError>;
}

/// Why a [`SourceLoader`] could not give an included file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IncludeError {
    #[error("cannot find include file {name:?}")]
    NotFound { name: String },
    #[error("cannot find include file {name:?} (only built-in includes are available)")]
    NotBuiltIn { name: String },
    #[error(
        "include file {path} is larger than the {left} bytes left of the `include_bytes` budget"
    )]
    TooLarge { path: String, left: usize },
}

/// Why [`bundle`] could not make one self-contained source.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: larger than the `source_bytes` budget ({limit})")]
    TooLarge { path: String, limit: usize },
    #[error("{from}: includes nested too deeply (a cycle?)")]
    TooDeep { from: String },
    #[error("{from}: more includes than the `includes` budget allows")]
    TooManyIncludes { from: String },
    #[error("{from}: the bundled program is larger than the `source_bytes` budget")]
    BundleTooLarge { from: String },
}

/// Read at most `max_bytes` of the file at `path` as UTF-8; `Ok(None)` if there is more.
pub fn read_bounded(path: &Path, max_bytes: usize) -> std::io::Result<Option<String>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(max_bytes as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max_bytes {
        return Ok(None);
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Reads includes from the including file's directory, then from each include directory.
#[derive(Debug, Default, Clone)]
pub struct FsLoader {
    pub include_dirs: Vec<std::path::PathBuf>,
}

impl SourceLoader for FsLoader {
    fn load(
        &mut self,
        name: &str,
        from: &str,
        max_bytes: usize,
    ) -> Result<(String, String), IncludeError> {
        let mut candidates = Vec::new();
        if let Some(dir) = Path::new(from).parent() {
            candidates.push(dir.join(name));
        }
        candidates.extend(self.include_dirs.iter().map(|d| d.join(name)));
        for path in candidates {
            match read_bounded(&path, max_bytes) {
                Ok(Some(text)) => return Ok((path.display().to_string(), text)),
                Ok(None) => {
                    return Err(IncludeError::TooLarge {
                        path: path.display().to_string(),
                        left: max_bytes,
                    })
                }
                Err(_) => {}
            }
        }
        Err(IncludeError::NotFound { name: name.to_string() })
    }
}

/// A loader with no files at all: only the built-in includes resolve (for fuzzing, and for
/// programs that arrive in update packets).
#[derive(Debug, Default, Clone, Copy)]
pub struct BuiltinOnly;

impl SourceLoader for BuiltinOnly {
    fn load(
        &mut self,
        name: &str,
        _from: &str,
        _max_bytes: usize,
    ) -> Result<(String, String), IncludeError> {
        Err(IncludeError::NotBuiltIn { name: name.to_string() })
    }
}

/// `path` as one self-contained source for a node that resolves only the built-in includes
/// (`hotplane push --p4`): every `#include` that finds a file (next to the including file,
/// then in `include_dirs`) is replaced by that file's text, recursively; built-in includes and
/// includes of files that do not exist (perhaps in an inactive `#if`) stay as they are.
///
/// The result is bounded by the default [`Limits`]: what a node would refuse is not built.
pub fn bundle(path: &Path, include_dirs: &[std::path::PathBuf]) -> Result<String, BundleError> {
    let limits = Limits::default();
    let text = read_bounded(path, limits.source_bytes)
        .map_err(|source| BundleError::Read { path: path.display().to_string(), source })?
        .ok_or_else(|| BundleError::TooLarge {
            path: path.display().to_string(),
            limit: limits.source_bytes,
        })?;
    let mut loader = FsLoader { include_dirs: include_dirs.to_vec() };
    let mut out = String::with_capacity(text.len());
    let mut left = (limits.includes, limits.source_bytes);
    bundle_into(&mut out, &text, &path.display().to_string(), &mut loader, 0, &mut left)?;
    Ok(out)
}

/// `left` is what is left of the include count and of the bundle's bytes.
fn bundle_into(
    out: &mut String,
    text: &str,
    from: &str,
    loader: &mut FsLoader,
    depth: usize,
    left: &mut (usize, usize),
) -> Result<(), BundleError> {
    if depth >= MAX_INCLUDE_DEPTH {
        return Err(BundleError::TooDeep { from: from.to_string() });
    }
    for line in text.lines() {
        let directive = line.trim_start().strip_prefix('#').map(str::trim_start);
        let rest = directive.and_then(|d| d.strip_prefix("include")).map(str::trim);
        let target = rest.and_then(|r| {
            let (name, system) = match r.strip_prefix('<') {
                Some(r) => (r.split('>').next()?, true),
                None => (r.strip_prefix('"')?.split('"').next()?, false),
            };
            let builtin = BUILTIN_INCLUDES.iter().any(|(n, _)| *n == name);
            (!(system && builtin)).then_some(name)
        });
        match target.map(|name| loader.load(name, from, left.1)) {
            Some(Ok((resolved, included))) => {
                left.0 = left
                    .0
                    .checked_sub(1)
                    .ok_or_else(|| BundleError::TooManyIncludes { from: from.to_string() })?;
                bundle_into(out, &included, &resolved, loader, depth + 1, left)?;
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
        if out.len() > left.1 {
            return Err(BundleError::BundleTooLarge { from: from.to_string() });
        }
    }
    Ok(())
}

#[derive(Clone, Debug)]
struct Macro {
    params: Option<Vec<String>>,
    body: Vec<Token>,
}

/// One `#if` level: whether its branch is taken, whether any branch was, whether `#else` was seen.
struct Cond {
    active: bool,
    taken: bool,
    seen_else: bool,
    parent_active: bool,
    span: Span,
}

/// Preprocess the program `name` with text `text`. Returns the token stream ending in `Eof`.
pub fn preprocess(
    sources: &mut SourceMap,
    loader: &mut dyn SourceLoader,
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
) -> Result<Vec<Token>, Diagnostic> {
    preprocess_with(sources, loader, name, text, defines, &Limits::default())
}

/// [`preprocess`] under `limits` (includes, include bytes, expanded tokens, `#if` nesting).
pub fn preprocess_with(
    sources: &mut SourceMap,
    loader: &mut dyn SourceLoader,
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
    limits: &Limits,
) -> Result<Vec<Token>, Diagnostic> {
    let mut pp = Preprocessor {
        sources,
        loader,
        macros: HashMap::new(),
        out: Vec::new(),
        budget: limits.expanded_tokens,
        bytes_left: limits.expanded_bytes,
        limits: limits.clone(),
        includes: 0,
        include_bytes: 0,
    };
    for (name, value) in defines {
        let id = pp.sources.add(format!("<define {name}>"), value.to_string());
        let mut body = lex(id, value)?;
        body.pop();
        pp.macros.insert(name.to_string(), Macro { params: None, body });
    }
    let id = pp.sources.add(name, text.to_string());
    pp.file(id, 0)?;
    let end = pp.out.last().map_or(Span::new(id, 0, 0), |t| Span { lo: t.span.hi, ..t.span });
    pp.out.push(Token { tok: Tok::Eof, span: end });
    Ok(pp.out)
}

struct Preprocessor<'a> {
    sources: &'a mut SourceMap,
    loader: &'a mut dyn SourceLoader,
    macros: HashMap<String, Macro>,
    out: Vec<Token>,
    /// Tokens macro expansion may still produce.
    budget: usize,
    /// Bytes of token text macro expansion may still produce: every token copied out of a
    /// body copies its text, so one long identifier doubled a few times is gigabytes.
    bytes_left: usize,
    limits: Limits,
    /// Includes followed so far, and the bytes they brought in.
    includes: usize,
    include_bytes: usize,
}

impl Preprocessor<'_> {
    fn file(&mut self, id: u32, depth: usize) -> Result<(), Diagnostic> {
        let text = self.sources.file(id).map(|f| f.text.clone()).unwrap_or_default();
        let mut tokens = lex(id, &text)?;
        tokens.pop(); // Eof
        let mut conds: Vec<Cond> = Vec::new();
        let mut pending: Vec<Token> = Vec::new();
        for tok in tokens {
            let Tok::Directive(line) = &tok.tok else {
                if conds.last().is_none_or(|c| c.active) {
                    pending.push(tok);
                }
                continue;
            };
            let active = conds.last().is_none_or(|c| c.active);
            let (word, rest) = split_word(line.trim_start());
            let rest = rest.trim();
            match word {
                "if" | "ifdef" | "ifndef" => {
                    let value = if !active {
                        false
                    } else if word == "if" {
                        self.eval_condition(rest, tok.span)? != 0
                    } else {
                        let name = split_word(rest).0;
                        if name.is_empty() {
                            return Err(Diagnostic::new(tok.span, format!("#{word} needs a name")));
                        }
                        self.macros.contains_key(name) == (word == "ifdef")
                    };
                    if conds.len() >= self.limits.nesting_depth {
                        return Err(Diagnostic::over_budget(
                            tok.span,
                            format!(
                                "`#if` directives nest deeper than {}",
                                self.limits.nesting_depth
                            ),
                            self.limits.exceeded(Budget::NestingDepth),
                        ));
                    }
                    conds.push(Cond {
                        active: active && value,
                        taken: value,
                        seen_else: false,
                        parent_active: active,
                        span: tok.span,
                    });
                }
                "elif" | "else" => {
                    let Some(top) = conds.last() else {
                        return Err(Diagnostic::new(tok.span, format!("#{word} without #if")));
                    };
                    if top.seen_else {
                        return Err(Diagnostic::new(tok.span, format!("#{word} after #else")));
                    }
                    let (parent_active, taken) = (top.parent_active, top.taken);
                    let value = if !parent_active || taken {
                        false
                    } else if word == "elif" {
                        self.eval_condition(rest, tok.span)? != 0
                    } else {
                        true
                    };
                    let top = conds.last_mut().expect("checked above");
                    top.active = parent_active && value;
                    top.taken |= value;
                    top.seen_else = word == "else";
                }
                "endif" => {
                    if conds.pop().is_none() {
                        return Err(Diagnostic::new(tok.span, "#endif without #if"));
                    }
                }
                _ if !active => {}
                _ => {
                    self.flush(&mut pending)?;
                    self.directive(word, rest, tok.span, depth)?;
                }
            }
        }
        if let Some(open) = conds.last() {
            return Err(Diagnostic::new(open.span, "#if without #endif"));
        }
        self.flush(&mut pending)
    }

    fn flush(&mut self, pending: &mut Vec<Token>) -> Result<(), Diagnostic> {
        let toks = std::mem::take(pending);
        let mut out = std::mem::take(&mut self.out);
        let result = self.expand(&toks, &mut out, &mut Vec::new());
        self.out = out;
        result
    }

    fn directive(
        &mut self,
        word: &str,
        rest: &str,
        span: Span,
        depth: usize,
    ) -> Result<(), Diagnostic> {
        match word {
            "include" => self.include(rest, span, depth),
            "define" => self.define(rest, span),
            "undef" => {
                self.macros.remove(split_word(rest).0);
                Ok(())
            }
            "error" => Err(Diagnostic::new(span, format!("#error {rest}"))),
            "warning" | "pragma" | "line" | "" => Ok(()),
            other => {
                Err(Diagnostic::new(span, format!("unsupported preprocessor directive #{other}")))
            }
        }
    }

    fn include(&mut self, rest: &str, span: Span, depth: usize) -> Result<(), Diagnostic> {
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(Diagnostic::new(span, "includes nested too deeply (a cycle?)"));
        }
        let (name, system) = if let Some(r) = rest.strip_prefix('<') {
            (r.split('>').next().unwrap_or(""), true)
        } else if let Some(r) = rest.strip_prefix('"') {
            (r.split('"').next().unwrap_or(""), false)
        } else {
            return Err(Diagnostic::new(span, "#include expects \"file\" or <file>"));
        };
        if name.is_empty() {
            return Err(Diagnostic::new(span, "#include with an empty file name"));
        }
        self.includes += 1;
        if let Err(exceeded) = self.limits.check(Budget::Includes, self.includes as u64) {
            return Err(Diagnostic::over_budget(span, "too many `#include`s", exceeded));
        }
        let from = self.sources.file(span.file).map(|f| f.name.clone()).unwrap_or_default();
        let builtin = BUILTIN_INCLUDES.iter().find(|(n, _)| *n == name);
        let left = self.limits.include_bytes.saturating_sub(self.include_bytes);
        let loaded = match (system, builtin) {
            (true, Some((n, text))) => Ok((format!("<{n}>"), text.to_string())),
            (_, builtin) => match (self.loader.load(name, &from, left), builtin) {
                (Ok(found), _) => Ok(found),
                (Err(_), Some((n, text))) => Ok((format!("<{n}>"), text.to_string())),
                (Err(e), None) => Err(e),
            },
        };
        let (resolved, text) = loaded.map_err(|e| Diagnostic::new(span, e.to_string()))?;
        self.include_bytes += text.len();
        let used = self.include_bytes as u64;
        if let Err(exceeded) = self.limits.check(Budget::IncludeBytes, used) {
            return Err(Diagnostic::over_budget(span, "included text too large", exceeded));
        }
        let id = self.sources.add(resolved, text);
        self.file(id, depth + 1)
    }

    fn define(&mut self, rest: &str, span: Span) -> Result<(), Diagnostic> {
        let (name, _) = split_word(rest);
        if name.is_empty() || !name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()) {
            return Err(Diagnostic::new(span, "#define needs a macro name"));
        }
        let after = &rest[name.len()..];
        let (params, body_text) = if let Some(p) = after.strip_prefix('(') {
            let Some(close) = p.find(')') else {
                return Err(Diagnostic::new(span, format!("macro {name}: missing `)`")));
            };
            let params: Vec<String> = p[..close]
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            (Some(params), &p[close + 1..])
        } else {
            (None, after)
        };
        if body_text.contains('#') {
            return Err(Diagnostic::new(
                span,
                format!("macro {name}: `#` and `##` in macro bodies are not supported"),
            ));
        }
        // The body is lexed as its own small file so that its tokens have a home for spans.
        let id = self
            .sources
            .add(format!("{} (macro {name})", self.sources.position(span)), body_text.to_string());
        let mut body = lex(id, body_text)?;
        body.pop();
        self.macros.insert(name.to_string(), Macro { params, body });
        Ok(())
    }

    /// Expand macros in `toks` into `out`; `active` holds macros being expanded (no recursion).
    fn expand(
        &mut self,
        toks: &[Token],
        out: &mut Vec<Token>,
        active: &mut Vec<String>,
    ) -> Result<(), Diagnostic> {
        if active.len() > MAX_EXPANSION_DEPTH {
            let span = toks.first().map(|t| t.span).unwrap_or_default();
            return Err(Diagnostic::new(span, "macro expansion nested too deeply"));
        }
        let mut i = 0;
        while i < toks.len() {
            let tok = &toks[i];
            i += 1;
            let Tok::Ident(name) = &tok.tok else {
                out.push(tok.clone());
                continue;
            };
            let Some(mac) = self.macros.get(name).filter(|_| !active.contains(name)) else {
                out.push(tok.clone());
                continue;
            };
            // Charged before the body is copied, so a refused expansion allocates nothing.
            let charge = mac
                .params
                .is_none()
                .then(|| (mac.body.len(), mac.body.iter().map(token_bytes).sum::<usize>()));
            if let Some((tokens, bytes)) = charge {
                self.spend(tokens, bytes, tok.span)?;
            }
            let Some(mac) = self.macros.get(name).cloned() else { continue };
            let body = match mac.params {
                None => mac.body,
                Some(params) => {
                    if !toks.get(i).is_some_and(|t| t.is_punct("(")) {
                        out.push(tok.clone());
                        continue;
                    }
                    let (args, next) = macro_args(toks, i, tok.span)?;
                    i = next;
                    if args.len() != params.len()
                        && !(params.is_empty() && args.len() == 1 && args[0].is_empty())
                    {
                        return Err(Diagnostic::new(
                            tok.span,
                            format!(
                                "macro {name} takes {} arguments, got {}",
                                params.len(),
                                args.len()
                            ),
                        ));
                    }
                    let mut expanded_args = Vec::with_capacity(args.len());
                    for arg in &args {
                        let mut e = Vec::new();
                        self.expand(arg, &mut e, active)?;
                        expanded_args.push(e);
                    }
                    let mut body = Vec::new();
                    let (mut size, mut bytes) = (0usize, 0usize);
                    for t in &mac.body {
                        let arg = match &t.tok {
                            Tok::Ident(n) => params
                                .iter()
                                .position(|p| p == n)
                                .and_then(|k| expanded_args.get(k)),
                            _ => None,
                        };
                        let (n, b) = match arg {
                            Some(arg) => (arg.len(), arg.iter().map(token_bytes).sum()),
                            None => (1, token_bytes(t)),
                        };
                        size = size.saturating_add(n);
                        bytes = bytes.saturating_add(b);
                    }
                    self.spend(size, bytes, tok.span)?;
                    for t in &mac.body {
                        match &t.tok {
                            Tok::Ident(n) => match params.iter().position(|p| p == n) {
                                Some(k) => {
                                    body.extend(expanded_args.get(k).cloned().unwrap_or_default())
                                }
                                None => body.push(t.clone()),
                            },
                            _ => body.push(t.clone()),
                        }
                    }
                    body
                }
            };
            active.push(name.clone());
            // Tokens from a macro body point at the body (the `#define` line) so that an error in
            // a macro's text is found where the text is; `>` adjacency survives that way too.
            let result = self.expand(&body, out, active);
            active.pop();
            result?;
        }
        Ok(())
    }

    /// Charge `tokens` tokens of `bytes` bytes of text to the expansion budgets.
    fn spend(&mut self, tokens: usize, bytes: usize, span: Span) -> Result<(), Diagnostic> {
        self.budget = self.budget.checked_sub(tokens).ok_or_else(|| {
            Diagnostic::over_budget(
                span,
                "macro expansion produces too many tokens",
                self.limits.exceeded(Budget::ExpandedTokens),
            )
        })?;
        self.bytes_left = self.bytes_left.checked_sub(bytes).ok_or_else(|| {
            Diagnostic::over_budget(
                span,
                "macro expansion produces too much text",
                self.limits.exceeded(Budget::ExpandedBytes),
            )
        })?;
        Ok(())
    }

    /// Evaluate an `#if` / `#elif` expression.
    fn eval_condition(&mut self, text: &str, span: Span) -> Result<i128, Diagnostic> {
        let id =
            self.sources.add(format!("{} (#if)", self.sources.position(span)), text.to_string());
        let mut raw = lex(id, text)?;
        raw.pop();
        // `defined X` and `defined(X)` are resolved before expansion, as in C.
        let mut resolved = Vec::new();
        let mut i = 0;
        while i < raw.len() {
            if raw[i].is_ident("defined") {
                let paren = raw.get(i + 1).is_some_and(|t| t.is_punct("("));
                let name_at = if paren { i + 2 } else { i + 1 };
                let Some(Tok::Ident(name)) = raw.get(name_at).map(|t| &t.tok) else {
                    return Err(Diagnostic::new(raw[i].span, "`defined` needs a macro name"));
                };
                let value = self.macros.contains_key(name) as u128;
                resolved.push(Token {
                    tok: Tok::Int { value, width: None, signed: false },
                    span: raw[i].span,
                });
                i = name_at + 1 + paren as usize;
            } else {
                resolved.push(raw[i].clone());
                i += 1;
            }
        }
        let mut expanded = Vec::new();
        self.expand(&resolved, &mut expanded, &mut Vec::new())?;
        let mut eval = CondEval {
            toks: &expanded,
            pos: 0,
            span,
            depth: 0,
            max_depth: self.limits.nesting_depth,
        };
        let value = eval.ternary()?;
        if eval.pos != expanded.len() {
            return Err(Diagnostic::new(
                expanded[eval.pos].span,
                "unexpected token in #if expression",
            ));
        }
        Ok(value)
    }
}

/// The bytes of text a token holds: its source text (a copied token copies its string).
fn token_bytes(t: &Token) -> usize {
    (t.span.hi as usize).saturating_sub(t.span.lo as usize)
}

fn split_word(s: &str) -> (&str, &str) {
    let end = s.find(|c: char| !(c == '_' || c.is_ascii_alphanumeric())).unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// The arguments of a function-like macro call starting at the `(` at `open`. Returns them and
/// the index after the closing `)`.
fn macro_args(
    toks: &[Token],
    open: usize,
    span: Span,
) -> Result<(Vec<Vec<Token>>, usize), Diagnostic> {
    let mut args = vec![Vec::new()];
    let mut depth = 0usize;
    let mut i = open + 1;
    while let Some(t) = toks.get(i) {
        i += 1;
        if t.is_punct("(") {
            depth += 1;
        } else if t.is_punct(")") {
            if depth == 0 {
                return Ok((args, i));
            }
            depth -= 1;
        } else if t.is_punct(",") && depth == 0 {
            args.push(Vec::new());
            continue;
        }
        args.last_mut().expect("never empty").push(t.clone());
    }
    Err(Diagnostic::new(span, "unterminated macro call"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::CompileError;

    /// The tokens of `src` as text, or the diagnostic rendered with its source.
    fn run(src: &str) -> Result<Vec<String>, CompileError> {
        let mut sources = SourceMap::default();
        match preprocess(&mut sources, &mut BuiltinOnly, "t.p4", src, &[]) {
            Ok(toks) => Ok(toks
                .iter()
                .filter(|t| t.tok != Tok::Eof)
                .map(|t| sources.snippet(t.span).to_string())
                .collect()),
            Err(d) => Err(CompileError::new(&sources, vec![d])),
        }
    }

    #[test]
    fn defines_and_conditionals() {
        let out = run("#define N 4\n#define ADD(a, b) ((a) + (b))\n#if N > 3 && !defined(NOPE)\nx = ADD(N, 1);\n#else\ny\n#endif\n").unwrap();
        assert_eq!(out.join(" "), "x = ( ( 4 ) + ( 1 ) ) ;");
        let out = run("#ifdef A\na\n#elif 2 >> 1 == 1\nb\n#else\nc\n#endif").unwrap();
        assert_eq!(out, vec!["b"]);
        let out = run("#ifndef G\n#define G\ng\n#endif\n#ifndef G\nh\n#endif").unwrap();
        assert_eq!(out, vec!["g"]);
    }

    #[test]
    fn recursion_and_errors_are_bounded() {
        assert_eq!(run("#define A A + 1\nA").unwrap().join(" "), "A + 1");
        assert!(run("#if 1\nx").unwrap_err().rendered.contains("#if without #endif"));
        assert!(run("#endif").unwrap_err().rendered.contains("#endif without #if"));
        assert!(run("#include \"nope.p4\"")
            .unwrap_err()
            .rendered
            .contains("cannot find include file"));
        assert!(run("#error stop here")
            .unwrap_err()
            .rendered
            .contains("t.p4:1:1: error: #error stop here"));
        assert!(run("#frobnicate")
            .unwrap_err()
            .rendered
            .contains("unsupported preprocessor directive"));
        assert!(run("#if 1/0\n#endif").unwrap_err().rendered.contains("division by zero"));
        assert!(run("#define X(a) #a\n").unwrap_err().rendered.contains("not supported"));
    }

    #[test]
    fn exponential_macros_hit_the_budget() {
        let mut src = String::from("#define A0(x) x x x x x x x x\n");
        for i in 1..12 {
            src.push_str(&format!("#define A{i}(x) A{}(A{}(x))\n", i - 1, i - 1));
        }
        src.push_str("A11(1)\n");
        assert!(run(&src).unwrap_err().rendered.contains("too many tokens"));
    }

    #[test]
    fn builtin_includes_resolve_with_guards() {
        let out =
            run("#include <core.p4>\n#include <v1model.p4>\n#include \"core.p4\"\nend").unwrap();
        assert_eq!(out.last().map(String::as_str), Some("end"));
        assert!(out.iter().any(|t| t == "V1Switch"));
        // core.p4 is included three times (twice through v1model.p4) but declared once.
        let externs = out.windows(2).filter(|w| w[0] == "extern" && w[1] == "packet_in").count();
        assert_eq!(externs, 1);
    }
}
