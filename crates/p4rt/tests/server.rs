//! The P4Runtime server against a running data plane, driven by a gRPC client over loopback as
//! a controller drives it: arbitration, a pipeline pushed and fetched, table entries written,
//! read and refused with the spec's codes, packets following the entries, and bad input that
//! leaves the running pipeline running.
#![cfg(feature = "server")]

mod common;

use common::*;
use hotplane_p4rt::proto::p4::v1::{
    self as v1, entity, field_match, forwarding_pipeline_config::Cookie,
    get_forwarding_pipeline_config_request::ResponseType,
    set_forwarding_pipeline_config_request::Action as SetAction, stream_message_request,
    stream_message_response, table_action, update, Entity, FieldMatch, ForwardingPipelineConfig,
    GetForwardingPipelineConfigRequest, ReadRequest, StreamMessageRequest, TableAction, TableEntry,
    Update, WriteRequest,
};
use hotplane_p4rt::{EngineDataplane, Server, ServerConfig};
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

#[tokio::test]
async fn a_controller_pushes_basic_p4_and_packets_follow_the_entries_it_writes() {
    let (plane, server) = start();
    let mut s = connect(&server, 1).await;
    assert_eq!(s.arbitration().await, (Code::Ok as i32, 1));

    let caps =
        s.client.capabilities(v1::CapabilitiesRequest::default()).await.unwrap().into_inner();
    assert_eq!(caps.p4runtime_api_version, "1.5.0");
    let get = |t: ResponseType| GetForwardingPipelineConfigRequest {
        device_id: DEVICE,
        response_type: t as i32,
    };
    let none = s.client.get_forwarding_pipeline_config(get(ResponseType::All)).await.unwrap_err();
    assert_eq!(none.code(), Code::FailedPrecondition);
    assert!(none.message().contains("No forwarding pipeline config"), "finsy's regex: {none:?}");

    s.set_pipeline(1, SetAction::VerifyAndCommit, basic_config(42)).await.unwrap();
    let got = s
        .client
        .get_forwarding_pipeline_config(get(ResponseType::CookieOnly))
        .await
        .unwrap()
        .into_inner();
    let got = got.config.unwrap();
    assert_eq!(got.cookie, Some(Cookie { cookie: 42 }));
    assert!(got.p4info.is_none() && got.p4_device_config.is_empty());
    let all =
        s.client.get_forwarding_pipeline_config(get(ResponseType::All)).await.unwrap().into_inner();
    assert_eq!(all.config.unwrap().p4_device_config, BASIC.as_bytes(), "returned as pushed");

    // No route yet: basic.p4's default action drops.
    send(&plane, [10, 0, 1, 1], 10).await;
    assert_eq!(sent_on_p1(&plane), 0);

    let mac = [8, 0, 0, 0, 1, 0x11];
    s.client
        .write(write(1, update::Type::Insert, vec![route([10, 0, 1, 0], 30, mac, 1)]))
        .await
        .unwrap();
    send(&plane, [10, 0, 1, 1], 10).await;
    send(&plane, [10, 0, 2, 1], 10).await;
    assert_eq!(sent_on_p1(&plane), 10, "only the routed prefix reaches p1");

    // Read back canonically (the port was sent padded to 2 bytes, 1 comes back as [1]).
    let routes = s.read_routes().await;
    assert_eq!(routes.len(), 1, "{routes:?}");
    let Some(table_action::Type::Action(a)) = routes[0].action.clone().unwrap().r#type else {
        panic!()
    };
    assert_eq!(a.params[1].value, vec![1]);
    let Some(field_match::FieldMatchType::Lpm(l)) = routes[0].r#match[0].field_match_type.clone()
    else {
        panic!()
    };
    assert_eq!((l.value, l.prefix_len), (vec![10, 0, 1, 0], 30));

    // A batch with a duplicate and a bad prefix: one error per update, in order.
    let batch = vec![
        route([10, 0, 3, 0], 24, mac, 2),
        route([10, 0, 1, 0], 30, mac, 1),
        route([10, 0, 4, 1], 24, mac, 1),
    ];
    let e = s.client.write(write(1, update::Type::Insert, batch)).await.unwrap_err();
    let codes: Vec<i32> = update_errors(&e).iter().map(|x| x.0).collect();
    assert_eq!(
        codes,
        vec![Code::Ok as i32, Code::AlreadyExists as i32, Code::InvalidArgument as i32]
    );
    let missing = s
        .client
        .write(write(1, update::Type::Delete, vec![route([10, 9, 0, 0], 16, mac, 1)]))
        .await;
    assert_eq!(update_errors(&missing.unwrap_err())[0].0, Code::NotFound as i32);
    assert_eq!(s.read_routes().await.len(), 2);

    // RECONCILE_AND_COMMIT keeps the table's entries; VERIFY_AND_COMMIT starts clean.
    s.set_pipeline(1, SetAction::ReconcileAndCommit, basic_config(43)).await.unwrap();
    assert_eq!(s.read_routes().await.len(), 2, "reconcile keeps the entries");
    send(&plane, [10, 0, 1, 2], 5).await;
    assert_eq!(sent_on_p1(&plane), 15);
    s.set_pipeline(1, SetAction::VerifyAndCommit, basic_config(44)).await.unwrap();
    assert!(s.read_routes().await.is_empty(), "verify-and-commit starts clean");
    drop(server);
    let p1 = plane.mem("p1").unwrap().clone();
    assert_eq!(plane.stop().panics, 0);
    let out = p1.report().captured;
    assert_eq!(out.len(), 15);
    assert!(out.iter().all(|f| f[0..6] == mac), "the entry's MAC");
}

#[tokio::test]
async fn backups_bad_programs_and_bad_requests_are_refused_and_the_pipeline_keeps_running() {
    let (plane, server) = start();
    let mut primary = connect(&server, 5).await;
    assert_eq!(primary.arbitration().await, (Code::Ok as i32, 5));
    let mut backup = connect(&server, 3).await;
    assert_eq!(backup.arbitration().await, (Code::AlreadyExists as i32, 5));
    // The same election id again is refused with BMv2's words, and that stream ends.
    let mut dup = connect(&server, 5).await;
    let refused = dup.inbound.message().await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("Election id already exists"));

    primary.set_pipeline(5, SetAction::VerifyAndCommit, basic_config(1)).await.unwrap();
    let mac = [8, 0, 0, 0, 1, 0x11];
    primary
        .client
        .write(write(5, update::Type::Insert, vec![route([10, 0, 1, 0], 24, mac, 1)]))
        .await
        .unwrap();

    // A backup may neither write nor push a pipeline.
    let e = backup
        .client
        .write(write(3, update::Type::Insert, vec![route([10, 0, 2, 0], 24, mac, 1)]))
        .await;
    assert_eq!(e.unwrap_err().code(), Code::PermissionDenied);
    let e = backup.set_pipeline(3, SetAction::VerifyAndCommit, basic_config(2)).await;
    assert_eq!(e.unwrap_err().code(), Code::PermissionDenied);

    // Nor may anyone get around the primary by naming a role nobody holds.
    let other_role = WriteRequest {
        role: "x".into(),
        election_id: None,
        ..write(0, update::Type::Insert, vec![route([10, 0, 2, 0], 24, mac, 1)])
    };
    let e = backup.client.write(other_role).await;
    assert_eq!(e.unwrap_err().code(), Code::PermissionDenied);
    // A read of too many filters is refused before anything is read.
    let filter = Entity { entity: Some(entity::Entity::TableEntry(TableEntry::default())) };
    let huge =
        ReadRequest { device_id: DEVICE, entities: vec![filter; 5000], ..Default::default() };
    assert_eq!(backup.client.read(huge).await.unwrap_err().code(), Code::ResourceExhausted);

    // A program that does not compile, and a P4Info of another program.
    let mut broken = basic_config(3);
    broken.p4_device_config = b"control C( { }".to_vec();
    let e = primary.set_pipeline(5, SetAction::VerifyAndCommit, broken).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("does not compile"), "{e:?}");
    let mut other = basic_config(3);
    other.p4info.as_mut().unwrap().tables[0].match_fields[0].bitwidth = 31;
    let e = primary.set_pipeline(5, SetAction::VerifyAndCommit, other).await.unwrap_err();
    assert!(e.message().contains("does not describe") && e.message().contains("31 bits"), "{e:?}");
    let mut bmv2 = basic_config(3);
    bmv2.p4_device_config =
        br#"{"__meta__": {"version": [2, 23]}, "program": "./basic.p4i"}"#.to_vec();
    let e = primary.set_pipeline(5, SetAction::VerifyAndCommit, bmv2).await.unwrap_err();
    assert!(e.message().contains("BMv2 JSON"), "{e:?}");

    // Malformed entries: an unknown table, a missing exact/lpm value, an action of no table.
    let mut unknown = route([10, 0, 5, 0], 24, mac, 1);
    unknown.table_id = 0x0200_0001;
    let mut short = route([10, 0, 6, 0], 24, mac, 1);
    if let Some(table_action::Type::Action(a)) = short.action.as_mut().unwrap().r#type.as_mut() {
        a.params.pop();
    }
    let mut wide = route([10, 0, 7, 0], 24, mac, 1);
    wide.r#match[0].field_match_type = Some(field_match::FieldMatchType::Lpm(field_match::Lpm {
        value: vec![1, 2, 3, 4, 5],
        prefix_len: 24,
    }));
    let e = primary
        .client
        .write(write(5, update::Type::Insert, vec![unknown, short, wide]))
        .await
        .unwrap_err();
    let errors = update_errors(&e);
    assert_eq!(errors[0].0, Code::NotFound as i32);
    assert_eq!(errors[1].0, Code::InvalidArgument as i32);
    assert!(errors[1].1.contains("missing"), "{errors:?}");
    assert_eq!(errors[2].0, Code::InvalidArgument as i32);
    let e = primary
        .client
        .write(WriteRequest { device_id: 9, ..write(5, update::Type::Insert, vec![]) })
        .await;
    assert_eq!(e.unwrap_err().code(), Code::NotFound);

    // Through all of it the committed pipeline kept routing.
    send(&plane, [10, 0, 1, 9], 20).await;
    assert_eq!(sent_on_p1(&plane), 20);

    // The primary leaves: the backup is told it is primary now, and may write.
    drop(primary);
    assert_eq!(backup.arbitration().await, (Code::Ok as i32, 3));
    backup
        .client
        .write(write(3, update::Type::Insert, vec![route([10, 0, 2, 0], 24, mac, 1)]))
        .await
        .unwrap();
    drop(server);
    assert_eq!(plane.stop().panics, 0);
}

const PACKET_IO: &str = include_str!("../../../tests/p4/packet_io.p4");

impl Session {
    /// The next packet-in on the stream (skipping arbitration updates).
    async fn packet_in(&mut self) -> v1::PacketIn {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(5), self.inbound.message())
                .await
                .expect("a packet-in within 5 s")
                .unwrap()
                .expect("the stream is open");
            match msg.update {
                Some(stream_message_response::Update::Packet(p)) => return p,
                Some(stream_message_response::Update::Arbitration(_)) => continue,
                other => panic!("not a packet-in: {other:?}"),
            }
        }
    }

    async fn packet_out(&mut self, metadata: Vec<(u32, Vec<u8>)>, payload: Vec<u8>) {
        let metadata = metadata
            .into_iter()
            .map(|(metadata_id, value)| v1::PacketMetadata { metadata_id, value })
            .collect();
        let p = v1::PacketOut { payload, metadata };
        let msg = StreamMessageRequest { update: Some(stream_message_request::Update::Packet(p)) };
        self.tx.send(msg).await.unwrap();
    }
}

#[tokio::test]
async fn packets_cross_the_cpu_port_with_their_controller_headers() {
    let plane = engine();
    assert!(plane.open_cpu_port(1).is_err(), "port 1 is a data plane port");
    let dp = EngineDataplane::new(&plane, "pre").unwrap().with_cpu_port(&plane, 255).unwrap();
    assert!(plane.open_cpu_port(300).is_err(), "one CPU port at a time");
    let cfg = ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        device_id: DEVICE,
        ..Default::default()
    };
    let server = Server::spawn(&cfg, Arc::new(dp)).unwrap();
    let mut s = connect(&server, 1).await;
    assert_eq!(s.arbitration().await, (Code::Ok as i32, 1));
    let ir = hotplane_p4::compile_source("packet_io.p4", PACKET_IO, &[]).unwrap();
    let p4info = hotplane_p4rt::schema::p4info_of(&ir).unwrap();
    assert_eq!(p4info.controller_packet_metadata.len(), 2);
    let config = ForwardingPipelineConfig {
        p4info: Some(p4info.clone()),
        p4_device_config: PACKET_IO.as_bytes().to_vec(),
        cookie: None,
    };
    s.set_pipeline(1, SetAction::VerifyAndCommit, config).await.unwrap();

    // IPv4 goes to the controller, with the port it came in on.
    let to_cpu = TableEntry {
        table_id: id_of(&p4info, "I.ether"),
        r#match: vec![FieldMatch {
            field_id: 1,
            field_match_type: Some(field_match::FieldMatchType::Exact(field_match::Exact {
                value: vec![0x08, 0x00],
            })),
        }],
        action: Some(TableAction {
            r#type: Some(table_action::Type::Action(v1::Action {
                action_id: id_of(&p4info, "I.to_cpu"),
                params: vec![],
            })),
        }),
        ..Default::default()
    };
    s.client.write(write(1, update::Type::Insert, vec![to_cpu])).await.unwrap();
    send(&plane, [10, 0, 1, 1], 3).await;
    for _ in 0..3 {
        let p = s.packet_in().await;
        assert_eq!(p.payload, frame([10, 0, 1, 1]), "the frame, without its packet_in header");
        let md: Vec<(u32, Vec<u8>)> =
            p.metadata.into_iter().map(|m| (m.metadata_id, m.value)).collect();
        assert_eq!(md, vec![(1, vec![0]), (2, vec![0])], "ingress port 0, canonical bytes");
    }

    // A packet-out leaves by the port its packet_out header names (1, sent padded).
    let payload = frame([10, 0, 9, 9]);
    s.packet_out(vec![(1, vec![0, 1])], payload.clone()).await;
    // A malformed one is refused on the stream, naming the problem, and nothing is sent.
    s.packet_out(vec![(7, vec![1])], payload.clone()).await;
    let err = loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), s.inbound.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Some(stream_message_response::Update::Error(e)) = msg.update {
            break e;
        }
    };
    assert_eq!(err.canonical_code, Code::InvalidArgument as i32);
    assert!(err.message.contains("metadata id 7"), "{err:?}");
    // A backup's packet-outs are dropped without a word, as BMv2 does.
    let mut backup = connect(&server, 0).await;
    backup.packet_out(vec![(1, vec![1])], payload.clone()).await;
    for _ in 0..500 {
        if server.stats().packet_outs_dropped.load(std::sync::atomic::Ordering::Relaxed) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for _ in 0..2000 {
        if sent_on_p1(&plane) >= 1 && plane.drained() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let stats = plane.stats().unwrap();
    assert_eq!(stats["cpu_port"]["from_controller"], 1, "{}", stats["cpu_port"]);
    assert_eq!(stats["cpu_port"]["to_controller"], 3, "{}", stats["cpu_port"]);
    let json = server.stats().json();
    assert_eq!((json["packet_outs"].as_u64(), json["packet_ins"].as_u64()), (Some(1), Some(3)));
    assert_eq!(json["packet_outs_dropped"], 2, "{json}");
    drop(server);
    let p1 = plane.mem("p1").unwrap().clone();
    assert_eq!(plane.stop().panics, 0);
    assert_eq!(p1.report().captured, vec![payload], "exactly the packet-out, header removed");
}

const REPLICATE: &str = include_str!("../../../tests/p4/replicate.p4");

fn pre_update(kind: update::Type, e: v1::packet_replication_engine_entry::Type) -> Update {
    Update {
        r#type: kind as i32,
        entity: Some(Entity {
            entity: Some(entity::Entity::PacketReplicationEngineEntry(
                v1::PacketReplicationEngineEntry { r#type: Some(e) },
            )),
        }),
    }
}

#[tokio::test]
async fn multicast_groups_and_clone_sessions_copy_packets_in_the_data_plane() {
    use v1::packet_replication_engine_entry::Type as Pre;
    let plane = engine_with_ports(3);
    let dp = EngineDataplane::new(&plane, "pre").unwrap();
    let cfg = ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        device_id: DEVICE,
        cpu_port: 0,
        ..Default::default()
    };
    let server = Server::spawn(&cfg, Arc::new(dp)).unwrap();
    let mut s = connect(&server, 1).await;
    assert_eq!(s.arbitration().await, (Code::Ok as i32, 1));
    let ir = hotplane_p4::compile_source("replicate.p4", REPLICATE, &[]).unwrap();
    let config = ForwardingPipelineConfig {
        p4info: Some(hotplane_p4rt::schema::p4info_of(&ir).unwrap()),
        p4_device_config: REPLICATE.as_bytes().to_vec(),
        cookie: None,
    };
    s.set_pipeline(1, SetAction::VerifyAndCommit, config.clone()).await.unwrap();

    // Group 1: ports 0, 1 and 2 (0 is dropped in egress for frames from p0). Port 2 in the
    // deprecated numeric form, which must read back as it was written.
    let mut group = hotplane_p4rt::pre::group(1, &[(0, 1), (1, 1), (2, 1)]);
    #[allow(deprecated)]
    {
        group.replicas[2].port_kind = Some(v1::replica::PortKind::EgressPort(2));
    }
    let session = v1::CloneSessionEntry {
        session_id: 5,
        replicas: hotplane_p4rt::pre::group(0, &[(2, 0)]).replicas,
        ..Default::default()
    };
    let req = WriteRequest {
        device_id: DEVICE,
        election_id: election(1),
        updates: vec![
            pre_update(update::Type::Insert, Pre::MulticastGroupEntry(group.clone())),
            pre_update(update::Type::Insert, Pre::CloneSessionEntry(session.clone())),
        ],
        ..Default::default()
    };
    s.client.write(req).await.unwrap();
    let filter = Entity {
        entity: Some(entity::Entity::PacketReplicationEngineEntry(
            v1::PacketReplicationEngineEntry {
                r#type: Some(Pre::MulticastGroupEntry(v1::MulticastGroupEntry::default())),
            },
        )),
    };
    let req = ReadRequest { device_id: DEVICE, entities: vec![filter], ..Default::default() };
    let mut stream = s.client.read(req).await.unwrap().into_inner();
    let read = stream.message().await.unwrap().unwrap().entities;
    assert_eq!(read.len(), 1);
    let Some(entity::Entity::PacketReplicationEngineEntry(e)) = read[0].entity.clone() else {
        panic!("{read:?}")
    };
    assert_eq!(e.r#type, Some(Pre::MulticastGroupEntry(group)), "read back as written");

    // Multicast: each IPv4 frame from p0 leaves by p1 and by p2.
    send(&plane, [10, 0, 0, 1], 10).await;
    // A clone: the frame leaves by p1, its clone by p2 (session 5).
    let p0 = plane.mem("p0").unwrap();
    for _ in 0..4 {
        let mut f = frame([10, 0, 0, 2]);
        f[13] = 0x01;
        p0.inject(f).unwrap();
    }
    for _ in 0..2000 {
        if plane.drained() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // A duplicate group is refused; a group of a port beyond v1model's 9 bits too.
    let bad = WriteRequest {
        device_id: DEVICE,
        election_id: election(1),
        updates: vec![
            pre_update(
                update::Type::Insert,
                Pre::MulticastGroupEntry(hotplane_p4rt::pre::group(1, &[])),
            ),
            pre_update(
                update::Type::Insert,
                Pre::MulticastGroupEntry(hotplane_p4rt::pre::group(2, &[(600, 1)])),
            ),
        ],
        ..Default::default()
    };
    let codes: Vec<i32> =
        update_errors(&s.client.write(bad).await.unwrap_err()).iter().map(|e| e.0).collect();
    assert_eq!(codes, vec![Code::AlreadyExists as i32, Code::InvalidArgument as i32]);
    // A new pipeline (VERIFY_AND_COMMIT) starts with an empty replication engine.
    s.set_pipeline(1, SetAction::VerifyAndCommit, config).await.unwrap();
    let filter =
        Entity { entity: Some(entity::Entity::PacketReplicationEngineEntry(Default::default())) };
    let req = ReadRequest { device_id: DEVICE, entities: vec![filter], ..Default::default() };
    let mut stream = s.client.read(req).await.unwrap().into_inner();
    assert!(stream.message().await.unwrap().unwrap().entities.is_empty());

    drop(server);
    let (p1, p2) = (plane.mem("p1").unwrap().clone(), plane.mem("p2").unwrap().clone());
    let stats = plane.stats().unwrap();
    assert_eq!(stats["workers"][0]["replicated"], 14, "{}", stats["workers"]);
    assert_eq!(plane.stop().panics, 0);
    let (out1, out2) = (p1.report().captured, p2.report().captured);
    assert_eq!(out1.len(), 14, "10 multicast copies and 4 originals");
    assert_eq!(out2.len(), 14, "10 multicast copies and 4 clones");
    assert_eq!(out2.iter().filter(|f| f[13] == 0x01).count(), 4);
}
