//! `hotplane gen` as a user runs it, into captures (no privileges): TCP and ICMP streams whose
//! stamps the measuring side reads, a pcap replayed as it is, several streams side by side, a
//! rate sweep that changes the rate while running, and refusals that name the flag.

mod common;

use hotplane_io::pcap::format::CaptureReader;
use serde_json::Value;
use std::process::Command;

/// `hotplane gen ARGS... --json`: success, the last stdout line as JSON, stderr.
fn gen(args: &[&str]) -> (bool, Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .arg("gen")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let last = out.lines().last().and_then(|l| serde_json::from_str(l).ok()).unwrap_or(Value::Null);
    (o.status.success(), last, String::from_utf8_lossy(&o.stderr).to_string())
}

fn frames(path: &std::path::Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    while r.next_record(&mut buf).unwrap().is_some() {
        out.push(buf.clone());
    }
    out
}

/// The IP protocol of an untagged IPv4 frame.
fn proto(f: &[u8]) -> u8 {
    f[23]
}

#[test]
fn tcp_icmp_streams_and_a_replayed_capture() {
    let dir = common::TmpDir::new("gen", "cli");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();

    // TCP SYNs and, alongside, a stream of ICMP echo requests: both stamped, both measured.
    let (ok, out, err) = gen(&[
        "--write",
        &path("mixed.pcap"),
        "--count",
        "20",
        "--proto",
        "tcp",
        "--dst-port",
        "80",
        "--stream",
        "proto=icmp,dst=10.0.2.2",
    ]);
    assert!(ok, "{err}");
    assert_eq!(out["written"], 40, "{out}");
    let written = frames(&dir.join("mixed.pcap"));
    let tcp: Vec<_> = written.iter().filter(|f| proto(f) == 6).collect();
    let icmp: Vec<_> = written.iter().filter(|f| proto(f) == 1).collect();
    assert_eq!((tcp.len(), icmp.len()), (20, 20));
    assert!(tcp.iter().all(|f| f[14 + 20 + 13] == 0x02 && f[36..38] == [0, 80]), "SYN to port 80");
    assert!(icmp.iter().all(|f| f[34] == 8 && f[30..34] == [10, 0, 2, 2]), "echo requests");
    let (ok, out, err) = gen(&["--read", &path("mixed.pcap")]);
    assert!(ok, "{err}");
    let flows = out["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2, "one flow per stream, by stamp: {out}");
    assert!(flows.iter().all(|f| f["received"] == 20 && f["missing"] == 0), "{out}");
    assert_eq!(out["unstamped"], 0, "the stamps of TCP and ICMP are found: {out}");

    // That capture replayed as it is: every frame, in order, once through by default.
    let (ok, out, err) = gen(&["--write", &path("again.pcap"), "--pcap", &path("mixed.pcap")]);
    assert!(ok, "{err}");
    assert_eq!(out["written"], 40);
    assert_eq!(frames(&dir.join("again.pcap")), written);
    let (ok, out, _) =
        gen(&["--write", &path("loop.pcap"), "--pcap", &path("mixed.pcap"), "--count", "50"]);
    assert!(ok && out["written"] == 50, "cycled for a count: {out}");

    // Refusals name the flag or the key.
    for (args, says) in [
        (vec!["--proto", "sctp"], "one of udp, tcp, icmp"),
        (vec!["--tcp-flags", "SYN"], "--tcp-flags SYN"),
        (vec!["--stream", "proto=tcp,speed=1"], "--stream proto=tcp,speed=1: unknown key `speed`"),
        (vec!["--rates", "1000,-5"], "--rates: -5"),
        (vec!["--rate", "1e20"], "rate_pps = 100000000000000000000: from 0.001"),
        (vec!["--pcap", "x.pcap", "--rate-mbps", "5"], "--rate-mbps: not with --pcap"),
        (vec!["--proto", "tcp", "--size", "64"], "--size 64: below 72 bytes"),
        (vec!["--pcap", "/nonexistent.pcap"], "gen.pcap = \"/nonexistent.pcap\""),
    ] {
        let mut a = vec!["--write", "/dev/null", "--count", "1"];
        a.extend(args);
        let (ok, _, err) = gen(&a);
        assert!(!ok && err.contains(says), "{a:?}: {err}");
    }
}

/// A rate no pacer holds is said, with what was achieved, not reported as if it were met.
#[test]
fn a_rate_the_pacer_cannot_hold_is_a_warning_with_the_achieved_rate() {
    let dir = common::TmpDir::new("gen", "behind");
    let file = dir.join("fast.pcap");
    let (ok, out, err) =
        gen(&["--write", file.to_str().unwrap(), "--count", "50000", "--rate", "1e10"]);
    assert!(ok, "{err}");
    assert!(err.contains("warning: the generator sent") && err.contains("fell behind"), "{err}");
    assert_eq!(out["asked_pps"], 1e10);
    assert!(out["achieved_pps"].as_f64().unwrap() < 1e10 * 0.95, "{out}");
    // A rate it holds is not warned about.
    let (ok, out, err) =
        gen(&["--write", file.to_str().unwrap(), "--count", "20000", "--rate", "20000"]);
    assert!(ok && !err.contains("fell behind"), "{err}");
    assert_eq!(out["asked_pps"], 20000.0);
}

#[test]
fn a_rate_sweep_changes_the_rate_while_running() {
    let dir = common::TmpDir::new("gen", "sweep");
    let file = dir.join("sweep.pcap");
    let (ok, out, err) =
        gen(&["--write", file.to_str().unwrap(), "--rates", "1000,4000", "--step", "0.5"]);
    assert!(ok, "{err}");
    let steps = out["steps"].as_array().expect("a result per step");
    assert_eq!(steps.len(), 2, "{out}");
    assert_eq!((&steps[0]["asked_pps"], &steps[1]["asked_pps"]), (&1000.0.into(), &4000.0.into()));
    let sent = |i: usize| steps[i]["tx_pps"].as_f64().unwrap();
    // Paced, not timed: the second step sends clearly more than the first.
    assert!(sent(1) > 2.0 * sent(0) && sent(0) > 0.0, "{out}");
    assert_eq!(out["written"].as_u64(), Some(frames(&file).len() as u64));
}
