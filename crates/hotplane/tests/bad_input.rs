//! Malformed frames of every length from 0 to 1600 bytes, through every stage kind, the flow
//! table, the in-band update path and the control thread: nothing panics, nothing stalls, and
//! traffic keeps flowing.

use hotplane::inband::UpdateSender;
use hotplane::Config;
use hotplane_core::wire::{EthernetAddress, UdpFrame};
use std::time::{Duration, Instant};

/// A deterministic byte stream (xorshift), so failures reproduce.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn udp(dport: u16, payload_len: usize, v6: bool, vlan: Option<u16>) -> Vec<u8> {
    let (s, d) = if v6 { ("fd00::1", "fd00::2") } else { ("10.0.0.9", "10.1.0.9") };
    let f = UdpFrame {
        src_mac: EthernetAddress::local(7),
        dst_mac: EthernetAddress::local(8),
        vlan,
        src_ip: s.parse().unwrap(),
        dst_ip: d.parse().unwrap(),
        src_port: 999,
        dst_port: dport,
    };
    let mut b = vec![0u8; 2000];
    let n = f.emit(&noise(payload_len as u64, payload_len), &mut b).unwrap();
    b.truncate(n);
    b
}

#[test]
fn malformed_frames_of_every_length_never_panic() {
    let cfg = Config::parse(
        r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
gen = { flows = 2, rate_pps = 50000 }
sink = { capture = 0 }
[pipeline]
pre = { stage = "l2fwd" }
# Writes land after the 20-byte test stamp of generated 64-byte frames.
mid = { stage = "set-field", base = "payload", offset = 20, value = "0xbeef" }
post = { stage = "set-field", base = "l4", offset = 40, value = "0x01" }
flow_default = { stage = "set-field", base = "l3", offset = 48, value = "0x0203" }
[[pipeline.flows]]
match = "dst=10.1.0.0/16"
stage = { stage = "count" }
[control]
# The update-port frames below are addressed to 10.1.0.9 / fd00::2: the node's, here.
update_addresses = ["10.1.0.9", "fd00::2", "10.0.0.254"]
[[control.keys]]
id = 1
key = "0000000000000000000000000000000000000000000000000000000000000001"
"#,
        "test",
    )
    .unwrap();
    let plane = hotplane::start(cfg).unwrap();
    let p0 = plane.mem("p0").unwrap().clone();
    let sender = UpdateSender::new(1, None, 47474);
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let templates = [
        udp(5000, 1600, false, None),
        udp(5000, 1600, true, Some(5)),
        udp(47474, 1600, false, None),
        udp(47474, 1600, true, None),
        sender.wrap(&noise(3, 1500)),
    ];
    for len in 0..=1600usize {
        frames.push(noise(len as u64, len));
        for t in &templates {
            frames.push(t[..len.min(t.len())].to_vec());
        }
        // Well-formed UDP to the update port whose payload is noise: punted, then refused.
        if len >= 42 {
            frames.push(udp(47474, len - 42, false, None));
        }
        if len >= 66 {
            frames.push(udp(47474, len - 66, true, Some(9)));
        }
        // A frame that claims more than it has: IPv4 total length and UDP length lie.
        let mut liar = templates[0][..len.min(templates[0].len())].to_vec();
        if liar.len() >= 42 {
            liar[16..18].copy_from_slice(&0xffffu16.to_be_bytes());
            liar[38..40].copy_from_slice(&0xffffu16.to_be_bytes());
        }
        frames.push(liar);
    }
    // Larger than a pool buffer: must be counted, not crash.
    frames.push(vec![0xab; 4000]);
    let expected = frames.len() as u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    for f in frames {
        let mut f = f;
        while let Err(back) = p0.inject_to(f.len() % 2, f) {
            assert!(
                Instant::now() < deadline,
                "injection stalled: the data plane stopped consuming"
            );
            f = back;
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let q = plane.observability().ports[0].queues.clone();
    while q.iter().map(|c| c.rx_packets.get() + c.errors.get()).sum::<u64>() < expected {
        assert!(Instant::now() < deadline, "frames were not all consumed");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Traffic still flows after the garbage.
    let before = plane.worker_stats().iter().map(|w| w.packets.get()).sum::<u64>();
    std::thread::sleep(Duration::from_millis(50));
    let after = plane.worker_stats().iter().map(|w| w.packets.get()).sum::<u64>();
    assert!(after > before + 100, "traffic stopped: {before} -> {after}");
    let refused = plane.observability().updates.refused_total();
    let overflow: u64 = plane.worker_stats().iter().map(|w| w.punt_overflow.get()).sum();
    let errors: u64 = q.iter().map(|c| c.errors.get()).sum();
    let handles = plane.mem_handles();
    let summary = plane.stop();
    assert_eq!(summary.panics, 0);
    assert!(
        refused + overflow >= 1559 + 1535,
        "garbage update packets are refused or counted ({refused} + {overflow})"
    );
    assert!(refused > 1000, "most garbage update packets reach the control thread ({refused})");
    assert_eq!(errors, 1, "the oversized frame is counted as a port error");
    let r = hotplane_io::mem::MemReport::merge(&handles);
    assert_eq!(r.lost(), 0);
}

/// A program that panics on some packets (a bug) costs those batches, not the worker.
struct Panicky;

impl hotplane_core::Stage for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }

    fn run(
        &self,
        batch: &mut hotplane_core::Batch,
        sel: hotplane_core::Mask,
        _cx: &mut hotplane_core::WorkerCx<'_>,
    ) {
        for i in sel {
            let p = batch.get(i).unwrap();
            if p.meta.flow_hash % 7 == 0 && p.len() == 64 {
                panic!("bug in a program");
            }
        }
    }
}

#[test]
fn a_panicking_program_costs_its_batch_not_the_worker() {
    let cfg = Config::parse(
        "[[port]]\nname = \"p0\"\nkind = \"mem\"\ngen = { flows = 64, rate_pps = 200000 }\n",
        "test",
    )
    .unwrap();
    let plane = hotplane::start(cfg).unwrap();
    let reg = plane.registry().clone();
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // keep the test output readable
    reg.install(
        &hotplane_control::Target::Position(hotplane_core::Position::Pre),
        &[0],
        Some(std::sync::Arc::new(Panicky)),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let stats = plane.worker_stats()[0].clone();
    let panics = stats.panics.get();
    // Remove the bug; the same worker carries on.
    reg.install(&hotplane_control::Target::Position(hotplane_core::Position::Pre), &[0], None)
        .unwrap();
    let before = stats.packets.get();
    std::thread::sleep(Duration::from_millis(100));
    let after = stats.packets.get();
    std::panic::set_hook(prev);
    let summary = plane.stop();
    assert!(panics > 0, "the program should have panicked");
    assert!(after > before + 1000, "worker stopped after panics: {before} -> {after}");
    assert_eq!(summary.panics, 0, "no thread died");
}
