//! The server side: what it needs of a data plane ([`Dataplane`], and the engine's
//! [`EngineDataplane`]), its settings, and the thread that serves it.

use crate::{proto, service, DeviceProgram};
use hotplane_control::api::Request;
use hotplane_core::ProgramKind;
use hotplane_engine::{ControlLink, CpuPort, CpuPortError, Engine};
use hotplane_p4::budget::Limits;
use hotplane_p4::exec::Pipeline;
use hotplane_p4::kind::P4Kind;
use hotplane_p4::v1model::Replication;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the server needs of a data plane: a place to run one P4 program.
pub trait Dataplane: Send + Sync + 'static {
    /// The budgets programs are compiled under.
    fn limits(&self) -> Limits;
    /// Make `program` the running pipeline (blocking): with fresh state, or, when
    /// `reconcile`, keeping the state of the running program's tables, registers and counters
    /// that have the same shape in the new one. Returns the pipeline now running.
    fn commit(&self, program: &DeviceProgram, reconcile: bool) -> Result<Arc<Pipeline>, String>;
    /// The pipeline running now, if any.
    fn pipeline(&self) -> Option<Arc<Pipeline>>;
    /// Make `replication` the running program's multicast groups and clone sessions.
    fn set_replication(&self, replication: Replication) -> Result<(), String> {
        let _ = replication;
        Err("this data plane has no packet replication engine".into())
    }
    /// Run `frame` through the pipeline as if it arrived on the CPU port (a packet-out).
    fn packet_out(&self, frame: &[u8]) -> Result<(), String> {
        let _ = frame;
        Err("this data plane has no CPU port".into())
    }
    /// Frames the program sent to the CPU port (packet-ins), oldest first; at most `max`.
    fn packet_ins(&self, max: usize, each: &mut dyn FnMut(&[u8])) -> usize {
        let _ = (max, each);
        0
    }
}

/// A running engine's P4 program at one target (`pre` by default).
pub struct EngineDataplane {
    link: ControlLink,
    kind: Arc<dyn ProgramKind>,
    target: String,
    cpu: Option<CpuPort>,
}

impl EngineDataplane {
    /// The P4 program at `target` of `engine`; `None` if this engine has no P4 kind.
    pub fn new(engine: &Engine, target: &str) -> Option<Self> {
        let kind = Arc::clone(engine.registry().kinds.for_stage("p4")?);
        kind.as_any()?.downcast_ref::<P4Kind>()?;
        Some(EngineDataplane {
            link: engine.link().clone(),
            kind,
            target: target.to_string(),
            cpu: None,
        })
    }

    /// Exchange packets with the program through CPU port `port` of `engine` (packet-in and
    /// packet-out).
    pub fn with_cpu_port(mut self, engine: &Engine, port: u32) -> Result<Self, CpuPortError> {
        self.cpu = Some(engine.open_cpu_port(port)?);
        Ok(self)
    }

    fn p4(&self) -> &P4Kind {
        // Checked in `new`.
        self.kind.as_any().and_then(|k| k.downcast_ref::<P4Kind>()).expect("the P4 kind")
    }
}

impl Dataplane for EngineDataplane {
    fn limits(&self) -> Limits {
        self.p4().limits().clone()
    }

    fn commit(&self, program: &DeviceProgram, reconcile: bool) -> Result<Arc<Pipeline>, String> {
        let mut stage = serde_json::json!({
            "stage": "p4",
            "source": program.source,
            "name": program.name,
        });
        if reconcile && self.pipeline().is_some() {
            stage["carry_from"] = self.target.clone().into();
        }
        let req = Request::Install { target: self.target.clone(), worker: None, stage };
        self.link.call(req, Duration::from_secs(120)).into_result().map_err(|e| e.to_string())?;
        // Packets the old program sent to the controller carry its controller headers.
        if let Some(cpu) = &self.cpu {
            cpu.discard_pending();
        }
        self.pipeline().ok_or_else(|| {
            format!("no P4 program is installed at {} after the install", self.target)
        })
    }

    fn pipeline(&self) -> Option<Arc<Pipeline>> {
        self.p4().locate(Some(&self.target)).ok().map(|(_, p)| p)
    }

    fn set_replication(&self, replication: Replication) -> Result<(), String> {
        let stage = self
            .p4()
            .stage_at(0, &self.target)
            .ok_or_else(|| format!("no P4 program is installed at {}", self.target))?;
        // On a grace-period timeout the new configuration is live all the same; only the old
        // one is freed later.
        if let Err(e) = stage.set_replication(replication) {
            tracing::warn!("p4runtime: replication engine: {e}");
        }
        Ok(())
    }

    fn packet_out(&self, frame: &[u8]) -> Result<(), String> {
        match &self.cpu {
            Some(cpu) => cpu.send(frame).map_err(|e| e.to_string()),
            None => Err("the switch has no CPU port (set cpu_port)".into()),
        }
    }

    fn packet_ins(&self, max: usize, each: &mut dyn FnMut(&[u8])) -> usize {
        self.cpu.as_ref().map_or(0, |cpu| cpu.receive(max, each))
    }
}

/// The server's counters.
#[derive(Debug, Default)]
pub struct Stats {
    pub updates: AtomicU64,
    pub updates_refused: AtomicU64,
    pub reads: AtomicU64,
    pub pipelines: AtomicU64,
    /// Packet-outs sent into the pipeline, and those dropped (from a backup, malformed, or
    /// refused by the data plane).
    pub packet_outs: AtomicU64,
    pub packet_outs_dropped: AtomicU64,
    /// Packet-ins delivered to primaries, and those dropped (no primary or no pipeline, a
    /// primary not reading its stream, a frame shorter than its packet_in header).
    pub packet_ins: AtomicU64,
    pub packet_ins_dropped: AtomicU64,
    /// Digests sent to primaries, in how many lists; repeats held back until acknowledged;
    /// digests dropped (not configured, no primary, beyond the bound, a primary not reading).
    pub digests: AtomicU64,
    pub digest_lists: AtomicU64,
    pub digests_repeated: AtomicU64,
    pub digests_dropped: AtomicU64,
    /// Entries reported idle to primaries, and reports a primary's full stream dropped.
    pub idle_notifications: AtomicU64,
    pub idle_notifications_dropped: AtomicU64,
}

impl Stats {
    pub fn json(&self) -> serde_json::Value {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        serde_json::json!({
            "updates": g(&self.updates),
            "updates_refused": g(&self.updates_refused),
            "reads": g(&self.reads),
            "pipelines": g(&self.pipelines),
            "packet_outs": g(&self.packet_outs),
            "packet_outs_dropped": g(&self.packet_outs_dropped),
            "packet_ins": g(&self.packet_ins),
            "packet_ins_dropped": g(&self.packet_ins_dropped),
            "digests": g(&self.digests),
            "digest_lists": g(&self.digest_lists),
            "digests_repeated": g(&self.digests_repeated),
            "digests_dropped": g(&self.digests_dropped),
            "idle_notifications": g(&self.idle_notifications),
            "idle_notifications_dropped": g(&self.idle_notifications_dropped),
        })
    }
}

/// Where and how the server listens.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// `127.0.0.1:9559` by default (IANA's P4Runtime port, loopback only).
    pub listen: SocketAddr,
    /// The device id clients must name (`--device-id`; 1 by default, as the spec asks for a
    /// non-zero one; simple_switch_grpc's launcher uses 0).
    pub device_id: u64,
    /// The position the pipeline runs at.
    pub target: String,
    /// Stream channels open at once; one more is refused (RESOURCE_EXHAUSTED).
    pub max_streams: usize,
    /// Follow the spec's arbitration instead of BMv2's leniencies (see `arbitration`).
    pub strict: bool,
    /// The CPU port's number (`--cpu-port`): packets the program sends there are packet-ins,
    /// packet-outs arrive on it. 255 by default; 0 for none.
    pub cpu_port: u32,
    /// TLS (`[p4runtime.tls]`); without it, or without client certificates, the server
    /// listens on loopback only.
    pub tls: Option<TlsConfig>,
}

/// The server's TLS: its certificate chain and private key (PEM files), and, for mutual TLS,
/// the CA whose certificates clients must present.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    /// Clients without a certificate this CA signed are refused during the handshake.
    #[serde(default)]
    pub client_ca: Option<std::path::PathBuf>,
}

impl TlsConfig {
    /// The rustls configuration tonic serves with.
    fn server_config(&self) -> Result<tonic::transport::ServerTlsConfig, ServeError> {
        use tonic::transport::{Certificate, Identity, ServerTlsConfig};
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| ServeError::Tls(format!("{}: {e}", p.display())))
        };
        let identity = Identity::from_pem(read(&self.cert)?, read(&self.key)?);
        // A client that opens a connection and never finishes its handshake is dropped.
        let mut tls = ServerTlsConfig::new().identity(identity).timeout(Duration::from_secs(10));
        if let Some(ca) = &self.client_ca {
            tls = tls.client_ca_root(Certificate::from_pem(read(ca)?));
        }
        Ok(tls)
    }
}

impl ServerConfig {
    /// How it secures its connections, for start-up lines: ", TLS ...", or nothing.
    pub fn tls_label(&self) -> &'static str {
        match &self.tls {
            Some(TlsConfig { client_ca: Some(_), .. }) => ", TLS with client certificates",
            Some(_) => ", TLS",
            None => "",
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 9559)),
            device_id: 1,
            target: "pre".into(),
            max_streams: 16,
            strict: false,
            cpu_port: 255,
            tls: None,
        }
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "p4runtime listen address {0}: beyond loopback the server needs TLS with client \
         certificates (set [p4runtime.tls] cert, key and client_ca, or --grpc-server-ssl with \
         --grpc-server-cert, --grpc-server-key, --grpc-server-cacert and \
         --grpc-server-with-client-auth); or listen on 127.0.0.1 (or ::1)"
    )]
    NotLoopback(SocketAddr),
    #[error("p4runtime TLS: {0}")]
    Tls(String),
    #[error("p4runtime: cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("p4runtime: {0}")]
    Runtime(std::io::Error),
}

/// An error with its causes, `outer: inner: ...` (tonic's TLS errors name the cause only
/// in their source).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out = format!("{out}: {c}");
        cause = c.source();
    }
    out
}

/// A running P4Runtime server; dropping it stops it.
pub struct Server {
    addr: SocketAddr,
    stats: Arc<Stats>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Largest request accepted: a pipeline config carries a whole program and its P4Info.
const MAX_MESSAGE_BYTES: usize = 64 << 20;

impl Server {
    /// Start serving `dataplane` as `config` says.
    pub fn spawn(
        config: &ServerConfig,
        dataplane: Arc<dyn Dataplane>,
    ) -> Result<Server, ServeError> {
        // Beyond loopback, clients must prove who they are: TLS alone tells them who the
        // server is, and anyone who can reach the port could then drive the switch.
        let authenticated = config.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
        if !config.listen.ip().is_loopback() && !authenticated {
            return Err(ServeError::NotLoopback(config.listen));
        }
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = &config.tls {
            // Files are read and the certificate and key checked now: a bad one is a start-up
            // error, not a refused handshake later.
            builder = builder
                .tls_config(tls.server_config()?)
                .map_err(|e| ServeError::Tls(error_chain(&e)))?;
        }
        let bind = |source| ServeError::Bind { addr: config.listen, source };
        let listener = std::net::TcpListener::bind(config.listen).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let addr = listener.local_addr().map_err(bind)?;
        let stats = Arc::new(Stats::default());
        let service = service::Service::new(
            config.device_id,
            config.max_streams,
            config.strict,
            dataplane,
            Arc::clone(&stats),
        );
        let pump = service.packet_in_pump();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ServeError::Runtime)?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("hotplane-p4rt".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => return tracing::error!("p4runtime: {e}"),
                    };
                    tokio::spawn(service::pump_packet_ins(pump));
                    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
                    let svc = proto::p4::v1::p4_runtime_server::P4RuntimeServer::new(service)
                        .max_decoding_message_size(MAX_MESSAGE_BYTES)
                        .max_encoding_message_size(MAX_MESSAGE_BYTES);
                    let mut graceful = stopped.clone();
                    let served = builder.add_service(svc).serve_with_incoming_shutdown(
                        incoming,
                        async move {
                            let _ = graceful.changed().await;
                        },
                    );
                    // Connections get a second to finish; a client that keeps its stream open
                    // (or stopped reading) does not hold the shutdown longer.
                    let mut hard = stopped;
                    tokio::select! {
                        served = served => if let Err(e) = served {
                            tracing::error!("p4runtime server: {e}");
                        },
                        _ = async move {
                            let _ = hard.changed().await;
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        } => {}
                    }
                });
                // A compile or table write still running on a blocking thread is not waited
                // for: the data plane it works on is stopping too.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .map_err(ServeError::Runtime)?;
        let tls = config.tls_label();
        tracing::info!("P4Runtime server on {addr} (device id {}{tls})", config.device_id);
        Ok(Server { addr, stats, stop: Some(stop), thread: Some(thread) })
    }

    /// The address it listens on (the port, when the config asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The counters, shared (to report them with the data plane's: `Observability::add_source`).
    pub fn stats_handle(&self) -> Arc<Stats> {
        Arc::clone(&self.stats)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
