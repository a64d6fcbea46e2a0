//! hotplane-engine: the data plane as a library. Ports, pinned workers running batches
//! through the pipeline positions and the flow table, hot-swappable slots with grace periods,
//! the control thread (updates in-band and over the API, authentication, replay state), the
//! control socket and the Prometheus endpoint, and the config model.
//!
//! Program kinds plug in through `hotplane_core::ProgramKind`: the engine keeps a registry of
//! them ([`Kinds`]) and routes specs, updates and control operations by name. It must not depend
//! on any concrete kind (eBPF, Lua, P4, tables, WASP): the binary, or an embedding program,
//! registers them with [`EngineBuilder::kind`].

pub mod addresses;
pub mod capture;
pub mod config;
mod control;
pub mod cpu_port;
mod engine;
pub mod kinds;
pub mod metrics_http;
pub mod native;
pub mod observe;
pub mod registry;
pub mod servers;
pub mod socket_dir;
mod state;
pub mod trace;
mod worker;

pub use config::{Config, ConfigError, PortConfig, PortKind};
pub use control::ack_json;
pub use cpu_port::{CpuCounters, CpuPort, CpuPortError};
pub use engine::{Engine, EngineBuilder, EngineError, RunSummary};
pub use kinds::Kinds;
pub use native::StageSpec;
pub use observe::Observability;
pub use registry::{Installed, Registry, SlotInfo};
pub use servers::ControlLink;
pub use worker::{online_cores, pin_to_core, pin_to_cores, spare_cores, WorkerStats, TRACKED};
