//! The parts of `hotplane bench tables` beyond the sweep: the reference's three update methods
//! (digest through a controller, a change queue applied by the control thread, the in-place
//! pointer write), and LPM and ternary lookup times.

use super::pipeline::round;
use super::tables::{drive, filled, rmw_point, xorshift, VALUE_AT};
use anyhow::anyhow;
use crossbeam_queue::ArrayQueue;
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::{time, Qsbr, Stage, WorkerCx};
use hotplane_engine::pin_to_core;
use hotplane_tables::{
    ActionSpec, DigestRecord, DigestRing, LpmTable, MatchKind, Table, TableConfig, TernaryMatch,
    TernaryTable,
};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A write the data plane asks the control thread to make.
#[derive(Clone, Copy)]
struct Change {
    key: u32,
    value: u64,
    ts_ns: u64,
}

enum Via {
    /// The control thread applies queued writes itself.
    Change(Arc<ArrayQueue<Change>>),
    /// Digests to a controller, which sends table writes back over a socket.
    Digest(Arc<DigestRing>),
}

/// The swap action done the indirect way: read the old value in place, ask for the new one to
/// be written by someone else. Only every `every`-th packet asks (paced runs).
struct IndirectSwap {
    table: Arc<Table>,
    via: Via,
    every: u64,
    seen: AtomicU64,
    dropped: AtomicU64,
}

impl Stage for IndirectSwap {
    fn name(&self) -> &str {
        "indirect-swap"
    }

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let Table::Exact(t) = &*self.table else { return };
        let mut seen = self.seen.load(Ordering::Relaxed);
        for i in sel {
            let Some(p) = batch.get_mut(i) else { continue };
            let at = p.meta.payload_off as usize;
            let d = p.data_mut();
            let key = u32::from_be_bytes(d[at..at + 4].try_into().unwrap_or([0; 4]));
            let v = at + VALUE_AT as usize;
            let value = u64::from_be_bytes(d[v..v + 8].try_into().unwrap_or([0; 8]));
            let Some(e) = t.lookup(&[(key as u64) << 32], cx.guard) else { continue };
            d[v..v + 8].copy_from_slice(&e.word(0).to_be_bytes());
            seen += 1;
            if seen % self.every != 0 {
                continue;
            }
            let ok = match &self.via {
                Via::Change(q) => q.push(Change { key, value, ts_ns: cx.now_ns }).is_ok(),
                Via::Digest(r) => r.send(DigestRecord {
                    id: 1,
                    ts_ns: cx.now_ns,
                    words: [key as u64, value, 0, 0],
                }),
            };
            if !ok {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.seen.store(seen, Ordering::Relaxed);
    }
}

struct MethodRun {
    mpps: f64,
    sent: u64,
    applied: u64,
    dropped: u64,
    secs: f64,
    p50_us: f64,
    p99_us: f64,
}

fn percentile(v: &mut [u64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q) as usize] as f64 / 1000.0
}

/// Run one indirect method: the data plane on core 1, the control thread (and the controller,
/// for digests) on core 0.
fn indirect(
    table: &Arc<Table>,
    size: usize,
    packets: u64,
    digest: bool,
    every: u64,
    qsbr: &Qsbr,
) -> anyhow::Result<MethodRun> {
    let Table::Exact(_) = &**table else { anyhow::bail!("exact table expected") };
    let stop = Arc::new(AtomicBool::new(false));
    let latencies = Arc::new(Mutex::new(Vec::<u64>::new()));
    let applied = Arc::new(AtomicU64::new(0));
    let apply = {
        let (table, latencies, applied) = (table.clone(), latencies.clone(), applied.clone());
        move |key: u32, value: u64, ts: u64, lat: &mut Vec<u64>| {
            if table
                .modify(
                    &hotplane_tables::MatchSpec::Exact(key.to_be_bytes().to_vec()),
                    0,
                    "swap",
                    &[value],
                )
                .is_ok()
            {
                applied.fetch_add(1, Ordering::Relaxed);
                lat.push(time::now_ns().saturating_sub(ts));
            }
            let _ = &latencies;
        }
    };
    let mut helpers = vec![];
    let via = if digest {
        let ring = Arc::new(DigestRing::new(4096));
        let (mut to_control, from_controller) = UnixStream::pair()?;
        // The controller: digests in, table writes out as JSON lines (as it would send them to
        // the control API).
        {
            let (ring, stop) = (ring.clone(), stop.clone());
            helpers.push(std::thread::spawn(move || {
                pin_to_core(0);
                let mut out = std::io::BufWriter::new(&mut to_control);
                while !stop.load(Ordering::Relaxed) || ring.pending() > 0 {
                    let got = ring.drain(256);
                    if got.is_empty() {
                        let _ = out.flush();
                        std::thread::yield_now();
                        continue;
                    }
                    for d in got {
                        let line = json!({"op": "table-modify", "table": "rmw", "key": d.words[0], "action": "swap", "data": [d.words[1]], "ts": d.ts_ns});
                        let _ = writeln!(out, "{line}");
                    }
                }
                let _ = out.flush();
            }));
        }
        {
            let (latencies, apply) = (latencies.clone(), apply.clone());
            helpers.push(std::thread::spawn(move || {
                pin_to_core(0);
                let mut lat = vec![];
                for line in BufReader::new(from_controller).lines().map_while(Result::ok) {
                    let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
                    let key = v["key"].as_u64().unwrap_or(0) as u32;
                    let value = v["data"][0].as_u64().unwrap_or(0);
                    apply(key, value, v["ts"].as_u64().unwrap_or(0), &mut lat);
                }
                latencies.lock().unwrap_or_else(|e| e.into_inner()).extend(lat);
            }));
        }
        Via::Digest(ring)
    } else {
        let q = Arc::new(ArrayQueue::<Change>::new(4096));
        let (q2, stop, latencies, apply) =
            (q.clone(), stop.clone(), latencies.clone(), apply.clone());
        helpers.push(std::thread::spawn(move || {
            pin_to_core(0);
            let mut lat = vec![];
            while !stop.load(Ordering::Relaxed) || !q2.is_empty() {
                match q2.pop() {
                    Some(c) => apply(c.key, c.value, c.ts_ns, &mut lat),
                    None => std::thread::yield_now(),
                }
            }
            latencies.lock().unwrap_or_else(|e| e.into_inner()).extend(lat);
        }));
        Via::Change(q)
    };
    let stage = Arc::new(IndirectSwap {
        table: table.clone(),
        via,
        every,
        seen: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
    });
    let t0 = Instant::now();
    let dp = {
        let (stage, qsbr) = (stage.clone(), qsbr.clone());
        std::thread::spawn(move || {
            pin_to_core(1);
            drive(stage.as_ref(), size as u64, packets, 0x5eed, 0, &qsbr)
        })
    };
    let r = dp.join().map_err(|_| anyhow!("data plane panicked"))??;
    stop.store(true, Ordering::Relaxed);
    for h in helpers {
        let _ = h.join();
    }
    let secs = t0.elapsed().as_secs_f64();
    let mut lat = std::mem::take(&mut *latencies.lock().unwrap_or_else(|e| e.into_inner()));
    let dropped = stage.dropped.load(Ordering::Relaxed);
    let sent = stage.seen.load(Ordering::Relaxed) / every;
    Ok(MethodRun {
        mpps: r.mpps,
        sent,
        applied: applied.load(Ordering::Relaxed),
        dropped,
        secs,
        p50_us: percentile(&mut lat, 0.5),
        p99_us: percentile(&mut lat, 0.99),
    })
}

/// The three update methods at `size` entries: throughput with every packet an update, and
/// per-update latency when one packet in 1000 is.
pub fn methods_bench(size: usize, packets: u64, qsbr: &Qsbr) -> anyhow::Result<Vec<Value>> {
    let table = filled(size, hotplane_tables::Store::Static, false, qsbr)?;
    let (pointer_mpps, _, _) = rmw_point(&table, size, false, 1, packets, qsbr)?;
    let mut out = vec![json!({
        "method": "pointer",
        "how": "in-place write of the @ref parameter by the data plane",
        "mpps": round(pointer_mpps, 2),
        "updates_applied_per_s": round(pointer_mpps * 1e6, 0),
        "applied_fraction": 1.0,
        "latency_us_p50": 0.0,
        "latency_us_p99": 0.0,
    })];
    for (name, digest, how) in [
        ("change", false, "data plane queues the write; the control thread applies it"),
        ("digest", true, "data plane sends a digest; a controller thread sends a JSON table write back over a socket; the control thread applies it"),
    ] {
        let sat = indirect(&table, size, packets, digest, 1, qsbr)?;
        let paced = indirect(&table, size, packets, digest, 1000, qsbr)?;
        out.push(json!({
            "method": name,
            "how": how,
            "mpps": round(sat.mpps, 2),
            "updates_sent": sat.sent,
            "updates_applied": sat.applied,
            "updates_dropped": sat.dropped,
            "updates_applied_per_s": round(sat.applied as f64 / sat.secs, 0),
            "applied_fraction": round(sat.applied as f64 / sat.sent.max(1) as f64, 4),
            "latency_us_p50": round(paced.p50_us, 2),
            "latency_us_p99": round(paced.p99_us, 2),
            "latency_note": "one packet in 1000 is an update (unqueued); saturated runs queue for milliseconds",
            "saturated_latency_us_p50": round(sat.p50_us, 1),
            "paced_updates_applied": paced.applied,
            "paced_updates_dropped": paced.dropped,
        }));
    }
    Ok(out)
}

pub struct LpmResult {
    pub ipv4_ns: f64,
    pub ipv4_prefixes: usize,
    pub ipv4_groups: usize,
    pub ipv6_ns: f64,
    pub ipv6_prefixes: usize,
}

fn route_actions() -> Vec<ActionSpec> {
    vec![ActionSpec::new("forward", &[("port", 16, false)])]
}

/// ns per lookup over `addrs`, on core 1, repeated until ~0.3 s.
fn time_lookups(mut f: impl FnMut(usize) -> usize, n: usize) -> f64 {
    pin_to_core(1);
    let mut sink = 0usize;
    for i in 0..n.min(100_000) {
        sink = sink.wrapping_add(f(i));
    }
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for i in 0..n {
            sink = sink.wrapping_add(f(i));
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    std::hint::black_box(sink);
    best
}

pub fn lpm_bench(prefixes: usize, qsbr: &Qsbr) -> anyhow::Result<LpmResult> {
    let mut s = 0x1234_5678_9abc_def1u64;
    // IPv4: a BGP-like length mix (mostly /24 and /16../23, a few longer).
    let cfg = TableConfig::new("v4", MatchKind::Lpm, 32, prefixes).with_actions(route_actions());
    let t4 = LpmTable::new(cfg, qsbr)?;
    let mut installed = Vec::with_capacity(prefixes);
    let mut attempts = 0;
    while installed.len() < prefixes && attempts < prefixes * 3 {
        attempts += 1;
        let r = xorshift(&mut s);
        let len = match r % 100 {
            0 => 8 + (r >> 8) as u32 % 8,
            1..=39 => 16 + (r >> 8) as u32 % 8,
            40..=94 => 24,
            _ => 25 + (r >> 8) as u32 % 8,
        };
        let addr = (r >> 32) as u32 & (u32::MAX << (32 - len));
        if t4.insert(&addr.to_be_bytes(), len, 0, &[r & 0xff]).is_ok() {
            installed.push((addr, len));
        }
    }
    let n = 1 << 22;
    let addrs: Vec<u32> = (0..n)
        .map(|_| {
            let r = xorshift(&mut s);
            if r % 10 == 0 {
                (r >> 32) as u32
            } else {
                let (a, l) = installed[(r >> 8) as usize % installed.len()];
                a | ((r >> 32) as u32
                    & (u32::MAX >> l.min(31))
                    & if l == 32 { 0 } else { u32::MAX })
            }
        })
        .collect();
    let reader = qsbr.register("bench-lpm");
    let g = reader.guard();
    // Bulk lookups of 32 addresses (a batch), as the table stage does them.
    let mut out: [Option<hotplane_tables::EntryRef<'_>>; 32] = [None; 32];
    let ipv4_ns = time_lookups(
        |c| {
            t4.lookup_u32_bulk(&addrs[c * 32..c * 32 + 32], &mut out, &g);
            std::hint::black_box(&out).iter().filter(|e| e.is_some()).count()
        },
        n / 32,
    ) / 32.0;
    // IPv6: /32../64, mostly /48.
    let v6n = (prefixes / 5).max(1000);
    let cfg = TableConfig::new("v6", MatchKind::Lpm, 128, v6n).with_actions(route_actions());
    let t6 = LpmTable::new(cfg, qsbr)?;
    let mut inst6 = Vec::with_capacity(v6n);
    for _ in 0..v6n * 2 {
        if inst6.len() >= v6n {
            break;
        }
        let r = xorshift(&mut s);
        let len = match r % 10 {
            0..=6 => 48,
            7 | 8 => 32 + (r >> 8) as u32 % 16,
            _ => 49 + (r >> 8) as u32 % 16,
        };
        let a = (0x2000u128 << 112 | (xorshift(&mut s) as u128) << 64) & (u128::MAX << (128 - len));
        if t6.insert(&a.to_be_bytes(), len, 0, &[1]).is_ok() {
            inst6.push(a);
        }
    }
    let addrs6: Vec<[u8; 16]> = (0..1 << 20)
        .map(|_| {
            let r = xorshift(&mut s);
            (inst6[r as usize % inst6.len()] | (r >> 8) as u128).to_be_bytes()
        })
        .collect();
    let ipv6_ns = time_lookups(
        |i| std::hint::black_box(t6.lookup(&addrs6[i], &g)).is_some() as usize,
        addrs6.len(),
    );
    Ok(LpmResult {
        ipv4_ns,
        ipv4_prefixes: installed.len(),
        ipv4_groups: t4.groups_used(),
        ipv6_ns,
        ipv6_prefixes: inst6.len(),
    })
}

pub struct TernaryResult {
    pub ns: f64,
    pub rules: usize,
    pub masks: usize,
}

/// 1000 rules over 10 masks of a 13-byte 5-tuple key (src, dst, sport, dport, proto).
pub fn ternary_bench(qsbr: &Qsbr) -> anyhow::Result<TernaryResult> {
    let cfg =
        TableConfig::new("acl", MatchKind::Ternary, 13 * 8, 2048).with_actions(route_actions());
    let t = TernaryTable::new(cfg, qsbr)?;
    let ip = |bits: u32| -> [u8; 4] {
        (if bits == 0 { 0 } else { u32::MAX << (32 - bits) }).to_be_bytes()
    };
    let port = |on: bool| if on { [0xff, 0xff] } else { [0, 0] };
    // (src bits, dst bits, sport, dport, proto)
    let shapes = [
        (32, 32, false, true, true),
        (24, 24, false, true, true),
        (16, 0, false, true, true),
        (0, 32, false, true, true),
        (0, 24, false, false, true),
        (8, 8, false, false, false),
        (0, 0, false, true, true),
        (32, 0, false, false, false),
        (0, 16, true, false, true),
        (0, 0, false, false, true),
    ];
    let masks: Vec<Vec<u8>> = shapes
        .iter()
        .map(|&(sb, db, sp, dp, pr)| {
            [
                &ip(sb)[..],
                &ip(db)[..],
                &port(sp)[..],
                &port(dp)[..],
                &[if pr { 0xff } else { 0 }][..],
            ]
            .concat()
        })
        .collect();
    let mut s = 0xfeed_beefu64;
    let mut values = vec![];
    let mut batch = vec![];
    for i in 0..1000u32 {
        let m = &masks[i as usize % masks.len()];
        let v: Vec<u8> = (0..13).map(|_| xorshift(&mut s) as u8).collect();
        values.push((v.clone(), m.clone()));
        // Unique priorities, unrelated to the mask.
        let prio = (i.wrapping_mul(7919)) % 100_000;
        batch.push((TernaryMatch::Mask { value: v, mask: m.clone() }, prio, 0u16, vec![i as u64]));
    }
    t.insert_many(batch)?;
    let n = 1 << 20;
    let keys: Vec<[u64; 2]> = (0..n)
        .map(|_| {
            let r = xorshift(&mut s);
            let mut k: Vec<u8> = (0..13).map(|_| xorshift(&mut s) as u8).collect();
            if r % 2 == 0 {
                let (v, m) = &values[(r >> 8) as usize % values.len()];
                for j in 0..13 {
                    k[j] = (v[j] & m[j]) | (k[j] & !m[j]);
                }
            }
            let mut w = [0u64; 2];
            hotplane_tables::key::pack(&k, &mut w);
            w
        })
        .collect();
    // Registered only now: building the index waits for grace periods, which a reader on this
    // thread would never grant.
    let reader = qsbr.register("bench-ternary");
    let g = reader.guard();
    let ns = time_lookups(|i| std::hint::black_box(t.lookup(&keys[i], &g)).is_some() as usize, n);
    Ok(TernaryResult { ns, rules: t.len(), masks: t.masks() })
}

/// The memory floor the lookups stand on: ns per random 8-byte read from an array of `bytes`
/// (already touched), batches of 32 prefetched then read, the pattern the tables use. No table
/// lookup can beat it on this machine.
pub fn random_read_ns(bytes: usize) -> anyhow::Result<f64> {
    let words = bytes / 8;
    let a = hotplane_tables::words::WordArray::<std::sync::atomic::AtomicU64>::zeroed(words)?;
    for (i, w) in a.iter().enumerate() {
        w.store(i as u64, Ordering::Relaxed);
    }
    let mut s = 0x0bad_cafe_u64;
    let n = 1 << 22;
    let idx: Vec<usize> = (0..n).map(|_| xorshift(&mut s) as usize % words).collect();
    Ok(time_lookups(
        |c| {
            let chunk = &idx[c * 32..c * 32 + 32];
            for &i in chunk {
                hotplane_tables::key::prefetch(&a[i]);
            }
            chunk
                .iter()
                .map(|&i| a[i].load(Ordering::Relaxed) as usize)
                .fold(0, usize::wrapping_add)
        },
        n / 32,
    ) / 32.0)
}
