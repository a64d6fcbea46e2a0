//! Chain specialisation in a running data plane. Every eBPF stage the kind builds carries a
//! [`ChainCell`]: a slot the worker loads once per batch, holding either nothing (the original
//! runs) or a [`ChainVariant`] (the specialised program and its guard; a packet the guard
//! refuses runs the original). The [`ChainManager`] lives on the control thread: it learns from
//! the engine which program runs at `pre`, `mid` and `post`, and in its housekeeping
//! specialises each eBPF program to what the program before it passes (or, at `pre`, to the
//! `[chain] assume` shape), publishes the variant, and takes it back or replaces it when the
//! program before it changes. A new program always goes live unspecialised at once: its
//! variant follows on the next housekeeping pass, so an update never waits for the optimiser.

use super::analysis::{analyse, ExitAction};
use super::shape::{Guarantee, PacketShape};
use super::specialise::{specialise_verified, SpecialiseOptions, Specialised};
use crate::maps::MapPin;
use crate::program::{LoadOptions, Program, ProgramSpec};
use crate::stage::XdpStage;
use hotplane_core::metrics::LocalCounter;
use hotplane_core::qsbr::{Guard as ReadGuard, Qsbr};
use hotplane_core::slot::{Retired, Slot};
use hotplane_core::StageRef;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// The positions a chain runs through, in packet order.
pub const POSITIONS: [&str; 3] = ["pre", "mid", "post"];

/// A specialised program ready to run in place of an original, behind its guard.
pub struct ChainVariant {
    /// The specialisation: its guard, sizes and what was removed.
    pub specialised: Specialised,
    /// Its program, loaded with the original's maps.
    pub fast: Program,
    /// What it was specialised to: the program before it, or the assumed shape.
    pub upstream: String,
    pub assumed: PacketShape,
    /// Analysis, rewrite, re-verification and JIT.
    pub optimise_us: f64,
}

/// Per-worker guard outcomes, on a cache line of their own.
#[derive(Debug, Default)]
#[repr(align(64))]
struct WorkerGuard([LocalCounter; 2]);

/// The chain side of one eBPF stage: the original's code (the analysis needs it as loaded,
/// before the verifier's rewrites), the published variant, and the guard's counters.
pub struct ChainCell {
    pub spec: Arc<ProgramSpec>,
    slot: Slot<Option<Arc<ChainVariant>>>,
    guard_counts: Box<[WorkerGuard]>,
    /// The upstream the published variant was derived from (control thread only).
    derived_from: Mutex<Option<Source>>,
    /// What the slot holds, for the control thread (which alone publishes).
    shadow: Mutex<Option<Arc<ChainVariant>>>,
    /// The published variant's map pins broke: it must be made again, not kept.
    shadow_stale: Mutex<bool>,
    /// What the program passes, analysed once (for the stage after it).
    passes: std::sync::OnceLock<Guarantee>,
}

/// What a variant was derived from: an upstream stage (by address) or the assumed shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Stage(usize),
    Assumed,
}

const HITS: usize = 0;
const MISSES: usize = 1;

impl ChainCell {
    pub fn new(spec: ProgramSpec, qsbr: &Qsbr, workers: usize) -> Self {
        Self {
            spec: Arc::new(spec),
            slot: Slot::new(qsbr, None),
            guard_counts: (0..workers.max(1)).map(|_| WorkerGuard::default()).collect(),
            derived_from: Mutex::new(None),
            shadow: Mutex::new(None),
            shadow_stale: Mutex::new(false),
            passes: std::sync::OnceLock::new(),
        }
    }

    /// The variant for this batch (one atomic load).
    #[inline(always)]
    pub fn variant<'g>(&'g self, guard: &'g ReadGuard<'_>) -> Option<&'g ChainVariant> {
        self.slot.load(guard).value.as_deref()
    }

    #[inline(always)]
    pub fn count(&self, worker: usize, hits: u64, misses: u64) {
        if let Some(w) = self.guard_counts.get(worker) {
            w.0[HITS].add(hits);
            w.0[MISSES].add(misses);
        }
    }

    /// Packets the guard admitted and refused, over all workers.
    pub fn guard_counts(&self) -> (u64, u64) {
        let sum = |k: usize| self.guard_counts.iter().map(|w| w.0[k].get()).sum();
        (sum(HITS), sum(MISSES))
    }

    /// What every packet the original passes (`XDP_PASS`) satisfies, for any input frame.
    pub fn pass_guarantee(&self) -> Guarantee {
        self.passes
            .get_or_init(|| {
                analyse(&self.spec.insns, &super::default_input(), &Default::default())
                    .guarantee(ExitAction::Pass)
            })
            .clone()
    }

    /// The published variant, as the control thread last published it.
    pub fn current(&self) -> Option<Arc<ChainVariant>> {
        lock(&self.shadow).clone()
    }
}

/// How the data plane specialises chains (`[chain] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveMode {
    Off,
    Guarded,
}

/// The `[chain]` section, read.
#[derive(Debug, Clone)]
pub struct ChainConfig {
    pub mode: LiveMode,
    /// What packets reaching `pre` look like (exported by an upstream node).
    pub assume: Option<Guarantee>,
}

impl Default for ChainConfig {
    fn default() -> Self {
        Self { mode: LiveMode::Guarded, assume: None }
    }
}

/// One position's state for `chain-status`.
#[derive(Debug, Clone)]
struct Outcome {
    upstream: String,
    result: Result<(), String>,
}

/// The control thread's side: which stage runs where, and the work of keeping each one's
/// variant matched to the stage before it.
pub struct ChainManager {
    config: ChainConfig,
    qsbr: Qsbr,
    /// Stages this kind built, by address (a published program is recognised by identity).
    built: Mutex<HashMap<usize, Weak<XdpStage>>>,
    /// What runs at each position on every worker (`None`: nothing, another kind's program,
    /// or different programs on different workers).
    positions: Mutex<BTreeMap<&'static str, Placed>>,
    dirty: AtomicBool,
    /// Old variants waiting for their grace period.
    retired: Mutex<Vec<Retired<Option<Arc<ChainVariant>>>>>,
    outcomes: Mutex<BTreeMap<&'static str, Outcome>>,
    pub published: AtomicU64,
    pub refused: AtomicU64,
}

#[derive(Clone, Default)]
enum Placed {
    #[default]
    Empty,
    Ours(Weak<XdpStage>),
    /// A program this kind did not build (Lua, P4, native), or a mix across workers.
    Opaque,
}

fn address(stage: &StageRef) -> usize {
    Arc::as_ptr(stage) as *const () as usize
}

impl ChainManager {
    pub fn new(config: ChainConfig, qsbr: &Qsbr) -> Self {
        Self {
            config,
            qsbr: qsbr.clone(),
            built: Mutex::default(),
            positions: Mutex::default(),
            dirty: AtomicBool::new(false),
            retired: Mutex::default(),
            outcomes: Mutex::default(),
            published: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    pub fn config(&self) -> &ChainConfig {
        &self.config
    }

    /// A stage this kind built (call before it can be published).
    pub fn register(&self, stage: &Arc<XdpStage>) {
        let mut built = lock(&self.built);
        built.retain(|_, w| w.strong_count() > 0);
        let as_ref: StageRef = stage.clone();
        built.insert(address(&as_ref), Arc::downgrade(stage));
    }

    /// The engine published `program` at `target` on `workers` of `all` workers.
    pub fn installed(&self, target: &str, workers: usize, all: usize, program: Option<&StageRef>) {
        let Some(pos) = POSITIONS.iter().find(|p| **p == target) else { return };
        let placed = match program {
            None if workers == all => Placed::Empty,
            Some(p) if workers == all => match lock(&self.built).get(&address(p)) {
                Some(w) => Placed::Ours(w.clone()),
                None => Placed::Opaque,
            },
            _ => Placed::Opaque,
        };
        lock(&self.positions).insert(pos, placed);
        self.dirty.store(true, Ordering::Release);
    }

    /// Bring every variant in line with the stage before it; free old variants whose grace
    /// period has passed. Control thread.
    pub fn housekeeping(&self, workers: usize) {
        lock(&self.retired).retain(|r| !self.qsbr.poll(r.epoch()));
        if self.config.mode == LiveMode::Off {
            return;
        }
        let positions = lock(&self.positions).clone();
        // A map written since a variant was specialised to its contents: its guard sends every
        // packet to the original until it is specialised again, to the new contents.
        let mut stale = false;
        for placed in positions.values() {
            let Placed::Ours(w) = placed else { continue };
            let Some(stage) = w.upgrade() else { continue };
            let Some(cell) = stage.chain.as_ref() else { continue };
            let broken =
                |v: Arc<ChainVariant>| !v.specialised.guard.pins().iter().all(MapPin::holds);
            if cell.current().is_some_and(broken) {
                *lock(&cell.derived_from) = None;
                *lock(&cell.shadow_stale) = true;
                stale = true;
            }
        }
        if !self.dirty.swap(false, Ordering::AcqRel) && !stale {
            return;
        }
        let mut before: Placed = Placed::Empty;
        for pos in POSITIONS {
            let here = positions.get(pos).cloned().unwrap_or_default();
            if let Placed::Ours(stage) = &here {
                if let Some(stage) = stage.upgrade() {
                    self.align(pos, &stage, &before, workers);
                }
            }
            if !matches!(here, Placed::Empty) {
                before = here;
            }
        }
    }

    /// Make `stage`'s variant match what `before` (the nearest non-empty position before it)
    /// passes.
    fn align(&self, pos: &'static str, stage: &Arc<XdpStage>, before: &Placed, workers: usize) {
        let Some(cell) = stage.chain.as_ref() else { return };
        let upstream = match before {
            Placed::Ours(w) => w.upgrade(),
            _ => None,
        };
        let (source, name, assumed) = match (&upstream, &self.config.assume, before) {
            (Some(up), _, _) => {
                let Some(c) = up.chain.as_ref() else { return };
                let as_ref: StageRef = up.clone();
                (Source::Stage(address(&as_ref)), c.spec.name.clone(), c.pass_guarantee())
            }
            (None, Some(g), Placed::Empty) => (Source::Assumed, "[chain] assume".into(), g.clone()),
            _ => {
                // Nothing known about what reaches this position: run the original.
                self.set(
                    pos,
                    cell,
                    None,
                    None,
                    Outcome {
                        upstream: describe(before),
                        result: Err("nothing is known about the packets reaching it".into()),
                    },
                );
                return;
            }
        };
        if *lock(&cell.derived_from) == Some(source) {
            return;
        }
        // The facts the published variant rests on still hold: keep it.
        let stale = std::mem::take(&mut *lock(&cell.shadow_stale));
        if let Some(v) = cell.current().filter(|_| !stale) {
            if assumed.implies(&Guarantee::of(v.assumed.clone())) {
                *lock(&cell.derived_from) = Some(source);
                return;
            }
        }
        let t = Instant::now();
        // Small maps the program only reads are folded in too (`super::mapconst`).
        let opts = SpecialiseOptions {
            maps: Some(stage.program.maps.clone()),
            ..SpecialiseOptions::default()
        };
        let made = specialise_verified(&cell.spec, &assumed, &opts)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                let load = LoadOptions {
                    engine: stage.program.engine,
                    cpus: workers.max(1),
                    ..LoadOptions::default()
                };
                // On the original's very maps: the pins and the inlined slots are theirs.
                // The guard is compiled in front of the code where it can be (JIT), and
                // falls back to the original's code itself.
                let fast = s
                    .load_behind(&stage.program, &opts.analysis.helpers, load)
                    .map_err(|e| format!("the specialised program does not load: {e}"))?;
                Ok(ChainVariant {
                    specialised: s,
                    fast,
                    upstream: name.clone(),
                    assumed: assumed.hull().unwrap_or_else(PacketShape::top),
                    optimise_us: t.elapsed().as_nanos() as f64 / 1e3,
                })
            });
        match made {
            Ok(v) => {
                self.published.fetch_add(1, Ordering::Relaxed);
                let outcome = Outcome { upstream: name, result: Ok(()) };
                self.set(pos, cell, Some(Arc::new(v)), Some(source), outcome);
            }
            Err(e) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                tracing::info!(position = pos, error = %e, "chain: not specialised, the original runs");
                let outcome = Outcome { upstream: name, result: Err(e) };
                self.set(pos, cell, None, Some(source), outcome);
            }
        }
    }

    fn set(
        &self,
        pos: &'static str,
        cell: &ChainCell,
        variant: Option<Arc<ChainVariant>>,
        source: Option<Source>,
        outcome: Outcome,
    ) {
        if variant.is_some() || cell.current().is_some() {
            *lock(&cell.shadow) = variant.clone();
            let (_, retired) = cell.slot.publish(variant);
            lock(&self.retired).push(retired);
        }
        *lock(&cell.derived_from) = source;
        lock(&self.outcomes).insert(pos, outcome);
    }

    /// `chain-status`: per position, what it is specialised to and how the guard does.
    pub fn status(&self) -> Value {
        let positions = lock(&self.positions).clone();
        let outcomes = lock(&self.outcomes).clone();
        let mut out = Vec::new();
        for pos in POSITIONS {
            let Some(Placed::Ours(w)) = positions.get(pos) else { continue };
            let Some(stage) = w.upgrade() else { continue };
            let Some(cell) = stage.chain.as_ref() else { continue };
            let (hits, misses) = cell.guard_counts();
            let mut v = json!({
                "position": pos,
                "program": stage.program.name,
                "specialised": false,
                "guard_hits": hits,
                "guard_misses": misses,
            });
            if let Some(o) = outcomes.get(pos) {
                v["upstream"] = json!(o.upstream);
                if let Err(e) = &o.result {
                    v["reason"] = json!(e);
                }
            }
            if let Some(var) = cell.current() {
                v["specialised"] = json!(true);
                let s = &var.specialised;
                v["upstream"] = json!(var.upstream);
                v["slots_before"] = json!(s.original_slots);
                v["slots_after"] = json!(s.slots());
                v["conservative"] = json!(s.conservative);
                v["guard"] = json!(s.guard.to_string());
                v["optimise_ms"] = json!(var.optimise_us / 1e3);
                v["removed"] = json!(s.stats);
                v["inlined_lookups"] = json!(s.inlined_lookups);
            }
            out.push(v);
        }
        json!({
            "mode": match self.config.mode { LiveMode::Off => "off", LiveMode::Guarded => "guarded" },
            "published": self.published.load(Ordering::Relaxed),
            "refused": self.refused.load(Ordering::Relaxed),
            "positions": out,
        })
    }

    /// `hotplane_chain_guard_{hits,misses}_total{position}`.
    pub fn prometheus(&self, out: &mut String) {
        let positions = lock(&self.positions).clone();
        let mut rows = Vec::new();
        for pos in POSITIONS {
            let Some(Placed::Ours(w)) = positions.get(pos) else { continue };
            if let Some(cell) = w.upgrade().and_then(|s| s.chain.as_ref().map(|c| c.guard_counts()))
            {
                rows.push((pos, cell));
            }
        }
        if rows.is_empty() {
            return;
        }
        for (name, k, help) in [
            ("hits", 0, "Packets the chain guard sent to the specialised program."),
            ("misses", 1, "Packets the chain guard sent to the original program."),
        ] {
            out.push_str(&format!(
                "# HELP hotplane_chain_guard_{name}_total {help}\n# TYPE hotplane_chain_guard_{name}_total counter\n"
            ));
            for (pos, (hits, misses)) in &rows {
                let v = if k == 0 { hits } else { misses };
                out.push_str(&format!(
                    "hotplane_chain_guard_{name}_total{{position=\"{pos}\"}} {v}\n"
                ));
            }
        }
    }
}

fn describe(p: &Placed) -> String {
    match p {
        Placed::Empty => "nothing (the port)".into(),
        Placed::Ours(w) => w.upgrade().map_or_else(|| "?".into(), |s| s.program.name.clone()),
        Placed::Opaque => "a program of another kind".into(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
