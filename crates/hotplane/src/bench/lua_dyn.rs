//! `hotplane bench lua-dyn`: the dynamic-update experiment of libmoon, reproduced on mem ports
//! with batch size 1. Two flows run the default Lua function (it writes 0x0101 into a payload
//! field); after 50,000 packets one in-band update packet carrying Lua source replaces flow 1's
//! function (it writes 0x0202); 200,000 more packets follow. Four configurations: one worker
//! (both flows on one core) and two (one flow each), JIT on and off. Per flow it reports the
//! latency before the update, for the 5,000 packets after it, and after those; the time from the
//! update's arrival to the first packet the new function processed; the compile time; loss; and
//! whether flow 2 noticed anything. It writes every packet's latency to a CSV and a PNG with one
//! panel per configuration.

use super::pipeline::round;
use super::{emit, Progress};
use crate::inband::UpdateSender;
use crate::plot::{panels_png, thin, Marker, Panel, Series};
use crate::Config;
use anyhow::{anyhow, Context as _};
use hotplane_control::api::Request;
use hotplane_control::{Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_core::time;
use hotplane_engine::{online_cores, pin_to_core};
use hotplane_io::mem::{MemReport, Sample};
use plotters::style::RGBColor;
use serde_json::{json, Value};
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Key of the benchmark's own plane (it never leaves the process).
const KEY_HEX: &str = "6c75612d64796e2062656e63686d61726b206b6579206f6e6c792c206e6f2075";
const DEFAULT_MARK: u16 = 0x0101;
const NEW_MARK: u16 = 0x0202;
/// Packets after the update that get their own latency window.
const WINDOW: usize = 5000;

pub struct Opts {
    pub before: u64,
    pub after: u64,
    pub rate_pps: f64,
    pub out: PathBuf,
    pub json: bool,
}

/// The experiment's functions: examples/lua/mark.lua with the mark as a parameter.
fn mark_lua(mark: u16) -> String {
    super::lua::MARK_LUA.replace("0x0101", &format!("0x{mark:04x}"))
}

fn config(workers: usize, jit: bool, o: &Opts) -> anyhow::Result<Config> {
    let cores = online_cores();
    // One worker: core 1 (the bench thread and control thread keep core 0). Two: both cores.
    let pins: Vec<usize> = if workers == 1 { vec![1 % cores] } else { (0..workers).collect() };
    let count = o.before + o.after;
    let src = mark_lua(DEFAULT_MARK).replace('"', "\\\"").replace('\n', "\\n");
    let toml = format!(
        r#"
[dataplane]
workers = {workers}
batch = 1
idle = "poll"
{cores}
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 2, rate_pps = {rate}, count = {count} }}
sink = {{ record = {record}, capture = 16 }}
[[control.keys]]
id = 1
key = "{KEY_HEX}"
[pipeline]
flow_default = {{ stage = "lua", source = "{src}", jit = {jit} }}
"#,
        cores = if workers <= cores { format!("cores = {pins:?}") } else { String::new() },
        rate = o.rate_pps,
        record = count + 1000,
    );
    Ok(Config::parse(&toml, "bench lua-dyn")?)
}

/// Median and 99th percentile of latencies in microseconds.
fn window(lat: &mut [u64]) -> Value {
    if lat.is_empty() {
        return json!({ "packets": 0 });
    }
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
    json!({ "packets": lat.len(), "p50_us": round(q(0.5), 2), "p99_us": round(q(0.99), 2), "max_us": round(q(1.0), 2) })
}

struct Run {
    workers: usize,
    jit: bool,
    json: Value,
    /// (flow, samples sorted by transmit time)
    samples: Vec<Sample>,
    update_index: usize,
}

fn flow_json(r: &MemReport, samples: &[Sample], flow: u16, t_update: u64) -> (Value, u64) {
    let mine: Vec<&Sample> = samples.iter().filter(|s| s.flow == flow).collect();
    let lat = |s: &&Sample| s.rx_ts.saturating_sub(s.tx_ts);
    let mut before: Vec<u64> = mine.iter().filter(|s| s.tx_ts < t_update).map(lat).collect();
    let after: Vec<&&Sample> = mine.iter().filter(|s| s.tx_ts >= t_update).collect();
    let mut first: Vec<u64> = after.iter().take(WINDOW).map(|s| lat(s)).collect();
    let mut rest: Vec<u64> = after.iter().skip(WINDOW).map(|s| lat(s)).collect();
    let new_fn = mine.iter().filter(|s| s.mark == NEW_MARK).count();
    let other = mine.iter().filter(|s| s.mark != NEW_MARK && s.mark != DEFAULT_MARK).count();
    let lost = r.flow(flow).map_or(0, |f| f.lost);
    (
        json!({
            "packets": mine.len(),
            "lost": lost,
            "before": window(&mut before),
            "after_5000": window(&mut first),
            "thereafter": window(&mut rest),
            "new_function_packets": new_fn,
            "other_marks": other,
        }),
        lost,
    )
}

fn one(workers: usize, jit: bool, o: &Opts) -> anyhow::Result<Run> {
    let plane = crate::start(config(workers, jit, o)?)?;
    let p0 = plane.mem("p0").ok_or_else(|| anyhow!("no port p0"))?.clone();
    let key = hotplane_control::parse_key(KEY_HEX).map_err(anyhow::Error::msg)?;
    let sender = UpdateSender::new(1, Some(key), crate::config::DEFAULT_UPDATE_PORT);
    let flow1 = super::swap::flow_selector(0);
    let flags = if jit { Flags::default() } else { Flags(Flags::NO_JIT) };
    let header = UpdateHeader {
        kind: Kind::Lua,
        flags,
        key_id: 1,
        seq: 1,
        target: Target::Flow(flow1),
        worker: WorkerScope::All,
    };
    let frames = sender.frames(&header, mark_lua(NEW_MARK).as_bytes())?;
    let generated = || p0.counters().iter().map(|c| c.rx_packets.get()).sum::<u64>();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Sleep through most of the wait: with two workers this thread shares a core with one of
    // them, and polling would show up in that worker's latencies.
    loop {
        let g = generated();
        if g >= o.before {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the generator stalled at {g}");
        let left_s = (o.before - g) as f64 / o.rate_pps;
        let nap = if left_s > 0.003 { left_s - 0.002 } else { 20e-6 };
        std::thread::sleep(Duration::from_secs_f64(nap));
    }
    let t_update = time::now_ns();
    let update_after = generated();
    for f in frames {
        p0.inject_to(0, f).map_err(|_| anyhow!("inject queue full"))?;
    }
    while !p0.generator_done() {
        anyhow::ensure!(Instant::now() < deadline, "the generator did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    // The function's compile and first-load times, as the `lua-functions` operation lists them.
    let functions = plane.request(Request::LuaFunctions {}).into_result()?;
    let def =
        functions.as_array().and_then(|fs| fs.iter().find(|f| f["name"] == "lua-seq1")).cloned();
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    let mut samples = r.samples.clone();
    samples.sort_by_key(|s| s.tx_ts);
    let first_new =
        samples.iter().filter(|s| s.flow == 0 && s.mark == NEW_MARK).min_by_key(|s| s.rx_ts);
    let update_index = samples.iter().position(|s| s.tx_ts >= t_update).unwrap_or(samples.len());
    let (f1, lost1) = flow_json(&r, &samples, 0, t_update);
    let (mut f2, lost2) = flow_json(&r, &samples, 1, t_update);
    let changed = f2["new_function_packets"].as_u64().unwrap_or(0) > 0
        || f2["other_marks"].as_u64().unwrap_or(0) > 0;
    f2["function_changed"] = json!(changed);
    f2["disturbed"] = json!(changed || lost2 > 0);
    let p99 = |w: &str| f2[w]["p99_us"].as_f64().unwrap_or(0.0);
    f2["p99_after_over_before"] = json!(round(p99("after_5000") / p99("before").max(0.001), 2));
    let json = json!({
        "workers": workers,
        "jit": jit,
        "update_after_packets": update_after,
        "update_to_first_us": first_new.map(|s| round(s.rx_ts.saturating_sub(t_update) as f64 / 1000.0, 1)),
        "compile_us": def.as_ref().and_then(|d| d["compile_us"].as_f64()),
        "load_us": def.as_ref().and_then(|d| d["load_us_max"].as_f64()),
        "lost": r.lost(),
        "duplicated": r.duplicates(),
        "lost_flow1": lost1,
        "flow1": f1,
        "flow2": f2,
    });
    Ok(Run { workers, jit, json, samples, update_index })
}

fn write_csv(path: &std::path::Path, runs: &[Run]) -> anyhow::Result<()> {
    let mut w = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    writeln!(w, "workers,jit,index,flow,seq,latency_ns,mark,after_update")?;
    for r in runs {
        for (i, s) in r.samples.iter().enumerate() {
            writeln!(
                w,
                "{},{},{},{},{},{},0x{:04x},{}",
                r.workers,
                r.jit,
                i,
                s.flow + 1,
                s.seq,
                s.rx_ts.saturating_sub(s.tx_ts),
                s.mark,
                u8::from(i >= r.update_index)
            )?;
        }
    }
    Ok(())
}

fn plot(path: &std::path::Path, runs: &[Run]) -> anyhow::Result<()> {
    let panels: Vec<Panel> = runs
        .iter()
        .map(|r| {
            let at = r.update_index as f64;
            let series = [
                (0u16, "flow 1 (updated)", RGBColor(31, 119, 180)),
                (1, "flow 2", RGBColor(255, 127, 14)),
            ]
            .into_iter()
            .map(|(flow, name, color)| {
                let pts: Vec<(f64, f64)> = r
                    .samples
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.flow == flow)
                    .map(|(i, s)| (i as f64, s.rx_ts.saturating_sub(s.tx_ts) as f64 / 1000.0))
                    .collect();
                let keep = Some((at - 200.0, at + 2.0 * WINDOW as f64));
                Series { name: name.into(), color, points: thin(&pts, 6000, keep) }
            })
            .collect();
            Panel {
                title: format!(
                    "{} worker{}, JIT {}",
                    r.workers,
                    if r.workers == 1 { "" } else { "s" },
                    if r.jit { "on" } else { "off" }
                ),
                series,
                markers: vec![Marker { at_ms: at, label: "update".into() }],
            }
        })
        .collect();
    panels_png(path, "Lua per-flow update: per-packet latency (batch 1, mem ports)", &panels, 2)
}

pub fn run(o: &Opts) -> anyhow::Result<()> {
    let mut progress = Progress::new("lua-dyn", o.json);
    pin_to_core(0);
    let mut runs = Vec::new();
    let configs = [(1, true), (1, false), (2, true), (2, false)];
    for (i, (workers, jit)) in configs.into_iter().enumerate() {
        runs.push(one(workers, jit, o)?);
        progress.update(i as u64 + 1, configs.len() as u64);
    }
    std::fs::create_dir_all(&o.out).with_context(|| format!("creating {}", o.out.display()))?;
    let csv = o.out.join("lua-dyn.csv");
    write_csv(&csv, &runs)?;
    let png = o.out.join("lua-dyn.png");
    let plot_err = plot(&png, &runs).err().map(|e| e.to_string());
    for r in &runs {
        let j = &r.json;
        progress.note(&format!(
            "{} worker(s), JIT {:5}: update -> first new-function packet {} us (compile {} us, load {} us); flow 1 p50 {} / {} / {} us; flow 2 disturbed: {}; lost {}",
            r.workers,
            r.jit,
            j["update_to_first_us"],
            j["compile_us"],
            j["load_us"],
            j["flow1"]["before"]["p50_us"],
            j["flow1"]["after_5000"]["p50_us"],
            j["flow1"]["thereafter"]["p50_us"],
            j["flow2"]["disturbed"],
            j["lost"],
        ));
    }
    progress.finish(&format!("wrote {} and {}", csv.display(), png.display()));
    let out = json!({
        "bench": "lua-dyn",
        "before": o.before,
        "after": o.after,
        "rate_pps": o.rate_pps,
        "batch": 1,
        "configs": runs.iter().map(|r| r.json.clone()).collect::<Vec<_>>(),
        "csv": csv,
        "plot": plot_err.is_none().then_some(png),
        "plot_error": plot_err,
        "note": "1 worker: worker on core 1, control thread and this process on core 0; 2 workers: cores 0 and 1, the control thread shares them",
    });
    emit(&out, o.json);
    Ok(())
}
