//! `hotplane bench chain`: the seed's experiment (Krude et al.) in hotplane's engines. The
//! firewall `fw6ah` (IPv6/TCP only, inserts an Authentication Header) in front of the load
//! balancers `lb6` (cilium-style, Ethernet/VLAN/IPv4/IPv6/extension headers, DNAT) and
//! `quiclb6`, and `lb6`'s parse alone (`lb6_parse`, the seed's "parse part"):
//!
//! - size: instruction slots before and after specialisation to fw6ah's pass guarantee;
//! - optimisation time: the upstream's analysis, the downstream's analysis, rewrite,
//!   re-verification and JIT (p50 and p99 of repeated runs);
//! - per packet, side by side in one run: the original ("off"), the specialised program behind
//!   its guard ("guarded"), and behind the length check alone ("trusted"), in the JIT (the
//!   guard compiled in front of the program, as the data plane runs it) and the interpreter
//!   (the guard checked in Rust); the compiled guard's own cost (`guard_ns`) and the Rust
//!   guard's (`guard_rust_ns`); the whole chain (fw6ah + lb6) per packet;
//! - the differential checker on at least `--check` packets (upstream outputs with services
//!   installed so that the DNAT path runs, shape samples, violators): mismatches must be 0.
//!
//! The frames are fw6ah's real outputs for generated IPv6/TCP traffic to the services; each
//! is reset before every run (the DNAT rewrites it) and the reset's own time is subtracted.
//!
//! Map-content specialisation (`mapconst`) is measured on its own case: lb6 with a small
//! service map (four IPv6/TCP services, Morpheus's rarely written map) and fw6ah's outputs to
//! those services; the original runs on the same map and frames, side by side.

use super::{emit, median, Progress};
use anyhow::{anyhow, Context as _};
use hotplane_core::{Packet, Pool, PoolConfig};
use hotplane_ebpf::chain::difftest::{
    difftest, difftest_with, packet_sets, specialise_to_contents, traffic, upstream_outputs,
    DiffReport, Guarded, Rng,
};
use hotplane_ebpf::chain::examples::{fill_few_services, fill_services, lb6_tcp6_key};
use hotplane_ebpf::chain::{
    analyse, default_input, specialise_verified, ExitAction, Guard, PacketShape, SpecialiseOptions,
    Specialised,
};
use hotplane_ebpf::program::{Engine, LoadOptions, MapRegistry, Program, ProgramSpec};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::{elf, xdp};
use hotplane_engine::pin_to_core;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Args, Debug, Clone)]
pub struct Opts {
    #[arg(long)]
    pub json: bool,
    /// Packets per measurement.
    #[arg(long, default_value_t = 1_000_000)]
    pub packets: u64,
    /// Measurements per figure (medians reported; the variants interleave).
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Optimisation runs per program (for p50 and p99).
    #[arg(long, default_value_t = 30)]
    pub optimise_runs: usize,
    /// Packets through the differential checker in all.
    #[arg(long, default_value_t = 1_000_000)]
    pub check: usize,
    /// Core to pin the benchmark to.
    #[arg(long, default_value_t = 1)]
    pub core: usize,
    /// Length of the live replacement run (pre replaced at a third of it), ms.
    #[arg(long, default_value_t = 600)]
    pub live_ms: u64,
    /// Where the replacement plot goes.
    #[arg(long, default_value = "target/bench-chain")]
    pub out: std::path::PathBuf,
}

const REPLACEMENT: (&str, &[u8]) =
    ("fw6opt", include_bytes!("../../../../examples/ebpf/chain/fw6opt.o"));
const UPSTREAM: (&str, &[u8]) =
    ("fw6ah", include_bytes!("../../../../examples/ebpf/chain/fw6ah.o"));
const DOWNSTREAMS: [(&str, &[u8]); 3] = [
    ("lb6", include_bytes!("../../../../examples/ebpf/chain/lb6.o")),
    ("quiclb6", include_bytes!("../../../../examples/ebpf/chain/quiclb6.o")),
    ("lb6_parse", include_bytes!("../../../../examples/ebpf/chain/lb6_parse.o")),
];
const BATCH: usize = 32;

fn load_spec(name: &str, object: &[u8]) -> anyhow::Result<ProgramSpec> {
    elf::load(object, None).map_err(|e| anyhow!("{name}: {e}"))
}

fn load(
    spec: &ProgramSpec,
    ctx: Context,
    engine: Engine,
    maps: &MapRegistry,
) -> anyhow::Result<Program> {
    let opts = LoadOptions { engine, cpus: 1, ..LoadOptions::default() };
    Program::load(spec, ctx, &xdp::deterministic_helpers(), opts, Some(maps))
        .map_err(|e| anyhow!("{}: {e}", spec.name))
}

/// `spec` with `guard` compiled in front of it, falling back to `original` (as the data plane
/// runs a specialised program in the JIT); `guard` is the specialisation's or a weaker form.
fn load_guarded(
    spec: &ProgramSpec,
    context: Context,
    guard: &Guard,
    original: &Arc<Program>,
) -> anyhow::Result<Program> {
    let plan =
        guard.plan().ok_or_else(|| anyhow!("{}: the guard cannot be compiled", spec.name))?;
    let opts = LoadOptions { engine: Engine::Jit, cpus: 1, ..LoadOptions::default() };
    Program::load_guarded(spec, context, &xdp::deterministic_helpers(), opts, original, plan)
        .map_err(|e| anyhow!("{}: {e}", spec.name))
}

/// ns per packet of `guard` compiled in front of a program that returns at once, less the same
/// program without it: what the guard adds to each packet it admits in the JIT. Both run over
/// one batch of frames again and again (the program changes nothing, so no reset is timed),
/// interleaved; the median of the differences.
fn compiled_guard_ns(
    guard: &Guard,
    frames: &[Vec<u8>],
    pool: &Pool,
    packets: u64,
    repeat: u32,
) -> anyhow::Result<f64> {
    let ret = ProgramSpec::bytecode("ret", hotplane_ebpf::asm::assemble("mov r0, 2\nexit")?);
    let plain = Arc::new(load(&ret, Context::Xdp, Engine::Jit, &MapRegistry::default())?);
    let guarded = load_guarded(&ret, Context::Xdp, guard, &plain)?;
    let mut batch: Vec<Packet> = frames
        .iter()
        .take(BATCH)
        .map(|f| {
            let mut p = pool.alloc().ok_or_else(|| anyhow!("pool empty"))?;
            p.set_frame(f).map_err(|e| anyhow!("{e}"))?;
            Ok(p)
        })
        .collect::<anyhow::Result<_>>()?;
    let rounds = (packets / batch.len().max(1) as u64).max(1);
    let mut time = |prog: &Program| {
        let mut runner = prog.xdp_runner(0);
        let t = Instant::now();
        for _ in 0..rounds {
            for p in batch.iter_mut() {
                std::hint::black_box(runner.run(p));
            }
        }
        t.elapsed().as_nanos() as f64 / (rounds * batch.len() as u64) as f64
    };
    let diffs: Vec<f64> = (0..3 * repeat.max(1)).map(|_| -time(&plain) + time(&guarded)).collect();
    anyhow::ensure!(guarded.guard_misses(0) == Some(0), "the frames do not pass the guard");
    Ok(median(diffs))
}

/// How a batch is run.
enum Runner<'a> {
    Plain(&'a Program),
    Guarded { guard: &'a Guard, fast: &'a Program, original: &'a Program },
}

impl Runner<'_> {
    #[inline(always)]
    fn run(&self, p: &mut Packet) -> u64 {
        match self {
            Runner::Plain(prog) => prog.run_xdp(p, 0),
            Runner::Guarded { guard, fast, original } => {
                if guard.admits(p.data()) {
                    fast.run_xdp(p, 0)
                } else {
                    original.run_xdp(p, 0)
                }
            }
        }
    }
}

/// ns per packet of `runner` on `frames` (reset before each run; the reset's time, measured
/// on its own, is subtracted).
fn per_packet(
    runner: Option<&Runner<'_>>,
    frames: &[Vec<u8>],
    pool: &Pool,
    packets: u64,
) -> anyhow::Result<f64> {
    let mut batch: Vec<Packet> = (0..BATCH)
        .map(|_| pool.alloc().ok_or_else(|| anyhow!("pool empty")))
        .collect::<Result<_, _>>()?;
    let rounds = packets.div_ceil(BATCH as u64);
    let mut k = 0usize;
    let mut round = |batch: &mut Vec<Packet>| -> anyhow::Result<()> {
        for p in batch.iter_mut() {
            p.set_frame(&frames[k % frames.len()]).map_err(|e| anyhow!("{e}"))?;
            k += 1;
        }
        if let Some(r) = runner {
            for p in batch.iter_mut() {
                std::hint::black_box(r.run(p));
            }
        }
        Ok(())
    };
    for _ in 0..rounds / 10 + 1 {
        round(&mut batch)?;
    }
    let t = Instant::now();
    for _ in 0..rounds {
        round(&mut batch)?;
    }
    Ok(t.elapsed().as_nanos() as f64 / (rounds * BATCH as u64) as f64)
}

/// ns per packet of the guard alone in Rust (as the interpreter's stage checks it), over the
/// frames again and again.
fn guard_ns(guard: &Guard, frames: &[Vec<u8>], packets: u64) -> f64 {
    let rounds = packets.div_ceil(frames.len() as u64);
    let t = Instant::now();
    let mut admitted = 0u64;
    for _ in 0..rounds {
        for f in frames {
            admitted += u64::from(guard.admits(std::hint::black_box(f)));
        }
    }
    std::hint::black_box(admitted);
    t.elapsed().as_nanos() as f64 / (rounds * frames.len() as u64) as f64
}

fn percentile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

struct Row {
    name: &'static str,
    spec: ProgramSpec,
    s: Specialised,
    optimise_ms: Vec<f64>,
}

pub fn run(o: &Opts) -> anyhow::Result<()> {
    pin_to_core(o.core);
    let mut progress = Progress::new("bench chain", o.json);
    let helpers = xdp::deterministic_helpers();
    let up = load_spec(UPSTREAM.0, UPSTREAM.1)?;
    let sopts = SpecialiseOptions {
        analysis: hotplane_ebpf::chain::AnalysisOptions {
            helpers: helpers.clone(),
            ..Default::default()
        },
        ..Default::default()
    };
    // The frames: fw6ah's outputs for generated traffic, IPv6/TCP to the services.
    let mut rng = Rng::new(0xc4a1);
    let outputs = upstream_outputs(&up, &traffic(40_000, &mut rng), &helpers, &|_| {})
        .map_err(|e| anyhow!("{e}"))?;
    anyhow::ensure!(outputs.len() > 100, "fw6ah passed only {} generated frames", outputs.len());
    let assumed: PacketShape = analyse(&up.insns, &default_input(), &sopts.analysis)
        .guarantee(ExitAction::Pass)
        .hull()
        .ok_or_else(|| anyhow!("fw6ah passes nothing"))?;
    progress.note(&format!("frames: {} outputs of fw6ah", outputs.len()));

    // Optimisation, as a data plane does it on an upstream change: analyse the upstream,
    // specialise the (already verified) downstream, JIT it.
    let mut rows = Vec::new();
    for (name, object) in DOWNSTREAMS {
        let spec = load_spec(name, object)?;
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..o.optimise_runs.max(1) {
            let t = Instant::now();
            let g =
                analyse(&up.insns, &default_input(), &sopts.analysis).guarantee(ExitAction::Pass);
            let s = specialise_verified(&spec, &g, &sopts).with_context(|| name.to_string())?;
            let jit = load(&s.spec, s.context, Engine::Jit, &MapRegistry::default())?;
            std::hint::black_box(&jit);
            times.push(t.elapsed().as_nanos() as f64 / 1e6);
            last = Some(s);
        }
        let s = last.ok_or_else(|| anyhow!("no run"))?;
        progress.note(&format!(
            "{name}: {} -> {} slots, optimise p50 {:.2} ms",
            s.original_slots,
            s.slots(),
            median(times.clone())
        ));
        rows.push(Row { name, spec, s, optimise_ms: times });
    }

    let pool = Pool::new(PoolConfig { buffers: 2 * BATCH as u32, ..PoolConfig::default() })?;
    let mut programs = Vec::new();
    let mut timing = serde_json::Map::new();
    let total = rows.len() as u64 * u64::from(o.repeat) * 7;
    let mut done = 0;
    for row in &rows {
        let maps = MapRegistry::default();
        let mut times: [Vec<f64>; 7] = Default::default();
        let jit_orig = Arc::new(load(&row.spec, Context::Xdp, Engine::Jit, &maps)?);
        let jit_fast = load_guarded(&row.s.spec, row.s.context, &row.s.guard, &jit_orig)?;
        let jit_trusted =
            load_guarded(&row.s.spec, row.s.context, &row.s.guard.length_only(), &jit_orig)?;
        let int_orig = load(&row.spec, Context::Xdp, Engine::Interp, &maps)?;
        let int_fast = load(&row.s.spec, row.s.context, Engine::Interp, &maps)?;
        fill_services(&maps).map_err(|e| anyhow!("{e}"))?;
        let interp_packets = (o.packets / 10).max(1000);
        for _ in 0..o.repeat {
            let runs: [(Option<Runner<'_>>, u64); 7] = [
                (None, o.packets),
                (Some(Runner::Plain(&jit_orig)), o.packets),
                (Some(Runner::Plain(&jit_fast)), o.packets),
                (Some(Runner::Plain(&jit_trusted)), o.packets),
                (None, interp_packets),
                (Some(Runner::Plain(&int_orig)), interp_packets),
                (
                    Some(Runner::Guarded {
                        guard: &row.s.guard,
                        fast: &int_fast,
                        original: &int_orig,
                    }),
                    interp_packets,
                ),
            ];
            for (k, (r, n)) in runs.iter().enumerate() {
                times[k].push(per_packet(r.as_ref(), &outputs, &pool, *n)?);
                done += 1;
                progress.update(done, total);
            }
        }
        let [reset, off, guarded, trusted_ns, reset_i, off_i, guarded_i] = times.map(median);
        let (off, guarded, trusted_ns) = (off - reset, guarded - reset, trusted_ns - reset);
        let (off_i, guarded_i) = (off_i - reset_i, guarded_i - reset_i);
        timing.insert(
            row.name.into(),
            json!({
                "jit": {"off_ns": off, "guarded_ns": guarded, "trusted_ns": trusted_ns,
                        "mapconst_ns": null, "speedup": off / guarded, "speedup_trusted": off / trusted_ns,
                        "speedup_mapconst": null},
                "interp": {"off_ns": off_i, "guarded_ns": guarded_i, "speedup": off_i / guarded_i},
                "guard_ns": compiled_guard_ns(&row.s.guard, &outputs, &pool, o.packets, o.repeat)?,
                "guard_rust_ns": guard_ns(&row.s.guard, &outputs[..BATCH.min(outputs.len())], o.packets),
            }),
        );
        programs.push(json!({
            "name": row.name,
            "slots_before": row.s.original_slots,
            "slots_after": row.s.slots(),
            "reduction": row.s.reduction(),
            "conservative": row.s.conservative,
            "guard": row.s.guard.to_string(),
            "optimise_ms_p50": median(row.optimise_ms.clone()),
            "optimise_ms_p99": percentile(row.optimise_ms.clone(), 0.99),
        }));
    }

    // The whole chain per packet: fw6ah then lb6 (the seed's figure), original and guarded.
    let lb6 = &rows[0];
    let maps = MapRegistry::default();
    let up_jit = load(&up, Context::Xdp, Engine::Jit, &maps)?;
    let up_ns = median(
        (0..o.repeat)
            .map(|_| {
                let reset = per_packet(None, &traffic_frames(&outputs), &pool, o.packets)?;
                Ok(per_packet(
                    Some(&Runner::Plain(&up_jit)),
                    &traffic_frames(&outputs),
                    &pool,
                    o.packets,
                )? - reset)
            })
            .collect::<anyhow::Result<Vec<f64>>>()?,
    );
    let mc = mapconst(o, &rows[0], &up, &outputs, &pool, &sopts, &mut check_seed(&rows[0]))?;
    progress.note(&format!(
        "lb6 mapconst ({} services): JIT {:.1} -> {:.1} ns ({:.2}x), interp {:.2}x; {} packets checked, {} mismatches",
        mc.services,
        mc.off_ns,
        mc.mapconst_ns,
        mc.off_ns / mc.mapconst_ns,
        mc.off_i / mc.mapconst_i,
        mc.check.packets,
        mc.check.mismatches
    ));
    if let Some(t) = timing.get_mut("lb6") {
        t["jit"]["mapconst_ns"] = json!(mc.mapconst_ns);
        t["jit"]["speedup_mapconst"] = json!(mc.off_ns / mc.mapconst_ns);
        t["interp"]["mapconst_ns"] = json!(mc.mapconst_i);
        t["interp"]["speedup_mapconst"] = json!(mc.off_i / mc.mapconst_i);
        t["mapconst"] = json!({
            "services": mc.services, "frames": mc.frames, "off_ns": mc.off_ns,
            "mapconst_ns": mc.mapconst_ns, "interp_off_ns": mc.off_i,
            "interp_mapconst_ns": mc.mapconst_i, "slots_after": mc.slots,
            "guard": mc.guard, "optimise_ms": mc.optimise_ms,
        });
    }
    let lb6_t = &timing["lb6"]["jit"];
    let off_ns = lb6_t["off_ns"].as_f64().unwrap_or(f64::NAN);
    let best_ns = lb6_t["guarded_ns"].as_f64().unwrap_or(f64::NAN).min(mc.mapconst_ns);

    // The differential checker, through the JIT.
    let mut check = DiffReport::default();
    let per_row = o.check.div_ceil(rows.len() * 3).max(1);
    let mut guard_misses = 0usize;
    for row in &rows {
        let mut rng = Rng::new(0xd1ff ^ row.s.original_slots as u64);
        let cycled: Vec<Vec<u8>> =
            (0..per_row).map(|k| outputs[k % outputs.len()].clone()).collect();
        guard_misses += cycled.iter().filter(|f| !row.s.guard.admits(f)).count();
        let frames = packet_sets(&row.spec, &assumed, cycled, per_row, true, &mut rng);
        let r = difftest(&row.spec, &row.s, &frames, &helpers, Engine::Jit, &|m| {
            let _ = fill_services(m);
        })
        .map_err(|e| anyhow!("{e}"))?;
        check.absorb(r);
    }
    check.absorb(mc.check);
    let live = replacement(o)?;
    progress.note(&format!(
        "live: pre replaced at {:.0} ms, lb6 re-specialised {:.1} ms later; {} guard misses meanwhile; {} dropped; plot {}",
        live["replaced_at_ms"].as_f64().unwrap_or(0.0),
        live["respecialise_ms"].as_f64().unwrap_or(f64::NAN),
        live["misses_between"],
        live["dropped"],
        live["plot"].as_str().unwrap_or("")
    ));
    if let Some(m) = &check.first {
        progress.note(&format!("MISMATCH: {} (frame {})", m.what, hex::encode(&m.frame)));
    }
    let lb = &timing["lb6"];
    progress.finish(&format!(
        "lb6: JIT {:.1} -> {:.1} ns ({:.2}x), interp {:.0} -> {:.0} ns ({:.2}x); {} packets checked, {} mismatches",
        lb["jit"]["off_ns"].as_f64().unwrap_or(0.0),
        lb["jit"]["guarded_ns"].as_f64().unwrap_or(0.0),
        lb["jit"]["speedup"].as_f64().unwrap_or(0.0),
        lb["interp"]["off_ns"].as_f64().unwrap_or(0.0),
        lb["interp"]["guarded_ns"].as_f64().unwrap_or(0.0),
        lb["interp"]["speedup"].as_f64().unwrap_or(0.0),
        check.packets,
        check.mismatches
    ));
    let out: Value = json!({
        "bench": "chain",
        "upstream": UPSTREAM.0,
        "programs": programs,
        "optimise_ms_p50": median(lb6.optimise_ms.clone()),
        "optimise_ms_p99": percentile(lb6.optimise_ms.clone(), 0.99),
        "jit": timing["lb6"]["jit"],
        "interp": timing["lb6"]["interp"],
        "guard_ns": timing["lb6"]["guard_ns"],
        "per_program": timing,
        "chain_mpps": {"off": 1e3 / (up_ns + off_ns), "best": 1e3 / (up_ns + best_ns), "upstream_ns": up_ns},
        "guard_miss_rate": guard_misses as f64 / (per_row * rows.len()) as f64,
        "differential_packets": check.packets,
        "mismatches": check.mismatches,
        "actions": check.actions,
        "live": live,
        "packets": o.packets,
        "core": o.core,
    });
    emit(&out, o.json);
    anyhow::ensure!(
        check.mismatches == 0,
        "the differential checker found {} mismatches",
        check.mismatches
    );
    Ok(())
}

fn check_seed(row: &Row) -> Rng {
    Rng::new(0x3ac0 ^ row.s.original_slots as u64)
}

/// What the map-content specialisation of lb6 measured.
struct MapConst {
    services: usize,
    frames: usize,
    slots: usize,
    guard: String,
    optimise_ms: f64,
    off_ns: f64,
    mapconst_ns: f64,
    off_i: f64,
    mapconst_i: f64,
    check: DiffReport,
}

/// lb6 specialised to fw6ah's guarantee and to a four-service map, against the original on
/// the same map, on fw6ah's outputs to those services (every one DNATed); then the checker on
/// all three packet sets with that map.
fn mapconst(
    o: &Opts,
    row: &Row,
    up: &ProgramSpec,
    outputs: &[Vec<u8>],
    pool: &Pool,
    sopts: &SpecialiseOptions,
    rng: &mut Rng,
) -> anyhow::Result<MapConst> {
    const HOSTS: u8 = 4;
    let fill = |m: &MapRegistry| {
        let _ = fill_few_services(m, HOSTS);
    };
    let helpers = &sopts.analysis.helpers;
    let assumed = analyse(&up.insns, &default_input(), &sopts.analysis).guarantee(ExitAction::Pass);
    let maps = MapRegistry::default();
    let t = Instant::now();
    let s = specialise_to_contents(&row.spec, &assumed, sopts, &maps, &fill)
        .map_err(|e| anyhow!("lb6 mapconst: {e}"))?;
    let optimise_ms = t.elapsed().as_nanos() as f64 / 1e6;
    anyhow::ensure!(s.inlined_lookups > 0, "lb6 mapconst: no lookup was inlined");
    // fw6ah's outputs carry the IPv6 destination at 38 and TCP's destination port at 80.
    let keys: Vec<Vec<u8>> = (1..=HOSTS).map(|h| lb6_tcp6_key(h, 80)).collect();
    let frames: Vec<Vec<u8>> = outputs
        .iter()
        .filter(|f| {
            f.len() > 82 && keys.iter().any(|k| f[38..54] == k[..16] && f[80..82] == k[16..18])
        })
        .cloned()
        .collect();
    anyhow::ensure!(frames.len() >= 16, "only {} outputs reach the four services", frames.len());
    let jit_orig = Arc::new(load(&row.spec, Context::Xdp, Engine::Jit, &maps)?);
    let jit_fast = load_guarded(&s.spec, s.context, &s.guard, &jit_orig)?;
    let int_orig = load(&row.spec, Context::Xdp, Engine::Interp, &maps)?;
    let int_fast = load(&s.spec, s.context, Engine::Interp, &maps)?;
    let interp_packets = (o.packets / 10).max(1000);
    let mut times: [Vec<f64>; 6] = Default::default();
    for _ in 0..o.repeat {
        let runs: [(Option<Runner<'_>>, u64); 6] = [
            (None, o.packets),
            (Some(Runner::Plain(&jit_orig)), o.packets),
            (Some(Runner::Plain(&jit_fast)), o.packets),
            (None, interp_packets),
            (Some(Runner::Plain(&int_orig)), interp_packets),
            (
                Some(Runner::Guarded { guard: &s.guard, fast: &int_fast, original: &int_orig }),
                interp_packets,
            ),
        ];
        for (k, (r, n)) in runs.iter().enumerate() {
            times[k].push(per_packet(r.as_ref(), &frames, pool, *n)?);
        }
    }
    anyhow::ensure!(s.guard.pins().iter().all(|p| p.holds()), "a pin broke while measuring");
    let [reset, off, fast, reset_i, off_i, fast_i] = times.map(median);
    // The checker: the three packet sets, through the JIT, on the same four services.
    let n = (o.check / 4).max(1);
    let cycled: Vec<Vec<u8>> = (0..n).map(|k| outputs[k % outputs.len()].clone()).collect();
    let shape = assumed.hull().ok_or_else(|| anyhow!("fw6ah passes nothing"))?;
    let set = packet_sets(&row.spec, &shape, cycled, n, true, rng);
    // Fresh maps: the timing runs above counted millions of packets in lb_stats.
    let check_maps = MapRegistry::default();
    let s_check = specialise_to_contents(&row.spec, &assumed, sopts, &check_maps, &fill)
        .map_err(|e| anyhow!("lb6 mapconst: {e}"))?;
    let guarded = Guarded::load(&row.spec, &s_check, helpers, Engine::Jit, &check_maps)
        .map_err(|e| anyhow!("{e}"))?;
    let check = difftest_with(&row.spec, &guarded, &set, helpers, Engine::Jit, &fill)
        .map_err(|e| anyhow!("{e}"))?;
    Ok(MapConst {
        services: keys.len(),
        frames: frames.len(),
        slots: s.slots(),
        guard: s.guard.to_string(),
        optimise_ms,
        off_ns: off - reset,
        mapconst_ns: fast - reset,
        off_i: off_i - reset_i,
        mapconst_i: fast_i - reset_i,
        check,
    })
}

/// The traffic fw6ah itself sees: its outputs with the AH taken out would be closer, but its
/// own cost is measured on what reaches it in the experiment, the generated IPv6/TCP frames.
fn traffic_frames(outputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    outputs
        .iter()
        .map(|f| {
            // Remove the 24-byte AH fw6ah inserted after the IPv6 header (offset 54) and put
            // TCP back as the next header, with the payload length it had.
            let mut g = f[..54].to_vec();
            g[20] = 6;
            let plen = u16::from_be_bytes([g[18], g[19]]).saturating_sub(24);
            g[18..20].copy_from_slice(&plen.to_be_bytes());
            g.extend_from_slice(&f[78..]);
            g
        })
        .collect()
}

/// The live experiment: packets flow through `pre` (fw6ah) and `mid` (lb6) on this thread, the
/// control side's housekeeping runs every 50 ms between batches (as the engine runs it), and a
/// third of the way in `pre` is replaced by fw6opt (three extension headers instead of the AH).
/// Per millisecond: lb6's time per packet and how many packets its guard sent to the original.
fn replacement(o: &Opts) -> anyhow::Result<Value> {
    use hotplane_core::batch::Batch;
    use hotplane_core::{Qsbr, Stage, StageRef, Verdict, WorkerCx};
    use hotplane_ebpf::chain::live::{ChainConfig, ChainManager};
    use hotplane_ebpf::env::{Code, EbpfEnv};
    let qsbr = Qsbr::new();
    let mut reader = qsbr.register("bench chain live");
    let env = EbpfEnv::new(1, Engine::Jit);
    let manager = ChainManager::new(ChainConfig::default(), &qsbr);
    let stage = |name: &str,
                 object: &[u8]|
     -> anyhow::Result<std::sync::Arc<hotplane_ebpf::stage::XdpStage>> {
        let s = env.chain_stage(&Code::Elf(object.to_vec()), None, None, name, &qsbr)?;
        manager.register(&s);
        Ok(s)
    };
    let as_ref = |s: &std::sync::Arc<hotplane_ebpf::stage::XdpStage>| -> StageRef { s.clone() };
    let pre1 = stage(UPSTREAM.0, UPSTREAM.1)?;
    let pre2 = stage(REPLACEMENT.0, REPLACEMENT.1)?;
    let mid = stage("lb6", DOWNSTREAMS[0].1)?;
    fill_services(&env.maps).map_err(|e| anyhow!("{e}"))?;
    manager.installed("pre", 1, 1, Some(&as_ref(&pre1)));
    manager.installed("mid", 1, 1, Some(&as_ref(&mid)));
    // Frames both firewalls pass (IPv6/TCP, long enough; no source is blocked): generated
    // traffic to the services.
    let mut rng = Rng::new(0x11fe);
    let candidates = traffic(40_000, &mut rng);
    let frames: Vec<Vec<u8>> = candidates
        .into_iter()
        .filter(|f| f.len() >= 74 && f[12..14] == [0x86, 0xdd] && f[20] == 6)
        .take(4096)
        .collect();
    anyhow::ensure!(!frames.is_empty(), "no IPv6/TCP frame generated");
    let pool = Pool::new(PoolConfig { buffers: 2 * BATCH as u32, ..PoolConfig::default() })?;
    let cell = mid.chain.as_ref().ok_or_else(|| anyhow!("lb6 has no chain cell"))?;
    let start = Instant::now();
    let replace_at = o.live_ms as f64 / 3.0;
    let (mut replaced, mut next_housekeeping) = (false, 0.0);
    let mut respecialised_at: Option<f64> = None;
    let (mut windows, mut k, mut dropped) = (Vec::<(f64, u64, u64, u64)>::new(), 0usize, 0u64);
    let mut pre = pre1.clone();
    loop {
        let now = start.elapsed().as_secs_f64() * 1e3;
        if now >= o.live_ms as f64 {
            break;
        }
        if now >= next_housekeeping {
            manager.housekeeping(1);
            next_housekeeping += 50.0;
        }
        if !replaced && now >= replace_at {
            pre = pre2.clone();
            manager.installed("pre", 1, 1, Some(&as_ref(&pre2)));
            replaced = true;
        }
        if replaced
            && respecialised_at.is_none()
            && cell.current().is_some_and(|v| v.upstream == REPLACEMENT.0)
        {
            respecialised_at = Some(now);
        }
        let mut batch = Batch::new(BATCH);
        for _ in 0..BATCH {
            let mut p = pool.alloc().ok_or_else(|| anyhow!("pool empty"))?;
            p.set_frame(&frames[k % frames.len()]).map_err(|e| anyhow!("{e}"))?;
            k += 1;
            let _ = batch.push(p);
        }
        let (_, misses0) = cell.guard_counts();
        let guard = reader.guard();
        let mut cx = WorkerCx::new(0, hotplane_core::time::now_ns(), &guard);
        let all = batch.all();
        pre.run(&mut batch, all, &mut cx);
        let t = Instant::now();
        mid.run(&mut batch, all, &mut cx);
        let ns = t.elapsed().as_nanos() as u64;
        // The worker's quiescent state between batches (old variants are freed behind it).
        reader.quiescent();
        dropped += batch.iter().filter(|p| p.meta.verdict == Verdict::Drop).count() as u64;
        let (_, misses1) = cell.guard_counts();
        let window = now.floor();
        match windows.last_mut() {
            Some(w) if w.0 == window => {
                w.1 += ns;
                w.2 += BATCH as u64;
                w.3 += misses1 - misses0;
            }
            _ => windows.push((window, ns, BATCH as u64, misses1 - misses0)),
        }
    }
    let replaced_at = replace_at;
    let per_packet: Vec<(f64, f64)> =
        windows.iter().map(|w| (w.0, w.1 as f64 / w.2 as f64)).collect();
    let miss_share: Vec<(f64, f64)> =
        windows.iter().map(|w| (w.0, 100.0 * w.3 as f64 / w.2 as f64)).collect();
    let between =
        |a: f64, b: f64| windows.iter().filter(|w| w.0 >= a && w.0 < b).map(|w| w.3).sum::<u64>();
    let resp = respecialised_at.unwrap_or(f64::NAN);
    std::fs::create_dir_all(&o.out).with_context(|| o.out.display().to_string())?;
    let plot = o.out.join("chain-replacement.png");
    let mut markers =
        vec![crate::plot::Marker { at_ms: replaced_at, label: "pre: fw6ah -> fw6opt".into() }];
    if let Some(r) = respecialised_at {
        markers.push(crate::plot::Marker { at_ms: r, label: "lb6 re-specialised".into() });
    }
    let line = |name: &str, color, points| crate::plot::Line {
        name: name.into(),
        color,
        dashed: false,
        points,
    };
    crate::plot::timeline_png(
        &plot,
        "lb6 behind a replaced firewall: per-packet time and guard misses (1 ms windows)",
        &[
            crate::plot::TimelinePanel {
                y_desc: "lb6 ns per packet".into(),
                lines: vec![line(
                    "lb6 (guarded)",
                    plotters::style::RGBColor(31, 119, 180),
                    per_packet,
                )],
            },
            crate::plot::TimelinePanel {
                y_desc: "guard misses (% of packets)".into(),
                lines: vec![line(
                    "to the original",
                    plotters::style::RGBColor(214, 39, 40),
                    miss_share,
                )],
            },
        ],
        &markers,
    )?;
    Ok(json!({
        "replaced_at_ms": replaced_at,
        "respecialise_ms": resp - replaced_at,
        "misses_before": between(0.0, replaced_at),
        "misses_between": between(replaced_at, resp.max(replaced_at)),
        "misses_after": between(resp, f64::MAX),
        "packets": k,
        "dropped": dropped,
        "plot": plot.display().to_string(),
    }))
}
