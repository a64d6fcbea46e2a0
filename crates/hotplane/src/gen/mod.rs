//! `hotplane gen`: a traffic generator and receiver in the style of MoonGen, built from the
//! engine's own parts. Packets come from `mem` generators, one per stream (UDP, TCP or ICMP;
//! flows, sizes, IMIX, a paced rate that a sweep changes while running, count or duration; or
//! a pcap's frames) and leave through any port kind; the receive side (an interface, possibly
//! in another network namespace) hands what comes back to a measuring sink that matches packets
//! by the sequence number in their stamp: throughput, loss, reordering, duplicates, latency.
//! Timestamps are CLOCK_MONOTONIC read through the vDSO from the invariant TSC.

mod args;
pub use args::GenArgs;

use crate::config::{Config, DataplaneConfig, IdlePolicy, PortConfig, PortKind};

use anyhow::bail;
use hotplane_io::afpacket::AfPacketSpec;
use hotplane_io::afxdp::AfXdpSpec;
use hotplane_io::mem::{GenSpec, MemReport, MemSpec};
use hotplane_io::pcap::PcapSpec;
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An interface port kind usable by the generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfKind {
    Afpacket,
    Afxdp,
}

impl std::str::FromStr for IfKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "afpacket" => Ok(IfKind::Afpacket),
            "afxdp" => Ok(IfKind::Afxdp),
            o => Err(format!("`{o}`: one of afpacket, afxdp")),
        }
    }
}

/// One side of the generator: an interface (in a namespace, optionally).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    pub kind: IfKind,
    pub interface: String,
    pub netns: Option<String>,
}

impl Iface {
    fn port_kind(&self) -> PortKind {
        match self.kind {
            IfKind::Afpacket => PortKind::Afpacket(AfPacketSpec {
                interface: self.interface.clone(),
                netns: self.netns.clone(),
                ..Default::default()
            }),
            IfKind::Afxdp => PortKind::Afxdp(AfXdpSpec {
                interface: self.interface.clone(),
                netns: self.netns.clone(),
                ..Default::default()
            }),
        }
    }
}

pub struct GenOpts {
    /// The first stream...
    pub spec: GenSpec,
    /// ...and more, each from a generator of its own, with its own rate.
    pub more: Vec<GenSpec>,
    /// A rate sweep of the first stream: packets per second, each for `step_secs`.
    pub steps: Vec<f64>,
    pub step_secs: f64,
    /// Send out of this interface...
    pub tx: Option<Iface>,
    /// ...or into this capture file.
    pub write: Option<PathBuf>,
    /// Receive returning packets here (may be the same interface as `tx`).
    pub rx: Option<Iface>,
    /// Only measure an existing capture.
    pub read: Option<PathBuf>,
    /// Wait this long after the last packet was sent before counting what arrived.
    pub drain_ms: u64,
    /// Pin the generator's worker to this core.
    pub core: Option<usize>,
    pub json: bool,
}

impl GenOpts {
    /// Generate into a capture file.
    pub fn write(path: PathBuf, spec: GenSpec) -> Self {
        Self {
            spec,
            more: Vec::new(),
            steps: Vec::new(),
            step_secs: 1.0,
            tx: None,
            write: Some(path),
            rx: None,
            read: None,
            drain_ms: 0,
            core: None,
            json: true,
        }
    }

    /// Measure a capture file.
    pub fn read(path: PathBuf) -> Self {
        Self {
            spec: GenSpec::default(),
            more: Vec::new(),
            steps: Vec::new(),
            step_secs: 1.0,
            tx: None,
            write: None,
            rx: None,
            read: Some(path),
            drain_ms: 0,
            core: None,
            json: true,
        }
    }
}

fn summary(r: &MemReport) -> Value {
    let us = |ns: u64| (ns as f64 / 1000.0 * 100.0).round() / 100.0;
    json!({
        "lost": r.lost(),
        "duplicates": r.duplicates(),
        "reordered": r.flows.iter().map(|f| f.reordered).sum::<u64>(),
        "latency_us": {
            "p50": us(r.latency_ns(0.5)),
            "p90": us(r.latency_ns(0.9)),
            "p99": us(r.latency_ns(0.99)),
            "p999": us(r.latency_ns(0.999)),
            "max": us(r.latency_max_ns()),
        },
    })
}

/// The generator ports' names: `gen`, then `gen2`, `gen3`... for more streams.
fn gen_port(i: usize) -> String {
    if i == 0 {
        "gen".into()
    } else {
        format!("gen{}", i + 1)
    }
}

/// Packets and bytes counted at the generators (received into the pipeline) or at the sink
/// (sent out of it).
#[derive(Clone, Copy, Default)]
struct Tally {
    tx: u64,
    tx_bytes: u64,
    rx: u64,
    rx_bytes: u64,
}

impl Tally {
    /// What `now` counted more than `self`, as rates over `secs`: (tx pps, tx Mbit/s, rx pps,
    /// rx Mbit/s), bits of frames with their FCS as --rate-mbps counts them.
    fn rates(&self, now: &Tally, secs: f64) -> (f64, f64, f64, f64) {
        let mbit = |bytes: u64, packets: u64| (bytes + 4 * packets) as f64 * 8.0 / secs / 1e6;
        let (tx, rx) = (now.tx - self.tx, now.rx - self.rx);
        (
            tx as f64 / secs,
            mbit(now.tx_bytes - self.tx_bytes, tx),
            rx as f64 / secs,
            mbit(now.rx_bytes - self.rx_bytes, rx),
        )
    }
}

/// Run the generator; prints progress (unless `json`) and returns the result.
pub fn run(o: &GenOpts) -> anyhow::Result<Value> {
    if let Some(path) = &o.read {
        return read_capture(path, o.json);
    }
    let streams: Vec<&GenSpec> = std::iter::once(&o.spec).chain(&o.more).collect();
    let mut ports = Vec::new();
    let gen_kind =
        |spec: &GenSpec| PortKind::Mem(MemSpec { gen: Some(spec.clone()), ..Default::default() });
    match (&o.tx, &o.write) {
        (Some(tx), None) => {
            for (i, spec) in streams.iter().enumerate() {
                ports.push(PortConfig::new(&gen_port(i), Some("tx"), gen_kind(spec)));
            }
            ports.push(PortConfig::new("tx", Some("sink"), tx.port_kind()));
            if let Some(rx) = o.rx.as_ref().filter(|rx| *rx != tx) {
                ports.push(PortConfig::new("rx", Some("sink"), rx.port_kind()));
            }
        }
        (None, Some(path)) => {
            let endless = |s: &&GenSpec| s.count.is_none() && s.duration_ms.is_none() && s.pcap.is_none();
            // A sweep ends itself; only the first stream is swept.
            if streams.iter().skip(usize::from(!o.steps.is_empty())).any(endless) {
                bail!("writing a capture needs --count or --duration");
            }
            for (i, spec) in streams.iter().enumerate() {
                ports.push(PortConfig::new(&gen_port(i), Some("tx"), gen_kind(spec)));
            }
            ports.push(PortConfig::new("tx", None, PortKind::Pcap(PcapSpec { write: Some(path.clone()), ..Default::default() })));
        }
        _ => bail!("give one of --interface (send out of an interface), --write FILE (into a capture) or --read FILE (measure a capture)"),
    }
    ports.push(PortConfig::new("sink", None, PortKind::Mem(MemSpec::default())));
    let mut cfg = Config {
        dataplane: DataplaneConfig {
            workers: 1,
            cores: o.core.map(|c| vec![c]),
            idle: IdlePolicy::Poll,
            ..Default::default()
        },
        ports,
        ..Default::default()
    };
    cfg.control.update_port = 0;
    let plane = crate::start(cfg)?;
    let gens: Vec<_> = (0..streams.len())
        .map(|i| plane.mem(&gen_port(i)).cloned().ok_or_else(|| anyhow::anyhow!("no generator")))
        .collect::<anyhow::Result<_>>()?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    let obs = plane.observability().clone();
    let tally = || {
        let mut t = Tally::default();
        for p in &obs.ports {
            let s = p.totals();
            if p.name.starts_with("gen") {
                (t.tx, t.tx_bytes) = (t.tx + s.rx_packets, t.tx_bytes + s.rx_bytes);
            } else if p.name == "sink" {
                (t.rx, t.rx_bytes) = (t.rx + s.tx_packets, t.rx_bytes + s.tx_bytes);
            }
        }
        t
    };
    let progress = !o.json && std::io::stderr().is_terminal();
    let start = Instant::now();
    let (mut last_t, mut last) = (start, Tally::default());
    // A sweep: which rate runs, since when, and what each step did.
    let (mut step, mut step_t, mut step_from) = (0usize, start, Tally::default());
    let mut steps_done: Vec<Step> = Vec::new();
    let mut end_step = |step: usize, from: &Tally, now: &Tally, secs: f64| {
        let (tx_pps, tx_mbps, rx_pps, rx_mbps) = from.rates(now, secs);
        let sent = now.tx - from.tx;
        let lost = sent.saturating_sub(now.rx - from.rx);
        let loss = if sent == 0 { 0.0 } else { lost as f64 / sent as f64 };
        steps_done.push(Step { asked: o.steps[step], tx_pps, tx_mbps, rx_pps, rx_mbps, loss });
    };
    let all_done = || gens.iter().all(|g| g.generator_done());
    // The pause between steps, for packets still in flight.
    let in_flight = Duration::from_millis(o.drain_ms.min(100));
    let mut swept = false;
    while !all_done() && !swept && !stop.load(Ordering::Relaxed) {
        // Polled often: the end of the run is the time the achieved rate is measured over.
        std::thread::sleep(Duration::from_millis(1));
        if !o.steps.is_empty() && step_t.elapsed().as_secs_f64() >= o.step_secs {
            // Paused between steps: what is in flight arrives and is counted with the step
            // that sent it, and nothing of the next step is.
            let secs = step_t.elapsed().as_secs_f64();
            gens[0].pause();
            std::thread::sleep(in_flight);
            let boundary = tally();
            end_step(step, &step_from, &boundary, secs);
            let last_step = step + 1 == o.steps.len();
            if let Some(&next) = o.steps.get(step + 1) {
                gens[0].set_rate(Some(next))?;
            }
            (step, step_t, step_from) = (step + 1, Instant::now(), boundary);
            swept = last_step;
        }
        if !o.json && last_t.elapsed() >= Duration::from_secs(1) {
            let now = tally();
            let (tx_pps, tx_mbps, rx_pps, rx_mbps) =
                last.rates(&now, last_t.elapsed().as_secs_f64());
            let asked =
                o.steps.get(step).map(|r| format!("  (asked {r:.0} pps)")).unwrap_or_default();
            let line = format!(
                "{:6.1} s  tx {:8.3} Mpps {:9.1} Mbit/s  rx {:8.3} Mpps {:9.1} Mbit/s  sent {}  received {}{asked}",
                start.elapsed().as_secs_f64(),
                tx_pps / 1e6,
                tx_mbps,
                rx_pps / 1e6,
                rx_mbps,
                now.tx,
                now.rx,
            );
            if progress {
                eprintln!("{line}");
            }
            (last_t, last) = (Instant::now(), now);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(o.drain_ms));
    if !o.steps.is_empty() && !swept {
        // Stopped early (a count, Ctrl-C): the step that ran counts as far as it went.
        end_step(step.min(o.steps.len() - 1), &step_from, &tally(), step_t.elapsed().as_secs_f64());
    }
    let totals = tally();
    let handles = plane.mem_handles();
    let summary_ports = plane.stop();
    let r = MemReport::merge(&handles);
    let sent = r.sent();
    let (_, tx_mbps, _, rx_mbps) = Tally::default().rates(&totals, secs);
    // A rate the pacer could not hold: said in every mode; on a path, the frames queued
    // behind it, and their latency says so more than the path's.
    let asked: f64 = streams.iter().filter_map(|s| s.rate_pps).sum();
    let paced = o.steps.is_empty() && asked > 0.0 && streams.iter().all(|s| s.rate_pps.is_some());
    let pacing = paced.then(|| (asked, sent as f64 / secs));
    if let Some((asked, achieved)) = pacing.filter(|(asked, achieved)| *achieved < asked * 0.95) {
        let latency = if o.write.is_some() {
            ""
        } else {
            ", and latency includes the time frames waited for it"
        };
        eprintln!(
            "warning: the generator sent {achieved:.0} pps of the {asked:.0} asked: it fell behind{latency}"
        );
    }
    if let Some(path) = &o.write {
        // Into a capture: nothing comes back, so there is no loss or latency to report.
        let mut out = json!({
            "written": sent,
            "file": path.display().to_string(),
            "seconds": (secs * 1000.0).round() / 1000.0,
            "tx_mpps": ((sent as f64 / secs / 1e6) * 1e4).round() / 1e4,
            "tx_mbps": (tx_mbps * 100.0).round() / 100.0,
        });
        // Into a capture nothing is received: the steps say what was sent.
        report_pacing(&mut out, pacing, &steps_done, false, o.json);
        if !o.json {
            println!(
                "wrote {sent} frames to {} in {secs:.2} s ({tx_mbps:.1} Mbit/s)",
                path.display()
            );
        }
        return Ok(out);
    }
    // Frames of a pcap carry no stamp: loss is what did not come back, counted.
    let stamped = streams.iter().all(|s| s.stamp && s.pcap.is_none());
    let (received, lost) = if stamped {
        (r.received(), r.lost())
    } else {
        let received = r.received() + r.unstamped;
        (received, sent.saturating_sub(received))
    };
    let mut out = summary(&r);
    out["lost"] = json!(lost);
    out["tx_packets"] = json!(sent);
    out["rx_packets"] = json!(received);
    out["seconds"] = json!((secs * 1000.0).round() / 1000.0);
    out["tx_mpps"] = json!(((sent as f64 / secs / 1e6) * 1e4).round() / 1e4);
    out["rx_mpps"] = json!(((received as f64 / secs / 1e6) * 1e4).round() / 1e4);
    out["tx_mbps"] = json!((tx_mbps * 100.0).round() / 100.0);
    out["rx_mbps"] = json!((rx_mbps * 100.0).round() / 100.0);
    out["loss_ratio"] = json!(if sent == 0 { 0.0 } else { lost as f64 / sent as f64 });
    out["unstamped_received"] = json!(r.unstamped);
    out["ports"] = json!(summary_ports.ports);
    if !stamped {
        out["latency_us"] = Value::Null; // not measured without stamps
    }
    report_pacing(&mut out, pacing, &steps_done, true, o.json);
    if !o.json {
        println!(
            "sent {sent} in {secs:.2} s ({:.3} Mpps, {tx_mbps:.1} Mbit/s), received {received} ({:.3} Mpps, {rx_mbps:.1} Mbit/s), lost {lost} ({:.4} %), reordered {}, duplicated {}",
            sent as f64 / secs / 1e6,
            received as f64 / secs / 1e6,
            out["loss_ratio"].as_f64().unwrap_or(0.0) * 100.0,
            out["reordered"],
            r.duplicates()
        );
        if stamped {
            println!(
                "latency us: p50 {} p90 {} p99 {} p99.9 {} max {}",
                out["latency_us"]["p50"],
                out["latency_us"]["p90"],
                out["latency_us"]["p99"],
                out["latency_us"]["p999"],
                out["latency_us"]["max"]
            );
        } else {
            println!("latency: not measured (the frames carry no stamp)");
        }
    }
    Ok(out)
}

/// What one step of a rate sweep did.
struct Step {
    asked: f64,
    tx_pps: f64,
    tx_mbps: f64,
    rx_pps: f64,
    rx_mbps: f64,
    loss: f64,
}

impl Step {
    /// `received`: the receive side's figures too (not into a capture).
    fn json(&self, received: bool) -> Value {
        let mut v = json!({
            "asked_pps": self.asked,
            "tx_pps": self.tx_pps.round(),
            "tx_mbps": (self.tx_mbps * 100.0).round() / 100.0,
        });
        if received {
            v["rx_pps"] = json!(self.rx_pps.round());
            v["rx_mbps"] = json!((self.rx_mbps * 100.0).round() / 100.0);
            v["loss_ratio"] = json!((self.loss * 1e6).round() / 1e6);
        }
        v
    }
}

/// The asked and achieved rate (`pacing`), and a sweep's steps: into `out`, a warning for a
/// step the pacer could not hold, and (unless `json_only`) a table of the steps.
fn report_pacing(
    out: &mut Value,
    pacing: Option<(f64, f64)>,
    steps: &[Step],
    received: bool,
    json_only: bool,
) {
    if let Some((asked, achieved)) = pacing {
        out["asked_pps"] = json!(asked);
        out["achieved_pps"] = json!(achieved.round());
    }
    if steps.is_empty() {
        return;
    }
    for s in steps.iter().filter(|s| s.tx_pps < s.asked * 0.95) {
        eprintln!(
            "warning: at {:.0} pps asked the generator sent {:.0} pps: it fell behind",
            s.asked, s.tx_pps
        );
    }
    out["steps"] = steps.iter().map(|s| s.json(received)).collect();
    if json_only {
        return;
    }
    let rx = |line: String| if received { line } else { String::new() };
    println!(
        "{:>12} {:>12} {:>10}{}",
        "asked pps",
        "sent pps",
        "tx Mbit/s",
        rx(format!(" {:>12} {:>10} {:>9}", "recv pps", "rx Mbit/s", "loss %"))
    );
    for s in steps {
        println!(
            "{:>12.0} {:>12.0} {:>10.2}{}",
            s.asked,
            s.tx_pps,
            s.tx_mbps,
            rx(format!(" {:>12.0} {:>10.2} {:>9.4}", s.rx_pps, s.rx_mbps, s.loss * 100.0))
        );
    }
}

/// Measure a capture: per-flow counts, missing sequence numbers, duplicates, reordering.
fn read_capture(path: &std::path::Path, json_only: bool) -> anyhow::Result<Value> {
    let ports = vec![
        PortConfig::new(
            "in",
            Some("sink"),
            PortKind::Pcap(PcapSpec { read: Some(path.into()), ..Default::default() }),
        ),
        PortConfig::new("sink", None, PortKind::Mem(MemSpec::default())),
    ];
    let mut cfg = Config { ports, ..Default::default() };
    cfg.control.update_port = 0;
    let plane = crate::start(cfg)?;
    if !plane.wait_drained(Duration::from_secs(3600)) {
        bail!("reading the capture did not finish");
    }
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    let flows: Vec<_> = r
        .flows
        .iter()
        .map(|f| json!({ "flow": f.flow, "received": f.received, "missing": f.missing, "duplicates": f.duplicates, "reordered": f.reordered }))
        .collect();
    if !json_only {
        println!(
            "{:<6} {:>10} {:>10} {:>10} {:>10}",
            "flow", "received", "missing", "dup", "reordered"
        );
        for f in &r.flows {
            println!(
                "{:<6} {:>10} {:>10} {:>10} {:>10}",
                f.flow, f.received, f.missing, f.duplicates, f.reordered
            );
        }
        println!("unstamped frames: {}", r.unstamped);
        eprintln!("(latency needs the generator's clock: measure it live with `hotplane gen --interface ... --rx ...`)");
    }
    Ok(json!({ "flows": flows, "unstamped": r.unstamped }))
}
