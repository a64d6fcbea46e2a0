//! Control input for P4 programs: STF files, simple_switch_CLI lines and runtime JSON (table
//! entries, multicast groups, clone sessions, action profile members and groups) against a
//! program with every kind of table, one with an action profile and selectors, and one with
//! counters, registers and meters. Bad input gets an error; it must never panic.
#![no_main]

use hotplane_core::Qsbr;
use hotplane_p4::exec::{Engine, Objects, Pipeline};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

const PROGRAM: &str = include_str!("../../tests/p4/tables.p4");
const PROFILES: &str = include_str!("../../tests/p4/action_profiles.p4");
const EXTERNS: &str = include_str!("../../tests/p4/cli.p4");

/// A fresh pipeline (fresh tables) over `source` (named `name`), compiled once into `cache`.
/// Closures, not native code: this target is about control input, generating code for every
/// run would cut its runs by four, and `p4_source` plus the engines test cover native
/// execution.
fn pipeline(
    cache: &'static OnceLock<hotplane_p4::ir::Program>,
    name: &str,
    source: &str,
) -> (Arc<Pipeline>, &'static Qsbr) {
    static Q: OnceLock<Qsbr> = OnceLock::new();
    let qsbr = Q.get_or_init(Qsbr::new);
    let ir = cache.get_or_init(|| {
        let mut sources = hotplane_p4::diag::SourceMap::default();
        hotplane_p4::check_program(
            &mut sources,
            &mut hotplane_p4::preprocess::BuiltinOnly,
            name,
            source,
            &[],
        )
        .expect("the program compiles")
    });
    let objects = Objects::new(ir, qsbr).expect("its tables");
    let p = Pipeline::with_engine(ir.clone(), objects, Engine::Closures).expect("it builds");
    (Arc::new(p), qsbr)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    static TABLES: OnceLock<hotplane_p4::ir::Program> = OnceLock::new();
    static PROFILED: OnceLock<hotplane_p4::ir::Program> = OnceLock::new();
    static WITH_EXTERNS: OnceLock<hotplane_p4::ir::Program> = OnceLock::new();
    // A fresh pipeline each run: entries from one input must not leak into the next.
    for (cache, name, source) in [
        (&TABLES, "tables.p4", PROGRAM),
        (&PROFILED, "action_profiles.p4", PROFILES),
        (&WITH_EXTERNS, "cli.p4", EXTERNS),
    ] {
        let (p, qsbr) = pipeline(cache, name, source);
        if text.trim_start().starts_with('{') {
            let _ = hotplane_p4::runtime::load(&p, text);
            continue;
        }
        let mut state = hotplane_p4::cli::CliState::default();
        let mut replication = hotplane_p4::v1model::Replication::default();
        for line in text.lines() {
            if let Ok(o) = hotplane_p4::cli::execute(&p, &mut state, &replication, line) {
                replication = o.replication.unwrap_or(replication);
            }
        }
        let _ = hotplane_p4::stf::run(p, qsbr, "fuzz.stf", text);
    }
});
