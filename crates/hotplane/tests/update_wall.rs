//! The update wall against hostile updates and their transport (issue 18): update payloads
//! carry content, never paths of the node; only datagrams addressed to the node itself are
//! updates, and acknowledgements leave from the node's address; refusal acknowledgements,
//! replays included, are rate-limited.

mod common;

use hotplane::inband::{ack_of, UpdateSender};
use hotplane::Config;
use hotplane_control::api::Request;
use hotplane_control::{AckStatus, Flags, Kind, Reason, Target, UpdateHeader, WorkerScope};
use hotplane_core::{classify, Layers, Meta, Position};
use hotplane_io::mem::MemReport;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
/// The node's address in these tests (the default of `control.update_addresses`).
const NODE: [u8; 4] = [10, 0, 0, 254];

fn key() -> [u8; 32] {
    hotplane_control::parse_key(KEY_HEX).unwrap()
}

/// One worker, one `mem` port without a generator: packets are injected, and everything sent
/// back out of the port is captured.
fn plane(control_extra: &str) -> hotplane::Engine {
    let cfg = Config::parse(
        &format!(
            r#"
[dataplane]
workers = 1
[[port]]
name = "p0"
kind = "mem"
sink = {{ capture = 4096 }}
[control]
{control_extra}
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

fn header(kind: Kind, seq: u64) -> UpdateHeader {
    UpdateHeader {
        kind,
        flags: Flags::default(),
        key_id: 1,
        seq,
        target: Target::Position(Position::Pre),
        worker: WorkerScope::All,
    }
}

fn datagrams_seen(plane: &hotplane::Engine) -> u64 {
    plane.observability().updates.datagrams.load(Ordering::Relaxed)
}

fn wait_datagrams(plane: &hotplane::Engine, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while datagrams_seen(plane) < n {
        assert!(Instant::now() < deadline, "control thread did not see {n} datagrams");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn inject(plane: &hotplane::Engine, frame: Vec<u8>) {
    let port = plane.mem("p0").unwrap();
    let mut frame = frame;
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(back) = port.inject(frame) {
        assert!(Instant::now() < deadline, "injection queue stays full");
        frame = back;
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Submit an update's datagrams over the control API; the acknowledgements as JSON.
fn api_update(
    plane: &hotplane::Engine,
    header: &UpdateHeader,
    payload: &[u8],
) -> Vec<serde_json::Value> {
    let fragments = UpdateSender::new(1, Some(key()), 47474)
        .datagrams(header, payload)
        .unwrap()
        .iter()
        .map(hex::encode)
        .collect();
    let r = plane.request(Request::Update { fragments });
    assert!(r.ok, "{r:?}");
    r.result.unwrap().as_array().unwrap().clone()
}

fn source_ip(frame: &[u8]) -> Option<IpAddr> {
    let mut m = Meta::default();
    classify(frame, &mut m);
    let l3 = m.l3_off as usize;
    (m.layers & Layers::IPV4 != 0).then(|| {
        let b = &frame[l3 + 12..l3 + 16];
        IpAddr::from([b[0], b[1], b[2], b[3]])
    })
}

/// A native-stage update naming a file of the node (`program`, `file`, `entries`, `include`)
/// is refused before anything is opened, and its acknowledgement quotes nothing of the file.
#[test]
fn update_payloads_naming_node_files_are_refused_without_reading_them() {
    let dir = std::env::temp_dir().join(format!("hotplane-wall-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "hotplane_secret_line_7f3a;\nsecond line\n").unwrap();
    let s = secret.display().to_string();
    let mut specs = vec![
        serde_json::json!({"stage": "ebpf", "file": s}),
        serde_json::json!({"stage": "ebpf", "file": "relative.o"}),
    ];
    if cfg!(feature = "p4") {
        specs.push(serde_json::json!({"stage": "p4", "program": s}));
        specs.push(serde_json::json!({"stage": "p4", "program": "basic.p4", "entries": s}));
        specs.push(serde_json::json!({"stage": "p4", "program": "basic.p4", "include": [dir]}));
    }
    if cfg!(feature = "lua") {
        specs.push(serde_json::json!({"stage": "lua", "file": s}));
    }
    let plane = plane("");
    for (i, spec) in specs.iter().enumerate() {
        let payload = serde_json::to_vec(spec).unwrap();
        let acks = api_update(&plane, &header(Kind::NativeStage, 10 + i as u64), &payload);
        assert_eq!(acks.len(), 1, "{spec}: {acks:?}");
        let ack = &acks[0];
        assert_eq!(ack["status"], "refused", "{spec}: {ack}");
        assert_eq!(ack["reason"], Reason::ApplyFailed.as_str(), "{spec}: {ack}");
        let message = ack["message"].as_str().unwrap();
        assert!(!message.contains("hotplane_secret"), "{spec}: the ack quotes the file: {message}");
        assert!(message.contains("names a file of the node"), "{spec}: {message}");
    }
    // In-band, the same refusal.
    let sender = UpdateSender::new(1, Some(key()), 47474);
    let payload = serde_json::to_vec(&specs[0]).unwrap();
    for f in sender.frames(&header(Kind::NativeStage, 100), &payload).unwrap() {
        inject(&plane, f);
    }
    wait_datagrams(&plane, specs.len() as u64 + 1);
    common::wait_sent(&plane, 1);
    std::thread::sleep(Duration::from_millis(50));
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    let acks: Vec<_> =
        r.captured.iter().filter_map(|f| ack_of(f, Some(&key()))).map(|a| a.unwrap()).collect();
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert_eq!(acks[0].reason, Some(Reason::ApplyFailed));
    assert!(!acks[0].message.contains("hotplane_secret"), "{}", acks[0].message);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A datagram to the update port of another host is traffic: forwarded untouched, never taken
/// as an update. One to the node's own address is an update, acknowledged from that address.
#[test]
fn only_datagrams_to_the_node_are_updates() {
    let plane = plane("");
    let mut transit = UpdateSender::new(1, Some(key()), 47474);
    transit.frame.dst_ip = IpAddr::from([10, 1, 0, 1]);
    let count = br#"{"stage":"count"}"#;
    let passing = transit.frames(&header(Kind::NativeStage, 1), count).unwrap().remove(0);
    inject(&plane, passing.clone());
    let to_node = UpdateSender::new(1, Some(key()), 47474);
    assert_eq!(to_node.frame.dst_ip, IpAddr::from(NODE));
    let update = to_node.frames(&header(Kind::NativeStage, 2), count).unwrap().remove(0);
    inject(&plane, update);
    wait_datagrams(&plane, 1);
    common::wait_sent(&plane, 1);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(datagrams_seen(&plane), 1, "the transit datagram was taken as an update");
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    assert!(r.captured.contains(&passing), "the transit datagram was not forwarded");
    let acks: Vec<_> = r
        .captured
        .iter()
        .filter_map(|f| ack_of(f, Some(&key())).map(|a| (a.unwrap(), source_ip(f))))
        .collect();
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert_eq!(acks[0].0.status, AckStatus::Applied);
    assert_eq!(acks[0].0.seq, 2);
    assert_eq!(acks[0].1, Some(IpAddr::from(NODE)), "the ack leaves from the node's address");
}

/// `control.update_addresses` names the node's addresses; others are traffic.
#[test]
fn configured_update_addresses_replace_the_default() {
    let plane = plane(r#"update_addresses = ["192.0.2.7"]"#);
    let count = br#"{"stage":"count"}"#;
    let default_node = UpdateSender::new(1, Some(key()), 47474);
    inject(&plane, default_node.frames(&header(Kind::NativeStage, 1), count).unwrap().remove(0));
    let mut configured = UpdateSender::new(1, Some(key()), 47474);
    configured.frame.dst_ip = IpAddr::from([192, 0, 2, 7]);
    inject(&plane, configured.frames(&header(Kind::NativeStage, 2), count).unwrap().remove(0));
    wait_datagrams(&plane, 1);
    common::wait_sent(&plane, 1);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(datagrams_seen(&plane), 1);
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    let sources: Vec<_> =
        r.captured.iter().filter(|f| ack_of(f, None).is_some()).map(|f| source_ip(f)).collect();
    assert_eq!(sources, vec![Some(IpAddr::from([192, 0, 2, 7]))]);
}

/// Replaying an authenticated datagram (or any refused one) cannot make the node send at will:
/// refusal acknowledgements share the token bucket (burst 100, 100 per second).
#[test]
fn replayed_datagrams_are_acknowledged_within_the_rate_limit() {
    let plane = plane("");
    let sender = UpdateSender::new(1, Some(key()), 47474);
    let good = sender.frames(&header(Kind::NativeStage, 5), br#"{"stage":"count"}"#).unwrap();
    inject(&plane, good[0].clone());
    wait_datagrams(&plane, 1);
    let acks_sent = || plane.worker_stats()[0].injected.get();
    let deadline = Instant::now() + Duration::from_secs(10);
    while acks_sent() < 1 {
        assert!(Instant::now() < deadline, "no ack for the update");
        std::thread::sleep(Duration::from_millis(1));
    }
    const REPLAYS: u64 = 1000;
    let started = Instant::now();
    for chunk in 0..REPLAYS / 100 {
        for _ in 0..100 {
            inject(&plane, good[0].clone());
        }
        wait_datagrams(&plane, 1 + (chunk + 1) * 100);
    }
    std::thread::sleep(Duration::from_millis(50));
    // Measured after the last acks went out: a token the bucket gave them counts in the time.
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(plane.observability().updates.refused(Reason::Replay), REPLAYS);
    let replay_acks = acks_sent() - 1;
    // The bucket can have refilled while the replays were processed, never more.
    let allowed = 100 + (100.0 * elapsed).ceil() as u64;
    eprintln!("{replay_acks} acks for {REPLAYS} replays in {elapsed:.3} s");
    assert!(
        replay_acks <= allowed,
        "{replay_acks} acks for {REPLAYS} replays in {elapsed:.3} s (at most {allowed})"
    );
    plane.stop();
}

/// An update sent to a group MAC address (broadcast) is applied, but never answered: an ack
/// would leave with a group address as its source.
#[test]
fn no_ack_leaves_from_a_group_mac_address() {
    let plane = plane("");
    let mut sender = UpdateSender::new(1, Some(key()), 47474);
    sender.frame.dst_mac = hotplane_core::wire::EthernetAddress::BROADCAST;
    let frame = sender.frames(&header(Kind::NativeStage, 3), br#"{"stage":"count"}"#).unwrap();
    inject(&plane, frame[0].clone());
    wait_datagrams(&plane, 1);
    std::thread::sleep(Duration::from_millis(50));
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    assert!(r.captured.iter().all(|f| ack_of(f, None).is_none()), "an ack was sent");
    assert!(r.captured.iter().all(|f| f[6] & 1 == 0), "a frame left from a group address");
}
