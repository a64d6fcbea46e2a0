//! Specialising a downstream program to its upstream's guarantee: the verifier's length
//! precondition, the examples (every downstream against every upstream's pass shape) checked by
//! the differential checker on its three packet sets, generated programs under random shapes,
//! and mutated rewrites that the checker must catch.

mod common;
#[allow(dead_code)]
#[path = "../../../fuzz/fuzz_targets/ebpf_gen.rs"]
mod gen;

use common::*;
use hotplane_ebpf::asm::assemble;
use hotplane_ebpf::chain::difftest::{
    dictionary, difftest, difftest_with, packet_sets, shape_samples, specialise_to_contents,
    traffic, upstream_outputs, violators, DiffReport, Guarded, Rng,
};
use hotplane_ebpf::chain::examples::fill_services;
use hotplane_ebpf::chain::rewrite::Mutation;
use hotplane_ebpf::chain::{
    analyse, default_input, specialise, AnalysisOptions, ExitAction, Guarantee, PacketShape,
    SpecialiseError, SpecialiseOptions, Specialised,
};
use hotplane_ebpf::elf;
use hotplane_ebpf::program::{Engine, MapRegistry, ProgramSpec};
use hotplane_ebpf::verifier::{self, Context, Env, DEFAULT_COMPLEXITY};
use hotplane_ebpf::xdp;

fn example_spec(object: &str) -> ProgramSpec {
    elf::load(&example(object), None).unwrap_or_else(|e| panic!("{object}: {e}"))
}

use xdp::deterministic_helpers;

fn verify(text: &str, ctx: Context) -> Result<(), String> {
    let env = Env { helpers: &xdp::helpers(), ctx, maps: &[], complexity: DEFAULT_COMPLEXITY };
    verifier::verify(&assemble(text).unwrap(), &env).map(|_| ()).map_err(|e| e.to_string())
}

#[test]
fn the_length_precondition_admits_reads_below_it_until_the_packet_moves() {
    let read = "ldxw r2, [r1+0]\nldxb r0, [r2+20]\nexit";
    assert!(verify(read, Context::Xdp).is_err());
    assert!(verify(read, Context::XdpMinLen { min_len: 20 }).is_err());
    verify(read, Context::XdpMinLen { min_len: 21 }).unwrap();
    // After adjust_head the old length says nothing.
    let moved = "mov r6, r1\nmov r2, 4\ncall 44\nldxw r2, [r6+0]\nldxb r0, [r2+0]\nexit";
    let e = verify(moved, Context::XdpMinLen { min_len: 100 }).unwrap_err();
    assert!(e.contains("beyond the 0 bytes checked"), "{e}");
}

#[test]
fn a_bounds_check_on_data_holds_for_a_later_read_of_data() {
    // clang reads `ctx->data` again after a check; the check still bounds the packet.
    let again = "ldxw r2, [r1+0]\nldxw r3, [r1+4]\nmov r4, r2\nadd r4, 60\njgt r4, r3, +3\n\
                 ldxw r2, [r1+0]\nldxb r0, [r2+59]\nexit\nmov r0, 1\nexit";
    verify(again, Context::Xdp).unwrap();
    // Not one byte more, and not after the packet moved.
    let over = again.replace("[r2+59]", "[r2+60]");
    assert!(verify(&over, Context::Xdp).is_err());
    let moved = again
        .replace("ldxw r2, [r1+0]\nldxb", "mov r6, r1\nmov r2, 0\ncall 44\nldxw r2, [r6+0]\nldxb");
    assert!(verify(&moved, Context::Xdp).is_err());
}

#[test]
fn a_program_verified_for_a_minimum_length_aborts_on_a_shorter_packet() {
    use hotplane_core::{Pool, PoolConfig};
    use hotplane_ebpf::program::{LoadOptions, Program};
    let spec =
        ProgramSpec::bytecode("t", assemble("ldxw r2, [r1+0]\nldxb r0, [r2+99]\nexit").unwrap());
    let pool = Pool::new(PoolConfig { buffers: 2, ..PoolConfig::default() }).unwrap();
    for engine in [Engine::Jit, Engine::Interp] {
        let opts = LoadOptions { engine, ..LoadOptions::default() };
        let p =
            Program::load(&spec, Context::XdpMinLen { min_len: 100 }, &xdp::helpers(), opts, None)
                .unwrap();
        let mut pkt = pool.alloc().unwrap();
        pkt.set_frame(&[7u8; 100]).unwrap();
        assert_eq!(p.run_xdp(&mut pkt, 0), 7);
        // Whoever forgot the guard: the runner refuses rather than read past the packet.
        pkt.set_frame(&[7u8; 99]).unwrap();
        assert_eq!(p.run_xdp(&mut pkt, 0), xdp::XDP_ABORTED);
    }
}

/// All three packet sets for `down` specialised to `assumed`, `up` producing real outputs.
fn check_all_sets(
    up: &ProgramSpec,
    down: &ProgramSpec,
    s: &Specialised,
    assumed: &PacketShape,
    n: usize,
) -> DiffReport {
    let helpers = deterministic_helpers();
    let mut rng = Rng::new(0x5eed ^ down.insns.len() as u64);
    let outputs = upstream_outputs(up, &traffic(4 * n, &mut rng), &helpers, &|_| {}).unwrap();
    let frames = packet_sets(down, assumed, outputs, n, true, &mut rng);
    let mut report = DiffReport::default();
    for engine in [Engine::Interp, Engine::Jit] {
        report.absorb(difftest(down, s, &frames, &helpers, engine, &services).unwrap());
    }
    report
}

fn pass_shape(up: &ProgramSpec) -> PacketShape {
    let a = analyse(&up.insns, &default_input(), &AnalysisOptions::default());
    a.guarantee(ExitAction::Pass).hull().expect("the upstream passes something")
}

/// The examples' services, installed the same way in both runs of a check.
fn services(maps: &MapRegistry) {
    fill_services(maps).expect("the example maps take the services");
}

const UPSTREAMS: [&str; 5] =
    ["chain/fw6.o", "chain/fw6ah.o", "chain/fw6opt.o", "xdp_filter.o", "xdp_mark.o"];
const DOWNSTREAMS: [&str; 7] = [
    "chain/lb6.o",
    "chain/quiclb6.o",
    "xdp_lb.o",
    "xdp_filter.o",
    "xdp_change.o",
    "xdp_mark.o",
    "xdp_count.o",
];

#[test]
fn every_example_chain_agrees_with_the_original_on_all_three_packet_sets() {
    let opts = SpecialiseOptions {
        analysis: AnalysisOptions { helpers: deterministic_helpers(), ..Default::default() },
        ..Default::default()
    };
    let mut specialised = 0;
    for up in UPSTREAMS {
        let up_spec = example_spec(up);
        let shape = pass_shape(&up_spec);
        for down in DOWNSTREAMS {
            let down_spec = example_spec(down);
            let s = match specialise(&down_spec, &Guarantee::of(shape.clone()), &opts) {
                Ok(s) => s,
                Err(e) => panic!("{up} -> {down}: {e}"),
            };
            specialised += 1;
            let r = check_all_sets(&up_spec, &down_spec, &s, &shape, 300);
            assert_eq!(r.mismatches, 0, "{up} -> {down}: {:?}", r.first);
            assert!(r.admitted > 0, "{up} -> {down}: the guard admitted nothing");
            assert!(r.admitted < r.packets, "{up} -> {down}: the guard refused nothing");
        }
    }
    assert_eq!(specialised, UPSTREAMS.len() * DOWNSTREAMS.len());
}

#[test]
fn an_ipv4_load_balancer_behind_an_ipv6_firewall_shrinks_to_almost_nothing() {
    let up = example_spec("chain/fw6.o");
    let down = example_spec("xdp_lb.o");
    let shape = pass_shape(&up);
    let s =
        specialise(&down, &Guarantee::of(shape.clone()), &SpecialiseOptions::default()).unwrap();
    // Every packet fw6 passes is IPv6: xdp_lb's IPv4 path is dead, it passes them all.
    assert!(s.reduction() > 0.9, "{} -> {} slots", s.original_slots, s.slots());
    assert!(s.stats.branches_decided >= 1);
    assert!(!s.conservative);
    // The guard checks the ethertype xdp_lb reads, not the next header it never reads.
    assert_eq!(s.guard.checked_bytes(), 2, "{}", s.guard);
    let r = check_all_sets(&up, &down, &s, &shape, 500);
    assert_eq!(r.mismatches, 0, "{:?}", r.first);
}

#[test]
fn a_packet_that_violates_the_guard_runs_the_original() {
    let down = example_spec("xdp_lb.o");
    let mut shape = PacketShape::with_len(74, 1518);
    shape.set_known(12, &[0x86, 0xdd]);
    let s = specialise(&down, &Guarantee::of(shape), &SpecialiseOptions::default()).unwrap();
    // An IPv4 frame to the service: the specialised program would pass it; the guard sends
    // it to the original, which balances it.
    let v4 = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 100], 1234, 5000, 64, 40);
    assert!(!s.guard.admits(&v4));
    let prepare = |maps: &MapRegistry| {
        {
            let config = maps.get("xdp_lb/config").expect("xdp_lb has a config map");
            let mut v = vec![0u8; 8];
            v[0..4].copy_from_slice(&[10, 0, 0, 100]);
            v[4..6].copy_from_slice(&5000u16.to_be_bytes());
            v[6..8].copy_from_slice(&1u16.to_ne_bytes());
            config.update_copy(&0u32.to_ne_bytes(), &v, 0).unwrap();
        }
        {
            let b = maps.get("xdp_lb/backends").expect("xdp_lb has a backends map");
            let v = [10, 0, 0, 7, 2, 0, 0, 0, 0, 7, 0, 0];
            b.update_copy(&0u32.to_ne_bytes(), &v, 0).unwrap();
        }
    };
    let r = difftest(
        &down,
        &s,
        std::slice::from_ref(&v4),
        &deterministic_helpers(),
        Engine::Jit,
        &prepare,
    )
    .unwrap();
    assert_eq!((r.packets, r.admitted, r.mismatches), (1, 0, 0), "{:?}", r.first);
    // Without the guard the specialised program would be wrong for it: it passes the frame
    // untouched while the original rewrites it for the backend.
    let mut unguarded = s.clone();
    unguarded.guard = unguarded.guard.length_only();
    let r = difftest(&down, &unguarded, &[v4], &deterministic_helpers(), Engine::Jit, &prepare)
        .unwrap();
    let what = r.first.map(|m| m.what).unwrap_or_default();
    assert_eq!(what, "action 2 where the original returns 3", "the checker must see it");
}

/// Rewrites with a deliberate bug (a jump not remapped, a branch hard-wired the wrong way, a
/// constant folded wrong): wherever the bug changes what the program does, the verifier or the
/// checker catches it, so a broken rewrite never replaces an original.
#[test]
fn broken_rewrites_are_caught() {
    let helpers = deterministic_helpers();
    let analysis = AnalysisOptions { helpers: helpers.clone(), ..Default::default() };
    let (mut changed, mut caught) = (0, 0);
    for up in UPSTREAMS {
        let up_spec = example_spec(up);
        let shape = pass_shape(&up_spec);
        let assumed = Guarantee::of(shape.clone());
        for down in DOWNSTREAMS {
            let down_spec = example_spec(down);
            let good_opts = SpecialiseOptions { analysis: analysis.clone(), ..Default::default() };
            let good = specialise(&down_spec, &assumed, &good_opts).unwrap();
            for mutation in [Mutation::NoRemap, Mutation::WrongWay, Mutation::FoldOffByOne] {
                let opts = SpecialiseOptions {
                    analysis: analysis.clone(),
                    mutation: Some(mutation),
                    maps: None,
                };
                let bad = match specialise(&down_spec, &assumed, &opts) {
                    Ok(bad) if bad.spec.insns == good.spec.insns => continue,
                    Ok(bad) => bad,
                    Err(_) => {
                        // The verifier refused the broken program: caught.
                        changed += 1;
                        caught += 1;
                        continue;
                    }
                };
                changed += 1;
                let r = check_all_sets(&up_spec, &down_spec, &bad, &shape, 300);
                if r.mismatches > 0 {
                    caught += 1;
                } else {
                    eprintln!("{up} -> {down}: {mutation:?} not caught");
                }
            }
        }
    }
    assert!(changed >= 8, "only {changed} mutants differ from the good rewrite");
    // A mutant can be equivalent on every packet the guard admits (a jump not remapped in the
    // conservative form, where the jump is a bounds check that admitted packets never take):
    // nothing could catch it. Every other one is caught.
    assert!(caught * 20 >= changed * 19, "caught {caught} of {changed} broken rewrites");
}

/// Random verified programs (the fuzz generator's) under random shapes taken from a frame:
/// wherever a specialisation comes out, it agrees with the original.
#[test]
fn generated_programs_specialised_to_random_shapes_agree_with_the_originals() {
    let maps = gen_maps();
    let helpers = deterministic_helpers();
    let opts = SpecialiseOptions {
        analysis: AnalysisOptions { helpers: helpers.clone(), ..Default::default() },
        ..Default::default()
    };
    let mut rng = Rng::new(0x0c4a_1e55);
    let (mut tried, mut specialised, mut smaller, mut packets) = (0, 0, 0, 0);
    let mut inlined = 0;
    for round in 0..2500u64 {
        let bytes: Vec<u8> = (0..160).map(|_| rng.next_u64() as u8).collect();
        let spec =
            ProgramSpec { name: "gen".into(), insns: gen::generate(&bytes), maps: maps.clone() };
        // A shape: a length interval and a few known bytes of a random frame.
        let min = 14 + rng.below(80) as u32;
        let mut shape = PacketShape::with_len(min, min + rng.below(200) as u32);
        for _ in 0..rng.below(12) {
            let o = rng.below(min as u64 + 8) as u16;
            shape.set_known(o, &[rng.next_u64() as u8]);
        }
        let s = match specialise(&spec, &Guarantee::of(shape.clone()), &opts) {
            Ok(s) => s,
            // Most random programs are refused by the verifier: nothing to specialise.
            Err(SpecialiseError::Original(_)) => continue,
            Err(e) => {
                tried += 1;
                eprintln!("not specialised: {e}");
                continue;
            }
        };
        tried += 1;
        specialised += 1;
        smaller += usize::from(s.slots() < s.original_slots);
        let dict = dictionary(&spec.insns);
        let mut frames = shape_samples(&shape, &dict, 12, &mut rng);
        frames.extend(violators(&shape, &dict, 12, &mut rng));
        let r = difftest(&spec, &s, &frames, &helpers, Engine::Interp, &|_| {}).unwrap();
        packets += r.packets;
        assert_eq!(r.mismatches, 0, "{:?}\n{:?}\nshape {shape}", r.first, spec.insns);
        // The same with the hash map's contents folded in (0 to 4 entries).
        let fill = |m: &MapRegistry| {
            if let Some(h) = m.get("hash") {
                for k in 0..round % 5 {
                    h.update_copy(&k.to_le_bytes(), &(k + round).to_le_bytes(), 0).unwrap();
                }
            }
        };
        let registry = MapRegistry::default();
        let assumed = Guarantee::of(shape.clone());
        let s = specialise_to_contents(&spec, &assumed, &opts, &registry, &fill).unwrap();
        inlined += usize::from(s.inlined_lookups > 0);
        let guarded = Guarded::load(&spec, &s, &helpers, Engine::Interp, &registry).unwrap();
        let r = difftest_with(&spec, &guarded, &frames, &helpers, Engine::Interp, &fill).unwrap();
        assert_eq!(r.mismatches, 0, "mapconst: {:?}\n{:?}\nshape {shape}", r.first, spec.insns);
    }
    eprintln!("{specialised} of {tried} verified programs specialised, {smaller} smaller, {inlined} with lookups inlined, {packets} packets");
    assert!(inlined >= 5, "only {inlined} programs had a lookup inlined");
    assert!(
        specialised >= 200 && specialised * 10 >= tried * 9,
        "only {specialised} of {tried} specialised"
    );
    assert!(smaller * 4 >= specialised, "only {smaller} of {specialised} got smaller");
    assert!(packets >= 200 * 24);
}

/// The seed's chain: the firewall inserts an Authentication Header, the load balancer behind it
/// parses Ethernet, VLAN, IPv4, IPv6 and a loop of extension headers. What fw6ah guarantees
/// decides the whole parse; what is left is the IPv6 version check (fw6ah never checks it),
/// the key, the hash, the lookups and the DNAT.
#[test]
fn the_load_balancer_behind_the_ah_firewall_loses_its_parser() {
    let up = example_spec("chain/fw6ah.o");
    let down = example_spec("chain/lb6.o");
    let shape = pass_shape(&up);
    let s =
        specialise(&down, &Guarantee::of(shape.clone()), &SpecialiseOptions::default()).unwrap();
    assert!(s.reduction() > 0.5, "{} -> {} slots", s.original_slots, s.slots());
    assert!(s.stats.bounds_checks_decided >= 3, "{:?}", s.stats);
    assert!(!s.conservative);
    // Ethertype, next header (AH), and the AH's next header and length: what the walk read.
    assert_eq!(s.guard.to_string(), "len in [98, 1542]; 12=86 13=dd; 20=33; 54=06 55=04");
    let r = check_all_sets(&up, &down, &s, &shape, 1000);
    assert_eq!(r.mismatches, 0, "{:?}", r.first);
    assert!(r.admitted > 1000);
    // The services the test installs are hit: the DNAT path ran, in both programs.
    assert!(r.actions[3] > 100, "{:?}", r.actions);
}
