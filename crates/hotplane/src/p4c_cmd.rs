//! `hotplane p4c`: a compile command with p4c's command line, so that Makefiles and scripts
//! written for `p4c --target bmv2` or `p4c-bm2-ss` run unchanged. It checks the program, then
//! writes its P4Info (`--p4runtime-files`) and a device config where BMv2's JSON would go: the
//! file a controller sends as `p4_device_config` (hotplane compiles P4 itself, so the device
//! config carries the program, with its local includes bundled in).
//!
//! Installed as (or linked to) a name starting with `p4c`, the binary runs this command.

use crate::cli::flag_value;
use anyhow::{bail, Context as _};
use hotplane_p4rt::DeviceProgram;
use std::path::{Path, PathBuf};

/// Options p4c takes that change nothing here (debug output, warnings, the BMv2 JSON's
/// details), with whether they take a value.
const IGNORED: &[(&str, bool)] = &[
    ("--emit-externs", false),
    ("-g", false),
    ("--p4runtime-format", true),
    ("--pp", true),
    ("--toJSON", true),
    ("--fromJSON", true),
    ("--disable-annotations", true),
    ("-O0", false),
    ("-O1", false),
    ("-O2", false),
    ("-O3", false),
    ("-v", false),
];

#[derive(Debug, Default, PartialEq)]
struct Args {
    program: Option<PathBuf>,
    out: Option<PathBuf>,
    p4runtime_files: Vec<PathBuf>,
    includes: Vec<PathBuf>,
    defines: Vec<(String, String)>,
}

const USAGE: &str = "usage: hotplane p4c [--target bmv2] [--arch v1model] [--std p4-16] \
    [-I DIR] [-D NAME[=VALUE]] [--p4runtime-files FILE[,FILE]] [-o DIR|FILE.json] PROGRAM.p4";

fn parse(args: &[String]) -> anyhow::Result<Args> {
    let mut a = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (arg.as_str(), None),
        };
        match flag {
            "-h" | "--help" => bail!("{USAGE}"),
            "--target" | "-b" => {
                let t = flag_value(flag, inline, &mut it)?;
                if t != "bmv2" {
                    bail!(
                        "--target {t}: hotplane runs v1model programs as BMv2 does (--target bmv2)"
                    );
                }
            }
            "--arch" | "-a" => {
                let arch = flag_value(flag, inline, &mut it)?;
                if arch != "v1model" {
                    bail!("--arch {arch}: hotplane runs the v1model architecture");
                }
            }
            "--std" | "--p4v" | "-x" => {
                let v = flag_value(flag, inline, &mut it)?;
                if !matches!(v.as_str(), "16" | "p4-16" | "p4_16" | "P4-16") {
                    bail!("{flag} {v}: hotplane compiles P4_16 only");
                }
            }
            "-o" | "--output" => a.out = Some(flag_value(flag, inline, &mut it)?.into()),
            "--p4runtime-files" => {
                let list = flag_value(flag, inline, &mut it)?;
                a.p4runtime_files
                    .extend(list.split(',').filter(|s| !s.is_empty()).map(PathBuf::from));
            }
            "--p4runtime-file" => bail!(
                "--p4runtime-file is p4c's old option: give --p4runtime-files FILE (the format \
                 follows the file's suffix)"
            ),
            f if f.starts_with("-I") => {
                let dir = match f.strip_prefix("-I").filter(|d| !d.is_empty()) {
                    Some(d) => d.to_string(),
                    None => flag_value("-I", inline, &mut it)?,
                };
                a.includes.push(dir.into());
            }
            f if f.starts_with("-D") => {
                let def = match f.strip_prefix("-D").filter(|d| !d.is_empty()) {
                    Some(d) => d.to_string(),
                    None => flag_value("-D", inline, &mut it)?,
                };
                let (name, v) = def.split_once('=').unwrap_or((&def, "1"));
                a.defines.push((name.to_string(), v.to_string()));
            }
            // Warning switches: `--Wdisable`, `--Wdisable=unused`, ...
            f if f.starts_with("--W") => {}
            f if IGNORED.iter().any(|(i, _)| *i == f) => {
                let takes_value = IGNORED.iter().any(|(i, takes)| *i == f && *takes);
                if takes_value && inline.is_none() {
                    it.next();
                }
            }
            f if f.starts_with('-') => bail!("{f}: an option hotplane p4c does not know\n{USAGE}"),
            _ => {
                if a.program.replace(arg.into()).is_some() {
                    bail!("more than one program given\n{USAGE}");
                }
            }
        }
    }
    Ok(a)
}

/// Write `p4info` to `path` in the format its suffix names, as p4c does.
fn write_p4info(path: &Path, text: &str) -> anyhow::Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let bytes = match ext {
        "txt" | "txtpb" | "pbtxt" | "textproto" => text.as_bytes().to_vec(),
        "bin" | "pb" | "binpb" => hotplane_p4rt::schema::binary_of_text(text)?,
        "json" => hotplane_p4rt::schema::json_of_text(text)?.into_bytes(),
        _ => bail!(
            "{}: name a P4Info file .txtpb (text), .json or .binpb (binary), as p4c reads the \
             suffix",
            path.display()
        ),
    };
    write_creating_dirs(path, &bytes)
}

/// Write `bytes` to `path`, making its directory first if it is missing.
fn write_creating_dirs(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// `hotplane p4c ARGS...`.
pub fn main(args: &[String]) -> anyhow::Result<()> {
    let a = parse(args)?;
    let Some(program) = a.program else { bail!("no program given\n{USAGE}") };
    let defines: Vec<(&str, &str)> =
        a.defines.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let ir = hotplane_p4::compile_file(&program, &a.includes, &defines)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let text = hotplane_p4::p4info::text(&ir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", program.display()))?;
    for f in &a.p4runtime_files {
        write_p4info(f, &text)?;
    }
    let stem = program.file_stem().and_then(|s| s.to_str()).unwrap_or("program");
    let out = match &a.out {
        Some(o) if o.extension().is_some_and(|e| e == "json") => o.clone(),
        Some(dir) => dir.join(format!("{stem}.json")),
        None => PathBuf::from(format!("{stem}.json")),
    };
    // The device config carries the program as one text (local includes in it) and the -D
    // definitions in front, so that the switch compiles what was compiled here.
    let mut source: String = a.defines.iter().map(|(n, v)| format!("#define {n} {v}\n")).collect();
    source += &hotplane_p4::preprocess::bundle(&program, &a.includes)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let name = program.file_name().and_then(|s| s.to_str()).unwrap_or("program.p4").to_string();
    let config = hotplane_p4rt::device::encode(&DeviceProgram { name, source });
    write_creating_dirs(&out, config.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_tutorials_command_lines_parse() {
        let a = parse(&args(
            "--target bmv2 --arch v1model --p4runtime-files build/basic.p4info.txtpb -o build \
             solution/basic.p4",
        ))
        .unwrap();
        assert_eq!(a.program, Some("solution/basic.p4".into()));
        assert_eq!(a.out, Some("build".into()));
        assert_eq!(a.p4runtime_files, vec![PathBuf::from("build/basic.p4info.txtpb")]);
        let b = parse(&args(
            "--p4v 16 --p4runtime-files build/x.p4.p4info.txtpb,build/x.json -o build/x.json x.p4",
        ))
        .unwrap();
        assert_eq!(b.p4runtime_files.len(), 2);
        let c = parse(&args("-DFOO=2 -I inc --Wdisable=unused x.p4")).unwrap();
        assert_eq!(c.defines, vec![("FOO".into(), "2".into())]);
        assert_eq!(c.includes, vec![PathBuf::from("inc")]);
        assert!(parse(&args("--arch psa x.p4")).unwrap_err().to_string().contains("v1model"));
        assert!(parse(&args("--p4v 14 x.p4")).is_err());
        assert!(parse(&args("--frobnicate x.p4")).unwrap_err().to_string().contains("frobnicate"));
    }
}
