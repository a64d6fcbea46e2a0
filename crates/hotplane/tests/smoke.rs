//! The runtime end to end on mem ports: everything generated comes out once.

use hotplane::Config;
use std::time::Duration;

#[test]
fn every_generated_packet_is_forwarded_once() {
    let cfg = Config::parse(
        r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
peer = "p1"
gen = { flows = 4, count = 20000 }
[[port]]
name = "p1"
kind = "mem"
"#,
        "test",
    )
    .unwrap();
    let plane = hotplane::start(cfg).unwrap();
    assert!(plane.wait_drained(Duration::from_secs(30)), "did not drain");
    let handles = plane.mem_handles();
    let summary = plane.stop();
    let report = hotplane_io::mem::MemReport::merge(&handles);
    assert_eq!(report.sent(), 20000);
    assert_eq!(report.received(), 20000);
    assert_eq!(report.lost(), 0);
    assert_eq!(report.duplicates(), 0);
    assert_eq!(report.flows.len(), 4);
    assert_eq!(summary.packets, 20000);
    let p1 = summary.ports.iter().find(|(n, _)| n == "p1").unwrap();
    assert_eq!(p1.1.tx_packets, 20000);
}

#[test]
fn demo_runs_and_writes_its_plot() {
    let dir = std::env::temp_dir().join(format!("hotplane-demo-{}", std::process::id()));
    let out = hotplane::demo::run(&hotplane::demo::Opts {
        out: dir.clone(),
        rate_pps: 20_000.0,
        duration_ms: 300,
        json: true,
    })
    .unwrap();
    // The active packet counted itself once in p0's store and left p0 as it came.
    let wasp = &out["wasp"];
    assert_eq!((wasp["counter"].as_u64(), wasp["fate"].as_str()), (Some(1), Some("forwarded")));
    assert_eq!((wasp["seen_leaving"].as_u64(), wasp["code_bytes"].as_u64()), (Some(1), Some(8)));
    let svg = std::fs::read_to_string(dir.join("hotplane-demo.svg")).unwrap();
    assert!(svg.contains("<svg"));
    assert!(svg.contains("flow 1 -&gt; native"), "plot lacks the first update's marker");
    assert!(svg.contains("flow 2 -&gt; eBPF"), "plot lacks the eBPF update's marker");
}

#[test]
fn example_configs_are_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/config");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            #[allow(unused_mut)]
            let mut cfg = Config::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            // The sections the binary reads itself.
            #[cfg(feature = "p4runtime")]
            hotplane::p4rt_cmd::take_section(&mut cfg, None)
                .unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
            let _ = cfg;
            n += 1;
        }
    }
    assert!(n >= 2);
}
