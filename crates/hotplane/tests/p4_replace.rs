//! Hitless P4 pipeline replacement under load: a running program is replaced forty times by
//! authenticated updates of kind P4 while two workers forward generated traffic. Nothing is
//! lost or duplicated; each packet is processed wholly by one program (its ingress and egress
//! both sign it with the same version); each flow sees versions only grow; and the routes and
//! the `@ref` counter the data plane writes carry over every swap, so the counter ends equal
//! to the packets sent.
#![cfg(feature = "p4")]

use hotplane::Config;
use hotplane_control::api::Request;
use hotplane_control::{Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_core::Position;
use hotplane_io::mem::MemReport;
use std::time::Duration;

const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const PROGRAM: &str = include_str!("../../../tests/p4/versioned.p4");
const PACKETS: u64 = 120_000;
const SWAPS: u16 = 40;

fn update(plane: &hotplane::Engine, seq: u64, payload: &[u8]) -> serde_json::Value {
    let header = UpdateHeader {
        kind: Kind::P4,
        flags: Flags::default(),
        key_id: 1,
        seq,
        target: Target::Position(Position::Pre),
        worker: WorkerScope::All,
    };
    let key = hotplane_control::parse_key(KEY_HEX).unwrap();
    let frags = hotplane_control::envelope::build(&header, payload, Some(&key), 1400).unwrap();
    let r = plane.request(Request::Update { fragments: frags.iter().map(hex::encode).collect() });
    assert!(r.ok, "{:?}", r.error);
    r.result.unwrap().as_array().unwrap().last().unwrap().clone()
}

fn versioned(v: u16) -> String {
    format!("#define VERSION {v}\n{PROGRAM}")
}

#[test]
fn replacing_the_pipeline_under_load_loses_nothing_and_carries_state() {
    let dir = std::env::temp_dir().join(format!("hotplane-p4-replace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("v1.p4"), versioned(1)).unwrap();
    std::fs::write(
        dir.join("entries.json"),
        r#"{"table_entries": [
            {"table": "Ing.routes", "match": {"hdr.ipv4.dstAddr": ["10.0.0.0", 8]},
             "action_name": "Ing.fwd", "action_params": {"port": 0}},
            {"table": "Ing.counts", "match": {"hdr.udp.dstPort": 5000},
             "action_name": "Ing.count", "action_params": {"n": 0}}
        ]}"#,
    )
    .unwrap();
    let toml = format!(
        r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 4, count = {PACKETS}, rate_pps = 20000 }}
sink = {{ record = {PACKETS} }}
[[control.keys]]
id = 1
key = "{KEY_HEX}"
[pipeline]
pre = {{ stage = "p4", program = "{}", entries = "{}" }}
"#,
        dir.join("v1.p4").display(),
        dir.join("entries.json").display()
    );
    let plane = hotplane::start(Config::parse(&toml, "test").unwrap()).unwrap();
    let processed = || plane.worker_stats().iter().map(|w| w.packets.get()).sum::<u64>();
    while processed() < 5_000 {
        std::thread::sleep(Duration::from_millis(1));
    }
    for v in 2..=SWAPS + 1 {
        let ack = update(&plane, v as u64, versioned(v).as_bytes());
        assert_eq!(ack["status"], "applied", "{ack}");
        let message = ack["message"].as_str().unwrap_or_default();
        assert!(message.contains("tables: 2 carried, 0 copied (0 entries), 0 new"), "{message}");
        std::thread::sleep(Duration::from_millis(25));
    }
    let swapped_at = processed();
    assert!(swapped_at < PACKETS, "traffic ended before the last swap: {swapped_at}");

    // A program that does not compile is refused with where and why; the last one keeps going.
    let ack = update(&plane, 1000, b"control Broken(");
    assert_eq!(ack["status"], "refused", "{ack}");
    assert!(ack["message"].as_str().unwrap().contains("p4-seq1000:1:"), "{ack}");

    assert!(plane.wait_drained(Duration::from_secs(60)), "did not drain");
    let counts = plane.request(Request::P4Dump { target: None, table: "counts".into() });
    assert!(counts.ok, "{:?}", counts.error);
    let counts = counts.result.unwrap();
    let handles = plane.mem_handles();
    let summary = plane.stop();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(summary.panics, 0);

    let r = MemReport::merge(&handles);
    assert_eq!(r.sent(), PACKETS);
    assert_eq!(r.received(), PACKETS, "lost {}", r.lost());
    assert_eq!(r.duplicates(), 0);
    let last = SWAPS + 1;
    let mut newest_per_flow = std::collections::BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for s in &r.samples {
        let (hi, lo) = (s.mark >> 8, s.mark & 0xff);
        assert_eq!(hi, lo, "flow {} seq {}: ingress of v{hi}, egress of v{lo}", s.flow, s.seq);
        assert!((1..=last).contains(&hi), "mark {:#x}", s.mark);
        let newest = newest_per_flow.entry(s.flow).or_insert(0);
        assert!(hi >= *newest, "flow {} went back from v{newest} to v{hi}", s.flow);
        *newest = hi;
        seen.insert(hi);
    }
    assert!(seen.len() > SWAPS as usize / 2, "few versions carried traffic: {seen:?}");
    assert!(seen.contains(&last), "the last program never ran");

    // The data plane's `@ref` counter survived every swap: it counted every packet.
    let entry = counts["table_entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e.get("match").is_some())
        .expect("the counts entry")
        .clone();
    assert_eq!(entry["action_params"]["n"].as_u64(), Some(PACKETS), "{entry}");
}

#[test]
fn a_replacement_with_bad_entries_is_refused_before_it_touches_shared_tables() {
    let dir = std::env::temp_dir().join(format!("hotplane-p4-entries-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("v1.p4"), versioned(1)).unwrap();
    let toml = format!(
        r#"
[[port]]
name = "p0"
kind = "mem"
gen = {{ count = 10 }}
[[control.keys]]
id = 1
key = "{KEY_HEX}"
[pipeline]
pre = {{ stage = "p4", program = "{}" }}
"#,
        dir.join("v1.p4").display()
    );
    let plane = hotplane::start(Config::parse(&toml, "test").unwrap()).unwrap();
    let routes = |plane: &hotplane::Engine| {
        let r = plane.request(Request::P4Dump { target: None, table: "routes".into() });
        assert!(r.ok, "{:?}", r.error);
        r.result.unwrap()["table_entries"].as_array().unwrap().len()
    };
    assert_eq!(routes(&plane), 1, "only the default action");
    // The first entry is good and would land in the shared `routes` table; the second is not.
    let bad = r#"{"table_entries": [
        {"table": "Ing.routes", "match": {"hdr.ipv4.dstAddr": ["10.2.0.0", 16]},
         "action_name": "Ing.fwd", "action_params": {"port": 0}},
        {"table": "Ing.routes", "match": {"hdr.ipv4.dstAddr": ["10.3.0.0", 16]},
         "action_name": "Ing.fwd", "action_params": {"port": 4096}}]}"#;
    let mut payload = versioned(2).into_bytes();
    payload.push(0);
    payload.extend_from_slice(bad.as_bytes());
    let ack = update(&plane, 2, &payload);
    assert_eq!(ack["status"], "refused", "{ack}");
    assert!(ack["message"].as_str().unwrap().contains("table_entries[1]"), "{ack}");
    assert_eq!(routes(&plane), 1, "the refused update wrote nothing");
    // The same with a good document is applied, entries and all.
    let good = bad.replace("4096", "1");
    let mut payload = versioned(2).into_bytes();
    payload.push(0);
    payload.extend_from_slice(good.as_bytes());
    let ack = update(&plane, 3, &payload);
    assert_eq!(ack["status"], "applied", "{ack}");
    assert_eq!(routes(&plane), 3);
    plane.stop();
    std::fs::remove_dir_all(&dir).ok();
}
