//! Active packets in a running data plane: `stage = "wasp"` as an input filter over pcap ports,
//! replaced while packets flow (no packet lost, the store kept), with its statistics.

mod common;
use common::TmpDir;

use hotplane::{Config, StageSpec};
use hotplane_control::api::Request;
use hotplane_io::pcap::format::{CaptureReader, CaptureWriter};
use hotplane_wasp::asm::assemble;
use hotplane_wasp::frame::{active_frame, Hosts, Send};
use hotplane_wasp::wire::{WaspPacket, WaspRepr};
use std::path::Path;
use std::time::Duration;

const COUNT: &str = include_str!("../../../examples/wasp/count.s");
const FRAMES: u64 = 2_000;
const LOOPS: u32 = 10;

fn count_frame(key: u64) -> Vec<u8> {
    let repr = WaspRepr {
        next_header: hotplane_wasp::wire::NO_NEXT_HEADER,
        keys: vec![key],
        scratch: u64::MAX.to_be_bytes().to_vec(), // threshold: never drop
        code: assemble(COUNT).unwrap().code,
        ..WaspRepr::default()
    };
    active_frame(&Hosts::default(), Send::default(), &repr, b"").unwrap()
}

fn captured(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    while r.next_record(&mut buf).unwrap().is_some() {
        out.push(buf.clone());
    }
    out
}

#[test]
fn replacing_the_wasp_stage_while_packets_flow_loses_nothing_and_keeps_the_store() {
    let dir = TmpDir::new("test", "wasp");
    let input = dir.join("in.pcap");
    let output = dir.join("out.pcap");
    let socket = dir.join("ctl.sock");
    let mut w = CaptureWriter::new(std::fs::File::create(&input).unwrap(), 65535).unwrap();
    for i in 0..FRAMES {
        // Two keys, so two entries; one bad packet in 100 (its checksum broken) is refused.
        let mut frame = count_frame(1 + i % 2);
        if i % 100 == 99 {
            let at = frame.len() - 1;
            frame[at] ^= 0x55;
        }
        w.write(0, &frame).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let cfg = Config::parse(
        &format!(
            r#"
[dataplane]
workers = 1
[[port]]
name = "in"
kind = "pcap"
read = "{}"
loops = {LOOPS}
rate_pps = 40000
peer = "out"
[[port]]
name = "out"
kind = "pcap"
write = "{}"
[wasp]
node_id = 42
lifetime_ms = 600000
[control]
socket = "{}"
[pipeline]
pre = {{ stage = "wasp" }}
mid = {{ stage = "l2fwd" }}
"#,
            input.display(),
            output.display(),
            socket.display()
        ),
        "test",
    )
    .unwrap();
    let plane = hotplane::start(cfg).unwrap();
    let mut replaced = 0;
    while !plane.drained() && replaced < 200 {
        let on_fault = if replaced % 2 == 0 { "forward-flagged" } else { "drop" };
        let spec: StageSpec =
            serde_json::from_value(serde_json::json!({"stage": "wasp", "on_fault": on_fault}))
                .unwrap();
        plane.install("pre", &spec).unwrap();
        replaced += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let drained = plane.wait_drained(Duration::from_secs(20));
    assert!(drained, "not drained: {}", plane.stats().unwrap());
    let total = FRAMES * u64::from(LOOPS);
    let bad = total / 100;
    let get = |key: u64| {
        let r = plane.request(Request::WaspGet { store: "in:in".into(), key, scope: None });
        r.into_result().unwrap()
    };
    let counted = get(1)["words"][0].as_u64().unwrap() + get(2)["words"][0].as_u64().unwrap();
    let stats = plane.stats().unwrap();
    let wasp = &stats["wasp"];
    // The operator's view of the same entry, through the control socket.
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .args(["push", "--socket"])
        .arg(&socket)
        .args(["wasp-get", "in:in", "1", "--json"])
        .output()
        .unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&cli.stdout).unwrap_or_default();
    assert_eq!(answer["words"][0], get(1)["words"][0], "{}", String::from_utf8_lossy(&cli.stderr));
    plane.stop();
    assert!(replaced >= 5, "the stage was replaced {replaced} times while packets flowed");
    assert_eq!(counted, total - bad, "every good packet counted once, in one store: {wasp}");
    assert_eq!(wasp["rejected_bad-checksum"], bad, "{wasp}");
    assert_eq!((wasp["packets"].as_u64(), wasp["live_entries"].as_u64()), (Some(total), Some(2)));
    let out = captured(&output);
    assert_eq!(out.len() as u64, total - bad, "refused packets dropped, none lost");
    assert!(out.iter().all(|f| WaspPacket::new_checked(&f[42..]).unwrap().verify_checksum()));
}
