//! The public eBPF conformance suite (../shared/conformance/ebpf) on every engine.
//!
//! The suite is shared data next to the checkout, not part of it: these tests are ignored by a
//! plain `cargo test` (shown as ignored, never as passed), and the test command runs them with
//! `--ignored` where the suite is found. Run without it, they fail and say where it is looked
//! for.

use hotplane_ebpf::conformance::{find_suite, run_dir};
use hotplane_ebpf::helpers;
use hotplane_ebpf::interp::{interpret, Region};
use std::path::PathBuf;

/// The suite; a test asked to run without it fails, naming where it looked.
fn suite() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    find_suite(&here).unwrap_or_else(|| {
        panic!(
            "the eBPF conformance suite (shared/conformance/ebpf/tests next to the checkout) \
             was not found; set HOTPLANE_SHARED or HOTPLANE_EBPF_CONFORMANCE"
        )
    })
}

#[test]
#[ignore = "needs the eBPF conformance suite (../shared next to the checkout, or HOTPLANE_SHARED)"]
fn interpreter_passes_the_whole_suite() {
    let dir = suite();
    let h = helpers::conformance();
    let s = run_dir(&dir, |t, prog| {
        let mut mem = t.mem.clone();
        let regions = [Region::of(&mem, true)];
        let r1 = mem.as_mut_ptr() as u64;
        interpret(prog, &h, &regions, r1, mem.len() as u64, 1 << 24).map_err(|e| e.to_string())
    })
    .unwrap();
    assert!(s.failures.is_empty(), "{} failures: {:#?}", s.failed, s.failures);
    assert!(s.passed >= 300, "only {} tests ran", s.passed);
}

#[test]
#[ignore = "needs the eBPF conformance suite (../shared next to the checkout, or HOTPLANE_SHARED)"]
fn verifier_accepts_the_whole_suite() {
    let dir = suite();
    use hotplane_ebpf::verifier::{verify, Context, Env, DEFAULT_COMPLEXITY};
    let h = helpers::conformance();
    let s = run_dir(&dir, |t, prog| {
        let env = Env {
            helpers: &h,
            ctx: Context::Mem { len: t.mem.len() as u64 },
            maps: &[],
            complexity: DEFAULT_COMPLEXITY,
        };
        let v = verify(prog, &env).map_err(|e| e.to_string())?;
        let mut mem = t.mem.clone();
        let regions = [Region::of(&mem, true)];
        let r1 = mem.as_mut_ptr() as u64;
        interpret(&v.insns, &h, &regions, r1, mem.len() as u64, 1 << 24).map_err(|e| e.to_string())
    })
    .unwrap();
    assert!(s.failures.is_empty(), "{} failures: {:#?}", s.failed, s.failures);
}

#[test]
#[ignore = "needs the eBPF conformance suite (../shared next to the checkout, or HOTPLANE_SHARED)"]
fn jit_passes_the_whole_suite() {
    let dir = suite();
    use hotplane_ebpf::jit::compile;
    use hotplane_ebpf::verifier::{verify, Context, Env, DEFAULT_COMPLEXITY};
    let h = helpers::conformance();
    let s = run_dir(&dir, |t, prog| {
        let env = Env {
            helpers: &h,
            ctx: Context::Mem { len: t.mem.len() as u64 },
            maps: &[],
            complexity: DEFAULT_COMPLEXITY,
        };
        let v = verify(prog, &env).map_err(|e| e.to_string())?;
        let code = compile(&v.insns, &h, v.stack_depth).map_err(|e| e.to_string())?;
        let mut mem = t.mem.clone();
        // SAFETY: the verifier accepted the program for exactly this memory.
        Ok::<u64, String>(unsafe { code.entry()(mem.as_mut_ptr() as u64, mem.len() as u64) })
    })
    .unwrap();
    assert!(s.failures.is_empty(), "{} failures: {:#?}", s.failed, s.failures);
    assert!(s.passed >= 300);
}
