//! Shared by the eBPF fuzz targets: load a program for XDP with maps, and if the verifier
//! accepts it, run it first in the interpreter's checked mode (the memory-safety oracle: any
//! access outside packet, live stack, context fields and map values, any pointer leaked, is a
//! verifier bug and a crash here), then with both engines on the same packet, demanding the
//! same result, the same packet bytes and the same map contents.

use hotplane_core::{Pool, PoolConfig};
use hotplane_ebpf::asm::disasm_insn;
use hotplane_ebpf::helpers::Helpers;
use hotplane_ebpf::maps::MapKind;
use hotplane_ebpf::program::{Engine, LoadOptions, MapRegistry, MapSpec, Program, ProgramSpec};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::xdp;

pub use xdp::deterministic_helpers;

/// Maps raw bytecode may refer to (`lddw rX, map 0..3`).
pub fn fuzz_maps() -> Vec<MapSpec> {
    let m = MapSpec::new;
    vec![
        m("array", MapKind::Array, 4, 16, 4),
        m("hash", MapKind::Hash, 8, 8, 8),
        m("percpu", MapKind::PerCpuArray, 4, 8, 2),
        m("lpm", MapKind::LpmTrie, 8, 4, 4),
    ]
}

/// Run a verified program in the checked mode; a violation is the verifier's fault.
fn oracle(spec: &ProgramSpec, frame: &[u8], helpers: &Helpers) {
    let reg = MapRegistry::default();
    let opts = LoadOptions { engine: Engine::Interp, cpus: 1, complexity: 100_000 };
    let Ok(prog) = Program::load(spec, Context::Xdp, helpers, opts, Some(&reg)) else { return };
    let pool = Pool::new(PoolConfig { buffers: 2, ..Default::default() }).unwrap();
    let mut p = pool.alloc().unwrap();
    if p.set_frame(frame).is_err() {
        return;
    }
    xdp::take_redirect();
    if let Err(e) = prog.run_checked_xdp(&mut p, 0) {
        let text: Vec<String> = prog
            .verified
            .insns
            .iter()
            .enumerate()
            .map(|(pc, i)| {
                format!("{pc:4}: {}", disasm_insn(*i, prog.verified.insns.get(pc + 1).copied()))
            })
            .collect();
        panic!("the verifier accepted a program the oracle caught: {e}\n{}", text.join("\n"));
    }
    xdp::take_redirect();
}

pub fn differential(spec: &ProgramSpec, frame: &[u8]) {
    let helpers = deterministic_helpers();
    oracle(spec, frame, &helpers);
    let mut runs = Vec::new();
    for engine in [Engine::Interp, Engine::Jit] {
        let reg = MapRegistry::default();
        let opts = LoadOptions { engine, cpus: 1, complexity: 100_000 };
        let prog = match Program::load(spec, Context::Xdp, &helpers, opts, Some(&reg)) {
            Ok(p) => p,
            Err(_) => return,
        };
        let pool = Pool::new(PoolConfig { buffers: 2, ..Default::default() }).unwrap();
        let mut p = pool.alloc().unwrap();
        if p.set_frame(frame).is_err() {
            return;
        }
        xdp::take_redirect();
        let r = prog
            .try_run_xdp(&mut p, 0)
            .unwrap_or_else(|e| panic!("a verified program failed in the interpreter: {e}"));
        let redirect = xdp::take_redirect();
        // Listing a map of millions of entries would spend the fuzzer's memory on the harness
        // (every array entry is listed); compare the maps small enough to list.
        let maps: Vec<_> =
            prog.maps.iter().filter(|m| m.def.max_entries <= 4096).map(|m| m.entries()).collect();
        runs.push((r, p.data().to_vec(), maps, redirect));
    }
    assert_eq!(runs[0], runs[1], "the interpreter and the JIT disagree");
}
