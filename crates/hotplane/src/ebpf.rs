//! eBPF programs in the data plane: the three forms code arrives in (bytecode, ELF object, C
//! source), turned into XDP stages; the maps they share across versions; and the JSON forms
//! the control API uses for maps.

use hotplane_control::Kind;
use hotplane_core::StageRef;
use hotplane_ebpf::helpers::Helpers;
use hotplane_ebpf::insn::decode_bytes;
use hotplane_ebpf::maps::Map;
use hotplane_ebpf::program::{Engine, LoadOptions, MapRegistry, Program, ProgramSpec};
use hotplane_ebpf::stage::XdpStage;
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::{asm, cc, elf, xdp};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

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
    /// The code an update of `kind` carries, if it is eBPF.
    pub fn from_update(kind: Kind, payload: &[u8]) -> Option<Code> {
        match kind {
            Kind::EbpfBytecode => Some(Code::Bytecode(payload.to_vec())),
            Kind::EbpfElf => Some(Code::Elf(payload.to_vec())),
            Kind::EbpfC => Some(Code::C(payload.to_vec())),
            _ => None,
        }
    }

    /// Read a file, its form told by the extension (.o ELF, .c C, .s/.asm assembly, else
    /// bytecode) or, for ELF, by its magic number.
    pub fn from_file(path: &Path) -> Result<Code, String> {
        let bytes = crate::stages::read_local_file(path)?;
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        Ok(match ext {
            _ if bytes.starts_with(b"\x7fELF") => Code::Elf(bytes),
            "c" => Code::C(bytes),
            "s" | "asm" => Code::Asm(
                String::from_utf8(bytes)
                    .map_err(|_| format!("{}: not UTF-8 text", path.display()))?,
            ),
            _ => Code::Bytecode(bytes),
        })
    }

    /// The update kind that carries this code (assembly travels as bytecode).
    pub fn kind(&self) -> Kind {
        match self {
            Code::Bytecode(_) | Code::Asm(_) => Kind::EbpfBytecode,
            Code::Elf(_) => Kind::EbpfElf,
            Code::C(_) => Kind::EbpfC,
        }
    }

    /// The payload of an update carrying this code.
    pub fn payload(&self) -> Result<Vec<u8>, String> {
        Ok(match self {
            Code::Bytecode(b) | Code::Elf(b) | Code::C(b) => b.clone(),
            Code::Asm(t) => {
                let insns = asm::assemble(t).map_err(|e| e.to_string())?;
                hotplane_ebpf::insn::encode_bytes(&insns)
            }
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
    pub fn spec(&self, program: Option<&str>) -> Result<ProgramSpec, String> {
        let name = program.unwrap_or("bytecode");
        match self {
            Code::Bytecode(b) => {
                Ok(ProgramSpec::bytecode(name, decode_bytes(b).map_err(|e| e.to_string())?))
            }
            Code::Asm(t) => Ok(ProgramSpec::bytecode(
                program.unwrap_or("asm"),
                asm::assemble(t).map_err(|e| e.to_string())?,
            )),
            Code::Elf(b) => elf::load(b, program).map_err(|e| e.to_string()),
            Code::C(src) => {
                let object = cc::compile(src).map_err(|e| e.to_string())?;
                elf::load(&object, program).map_err(|e| e.to_string())
            }
        }
    }
}

/// Loads and counters shared by every eBPF program of a data plane.
pub struct EbpfEnv {
    pub maps: MapRegistry,
    /// Per-CPU map copies: the number of workers.
    pub cpus: usize,
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
    ) -> Result<Program, String> {
        let t = Instant::now();
        let r = code.spec(program).and_then(|spec| {
            let opts = LoadOptions {
                engine: engine.unwrap_or(self.engine),
                cpus: self.cpus,
                ..LoadOptions::default()
            };
            Program::load(&spec, Context::Xdp, &self.helpers, opts, Some(&self.maps))
                .map_err(|e| e.to_string())
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
    ) -> Result<StageRef, String> {
        let p = self.program(code, program, engine)?;
        Ok(Arc::new(XdpStage::new(Arc::new(p), origin)))
    }

    pub fn map(&self, name: &str) -> Result<Arc<Map>, String> {
        self.maps.get(name).ok_or_else(|| {
            let names: Vec<String> = self.maps.all().iter().map(|m| m.name.clone()).collect();
            format!(
                "no map named `{name}` (maps: {})",
                if names.is_empty() { "none".into() } else { names.join(", ") }
            )
        })
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

    /// A map's entries: keys and values in hex (per-CPU maps: one value per worker).
    pub fn dump_json(&self, name: &str) -> Result<Value, String> {
        let m = self.map(name)?;
        let entries: Vec<Value> = m
            .entries()
            .into_iter()
            .map(|e| {
                let values: Vec<String> = e.values.iter().map(hex::encode).collect();
                if m.def.kind.per_cpu() {
                    json!({"key": hex::encode(&e.key), "values": values})
                } else {
                    json!({"key": hex::encode(&e.key), "value": values.first().cloned().unwrap_or_default()})
                }
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
pub fn parse_bytes(s: &str, width: usize) -> Result<Vec<u8>, String> {
    let t = s.trim();
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return hex::decode(h).map_err(|e| format!("`{s}`: {e}"));
    }
    if let Ok(n) = t.parse::<u64>() {
        if width < 8 && width > 0 && n >> (8 * width) != 0 {
            return Err(format!("`{s}` does not fit in {width} bytes"));
        }
        let mut v = n.to_le_bytes().to_vec();
        v.resize(width.max(1), 0);
        return Ok(v);
    }
    hex::decode(t)
        .map_err(|_| format!("`{s}`: give hex bytes (0a000064 or 0x0a000064) or a decimal number"))
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
        assert!(parse_bytes("300", 1).unwrap_err().contains("does not fit"));
        assert!(parse_bytes("0xzz", 4).is_err());
        assert!(parse_bytes("hello", 4).is_err());
    }

    #[test]
    fn code_form_follows_the_file() {
        let dir = std::env::temp_dir().join(format!("hp-code-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let asm = dir.join("p.s");
        std::fs::write(&asm, "mov %r0, 2\nexit\n").unwrap();
        let code = Code::from_file(&asm).unwrap();
        assert_eq!((code.form(), code.kind()), ("asm", Kind::EbpfBytecode));
        assert_eq!(code.spec(None).unwrap().insns.len(), 2);
        let obj = dir.join("renamed.bin");
        std::fs::write(&obj, b"\x7fELF not really").unwrap();
        assert_eq!(
            Code::from_file(&obj).unwrap().form(),
            "elf",
            "ELF magic wins over the extension"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
