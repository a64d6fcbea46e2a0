//! Lua flow functions in a running data plane: the default function from the config, per-flow
//! replacements carried in-band and through the API, to all workers or only the receiving one;
//! compile errors, bad MACs and replays refused with the old function still running; runtime
//! errors and runaways contained; other flows never touched; no packet lost.
#![cfg(feature = "lua")]

use hotplane::bench::swap::flow_selector;
use hotplane::inband::{ack_of, UpdateSender};
use hotplane::Config;
use hotplane_control::api::Request;
use hotplane_control::{AckStatus, Flags, Kind, Reason, Target, UpdateHeader, WorkerScope};
use hotplane_io::mem::MemReport;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Flow 0 of the generator as the data plane lists it (the selector an update carries).
const SEL0: &str = "proto=udp,src=10.0.0.1,dst=10.1.0.1,sport=1024,dport=5000,vlan=0";
const KEY_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

fn key() -> [u8; 32] {
    hotplane_control::parse_key(KEY_HEX).unwrap()
}

/// A function writing `mark` into the generator's stamp (payload bytes 16..18).
fn mark_lua(mark: u16) -> String {
    format!("return function(pkt) local u = pkt:getUdp4Packet() if u then u.payload.be16[8] = {mark} end end")
}

fn plane(on_error: &str) -> hotplane::Engine {
    let toml = format!(
        r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 2, rate_pps = 100000 }}
sink = {{ record = 2000000, capture = 64 }}
[[control.keys]]
id = 1
key = "{KEY_HEX}"
[lua]
on_error = "{on_error}"
max_steps = 200000
[pipeline]
flow_default = {{ stage = "lua", source = "{}" }}
"#,
        mark_lua(0x0101)
    );
    hotplane::start(Config::parse(&toml, "test").unwrap()).unwrap()
}

fn header(seq: u64, target: Target, worker: WorkerScope) -> UpdateHeader {
    UpdateHeader { kind: Kind::Lua, flags: Flags::default(), key_id: 1, seq, target, worker }
}

fn flows(plane: &hotplane::Engine, worker: u16) -> Value {
    plane.request(Request::Flows { worker: Some(worker) }).result.unwrap()
}

/// Wait until `worker`'s flow table holds a function named `name` for `selector`, then let
/// traffic run through it.
fn wait_flow(plane: &hotplane::Engine, worker: u16, selector: &str, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let f = flows(plane, worker);
        let found =
            f.as_array().unwrap().iter().any(|e| {
                e["selector"] == selector && e["function"].as_str().unwrap().contains(name)
            });
        if found {
            std::thread::sleep(Duration::from_millis(100));
            return;
        }
        assert!(Instant::now() < deadline, "worker {worker} never ran {name} for {selector}: {f}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_refusals(plane: &hotplane::Engine, reason: Reason, n: u64) {
    let u = plane.observability().updates.clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while u.refused(reason) < n {
        assert!(Instant::now() < deadline, "refusals: {:?}", u.refused_by_reason());
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The marks flow `flow` carried, in order, each run of equal marks once.
fn mark_runs(r: &MemReport, flow: u16) -> Vec<u16> {
    let mut runs: Vec<u16> = Vec::new();
    for s in r.samples.iter().filter(|s| s.flow == flow) {
        if runs.last() != Some(&s.mark) {
            runs.push(s.mark);
        }
    }
    runs
}

fn lua_functions(plane: &hotplane::Engine) -> Vec<Value> {
    plane.request(Request::LuaFunctions {}).result.unwrap().as_array().unwrap().clone()
}

#[test]
fn per_flow_updates_in_band_leave_other_flows_alone() {
    let plane = plane("drop");
    let p0 = plane.mem("p0").unwrap().clone();
    let sender = UpdateSender::new(1, Some(key()), 47474);
    let flow0 = flow_selector(0);
    let sel0 = SEL0;
    std::thread::sleep(Duration::from_millis(100));

    // 1. Flow 0 gets its own function, in-band (the update arrives on worker 0's queue).
    let h = header(20, Target::Flow(flow0), WorkerScope::All);
    for f in sender.frames(&h, mark_lua(0x0202).as_bytes()).unwrap() {
        p0.inject_to(0, f).unwrap();
    }
    wait_flow(&plane, 0, sel0, "lua-seq20");
    wait_flow(&plane, 1, sel0, "lua-seq20");

    // 2. Lua that does not compile: refused with Lua's message; flow 0 keeps 0x0202.
    let h = header(21, Target::Flow(flow0), WorkerScope::All);
    for f in sender.frames(&h, b"return function(pkt) pkt:drop( end").unwrap() {
        p0.inject_to(0, f).unwrap();
    }
    wait_refusals(&plane, Reason::Rejected, 1);

    // 3. A forged MAC and a replayed sequence number: refused, nothing changes.
    let forger = UpdateSender::new(1, Some([7; 32]), 47474);
    let h = header(22, Target::Flow(flow0), WorkerScope::All);
    for f in forger.frames(&h, mark_lua(0x0666).as_bytes()).unwrap() {
        p0.inject_to(0, f).unwrap();
    }
    wait_refusals(&plane, Reason::BadMac, 1);
    let h = header(20, Target::Flow(flow0), WorkerScope::All);
    for f in sender.frames(&h, mark_lua(0x0777).as_bytes()).unwrap() {
        p0.inject_to(0, f).unwrap();
    }
    wait_refusals(&plane, Reason::Replay, 1);

    // 4. The default, replaced on the receiving worker only (worker 1 gets this one).
    let h = header(23, Target::FlowDefault, WorkerScope::Receiving);
    for f in sender.frames(&h, mark_lua(0x0303).as_bytes()).unwrap() {
        p0.inject_to(1, f).unwrap();
    }
    wait_flow(&plane, 1, "default", "lua-seq23");
    let w0 = flows(&plane, 0).to_string();
    assert!(!w0.contains("lua-seq23"), "worker 0 kept its default: {w0}");
    std::thread::sleep(Duration::from_millis(200));

    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    assert_eq!(r.lost(), 0, "packets were lost");
    assert_eq!(r.duplicates(), 0);
    assert_eq!(mark_runs(&r, 0), vec![0x0101, 0x0202], "flow 0");
    // Flow 1 (on worker 1) ran the default until the receiving-worker update replaced it, and
    // never anything meant for flow 0.
    assert_eq!(mark_runs(&r, 1), vec![0x0101, 0x0303], "flow 1");
    let acks: Vec<_> =
        r.captured.iter().filter_map(|f| ack_of(f, Some(&key()))).filter_map(|a| a.ok()).collect();
    let by_seq = |s: u64| acks.iter().filter(|a| a.seq == s).collect::<Vec<_>>();
    assert_eq!(by_seq(20)[0].status, AckStatus::Applied);
    let refused = by_seq(21)[0];
    assert_eq!((refused.status, refused.reason), (AckStatus::Refused, Some(Reason::Rejected)));
    assert!(
        refused.message.contains("syntax error") && refused.message.contains("lua-seq21:1:"),
        "{}",
        refused.message
    );
    assert_eq!(by_seq(23)[0].status, AckStatus::Applied);
}

#[test]
fn runtime_errors_and_runaways_are_contained() {
    let plane = plane("pass");
    let flow0 = flow_selector(0);
    let target = Target::Flow(flow0);
    let submit = |seq: u64, src: &str| {
        let frags = hotplane_control::envelope::build(
            &header(seq, target.clone(), WorkerScope::All),
            src.as_bytes(),
            Some(&key()),
            60_000,
        )
        .unwrap();
        let r =
            plane.request(Request::Update { fragments: frags.iter().map(hex::encode).collect() });
        r.result.unwrap().as_array().unwrap().last().unwrap().clone()
    };
    std::thread::sleep(Duration::from_millis(100));
    let ack = submit(30, &mark_lua(0x0202));
    assert_eq!(ack["status"], "applied", "{ack}");
    std::thread::sleep(Duration::from_millis(100));

    // A function that fails on every packet: packets pass (on_error = "pass") with the mark
    // they had, and the errors are counted against the function and where it is installed.
    let ack = submit(31, "return function(pkt) local x = nil; x.y = 1 end");
    assert_eq!(ack["status"], "applied", "{ack}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let f = loop {
        let f = lua_functions(&plane);
        let mine = f.iter().find(|e| e["name"] == "lua-seq31").cloned();
        if let Some(m) = mine.filter(|m| m["errors"].as_u64().unwrap_or(0) > 100) {
            break m;
        }
        assert!(Instant::now() < deadline, "{f:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(f["target"], format!("flow:{SEL0}"));
    assert!(f["last_error"].as_str().unwrap().contains("attempt to index"), "{f}");

    // A runaway: stopped by the step budget, condemned, and the flow falls back to the
    // function before it (the failing one, which passes packets untouched).
    let ack = submit(32, "return function(pkt) while true do end end");
    assert_eq!(ack["status"], "applied", "{ack}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let f = loop {
        let f = lua_functions(&plane);
        let mine = f.iter().find(|e| e["name"] == "lua-seq32").cloned();
        if let Some(m) = mine.filter(|m| m["condemned"] == true) {
            break m;
        }
        assert!(Instant::now() < deadline, "{f:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(f["runaways"].as_u64().unwrap() >= 1, "{f}");
    // Function 31 unless the watchdog (wall-clock) condemned it too, on a loaded machine:
    // then the newest predecessor that did not run away.
    let all = lua_functions(&plane);
    let running = f["running"].as_str().expect("a predecessor runs");
    let ran_away = |name: &str| all.iter().any(|e| e["name"] == name && e["condemned"] == true);
    assert!(running != "lua-seq32" && !ran_away(running), "{running}: {all:?}");
    if !ran_away("lua-seq31") {
        assert_eq!(running, "lua-seq31");
    }
    // Back to a good function; the plane never stopped.
    let ack = submit(33, &mark_lua(0x0404));
    assert_eq!(ack["status"], "applied", "{ack}");
    std::thread::sleep(Duration::from_millis(200));
    let stats = plane.request(Request::Stats {}).result.unwrap();
    assert!(stats["lua"]["runaways"].as_u64().unwrap() >= 1, "{stats}");
    assert!(stats["lua"]["states_replaced"].as_u64().unwrap() >= 1, "{stats}");

    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    assert_eq!(r.lost(), 0, "on_error = pass: nothing dropped");
    let runs = mark_runs(&r, 0);
    assert_eq!(runs.first(), Some(&0x0101));
    assert_eq!(runs.last(), Some(&0x0404), "{runs:?}");
    assert_eq!(mark_runs(&r, 1), vec![0x0101], "flow 1 never saw any of it");
}
