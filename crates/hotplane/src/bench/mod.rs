//! `hotplane bench NAME`: benchmarks that measure, next to an anchor run in the same
//! invocation where one exists, and print one JSON object as their last line.

pub mod chain;
pub mod ebpf;
#[cfg(feature = "lua")]
pub mod lua;
#[cfg(feature = "lua")]
pub mod lua_dyn;
#[cfg(feature = "p4")]
pub mod p4;
#[cfg(feature = "p4runtime")]
pub mod p4runtime;
pub mod perf;
pub mod pipeline;
pub mod swap;
pub mod tables;
pub mod tables_methods;
pub mod testpmd;
pub mod veth;
pub mod wasp;
pub mod wasp_net;

use std::io::{IsTerminal, Write};

/// The Lua flow function the demo and the Lua benchmarks send: writes 0x0101 into the stamp's
/// mark (they substitute their own constant).
pub const MARK_LUA: &str = include_str!("../../../../examples/lua/mark.lua");
use std::time::Instant;

/// The middle of repeated measurements (the upper one of the two middles for even counts).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Print the result: human lines went to stderr; the JSON object is the last stdout line.
pub fn emit(v: &serde_json::Value, json_only: bool) {
    if !json_only {
        eprintln!();
    }
    println!("{}", serde_json::to_string(v).unwrap_or_default());
}

/// A progress line on stderr for long runs (only on a terminal, never with --json).
pub struct Progress {
    name: String,
    quiet: bool,
    tty: bool,
    last: Instant,
    start: Instant,
}

impl Progress {
    pub fn new(name: &str, quiet: bool) -> Self {
        Self {
            name: name.into(),
            quiet,
            tty: std::io::stderr().is_terminal(),
            last: Instant::now(),
            start: Instant::now(),
        }
    }

    pub fn update(&mut self, done: u64, total: u64) {
        if self.quiet || !self.tty || self.last.elapsed().as_millis() < 250 {
            return;
        }
        self.last = Instant::now();
        let pct = if total == 0 { 100.0 } else { done as f64 * 100.0 / total as f64 };
        eprint!(
            "\r{}: {:5.1}% ({done}/{total}) {:.1}s   ",
            self.name,
            pct.min(100.0),
            self.start.elapsed().as_secs_f64()
        );
        let _ = std::io::stderr().flush();
    }

    pub fn note(&self, msg: &str) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }

    pub fn finish(&self, msg: &str) {
        if !self.quiet {
            if self.tty {
                eprint!("\r\x1b[K");
            }
            eprintln!("{msg}");
        }
    }
}
