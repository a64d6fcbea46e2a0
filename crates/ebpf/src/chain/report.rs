//! `hotplane ebpf chain UP.o DOWN.o`: specialise a downstream program to its upstream's pass
//! guarantee (or to an assumed shape), check the result with the differential checker, and say
//! what was removed and why, the guard, and where the time went.

use super::analysis::{analyse, ExitAction};
use super::difftest::{difftest, packet_sets, traffic, upstream_outputs, DiffReport, Rng};
use super::shape::{Guarantee, PacketShape};
use super::specialise::{specialise, SpecialiseOptions, Specialised};
use crate::helpers::Helpers;
use crate::program::{Engine, LoadOptions, Program, ProgramSpec};
use serde_json::json;
use std::fmt;
use std::time::Instant;

/// How much the specialised program may rely on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Every fact the specialisation used is checked per packet; a packet that fails runs the
    /// original (correct for any input).
    #[default]
    Guarded,
    /// Only the length precondition is checked (memory safety never rests on the analysis);
    /// the content facts are trusted, as in the seed. Wrong for packets that did not come
    /// through the upstream.
    Trusted,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "guarded" => Ok(Mode::Guarded),
            "trusted" => Ok(Mode::Trusted),
            _ => Err(format!("`{s}`: the modes are `guarded` and `trusted`")),
        }
    }
}

/// Options of [`chain_report`].
#[derive(Debug, Clone)]
pub struct ChainOptions {
    pub mode: Mode,
    /// Packets per set for the differential check (0: no check).
    pub check_packets: usize,
    pub seed: u64,
    pub helpers: Helpers,
}

impl Default for ChainOptions {
    fn default() -> Self {
        // Clock and random helpers would make the two runs differ for no fault of the rewrite.
        let helpers = crate::xdp::deterministic_helpers();
        Self { mode: Mode::Guarded, check_packets: 3000, seed: 1, helpers }
    }
}

/// The outcome, printable as text or JSON.
#[derive(Debug)]
pub struct ChainReport {
    pub upstream: String,
    pub downstream: String,
    pub mode: Mode,
    pub assumed: PacketShape,
    pub upstream_analyse_us: f64,
    pub result: Result<Specialised, String>,
    pub jit_us: f64,
    pub check: Option<DiffReport>,
}

impl ChainReport {
    /// Whether the specialisation may replace the original: it exists and the check found no
    /// difference.
    pub fn accepted(&self) -> bool {
        self.result.is_ok() && self.check.as_ref().is_none_or(DiffReport::passed)
    }

    /// Analysis, rewrite, re-verification and JIT of the downstream, plus the upstream's
    /// analysis: what a data plane spends before the specialised program can run.
    pub fn optimise_ms(&self) -> f64 {
        let own = self.result.as_ref().map_or(0.0, |s| s.timing.total_us());
        (self.upstream_analyse_us + own + self.jit_us) / 1e3
    }

    pub fn to_json(&self) -> String {
        let check = self.check.as_ref().map(|c| {
            json!({
                "packets": c.packets,
                "admitted": c.admitted,
                "mismatches": c.mismatches,
                "skipped": c.skipped,
                "actions": c.actions,
                "first": c.first.as_ref().map(|m| json!({
                    "frame": hex::encode(&m.frame),
                    "admitted": m.admitted,
                    "what": m.what,
                })),
            })
        });
        let mut v = json!({
            "upstream": self.upstream,
            "downstream": self.downstream,
            "mode": match self.mode { Mode::Guarded => "guarded", Mode::Trusted => "trusted" },
            "assumed": self.assumed,
            "accepted": self.accepted(),
            "optimise_ms": self.optimise_ms(),
            "check": check,
        });
        match &self.result {
            Ok(s) => {
                v["slots_before"] = json!(s.original_slots);
                v["slots_after"] = json!(s.slots());
                v["reduction"] = json!(s.reduction());
                v["conservative"] = json!(s.conservative);
                v["removed"] = json!(s.stats);
                v["guard"] = json!(s.guard);
                v["guard_text"] = json!(s.guard.to_string());
                v["timing_us"] = json!({
                    "upstream_analyse": self.upstream_analyse_us,
                    "verify_original": s.timing.verify_original_us,
                    "analyse": s.timing.analyse_us,
                    "rewrite": s.timing.rewrite_us,
                    "verify": s.timing.verify_us,
                    "jit": self.jit_us,
                });
            }
            Err(e) => v["error"] = json!(e),
        }
        v.to_string()
    }
}

impl fmt::Display for ChainReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match &self.result {
            Ok(s) => s,
            Err(e) => {
                return writeln!(
                    f,
                    "{} -> {}: not specialised, the original stays: {e}",
                    self.upstream, self.downstream
                )
            }
        };
        writeln!(
            f,
            "{} -> {}: {} -> {} instruction slots ({:.1}% smaller){}",
            self.upstream,
            self.downstream,
            s.original_slots,
            s.slots(),
            100.0 * s.reduction(),
            if s.conservative { ", packet bounds checks kept (conservative)" } else { "" }
        )?;
        let r = &s.stats;
        writeln!(
            f,
            "  removed: {} unreachable, {} computing nothing read, {} jumps to the next \
             instruction",
            r.unreachable_removed, r.dead_removed, r.jumps_removed
        )?;
        writeln!(
            f,
            "  decided: {} branches ({} packet bounds checks); folded: {} loads, {} ALU results, \
             {} register operands; {} jumps threaded; {} slots of byte copies merged",
            r.branches_decided,
            r.bounds_checks_decided,
            r.loads_folded,
            r.alu_folded,
            r.operands_folded,
            r.jumps_threaded,
            r.copies_merged
        )?;
        let guard = match self.mode {
            Mode::Guarded => s.guard.to_string(),
            Mode::Trusted => {
                format!("len in [{}, {}] only (trusted)", s.guard.min_len(), s.guard.max_len())
            }
        };
        writeln!(f, "  guard: {guard}")?;
        writeln!(
            f,
            "  time: upstream analysis {:.0} us, verify {:.0} us, analysis {:.0} us, rewrite {:.0} \
             us, re-verify {:.0} us, JIT {:.0} us: {:.2} ms in all",
            self.upstream_analyse_us,
            s.timing.verify_original_us,
            s.timing.analyse_us,
            s.timing.rewrite_us,
            s.timing.verify_us,
            self.jit_us,
            self.optimise_ms()
        )?;
        match &self.check {
            None => writeln!(f, "  not checked (--check 0)"),
            Some(c) if c.passed() => {
                let actions: Vec<String> = c
                    .actions
                    .iter()
                    .zip(["aborted", "drop", "pass", "tx", "redirect"])
                    .filter(|(n, _)| **n > 0)
                    .map(|(n, a)| format!("{n} {a}"))
                    .collect();
                writeln!(
                    f,
                    "  checked: {} packets (shape samples{}{}; JIT and interpreter), {} through \
                     the specialised program, no difference from the original ({})",
                    c.packets,
                    if self.upstream_analyse_us > 0.0 { ", upstream outputs" } else { "" },
                    if self.mode == Mode::Guarded { ", violators" } else { "" },
                    c.admitted,
                    actions.join(", ")
                )
            }
            Some(c) if c.mismatches == 0 => writeln!(
                f,
                "  NOT CHECKED: {} packets ran, {} through the specialised program, {} could not \
                 run (longer than {} bytes); the original stays",
                c.packets,
                c.admitted,
                c.skipped,
                super::difftest::MAX_FRAME
            ),
            Some(c) => {
                let m = c.first.as_ref();
                writeln!(
                    f,
                    "  MISMATCH in {} of {} packets; the original stays. First: {} (frame {})",
                    c.mismatches,
                    c.packets,
                    m.map_or("", |m| m.what.as_str()),
                    m.map_or_else(String::new, |m| hex::encode(&m.frame))
                )
            }
        }
    }
}

/// Specialise `down` to what `up` passes (or to `assumed`), check it, and report.
pub fn chain_report(
    up: Option<&ProgramSpec>,
    assumed: Option<Guarantee>,
    down: &ProgramSpec,
    opts: &ChainOptions,
) -> ChainReport {
    let sopts = SpecialiseOptions {
        analysis: super::AnalysisOptions { helpers: opts.helpers.clone(), ..Default::default() },
        mutation: None,
        maps: None,
    };
    let t = Instant::now();
    let assumed = match (assumed, up) {
        (Some(g), _) => g,
        (None, Some(up)) => {
            analyse(&up.insns, &super::default_input(), &sopts.analysis).guarantee(ExitAction::Pass)
        }
        (None, None) => super::default_input(),
    };
    let upstream_analyse_us = if up.is_some() { t.elapsed().as_nanos() as f64 / 1e3 } else { 0.0 };
    let mut report = ChainReport {
        upstream: up.map_or_else(|| "(assumed)".to_string(), |u| u.name.clone()),
        downstream: down.name.clone(),
        mode: opts.mode,
        assumed: assumed.hull().unwrap_or_else(PacketShape::top),
        upstream_analyse_us,
        result: Err(String::new()),
        jit_us: 0.0,
        check: None,
    };
    let mut s = match specialise(down, &assumed, &sopts) {
        Ok(s) => s,
        Err(e) => {
            report.result = Err(e.to_string());
            return report;
        }
    };
    if opts.mode == Mode::Trusted {
        s.guard = s.guard.length_only();
    }
    let load = LoadOptions { engine: Engine::Jit, ..LoadOptions::default() };
    match Program::load(&s.spec, s.context, &opts.helpers, load, None) {
        Ok(p) => report.jit_us = p.stats.compile_ns as f64 / 1e3,
        Err(e) => {
            report.result = Err(format!("the specialised program does not load: {e}"));
            return report;
        }
    }
    if opts.check_packets > 0 {
        report.check = Some(check(up, down, &s, &report.assumed, opts));
    }
    report.result = Ok(s);
    report
}

/// The three packet sets through both engines.
fn check(
    up: Option<&ProgramSpec>,
    down: &ProgramSpec,
    s: &Specialised,
    assumed: &PacketShape,
    opts: &ChainOptions,
) -> DiffReport {
    let n = opts.check_packets;
    let mut rng = Rng::new(opts.seed);
    let outputs = up
        .and_then(|up| upstream_outputs(up, &traffic(4 * n, &mut rng), &opts.helpers, &|_| {}).ok())
        .map(|out| out.into_iter().take(n).collect())
        .unwrap_or_default();
    let frames = packet_sets(down, assumed, outputs, n, opts.mode == Mode::Guarded, &mut rng);
    let mut total = DiffReport::default();
    for engine in [Engine::Jit, Engine::Interp] {
        match difftest(down, s, &frames, &opts.helpers, engine, &|_| {}) {
            Ok(r) => total.absorb(r),
            Err(e) => {
                total.mismatches += 1;
                total.first.get_or_insert(super::difftest::Mismatch {
                    index: 0,
                    frame: Vec::new(),
                    admitted: false,
                    what: format!("does not load: {e}"),
                });
            }
        }
    }
    total
}
