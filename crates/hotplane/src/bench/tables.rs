//! `hotplane bench tables`: the writable-table experiment. Every packet carries a pseudo-random
//! key in [0, size) and a new value; the table's `swap` action stores the value in the entry
//! (an `@ref` parameter) and writes the old one into the packet. Swept over table sizes, static
//! and dynamic storage, locked and unlocked entries, one and two workers; then the three update
//! methods of the reference (digest, change, pointer) side by side, and LPM and ternary lookup
//! times. Writes tables.csv and tables.png.

use super::perf::LlcMisses;
use super::pipeline::round;
use super::tables_methods::{lpm_bench, methods_bench, random_read_ns, ternary_bench};
use super::{emit, Progress};
use crate::plot::{lines_png, Line};
use anyhow::{anyhow, Context};
use hotplane_core::{time, Batch, Pool, PoolConfig, Qsbr, Stage, WorkerCx};
use hotplane_engine::pin_to_core;
use hotplane_tables::stage::TableStage;
use hotplane_tables::{ActionSpec, MatchKind, Store, Table, TableConfig};
use plotters::style::RGBColor;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Instant;

#[derive(clap::Args, Debug, Clone)]
pub struct Opts {
    #[arg(long)]
    pub json: bool,
    /// log2 of the smallest table size.
    #[arg(long, default_value_t = 8)]
    pub min_log2: u32,
    /// log2 of the largest table size.
    #[arg(long, default_value_t = 24)]
    pub max_log2: u32,
    #[arg(long, default_value_t = 2)]
    pub step: u32,
    /// Packets per worker per configuration.
    #[arg(long, default_value_t = 4_000_000)]
    pub packets: u64,
    /// Worker counts to sweep, comma-separated.
    #[arg(long, default_value = "1,2", value_delimiter = ',')]
    pub workers: Vec<usize>,
    /// Directory for the CSV and the plot.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Prefixes in the LPM lookup measurement.
    #[arg(long, default_value_t = 500_000)]
    pub lpm_prefixes: usize,
}

/// Payload offsets of the key (4 bytes) and value (8 bytes) in the experiment's packets.
pub const KEY_AT: u16 = 0;
pub const VALUE_AT: u16 = 8;

/// The experiment's table: 32-bit key, one `swap(@ref value)` action.
pub fn rmw_table(size: usize, store: Store, locked: bool, counters: bool) -> TableConfig {
    let mut c = TableConfig::new("rmw", MatchKind::Exact, 32, size)
        .with_actions(vec![ActionSpec::new("swap", &[("value", 64, true)])]);
    c.store = store;
    c.locked = locked;
    c.counters = counters;
    c
}

/// A table of keys 0..size, each holding value = key.
pub fn filled(
    size: usize,
    store: Store,
    counters: bool,
    qsbr: &Qsbr,
) -> anyhow::Result<Arc<Table>> {
    let t = Table::new(rmw_table(size, store, false, counters), qsbr)?;
    if let Table::Exact(e) = &t {
        for k in 0..size as u32 {
            e.insert(&k.to_be_bytes(), 0, &[k as u64]).map_err(|e| anyhow!("filling: {e}"))?;
        }
    }
    Ok(Arc::new(t))
}

/// A UDP frame with room for key and value in its payload.
pub fn frame() -> Vec<u8> {
    let f = hotplane_io::mem::GenSpec::default().frame(0);
    let mut buf = vec![0u8; 128];
    let n = f.emit(&[0u8; 24], &mut buf).unwrap_or(0);
    buf.truncate(n);
    buf
}

/// xorshift64*: the pseudo-random stream of every table benchmark (keys, addresses, rules).
#[inline(always)]
pub fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// A key in [0, size) from the stream.
#[inline(always)]
pub fn next_key(state: &mut u64, size: u64) -> u32 {
    (((xorshift(state) >> 32) * size) >> 32) as u32
}

/// What one worker measured.
pub struct WorkerResult {
    pub mpps: f64,
    pub llc_per_pkt: Option<f64>,
    /// Sum of the old values returned (checked against nothing; keeps the work observable).
    pub checksum: u64,
}

/// Run `stage` over `packets` packets whose keys are drawn in [0, size), writing a fresh key and
/// value into each packet before the stage (as a NIC would deliver them).
pub fn drive(
    stage: &dyn Stage,
    size: u64,
    packets: u64,
    seed: u64,
    worker: usize,
    qsbr: &Qsbr,
) -> anyhow::Result<WorkerResult> {
    let pool = Pool::new(PoolConfig { buffers: 128, ..Default::default() })?;
    let mut b = Batch::new(32);
    let f = frame();
    for _ in 0..32 {
        let mut p = pool.alloc().ok_or_else(|| anyhow!("pool empty"))?;
        p.set_frame(&f).map_err(|e| anyhow!("{e}"))?;
        p.classify();
        let _ = b.push(p);
    }
    let payload = b.get(0).map_or(42, |p| p.meta.payload_off as usize);
    let mut reader = qsbr.register(format!("bench-w{worker}"));
    let mut state = seed | 1;
    let mut value = seed << 40;
    let all = b.all();
    let rounds = packets.div_ceil(32);
    let llc = LlcMisses::open().ok();
    let mut checksum = 0u64;
    let mut t0 = Instant::now();
    for r in 0..rounds + rounds / 16 {
        if r == rounds / 16 {
            // Warm-up done (an eighth... a sixteenth of the run): start the clock.
            if let Some(c) = &llc {
                c.start();
            }
            t0 = Instant::now();
        }
        for p in b.iter_mut() {
            let k = next_key(&mut state, size);
            value += 1;
            let d = p.data_mut();
            d[payload + KEY_AT as usize..payload + KEY_AT as usize + 4]
                .copy_from_slice(&k.to_be_bytes());
            d[payload + VALUE_AT as usize..payload + VALUE_AT as usize + 8]
                .copy_from_slice(&value.to_be_bytes());
        }
        {
            let guard = reader.guard();
            let mut cx = WorkerCx::new(worker, time::now_ns(), &guard);
            stage.run(&mut b, all, &mut cx);
        }
        reader.quiescent();
        if let Some(p) = b.get(0) {
            let at = payload + VALUE_AT as usize;
            checksum = checksum.wrapping_add(u64::from_be_bytes(
                p.data()[at..at + 8].try_into().unwrap_or([0; 8]),
            ));
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let misses = llc.as_ref().and_then(|c| c.stop());
    let n = (rounds * 32) as f64;
    Ok(WorkerResult { mpps: n / secs / 1e6, llc_per_pkt: misses.map(|m| m as f64 / n), checksum })
}

/// One sweep point.
#[derive(Debug, Clone)]
pub struct RmwPoint {
    pub log2: u32,
    pub store: Store,
    pub locked: bool,
    pub workers: usize,
    pub mpps_per_core: f64,
    pub mpps_total: f64,
    pub llc_per_pkt: Option<f64>,
}

/// Run the swap stage on `workers` threads (pinned to cores 1, 0) against one table.
pub fn rmw_point(
    table: &Arc<Table>,
    size: usize,
    locked: bool,
    workers: usize,
    packets: u64,
    qsbr: &Qsbr,
) -> anyhow::Result<(f64, f64, Option<f64>)> {
    let stage = Arc::new(
        TableStage::new(table.clone(), "payload:0:4", Some(VALUE_AT))
            .map_err(|e| anyhow!(e))?
            .with_locked(locked),
    );
    let barrier = Arc::new(Barrier::new(workers));
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let (stage, barrier, qsbr) = (stage.clone(), barrier.clone(), qsbr.clone());
            std::thread::spawn(move || {
                pin_to_core(if w == 0 { 1 } else { 0 });
                barrier.wait();
                drive(
                    stage.as_ref(),
                    size as u64,
                    packets,
                    0x9e37_79b9_7f4a_7c15 ^ (w as u64 + 1) << 7,
                    w,
                    &qsbr,
                )
            })
        })
        .collect();
    let mut results = vec![];
    for h in handles {
        results.push(h.join().map_err(|_| anyhow!("bench worker panicked"))??);
    }
    let total: f64 = results.iter().map(|r| r.mpps).sum();
    let llc = results
        .iter()
        .map(|r| r.llc_per_pkt)
        .collect::<Option<Vec<f64>>>()
        .map(|v| v.iter().sum::<f64>() / v.len() as f64);
    Ok((total / workers as f64, total, llc))
}

fn write_csv(path: &std::path::Path, points: &[RmwPoint]) -> anyhow::Result<()> {
    let mut s = String::from(
        "size,log2_size,store,locked,workers,mpps_per_core,mpps_total,llc_misses_per_pkt\n",
    );
    for p in points {
        s += &format!(
            "{},{},{:?},{},{},{:.3},{:.3},{}\n",
            1u64 << p.log2,
            p.log2,
            p.store,
            p.locked,
            p.workers,
            p.mpps_per_core,
            p.mpps_total,
            p.llc_per_pkt.map_or(String::new(), |v| format!("{v:.3}"))
        );
    }
    std::fs::write(path, s.to_lowercase()).with_context(|| format!("writing {}", path.display()))
}

fn plot(path: &std::path::Path, points: &[RmwPoint], workers: &[usize]) -> anyhow::Result<()> {
    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
    ];
    let mut lines = vec![];
    for &w in workers {
        for (ci, (store, locked)) in [
            (Store::Static, false),
            (Store::Static, true),
            (Store::Dynamic, false),
            (Store::Dynamic, true),
        ]
        .into_iter()
        .enumerate()
        {
            let pts: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.store == store && p.locked == locked && p.workers == w)
                .map(|p| (p.log2 as f64, p.mpps_per_core))
                .collect();
            lines.push(Line {
                name: format!(
                    "{store:?}, {}, {w} worker{}",
                    if locked { "locked" } else { "unlocked" },
                    if w > 1 { "s" } else { "" }
                )
                .to_lowercase(),
                color: colors[ci],
                dashed: w > 1,
                points: pts,
            });
        }
    }
    lines_png(
        path,
        "In-place read-modify-write of a table entry (swap action), per core",
        "table size (entries)",
        "Mpps per core",
        &lines,
    )
}

pub fn run(o: &Opts) -> anyhow::Result<()> {
    if o.min_log2 > o.max_log2 || o.max_log2 > 26 || o.step == 0 {
        anyhow::bail!("sizes: 2^{}..2^{} step {} (at most 2^26)", o.min_log2, o.max_log2, o.step);
    }
    let mut progress = Progress::new("tables", o.json);
    let qsbr = Qsbr::new();
    let logs: Vec<u32> = (o.min_log2..=o.max_log2).step_by(o.step as usize).collect();
    let total = (logs.len() * 2 * 2 * o.workers.len()) as u64;
    let mut points = vec![];
    let mut done = 0;
    let llc_note = LlcMisses::open().err();
    for &log2 in &logs {
        let size = 1usize << log2;
        for store in [Store::Static, Store::Dynamic] {
            let table = filled(size, store, false, &qsbr)?;
            for locked in [false, true] {
                for &w in &o.workers {
                    let (per_core, total_mpps, llc) =
                        rmw_point(&table, size, locked, w, o.packets, &qsbr)?;
                    points.push(RmwPoint {
                        log2,
                        store,
                        locked,
                        workers: w,
                        mpps_per_core: per_core,
                        mpps_total: total_mpps,
                        llc_per_pkt: llc,
                    });
                    done += 1;
                    progress.update(done, total);
                }
            }
        }
    }
    // At 1M entries (or the largest size swept): counters on, for the cost of entry counters.
    let ref_log2 = if logs.contains(&20) { 20 } else { *logs.last().unwrap_or(&o.max_log2) };
    let ref_size = 1usize << ref_log2;
    let with_counters = {
        let t = filled(ref_size, Store::Static, true, &qsbr)?;
        rmw_point(&t, ref_size, false, 1, o.packets, &qsbr)?.0
    };
    progress.note("update methods (digest, change, pointer) ...");
    let methods = methods_bench(ref_size, o.packets, &qsbr)?;
    progress.note("LPM and ternary lookups ...");
    let lpm = lpm_bench(o.lpm_prefixes, &qsbr)?;
    let ternary = ternary_bench(&qsbr)?;
    // The machine's floor for both: one random read from memory of the LPM first level's size
    // (64 MiB) and of the reference-size exact table's.
    let floor_lpm = random_read_ns(64 << 20)?;
    let floor_rmw = {
        let t = filled(ref_size, Store::Static, false, &qsbr)?;
        let bytes = match &*t {
            Table::Exact(e) => e.storage_bytes(),
            _ => 0,
        };
        (bytes, random_read_ns(bytes)?)
    };

    std::fs::create_dir_all(&o.out).with_context(|| format!("creating {}", o.out.display()))?;
    let csv = o.out.join("tables.csv");
    write_csv(&csv, &points)?;
    let png = o.out.join("tables.png");
    let plot_err = plot(&png, &points, &o.workers).err().map(|e| e.to_string());
    let at_ref = |store: Store, locked: bool, w: usize| {
        points
            .iter()
            .find(|p| {
                p.log2 == ref_log2 && p.store == store && p.locked == locked && p.workers == w
            })
            .map(|p| p.mpps_per_core)
    };
    let best_ref = at_ref(Store::Static, false, 1).unwrap_or(0.0);
    let summary = format!(
        "at 2^{ref_log2} entries, 1 worker: static {:.1} / locked {:.1}, dynamic {:.1} / locked {:.1} Mpps per core; LPM {:.1} ns (IPv6 {:.1} ns), ternary {:.1} ns",
        best_ref,
        at_ref(Store::Static, true, 1).unwrap_or(0.0),
        at_ref(Store::Dynamic, false, 1).unwrap_or(0.0),
        at_ref(Store::Dynamic, true, 1).unwrap_or(0.0),
        lpm.ipv4_ns,
        lpm.ipv6_ns,
        ternary.ns
    );
    progress.finish(&summary);
    let rmw: Vec<Value> = points
        .iter()
        .map(|p| {
            json!({
                "size": 1u64 << p.log2,
                "store": format!("{:?}", p.store).to_lowercase(),
                "locked": p.locked,
                "workers": p.workers,
                "mpps": round(p.mpps_per_core, 2),
                "mpps_total": round(p.mpps_total, 2),
                "llc_misses_per_pkt": p.llc_per_pkt.map(|v| round(v, 3)),
            })
        })
        .collect();
    let out = json!({
        "bench": "tables",
        "experiment": "swap action: store the packet's value in the entry (@ref), return the old one; keys uniform in [0, size)",
        "packets_per_worker": o.packets,
        "cores": "worker 0 on core 1, worker 1 on core 0 (2 vCPUs, shared)",
        "rmw": rmw,
        "reference_size": ref_size,
        "rmw_static_unlocked_with_counters_mpps": round(with_counters, 2),
        "llc_misses": llc_note.map_or(Value::from("measured with perf_event_open (user space)"), Value::from),
        "methods": methods,
        "lpm_ns": round(lpm.ipv4_ns, 2),
        "lpm_prefixes": lpm.ipv4_prefixes,
        "lpm_groups": lpm.ipv4_groups,
        "lpm6_ns": round(lpm.ipv6_ns, 2),
        "lpm6_prefixes": lpm.ipv6_prefixes,
        "ternary_ns": round(ternary.ns, 2),
        "memory_floor": {
            "what": "ns per random 8-byte read, batches of 32 prefetched (the tables' access pattern), same run",
            "lpm_level1_64mib_ns": round(floor_lpm, 2),
            "rmw_table_bytes": floor_rmw.0,
            "rmw_table_ns": round(floor_rmw.1, 2),
            "lpm_over_floor": round(lpm.ipv4_ns / floor_lpm, 2),
            "rmw_ns_per_pkt_at_reference": round(1e3 / best_ref.max(1e-9), 2),
        },
        "ternary_rules": ternary.rules,
        "ternary_masks": ternary.masks,
        "targets": {"rmw_mpps_at_1m": 20.0, "lpm_ns": 10.0, "ternary_ns": 100.0},
        "met": {
            "rmw": best_ref >= 20.0 && ref_log2 == 20,
            "lpm": lpm.ipv4_ns <= 10.0,
            "ternary": ternary.ns <= 100.0,
        },
        "csv": csv,
        "png": png,
        "plot_error": plot_err,
    });
    emit(&out, o.json);
    Ok(())
}
