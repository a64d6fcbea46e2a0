//! The runtime end to end on mem ports: everything generated comes out once.

use hotplane::{Config, DataPlane};
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
    let plane = DataPlane::start(cfg).unwrap();
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
