//! The `Stage` trait every kind of program implements, and what a stage sees of its worker.

use crate::batch::{Batch, Mask};
use crate::qsbr::Guard;
use std::sync::Arc;

/// Most workers a data plane runs; sizes per-worker counter arrays.
pub const MAX_WORKERS: usize = 64;

/// What a stage knows about the worker running it.
pub struct WorkerCx<'g> {
    /// Index of the worker (0-based), for per-worker state.
    pub worker: usize,
    /// Time of this batch, `time::now_ns`.
    pub now_ns: u64,
    /// Lets a stage load other slots (externs) for the rest of this batch.
    pub guard: &'g Guard<'g>,
}

/// A program in the pipeline. `run` processes the packets of `batch` selected by `sel`, setting
/// their verdicts and `out_port`s; it must not block, and must not panic on any packet.
pub trait Stage: Send + Sync + 'static {
    /// Short name for listings and metrics (`l2fwd`, `set-field`, an eBPF program name, ...).
    fn name(&self) -> &str;

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>);

    /// A one-line description of the configuration, for `hotplane` listings.
    fn describe(&self) -> String {
        self.name().to_string()
    }

    /// The concrete stage, for the control plane to recognise its own kinds (a Lua function
    /// records where it is installed). `None` for stages that need no such thing.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// Stages are shared between slots and workers by reference count.
pub type StageRef = Arc<dyn Stage>;

/// Fixed pipeline positions a program can occupy (DESIGN.md: pre -> P4 ingress -> mid -> P4
/// egress -> post).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Position {
    /// Before parsing: sees every received packet.
    Pre,
    /// Between ingress and egress (after the per-flow functions).
    Mid,
    /// Before transmit.
    Post,
}

impl Position {
    pub const ALL: [Position; 3] = [Position::Pre, Position::Mid, Position::Post];

    pub fn as_str(self) -> &'static str {
        match self {
            Position::Pre => "pre",
            Position::Mid => "mid",
            Position::Post => "post",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn from_index(i: u8) -> Option<Self> {
        Self::ALL.get(i as usize).copied()
    }
}

/// A name that is not a [`Position`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a position (pre, mid, post)")]
pub struct UnknownPosition(pub String);

impl core::str::FromStr for Position {
    type Err = UnknownPosition;
    fn from_str(s: &str) -> Result<Self, UnknownPosition> {
        match s {
            "pre" => Ok(Position::Pre),
            "mid" => Ok(Position::Mid),
            "post" => Ok(Position::Post),
            other => Err(UnknownPosition(other.to_string())),
        }
    }
}

impl core::fmt::Display for Position {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}
