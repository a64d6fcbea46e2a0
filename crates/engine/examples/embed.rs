//! hotplane embedded as a library: start an engine on in-memory ports, install a program,
//! replace it while packets flow, read the counters.
//!
//!     cargo run -p hotplane-engine --example embed

use hotplane_engine::{Config, Engine, StageSpec};
use hotplane_io::mem::MemReport;
use serde_json::json;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Two in-memory ports: p0 generates 4 flows at 1 Mpps for half a second; p1 counts what
    // arrives, per flow, with loss and reordering.
    let config = Config::parse(
        r#"
        [[port]]
        name = "p0"
        kind = "mem"
        gen = { flows = 4, rate_pps = 1000000, duration_ms = 500, stamp = true }
        [[port]]
        name = "p1"
        kind = "mem"
        [pipeline]
        pre = { stage = "forward", to = "p1" }
        "#,
        "embed.toml",
    )?;
    // Program kinds plug in here (`.kind(hotplane_ebpf::kind::make)`, ...); native stages
    // (forward, drop, set-field, ...) need none.
    let engine = Engine::builder().start(config)?;
    std::thread::sleep(Duration::from_millis(100));
    let stamp_flow_1 = StageSpec::stamp_mark(1);
    let version = engine.install("mid", &stamp_flow_1)?;
    println!("installed `{}` at mid while packets flow: version {version}", stamp_flow_1.kind());
    std::thread::sleep(Duration::from_millis(100));
    let count: StageSpec = serde_json::from_value(json!({ "stage": "count" }))?;
    println!("replaced it with `count`: version {}", engine.install("mid", &count)?);
    engine.wait_drained(Duration::from_secs(5));
    let stats = engine.stats()?;
    println!("versions worker 0 ran last: {}", stats["workers"][0]["running_versions"]);
    let ports = engine.mem_handles();
    let summary = engine.stop();
    let report = MemReport::merge(&ports);
    println!("{} packets through the pipeline, {} dropped", summary.packets, summary.dropped);
    let marked: u64 =
        report.flows.iter().flat_map(|f| &f.marks).filter(|m| m.mark == 1).map(|m| m.packets).sum();
    println!(
        "p1 received {} of {} sent ({} lost, {} reordered); {marked} carry the mark of the first program",
        report.received(),
        report.sent(),
        report.lost(),
        report.flows.iter().map(|f| f.reordered).sum::<u64>()
    );
    Ok(())
}
