//! A P4 program as a data-plane stage: `basic.p4` with entries from runtime JSON routes three
//! of four flows to p1 (rewritten: TTL one lower, checksum still valid) and drops the fourth,
//! on native code and on closures alike.
#![cfg(feature = "p4")]

mod common;

use hotplane::Config;
use std::time::Duration;

const PACKETS: u64 = 8000;

/// basic.p4's route: 10.0.1.0/30 to port 1 with a new destination MAC (10.0.1.4, outside it,
/// meets the default action, drop).
fn write_basic_entries(path: &std::path::Path) {
    std::fs::write(
        path,
        r#"{"table_entries": [
            {"table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["10.0.1.0", 30]},
             "action_name": "MyIngress.ipv4_forward",
             "action_params": {"dstAddr": "08:00:00:00:01:11", "port": 1}}
        ]}"#,
    )
    .unwrap();
}

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
    write_basic_entries(&entries);
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

/// Chain specialisation across kinds: behind an eBPF program at `pre` that passes only
/// IPv4/UDP, basic.p4's parser at `mid` is folded (the ethertype select goes straight to
/// `parse_ipv4`); the folded pipeline, sharing the original's tables, routes and drops exactly
/// as the original does.
#[test]
fn a_p4_parser_behind_an_ebpf_filter_is_folded_and_routes_the_same() {
    const COUNT: u64 = 60_000;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/p4");
    let tmp = std::env::temp_dir().join(format!("hotplane-p4-chain-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let filter = tmp.join("udp_only.s");
    std::fs::write(
        &filter,
        "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nmov %r0, 1\nmov %r4, %r2\nadd %r4, 42\n\
         jgt %r4, %r3, out\nldxh %r5, [%r2+12]\njne %r5, 8, out\nldxb %r5, [%r2+23]\n\
         jne %r5, 17, out\nmov %r0, 2\nout:\nexit\n",
    )
    .unwrap();
    let entries = tmp.join("entries.json");
    write_basic_entries(&entries);
    let toml = format!(
        r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 4, count = {COUNT}, rate_pps = 100000, vary = "dst-ip", dst_ip = "10.0.1.1", stamp = false }}
[[port]]
name = "p1"
kind = "mem"
sink = {{ capture = 16 }}
[pipeline]
pre = {{ stage = "ebpf", file = "{}" }}
mid = {{ stage = "p4", program = "{dir}/basic.p4", entries = "{}" }}
"#,
        filter.display(),
        entries.display()
    );
    let plane = hotplane::start(Config::parse(&toml, "test").unwrap()).unwrap();
    let status = || {
        let stats = plane.request(hotplane_control::api::Request::Stats {}).result.unwrap();
        stats["p4"]["chain"]["positions"][0].clone()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mid = loop {
        let mid = status();
        if mid["guard_hits"].as_u64().unwrap_or(0) > 1000 {
            break mid;
        }
        assert!(std::time::Instant::now() < deadline, "never folded: {mid}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(mid["position"], "mid");
    assert_eq!(mid["folded"], true, "{mid}");
    assert_eq!(mid["decided"][0], "parse_ethernet -> parse_ipv4", "{mid}");
    assert_eq!(mid["guard"], "len in [42, 1518]; 12=08 13=00", "{mid}");
    assert_eq!(mid["guard_misses"], 0, "every packet came through the filter: {mid}");
    assert!(plane.wait_drained(Duration::from_secs(30)), "did not drain");
    let handles = plane.mem_handles();
    let s = plane.stop();
    std::fs::remove_dir_all(&tmp).ok();
    assert_eq!((s.panics, s.packets), (0, COUNT));
    // Folded or not, 10.0.1.4 is outside 10.0.1.0/30 and dropped; the rest reach p1 rewritten.
    assert_eq!(s.dropped, COUNT / 4);
    let p1 = s.ports.iter().find(|(n, _)| n == "p1").unwrap();
    assert_eq!(p1.1.tx_packets, COUNT / 4 * 3);
    let report = hotplane_io::mem::MemReport::merge(&handles);
    let frame = report.captured.first().expect("p1 captured frames").clone();
    assert_eq!(&frame[0..6], &[8, 0, 0, 0, 1, 0x11], "new destination MAC");
}

/// `hotplane push --p4` as an operator uses it: without a key it is refused before anything
/// is sent (unless asked to go unauthenticated); a refusal by the node is a failure with the
/// node's reason; and the same entries document pushed again with an edited program loads
/// (the carried tables already hold its entries).
#[test]
fn push_p4_fails_on_refusal_and_reloads_the_same_entries() {
    use std::process::Command;
    let bin = env!("CARGO_BIN_EXE_hotplane");
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let dir = std::env::temp_dir().join(format!("hotplane-push-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("s.sock");
    let key = format!("{repo}/examples/config/demo-key.hex");
    let program = format!("{repo}/examples/p4/ref_counter.p4");
    let entries = format!("{repo}/examples/p4/ref_counter.json");
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[port]]\nname = \"p0\"\nkind = \"mem\"\n[[port]]\nname = \"p1\"\nkind = \"mem\"\n\
             [control]\nsocket = \"{}\"\n[[control.keys]]\nid = 1\nkey_file = \"{key}\"\n\
             [pipeline]\npre = {{ stage = \"p4\", program = \"{program}\", entries = \"{entries}\" }}\n",
            sock.display()
        ),
    )
    .unwrap();
    let mut child = common::run_until_socket(&cfg, &sock);
    let push = |args: &[&str]| {
        let o =
            Command::new(bin).arg("push").arg("--socket").arg(&sock).args(args).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        (o.status.success(), out + &String::from_utf8_lossy(&o.stderr))
    };
    // An edited program (a comment more), with the very same entries as it runs with.
    let edited = dir.join("edited.p4");
    let text = std::fs::read_to_string(&program).unwrap();
    std::fs::write(&edited, format!("// edited\n{text}")).unwrap();
    let edited = edited.to_str().unwrap();

    let (ok, err) = push(&["--p4", edited, "--entries", &entries]);
    assert!(!ok && err.contains("--unauthenticated"), "no key, nothing sent: {err}");
    let (ok, err) = push(&["--p4", edited, "--entries", &entries, "--unauthenticated"]);
    assert!(!ok && err.contains("refused the update"), "the node wants a key: {err}");
    for _ in 0..2 {
        let (ok, out) = push(&["--p4", edited, "--entries", &entries, "--key-file", &key]);
        assert!(ok && out.contains("applied: version"), "the same entries reload: {out}");
    }
    // Named after the file it came from, not after the update.
    let (ok, out) = push(&["slots"]);
    assert!(ok && out.contains("p4 edited.p4 ("), "{out}");
    let (ok, _) = push(&["shutdown"]);
    assert!(ok);
    assert!(child.wait().unwrap().success());
    std::fs::remove_dir_all(&dir).ok();
}

/// `hotplane bench p4` with no entries drops every packet: the rate it reports is the drop
/// path's, and it says so (on stderr and in the JSON), rather than reporting Mpps silently.
#[test]
fn bench_p4_warns_when_it_measures_the_drop_path() {
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/p4/basic.p4");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .args(["bench", "p4", "--program", program, "--packets", "20000", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let last = String::from_utf8_lossy(&o.stdout).lines().last().unwrap_or_default().to_string();
    let v: serde_json::Value = serde_json::from_str(&last).unwrap();
    let warning = v["warning"].as_str().unwrap_or_default();
    assert!(warning.starts_with("100.0 % of the packets were dropped"), "{v}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("warning:"));
}
