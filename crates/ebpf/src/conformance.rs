//! The bpf_conformance test format (`-- asm` / `-- raw`, `-- mem`, `-- result` / `-- error`)
//! and a runner over a directory of `.data` files.

use crate::asm::{assemble, AsmError};
use crate::insn::Insn;
use std::path::{Path, PathBuf};

/// One test file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestCase {
    pub name: String,
    pub asm: Option<String>,
    pub raw: Option<Vec<u64>>,
    pub mem: Vec<u8>,
    pub result: Option<u64>,
    pub error: Option<String>,
}

/// A test file that does not parse, or a directory that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    #[error("raw word `{0}`")]
    RawWord(String),
    #[error("mem byte `{0}`")]
    MemByte(String),
    #[error("result `{0}`")]
    Result(String),
    #[error("no program (`-- asm` or `-- raw`)")]
    NoProgramSection,
    #[error("no program")]
    NoProgram,
    #[error("assembly: {0}")]
    Assembly(AsmError),
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
}

/// Parse a `.data` file.
pub fn parse(name: &str, text: &str) -> Result<TestCase, ConformanceError> {
    let mut t = TestCase { name: name.into(), ..Default::default() };
    let mut section = String::new();
    let mut body: Vec<String> = Vec::new();
    let flush =
        |t: &mut TestCase, section: &str, body: &[String]| -> Result<(), ConformanceError> {
            let joined = body.join("\n");
            match section {
                "asm" => t.asm = Some(joined),
                "raw" => {
                    let words = body
                        .iter()
                        .map(|l| l.split('#').next().unwrap_or("").trim())
                        .filter(|l| !l.is_empty())
                        .map(|l| {
                            u64::from_str_radix(l.trim_start_matches("0x"), 16)
                                .map_err(|_| ConformanceError::RawWord(l.to_string()))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    t.raw = Some(words);
                }
                "mem" => {
                    for tok in body.iter().flat_map(|l| {
                        l.split('#')
                            .next()
                            .unwrap_or("")
                            .split_whitespace()
                            .map(str::to_owned)
                            .collect::<Vec<_>>()
                    }) {
                        t.mem.push(
                            u8::from_str_radix(&tok, 16)
                                .map_err(|_| ConformanceError::MemByte(tok.clone()))?,
                        );
                    }
                }
                "result" => {
                    let v = body
                        .iter()
                        .map(|l| l.split('#').next().unwrap_or("").trim())
                        .find(|l| !l.is_empty())
                        .unwrap_or("");
                    let parsed = if let Some(h) = v.strip_prefix("0x") {
                        u64::from_str_radix(h, 16)
                    } else if let Some(n) = v.strip_prefix('-') {
                        n.parse::<u64>().map(|x| x.wrapping_neg())
                    } else {
                        v.parse::<u64>()
                    };
                    t.result = Some(parsed.map_err(|_| ConformanceError::Result(v.to_string()))?);
                }
                "error" => t.error = Some(joined.trim().to_string()),
                _ => {}
            }
            Ok(())
        };
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("-- ") {
            flush(&mut t, &section, &body)?;
            section = s.trim().to_string();
            body.clear();
        } else if line.starts_with('#') && section.is_empty() {
            continue;
        } else {
            body.push(line.to_string());
        }
    }
    flush(&mut t, &section, &body)?;
    if t.asm.is_none() && t.raw.is_none() {
        return Err(ConformanceError::NoProgramSection);
    }
    Ok(t)
}

impl TestCase {
    /// The program: the raw words when given, else the assembled text.
    pub fn program(&self) -> Result<Vec<Insn>, ConformanceError> {
        match (&self.raw, &self.asm) {
            (Some(raw), _) => Ok(raw.iter().map(|w| Insn::from_u64(*w)).collect()),
            (None, Some(asm)) => assemble(asm).map_err(ConformanceError::Assembly),
            (None, None) => Err(ConformanceError::NoProgram),
        }
    }
}

/// Results over a directory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub failures: Vec<(String, String)>,
}

/// Run every `.data` file of `dir` through `run`, which returns r0 or an error; a test's
/// failure is recorded in the summary as text.
pub fn run_dir<E: std::fmt::Display>(
    dir: &Path,
    mut run: impl FnMut(&TestCase, &[Insn]) -> Result<u64, E>,
) -> Result<Summary, ConformanceError> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|source| ConformanceError::Read { path: dir.to_path_buf(), source })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "data"))
        .collect();
    files.sort();
    let mut s = Summary::default();
    for f in files {
        let name = f.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let text = std::fs::read_to_string(&f)
            .map_err(|source| ConformanceError::Read { path: f.clone(), source })?;
        let outcome = parse(&name, &text).map_err(|e| e.to_string()).and_then(|t| {
            let prog = t.program().map_err(|e| e.to_string())?;
            let got = run(&t, &prog);
            match (&t.result, &t.error, got) {
                (Some(want), _, Ok(v)) if v == *want => Ok(()),
                (Some(want), _, Ok(v)) => Err(format!("r0 = {v:#x}, expected {want:#x}")),
                (_, Some(_), Err(_)) => Ok(()),
                (_, Some(want), Ok(v)) => Err(format!("returned {v:#x}, expected error `{want}`")),
                (Some(_), _, Err(e)) | (None, None, Err(e)) => Err(e.to_string()),
                (None, None, Ok(_)) => Ok(()),
            }
        });
        match outcome {
            Ok(()) => s.passed += 1,
            Err(e) => {
                s.failed += 1;
                s.failures.push((name, e));
            }
        }
    }
    Ok(s)
}

/// Where the public conformance suite lives: `$HOTPLANE_EBPF_CONFORMANCE`, else
/// `conformance/ebpf/tests` under `$HOTPLANE_SHARED`, else the first
/// `shared/conformance/ebpf/tests` found walking up from `start` (the team layout keeps
/// `shared/` next to the checkout). None when it is nowhere.
pub fn find_suite(start: &Path) -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("HOTPLANE_EBPF_CONFORMANCE") {
        return Some(p.into());
    }
    let shared = std::env::var_os("HOTPLANE_SHARED")
        .map(|s| std::path::PathBuf::from(s).join("conformance/ebpf/tests"));
    shared
        .into_iter()
        .chain(start.ancestors().map(|a| a.join("shared/conformance/ebpf/tests")))
        .find(|p| p.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_sections() {
        let t = parse("x", "# c\n-- asm\nmov %r0, 1\nexit\n-- mem\n00 01\nff\n-- result\n0x1\n")
            .unwrap();
        assert_eq!(t.asm.as_deref(), Some("mov %r0, 1\nexit"));
        assert_eq!(t.mem, vec![0, 1, 0xff]);
        assert_eq!(t.result, Some(1));
        assert_eq!(t.program().unwrap().len(), 2);
        assert!(parse("y", "-- result\n1\n").is_err());
    }
}
