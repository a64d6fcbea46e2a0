//! `hotplane trace` on the tutorials' basic program: a packet to a routed address is followed
//! through its table hit, the action and the fields it changed; a packet to an address no
//! entry covers is explained as a miss that ran the default action, `drop`. Packets the
//! selector does not match are not followed, and a trace stops at its count.
#![cfg(feature = "p4")]

use hotplane::Config;
use hotplane_control::api::Request;
use serde_json::Value;
use std::time::{Duration, Instant};

fn frame(dst: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    f.extend([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1]);
    f.extend(dst);
    f.extend([0x04, 0x00, 0x13, 0x88, 0, 8, 0, 0]);
    f.resize(60, 0);
    f
}

fn records(plane: &hotplane::Engine, want: usize) -> Vec<Value> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < want {
        assert!(Instant::now() < deadline, "{} of {want} records: {got:#?}", got.len());
        let r = plane.request(Request::TraceRead { max: None });
        let r = r.into_result().expect("trace-read");
        got.extend(r["records"].as_array().cloned().unwrap_or_default());
        std::thread::sleep(Duration::from_millis(5));
    }
    got
}

fn inject(plane: &hotplane::Engine, f: Vec<u8>) {
    let p0 = plane.mem("p0").unwrap();
    let mut f = f;
    while let Err(back) = p0.inject(f) {
        f = back;
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn trace_explains_a_routed_and_a_dropped_packet_in_the_basic_program() {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let toml = format!(
        "[dataplane]\nworkers = 1\n[[port]]\nname = \"p0\"\nkind = \"mem\"\n\
         [[port]]\nname = \"p1\"\nkind = \"mem\"\n[[port]]\nname = \"p2\"\nkind = \"mem\"\n\
         [pipeline]\npre = {{ stage = \"p4\", program = \"{repo}/tests/p4/basic.p4\", \
         entries = \"{repo}/tests/p4/basic.json\" }}\n"
    );
    let plane = hotplane::start(Config::parse(&toml, "test").unwrap()).unwrap();
    let start = |selector: Option<&str>, count| {
        let r = plane.request(Request::TraceStart {
            selector: selector.map(str::to_string),
            count,
            every: 1,
        });
        r.into_result().expect("trace-start");
    };
    start(None, 2);
    inject(&plane, frame([10, 0, 1, 5]));
    inject(&plane, frame([10, 0, 9, 9]));
    let got = records(&plane, 2);
    let (routed, dropped) = (&got[0], &got[1]);
    assert_eq!(routed["flow"], "udp 10.0.0.1:1024 -> 10.0.1.5:5000");
    let stage = &routed["stages"][0];
    assert_eq!(
        (&stage["position"], &stage["verdict"], &stage["out_port"]),
        (&"pre".into(), &"pass".into(), &1.into())
    );
    assert_eq!(
        stage["notes"],
        serde_json::json!(["table MyIngress.ipv4_lpm: hit -> MyIngress.ipv4_forward"])
    );
    let changed: Vec<&str> =
        stage["changed"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(changed.contains(&"ipv4.ttl: 64 -> 63"), "{changed:?}");
    assert!(changed.contains(&"eth.dst: 02:00:00:00:00:02 -> 08:00:00:00:01:11"), "{changed:?}");
    assert_eq!((&routed["verdict"], &routed["out_port"]), (&"pass".into(), &1.into()));
    let stage = &dropped["stages"][0];
    assert_eq!(stage["verdict"], "drop");
    assert_eq!(
        stage["notes"],
        serde_json::json!(["table MyIngress.ipv4_lpm: miss (default action) -> MyIngress.drop"])
    );
    assert_eq!(dropped["verdict"], "drop");

    // Only what the selector matches, and no more than asked for.
    start(Some("dst=10.0.9.9"), 1);
    for dst in [[10, 0, 1, 5], [10, 0, 2, 7], [10, 0, 9, 9], [10, 0, 9, 9]] {
        inject(&plane, frame(dst));
    }
    let got = records(&plane, 1);
    assert_eq!(got[0]["flow"], "udp 10.0.0.1:1024 -> 10.0.9.9:5000");
    std::thread::sleep(Duration::from_millis(50));
    let more = plane.request(Request::TraceRead { max: None }).into_result().unwrap();
    assert_eq!(
        (more["records"].as_array().map(Vec::len), &more["remaining"]),
        (Some(0), &0.into())
    );
    let bad = plane.request(Request::TraceStart {
        selector: Some("colour=red".into()),
        count: 1,
        every: 1,
    });
    assert!(bad.into_result().unwrap_err().to_string().contains("colour"));
    let s = plane.stop();
    assert_eq!(s.panics, 0);
}
