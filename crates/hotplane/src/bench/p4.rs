//! `hotplane bench p4`: a P4 program as the `pre` stage of one worker between two mem ports
//! handing out pre-built 64-byte UDP frames (as `bench pipeline`), next to the engine's own
//! `l2fwd` on the same ports in the same run, and the same program on the closure engine (what
//! native code is measured against). The frames' destination addresses step through
//! `--flows` addresses from `--dst-ip`, so an LPM program sees many keys.

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
    /// Distinct destination addresses.
    #[arg(long, default_value_t = 1024)]
    pub flows: u32,
    /// First destination address.
    #[arg(long, default_value = "10.0.1.1")]
    pub dst_ip: IpAddr,
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
    let gen = GenSpec {
        stamp: false,
        prebuilt: true,
        flows: o.flows.max(1),
        vary: Vary::DstIp,
        dst_ip: o.dst_ip,
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
        "flows": o.flows,
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
