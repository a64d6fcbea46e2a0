//! The calling convention between kinds (`Stage::run_one`) for XDP programs: a caller such as
//! a P4 extern hands over its own frame bytes, the program runs on them in place (no copy into
//! a pool packet), and r0 comes back unchanged. The frame cannot grow or shrink, so the helpers
//! that move the packet's bounds fail cleanly on it.

use hotplane_core::{Meta, Pool, PoolConfig, Qsbr, StageRef, WorkerCx};
use hotplane_ebpf::env::{Code, EbpfEnv};
use hotplane_ebpf::program::Engine;

const ENGINES: [Engine; 2] = [Engine::Jit, Engine::Interp];

/// A 60-byte Ethernet/IPv4/UDP frame as a P4 program holds it.
fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[23] = 17;
    f
}

fn stage(env: &EbpfEnv, text: &str, engine: Engine) -> StageRef {
    env.stage(&Code::Asm(text.into()), None, Some(engine), "test").unwrap()
}

/// Call `stage` the way another kind does: its own bytes, its own classification.
fn call(stage: &StageRef, frame: &mut [u8], in_port: u16) -> u64 {
    let qsbr = Qsbr::new();
    let reader = qsbr.register("caller");
    let guard = reader.guard();
    let mut cx = WorkerCx::new(0, 0, &guard);
    let mut meta = Meta { in_port, ..Meta::default() };
    hotplane_core::classify(frame, &mut meta);
    stage.run_one(frame, &mut meta, &mut cx)
}

/// Writes 0xaa into the first byte (after checking 14 bytes) and answers XDP_TX.
const WRITE_AND_TX: &str = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 14\n\
    jgt %r4, %r3, out\nmov %r5, 0xaa\nstxb [%r2+0], %r5\nout:\nmov %r0, 3\nexit\n";

#[test]
fn the_callers_frame_is_changed_in_place_and_r0_comes_back() {
    for engine in ENGINES {
        let env = EbpfEnv::new(1, engine);
        let s = stage(&env, WRITE_AND_TX, engine);
        let mut f = frame();
        let before = f.as_ptr();
        assert_eq!(call(&s, &mut f, 0), hotplane_ebpf::xdp::XDP_TX, "{engine:?}");
        assert_eq!(f[0], 0xaa, "{engine:?}: the write lands in the caller's bytes");
        assert_eq!((f.len(), f.as_ptr()), (60, before));
        assert!(s.describe().contains("tx=1"), "{engine:?}: counted: {}", s.describe());
    }
}

#[test]
fn r0_is_returned_even_when_it_is_no_action() {
    // Answers ingress_ifindex, the caller's in_port + 1: 7 is no XDP action.
    let text = "ldxw %r0, [%r1+12]\nexit\n";
    for engine in ENGINES {
        let env = EbpfEnv::new(1, engine);
        let s = stage(&env, text, engine);
        assert_eq!(call(&s, &mut frame(), 6), 7, "{engine:?}: ingress_ifindex of port 6");
        assert!(s.describe().contains("invalid=1"), "{}", s.describe());
    }
}

/// Moves the head by 4 bytes, then re-reads data and data_end from the context and writes
/// 0xcc into byte 1; answers what `bpf_xdp_adjust_head` returned.
const ADJUST_HEAD: &str = "mov %r6, %r1\nmov %r2, 4\ncall 44\nmov %r7, %r0\n\
    ldxw %r2, [%r6+0]\nldxw %r3, [%r6+4]\nmov %r4, %r2\nadd %r4, 14\njgt %r4, %r3, out\n\
    mov %r5, 0xcc\nstxb [%r2+1], %r5\nout:\nmov %r0, %r7\nexit\n";

#[test]
fn adjust_head_fails_cleanly_on_a_callers_frame() {
    const EINVAL: u64 = (-22i64) as u64;
    for engine in ENGINES {
        let env = EbpfEnv::new(1, engine);
        let s = stage(&env, ADJUST_HEAD, engine);
        let mut f = frame();
        f[5] = 0x55;
        assert_eq!(call(&s, &mut f, 0), EINVAL, "{engine:?}: the frame cannot shrink");
        assert_eq!(f.len(), 60);
        assert_eq!((f[1], f[5]), (0xcc, 0x55), "{engine:?}: the context still describes the frame");

        // The same program on a pool packet (the pipeline's path) does move the head.
        let pool = Pool::new(PoolConfig { buffers: 1, buffer_size: 2048, headroom: 128 }).unwrap();
        let mut p = pool.alloc().unwrap();
        p.set_frame(&frame()).unwrap();
        let program = env.program(&Code::Asm(ADJUST_HEAD.into()), None, Some(engine)).unwrap();
        assert_eq!(program.run_xdp(&mut p, 0), 0, "{engine:?}: a packet with room shrinks");
        assert_eq!(p.len(), 56);
        assert_eq!(p.data()[1], 0xcc);
    }
}
