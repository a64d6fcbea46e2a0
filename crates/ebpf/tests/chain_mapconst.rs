//! Map-content specialisation: lb6 behind fw6ah with a small service map has its service
//! lookup inlined; the guarded result agrees with the original on all three packet sets; a
//! write to the map sends the very next packet to the original, which sees the write.

mod common;

use common::*;
use hotplane_ebpf::chain::difftest::{
    difftest_with, packet_sets, specialise_to_contents, traffic, upstream_outputs, Guarded, Rng,
};
use hotplane_ebpf::chain::examples::{fill_few_services, lb6_tcp6_key};
use hotplane_ebpf::chain::{
    analyse, default_input, AnalysisOptions, ExitAction, Guarantee, SpecialiseOptions,
};
use hotplane_ebpf::elf;
use hotplane_ebpf::program::{Engine, MapRegistry, ProgramSpec};
use hotplane_ebpf::xdp::{self, deterministic_helpers};

fn example_spec(object: &str) -> ProgramSpec {
    elf::load(&example(object), None).unwrap_or_else(|e| panic!("{object}: {e}"))
}

fn two_services(maps: &MapRegistry) {
    fill_few_services(maps, 2).expect("lb6's maps take the services");
}

struct Setup {
    up: ProgramSpec,
    down: ProgramSpec,
    opts: SpecialiseOptions,
    assumed: Guarantee,
}

fn setup() -> Setup {
    let opts = SpecialiseOptions {
        analysis: AnalysisOptions { helpers: deterministic_helpers(), ..Default::default() },
        ..Default::default()
    };
    let up = example_spec("chain/fw6ah.o");
    let assumed = analyse(&up.insns, &default_input(), &opts.analysis).guarantee(ExitAction::Pass);
    Setup { up, down: example_spec("chain/lb6.o"), opts, assumed }
}

#[test]
fn the_service_lookup_is_inlined_and_agrees_with_the_original() {
    let Setup { up, down, opts, assumed } = setup();
    let helpers = deterministic_helpers();
    let shape = assumed.hull().unwrap();
    let mut rng = Rng::new(0x3a9c);
    let outputs = upstream_outputs(&up, &traffic(2000, &mut rng), &helpers, &|_| {}).unwrap();
    let frames = packet_sets(&down, &shape, outputs, 500, true, &mut rng);
    for engine in [Engine::Jit, Engine::Interp] {
        let registry = MapRegistry::default();
        let s = specialise_to_contents(&down, &assumed, &opts, &registry, &two_services).unwrap();
        assert_eq!(s.inlined_lookups, 1, "the service lookup (stats and backends are arrays)");
        assert_eq!(s.guard.pins().len(), 1);
        assert!(
            s.guard.to_string().contains("map lb6/services unwritten since write"),
            "{}",
            s.guard
        );
        let candidate = Guarded::load(&down, &s, &helpers, engine, &registry).unwrap();
        let r = difftest_with(&down, &candidate, &frames, &helpers, engine, &two_services).unwrap();
        assert!(r.passed(), "{engine:?}: {r:?}");
        assert!(r.actions[3] >= 5, "some packets hit the two services (XDP_TX): {:?}", r.actions);
        assert!(r.actions[2] > 50, "and some miss them (XDP_PASS): {:?}", r.actions);
    }
}

#[test]
fn a_map_write_sends_the_next_packet_to_the_original() {
    let Setup { up, down, opts, assumed } = setup();
    let helpers = deterministic_helpers();
    let registry = MapRegistry::default();
    let s = specialise_to_contents(&down, &assumed, &opts, &registry, &two_services).unwrap();
    let guarded = Guarded::load(&down, &s, &helpers, Engine::Jit, &registry).unwrap();
    // A frame for host 3 port 80: no service yet, so lb6 passes it.
    let mut rng = Rng::new(7);
    let frame = upstream_outputs(&up, &traffic(4000, &mut rng), &helpers, &|_| {})
        .unwrap()
        .into_iter()
        .find(|f| f[38..54] == lb6_tcp6_key(3, 80)[..16] && f[80..82] == [0, 80])
        .expect("fw6ah passes a frame to host 3 port 80");
    let pool = hotplane_core::Pool::new(Default::default()).unwrap();
    let run = |f: &[u8]| {
        let mut p = pool.alloc().unwrap();
        p.set_frame(f).unwrap();
        guarded.run(&mut p, 0)
    };
    assert_eq!(
        run(&frame),
        (xdp::XDP_PASS, true),
        "no service: passed, by the specialised program"
    );
    // The control plane adds the service: the very next packet must see it.
    let services = registry.get("lb6/services").unwrap();
    let value = [4u32.to_ne_bytes(), 0u32.to_ne_bytes()].concat();
    services.update_copy(&lb6_tcp6_key(3, 80), &value, 0).unwrap();
    assert_eq!(run(&frame), (xdp::XDP_TX, false), "the original ran and found the new service");
    // Re-specialised to the new contents, the inlined lookup finds it too.
    let again = specialise_to_contents(&down, &assumed, &opts, &registry, &|_| {}).unwrap();
    let guarded = Guarded::load(&down, &again, &helpers, Engine::Jit, &registry).unwrap();
    let mut p = pool.alloc().unwrap();
    p.set_frame(&frame).unwrap();
    assert_eq!(guarded.run(&mut p, 0), (xdp::XDP_TX, true));
}

#[test]
fn a_map_the_program_writes_is_not_inlined() {
    // xdp_lb's flow table is updated per packet by the program itself: a pin would break on
    // every packet, so nothing is inlined (and the guard holds no pin).
    let Setup { opts, .. } = setup();
    let down = example_spec("xdp_lb.o");
    let registry = MapRegistry::default();
    let s = specialise_to_contents(&down, &default_input(), &opts, &registry, &|_| {}).unwrap();
    assert_eq!(s.inlined_lookups, 0);
    assert!(s.guard.pins().is_empty());
}

#[test]
fn map_entry_references_are_refused_from_outside() {
    use hotplane_ebpf::insn::{op, pseudo, Insn};
    use hotplane_ebpf::maps::{MapDef, MapKind};
    use hotplane_ebpf::verifier::{self, Context, Env, MapInfo, DEFAULT_COMPLEXITY};
    let def = MapDef { kind: MapKind::Hash, key_size: 4, value_size: 8, max_entries: 4 };
    let maps = [MapInfo::from(def)];
    let prog = |slot: i32| {
        vec![
            Insn::new(op::LDDW, 1, pseudo::MAP_ENTRY, 0, 0),
            Insn::new(0, 0, 0, 0, slot),
            Insn::new(op::MOV64_IMM, 0, 0, 0, 2),
            Insn::new(op::EXIT, 0, 0, 0, 0),
        ]
    };
    let helpers = xdp::helpers();
    let env = |ctx| Env { helpers: &helpers, ctx, maps: &maps, complexity: DEFAULT_COMPLEXITY };
    let e = verifier::verify(&prog(0), &env(Context::Xdp)).unwrap_err();
    assert!(e.msg.contains("lddw with unknown source 7"), "{e}");
    // Even where no path reaches it.
    let mut dead = vec![Insn::new(op::JA, 0, 0, 2, 0)];
    dead.extend(prog(0));
    let e = verifier::verify(&dead, &env(Context::Xdp)).unwrap_err();
    assert!(e.msg.contains("lddw with unknown source 7"), "{e}");
    let inside = Context::XdpMinLen { min_len: 14 };
    verifier::verify(&prog(0), &env(inside)).unwrap();
    let e = verifier::verify(&prog(1 << 20), &env(inside)).unwrap_err();
    assert!(e.msg.contains("slot"), "{e}");
}
