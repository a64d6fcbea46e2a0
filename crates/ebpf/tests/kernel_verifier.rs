//! Differential test of the verifier against Linux's: the fuzz generator's programs and the
//! negative corpus are loaded with bpf(2) too. A program Linux refuses for a memory-safety
//! reason while hotplane accepts it is reported; it fails the test unless the memory-safety
//! oracle runs it clean on every test packet (Linux's verifier is less precise in places, and
//! then refuses a path that cannot run). Programs hotplane refuses
//! that Linux accepts are only counted: hotplane is stricter by design (pointer comparisons,
//! moved context pointers, no loops without a visible bound ...).
//!
//! Needs root (CI runs as root) and a kernel with BPF: without them it fails saying so, rather
//! than passing without having compared anything.

#[allow(dead_code)]
#[path = "../../../fuzz/fuzz_targets/ebpf_gen.rs"]
mod gen;
#[allow(dead_code)]
#[path = "corpus/negative.rs"]
mod negative;

use hotplane_core::{Pool, PoolConfig};
use hotplane_ebpf::kernel::{self, KernelProgram};
use hotplane_ebpf::program::{Engine, LoadOptions, Program, ProgramSpec};
use hotplane_ebpf::verifier::{self, Context, Env, MapInfo};
use hotplane_ebpf::xdp;

/// Words of Linux verifier messages that refuse a program for touching memory it may not, or
/// for leaking or misusing pointers (as opposed to limits, unsupported features or style).
const SAFETY: &[&str] = &[
    "invalid access",
    "invalid mem access",
    "invalid read from stack",
    "invalid write to stack",
    "invalid stack",
    "invalid indirect",
    "outside of the packet",
    "out of bounds",
    "pointer arithmetic",
    "math between",
    "leaks addr",
    "dereference of modified",
    "invalid bpf_context access",
    "type=",
    "expected=",
    "!read_ok",
    "unbounded",
    "min value is negative",
    "value is outside",
    "cannot write into",
    "R10 is",
    "invalid size",
    "misaligned",
];

/// Linux refusals that are not memory-safety differences here, and why.
const KNOWN: &[(&str, &str)] = &[(
    "invalid bpf_context access off=20 size=4",
    "egress_ifindex: Linux lets only devmap programs read it; hotplane's context has the field \
     (zero at the XDP hook), so reading it stays inside the context",
)];

fn ours(spec: &ProgramSpec) -> Result<(), verifier::VerifyError> {
    let infos: Vec<MapInfo> = spec.maps.iter().map(|m| m.def.into()).collect();
    let helpers = xdp::helpers();
    let env = Env {
        helpers: &helpers,
        ctx: Context::Xdp,
        maps: &infos,
        complexity: verifier::DEFAULT_COMPLEXITY,
    };
    verifier::verify(&spec.insns, &env).map(|_| ())
}

fn require_bpf() {
    if let Err(e) = kernel::available() {
        panic!(
            "bpf(2) is unavailable here ({e}): the differential test against the Linux verifier \
             did NOT run (run as root on a kernel with BPF)"
        );
    }
}

/// Run `spec` in the checked mode on packets of several lengths: the first violation.
fn oracle_violation(spec: &ProgramSpec) -> Option<String> {
    let opts = LoadOptions { engine: Engine::Interp, ..LoadOptions::default() };
    let prog = match Program::load(spec, Context::Xdp, &xdp::helpers(), opts, None) {
        Ok(p) => p,
        Err(e) => return Some(format!("load: {e}")),
    };
    let pool = Pool::new(PoolConfig { buffers: 2, ..PoolConfig::default() }).ok()?;
    for len in [14usize, 15, 26, 27, 64, 200] {
        let frame: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(37)).collect();
        let mut p = pool.alloc()?;
        p.set_frame(&frame).ok()?;
        if let Err(e) = prog.run_checked_xdp(&mut p, 0) {
            return Some(format!("{len}-byte packet: {e}"));
        }
    }
    None
}

/// Deterministic pseudo-random bytes.
fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn generated_programs_linux_refuses_for_safety_are_refused_here_too() {
    require_bpf();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let (mut accepted, mut both, mut stricter_linux) = (0, 0, 0);
    let (mut findings, mut imprecise) = (Vec::new(), Vec::new());
    for n in 0..3000 {
        let bytes: Vec<u8> = (0..160).map(|_| xorshift(&mut seed) as u8).collect();
        let spec = ProgramSpec {
            name: format!("gen{n}"),
            insns: gen::generate(&bytes),
            maps: negative::maps(),
        };
        if ours(&spec).is_err() {
            continue;
        }
        accepted += 1;
        match KernelProgram::load_xdp(&spec) {
            Ok(_) => both += 1,
            Err(e) => {
                let log = e.to_string();
                stricter_linux += 1;
                if KNOWN.iter().any(|(w, _)| log.contains(w)) {
                    continue;
                }
                if SAFETY.iter().any(|w| log.contains(w)) {
                    let why = log.lines().rev().nth(1).unwrap_or("").to_string();
                    match oracle_violation(&spec) {
                        // Linux's verifier is less precise here (it forgets a division's
                        // constant, say) and sees a path that never runs: reported, not failed.
                        None => imprecise.push(format!("program {n}: {why}")),
                        Some(v) => {
                            findings.push(format!("program {n}: {log}\n{v}\n{:?}", spec.insns))
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "{accepted} of 3000 generated programs verified here; Linux accepted {both}, refused \
         {stricter_linux}; for a memory-safety reason {}: {} of them pass the oracle on every \
         test packet (Linux explores a path that cannot run), {} do not",
        imprecise.len() + findings.len(),
        imprecise.len(),
        findings.len()
    );
    for line in &imprecise {
        eprintln!("  Linux refuses, hotplane accepts, oracle clean: {line}");
    }
    assert!(accepted > 100, "the generator produced too few verifiable programs");
    assert!(
        findings.is_empty(),
        "Linux refuses for safety what hotplane accepts:\n{}",
        findings.join("\n\n")
    );
}

#[test]
fn the_negative_corpus_against_linux() {
    require_bpf();
    let mut linux_accepts = Vec::new();
    for c in negative::CASES {
        let spec = negative::spec(c);
        assert!(ours(&spec).is_err(), "{}: accepted here", c.name);
        if KernelProgram::load_xdp(&spec).is_ok() {
            linux_accepts.push(format!("[{}] {}", c.class, c.name));
        }
    }
    // Informational: where hotplane is stricter than Linux.
    eprintln!(
        "Linux accepts {} of the {} programs hotplane refuses:\n  {}",
        linux_accepts.len(),
        negative::CASES.len(),
        linux_accepts.join("\n  ")
    );
}
