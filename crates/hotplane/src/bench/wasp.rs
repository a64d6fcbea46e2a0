//! `hotplane bench wasp`: active packets per packet, next to their anchors in the same run.
//!
//! - every application of `examples/wasp/` and a FWD-only program through the `wasp` stage as
//!   configured by default (hot programs worth compiling run as machine code) and with the
//!   compiled tier off; the filter alone with the program decoded once, in each tier, with the
//!   compile time and the break-even packet count that follows; on 100-byte UDP-carried frames
//!   in batches of 32; beside
//!   `count`, `collect` and `fwd` a native Rust stage doing the same on the same store, and
//!   beside `count` the same function as an XDP program with a BPF hash map in hotplane's eBPF
//!   JIT (`examples/ebpf/xdp_wasp_count.c`);
//! - the store at scale: entries alive, bytes per entry (resident memory measured), and the
//!   packet rate of `count` with random keys over all of them;
//! - attacker-chosen colliding keys (a hash the attacker knows, all keys in one probe window)
//!   against random keys;
//! - time against code length (a least-squares fit) and the slowest 64-byte program found;
//! - the latency the stage adds to one packet.
//!
//! Every figure is measured on packets run again and again (the stores keep what earlier runs
//! wrote, so every program runs in its steady state).

use super::pipeline::round;
use super::{emit, median, Progress};
use anyhow::{anyhow, Context as _};
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::{
    time, ExternSlots, Pool, PoolConfig, ProgramKind, Qsbr, Stage, Verdict, WorkerCx,
};
use hotplane_ebpf::program::{Engine, LoadOptions, MapRegistry, Program};
use hotplane_ebpf::stage::XdpStage;
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::{elf, xdp};
use hotplane_engine::pin_to_core;
use hotplane_wasp::asm::assemble;
use hotplane_wasp::cache::DecodeCache;
use hotplane_wasp::carriage::locate;
use hotplane_wasp::ess::{Ess, EssConfig, BANK_LEN};
use hotplane_wasp::filter::{process_with, FilterConfig};
use hotplane_wasp::frame::{active_frame, Hosts, Send};
use hotplane_wasp::jit::CompileQueue;
use hotplane_wasp::wire::{WaspRepr, NO_NEXT_HEADER};
use hotplane_wasp::Env;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Args, Debug, Clone)]
pub struct Opts {
    #[arg(long)]
    pub json: bool,
    /// Packets per program and measurement.
    #[arg(long, default_value_t = 2_000_000)]
    pub packets: u64,
    /// Measurements per figure (the median is reported; runners interleave).
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Live entries of the store-at-scale measurement (at most 2^26 = 67 M per store).
    #[arg(long, default_value_t = 4_000_000)]
    pub scale_entries: usize,
    /// Core to pin the benchmark to.
    #[arg(long, default_value_t = 1)]
    pub core: usize,
    /// Measure only these programs (comma-separated names), nothing else: for profiling.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

/// Frames are padded to this size (the paper's packets), or longer when the shim needs it.
const FRAME_BYTES: usize = 100;
const BATCH: usize = 32;

/// An application: its file, declared keys and scratchpad (as `examples/wasp/README.md`).
struct App {
    name: &'static str,
    source: &'static str,
    keys: &'static [u64],
    scratch: &'static [u64],
}

const APPS: &[App] = &[
    App {
        name: "fwd",
        source: include_str!("../../../../examples/wasp/fwd.s"),
        keys: &[],
        scratch: &[],
    },
    App {
        name: "count",
        source: include_str!("../../../../examples/wasp/count.s"),
        keys: &[7],
        scratch: &[u64::MAX],
    },
    App {
        name: "collect",
        source: include_str!("../../../../examples/wasp/collect.s"),
        keys: &[7],
        scratch: &[5, u64::MAX],
    },
    App {
        name: "pathscan",
        source: include_str!("../../../../examples/wasp/pathscan.s"),
        keys: &[],
        scratch: &[30 << 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    },
    App {
        name: "trunk",
        source: include_str!("../../../../examples/wasp/trunk.s"),
        keys: &[9],
        scratch: &[1, 0, 0],
    },
    App {
        name: "advertise",
        source: include_str!("../../../../examples/wasp/advertise.s"),
        keys: &[11],
        scratch: &[0x0a01_0001, 64],
    },
    App {
        name: "nearest",
        source: include_str!("../../../../examples/wasp/nearest.s"),
        keys: &[11],
        scratch: &[u64::MAX, 64],
    },
    App {
        name: "jitter",
        source: include_str!("../../../../examples/wasp/jitter.s"),
        keys: &[42],
        scratch: &[0],
    },
    App {
        name: "ratectl",
        source: include_str!("../../../../examples/wasp/ratectl.s"),
        keys: &[],
        scratch: &[20],
    },
];

/// A UDP-carried active frame of at least [`FRAME_BYTES`].
fn frame_of(code: &[u8], keys: &[u64], scratch: &[u64]) -> anyhow::Result<Vec<u8>> {
    let repr = WaspRepr {
        next_header: NO_NEXT_HEADER,
        keys: keys.to_vec(),
        scratch: scratch.iter().flat_map(|w| w.to_be_bytes()).collect(),
        code: code.to_vec(),
        ..WaspRepr::default()
    };
    let bare = active_frame(&Hosts::default(), Send::default(), &repr, b"")?;
    let pad = vec![0u8; FRAME_BYTES.saturating_sub(bare.len())];
    Ok(active_frame(&Hosts::default(), Send::default(), &repr, &pad)?)
}

fn app_frame(app: &App) -> anyhow::Result<Vec<u8>> {
    let code = assemble(app.source).map_err(|e| anyhow!("{}: {e}", app.name))?.code;
    frame_of(&code, app.keys, app.scratch)
}

/// A `wasp` stage as the engine builds it: through the kind, one store for the node; with the
/// compiled tier (programs compiled after one run, see [`prime`]) or without it. The kind
/// comes along: its housekeeping compiles.
fn wasp_stage(jit: bool) -> anyhow::Result<(Arc<dyn Stage>, Arc<dyn ProgramKind>)> {
    let sections = BTreeMap::from([("wasp".to_string(), json!({"jit": jit, "jit_after": 1}))]);
    let qsbr = Qsbr::new();
    let setup =
        hotplane_core::KindSetup { workers: 1, qsbr: &qsbr, base_dir: None, sections: &sections };
    let kind = hotplane_wasp::kind::make(&setup).map_err(|e| anyhow!("{e}"))?;
    let ports = ["p0".to_string()];
    let externs = ExternSlots::new();
    let cx = hotplane_core::BuildCx {
        workers: 1,
        port_names: &ports,
        externs: &externs,
        flows: &[],
        qsbr: &qsbr,
        base_dir: None,
    };
    let spec = json!({"stage": "wasp", "store": "node"});
    let stage =
        kind.build(&spec, &cx).map_err(|e| anyhow!("{e}"))?.ok_or_else(|| anyhow!("no stage"))?;
    Ok((stage, kind))
}

/// Runs `frame` through the stage once and lets the control thread's housekeeping compile it,
/// so that what is measured next is the program's machine code (the interpreter without jit).
fn prime(stage: &dyn Stage, kind: &dyn ProgramKind, frame: &[u8]) -> anyhow::Result<()> {
    stage_ns(stage, frame, 1)?;
    // Housekeeping compiles at most one program per interval.
    std::thread::sleep(hotplane_wasp::jit::COMPILE_INTERVAL);
    kind.housekeeping();
    Ok(())
}

/// One program, decoded (and compiled) once: a decoder that hands it out in a fixed tier.
struct FixedTier {
    program: hotplane_wasp::Program,
    compiled: Option<hotplane_wasp::jit::CompiledProgram>,
    workspace: hotplane_wasp::vpu::Workspace,
}

impl hotplane_wasp::cache::Decoder for FixedTier {
    fn prepare(
        &mut self,
        _code: &[u8],
        _key_count: usize,
    ) -> Result<hotplane_wasp::cache::Prepared<'_>, hotplane_wasp::DecodeError> {
        let tier = match &self.compiled {
            Some(code) => hotplane_wasp::vpu::Tier::Compiled(&self.program, code),
            None => hotplane_wasp::vpu::Tier::Interpreter(&self.program),
        };
        Ok(hotplane_wasp::cache::Prepared { tier, workspace: &mut self.workspace })
    }
}

/// ns per packet of the filter running `app`'s frame with its program (decoded once) in the
/// interpreter and as machine code, interleaved: (interpreted, compiled).
fn tiers_ns(app: &App, frame: &[u8], o: &Opts) -> anyhow::Result<(f64, f64)> {
    let code = assemble(app.source).map_err(|e| anyhow!("{e}"))?.code;
    let program = hotplane_wasp::decode(&code, app.keys.len()).map_err(|e| anyhow!("{e}"))?;
    let compiled = hotplane_wasp::jit::compile(&program).map_err(|e| anyhow!("{e}"))?;
    let mut tiers = [None, Some(compiled)].map(|compiled| FixedTier {
        program: program.clone(),
        compiled,
        workspace: Default::default(),
    });
    let ess = Ess::new(&EssConfig::default()).map_err(|e| anyhow!("{e}"))?;
    let config = FilterConfig::default();
    let env = Env { time_ns: time::now_ns(), ..Env::default() };
    let shim_at = 14 + 20 + 8;
    let once = |tier: &mut FixedTier, n: u64| {
        let mut frame = frame.to_vec();
        let start = Instant::now();
        for _ in 0..n {
            let (head, shim) = frame.split_at_mut(shim_at);
            let _ = process_with(shim, &env, &head[14..], &ess, &config, tier);
        }
        start.elapsed().as_nanos() as f64 / n as f64
    };
    let (mut interpreted, mut machine) = (vec![], vec![]);
    for _ in 0..o.repeat {
        let [first, second] = &mut tiers;
        interpreted.push(once(first, o.packets / 2));
        machine.push(once(second, o.packets / 2));
    }
    Ok((median(interpreted), median(machine)))
}

/// Median time to compile `source` to machine code, µs.
fn compile_us(source: &str) -> anyhow::Result<f64> {
    let code = assemble(source).map_err(|e| anyhow!("{e}"))?.code;
    let program = hotplane_wasp::decode(&code, 4).map_err(|e| anyhow!("{e}"))?;
    let mut times = Vec::new();
    for _ in 0..9 {
        let start = Instant::now();
        hotplane_wasp::jit::compile(&program).map_err(|e| anyhow!("{e}"))?;
        times.push(start.elapsed().as_nanos() as f64 / 1e3);
    }
    Ok(median(times))
}

/// A batch of `n` classified copies of `frame`, with the pool its buffers come from.
fn batch_of(frame: &[u8], n: usize) -> anyhow::Result<(Pool, Batch)> {
    let pool = Pool::new(PoolConfig { buffers: 2 * n as u32 + 2, ..Default::default() })?;
    let mut batch = Batch::new(n);
    for _ in 0..n {
        let mut p = pool.alloc().ok_or_else(|| anyhow!("pool empty"))?;
        p.set_frame(frame).map_err(|e| anyhow!("{e}"))?;
        p.classify();
        let _ = batch.push(p);
    }
    Ok((pool, batch))
}

/// ns per packet running `stage` over batches of 32 copies of `frame`.
fn stage_ns(stage: &dyn Stage, frame: &[u8], packets: u64) -> anyhow::Result<f64> {
    let (_pool, mut batch) = batch_of(frame, BATCH)?;
    let q = Qsbr::new();
    let reader = q.register("bench");
    let guard = reader.guard();
    let mut cx = WorkerCx::new(0, time::now_ns(), &guard);
    let all = batch.all();
    let rounds = packets.div_ceil(BATCH as u64);
    for _ in 0..rounds / 10 + 1 {
        stage.run(&mut batch, all, &mut cx);
    }
    let start = Instant::now();
    for _ in 0..rounds {
        stage.run(&mut batch, all, &mut cx);
    }
    Ok(start.elapsed().as_nanos() as f64 / (rounds * BATCH as u64) as f64)
}

/// `count`, `collect` and `fwd` in plain Rust on the same store and frames: find the shim,
/// read its key and scratchpad, do the work, decide. No checksum, no decode, no VPU.
struct Native {
    app: &'static str,
    ess: Ess,
}

impl Native {
    fn one(&self, frame: &mut [u8], now: u64) -> Verdict {
        let Some(ip) = frame.get_mut(14..) else { return Verdict::Pass };
        let Some(found) = locate(ip, Some(hotplane_wasp::wire::DEFAULT_UDP_PORT)) else {
            return Verdict::Pass;
        };
        let shim = &mut ip[found.shim_offset..found.end];
        if self.app == "fwd" || shim.len() < 40 {
            return Verdict::Pass;
        }
        let word = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap_or_default());
        let key = word(&shim[16..24]);
        let mut txn = self.ess.begin(&[key], now);
        let mut bank = txn.get(0).unwrap_or([0; BANK_LEN]);
        match self.app {
            "count" => {
                let counter = word(&bank[..8]) + 1;
                bank[..8].copy_from_slice(&counter.to_be_bytes());
                let _ = txn.put(0, &bank);
                if counter > word(&shim[24..32]) {
                    return Verdict::Drop;
                }
                Verdict::Pass
            }
            _ => {
                // collect: sum the sample into word 0, count into word 1; forward the sum
                // once n samples met, else drop.
                let (sample, n) = (word(&shim[24..32]), word(&shim[32..40]));
                let seen = word(&bank[8..16]) + 1;
                let sum = word(&bank[..8]).wrapping_add(sample);
                bank[..8].copy_from_slice(&sum.to_be_bytes());
                bank[8..16].copy_from_slice(&seen.to_be_bytes());
                let _ = txn.put(0, &bank);
                if seen >= n {
                    shim[24..32].copy_from_slice(&sum.to_be_bytes());
                    shim[32..40].fill(0);
                    return Verdict::Pass;
                }
                Verdict::Drop
            }
        }
    }
}

impl Stage for Native {
    fn name(&self) -> &str {
        self.app
    }

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let packets = batch.as_mut_slice();
        for i in sel {
            if let Some(p) = packets.get_mut(i) {
                let (frame, meta) = p.frame_mut();
                meta.verdict = self.one(frame, cx.now_ns);
            }
        }
    }
}

/// `count` as an XDP program with a BPF hash map, in hotplane's eBPF JIT.
fn ebpf_count_stage() -> anyhow::Result<XdpStage> {
    let object = include_bytes!("../../../../examples/ebpf/xdp_wasp_count.o");
    let spec = elf::load(object, None).map_err(|e| anyhow!("xdp_wasp_count: {e}"))?;
    let reg = MapRegistry::default();
    let opts = LoadOptions { engine: Engine::Jit, cpus: 1, ..LoadOptions::default() };
    let prog = Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, Some(&reg))
        .map_err(|e| anyhow!("xdp_wasp_count: {e}"))?;
    Ok(XdpStage::new(Arc::new(prog), "xdp_wasp_count"))
}

/// ns per packet of the filter itself over `frames` (in turn) on `ess`, their programs in
/// the compiled tier (compiled after the first run, before the measurement).
fn filter_ns<S: BuildHasher>(ess: &Ess<S>, frames: &mut [Vec<u8>], packets: u64) -> f64 {
    let mut cache = DecodeCache::new();
    let queue = Arc::new(CompileQueue::default());
    cache.set_jit(Some((&queue, 1)));
    let config = FilterConfig::default();
    let mut env = Env { time_ns: time::now_ns(), ..Env::default() };
    let mut run = |n: u64| {
        for i in 0..n {
            let frame = &mut frames[i as usize % frames.len()];
            let (head, shim) = frame.split_at_mut(42);
            env.packet_len = (shim.len() + 28) as u64;
            let _ = process_with(shim, &env, &head[14..], ess, &config, &mut cache);
        }
    };
    run(1);
    queue.serve(usize::MAX);
    run(packets / 10);
    let start = Instant::now();
    run(packets);
    start.elapsed().as_nanos() as f64 / packets as f64
}

/// Resident memory of this process, bytes.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// A small deterministic generator (xorshift*), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `count` frames with keys drawn from `keys` at random.
fn count_frames(keys: &[u64], n: usize, rng: &mut Rng) -> anyhow::Result<Vec<Vec<u8>>> {
    let code = assemble(APPS[1].source).map_err(|e| anyhow!("{e}"))?.code;
    (0..n)
        .map(|_| frame_of(&code, &[keys[rng.next() as usize % keys.len()]], &[u64::MAX]))
        .collect()
}

fn store_at_scale(o: &Opts) -> anyhow::Result<Value> {
    let entries = o.scale_entries;
    // A store filled to its last slot refuses a few creations (full probe windows): sized 1 %
    // above the entries wanted, and topped up until they are all alive. The memory measured
    // is the whole store's, per live entry.
    let capacity = (entries + entries / 100).min(hotplane_wasp::ess::MAX_CAPACITY).max(entries);
    let config = EssConfig { capacity, lifetime_ns: 3_600_000_000_000, ..EssConfig::default() };
    let before = resident_bytes();
    let ess = Ess::new(&config).map_err(|e| anyhow!("--scale-entries {entries}: {e}"))?;
    let mut rng = Rng(0x5eed);
    let mut keys: Vec<u64> = Vec::with_capacity(entries + entries / 50);
    let now = time::now_ns();
    let mut bank = [0u8; BANK_LEN];
    let mut live = 0;
    while live < entries as u64 && keys.len() < entries + entries / 50 {
        let want = (entries as u64 - live) as usize;
        for _ in 0..want.max(1) {
            let key = rng.next();
            bank[..8].copy_from_slice(&(keys.len() as u64).to_be_bytes());
            if ess.put(key, &bank, now).is_ok() {
                keys.push(key);
            }
        }
        live = ess.stats().live;
    }
    // The keys' own vector is not the store's: subtract it.
    let store_bytes =
        resident_bytes().saturating_sub(before).saturating_sub(8 * keys.capacity() as u64);
    let mut frames = count_frames(&keys, 1 << 16, &mut rng)?;
    let ns = median((0..o.repeat).map(|_| filter_ns(&ess, &mut frames, o.packets)).collect());
    Ok(json!({
        "live_entries": live,
        "bytes_per_entry": round(store_bytes as f64 / live.max(1) as f64, 1),
        "mpps": round(1e3 / ns, 2),
        "ns": round(ns, 1),
    }))
}

/// Every key hashes to 0: the attacker knows the hash (a salted one denies them that).
#[derive(Default)]
struct Known;

impl Hasher for Known {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, _: &[u8]) {}
}

/// (benign ns, adversarial ns): `count` with 4096 random keys on a salted store, and with
/// 4096 keys that all collide on a store whose hash the attacker knows.
fn adversarial(o: &Opts) -> anyhow::Result<(f64, f64)> {
    let config = EssConfig::default();
    let mut rng = Rng(0xbad);
    let keys: Vec<u64> = (0..4096).map(|_| rng.next()).collect();
    let mut frames = count_frames(&keys, 4096, &mut rng)?;
    let benign = Ess::new(&config).map_err(|e| anyhow!("{e}"))?;
    let attacked = Ess::with_hasher(&config, BuildHasherDefault::<Known>::default())
        .map_err(|e| anyhow!("{e}"))?;
    let (mut b, mut a) = (vec![], vec![]);
    for _ in 0..o.repeat {
        b.push(filter_ns(&benign, &mut frames, o.packets));
        a.push(filter_ns(&attacked, &mut frames, o.packets));
    }
    Ok((median(b), median(a)))
}

/// A straight-line program of exactly `len` bytes: `ld a, s.64[0]; addi 3; st s.64[1], a`
/// repeated, topped up with `inc`.
fn straight_line(len: usize) -> String {
    let mut text = String::new();
    let mut bytes = 0;
    while bytes + 4 <= len {
        text.push_str("ld a, s.64[0]\naddi 3\nst s.64[1], a\n");
        bytes += 4;
    }
    for _ in bytes..len {
        text.push_str("inc\n");
    }
    text
}

/// 64-byte programs meant to be slow: the slowest measured is reported.
fn worst_candidates() -> Vec<(&'static str, String, Vec<u64>)> {
    let mut store = String::from(
        "map k0\nmap k1\nmap k2\nmap k3\nlookup k0\nlookup k1\nlookup k2\nlookup k3\n",
    );
    store.push_str(&"insert k0\ninsert k1\ninsert k2\ninsert k3\n".repeat(3));
    store.push_str(&"st m.64[1], a\n".repeat(64 - 20));
    let mut indexed = String::from("imm b, 1\n");
    indexed.push_str(&"ldx a, s.64[b+0]\nstx s.64[b+1], a\n".repeat(15));
    indexed.push_str(&"inc\n".repeat(64 - 2 - 60));
    vec![
        ("64 x inc", "inc\n".repeat(64), vec![]),
        ("store-heavy (4 keys)", store, vec![1, 2, 3, 4]),
        ("indexed scratch", indexed, vec![]),
        ("straight line", straight_line(64), vec![]),
    ]
}

/// Least squares `y = a + b x`: (a, b, r²).
fn fit(points: &[(f64, f64)]) -> (f64, f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points.iter().fold((0.0, 0.0), |(sx, sy), (x, y)| (sx + x, sy + y));
    let (mx, my) = (sx / n, sy / n);
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let syy: f64 = points.iter().map(|(_, y)| (y - my) * (y - my)).sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let r2 = if sxx > 0.0 && syy > 0.0 { sxy * sxy / (sxx * syy) } else { 0.0 };
    (my - b * mx, b, r2)
}

/// p50 and p99 of the time one packet spends in the stage (batches of one), less the cost of
/// reading the clock twice.
fn added_latency(stage: &dyn Stage, frame: &[u8]) -> anyhow::Result<(f64, f64)> {
    let (_pool, mut batch) = batch_of(frame, 1)?;
    let q = Qsbr::new();
    let reader = q.register("bench");
    let guard = reader.guard();
    let mut cx = WorkerCx::new(0, time::now_ns(), &guard);
    let one = Mask::single(0);
    let samples = 200_000;
    let (mut with, mut without) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for _ in 0..samples {
        let t = Instant::now();
        stage.run(&mut batch, one, &mut cx);
        with.push(t.elapsed().as_nanos() as f64);
        let t = Instant::now();
        without.push(t.elapsed().as_nanos() as f64);
    }
    let clock = median(without);
    with.sort_by(f64::total_cmp);
    let at = |q: f64| (with[((with.len() - 1) as f64 * q) as usize] - clock).max(0.0);
    Ok((at(0.5), at(0.99)))
}

pub fn run(o: &Opts) -> anyhow::Result<()> {
    pin_to_core(o.core);
    let mut progress = Progress::new("wasp", o.json);
    let (stage, kind) = wasp_stage(true)?;
    let (interpreted, _) = wasp_stage(false)?;
    let ebpf = ebpf_count_stage()?;
    let steps = APPS.len() as u64 * u64::from(o.repeat) + 3;
    let mut done = 0;
    let mut programs = Vec::new();
    let mut count_ns = 0.0;
    for app in APPS.iter().filter(|a| o.only.is_empty() || o.only.iter().any(|n| n == a.name)) {
        let frame = app_frame(app)?;
        prime(stage.as_ref(), kind.as_ref(), &frame)?;
        let native = matches!(app.name, "count" | "collect" | "fwd").then(|| Native {
            app: app.name,
            ess: Ess::new(&EssConfig::default()).expect("the default store config is valid"),
        });
        let (mut ours, mut cached, mut theirs, mut jit) = (vec![], vec![], vec![], vec![]);
        for _ in 0..o.repeat {
            // Interleaved, so that drift on this shared machine hits every runner alike.
            ours.push(stage_ns(stage.as_ref(), &frame, o.packets)?);
            cached.push(stage_ns(interpreted.as_ref(), &frame, o.packets)?);
            if let Some(native) = &native {
                theirs.push(stage_ns(native, &frame, o.packets)?);
            }
            if app.name == "count" {
                jit.push(stage_ns(&ebpf, &frame, o.packets)?);
            }
            done += 1;
            progress.update(done, steps);
        }
        let (ns, interpreted_ns) = (median(ours), median(cached));
        if app.name == "count" {
            count_ns = ns;
        }
        let code = assemble(app.source).map_err(|e| anyhow!("{e}"))?.code;
        let code_bytes = code.len();
        let program = hotplane_wasp::decode(&code, app.keys.len()).map_err(|e| anyhow!("{e}"))?;
        // The tier the stage runs it in: programs mostly of bank and store steps stay on the
        // interpreter (machine code would not be faster).
        let tier = if hotplane_wasp::jit::worth_compiling(&program) {
            "compiled"
        } else {
            "cached-interpreter"
        };
        let native_ns = (!theirs.is_empty()).then(|| median(theirs));
        let ebpf_ns = (!jit.is_empty()).then(|| median(jit));
        let compile_us = compile_us(app.source)?;
        let (filter_interpreted_ns, filter_compiled_ns) = tiers_ns(app, &frame, o)?;
        // Packets after which compiling has paid for itself (none while it saves nothing).
        let saved = filter_interpreted_ns - filter_compiled_ns;
        let break_even = (saved > 0.0).then(|| (compile_us * 1e3 / saved).ceil());
        programs.push(json!({
            "name": app.name,
            "code_bytes": code_bytes,
            "frame_bytes": frame.len(),
            "mpps": round(1e3 / ns, 2),
            "ns": round(ns, 2),
            "tier": tier,
            "interpreted_ns": round(interpreted_ns, 2),
            "interpreted_mpps": round(1e3 / interpreted_ns, 2),
            "compile_us": round(compile_us, 1),
            "filter_interpreted_ns": round(filter_interpreted_ns, 2),
            "filter_compiled_ns": round(filter_compiled_ns, 2),
            "break_even_packets": break_even,
            "native_ns": native_ns.map(|n| round(n, 2)),
            "over_native": native_ns.map(|n| round(ns / n, 2)),
            "interpreted_over_native": native_ns.map(|n| round(interpreted_ns / n, 2)),
            "ebpf_ns": ebpf_ns.map(|n| round(n, 2)),
            "over_ebpf": ebpf_ns.map(|n| round(ns / n, 2)),
        }));
    }
    if !o.only.is_empty() {
        let out = json!({"bench": "wasp", "packets": o.packets, "programs": programs});
        emit(&out, o.json);
        return Ok(());
    }
    let ess_scale = store_at_scale(o).context("the store at scale")?;
    progress.update(done + 1, steps);
    let (benign, attacked) = adversarial(o)?;
    progress.update(done + 2, steps);

    let mut points = Vec::new();
    for len in [4, 8, 16, 24, 32, 40, 48, 56, 64] {
        let code = assemble(&straight_line(len)).map_err(|e| anyhow!("{e}"))?.code;
        let frame = frame_of(&code, &[], &[0, 0])?;
        prime(stage.as_ref(), kind.as_ref(), &frame)?;
        points.push((len as f64, stage_ns(stage.as_ref(), &frame, o.packets / 2)?));
    }
    let (a, b, r2) = fit(&points);
    let mut worst = ("", 0.0);
    for (name, text, keys) in worst_candidates() {
        let code = assemble(&text).map_err(|e| anyhow!("{name}: {e}"))?.code;
        if code.len() != 64 {
            return Err(anyhow!("worst-case candidate `{name}` is {} bytes, not 64", code.len()));
        }
        let frame = frame_of(&code, &keys, &[0, 0, 0])?;
        prime(stage.as_ref(), kind.as_ref(), &frame)?;
        let ns = stage_ns(stage.as_ref(), &frame, o.packets / 2)?;
        if ns > worst.1 {
            worst = (name, ns);
        }
    }
    let (p50, p99) = added_latency(stage.as_ref(), &app_frame(&APPS[1])?)?;
    progress.update(steps, steps);

    let count = programs.iter().find(|p| p["name"] == "count").cloned().unwrap_or_default();
    let count_interpreted_over_native =
        count["interpreted_over_native"].as_f64().unwrap_or(f64::INFINITY);
    let collect = programs.iter().find(|p| p["name"] == "collect").cloned().unwrap_or_default();
    let over_native = count["over_native"].as_f64().unwrap_or(f64::INFINITY);
    let targets = json!({
        "count_mpps_ge_20": count["mpps"].as_f64().unwrap_or(0.0) >= 20.0,
        "count_interpreted_over_native_le_1_3": count_interpreted_over_native <= 1.3,
        "count_compiled_over_native_le_1_1": over_native <= 1.1,
        "collect_mpps_ge_15": collect["mpps"].as_f64().unwrap_or(0.0) >= 15.0,
        "scale_30m_entries": ess_scale["live_entries"].as_u64().unwrap_or(0) >= 30_000_000,
        "scale_bytes_per_entry_le_32": ess_scale["bytes_per_entry"].as_f64().unwrap_or(f64::INFINITY) <= 32.0,
        "scale_mpps_ge_8": ess_scale["mpps"].as_f64().unwrap_or(0.0) >= 8.0,
        "adversarial_ge_0_9": benign / attacked >= 0.9,
        "length_r2_ge_0_95": r2 >= 0.95,
        "worst64_le_4x_count": worst.1 / count_ns <= 4.0,
        "latency_p50_le_100ns": p50 <= 100.0,
    });
    progress.finish(&format!(
        "count {:.1} ns ({:.1} Mpps), native {}, eBPF {}; collect {:.1} Mpps; {} entries at {} B/entry, {} Mpps random; adversarial/benign {:.2}; {:.1} + {:.2} ns/byte (r² {:.3}), worst 64-byte `{}` {:.1}x count; added latency p50 {:.0} ns, p99 {:.0} ns",
        count_ns,
        1e3 / count_ns,
        count["native_ns"],
        count["ebpf_ns"],
        collect["mpps"].as_f64().unwrap_or(0.0),
        ess_scale["live_entries"],
        ess_scale["bytes_per_entry"],
        ess_scale["mpps"],
        benign / attacked,
        a,
        b,
        r2,
        worst.0,
        worst.1 / count_ns,
        p50,
        p99,
    ));
    let out = json!({
        "bench": "wasp",
        "frame_bytes": FRAME_BYTES,
        "batch": BATCH,
        "packets": o.packets,
        "repeat": o.repeat,
        "core": o.core,
        "programs": programs,
        "ess_scale": ess_scale,
        "adversarial_over_benign": round(benign / attacked, 3),
        "benign_ns": round(benign, 2),
        "adversarial_ns": round(attacked, 2),
        "length_fit": {
            "a_ns": round(a, 2),
            "b_ns_per_byte": round(b, 3),
            "r2": round(r2, 4),
            "worst64": worst.0,
            "worst64_ns": round(worst.1, 2),
            "worst64_over_count": round(worst.1 / count_ns, 2),
        },
        "added_latency_ns_p50": round(p50, 1),
        "added_latency_ns_p99": round(p99, 1),
        "targets": targets,
        "paper": {"mpps_per_microengine": 0.79, "native_mpps": 1.55, "latency_us": 6.3, "break_even_packets": 63},
    });
    emit(&out, o.json);
    Ok(())
}
