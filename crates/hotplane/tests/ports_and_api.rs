//! pcap ports (replay, capture, software RSS over two workers), the control API on its UNIX
//! socket, the Prometheus endpoint, and the command-line binary.

mod common;
use common::TmpDir;

use hotplane::gen::{run as gen_run, GenOpts};
use hotplane::inband::{ack_of, UpdateSender};
use hotplane::Config;
use hotplane_control::api::{Client, Request};
use hotplane_control::{AckStatus, Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_io::mem::GenSpec;
use hotplane_io::pcap::format::{CaptureReader, CaptureWriter};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const KEY_HEX: &str = "1111111111111111111111111111111111111111111111111111111111111111";

fn gen(o: GenOpts) -> anyhow::Result<serde_json::Value> {
    gen_run(&o)
}

fn tmpdir(name: &str) -> TmpDir {
    TmpDir::new("test", name)
}

fn read_capture(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while r.next_record(&mut buf).unwrap().is_some() {
        out.push(buf.clone());
    }
    out
}

#[test]
fn pcap_replay_through_two_workers_to_a_capture() {
    let dir = tmpdir("pcap");
    let input = dir.join("in.pcap");
    let spec = GenSpec { flows: 8, count: Some(5000), ..Default::default() };
    gen(GenOpts::write(input.clone(), spec)).unwrap();
    let frames_in = read_capture(&input);
    assert_eq!(frames_in.len(), 5000);
    let output = dir.join("out.pcap");
    let cfg = Config::parse(
        &format!(
            r#"
[dataplane]
workers = 2
[[port]]
name = "in"
kind = "pcap"
read = "{}"
peer = "out"
[[port]]
name = "out"
kind = "pcap"
write = "{}"
[pipeline]
pre = {{ stage = "l2fwd" }}
"#,
            input.display(),
            output.display()
        ),
        "test",
    )
    .unwrap();
    let plane = hotplane::start(cfg).unwrap();
    assert!(plane.wait_drained(Duration::from_secs(30)));
    let per_worker: Vec<u64> = plane.worker_stats().iter().map(|w| w.packets.get()).collect();
    let summary = plane.stop();
    assert!(
        per_worker.iter().all(|n| *n > 0),
        "software RSS spreads flows over both workers: {per_worker:?}"
    );
    let frames_out = read_capture(&output);
    assert_eq!(frames_out.len(), 5000, "{summary:?}");
    // Same packets, MACs swapped (order across workers may differ).
    let swap = |f: &[u8]| {
        let mut g = f.to_vec();
        g[0..6].copy_from_slice(&f[6..12]);
        g[6..12].copy_from_slice(&f[0..6]);
        g
    };
    let mut want: Vec<Vec<u8>> = frames_in.iter().map(|f| swap(f)).collect();
    let mut got = frames_out;
    want.sort();
    got.sort();
    assert!(want == got, "output differs from swapped input");
}

#[test]
fn gen_measures_a_capture_with_a_lost_and_a_duplicated_packet() {
    let dir = tmpdir("gen-rx");
    let spec = GenSpec { flows: 2, count: Some(100), ..Default::default() };
    gen(GenOpts::write(dir.join("a.pcap"), spec)).unwrap();
    let mut frames = read_capture(&dir.join("a.pcap"));
    let dup = frames[20].clone(); // flow 0, sequence 10
    frames.remove(10); // flow 0, sequence 5
    frames.push(dup);
    let mut w =
        CaptureWriter::new(std::fs::File::create(dir.join("b.pcap")).unwrap(), 65535).unwrap();
    for f in &frames {
        w.write(0, f).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let v = gen(GenOpts::read(dir.join("b.pcap"))).unwrap();
    let f0 = &v["flows"][0];
    assert_eq!(
        (f0["received"].as_u64(), f0["missing"].as_u64(), f0["duplicates"].as_u64()),
        (Some(50), Some(1), Some(1))
    );
    assert_eq!(v["flows"][1]["missing"], 0);
    assert_eq!(v["flows"][1]["received"], 50);
}

#[test]
fn inband_update_from_a_capture_is_acknowledged_into_the_output() {
    let dir = tmpdir("pcap-update");
    let input = dir.join("in.pcap");
    let output = dir.join("out.pcap");
    let key = hotplane_control::parse_key(KEY_HEX).unwrap();
    let header = UpdateHeader {
        kind: Kind::NativeStage,
        flags: Flags::default(),
        key_id: 1,
        seq: 1,
        target: Target::Position(hotplane_core::Position::Pre),
        worker: WorkerScope::All,
    };
    let frames =
        UpdateSender::new(1, Some(key), 47474).frames(&header, br#"{"stage":"drop"}"#).unwrap();
    let mut w = CaptureWriter::new(std::fs::File::create(&input).unwrap(), 65535).unwrap();
    for f in &frames {
        w.write(0, f).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let cfg = Config::parse(
        &format!(
            "[[port]]\nname = \"p\"\nkind = \"pcap\"\nread = \"{}\"\nwrite = \"{}\"\n[[control.keys]]\nid = 1\nkey = \"{KEY_HEX}\"\n",
            input.display(),
            output.display()
        ),
        "test",
    )
    .unwrap();
    let plane = hotplane::start(cfg).unwrap();
    assert!(plane.wait_drained(Duration::from_secs(30)));
    let slots = plane.registry().slots();
    plane.stop();
    assert!(
        slots.iter().any(|s| s.target == "pre" && s.program == "drop" && s.version == 2),
        "{slots:?}"
    );
    let out = read_capture(&output);
    assert_eq!(
        out.len(),
        1,
        "only the acknowledgement leaves: the update packet itself is consumed"
    );
    let ack = ack_of(&out[0], Some(&key)).unwrap().unwrap();
    assert_eq!(ack.status, AckStatus::Applied);
    assert_eq!(ack.version, 2);
}

fn api_plane(dir: &Path, extra: &str) -> (hotplane::Engine, PathBuf) {
    let sock = dir.join("ctl.sock");
    let cfg = Config::parse(
        &format!(
            r#"
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 2, rate_pps = 10000 }}
[pipeline.externs.lb]
stage = "none"
[[predefined]]
id = 7
name = "counter"
stage = {{ stage = "count" }}
[control]
socket = "{}"
[[control.keys]]
id = 1
key = "{KEY_HEX}"
{extra}
"#,
            sock.display()
        ),
        "test",
    )
    .unwrap();
    (hotplane::start(cfg).unwrap(), sock)
}

#[test]
fn control_api_over_the_socket() {
    let dir = tmpdir("api");
    // A stale socket of our own, left by a crashed run, is replaced.
    drop(std::os::unix::net::UnixListener::bind(dir.join("ctl.sock")).unwrap());
    let (plane, sock) = api_plane(&dir, "");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o600);
    let mut c = Client::connect(&sock).unwrap();
    let v = c
        .call(&Request::Install {
            target: "pre".into(),
            worker: None,
            stage: serde_json::json!({"stage":"count"}),
        })
        .unwrap();
    assert_eq!(v["version"], 2);
    let v = c.call(&Request::Switch { target: "mid".into(), worker: Some(0), id: 7 }).unwrap();
    assert_eq!(v["version"], 2);
    let v = c
        .call(&Request::Install {
            target: "extern:lb".into(),
            worker: None,
            stage: serde_json::json!({"stage":"drop"}),
        })
        .unwrap();
    assert_eq!(v["version"], 2);
    let v = c
        .call(&Request::Install {
            target: "flow:proto=udp,dport=5000".into(),
            worker: None,
            stage: serde_json::json!({"stage":"call","extern":"lb"}),
        })
        .unwrap();
    assert_eq!(v["version"], 2);
    let slots = c.call(&Request::Slots {}).unwrap();
    let find = |t: &str| {
        slots
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["target"] == t && s["worker"] == 0)
            .unwrap()
            .clone()
    };
    assert_eq!(find("pre")["program"].as_str().unwrap().split(' ').next(), Some("count"));
    assert_eq!(find("mid")["program"].as_str().unwrap().split(' ').next(), Some("count"));
    assert_eq!(find("extern:lb")["program"], "drop");
    let flows = c.call(&Request::Flows { worker: Some(0) }).unwrap();
    assert_eq!(flows[0]["function"], "call extern:lb");
    // Errors are answers, not crashes.
    for (req, needle) in [
        (
            Request::Install {
                target: "sideways".into(),
                worker: None,
                stage: serde_json::json!({"stage":"drop"}),
            },
            "not a target",
        ),
        (
            Request::Install {
                target: "pre".into(),
                worker: Some(9),
                stage: serde_json::json!({"stage":"drop"}),
            },
            "worker 9",
        ),
        (
            Request::Install {
                target: "pre".into(),
                worker: None,
                stage: serde_json::json!({"stage":"nope"}),
            },
            "stage spec",
        ),
        (
            Request::Install {
                target: "extern:lb".into(),
                worker: None,
                stage: serde_json::json!({"stage":"call","extern":"lb"}),
            },
            "cannot be installed in an extern",
        ),
        (Request::Switch { target: "pre".into(), worker: None, id: 99 }, "id 99"),
        (Request::Remove { target: "flow:dport=1".into(), worker: None }, "no function"),
    ] {
        let e = c.call(&req).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
    // An envelope through the API is authenticated like an in-band one.
    let key = hotplane_control::parse_key(KEY_HEX).unwrap();
    let h = UpdateHeader {
        kind: Kind::SelectPredefined,
        flags: Flags::default(),
        key_id: 1,
        seq: 5,
        target: Target::Position(hotplane_core::Position::Post),
        worker: WorkerScope::All,
    };
    let d = hotplane_control::envelope::build(&h, &7u32.to_be_bytes(), Some(&key), 1000).unwrap();
    let acks = c
        .call(&Request::Update { fragments: vec![hex::encode(&d[0]), hex::encode(&d[0])] })
        .unwrap();
    assert_eq!(acks[0]["status"], "applied");
    assert_eq!(acks[1]["reason"], "replay");
    // Raw garbage on the socket gets an error line and the connection stays usable.
    let mut raw = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    raw.write_all(b"{this is not json\n{\"op\":\"stats\"}\n").unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while text.lines().count() < 2 && Instant::now() < deadline {
        let mut b = [0u8; 65536];
        let n = raw.read(&mut b).unwrap();
        text.push_str(&String::from_utf8_lossy(&b[..n]));
    }
    let lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["ok"], false);
    assert_eq!(lines[1]["ok"], true);
    let stats = c.call(&Request::Stats {}).unwrap();
    assert_eq!(stats["updates"]["refused"]["replay"], 1);
    let prom = c.call(&Request::Metrics {}).unwrap();
    assert!(prom["text"]
        .as_str()
        .unwrap()
        .contains("hotplane_updates_refused_total{reason=\"replay\"} 1"));
    c.call(&Request::Shutdown {}).unwrap();
    assert!(plane.shutdown_requested());
    plane.stop();
    assert!(!sock.exists(), "socket removed on exit");
}

#[test]
fn prometheus_endpoint_serves_metrics() {
    let dir = tmpdir("prom");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (plane, _) = api_plane(&dir, &format!("[metrics]\nprometheus = \"127.0.0.1:{port}\""));
    std::thread::sleep(Duration::from_millis(50));
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    plane.stop();
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    for metric in [
        "# TYPE hotplane_port_rx_packets_total counter",
        "hotplane_port_rx_packets_total{port=\"p0\",kind=\"mem\"}",
        "hotplane_worker_running_version{worker=\"0\",slot=\"pre\"} 1",
        "hotplane_slot_version{worker=\"0\",target=\"extern:lb\"} 1",
        "hotplane_updates_refused_total{reason=\"bad_mac\"} 0",
        "hotplane_update_apply_seconds_count 0",
    ] {
        assert!(body.contains(metric), "missing {metric}\n{body}");
    }
}

#[test]
fn binary_runs_a_config_and_push_talks_to_it() {
    let dir = tmpdir("bin");
    let bin = env!("CARGO_BIN_EXE_hotplane");
    let cap = dir.join("in.pcap");
    let o = Command::new(bin)
        .args(["gen", "--write"])
        .arg(&cap)
        .args(["--count", "300", "--flows", "3"])
        .output()
        .unwrap();
    assert!(o.status.success());
    // Into a capture nothing comes back: the summary says what was written, not a loss.
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("wrote 300 frames to") && !said.contains("lost"), "{said}");
    let o = Command::new(bin)
        .args(["gen", "--json", "--write"])
        .arg(&cap)
        .args(["--count", "300", "--flows", "3"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(o.stdout.trim_ascii_end()).unwrap();
    assert_eq!((v["written"].as_u64(), v.get("loss_ratio")), (Some(300), None), "{v}");
    let out = dir.join("out.pcap");
    let sock = dir.join("s.sock");
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[port]]\nname=\"a\"\nkind=\"pcap\"\nread=\"{}\"\nwrite=\"{}\"\n[control]\nsocket=\"{}\"\n",
            cap.display(),
            out.display(),
            sock.display()
        ),
    )
    .unwrap();
    // Finite input: `run` exits by itself once drained.
    let o = Command::new(bin).args(["run", "--json", "--config"]).arg(&cfg).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(o.stdout.trim_ascii_end()).unwrap();
    assert_eq!(v["summary"]["ports"][0][1]["tx_packets"], 300);
    assert_eq!(read_capture(&out).len(), 300);
    // With --keep-running it stays up for `push`.
    let mut child = common::run_until_socket(&cfg, &sock);
    let push = |args: &[&str]| {
        let o =
            Command::new(bin).arg("push").arg("--socket").arg(&sock).args(args).output().unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let (ok, out_text, _) =
        push(&["install", "--target", "pre", "--stage", r#"{"stage":"count"}"#]);
    assert!(ok && out_text.contains("installed at pre: version 2"), "{out_text}");
    let (ok, _, err) = push(&["install", "--target", "pre", "--stage", r#"{"stage":"bogus"}"#]);
    assert!(!ok && err.contains("stage spec"), "{err}");
    // An update without a key is not sent unless asked for (`--key-id 0`).
    let (ok, _, err) = push(&["update", "--target", "pre", "--stage", r#"{"stage":"drop"}"#]);
    assert!(!ok && err.contains("--key-id 1 needs --key or --key-file"), "{err}");
    // A refused update is a failure, with the node's reason.
    let (ok, _, err) =
        push(&["update", "--target", "pre", "--stage", r#"{"stage":"drop"}"#, "--key", KEY_HEX]);
    assert!(!ok && err.contains("refused the update: unknown_key"), "{err}");
    let (ok, out_text, _) = push(&["stats"]);
    assert!(
        ok && out_text.contains("refused: unknown_key 1"),
        "no key is configured, so key 1 is unknown: {out_text}"
    );
    assert!(out_text.contains("port ") && out_text.contains("rx packets"), "{out_text}");
    let (ok, out_text, _) = push(&["stats", "--json"]);
    let stats: serde_json::Value = serde_json::from_str(&out_text).unwrap();
    assert!(ok && stats["updates"]["refused"]["unknown_key"] == 1, "{stats}");
    let (ok, out_text, _) = push(&["metrics"]);
    assert!(ok && out_text.contains("# TYPE hotplane_port_tx_packets_total counter"));
    let (ok, _, _) = push(&["shutdown"]);
    assert!(ok);
    let st = child.wait().unwrap();
    assert!(st.success());
    // Bad config: a clear error naming the key, non-zero exit.
    std::fs::write(&cfg, "[[port]]\nname=\"a\"\nkind=\"mem\"\npeer=\"zz\"\n").unwrap();
    let o = Command::new(bin).args(["run", "--config"]).arg(&cfg).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("port[0].peer: no port named `zz`"));
}

/// `hotplane key gen FILE` writes a fresh key, owner-only, that the config and `push` accept,
/// says how to use it, and never replaces a key file unless asked.
#[test]
fn key_gen_writes_a_private_key_and_keeps_an_existing_one() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tmpdir("keygen");
    let bin = env!("CARGO_BIN_EXE_hotplane");
    let file = dir.join("k.hex");
    let o = Command::new(bin).args(["key", "gen"]).arg(&file).args(["--id", "3"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("id 3") && said.contains("--key-id 3"), "{said}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(hotplane_control::parse_key(text.trim()).is_ok(), "{text}");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let again = Command::new(bin).args(["key", "gen"]).arg(&file).output().unwrap();
    assert!(!again.status.success(), "an existing key is kept");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    let forced = Command::new(bin).args(["key", "gen", "--force"]).arg(&file).output().unwrap();
    assert!(forced.status.success());
    assert_ne!(std::fs::read_to_string(&file).unwrap(), text, "a new key");
}

/// `hotplane run` reports what its mem ports measured, flow by flow, at exit: sent, received,
/// loss, reordering and latency (text on stderr, `flows` in `--json`), as docs/ports.md says.
#[test]
fn run_reports_the_mem_sinks_flows_at_exit() {
    let dir = tmpdir("run-flows");
    let bin = env!("CARGO_BIN_EXE_hotplane");
    let base = "[[port]]\nname = \"p0\"\nkind = \"mem\"\npeer = \"p1\"\n\
                gen = { flows = 2, count = 1000, rate_pps = 100000 }\n\
                [[port]]\nname = \"p1\"\nkind = \"mem\"\nsink = {}\n";
    let run = |extra: &str| {
        let cfg = dir.join("c.toml");
        std::fs::write(&cfg, format!("{base}{extra}")).unwrap();
        let o = Command::new(bin).args(["run", "--json", "--config"]).arg(&cfg).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(o.stdout.trim_ascii_end()).unwrap();
        (v, String::from_utf8_lossy(&o.stderr).to_string())
    };
    let (v, text) = run("");
    assert!(
        text.contains("flow 0 (udp ") && text.contains("sent 500 received 500 lost 0"),
        "{text}"
    );
    assert_eq!(v["flows"].as_array().unwrap().len(), 2, "{v}");
    assert!(v["flows"][1]["latency_ns_p50"].as_u64().unwrap() > 0);
    let (v, text) = run("[pipeline]\npre = { stage = \"drop\" }\n");
    assert!(text.contains("sent 500 received 0 lost 500"), "{text}");
    assert_eq!(v["flows"][0]["lost"], 500);
}

/// `hotplane gen` with IPv6 addresses and no `--size` makes the smallest frame they allow; a
/// `--size` too small is refused naming the flag, not a config key.
#[test]
fn gen_sizes_ipv6_frames_and_names_the_flag() {
    let dir = tmpdir("gen-v6");
    let bin = env!("CARGO_BIN_EXE_hotplane");
    let gen = |extra: &[&str]| {
        Command::new(bin)
            .args(["gen", "--write"])
            .arg(dir.join("v6.pcap"))
            .args(["--count", "10", "--src-ip", "fd00::2", "--dst-ip", "fd00::1"])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = gen(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = gen(&["--size", "70"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--size 70: below 80 bytes"), "{err}");
}

/// `push flows` shows how many packets each flow function ran on: a selector that matches
/// nothing is visible as 0 next to the ones that take the traffic.
#[test]
fn push_flows_counts_the_packets_of_each_function() {
    let dir = tmpdir("flow-counts");
    let bin = env!("CARGO_BIN_EXE_hotplane");
    let sock = dir.join("s.sock");
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[port]]\nname = \"p0\"\nkind = \"mem\"\npeer = \"p1\"\n\
             gen = {{ flows = 2, count = 2000, rate_pps = 200000 }}\n\
             [[port]]\nname = \"p1\"\nkind = \"mem\"\nsink = {{}}\n\
             [[pipeline.flows]]\nmatch = \"proto=udp,sport=1024\"\nstage = {{ stage = \"count\" }}\n\
             [[pipeline.flows]]\nmatch = \"proto=udp,sport=1025\"\nstage = {{ stage = \"count\" }}\n\
             [[pipeline.flows]]\nmatch = \"dport=9999\"\nstage = {{ stage = \"drop\" }}\n\
             [control]\nsocket = \"{}\"\n",
            sock.display()
        ),
    )
    .unwrap();
    let mut child = common::run_until_socket(&cfg, &sock);
    let flows = || {
        let o = Command::new(bin)
            .args(["push", "--socket"])
            .arg(&sock)
            .args(["flows", "--json"])
            .output();
        let v: serde_json::Value = serde_json::from_slice(&o.unwrap().stdout).unwrap();
        v.as_array().unwrap().clone()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut listed = flows();
    while listed.iter().map(|f| f["packets"].as_u64().unwrap()).sum::<u64>() < 2000 {
        assert!(Instant::now() < deadline, "the generated packets never all ran: {listed:?}");
        std::thread::sleep(Duration::from_millis(20));
        listed = flows();
    }
    let of = |sel: &str| listed.iter().find(|f| f["selector"] == sel).unwrap()["packets"].clone();
    assert_eq!(of("proto=udp,sport=1024"), 1000, "{listed:?}");
    assert_eq!(of("proto=udp,sport=1025"), 1000, "{listed:?}");
    assert_eq!(of("dport=9999"), 0, "a selector that matches nothing shows 0");
    // For people: a table, one line per function.
    let o = Command::new(bin).args(["push", "--socket"]).arg(&sock).arg("flows").output().unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    let line = table.lines().find(|l| l.starts_with("proto=udp,sport=1024 ")).unwrap_or_default();
    assert!(line.split_whitespace().nth(2) == Some("1000"), "{table}");
    let o = Command::new(bin).args(["push", "--socket"]).arg(&sock).arg("slots").output().unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.starts_with("target") && table.lines().count() > 1, "{table}");
    let o = Command::new(bin).args(["push", "--socket"]).arg(&sock).arg("shutdown").output();
    assert!(o.unwrap().status.success());
    assert!(child.wait().unwrap().success());
}
