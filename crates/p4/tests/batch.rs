//! The data plane's path (`V1Switch::process_batch`: whole packets one after another in one
//! native frame) must leave every packet as the owned path (`V1Switch::process`) does, one
//! packet at a time, including a multicast or a drop in the middle of a batch.

mod common;

use hotplane_core::{Batch, Packet, Pool, PoolConfig, Qsbr};
use hotplane_p4::exec::{Engine, Objects, Pipeline};
use hotplane_p4::v1model::{Output, Replication, V1Switch};
use std::sync::Arc;

const PROGRAM: &str = r#"
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
header tag_t { bit<8> verdict; bit<8> value; }
struct headers { eth_t eth; tag_t tag; }
struct meta_t { bit<8> seen; }
parser P(packet_in pk, out headers h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(h.eth);
        transition select(h.eth.kind) { 0x88b5: tag; default: accept; }
    }
    state tag { pk.extract(h.tag); transition accept; }
}
control VC(inout headers h, inout meta_t m) { apply { } }
control I(inout headers h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        // Metadata and validity must start afresh for each packet: `seen` counts up only
        // if the previous packet's value leaked through.
        m.seen = m.seen + 1;
        sm.egress_spec = (bit<9>)sm.ingress_port + 1;
        if (h.tag.isValid()) {
            h.tag.value = h.tag.value + m.seen + (bit<8>)sm.packet_length;
            if (h.tag.verdict == 1) { sm.mcast_grp = 7; }
            if (h.tag.verdict == 2) { mark_to_drop(sm); }
        } else {
            h.eth.src = (bit<48>)sm.ingress_port;
        }
    }
}
control E(inout headers h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers h, inout meta_t m) { apply { } }
control D(packet_out pk, in headers h) { apply { pk.emit(h.eth); pk.emit(h.tag); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"#;

fn frame(kind: u16, tag: Option<(u8, u8)>, payload: usize) -> Vec<u8> {
    let mut f = vec![0xaa; 6];
    f.extend([0xbb; 6]);
    f.extend(kind.to_be_bytes());
    if let Some((verdict, value)) = tag {
        f.extend([verdict, value]);
    }
    f.extend((0..payload).map(|i| i as u8));
    f
}

/// What leaves for each packet, by the path under test.
fn batched(
    sw: &mut V1Switch,
    pool: &Pool,
    qsbr: &Qsbr,
    pre: &Replication,
    packets: &[(u32, Vec<u8>)],
) -> Vec<Vec<Output>> {
    let reader = qsbr.register("batch");
    let guard = reader.guard();
    let mut batch = Batch::new(packets.len());
    for (port, data) in packets {
        let mut p: Packet = pool.alloc().expect("buffer");
        p.set_frame(data).expect("fits");
        p.meta.in_port = *port as u16;
        batch.push(p).expect("room");
    }
    common::run_batch(sw, &mut batch, pre, &guard, 5_000)
}

fn owned(
    sw: &mut V1Switch,
    qsbr: &Qsbr,
    pre: &Replication,
    packets: &[(u32, Vec<u8>)],
) -> Vec<Vec<Output>> {
    let reader = qsbr.register("owned");
    let guard = reader.guard();
    packets
        .iter()
        .map(|(port, data)| {
            let mut out = Vec::new();
            sw.process(data, *port, pre, &guard, 5_000, &mut out);
            out
        })
        .collect()
}

#[test]
fn a_batch_leaves_each_packet_as_the_owned_path_does() {
    let qsbr = Qsbr::new();
    let ir = hotplane_p4::compile_source("batch.p4", PROGRAM, &[]).expect("compiles");
    let pool = Pool::new(PoolConfig { buffers: 64, ..Default::default() }).expect("pool");
    let mut pre = Replication::default();
    pre.groups.insert(7, vec![(1, 4), (2, 5)]);
    // Unicast, multicast, drop and untagged packets, mixed, so that the batch's native run
    // stops for the multicast and starts again after it.
    let packets: Vec<(u32, Vec<u8>)> = vec![
        (0, frame(0x88b5, Some((0, 10)), 20)),
        (1, frame(0x88b5, Some((1, 20)), 30)),
        (2, frame(0x88b5, Some((2, 30)), 0)),
        (3, frame(0x0800, None, 40)),
        (1, frame(0x88b5, Some((0, 40)), 5)),
        (0, frame(0x88b5, Some((1, 50)), 1)),
        (2, frame(0x88b5, Some((0, 60)), 2)),
        // Too short for the tag: the parser rejects, ingress still runs.
        (1, frame(0x88b5, None, 0)),
    ];
    for engine in [Engine::Native, Engine::Closures] {
        let objects = Objects::new(&ir, &qsbr).expect("objects");
        let p = Arc::new(Pipeline::with_engine(ir.clone(), objects, engine).expect("pipeline"));
        assert_eq!(p.runs_whole_packets(), engine == Engine::Native);
        let want = owned(&mut V1Switch::new(Arc::clone(&p)), &qsbr, &pre, &packets);
        let mut sw = V1Switch::new(Arc::clone(&p));
        // Twice through one switch: the second batch must not see the first's state.
        for round in 0..2 {
            let got = batched(&mut sw, &pool, &qsbr, &pre, &packets);
            assert_eq!(got, want, "{engine:?}, round {round}");
        }
        // The expected outcomes, so that both paths cannot be wrong alike.
        let ports: Vec<Vec<u32>> =
            want.iter().map(|o| o.iter().map(|o| o.port).collect()).collect();
        assert_eq!(
            ports,
            [vec![1], vec![4, 5], vec![], vec![4], vec![2], vec![4, 5], vec![3], vec![2]]
        );
        // seen = 1 (fresh metadata), value + 1 + packet length.
        assert_eq!(want[0][0].data[15], 10 + 1 + 36);
        assert_eq!(want[3][0].data[6..12], [0, 0, 0, 0, 0, 3]);
        assert_eq!(sw.stats.dropped, 2);
    }
}

/// A multicast group larger than the passes one packet may make delivers every copy: copies
/// are not passes. Beyond the copy budget they are dropped and counted.
#[test]
fn large_multicast_groups_deliver_every_copy_up_to_the_budget() {
    use hotplane_p4::v1model::{MAX_MULTICAST_COPIES, MAX_PASSES};
    let qsbr = Qsbr::new();
    let ir = hotplane_p4::compile_source("batch.p4", PROGRAM, &[]).expect("compiles");
    let p = Arc::new(Pipeline::new(ir, &qsbr).expect("pipeline"));
    let mut pre = Replication::default();
    let big = MAX_PASSES as u32 + 36;
    pre.groups.insert(7, (0..big).map(|i| (1, 10 + i)).collect());
    let packets = vec![(1, frame(0x88b5, Some((1, 20)), 30))];
    let mut sw = V1Switch::new(Arc::clone(&p));
    let out = owned(&mut sw, &qsbr, &pre, &packets);
    assert_eq!(out[0].len(), big as usize, "every replica of a {big}-port group");
    assert_eq!(sw.stats.lost_copies, 0);
    let huge = MAX_MULTICAST_COPIES as u32 + 5;
    pre.groups.insert(7, (0..huge).map(|i| (1, 10 + i)).collect());
    let out = owned(&mut sw, &qsbr, &pre, &packets);
    assert_eq!(out[0].len(), MAX_MULTICAST_COPIES);
    assert_eq!(sw.stats.lost_copies, 5);
}
