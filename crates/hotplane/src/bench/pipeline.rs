//! `hotplane bench pipeline`: one worker, two mem ports handing out pre-built 64-byte frames
//! (as DPDK's null driver does), `l2fwd` at `pre`, burst 32: the engine's forwarding rate per
//! core, next to DPDK testpmd's macswap on null ports measured in the same run.

use super::{emit, Progress};
use crate::config::{Config, DataplaneConfig, IdlePolicy, PortConfig, PortKind};
use crate::StageSpec;

use hotplane_io::mem::{GenSpec, MemSpec, SinkSpec};
use serde_json::json;
use std::time::{Duration, Instant};

pub struct Opts {
    pub packets: u64,
    pub batch: usize,
    pub core: usize,
    pub testpmd: bool,
    pub json: bool,
}

pub fn config(batch: usize, core: usize) -> Config {
    let gen = GenSpec { stamp: false, prebuilt: true, ..Default::default() };
    let port = |name: &str, peer: &str| {
        let sink = SinkSpec { measure: false, ..Default::default() };
        PortConfig::new(name, Some(peer), PortKind::Mem(MemSpec { gen: Some(gen.clone()), sink }))
    };
    let mut cfg = Config {
        dataplane: DataplaneConfig {
            workers: 1,
            cores: Some(vec![core]),
            batch,
            idle: IdlePolicy::Poll,
            pool: hotplane_core::PoolConfig { buffers: 2048, ..Default::default() },
        },
        ports: vec![port("p0", "p1"), port("p1", "p0")],
        ..Default::default()
    };
    cfg.pipeline.pre = Some(StageSpec::stage("l2fwd"));
    cfg
}

/// Forward at least `packets` packets; returns (Mpps, ns per packet).
pub fn measure(
    batch: usize,
    core: usize,
    packets: u64,
    progress: &mut Progress,
) -> anyhow::Result<(f64, f64)> {
    let m = measure_config(config(batch, core), packets, progress)?;
    Ok((m.mpps, m.ns_per_packet))
}

/// What [`measure_config`] saw over the measured interval.
pub struct Measured {
    pub mpps: f64,
    pub ns_per_packet: f64,
    /// Packets the pipeline dropped and packets sent to a port that does not exist.
    pub dropped: u64,
    pub no_route: u64,
    /// Packets of the measured interval.
    pub packets: u64,
    /// The rate over each ~100 ms window of the interval: on a shared machine whole windows
    /// run slow while a neighbour is busy, so the median and the best window say more about
    /// the code than the mean alone.
    pub windows: Windows,
}

/// Rates (Mpps) of the windows of a measured interval.
#[derive(Clone, Copy, Debug, Default)]
pub struct Windows {
    pub median: f64,
    pub best: f64,
    pub count: usize,
}

impl Windows {
    /// Windows of at least `WINDOW` from `(packets, time)` samples taken every few ms.
    fn of(samples: &[(u64, Instant)]) -> Windows {
        const WINDOW: Duration = Duration::from_millis(100);
        let mut rates = Vec::new();
        let mut start = match samples.first() {
            Some(s) => *s,
            None => return Windows::default(),
        };
        for &(n, t) in &samples[1..] {
            if t - start.1 >= WINDOW {
                rates.push((n - start.0) as f64 / (t - start.1).as_secs_f64() / 1e6);
                start = (n, t);
            }
        }
        if rates.is_empty() {
            return Windows::default();
        }
        let (best, count) = (rates.iter().copied().fold(f64::MIN, f64::max), rates.len());
        Windows { median: super::median(rates), best, count }
    }
}

/// Run a one-worker data plane until worker 0 has processed `packets` more packets after a
/// warm-up; the rate is that of worker 0.
pub fn measure_config(
    cfg: Config,
    packets: u64,
    progress: &mut Progress,
) -> anyhow::Result<Measured> {
    let plane = crate::start(cfg)?;
    let stats = plane.worker_stats()[0].clone();
    let count = || stats.packets.get();
    // Warm up: caches, branch predictors, frequency.
    let warm = (packets / 10).max(1_000_000);
    while count() < warm {
        std::thread::sleep(Duration::from_millis(5));
    }
    let (c0, t0) = (count(), Instant::now());
    let (d0, n0) = (stats.dropped.get(), stats.no_route.get());
    let mut samples = vec![(c0, t0)];
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = (count(), Instant::now());
        samples.push(now);
        let done = now.0 - c0;
        progress.update(done, packets);
        if done >= packets {
            break;
        }
    }
    let (c1, t1) = (count(), Instant::now());
    let (dropped, no_route) = (stats.dropped.get() - d0, stats.no_route.get() - n0);
    plane.stop();
    let pkts = (c1 - c0) as f64;
    let secs = (t1 - t0).as_secs_f64();
    Ok(Measured {
        mpps: pkts / secs / 1e6,
        ns_per_packet: secs * 1e9 / pkts,
        dropped,
        no_route,
        packets: c1 - c0,
        windows: Windows::of(&samples),
    })
}

pub fn run(o: &Opts) -> anyhow::Result<()> {
    let cores = hotplane_engine::online_cores();
    let core = o.core.min(cores - 1);
    let mut progress = Progress::new("pipeline", o.json);
    let (mpps, ns) = measure(o.batch, core, o.packets, &mut progress)?;
    progress.finish(&format!("hotplane l2fwd: {mpps:.2} Mpps on core {core} ({ns:.1} ns/packet)"));
    let mut out = json!({
        "bench": "pipeline",
        "mpps_per_core": round(mpps, 3),
        "ns_per_packet": round(ns, 2),
        "batch": o.batch,
        "packets": o.packets,
        "core": core,
        "frame_bytes": 64,
    });
    if o.testpmd {
        let main_core = if core == 0 { 1.min(cores - 1) } else { 0 };
        match super::testpmd::run(8, main_core, core, o.batch) {
            Ok(t) => {
                progress.note(&format!("testpmd macswap (net_null x2): {:.2} Mpps", t.mpps));
                out["testpmd_mpps"] = json!(round(t.mpps, 3));
                out["ratio_to_testpmd"] = json!(round(mpps / t.mpps, 3));
                out["testpmd_command"] = json!(t.command);
            }
            Err(e) => {
                progress.note(&format!("testpmd: {e}"));
                out["testpmd_mpps"] = serde_json::Value::Null;
                out["testpmd_error"] = json!(e);
            }
        }
    }
    emit(&out, o.json);
    Ok(())
}

pub fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_split_samples_into_rates() {
        let t0 = Instant::now();
        let at = |ms: u64, n: u64| (n, t0 + Duration::from_millis(ms));
        // 1 Mpps for 200 ms, then 3 Mpps for 100 ms, sampled every 50 ms.
        let samples = [
            at(0, 0),
            at(50, 50_000),
            at(100, 100_000),
            at(150, 150_000),
            at(200, 200_000),
            at(250, 350_000),
            at(300, 500_000),
        ];
        let w = Windows::of(&samples);
        assert_eq!(w.count, 3);
        assert!((w.median - 1.0).abs() < 1e-9 && (w.best - 3.0).abs() < 1e-9, "{w:?}");
        assert_eq!(Windows::of(&samples[..2]).count, 0);
    }
}
