//! eBPF as a program kind of the engine ([`hotplane_core::ProgramKind`]): `[ebpf]` in the
//! config, `{"stage":"ebpf","file":..}` specs, updates carrying bytecode, ELF objects or C
//! source, and the map operations of the control API.

use crate::env::{update_kind, Code, CodeError, EbpfEnv, EbpfError};
use crate::program::{Engine, UnknownEngine};
use hotplane_core::kind::{BuildCx, Built, KindError, KindSetup, Program, UpdateProgram};
use hotplane_core::ProgramKind;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The `[ebpf]` section of the config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct EbpfSection {
    /// Engine for programs that do not name one: "jit" (default) or "interp".
    engine: Option<String>,
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
}

/// The eBPF program kind: one [`EbpfEnv`] (maps, load counters) per data plane.
pub struct EbpfKind {
    env: EbpfEnv,
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
    Ok(Arc::new(EbpfKind::new(setup.workers, engine)))
}

impl EbpfKind {
    /// `engine` runs programs that do not name one.
    pub fn new(workers: usize, engine: Engine) -> Self {
        Self { env: EbpfEnv::new(workers, engine) }
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
        &["ebpf"]
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
        let stage =
            self.env.stage(&code, program.as_deref(), engine, &origin).map_err(load_error)?;
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
            .env
            .stage(&code, None, engine, &origin)
            .map_err(|e| KindError::Rejected(e.to_string()))?;
        Ok(Built { program: Some(stage), note: None })
    }

    fn ops(&self) -> &'static [&'static str] {
        &["ebpf-maps", "ebpf-map-dump", "ebpf-map-update", "ebpf-map-delete"]
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
        };
        answer.map_err(|e| KindError::Invalid(e.to_string()))
    }

    fn stats(&self) -> Option<Value> {
        Some(self.env.stats_json())
    }
}

#[cfg(test)]
#[path = "kind_tests.rs"]
mod tests;
