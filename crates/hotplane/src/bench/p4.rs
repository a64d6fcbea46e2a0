//! `hotplane bench p4`: a P4 program as the `pre` stage of one worker between two mem ports
//! handing out pre-built 64-byte UDP frames (as `bench pipeline`), next to the engine's own
//! `l2fwd` on the same ports in the same run, and the same program on the closure engine (what
//! native code is measured against). The frames' destination addresses step through
//! `--flows` addresses from `--dst-ip`, so an LPM program sees many keys; by default they are
//! taken from the widest prefix the entries route (not drop), so the program is measured on
//! the packets it forwards.

use super::pipeline::{config, measure_config, round};
use super::{emit, Progress};
use crate::StageSpec;
use hotplane_io::mem::{GenSpec, MemSpec, Vary};
use serde_json::json;
use std::net::IpAddr;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct Opts {
    /// The P4 program (v1model).
    #[arg(long)]
    pub program: PathBuf,
    /// Table entries, runtime JSON (p4lang tutorials' sN-runtime.json format).
    #[arg(long)]
    pub entries: Option<PathBuf>,
    /// Packets measured per configuration.
    #[arg(long, default_value_t = 20_000_000)]
    pub packets: u64,
    /// Distinct destination addresses [default: those of the widest prefix the entries route,
    /// at most 1024; else 1024].
    #[arg(long)]
    pub flows: Option<u32>,
    /// First destination address [default: in the widest prefix the entries route; else
    /// 10.0.1.1].
    #[arg(long)]
    pub dst_ip: Option<IpAddr>,
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Core of the worker.
    #[arg(long, default_value_t = 1)]
    pub core: usize,
    #[arg(long)]
    pub json: bool,
}

pub fn run(o: &Opts) -> anyhow::Result<()> {
    let cores = hotplane_engine::online_cores();
    let core = o.core.min(cores - 1);
    let mut progress = Progress::new("p4", o.json);
    let mut cfg = config(o.batch, core);
    let routed = o.entries.as_deref().and_then(routed_prefix);
    let (dst_ip, flows) = match (o.dst_ip, o.flows, &routed) {
        (Some(ip), flows, _) => (ip, flows.unwrap_or(DEFAULT_FLOWS)),
        (None, flows, Some(r)) => {
            progress.note(&format!(
                "destinations from the entries: {}/{} ({})",
                r.network, r.prefix_len, r.action
            ));
            (IpAddr::V4(r.first), flows.unwrap_or(r.hosts))
        }
        (None, flows, None) => (DEFAULT_DST.into(), flows.unwrap_or(DEFAULT_FLOWS)),
    };
    let gen = GenSpec {
        stamp: false,
        prebuilt: true,
        flows: flows.max(1),
        vary: Vary::DstIp,
        dst_ip,
        ..Default::default()
    };
    for p in &mut cfg.ports {
        if let crate::config::PortKind::Mem(MemSpec { gen: g, .. }) = &mut p.kind {
            *g = Some(gen.clone());
        }
    }
    let p4_stage = |engine: &str| {
        let spec = StageSpec::stage("p4")
            .with("program", o.program.display().to_string())
            .with("engine", engine);
        match &o.entries {
            Some(e) => spec.with("entries", e.display().to_string()),
            None => spec,
        }
    };
    let closures_cfg = {
        let mut c = cfg.clone();
        c.pipeline.pre = Some(p4_stage("closures"));
        c
    };
    cfg.pipeline.pre = Some(p4_stage("native"));
    let anchor_cfg = {
        let mut c = cfg.clone();
        c.pipeline.pre = Some(StageSpec::stage("l2fwd"));
        c
    };
    // What "native" gets on this machine (closures if Cranelift cannot generate code here).
    let engine = {
        let qsbr = hotplane_core::Qsbr::new();
        let ir = hotplane_p4::compile_file(&o.program, &[], &[])
            .map_err(|e| anyhow::anyhow!("{}", e))?;
        let p = hotplane_p4::exec::Pipeline::new(ir, &qsbr).map_err(|e| anyhow::anyhow!(e))?;
        format!("{:?}", p.engine()).to_lowercase()
    };
    let p4 = measure_config(cfg, o.packets, &mut progress)?;
    progress.note(&format!(
        "{}: {:.2} Mpps ({:.1} ns/packet), {} dropped, {} to no port",
        o.program.display(),
        p4.mpps,
        p4.ns_per_packet,
        p4.dropped,
        p4.no_route
    ));
    // A rate of packets the program drops measures its drop path, not the program: say so.
    let lost = p4.dropped + p4.no_route;
    // Counted a moment after the interval's packets: never above all of them.
    let lost_share = (lost as f64 / p4.packets.max(1) as f64).min(1.0);
    let warning = (lost_share > 0.01).then(|| {
        format!(
            "{:.1} % of the packets were dropped or went to no port: the rate measures the drop \
             path; give --dst-ip/--flows that the entries route (or --entries that route them)",
            lost_share * 100.0
        )
    });
    if let Some(w) = &warning {
        eprintln!("warning: {w}");
    }
    let closures = measure_config(closures_cfg, o.packets, &mut progress)?;
    progress.note(&format!("the same on closures: {:.2} Mpps", closures.mpps));
    let l2 = measure_config(anchor_cfg, o.packets, &mut progress)?;
    progress.finish(&format!("l2fwd on the same ports: {:.2} Mpps", l2.mpps));
    let out = json!({
        "bench": "p4",
        "program": o.program.display().to_string(),
        "entries": o.entries.as_ref().map(|e| e.display().to_string()),
        "mpps_per_core": round(p4.mpps, 3),
        "ns_per_packet": round(p4.ns_per_packet, 2),
        "dropped": p4.dropped,
        "no_route": p4.no_route,
        "l2fwd_mpps": round(l2.mpps, 3),
        "ratio_to_l2fwd": round(p4.mpps / l2.mpps, 3),
        "engine": engine,
        // Per ~100 ms window, for a machine shared with others (see `Measured::windows`).
        "windows": {
            "mpps_median": round(p4.windows.median, 3),
            "mpps_best": round(p4.windows.best, 3),
            "l2fwd_mpps_median": round(l2.windows.median, 3),
            "l2fwd_mpps_best": round(l2.windows.best, 3),
            "ratio_to_l2fwd_median": round(p4.windows.median / l2.windows.median, 3),
            "count": p4.windows.count,
        },
        "closures_mpps": round(closures.mpps, 3),
        "native_over_closures": round(p4.mpps / closures.mpps, 3),
        "flows": flows,
        "dst_ip": dst_ip.to_string(),
        "batch": o.batch,
        "core": core,
        "packets": o.packets,
        "frame_bytes": 64,
        "published_anchors": {"bmv2_simple_switch_mpps": 0.08, "p4_dpdk_l2fwd_mpps": 4.8},
        "warning": warning,
    });
    emit(&out, o.json);
    Ok(())
}

const DEFAULT_FLOWS: u32 = 1024;
const DEFAULT_DST: [u8; 4] = [10, 0, 1, 1];

/// The widest IPv4 destination prefix an entries document routes (an entry on a field named
/// like `dstAddr` whose action is not a drop).
#[derive(Debug, PartialEq, Eq)]
struct Routed {
    network: std::net::Ipv4Addr,
    prefix_len: u32,
    /// The first host and how many follow (at most [`DEFAULT_FLOWS`]).
    first: std::net::Ipv4Addr,
    hosts: u32,
    action: String,
}

fn routed_prefix(entries: &std::path::Path) -> Option<Routed> {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(entries).ok()?).ok()?;
    routed_in(&doc)
}

fn routed_in(doc: &serde_json::Value) -> Option<Routed> {
    let mut best: Option<Routed> = None;
    for e in doc["table_entries"].as_array()? {
        let action = e["action_name"].as_str().unwrap_or_default();
        if e["default_action"] == true || action.to_ascii_lowercase().contains("drop") {
            continue;
        }
        for (field, m) in e["match"].as_object().into_iter().flatten() {
            if !field.to_ascii_lowercase().contains("dst") {
                continue;
            }
            let (addr, len) = match m {
                serde_json::Value::String(a) => (a.as_str(), 32),
                serde_json::Value::Array(v) if v.len() == 2 => {
                    (v[0].as_str().unwrap_or_default(), v[1].as_u64().unwrap_or(33) as u32)
                }
                _ => continue,
            };
            let (Ok(addr), true) = (addr.parse::<std::net::Ipv4Addr>(), len <= 32) else {
                continue;
            };
            if best.as_ref().is_some_and(|b| b.prefix_len <= len) {
                continue;
            }
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            let network = u32::from(addr) & mask;
            // Past the network address, before the broadcast one, where there are such.
            let (first, hosts) = match 32 - len {
                0 => (network, 1),
                1 => (network, 2),
                bits => (network + 1, ((1u64 << bits) - 2).min(DEFAULT_FLOWS as u64) as u32),
            };
            best = Some(Routed {
                network: network.into(),
                prefix_len: len,
                first: first.into(),
                hosts,
                action: action.to_string(),
            });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_follow_the_widest_routed_prefix() {
        let doc = serde_json::json!({"table_entries": [
            {"table": "t", "default_action": true, "action_name": "MyIngress.drop"},
            {"table": "t", "match": {"hdr.ipv4.dstAddr": ["10.0.3.3", 32]}, "action_name": "fwd"},
            {"table": "t", "match": {"hdr.ipv4.dstAddr": ["10.0.9.0", 16]}, "action_name": "MyIngress.drop"},
            {"table": "t", "match": {"hdr.ipv4.dstAddr": ["10.0.1.7", 24]}, "action_name": "fwd"},
        ]});
        let r = routed_in(&doc).unwrap();
        assert_eq!(
            (r.network.to_string(), r.prefix_len, r.first.to_string(), r.hosts),
            ("10.0.1.0".into(), 24, "10.0.1.1".into(), 254)
        );
        let only_hosts = serde_json::json!({"table_entries": [
            {"table": "t", "match": {"hdr.ipv4.dstAddr": "10.0.2.2"}, "action_name": "fwd"},
        ]});
        assert_eq!(
            routed_in(&only_hosts).map(|r| (r.first.to_string(), r.hosts)),
            Some(("10.0.2.2".into(), 1))
        );
        assert!(routed_in(&serde_json::json!({"table_entries": []})).is_none());
        let wide = serde_json::json!({"table_entries": [
            {"table": "t", "match": {"dstAddr": ["10.0.0.0", 8]}, "action_name": "fwd"},
        ]});
        assert_eq!(routed_in(&wide).unwrap().hosts, DEFAULT_FLOWS);
    }
}
