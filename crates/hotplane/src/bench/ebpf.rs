//! `hotplane bench ebpf`: eBPF execution and update latency.
//!
//! Execution: the reference work's three programs (`dummy`, `filter`, `change`) and the two
//! realistic examples (`count`, `lb`), all built by clang from `examples/ebpf`, each run as the
//! stage at `pre` runs them (batches of 32, one XDP context per packet) by the interpreter and
//! the JIT; next to the Linux kernel running the same object with `BPF_PROG_TEST_RUN`
//! (repeat >= 1e6) and to rbpf's JIT (the `rbpf_anchor` example, rbpf being a
//! dev-dependency). Like the kernel's test run, each runner executes the program over and
//! over on the same packet, so every program is written to do the same work each time.
//!
//! Updates: with traffic flowing through two workers, `--updates` replacements at each of
//! `pre`, `mid`, `post`, as bytecode and as ELF objects, through the control API's
//! authenticated update path: the time from submitting the update to every worker running
//! the new program ("visible"), and to the acknowledgement (old program freed after a grace
//! period). No packet may be lost.

use super::pipeline::round;
use super::{emit, median, Progress};
use crate::config::{Config, DataplaneConfig, IdlePolicy, PortConfig, PortKind};
use hotplane_ebpf::env::Code;
use hotplane_engine::{pin_to_core, TRACKED};

use anyhow::{anyhow, Context as _};
use hdrhistogram::Histogram;
use hotplane_control::api::Request;
use hotplane_control::{Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_core::batch::Batch;
use hotplane_core::wire::{EthernetAddress, UdpFrame};
use hotplane_core::{time, Pool, PoolConfig, Position, Qsbr, Stage, WorkerCx};
use hotplane_ebpf::kernel::KernelProgram;
use hotplane_ebpf::program::{Engine, LoadOptions, MapRegistry, Program, ProgramSpec};
use hotplane_ebpf::stage::XdpStage;
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::{elf, xdp};
use hotplane_io::mem::{GenSpec, MemReport, MemSpec, SinkSpec};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The benchmark programs, as clang built them (`examples/ebpf/build.sh`).
pub const OBJECTS: [(&str, &[u8]); 5] = [
    ("dummy", include_bytes!("../../../../examples/ebpf/xdp_dummy.o")),
    ("filter", include_bytes!("../../../../examples/ebpf/xdp_filter.o")),
    ("change", include_bytes!("../../../../examples/ebpf/xdp_change.o")),
    ("count", include_bytes!("../../../../examples/ebpf/xdp_count.o")),
    ("lb", include_bytes!("../../../../examples/ebpf/xdp_lb.o")),
];

pub fn object(name: &str) -> anyhow::Result<&'static [u8]> {
    OBJECTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, o)| *o)
        .ok_or_else(|| anyhow!("no benchmark program `{name}`"))
}

pub fn spec(name: &str) -> anyhow::Result<ProgramSpec> {
    elf::load(object(name)?, None).map_err(|e| anyhow!("{name}: {e}"))
}

/// The load balancer's virtual service (and, so that repeated runs keep hitting it, its
/// backend's address too).
const VIP: [u8; 4] = [10, 0, 0, 100];

/// The packet each program is measured on: a 64-byte IPv4/UDP frame; to 10.0.0.2:5000 (the
/// filter's match), or to the load balancer's service.
pub fn frame(name: &str) -> Vec<u8> {
    let (dst, port): ([u8; 4], u16) = if name == "lb" { (VIP, 80) } else { ([10, 0, 0, 2], 5000) };
    let f = UdpFrame {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: IpAddr::from([10, 0, 0, 1]),
        dst_ip: IpAddr::from(dst),
        src_port: 1024,
        dst_port: port,
    };
    let payload = [0u8; 64 - 42];
    let mut buf = vec![0u8; f.header_len() + payload.len()];
    let n = f.emit(&payload, &mut buf).unwrap_or(buf.len());
    buf.truncate(n);
    buf
}

/// Writes one map entry: `set(map, key, value)`.
pub type SetEntry<'a> = dyn FnMut(&str, &[u8], &[u8]) -> Result<(), String> + 'a;

/// Map contents a program needs before it runs.
pub fn setup(name: &str, set: &mut SetEntry<'_>) -> Result<(), String> {
    if name == "lb" {
        let mut cfg = VIP.to_vec();
        cfg.extend_from_slice(&80u16.to_be_bytes());
        cfg.extend_from_slice(&1u16.to_ne_bytes());
        set("xdp_lb/config", &0u32.to_ne_bytes(), &cfg)?;
        let mut backend = VIP.to_vec();
        backend.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0, 0]);
        set("xdp_lb/backends", &0u32.to_ne_bytes(), &backend)?;
    }
    Ok(())
}

pub struct Opts {
    pub packets: u64,
    pub repeat: u32,
    pub updates: u32,
    pub core: usize,
    pub kernel: bool,
    pub rbpf: bool,
    pub json: bool,
}

/// ns per packet for our engine, running the stage on batches of 32 copies of the frame.
pub fn ours(name: &str, engine: Engine, packets: u64) -> anyhow::Result<f64> {
    let spec = spec(name)?;
    let reg = MapRegistry::default();
    let opts = LoadOptions { engine, cpus: 1, ..LoadOptions::default() };
    let prog = Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, Some(&reg))
        .map_err(|e| anyhow!("{name}: {e}"))?;
    setup(name, &mut |m, k, v| {
        reg.get(m).ok_or(format!("no map {m}"))?.update_copy(k, v, 0).map_err(|e| e.to_string())
    })
    .map_err(anyhow::Error::msg)?;
    let stage = XdpStage::new(Arc::new(prog), name);
    let pool = Pool::new(PoolConfig { buffers: 64, ..Default::default() })?;
    let mut batch = Batch::new(32);
    let f = frame(name);
    for _ in 0..32 {
        let mut p = pool.alloc().ok_or_else(|| anyhow!("pool empty"))?;
        p.set_frame(&f).map_err(|e| anyhow!("{e}"))?;
        let _ = batch.push(p);
    }
    let q = Qsbr::new();
    let reader = q.register("bench");
    let guard = reader.guard();
    let mut cx = WorkerCx::new(0, time::now_ns(), &guard);
    let all = batch.all();
    let rounds = packets.div_ceil(32);
    for _ in 0..rounds / 10 + 1 {
        stage.run(&mut batch, all, &mut cx);
    }
    let t = Instant::now();
    for _ in 0..rounds {
        stage.run(&mut batch, all, &mut cx);
    }
    Ok(t.elapsed().as_nanos() as f64 / (rounds * 32) as f64)
}

/// ns per packet calling the program directly on one packet, over and over: the loop shape
/// of the rbpf anchor and of the kernel's test run, without the stage around it.
pub fn ours_call(name: &str, engine: Engine, packets: u64) -> anyhow::Result<f64> {
    let spec = spec(name)?;
    let reg = MapRegistry::default();
    let opts = LoadOptions { engine, cpus: 1, ..LoadOptions::default() };
    let prog = Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, Some(&reg))
        .map_err(|e| anyhow!("{name}: {e}"))?;
    setup(name, &mut |m, k, v| {
        reg.get(m).ok_or(format!("no map {m}"))?.update_copy(k, v, 0).map_err(|e| e.to_string())
    })
    .map_err(anyhow::Error::msg)?;
    let pool = Pool::new(PoolConfig { buffers: 4, ..Default::default() })?;
    let mut p = pool.alloc().ok_or_else(|| anyhow!("pool empty"))?;
    p.set_frame(&frame(name)).map_err(|e| anyhow!("{e}"))?;
    for _ in 0..packets / 10 + 1 {
        std::hint::black_box(prog.run_xdp(&mut p, 0));
    }
    let t = Instant::now();
    for _ in 0..packets {
        std::hint::black_box(prog.run_xdp(&mut p, 0));
    }
    Ok(t.elapsed().as_nanos() as f64 / packets as f64)
}

/// ns per packet in the kernel (`BPF_PROG_TEST_RUN`, its own timing).
pub fn kernel(name: &str, packets: u64) -> anyhow::Result<f64> {
    let spec = spec(name)?;
    let k = KernelProgram::load_xdp(&spec).map_err(|e| anyhow!("{name}: {e}"))?;
    setup(name, &mut |m, key, v| {
        k.map(m).ok_or(format!("no map {m}"))?.update(key, v).map_err(|e| e.to_string())
    })
    .map_err(anyhow::Error::msg)?;
    let f = frame(name);
    k.test_run(&f, (packets / 10).max(1) as u32).map_err(anyhow::Error::msg)?;
    // Long runs in slices: the kernel reports a mean per run in whole nanoseconds.
    let slices = 4;
    let mut total = 0.0;
    for _ in 0..slices {
        let r = k.test_run(&f, (packets / slices).max(1) as u32).map_err(anyhow::Error::msg)?;
        total += r.duration_ns as f64;
    }
    Ok(total / slices as f64)
}

/// The `rbpf_anchor` example binary next to this one, built on demand.
fn rbpf_anchor() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().ok_or_else(|| anyhow!("no directory for {}", exe.display()))?;
    let path = dir.join("examples/rbpf_anchor");
    if path.exists() {
        return Ok(path);
    }
    let profile = if dir.ends_with("release") { vec!["--release"] } else { vec![] };
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let ok = std::process::Command::new("cargo")
        .args(["build", "--quiet", "--example", "rbpf_anchor", "--manifest-path", manifest])
        .args(&profile)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if ok && path.exists() {
        Ok(path)
    } else {
        Err(anyhow!(
            "the rbpf anchor is not built: cargo build --release -p hotplane --example rbpf_anchor"
        ))
    }
}

/// ns per packet in rbpf's JIT, or why it cannot run the program.
pub fn rbpf(name: &str, packets: u64, core: usize) -> Result<f64, String> {
    let bin = rbpf_anchor().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(bin)
        .args([name, &packets.to_string(), &core.to_string()])
        .output()
        .map_err(|e| e.to_string())?;
    let line = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").to_string();
    let v: Value =
        serde_json::from_str(&line).map_err(|_| format!("rbpf_anchor printed `{line}`"))?;
    match v["ns_per_packet"].as_f64() {
        Some(ns) => Ok(ns),
        None => Err(v["error"].as_str().unwrap_or("unknown error").to_string()),
    }
}

fn execution(o: &Opts, progress: &mut Progress) -> anyhow::Result<Vec<Value>> {
    pin_to_core(o.core);
    let mut rows = Vec::new();
    let total = (OBJECTS.len() * o.repeat as usize) as u64;
    let mut done = 0;
    for (name, _) in OBJECTS {
        let (mut interp, mut jit, mut call, mut kern, mut rb) =
            (vec![], vec![], vec![], vec![], vec![]);
        let mut kernel_err = None;
        let mut rbpf_err = None;
        for _ in 0..o.repeat {
            // Interleaved, so that drift on this shared machine hits every runner alike.
            interp.push(ours(name, Engine::Interp, (o.packets / 10).max(100_000))?);
            jit.push(ours(name, Engine::Jit, o.packets)?);
            call.push(ours_call(name, Engine::Jit, o.packets)?);
            if o.kernel {
                match kernel(name, o.packets) {
                    Ok(ns) => kern.push(ns),
                    Err(e) => kernel_err = Some(e.to_string()),
                }
            }
            if o.rbpf {
                match rbpf(name, o.packets, o.core) {
                    Ok(ns) => rb.push(ns),
                    Err(e) => rbpf_err = Some(e),
                }
            }
            done += 1;
            progress.update(done, total);
        }
        let jit_ns = median(jit);
        let call_ns = median(call);
        let kernel_ns = (!kern.is_empty()).then(|| median(kern));
        let rbpf_ns = (!rb.is_empty()).then(|| median(rb));
        let ratio = |ours: f64, anchor: Option<f64>| anchor.map(|a| round(ours / a, 2));
        rows.push(json!({
            "program": name,
            "insns": spec(name)?.insns.len(),
            "interp_ns": round(median(interp), 2),
            "jit_ns": round(jit_ns, 2),
            "jit_call_ns": round(call_ns, 2),
            "kernel_ns": kernel_ns.map(|v| round(v, 2)),
            "rbpf_ns": rbpf_ns.map(|v| round(v, 2)),
            "jit_over_kernel": ratio(jit_ns, kernel_ns),
            "jit_over_rbpf": ratio(jit_ns, rbpf_ns),
            "jit_call_over_rbpf": ratio(call_ns, rbpf_ns),
            "kernel_error": kernel_err,
            "rbpf_error": rbpf_err,
        }));
    }
    Ok(rows)
}

/// The update benchmark's plane: one busy-polling worker on core 1, one mem port looping back,
/// stamped traffic; the control thread and the submitter share core 0.
fn update_config() -> Config {
    let cores = hotplane_engine::online_cores();
    Config {
        dataplane: DataplaneConfig {
            workers: 1,
            cores: (cores >= 2).then(|| vec![1]),
            idle: IdlePolicy::Poll,
            ..Default::default()
        },
        ports: vec![PortConfig::new(
            "p0",
            None,
            PortKind::Mem(MemSpec {
                gen: Some(GenSpec { flows: 2, ..Default::default() }),
                sink: SinkSpec::default(),
            }),
        )],
        control: crate::config::ControlConfig {
            keys: vec![crate::config::KeyConfig {
                id: 1,
                key: Some(hex::encode(BENCH_KEY)),
                key_file: None,
            }],
            max_update_bytes: 1 << 20,
            ..Default::default()
        },
        ..Default::default()
    }
}

const BENCH_KEY: [u8; 32] = [7; 32];

/// A small bytecode program (10 instructions) writing `mark` into the stamp.
fn mark_bytecode(mark: u16) -> anyhow::Result<Vec<u8>> {
    let text = format!(
        "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r4, %r2\nadd %r4, 60\njgt %r4, %r3, out\n\
         mov %r5, {}\nstxh [%r2+58], %r5\nout:\nmov %r0, 2\nexit\n",
        mark.swap_bytes()
    );
    Code::Asm(text).payload().map_err(anyhow::Error::msg)
}

struct UpdateRow {
    position: Position,
    form: &'static str,
    insns: usize,
    visible: Histogram<u64>,
    acked: Histogram<u64>,
}

fn updates(o: &Opts, progress: &mut Progress) -> anyhow::Result<(Vec<UpdateRow>, MemReport)> {
    let cfg = update_config();
    // The submitting thread stays off the worker's core, as the control thread does.
    if let Some(spare) = hotplane_engine::spare_cores(cfg.dataplane.cores.as_deref()) {
        hotplane_engine::pin_to_cores(&spare);
    }
    let plane = crate::start(cfg)?;
    let stats = plane.worker_stats().to_vec();
    while stats.iter().any(|s| s.packets.get() < 50_000) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let elf_a = object("filter")?.to_vec();
    let elf_b = object("change")?.to_vec();
    let mut rows = Vec::new();
    let total = (Position::ALL.len() * 2) as u64 * o.updates as u64;
    let mut done = 0;
    let mut seq = time::unix_micros();
    for pos in Position::ALL {
        let tracked = TRACKED.iter().position(|t| *t == pos.as_str()).unwrap_or(0);
        for form in ["bytecode", "elf"] {
            let mut visible = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
            let mut acked = visible.clone();
            let mut insns = 0;
            for i in 0..o.updates {
                let (kind, payload) = if form == "bytecode" {
                    (Kind::EbpfBytecode, mark_bytecode(100 + (i % 2) as u16)?)
                } else {
                    (Kind::EbpfElf, if i % 2 == 0 { elf_a.clone() } else { elf_b.clone() })
                };
                if i == 0 {
                    insns = Code::from_update(kind.code(), &payload)
                        .and_then(|c| c.spec(None).ok())
                        .map_or(0, |s| s.insns.len());
                }
                seq += 1;
                let header = UpdateHeader {
                    kind,
                    flags: Flags::default(),
                    key_id: 1,
                    seq,
                    target: Target::Position(pos),
                    worker: WorkerScope::All,
                };
                let frags = hotplane_control::envelope::build(
                    &header,
                    &payload,
                    Some(&BENCH_KEY),
                    crate::inband::API_FRAGMENT,
                )?;
                let req = Request::Update { fragments: frags.iter().map(hex::encode).collect() };
                let before: Vec<u64> =
                    stats.iter().map(|s| s.seen_version[tracked].get()).collect();
                let t0 = time::now_ns();
                let r = plane.request(req);
                let t1 = time::now_ns();
                let ack = r
                    .result
                    .as_ref()
                    .and_then(|v| v.as_array())
                    .and_then(|a| a.last())
                    .cloned()
                    .unwrap_or(Value::Null);
                if !r.ok || ack["status"] != "applied" {
                    anyhow::bail!("update {i} at {pos} ({form}) not applied: {:?} {ack}", r.error);
                }
                let deadline = Instant::now() + Duration::from_secs(5);
                while stats.iter().zip(&before).any(|(s, b)| s.seen_version[tracked].get() <= *b) {
                    if Instant::now() > deadline {
                        anyhow::bail!("a worker did not pick up the update at {pos}");
                    }
                    std::thread::sleep(Duration::from_micros(10));
                }
                let seen = stats.iter().map(|s| s.seen_at_ns[tracked].get()).max().unwrap_or(t0);
                let _ = visible.record(seen.saturating_sub(t0).max(1));
                let _ = acked.record(t1.saturating_sub(t0).max(1));
                done += 1;
                progress.update(done, total);
                std::thread::sleep(Duration::from_micros(100));
            }
            rows.push(UpdateRow { position: pos, form, insns, visible, acked });
        }
    }
    let handles = plane.mem_handles();
    plane.stop();
    Ok((rows, MemReport::merge(&handles)))
}

pub fn run(o: &Opts) -> anyhow::Result<()> {
    let mut progress = Progress::new("ebpf", o.json);
    progress.note(&format!(
        "execution: {} packets per runner, median of {}, pinned to core {}; then {} updates per position and form",
        o.packets, o.repeat, o.core, o.updates
    ));
    let rows = execution(o, &mut progress).context("execution benchmark")?;
    for r in &rows {
        progress.note(&format!(
            "{:7} interp {:>7} ns  jit {:>6} ns (call {:>6})  kernel {:>6} ns  rbpf {:>6} ns  jit/kernel {}  jit/rbpf {} (call {})",
            r["program"].as_str().unwrap_or(""),
            r["interp_ns"],
            r["jit_ns"],
            r["jit_call_ns"],
            r["kernel_ns"],
            r["rbpf_ns"],
            r["jit_over_kernel"],
            r["jit_over_rbpf"],
            r["jit_call_over_rbpf"]
        ));
    }
    let (urows, report) = if o.updates > 0 {
        updates(o, &mut progress).context("update benchmark")?
    } else {
        (Vec::new(), MemReport::default())
    };
    let us = |h: &Histogram<u64>, q: f64| round(h.value_at_quantile(q) as f64 / 1000.0, 2);
    let upd: Vec<Value> = urows
        .iter()
        .map(|r| {
            json!({
                "position": r.position.as_str(),
                "form": r.form,
                "insns": r.insns,
                "updates": r.visible.len(),
                "visible_us_p50": us(&r.visible, 0.5),
                "visible_us_p99": us(&r.visible, 0.99),
                "acked_us_p50": us(&r.acked, 0.5),
                "acked_us_p99": us(&r.acked, 0.99),
            })
        })
        .collect();
    for u in &upd {
        progress.note(&format!(
            "update {:4} {:8} ({} insns): visible p50 {} us p99 {} us; acked p50 {} us p99 {} us",
            u["position"].as_str().unwrap_or(""),
            u["form"].as_str().unwrap_or(""),
            u["insns"],
            u["visible_us_p50"],
            u["visible_us_p99"],
            u["acked_us_p50"],
            u["acked_us_p99"]
        ));
    }
    progress.finish(&format!(
        "updates under traffic: {} packets, {} lost",
        report.received(),
        report.lost()
    ));
    let out = json!({
        "bench": "ebpf",
        "packets_per_runner": o.packets,
        "repeat": o.repeat,
        "core": o.core,
        "execution": rows,
        "updates": upd,
        "update_traffic_packets": report.received(),
        "update_traffic_lost": report.lost(),
        "note": "per-packet ns at the pre position (stage on batches of 32) vs BPF_PROG_TEST_RUN's own timing and rbpf's JIT called per packet; all on the same pinned core. Update latency: submit to every worker running the new program (visible), and to the acknowledgement after the grace period (acked); one busy-polling worker on core 1; the control thread and the submitter on core 0",
    });
    emit(&out, o.json);
    Ok(())
}
