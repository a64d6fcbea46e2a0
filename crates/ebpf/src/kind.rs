//! eBPF as a program kind of the engine ([`hotplane_core::ProgramKind`]): `[ebpf]` in the
//! config, `{"stage":"ebpf","file":..}` specs, updates carrying bytecode, ELF objects or C
//! source, and the map operations of the control API.

use crate::chain::live::{ChainConfig, ChainManager, LiveMode};
use crate::chain::Guarantee;
use crate::env::{update_kind, Code, CodeError, EbpfEnv, EbpfError};
use crate::program::{Engine, UnknownEngine};
use crate::progs::Placements;
use crate::stage::XdpStage;
use hotplane_core::kind::{BuildCx, Built, KindError, KindSetup, Program, UpdateProgram};
use hotplane_core::ProgramKind;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// The `[ebpf]` section of the config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct EbpfSection {
    /// Engine for programs that do not name one: "jit" (default) or "interp".
    engine: Option<String>,
}

/// The `[chain]` section: how eBPF programs in a chain are specialised to the program before
/// them (docs/chain.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ChainSection {
    /// "guarded" (default) or "off".
    mode: Option<String>,
    /// A shape file (`hotplane ebpf shape --json` of the program before this node) that
    /// packets reaching `pre` satisfy.
    assume: Option<String>,
}

impl ChainSection {
    fn config(self, setup: &KindSetup<'_>) -> Result<ChainConfig, KindError> {
        let mode = match self.mode.as_deref() {
            None | Some("guarded") => LiveMode::Guarded,
            Some("off") => LiveMode::Off,
            Some("trusted") => {
                return Err(KindError::Invalid(
                    "[chain] mode = \"trusted\" is not available in a running data plane: it \
                     needs proof that no other path reaches a position (flow functions and \
                     updates can); use \"guarded\" (every fact checked per packet) or \"off\""
                        .into(),
                ))
            }
            Some(m) => {
                return Err(KindError::Invalid(format!(
                    "[chain] mode = \"{m}\": the modes are \"guarded\" and \"off\""
                )))
            }
        };
        let assume = match self.assume {
            None => None,
            Some(file) => {
                let path = setup.resolve(&file);
                let bytes = hotplane_core::kind::read_local_file(&path)
                    .map_err(|e| KindError::Invalid(format!("[chain] assume: {}", e.message())))?;
                let text = String::from_utf8_lossy(&bytes);
                Some(
                    assumed_shape(&text).map_err(|e| {
                        KindError::Invalid(format!("[chain] assume = \"{file}\": {e}"))
                    })?,
                )
            }
        };
        Ok(ChainConfig { mode, assume })
    }
}

/// A shape file: `hotplane ebpf shape --json` output (its `pass` exit), a guarantee
/// (`{"shapes": [...]}`), or one packet shape.
pub fn assumed_shape(text: &str) -> Result<Guarantee, crate::chain::ShapeError> {
    let v: Value = serde_json::from_str(text).map_err(crate::chain::ShapeError::from)?;
    if let Some(pass) =
        v.get("exits").map(|e| e.get("pass").cloned().unwrap_or(json!({"shapes": []})))
    {
        return Guarantee::from_value(pass);
    }
    if v.get("shapes").is_some() {
        return Guarantee::from_value(v);
    }
    Ok(Guarantee::of(crate::chain::PacketShape::from_json(text)?))
}

/// An eBPF program from a file of the node: an ELF object (`.o`), C source (`.c`, compiled with
/// the system clang), assembly (`.s`) or raw bytecode. `program` picks one of an object's
/// programs (default: the first XDP program); `engine` is "jit" or "interp".
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case", deny_unknown_fields)]
enum EbpfSpec {
    Ebpf {
        file: String,
        #[serde(default)]
        program: Option<String>,
        #[serde(default)]
        engine: Option<String>,
    },
}

/// The control API's eBPF operations (`hotplane_control::api::Request`'s shapes).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", deny_unknown_fields)]
enum MapRequest {
    #[serde(rename = "ebpf-maps")]
    Maps {},
    #[serde(rename = "ebpf-map-dump")]
    Dump { map: String },
    #[serde(rename = "ebpf-map-update")]
    Update {
        map: String,
        key: String,
        value: String,
        #[serde(default)]
        flags: u64,
    },
    #[serde(rename = "ebpf-map-delete")]
    Delete { map: String, key: String },
    #[serde(rename = "ebpf-map-lookup")]
    Lookup { map: String, key: String },
    #[serde(rename = "ebpf-progs")]
    Progs {},
    #[serde(rename = "ebpf-prog-dump")]
    ProgDump { target: String, form: String },
    #[serde(rename = "ebpf-prog-stats")]
    ProgStats {
        #[serde(default)]
        enable: Option<bool>,
    },
    #[serde(rename = "chain-status")]
    ChainStatus {},
}

/// The eBPF program kind: one [`EbpfEnv`] (maps, load counters) per data plane, and the
/// chain specialiser of its stages.
pub struct EbpfKind {
    env: EbpfEnv,
    chain: Option<(ChainManager, hotplane_core::qsbr::Qsbr)>,
    workers: usize,
    /// Its stages and where they run (`hotplane ebpf prog`).
    progs: Mutex<Placements>,
}

/// Make the eBPF kind for a data plane of `setup.workers` workers, reading `[ebpf]`.
pub fn make(setup: &KindSetup<'_>) -> Result<Arc<dyn ProgramKind>, KindError> {
    let section: EbpfSection = setup.section("ebpf")?.unwrap_or_default();
    let engine = match section.engine {
        None => Engine::default(),
        Some(e) => {
            e.parse().map_err(|m: UnknownEngine| KindError::Invalid(format!("ebpf.engine: {m}")))?
        }
    };
    let chain: ChainSection = setup.section("chain")?.unwrap_or_default();
    let chain = chain.config(setup)?;
    let mut kind = EbpfKind::new(setup.workers, engine);
    kind.chain = Some((ChainManager::new(chain, setup.qsbr), setup.qsbr.clone()));
    Ok(Arc::new(kind))
}

impl EbpfKind {
    /// `engine` runs programs that do not name one.
    pub fn new(workers: usize, engine: Engine) -> Self {
        Self {
            env: EbpfEnv::new(workers, engine),
            chain: None,
            workers: workers.max(1),
            progs: Mutex::default(),
        }
    }

    /// A stage of `code`, registered with the chain specialiser when there is one.
    fn stage(
        &self,
        code: &Code,
        program: Option<&str>,
        engine: Option<Engine>,
        origin: &str,
    ) -> Result<hotplane_core::StageRef, EbpfError> {
        let stage: Arc<XdpStage> = match &self.chain {
            Some((manager, qsbr)) => {
                let stage = self.env.chain_stage(code, program, engine, origin, qsbr)?;
                manager.register(&stage);
                stage
            }
            None => self.env.stage(code, program, engine, origin)?,
        };
        self.progs.lock().unwrap_or_else(|e| e.into_inner()).built(&stage);
        Ok(stage as hotplane_core::StageRef)
    }

    /// The chain specialiser (a kind made for a data plane has one).
    pub fn chain(&self) -> Option<&ChainManager> {
        self.chain.as_ref().map(|(m, _)| m)
    }

    /// The maps and counters the kind's programs share.
    pub fn env(&self) -> &EbpfEnv {
        &self.env
    }
}

/// A load failure as the engine classes it: files that cannot be read are the spec's fault;
/// code that does not parse, compile or verify is the program refused.
fn load_error(e: EbpfError) -> KindError {
    match e {
        EbpfError::Code(CodeError::File(k)) => k,
        e @ EbpfError::Code(CodeError::NotUtf8 { .. }) => KindError::Invalid(e.to_string()),
        e @ (EbpfError::Code(_) | EbpfError::Load(_)) => KindError::Rejected(e.to_string()),
        e => KindError::Invalid(e.to_string()),
    }
}

impl ProgramKind for EbpfKind {
    fn name(&self) -> &'static str {
        "ebpf"
    }

    fn sections(&self) -> &'static [&'static str] {
        &["ebpf", "chain"]
    }

    fn stages(&self) -> &'static [&'static str] {
        &["ebpf"]
    }

    fn build(&self, spec: &Value, cx: &BuildCx<'_>) -> Result<Program, KindError> {
        let EbpfSpec::Ebpf { file, program, engine } = EbpfSpec::deserialize(spec)
            .map_err(|e| KindError::Invalid(format!("stage spec: {e}")))?;
        let engine = engine
            .as_deref()
            .map(str::parse::<Engine>)
            .transpose()
            .map_err(|e| KindError::Invalid(e.to_string()))?;
        let path = cx.resolve(&file);
        let code = Code::from_file(&path).map_err(|e| load_error(e.into()))?;
        let origin =
            path.file_name().map_or_else(|| file.clone(), |n| n.to_string_lossy().into_owned());
        let stage = self.stage(&code, program.as_deref(), engine, &origin).map_err(load_error)?;
        Ok(Some(stage))
    }

    fn node_files(&self, spec: &Value) -> Option<&'static str> {
        (spec.get("stage").and_then(Value::as_str) == Some("ebpf")).then_some("`file`")
    }

    fn update_kinds(&self) -> &'static [u8] {
        &[update_kind::BYTECODE, update_kind::ELF, update_kind::C]
    }

    fn build_update(
        &self,
        update: &UpdateProgram<'_>,
        _cx: &BuildCx<'_>,
    ) -> Result<Built, KindError> {
        let code = Code::from_update(update.kind, update.payload)
            .ok_or_else(|| KindError::Invalid("not an eBPF update".into()))?;
        let origin = format!("{} update seq {}", code.form(), update.seq);
        // The NO_JIT flag asks for the interpreter (reference semantics, debugging).
        let engine = update.no_jit.then_some(Engine::Interp);
        let stage = self
            .stage(&code, None, engine, &origin)
            .map_err(|e| KindError::Rejected(e.to_string()))?;
        Ok(Built { program: Some(stage), note: None })
    }

    fn installed(&self, target: &str, workers: &[usize], program: &Program, version: u64) {
        let mut progs = self.progs.lock().unwrap_or_else(|e| e.into_inner());
        progs.installed(target, workers.len(), program.as_ref(), version);
        drop(progs);
        if let Some(m) = self.chain() {
            m.installed(target, workers.len(), self.workers, program.as_ref());
        }
    }

    fn housekeeping(&self) {
        if let Some(m) = self.chain() {
            m.housekeeping(self.workers);
        }
    }

    fn ops(&self) -> &'static [&'static str] {
        &[
            "ebpf-maps",
            "ebpf-map-dump",
            "ebpf-map-update",
            "ebpf-map-delete",
            "ebpf-map-lookup",
            "ebpf-progs",
            "ebpf-prog-dump",
            "ebpf-prog-stats",
            "chain-status",
        ]
    }

    fn request(&self, op: &str, request: &Value) -> Result<Value, KindError> {
        let request = MapRequest::deserialize(request)
            .map_err(|e| KindError::Invalid(format!("{op}: {e}")))?;
        let answer = match request {
            MapRequest::Maps {} => Ok(self.env.maps_json()),
            MapRequest::Dump { map } => self.env.dump_json(&map),
            MapRequest::Update { map, key, value, flags } => {
                self.env.update_entry(&map, &key, &value, flags).map(|()| json!("updated"))
            }
            MapRequest::Delete { map, key } => {
                self.env.delete_entry(&map, &key).map(|()| json!("deleted"))
            }
            MapRequest::Lookup { map, key } => self.env.lookup_json(&map, &key),
            MapRequest::Progs {} => {
                return Ok(self.progs.lock().unwrap_or_else(|e| e.into_inner()).list())
            }
            MapRequest::ProgDump { target, form } => {
                let progs = self.progs.lock().unwrap_or_else(|e| e.into_inner());
                return progs.dump(&target, &form).map_err(|e| KindError::Invalid(e.to_string()));
            }
            MapRequest::ProgStats { enable } => {
                if let Some(on) = enable {
                    crate::stage::set_timing(on);
                }
                return Ok(json!({"timing": crate::stage::timing()}));
            }
            MapRequest::ChainStatus {} => {
                return Ok(self.chain().map_or_else(|| json!({"mode": "off"}), |m| m.status()))
            }
        };
        answer.map_err(|e| KindError::Invalid(e.to_string()))
    }

    fn stats(&self) -> Option<Value> {
        let mut v = self.env.stats_json();
        if let Some(m) = self.chain() {
            v["chain"] = m.status();
        }
        Some(v)
    }

    fn prometheus(&self, out: &mut String) {
        if let Some(m) = self.chain() {
            m.prometheus(out);
        }
    }
}

#[cfg(test)]
#[path = "kind_tests.rs"]
mod tests;
