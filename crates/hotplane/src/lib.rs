//! hotplane: the binary's library. Configuration, native stage specs, the runtime that wires
//! ports, workers, slots and the control thread together, and the commands built on it (demo,
//! benchmarks, generator, push client).
//!
//! This is the only crate allowed to depend on every other hotplane crate.

pub mod bench;
pub mod cli;
pub mod config;
pub mod demo;
pub mod ebpf;
pub mod ebpf_cmd;
pub mod gen;
pub mod inband;
pub mod lua_cmd;
pub mod netlab;
pub mod p4_cmd;
pub mod p4_control;
pub mod p4_stage;
pub mod plot;
pub mod push_cmd;
pub mod runtime;
pub mod stages;
pub mod table_stage;
pub mod tables_cmd;

pub use config::Config;
pub use runtime::DataPlane;
