//! Specialise a downstream program to what its upstream guarantees: analyse it on the assumed
//! shape, rewrite it ([`super::rewrite`]), derive the [`Guard`], and re-verify the result with
//! the guard's length as a precondition. An unverified program never leaves this module: if the
//! verifier refuses the specialised form, the conservative form (every packet bounds check
//! kept) is tried, and if that is refused too the caller keeps the original.

use super::analysis::{analyse, AnalysisOptions, Outcome};
use super::guard::Guard;
use super::rewrite::{rewrite, Mutation, RewriteError, RewriteOptions, RewriteStats};
use super::shape::Guarantee;
use crate::helpers::Arg;
use crate::helpers::Helpers;
use crate::program::{LoadError, LoadOptions, Program, ProgramSpec};
use crate::verifier::{self, Context, Env, MapInfo, VerifyError};
use std::sync::Arc;
use std::time::Instant;

/// A downstream program specialised to an assumed guarantee.
#[derive(Debug, Clone)]
pub struct Specialised {
    /// The specialised program (same maps, same names: it shares their state).
    pub spec: ProgramSpec,
    /// Packets that fail it run the original.
    pub guard: Guard,
    /// The context it was verified in ([`Context::XdpMinLen`] with the guard's minimum).
    pub context: Context,
    pub original_slots: usize,
    pub stats: RewriteStats,
    /// Packet bounds checks were kept (the verifier refused the program without them).
    pub conservative: bool,
    /// Instructions the verifier processed for the specialised program.
    pub verify_processed: usize,
    /// Map lookups inlined against the maps' contents (`super::mapconst`; the guard holds
    /// their pins).
    pub inlined_lookups: usize,
    pub timing: Timing,
}

/// Where the optimisation time went, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Timing {
    pub verify_original_us: f64,
    pub analyse_us: f64,
    pub rewrite_us: f64,
    pub verify_us: f64,
    /// Map-content specialisation: analysis, inlining, rewrite and re-verification.
    pub mapconst_us: f64,
}

impl Timing {
    pub fn total_us(&self) -> f64 {
        self.verify_original_us
            + self.analyse_us
            + self.rewrite_us
            + self.verify_us
            + self.mapconst_us
    }
}

impl Specialised {
    /// The specialised program on `original`'s maps, as a data plane runs it: with its guard
    /// compiled in front of it where that can be (JIT), falling back to `original`'s code;
    /// otherwise bare, for the caller to check [`Specialised::guard`] itself.
    pub fn load_behind(
        &self,
        original: &Arc<Program>,
        helpers: &Helpers,
        opts: LoadOptions,
    ) -> Result<Program, LoadError> {
        match self.guard.plan() {
            Some(plan) => {
                Program::load_guarded(&self.spec, self.context, helpers, opts, original, plan)
            }
            None => {
                Program::load_with_maps(&self.spec, self.context, helpers, opts, &original.maps)
            }
        }
    }

    pub fn slots(&self) -> usize {
        self.spec.insns.len()
    }

    /// Share of the original's instruction slots removed.
    pub fn reduction(&self) -> f64 {
        1.0 - self.slots() as f64 / self.original_slots.max(1) as f64
    }
}

/// Why no specialised program came out (the original stays in place).
#[derive(Debug, thiserror::Error)]
pub enum SpecialiseError {
    #[error("the verifier refuses the original program: {0}")]
    Original(VerifyError),
    #[error("the upstream lets no packet through: there is nothing to specialise for")]
    NoPackets,
    #[error("the analysis did not finish ({0:?}): nothing can be relied on")]
    Incomplete(Outcome),
    #[error("the rewrite failed: {0}")]
    Rewrite(#[from] RewriteError),
    #[error(
        "the verifier refuses the specialised program ({specialised}) and its conservative form \
         ({conservative})"
    )]
    Refused { specialised: VerifyError, conservative: VerifyError },
}

/// Limits of a specialisation.
#[derive(Debug, Clone, Default)]
pub struct SpecialiseOptions {
    pub analysis: AnalysisOptions,
    /// A deliberate bug in the rewrite (the checker's mutation tests).
    #[doc(hidden)]
    pub mutation: Option<Mutation>,
    /// The program's maps as loaded (in its map order): lookups into small hash maps it never
    /// writes are inlined against their contents, guarded by the maps' write counts. `None`:
    /// the shape alone.
    pub maps: Option<Vec<std::sync::Arc<crate::maps::Map>>>,
}

/// Specialise `down` (an XDP program) to packets described by `assumed`.
pub fn specialise(
    down: &ProgramSpec,
    assumed: &Guarantee,
    opts: &SpecialiseOptions,
) -> Result<Specialised, SpecialiseError> {
    let t = Instant::now();
    verify_in(down, &down.insns, Context::Xdp, opts).map_err(SpecialiseError::Original)?;
    let verify_original_us = micros(t);
    let mut s = specialise_verified(down, assumed, opts)?;
    s.timing.verify_original_us = verify_original_us;
    Ok(s)
}

/// [`specialise`] for a program known to pass the verifier as XDP (a loaded one): the analysis
/// means nothing for a program the verifier would refuse.
pub fn specialise_verified(
    down: &ProgramSpec,
    assumed: &Guarantee,
    opts: &SpecialiseOptions,
) -> Result<Specialised, SpecialiseError> {
    let mut timing = Timing::default();
    // One exploration of the hull: the guard then checks one shape.
    let shape = assumed.hull().ok_or(SpecialiseError::NoPackets)?;
    let t = Instant::now();
    let analysis = analyse(&down.insns, &Guarantee::of(shape.clone()), &opts.analysis);
    timing.analyse_us = micros(t);
    if !analysis.is_complete() {
        return Err(SpecialiseError::Incomplete(analysis.outcome));
    }
    let cov = &analysis.coverage;
    let guard = Guard::from_shape(&shape, (!cov.moves_packet).then_some(&cov.read));
    let context = Context::XdpMinLen { min_len: guard.min_len() };
    let helper_args = |id: u32| {
        let h = opts.analysis.helpers.get(id)?;
        Some(h.args.iter().take_while(|a| **a != Arg::None).count())
    };
    let attempt = |keep_bounds_checks: bool, timing: &mut Timing| {
        let t = Instant::now();
        let ro = RewriteOptions { keep_bounds_checks, mutation: opts.mutation };
        let (insns, stats) = rewrite(&down.insns, cov, ro, &helper_args)?;
        timing.rewrite_us += micros(t);
        let t = Instant::now();
        let verified = verify_in(down, &insns, context, opts);
        timing.verify_us += micros(t);
        Ok::<_, RewriteError>((insns, stats, verified))
    };
    let (insns, stats, verified, conservative) = match attempt(false, &mut timing)? {
        (insns, stats, Ok(v)) => (insns, stats, v, false),
        (_, _, Err(specialised)) => match attempt(true, &mut timing)? {
            (insns, stats, Ok(v)) => (insns, stats, v, true),
            (_, _, Err(conservative)) => {
                return Err(SpecialiseError::Refused { specialised, conservative })
            }
        },
    };
    let mut s = Specialised {
        spec: ProgramSpec { name: down.name.clone(), insns, maps: down.maps.clone() },
        guard,
        context,
        original_slots: down.insns.len(),
        stats,
        conservative,
        verify_processed: verified.processed,
        inlined_lookups: 0,
        timing,
    };
    if let Some(maps) = &opts.maps {
        let t = Instant::now();
        fold_map_contents(&mut s, &shape, cov, maps, opts, &helper_args);
        s.timing.mapconst_us = micros(t);
    }
    Ok(s)
}

/// Inline `s`'s lookups into small maps it never writes ([`super::mapconst`]), then fold what
/// that decides (an empty map's null check, say) by one more analysis and rewrite. Kept only if
/// the verifier accepts the result; otherwise `s` stays as it was.
fn fold_map_contents(
    s: &mut Specialised,
    shape: &super::shape::PacketShape,
    first: &super::analysis::Coverage,
    maps: &[std::sync::Arc<crate::maps::Map>],
    opts: &SpecialiseOptions,
    helper_args: super::rewrite::HelperArgs<'_>,
) {
    let input = Guarantee::of(shape.clone());
    let cov = analyse(&s.spec.insns, &input, &opts.analysis);
    if !cov.is_complete() {
        return;
    }
    let Some(folded) = super::mapconst::fold_small_maps(&s.spec.insns, &cov.coverage, maps) else {
        return;
    };
    let known = AnalysisOptions { map_values: folded.agreed.clone(), ..opts.analysis.clone() };
    let again = analyse(&folded.insns, &input, &known);
    if !again.is_complete() {
        return;
    }
    let ro = RewriteOptions { keep_bounds_checks: s.conservative, mutation: None };
    let Ok((insns, _)) = rewrite(&folded.insns, &again.coverage, ro, helper_args) else { return };
    let Ok(verified) = verify_in(&s.spec, &insns, s.context, opts) else { return };
    s.spec.insns = insns;
    s.verify_processed = verified.processed;
    s.inlined_lookups = folded.lookups;
    // Folded values can turn a packet read at a variable offset into one at a known offset,
    // decided by the shape: the guard checks what either analysis read.
    let moved = first.moves_packet || again.coverage.moves_packet;
    let read: std::collections::BTreeSet<u16> =
        first.read.union(&again.coverage.read).copied().collect();
    s.guard = Guard::from_shape(shape, (!moved).then_some(&read)).with_pins(folded.pins);
}

/// Verify `insns` with `down`'s maps in `ctx`.
fn verify_in(
    down: &ProgramSpec,
    insns: &[crate::insn::Insn],
    ctx: Context,
    opts: &SpecialiseOptions,
) -> Result<verifier::Verified, VerifyError> {
    let maps: Vec<MapInfo> = down.maps.iter().map(|m| m.def.into()).collect();
    let env = Env {
        helpers: &opts.analysis.helpers,
        ctx,
        maps: &maps,
        complexity: verifier::DEFAULT_COMPLEXITY,
    };
    verifier::verify(insns, &env)
}

fn micros(t: Instant) -> f64 {
    t.elapsed().as_nanos() as f64 / 1e3
}
