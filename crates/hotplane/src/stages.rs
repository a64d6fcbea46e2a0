//! Native stage specifications: the JSON/TOML form of a built-in program, as written in the
//! config file, sent to the control API, or carried by an in-band update
//! (`{"stage":"set-field","base":"payload","offset":16,"value":"0x00000001"}`).

use crate::ebpf::{Code, EbpfEnv};
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::native::{Count, DropAll, FieldBase, Forward, L2Fwd, SetField};
use hotplane_core::{Slot, Stage, StageRef, WorkerCx, NO_PORT};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Largest program, entries or source file the local config may name.
pub const MAX_LOCAL_FILE_BYTES: u64 = 16 << 20;

/// Read a file the local config names (never one an update names: those are refused). Only a
/// regular file of at most `MAX_LOCAL_FILE_BYTES`: the open does not wait (a FIFO would block
/// the control thread for good) and the read stops at the limit (`/dev/zero` never ends).
pub fn read_local_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let meta = file.metadata().map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("cannot read {}: not a regular file", path.display()));
    }
    if meta.len() > MAX_LOCAL_FILE_BYTES {
        return Err(format!(
            "cannot read {}: larger than {MAX_LOCAL_FILE_BYTES} bytes",
            path.display()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_LOCAL_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_LOCAL_FILE_BYTES {
        return Err(format!(
            "cannot read {}: larger than {MAX_LOCAL_FILE_BYTES} bytes",
            path.display()
        ));
    }
    Ok(bytes)
}

/// What a slot holds: a program, or nothing (packets pass the position untouched).
pub type Program = Option<StageRef>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case", deny_unknown_fields)]
pub enum StageSpec {
    /// No program.
    None {},
    /// Set the output port: `to` for every packet, or `map` from input to output port names.
    Forward {
        #[serde(default)]
        to: Option<String>,
        #[serde(default)]
        map: BTreeMap<String, String>,
    },
    /// Swap MAC addresses, then forward like `forward` (default: to the input port's peer).
    L2fwd {
        #[serde(default)]
        to: Option<String>,
        #[serde(default)]
        map: BTreeMap<String, String>,
    },
    Drop {},
    Count {},
    /// Write `value` at `offset` bytes from `base` (frame, l3, l4 or payload). `value` is a hex
    /// string (`"0x00ff"`: its digits give the width) or a number with a `width` in bytes.
    SetField {
        #[serde(default)]
        base: BaseSpec,
        offset: u16,
        value: FieldValue,
        #[serde(default)]
        width: Option<u8>,
    },
    /// Run the program in the named extern slot of the same worker.
    Call {
        #[serde(rename = "extern")]
        name: String,
    },
    /// The pre-defined program with this id (shared, not copied).
    Predefined {
        id: u32,
    },
    /// An eBPF program from a file: an ELF object (`.o`), C source (`.c`, compiled with the
    /// system clang), assembly (`.s`) or raw bytecode. `program` picks one of an object's
    /// programs (default: the first XDP program); `engine` is "jit" or "interp".
    Ebpf {
        file: String,
        #[serde(default)]
        program: Option<String>,
        #[serde(default)]
        engine: Option<String>,
    },
    /// A match-action table (`[[table]]`) run natively: `key` is `ipv4.src`, `ipv4.dst`,
    /// `l4.sport`, `l4.dport` or `payload:OFFSET:LEN`; the table's actions must be native ones
    /// (NoAction, drop, forward, mark, swap, count; docs/tables.md). `value_at` is the payload
    /// offset `swap` exchanges.
    Table {
        table: String,
        key: String,
        #[serde(default)]
        value_at: Option<u16>,
    },
    /// A P4_16 v1model program compiled at load time; `entries` is a runtime JSON file of
    /// table entries (p4lang tutorials' format); `include` adds #include directories.
    P4 {
        program: String,
        #[serde(default)]
        entries: Option<String>,
        #[serde(default)]
        include: Vec<String>,
        /// `"native"` (machine code, the default) or `"closures"`; see docs/p4.md.
        #[serde(default)]
        engine: Option<String>,
    },
    /// A Lua function (`file` or inline `source`) that returns `function(pkt)`; see docs/lua.md.
    /// `jit = false` runs it in the interpreter; `opt` is LuaJIT's optimisation level 0..3.
    Lua {
        #[serde(default)]
        file: Option<String>,
        #[serde(default)]
        source: Option<String>,
        #[serde(default)]
        jit: Option<bool>,
        #[serde(default)]
        opt: Option<u8>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BaseSpec {
    #[default]
    Frame,
    L3,
    L4,
    Payload,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FieldValue {
    Number(u64),
    Text(String),
}

/// What building a stage can refer to.
pub struct BuildCx<'a> {
    pub port_names: &'a [String],
    /// Extern slots by name, one per worker.
    pub externs: &'a BTreeMap<String, Vec<Arc<Slot<Program>>>>,
    pub predefined: &'a BTreeMap<u32, (String, StageRef)>,
    pub ebpf: &'a EbpfEnv,
    pub lua: &'a Arc<hotplane_lua::LuaRuntime>,
    pub tables: &'a hotplane_tables::TableSet,
    /// The data plane's grace-period domain (tables a stage creates live in it).
    pub qsbr: &'a hotplane_core::Qsbr,
    /// Relative program files resolve against this directory first (the config file's).
    pub base_dir: Option<&'a Path>,
    /// Budgets P4 programs are compiled under.
    pub p4_limits: &'a hotplane_p4::budget::Limits,
    /// Each worker's flow table (P4's `hotplane_flow_function()` looks flows up in it).
    pub flows: Vec<Arc<hotplane_core::FlowTable>>,
}

impl FieldValue {
    fn bytes(&self, width: Option<u8>) -> Result<Vec<u8>, String> {
        match self {
            FieldValue::Number(n) => {
                let w = width.unwrap_or(4) as usize;
                if !(1..=8).contains(&w) {
                    return Err(format!("width = {w}: a numeric value is 1 to 8 bytes wide"));
                }
                if w < 8 && *n >> (8 * w) != 0 {
                    return Err(format!("value {n} does not fit in {w} bytes"));
                }
                Ok(n.to_be_bytes()[8 - w..].to_vec())
            }
            FieldValue::Text(t) => {
                let hex_digits =
                    t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).ok_or_else(|| {
                        format!("value `{t}`: write hex as \"0x...\" or give a number")
                    })?;
                let bytes = hex::decode(hex_digits).map_err(|e| format!("value `{t}`: {e}"))?;
                if let Some(w) = width {
                    if w as usize != bytes.len() {
                        return Err(format!(
                            "value `{t}` is {} bytes but width = {w}",
                            bytes.len()
                        ));
                    }
                }
                Ok(bytes)
            }
        }
    }
}

impl StageSpec {
    /// `set-field` of `v` into the 16-bit `mark` of the generators' test stamp: how the demo,
    /// the benchmarks and the tests see which function processed a packet.
    pub fn stamp_mark(v: u16) -> StageSpec {
        StageSpec::SetField {
            base: BaseSpec::Payload,
            offset: hotplane_core::wire::Stamp::<&[u8]>::MARK_OFFSET as u16,
            value: FieldValue::Number(v as u64),
            width: Some(2),
        }
    }

    /// The stage name as written in specs.
    pub fn kind(&self) -> &'static str {
        match self {
            StageSpec::None {} => "none",
            StageSpec::Forward { .. } => "forward",
            StageSpec::L2fwd { .. } => "l2fwd",
            StageSpec::Drop {} => "drop",
            StageSpec::Count {} => "count",
            StageSpec::SetField { .. } => "set-field",
            StageSpec::Call { .. } => "call",
            StageSpec::Predefined { .. } => "predefined",
            StageSpec::Ebpf { .. } => "ebpf",
            StageSpec::Lua { .. } => "lua",
            StageSpec::Table { .. } => "table",
            StageSpec::P4 { .. } => "p4",
        }
    }

    /// Build the program. Errors say which field is wrong.
    pub fn build(&self, cx: &BuildCx<'_>) -> Result<Program, String> {
        let port = |name: &str| -> Result<u16, String> {
            cx.port_names.iter().position(|p| p == name).map(|i| i as u16).ok_or_else(|| {
                format!("no port named `{name}` (ports: {})", cx.port_names.join(", "))
            })
        };
        let forward =
            |to: &Option<String>, map: &BTreeMap<String, String>| -> Result<Forward, String> {
                if to.is_some() && !map.is_empty() {
                    return Err("give `to` or `map`, not both".into());
                }
                if let Some(t) = to {
                    return Ok(Forward::to(port(t)?));
                }
                if map.is_empty() {
                    return Ok(Forward::peers());
                }
                let mut m = vec![NO_PORT; cx.port_names.len()];
                for (from, to) in map {
                    m[port(from)? as usize] = port(to)?;
                }
                Ok(Forward::with_map(m))
            };
        let stage: StageRef = match self {
            StageSpec::None {} => return Ok(None),
            StageSpec::Forward { to, map } => Arc::new(forward(to, map)?),
            StageSpec::L2fwd { to, map } => Arc::new(L2Fwd::new(forward(to, map)?)),
            StageSpec::Drop {} => Arc::new(DropAll),
            StageSpec::Count {} => Arc::new(Count::new()),
            StageSpec::SetField { base, offset, value, width } => {
                let base = match base {
                    BaseSpec::Frame => FieldBase::Frame,
                    BaseSpec::L3 => FieldBase::L3,
                    BaseSpec::L4 => FieldBase::L4,
                    BaseSpec::Payload => FieldBase::Payload,
                };
                let bytes = value.bytes(*width)?;
                Arc::new(SetField::new(base, *offset, &bytes).map_err(|e| e.to_string())?)
            }
            StageSpec::Call { name } => {
                let slots = cx.externs.get(name).ok_or_else(|| {
                    let known: Vec<&str> = cx.externs.keys().map(|s| s.as_str()).collect();
                    format!(
                        "no extern named `{name}` (externs: {})",
                        if known.is_empty() { "none".into() } else { known.join(", ") }
                    )
                })?;
                Arc::new(CallExtern { name: name.clone(), slots: slots.clone() })
            }
            StageSpec::Predefined { id } => {
                let (_, s) = cx
                    .predefined
                    .get(id)
                    .ok_or_else(|| format!("no pre-defined program with id {id}"))?;
                s.clone()
            }
            StageSpec::Ebpf { file, program, engine } => {
                let engine = engine
                    .as_deref()
                    .map(str::parse::<hotplane_ebpf::program::Engine>)
                    .transpose()
                    .map_err(|e| e.to_string())?;
                let path = cx.resolve(file);
                let code = Code::from_file(&path)?;
                let origin = path
                    .file_name()
                    .map_or_else(|| file.clone(), |n| n.to_string_lossy().into_owned());
                cx.ebpf.stage(&code, program.as_deref(), engine, &origin)?
            }
            StageSpec::Table { table, key, value_at } => {
                let t = cx.tables.get(table).map_err(|e| e.to_string())?;
                Arc::new(crate::table_stage::TableStage::new(t, key, *value_at)?)
            }
            StageSpec::P4 { program, entries, include, engine } => {
                use hotplane_p4::exec::{Engine, Objects, Pipeline};
                let engine = match engine.as_deref() {
                    None => Engine::from_env(),
                    Some("native") => Engine::Native,
                    Some("closures") => Engine::Closures,
                    Some(other) => {
                        return Err(format!("engine = \"{other}\": use \"native\" or \"closures\""))
                    }
                };
                let path = cx.resolve(program);
                // The compiler reads the file itself: check it is a bounded regular file first.
                read_local_file(&path)?;
                let include: Vec<_> = include.iter().map(|d| cx.resolve(d)).collect();
                let ir = hotplane_p4::compile_file_with(&path, &include, &[], cx.p4_limits)
                    .map_err(|e| e.to_string())?;
                let pipeline = Objects::new(&ir, cx.qsbr)
                    .and_then(|objects| Pipeline::with_engine(ir, objects, engine))
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let mut replication = Default::default();
                if let Some(f) = entries {
                    let f = cx.resolve(f);
                    let text = String::from_utf8(read_local_file(&f)?)
                        .map_err(|_| format!("{}: not UTF-8 text", f.display()))?;
                    replication = hotplane_p4::runtime::load(&pipeline, &text)
                        .map_err(|e| format!("{}: {e}", f.display()))?
                        .replication;
                }
                let name = path
                    .file_name()
                    .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
                let wiring = crate::p4_stage::ExternWiring::resolve(
                    &pipeline.program,
                    cx.externs,
                    &cx.flows,
                )
                .map_err(|e| format!("{}: {e}", path.display()))?;
                Arc::new(crate::p4_stage::P4Stage::new(
                    name,
                    Arc::new(pipeline),
                    replication,
                    wiring,
                ))
            }
            StageSpec::Lua { file, source, jit, opt } => {
                let (text, name) = match (file, source) {
                    (Some(f), None) => {
                        let path = cx.resolve(f);
                        let text = read_local_file(&path)?;
                        let name = path
                            .file_name()
                            .map_or_else(|| f.clone(), |n| n.to_string_lossy().into_owned());
                        (text, name)
                    }
                    (None, Some(s)) => (s.clone().into_bytes(), "inline".to_string()),
                    _ => return Err("give `file` or `source` (one of them)".into()),
                };
                let opts = hotplane_lua::FunctionOpts {
                    jit: jit.unwrap_or(true),
                    opt_level: opt.unwrap_or(3),
                };
                let def = cx.lua.compile(&text, &name, opts, None).map_err(|e| e.to_string())?;
                cx.lua.stage(def)
            }
        };
        Ok(Some(stage))
    }
}

impl BuildCx<'_> {
    /// A program file: relative to the config file's directory if it is there, else as given.
    fn resolve(&self, file: &str) -> std::path::PathBuf {
        let path = Path::new(file);
        match self.base_dir.map(|d| d.join(path)) {
            Some(p) if path.is_relative() && p.exists() => p,
            _ => path.to_path_buf(),
        }
    }
}

/// Runs whatever program the named extern slot of the running worker holds.
pub struct CallExtern {
    name: String,
    slots: Vec<Arc<Slot<Program>>>,
}

impl CallExtern {
    /// Call stages are refused in extern slots: an extern calling an extern could recurse.
    pub fn is_call(stage: &StageRef) -> bool {
        stage.name() == "call"
    }
}

impl Stage for CallExtern {
    fn name(&self) -> &str {
        "call"
    }

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let Some(slot) = self.slots.get(cx.worker) else { return };
        let guard = cx.guard;
        if let Some(stage) = &slot.load(guard).value {
            stage.run(batch, sel, cx);
        }
    }

    fn describe(&self) -> String {
        format!("call extern:{}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx<'a>(
        ports: &'a [String],
        externs: &'a BTreeMap<String, Vec<Arc<Slot<Program>>>>,
        pre: &'a BTreeMap<u32, (String, StageRef)>,
    ) -> BuildCx<'a> {
        BuildCx {
            port_names: ports,
            externs,
            predefined: pre,
            ebpf: ebpf_env(),
            lua: lua_rt(),
            tables: tables(),
            qsbr: qsbr(),
            base_dir: None,
            p4_limits: default_p4_limits(),
            flows: Vec::new(),
        }
    }

    fn default_p4_limits() -> &'static hotplane_p4::budget::Limits {
        static L: std::sync::OnceLock<hotplane_p4::budget::Limits> = std::sync::OnceLock::new();
        L.get_or_init(Default::default)
    }

    fn tables() -> &'static hotplane_tables::TableSet {
        static T: std::sync::OnceLock<hotplane_tables::TableSet> = std::sync::OnceLock::new();
        T.get_or_init(hotplane_tables::TableSet::new)
    }

    fn qsbr() -> &'static hotplane_core::Qsbr {
        static Q: std::sync::OnceLock<hotplane_core::Qsbr> = std::sync::OnceLock::new();
        Q.get_or_init(hotplane_core::Qsbr::new)
    }

    fn lua_rt() -> &'static Arc<hotplane_lua::LuaRuntime> {
        static RT: std::sync::OnceLock<Arc<hotplane_lua::LuaRuntime>> = std::sync::OnceLock::new();
        RT.get_or_init(|| hotplane_lua::LuaRuntime::new(1, Default::default()))
    }

    #[test]
    fn lua_specs_compile_and_report_errors() {
        let ports = vec!["p0".to_string()];
        let (ex, pre) = (BTreeMap::new(), BTreeMap::new());
        let c = cx(&ports, &ex, &pre);
        let s: StageSpec = toml::from_str(
            "stage = \"lua\"\nsource = \"return function(pkt) pkt:drop() end\"\njit = false",
        )
        .unwrap();
        assert_eq!(s.build(&c).unwrap().unwrap().describe(), "lua inline (interpreted, -O3)");
        let s: StageSpec =
            serde_json::from_str(r#"{"stage":"lua","source":"return function(pkt"}"#).unwrap();
        assert!(s.build(&c).err().unwrap().contains("syntax error: inline:1:"));
        let s: StageSpec = serde_json::from_str(r#"{"stage":"lua"}"#).unwrap();
        assert!(s.build(&c).err().unwrap().contains("give `file` or `source`"));
        let s: StageSpec = serde_json::from_str(r#"{"stage":"lua","file":"nope.lua"}"#).unwrap();
        assert!(s.build(&c).err().unwrap().contains("nope.lua"));
    }

    fn ebpf_env() -> &'static EbpfEnv {
        static ENV: std::sync::OnceLock<EbpfEnv> = std::sync::OnceLock::new();
        ENV.get_or_init(|| EbpfEnv::new(1, Default::default()))
    }

    #[test]
    fn ebpf_specs_load_objects_and_name_bad_files() {
        let ports = vec!["p0".to_string()];
        let (ex, pre) = (BTreeMap::new(), BTreeMap::new());
        let c = cx(&ports, &ex, &pre);
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/ebpf");
        let c = BuildCx { base_dir: Some(Path::new(dir)), ..c };
        let s: StageSpec =
            serde_json::from_str(r#"{"stage":"ebpf","file":"xdp_count.o"}"#).unwrap();
        let d = s.build(&c).unwrap().unwrap().describe();
        assert!(d.starts_with("ebpf xdp_count (xdp_count.o"), "{d}");
        let s: StageSpec =
            serde_json::from_str(r#"{"stage":"ebpf","file":"xdp_lb.o","engine":"warp"}"#).unwrap();
        assert!(s.build(&c).err().unwrap().contains("not an engine"));
        let s: StageSpec = serde_json::from_str(r#"{"stage":"ebpf","file":"missing.o"}"#).unwrap();
        assert!(s.build(&c).err().unwrap().contains("missing.o"));
    }

    /// A program file named by the local config must be a regular file of bounded size: a FIFO
    /// would block the control thread for good and `/dev/zero` would grow memory without end.
    #[test]
    fn local_program_files_must_be_regular_and_bounded() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let ports = vec!["p0".to_string()];
        let (ex, pre) = (BTreeMap::new(), BTreeMap::new());
        let c = cx(&ports, &ex, &pre);
        let dir = std::env::temp_dir().join(format!("hotplane-local-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `name` is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        // Should a build block on the FIFO (the bug), open it for writing so the test ends
        // with a wrong message instead of hanging.
        let done = Arc::new(AtomicBool::new(false));
        let unblocker = {
            let (done, fifo) = (done.clone(), fifo.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    use std::os::unix::fs::OpenOptionsExt;
                    let _ = std::fs::OpenOptions::new()
                        .write(true)
                        .custom_flags(libc::O_NONBLOCK)
                        .open(&fifo);
                }
            })
        };
        let big = dir.join("big.o");
        std::fs::File::create(&big).unwrap().set_len(MAX_LOCAL_FILE_BYTES + 1).unwrap();
        let (f, b) = (fifo.display(), big.display());
        for (spec, want) in [
            (format!(r#"{{"stage":"lua","file":"{f}"}}"#), "not a regular file"),
            (format!(r#"{{"stage":"ebpf","file":"{f}"}}"#), "not a regular file"),
            (format!(r#"{{"stage":"p4","program":"{f}"}}"#), "not a regular file"),
            (format!(r#"{{"stage":"ebpf","file":"{b}"}}"#), "larger than"),
            (format!(r#"{{"stage":"lua","file":"{b}"}}"#), "larger than"),
        ] {
            let s: StageSpec = serde_json::from_str(&spec).unwrap();
            let e = s.build(&c).err().unwrap();
            assert!(e.contains(want), "{spec}: {e}");
        }
        done.store(true, Ordering::Relaxed);
        unblocker.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn specs_parse_and_build() {
        let ports = vec!["p0".to_string(), "p1".to_string()];
        let (ex, pre) = (BTreeMap::new(), BTreeMap::new());
        let c = cx(&ports, &ex, &pre);
        let s: StageSpec = serde_json::from_str(
            r#"{"stage":"set-field","base":"payload","offset":16,"value":"0x0000aaaa"}"#,
        )
        .unwrap();
        assert_eq!(s.build(&c).unwrap().unwrap().describe(), "set-field payload+16 = 0x0000aaaa");
        let s: StageSpec =
            serde_json::from_str(r#"{"stage":"set-field","offset":0,"value":258,"width":2}"#)
                .unwrap();
        assert_eq!(s.build(&c).unwrap().unwrap().describe(), "set-field frame+0 = 0x0102");
        let s: StageSpec =
            serde_json::from_str(r#"{"stage":"l2fwd","map":{"p0":"p1","p1":"p0"}}"#).unwrap();
        assert_eq!(s.build(&c).unwrap().unwrap().describe(), "l2fwd map [1, 0]");
        let s: StageSpec = toml::from_str("stage = \"forward\"\nto = \"p1\"").unwrap();
        assert_eq!(s.build(&c).unwrap().unwrap().describe(), "forward to port 1");
        assert!(StageSpec::None {}.build(&c).unwrap().is_none());
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let ports = vec!["p0".to_string()];
        let (ex, pre) = (BTreeMap::new(), BTreeMap::new());
        let c = cx(&ports, &ex, &pre);
        let build = |j: &str| {
            serde_json::from_str::<StageSpec>(j)
                .map_err(|e| e.to_string())
                .and_then(|s| s.build(&c).map(|_| ()))
        };
        assert!(build(r#"{"stage":"forward","to":"p9"}"#)
            .unwrap_err()
            .contains("no port named `p9`"));
        assert!(build(r#"{"stage":"set-field","offset":1,"value":"zz"}"#)
            .unwrap_err()
            .contains("0x"));
        assert!(build(r#"{"stage":"set-field","offset":1,"value":300,"width":1}"#)
            .unwrap_err()
            .contains("does not fit"));
        assert!(build(r#"{"stage":"set-field","offset":1,"value":"0x0102","width":4}"#)
            .unwrap_err()
            .contains("width = 4"));
        assert!(build(r#"{"stage":"call","extern":"nope"}"#)
            .unwrap_err()
            .contains("no extern named `nope`"));
        assert!(build(r#"{"stage":"predefined","id":3}"#).unwrap_err().contains("id 3"));
        assert!(build(r#"{"stage":"warp-drive"}"#).unwrap_err().contains("warp-drive"));
        assert!(build(r#"{"stage":"drop","extra":1}"#).unwrap_err().contains("extra"));
    }
}
