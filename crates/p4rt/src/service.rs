//! The `p4.v1.P4Runtime` service: arbitration on the stream channel, pipelines pushed and
//! fetched, entities written and read, with the status codes and error texts clients test for
//! (finsy matches BMv2's messages by regex, p4runtime-shell needs per-update details).

use crate::arbitration::{election, Arbiter, StreamTx};
use crate::device::{self, DeviceProgram};
use crate::digests::Digests;
use crate::entities::{self, Refused};
use crate::idle::Idle;
use crate::pre::Pre;
use crate::proto::google::rpc;
use crate::proto::p4::v1::{entity, update};
use crate::proto::p4::v1::{
    get_forwarding_pipeline_config_request::ResponseType, p4_runtime_server::P4Runtime,
    set_forwarding_pipeline_config_request::Action as SetAction, stream_error,
    stream_message_request, stream_message_response, write_request::Atomicity, CapabilitiesRequest,
    CapabilitiesResponse, Entity, ForwardingPipelineConfig, GetForwardingPipelineConfigRequest,
    GetForwardingPipelineConfigResponse, PacketOutError, PacketReplicationEngineEntry, ReadRequest,
    ReadResponse, SetForwardingPipelineConfigRequest, SetForwardingPipelineConfigResponse,
    StreamError, StreamMessageRequest, StreamMessageResponse, WriteRequest, WriteResponse,
};
use crate::proto::p4::v1::{DigestEntry, IdleTimeoutNotification, PacketOut};
use crate::schema::{self, Schema};
use crate::{Dataplane, Stats};
use hotplane_p4::exec::Pipeline;
use prost::Message;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_stream::Stream;
use tonic::{Code, Request, Response, Status};

/// The P4Runtime version this server implements.
pub const API_VERSION: &str = "1.5.0";

/// finsy recognises "no pipeline yet" by this text (`no .*\bforwarding pipeline config`).
const NO_PIPELINE: &str = "No forwarding pipeline config set for this device";

/// Messages a stream may have waiting before further notifications to it are dropped.
const STREAM_DEPTH: usize = 64;

/// Updates one `Write` may carry.
const MAX_UPDATES: usize = 100_000;

/// Entities (filters) one `Read` may carry.
const MAX_READ_ENTITIES: usize = 1024;

/// Entities one `Read` may return in all.
const MAX_READ_RESULTS: usize = 1 << 21;

/// Entities per `ReadResponse`.
const READ_CHUNK: usize = 4096;

/// A pipeline that compiled and whose P4Info matches the program.
#[derive(Clone)]
struct Verified {
    config: ForwardingPipelineConfig,
    program: DeviceProgram,
    schema: Arc<Schema>,
}

/// The committed pipeline and the data plane's program it runs as.
#[derive(Clone)]
struct Committed {
    verified: Verified,
    pipeline: Arc<Pipeline>,
}

struct DeviceState {
    arbiter: Arbiter,
    saved: Option<Verified>,
    committed: Option<Committed>,
}

/// The service of one device.
pub struct Service {
    device_id: u64,
    state: Arc<Mutex<DeviceState>>,
    /// Pipeline changes hold it exclusively, writes shared: a write never lands in tables a
    /// reconcile is copying (compiles run outside `state`'s lock).
    commit: Arc<tokio::sync::RwLock<()>>,
    /// The replication engine's entries as written; its lock is held by one write at a time,
    /// on a blocking thread, while the data plane takes the new configuration.
    pre: Arc<Mutex<Pre>>,
    /// Digest configurations and the digests on their way to the primary.
    digests: Arc<Mutex<Digests>>,
    /// Idle timeouts of the entries written with one.
    idle: Arc<Mutex<Idle>>,
    /// Stream channels open, arbitrated or not (bounded by `max_streams`).
    open_streams: Arc<AtomicUsize>,
    max_streams: usize,
    dataplane: Arc<dyn Dataplane>,
    next_stream: AtomicU64,
    stats: Arc<Stats>,
}

impl From<Refused> for Status {
    fn from(r: Refused) -> Self {
        Status::new(Code::from(r.code as i32), r.message)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Service {
    pub fn new(
        device_id: u64,
        max_streams: usize,
        strict: bool,
        dataplane: Arc<dyn Dataplane>,
        stats: Arc<Stats>,
    ) -> Self {
        let state = DeviceState {
            arbiter: Arbiter::new(device_id, max_streams, strict),
            saved: None,
            committed: None,
        };
        Service {
            device_id,
            state: Arc::new(Mutex::new(state)),
            commit: Arc::default(),
            pre: Arc::default(),
            digests: Arc::default(),
            idle: Arc::default(),
            open_streams: Arc::default(),
            max_streams,
            dataplane,
            next_stream: AtomicU64::new(1),
            stats,
        }
    }

    fn check_device(&self, device_id: u64) -> Result<(), Status> {
        if device_id == self.device_id {
            Ok(())
        } else {
            Err(Status::not_found(format!(
                "device {device_id} is not this switch (its device id is {})",
                self.device_id
            )))
        }
    }

    /// The committed pipeline, if the data plane still runs it.
    fn committed(&self) -> Result<Committed, Status> {
        let c = lock(&self.state)
            .committed
            .clone()
            .ok_or_else(|| Status::failed_precondition(NO_PIPELINE))?;
        match self.dataplane.pipeline() {
            Some(p) if Arc::ptr_eq(&p, &c.pipeline) => Ok(c),
            _ => Err(Status::failed_precondition(
                "the P4 program was replaced or removed outside P4Runtime (control socket or \
                 update); push the forwarding pipeline config again",
            )),
        }
    }

    /// Compile the config's program and check its P4Info against the one pushed.
    async fn verify(&self, config: ForwardingPipelineConfig) -> Result<Verified, Status> {
        let program = device::decode(&config.p4_device_config)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let Some(pushed) = config.p4info.clone() else {
            return Err(Status::invalid_argument("the config has no P4Info"));
        };
        let limits = self.dataplane.limits();
        let prog = program.clone();
        let compiled = tokio::task::spawn_blocking(move || {
            let ir = hotplane_p4::compile_source_with(&prog.name, &prog.source, &[], &limits)
                .map_err(|e| {
                    Status::invalid_argument(format!("the P4 program does not compile: {e}"))
                })?;
            let ours =
                schema::p4info_of(&ir).map_err(|e| Status::invalid_argument(e.to_string()))?;
            let diff = schema::differences(&pushed, &ours);
            if !diff.is_empty() {
                let shown = diff.iter().take(8).cloned().collect::<Vec<_>>().join("; ");
                let more = diff.len().saturating_sub(8);
                let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
                return Err(Status::invalid_argument(format!(
                    "the P4Info does not describe the P4 program: {shown}{more}"
                )));
            }
            // The program's own P4Info drives the data plane (sizes, field and parameter
            // order, flags); the pushed one, equal in ids, names and widths, is only echoed.
            Schema::new(ours, &ir).map_err(|e| Status::invalid_argument(e.to_string()))
        })
        .await
        .map_err(|e| Status::internal(format!("the compile task failed: {e}")))??;
        Ok(Verified { config, program, schema: Arc::new(compiled) })
    }

    /// Make `v` the running pipeline.
    async fn commit_verified(&self, v: Verified, reconcile: bool) -> Result<(), Status> {
        let dp = Arc::clone(&self.dataplane);
        let program = v.program.clone();
        let pipeline = tokio::task::spawn_blocking(move || dp.commit(&program, reconcile))
            .await
            .map_err(|e| Status::internal(format!("the commit task failed: {e}")))?
            .map_err(|e| {
                Status::invalid_argument(format!("the data plane refused the program: {e}"))
            })?;
        // The new program starts with an empty replication engine unless it reconciles (then
        // the engine carried the old one over, as the tables).
        if !reconcile {
            *lock(&self.pre) = Pre::default();
        }
        // Digest configurations stay for the digests the new program still sends (by id)
        // when it reconciles; a new program starts unconfigured.
        let still = if reconcile { v.schema.digests.clone() } else { Default::default() };
        lock(&self.digests).keep_only(&still);
        lock(&self.idle).keep_only(reconcile.then_some(&*v.schema));
        let mut st = lock(&self.state);
        st.committed = Some(Committed { verified: v, pipeline });
        st.saved = None;
        Ok(())
    }
}

/// The operation and entry of an update of the replication engine.
fn pre_entry(
    u: &crate::proto::p4::v1::Update,
) -> Option<(update::Type, &PacketReplicationEngineEntry)> {
    match u.entity.as_ref()?.entity.as_ref()? {
        entity::Entity::PacketReplicationEngineEntry(e) => {
            Some((update::Type::try_from(u.r#type).unwrap_or(update::Type::Unspecified), e))
        }
        _ => None,
    }
}

fn digest_entry(u: &crate::proto::p4::v1::Update) -> Option<&DigestEntry> {
    match u.entity.as_ref()?.entity.as_ref()? {
        entity::Entity::DigestEntry(e) => Some(e),
        _ => None,
    }
}

/// What a write keeps beside the tables: digest configurations and idle timeouts.
struct Beside<'a> {
    digests: &'a Mutex<Digests>,
    idle: &'a Mutex<Idle>,
}

/// Apply one update that is not the replication engine's.
fn write_one(
    schema: &Schema,
    c: &Committed,
    beside: &Beside<'_>,
    u: &crate::proto::p4::v1::Update,
) -> Result<(), Refused> {
    if let Some(e) = digest_entry(u) {
        return lock(beside.digests).write(&schema.digests, entities::op_of(u)?, e);
    }
    entities::write_update(schema, &c.pipeline, u)?;
    if let Some(entity::Entity::TableEntry(t)) = u.entity.as_ref().and_then(|e| e.entity.as_ref()) {
        if let Some(key) = entities::watch_key(schema, t) {
            let now = hotplane_core::time::now_ns();
            let timeout = t.idle_timeout_ns.max(0) as u64;
            lock(beside.idle).written(key, entities::op_of(u)?, timeout, now);
        }
    }
    Ok(())
}

/// The spec's error for a batch with failed updates: UNKNOWN, with one `p4.v1.Error` per
/// update (in order, OK ones included) in the details.
fn batch_error(results: &[Result<(), Refused>]) -> Status {
    let details = results
        .iter()
        .map(|r| {
            let (code, message) = match r {
                Ok(()) => (Code::Ok as i32, String::new()),
                Err(e) => (e.code as i32, e.message.clone()),
            };
            let err =
                crate::proto::p4::v1::Error { canonical_code: code, message, ..Default::default() };
            prost_types::Any {
                type_url: "type.googleapis.com/p4.v1.Error".into(),
                value: err.encode_to_vec(),
            }
        })
        .collect();
    let failed = results.iter().filter(|r| r.is_err()).count();
    let message = format!("{failed} of {} updates failed", results.len());
    let status = rpc::Status { code: Code::Unknown as i32, message: message.clone(), details };
    Status::with_details(Code::Unknown, message, status.encode_to_vec().into())
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl P4Runtime for Service {
    async fn write(
        &self,
        request: Request<WriteRequest>,
    ) -> Result<Response<WriteResponse>, Status> {
        let req = request.into_inner();
        self.check_device(req.device_id)?;
        if req.atomicity != Atomicity::ContinueOnError as i32 {
            return Err(Status::unimplemented("only CONTINUE_ON_ERROR atomicity is supported"));
        }
        lock(&self.state).arbiter.check_write(&req.role, election(&req.election_id))?;
        if req.updates.len() > MAX_UPDATES {
            return Err(Status::resource_exhausted(format!(
                "{} updates in one write; at most {MAX_UPDATES}",
                req.updates.len()
            )));
        }
        let _no_commit_meanwhile = self.commit.read().await;
        let c = self.committed()?;
        // Table writes can wait for a grace period: off the runtime's only thread, so streams
        // and other requests go on meanwhile.
        let (pre, dp) = (Arc::clone(&self.pre), Arc::clone(&self.dataplane));
        let (digests, idle) = (Arc::clone(&self.digests), Arc::clone(&self.idle));
        let results = tokio::task::spawn_blocking(move || {
            let schema = &c.verified.schema;
            let beside = Beside { digests: &digests, idle: &idle };
            if !req.updates.iter().any(|u| pre_entry(u).is_some()) {
                let apply = |u| write_one(schema, &c, &beside, u);
                return req.updates.iter().map(apply).collect::<Vec<_>>();
            }
            let mut pre = lock(&pre);
            let before = pre.clone();
            let mut results: Vec<_> = req
                .updates
                .iter()
                .map(|u| match pre_entry(u) {
                    Some((op, e)) => pre.write(op, e),
                    None => write_one(schema, &c, &beside, u),
                })
                .collect();
            if *pre != before {
                if let Err(e) = dp.set_replication(pre.replication()) {
                    // Nothing of the replication engine changed: its updates failed.
                    *pre = before;
                    for (u, r) in req.updates.iter().zip(results.iter_mut()) {
                        if pre_entry(u).is_some() && r.is_ok() {
                            *r = Err(Refused::new(rpc::Code::Internal, e.clone()));
                        }
                    }
                }
            }
            results
        })
        .await
        .map_err(|e| Status::internal(format!("the write task failed: {e}")))?;
        let failed = results.iter().filter(|r| r.is_err()).count() as u64;
        self.stats.updates.fetch_add(results.len() as u64, Ordering::Relaxed);
        self.stats.updates_refused.fetch_add(failed, Ordering::Relaxed);
        if failed > 0 {
            return Err(batch_error(&results));
        }
        Ok(Response::new(WriteResponse {}))
    }

    type ReadStream = BoxStream<ReadResponse>;

    async fn read(
        &self,
        request: Request<ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        let req = request.into_inner();
        self.check_device(req.device_id)?;
        if req.entities.len() > MAX_READ_ENTITIES {
            return Err(Status::resource_exhausted(format!(
                "{} entities in one read; at most {MAX_READ_ENTITIES}",
                req.entities.len()
            )));
        }
        let c = self.committed()?;
        let (pre, digests) = (Arc::clone(&self.pre), Arc::clone(&self.digests));
        let idle = Arc::clone(&self.idle);
        let found = tokio::task::spawn_blocking(move || {
            let schema = &c.verified.schema;
            let mut seen: Vec<&Entity> = Vec::new();
            let mut seen_pre = Vec::new();
            let mut found = Vec::new();
            for e in &req.entities {
                // The same filter twice selects nothing new.
                if seen.contains(&e) {
                    continue;
                }
                seen.push(e);
                match &e.entity {
                    Some(entity::Entity::PacketReplicationEngineEntry(f)) => {
                        // Replication filters differing in fields a read ignores too.
                        let selector = Pre::selector(f);
                        if !seen_pre.contains(&selector) {
                            seen_pre.push(selector);
                            found.extend(lock(&pre).read(f));
                        }
                    }
                    Some(entity::Entity::TableEntry(f)) => {
                        let now = hotplane_core::time::now_ns();
                        // A copy: the idle scan and writes go on while the tables are read.
                        let idle = lock(&idle).clone();
                        let entries = entities::read_table_entries(
                            schema,
                            &c.pipeline,
                            f,
                            Some((&idle, now)),
                        )?;
                        found.extend(entries.into_iter().map(entity::Entity::TableEntry));
                    }
                    Some(entity::Entity::DigestEntry(f)) => found.extend(
                        lock(&digests).read(f).into_iter().map(entity::Entity::DigestEntry),
                    ),
                    _ => found.extend(entities::read_entity(schema, &c.pipeline, e)?),
                }
                // Filters that select much the same (wildcards that differ in ignored fields)
                // must not multiply a read without bound.
                if found.len() > MAX_READ_RESULTS {
                    return Err(Refused::new(
                        rpc::Code::ResourceExhausted,
                        format!("a read of more than {MAX_READ_RESULTS} entities; narrow it"),
                    ));
                }
            }
            Ok::<_, Refused>(found)
        })
        .await
        .map_err(|e| Status::internal(format!("the read task failed: {e}")))??;
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        // In responses of a bounded size, whatever the tables hold.
        let mut responses = Vec::with_capacity(found.len() / READ_CHUNK + 1);
        let mut found = found.into_iter().map(|e| Entity { entity: Some(e) }).peekable();
        loop {
            let entities: Vec<Entity> = found.by_ref().take(READ_CHUNK).collect();
            let last = found.peek().is_none();
            responses.push(Ok(ReadResponse { entities }));
            if last {
                break;
            }
        }
        Ok(Response::new(Box::pin(tokio_stream::iter(responses))))
    }

    async fn set_forwarding_pipeline_config(
        &self,
        request: Request<SetForwardingPipelineConfigRequest>,
    ) -> Result<Response<SetForwardingPipelineConfigResponse>, Status> {
        let req = request.into_inner();
        self.check_device(req.device_id)?;
        lock(&self.state).arbiter.check_write(&req.role, election(&req.election_id))?;
        let action = SetAction::try_from(req.action).unwrap_or(SetAction::Unspecified);
        let _one_at_a_time = self.commit.write().await;
        let verified = match (action, req.config) {
            (SetAction::Unspecified, _) => {
                return Err(Status::invalid_argument("the action is unspecified"))
            }
            (SetAction::Commit, Some(_)) => {
                return Err(Status::invalid_argument(
                    "COMMIT takes no config: it commits the saved one",
                ))
            }
            (SetAction::Commit, None) => lock(&self.state).saved.clone().ok_or_else(|| {
                Status::not_found("COMMIT: no config was saved (VERIFY_AND_SAVE first)")
            })?,
            (_, None) => return Err(Status::invalid_argument("the request has no config")),
            (_, Some(config)) => self.verify(config).await?,
        };
        match action {
            SetAction::Verify => {}
            SetAction::VerifyAndSave => lock(&self.state).saved = Some(verified),
            SetAction::VerifyAndCommit | SetAction::Commit => {
                self.commit_verified(verified, false).await?
            }
            SetAction::ReconcileAndCommit => self.commit_verified(verified, true).await?,
            SetAction::Unspecified => unreachable!("refused above"),
        }
        self.stats.pipelines.fetch_add(1, Ordering::Relaxed);
        Ok(Response::new(SetForwardingPipelineConfigResponse {}))
    }

    async fn get_forwarding_pipeline_config(
        &self,
        request: Request<GetForwardingPipelineConfigRequest>,
    ) -> Result<Response<GetForwardingPipelineConfigResponse>, Status> {
        let req = request.into_inner();
        self.check_device(req.device_id)?;
        let Some(c) = lock(&self.state).committed.clone() else {
            return Err(Status::failed_precondition(NO_PIPELINE));
        };
        let full = c.verified.config;
        let cookie = full.cookie;
        let config = match ResponseType::try_from(req.response_type) {
            Ok(ResponseType::All) => full,
            Ok(ResponseType::CookieOnly) => {
                ForwardingPipelineConfig { cookie, ..Default::default() }
            }
            Ok(ResponseType::P4infoAndCookie) => {
                ForwardingPipelineConfig { p4info: full.p4info, cookie, ..Default::default() }
            }
            Ok(ResponseType::DeviceConfigAndCookie) => ForwardingPipelineConfig {
                p4_device_config: full.p4_device_config,
                cookie,
                ..Default::default()
            },
            Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "unknown response type {}",
                    req.response_type
                )))
            }
        };
        Ok(Response::new(GetForwardingPipelineConfigResponse { config: Some(config) }))
    }

    type StreamChannelStream = BoxStream<StreamMessageResponse>;

    async fn stream_channel(
        &self,
        request: Request<tonic::Streaming<StreamMessageRequest>>,
    ) -> Result<Response<Self::StreamChannelStream>, Status> {
        let mut inbound = request.into_inner();
        // Counted from the moment it opens: streams that never arbitrate are streams too.
        if self.open_streams.fetch_add(1, Ordering::AcqRel) >= self.max_streams {
            self.open_streams.fetch_sub(1, Ordering::AcqRel);
            return Err(Status::resource_exhausted(format!(
                "Too many connections (at most {})",
                self.max_streams
            )));
        }
        let open = Arc::clone(&self.open_streams);
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_DEPTH);
        let id = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let cx = self.stream_cx();
        tokio::spawn(async move {
            let mut joined = false;
            while let Ok(Some(msg)) = inbound.message().await {
                if cx.handle(id, &tx, &mut joined, msg).await {
                    break;
                }
            }
            // The client closed (or broke) its side: it is gone at once, so the same election
            // id can come back on the next stream (PTF tests reconnect right away).
            lock(&cx.state).arbiter.leave(id);
            open.fetch_sub(1, Ordering::AcqRel);
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
    }

    async fn capabilities(
        &self,
        request: Request<CapabilitiesRequest>,
    ) -> Result<Response<CapabilitiesResponse>, Status> {
        let _ = request;
        Ok(Response::new(CapabilitiesResponse {
            p4runtime_api_version: API_VERSION.into(),
            ..Default::default()
        }))
    }
}

/// What stream tasks and the packet-in pump share with the service.
#[derive(Clone)]
pub struct StreamCx {
    state: Arc<Mutex<DeviceState>>,
    digests: Arc<Mutex<Digests>>,
    idle: Arc<Mutex<Idle>>,
    /// The streams of the primaries digests last went to (a new one clears the digest
    /// cache). Ids, not senders: a kept sender would hold a closed stream open.
    digest_primaries: Arc<Mutex<Vec<u64>>>,
    stats: Arc<Stats>,
    dataplane: Arc<dyn Dataplane>,
    device_id: u64,
}

/// A `StreamError` for the stream that sent `packet`: its metadata only, since echoing a
/// payload of any size back would let a client make the server hold it.
fn packet_out_error(code: Code, message: String, packet: PacketOut) -> StreamMessageResponse {
    let err = StreamError {
        canonical_code: code as i32,
        message,
        details: Some(stream_error::Details::PacketOut(PacketOutError {
            packet_out: Some(PacketOut { payload: Vec::new(), metadata: packet.metadata }),
        })),
        ..Default::default()
    };
    StreamMessageResponse { update: Some(stream_message_response::Update::Error(err)) }
}

impl Service {
    fn stream_cx(&self) -> StreamCx {
        StreamCx {
            state: Arc::clone(&self.state),
            digests: Arc::clone(&self.digests),
            idle: Arc::clone(&self.idle),
            digest_primaries: Arc::default(),
            stats: Arc::clone(&self.stats),
            dataplane: Arc::clone(&self.dataplane),
            device_id: self.device_id,
        }
    }

    /// What the packet-in pump needs ([`pump_packet_ins`]).
    pub fn packet_in_pump(&self) -> StreamCx {
        self.stream_cx()
    }
}

/// Packet-ins per look at the CPU port.
const PACKET_IN_BATCH: usize = 256;

/// Deliver the frames programs send to the CPU port to every primary, for as long as the
/// runtime runs. It looks every millisecond while packets come, backing off to 16 ms when
/// none do; a primary that does not read its stream misses packet-ins (counted), and while
/// no primary or no pipeline is there they are dropped (counted), never kept.
pub async fn pump_packet_ins(cx: StreamCx) {
    const BUSY: std::time::Duration = std::time::Duration::from_millis(1);
    let mut pause = BUSY;
    let mut next_idle_scan = std::time::Instant::now();
    loop {
        if std::time::Instant::now() >= next_idle_scan {
            // Each scan walks the tables with watched entries: it runs at most every 50 ms
            // and takes at most a tenth of the server's thread.
            let started = std::time::Instant::now();
            cx.idle_once().await;
            next_idle_scan = started + IDLE_SCAN.max(started.elapsed() * 10);
        }
        let busy = cx.packet_ins_once() > 0;
        // Digests waiting for their list's timeout are looked at every millisecond too.
        let digests = cx.digests_once();
        pause = if busy || digests { BUSY } else { (pause * 2).min(BUSY * 16) };
        tokio::time::sleep(pause).await;
    }
}

/// Send `update` to every primary; how many it reached (a primary not reading its stream
/// misses it: nothing waits for a client).
fn to_primaries(primaries: &[StreamTx], update: stream_message_response::Update) -> u64 {
    let msg = || StreamMessageResponse { update: Some(update.clone()) };
    primaries.iter().filter(|tx| tx.try_send(Ok(msg())).is_ok()).count() as u64
}

/// Nanoseconds since the Unix epoch, as P4Runtime stamps notifications.
fn unix_nanos() -> i64 {
    hotplane_core::time::unix_micros() as i64 * 1000
}

/// Entries per idle timeout notification.
const IDLE_CHUNK: usize = 1024;

/// How often idle timeouts are looked for (at least).
const IDLE_SCAN: std::time::Duration = std::time::Duration::from_millis(50);

/// Digest records taken from the data plane per look.
const DIGEST_BATCH: usize = 4096;

impl StreamCx {
    /// Deliver the packet-ins waiting now; how many there were.
    fn packet_ins_once(&self) -> usize {
        let (schema, primaries) = {
            let st = lock(&self.state);
            let schema = st.committed.as_ref().map(|c| Arc::clone(&c.verified.schema));
            (schema, st.arbiter.primaries())
        };
        let (mut sent, mut dropped) = (0u64, 0u64);
        let n = self.dataplane.packet_ins(PACKET_IN_BATCH, &mut |frame| {
            let packet = match (&schema, primaries.is_empty()) {
                (Some(s), false) => s.packet_io.packet_in(frame),
                _ => {
                    dropped += 1;
                    return;
                }
            };
            let Ok(packet) = packet else {
                dropped += 1;
                return;
            };
            let reached = to_primaries(&primaries, stream_message_response::Update::Packet(packet));
            sent += reached;
            dropped += primaries.len() as u64 - reached;
        });
        self.stats.packet_ins.fetch_add(sent, Ordering::Relaxed);
        self.stats.packet_ins_dropped.fetch_add(dropped, Ordering::Relaxed);
        n
    }

    /// Tell every primary of the entries idle for their timeout. The scan walks tables: it
    /// runs off the server's thread.
    async fn idle_once(&self) {
        let (committed, primaries) = {
            let st = lock(&self.state);
            (st.committed.clone(), st.arbiter.primaries())
        };
        // Without a primary nobody would hear it: the timers keep running until one comes.
        let Some(c) = committed.filter(|_| !primaries.is_empty()) else { return };
        let idle = Arc::clone(&self.idle);
        let scan = tokio::task::spawn_blocking(move || {
            let mut idle = lock(&idle);
            if !idle.has_timeouts() {
                return Vec::new();
            }
            idle.due(&c.verified.schema, &c.pipeline, hotplane_core::time::now_ns())
        });
        let Ok(entries) = scan.await else { return };
        if entries.is_empty() {
            return;
        }
        let timestamp = unix_nanos();
        // In notifications of a bounded size, however many entries went idle at once.
        for chunk in entries.chunks(IDLE_CHUNK) {
            let n = chunk.len() as u64;
            let note = IdleTimeoutNotification { table_entry: chunk.to_vec(), timestamp };
            let update = stream_message_response::Update::IdleTimeoutNotification(note);
            let reached = to_primaries(&primaries, update);
            let missed = primaries.len() as u64 - reached;
            self.stats.idle_notifications.fetch_add(n * reached, Ordering::Relaxed);
            self.stats.idle_notifications_dropped.fetch_add(n * missed, Ordering::Relaxed);
        }
    }

    /// Take the data plane's digests and send the lists due to every primary; true while
    /// digests wait for their time or came in.
    fn digests_once(&self) -> bool {
        let (committed, primaries, primary_ids) = {
            let st = lock(&self.state);
            (st.committed.clone(), st.arbiter.primaries(), st.arbiter.primary_ids())
        };
        let Some(c) = committed else { return false };
        let records = c.pipeline.objects.digests.drain(DIGEST_BATCH);
        if primaries.is_empty() {
            // Nobody to tell: dropped, never kept for a controller that may not come.
            self.stats.digests_dropped.fetch_add(records.len() as u64, Ordering::Relaxed);
            return false;
        }
        let (now, stamp) = (std::time::Instant::now(), unix_nanos());
        let mut digests = lock(&self.digests);
        {
            let mut heard = lock(&self.digest_primaries);
            if *heard != primary_ids {
                digests.primary_changed();
                *heard = primary_ids;
            }
        }
        let offered = digests.offer(&records, now);
        let lists = digests.due(&c.verified.schema.digests, now, stamp);
        let waiting = digests.is_waiting();
        drop(digests);
        let s = &self.stats;
        s.digests_repeated.fetch_add(offered.duplicates, Ordering::Relaxed);
        s.digests_dropped.fetch_add(offered.unconfigured + offered.dropped, Ordering::Relaxed);
        for list in lists {
            let (n, id, list_id) = (list.data.len() as u64, list.digest_id, list.list_id);
            let reached = to_primaries(&primaries, stream_message_response::Update::Digest(list));
            s.digests.fetch_add(n * reached, Ordering::Relaxed);
            s.digest_lists.fetch_add(reached, Ordering::Relaxed);
            s.digests_dropped.fetch_add(n * (primaries.len() as u64 - reached), Ordering::Relaxed);
            if reached == 0 {
                // Nobody will acknowledge it: its data may come again.
                lock(&self.digests).undelivered(id, list_id);
            }
        }
        waiting || !records.is_empty()
    }

    /// A packet-out from stream `id`: from the primary only (a backup's are dropped without
    /// a word, as BMv2 does), through the program's packet_out header into the pipeline.
    fn packet_out(&self, id: u64, tx: &StreamTx, packet: PacketOut) {
        let schema = {
            let st = lock(&self.state);
            if !st.arbiter.is_primary(id) {
                self.stats.packet_outs_dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            st.committed.as_ref().map(|c| Arc::clone(&c.verified.schema))
        };
        let sent = match schema {
            None => Err((Code::FailedPrecondition, NO_PIPELINE.to_string())),
            Some(s) => s
                .packet_io
                .packet_out_frame(&packet.metadata, &packet.payload)
                .map_err(|e| (Code::InvalidArgument, e.to_string()))
                .and_then(|frame| {
                    self.dataplane.packet_out(&frame).map_err(|e| (Code::Unavailable, e))
                }),
        };
        match sent {
            Ok(()) => {
                self.stats.packet_outs.fetch_add(1, Ordering::Relaxed);
            }
            Err((code, message)) => {
                self.stats.packet_outs_dropped.fetch_add(1, Ordering::Relaxed);
                let _ = tx.try_send(Ok(packet_out_error(code, message, packet)));
            }
        }
    }

    /// One message on stream `id`; true when the stream must end.
    async fn handle(
        &self,
        id: u64,
        tx: &StreamTx,
        joined: &mut bool,
        msg: StreamMessageRequest,
    ) -> bool {
        use stream_message_request::Update as U;
        let device_id = self.device_id;
        let refuse = |s: Status| async move {
            let _ = tx.send(Err(s)).await;
            true
        };
        match msg.update {
            Some(U::Arbitration(a)) => {
                if a.device_id != device_id {
                    return refuse(Status::not_found(format!(
                        "device {} is not this switch (its device id is {device_id})",
                        a.device_id
                    )))
                    .await;
                }
                let role = a.role.map(|r| r.name).unwrap_or_default();
                let r =
                    lock(&self.state).arbiter.arbitrate(id, &role, election(&a.election_id), tx);
                match r {
                    Ok(()) => {
                        *joined = true;
                        false
                    }
                    Err(s) => refuse(s).await,
                }
            }
            _ if !*joined => {
                refuse(Status::failed_precondition(
                    "the first message on a stream must be an arbitration update",
                ))
                .await
            }
            Some(U::Packet(p)) => {
                self.packet_out(id, tx, p);
                false
            }
            // A backup's acknowledgements are ignored, as its packet-outs are.
            Some(U::DigestAck(a)) => {
                if lock(&self.state).arbiter.is_primary(id) {
                    lock(&self.digests).ack(a.digest_id, a.list_id);
                }
                false
            }
            Some(U::Other(_)) | None => {
                let err = StreamError {
                    canonical_code: Code::Unimplemented as i32,
                    message: "unknown stream message".into(),
                    ..Default::default()
                };
                let msg = StreamMessageResponse {
                    update: Some(stream_message_response::Update::Error(err)),
                };
                let _ = tx.try_send(Ok(msg));
                false
            }
        }
    }
}
