//! Real ports between network namespaces (needs root; every namespace and veth is created and
//! removed by the test, and traffic stays inside them).
//!
//! Topology: [gen ns] g0 <-> d0 [dut ns] d1 <-> r0 [rx ns]. The traffic generator (a mem port
//! sending out of g0 and a sink behind r0) and the data plane under test (forwarding d0 <-> d1)
//! are separate `hotplane::Engine`s in this process; each port's socket lives in its namespace.

use hotplane::netlab::Lab;
use hotplane::Config;
use hotplane_io::mem::MemReport;
use std::time::{Duration, Instant};

struct Net {
    lab: Lab,
    gen: String,
    dut: String,
    rx: String,
}

fn net(label: &str, queues: u32) -> Net {
    let mut lab = Lab::new(label).expect("these tests need root");
    let gen = lab.netns("gen").unwrap();
    let dut = lab.netns("dut").unwrap();
    let rx = lab.netns("rx").unwrap();
    lab.veth(&gen, "g0", &dut, "d0", queues).unwrap();
    lab.veth(&dut, "d1", &rx, "r0", queues).unwrap();
    Net { lab, gen, dut, rx }
}

fn start(toml: &str) -> hotplane::Engine {
    hotplane::start(Config::parse(toml, "test").unwrap()).unwrap()
}

/// The data plane under test: forwards d0 <-> d1 with `kind` ports.
fn dut(n: &Net, kind: &str, workers: usize, extra: &str) -> hotplane::Engine {
    start(&format!(
        r#"
[dataplane]
workers = {workers}
[[port]]
name = "d0"
kind = "{kind}"
interface = "d0"
netns = "{dut}"
peer = "d1"
[[port]]
name = "d1"
kind = "{kind}"
interface = "d1"
netns = "{dut}"
peer = "d0"
{extra}
"#,
        dut = n.dut
    ))
}

/// The traffic generator: `gen` sends out of g0; whatever arrives on g0 or r0 goes to `sink`.
fn tester(n: &Net, gen: &str) -> hotplane::Engine {
    start(&format!(
        r#"
[dataplane]
workers = 1
[[port]]
name = "gen"
kind = "mem"
gen = {gen}
peer = "g0"
[[port]]
name = "g0"
kind = "afpacket"
interface = "g0"
netns = "{g}"
peer = "sink"
[[port]]
name = "r0"
kind = "afpacket"
interface = "r0"
netns = "{r}"
peer = "sink"
[[port]]
name = "sink"
kind = "mem"
sink = {{ capture = 64 }}
[control]
update_port = 0
"#,
        g = n.gen,
        r = n.rx
    ))
}

/// Wait until the sink has transmitted (measured) `n` packets.
fn wait_sink(t: &hotplane::Engine, n: u64, within: Duration) -> u64 {
    let sink = t.observability().ports.iter().find(|p| p.name == "sink").unwrap().queues.clone();
    let deadline = Instant::now() + within;
    loop {
        let got: u64 = sink.iter().map(|c| c.tx_packets.get()).sum();
        if got >= n || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn afpacket_forwards_between_namespaces() {
    let n = net("afp", 2);
    let d = dut(&n, "afpacket", 2, "");
    let t = tester(&n, "{ flows = 16, count = 20000, rate_pps = 100000 }");
    let got = wait_sink(&t, 20000, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(50));
    let handles = t.mem_handles();
    t.stop();
    let per_worker: Vec<u64> = d.worker_stats().iter().map(|w| w.packets.get()).collect();
    let ds = d.stop();
    let r = MemReport::merge(&handles);
    assert_eq!(got, 20000, "dut: {ds:?}");
    assert_eq!(r.sent(), 20000);
    assert_eq!(r.lost(), 0);
    assert_eq!(r.duplicates(), 0);
    assert!(
        per_worker.iter().all(|p| *p > 0),
        "fanout spreads flows over both workers: {per_worker:?}"
    );
    assert!(r.latency_ns(0.5) > 0);
    drop(n.lab);
}

const KEY_HEX: &str = "3333333333333333333333333333333333333333333333333333333333333333";

#[test]
fn inband_update_from_a_namespace_switches_the_stage_without_loss() {
    use hotplane::inband::{ack_of, UpdateSender};
    use hotplane_control::{AckStatus, Flags, Kind, Target, UpdateHeader, WorkerScope};
    let n = net("afp-upd", 1);
    // Flow 1 (sport 1024) is marked 1; the update makes it 7. Flow 2 has its own function.
    let d = dut(
        &n,
        "afpacket",
        1,
        &format!(
            r#"
[[pipeline.flows]]
match = "proto=udp,sport=1024"
stage = {{ stage = "set-field", base = "payload", offset = 16, value = 1, width = 2 }}
[[pipeline.flows]]
match = "proto=udp,sport=1025"
stage = {{ stage = "set-field", base = "payload", offset = 16, value = 2, width = 2 }}
[[control.keys]]
id = 1
key = "{KEY_HEX}"
"#
        ),
    );
    let t = tester(&n, "{ flows = 2, count = 40000, rate_pps = 40000 }");
    std::thread::sleep(Duration::from_millis(300));
    let key = hotplane_control::parse_key(KEY_HEX).unwrap();
    let header = UpdateHeader {
        kind: Kind::NativeStage,
        flags: Flags::default(),
        key_id: 1,
        seq: 1,
        target: Target::Flow("proto=udp,sport=1024".parse().unwrap()),
        worker: WorkerScope::All,
    };
    let frames = UpdateSender::new(1, Some(key), 47474)
        .frames(
            &header,
            br#"{"stage":"set-field","base":"payload","offset":16,"value":7,"width":2}"#,
        )
        .unwrap();
    for f in frames {
        t.mem("gen").unwrap().inject(f).unwrap();
    }
    wait_sink(&t, 40001, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(50));
    let handles = t.mem_handles();
    t.stop();
    let slots = d.registry().flows(0).unwrap();
    d.stop();
    let r = MemReport::merge(&handles);
    assert_eq!(r.lost(), 0, "no packet of either flow lost during the switch");
    let f1 = r.flow(0).unwrap();
    let f2 = r.flow(1).unwrap();
    assert_eq!(f2.marks.iter().map(|m| m.mark).collect::<Vec<_>>(), vec![2], "flow 2 untouched");
    let m7 = f1.marks.iter().find(|m| m.mark == 7).expect("flow 1 switched to the new function");
    let m1 = f1.marks.iter().find(|m| m.mark == 1).expect("flow 1 ran its first function");
    // By sequence number (stamps hold scheduled, not actual, send times): old function first.
    assert!(m1.first_seq < m7.first_seq, "{:?}", f1.marks);
    assert!(slots.iter().any(|e| e.selector == "proto=udp,sport=1024" && e.version > 1));
    // The acknowledgement came back through the veths to the tester.
    let ack =
        r.captured.iter().find_map(|f| ack_of(f, Some(&key))).expect("an acknowledgement").unwrap();
    assert_eq!(ack.status, AckStatus::Applied);
}

#[test]
fn a_vanishing_interface_is_reported_and_other_ports_keep_forwarding() {
    vanishing("afpacket");
}

#[test]
fn a_vanishing_afxdp_interface_is_reported_and_other_ports_keep_forwarding() {
    vanishing("afxdp");
}

fn vanishing(kind: &str) {
    let mut n = net(&format!("{kind}-gone"), 1);
    // A second pair on the DUT, e0 <-> e1, whose far end will be deleted mid-run.
    let side = n.lab.netns("side").unwrap();
    n.lab.veth(&n.dut, "e0", &side, "s0", 1).unwrap();
    n.lab.veth(&n.dut, "e1", &side, "s1", 1).unwrap();
    let d = dut(
        &n,
        kind,
        1,
        &format!(
            r#"
[[port]]
name = "e0"
kind = "{kind}"
interface = "e0"
netns = "{dut}"
peer = "e1"
[[port]]
name = "e1"
kind = "{kind}"
interface = "e1"
netns = "{dut}"
peer = "e0"
"#,
            dut = n.dut
        ),
    );
    let t = tester(&n, "{ flows = 4, count = 30000, rate_pps = 30000 }");
    std::thread::sleep(Duration::from_millis(300));
    n.lab.delete_link(&n.dut, "e1").unwrap();
    let got = wait_sink(&t, 30000, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300)); // housekeeping notices within 100 ms
    let handles = t.mem_handles();
    t.stop();
    let stats = d.observability().stats_json();
    let summary = d.stop();
    let r = MemReport::merge(&handles);
    assert_eq!(got, 30000);
    assert_eq!(r.lost(), 0, "the d0 <-> d1 path lost nothing while e1 vanished");
    assert_eq!(summary.panics, 0);
    let e1 = summary.ports.iter().find(|(n, _)| n == "e1").unwrap();
    assert_eq!(e1.1.link_down, 1, "the vanished interface is reported: {stats}");
    let d0 = summary.ports.iter().find(|(n, _)| n == "d0").unwrap();
    assert_eq!(d0.1.link_down, 0);
}

#[test]
fn jumbo_and_runt_frames_are_forwarded_or_counted() {
    jumbo("afpacket");
}

#[test]
fn jumbo_and_runt_frames_are_forwarded_or_counted_by_afxdp() {
    jumbo("afxdp");
}

fn jumbo(kind: &str) {
    let n = net(&format!("{kind}-jumbo"), 1);
    for (ns, ifs) in [(&n.gen, ["g0"].as_slice()), (&n.dut, &["d0", "d1"]), (&n.rx, &["r0"])] {
        for i in ifs {
            n.lab.exec(ns, &["ip", "link", "set", i, "mtu", "9000"]).unwrap();
        }
    }
    // A DUT with standard 2 KiB buffers counts jumbo frames; runts pass through.
    let d = dut(&n, kind, 1, "");
    let big_pool = "[dataplane.pool]\nbuffers = 1024\nbuffer_size = 10240\n";
    let t = start(&format!(
        r#"
[dataplane]
workers = 1
{big_pool}
[[port]]
name = "gen"
kind = "mem"
peer = "g0"
[[port]]
name = "g0"
kind = "afpacket"
interface = "g0"
netns = "{g}"
tx_frame_size = 16384
peer = "sink"
[[port]]
name = "r0"
kind = "afpacket"
interface = "r0"
netns = "{r}"
block_size = 65536
peer = "sink"
[[port]]
name = "sink"
kind = "mem"
sink = {{ capture = 4096 }}
[control]
update_port = 0
"#,
        g = n.gen,
        r = n.rx
    ));
    let gen = t.mem("gen").unwrap().clone();
    let mut sent_small = 0;
    for len in [14usize, 20, 42, 59, 60, 61] {
        let mut f = vec![0u8; len];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental EtherType
        gen.inject(f).unwrap();
        sent_small += 1;
    }
    for len in [1514usize, 3000, 9014] {
        let mut f = vec![0x5au8; len];
        f[0..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x88, 0xb5]);
        gen.inject(f).unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    let handles = t.mem_handles();
    t.stop();
    let summary = d.stop();
    let r = MemReport::merge(&handles);
    assert_eq!(summary.panics, 0);
    let lens: Vec<usize> = r.captured.iter().map(|f| f.len()).collect();
    // Every runt arrived (the kernel may pad short frames to the Ethernet minimum).
    assert_eq!(lens.iter().filter(|l| **l < 100).count(), sent_small, "{lens:?}");
    assert!(lens.contains(&1514), "a full-size frame is forwarded: {lens:?}");
    // The frames too large for the DUT's 2 KiB buffers are counted (by us, or by the kernel and
    // read from the socket's statistics), not forwarded.
    let d0 = summary.ports.iter().find(|(n, _)| n == "d0").unwrap();
    assert_eq!(d0.1.rx_dropped, 2, "{summary:?}");
    assert!(!lens.contains(&9014));
}

#[test]
fn afxdp_forwards_between_namespaces() {
    let n = net("xdp", 2);
    let d = dut(&n, "afxdp", 2, "");
    let t = tester(&n, "{ flows = 16, count = 20000, rate_pps = 100000 }");
    let got = wait_sink(&t, 20000, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(50));
    let handles = t.mem_handles();
    t.stop();
    let per_worker: Vec<u64> = d.worker_stats().iter().map(|w| w.packets.get()).collect();
    let ds = d.stop();
    let r = MemReport::merge(&handles);
    // On a busy 2-core machine the DUT's workers can be starved long enough for the kernel's
    // AF_XDP fill ring to run dry: a frame lost so is counted at the port (rx_dropped, from the
    // socket's statistics), never silently, and stays rare.
    let dropped: u64 = ds.ports.iter().map(|(_, s)| s.rx_dropped).sum();
    assert_eq!(got + dropped, 20000, "every frame forwarded or counted: {ds:?}");
    assert!(dropped <= 1000, "at most 5% dropped under load: {ds:?}");
    assert_eq!(r.lost(), dropped, "the sink misses exactly the frames counted as dropped");
    assert_eq!(r.duplicates(), 0);
    // On a veth a frame arrives on the queue the peer sent it from, and AF_XDP sockets see only
    // their own queue: the spread over workers is the sender's, unlike afpacket's fanout.
    assert_eq!(per_worker.iter().sum::<u64>(), got, "{per_worker:?}");
}
