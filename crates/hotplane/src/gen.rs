//! `hotplane gen`: a traffic generator and receiver in the style of MoonGen, built from the
//! engine's own parts. Packets come from a `mem` generator (flows, sizes, IMIX, paced rate,
//! count or duration) and leave through any port kind; the receive side (an interface, possibly
//! in another network namespace) hands what comes back to a measuring sink that matches packets
//! by the sequence number in their stamp: throughput, loss, reordering, duplicates, latency.
//! Timestamps are CLOCK_MONOTONIC read through the vDSO from the invariant TSC.

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
    pub spec: GenSpec,
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

/// Run the generator; prints progress (unless `json`) and returns the result.
pub fn run(o: &GenOpts) -> anyhow::Result<Value> {
    if let Some(path) = &o.read {
        return read_capture(path, o.json);
    }
    let mut ports = Vec::new();
    let gen_kind = PortKind::Mem(MemSpec { gen: Some(o.spec.clone()), ..Default::default() });
    match (&o.tx, &o.write) {
        (Some(tx), None) => {
            ports.push(PortConfig::new("gen", Some("tx"), gen_kind));
            ports.push(PortConfig::new("tx", Some("sink"), tx.port_kind()));
            if let Some(rx) = o.rx.as_ref().filter(|rx| *rx != tx) {
                ports.push(PortConfig::new("rx", Some("sink"), rx.port_kind()));
            }
        }
        (None, Some(path)) => {
            if o.spec.count.is_none() && o.spec.duration_ms.is_none() {
                bail!("writing a capture needs --count or --duration");
            }
            ports.push(PortConfig::new("gen", Some("tx"), gen_kind));
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
    let gen = plane.mem("gen").cloned().ok_or_else(|| anyhow::anyhow!("no generator"))?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    let obs = plane.observability().clone();
    let count = |port: &str, rx: bool| -> u64 {
        obs.ports.iter().find(|p| p.name == port).map_or(0, |p| {
            p.queues.iter().map(|c| if rx { c.rx_packets.get() } else { c.tx_packets.get() }).sum()
        })
    };
    let progress = !o.json && std::io::stderr().is_terminal();
    let start = Instant::now();
    let (mut last_t, mut last_tx, mut last_rx) = (start, 0u64, 0u64);
    while !gen.generator_done() && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        if !o.json && last_t.elapsed() >= Duration::from_secs(1) {
            let (tx, rx) = (count("gen", true), count("sink", false));
            let dt = last_t.elapsed().as_secs_f64();
            let line = format!(
                "{:6.1} s  tx {:8.3} Mpps  rx {:8.3} Mpps  sent {tx}  received {rx}",
                start.elapsed().as_secs_f64(),
                (tx - last_tx) as f64 / dt / 1e6,
                (rx - last_rx) as f64 / dt / 1e6
            );
            if progress {
                eprintln!("{line}");
            }
            (last_t, last_tx, last_rx) = (Instant::now(), tx, rx);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(o.drain_ms));
    let handles = plane.mem_handles();
    let summary_ports = plane.stop();
    let r = MemReport::merge(&handles);
    let sent = r.sent();
    let received = r.received();
    if let Some(path) = &o.write {
        // Into a capture: nothing comes back, so there is no loss or latency to report.
        let out = json!({
            "written": sent,
            "file": path.display().to_string(),
            "seconds": (secs * 1000.0).round() / 1000.0,
            "tx_mpps": ((sent as f64 / secs / 1e6) * 1e4).round() / 1e4,
        });
        if !o.json {
            println!("wrote {sent} frames to {} in {secs:.2} s", path.display());
        }
        return Ok(out);
    }
    let mut out = summary(&r);
    out["tx_packets"] = json!(sent);
    out["rx_packets"] = json!(received);
    out["seconds"] = json!((secs * 1000.0).round() / 1000.0);
    out["tx_mpps"] = json!(((sent as f64 / secs / 1e6) * 1e4).round() / 1e4);
    out["rx_mpps"] = json!(((received as f64 / secs / 1e6) * 1e4).round() / 1e4);
    out["loss_ratio"] = json!(if sent == 0 { 0.0 } else { r.lost() as f64 / sent as f64 });
    out["unstamped_received"] = json!(r.unstamped);
    out["ports"] = json!(summary_ports.ports);
    // A rate the pacer could not hold: the frames queued behind it, and their latency says
    // so more than the path's.
    if let Some(asked) = o.spec.rate_pps.filter(|&r| r > 0.0) {
        let achieved = sent as f64 / secs;
        out["asked_pps"] = json!(asked);
        out["achieved_pps"] = json!(achieved.round());
        if achieved < asked * 0.95 {
            eprintln!(
                "warning: the generator sent {achieved:.0} pps of the {asked:.0} asked: it \
                 fell behind, and latency includes the time frames waited for it"
            );
        }
    }
    if !o.json {
        println!(
            "sent {sent} in {secs:.2} s ({:.3} Mpps), received {received} ({:.3} Mpps), lost {} ({:.4} %), reordered {}, duplicated {}",
            sent as f64 / secs / 1e6,
            received as f64 / secs / 1e6,
            r.lost(),
            out["loss_ratio"].as_f64().unwrap_or(0.0) * 100.0,
            out["reordered"],
            r.duplicates()
        );
        println!(
            "latency us: p50 {} p90 {} p99 {} p99.9 {} max {}",
            out["latency_us"]["p50"],
            out["latency_us"]["p90"],
            out["latency_us"]["p99"],
            out["latency_us"]["p999"],
            out["latency_us"]["max"]
        );
    }
    Ok(out)
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
