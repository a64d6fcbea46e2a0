//! P4 as a program kind of the engine: the `[p4]` section, `{"stage": "p4"}` specs, P4 updates
//! (kind code 64, replacing the program at their target with its tables' state carried over),
//! and the `p4-tables`, `p4-dump` and `p4-entries` operations.
//!
//! The kind finds the P4 programs of a running data plane without looking inside the engine's
//! slots: it keeps a weak reference to every stage it built and, as the engine reports each
//! publication ([`ProgramKind::installed`]), recognises its own stages by identity.

use crate::budget::Limits;
use crate::control::{self, LocateError};
use crate::exec::{Engine, Objects, Pipeline};
use crate::stage::{ExternWiring, P4Stage};
use hotplane_core::kind::{context, read_local_file};
use hotplane_core::{
    BuildCx, Built, KindError, KindSetup, Program, ProgramKind, Stage, UpdateProgram,
};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// The update envelope's kind code for a P4 program (`hotplane_control::Kind::P4`).
pub const UPDATE_KIND_P4: u8 = 64;

/// P4 settings (`[p4]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct P4Section {
    /// Budgets every P4 program this node compiles runs under (`[p4.limits]`, the fields of
    /// [`Limits`], each defaulting to its default): programs from this config at start and
    /// programs arriving in updates alike.
    pub limits: Limits,
}

/// A `{"stage": "p4", ...}` spec: a P4_16 v1model program compiled at load time, from the file
/// `program` or from `source` given inline (then named `name`, and including only the
/// built-in `core.p4`, `v1model.p4` and `hotplane.p4`, as an update does); `entries` is a
/// runtime JSON file of table entries (p4lang tutorials' format); `include` adds #include
/// directories; `carry_from` names a target whose P4 program's state the new one takes over
/// where the two agree (tables of the same shape keep their entries), as a P4 update does. A one-variant tagged enum, so that serde's messages (unknown fields and the
/// fields expected) read as they did when every spec was one enum.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case", deny_unknown_fields)]
pub enum P4Spec {
    P4 {
        #[serde(default)]
        program: Option<String>,
        #[serde(default)]
        source: Option<String>,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        carry_from: Option<String>,
        #[serde(default)]
        entries: Option<String>,
        #[serde(default)]
        include: Vec<String>,
        /// `"native"` (machine code, the default) or `"closures"`; see docs/p4.md. A build
        /// without the `native` feature refuses `"native"` and runs on closures by default.
        #[serde(default)]
        engine: Option<String>,
    },
}

/// The control requests this kind answers (`hotplane_control::api::Request`'s P4 variants).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", deny_unknown_fields)]
enum P4Request {
    #[serde(rename = "p4-tables")]
    Tables {
        #[serde(default)]
        target: Option<String>,
    },
    #[serde(rename = "p4-dump")]
    Dump {
        #[serde(default)]
        target: Option<String>,
        table: String,
    },
    #[serde(rename = "p4-entries")]
    Entries {
        #[serde(default)]
        target: Option<String>,
        doc: Value,
    },
    /// One line of simple_switch_CLI's command language ([`crate::cli`]).
    #[serde(rename = "p4-cli")]
    Cli {
        #[serde(default)]
        target: Option<String>,
        line: String,
    },
}

/// Make the P4 kind for one data plane (what the binary registers).
pub fn make(setup: &KindSetup<'_>) -> Result<Arc<dyn ProgramKind>, KindError> {
    let section: P4Section = setup.section("p4")?.unwrap_or_default();
    // `[chain]` belongs to the eBPF kind, which checks it; P4 follows its mode.
    let mode = setup.sections.get("chain").and_then(|c| c.get("mode")).and_then(Value::as_str);
    let enabled = mode != Some("off");
    let mut kind = P4Kind::new(section.limits);
    kind.chain = Some(chain::P4Chain::new(enabled, setup.qsbr, setup.workers));
    Ok(Arc::new(kind))
}

mod chain;

/// The P4 program kind.
pub struct P4Kind {
    limits: Limits,
    /// Parsers folded to what the stage before them passes (`[chain] mode`, on by default).
    chain: Option<chain::P4Chain>,
    /// Every stage this kind built that may still be alive: how it recognises its own.
    built: Mutex<Vec<Weak<P4Stage>>>,
    /// Which of its stages is installed at each (worker, target).
    installed: Mutex<BTreeMap<(usize, String), Weak<P4Stage>>>,
    /// The command-line state (multicast nodes) per target; its lock also orders CLI lines.
    cli: Mutex<BTreeMap<String, (Weak<P4Stage>, crate::cli::CliState)>>,
}

/// Lock `m`; a panic elsewhere while it was held leaves consistent data (every update is one
/// insert or remove), so a poisoned lock is used as it is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The address an `Arc` points at, without its vtable: the same for a `P4Stage` and the
/// `dyn Stage` made from it.
fn address<T: ?Sized>(p: *const T) -> *const () {
    p as *const ()
}

impl P4Kind {
    /// A kind compiling every program under `limits`.
    pub fn new(limits: Limits) -> Self {
        P4Kind {
            limits,
            chain: None,
            built: Mutex::default(),
            installed: Mutex::default(),
            cli: Mutex::default(),
        }
    }

    /// The budgets every program is compiled under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Remember `stage` as one of this kind's, and hand it out as a program.
    fn adopt(&self, stage: Arc<P4Stage>) -> Program {
        let mut built = lock(&self.built);
        built.retain(|w| w.strong_count() > 0);
        built.push(Arc::downgrade(&stage));
        Some(stage as Arc<dyn Stage>)
    }

    /// `stage`, if this kind built it.
    fn ours(&self, stage: &Arc<dyn Stage>) -> Option<Arc<P4Stage>> {
        let at = address(Arc::as_ptr(stage));
        lock(&self.built).iter().find(|w| address(Weak::as_ptr(w)) == at)?.upgrade()
    }

    /// The P4 stage installed at `target` on `worker`, if the program there is one of ours.
    pub fn stage_at(&self, worker: usize, target: &str) -> Option<Arc<P4Stage>> {
        lock(&self.installed).get(&(worker, target.to_string()))?.upgrade()
    }

    /// The P4 pipeline the control API means: the one at `target` (worker 0), or the only one.
    pub fn locate(&self, target: Option<&str>) -> Result<(String, Arc<Pipeline>), LocateError> {
        let found = lock(&self.installed)
            .iter()
            .filter(|((w, _), _)| *w == 0)
            .filter_map(|((_, t), s)| Some((t.clone(), Arc::clone(s.upgrade()?.pipeline()))))
            .collect();
        control::locate(found, target)
    }

    /// Run one simple_switch_CLI line against the program at `target`; a change of the
    /// replication engine is published before the answer.
    fn cli_line(&self, target: Option<&str>, line: &str) -> Result<Value, KindError> {
        let invalid = |e: &dyn std::fmt::Display| KindError::Invalid(e.to_string());
        let (t, p) = self.locate(target).map_err(|e| invalid(&e))?;
        let stage = self
            .stage_at(0, &t)
            .ok_or_else(|| KindError::Invalid(format!("no P4 program is installed at {t}")))?;
        let mut states = lock(&self.cli);
        let (of, state) = states.entry(t.clone()).or_default();
        // Multicast nodes belong to the program they were made for.
        if !Weak::ptr_eq(of, &Arc::downgrade(&stage)) {
            *of = Arc::downgrade(&stage);
            *state = crate::cli::CliState::default();
        }
        let (outcome, published) =
            stage.update_replication(|now| match crate::cli::execute(&p, state, now, line) {
                Ok(o) => {
                    let next = o.replication.clone();
                    (Ok(o), next)
                }
                Err(e) => (Err(e), None),
            });
        let mut result = outcome.map_err(|e| invalid(&e))?.result;
        // On a grace-period timeout the new configuration is live all the same; only the old
        // one is freed later.
        if let Err(e) = published {
            result["warning"] = format!("replication engine: {e}").into();
        }
        Ok(result)
    }

    /// Build the stage a `{"stage": "p4"}` spec describes.
    fn build_spec(&self, spec: &P4Spec, cx: &BuildCx<'_>) -> Result<Arc<P4Stage>, KindError> {
        let P4Spec::P4 { program, source, name, carry_from, entries, include, engine } = spec;
        let engine = match engine.as_deref() {
            None => Engine::from_env(),
            Some("native") if !Engine::NATIVE_BUILT => {
                return Err(KindError::Invalid(
                    "engine = \"native\": this build has no native P4 engine (hotplane-p4 \
                     without its `native` feature); use \"closures\" or leave `engine` out"
                        .into(),
                ))
            }
            Some("native") => Engine::Native,
            Some("closures") => Engine::Closures,
            Some(other) => {
                return Err(KindError::Invalid(format!(
                    "engine = \"{other}\": use \"native\" or \"closures\""
                )))
            }
        };
        // `label` names the stage in listings; `origin` is where errors point (the file).
        let (ir, label, origin) = match (program, source) {
            (Some(program), None) => {
                let path = cx.resolve(program);
                // The compiler reads the file itself: check it is a bounded regular file first.
                read_local_file(&path)?;
                let include: Vec<_> = include.iter().map(|d| cx.resolve(d)).collect();
                let ir = crate::compile_file_with(&path, &include, &[], &self.limits)
                    .map_err(|e| KindError::Rejected(e.to_string()))?;
                let label = path
                    .file_name()
                    .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());
                (ir, label, path.display().to_string())
            }
            (None, Some(source)) => {
                let label = name.clone().unwrap_or_else(|| "inline.p4".into());
                let ir = crate::compile_source_with(&label, source, &[], &self.limits)
                    .map_err(|e| KindError::Rejected(e.to_string()))?;
                (ir, label.clone(), label)
            }
            _ => {
                return Err(KindError::Invalid(
                    "a p4 stage takes either `program` (a file) or `source` (the text)".into(),
                ))
            }
        };
        let old = match carry_from {
            Some(t) => Some(self.stage_at(0, t).ok_or_else(|| {
                KindError::Invalid(format!("carry_from: no P4 program is installed at {t}"))
            })?),
            None => None,
        };
        let objects = match &old {
            Some(o) => Objects::carry_over(&ir, Some(o.pipeline()), cx.qsbr).map(|(o, _)| o),
            None => Objects::new(&ir, cx.qsbr),
        };
        let pipeline = objects
            .and_then(|objects| Pipeline::with_engine(ir, objects, engine))
            .map_err(|e| KindError::Rejected(format!("{origin}: {e}")))?;
        let mut replication = old.map(|o| o.replication().clone()).unwrap_or_default();
        if let Some(f) = entries {
            let f = cx.resolve(f);
            let text = String::from_utf8(read_local_file(&f)?)
                .map_err(|_| KindError::Invalid(format!("{}: not UTF-8 text", f.display())))?;
            replication = crate::runtime::load(&pipeline, &text)
                .map_err(|e| KindError::Invalid(format!("{}: {e}", f.display())))?
                .replication;
        }
        let wiring = ExternWiring::resolve(&pipeline.program, cx.externs, cx.flows)
            .map_err(|e| context(e, &origin))?;
        Ok(Arc::new(P4Stage::new(label, Arc::new(pipeline), replication, wiring, cx.qsbr)))
    }
}

impl ProgramKind for P4Kind {
    fn name(&self) -> &'static str {
        "p4"
    }

    fn sections(&self) -> &'static [&'static str] {
        &["p4"]
    }

    fn stages(&self) -> &'static [&'static str] {
        &["p4"]
    }

    fn build(&self, spec: &Value, cx: &BuildCx<'_>) -> Result<Program, KindError> {
        let spec = P4Spec::deserialize(spec)
            .map_err(|e| KindError::Invalid(format!("stage spec: {e}")))?;
        let stage = self.build_spec(&spec, cx)?;
        Ok(self.adopt(stage))
    }

    fn node_files(&self, spec: &Value) -> Option<&'static str> {
        let _ = spec;
        Some("`program`, `entries`, `include`")
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn update_kinds(&self) -> &'static [u8] {
        &[UPDATE_KIND_P4]
    }

    fn build_update(
        &self,
        update: &UpdateProgram<'_>,
        cx: &BuildCx<'_>,
    ) -> Result<Built, KindError> {
        let worker = update.workers.first().copied().unwrap_or(0);
        let old = self.stage_at(worker, update.target);
        // Named after the sender's file when the source says so (`push --p4`), else after
        // the update.
        let name = match crate::naming::source_name(update.payload) {
            Some(file) => file.to_string(),
            None => format!("p4-seq{}", update.seq),
        };
        let (stage, carried) =
            control::replacement(old.as_deref(), update.payload, name, &self.limits, cx)?;
        Ok(Built { program: self.adopt(stage), note: Some(carried) })
    }

    fn installed(&self, target: &str, workers: &[usize], program: &Program, version: u64) {
        let _ = version;
        if let Some(c) = &self.chain {
            c.installed(target, workers.len(), program);
        }
        // The P4 programs of the table operations and of replacements are those at positions
        // and externs. One installed as a flow function is run, not addressed: `p4-tables`
        // without a target keeps finding the pipeline's program, and a P4 update to a flow
        // starts fresh.
        if target.starts_with("flow") {
            return;
        }
        let ours = program.as_ref().and_then(|stage| {
            let at = address(Arc::as_ptr(stage));
            lock(&self.built).iter().find(|w| address(Weak::as_ptr(w)) == at).map(Weak::clone)
        });
        let mut installed = lock(&self.installed);
        for &w in workers {
            let key = (w, target.to_string());
            match &ours {
                Some(stage) => installed.insert(key, Weak::clone(stage)),
                None => installed.remove(&key),
            };
        }
    }

    fn housekeeping(&self) {
        if let Some(c) = &self.chain {
            c.housekeeping(&|s| self.ours(s));
        }
    }

    fn stats(&self) -> Option<Value> {
        // Per installed program (worker 0 holds the one each target runs): copies of multicast
        // and clones beyond a batch's budget.
        let stages: Vec<Value> = lock(&self.installed)
            .iter()
            .filter(|((w, _), _)| *w == 0)
            .filter_map(|((_, target), s)| {
                let s = s.upgrade()?;
                let dropped = s.extra_copies_dropped.load(std::sync::atomic::Ordering::Relaxed);
                Some(serde_json::json!({ "target": target, "copies_dropped": dropped }))
            })
            .collect();
        let mut v = serde_json::json!({ "stages": stages });
        if let Some(c) = &self.chain {
            v["chain"] = c.status(&|s| self.ours(s));
        }
        Some(v)
    }

    fn ops(&self) -> &'static [&'static str] {
        &["p4-tables", "p4-dump", "p4-entries", "p4-cli"]
    }

    fn request(&self, op: &str, request: &Value) -> Result<Value, KindError> {
        let request = P4Request::deserialize(request)
            .map_err(|e| KindError::Invalid(format!("{op}: {e}")))?;
        let invalid = |e: &dyn std::fmt::Display| KindError::Invalid(e.to_string());
        match request {
            P4Request::Tables { target } => {
                let (t, p) = self.locate(target.as_deref()).map_err(|e| invalid(&e))?;
                Ok(serde_json::json!({"target": t, "tables": control::tables_json(&p)}))
            }
            P4Request::Dump { target, table } => {
                let (_, p) = self.locate(target.as_deref()).map_err(|e| invalid(&e))?;
                control::dump_table(&p, &table).map_err(|e| invalid(&e))
            }
            P4Request::Entries { target, doc } => {
                let (_, p) = self.locate(target.as_deref()).map_err(|e| invalid(&e))?;
                control::write_entries(&p, &doc).map_err(|e| invalid(&e))
            }
            P4Request::Cli { target, line } => self.cli_line(target.as_deref(), &line),
        }
    }
}

#[cfg(test)]
mod tests;
