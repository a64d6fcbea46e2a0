//! The P4 side of live chain specialisation: the kind learns which stage runs at `pre`, `mid`
//! and `post` (of any kind, from the engine's publications), and in its housekeeping folds each
//! of its P4 programs' parsers to what the stage before it passes
//! ([`hotplane_core::Stage::pass_guarantee`], [`crate::chain::fold_parser`]). The folded
//! pipeline shares the original's tables and externs and is published in the stage's
//! [`ChainSlot`](crate::stage::ChainSlot); the stage runs it for packets its guard admits. A
//! new program goes live unfolded at once; its variant follows on the next pass.

use crate::chain::fold_parser;
use crate::exec::Pipeline;
use crate::stage::{P4Stage, P4Variant};
use hotplane_core::slot::Retired;
use hotplane_core::{Program, Qsbr, Stage};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::{address, lock};

const POSITIONS: [&str; 3] = ["pre", "mid", "post"];

/// The kind's test for a stage being one of its P4 stages.
pub(super) type Ours<'a> = &'a dyn Fn(&Arc<dyn Stage>) -> Option<Arc<P4Stage>>;

#[derive(Clone, Default)]
enum Placed {
    #[default]
    Empty,
    /// The same stage on every worker.
    Stage(Weak<dyn Stage>),
    /// Different programs on different workers: nothing is known.
    Mixed,
}

/// Why a stage runs unfolded, or what it was folded to.
#[derive(Debug, Clone)]
struct Outcome {
    upstream: String,
    result: Result<(), String>,
}

pub(super) struct P4Chain {
    enabled: bool,
    qsbr: Qsbr,
    workers: usize,
    positions: Mutex<BTreeMap<&'static str, Placed>>,
    dirty: AtomicBool,
    /// Per P4 stage (by address): the upstream stage its variant was derived from.
    derived: Mutex<HashMap<usize, usize>>,
    outcomes: Mutex<BTreeMap<&'static str, Outcome>>,
    /// What each P4 stage's slot holds (by stage address), for the control thread.
    shadow: Mutex<HashMap<usize, Arc<P4Variant>>>,
    retired: Mutex<Vec<Retired<Option<Arc<P4Variant>>>>>,
}

impl P4Chain {
    pub(super) fn new(enabled: bool, qsbr: &Qsbr, workers: usize) -> Self {
        P4Chain {
            enabled,
            qsbr: qsbr.clone(),
            workers: workers.max(1),
            positions: Mutex::default(),
            dirty: AtomicBool::new(false),
            derived: Mutex::default(),
            outcomes: Mutex::default(),
            shadow: Mutex::default(),
            retired: Mutex::default(),
        }
    }

    /// The engine published `program` at `target` on `workers`.
    pub(super) fn installed(&self, target: &str, workers: usize, program: &Program) {
        let Some(pos) = POSITIONS.iter().find(|p| **p == target) else { return };
        let placed = match program {
            _ if workers < self.workers => Placed::Mixed,
            None => Placed::Empty,
            Some(stage) => Placed::Stage(Arc::downgrade(stage)),
        };
        lock(&self.positions).insert(pos, placed);
        self.dirty.store(true, Ordering::Release);
    }

    /// Fold every P4 stage at a position to the stage before it; free old variants.
    pub(super) fn housekeeping(&self, ours: Ours<'_>) {
        lock(&self.retired).retain(|r| !self.qsbr.poll(r.epoch()));
        if !self.enabled || !self.dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        let positions = lock(&self.positions).clone();
        let mut before = Placed::Empty;
        for pos in POSITIONS {
            let here = positions.get(pos).cloned().unwrap_or_default();
            if let Placed::Stage(w) = &here {
                if let Some(p4) = w.upgrade().as_ref().and_then(ours) {
                    self.align(pos, &p4, &before);
                }
            }
            if !matches!(here, Placed::Empty) {
                before = here;
            }
        }
    }

    fn align(&self, pos: &'static str, p4: &Arc<P4Stage>, before: &Placed) {
        let me = address(Arc::as_ptr(p4)) as usize;
        let upstream = match before {
            Placed::Stage(w) => w.upgrade(),
            _ => None,
        };
        let Some(up) = upstream else {
            let why = match before {
                Placed::Empty => "nothing runs before it",
                _ => "different programs run before it on different workers",
            };
            lock(&self.derived).remove(&me);
            self.set(pos, p4, None, Outcome { upstream: "-".into(), result: Err(why.into()) });
            return;
        };
        let from = address(Arc::as_ptr(&up)) as usize;
        if lock(&self.derived).get(&me) == Some(&from) {
            return;
        }
        lock(&self.derived).insert(me, from);
        let name = up.name().to_string();
        let made = self.variant(p4, &up);
        let outcome =
            Outcome { upstream: name, result: made.as_ref().map(|_| ()).map_err(Clone::clone) };
        self.set(pos, p4, made.ok().map(Arc::new), outcome);
    }

    fn variant(&self, p4: &P4Stage, up: &Arc<dyn Stage>) -> Result<P4Variant, String> {
        let g = up.pass_guarantee().ok_or("nothing is known about what it passes")?;
        let shape = g.hull().ok_or("it passes no packet")?;
        let mut ir = (*p4.pipeline().program).clone();
        let fold = fold_parser(&mut ir, &shape);
        if fold.decided.is_empty() {
            return Err("its guarantee decides no select of the parser".into());
        }
        // The same tables, registers and counters: only the parser's transitions differ.
        let pipeline = Pipeline::sharing(ir, p4.pipeline())
            .map_err(|e| format!("the folded pipeline does not compile: {e}"))?;
        Ok(P4Variant {
            pipeline: Arc::new(pipeline),
            guard: fold.guard(&shape),
            fold,
            upstream: up.name().to_string(),
        })
    }

    fn set(&self, pos: &'static str, p4: &P4Stage, v: Option<Arc<P4Variant>>, outcome: Outcome) {
        let me = address(p4 as *const P4Stage) as usize;
        match &v {
            Some(v) => lock(&self.shadow).insert(me, Arc::clone(v)),
            None => lock(&self.shadow).remove(&me),
        };
        let chain = p4.chain_slot(&self.qsbr);
        let (_, retired) = chain.slot().publish(v);
        lock(&self.retired).push(retired);
        lock(&self.outcomes).insert(pos, outcome);
    }

    /// Per position holding a P4 stage: what it was folded to and how its guard does.
    pub(super) fn status(&self, ours: Ours<'_>) -> Value {
        let positions = lock(&self.positions).clone();
        let outcomes = lock(&self.outcomes).clone();
        let mut out = Vec::new();
        for pos in POSITIONS {
            let Some(Placed::Stage(w)) = positions.get(pos) else { continue };
            let Some(p4) = w.upgrade().as_ref().and_then(ours) else { continue };
            let mut v = json!({"position": pos, "program": p4.name(), "folded": false});
            if let Some(o) = outcomes.get(pos) {
                v["upstream"] = json!(o.upstream);
                if let Err(e) = &o.result {
                    v["reason"] = json!(e);
                }
            }
            if let Some(chain) = p4.chain() {
                let (hits, misses) = chain.guard_counts();
                v["guard_hits"] = json!(hits);
                v["guard_misses"] = json!(misses);
                let me = address(Arc::as_ptr(&p4)) as usize;
                if let Some(var) = lock(&self.shadow).get(&me) {
                    v["folded"] = json!(true);
                    v["guard"] = json!(var.guard.to_string());
                    v["decided"] = json!(var
                        .fold
                        .decided
                        .iter()
                        .map(|(s, t)| format!("{s} -> {t}"))
                        .collect::<Vec<_>>());
                    v["unreachable"] = json!(var.fold.unreachable);
                }
            }
            out.push(v);
        }
        json!({"enabled": self.enabled, "positions": out})
    }
}
