//! hotplane-core: the engine's vocabulary. Packets and batches, the buffer pool, flow keys and
//! typed header views, hot-swappable program slots with QSBR reclamation, the `Stage` trait
//! every program kind implements, built-in native stages, the flow table, and counters.
//!
//! This crate must not depend on any other hotplane crate, on I/O, or on any program kind
//! (eBPF, Lua, P4, WASP): they all build on it.

pub mod batch;
pub mod flow;
pub mod flowtable;
pub mod kind;
pub mod metrics;
pub mod native;
pub mod packet;
pub mod pool;
pub mod qsbr;
pub mod shape;
pub mod slot;
pub mod stage;
pub mod time;
pub mod wire;
pub mod xdp;

pub use batch::{Batch, Mask, DEFAULT_BATCH, MAX_BATCH};
pub use flow::{classify, FlowKey};
pub use flowtable::{FlowChange, FlowSelector, FlowTable};
pub use kind::{
    BuildCx, Built, ExternSlots, KindError, KindMaker, KindSetup, Program, ProgramKind,
    UpdateProgram,
};
pub use packet::{Layers, Meta, Packet, Verdict, NO_PORT};
pub use pool::{Pool, PoolCache, PoolConfig};
pub use qsbr::{Guard, Qsbr, Reader};
pub use slot::{Slot, Versioned};
pub use stage::{Position, Replica, Stage, StageRef, UnknownPosition, WorkerCx, MAX_WORKERS};
