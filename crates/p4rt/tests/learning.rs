//! A learning switch through the P4Runtime server. Its `digest` calls reach the primary
//! as `DigestList`s once configured, batched as the configuration asks, each source address
//! once until the list is acknowledged; reads return the configuration; a backup's
//! acknowledgements change nothing. Its learned entries age out: one not hit for its idle
//! timeout is reported in an `IdleTimeoutNotification`, one that is hit is not.
#![cfg(feature = "server")]

mod common;

use common::*;
use hotplane_p4rt::proto::p4::config::v1 as info;
use hotplane_p4rt::proto::p4::v1::{
    self as v1, digest_entry, entity, p4_data, set_forwarding_pipeline_config_request::Action,
    stream_message_request, stream_message_response, table_action, table_entry, update,
    DigestEntry, DigestListAck, Entity, FieldMatch, ForwardingPipelineConfig, ReadRequest,
    StreamMessageRequest, TableAction, TableEntry, Update, WriteRequest,
};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tonic::Code;

const LEARN: &str = include_str!("../../../tests/p4/learn.p4");

/// A frame from the MAC address ending in `last`, to one nobody has.
fn from(last: u8) -> Vec<u8> {
    frame_between([2, 0, 0, 0, 0, last], [2, 0, 0, 0, 0, 0xff], [10, 0, 0, 2])
}

fn digest_update(kind: update::Type, e: DigestEntry) -> WriteRequest {
    WriteRequest {
        device_id: DEVICE,
        election_id: election(1),
        updates: vec![Update {
            r#type: kind as i32,
            entity: Some(Entity { entity: Some(entity::Entity::DigestEntry(e)) }),
        }],
        ..Default::default()
    }
}

impl Session {
    /// The next digest list on the stream, if one comes within `wait`.
    async fn digest_list(&mut self, wait: Duration) -> Option<v1::DigestList> {
        loop {
            let msg = tokio::time::timeout(wait, self.inbound.message()).await.ok()?;
            match msg.unwrap().expect("the stream is open").update {
                Some(stream_message_response::Update::Digest(d)) => return Some(d),
                Some(stream_message_response::Update::Arbitration(_)) => continue,
                other => panic!("not a digest list: {other:?}"),
            }
        }
    }

    async fn ack(&mut self, digest_id: u32, list_id: u64) {
        let ack = DigestListAck { digest_id, list_id };
        let msg =
            StreamMessageRequest { update: Some(stream_message_request::Update::DigestAck(ack)) };
        self.tx.send(msg).await.unwrap();
    }
}

/// The (source address, port) pairs of a digest list of `learn_t`.
fn learned(list: &v1::DigestList) -> Vec<(Vec<u8>, Vec<u8>)> {
    list.data
        .iter()
        .map(|d| {
            let Some(p4_data::Data::Struct(s)) = &d.data else { panic!("not a struct: {d:?}") };
            let bits = |i: usize| match &s.members[i].data {
                Some(p4_data::Data::Bitstring(b)) => b.clone(),
                other => panic!("not a bit string: {other:?}"),
            };
            (bits(0), bits(1))
        })
        .collect()
}

#[tokio::test]
async fn a_learning_switch_tells_its_controller_each_new_address_once() {
    let (plane, server) = start();
    let mut s = connect(&server, 1).await;
    assert_eq!(s.arbitration().await, (Code::Ok as i32, 1));
    let ir = hotplane_p4::compile_source("learn.p4", LEARN, &[]).unwrap();
    let p4info = hotplane_p4rt::schema::p4info_of(&ir).unwrap();
    // The P4Info describes the digest as p4c does: a struct type named after `T`.
    assert_eq!(p4info.digests.len(), 1);
    let learn_t = id_of(&p4info, "learn_t");
    assert_eq!(learn_t >> 24, 0x17, "the digest prefix");
    let members: Vec<_> = p4info.type_info.as_ref().unwrap().structs["learn_t"]
        .members
        .iter()
        .map(|m| m.name.clone())
        .collect();
    assert_eq!(members, ["src", "port"]);
    let config = ForwardingPipelineConfig {
        p4info: Some(p4info.clone()),
        p4_device_config: LEARN.as_bytes().to_vec(),
        cookie: None,
    };
    s.set_pipeline(1, Action::VerifyAndCommit, config).await.unwrap();

    // Before it is configured, a digest goes nowhere (and is counted).
    inject(&plane, vec![from(9)]).await;
    assert!(s.digest_list(Duration::from_millis(100)).await.is_none());
    let stats = server.stats();
    for _ in 0..500 {
        if stats.digests_dropped.load(Ordering::Relaxed) >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(stats.digests_dropped.load(Ordering::Relaxed), 1);

    // Up to two digests a list, after at most 20 ms; a repeat waits for the acknowledgement.
    let cfg = digest_entry::Config {
        max_timeout_ns: 20_000_000,
        max_list_size: 2,
        ack_timeout_ns: 60_000_000_000,
    };
    let entry = DigestEntry { digest_id: learn_t, config: Some(cfg) };
    s.client.write(digest_update(update::Type::Insert, entry)).await.unwrap();
    let again = s.client.write(digest_update(update::Type::Insert, entry)).await;
    assert_eq!(update_errors(&again.unwrap_err())[0].0, Code::AlreadyExists as i32);
    let filter = Entity { entity: Some(entity::Entity::DigestEntry(DigestEntry::default())) };
    let req = ReadRequest { device_id: DEVICE, entities: vec![filter], ..Default::default() };
    let mut read = s.client.read(req).await.unwrap().into_inner();
    let got = read.message().await.unwrap().unwrap().entities;
    assert_eq!(got, vec![Entity { entity: Some(entity::Entity::DigestEntry(entry)) }]);

    inject(&plane, vec![from(1), from(1), from(1), from(2), from(3)]).await;
    let mut lists: Vec<v1::DigestList> = Vec::new();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let list = s.digest_list(Duration::from_secs(5)).await.expect("a digest list");
        assert_eq!(list.digest_id, learn_t);
        assert!(list.data.len() <= 2, "at most max_list_size: {list:?}");
        if let Some(last) = lists.last() {
            assert_eq!(list.list_id, last.list_id + 1, "list ids count up");
        }
        seen.extend(learned(&list));
        lists.push(list);
    }
    seen.sort();
    let port0 = vec![0u8];
    let expect: Vec<_> =
        [1u8, 2, 3].iter().map(|&i| (vec![2, 0, 0, 0, 0, i], port0.clone())).collect();
    assert_eq!(seen, expect, "each address once, canonical bytes");
    assert!(stats.digests_repeated.load(Ordering::Relaxed) >= 2);

    // Address 1 again: held back until its list is acknowledged, and a backup's ack is ignored.
    let list_of_1 = lists.iter().find(|l| learned(l).iter().any(|(m, _)| m[5] == 1)).unwrap();
    let mut backup = connect(&server, 0).await;
    backup.ack(learn_t, list_of_1.list_id).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    inject(&plane, vec![from(1)]).await;
    assert!(s.digest_list(Duration::from_millis(150)).await.is_none(), "not acknowledged yet");
    s.ack(learn_t, list_of_1.list_id).await;
    // The ack is not answered: inject until the server has taken it (a repeat before that is
    // dropped, not queued), for at most 5 s.
    let mut after = None;
    for _ in 0..25 {
        inject(&plane, vec![from(1)]).await;
        after = s.digest_list(Duration::from_millis(200)).await;
        if after.is_some() {
            break;
        }
    }
    let after = after.expect("sent again after the ack");
    assert_eq!(learned(&after), vec![(vec![2, 0, 0, 0, 0, 1], port0.clone())]);

    // Deleted: nothing more.
    let gone = DigestEntry { digest_id: learn_t, config: None };
    s.client.write(digest_update(update::Type::Delete, gone)).await.unwrap();
    inject(&plane, vec![from(7)]).await;
    assert!(s.digest_list(Duration::from_millis(100)).await.is_none());
    let json = server.stats().json();
    assert_eq!(json["digests"], 4, "{json}");
    assert_eq!(json["digest_lists"].as_u64(), Some(lists.len() as u64 + 1), "{json}");

    // The controller closes its side: the server ends the stream (nothing the digest pump
    // keeps holds it open), as p4runtime-shell's teardown waits for.
    let Session { tx, mut inbound, .. } = s;
    drop(tx);
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(Some(_)) = inbound.message().await {}
    });
    assert!(end.await.is_ok(), "the stream ended after the client closed its side");
    drop(server);
    assert_eq!(plane.stop().panics, 0);
}

#[test]
fn digests_that_do_not_fit_are_refused_at_compile_time() {
    let wide = LEARN.replace("bit<9> port;", "bit<9> port; bit<128> a; bit<128> b;").replace(
        "{ hdr.ethernet.src, sm.ingress_port }",
        "{ hdr.ethernet.src, sm.ingress_port, 128w0, 128w0 }",
    );
    let err = hotplane_p4::compile_source("wide.p4", &wide, &[]).unwrap_err().to_string();
    assert!(err.contains("at most 256"), "{err}");
}

/// An `smac` entry for the address ending in `last`, with `idle_timeout_ns`.
fn learned_entry(p4info: &info::P4Info, last: u8, idle_timeout_ns: i64) -> TableEntry {
    TableEntry {
        table_id: id_of(p4info, "I.smac"),
        r#match: vec![FieldMatch {
            field_id: 1,
            field_match_type: Some(v1::field_match::FieldMatchType::Exact(
                v1::field_match::Exact { value: vec![2, 0, 0, 0, 0, last] },
            )),
        }],
        action: Some(TableAction {
            r#type: Some(table_action::Type::Action(v1::Action {
                action_id: id_of(p4info, "I.known"),
                params: vec![],
            })),
        }),
        idle_timeout_ns,
        ..Default::default()
    }
}

impl Session {
    /// The entries of the next idle timeout notification, if one comes within `wait`.
    async fn idle_entries(&mut self, wait: Duration) -> Option<Vec<TableEntry>> {
        loop {
            let msg = tokio::time::timeout(wait, self.inbound.message()).await.ok()?;
            match msg.unwrap().expect("the stream is open").update {
                Some(stream_message_response::Update::IdleTimeoutNotification(n)) => {
                    assert!(n.timestamp > 0);
                    return Some(n.table_entry);
                }
                Some(stream_message_response::Update::Arbitration(_)) => continue,
                other => panic!("not an idle timeout notification: {other:?}"),
            }
        }
    }

    /// `time_since_last_hit` of the `smac` entry of address `last`.
    async fn idle_for(&mut self, p4info: &info::P4Info, last: u8) -> Duration {
        let mut filter = learned_entry(p4info, last, 0);
        filter.action = None;
        filter.time_since_last_hit = Some(table_entry::IdleTimeout { elapsed_ns: 0 });
        let filter = Entity { entity: Some(entity::Entity::TableEntry(filter)) };
        let req = ReadRequest { device_id: DEVICE, entities: vec![filter], ..Default::default() };
        let mut read = self.client.read(req).await.unwrap().into_inner();
        let got = read.message().await.unwrap().unwrap().entities;
        let Some(entity::Entity::TableEntry(t)) = &got[0].entity else { panic!("{got:?}") };
        Duration::from_nanos(t.time_since_last_hit.unwrap().elapsed_ns as u64)
    }
}

#[tokio::test]
async fn entries_not_hit_for_their_idle_timeout_are_reported_and_hit_ones_are_not() {
    let (plane, server) = start();
    let mut s = connect(&server, 1).await;
    assert_eq!(s.arbitration().await, (Code::Ok as i32, 1));
    let ir = hotplane_p4::compile_source("learn.p4", LEARN, &[]).unwrap();
    let p4info = hotplane_p4rt::schema::p4info_of(&ir).unwrap();
    let smac = p4info.tables.iter().find(|t| t.preamble.as_ref().unwrap().name == "I.smac");
    assert_eq!(
        smac.unwrap().idle_timeout_behavior,
        info::table::IdleTimeoutBehavior::NotifyControl as i32
    );
    let config = ForwardingPipelineConfig {
        p4info: Some(p4info.clone()),
        p4_device_config: LEARN.as_bytes().to_vec(),
        cookie: None,
    };
    s.set_pipeline(1, Action::VerifyAndCommit, config).await.unwrap();

    // A timeout on a table without support_timeout is refused, naming the property.
    let mut dmac = learned_entry(&p4info, 1, 1_000_000);
    dmac.table_id = id_of(&p4info, "I.dmac");
    dmac.action = Some(TableAction {
        r#type: Some(table_action::Type::Action(v1::Action {
            action_id: id_of(&p4info, "I.flood"),
            params: vec![],
        })),
    });
    let refused = s.client.write(write(1, update::Type::Insert, vec![dmac])).await.unwrap_err();
    let errors = update_errors(&refused);
    assert_eq!(errors[0].0, Code::InvalidArgument as i32);
    assert!(errors[0].1.contains("support_timeout"), "{errors:?}");

    // Address 1 ages out after 1 s (hits 20 ms apart must keep it fresh even on a loaded
    // machine); address 2 has no timeout.
    let timeout = Duration::from_millis(1000);
    let entries =
        vec![learned_entry(&p4info, 1, timeout.as_nanos() as i64), learned_entry(&p4info, 2, 0)];
    s.client.write(write(1, update::Type::Insert, entries)).await.unwrap();
    let idle = s.idle_entries(Duration::from_secs(5)).await.expect("a notification");
    assert_eq!(idle.len(), 1, "{idle:?}");
    assert_eq!(idle[0].r#match, learned_entry(&p4info, 1, 0).r#match);
    assert_eq!(idle[0].idle_timeout_ns, timeout.as_nanos() as i64);
    assert!(s.idle_for(&p4info, 1).await >= timeout, "never hit: idle since written");

    // Hit every 20 ms for a second: no notification meanwhile, and a short idle time.
    for _ in 0..50 {
        inject(&plane, vec![from(1)]).await;
        if let Some(n) = s.idle_entries(Duration::from_millis(20)).await {
            panic!("reported while hit: {n:?}");
        }
    }
    assert!(s.idle_for(&p4info, 1).await < timeout, "hit a moment ago");
    // Then left alone: reported again, once per timeout.
    let again = s.idle_entries(Duration::from_secs(5)).await.expect("reported again");
    assert_eq!(again.len(), 1);
    let stats = server.stats().json();
    assert!(stats["idle_notifications"].as_u64().unwrap() >= 2, "{stats}");

    // Deleted: never reported again.
    let gone = learned_entry(&p4info, 1, 0);
    s.client.write(write(1, update::Type::Delete, vec![gone])).await.unwrap();
    while s.idle_entries(Duration::from_millis(10)).await.is_some() {}
    assert!(s.idle_entries(Duration::from_millis(1500)).await.is_none());
    drop(server);
    assert_eq!(plane.stop().panics, 0);
}
