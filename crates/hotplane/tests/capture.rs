//! `hotplane capture` against a running `hotplane run` with the tutorials' basic program: what
//! arrives on a port, what leaves (with the fields the program rewrote), what is dropped, a
//! snap length, pcap on stdout, and refusals that name what is accepted. The data plane keeps
//! forwarding throughout.
#![cfg(feature = "p4")]

mod common;

use hotplane_io::pcap::format::CaptureReader;
use std::process::Command;

/// `hotplane capture --socket SOCK ARGS...`: success, stdout bytes, stderr.
fn capture(sock: &std::path::Path, args: &[&str]) -> (bool, Vec<u8>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .arg("capture")
        .arg("--socket")
        .arg(sock)
        .args(args)
        .output()
        .unwrap();
    (o.status.success(), o.stdout, String::from_utf8_lossy(&o.stderr).to_string())
}

/// The frames of a pcap stream, with their lengths on the wire.
fn frames(bytes: &[u8]) -> Vec<(Vec<u8>, u32)> {
    let mut r = CaptureReader::new(bytes).expect("a pcap header");
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(info) = r.next_record(&mut buf).expect("a pcap record") {
        out.push((buf.clone(), info.orig_len));
    }
    out
}

#[test]
fn capture_copies_what_arrives_leaves_and_is_dropped() {
    let dir = common::TmpDir::new("capture", "basic");
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/p4/basic.p4");
    let entries = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/p4/basic.json");
    let sock = dir.join("s.sock");
    let cfg = dir.join("c.toml");
    // p0 sends to a routed address (out of port 1), p1 to one no entry covers (dropped).
    let gen = |dst: &str| {
        format!("gen = {{ flows = 1, dst_ip = \"{dst}\", rate_pps = 2000, duration_ms = 120000, stamp = false }}\n")
    };
    std::fs::write(
        &cfg,
        format!(
            "[[port]]\nname = \"p0\"\nkind = \"mem\"\n{}\
             [[port]]\nname = \"p1\"\nkind = \"mem\"\n{}\
             [control]\nsocket = \"{}\"\n\
             [pipeline]\npre = {{ stage = \"p4\", program = \"{program}\", entries = \"{entries}\" }}\n",
            gen("10.0.1.5"),
            gen("10.0.9.9"),
            sock.display()
        ),
    )
    .unwrap();
    let mut child = common::Running(common::run_until_socket(&cfg, &sock));

    // As they arrive on p0: the generator's frames, unchanged.
    let rx = dir.join("rx.pcap");
    let (ok, _, err) = capture(
        &sock,
        &["--port", "p0", "--count", "5", "--duration", "60", "-w", rx.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    assert!(err.contains("5 frame(s) copied"), "{err}");
    let got = frames(&std::fs::read(&rx).unwrap());
    assert_eq!(got.len(), 5);
    for (f, len) in &got {
        assert_eq!(*len as usize, f.len());
        assert_eq!(&f[30..34], &[10, 0, 1, 5], "dst of {f:02x?}");
        assert_eq!(f[22], 64, "ttl as sent");
    }

    // As they leave by port 1 (pcap on stdout): rewritten by ipv4_forward.
    let (ok, out, err) =
        capture(&sock, &["--point", "tx", "--port", "1", "-c", "3", "--duration", "60", "-w", "-"]);
    assert!(ok, "{err}");
    let got = frames(&out);
    assert_eq!(got.len(), 3);
    for (f, _) in &got {
        assert_eq!(&f[0..6], &[8, 0, 0, 0, 1, 0x11], "dst MAC from the entry");
        assert_eq!(f[22], 63, "ttl decremented");
    }

    // What the program drops: only p1's frames, one line each.
    let (ok, out, err) = capture(&sock, &["--point", "drop", "-c", "2", "--duration", "60"]);
    assert!(ok, "{err}");
    let out = String::from_utf8(out).unwrap();
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(
        out.lines().all(|l| l.contains("-> 10.0.9.9:5000") && l.contains("p1 -> drop")),
        "{out}"
    );

    // A snap length keeps the start of each frame and its length on the wire.
    let (ok, out, err) = capture(
        &sock,
        &["--match", "dst=10.0.9.9", "-s", "20", "-c", "1", "--duration", "60", "-w", "-"],
    );
    assert!(ok, "{err}");
    let got = frames(&out);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0.len(), 20);
    assert!(got[0].1 > 20, "wire length {}", got[0].1);

    // Refusals name what is accepted, and leave the data plane as it was.
    let (ok, _, err) = capture(&sock, &["--point", "ingress", "-c", "1"]);
    assert!(!ok && err.contains("one of rx, tx, drop"), "{err}");
    let (ok, _, err) = capture(&sock, &["--port", "p9", "-c", "1", "-w", rx.to_str().unwrap()]);
    assert!(!ok && err.contains("no port `p9` (ports: p0, p1)"), "{err}");
    assert_eq!(frames(&std::fs::read(&rx).unwrap()).len(), 5, "a refused capture leaves the file");
    let (ok, _, err) = capture(&sock, &["--match", "dport=x", "-c", "1"]);
    assert!(!ok && err.contains("dport"), "{err}");
    let (ok, out, err) = capture(&sock, &["--point", "mid", "-c", "1", "--duration", "0.3"]);
    assert!(ok && out.is_empty(), "no stage at mid, nothing passes it: {err}");
    assert!(err.contains("0 frame(s) copied"), "{err}");

    let (ok, _, err) = capture(&sock, &["--port", "p0", "-c", "1", "--duration", "60", "-w", "-"]);
    assert!(ok, "still forwarding after the refusals: {err}");
    let o = Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .args(["push", "--socket", sock.to_str().unwrap(), "shutdown"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(child.0.wait().unwrap().success());
}
