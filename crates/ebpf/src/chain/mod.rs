//! Chain optimisation (issue 21; design in `docs/chain.md`): what an upstream program
//! guarantees about the packets it passes on, as an object that can be printed, stored, sent
//! to another node and, in later steps, used to specialise the program downstream.
//!
//! This part computes the guarantee: [`shape`] holds the object ([`PacketShape`],
//! [`Guarantee`]) and its JSON, [`analysis`] the shape interpreter that derives it from a
//! verified XDP program. Depends on this crate and `hotplane-core` only.

pub mod analysis;
mod copies;
pub mod difftest;
mod domain;
pub mod examples;
pub mod guard;
pub mod live;
pub mod mapconst;
mod peephole;
mod refine;
pub mod report;
pub mod rewrite;
/// Packet shapes live in `hotplane-core`: the P4 side specialises to them too.
pub use hotplane_core::shape;
pub mod specialise;
mod transfer;

pub use analysis::{
    analyse, default_input, Analysis, AnalysisOptions, Coverage, ExitAction, Konst, Outcome,
    DEFAULT_BUDGET, DEFAULT_MAX_FRAME, MIN_FRAME,
};
pub use guard::{Guard, GuardWord};
pub use report::{chain_report, ChainOptions, ChainReport, Mode};
pub use shape::{
    ByteFact, ByteTextError, Guarantee, PacketShape, ShapeError, UsedFacts, MAX_SHAPES,
};
pub use specialise::{
    specialise, specialise_verified, SpecialiseError, SpecialiseOptions, Specialised,
};

use crate::program::ProgramSpec;
use crate::verifier::{self, Context, Env, MapInfo, VerifyError};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

/// What `hotplane ebpf shape` prints: a program's guarantee per exit action.
#[derive(Debug, Clone)]
pub struct ShapeReport {
    pub program: String,
    pub instructions: usize,
    pub analysis: Analysis,
    /// Time the analysis took (not the verification before it).
    pub analyse_us: f64,
}

/// The program cannot be analysed: the verifier refuses it.
#[derive(Debug, thiserror::Error)]
#[error("{program}: the verifier refuses it, so there is nothing to analyse: {source}")]
pub struct NotVerified {
    pub program: String,
    pub source: VerifyError,
}

/// Verify `spec` as XDP, then compute its guarantee for packets described by `input`.
pub fn shape_report(spec: &ProgramSpec, input: &Guarantee) -> Result<ShapeReport, NotVerified> {
    let opts = AnalysisOptions::default();
    let maps: Vec<MapInfo> = spec.maps.iter().map(|m| m.def.into()).collect();
    let env = Env {
        helpers: &opts.helpers,
        ctx: Context::Xdp,
        maps: &maps,
        complexity: verifier::DEFAULT_COMPLEXITY,
    };
    verifier::verify(&spec.insns, &env)
        .map_err(|source| NotVerified { program: spec.name.clone(), source })?;
    let t = Instant::now();
    let analysis = analyse(&spec.insns, input, &opts);
    Ok(ShapeReport {
        program: spec.name.clone(),
        instructions: spec.insns.len(),
        analysis,
        analyse_us: t.elapsed().as_nanos() as f64 / 1e3,
    })
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Outcome::Complete => "complete".into(),
            Outcome::OverBudget => "over its budget: nothing is known".into(),
            Outcome::Unsupported { pc, what } => {
                format!("gave up at instruction {pc} ({what}): nothing is known")
            }
            Outcome::Internal => {
                "internal error (a bug; please report it): nothing is known".into()
            }
        }
    }
}

impl ShapeReport {
    /// `{"program":..,"complete":..,"exits":{"pass":{"shapes":[..]},..}}`; an action missing
    /// from `exits` is never taken.
    pub fn to_json(&self) -> String {
        #[derive(serde::Serialize)]
        struct Json<'a> {
            program: &'a str,
            instructions: usize,
            complete: bool,
            outcome: String,
            processed: usize,
            analyse_us: f64,
            exits: BTreeMap<&'static str, &'a Guarantee>,
        }
        let json = Json {
            program: &self.program,
            instructions: self.instructions,
            complete: self.analysis.is_complete(),
            outcome: self.analysis.outcome.describe(),
            processed: self.analysis.processed,
            analyse_us: self.analyse_us,
            exits: self.analysis.exits.iter().map(|(a, g)| (a.name(), g)).collect(),
        };
        serde_json::to_string(&json).unwrap_or_default()
    }
}

impl fmt::Display for ShapeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} instructions; analysis {} ({} instructions processed, {:.1} us)",
            self.program,
            self.instructions,
            self.analysis.outcome.describe(),
            self.analysis.processed,
            self.analyse_us
        )?;
        for (action, g) in &self.analysis.exits {
            let name = hotplane_core::xdp::action_name(action.code()).unwrap_or("?");
            let n = g.shapes.len();
            writeln!(f, "{name}: {n} shape{}", if n == 1 { "" } else { "s" })?;
            for s in &g.shapes {
                let text = s.to_string().replace('\n', "\n    ");
                writeln!(f, "  {}{text}", if n > 1 { "or " } else { "" })?;
            }
        }
        let never: Vec<&str> = ExitAction::ALL
            .iter()
            .filter(|a| !self.analysis.exits.contains_key(a))
            .filter_map(|a| hotplane_core::xdp::action_name(a.code()))
            .collect();
        if !never.is_empty() {
            writeln!(f, "never taken: {}", never.join(", "))?;
        }
        Ok(())
    }
}
