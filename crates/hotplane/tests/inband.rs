//! In-band updates: an authenticated update packet switches a flow's function and is
//! acknowledged; tampered, replayed, truncated, oversized, unauthenticated and otherwise bad
//! update packets are refused with a counter and a reason, and the running program keeps running.

mod common;

use hotplane::inband::{ack_of, UpdateSender};
use hotplane::Config;
use hotplane_control::{AckStatus, Flags, Kind, Reason, Target, UpdateHeader, WorkerScope};
use hotplane_core::FlowSelector;
use hotplane_io::mem::MemReport;
use std::time::{Duration, Instant};

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn key() -> [u8; 32] {
    hotplane_control::parse_key(KEY_HEX).unwrap()
}

fn flow1() -> FlowSelector {
    "proto=udp,src=10.0.0.1,dst=10.1.0.1,sport=1024,dport=5000".parse().unwrap()
}

fn plane() -> hotplane::Engine {
    let cfg = Config::parse(
        &format!(
            r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 2, rate_pps = 200000 }}
sink = {{ record = 2000000, capture = 64 }}
[[pipeline.flows]]
match = "proto=udp,src=10.0.0.1,dst=10.1.0.1,sport=1024,dport=5000"
stage = {{ stage = "set-field", base = "payload", offset = 16, value = 1, width = 2 }}
[control]
max_update_bytes = 4096
[[control.keys]]
id = 1
key = "{KEY_HEX}"
"#
        ),
        "test",
    )
    .unwrap();
    hotplane::start(cfg).unwrap()
}

fn header(seq: u64, key_id: u32) -> UpdateHeader {
    UpdateHeader {
        kind: Kind::NativeStage,
        flags: Flags::default(),
        key_id,
        seq,
        target: Target::Flow(flow1()),
        worker: WorkerScope::All,
    }
}

const MARK7: &[u8] = br#"{"stage":"set-field","base":"payload","offset":16,"value":7,"width":2}"#;

fn wait_datagrams(plane: &hotplane::Engine, n: u64) {
    let u = &plane.observability().updates;
    let deadline = Instant::now() + Duration::from_secs(20);
    while u.datagrams.load(std::sync::atomic::Ordering::Relaxed) < n {
        assert!(Instant::now() < deadline, "control thread did not see {n} datagrams");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn authenticated_update_applies_and_bad_ones_are_refused() {
    let plane = plane();
    let p0 = plane.mem("p0").unwrap().clone();
    let reg = plane.registry().clone();
    let sender = UpdateSender::new(1, Some(key()), 47474);
    std::thread::sleep(Duration::from_millis(20));
    let v_before = reg.workers[0].flows.function(&flow1()).unwrap().version;

    let good = sender.frames(&header(10, 1), MARK7).unwrap().remove(0);
    p0.inject(good.clone()).unwrap();
    wait_datagrams(&plane, 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while reg.workers[0].flows.function(&flow1()).unwrap().version == v_before {
        assert!(Instant::now() < deadline, "update not applied");
        std::thread::sleep(Duration::from_millis(1));
    }
    let v_after = reg.workers[1].flows.function(&flow1()).unwrap().version;
    assert!(v_after > v_before);
    std::thread::sleep(Duration::from_millis(20));

    // Hostile and broken updates.
    let mut tampered = good.clone();
    let n = tampered.len();
    tampered[n - 40] ^= 0x20; // a payload byte, under the MAC
    let datagram = &sender.datagrams(&header(11, 1), MARK7).unwrap()[0];
    let truncated = sender.wrap(&datagram[..datagram.len() - 5]);
    let runt = sender.wrap(&datagram[..40]);
    let oversized = sender.frames(&header(17, 1), &[b' '; 5000]).unwrap();
    let unauth = UpdateSender::new(0, None, 47474).frames(&header(13, 0), MARK7).unwrap().remove(0);
    let not_json = sender.frames(&header(14, 1), b"{not json").unwrap().remove(0);
    let bad_kind = sender
        .frames(&UpdateHeader { kind: Kind::Other(200), ..header(15, 1) }, b"")
        .unwrap()
        .remove(0);
    let no_such_flow = sender
        .frames(
            &UpdateHeader {
                kind: Kind::Remove,
                target: Target::Flow("dport=9".parse().unwrap()),
                ..header(16, 1)
            },
            b"",
        )
        .unwrap()
        .remove(0);
    let mut bad =
        vec![tampered, good.clone(), truncated, runt, unauth, not_json, bad_kind, no_such_flow];
    bad.extend(oversized.iter().take(1).cloned());
    for f in &bad {
        p0.inject(f.clone()).unwrap();
        // One at a time, so the replayed copy arrives after the original was applied.
        std::thread::sleep(Duration::from_millis(2));
    }
    wait_datagrams(&plane, 1 + bad.len() as u64);
    std::thread::sleep(Duration::from_millis(50));

    let u = plane.observability().updates.clone();
    for (reason, n) in [
        (Reason::BadMac, 2), // tampered, truncated
        (Reason::Replay, 1),
        (Reason::Truncated, 1),
        (Reason::Oversized, 1),
        (Reason::Unauthenticated, 1),
        (Reason::ApplyFailed, 1),
        (Reason::UnsupportedKind, 1),
        (Reason::BadTarget, 1),
    ] {
        assert_eq!(u.refused(reason), n, "refusals for {reason}");
    }
    // The program that was running keeps running.
    assert_eq!(reg.workers[0].flows.function(&flow1()).unwrap().version, v_after);
    let stats = plane.request(hotplane_control::api::Request::Stats {});
    assert!(stats.ok);
    let refused = &stats.result.unwrap()["updates"]["refused"];
    assert_eq!(refused["bad_mac"], 2);

    common::wait_sent(&plane, 1 + bad.len() as u64);
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    assert_eq!(r.lost(), 0, "traffic was disturbed");
    let f1 = r.flow(0).unwrap();
    let last = r.samples.iter().rev().find(|s| s.flow == 0).unwrap();
    assert_eq!(last.mark, 7, "flow 1 runs the applied function to the end");
    assert!(f1.marks.iter().any(|m| m.mark == 1) && f1.marks.iter().any(|m| m.mark == 7));

    // Every datagram was answered (the unauthenticated ones within the refusal rate limit).
    let acks: Vec<_> =
        r.captured.iter().filter_map(|f| ack_of(f, None)).map(|a| a.unwrap()).collect();
    assert_eq!(acks.len(), 1 + bad.len(), "acks: {acks:?}");
    let applied: Vec<_> = acks.iter().filter(|a| a.status == AckStatus::Applied).collect();
    assert_eq!(applied.len(), 1);
    assert_eq!(applied[0].seq, 10);
    assert_eq!(applied[0].version, v_after);
    // Acks of authenticated updates carry a MAC under the sender's key.
    let applied_frame = r
        .captured
        .iter()
        .find(|f| matches!(ack_of(f, None), Some(Ok(a)) if a.status == AckStatus::Applied))
        .unwrap();
    assert!(ack_of(applied_frame, Some(&key())).unwrap().is_ok());
    assert!(ack_of(applied_frame, Some(&[9; 32])).unwrap().is_err());
    let reasons: Vec<_> = acks.iter().filter_map(|a| a.reason).collect();
    assert!(reasons.contains(&Reason::Replay) && reasons.contains(&Reason::ApplyFailed));
    let json_err = acks.iter().find(|a| a.reason == Some(Reason::ApplyFailed)).unwrap();
    assert!(json_err.message.contains("stage spec"), "{}", json_err.message);
}

#[test]
fn fragmented_update_reassembles_and_applies() {
    let plane = plane();
    let p0 = plane.mem("p0").unwrap().clone();
    let reg = plane.registry().clone();
    let mut sender = UpdateSender::new(1, Some(key()), 47474);
    sender.max_fragment = 16;
    // Pad the JSON so it spans several fragments.
    let payload = format!("{}{}", std::str::from_utf8(MARK7).unwrap(), " ".repeat(100));
    let frames = sender.frames(&header(20, 1), payload.as_bytes()).unwrap();
    assert!(frames.len() > 5);
    let v_before = reg.workers[0].flows.function(&flow1()).unwrap().version;
    for f in frames.iter().rev() {
        p0.inject(f.clone()).unwrap();
    }
    wait_datagrams(&plane, frames.len() as u64);
    let deadline = Instant::now() + Duration::from_secs(10);
    while reg.workers[0].flows.function(&flow1()).unwrap().version == v_before {
        assert!(Instant::now() < deadline, "fragmented update not applied");
        std::thread::sleep(Duration::from_millis(1));
    }
    common::wait_sent(&plane, frames.len() as u64);
    let handles = plane.mem_handles();
    std::thread::sleep(Duration::from_millis(20));
    plane.stop();
    let r = MemReport::merge(&handles);
    let acks: Vec<_> =
        r.captured.iter().filter_map(|f| ack_of(f, Some(&key()))).map(|a| a.unwrap()).collect();
    assert_eq!(acks.iter().filter(|a| a.status == AckStatus::Partial).count(), frames.len() - 1);
    assert_eq!(acks.iter().filter(|a| a.status == AckStatus::Applied).count(), 1);
}
