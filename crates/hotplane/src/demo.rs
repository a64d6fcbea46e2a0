//! `hotplane demo`: the place a newcomer starts. An in-process data plane on mem ports carries
//! two flows, each with its own function. A third of the way through, an authenticated in-band
//! update packet replaces flow 1's function while flow 2 keeps its own; two thirds through, a
//! second in-band update carries an eBPF object built by clang (`examples/ebpf/xdp_mark.o`,
//! several fragments) that becomes flow 2's function, verified and JIT-compiled on arrival;
//! then a third carries Lua source that becomes flow 1's function (compiled on the control
//! thread, run by LuaJIT on the worker). Last, one active packet (WASP, `examples/wasp/count.s`)
//! crosses it, counts itself in p0's store and goes on. It prints a per-flow table and writes a
//! plot of per-packet latency over time with the updates marked.

use crate::config::{
    Config, DataplaneConfig, FlowConfig, IdlePolicy, KeyConfig, PortConfig, PortKind,
};
use crate::inband::{ack_of, UpdateSender};
use crate::plot::{latency_plot, thin, Marker, Series};
use crate::StageSpec;

use anyhow::Context;
use hotplane_control::api::Request;
use hotplane_control::{AckStatus, Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_core::{time, FlowSelector};
use hotplane_io::mem::{GenSpec, MemReport, MemSpec, Sample, SinkSpec};
use hotplane_wasp::demo as wasp;
use plotters::style::RGBColor;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

pub struct Opts {
    pub out: PathBuf,
    pub rate_pps: f64,
    pub duration_ms: u64,
    pub json: bool,
}

const MARK_FLOW1: u16 = 0x11;
const MARK_FLOW2: u16 = 0x22;
const MARK_NEW: u16 = 0xaa;
/// What `examples/ebpf/xdp_mark.o` writes.
const MARK_EBPF: u16 = 0xbb;
const MARK_OBJECT: &[u8] = include_bytes!("../../../examples/ebpf/xdp_mark.o");
/// What the Lua update (examples/lua/mark.lua with another constant) writes.
const MARK_LUA: u16 = 0xcc;

fn selector(gen: &GenSpec, i: u16) -> String {
    format!(
        "proto=udp,src={},dst={},sport={},dport={}",
        gen.src_ip,
        gen.dst_ip,
        gen.src_port + i,
        gen.dst_port
    )
}

fn random_key() -> [u8; 32] {
    let mut k = [0u8; 32];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut k);
    }
    // Mix in the clock in case /dev/urandom was unavailable.
    let t = time::now_ns().to_le_bytes();
    *blake3::keyed_hash(&k, &t).as_bytes()
}

struct FlowRow {
    name: &'static str,
    sent: u64,
    received: u64,
    lost: u64,
    dup: u64,
    before: (f64, f64),
    after: (f64, f64),
    function: String,
    visible_us: Option<f64>,
}

fn quantiles(lat: &mut [f64]) -> (f64, f64) {
    if lat.is_empty() {
        return (0.0, 0.0);
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize];
    (q(0.5), q(0.99))
}

/// Runs the demo; what `--json` prints.
pub fn run(o: &Opts) -> anyhow::Result<serde_json::Value> {
    let cores = hotplane_engine::online_cores();
    let workers = cores.clamp(1, 2);
    let gen = GenSpec { flows: 2, rate_pps: Some(o.rate_pps), ..Default::default() };
    let key = random_key();
    let expected = (o.rate_pps * o.duration_ms as f64 / 1000.0) as usize;
    let cfg = Config {
        dataplane: DataplaneConfig { workers, idle: IdlePolicy::Poll, ..Default::default() },
        ports: vec![PortConfig::new(
            "p0",
            None,
            PortKind::Mem(MemSpec {
                gen: Some(gen.clone()),
                sink: SinkSpec { measure: true, record: expected + 10_000, capture: 64 },
            }),
        )],
        pipeline: crate::config::PipelineConfig {
            flows: vec![
                FlowConfig {
                    selector: selector(&gen, 0),
                    stage: StageSpec::stamp_mark(MARK_FLOW1),
                },
                FlowConfig {
                    selector: selector(&gen, 1),
                    stage: StageSpec::stamp_mark(MARK_FLOW2),
                },
                // WASP's UDP port: the active packet's flow (the two above never meet it).
                FlowConfig { selector: wasp::selector(), stage: StageSpec::new(wasp::stage())? },
            ],
            ..Default::default()
        },
        control: crate::config::ControlConfig {
            keys: vec![KeyConfig { id: 1, key: Some(hex::encode(key)), key_file: None }],
            ..Default::default()
        },
        ..Default::default()
    };
    let update_port = cfg.control.update_port;
    if !o.json {
        eprintln!(
            "hotplane demo: {workers} worker(s), mem port p0, 2 flows at {:.0} kpps each for {} ms",
            o.rate_pps / 2000.0,
            o.duration_ms
        );
        eprintln!(
            "  flow 1 function: mark 0x{MARK_FLOW1:02x}   flow 2 function: mark 0x{MARK_FLOW2:02x}"
        );
    }
    let plane = crate::start(cfg)?;
    let start_ns = time::now_ns();
    let p0 = plane.mem("p0").context("mem port p0")?.clone();
    let sender = UpdateSender::new(1, Some(key), update_port);
    let quarter = Duration::from_millis(o.duration_ms / 4);
    std::thread::sleep(quarter);

    // Update 1: flow 1's function becomes "mark 0xaa", authenticated with key 1.
    let sel = |i: u16| -> anyhow::Result<FlowSelector> {
        selector(&gen, i).parse().map_err(|e| anyhow::anyhow!("{e}"))
    };
    let header = |kind, seq, target| UpdateHeader {
        kind,
        flags: Flags::default(),
        key_id: 1,
        seq,
        target,
        worker: WorkerScope::All,
    };
    let payload = serde_json::to_vec(&StageSpec::stamp_mark(MARK_NEW))?;
    let frames = sender.frames(&header(Kind::NativeStage, 1, Target::Flow(sel(0)?)), &payload)?;
    let update_ns = time::now_ns();
    for f in frames {
        p0.inject(f).map_err(|_| anyhow::anyhow!("injection queue full"))?;
    }
    if !o.json {
        eprintln!("  t = {:.1} ms: update 1 sent: flow 1 -> native mark 0x{MARK_NEW:02x} (BLAKE3-MACed, seq 1)", (update_ns - start_ns) as f64 / 1e6);
    }
    std::thread::sleep(quarter);

    // Update 2: flow 2's function becomes an eBPF program: a clang-built XDP object carried in
    // the update itself, verified and compiled by the node when it arrives.
    let frames = sender.frames(&header(Kind::EbpfElf, 2, Target::Flow(sel(1)?)), MARK_OBJECT)?;
    let ebpf_ns = time::now_ns();
    let fragments = frames.len();
    for f in frames {
        p0.inject(f).map_err(|_| anyhow::anyhow!("injection queue full"))?;
    }
    if !o.json {
        eprintln!(
            "  t = {:.1} ms: update 2 sent: flow 2 -> eBPF xdp_mark.o ({} bytes of ELF in {fragments} fragments, seq 2)",
            (ebpf_ns - start_ns) as f64 / 1e6,
            MARK_OBJECT.len()
        );
    }
    std::thread::sleep(quarter);

    // Update 3: flow 1's function becomes Lua source, compiled by the node when it arrives.
    let lua_src = crate::bench::MARK_LUA.replace("0x0101", &format!("0x{MARK_LUA:04x}"));
    let frames = sender.frames(&header(Kind::Lua, 3, Target::Flow(sel(0)?)), lua_src.as_bytes())?;
    let lua_ns = time::now_ns();
    for f in frames {
        p0.inject(f).map_err(|_| anyhow::anyhow!("injection queue full"))?;
    }
    if !o.json {
        eprintln!(
            "  t = {:.1} ms: update 3 sent: flow 1 -> Lua examples/lua/mark.lua writing 0x{MARK_LUA:02x} ({} bytes of source, seq 3)",
            (lua_ns - start_ns) as f64 / 1e6,
            lua_src.len()
        );
    }
    // One active packet (WASP): it counts itself in p0's store and goes on.
    let active = wasp::DemoPacket::new()?;
    p0.inject(active.frame.clone()).map_err(|_| anyhow::anyhow!("injection queue full"))?;
    if !o.json {
        let at_ms = (time::now_ns() - start_ns) as f64 / 1e6;
        eprintln!("  t = {at_ms:.1} ms: active packet sent: {}", active.describe());
    }
    std::thread::sleep(quarter);
    let entry =
        plane.request(Request::WaspGet { store: wasp::STORE.into(), key: wasp::KEY, scope: None });
    let stats = plane.stats()?;
    let apply = plane.observability().stats_json()["updates"].clone();
    let handles = plane.mem_handles();
    let summary = plane.stop();
    let r = MemReport::merge(&handles);
    let active = active.outcome(entry.into_result().ok().as_ref(), &stats["wasp"], &r.captured);

    // The acknowledgements came back out of p0.
    let acks: Vec<_> =
        r.captured.iter().filter_map(|f| ack_of(f, Some(&key))).filter_map(Result::ok).collect();
    let ack_for = |seq: u64| -> (String, u64) {
        // Fragments are acknowledged as partial; the last acknowledgement is the outcome.
        match acks.iter().rev().find(|a| a.seq == seq) {
            Some(a) if a.status == AckStatus::Applied => {
                (format!("applied, flow table version {}", a.version), a.version)
            }
            Some(a) => (format!("{:?}: {}", a.status, a.message), 0),
            None => ("no acknowledgement seen".into(), 0),
        }
    };
    let (ack_text, new_version) = ack_for(1);
    let (ebpf_ack_text, ebpf_version) = ack_for(2);
    let (lua_ack_text, lua_version) = ack_for(3);
    let lua_visible_us = r
        .samples
        .iter()
        .filter(|s| s.flow == 0 && s.mark == MARK_LUA)
        .map(|s| s.rx_ts)
        .min()
        .map(|t| t.saturating_sub(lua_ns) as f64 / 1000.0);

    let by_flow = |f: u16| -> Vec<&Sample> { r.samples.iter().filter(|s| s.flow == f).collect() };
    let mut rows = Vec::new();
    let mut series = Vec::new();
    for (i, name, color) in
        [(0u16, "flow 1", RGBColor(31, 119, 180)), (1u16, "flow 2", RGBColor(255, 127, 14))]
    {
        let fr = r.flow(i).context("flow missing from report")?;
        let samples = by_flow(i);
        let lat = |s: &&Sample| (s.rx_ts.saturating_sub(s.tx_ts)) as f64 / 1000.0;
        // Each flow's own (first) update splits its packets into before and after.
        let (changed_at, new_mark) =
            if i == 0 { (update_ns, MARK_NEW) } else { (ebpf_ns, MARK_EBPF) };
        let mut before: Vec<f64> =
            samples.iter().filter(|s| s.tx_ts < changed_at).map(lat).collect();
        let mut after: Vec<f64> = samples
            .iter()
            .filter(|s| s.tx_ts >= changed_at && (i == 1 || s.tx_ts < lua_ns))
            .map(lat)
            .collect();
        let marks: Vec<String> = fr.marks.iter().map(|m| format!("0x{:02x}", m.mark)).collect();
        // When the first packet processed by the new function left the pipeline. (Its stamp
        // holds its *scheduled* generation time, which can precede the update when the worker
        // runs behind; the sink's transmit time cannot.)
        let visible_us = samples
            .iter()
            .filter(|s| s.mark == new_mark)
            .map(|s| s.rx_ts)
            .min()
            .map(|t| t.saturating_sub(changed_at) as f64 / 1000.0);
        rows.push(FlowRow {
            name,
            sent: fr.sent,
            received: fr.received,
            lost: fr.lost,
            dup: fr.duplicates,
            before: quantiles(&mut before),
            after: quantiles(&mut after),
            function: marks.join(" -> "),
            visible_us,
        });
        let pts: Vec<(f64, f64)> = samples
            .iter()
            .map(|s| ((s.tx_ts.saturating_sub(start_ns)) as f64 / 1e6, lat(s)))
            .collect();
        let at = (changed_at - start_ns) as f64 / 1e6;
        series.push(Series {
            name: name.into(),
            color,
            points: thin(&pts, 6000, Some((at - 1.0, at + 5.0))),
        });
    }
    std::fs::create_dir_all(&o.out).with_context(|| format!("creating {}", o.out.display()))?;
    let plot = o.out.join("hotplane-demo.svg");
    latency_plot(
        &plot,
        "hotplane demo: per-packet latency; functions replaced in-band (native, eBPF, Lua)",
        &series,
        &[
            Marker {
                at_ms: (update_ns - start_ns) as f64 / 1e6,
                label: format!("flow 1 -> native, v{new_version}"),
            },
            Marker {
                at_ms: (ebpf_ns - start_ns) as f64 / 1e6,
                label: format!("flow 2 -> eBPF, v{ebpf_version}"),
            },
            Marker {
                at_ms: (lua_ns - start_ns) as f64 / 1e6,
                label: format!("flow 1 -> Lua, v{lua_version}"),
            },
        ],
    )?;

    if !o.json {
        println!();
        println!(
            "{:<7} {:>8} {:>8} {:>5} {:>4}  {:>17}  {:>17}  {:<14} {:>12}",
            "flow",
            "sent",
            "received",
            "lost",
            "dup",
            "before p50/p99 us",
            "after p50/p99 us",
            "function",
            "visible after"
        );
        for row in &rows {
            println!(
                "{:<7} {:>8} {:>8} {:>5} {:>4}  {:>8.2}/{:<8.2}  {:>8.2}/{:<8.2}  {:<14} {:>12}",
                row.name,
                row.sent,
                row.received,
                row.lost,
                row.dup,
                row.before.0,
                row.before.1,
                row.after.0,
                row.after.1,
                row.function,
                row.visible_us.map_or_else(|| "unchanged".to_string(), |v| format!("{v:.1} us")),
            );
        }
        println!();
        println!("update 1 (native stage): {ack_text}");
        println!("update 2 (eBPF ELF, {} bytes): {ebpf_ack_text}", MARK_OBJECT.len());
        println!(
            "update 3 (Lua source, {} bytes): {lua_ack_text}; first packet from the new function {}",
            lua_src.len(),
            lua_visible_us.map_or_else(|| "not seen".to_string(), |v| format!("{v:.1} us after sending"))
        );
        println!(
            "control thread: median apply {} us over the three updates",
            apply["apply_us_p50"]
        );
        println!("active packet {}", active.text);
        println!("plot:   {}", plot.display());
    }
    let out = json!({
        "demo": "flow-function-update",
        "workers": workers,
        "update": { "ack": ack_text, "version": new_version, "apply_us": apply["apply_us_p50"] },
        "ebpf_update": { "ack": ebpf_ack_text, "version": ebpf_version, "object_bytes": MARK_OBJECT.len(), "fragments": fragments },
        "lua_update": { "ack": lua_ack_text, "version": lua_version, "source_bytes": lua_src.len(), "update_to_visible_us": lua_visible_us },
        "flows": rows.iter().map(|r| json!({
            "flow": r.name, "sent": r.sent, "received": r.received, "lost": r.lost, "duplicates": r.dup,
            "latency_us_before_p50": r.before.0, "latency_us_before_p99": r.before.1,
            "latency_us_after_p50": r.after.0, "latency_us_after_p99": r.after.1,
            "functions": r.function, "update_to_visible_us": r.visible_us,
        })).collect::<Vec<_>>(),
        "wasp": active.json,
        "panics": summary.panics,
        "plot": plot.display().to_string(),
    });
    if o.json {
        println!("{out}");
    }
    if summary.panics > 0
        || rows.iter().any(|r| r.lost > 0)
        || new_version == 0
        || ebpf_version == 0
        || !active.ok
        // A build without Lua refuses update 3 (`unsupported_kind`) and flow 1 keeps its function.
        || (cfg!(feature = "lua") && (lua_version == 0 || lua_visible_us.is_none()))
        || (!cfg!(feature = "lua") && !lua_ack_text.starts_with("Refused"))
    {
        anyhow::bail!("the demo did not go as it should: see the table above");
    }
    Ok(out)
}
