//! The `p4.v1.P4Runtime` service: arbitration on the stream channel, pipelines pushed and
//! fetched, entities written and read, with the status codes and error texts clients test for
//! (finsy matches BMv2's messages by regex, p4runtime-shell needs per-update details).

use crate::arbitration::{election, Arbiter, StreamTx};
use crate::device::{self, DeviceProgram};
use crate::entities::{self, Refused};
use crate::proto::google::rpc;
use crate::proto::p4::v1::PacketOut;
use crate::proto::p4::v1::{
    get_forwarding_pipeline_config_request::ResponseType, p4_runtime_server::P4Runtime,
    set_forwarding_pipeline_config_request::Action as SetAction, stream_error,
    stream_message_request, stream_message_response, write_request::Atomicity, CapabilitiesRequest,
    CapabilitiesResponse, Entity, ForwardingPipelineConfig, GetForwardingPipelineConfigRequest,
    GetForwardingPipelineConfigResponse, PacketOutError, ReadRequest, ReadResponse,
    SetForwardingPipelineConfigRequest, SetForwardingPipelineConfigResponse, StreamError,
    StreamMessageRequest, StreamMessageResponse, WriteRequest, WriteResponse,
};
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
        let mut st = lock(&self.state);
        st.committed = Some(Committed { verified: v, pipeline });
        st.saved = None;
        Ok(())
    }
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
        let results = tokio::task::spawn_blocking(move || {
            let schema = &c.verified.schema;
            let apply = |u| entities::write_update(schema, &c.pipeline, u);
            req.updates.iter().map(apply).collect::<Vec<_>>()
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
        let found = tokio::task::spawn_blocking(move || {
            let schema = &c.verified.schema;
            let mut seen: Vec<&Entity> = Vec::new();
            let mut found = Vec::new();
            for e in &req.entities {
                // The same filter twice selects nothing new.
                if seen.contains(&e) {
                    continue;
                }
                seen.push(e);
                found.extend(entities::read_entity(schema, &c.pipeline, e)?);
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
        let state = Arc::clone(&self.state);
        let stats = Arc::clone(&self.stats);
        let device_id = self.device_id;
        tokio::spawn(async move {
            let mut joined = false;
            while let Ok(Some(msg)) = inbound.message().await {
                let end =
                    handle_stream_message(&state, &stats, device_id, id, &tx, &mut joined, msg)
                        .await;
                if end {
                    break;
                }
            }
            // The client closed (or broke) its side: it is gone at once, so the same election
            // id can come back on the next stream (PTF tests reconnect right away).
            lock(&state).arbiter.leave(id);
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

/// One message on a stream; true when the stream must end.
async fn handle_stream_message(
    state: &Mutex<DeviceState>,
    stats: &Stats,
    device_id: u64,
    id: u64,
    tx: &StreamTx,
    joined: &mut bool,
    msg: StreamMessageRequest,
) -> bool {
    use stream_message_request::Update as U;
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
            let r = lock(state).arbiter.arbitrate(id, &role, election(&a.election_id), tx);
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
            // Non-primaries' packets are dropped silently, as BMv2 does; the primary hears why.
            stats.packet_outs_dropped.fetch_add(1, Ordering::Relaxed);
            if lock(state).arbiter.is_primary(id) {
                let err = StreamError {
                    canonical_code: Code::Unimplemented as i32,
                    message: "packet-out needs a CPU port, which this server does not offer yet"
                        .into(),
                    // Its metadata only: echoing a payload of any size back would let a client
                    // make the server hold it.
                    details: Some(stream_error::Details::PacketOut(PacketOutError {
                        packet_out: Some(PacketOut { payload: Vec::new(), metadata: p.metadata }),
                    })),
                    ..Default::default()
                };
                let msg = StreamMessageResponse {
                    update: Some(stream_message_response::Update::Error(err)),
                };
                let _ = tx.try_send(Ok(msg));
            }
            false
        }
        // No digests are sent yet, so there is nothing to acknowledge.
        Some(U::DigestAck(_)) => false,
        Some(U::Other(_)) | None => {
            let err = StreamError {
                canonical_code: Code::Unimplemented as i32,
                message: "unknown stream message".into(),
                ..Default::default()
            };
            let msg =
                StreamMessageResponse { update: Some(stream_message_response::Update::Error(err)) };
            let _ = tx.try_send(Ok(msg));
            false
        }
    }
}
