//! Chain specialisation of generated programs (`ebpf_gen.rs`) to shapes from fuzz bytes:
//! whatever specialisation comes out must agree with the original on samples of the shape and
//! on violators (the differential checker), and must never touch memory outside the packet
//! for a packet its guard admits (the memory-safety oracle on the length precondition the
//! specialised program was verified with). Then the same with the hash map's contents folded
//! in (map-content specialisation): agreement again, and a write to the map must make the guard
//! refuse every packet.
#![no_main]

#[allow(dead_code)]
#[path = "ebpf_common.rs"]
mod common;
#[path = "ebpf_gen.rs"]
mod gen;

use hotplane_core::{Pool, PoolConfig};
use hotplane_ebpf::chain::difftest::{
    dictionary, difftest, difftest_with, shape_samples, specialise_to_contents, violators, Guarded,
    Rng,
};
use hotplane_ebpf::chain::{
    specialise, AnalysisOptions, Guarantee, PacketShape, SpecialiseOptions,
};
use hotplane_ebpf::program::{Engine, LoadOptions, MapRegistry, Program, ProgramSpec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Length interval, then up to 7 known bytes (offset, value, unknown-bits mask), then the
    // generator's choices.
    let [lo, span, facts, rest @ ..] = data else { return };
    let facts = (*facts % 8) as usize;
    let Some((fact_bytes, choices)) = rest.split_at_checked(facts * 3) else { return };
    let min = 14 + u32::from(*lo % 100);
    let mut shape = PacketShape::with_len(min, min + 4 * u32::from(*span));
    for f in fact_bytes.chunks_exact(3) {
        shape.set_byte(
            u16::from(f[0]),
            hotplane_ebpf::chain::ByteFact { value: f[1] & !f[2], mask: f[2] },
        );
    }
    shape.normalise();
    let spec = ProgramSpec {
        name: "fuzz".into(),
        insns: gen::generate(choices),
        maps: common::fuzz_maps(),
    };
    let helpers = common::deterministic_helpers();
    let opts = SpecialiseOptions {
        analysis: AnalysisOptions { helpers: helpers.clone(), ..Default::default() },
        ..Default::default()
    };
    let assumed = Guarantee::of(shape.clone());
    let Ok(s) = specialise(&spec, &assumed, &opts) else { return };
    let dict = dictionary(&spec.insns);
    let mut rng =
        Rng::new(data.iter().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(*b as u64)));
    let mut frames = shape_samples(&shape, &dict, 6, &mut rng);
    frames.extend(violators(&shape, &dict, 6, &mut rng));
    // The interpreter checks the guard in Rust; the JIT runs it compiled in front of the
    // program (the checker also compares the two guards' answers packet by packet).
    for engine in [Engine::Interp, Engine::Jit] {
        let r = difftest(&spec, &s, &frames, &helpers, engine, &|_| {}).expect("both load");
        assert_eq!(
            r.mismatches, 0,
            "{engine:?}: {:?}\nprogram {:?}\nspecialised {:?}\nshape {shape}",
            r.first, spec.insns, s.spec.insns
        );
    }
    // The oracle: the specialised program on the admitted packets, every access checked.
    let load = LoadOptions { engine: Engine::Interp, cpus: 1, ..LoadOptions::default() };
    let fast = Program::load(&s.spec, s.context, &helpers, load, None).expect("it loaded above");
    let pool = Pool::new(PoolConfig { buffers: 2, ..Default::default() }).unwrap();
    for f in frames.iter().filter(|f| s.guard.admits(f)) {
        let mut p = pool.alloc().unwrap();
        if p.set_frame(f).is_ok() {
            if let Err(e) = fast.run_checked_xdp(&mut p, 0) {
                panic!(
                    "a specialised program escaped: {e}\n{:?}\nmin_len {}",
                    s.spec.insns, s.guard.min_len()
                );
            }
        }
    }
    hotplane_ebpf::xdp::take_redirect();

    // Map-content specialisation: the generator's hash map (8-byte keys, the lookups use keys
    // 0 to 3) holds up to four entries chosen by the input.
    let entries = (data.len() % 5) as u64;
    let fill = |maps: &MapRegistry| {
        if let Some(m) = maps.get("hash") {
            for k in 0..entries {
                let _ = m.update_copy(&k.to_le_bytes(), &(k * 0x0101 + u64::from(min)).to_le_bytes(), 0);
            }
        }
    };
    let registry = MapRegistry::default();
    let Ok(s) = specialise_to_contents(&spec, &assumed, &opts, &registry, &fill) else { return };
    let guarded =
        Guarded::load(&spec, &s, &helpers, Engine::Interp, &registry).expect("it verified");
    let r = difftest_with(&spec, &guarded, &frames, &helpers, Engine::Interp, &fill)
        .expect("the original loads");
    assert_eq!(
        r.mismatches, 0,
        "mapconst ({} entries, {} lookups inlined): {:?}\nprogram {:?}\nspecialised {:?}\nshape {shape}",
        entries, s.inlined_lookups, r.first, spec.insns, s.spec.insns
    );
    // The compiled guard checks the map pins too.
    let jit = Guarded::load(&spec, &s, &helpers, Engine::Jit, &registry).expect("it verified");
    let r = difftest_with(&spec, &jit, &frames, &helpers, Engine::Jit, &fill)
        .expect("the original loads");
    assert_eq!(r.mismatches, 0, "mapconst, JIT: {:?}\nspecialised {:?}", r.first, s.spec.insns);
    for f in frames.iter().filter(|f| s.guard.admits(f)) {
        let mut p = pool.alloc().unwrap();
        if p.set_frame(f).is_ok() {
            if let Err(e) = guarded.fast().run_checked_xdp(&mut p, 0) {
                panic!("a map-specialised program escaped: {e}\n{:?}", s.spec.insns);
            }
        }
    }
    if !s.guard.pins().is_empty() {
        if let Some(m) = registry.get("hash") {
            let _ = m.update_copy(&9u64.to_le_bytes(), &[0; 8], 0);
        }
        assert!(frames.iter().all(|f| !s.guard.admits(f)), "a pin survived a write");
        for f in &frames {
            let mut p = pool.alloc().unwrap();
            if p.set_frame(f).is_ok() {
                assert!(!jit.run(&mut p, 0).1, "a compiled pin survived a write");
            }
        }
    }
    hotplane_ebpf::xdp::take_redirect();
});
