//! The data plane as a process on real ports (needs root; namespaces and veths are created and
//! removed by the tests): restart after being killed, replacement of a stale XDP program, and
//! clear errors for a missing interface, an unsupported mode and missing privileges.

mod common;
use common::TmpDir;

use hotplane::netlab::Lab;
use hotplane::Config;
use hotplane_io::mem::MemReport;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_hotplane");

fn tmp(name: &str) -> TmpDir {
    TmpDir::new("proc", name)
}

fn spawn_dut(cfg: &std::path::Path, sock: &std::path::Path) -> Child {
    let _ = std::fs::remove_file(sock);
    let child = Command::new(BIN)
        .args(["run", "--config"])
        .arg(cfg)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "data plane did not come up");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// Send `count` stamped packets out of g0 and count what comes back on r0.
fn send_and_count(gen: &str, rx: &str, count: u64) -> MemReport {
    let t = hotplane::start(
        Config::parse(
            &format!(
                r#"
[[port]]
name = "gen"
kind = "mem"
gen = {{ flows = 4, count = {count}, rate_pps = 50000 }}
peer = "g0"
[[port]]
name = "g0"
kind = "afpacket"
interface = "g0"
netns = "{gen}"
[[port]]
name = "r0"
kind = "afpacket"
interface = "r0"
netns = "{rx}"
peer = "sink"
[[port]]
name = "sink"
kind = "mem"
[control]
update_port = 0
"#
            ),
            "test",
        )
        .unwrap(),
    )
    .unwrap();
    let sink = t.observability().ports.iter().find(|p| p.name == "sink").unwrap().queues.clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while sink.iter().map(|c| c.tx_packets.get()).sum::<u64>() < count && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let h = t.mem_handles();
    t.stop();
    MemReport::merge(&h)
}

#[test]
fn afxdp_data_plane_restarts_cleanly_after_kill_and_replaces_a_stale_program() {
    let mut lab = Lab::new("restart").expect("these tests need root");
    let (gen, dut, rx) =
        (lab.netns("gen").unwrap(), lab.netns("dut").unwrap(), lab.netns("rx").unwrap());
    lab.veth(&gen, "g0", &dut, "d0", 1).unwrap();
    lab.veth(&dut, "d1", &rx, "r0", 1).unwrap();
    let dir = tmp("restart");
    let sock = dir.join("ctl.sock");
    let cfg = dir.join("dut.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[port]]\nname=\"d0\"\nkind=\"afxdp\"\ninterface=\"d0\"\nnetns=\"{dut}\"\npeer=\"d1\"\n\
             [[port]]\nname=\"d1\"\nkind=\"afxdp\"\ninterface=\"d1\"\nnetns=\"{dut}\"\npeer=\"d0\"\n\
             [control]\nsocket=\"{}\"\n",
            sock.display()
        ),
    )
    .unwrap();
    // A program someone else attached through netlink, as a crashed old-kernel run would leave.
    let obj = concat!(env!("CARGO_MANIFEST_DIR"), "/../io/src/afxdp/xdp_redirect.bpf.o");
    lab.exec(&dut, &["ip", "link", "set", "dev", "d0", "xdpgeneric", "obj", obj, "sec", "xdp"])
        .unwrap();
    assert!(lab.exec(&dut, &["ip", "link", "show", "d0"]).unwrap().contains("xdp"));

    let mut child = spawn_dut(&cfg, &sock);
    let r = send_and_count(&gen, &rx, 5000);
    assert_eq!((r.received(), r.lost()), (5000, 0), "first run forwards");
    // Killed mid-run: no chance to clean up.
    child.kill().unwrap();
    child.wait().unwrap();
    let mut child = spawn_dut(&cfg, &sock);
    let r = send_and_count(&gen, &rx, 5000);
    assert_eq!((r.received(), r.lost()), (5000, 0), "the restarted data plane forwards");
    // A clean stop detaches the program.
    // SAFETY: sending SIGTERM to our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert!(st.success(), "SIGTERM is a clean exit");
    let link = lab.exec(&dut, &["ip", "link", "show", "d0"]).unwrap();
    assert!(!link.contains("prog/xdp"), "XDP program left attached: {link}");
}

fn run_expect_error(cfg_text: &str, wrap: &[&str]) -> String {
    let dir = tmp("err");
    let cfg = dir.join(format!("c{}.toml", cfg_text.len()));
    std::fs::write(&cfg, cfg_text).unwrap();
    let mut cmd = if wrap.is_empty() {
        Command::new(BIN)
    } else {
        let mut c = Command::new(wrap[0]);
        c.args(&wrap[1..]).arg(BIN);
        c
    };
    let out = cmd.args(["run", "--config"]).arg(&cfg).output().unwrap();
    assert!(!out.status.success(), "should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn port_errors_say_what_is_wrong() {
    let mut lab = Lab::new("errors").expect("these tests need root");
    let ns = lab.netns("x").unwrap();
    let e = run_expect_error(
        &format!("[[port]]\nname=\"p\"\nkind=\"afpacket\"\ninterface=\"nope0\"\nnetns=\"{ns}\"\n"),
        &[],
    );
    assert!(e.contains("interface `nope0` does not exist in network namespace"), "{e}");
    let e = run_expect_error(
        // Loopback has no native XDP.
        &format!("[[port]]\nname=\"p\"\nkind=\"afxdp\"\ninterface=\"lo\"\nnetns=\"{ns}\"\nmode=\"native\"\n"),
        &[],
    );
    assert!(e.contains("Native mode failed") && e.contains("fall back to generic"), "{e}");
    let e = run_expect_error(
        "[[port]]\nname=\"p\"\nkind=\"afxdp\"\ninterface=\"lo\"\nmode=\"warp\"\n",
        &[],
    );
    assert!(e.contains("warp") && e.contains("auto"), "{e}");
    // Without privileges: which capability is missing is named.
    let nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"];
    let e =
        run_expect_error("[[port]]\nname=\"p\"\nkind=\"afpacket\"\ninterface=\"lo\"\n", &nobody);
    assert!(e.contains("CAP_NET_RAW"), "{e}");
    let e = run_expect_error("[[port]]\nname=\"p\"\nkind=\"afxdp\"\ninterface=\"lo\"\n", &nobody);
    assert!(e.contains("CAP_BPF"), "{e}");
    drop(lab);
}

#[test]
fn auto_mode_falls_back_to_generic_xdp_and_says_so() {
    let mut lab = Lab::new("fallback").expect("these tests need root");
    let a = lab.netns("a").unwrap();
    // Loopback has no native XDP: auto mode must fall back to SKB mode and report it.
    let dir = tmp("fallback");
    let cfg = dir.join("c.toml");
    let sock = dir.join("s.sock");
    std::fs::write(
        &cfg,
        format!("[[port]]\nname=\"p\"\nkind=\"afxdp\"\ninterface=\"lo\"\nnetns=\"{a}\"\n[control]\nsocket=\"{}\"\n", sock.display()),
    )
    .unwrap();
    let child = spawn_dut(&cfg, &sock);
    // SAFETY: sending SIGTERM to our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("using generic (SKB) mode"), "the fallback is named: {err}");
    // And the mode taken is in the start line, whatever the log level.
    assert!(err.contains("p (afxdp: generic (SKB) XDP, "), "the mode is shown: {err}");
}

#[test]
fn gen_on_interfaces_measures_loss_and_latency() {
    let mut lab = Lab::new("gen").expect("these tests need root");
    let ns = lab.netns("w").unwrap();
    lab.veth(&ns, "a0", &ns, "b0", 1).unwrap();
    for port in ["afpacket", "afxdp"] {
        let out = Command::new(BIN)
            .args(["gen", "--port", port, "--interface", "a0", "--rx", "b0", "--netns", &ns])
            .args(["--flows", "4", "--count", "3000", "--rate", "30000", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii_end()).unwrap();
        assert_eq!(v["tx_packets"], 3000, "{port}: {v}");
        assert_eq!(v["rx_packets"], 3000, "{port}: {v}");
        assert_eq!(v["lost"], 0);
        assert!(v["latency_us"]["p50"].as_f64().unwrap() > 0.0);
        assert!(v["tx_mpps"].as_f64().unwrap() > 0.0);
    }
    // A sweep: each step's received packets are those it sent, none of the next step's.
    let out = Command::new(BIN)
        .args(["gen", "--interface", "a0", "--rx", "b0", "--netns", &ns])
        .args(["--rates", "20000,40000", "--step", "0.5", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii_end()).unwrap();
    for s in v["steps"].as_array().expect("steps") {
        let (tx, rx) = (s["tx_pps"].as_f64().unwrap(), s["rx_pps"].as_f64().unwrap());
        assert!(tx > 0.0 && (rx - tx).abs() <= tx * 0.01, "received as sent: {s}");
        assert_eq!(s["loss_ratio"], 0.0, "{s}");
    }
}

/// `hotplane run --p4 basic.p4 --entries FILE -i 1@d1 -i 2@d2`, a switch in one line, in its
/// own namespace: traffic into P4 port 1 that the entries route to port 2 comes out there,
/// every packet.
#[cfg(feature = "p4")]
#[test]
fn a_one_line_p4_switch_forwards_between_namespaces() {
    let mut lab = Lab::new("oneline").expect("these tests need root");
    let (gen, dut, rx) =
        (lab.netns("gen").unwrap(), lab.netns("dut").unwrap(), lab.netns("rx").unwrap());
    lab.veth(&gen, "g0", &dut, "d1", 1).unwrap();
    lab.veth(&dut, "d2", &rx, "r0", 1).unwrap();
    let dir = tmp("oneline");
    let entries = dir.join("s1-runtime.json");
    std::fs::write(
        &entries,
        r#"{"table_entries": [{"table": "MyIngress.ipv4_lpm",
            "match": {"hdr.ipv4.dstAddr": ["10.1.0.0", 16]},
            "action_name": "MyIngress.ipv4_forward",
            "action_params": {"dstAddr": "08:00:00:00:02:22", "port": 2}}]}"#,
    )
    .unwrap();
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/p4/basic.p4");
    let mut child = Command::new("ip")
        .args(["netns", "exec", &dut, BIN, "run", "--p4", program, "--entries"])
        .arg(&entries)
        .args(["-i", "1@d1", "-i", "2@d2"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Up once it names its ports.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut err, &mut first).unwrap();
    assert!(first.contains("d1 (afpacket), d2 (afpacket)"), "{first}");
    let r = send_and_count(&gen, &rx, 2000);
    // SAFETY: sending SIGTERM to our child (`ip netns exec` passes it on).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!((r.received(), r.lost()), (2000, 0), "forwarded by the P4 program");
    assert!(status.success(), "SIGTERM is a clean exit");
}
