//! hotplane's P4 extensions in a running data plane, with the example programs:
//! - `hotplane_ebpf`: an action hands the IPv4 header to the eBPF program in an extern slot,
//!   which rewrites it and decides; replacing that program by an update changes the decision
//!   without touching the P4 program;
//! - `hotplane_flow_function()`: the flow's Lua function gives its verdict to the P4 program,
//!   and runs once per packet (the flow step skips packets P4 already asked about);
//! - `hotplane_load_from_packet()`: packets the P4 program selects are authenticated and
//!   applied as updates, while others are routed.
#![cfg(all(feature = "p4", feature = "lua"))]

mod common;

use common::TmpDir;
use hotplane::inband::{ack_of, UpdateSender};
use hotplane::Config;
use hotplane_control::api::Request;
use hotplane_control::{AckStatus, Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_ebpf::env::Code;
use hotplane_io::mem::MemReport;
use hotplane_io::pcap::format::{CaptureReader, CaptureWriter};
use std::time::Duration;

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/p4");

fn key() -> [u8; 32] {
    hotplane_control::parse_key(KEY_HEX).unwrap()
}

fn header(kind: Kind, seq: u64, target: Target) -> UpdateHeader {
    UpdateHeader { kind, flags: Flags::default(), key_id: 1, seq, target, worker: WorkerScope::All }
}

fn port_tx(s: &hotplane_engine::RunSummary, name: &str) -> u64 {
    s.ports.iter().find(|(n, _)| n == name).map_or(0, |p| p.1.tx_packets)
}

#[test]
fn an_ebpf_program_in_an_extern_slot_decides_and_is_replaced_while_packets_flow() {
    const N: u64 = 20_000;
    let dir = TmpDir::new("p4-ebpf", "externs");
    let entries = dir.join("entries.json");
    std::fs::write(
        &entries,
        r#"{"table_entries": [{"table": "MyIngress.ipv4_lpm",
            "match": {"hdr.ipv4.dstAddr": ["10.1.0.0", 16]},
            "action_name": "MyIngress.inspect_forward",
            "action_params": {"dstAddr": "02:00:00:00:00:99", "port": 0}}]}"#,
    )
    .unwrap();
    let toml = format!(
        r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 2, count = {N}, rate_pps = 20000, stamp = false }}
sink = {{ capture = 8 }}
[[control.keys]]
id = 1
key = "{KEY_HEX}"
[pipeline]
pre = {{ stage = "p4", program = "{EXAMPLES}/ebpf_extern.p4", entries = "{}" }}
[pipeline.externs.classify]
stage = "ebpf"
file = "{EXAMPLES}/classify.s"
"#,
        entries.display()
    );
    let plane = hotplane::start(Config::parse(&toml, "test").unwrap()).unwrap();
    let processed = || plane.worker_stats().iter().map(|w| w.packets.get()).sum::<u64>();
    while processed() < 2_000 {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Replace the slot's program: now everything is dropped.
    let drop_all = Code::Asm("mov %r0, 1\nexit\n".into()).payload().unwrap();
    let frags = hotplane_control::envelope::build(
        &header(Kind::EbpfBytecode, 1, Target::Extern("classify".into())),
        &drop_all,
        Some(&key()),
        1400,
    )
    .unwrap();
    let r = plane.request(Request::Update { fragments: frags.iter().map(hex::encode).collect() });
    assert!(r.ok, "{:?}", r.error);
    let ack = r.result.unwrap().as_array().unwrap().last().unwrap().clone();
    assert_eq!(ack["status"], "applied", "{ack}");
    let swapped_at = processed();
    assert!(swapped_at < N, "traffic ended before the swap");
    assert!(plane.wait_drained(Duration::from_secs(60)), "did not drain");
    let handles = plane.mem_handles();
    let s = plane.stop();
    assert_eq!(s.panics, 0);
    let report = MemReport::merge(&handles);
    let forwarded = port_tx(&s, "p0");
    assert!((2_000..N).contains(&forwarded), "forwarded {forwarded} of {N}");
    assert_eq!(forwarded + s.dropped, N, "every packet forwarded or dropped");
    // Before the swap, the eBPF program set DSCP EF in the header the P4 program forwarded.
    let frame = report.captured.first().expect("captured frames");
    assert_eq!(&frame[0..6], &[2, 0, 0, 0, 0, 0x99], "routed by the P4 action");
    assert_eq!(frame[15], 0xb8, "diffserv written by the eBPF program");
    assert_eq!(frame[22], 63, "TTL decremented by the P4 action");
    let ip = &frame[14..34];
    let sum = ip.chunks(2).map(|w| u16::from_be_bytes([w[0], w[1]]) as u32).sum::<u32>();
    let folded = (sum & 0xffff) + (sum >> 16);
    assert_eq!((folded & 0xffff) + (folded >> 16), 0xffff, "checksum updated after the call");
}

#[test]
fn the_flow_function_decides_once_per_packet() {
    const N: u64 = 4_000;
    let dir = TmpDir::new("p4-flows", "externs");
    let entries = dir.join("entries.json");
    std::fs::write(
        &entries,
        r#"{"table_entries": [{"table": "MyIngress.ipv4_lpm",
            "match": {"hdr.ipv4.dstAddr": ["10.1.0.0", 16]},
            "action_name": "MyIngress.forward", "action_params": {"port": 0}}]}"#,
    )
    .unwrap();
    let toml = format!(
        r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 2, count = {N} }}
sink = {{}}
[[port]]
name = "p1"
kind = "mem"
sink = {{}}
[pipeline]
pre = {{ stage = "p4", program = "{EXAMPLES}/flow_function.p4", entries = "{}" }}
[[pipeline.flows]]
match = "proto=udp,sport=1025"
stage = {{ stage = "lua", source = "return function(pkt) pkt:drop() end" }}
"#,
        entries.display()
    );
    let plane = hotplane::start(Config::parse(&toml, "test").unwrap()).unwrap();
    assert!(plane.wait_drained(Duration::from_secs(60)), "did not drain");
    let s = plane.stop();
    assert_eq!(s.panics, 0);
    // The flow whose function says drop is diverted to the monitor port, not dropped: the
    // flow step did not run the function again on packets the P4 program already asked about.
    assert_eq!(port_tx(&s, "p1"), N / 2, "{s:?}");
    assert_eq!(port_tx(&s, "p0"), N / 2, "the flow without a function is routed");
    assert_eq!(s.dropped, 0);
}

#[test]
fn packets_the_program_selects_are_applied_as_authenticated_updates() {
    let dir = TmpDir::new("p4-load", "externs");
    let (input, output) = (dir.join("in.pcap"), dir.join("out.pcap"));
    let entries = dir.join("entries.json");
    std::fs::write(
        &entries,
        r#"{"table_entries": [
            {"table": "MyIngress.code_sources",
             "match": {"hdr.ipv4.srcAddr": ["10.9.0.0", 16], "hdr.udp.dstPort": 9999},
             "action_name": "MyIngress.load_code"},
            {"table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": ["10.0.0.0", 8]},
             "action_name": "MyIngress.forward", "action_params": {"port": 0}}]}"#,
    )
    .unwrap();
    // Port 9999 is not the node's update port: only the P4 program makes these updates.
    let sender = UpdateSender::new(1, Some(key()), 9999);
    let good = sender
        .frames(
            &header(Kind::NativeStage, 1, Target::Position(hotplane_core::Position::Mid)),
            br#"{"stage":"count"}"#,
        )
        .unwrap();
    let forged = UpdateSender::new(1, Some([7u8; 32]), 9999)
        .frames(
            &header(Kind::NativeStage, 2, Target::Position(hotplane_core::Position::Post)),
            br#"{"stage":"drop"}"#,
        )
        .unwrap();
    // The same update to another port is just routed.
    let elsewhere = UpdateSender::new(1, Some(key()), 9998)
        .frames(
            &header(Kind::NativeStage, 3, Target::Position(hotplane_core::Position::Post)),
            br#"{"stage":"drop"}"#,
        )
        .unwrap();
    let mut w = CaptureWriter::new(std::fs::File::create(&input).unwrap(), 65535).unwrap();
    for f in good.iter().chain(&forged).chain(&elsewhere) {
        w.write(0, f).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let toml = format!(
        r#"
[[port]]
name = "p"
kind = "pcap"
read = "{}"
write = "{}"
[[control.keys]]
id = 1
key = "{KEY_HEX}"
[pipeline]
pre = {{ stage = "p4", program = "{EXAMPLES}/load_from_packet.p4", entries = "{}" }}
"#,
        input.display(),
        output.display(),
        entries.display()
    );
    let plane = hotplane::start(Config::parse(&toml, "test").unwrap()).unwrap();
    assert!(plane.wait_drained(Duration::from_secs(30)));
    let slots = plane.registry().slots();
    let s = plane.stop();
    assert_eq!(s.panics, 0);
    assert!(slots.iter().any(|s| s.target == "mid" && s.program.starts_with("count")), "{slots:?}");
    assert!(slots.iter().all(|s| s.target != "post" || s.program == "none"), "{slots:?}");
    let mut r = CaptureReader::new(std::fs::File::open(&output).unwrap()).unwrap();
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    while r.next_record(&mut buf).unwrap().is_some() {
        out.push(buf.clone());
    }
    let acks: Vec<_> =
        out.iter().filter_map(|f| ack_of(f, Some(&key())).and_then(Result::ok)).collect();
    assert!(acks.iter().any(|a| a.status == AckStatus::Applied && a.seq == 1), "{acks:?}");
    assert!(acks.iter().all(|a| a.seq != 2 || a.status != AckStatus::Applied), "forged: {acks:?}");
    // The update to port 9998 was routed like any packet, untouched.
    assert!(out.iter().any(|f| f == &elsewhere[0]), "the packet to port 9998 was forwarded");
}
