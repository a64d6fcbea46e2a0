//! The rbpf anchor of `hotplane bench ebpf`: runs one benchmark program with rbpf's x86-64 JIT
//! and prints `{"ns_per_packet": ...}` (or `{"error": ...}`) as its last line. rbpf is a
//! dev-dependency, so it lives in an example, built on demand by the benchmark.
//!
//! rbpf knows neither `struct xdp_md` nor maps: it gets the instructions exactly as hotplane
//! runs them (context loads rewritten to 64-bit loads from the runtime's context, map
//! references linked to addresses) and hotplane's own helpers, wrapped as rbpf helpers. The
//! context is passed as rbpf's metadata buffer.
//!
//!     rbpf_anchor PROGRAM PACKETS [CORE]

use hotplane::bench::ebpf::{frame, setup, spec};
use hotplane_ebpf::ctx::XdpCtx;
use hotplane_ebpf::helpers::Helpers;
use hotplane_ebpf::insn::encode_bytes;
use hotplane_ebpf::program::{Engine, LoadOptions, MapRegistry, Program};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::xdp;
use std::sync::OnceLock;
use std::time::Instant;

static HELPERS: OnceLock<Helpers> = OnceLock::new();

/// An rbpf helper calling hotplane's helper `ID`.
fn helper<const ID: u32>(a: u64, b: u64, c: u64, d: u64, e: u64) -> u64 {
    match HELPERS.get().and_then(|h| h.get(ID)) {
        // SAFETY: the program passed hotplane's verifier, which checked the arguments.
        Some(h) => unsafe { (h.func)(a, b, c, d, e) },
        None => 0,
    }
}

fn wrapped(id: u32) -> Option<rbpf::Helper> {
    Some(match id {
        1 => helper::<1>,
        2 => helper::<2>,
        3 => helper::<3>,
        5 => helper::<5>,
        7 => helper::<7>,
        8 => helper::<8>,
        28 => helper::<28>,
        _ => return None,
    })
}

fn measure(name: &str, packets: u64) -> Result<f64, String> {
    let helpers = HELPERS.get_or_init(xdp::helpers);
    let spec = spec(name).map_err(|e| e.to_string())?;
    let reg = MapRegistry::default();
    let opts = LoadOptions { engine: Engine::Interp, cpus: 1, ..LoadOptions::default() };
    let prog =
        Program::load(&spec, Context::Xdp, helpers, opts, Some(&reg)).map_err(|e| e.to_string())?;
    setup(name, &mut |m, k, v| {
        reg.get(m).ok_or(format!("no map {m}"))?.update_copy(k, v, 0).map_err(|e| e.to_string())
    })?;
    let code = encode_bytes(prog.insns());
    let mut vm = rbpf::EbpfVmMbuff::new(Some(&code))
        .map_err(|e| format!("rbpf refused the program: {e}"))?;
    for id in &prog.verified.helpers_used {
        let f = wrapped(*id).ok_or_else(|| format!("helper {id} has no rbpf wrapper"))?;
        vm.register_helper(*id, f).map_err(|e| e.to_string())?;
    }
    vm.jit_compile().map_err(|e| format!("rbpf JIT: {e}"))?;
    let mut pkt = frame(name);
    let mut run = |n: u64| -> Result<(), String> {
        for _ in 0..n {
            let start = pkt.as_mut_ptr() as u64;
            let mut ctx = XdpCtx {
                data: start,
                data_end: start + pkt.len() as u64,
                data_meta: start,
                ingress_ifindex: 1,
                ..Default::default()
            };
            // SAFETY: XdpCtx is plain old data; rbpf reads it as the metadata buffer.
            let mbuff = unsafe {
                std::slice::from_raw_parts_mut(
                    &mut ctx as *mut XdpCtx as *mut u8,
                    std::mem::size_of::<XdpCtx>(),
                )
            };
            // SAFETY: the program passed hotplane's verifier for this context layout.
            let r = unsafe { vm.execute_program_jit(&mut pkt, mbuff) };
            std::hint::black_box(r.map_err(|e| e.to_string())?);
        }
        Ok(())
    };
    run(packets / 10 + 1)?;
    let t = Instant::now();
    run(packets)?;
    Ok(t.elapsed().as_nanos() as f64 / packets as f64)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(name), Some(packets)) =
        (args.get(1), args.get(2).and_then(|p| p.parse::<u64>().ok()))
    else {
        eprintln!("usage: rbpf_anchor PROGRAM PACKETS [CORE]");
        std::process::exit(2);
    };
    if let Some(core) = args.get(3).and_then(|c| c.parse().ok()) {
        hotplane_engine::pin_to_core(core);
    }
    match measure(name, packets) {
        Ok(ns) => println!("{}", serde_json::json!({ "ns_per_packet": ns })),
        Err(e) => println!("{}", serde_json::json!({ "error": e })),
    }
}
