//! `hotplane bench p4runtime`: table writes through the P4Runtime server while stamped packets
//! flow through the pipeline it pushed. It measures entries written per second in batches of
//! 1, 100 and 1000 per `Write`; the latency from issuing a single write until the data plane
//! forwards a packet by the new entry; and a wildcard read of every entry. Beside them, in the
//! same run, the same entries through the control API (`p4-entries`, runtime JSON handed to the
//! control thread in process: no socket, no gRPC), the engine's other way in. At the end it
//! checks that no packet of the flowing traffic was lost.
//!
//! The program is basic.p4 with a table sized for the run, started from the config with the
//! traffic's route and taken over by P4Runtime with RECONCILE_AND_COMMIT (so its table and the
//! traffic carry on). Traffic: four flows to 10.0.1.0/24, routed to p1; the written entries are /32 routes in 11.0.0.0/8 (traffic never meets them),
//! except the latency probes: a /32 for a probe address, routed back out of p0, whose
//! transmit counter only probes move.

use super::pipeline::round;
use super::{emit, Progress};
use crate::config::{Config, DataplaneConfig, IdlePolicy, PortConfig, PortKind};
use hdrhistogram::Histogram;
use hotplane_core::wire::{EthernetAddress, UdpFrame};
use hotplane_io::mem::{GenSpec, MemReport, MemSpec, SinkSpec};
use hotplane_p4rt::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use hotplane_p4rt::proto::p4::v1::{
    self as v1, entity, field_match, set_forwarding_pipeline_config_request::Action as SetAction,
    table_action, update, Entity, FieldMatch, ForwardingPipelineConfig, ReadRequest,
    SetForwardingPipelineConfigRequest, TableAction, TableEntry, Update, WriteRequest,
};
use hotplane_p4rt::{EngineDataplane, Server, ServerConfig};
use serde_json::json;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

const BASIC: &str = include_str!("../../../../tests/p4/basic.p4");
const IPV4_LPM: u32 = 37375156;
const IPV4_FORWARD: u32 = 28792405;
const DEVICE: u64 = 1;

#[derive(clap::Args, Debug, Clone)]
pub struct Opts {
    /// Entries written one per `Write`.
    #[arg(long, default_value_t = 2000)]
    pub singles: u32,
    /// Entries written in batches of 100, and again in batches of 1000.
    #[arg(long, default_value_t = 50_000)]
    pub batched: u32,
    /// Single writes whose visibility in the data plane is timed.
    #[arg(long, default_value_t = 500)]
    pub probes: u32,
    /// Packets per second of the traffic flowing during the writes.
    #[arg(long, default_value_t = 100_000.0)]
    pub rate: f64,
    #[arg(long)]
    pub json: bool,
}

/// The data plane: traffic on p0, basic.p4 (`source`) at `pre` with the traffic's route from
/// `entries`, so that packets flow from the first one on.
fn config(rate: f64, source: &str, entries: &std::path::Path) -> Config {
    let gen = GenSpec {
        flows: 4,
        dst_ip: IpAddr::from([10, 0, 1, 1]),
        rate_pps: Some(rate),
        ..Default::default()
    };
    let cores = hotplane_engine::online_cores();
    let mut cfg = Config {
        dataplane: DataplaneConfig {
            workers: 1,
            // The worker on the last core; the server, the client and the control thread share
            // the others (on 2 cores: core 0).
            cores: Some(vec![cores - 1]),
            idle: IdlePolicy::Poll,
            ..Default::default()
        },
        ports: vec![
            PortConfig::new(
                "p0",
                None,
                PortKind::Mem(MemSpec { gen: Some(gen), sink: SinkSpec::default() }),
            ),
            PortConfig::new(
                "p1",
                None,
                PortKind::Mem(MemSpec { gen: None, sink: SinkSpec::default() }),
            ),
        ],
        ..Default::default()
    };
    cfg.pipeline.pre = Some(
        crate::StageSpec::stage("p4")
            .with("source", source)
            .with("name", "basic.p4")
            .with("entries", entries.display().to_string()),
    );
    cfg
}

/// The traffic's route, as runtime JSON.
const TRAFFIC_ROUTE: &str = r#"{"table_entries": [{"table": "MyIngress.ipv4_lpm",
    "match": {"hdr.ipv4.dstAddr": ["10.0.1.0", 24]}, "action_name": "MyIngress.ipv4_forward",
    "action_params": {"dstAddr": "08:00:00:00:01:11", "port": 1}}]}"#;

/// A route for `addr/len` to `port`.
fn route(addr: u32, len: i32, port: u16) -> TableEntry {
    TableEntry {
        table_id: IPV4_LPM,
        r#match: vec![FieldMatch {
            field_id: 1,
            field_match_type: Some(field_match::FieldMatchType::Lpm(field_match::Lpm {
                value: addr.to_be_bytes().to_vec(),
                prefix_len: len,
            })),
        }],
        action: Some(TableAction {
            r#type: Some(table_action::Type::Action(v1::Action {
                action_id: IPV4_FORWARD,
                params: vec![
                    v1::action::Param { param_id: 1, value: vec![8, 0, 0, 0, 1, 0x11] },
                    v1::action::Param { param_id: 2, value: port.to_be_bytes().to_vec() },
                ],
            })),
        }),
        ..Default::default()
    }
}

fn write(entries: impl Iterator<Item = TableEntry>) -> WriteRequest {
    WriteRequest {
        device_id: DEVICE,
        updates: entries
            .map(|e| Update {
                r#type: update::Type::Insert as i32,
                entity: Some(Entity { entity: Some(entity::Entity::TableEntry(e)) }),
            })
            .collect(),
        ..Default::default()
    }
}

fn probe_frame(dst: u32) -> Vec<u8> {
    let f = UdpFrame {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: IpAddr::from([10, 9, 9, 9]),
        dst_ip: IpAddr::from(dst.to_be_bytes()),
        src_port: 9,
        dst_port: 9,
    };
    let mut buf = vec![0u8; 128];
    let n = f.emit(&[0u8; 18], &mut buf).unwrap_or(60);
    buf.truncate(n);
    buf
}

/// Entries per second writing `n` entries from `first` in batches of `batch`.
async fn write_rate(
    client: &mut P4RuntimeClient<tonic::transport::Channel>,
    first: u32,
    n: u32,
    batch: u32,
) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let mut at = first;
    while at < first + n {
        let k = batch.min(first + n - at);
        client.write(write((at..at + k).map(|a| route(a, 32, 1)))).await?;
        at += k;
    }
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}

pub fn run(o: &Opts) -> anyhow::Result<()> {
    let mut progress = Progress::new("p4runtime", o.json);
    // Room for every entry of the run.
    let total = o.singles + 3 * o.batched + o.probes + 16;
    let source = BASIC.replace("size = 1024;", &format!("size = {};", total.next_power_of_two()));
    anyhow::ensure!(
        source != BASIC,
        "basic.p4 no longer sizes its table as this benchmark expects"
    );
    let entries =
        std::env::temp_dir().join(format!("hotplane-bench-p4rt-{}.json", std::process::id()));
    std::fs::write(&entries, TRAFFIC_ROUTE)?;
    let plane = crate::start(config(o.rate, &source, &entries));
    std::fs::remove_file(&entries).ok();
    let plane = plane?;
    let dp = EngineDataplane::new(&plane, "pre")
        .ok_or_else(|| anyhow::anyhow!("no P4 kind in this build"))?;
    let server = Server::spawn(
        &ServerConfig { listen: "127.0.0.1:0".parse()?, device_id: DEVICE, ..Default::default() },
        Arc::new(dp),
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = runtime.block_on(async {
        let mut client = P4RuntimeClient::connect(format!("http://{}", server.addr()))
            .await?
            .max_decoding_message_size(256 << 20);
        let p4info = hotplane_p4rt::schema::p4info_of(&hotplane_p4::compile_source_with(
            "basic.p4",
            &source,
            &[],
            &Default::default(),
        )?)?;
        let push = SetForwardingPipelineConfigRequest {
            device_id: DEVICE,
            // Reconcile: the program the data plane started with keeps its route (and the
            // traffic keeps flowing) as P4Runtime takes it over.
            action: SetAction::ReconcileAndCommit as i32,
            config: Some(ForwardingPipelineConfig {
                p4info: Some(p4info),
                p4_device_config: source.clone().into_bytes(),
                cookie: None,
            }),
            ..Default::default()
        };
        client.set_forwarding_pipeline_config(push).await?;
        let carried = TableEntry { table_id: IPV4_LPM, ..Default::default() };
        let filter = Entity { entity: Some(entity::Entity::TableEntry(carried)) };
        let mut stream = client
            .read(ReadRequest { device_id: DEVICE, entities: vec![filter], ..Default::default() })
            .await?
            .into_inner();
        let mut kept = 0;
        while let Some(r) = stream.message().await? {
            kept += r.entities.len();
        }
        anyhow::ensure!(
            kept == 1,
            "the reconciled pipeline has {kept} entries, not the 1 it started with"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;

        let base = 0x0b00_0000u32;
        let singles = write_rate(&mut client, base, o.singles, 1).await?;
        progress.update(1, 5);
        let b100 = write_rate(&mut client, base + o.singles, o.batched, 100).await?;
        progress.update(2, 5);
        let b1000 = write_rate(&mut client, base + o.singles + o.batched, o.batched, 1000).await?;
        progress.update(3, 5);

        // Visibility: issue a write, then send a probe to the new route until one leaves p0.
        let p0 = plane.mem("p0").ok_or_else(|| anyhow::anyhow!("no p0"))?.clone();
        let tx = |h: &hotplane_io::mem::MemHandle| {
            h.counters().iter().map(|c| c.tx_packets.get()).sum::<u64>()
        };
        let mut visible = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3)?;
        let probe_base = 0x0c00_0000u32;
        for i in 0..o.probes {
            let addr = probe_base + i;
            let before = tx(&p0);
            let t0 = Instant::now();
            client.write(write(std::iter::once(route(addr, 32, 0)))).await?;
            let deadline = t0 + Duration::from_secs(2);
            loop {
                let _ = p0.inject(probe_frame(addr));
                let wait = Instant::now();
                while tx(&p0) == before && wait.elapsed() < Duration::from_micros(200) {
                    std::hint::spin_loop();
                }
                if tx(&p0) > before {
                    break;
                }
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "probe {i} never forwarded by its entry"
                );
            }
            let _ = visible.record(t0.elapsed().as_nanos().max(1) as u64);
        }
        progress.update(4, 5);

        // A wildcard read of every entry.
        let t0 = Instant::now();
        let filter = Entity { entity: Some(entity::Entity::TableEntry(TableEntry::default())) };
        let mut stream = client
            .read(ReadRequest { device_id: DEVICE, entities: vec![filter], ..Default::default() })
            .await?
            .into_inner();
        let mut read = 0usize;
        while let Some(r) = stream.message().await? {
            read += r.entities.len();
        }
        let read_s = t0.elapsed().as_secs_f64();
        progress.update(5, 5);
        anyhow::Ok((singles, b100, b1000, visible, read, read_s))
    });
    let (singles, b100, b1000, visible, read, read_s) = result?;

    // The anchor: the same kind of entries through the control API, 1000 per request.
    let anchor_base = 0x0d00_0000u32;
    let t0 = Instant::now();
    let mut at = 0;
    while at < o.batched {
        let k = 1000.min(o.batched - at);
        let entries: Vec<_> = (at..at + k)
            .map(|i| {
                let a = std::net::Ipv4Addr::from(anchor_base + i);
                json!({"table": "MyIngress.ipv4_lpm", "match": {"hdr.ipv4.dstAddr": [a.to_string(), 32]},
                       "action_name": "MyIngress.ipv4_forward",
                       "action_params": {"dstAddr": "08:00:00:00:01:11", "port": 1}})
            })
            .collect();
        let doc = json!({ "table_entries": entries });
        plane
            .request(hotplane_control::api::Request::P4Entries { target: Some("pre".into()), doc })
            .into_result()?;
        at += k;
    }
    let anchor = o.batched as f64 / t0.elapsed().as_secs_f64();
    drop(server);
    let handles = plane.mem_handles();
    plane.stop();
    let report = MemReport::merge(&handles);
    let us = |q: f64| round(visible.value_at_quantile(q) as f64 / 1000.0, 1);
    let out = json!({
        "bench": "p4runtime",
        "entries_per_s_batch_1": round(singles, 0),
        "entries_per_s_batch_100": round(b100, 0),
        "entries_per_s_batch_1000": round(b1000, 0),
        "control_api_entries_per_s_batch_1000": round(anchor, 0),
        "p4runtime_over_control_api": round(b1000 / anchor, 2),
        "write_visible_us_p50": us(0.5),
        "write_visible_us_p99": us(0.99),
        "probes": o.probes,
        "read_entries": read,
        "read_ms": round(read_s * 1000.0, 1),
        "read_entries_per_s": round(read as f64 / read_s, 0),
        "traffic_packets": report.flows.iter().map(|f| f.sent).sum::<u64>(),
        "lost": report.lost(),
        "duplicates": report.duplicates(),
        "targets": {"entries_per_s_batched": 200_000, "write_visible_us_p50": 200},
    });
    if !o.json {
        eprintln!(
            "P4Runtime writes: {:.0}/s single, {:.0}/s batch 100, {:.0}/s batch 1000 (control API {:.0}/s); \
             visible p50 {} us p99 {} us; read {} entries in {:.1} ms; lost {}",
            singles, b100, b1000, anchor, us(0.5), us(0.99), read, read_s * 1000.0, report.lost()
        );
    }
    emit(&out, o.json);
    anyhow::ensure!(
        report.lost() == 0,
        "{} packets of the flowing traffic were lost",
        report.lost()
    );
    Ok(())
}
