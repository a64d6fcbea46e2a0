//! The program kinds a data plane runs, and which of them answers what: a spec's `stage`
//! name, an update's kind code, a control operation, a config section. The engine never names
//! a concrete kind; the binary (or an embedding program) registers them.

use hotplane_core::{KindError, KindMaker, KindSetup, ProgramKind};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Sections the engine reads itself (everything else belongs to a kind).
pub const ENGINE_SECTIONS: [&str; 6] =
    ["dataplane", "port", "pipeline", "predefined", "control", "metrics"];

/// Control operations the engine answers itself. The control API is typed
/// (`hotplane_control::api::Request`): a kind answers operations that exist there, and a new
/// operation is a new variant in that crate first.
pub const ENGINE_OPS: [&str; 10] = [
    "stats",
    "slots",
    "flows",
    "predefined",
    "metrics",
    "install",
    "switch",
    "remove",
    "update",
    "shutdown",
];

/// Update kinds the engine builds itself: a native spec, a pre-defined program, a removal.
pub const ENGINE_UPDATE_KINDS: [u8; 3] = [1, 2, 3];

/// Keys of the `stats` response the engine fills; a kind's statistics go under its name.
const ENGINE_STATS_KEYS: [&str; 6] =
    ["uptime_s", "ports", "workers", "updates", "targets", "slots"];

/// The running kinds of one data plane.
#[derive(Clone, Default)]
pub struct Kinds {
    kinds: Vec<Arc<dyn ProgramKind>>,
    by_stage: BTreeMap<&'static str, usize>,
    by_update: BTreeMap<u8, usize>,
    by_op: BTreeMap<&'static str, usize>,
}

/// Why the registered kinds could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindsError {
    #[error("{0}")]
    Kind(#[from] KindError),
    #[error("unknown section `{section}` (sections: {known})")]
    UnknownSection { section: String, known: String },
    #[error("the {first} and {second} kinds both claim {what}")]
    Clash { first: &'static str, second: &'static str, what: String },
}

impl Kinds {
    /// Make every registered kind for a data plane, and check that each config section has
    /// an owner and that no two kinds claim the same stage, update kind or operation.
    pub fn start(makers: &[KindMaker], setup: &KindSetup<'_>) -> Result<Self, KindsError> {
        let mut kinds = Kinds::default();
        for make in makers {
            let kind = make(setup)?;
            let i = kinds.kinds.len();
            let name = kind.name();
            let clash = |owner: usize, what: String| KindsError::Clash {
                first: kinds.kinds[owner].name(),
                second: name,
                what,
            };
            for s in kind.stages() {
                if crate::native::NATIVE_STAGES.contains(s) {
                    return Err(KindsError::Clash {
                        first: "native",
                        second: name,
                        what: format!("stage `{s}`"),
                    });
                }
                if let Some(&o) = kinds.by_stage.get(s) {
                    return Err(clash(o, format!("stage `{s}`")));
                }
            }
            let engine = |what: String| KindsError::Clash { first: "engine", second: name, what };
            for c in kind.update_kinds() {
                if ENGINE_UPDATE_KINDS.contains(c) {
                    return Err(engine(format!("update kind {c}")));
                }
                if let Some(&o) = kinds.by_update.get(c) {
                    return Err(clash(o, format!("update kind {c}")));
                }
            }
            for op in kind.ops() {
                if ENGINE_OPS.contains(op) {
                    return Err(engine(format!("operation `{op}`")));
                }
                if let Some(&o) = kinds.by_op.get(op) {
                    return Err(clash(o, format!("operation `{op}`")));
                }
            }
            for section in kind.sections() {
                if ENGINE_SECTIONS.contains(section) {
                    return Err(engine(format!("section `{section}`")));
                }
                if let Some(o) = kinds.kinds.iter().position(|k| k.sections().contains(section)) {
                    return Err(clash(o, format!("section `{section}`")));
                }
            }
            if ENGINE_STATS_KEYS.contains(&name) {
                return Err(engine(format!("the name `{name}` in the stats response")));
            }
            if let Some(o) = kinds.kinds.iter().position(|k| k.name() == name) {
                return Err(clash(o, format!("the name `{name}`")));
            }
            kinds.by_stage.extend(kind.stages().iter().map(|s| (*s, i)));
            kinds.by_update.extend(kind.update_kinds().iter().map(|c| (*c, i)));
            kinds.by_op.extend(kind.ops().iter().map(|o| (*o, i)));
            kinds.kinds.push(kind);
        }
        let known: Vec<&str> = ENGINE_SECTIONS
            .iter()
            .copied()
            .chain(kinds.kinds.iter().flat_map(|k| k.sections().iter().copied()))
            .collect();
        if let Some(section) = setup.sections.keys().find(|s| !known.contains(&s.as_str())) {
            return Err(KindsError::UnknownSection {
                section: section.clone(),
                known: known.join(", "),
            });
        }
        Ok(kinds)
    }

    pub fn all(&self) -> &[Arc<dyn ProgramKind>] {
        &self.kinds
    }

    /// The kind that builds `stage` specs.
    pub fn for_stage(&self, stage: &str) -> Option<&Arc<dyn ProgramKind>> {
        self.by_stage.get(stage).map(|&i| &self.kinds[i])
    }

    /// The kind that builds programs from updates of kind `code`.
    pub fn for_update(&self, code: u8) -> Option<&Arc<dyn ProgramKind>> {
        self.by_update.get(&code).map(|&i| &self.kinds[i])
    }

    /// The kind that answers control operation `op`.
    pub fn for_op(&self, op: &str) -> Option<&Arc<dyn ProgramKind>> {
        self.by_op.get(op).map(|&i| &self.kinds[i])
    }

    /// Every stage name a spec may use: native ones first, then each kind's.
    pub fn stage_names(&self) -> Vec<&'static str> {
        crate::native::NATIVE_STAGES.iter().copied().chain(self.by_stage.keys().copied()).collect()
    }
}
