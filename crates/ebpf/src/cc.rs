//! C source to an eBPF object with the system's clang ("extensible" updates).
//!
//! This runs on the control thread, never on a worker: a compile takes a few hundred
//! milliseconds. The source comes from an update, which is remote input even when it is
//! authenticated, so a compile may read nothing of the node but the source and the system's
//! public headers, and its errors quote nothing else:
//!
//! - the source is checked before clang sees it ([`check_source`]): `#include` only of a literal
//!   relative header name without `..`, and only before any other line (so a header cannot be
//!   redefined by the update's macros); no `#include_next`, `#import`, `#embed`, `__has_include`,
//!   `_Pragma`, `#pragma GCC dependency`, `#line` or `# N "FILE"` line markers, or digraph
//!   spellings of them;
//! - clang runs with `-nostdinc`, only clang's own and the system's header directories, no
//!   environment, in a private directory (random name, mode 0700) that is removed afterwards;
//! - the source is preprocessed first, and its include lines alone; inline assembly the update
//!   has beyond its headers' is refused (`.incbin` would pull a node file into the object).
//!   This counts, and trusts no line marker: markers once let `#line` pass the update's
//!   assembly off as a header's. Then the source itself is compiled (not the preprocessed text,
//!   where a macro-made `# include` would become a directive); every file any run read must lie
//!   in those header directories;
//! - only diagnostics located in the update's source (`prog.c:LINE:COL: ...`, without quoted
//!   source lines) go back, at most a dozen.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Largest source accepted.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;
/// Longest a compile may take.
pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(30);
/// Diagnostic lines passed back on failure.
const DIAGNOSTIC_LINES: usize = 12;
/// Largest object read back.
const MAX_OBJECT_BYTES: u64 = 64 << 20;

/// Why C source did not become an object: refused before clang ran, clang failed (with the
/// diagnostics about the update's own lines), or the node could not run it.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("C source is {len} bytes; the limit is {MAX_SOURCE_BYTES}")]
    TooLarge { len: usize },
    /// The source could make the compile read a node file.
    #[error("prog.c:{line}: {what}")]
    Refused { line: usize, what: String },
    #[error("C updates need clang on this node (apt-get install clang libbpf-dev); send an ELF object or bytecode instead")]
    NoClang,
    #[error("temporary directory path contains a NUL byte")]
    TempPathNul,
    #[error("cannot create a private compile directory: {0}")]
    PrivateDir(std::io::Error),
    #[error("cannot run {}: {source}", clang.display())]
    Spawn { clang: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Wait(std::io::Error),
    #[error("clang did not finish within {}s", COMPILE_TIMEOUT.as_secs())]
    Timeout,
    #[error("clang failed ({status}):\n{}", diagnostics.join("\n"))]
    Failed { status: std::process::ExitStatus, diagnostics: Vec<String> },
    #[error("the compile read a file outside the system headers")]
    ReadOutside,
    /// A file of the compile directory could not be written or read (`what` says which).
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

fn io_error(what: &str, source: std::io::Error) -> CompileError {
    CompileError::Io { what: what.to_string(), source }
}

/// The clang to use: `$HOTPLANE_CLANG`, else `clang` on the PATH.
pub fn clang() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HOTPLANE_CLANG") {
        return Some(p.into());
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| PathBuf::from(d).join("clang"))
        .find(|p| p.is_file())
}

/// A directory only this process can enter, with an unpredictable name (mkdtemp), removed on
/// drop: another local user can neither guess nor pre-create it, nor read or swap its files.
pub(crate) struct PrivateDir(PathBuf);

impl PrivateDir {
    pub(crate) fn new() -> Result<Self, CompileError> {
        let template = std::env::temp_dir().join("hotplane-cc-XXXXXX");
        let mut bytes = std::ffi::CString::new(template.as_os_str().as_encoded_bytes())
            .map_err(|_| CompileError::TempPathNul)?
            .into_bytes_with_nul();
        // SAFETY: `bytes` is a writable NUL-terminated template ending in XXXXXX, as mkdtemp
        // requires; it creates the directory with mode 0700 and rewrites the Xs in place.
        let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        if made.is_null() {
            return Err(CompileError::PrivateDir(std::io::Error::last_os_error()));
        }
        bytes.pop();
        Ok(Self(PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(
            bytes,
        ))))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Header directories a compile may read: clang's own (`stddef.h`, ...) and the system's
/// (`linux/*.h` from linux-libc-dev, `bpf/*.h` from libbpf-dev). Public package headers only.
fn header_dirs(clang: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let resource = Command::new(clang)
        .arg("-print-resource-dir")
        .env_clear()
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    if let Ok(out) = resource {
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !dir.is_empty() {
            dirs.push(PathBuf::from(dir).join("include"));
        }
    }
    dirs.push(PathBuf::from(format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH)));
    dirs.push(PathBuf::from("/usr/include"));
    dirs.retain(|d| d.is_dir());
    dirs
}

/// Why a source is refused before clang runs.
fn refuse(line: usize, what: &str) -> CompileError {
    CompileError::Refused { line, what: what.to_string() }
}

/// What C updates may include.
const INCLUDE_RULE: &str =
    "C updates include only system headers by relative name (e.g. <linux/bpf.h>), before any other line";

/// The source as logical lines: line splices (`\` newline) joined, comments replaced by a
/// space, string and character literals kept. Each line keeps the number of its first
/// physical line.
fn logical_lines(source: &[u8]) -> Vec<(usize, Vec<u8>)> {
    let mut lines = Vec::new();
    let (mut cur, mut cur_line, mut line) = (Vec::new(), 1usize, 1usize);
    let mut i = 0;
    #[derive(PartialEq)]
    enum In {
        Code,
        Str(u8),
        LineComment,
        BlockComment,
    }
    let mut state = In::Code;
    while i < source.len() {
        let c = source[i];
        // Splices go first, everywhere (translation phase 2).
        if c == b'\\' {
            let rest = &source[i + 1..];
            let skip = if rest.starts_with(b"\r\n") {
                2
            } else if rest.starts_with(b"\n") {
                1
            } else {
                0
            };
            if skip > 0 {
                i += 1 + skip;
                line += 1;
                continue;
            }
        }
        let next = source.get(i + 1).copied();
        match state {
            In::Code => match (c, next) {
                (b'/', Some(b'/')) => {
                    state = In::LineComment;
                    i += 2;
                    continue;
                }
                (b'/', Some(b'*')) => {
                    state = In::BlockComment;
                    cur.push(b' ');
                    i += 2;
                    continue;
                }
                (b'"' | b'\'', _) => {
                    state = In::Str(c);
                    cur.push(c);
                }
                (b'\n', _) => {
                    lines.push((cur_line, std::mem::take(&mut cur)));
                    line += 1;
                    cur_line = line;
                }
                _ => cur.push(c),
            },
            In::Str(q) => {
                cur.push(c);
                if c == b'\\' {
                    if let Some(n) = next {
                        cur.push(n);
                        i += 2;
                        continue;
                    }
                } else if c == q {
                    state = In::Code;
                } else if c == b'\n' {
                    // An unterminated literal ends at the line's end, as in C.
                    cur.pop();
                    state = In::Code;
                    lines.push((cur_line, std::mem::take(&mut cur)));
                    line += 1;
                    cur_line = line;
                }
            }
            In::LineComment => {
                if c == b'\n' {
                    state = In::Code;
                    lines.push((cur_line, std::mem::take(&mut cur)));
                    line += 1;
                    cur_line = line;
                }
            }
            In::BlockComment => {
                if c == b'*' && next == Some(b'/') {
                    state = In::Code;
                    i += 2;
                    continue;
                }
                if c == b'\n' {
                    line += 1;
                }
            }
        }
        i += 1;
    }
    lines.push((cur_line, cur));
    lines
}

/// Identifiers of a logical line outside its literals.
fn identifiers(line: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < line.len() {
        let c = line[i];
        if c == b'"' || c == b'\'' {
            i += 1;
            while i < line.len() && line[i] != c {
                i += if line[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < line.len() && (line[i].is_ascii_alphanumeric() || line[i] == b'_') {
                i += 1;
            }
            out.push(&line[start..i]);
        } else if c.is_ascii_digit() {
            // A number (with its suffix): not an identifier.
            while i < line.len() && (line[i].is_ascii_alphanumeric() || line[i] == b'_') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The header name of `#include <name>` or `#include "name"` if it is safe: literal, relative,
/// no `..` component, plain characters.
fn safe_header_name(operand: &[u8]) -> Option<&[u8]> {
    let operand = operand.trim_ascii();
    let (open, close) = (*operand.first()?, *operand.last()?);
    if operand.len() < 3 || !matches!((open, close), (b'<', b'>') | (b'"', b'"')) {
        return None;
    }
    let name = &operand[1..operand.len() - 1];
    let plain = name.iter().all(|c| c.is_ascii_alphanumeric() || b"_-./+".contains(c));
    let relative = !name.starts_with(b"/");
    let no_parent = name.split(|c| *c == b'/').all(|part| part != b".." && !part.is_empty());
    (plain && relative && no_parent).then_some(name)
}

/// Refuse a source that could make the compile read anything but system headers.
pub fn check_source(source: &[u8]) -> Result<(), CompileError> {
    let mut code_seen = false;
    for (n, line) in logical_lines(source) {
        let text = line.trim_ascii_start();
        let directive = text
            .strip_prefix(b"#")
            .or_else(|| text.strip_prefix(b"%:"))
            .map(|rest| rest.trim_ascii_start());
        for id in identifiers(&line) {
            if matches!(id, b"__has_include" | b"__has_include_next" | b"__has_embed" | b"_Pragma")
            {
                return Err(refuse(
                    n,
                    &format!("`{}` is not allowed", String::from_utf8_lossy(id)),
                ));
            }
        }
        let Some(rest) = directive else {
            code_seen |= !text.is_empty();
            continue;
        };
        let name_len = rest.iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'_').count();
        let (name, operand) = rest.split_at(name_len);
        match name {
            b"include" => {
                if code_seen {
                    return Err(refuse(n, &format!("#include after other lines; {INCLUDE_RULE}")));
                }
                if safe_header_name(operand).is_none() {
                    return Err(refuse(
                        n,
                        &format!(
                            "#include of an absolute, parent (..) or computed path; {INCLUDE_RULE}"
                        ),
                    ));
                }
            }
            b"pragma" => {
                if identifiers(operand).contains(&&b"dependency"[..]) {
                    return Err(refuse(n, "#pragma ... dependency names a file"));
                }
                code_seen = true;
            }
            b"" if operand.trim_ascii().is_empty() => {} // the null directive
            b"define" | b"undef" | b"if" | b"ifdef" | b"ifndef" | b"elif" | b"else" | b"endif"
            | b"error" | b"warning" => code_seen = true,
            // `#line` and `# N "FILE"` rename the update's lines: they made its inline
            // assembly look like a header's.
            b"line" => return Err(refuse(n, "#line is not allowed")),
            other if other.first().is_some_and(u8::is_ascii_digit) => {
                return Err(refuse(n, "line markers (# N \"FILE\") are not allowed"))
            }
            other => {
                return Err(refuse(
                    n,
                    &format!("#{} is not allowed", String::from_utf8_lossy(other)),
                ))
            }
        }
    }
    Ok(())
}

/// The update's `#include` lines alone: the headers it reads, preprocessed on their own, give
/// exactly the text they give in the whole update, since [`check_source`] puts every include
/// before any other line (no macro of the update can change a header).
fn include_block(source: &[u8]) -> Vec<u8> {
    let mut block = Vec::new();
    for (_, line) in logical_lines(source) {
        let text = line.trim_ascii();
        let directive = text.strip_prefix(b"#").or_else(|| text.strip_prefix(b"%:"));
        match directive.map(<[u8]>::trim_ascii_start) {
            None if text.is_empty() => {}
            Some([]) => {} // the null directive
            Some(rest) if rest.starts_with(b"include") => {
                block.extend_from_slice(text);
                block.push(b'\n');
            }
            _ => break,
        }
    }
    block
}

/// Is this identifier inline assembly (whose `.incbin` and `.include` read files)?
fn is_assembly(id: &[u8]) -> bool {
    matches!(id, b"asm" | b"__asm" | b"__asm__")
}

/// Where preprocessed text has more inline assembly than its headers alone: the update's own
/// assembly, found by counting, not by the `# N "FILE"` markers (the update could forge
/// those). `Some(line)` names the line as the markers tell it, for the message only.
fn assembly_in_source(preprocessed: &[u8], headers_only: &[u8]) -> Option<usize> {
    let count = |text: &[u8]| {
        text.split(|c| *c == b'\n')
            .map(|line| identifiers(line).into_iter().filter(|id| is_assembly(id)).count())
            .sum::<usize>()
    };
    let mut allowed = count(headers_only);
    let mut source_line = 1usize;
    for line in preprocessed.split(|c| *c == b'\n') {
        // Every line counts, marker-shaped or not.
        for _ in identifiers(line).into_iter().filter(|id| is_assembly(id)) {
            if allowed == 0 {
                return Some(source_line);
            }
            allowed -= 1;
        }
        match line.strip_prefix(b"# ") {
            // `# LINE "FILE" FLAGS`: the line number of the next line.
            Some(marker) => {
                let number = marker.split(|c| *c == b' ').next();
                source_line =
                    number.and_then(|p| std::str::from_utf8(p).ok()?.parse().ok()).unwrap_or(1);
            }
            None => source_line += 1,
        }
    }
    None
}

/// Paths of a make-style dependency file (`target: dep dep \` ...).
fn depfile_paths(text: &str) -> Vec<String> {
    let joined = text.replace("\\\n", " ");
    let Some((_, deps)) = joined.split_once(": ") else { return Vec::new() };
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                cur.push(' ');
                chars.next();
            }
            c if c.is_whitespace() => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Only diagnostics about the update's own source: `prog.c:` lines (clang runs with
/// `-fno-caret-diagnostics`, so no source line of any file is quoted).
fn scrub(diagnostics: &str) -> Vec<&str> {
    diagnostics.lines().filter(|l| l.starts_with("prog.c:")).take(DIAGNOSTIC_LINES).collect()
}

/// Run clang in `dir` with no environment (no CPATH, no CCC_OVERRIDE_OPTIONS), within the
/// time limit; its exit status and diagnostics.
fn run_clang(
    clang: &Path,
    dir: &Path,
    args: &[&std::ffi::OsStr],
) -> Result<(std::process::ExitStatus, String), CompileError> {
    let mut child = Command::new(clang)
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("TMPDIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| CompileError::Spawn { clang: clang.to_path_buf(), source })?;
    // Drain diagnostics while clang runs: a full pipe would stall it.
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        if let Some(e) = stderr.as_mut() {
            let _ = e.take(1 << 20).read_to_string(&mut err);
        }
        err
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait().map_err(CompileError::Wait)? {
            Some(s) => break s,
            None if start.elapsed() > COMPILE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CompileError::Timeout);
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    Ok((status, reader.join().unwrap_or_default()))
}

/// Compile `source` with `clang -O2 -g -target bpf`; returns the object's bytes.
pub fn compile(source: &[u8]) -> Result<Vec<u8>, CompileError> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(CompileError::TooLarge { len: source.len() });
    }
    check_source(source)?;
    let clang = clang().ok_or(CompileError::NoClang)?;
    let dirs = header_dirs(&clang);
    let dir = PrivateDir::new()?;
    let private = |name: &str| dir.path().join(name);
    let (src, headers, obj) = (private("prog.c"), private("headers.c"), private("prog.o"));
    std::fs::write(&src, source).map_err(|e| io_error("writing the source", e))?;
    std::fs::write(&headers, include_block(source))
        .map_err(|e| io_error("writing the headers", e))?;
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let mut include_args: Vec<std::ffi::OsString> = Vec::new();
    for d in &dirs {
        include_args.push("-isystem".into());
        include_args.push(d.clone().into_os_string());
    }
    // The same flags for every run, so each preprocesses the same way (`-O2` defines
    // `__OPTIMIZE__`, which a header may test).
    let mut common = vec![
        os("-target"),
        os("bpf"),
        os("-O2"),
        os("-g"),
        os("-fno-caret-diagnostics"),
        os("-fno-color-diagnostics"),
        os("-fno-trigraphs"),
        os("-nostdinc"),
    ];
    common.extend(include_args.iter().map(|a| a.as_os_str()));
    common.extend([os("-x"), os("c")]);
    let failed = |status: std::process::ExitStatus, err: &str| CompileError::Failed {
        status,
        diagnostics: scrub(err).into_iter().map(str::to_string).collect(),
    };
    let allowed: Vec<PathBuf> = dirs.iter().filter_map(|d| d.canonicalize().ok()).collect();
    let own = [src.canonicalize().unwrap_or_default(), headers.canonicalize().unwrap_or_default()];
    // Run clang with `common` and `step`, recording every file it reads in `depfile`; fails
    // if it read anything but the update and the header directories.
    let run = |step: &[&'static str], depfile: &'static str| {
        let mut args = common.clone();
        args.extend(step.iter().map(|a| os(a)));
        args.extend([os("-MD"), os("-MF"), os(depfile)]);
        let (status, err) = run_clang(&clang, dir.path(), &args)?;
        if !status.success() {
            return Err(failed(status, &err));
        }
        let text =
            std::fs::read_to_string(private(depfile)).map_err(|e| io_error("dependencies", e))?;
        for path in depfile_paths(&text) {
            let full = dir.path().join(&path).canonicalize().map_err(|e| io_error(&path, e))?;
            if !own.contains(&full) && !allowed.iter().any(|a| full.starts_with(a)) {
                return Err(CompileError::ReadOutside);
            }
        }
        Ok(())
    };
    // 1. Preprocess the update, and its headers alone: the update's own inline assembly is
    //    what the first has beyond the second.
    run(&["-E", "prog.c", "-o", "prog.i"], "prog.i.d")?;
    run(&["-E", "headers.c", "-o", "headers.i"], "headers.i.d")?;
    let read = |name: &str| std::fs::read(private(name)).map_err(|e| io_error(name, e));
    if let Some(line) = assembly_in_source(&read("prog.i")?, &read("headers.i")?) {
        return Err(refuse(line, "inline assembly is not allowed (it can read files)"));
    }
    // 2. Compile the source itself, not the preprocessed text: text a macro made (`#define H
    //    #` then `H include "FILE"`) is a directive when preprocessed text is read back, and
    //    never in a compile. Its reads are checked too.
    run(&["-c", "prog.c", "-o", "prog.o"], "prog.o.d")?;
    let mut object = Vec::new();
    std::fs::File::open(&obj)
        .and_then(|f| f.take(MAX_OBJECT_BYTES).read_to_end(&mut object))
        .map_err(|e| io_error("reading the object", e))?;
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADERS: &str = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n";
    const BODY: &str = "SEC(\"xdp\") int f(struct xdp_md *c) { return XDP_PASS; }\n";

    fn have_clang() -> bool {
        clang().is_some()
    }

    /// A secret-looking file outside anything a compile may read.
    fn secret_file() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hotplane-cc-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("secret.h");
        std::fs::write(&f, "hotplane_secret_token_91c2 here;\n").unwrap();
        f
    }

    /// `#include` of a node file, however it is spelled, is refused and nothing of the file
    /// comes back; inline assembly (whose `.incbin` reads files into the object) is refused.
    #[test]
    fn c_updates_cannot_read_node_files() {
        if !have_clang() {
            eprintln!("no clang: skipped");
            return;
        }
        let secret = secret_file();
        let s = secret.display().to_string();
        let dir = secret.parent().unwrap().display().to_string();
        let rel = format!("../../../../../../../..{s}");
        let attempts = [
            format!("#include \"{s}\"\n"),
            format!("#include <{s}>\n"),
            format!("#include <linux/{rel}>\n"),
            format!("#include \"{rel}\"\n"),
            format!("#define F \"{s}\"\n#include F\n"),
            format!("# /* c */ include \\\n \"{s}\"\n"),
            format!("%:include \"{s}\"\n"),
            format!("#include_next \"{s}\"\n"),
            format!("#import \"{s}\"\n"),
            format!("#if __has_include(\"{s}\")\nint yes;\n#endif\n"),
            format!("{HEADERS}asm(\".incbin \\\"{s}\\\"\");\n{BODY}"),
            format!("{HEADERS}#define P(a, b) a##b\nP(as, m)(\".incbin \\\"{s}\\\"\");\n{BODY}"),
            format!("{HEADERS}int x;\n#include \"secret.h\"\n"),
            format!("#pragma GCC dependency \"{s}\"\n{HEADERS}{BODY}"),
        ];
        for a in &attempts {
            let e = compile(a.as_bytes()).expect_err(a).to_string();
            assert!(!e.contains("hotplane_secret"), "{a}\n=> quotes the file: {e}");
            assert!(!e.contains(&dir), "{a}\n=> names a private path: {e}");
        }
        std::fs::remove_dir_all(secret.parent().unwrap()).unwrap();
    }

    /// Red team: `#line` made the update's inline assembly look like a header's, and its
    /// `.incbin` put a node file into the object. A macro that expands to `#` made the compile
    /// step (which re-read the preprocessed text) include a node file. Both are refused and
    /// nothing of the file comes back.
    #[test]
    fn line_markers_and_macro_directives_cannot_read_node_files() {
        if !have_clang() {
            eprintln!("no clang: skipped");
            return;
        }
        let dir = std::env::temp_dir().join(format!("hotplane-cc-line-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("secret.txt");
        std::fs::write(&secret, "hotplane_secret_token_5d1e the node secret\n").unwrap();
        let number = dir.join("number.txt");
        std::fs::write(&number, "0x5ec2e7\n").unwrap();
        let (s, n) = (secret.display(), number.display());
        let tail = "char _l[] SEC(\"license\") = \"GPL\";\n";
        let attempts = [
            // The red team's source (/tmp/redteam/cc_line_incbin.c), pointed at the temp file.
            format!(
                "{HEADERS}#line 1 \"hdr.h\"\nasm(\".pushsection .rodata\\n.globl leak\\nleak:\\n.incbin \\\"{s}\\\"\\n.popsection\");\n#line 5 \"prog.c\"\n{BODY}{tail}"
            ),
            format!("{HEADERS}%:line 1 \"hdr.h\"\nasm(\".incbin \\\"{s}\\\"\");\n{BODY}{tail}"),
            format!("{HEADERS}#\\\nline 1 \"hdr.h\"\nasm(\".incbin \\\"{s}\\\"\");\n{BODY}{tail}"),
            format!("{HEADERS}# 1 \"hdr.h\"\nasm(\".incbin \\\"{s}\\\"\");\n{BODY}{tail}"),
            format!(
                "{HEADERS}#define H #\nH 1 \"hdr.h\" 3\nasm(\".incbin \\\"{s}\\\"\");\n{BODY}{tail}"
            ),
            format!("{HEADERS}#define H #\nint leak =\nH include \"{n}\"\n;\n{BODY}{tail}"),
            format!("{HEADERS}#define H %:\nint leak =\nH include \"{n}\"\n;\n{BODY}{tail}"),
        ];
        let mut compiled = Vec::new();
        for a in &attempts {
            match compile(a.as_bytes()) {
                Ok(object) => {
                    let leaked = object.windows(22).any(|w| w == b"hotplane_secret_token_");
                    compiled.push(format!("{a}\n=> compiled (secret in object: {leaked})"));
                }
                Err(e) => {
                    let e = e.to_string();
                    assert!(!e.contains("hotplane_secret"), "{a}\n=> quotes the file: {e}");
                    assert!(!e.contains("5ec2e7"), "{a}\n=> quotes the file: {e}");
                    assert!(!e.contains(&dir.display().to_string()), "{a}\n=> path: {e}");
                }
            }
        }
        assert!(compiled.is_empty(), "{}", compiled.join("\n\n"));
        for directive in ["#line 7\n", "%:line 7\n", "#\\\nline 7\n", "# /* */ line 7\n", "# 7\n"] {
            let e = check_source(directive.as_bytes()).expect_err(directive);
            assert!(matches!(e, CompileError::Refused { .. }), "{directive}: {e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Diagnostics come back only for the update's own source.
    #[test]
    fn diagnostics_quote_only_the_update() {
        if !have_clang() {
            return;
        }
        let e = compile(format!("{HEADERS}int broken( {{\n").as_bytes()).unwrap_err().to_string();
        assert!(e.contains("clang failed") && e.contains("prog.c:3:"), "{e}");
        for line in e.lines().skip(1) {
            assert!(line.starts_with("prog.c:"), "a line that is not about prog.c: {line}");
        }
        assert!(!e.contains("/usr/include") && !e.contains("/tmp"), "{e}");
    }

    /// The compile directory is private: not predictable from the pid, mode 0700.
    #[test]
    fn the_compile_directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let a = PrivateDir::new().unwrap();
        let b = PrivateDir::new().unwrap();
        assert_ne!(a.path(), b.path());
        let name = a.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.contains(&std::process::id().to_string()), "{name}");
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists());
    }

    #[test]
    fn shipped_style_programs_still_compile() {
        if !have_clang() {
            return;
        }
        // linux/ip.h brings the x86 byte-swap helpers, written in inline assembly: headers'
        // own assembly stays allowed.
        let src = format!("{HEADERS}#include <bpf/bpf_endian.h>\n#include <linux/ip.h>\n%:include <linux/tcp.h>\n/* ok */\n{BODY}char _l[] SEC(\"license\") = \"GPL\";\n");
        let obj = compile(src.as_bytes()).unwrap();
        assert!(obj.starts_with(b"\x7fELF"));
    }
}
