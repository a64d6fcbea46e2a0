//! `hotplane bench swap`: two workers forwarding stamped traffic as fast as they can while the
//! control side replaces flow 1's function 1000 times and the `pre` program 1000 times. For each
//! replacement it measures the time from the call until every worker has run a batch with the
//! new version ("visible"), and the time until the call returned (old program freed); at the end
//! it checks that no packet was lost or duplicated.

use super::pipeline::round;
use super::{emit, Progress};
use crate::config::{Config, DataplaneConfig, IdlePolicy, PortConfig, PortKind};
use crate::StageSpec;
use hotplane_engine::TRACKED;

use hdrhistogram::Histogram;
use hotplane_control::Target;
use hotplane_core::{time, FlowKey, FlowSelector, Position};
use hotplane_io::mem::{GenSpec, MemReport, MemSpec, SinkSpec};
use serde_json::json;
use std::time::{Duration, Instant};

pub struct Opts {
    pub swaps: u32,
    pub workers: usize,
    pub json: bool,
}

/// The config: one mem port looping back to itself, two flows (one per worker), stamped.
pub fn config(workers: usize) -> Config {
    let cores = hotplane_engine::online_cores();
    let gen = GenSpec { flows: workers.max(2) as u32, ..Default::default() };
    Config {
        dataplane: DataplaneConfig {
            workers,
            cores: (workers <= cores).then(|| (0..workers).collect()),
            idle: IdlePolicy::Poll,
            ..Default::default()
        },
        ports: vec![PortConfig::new(
            "p0",
            None,
            PortKind::Mem(MemSpec { gen: Some(gen), sink: SinkSpec::default() }),
        )],
        ..Default::default()
    }
}

/// The selector of generated flow `i` (flow 1 of the benchmark is generated flow 0).
pub fn flow_selector(i: u16) -> FlowSelector {
    let g = GenSpec::default();
    FlowSelector::exact(FlowKey::from_ips(g.src_ip, g.dst_ip, 17, g.src_port + i, g.dst_port))
}

pub struct SwapResult {
    pub visible_ns: Histogram<u64>,
    pub replace_ns: Histogram<u64>,
    pub report: MemReport,
    pub slow: u32,
}

/// Perform `swaps` flow-1 replacements and `swaps` pre replacements on a loaded plane.
pub fn measure(workers: usize, swaps: u32, progress: &mut Progress) -> anyhow::Result<SwapResult> {
    let plane = crate::start(config(workers))?;
    let reg = plane.registry().clone();
    let all: Vec<usize> = (0..workers).collect();
    let flow1 = Target::Flow(flow_selector(0));
    let flow2 = Target::Flow(flow_selector(1));
    reg.install(&flow1, &all, reg.build(&StageSpec::stamp_mark(1)).map_err(anyhow::Error::msg)?)?;
    reg.install(&flow2, &all, reg.build(&StageSpec::stamp_mark(2)).map_err(anyhow::Error::msg)?)?;
    let stats = plane.worker_stats().to_vec();
    while stats.iter().any(|s| s.packets.get() < 100_000) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut visible = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let mut replace = visible.clone();
    let mut slow = 0;
    let total = swaps as u64 * 2;
    for i in 0..total {
        let (target, tracked) = if i % 2 == 0 {
            (&flow1, TRACKED.iter().position(|t| *t == "flows").unwrap_or(3))
        } else {
            (&Target::Position(Position::Pre), 0)
        };
        let prog = reg.build(&StageSpec::stamp_mark(100 + i as u16)).map_err(anyhow::Error::msg)?;
        let t0 = time::now_ns();
        let inst = reg.install(target, &all, prog)?;
        let t1 = time::now_ns();
        // Wait (sleeping: a spinning waiter would steal the core of the worker it waits for)
        // until every worker has run a batch with the new version.
        let deadline = Instant::now() + Duration::from_secs(5);
        while stats.iter().any(|s| s.seen_version[tracked].get() < inst.version) {
            if Instant::now() > deadline {
                anyhow::bail!("a worker did not pick up version {} within 5 s", inst.version);
            }
            std::thread::sleep(Duration::from_micros(10));
        }
        let seen = stats.iter().map(|s| s.seen_at_ns[tracked].get()).max().unwrap_or(t0);
        let vis = seen.saturating_sub(t0).max(1);
        if vis > 1_000_000 {
            slow += 1;
        }
        let _ = visible.record(vis);
        let _ = replace.record((t1 - t0).max(1));
        progress.update(i + 1, total);
        std::thread::sleep(Duration::from_micros(50));
    }
    let handles = plane.mem_handles();
    plane.stop();
    Ok(SwapResult {
        visible_ns: visible,
        replace_ns: replace,
        report: MemReport::merge(&handles),
        slow,
    })
}

pub fn run(o: &Opts) -> anyhow::Result<()> {
    let mut progress = Progress::new("swap", o.json);
    let r = measure(o.workers, o.swaps, &mut progress)?;
    let us = |h: &Histogram<u64>, q: f64| round(h.value_at_quantile(q) as f64 / 1000.0, 2);
    progress.finish(&format!(
        "{} swaps under load: visible p50 {} us, p99 {} us; replace() p50 {} us; {} packets, {} lost, {} duplicated",
        o.swaps * 2,
        us(&r.visible_ns, 0.5),
        us(&r.visible_ns, 0.99),
        us(&r.replace_ns, 0.5),
        r.report.received(),
        r.report.lost(),
        r.report.duplicates()
    ));
    let out = json!({
        "bench": "swap",
        "swaps": o.swaps * 2,
        "workers": o.workers,
        "packets": r.report.received(),
        "lost": r.report.lost(),
        "duplicated": r.report.duplicates(),
        "visible_us_p50": us(&r.visible_ns, 0.5),
        "visible_us_p99": us(&r.visible_ns, 0.99),
        "visible_us_max": us(&r.visible_ns, 1.0),
        "replace_us_p50": us(&r.replace_ns, 0.5),
        "replace_us_p99": us(&r.replace_ns, 0.99),
        "note": "2 cores: the control thread shares a core with a busy-polling worker",
    });
    emit(&out, o.json);
    Ok(())
}
