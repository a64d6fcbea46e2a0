//! eBPF programs in a data plane: the forms code arrives in (bytecode, ELF object, C source,
//! assembly) turned into XDP stages; the maps every program version shares; the load counters;
//! and the JSON forms the control API uses for maps.

use crate::asm::{self, AsmError};
use crate::cc::{self, CompileError};
use crate::elf::{self, ElfError};
use crate::helpers::Helpers;
use crate::insn::{decode_bytes, encode_bytes, PartialInsn};
use crate::maps::{Map, MapError};
use crate::program::{Engine, LoadError, LoadOptions, MapRegistry, Program, ProgramSpec};
use crate::stage::XdpStage;
use crate::verifier::Context;
use crate::xdp;
use hotplane_core::kind::read_local_file;
use hotplane_core::KindError;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Update envelope kind codes of the three forms code travels in (`hotplane_control::Kind`;
/// this crate does not depend on the control crate, so the codes are repeated here).
pub mod update_kind {
    /// Raw instructions (assembly travels as bytecode too).
    pub const BYTECODE: u8 = 16;
    /// An object from `clang -target bpf`.
    pub const ELF: u8 = 17;
    /// C source, compiled on the node.
    pub const C: u8 = 18;
}

/// Why code could not be read or turned into a program spec.
#[derive(Debug, thiserror::Error)]
pub enum CodeError {
    /// The file could not be read (`cannot read PATH: ...`).
    #[error("{0}")]
    File(KindError),
    /// An assembly file that is not text.
    #[error("{path}: not UTF-8 text")]
    NotUtf8 { path: String },
    #[error("{0}")]
    Bytecode(#[from] PartialInsn),
    #[error("{0}")]
    Asm(#[from] AsmError),
    #[error("{0}")]
    Elf(#[from] ElfError),
    #[error("{0}")]
    Compile(#[from] CompileError),
}

/// Why a program could not be loaded, or a map operation failed.
#[derive(Debug, thiserror::Error)]
pub enum EbpfError {
    #[error("{0}")]
    Code(#[from] CodeError),
    /// The verifier, the map set-up or the JIT refused the program.
    #[error("{0}")]
    Load(#[from] LoadError),
    #[error("no map named `{name}` (maps: {known})")]
    NoMap { name: String, known: String },
    #[error("{0}")]
    Map(#[from] MapError),
    #[error("{0}")]
    Bytes(#[from] BytesError),
}

/// A key or value that [`parse_bytes`] cannot read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BytesError {
    #[error("`{text}`: {why}")]
    BadHex { text: String, why: hex::FromHexError },
    #[error("`{text}` does not fit in {width} bytes")]
    TooWide { text: String, width: usize },
    #[error("`{0}`: give hex bytes (0a000064 or 0x0a000064) or a decimal number")]
    Unreadable(String),
}

/// Code as it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// Raw instructions, 8 bytes each, little-endian (no maps).
    Bytecode(Vec<u8>),
    /// An object from `clang -target bpf`.
    Elf(Vec<u8>),
    /// C source, compiled here with the system clang.
    C(Vec<u8>),
    /// The ubpf-style assembly of `hotplane ebpf asm` (no maps).
    Asm(String),
}

impl Code {
    /// The code an update of envelope kind `kind` ([`update_kind`]) carries, if it is eBPF.
    pub fn from_update(kind: u8, payload: &[u8]) -> Option<Code> {
        match kind {
            update_kind::BYTECODE => Some(Code::Bytecode(payload.to_vec())),
            update_kind::ELF => Some(Code::Elf(payload.to_vec())),
            update_kind::C => Some(Code::C(payload.to_vec())),
            _ => None,
        }
    }

    /// Read a file, its form told by the extension (.o ELF, .c C, .s/.asm assembly, else
    /// bytecode) or, for ELF, by its magic number. Only a bounded regular file is read
    /// ([`read_local_file`]).
    pub fn from_file(path: &Path) -> Result<Code, CodeError> {
        let bytes = read_local_file(path).map_err(CodeError::File)?;
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        Ok(match ext {
            _ if bytes.starts_with(b"\x7fELF") => Code::Elf(bytes),
            "c" => Code::C(bytes),
            "s" | "asm" => Code::Asm(
                String::from_utf8(bytes)
                    .map_err(|_| CodeError::NotUtf8 { path: path.display().to_string() })?,
            ),
            _ => Code::Bytecode(bytes),
        })
    }

    /// The update envelope kind code that carries this code (assembly travels as bytecode);
    /// `hotplane_control::Kind::from_code` names it.
    pub fn update_kind(&self) -> u8 {
        match self {
            Code::Bytecode(_) | Code::Asm(_) => update_kind::BYTECODE,
            Code::Elf(_) => update_kind::ELF,
            Code::C(_) => update_kind::C,
        }
    }

    /// The payload of an update carrying this code.
    pub fn payload(&self) -> Result<Vec<u8>, CodeError> {
        Ok(match self {
            Code::Bytecode(b) | Code::Elf(b) | Code::C(b) => b.clone(),
            Code::Asm(t) => encode_bytes(&asm::assemble(t)?),
        })
    }

    pub fn form(&self) -> &'static str {
        match self {
            Code::Bytecode(_) => "bytecode",
            Code::Elf(_) => "elf",
            Code::C(_) => "c",
            Code::Asm(_) => "asm",
        }
    }

    /// The program: parsed, compiled (C), or assembled; not yet verified.
    pub fn spec(&self, program: Option<&str>) -> Result<ProgramSpec, CodeError> {
        let name = program.unwrap_or("bytecode");
        match self {
            Code::Bytecode(b) => Ok(ProgramSpec::bytecode(name, decode_bytes(b)?)),
            Code::Asm(t) => Ok(ProgramSpec::bytecode(program.unwrap_or("asm"), asm::assemble(t)?)),
            Code::Elf(b) => Ok(elf::load(b, program)?),
            Code::C(src) => {
                let object = cc::compile(src)?;
                Ok(elf::load(&object, program)?)
            }
        }
    }
}

/// Loads and counters shared by every eBPF program of a data plane.
pub struct EbpfEnv {
    pub maps: MapRegistry,
    /// Per-CPU map copies: the number of workers.
    pub cpus: usize,
    /// The engine of programs that do not name one (`[ebpf] engine`).
    pub engine: Engine,
    helpers: Helpers,
    pub loaded: AtomicU64,
    pub rejected: AtomicU64,
    /// Nanoseconds of the last load: parse + verify + compile.
    pub last_load_ns: AtomicU64,
}

impl EbpfEnv {
    pub fn new(cpus: usize, engine: Engine) -> Self {
        Self {
            maps: MapRegistry::default(),
            cpus: cpus.max(1),
            engine,
            helpers: xdp::helpers(),
            loaded: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            last_load_ns: AtomicU64::new(0),
        }
    }

    /// Verify and prepare `code` as an XDP program.
    pub fn program(
        &self,
        code: &Code,
        program: Option<&str>,
        engine: Option<Engine>,
    ) -> Result<Program, EbpfError> {
        self.program_and_spec(code, program, engine).map(|(p, _)| p)
    }

    /// [`EbpfEnv::program`], with the code it was loaded from (before the verifier's rewrites).
    pub fn program_and_spec(
        &self,
        code: &Code,
        program: Option<&str>,
        engine: Option<Engine>,
    ) -> Result<(Program, ProgramSpec), EbpfError> {
        let t = Instant::now();
        let r = code.spec(program).map_err(EbpfError::from).and_then(|spec| {
            let opts = LoadOptions {
                engine: engine.unwrap_or(self.engine),
                cpus: self.cpus,
                ..LoadOptions::default()
            };
            let p = Program::load(&spec, Context::Xdp, &self.helpers, opts, Some(&self.maps))?;
            Ok((p, spec))
        });
        self.last_load_ns.store(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        match &r {
            Ok(_) => self.loaded.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.rejected.fetch_add(1, Ordering::Relaxed),
        };
        r
    }

    /// `code` as a pipeline stage.
    pub fn stage(
        &self,
        code: &Code,
        program: Option<&str>,
        engine: Option<Engine>,
        origin: &str,
    ) -> Result<Arc<XdpStage>, EbpfError> {
        let p = self.program(code, program, engine)?;
        Ok(Arc::new(XdpStage::new(Arc::new(p), origin)))
    }

    /// `code` as a pipeline stage that chain specialisation can give a specialised form.
    pub fn chain_stage(
        &self,
        code: &Code,
        program: Option<&str>,
        engine: Option<Engine>,
        origin: &str,
        qsbr: &hotplane_core::qsbr::Qsbr,
    ) -> Result<Arc<XdpStage>, EbpfError> {
        let (p, spec) = self.program_and_spec(code, program, engine)?;
        let cell = crate::chain::live::ChainCell::new(spec, qsbr, self.cpus);
        Ok(Arc::new(XdpStage::with_chain(Arc::new(p), origin, cell)))
    }

    pub fn map(&self, name: &str) -> Result<Arc<Map>, EbpfError> {
        self.maps.get(name).ok_or_else(|| {
            let names: Vec<String> = self.maps.all().iter().map(|m| m.name.clone()).collect();
            EbpfError::NoMap {
                name: name.to_string(),
                known: if names.is_empty() { "none".into() } else { names.join(", ") },
            }
        })
    }

    /// Write one entry of map `name`: `key` and `value` as [`parse_bytes`] reads them.
    pub fn update_entry(
        &self,
        name: &str,
        key: &str,
        value: &str,
        flags: u64,
    ) -> Result<(), EbpfError> {
        let m = self.map(name)?;
        let k = parse_bytes(key, m.def.key_size as usize)?;
        let v = parse_bytes(value, m.def.value_size as usize)?;
        Ok(m.update_copy(&k, &v, flags)?)
    }

    /// Delete one entry of map `name`.
    pub fn delete_entry(&self, name: &str, key: &str) -> Result<(), EbpfError> {
        let m = self.map(name)?;
        Ok(m.delete_copy(&parse_bytes(key, m.def.key_size as usize)?)?)
    }

    /// Every map: name, kind, shape, entries in use.
    pub fn maps_json(&self) -> Value {
        Value::Array(
            self.maps
                .all()
                .iter()
                .map(|m| {
                    json!({
                        "name": m.name,
                        "kind": m.def.kind.name(),
                        "key_size": m.def.key_size,
                        "value_size": m.def.value_size,
                        "max_entries": m.def.max_entries,
                        "entries": m.len(),
                        "busy": m.busy.load(Ordering::Relaxed),
                    })
                })
                .collect(),
        )
    }

    /// One entry of map `name` (`key` as [`parse_bytes`] reads it): its value(s) in hex, or
    /// `null` when the key is absent.
    pub fn lookup_json(&self, name: &str, key: &str) -> Result<Value, EbpfError> {
        let m = self.map(name)?;
        let k = parse_bytes(key, m.def.key_size as usize)?;
        if k.len() != m.def.key_size as usize {
            let (map, expected, got) = (m.name.clone(), m.def.key_size as usize, k.len());
            return Err(crate::maps::MapError::KeySize { map, expected, got }.into());
        }
        let found = m.entries().into_iter().find(|e| e.key == k);
        let values: Vec<String> =
            found.iter().flat_map(|e| e.values.iter().map(hex::encode)).collect();
        let mut out = match (found.is_some(), m.def.kind.per_cpu()) {
            (false, _) => json!({"map": m.name, "key": hex::encode(&k), "value": null}),
            (true, true) => json!({"map": m.name, "key": hex::encode(&k), "values": values}),
            (true, false) => {
                json!({"map": m.name, "key": hex::encode(&k), "value": values.first()})
            }
        };
        if let (Some(layout), Some(e)) = (m.layout(), &found) {
            out["formatted"] = formatted(&layout, &e.key, &e.values, m.def.kind.per_cpu());
        }
        Ok(out)
    }

    /// A map's entries: keys and values in hex (per-CPU maps: one value per worker).
    pub fn dump_json(&self, name: &str) -> Result<Value, EbpfError> {
        let m = self.map(name)?;
        let layout = m.layout();
        let entries: Vec<Value> = m
            .entries()
            .into_iter()
            .map(|e| {
                let values: Vec<String> = e.values.iter().map(hex::encode).collect();
                let per_cpu = m.def.kind.per_cpu();
                let mut v = if per_cpu {
                    json!({"key": hex::encode(&e.key), "values": values})
                } else {
                    json!({"key": hex::encode(&e.key), "value": values.first().cloned().unwrap_or_default()})
                };
                if let Some(layout) = &layout {
                    v["formatted"] = formatted(layout, &e.key, &e.values, per_cpu);
                }
                v
            })
            .collect();
        Ok(json!({"map": m.name, "kind": m.def.kind.name(), "entries": entries}))
    }

    pub fn stats_json(&self) -> Value {
        json!({
            "programs_loaded": self.loaded.load(Ordering::Relaxed),
            "programs_rejected": self.rejected.load(Ordering::Relaxed),
            "last_load_us": self.last_load_ns.load(Ordering::Relaxed) as f64 / 1000.0,
            "maps": self.maps.all().len(),
            "trace_lines": xdp::TRACE_LINES.load(Ordering::Relaxed),
            "trace_suppressed": xdp::TRACE_SUPPRESSED.load(Ordering::Relaxed),
        })
    }
}

/// A key or value given on the command line or in the API: `0x` and hex digits are bytes in
/// that order (`0x0a000064`); digits alone are a decimal number, written little-endian into
/// `width` bytes (`42`); other hex strings are bytes too (`0a00ff64`).
pub fn parse_bytes(s: &str, width: usize) -> Result<Vec<u8>, BytesError> {
    let t = s.trim();
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return hex::decode(h).map_err(|why| BytesError::BadHex { text: s.to_string(), why });
    }
    if let Ok(n) = t.parse::<u64>() {
        if width < 8 && width > 0 && n >> (8 * width) != 0 {
            return Err(BytesError::TooWide { text: s.to_string(), width });
        }
        let mut v = n.to_le_bytes().to_vec();
        v.resize(width.max(1), 0);
        return Ok(v);
    }
    hex::decode(t).map_err(|_| BytesError::Unreadable(s.to_string()))
}

/// An entry as bpftool's `formatted` shows it: the key and value(s) read through the map's
/// BTF layout (hex where BTF did not describe them).
fn formatted(
    layout: &crate::maps::layout::MapLayout,
    key: &[u8],
    values: &[Vec<u8>],
    per_cpu: bool,
) -> Value {
    let show = |l: &Option<crate::maps::layout::Layout>, bytes: &[u8]| match l {
        Some(l) => l.format(bytes),
        None => json!(format!("0x{}", hex::encode(bytes))),
    };
    let values: Vec<Value> = values.iter().map(|v| show(&layout.value, v)).collect();
    if per_cpu {
        json!({"key": show(&layout.key, key), "values": values})
    } else {
        json!({"key": show(&layout.key, key), "value": values.into_iter().next()})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_parse_unambiguously() {
        assert_eq!(parse_bytes("0x0a000064", 4).unwrap(), vec![10, 0, 0, 100]);
        assert_eq!(parse_bytes("42", 4).unwrap(), vec![42, 0, 0, 0]);
        assert_eq!(parse_bytes("0a00ff64", 4).unwrap(), vec![10, 0, 255, 100]);
        assert_eq!(parse_bytes("7", 12).unwrap().len(), 12);
        assert!(parse_bytes("300", 1).unwrap_err().to_string().contains("does not fit"));
        assert!(parse_bytes("0xzz", 4).is_err());
        assert!(parse_bytes("hello", 4).is_err());
    }

    /// The messages users saw when these were strings.
    #[test]
    fn byte_errors_read_as_before() {
        assert_eq!(parse_bytes("300", 1).unwrap_err().to_string(), "`300` does not fit in 1 bytes");
        assert_eq!(
            parse_bytes("hello", 4).unwrap_err().to_string(),
            "`hello`: give hex bytes (0a000064 or 0x0a000064) or a decimal number"
        );
        assert_eq!(
            parse_bytes("0xabc", 4).unwrap_err().to_string(),
            format!("`0xabc`: {}", hex::decode("abc").unwrap_err())
        );
    }

    #[test]
    fn code_form_follows_the_file() {
        let dir = std::env::temp_dir().join(format!("hp-code-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let asm = dir.join("p.s");
        std::fs::write(&asm, "mov %r0, 2\nexit\n").unwrap();
        let code = Code::from_file(&asm).unwrap();
        assert_eq!((code.form(), code.update_kind()), ("asm", update_kind::BYTECODE));
        assert_eq!(code.spec(None).unwrap().insns.len(), 2);
        assert_eq!(code.payload().unwrap().len(), 16, "assembly travels as bytecode");
        let obj = dir.join("renamed.bin");
        std::fs::write(&obj, b"\x7fELF not really").unwrap();
        assert_eq!(
            Code::from_file(&obj).unwrap().form(),
            "elf",
            "ELF magic wins over the extension"
        );
        let latin1 = dir.join("latin1.s");
        std::fs::write(&latin1, b"mov %r0, 2 # \xe9\nexit\n").unwrap();
        let e = Code::from_file(&latin1).unwrap_err().to_string();
        assert_eq!(e, format!("{}: not UTF-8 text", latin1.display()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn updates_carry_the_three_forms() {
        assert_eq!(Code::from_update(16, b"x"), Some(Code::Bytecode(b"x".to_vec())));
        assert_eq!(Code::from_update(17, b"x"), Some(Code::Elf(b"x".to_vec())));
        assert_eq!(Code::from_update(18, b"x"), Some(Code::C(b"x".to_vec())));
        assert_eq!(Code::from_update(32, b"x"), None, "a Lua update is not eBPF");
        for code in [Code::Bytecode(vec![]), Code::Elf(vec![]), Code::C(vec![])] {
            let back = Code::from_update(code.update_kind(), &code.payload().unwrap());
            assert_eq!(back, Some(code));
        }
    }

    #[test]
    fn maps_are_named_in_errors() {
        let env = EbpfEnv::new(1, Engine::Interp);
        let e = env.map("flows").unwrap_err().to_string();
        assert_eq!(e, "no map named `flows` (maps: none)");
        assert!(env.dump_json("flows").is_err());
        assert_eq!(env.maps_json(), json!([]));
    }
}
