//! hotplane: the binary's library. It registers the program kinds of this build with the
//! engine and holds the commands built on it: command-line parsing and output, the demo, the
//! generator, the push client and the benchmarks. The data plane itself is `hotplane-engine`.
//!
//! This is the only crate allowed to depend on every other hotplane crate.

pub mod bench;
pub mod capture_cmd;
pub mod cli;
pub mod demo;
pub mod ebpf_cmd;
pub mod examples;
pub mod gen;
pub mod human;
pub mod key_cmd;
#[cfg(feature = "lua")]
pub mod lua_cmd;
pub mod netlab;
#[cfg(feature = "p4")]
pub mod p4_cmd;
#[cfg(feature = "p4runtime")]
pub mod p4c_cmd;
#[cfg(feature = "p4runtime")]
pub mod p4rt_cmd;
pub mod plot;
pub mod push_cmd;
#[cfg(feature = "p4runtime")]
pub mod switch_cmd;
pub mod tables_cmd;
pub mod trace_cmd;

pub use hotplane_control::inband;
pub use hotplane_engine::{config, Config, Engine, EngineBuilder, EngineError, StageSpec};

/// The engine with every program kind of this build: the one place kinds are registered.
pub fn kinds() -> EngineBuilder {
    let engine = Engine::builder()
        .kind(hotplane_ebpf::kind::make)
        .kind(hotplane_tables::kind::make)
        .kind(hotplane_wasp::kind::make);
    #[cfg(feature = "lua")]
    let engine = engine.kind(hotplane_lua::kind::make);
    #[cfg(feature = "p4")]
    let engine = engine.kind(hotplane_p4::kind::make);
    engine
}

/// Start a data plane running `cfg` with every program kind of this build.
pub fn start(cfg: Config) -> Result<Engine, EngineError> {
    kinds().start(cfg)
}
