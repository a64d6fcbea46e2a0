//! Shared test vectors for the update envelope and acknowledgements. The Python SDK checks the
//! same file, which keeps the two implementations byte-compatible. Regenerate after a deliberate
//! format change with `HOTPLANE_WRITE_VECTORS=1 cargo test -p hotplane-control --test vectors`.

use hotplane_control::envelope::{build, parse};
use hotplane_control::{Ack, AckStatus, Flags, Kind, Reason, Target, UpdateHeader, WorkerScope};
use serde_json::{json, Value};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/envelope.json");

/// name, header, key, payload, largest fragment
type Case = (&'static str, UpdateHeader, Option<[u8; 32]>, Vec<u8>, usize);

fn cases() -> Vec<Case> {
    let key: [u8; 32] = core::array::from_fn(|i| i as u8);
    let h = |kind, flags, key_id, seq, target: &str, worker| UpdateHeader {
        kind,
        flags: Flags(flags),
        key_id,
        seq,
        target: target.parse::<Target>().unwrap(),
        worker,
    };
    vec![
        (
            "stage-at-pre",
            h(Kind::NativeStage, 0, 1, 1, "pre", WorkerScope::All),
            Some(key),
            br#"{"stage":"drop"}"#.to_vec(),
            1300,
        ),
        (
            "flow-function-fragmented",
            h(
                Kind::NativeStage,
                Flags::NO_JIT,
                7,
                0x0102_0304_0506_0708,
                "flow:proto=udp,src=10.0.0.0/8,dst=10.1.0.1,dport=5000",
                WorkerScope::Receiving,
            ),
            Some(key),
            br#"{"stage":"set-field","base":"payload","offset":16,"value":"0x000000aa"}"#.to_vec(),
            24,
        ),
        (
            "select-predefined-ipv6-flow",
            h(
                Kind::SelectPredefined,
                0,
                1,
                2,
                "flow:src=fd00::/16,sport=53,vlan=7",
                WorkerScope::One(3),
            ),
            Some(key),
            vec![0, 0, 0, 9],
            1300,
        ),
        (
            "remove-extern-no-ack",
            h(Kind::Remove, Flags::NO_ACK, 1, 3, "extern:lb", WorkerScope::All),
            Some(key),
            vec![],
            1300,
        ),
        (
            "unauthenticated-default-flow",
            h(Kind::Lua, Flags(0).with_opt_level(3).0, 0, 4, "flow:default", WorkerScope::All),
            None,
            b"return 1".to_vec(),
            1300,
        ),
    ]
}

fn acks() -> Vec<(&'static str, Ack, Option<[u8; 32]>)> {
    let key: [u8; 32] = core::array::from_fn(|i| 255 - i as u8);
    vec![
        (
            "applied",
            Ack {
                status: AckStatus::Applied,
                reason: None,
                key_id: 1,
                seq: 9,
                version: 4,
                received: 16,
                message: String::new(),
            },
            Some(key),
        ),
        (
            "refused-replay",
            Ack {
                status: AckStatus::Refused,
                reason: Some(Reason::Replay),
                key_id: 1,
                seq: 3,
                version: 0,
                received: 0,
                message: "sequence 3 is not above 9, the last applied for key 1".into(),
            },
            None,
        ),
    ]
}

fn generate() -> Value {
    let updates: Vec<Value> = cases()
        .into_iter()
        .map(|(name, h, key, payload, frag)| {
            let d = build(&h, &payload, key.as_ref(), frag).unwrap();
            json!({
                "name": name,
                "kind": h.kind.code(),
                "flags": h.flags.0,
                "key_id": h.key_id,
                "seq": h.seq.to_string(),
                "target": h.target.to_string(),
                "worker": h.worker.code(),
                "key": key.map(hex::encode),
                "payload": hex::encode(&payload),
                "max_fragment": frag,
                "datagrams": d.iter().map(hex::encode).collect::<Vec<_>>(),
            })
        })
        .collect();
    let acks: Vec<Value> = acks()
        .into_iter()
        .map(|(name, a, key)| {
            json!({
                "name": name,
                "status": a.status as u8,
                "reason": a.reason.map_or(0, |r| r.code()),
                "key_id": a.key_id,
                "seq": a.seq.to_string(),
                "version": a.version.to_string(),
                "received": a.received,
                "message": a.message,
                "key": key.map(hex::encode),
                "bytes": hex::encode(a.encode(key.as_ref())),
            })
        })
        .collect();
    json!({ "updates": updates, "acks": acks })
}

#[test]
fn vectors_match_the_shared_file() {
    let v = generate();
    if std::env::var_os("HOTPLANE_WRITE_VECTORS").is_some() {
        std::fs::write(PATH, serde_json::to_string_pretty(&v).unwrap() + "\n").unwrap();
    }
    let on_disk: Value =
        serde_json::from_str(&std::fs::read_to_string(PATH).expect("tests/vectors/envelope.json"))
            .unwrap();
    assert_eq!(
        on_disk, v,
        "the envelope format changed: regenerate the vectors if that was deliberate"
    );
    // And every datagram in the file parses back to its header.
    for (case, (_, h, _, _, _)) in on_disk["updates"].as_array().unwrap().iter().zip(cases()) {
        for d in case["datagrams"].as_array().unwrap() {
            let bytes = hex::decode(d.as_str().unwrap()).unwrap();
            assert_eq!(parse(&bytes).unwrap().header, h);
        }
    }
}
