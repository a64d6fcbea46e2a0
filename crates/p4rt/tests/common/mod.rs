//! What the server tests share: an engine with memory ports, frames, and a controller's
//! session (a client and its stream channel).
#![allow(dead_code)]

use hotplane_core::wire::{EthernetAddress, UdpFrame};
use hotplane_engine::{Config, Engine};
use hotplane_p4rt::proto::google::rpc;
use hotplane_p4rt::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use hotplane_p4rt::proto::p4::v1::{
    self as v1, entity, field_match, forwarding_pipeline_config::Cookie,
    set_forwarding_pipeline_config_request::Action as SetAction, stream_message_request,
    stream_message_response, table_action, update, Entity, FieldMatch, ForwardingPipelineConfig,
    MasterArbitrationUpdate, ReadRequest, SetForwardingPipelineConfigRequest, StreamMessageRequest,
    TableAction, TableEntry, Uint128, Update, WriteRequest,
};
use hotplane_p4rt::{EngineDataplane, Server, ServerConfig};
use prost::Message;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::Code;

pub const BASIC: &str = include_str!("../../../../tests/p4/basic.p4");
pub const BASIC_P4INFO: &str = include_str!("../../../../tests/p4/basic.p4info.txt");
pub const DEVICE: u64 = 1;
pub const IPV4_LPM: u32 = 37375156;
pub const IPV4_FORWARD: u32 = 28792405;

pub fn engine() -> Engine {
    engine_with_ports(2)
}

/// An engine with memory ports p0..p`n-1`; all but p0 capture what they send.
pub fn engine_with_ports(n: usize) -> Engine {
    let mut toml =
        "[dataplane]\nworkers = 1\n[[port]]\nname = \"p0\"\nkind = \"mem\"\n".to_string();
    for i in 1..n {
        toml +=
            &format!("[[port]]\nname = \"p{i}\"\nkind = \"mem\"\nsink = {{ capture = 4096 }}\n");
    }
    let cfg = Config::parse(&toml, "p4rt-test").unwrap();
    Engine::builder().kind(hotplane_p4::kind::make).start(cfg).unwrap()
}

/// A UDP frame from 02:00:00:00:00:01 to `dst`.
pub fn frame(dst: [u8; 4]) -> Vec<u8> {
    frame_between([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], dst)
}

/// A UDP frame from MAC `src` to MAC `dst_mac` and IPv4 `dst`.
pub fn frame_between(src: [u8; 6], dst_mac: [u8; 6], dst: [u8; 4]) -> Vec<u8> {
    let f = UdpFrame {
        src_mac: EthernetAddress(src),
        dst_mac: EthernetAddress(dst_mac),
        vlan: None,
        src_ip: IpAddr::from([10, 0, 0, 1]),
        dst_ip: IpAddr::from(dst),
        src_port: 1000,
        dst_port: 2000,
    };
    let mut buf = vec![0u8; 128];
    let n = f.emit(&[0u8; 18], &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Frames p1 has sent so far.
pub fn sent_on_p1(plane: &Engine) -> u64 {
    let stats = plane.stats().unwrap();
    let ports = stats["ports"].as_array().unwrap();
    let p1 = ports.iter().find(|p| p["name"] == "p1").unwrap();
    p1["tx_packets"].as_u64().unwrap()
}

/// Send `n` frames to `dst` and wait until the engine has taken them all in.
pub async fn send(plane: &Engine, dst: [u8; 4], n: usize) {
    inject(plane, (0..n).map(|_| frame(dst)).collect()).await
}

pub fn basic_config(cookie: u64) -> ForwardingPipelineConfig {
    ForwardingPipelineConfig {
        p4info: Some(hotplane_p4rt::schema::parse_text(BASIC_P4INFO).unwrap()),
        p4_device_config: BASIC.as_bytes().to_vec(),
        cookie: Some(Cookie { cookie }),
    }
}

pub fn election(low: u64) -> Option<Uint128> {
    Some(Uint128 { high: 0, low })
}

pub fn route(prefix: [u8; 4], len: i32, mac: [u8; 6], port: u16) -> TableEntry {
    TableEntry {
        table_id: IPV4_LPM,
        r#match: vec![FieldMatch {
            field_id: 1,
            field_match_type: Some(field_match::FieldMatchType::Lpm(field_match::Lpm {
                value: prefix.to_vec(),
                prefix_len: len,
            })),
        }],
        action: Some(TableAction {
            r#type: Some(table_action::Type::Action(v1::Action {
                action_id: IPV4_FORWARD,
                params: vec![
                    v1::action::Param { param_id: 1, value: mac.to_vec() },
                    v1::action::Param { param_id: 2, value: port.to_be_bytes().to_vec() },
                ],
            })),
        }),
        ..Default::default()
    }
}

pub fn write(low: u64, kind: update::Type, entries: Vec<TableEntry>) -> WriteRequest {
    WriteRequest {
        device_id: DEVICE,
        election_id: election(low),
        updates: entries
            .into_iter()
            .map(|e| Update {
                r#type: kind as i32,
                entity: Some(Entity { entity: Some(entity::Entity::TableEntry(e)) }),
            })
            .collect(),
        ..Default::default()
    }
}

/// The per-update errors of a failed write.
pub fn update_errors(status: &tonic::Status) -> Vec<(i32, String)> {
    assert_eq!(status.code(), Code::Unknown, "{status:?}");
    let details = rpc::Status::decode(status.details()).expect("google.rpc.Status details");
    details
        .details
        .iter()
        .map(|any| {
            assert_eq!(any.type_url, "type.googleapis.com/p4.v1.Error");
            let e = v1::Error::decode(&any.value[..]).unwrap();
            (e.canonical_code, e.message)
        })
        .collect()
}

pub struct Session {
    pub client: P4RuntimeClient<Channel>,
    pub tx: mpsc::Sender<StreamMessageRequest>,
    pub inbound: tonic::Streaming<v1::StreamMessageResponse>,
}

pub async fn connect(server: &Server, low: u64) -> Session {
    let mut client = P4RuntimeClient::connect(format!("http://{}", server.addr())).await.unwrap();
    let (tx, rx) = mpsc::channel(16);
    let inbound = client.stream_channel(ReceiverStream::new(rx)).await.unwrap().into_inner();
    let mut s = Session { client, tx, inbound };
    s.arbitrate(low).await;
    s
}

impl Session {
    pub async fn arbitrate(&mut self, low: u64) {
        let a = MasterArbitrationUpdate {
            device_id: DEVICE,
            election_id: election(low),
            ..Default::default()
        };
        let msg =
            StreamMessageRequest { update: Some(stream_message_request::Update::Arbitration(a)) };
        self.tx.send(msg).await.unwrap();
    }

    /// The next arbitration status on the stream: (code, primary's election id low word).
    pub async fn arbitration(&mut self) -> (i32, u64) {
        let msg = tokio::time::timeout(Duration::from_secs(5), self.inbound.message())
            .await
            .expect("an answer within 5 s")
            .unwrap()
            .expect("the stream is open");
        match msg.update {
            Some(stream_message_response::Update::Arbitration(a)) => {
                (a.status.unwrap().code, a.election_id.unwrap_or_default().low)
            }
            other => panic!("not an arbitration update: {other:?}"),
        }
    }

    pub async fn set_pipeline(
        &mut self,
        low: u64,
        action: SetAction,
        config: ForwardingPipelineConfig,
    ) -> Result<(), tonic::Status> {
        let req = SetForwardingPipelineConfigRequest {
            device_id: DEVICE,
            election_id: election(low),
            action: action as i32,
            config: Some(config),
            ..Default::default()
        };
        self.client.set_forwarding_pipeline_config(req).await.map(|_| ())
    }

    pub async fn read_routes(&mut self) -> Vec<TableEntry> {
        let filter = Entity { entity: Some(entity::Entity::TableEntry(TableEntry::default())) };
        let req = ReadRequest { device_id: DEVICE, entities: vec![filter], ..Default::default() };
        let mut stream = self.client.read(req).await.unwrap().into_inner();
        let mut out = Vec::new();
        while let Some(r) = stream.message().await.unwrap() {
            for e in r.entities {
                if let Some(entity::Entity::TableEntry(t)) = e.entity {
                    out.push(t);
                }
            }
        }
        out
    }
}

pub fn start() -> (Engine, Server) {
    let plane = engine();
    let dp = EngineDataplane::new(&plane, "pre").expect("the engine has the P4 kind");
    let cfg = ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        device_id: DEVICE,
        ..Default::default()
    };
    let server = Server::spawn(&cfg, Arc::new(dp)).unwrap();
    (plane, server)
}

/// The id of the P4Info object named `name` in `p4info` (tables, actions, digests).
pub fn id_of(p4info: &hotplane_p4rt::proto::p4::config::v1::P4Info, name: &str) -> u32 {
    let tables = p4info.tables.iter().map(|t| t.preamble.as_ref().unwrap());
    let actions = p4info.actions.iter().map(|a| a.preamble.as_ref().unwrap());
    let digests = p4info.digests.iter().map(|d| d.preamble.as_ref().unwrap());
    tables.chain(actions).chain(digests).find(|p| p.name == name).map(|p| p.id).expect(name)
}

/// Inject `frames` on p0 and wait until the engine has taken them all in.
pub async fn inject(plane: &Engine, frames: Vec<Vec<u8>>) {
    let p0 = plane.mem("p0").unwrap();
    for mut f in frames {
        while let Err(back) = p0.inject(f) {
            f = back;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    for _ in 0..2000 {
        if plane.drained() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the engine did not drain");
}
