//! The shape interpreter on the checked-in examples and on small programs in assembly: the
//! facts each exit guarantees, as read from the C source, and a differential check that every
//! packet a program really lets out satisfies the guarantee computed for that exit.

mod common;
#[allow(dead_code)]
#[path = "../../../fuzz/fuzz_targets/ebpf_gen.rs"]
mod gen;

use common::*;
use hotplane_core::{Pool, PoolConfig};
use hotplane_ebpf::asm::assemble;
use hotplane_ebpf::chain::{
    analyse, default_input, shape_report, Analysis, AnalysisOptions, ByteFact, ExitAction,
    Guarantee, Outcome, PacketShape, DEFAULT_MAX_FRAME,
};
use hotplane_ebpf::elf;
use hotplane_ebpf::program::{Engine, LoadOptions, Program, ProgramSpec};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::xdp;
use proptest::prelude::*;
use std::sync::OnceLock;

fn example_spec(object: &str) -> ProgramSpec {
    elf::load(&example(object), None).unwrap_or_else(|e| panic!("{object}: {e}"))
}

fn analysis_of(spec: &ProgramSpec) -> Analysis {
    let report = shape_report(spec, &default_input()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.analysis.outcome, Outcome::Complete, "{}", spec.name);
    report.analysis
}

fn asm_spec(text: &str) -> ProgramSpec {
    ProgramSpec::bytecode("t", assemble(text).unwrap_or_else(|e| panic!("{e}\n{text}")))
}

/// A shape from `(offset, "hex")` pairs.
fn shape(len: (u32, u32), bytes: &[(u16, &str)]) -> PacketShape {
    let mut s = PacketShape::with_len(len.0, len.1);
    for (o, text) in bytes {
        s.set_byte(*o, text.parse().unwrap());
    }
    s
}

const MAX: u32 = DEFAULT_MAX_FRAME;

#[test]
fn fw6_passes_only_ipv6_tcp_and_says_so() {
    let a = analysis_of(&example_spec("chain/fw6.o"));
    // `(void *)(tcp + 1) > end` drops frames shorter than 14 + 40 + 20; the ethertype and the
    // next header are compared with 0x86dd and 6 (clang assembles the ethertype from two byte
    // loads); the blocked-source lookup decides nothing about the bytes.
    let pass = shape((74, MAX), &[(12, "86"), (13, "dd"), (20, "06")]);
    assert_eq!(a.guarantee(ExitAction::Pass), Guarantee::of(pass));
    // Drops: short frames, other protocols, blocked sources: together any frame.
    assert_eq!(a.guarantee(ExitAction::Drop), Guarantee::of(PacketShape::with_len(14, MAX)));
    assert!(!a.exits.contains_key(&ExitAction::Tx));
    assert!(!a.exits.contains_key(&ExitAction::Redirect));
    assert!(!a.exits.contains_key(&ExitAction::Aborted));
}

#[test]
fn a_pass_reached_without_checks_gives_no_facts() {
    let a = analysis_of(&example_spec("xdp_dummy.o"));
    assert_eq!(a.guarantee(ExitAction::Pass), default_input());
    assert_eq!(a.exits.len(), 1);
    // Reading and comparing a byte, then passing either way, proves nothing either.
    let a = analysis_of(&asm_spec(
        "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 14\njgt %r4, %r3, out\n\
         ldxb %r5, [%r2+12]\njeq %r5, 8, out\nmov %r0, 2\nexit\nout:\nmov %r0, 2\nexit",
    ));
    assert_eq!(a.guarantee(ExitAction::Pass), default_input());
}

#[test]
fn xdp_filter_drops_exactly_what_its_checks_fix() {
    let a = analysis_of(&example_spec("xdp_filter.o"));
    // Passes everything but one UDP port: nothing is known about what it passes.
    assert_eq!(a.guarantee(ExitAction::Pass), default_input());
    // Drops IPv4 (08 00) UDP (17 at byte 23) to 10.0.0.2 (bytes 30..33) at least 34 bytes
    // long; the port sits after a variable-length IPv4 header, at no fixed offset.
    let drop = shape(
        (34, MAX),
        &[(12, "08"), (13, "00"), (23, "11"), (30, "0a"), (31, "00"), (32, "00"), (33, "02")],
    );
    assert_eq!(a.guarantee(ExitAction::Drop), Guarantee::of(drop));
}

#[test]
fn xdp_lb_transmits_only_ipv4_tcp_or_udp_with_a_20_byte_header() {
    let a = analysis_of(&example_spec("xdp_lb.o"));
    let tx = a.guarantee(ExitAction::Tx);
    assert!(!tx.is_bottom() && tx.shapes.len() <= 8, "{tx}");
    for s in &tx.shapes {
        // IPv4, ihl == 5 (low nibble of byte 14), TCP or UDP; MACs, addresses and checksums
        // are rewritten from map values, so unknown.
        assert_eq!((s.byte(12), s.byte(13)), (ByteFact::known(8), ByteFact::known(0)), "{s}");
        assert_eq!(s.byte(14), ByteFact { value: 5, mask: 0xf0 }, "{s}");
        assert!([6, 17].iter().any(|p| s.byte(23) == ByteFact::known(*p)), "{s}");
        for o in (0..12).chain(24..26).chain(30..34) {
            assert_eq!(s.byte(o), ByteFact::UNKNOWN, "byte {o} of {s}");
        }
    }
    let tcp = tx.shapes.iter().find(|s| s.byte(23) == ByteFact::known(6)).expect("a TCP shape");
    assert_eq!(tcp.len, (54, MAX));
    let udp = tx.shapes.iter().find(|s| s.byte(23) == ByteFact::known(17)).expect("a UDP shape");
    assert_eq!(udp.len, (42, MAX));
    // Everything else passes: no facts.
    assert_eq!(a.guarantee(ExitAction::Pass), default_input());
}

#[test]
fn xdp_change_and_mark_pass_everything_so_guarantee_nothing() {
    for object in ["xdp_change.o", "xdp_mark.o", "xdp_count.o"] {
        let a = analysis_of(&example_spec(object));
        assert_eq!(a.guarantee(ExitAction::Pass), default_input(), "{object}");
        assert_eq!(a.exits.len(), 1, "{object}: only XDP_PASS");
    }
}

/// data in r2, data_end in r3, ctx kept in r6; drop unless 54 bytes are there.
const PROLOGUE: &str = "mov %r6, %r1\nldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\n\
    mov %r4, %r2\nadd %r4, 54\njgt %r4, %r3, drop\n";
const DROP: &str = "pass:\nmov %r0, 2\nexit\ndrop:\nmov %r0, 1\nexit\n";

fn pass_of(body: &str) -> Guarantee {
    analysis_of(&asm_spec(&format!("{PROLOGUE}{body}{DROP}"))).guarantee(ExitAction::Pass)
}

#[test]
fn constant_stores_and_masked_checks_become_facts() {
    // A 16-bit little-endian store of 0xdd86 writes 86 dd; a byte store writes the TTL.
    let g = pass_of("sth [%r2+12], 0xdd86\nstb [%r2+22], 64\nja pass\n");
    assert_eq!(g, Guarantee::of(shape((54, MAX), &[(12, "86"), (13, "dd"), (22, "40")])));
    // The IPv6 version nibble: `byte & 0xf0 == 0x60`.
    let g = pass_of("ldxb %r5, [%r2+14]\nand %r5, 0xf0\njne %r5, 0x60, drop\nja pass\n");
    assert_eq!(g, Guarantee::of(shape((54, MAX), &[(14, "6?")])));
    // A 16-bit load swapped to network order and compared.
    let g = pass_of("ldxh %r5, [%r2+12]\nbe16 %r5\njne %r5, 0x86dd, drop\nja pass\n");
    assert_eq!(g, Guarantee::of(shape((54, MAX), &[(12, "86"), (13, "dd")])));
    // A second check of the same byte is decided by the first: its XDP_TX is never taken.
    let body = "ldxb %r5, [%r2+20]\njne %r5, 6, drop\nldxb %r7, [%r2+20]\njeq %r7, 6, pass\n\
                mov %r0, 3\nexit\n";
    let a = analysis_of(&asm_spec(&format!("{PROLOGUE}{body}{DROP}")));
    assert_eq!(a.guarantee(ExitAction::Pass), Guarantee::of(shape((54, MAX), &[(20, "06")])));
    assert!(!a.exits.contains_key(&ExitAction::Tx));
}

#[test]
fn facts_travel_through_the_stack() {
    // Checked byte 20 copied to the stack, then back into the packet at 30; a whole register
    // spilled and reloaded keeps its provenance: a check after the reload still teaches byte 23.
    let g = pass_of(
        "ldxb %r5, [%r2+20]\njne %r5, 6, drop\nstxb [%r10-1], %r5\nldxb %r7, [%r10-1]\n\
         stxb [%r2+30], %r7\nldxb %r8, [%r2+23]\nstxdw [%r10-16], %r8\nldxdw %r9, [%r10-16]\n\
         jne %r9, 17, drop\nja pass\n",
    );
    assert_eq!(g, Guarantee::of(shape((54, MAX), &[(20, "06"), (23, "11"), (30, "06")])));
}

#[test]
fn adjust_head_moves_the_facts_and_its_failure_keeps_the_packet() {
    // Check the ethertype, push 8 bytes in front: it is now at 20..21, the frame 8 longer.
    let body = "ldxh %r5, [%r2+12]\njne %r5, 0xdd86, drop\nmov %r1, %r6\nmov %r2, -8\ncall 44\n\
                jne %r0, 0, fail\nja pass\nfail:\nmov %r0, 3\nexit\n";
    let a = analysis_of(&asm_spec(&format!("{PROLOGUE}{body}{DROP}")));
    let pass = shape((62, MAX + 8), &[(20, "86"), (21, "dd")]);
    assert_eq!(a.guarantee(ExitAction::Pass), Guarantee::of(pass));
    // XDP_TX on failure: the packet as it was.
    let tx = shape((54, MAX), &[(12, "86"), (13, "dd")]);
    assert_eq!(a.guarantee(ExitAction::Tx), Guarantee::of(tx));
}

#[test]
fn over_budget_gives_no_facts_not_an_error() {
    let spec = example_spec("chain/fw6.o");
    let opts = AnalysisOptions { budget: 5, ..AnalysisOptions::default() };
    let a = analyse(&spec.insns, &default_input(), &opts);
    assert_eq!(a.outcome, Outcome::OverBudget);
    assert!(a.guarantee(ExitAction::Pass).is_top());
    assert!(a.guarantee(ExitAction::Drop).is_top());
}

#[test]
fn an_input_shape_narrows_what_comes_out() {
    // fw6 given only IPv6/TCP frames of at least 100 bytes: its length check and protocol
    // checks are decided, so it never drops for them; the guarantee keeps the input's facts.
    let spec = example_spec("chain/fw6.o");
    let input =
        Guarantee::of(shape((100, 1500), &[(12, "86"), (13, "dd"), (20, "06"), (54, "ab")]));
    let a = analyse(&spec.insns, &input, &AnalysisOptions::default());
    assert!(a.is_complete());
    assert_eq!(a.guarantee(ExitAction::Pass), input);
    // The only drops left are blocked sources, with the same facts.
    assert_eq!(a.guarantee(ExitAction::Drop), input);
}

#[test]
fn the_report_prints_and_serialises() {
    let r = shape_report(&example_spec("chain/fw6.o"), &default_input()).unwrap();
    let text = r.to_string();
    assert!(text.contains("XDP_PASS: 1 shape"), "{text}");
    assert!(text.contains("len [74, 1518]") && text.contains("12: 86 dd"), "{text}");
    assert!(text.contains("never taken: XDP_ABORTED, XDP_TX, XDP_REDIRECT"), "{text}");
    let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(j["complete"], true);
    let pass = Guarantee::from_value(j["exits"]["pass"].clone()).unwrap();
    assert_eq!(pass, r.analysis.guarantee(ExitAction::Pass));
    assert!(r.to_json().contains(
        r#""exits":{"drop":{"shapes":[{"len":[14,1518],"bytes":{}}]},"pass":{"shapes":[{"len":[74,1518],"bytes":{"12":"86","13":"dd","20":"06"}}]}}"#
    ), "{}", r.to_json());
}

/// Frames that reach the examples' interesting paths: IPv6/TCP, IPv4 UDP to the filtered
/// port, IPv4 TCP, and noise; then a few bytes flipped and the length cut.
fn frame(kind: u8, flips: &[(u8, u8)], cut: usize) -> Vec<u8> {
    let mut f = match kind % 4 {
        0 => {
            let mut f = vec![0u8; 94];
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            f[14] = 0x60;
            f[20] = 6;
            f
        }
        1 => ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 1024, 5000, 64, 32),
        2 => ipv4(6, [10, 0, 0, 1], [0, 0, 0, 0], 1024, 0, 64, 16),
        _ => (0..80u8).collect(),
    };
    for (at, v) in flips {
        if let Some(b) = f.get_mut(*at as usize % 80) {
            *b = *v;
        }
    }
    f.truncate(cut.max(14));
    f
}

const OBJECTS: [&str; 6] =
    ["chain/fw6.o", "xdp_filter.o", "xdp_lb.o", "xdp_change.o", "xdp_mark.o", "xdp_count.o"];

/// Each example's analysis, computed once for all generated frames.
fn analyses() -> &'static [(&'static str, Analysis)] {
    static ANALYSES: OnceLock<Vec<(&'static str, Analysis)>> = OnceLock::new();
    ANALYSES.get_or_init(|| OBJECTS.iter().map(|o| (*o, analysis_of(&example_spec(o)))).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every frame a program lets out through an exit satisfies that exit's guarantee.
    #[test]
    fn real_outputs_satisfy_the_guarantee(
        kind in any::<u8>(),
        flips in proptest::collection::vec((any::<u8>(), any::<u8>()), 0..3),
        cut in 14usize..120,
    ) {
        let pool = Pool::new(PoolConfig { buffers: 8, ..PoolConfig::default() }).unwrap();
        let f = frame(kind, &flips, cut);
        for (object, a) in analyses() {
            let spec = example_spec(object);
            let opts = LoadOptions { engine: Engine::Interp, ..LoadOptions::default() };
            let prog = Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, None).unwrap();
            let mut p = pool.alloc().unwrap();
            p.set_frame(&f).unwrap();
            let action = prog.run_xdp(&mut p, 0);
            let out = p.data().to_vec();
            let exit = ExitAction::from_code(action).unwrap();
            let g = a.guarantee(exit);
            prop_assert!(g.admits(&out), "{object}: {exit:?} output {out:02x?} not in {g}");
        }
    }
}

/// Deterministic pseudo-random bytes.
fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// The fuzz generator's programs (packet checks, stack and packet stores, byte swaps, map
/// lookups, calls, atomics): on every one the verifier accepts, the analysis ends without
/// giving up on an instruction, and what the program really does to a few frames matches the
/// guarantee of the exit it takes.
#[test]
fn generated_programs_stay_within_their_guarantees() {
    let maps = gen_maps();
    let pool = Pool::new(PoolConfig { buffers: 4, ..PoolConfig::default() }).unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let (mut accepted, mut complete, mut checked) = (0, 0, 0);
    for _ in 0..6000 {
        let bytes: Vec<u8> = (0..160).map(|_| xorshift(&mut seed) as u8).collect();
        let spec =
            ProgramSpec { name: "gen".into(), insns: gen::generate(&bytes), maps: maps.clone() };
        let opts = LoadOptions { engine: Engine::Interp, cpus: 1, complexity: 100_000 };
        let Ok(prog) = Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, None) else {
            continue;
        };
        accepted += 1;
        let a = analyse(&spec.insns, &default_input(), &AnalysisOptions::default());
        assert!(
            matches!(a.outcome, Outcome::Complete | Outcome::OverBudget),
            "{:?}\n{:?}",
            a.outcome,
            spec.insns
        );
        complete += usize::from(a.is_complete());
        for _ in 0..6 {
            let len = 14 + (xorshift(&mut seed) % 100) as usize;
            let frame: Vec<u8> = (0..len).map(|_| xorshift(&mut seed) as u8).collect();
            let mut p = pool.alloc().unwrap();
            p.set_frame(&frame).unwrap();
            let action = prog.run_xdp(&mut p, 0);
            xdp::take_redirect();
            let Some(exit) = ExitAction::from_code(action) else { continue };
            let g = a.guarantee(exit);
            assert!(
                g.admits(p.data()),
                "{exit:?}: {:02x?} (from {frame:02x?}) not in {g}\n{:?}",
                p.data(),
                spec.insns
            );
            checked += 1;
        }
    }
    assert!(
        accepted > 50 && complete * 10 > accepted * 9,
        "{accepted} accepted, {complete} complete"
    );
    eprintln!("generated: {accepted} accepted, {complete} complete, {checked} checked");
    assert!(checked > 100, "{checked}");
}
