//! XDP programs in assembly: what the verifier must reject (each rejection names the
//! instruction and the reason), and what accepted programs do on real packets with both
//! engines.

use hotplane_core::{Packet, Pool, PoolConfig};
use hotplane_ebpf::asm::assemble;
use hotplane_ebpf::maps::{MapDef, MapKind};
use hotplane_ebpf::program::{Engine, LoadError, LoadOptions, MapSpec, Program, ProgramSpec};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::xdp;

fn spec(text: &str, maps: &[(&str, MapDef)]) -> ProgramSpec {
    ProgramSpec {
        name: "t".into(),
        insns: assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}")),
        maps: maps
            .iter()
            .map(|(n, d)| MapSpec {
                name: n.to_string(),
                def: *d,
                init: None,
                reinit: false,
                layout: None,
            })
            .collect(),
    }
}

fn load(text: &str, maps: &[(&str, MapDef)], engine: Engine) -> Result<Program, LoadError> {
    let opts = LoadOptions { engine, ..LoadOptions::default() };
    Program::load(&spec(text, maps), Context::Xdp, &xdp::helpers(), opts, None)
}

/// The rejection of `text`: (instruction, message).
fn rejected(text: &str, maps: &[(&str, MapDef)]) -> (usize, String) {
    match load(text, maps, Engine::Jit) {
        Err(LoadError::Verify(e)) => (e.pc, e.to_string()),
        Err(e) => panic!("expected a verifier rejection, got {e}"),
        Ok(_) => panic!("the verifier accepted\n{text}"),
    }
}

const HASH: MapDef = MapDef { kind: MapKind::Hash, key_size: 4, value_size: 8, max_entries: 16 };
const ARRAY: MapDef = MapDef { kind: MapKind::Array, key_size: 4, value_size: 8, max_entries: 4 };

/// Loads data and data_end into r2, r3.
const PROLOGUE: &str = "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\n";

#[test]
fn packet_reads_need_a_bounds_check() {
    let (pc, msg) = rejected(&format!("{PROLOGUE}ldxb %r0, [%r2+12]\nexit"), &[]);
    assert_eq!(pc, 2);
    assert!(msg.contains("data_end"), "{msg}");
    // Checked for 14 bytes, reading the 15th.
    let p = format!("{PROLOGUE}mov %r4, %r2\nadd %r4, 14\njgt %r4, %r3, out\nldxb %r0, [%r2+14]\nexit\nout:\nmov %r0, 1\nexit");
    let (pc, msg) = rejected(&p, &[]);
    assert_eq!(pc, 5);
    assert!(msg.contains("offset 14") && msg.contains("14 bytes checked"), "{msg}");
    // The same program reading the 14th byte is fine.
    let p = p.replace("[%r2+14]", "[%r2+13]");
    load(&p, &[], Engine::Jit).unwrap();
}

#[test]
fn uninitialised_registers_and_stack_are_rejected() {
    let (pc, msg) = rejected("mov %r0, %r5\nexit", &[]);
    assert_eq!(pc, 0);
    assert!(msg.contains("r5 is read before it is initialised"), "{msg}");
    let (_, msg) = rejected("ldxdw %r0, [%r10-8]\nexit", &[]);
    assert!(msg.contains("read before they are written"), "{msg}");
    let (_, msg) = rejected("exit", &[]);
    assert!(msg.contains("r0"), "{msg}");
}

#[test]
fn loops_must_be_bounded() {
    let (_, msg) = rejected("mov %r0, 0\nloop:\nja loop\nexit", &[]);
    assert!(msg.contains("infinite loop"), "{msg}");
    let (_, msg) = rejected("mov %r0, 0\nloop:\nadd %r0, 1\nja loop\nexit", &[]);
    assert!(msg.contains("too complex"), "{msg}");
    // A loop over an unknown count, never compared: unbounded.
    let (_, msg) = rejected(
        "ldxw %r2, [%r1+12]\nmov %r0, 0\nloop:\nadd %r0, 1\njne %r0, %r2, loop\nexit",
        &[],
    );
    assert!(msg.contains("too complex") || msg.contains("infinite"), "{msg}");
    // A constant bound verifies.
    let p = load("mov %r0, 0\nmov %r1, 0\nloop:\nadd %r0, 3\nadd %r1, 1\njlt %r1, 100, loop\nmov %r0, 2\nexit", &[], Engine::Jit)
        .unwrap();
    assert!(p.stats.processed > 100);
}

#[test]
fn jumps_and_helpers_must_exist() {
    let (pc, msg) = rejected("mov %r0, 0\nja +5\nexit", &[]);
    assert_eq!(pc, 1);
    assert!(msg.contains("outside the program"), "{msg}");
    let (_, msg) = rejected("mov %r0, 0\njeq %r0, 0, -3\nexit", &[]);
    assert!(msg.contains("outside the program"), "{msg}");
    let (pc, msg) = rejected("call 999\nexit", &[]);
    assert_eq!(pc, 0);
    assert!(msg.contains("helper 999 does not exist"), "{msg}");
    let (_, msg) = rejected("mov %r0, 2", &[]);
    assert!(msg.contains("last instruction"), "{msg}");
}

#[test]
fn map_pointers_are_not_data() {
    let lookup =
        "mov %r2, 0\nstxw [%r10-4], %r2\nmov %r2, %r10\nadd %r2, -4\nlddw %r1, map 0\ncall 1\n";
    // Dereferencing a lookup result without a null check.
    let (pc, msg) = rejected(&format!("{lookup}ldxdw %r0, [%r0+0]\nexit"), &[("h", HASH)]);
    assert_eq!(pc, 7);
    assert!(msg.contains("may be null"), "{msg}");
    // With the check it loads; reading past the 8-byte value does not.
    let ok = format!("{lookup}jeq %r0, 0, out\nldxdw %r0, [%r0+0]\nexit\nout:\nmov %r0, 2\nexit");
    load(&ok, &[("h", HASH)], Engine::Jit).unwrap();
    let (_, msg) = rejected(&ok.replace("[%r0+0]", "[%r0+4]"), &[("h", HASH)]);
    assert!(msg.contains("8-byte map value"), "{msg}");
    // The map itself is not memory, and not arithmetic.
    let (_, msg) = rejected("lddw %r1, map 0\nldxdw %r0, [%r1+0]\nexit", &[("h", HASH)]);
    assert!(msg.contains("map cannot be dereferenced"), "{msg}");
    let (_, msg) = rejected("lddw %r1, map 0\nadd %r1, 8\nmov %r0, 0\nexit", &[("h", HASH)]);
    assert!(msg.contains("not allowed"), "{msg}");
    // A scalar where a map belongs, a key from uninitialised stack, a too-short key.
    let (_, msg) = rejected(
        "mov %r1, 5\nmov %r2, %r10\nadd %r2, -8\ncall 1\nmov %r0, 0\nexit",
        &[("h", HASH)],
    );
    assert!(msg.contains("must be a map"), "{msg}");
    let (_, msg) = rejected(
        "mov %r2, %r10\nadd %r2, -4\nlddw %r1, map 0\ncall 1\nmov %r0, 0\nexit",
        &[("h", HASH)],
    );
    assert!(msg.contains("initialised bytes"), "{msg}");
    let (_, msg) = rejected(
        "mov %r2, %r10\nadd %r2, -2\nlddw %r1, map 0\ncall 1\nmov %r0, 0\nexit",
        &[("h", HASH)],
    );
    assert!(msg.contains("bytes of stack"), "{msg}");
    // A map that does not exist.
    let (_, msg) = rejected("lddw %r1, map 3\nmov %r0, 0\nexit", &[("h", HASH)]);
    assert!(msg.contains("map 3 does not exist"), "{msg}");
    // Leaking a pointer into a map value.
    let leak = format!("{lookup}jeq %r0, 0, out\nstxdw [%r0+0], %r10\nout:\nmov %r0, 2\nexit");
    let (_, msg) = rejected(&leak, &[("h", HASH)]);
    assert!(msg.contains("leak"), "{msg}");
}

#[test]
fn context_and_stack_limits() {
    let (_, msg) = rejected("mov %r0, 1\nstxw [%r1+0], %r0\nexit", &[]);
    assert!(msg.contains("context is read-only"), "{msg}");
    let (_, msg) = rejected("ldxw %r0, [%r1+2]\nexit", &[]);
    assert!(msg.contains("no xdp_md field"), "{msg}");
    let (_, msg) = rejected("mov %r0, 0\nstxdw [%r10-520], %r0\nexit", &[]);
    assert!(msg.contains("outside the 512-byte stack"), "{msg}");
    // adjust_head moves the packet: old packet pointers are unusable afterwards.
    let p = format!(
        "{PROLOGUE}mov %r6, %r1\nmov %r4, %r2\nadd %r4, 14\njgt %r4, %r3, out\nmov %r7, %r2\nmov %r1, %r6\nmov %r2, 4\ncall 44\nldxb %r0, [%r7+0]\nexit\nout:\nmov %r0, 2\nexit"
    );
    let (_, msg) = rejected(&p, &[]);
    assert!(msg.contains("memory access through r7"), "{msg}");
}

fn packet(pool: &Pool, bytes: &[u8]) -> Packet {
    let mut p = pool.alloc().unwrap();
    p.set_frame(bytes).unwrap();
    p
}

fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

#[test]
fn programs_rewrite_packets_and_count_in_maps_on_both_engines() {
    // Swap MACs (first 12 bytes), count packets in array[0], return XDP_TX.
    let text = format!(
        "{PROLOGUE}mov %r4, %r2\nadd %r4, 14\njgt %r4, %r3, drop
ldxw %r5, [%r2+0]\nldxh %r6, [%r2+4]\nldxh %r7, [%r2+6]\nldxw %r8, [%r2+8]
stxw [%r2+6], %r5\nstxh [%r2+10], %r6\nstxh [%r2+0], %r7\nstxw [%r2+2], %r8
mov %r1, 0\nstxw [%r10-4], %r1\nmov %r2, %r10\nadd %r2, -4\nlddw %r1, map 0\ncall 1
jeq %r0, 0, drop\nmov %r1, 1\nlock add [%r0+0], %r1\nmov %r0, 3\nexit
drop:\nmov %r0, 1\nexit"
    );
    let pool = Pool::new(PoolConfig { buffers: 8, ..PoolConfig::default() }).unwrap();
    for engine in [Engine::Interp, Engine::Jit] {
        let prog = load(&text, &[("counts", ARRAY)], engine).unwrap();
        for n in 1..=3u64 {
            let mut p = packet(&pool, &frame());
            assert_eq!(prog.run_xdp(&mut p, 0), xdp::XDP_TX, "{engine:?}");
            assert_eq!(&p.data()[..6], &[2, 0, 0, 0, 0, 1]);
            assert_eq!(&p.data()[6..12], &[2, 0, 0, 0, 0, 2]);
            let v = prog.maps[0].lookup_copy(&0u32.to_ne_bytes()).unwrap().unwrap();
            assert_eq!(u64::from_ne_bytes(v[0][..8].try_into().unwrap()), n);
        }
        let mut runt = packet(&pool, &[0u8; 10]);
        assert_eq!(prog.run_xdp(&mut runt, 0), xdp::XDP_DROP);
    }
}

#[test]
fn adjust_head_and_redirect() {
    // Pop 4 bytes off the front, re-check, return redirect(ifindex 3).
    let text = "mov %r6, %r1\nmov %r2, 4\ncall 44\njne %r0, 0, drop
ldxw %r2, [%r6+0]\nldxw %r3, [%r6+4]\nmov %r4, %r2\nadd %r4, 1\njgt %r4, %r3, drop
ldxb %r0, [%r2+0]\njne %r0, 0xab, drop\nmov %r1, 3\nmov %r2, 0\ncall 23\nexit
drop:\nmov %r0, 1\nexit";
    let pool = Pool::new(PoolConfig { buffers: 8, ..PoolConfig::default() }).unwrap();
    for engine in [Engine::Interp, Engine::Jit] {
        let prog = load(text, &[], engine).unwrap();
        let mut f = frame();
        f[4] = 0xab;
        let mut p = packet(&pool, &f);
        assert_eq!(prog.run_xdp(&mut p, 0), xdp::XDP_REDIRECT, "{engine:?}");
        assert_eq!(xdp::take_redirect(), Some(2), "ifindex 3 is port 2");
        assert_eq!(p.len(), 56);
        assert_eq!(p.data()[0], 0xab);
    }
}

#[test]
fn spilled_pointers_never_leak_as_data() {
    // Found by the differential fuzzer: a spilled stack pointer handed to map_update as the
    // value would copy an address into the map.
    let leak_to_map = "mov %r2, 7\nstxdw [%r10-8], %r2\nmov %r2, %r10\nadd %r2, -8\nstxdw [%r10-16], %r2\n\
                       mov %r3, %r10\nadd %r3, -16\nlddw %r1, map 0\nmov %r4, 0\ncall 2\nmov %r0, 2\nexit";
    let (pc, msg) = rejected(leak_to_map, &[("h", HASH)]);
    assert_eq!(pc, 10);
    assert!(msg.contains("spilled pointer"), "{msg}");
    let (_, msg) = rejected("stxdw [%r10-8], %r10\nldxw %r0, [%r10-8]\nexit", &[]);
    assert!(msg.contains("reading part of the pointer"), "{msg}");
    let (_, msg) =
        rejected("stxdw [%r10-8], %r10\nstb [%r10-8], 0\nldxdw %r0, [%r10-8]\nexit", &[]);
    assert!(msg.contains("overwriting part of the pointer"), "{msg}");
    let (_, msg) = rejected("stxdw [%r10-12], %r10\nmov %r0, 0\nexit", &[]);
    assert!(msg.contains("8-byte aligned"), "{msg}");
    // Spilling and filling a whole pointer is fine, as is overwriting it whole.
    load(
        "stxdw [%r10-8], %r1\nldxdw %r1, [%r10-8]\nstdw [%r10-8], 0\nldxdw %r0, [%r10-8]\nexit",
        &[],
        Engine::Jit,
    )
    .unwrap();
}

/// Found by the `ebpf_bytecode` fuzz target: an atomic at offset 2 of a map value was verified,
/// then faulted in the interpreter. Atomics must be provably aligned.
#[test]
fn unaligned_atomics_are_rejected() {
    let prog = |off: &str| {
        format!(
            "mov %r1, 0\nstxw [%r10-4], %r1\nmov %r2, %r10\nadd %r2, -4\nlddw %r1, map 0\ncall 1
jeq %r0, 0, out\nmov %r1, 1\nlock add [%r0+{off}], %r1\nout:\nmov %r0, 2\nexit"
        )
    };
    let (pc, msg) = rejected(&prog("2"), &[("counts", ARRAY)]);
    assert_eq!(pc, 9, "the `lock add` (lddw takes two slots)");
    assert!(msg.contains("not aligned"), "{msg}");
    load(&prog("0"), &[("counts", ARRAY)], Engine::Interp).unwrap();
    // On the stack too.
    let (_, msg) =
        rejected("mov %r1, 0\nstxdw [%r10-8], %r1\nlock add [%r10-4], %r1\nmov %r0, 2\nexit", &[]);
    assert!(msg.contains("not aligned"), "{msg}");
}

#[test]
fn pointers_compare_only_where_addresses_cannot_matter() {
    // Found by the differential fuzzer: `jgt r10, r2` (the stack against the packet) branched
    // one way in the interpreter and the other in the JIT, whose stacks lie elsewhere.
    let stack_vs_packet =
        format!("{PROLOGUE}jgt %r10, %r2, out\nmov %r0, 1\nexit\nout:\nmov %r0, 2\nexit");
    let (pc, msg) = rejected(&stack_vs_packet, &[]);
    assert_eq!(pc, 2);
    assert!(msg.contains("stack pointer") && msg.contains("where memory lies"), "{msg}");
    // A pointer against a non-zero number, and a 32-bit bounds check, depend on addresses too.
    let (_, msg) = rejected(
        &format!("{PROLOGUE}jgt %r2, 4096, out\nmov %r0, 1\nexit\nout:\nmov %r0, 2\nexit"),
        &[],
    );
    assert!(msg.contains("the constant 0x1000"), "{msg}");
    let (_, msg) = rejected(
        &format!("{PROLOGUE}jgt32 %r2, %r3, out\nmov %r0, 1\nexit\nout:\nmov %r0, 2\nexit"),
        &[],
    );
    assert!(msg.contains("64-bit"), "{msg}");
    // Two lookups of one hash map return values at unrelated addresses.
    let lookup =
        "stw [%r10-4], 0\nmov %r2, %r10\nadd %r2, -4\nlddw %r1, map 0\ncall 1\njeq %r0, 0, out\n";
    let two = format!("{lookup}mov %r6, %r0\n{lookup}jgt %r6, %r0, out\nout:\nmov %r0, 2\nexit");
    let (_, msg) = rejected(&two, &[("h", HASH)]);
    assert!(msg.contains("map value pointer"), "{msg}");
    // Within one object, and against 0, comparisons are fine: packet against packet, the
    // stack against itself, the context against 0.
    for ok in [
        format!("{PROLOGUE}mov %r4, %r2\nadd %r4, 8\njgt %r4, %r2, out\nout:\nmov %r0, 2\nexit"),
        "mov %r2, %r10\nadd %r2, -8\njge %r2, %r10, out\nout:\nmov %r0, 2\nexit".into(),
        "jeq %r1, 0, out\nout:\nmov %r0, 2\nexit".into(),
    ] {
        load(&ok, &[], Engine::Jit).unwrap_or_else(|e| panic!("{e}\n{ok}"));
    }
}
