//! A P4 program as a data-plane stage: `basic.p4` with entries from runtime JSON routes three
//! of four flows to p1 (rewritten: TTL one lower, checksum still valid) and drops the fourth,
//! on native code and on closures alike.
#![cfg(feature = "p4")]

use hotplane::Config;
use std::time::Duration;

const PACKETS: u64 = 8000;

#[test]
fn basic_p4_routes_rewrites_and_drops_in_the_data_plane() {
    basic_p4_on("native");
}

#[test]
fn basic_p4_routes_rewrites_and_drops_on_closures() {
    basic_p4_on("closures");
}

#[test]
fn an_unknown_engine_is_refused_by_name() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/p4");
    let toml = format!(
        r#"
[[port]]
name = "p0"
kind = "mem"
[pipeline]
pre = {{ stage = "p4", program = "{dir}/basic.p4", engine = "fast" }}
"#
    );
    let cfg = Config::parse(&toml, "test").unwrap();
    let err = hotplane::start(cfg).err().expect("refused").to_string();
    assert!(err.contains("engine = \"fast\"") && err.contains("closures"), "{err}");
}

fn basic_p4_on(engine: &str) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/p4");
    let entries =
        std::env::temp_dir().join(format!("hotplane-p4-{}-{engine}.json", std::process::id()));
    std::fs::write(
        &entries,
        r#"{"table_entries": [
            {"table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["10.0.1.0", 30]},
             "action_name": "MyIngress.ipv4_forward",
             "action_params": {"dstAddr": "08:00:00:00:01:11", "port": 1}}
        ]}"#,
    )
    .unwrap();
    let toml = format!(
        r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 4, count = {PACKETS}, vary = "dst-ip", dst_ip = "10.0.1.1", stamp = false }}
[[port]]
name = "p1"
kind = "mem"
sink = {{ capture = 16 }}
[pipeline]
pre = {{ stage = "p4", program = "{dir}/basic.p4", entries = "{}", engine = "{engine}" }}
"#,
        entries.display()
    );
    let cfg = Config::parse(&toml, "test").unwrap();
    let plane = hotplane::start(cfg).unwrap();
    assert!(plane.wait_drained(Duration::from_secs(30)), "did not drain");
    let handles = plane.mem_handles();
    let s = plane.stop();
    std::fs::remove_file(&entries).ok();
    assert_eq!(s.panics, 0);
    assert_eq!(s.packets, PACKETS);
    // 10.0.1.4 is outside 10.0.1.0/30: the default action drops it.
    assert_eq!(s.dropped, PACKETS / 4);
    let p1 = s.ports.iter().find(|(n, _)| n == "p1").unwrap();
    assert_eq!(p1.1.tx_packets, PACKETS / 4 * 3);
    let report = hotplane_io::mem::MemReport::merge(&handles);
    let frame = report.captured.first().expect("p1 captured frames").clone();
    assert_eq!(&frame[0..6], &[8, 0, 0, 0, 1, 0x11], "new destination MAC");
    let ip = &frame[14..34];
    assert_eq!(ip[8], 63, "TTL decremented from the generator's 64");
    // The IPv4 header checksum over the rewritten header still sums to 0xffff.
    let sum = ip.chunks(2).map(|w| u16::from_be_bytes([w[0], w[1]]) as u32).sum::<u32>();
    let folded = (sum & 0xffff) + (sum >> 16);
    assert_eq!((folded & 0xffff) + (folded >> 16), 0xffff);
}

/// `hotplane push --p4` compiles the program (with its local includes) before it sends
/// anything: a mistake points into the user's file, and the control socket is never reached.
#[test]
fn push_p4_reports_a_mistake_in_an_included_file_before_sending() {
    let dir = std::env::temp_dir().join(format!("hotplane-push-p4-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("defs.p4"), "const bit<8> ONE = 1;\nconst bit<8> TWO = ;\n").unwrap();
    std::fs::write(dir.join("main.p4"), "#include <core.p4>\n#include \"defs.p4\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .args(["push", "--socket", "/nonexistent/hotplane.sock", "--target", "pre", "--p4"])
        .arg(dir.join("main.p4"))
        .output()
        .expect("hotplane runs");
    std::fs::remove_dir_all(&dir).ok();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("defs.p4:2:"), "{err}");
    assert!(!err.contains("nonexistent"), "the socket was not tried: {err}");
}
