//! A running data plane: ports, workers, the control thread and the listeners, built from a
//! [`Config`] and the program kinds registered with [`EngineBuilder`]. The control socket, the
//! CLI, the demo, the benchmarks and the tests all drive it through the same API.

use crate::config::{Config, ConfigError, PortKind};
use crate::control::Control;
use crate::cpu_port::{CpuLink, CpuPort, CpuPortError};
use crate::kinds::{Kinds, KindsError};
use crate::observe::{Observability, PortObs};
use crate::registry::Registry;
use crate::servers::{self, ControlLink};
use crate::worker::{pin_to_cores, spare_cores, Worker, WorkerStats};
use crate::{metrics_http, socket_dir, state};
use crossbeam_queue::ArrayQueue;
use hotplane_control::api::{ClientError, Request, Response};
use hotplane_control::{Receiver, ReceiverConfig};
use hotplane_core::{KindError, KindMaker, KindSetup, Packet, Pool, Qsbr};
use hotplane_io::mem::MemHandle;
use hotplane_io::{OpenCtx, Port, PortStats};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Depth of the rings between workers and the control thread.
const RING_DEPTH: usize = 1024;

/// Why a data plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Kinds(#[from] KindsError),
    #[error(transparent)]
    Program(#[from] KindError),
    /// A port could not be opened (its message names the port).
    #[error(transparent)]
    Port(#[from] hotplane_io::PortError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {msg}")]
    Setup { what: String, msg: String },
}

fn setup(what: impl Into<String>, e: impl std::fmt::Display) -> EngineError {
    EngineError::Setup { what: what.into(), msg: e.to_string() }
}

fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, EngineError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|source| EngineError::Io { what: format!("thread {name}"), source })
}

/// The program kinds a data plane is started with.
#[derive(Clone, Default)]
pub struct EngineBuilder {
    kinds: Vec<KindMaker>,
}

impl EngineBuilder {
    /// Register a program kind (`hotplane_ebpf::kind::make`, ...).
    pub fn kind(mut self, make: KindMaker) -> Self {
        self.kinds.push(make);
        self
    }

    /// Start a data plane with the registered kinds.
    pub fn start(&self, cfg: Config) -> Result<Engine, EngineError> {
        Engine::start(cfg, &self.kinds)
    }
}

/// A running data plane.
pub struct Engine {
    registry: Arc<Registry>,
    obs: Arc<Observability>,
    link: ControlLink,
    stop_workers: Arc<AtomicBool>,
    stop_control: Arc<AtomicBool>,
    stop_servers: Arc<AtomicBool>,
    shutdown: Arc<AtomicBool>,
    control_busy: Arc<AtomicBool>,
    workers: Vec<JoinHandle<Vec<Box<dyn Port>>>>,
    worker_stats: Vec<Arc<WorkerStats>>,
    punts: Vec<Arc<ArrayQueue<Packet>>>,
    injects: Vec<Arc<ArrayQueue<Packet>>>,
    cpu: Arc<CpuLink>,
    pools: Vec<Pool>,
    nports: usize,
    control: Option<JoinHandle<()>>,
    servers: Vec<JoinHandle<()>>,
    mem: BTreeMap<String, MemHandle>,
}

/// Port totals after a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunSummary {
    pub ports: Vec<(String, PortStats)>,
    pub packets: u64,
    pub dropped: u64,
    pub no_route: u64,
    /// Workers or the control thread that died of a panic (a bug: always 0).
    pub panics: usize,
}

impl Engine {
    /// No kinds yet: add them with [`EngineBuilder::kind`].
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// Start a data plane running `cfg` with the program kinds `kinds`.
    pub fn start(cfg: Config, kinds: &[KindMaker]) -> Result<Self, EngineError> {
        cfg.validate()?;
        let keys = cfg.keys()?;
        let d = &cfg.dataplane;
        let n = d.workers;
        let qsbr = Qsbr::new();
        let kinds = Kinds::start(
            kinds,
            &KindSetup {
                workers: n,
                qsbr: &qsbr,
                base_dir: cfg.base_dir.as_deref(),
                sections: &cfg.sections,
            },
        )?;
        let pools: Vec<Pool> = (0..n)
            .map(|_| Pool::new(d.pool).map_err(|e| setup("dataplane.pool", e)))
            .collect::<Result<_, _>>()?;
        let mut per_worker: Vec<Vec<Box<dyn Port>>> = (0..n).map(|_| Vec::new()).collect();
        let mut port_obs = Vec::new();
        let mut mem = BTreeMap::new();
        for (i, pc) in cfg.ports.iter().enumerate() {
            let cx = OpenCtx { id: i as u16, name: pc.name(), pools: &pools, burst: d.batch };
            let what = || format!("port `{}`", pc.name());
            let queues = match &pc.kind {
                PortKind::Mem(spec) => {
                    let (q, h) = hotplane_io::mem::open(spec, &cx)?;
                    mem.insert(pc.name.clone(), h);
                    Ok(q)
                }
                PortKind::Pcap(spec) => hotplane_io::pcap::open(spec, &cx),
                PortKind::Afpacket(spec) => hotplane_io::afpacket::open(spec, &cx),
                PortKind::Afxdp(spec) => hotplane_io::afxdp::open(spec, &cx),
            }?;
            if queues.len() != n {
                return Err(setup(
                    what(),
                    format!("opened {} queues for {n} workers", queues.len()),
                ));
            }
            port_obs.push(PortObs {
                name: pc.name().to_string(),
                kind: pc.kind(),
                mode: queues.first().map(|q| q.mode()).unwrap_or_default(),
                queues: queues.iter().map(|q| q.counters()).collect(),
            });
            for (w, q) in queues.into_iter().enumerate() {
                per_worker[w].push(q);
            }
        }
        let default_out: Vec<u16> = cfg
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| p.peer().and_then(|peer| cfg.port_id(peer)).unwrap_or(i as u16))
            .collect();
        let registry = Arc::new(Registry::new(&cfg, &qsbr, kinds)?);
        let c = &cfg.control;
        let mut receiver = Receiver::new(
            ReceiverConfig {
                allow_unauthenticated: c.allow_unauthenticated,
                max_update_bytes: c.max_update_bytes,
                max_pending: c.max_pending,
                reassembly_timeout: Duration::from_millis(c.reassembly_timeout_ms),
            },
            keys,
        );
        // Read without following links, from a small regular file only (see `state`).
        let saved = match c.state_file.as_ref() {
            Some(path) => state::load(path)
                .map_err(|e| setup("control.state_file", e))?
                .map(|bytes| (path, bytes)),
            None => None,
        };
        if let Some((path, bytes)) = saved {
            let what = || format!("control.state_file {}", path.display());
            let v: serde_json::Value = serde_json::from_slice(&bytes)
                .map_err(|e| setup(what(), format!("not the JSON hotplane writes: {e}")))?;
            let seqs: BTreeMap<u32, u64> = serde_json::from_value(v["last_seq"].clone())
                .map_err(|e| setup(what(), format!("no `last_seq` map: {e}")))?;
            receiver.restore_sequences(&seqs);
        }
        let worker_stats: Vec<Arc<WorkerStats>> =
            (0..n).map(|_| Arc::new(WorkerStats::default())).collect();
        let cpu = Arc::new(CpuLink::new(n));
        let obs = Arc::new(Observability::new(
            port_obs,
            worker_stats.clone(),
            receiver.counters(),
            registry.clone(),
            cpu.clone(),
        ));
        let punts: Vec<_> = (0..n).map(|_| Arc::new(ArrayQueue::new(RING_DEPTH))).collect();
        let injects: Vec<_> = (0..n).map(|_| Arc::new(ArrayQueue::new(RING_DEPTH))).collect();
        let (tx, rx) = crossbeam_channel::unbounded();
        let stop_workers = Arc::new(AtomicBool::new(false));
        let stop_control = Arc::new(AtomicBool::new(false));
        let stop_servers = Arc::new(AtomicBool::new(false));
        let shutdown = Arc::new(AtomicBool::new(false));
        let control_busy = Arc::new(AtomicBool::new(false));
        let control = Control {
            registry: registry.clone(),
            receiver,
            punts: punts.clone(),
            injects: injects.clone(),
            pools: pools.clone(),
            requests: rx,
            stop: stop_control.clone(),
            shutdown: shutdown.clone(),
            busy: control_busy.clone(),
            obs: obs.clone(),
            state_file: c.state_file.clone(),
        };
        let spare = spare_cores(d.cores.as_deref());
        let control = spawn("hotplane-control".into(), move || {
            if let Some(cores) = spare {
                pin_to_cores(&cores);
            }
            control.run()
        })?;
        let link = ControlLink { tx, thread: control.thread().clone() };
        let own_addresses = Arc::new(crate::addresses::NodeAddresses::of_config(&cfg));
        let mut workers = Vec::with_capacity(n);
        for (w, ports) in per_worker.into_iter().enumerate() {
            let worker = Worker {
                id: w,
                core: d.cores.as_ref().map(|c| c[w]),
                ports,
                default_out: default_out.clone(),
                cache: pools[w].cache(512),
                slots: registry.workers[w].clone(),
                punt: punts[w].clone(),
                inject: injects[w].clone(),
                cpu: cpu.clone(),
                replicas: Vec::new(),
                stats: worker_stats[w].clone(),
                update_port: c.update_port,
                own_addresses: own_addresses.clone(),
                burst: d.batch,
                stop: stop_workers.clone(),
                idle: d.idle,
                control: Some(control.thread().clone()),
                qsbr: qsbr.clone(),
                tracer: obs.tracer.clone(),
                capturer: obs.capturer.clone(),
                capture_cache: Default::default(),
            };
            workers.push(spawn(format!("hotplane-w{w}"), move || worker.run())?);
        }
        let mut plane = Self {
            registry,
            obs,
            link,
            stop_workers,
            stop_control,
            stop_servers,
            shutdown,
            control_busy,
            workers,
            worker_stats,
            punts,
            injects,
            cpu,
            pools,
            nports: cfg.ports.len(),
            control: Some(control),
            servers: Vec::new(),
            mem,
        };
        // The kinds' watchdogs on a thread of their own: the control thread can be busy for a
        // while (a P4 compile), and a call stuck in Lua must end within its watchdog time and
        // one period. It outlives the workers at stop, so a stuck worker is stopped and joined.
        let watched: Vec<_> = plane
            .registry
            .kinds
            .all()
            .iter()
            .filter_map(|k| Some((k.clone(), k.watchdog_period()?)))
            .collect();
        if let Some(period) = watched.iter().map(|(_, p)| *p).min() {
            let stop_watchdog = plane.stop_servers.clone();
            plane.servers.push(spawn("hotplane-watchdog".into(), move || {
                while !stop_watchdog.load(Ordering::Relaxed) {
                    let now = hotplane_core::time::now_ns();
                    for (kind, _) in &watched {
                        kind.watchdog(now);
                    }
                    std::thread::sleep(period);
                }
            })?);
        }
        if let Some(path) = c.socket_path() {
            let group = c
                .socket_group
                .as_deref()
                .map(socket_dir::resolve_group)
                .transpose()
                .map_err(|e| setup("control.socket_group", e))?;
            let limits = servers::ApiLimits {
                max_connections: c.max_connections,
                max_request_bytes: c.request_limit(),
                idle_timeout: Duration::from_secs(c.idle_timeout_s),
            };
            let h = servers::serve_api(
                &path,
                group,
                limits,
                plane.link.clone(),
                plane.stop_servers.clone(),
            )
            .map_err(|e| setup("control.socket", e))?;
            plane.servers.push(h);
        }
        if let Some(addr) = &cfg.metrics.prometheus {
            let h = metrics_http::serve_metrics(
                addr,
                cfg.metrics.max_connections,
                plane.obs.clone(),
                plane.stop_servers.clone(),
            )
            .map_err(|source| EngineError::Io {
                what: format!("metrics.prometheus {addr}"),
                source,
            })?;
            plane.servers.push(h);
        }
        // Workers are up once each has registered with QSBR and started polling.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !plane.worker_stats.iter().all(|s| s.running.load(Ordering::Acquire)) {
            if Instant::now() > deadline {
                return Err(setup("dataplane.workers", "the workers did not start within 10 s"));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(plane)
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    pub fn observability(&self) -> &Arc<Observability> {
        &self.obs
    }

    pub fn worker_stats(&self) -> &[Arc<WorkerStats>] {
        &self.worker_stats
    }

    /// A handle to send control requests (what the API socket uses).
    pub fn link(&self) -> &ControlLink {
        &self.link
    }

    /// Submit a control request in-process: exactly what the control socket offers (see
    /// `hotplane_control::api::Request`), answered by the control thread.
    pub fn request(&self, req: Request) -> Response {
        self.link.call(req, Duration::from_secs(30))
    }

    /// Install the program `stage` describes at `target` (`pre`, `extern:fw`, `flow:...`) on
    /// every worker, replacing what is there; returns the new slot version.
    pub fn install(&self, target: &str, stage: &crate::StageSpec) -> Result<u64, ClientError> {
        let r = self.request(Request::Install {
            target: target.into(),
            worker: None,
            stage: stage.json().clone(),
        });
        r.into_result().map(|v| v["version"].as_u64().unwrap_or(0))
    }

    /// Empty `target` on every worker.
    pub fn remove(&self, target: &str) -> Result<u64, ClientError> {
        let r = self.request(Request::Remove { target: target.into(), worker: None });
        r.into_result().map(|v| v["version"].as_u64().unwrap_or(0))
    }

    /// Counters of ports, workers, slots, updates and every kind, as the `stats` request.
    pub fn stats(&self) -> Result<serde_json::Value, ClientError> {
        self.request(Request::Stats {}).into_result()
    }

    /// Switch `target` on every worker to the pre-defined program `id`; the new version.
    pub fn switch(&self, target: &str, id: u32) -> Result<u64, ClientError> {
        let r = self.request(Request::Switch { target: target.into(), worker: None, id });
        r.into_result().map(|v| v["version"].as_u64().unwrap_or(0))
    }

    /// Submit update-envelope datagrams, authenticated exactly as in-band ones; one
    /// acknowledgement (as JSON) per datagram.
    pub fn update(&self, datagrams: &[Vec<u8>]) -> Result<serde_json::Value, ClientError> {
        let fragments = datagrams.iter().map(hex::encode).collect();
        self.request(Request::Update { fragments }).into_result()
    }

    /// Every slot of every worker: target, program, version.
    pub fn slots(&self) -> Result<serde_json::Value, ClientError> {
        self.request(Request::Slots {}).into_result()
    }

    /// The flow-table entries of `worker`.
    pub fn flows(&self, worker: u16) -> Result<serde_json::Value, ClientError> {
        self.request(Request::Flows { worker: Some(worker) }).into_result()
    }

    /// Ask the process to stop (what `shutdown` on the control socket does); see
    /// [`Engine::shutdown_requested`]. [`Engine::stop`] stops the data plane itself.
    pub fn shutdown(&self) -> Result<serde_json::Value, ClientError> {
        self.request(Request::Shutdown {}).into_result()
    }

    /// Open the CPU port as number `port` (see [`CpuPort`]): the controller's way to send
    /// packets into the pipeline and take those programs send to `port`. One at a time; it
    /// closes when the returned handle is dropped.
    pub fn open_cpu_port(&self, port: u32) -> Result<CpuPort, CpuPortError> {
        CpuPort::open(self.cpu.clone(), self.pools.clone(), port, self.nports)
    }

    /// The handle of a `mem` port, to inject frames and read its report after `stop`.
    pub fn mem(&self, name: &str) -> Option<&MemHandle> {
        self.mem.get(name)
    }

    pub fn mem_handles(&self) -> Vec<MemHandle> {
        self.mem.values().cloned().collect()
    }

    /// Whether a `shutdown` request was received.
    pub fn shutdown_requested(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// True when every finite input is exhausted and nothing is left in flight: no punted
    /// update, no queued acknowledgement, no request being handled.
    pub fn drained(&self) -> bool {
        let quiet = || {
            self.worker_stats.iter().all(|w| w.inputs_done.load(Ordering::Acquire))
                && self.punts.iter().all(|p| p.is_empty())
                && self.injects.iter().all(|p| p.is_empty())
                && self.cpu.is_idle()
                && !self.control_busy.load(Ordering::Acquire)
                && self.link.tx.is_empty()
        };
        if !quiet() {
            return false;
        }
        // Each worker must complete two more empty polls, so nothing it held is unsent; and
        // that twice over: after the first round every worker has handed on what it held (a
        // follower's transmit queued on a software-RSS ring for the port's owner), after the
        // second the owner has polled twice since, so it sent it.
        for _ in 0..2 {
            let idle_before: Vec<u64> =
                self.worker_stats.iter().map(|w| w.idle_polls.get()).collect();
            let deadline = Instant::now() + Duration::from_millis(500);
            loop {
                let moved = self
                    .worker_stats
                    .iter()
                    .zip(&idle_before)
                    .all(|(w, b)| w.idle_polls.get() >= b + 2);
                if moved {
                    break;
                }
                if Instant::now() >= deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        quiet()
    }

    /// Wait until `drained()` or the timeout; returns whether it drained.
    pub fn wait_drained(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.drained() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    /// Stop workers (their ports are dropped, publishing `mem` reports), then the control
    /// thread and listeners.
    pub fn stop(mut self) -> RunSummary {
        self.stop_workers.store(true, Ordering::Release);
        let mut panics = 0;
        for h in self.workers.drain(..) {
            match h.join() {
                Ok(ports) => drop(ports),
                Err(_) => {
                    tracing::error!("a worker panicked");
                    panics += 1;
                }
            }
        }
        self.stop_control.store(true, Ordering::Release);
        if let Some(c) = self.control.take() {
            c.thread().unpark();
            if c.join().is_err() {
                tracing::error!("the control thread panicked");
                panics += 1;
            }
        }
        self.stop_servers.store(true, Ordering::Release);
        for h in self.servers.drain(..) {
            let _ = h.join();
        }
        let ports = self.obs.ports.iter().map(|p| (p.name.clone(), p.totals())).collect();
        RunSummary {
            ports,
            packets: self.worker_stats.iter().map(|w| w.packets.get()).sum(),
            dropped: self.worker_stats.iter().map(|w| w.dropped.get()).sum(),
            no_route: self.worker_stats.iter().map(|w| w.no_route.get()).sum(),
            panics,
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // `stop` consumed the handles; a plane dropped without it still shuts down cleanly.
        self.stop_workers.store(true, Ordering::Release);
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
        self.stop_control.store(true, Ordering::Release);
        if let Some(c) = self.control.take() {
            c.thread().unpark();
            let _ = c.join();
        }
        self.stop_servers.store(true, Ordering::Release);
        for h in self.servers.drain(..) {
            let _ = h.join();
        }
    }
}
