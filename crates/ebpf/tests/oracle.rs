//! The memory-safety oracle (the interpreter's checked mode): it catches each kind of access a
//! verifier bug would let through, and every program the verifier accepts from the fuzz
//! generator runs clean under it.

mod common;
#[allow(dead_code)]
#[path = "../../../fuzz/fuzz_targets/ebpf_gen.rs"]
mod gen;

use hotplane_core::{Pool, PoolConfig};
use hotplane_ebpf::asm::assemble;
use hotplane_ebpf::ctx::XdpCtx;
use hotplane_ebpf::elf;
use hotplane_ebpf::interp::{Region, RunError};
use hotplane_ebpf::maps::MapKind;
use hotplane_ebpf::oracle::{run_checked, CheckedContext, ViolationKind};
use hotplane_ebpf::program::{Engine, LoadOptions, MapRegistry, MapSpec, Program, ProgramSpec};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::xdp;

/// Run unverified assembly in the checked mode on a 64-byte packet.
fn checked(text: &str) -> Result<u64, RunError> {
    let insns = assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut buffer = vec![0u8; 256];
    let start = buffer.as_mut_ptr() as u64;
    let mut ctx = XdpCtx { data: start + 64, data_end: start + 128, ..XdpCtx::default() };
    ctx.data_meta = ctx.data;
    let ctx_ptr = std::ptr::addr_of_mut!(ctx) as u64;
    let buffer = Region::of(&buffer, true);
    // SAFETY: ctx and buffer live for the call; the program calls no helper.
    unsafe {
        run_checked(
            &insns,
            &xdp::helpers(),
            CheckedContext::Xdp { ctx: ctx_ptr, buffer },
            &[],
            &[],
            1 << 20,
        )
    }
}

fn violation(text: &str) -> ViolationKind {
    match checked(text) {
        Err(RunError::Violation(v)) => v.kind,
        other => panic!("expected a violation, got {other:?}\n{text}"),
    }
}

#[test]
fn the_oracle_catches_what_the_verifier_must_refuse() {
    // In the packet's buffer, but past data_end (the plain interpreter allows the tailroom).
    let k = violation("ldxdw %r2, [%r1+0]\nldxb %r0, [%r2+64]\nexit");
    assert!(matches!(k, ViolationKind::OutOfBounds { write: false, .. }), "{k:?}");
    // Headroom, before data.
    let k = violation("ldxdw %r2, [%r1+0]\nstb [%r2-1], 1\nmov %r0, 0\nexit");
    assert!(matches!(k, ViolationKind::OutOfBounds { write: true, .. }), "{k:?}");
    // The context's hidden `packet` field, and a write to the context.
    let k = violation("ldxdw %r0, [%r1+40]\nexit");
    assert!(matches!(k, ViolationKind::ContextField { offset: 40, .. }), "{k:?}");
    let k = violation("stw [%r1+24], 1\nmov %r0, 0\nexit");
    assert!(matches!(k, ViolationKind::ContextField { write: true, .. }), "{k:?}");
    // A stack byte never written.
    let k = violation("ldxb %r0, [%r10-1]\nexit");
    assert!(matches!(k, ViolationKind::UninitialisedStack { .. }), "{k:?}");
    // Below the frame.
    let k = violation("stb [%r10-513], 1\nmov %r0, 0\nexit");
    assert!(matches!(k, ViolationKind::OutOfBounds { .. }), "{k:?}");
    // A callee's stack after it returned (the pointer kept in the caller's stack).
    let k = violation(
        "mov %r1, %r10\nadd %r1, -8\ncall local f\nldxdw %r2, [%r10-8]\nldxdw %r0, [%r2+0]\nexit\n\
         f:\nstdw [%r10-8], 5\nmov %r2, %r10\nadd %r2, -8\nstxdw [%r1+0], %r2\nmov %r0, 0\nexit",
    );
    assert!(matches!(k, ViolationKind::DeadFrame { .. }), "{k:?}");
    // ... and through another call, whose frame is elsewhere.
    let k = violation(
        "mov %r1, %r10\nadd %r1, -8\ncall local f\nmov %r1, %r10\nadd %r1, -8\ncall local g\nmov %r0, 0\nexit\n\
         f:\nmov %r2, %r10\nadd %r2, -8\nstxdw [%r1+0], %r2\nmov %r0, 0\nexit\n\
         g:\nldxdw %r2, [%r1+0]\nstdw [%r2+0], 1\nmov %r0, 0\nexit",
    );
    assert!(matches!(k, ViolationKind::DeadFrame { .. }), "{k:?}");
    // Pointers leaking: into the packet, as the result, as cmpxchg's expected value.
    let k = violation("ldxdw %r2, [%r1+0]\nstxdw [%r2+0], %r10\nmov %r0, 0\nexit");
    assert!(matches!(k, ViolationKind::PointerLeak { .. }), "{k:?}");
    let k = violation("mov %r0, %r10\nexit");
    assert!(matches!(k, ViolationKind::PointerLeak { .. }), "{k:?}");
    let k = violation(
        "stdw [%r10-8], 0\nmov %r0, %r10\nmov %r2, 1\nlock cmpxchg [%r10-8], %r2\nmov %r0, 0\nexit",
    );
    assert!(matches!(k, ViolationKind::PointerLeak { .. }), "{k:?}");
    // Honest programs pass: packet, stack, context fields, calls with stack arguments.
    let ok = "ldxdw %r2, [%r1+0]\nldxw %r3, [%r1+24]\nstxb [%r2+63], %r3\nstdw [%r10-8], 1\n\
              mov %r1, %r10\nadd %r1, -8\ncall local f\nldxdw %r0, [%r10-8]\nexit\n\
              f:\nldxdw %r2, [%r1+0]\nadd %r2, 1\nstxdw [%r1+0], %r2\nmov %r0, 0\nexit";
    assert_eq!(checked(ok), Ok(2));
}

fn maps() -> Vec<MapSpec> {
    let m = MapSpec::new;
    vec![
        m("array", MapKind::Array, 4, 16, 4),
        m("hash", MapKind::Hash, 8, 8, 8),
        m("percpu", MapKind::PerCpuArray, 4, 8, 2),
        m("lpm", MapKind::LpmTrie, 8, 4, 4),
    ]
}

/// Deterministic pseudo-random bytes.
fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// The fuzz generator's programs, a few thousand of them: what the verifier accepts must run
/// clean under the oracle and give the JIT's result.
#[test]
fn accepted_generated_programs_pass_the_oracle() {
    let helpers = xdp::helpers();
    let pool = Pool::new(PoolConfig { buffers: 4, ..PoolConfig::default() }).unwrap();
    let frame: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let (mut accepted, mut total) = (0, 0);
    for _ in 0..3000 {
        let bytes: Vec<u8> = (0..160).map(|_| xorshift(&mut seed) as u8).collect();
        let spec = ProgramSpec { name: "gen".into(), insns: gen::generate(&bytes), maps: maps() };
        total += 1;
        let opts = LoadOptions { engine: Engine::Interp, cpus: 1, complexity: 100_000 };
        let Ok(prog) = Program::load(&spec, Context::Xdp, &helpers, opts, None) else { continue };
        accepted += 1;
        let mut p = pool.alloc().unwrap();
        p.set_frame(&frame).unwrap();
        if let Err(e) = prog.run_checked_xdp(&mut p, 0) {
            panic!("accepted program fails the oracle: {e}\n{:?}", prog.verified.insns);
        }
    }
    // The generator is worth its name only if a fair share of its programs verify.
    assert!(accepted * 20 > total, "only {accepted} of {total} generated programs verified");
    eprintln!("{accepted} of {total} generated programs verified and passed the oracle");
}

/// The example objects (clang-built: global data, per-CPU counters, hash map flows, packet
/// rewriting, adjust_head) run clean under the oracle on varied packets: it has no false
/// alarms on real programs, so the fuzz targets can treat every alarm as a verifier bug.
#[test]
fn example_objects_run_clean_under_the_oracle() {
    let pool = Pool::new(PoolConfig { buffers: 4, ..PoolConfig::default() }).unwrap();
    for object in
        ["xdp_dummy.o", "xdp_filter.o", "xdp_change.o", "xdp_count.o", "xdp_lb.o", "xdp_mark.o"]
    {
        let spec = elf::load(&common::example(object), None).unwrap();
        let reg = MapRegistry::default();
        let opts = LoadOptions { engine: Engine::Interp, ..LoadOptions::default() };
        let prog = Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, Some(&reg))
            .unwrap_or_else(|e| panic!("{object}: {e}"));
        if object == "xdp_lb.o" {
            let mut cfg = vec![10, 0, 0, 100];
            cfg.extend_from_slice(&80u16.to_be_bytes());
            cfg.extend_from_slice(&2u16.to_ne_bytes());
            let config = reg.get("xdp_lb/config").unwrap();
            config.update_copy(&0u32.to_ne_bytes(), &cfg, 0).unwrap();
            for b in 0..2u8 {
                let v = [10, 0, 1, 10 + b, 2, 0, 0, 0, 1, b, 0, 0];
                reg.get("xdp_lb/backends")
                    .unwrap()
                    .update_copy(&(b as u32).to_ne_bytes(), &v, 0)
                    .unwrap();
            }
        }
        for sport in 0..40u16 {
            let proto = [6u8, 17][sport as usize % 2];
            let dst = if sport % 3 == 0 { [10, 0, 0, 100] } else { [10, 0, 0, 2] };
            let mut f =
                common::ipv4(proto, [192, 168, 0, 1], dst, 1000 + sport, 80, 64, sport as usize);
            if sport % 5 == 0 {
                f.truncate(14 + sport as usize);
            }
            let mut p = pool.alloc().unwrap();
            p.set_frame(&f).unwrap();
            if let Err(e) = prog.run_checked_xdp(&mut p, 0) {
                panic!("{object}, packet {sport}: {e}");
            }
        }
    }
}
