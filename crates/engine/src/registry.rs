//! Every hot-swappable cell of a data plane: per worker, the three positions, the flow table and
//! the extern slots; plus the pre-defined programs. All writes come from the control thread (or a
//! benchmark standing in for it); workers only load.

use crate::config::Config;
use crate::kinds::Kinds;
use crate::native::{CallExtern, StageSpec, NATIVE_STAGES};
use hotplane_control::Target;
use hotplane_core::flowtable::{FlowChange, FlowEntryInfo, FlowTableError};
use hotplane_core::kind::context;
use hotplane_core::qsbr::GraceError;
use hotplane_core::slot::{Retired, DEFAULT_GRACE_TIMEOUT};
use hotplane_core::{
    BuildCx, ExternSlots, FlowTable, KindError, Position, Program, Qsbr, Slot, StageRef,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The slots one worker reads.
pub struct WorkerSlots {
    pub positions: [Slot<Program>; 3],
    /// Shared with P4 stages, whose `hotplane_flow_function()` looks flows up in it.
    pub flows: Arc<FlowTable>,
    pub externs: BTreeMap<String, Arc<Slot<Program>>>,
}

impl WorkerSlots {
    pub fn position(&self, p: Position) -> &Slot<Program> {
        &self.positions[p.index()]
    }
}

/// Outcome of an install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub version: u64,
    /// Set when a worker did not pass a quiescent point in time: the new program is live, the
    /// old one will be freed by a later grace period.
    pub warning: Option<String>,
    /// What the program took over from the one before it (P4 replacements).
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallError {
    #[error("{0}")]
    BadTarget(String),
    #[error("{0}")]
    BadProgram(String),
    #[error("grace period: {0}")]
    Called(GraceError),
}

impl From<InstallError> for KindError {
    fn from(e: InstallError) -> Self {
        match e {
            InstallError::BadTarget(m) => KindError::BadTarget(m),
            other => KindError::Invalid(other.to_string()),
        }
    }
}

/// A slot as listed by the control API.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SlotInfo {
    pub worker: usize,
    pub target: String,
    pub program: String,
    pub version: u64,
}

/// Per-target update accounting ("per slot: updates applied/refused and why").
#[derive(Debug, Clone, Default, Serialize)]
pub struct TargetStats {
    pub applied: u64,
    pub refused: BTreeMap<String, u64>,
}

pub struct Registry {
    pub qsbr: Qsbr,
    pub workers: Vec<Arc<WorkerSlots>>,
    pub port_names: Vec<String>,
    externs: ExternSlots,
    /// Each worker's flow table (the same as in `workers`, for build contexts).
    flows: Vec<Arc<FlowTable>>,
    predefined: BTreeMap<u32, (String, StageRef)>,
    /// The program kinds: they build every program that is not native.
    pub kinds: Kinds,
    base_dir: Option<std::path::PathBuf>,
    /// What each (worker, position/extern) holds, as the control plane knows it.
    installed: Mutex<BTreeMap<(usize, String), Program>>,
    target_stats: Mutex<BTreeMap<String, TargetStats>>,
}

impl Registry {
    /// Build the slots for `workers` workers and install the configured programs.
    pub fn new(cfg: &Config, qsbr: &Qsbr, kinds: Kinds) -> Result<Self, KindError> {
        let n = cfg.dataplane.workers;
        let mut externs = ExternSlots::new();
        for name in cfg.pipeline.externs.keys() {
            externs.insert(name.clone(), (0..n).map(|_| Arc::new(Slot::new(qsbr, None))).collect());
        }
        let workers: Vec<Arc<WorkerSlots>> = (0..n)
            .map(|w| {
                Arc::new(WorkerSlots {
                    positions: [
                        Slot::new(qsbr, None),
                        Slot::new(qsbr, None),
                        Slot::new(qsbr, None),
                    ],
                    flows: Arc::new(FlowTable::new(qsbr)),
                    externs: externs.iter().map(|(k, v)| (k.clone(), v[w].clone())).collect(),
                })
            })
            .collect();
        let mut reg = Self {
            qsbr: qsbr.clone(),
            flows: workers.iter().map(|w| Arc::clone(&w.flows)).collect(),
            workers,
            port_names: cfg.ports.iter().map(|p| p.name().to_string()).collect(),
            externs,
            predefined: BTreeMap::new(),
            kinds,
            base_dir: cfg.base_dir.clone(),
            installed: Mutex::new(BTreeMap::new()),
            target_stats: Mutex::new(BTreeMap::new()),
        };
        for (i, p) in cfg.predefined.iter().enumerate() {
            let stage =
                reg.build(&p.stage).map_err(|e| context(e, format!("predefined[{i}].stage")))?;
            let stage = stage.ok_or_else(|| {
                KindError::Invalid(format!(
                    "predefined[{i}].stage: a pre-defined program cannot be `none`"
                ))
            })?;
            let name = p.name.clone().unwrap_or_else(|| stage.describe());
            reg.predefined.insert(p.id, (name, stage));
        }
        let all: Vec<usize> = (0..n).collect();
        let pl = &cfg.pipeline;
        for (pos, spec) in
            [(Position::Pre, &pl.pre), (Position::Mid, &pl.mid), (Position::Post, &pl.post)]
        {
            if let Some(spec) = spec {
                let key = format!("pipeline.{pos}");
                // `none` leaves the slot as created: empty, version 1.
                if let Some(prog) = reg.build(spec).map_err(|e| context(e, &key))? {
                    reg.install(&Target::Position(pos), &all, Some(prog))
                        .map_err(|e| context(e.into(), &key))?;
                }
            }
        }
        for (name, spec) in &pl.externs {
            let key = format!("pipeline.externs.{name}");
            if let Some(prog) = reg.build(spec).map_err(|e| context(e, &key))? {
                reg.install(&Target::Extern(name.clone()), &all, Some(prog))
                    .map_err(|e| context(e.into(), &key))?;
            }
        }
        for (i, f) in pl.flows.iter().enumerate() {
            let key = format!("pipeline.flows[{i}]");
            let sel =
                f.selector.parse().map_err(|e| KindError::Invalid(format!("{key}.match: {e}")))?;
            let prog = reg.build(&f.stage).map_err(|e| context(e, format!("{key}.stage")))?;
            reg.install(&Target::Flow(sel), &all, prog).map_err(|e| context(e.into(), &key))?;
        }
        if let Some(spec) = &pl.flow_default {
            let key = "pipeline.flow_default";
            let prog = reg.build(spec).map_err(|e| context(e, key))?;
            reg.install(&Target::FlowDefault, &all, prog).map_err(|e| context(e.into(), key))?;
        }
        Ok(reg)
    }

    /// What a kind may refer to while it builds a program.
    pub fn build_cx(&self) -> BuildCx<'_> {
        BuildCx {
            workers: self.workers.len(),
            port_names: &self.port_names,
            externs: &self.externs,
            flows: &self.flows,
            qsbr: &self.qsbr,
            base_dir: self.base_dir.as_deref(),
        }
    }

    /// Build a program from its spec: natively, or by the kind that owns its `stage` name.
    pub fn build(&self, spec: &StageSpec) -> Result<Program, KindError> {
        let cx = self.build_cx();
        let stage = spec.kind();
        if NATIVE_STAGES.contains(&stage) {
            return crate::native::build(spec, &cx, &self.predefined);
        }
        match self.kinds.for_stage(stage) {
            Some(kind) => kind.build(spec.json(), &cx),
            None => Err(KindError::Invalid(format!(
                "stage spec: unknown stage `{stage}` (stages: {})",
                self.kinds.stage_names().join(", ")
            ))),
        }
    }

    /// The fields of `spec` that name files of the node, if any (refused in updates).
    pub fn node_files(&self, spec: &StageSpec) -> Option<&'static str> {
        self.kinds.for_stage(spec.kind()).and_then(|k| k.node_files(spec.json()))
    }

    /// A pre-defined program by id.
    pub fn predefined(&self, id: u32) -> Option<StageRef> {
        self.predefined.get(&id).map(|(_, s)| s.clone())
    }

    pub fn predefined_list(&self) -> Vec<(u32, String)> {
        self.predefined.iter().map(|(id, (name, _))| (*id, name.clone())).collect()
    }

    pub fn worker_count(&self) -> usize {
        self.workers.len()
    }

    /// Install `program` at `target` on each of `workers`, then wait for one grace period
    /// covering all of them: when this returns, no listed worker runs the old program.
    pub fn install(
        &self,
        target: &Target,
        workers: &[usize],
        program: Program,
    ) -> Result<Installed, InstallError> {
        if let Some(w) = workers.iter().find(|w| **w >= self.workers.len()) {
            return Err(InstallError::BadTarget(format!(
                "worker {w} does not exist ({} workers)",
                self.workers.len()
            )));
        }
        let mut retired: Vec<Box<dyn RetiredAny>> = Vec::with_capacity(workers.len());
        let version;
        match target {
            Target::Position(p) => {
                version = workers
                    .iter()
                    .map(|w| self.workers[*w].position(*p).version())
                    .max()
                    .unwrap_or(0)
                    + 1;
                for w in workers {
                    let slot = self.workers[*w].position(*p);
                    retired.push(Box::new(slot.publish_as(program.clone(), version)));
                    self.record(*w, target, program.clone());
                }
            }
            Target::Extern(name) => {
                if program.as_ref().is_some_and(CallExtern::is_call) {
                    return Err(InstallError::BadProgram(
                        "a `call` stage cannot be installed in an extern slot".into(),
                    ));
                }
                let slots = self.externs.get(name).ok_or_else(|| {
                    InstallError::BadTarget(format!(
                        "no extern named `{name}` (declare it in [pipeline.externs])"
                    ))
                })?;
                version = workers.iter().map(|w| slots[*w].version()).max().unwrap_or(0) + 1;
                for w in workers {
                    retired.push(Box::new(slots[*w].publish_as(program.clone(), version)));
                    self.record(*w, target, program.clone());
                }
            }
            Target::Flow(sel) => {
                version =
                    workers.iter().map(|w| self.workers[*w].flows.version()).max().unwrap_or(0) + 1;
                let change = match &program {
                    Some(s) => FlowChange::Set(*sel, s.clone()),
                    None => FlowChange::Remove(*sel),
                };
                for w in workers {
                    match self.workers[*w].flows.publish(change.clone(), version) {
                        Ok(r) => retired.push(Box::new(r)),
                        Err(FlowTableError::NoSuchFlow(s)) => {
                            return Err(InstallError::BadTarget(format!(
                                "no function is installed for flow `{s}`"
                            )))
                        }
                        Err(FlowTableError::Grace(g)) => return Err(InstallError::Called(g)),
                    }
                }
            }
            Target::FlowDefault => {
                version =
                    workers.iter().map(|w| self.workers[*w].flows.version()).max().unwrap_or(0) + 1;
                for w in workers {
                    let r = self.workers[*w]
                        .flows
                        .publish(FlowChange::SetDefault(program.clone()), version)
                        .map_err(|e| InstallError::BadTarget(e.to_string()))?;
                    retired.push(Box::new(r));
                }
            }
        }
        // Every kind learns what now runs where (a Lua function's error reports name its
        // target; a P4 program's tables are found by target), whoever built it.
        let target_name = target.to_string();
        for kind in self.kinds.all() {
            kind.installed(&target_name, workers, &program, version);
        }
        // Epochs grow with each publish: waiting for the newest covers the others.
        let mut warning = None;
        while let Some(r) = retired.pop() {
            match r.wait() {
                Ok(()) => {}
                Err(GraceError::CalledFromReader) => {
                    return Err(InstallError::Called(GraceError::CalledFromReader))
                }
                Err(e) => {
                    warning = Some(format!("applied; the old program will be freed later: {e}"))
                }
            }
        }
        Ok(Installed { version, warning, note: None })
    }

    /// The program at `target` on `worker`, as the control plane installed it.
    pub fn installed(&self, worker: usize, target: &str) -> Program {
        let m = self.installed.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&(worker, target.to_string())).cloned().flatten()
    }

    /// Every (worker, target) holding a program.
    pub fn installed_all(&self) -> Vec<(usize, String, StageRef)> {
        let m = self.installed.lock().unwrap_or_else(|e| e.into_inner());
        m.iter().filter_map(|((w, t), p)| Some((*w, t.clone(), p.clone()?))).collect()
    }

    fn record(&self, worker: usize, target: &Target, program: Program) {
        let mut m = self.installed.lock().unwrap_or_else(|e| e.into_inner());
        m.insert((worker, target.to_string()), program);
    }

    /// Count an applied or refused update against its target.
    pub fn count(&self, target: &str, refused: Option<&str>) {
        let mut m = self.target_stats.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.entry(target.to_string()).or_default();
        match refused {
            None => e.applied += 1,
            Some(r) => *e.refused.entry(r.to_string()).or_default() += 1,
        }
    }

    pub fn target_stats(&self) -> BTreeMap<String, TargetStats> {
        self.target_stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every position and extern slot of every worker, and each worker's flow table version.
    pub fn slots(&self) -> Vec<SlotInfo> {
        let installed = self.installed.lock().unwrap_or_else(|e| e.into_inner());
        let describe = |w: usize, t: &str| {
            installed
                .get(&(w, t.to_string()))
                .and_then(|p| p.as_ref().map(|s| s.describe()))
                .unwrap_or_else(|| "none".into())
        };
        let mut out = Vec::new();
        for (w, ws) in self.workers.iter().enumerate() {
            for p in Position::ALL {
                let t = p.to_string();
                out.push(SlotInfo {
                    worker: w,
                    program: describe(w, &t),
                    target: t,
                    version: ws.position(p).version(),
                });
            }
            let n = ws.flows.entries().len();
            out.push(SlotInfo {
                worker: w,
                target: "flows".into(),
                program: format!("{n} entr{}", if n == 1 { "y" } else { "ies" }),
                version: ws.flows.version(),
            });
            for (name, slot) in &ws.externs {
                let t = format!("extern:{name}");
                out.push(SlotInfo {
                    worker: w,
                    program: describe(w, &t),
                    target: t,
                    version: slot.version(),
                });
            }
        }
        out
    }

    pub fn flows(&self, worker: usize) -> Option<Vec<FlowEntryInfo>> {
        self.workers.get(worker).map(|w| w.flows.entries())
    }
}

/// Type-erased `Retired<T>` so one install can wait for slots of different types.
trait RetiredAny {
    fn wait(self: Box<Self>) -> Result<(), GraceError>;
}

impl<T: Send + Sync + 'static> RetiredAny for Retired<T> {
    fn wait(self: Box<Self>) -> Result<(), GraceError> {
        (*self).wait(DEFAULT_GRACE_TIMEOUT)
    }
}
