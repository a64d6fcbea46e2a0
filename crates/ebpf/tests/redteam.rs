//! Regression tests for the red team's findings against the verifier (issue 18). Each program
//! here was accepted (or crashed the verifier) before its fix; each must now be refused with the
//! instruction and a reason, and never panic the verifier.

use hotplane_core::{Pool, PoolConfig};
use hotplane_ebpf::asm::assemble;
use hotplane_ebpf::program::{Engine, LoadError, LoadOptions, Program, ProgramSpec};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::xdp;

fn load(text: &str, engine: Engine) -> Result<Program, LoadError> {
    let spec = ProgramSpec::bytecode("t", assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}")));
    let opts = LoadOptions { engine, ..LoadOptions::default() };
    Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, None)
}

/// The rejection of `text`: (instruction, message).
fn rejected(text: &str) -> (usize, String) {
    match load(text, Engine::Jit) {
        Err(LoadError::Verify(e)) => (e.pc, e.to_string()),
        Err(e) => panic!("expected a verifier rejection, got {e}"),
        Ok(_) => panic!("the verifier accepted\n{text}"),
    }
}

/// `le64` in the 32-bit ALU class keeps all 64 bits (RFC 9669: `dst = htole64(dst)`), in both
/// engines and now in the verifier: adding the result to a packet pointer is a 4 GiB offset.
#[test]
fn alu32_le64_keeps_64_bits_in_the_verifier() {
    let text = "ldxw %r2, [%r1+0]
        ldxw %r3, [%r1+4]
        mov %r4, %r2
        add %r4, 1
        jgt %r4, %r3, out
        lddw %r5, 0x100000000
        le64 %r5
        add %r2, %r5
        ldxb %r0, [%r2+0]
        exit
        out:
        mov %r0, 1
        exit";
    let (pc, msg) = rejected(text);
    assert_eq!(pc, 8, "{msg}");
    assert!(msg.contains("pointer offset out of range"), "{msg}");
    // be64 in the ALU class swaps all 64 bits: 0x1_0000_0000 becomes 0x100_0000, so the same
    // program with a bounds check of one byte must be refused for the packet access instead.
    let (pc, msg) = rejected(&text.replace("le64", "be64"));
    assert_eq!(pc, 9, "{msg}");
    assert!(msg.contains("packet access"), "{msg}");
}

/// The byte-order instructions of both classes give the RFC 9669 results in the interpreter and
/// the JIT, and the verifier's constant folding agrees: a program that branches to an invalid
/// access unless the verifier's value equals the engines' is refused if they disagree.
#[test]
fn byte_order_instructions_agree_in_verifier_and_engines() {
    let x: u64 = 0x1122_3344_5566_7788;
    let cases = [
        ("le16", 0x7788),
        ("le32", 0x5566_7788),
        ("le64", x),
        ("be16", 0x8877),
        ("be32", 0x8877_6655),
        ("be64", 0x8877_6655_4433_2211),
        ("bswap16", 0x8877),
        ("bswap32", 0x8877_6655),
        ("bswap64", 0x8877_6655_4433_2211),
    ];
    let pool = Pool::new(PoolConfig { buffers: 2, ..PoolConfig::default() }).unwrap();
    for (insn, want) in cases {
        // The verifier follows the branch its constant says; a wrong constant walks into the
        // read of r9 (uninitialised) and is refused.
        let text = format!(
            "lddw %r0, {x:#x}\n{insn} %r0\nlddw %r2, {want:#x}\njeq %r0, %r2, ok\nmov %r0, %r9\nok:\nrsh %r0, 1\nexit"
        );
        for engine in [Engine::Interp, Engine::Jit] {
            let p = load(&text, engine).unwrap_or_else(|e| panic!("{insn}: {e}"));
            let mut pkt = pool.alloc().unwrap();
            pkt.set_frame(&[0u8; 64]).unwrap();
            assert_eq!(p.try_run_xdp(&mut pkt, 0).unwrap(), want >> 1, "{insn} {engine:?}");
        }
    }
}

/// The context rewrite computed the new offset in 16 bits: a context pointer moved by
/// -32755 and read at +32767 (`ingress_ifindex`, offset 12) became a read 64 KiB below the
/// context. Accesses through a moved context pointer are refused, as in Linux.
#[test]
fn context_offsets_never_wrap() {
    let (pc, msg) = rejected("mov %r6, %r1\nadd %r6, -32755\nldxw %r0, [%r6+32767]\nexit");
    assert_eq!(pc, 2, "{msg}");
    assert!(msg.contains("context"), "{msg}");
    let (pc, msg) = rejected("add %r1, 4\nldxw %r0, [%r1+0]\nexit");
    assert_eq!(pc, 1, "{msg}");
    assert!(msg.contains("context"), "{msg}");
}

/// A function stores a pointer into its own stack in its caller's stack and returns; the
/// caller reads through it. The verifier panicked (index out of bounds); it must refuse at the
/// callee's exit.
#[test]
fn pointer_into_a_returned_frame_is_refused_not_a_panic() {
    let text = "mov %r1, %r10
        add %r1, -8
        call local leak
        ldxdw %r2, [%r10-8]
        ldxdw %r0, [%r2+0]
        exit
        leak:
        mov %r2, %r10
        add %r2, -8
        stdw [%r2+0], 7
        stxdw [%r1+0], %r2
        mov %r0, 0
        exit";
    let (pc, msg) = rejected(text);
    assert_eq!(pc, 11, "{msg}");
    assert!(msg.contains("stack of the returning function"), "{msg}");
    // The write form, from the caller after the return.
    let (pc, msg) = rejected(&text.replace("ldxdw %r0, [%r2+0]", "stdw [%r2+0], 1\nmov %r0, 0"));
    assert_eq!(pc, 12, "{msg}");
    assert!(msg.contains("stack of the returning function"), "{msg}");
    // Returned in r0 through a deeper call: the inner function leaks its caller's frame to main.
    let text = "call local outer
        ldxdw %r0, [%r0+0]
        exit
        outer:
        stdw [%r10-8], 1
        mov %r0, %r10
        add %r0, -8
        exit";
    let (pc, msg) = rejected(text);
    assert_eq!(pc, 6, "{msg}");
    assert!(msg.contains("stack"), "{msg}");
}

/// The stale pointer written through inside a second call: in the JIT the second callee's
/// frame holds saved registers where the first callee's stack was, so the write replaced the
/// caller's verified packet pointer (r6) with a chosen value. Refused at the leaking exit.
#[test]
fn stale_frame_pointer_cannot_overwrite_saved_registers() {
    let text = "ldxw %r6, [%r1+0]
        ldxw %r7, [%r1+4]
        mov %r1, %r10
        add %r1, -8
        call local leak
        mov %r1, %r10
        add %r1, -8
        call local smash
        mov %r2, %r6
        add %r2, 1
        jgt %r2, %r7, out
        stb [%r6+0], 1
        out:
        mov %r0, 2
        exit
        leak:
        mov %r2, %r10
        add %r2, -64
        stxdw [%r1+0], %r2
        mov %r0, 0
        exit
        smash:
        ldxdw %r2, [%r1+0]
        lddw %r3, 0x4141414141414141
        stxdw [%r2+0], %r3
        stxdw [%r2+8], %r3
        mov %r0, 0
        exit";
    let (pc, msg) = rejected(text);
    assert_eq!(pc, 18, "{msg}");
    assert!(msg.contains("stack of the returning function"), "{msg}");
}

/// `cmpxchg` compares r0 with memory: a pointer in r0 would tell the program whether an address
/// equals a stored value (an address oracle). Only scalars may be the expected value.
#[test]
fn cmpxchg_with_a_pointer_expected_value_is_refused() {
    let text = "stdw [%r10-8], 0
        mov %r0, %r10
        mov %r2, 1
        lock cmpxchg [%r10-8], %r2
        mov %r0, 0
        exit";
    let (pc, msg) = rejected(text);
    assert_eq!(pc, 3, "{msg}");
    assert!(msg.contains("r0"), "{msg}");
    // A scalar expected value is fine.
    load(&text.replace("mov %r0, %r10", "mov %r0, 0"), Engine::Jit).unwrap();
}

/// Found by the oracle fuzz target while measuring the classes above: a constant of 2^63 added
/// to a pointer made its offset i64::MIN, whose absolute value overflowed in the range check
/// (a verifier panic; without overflow checks, an offset that passed the check).
#[test]
fn pointer_offset_of_i64_min_is_refused() {
    let (pc, msg) =
        rejected("mov %r2, %r10\nlddw %r3, 0x8000000000000000\nadd %r2, %r3\nmov %r0, 0\nexit");
    assert_eq!(pc, 3, "{msg}");
    assert!(msg.contains("pointer offset out of range"), "{msg}");
    let (pc, msg) = rejected(
        "mov %r2, %r10\nadd %r2, -1\nlddw %r3, 0x7fffffffffffffff\nadd %r2, %r3\nmov %r0, 0\nexit",
    );
    assert_eq!(pc, 4, "{msg}");
    assert!(msg.contains("pointer offset out of range"), "{msg}");
}

/// A panic inside the verifier is a refusal, never a crash of the caller (the backstop; each
/// panic found so far is fixed where it happened).
#[test]
fn the_verifier_never_panics_on_the_corpus_of_findings() {
    for text in [
        "mov %r6, %r1\nadd %r6, -32755\nldxw %r0, [%r6+32767]\nexit",
        "mov %r2, %r10\nlddw %r3, 0x8000000000000000\nadd %r2, %r3\nmov %r0, 0\nexit",
        "mov %r1, %r10\nadd %r1, -8\ncall local f\nldxdw %r2, [%r10-8]\nldxdw %r0, [%r2+0]\nexit\nf:\nmov %r2, %r10\nadd %r2, -8\nstxdw [%r1+0], %r2\nmov %r0, 0\nexit",
    ] {
        let (_, msg) = rejected(text);
        assert!(!msg.contains("internal verifier error"), "{msg}");
    }
}

/// Found by the oracle fuzz target against the fixed verifier: a packet pointer plus a
/// variable of at least 512, read at offset -512. The verifier let the variable's minimum pay
/// for the negative offset, but nothing had checked the moved pointer against `data_end`: the
/// read (or write) landed past the packet. Linux refuses negative packet offsets; so does
/// hotplane now.
#[test]
fn negative_packet_offset_after_a_variable_is_refused() {
    let text = "ldxw %r6, [%r1+0]
        ldxw %r7, [%r1+4]
        mov %r2, %r6
        add %r2, 28
        jgt %r2, %r7, out
        ldxb %r0, [%r6+0]
        add %r0, 512
        add %r6, %r0
        ldxb %r0, [%r6-512]
        exit
        out:
        mov %r0, 1
        exit";
    let (pc, msg) = rejected(text);
    assert_eq!(pc, 8, "{msg}");
    assert!(msg.contains("packet access at offset -512"), "{msg}");
    let (pc, msg) = rejected(&text.replace("ldxb %r0, [%r6-512]", "stb [%r6-512], 1\nmov %r0, 2"));
    assert_eq!(pc, 8, "{msg}");
    assert!(msg.contains("packet access at offset -512"), "{msg}");
}

/// Verify `text` with a hash map (map 0: 4-byte keys, 8-byte values); the rejection if any.
fn verify_with_a_map(text: &str) -> Result<(), (usize, String)> {
    use hotplane_ebpf::maps::MapKind;
    use hotplane_ebpf::program::MapSpec;
    use hotplane_ebpf::verifier::{self, Env, MapInfo};
    let insns = assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let maps = [MapSpec::new("hash", MapKind::Hash, 4, 8, 16)];
    let infos: Vec<MapInfo> = maps.iter().map(|m| m.def.into()).collect();
    let helpers = xdp::helpers();
    let env = Env {
        helpers: &helpers,
        ctx: Context::Xdp,
        maps: &infos,
        complexity: verifier::DEFAULT_COMPLEXITY,
    };
    verifier::verify(&insns, &env).map(|_| ()).map_err(|e| (e.pc, e.to_string()))
}

fn rejected_with_a_map(text: &str) -> (usize, String) {
    verify_with_a_map(text).err().unwrap_or_else(|| panic!("the verifier accepted\n{text}"))
}

/// Red team: one path writes data to a stack slot, the other spills r10 there, both meet at a
/// load of the slot. Pruning let the data slot of the first path "cover" the spilled pointer of
/// the second, so the second was never explored and returned the stack address. A spilled
/// pointer is covered only by a covering spill of a pointer; whichever path goes first, the
/// pointer path is refused at its `exit`.
#[test]
fn pruning_never_turns_a_spilled_pointer_into_data() {
    let data_first = "ldxw %r3, [%r1+16]
        jeq %r3, 0, taken
        stdw [%r10-8], 0
        mov %r3, 0
        ja join
        taken:
        stxdw [%r10-8], %r10
        mov %r3, 0
        join:
        ldxdw %r0, [%r10-8]
        exit";
    let (pc, msg) = rejected(data_first);
    assert_eq!(pc, 8, "{msg}");
    assert!(msg.contains("must return a scalar"), "{msg}");
    // Half a slot of data covers no more than a whole one: reading that half back must not
    // read half of the pointer.
    let half = data_first
        .replace("stdw [%r10-8], 0", "stw [%r10-8], 0")
        .replace("ldxdw %r0, [%r10-8]", "ldxw %r0, [%r10-8]");
    let (pc, msg) = rejected(&half);
    assert_eq!(pc, 7, "{msg}");
    assert!(msg.contains("reading part of the pointer"), "{msg}");
    let pointer_first = "ldxw %r3, [%r1+16]
        jeq %r3, 0, taken
        stxdw [%r10-8], %r10
        mov %r3, 0
        ja join
        taken:
        stdw [%r10-8], 0
        mov %r3, 0
        join:
        ldxdw %r0, [%r10-8]
        exit";
    let (pc, msg) = rejected(pointer_first);
    assert_eq!(pc, 8, "{msg}");
    assert!(msg.contains("must return a scalar"), "{msg}");
}

/// Red team: a 32-bit null check of a map lookup (`jeq32 r0, 0`) refined the pointer as a 64-bit
/// one would, but a value pointer whose low half is zero is not null: the "null" branch then
/// held a live pointer the verifier called the constant 0. Pointers compare with 64-bit jumps
/// only; with the 64-bit check the same program is accepted.
#[test]
fn jmp32_null_check_of_a_map_value_is_refused() {
    let text = "stw [%r10-4], 0
        mov %r2, %r10
        add %r2, -4
        lddw %r1, map 0
        call 1
        jeq32 %r0, 0, isnull
        mov %r0, 1
        exit
        isnull:
        mov %r0, 2
        exit";
    let (pc, msg) = rejected_with_a_map(text);
    assert_eq!(pc, 6, "{msg}");
    assert!(msg.contains("depends on where memory lies"), "{msg}");
    let (pc, msg) = rejected_with_a_map(&text.replace("jeq32", "jne32"));
    assert_eq!(pc, 6, "{msg}");
    assert!(msg.contains("depends on where memory lies"), "{msg}");
    // The 64-bit null check still refines the pointer: reading through it when not null.
    let checked = text.replace("jeq32", "jeq").replace("mov %r0, 1\n", "ldxdw %r0, [%r0+0]\n");
    assert_eq!(verify_with_a_map(&checked), Ok(()));
}

/// Red team: `bpf_trace_printk` checked only its format and size; a pointer in r3..r5 was
/// printed with `%lx` (an address leak). Its value arguments must not be pointers. (Unset ones
/// stay allowed, as in Linux: clang's `bpf_printk` with fewer than three values leaves them
/// unset, see `c_source.rs`.)
#[test]
fn trace_printk_refuses_pointer_arguments() {
    let text = "stdw [%r10-8], 0
        lddw %r1, 0x0000000a786c25
        stxdw [%r10-8], %r1
        mov %r1, %r10
        add %r1, -8
        mov %r2, 8
        mov %r3, %r10
        call 6
        mov %r0, 2
        exit";
    let (pc, msg) = rejected(text);
    assert_eq!(pc, 8, "{msg}");
    assert!(msg.contains("argument 3 (r3) must be"), "{msg}");
    for (reg, arg) in [("%r4", 4), ("%r5", 5)] {
        let (pc, msg) =
            rejected(&text.replace("mov %r3, %r10", &format!("mov %r3, 0\nmov {reg}, %r10")));
        assert_eq!(pc, 9, "{msg}");
        assert!(msg.contains(&format!("argument {arg}")), "{msg}");
    }
}

/// A 32-bit right shift by an unknown amount can make a value smaller (down to 0): the
/// verifier took it to leave the value's range as it was, so it thought `r0 > 5` always held,
/// never looked at the path where it does not, and accepted a store through a scalar there.
/// Found by the `ebpf_bytecode` fuzz target (2026-11-27).
#[test]
fn a_32_bit_shift_by_an_unknown_amount_can_reach_zero() {
    let text = "ldxw %r6, [%r1+0]
        ldxw %r7, [%r1+4]
        mov %r2, %r6
        add %r2, 28
        jgt %r2, %r7, out
        mov %r2, 11
        mov %r4, 5
        ldxb %r0, [%r6+0]
        add %r0, 0x2a2a9a
        rsh32 %r0, %r0
        add %r0, %r4
        jslt %r4, %r0, out
        stxb [%r2-64], %r0
        out:
        mov %r0, 2
        exit";
    let (pc, msg) = rejected(text);
    assert_eq!(pc, 12, "{msg}");
}
