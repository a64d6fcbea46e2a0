//! What a running data plane reports: counters per port, per worker and per slot, update
//! outcomes by reason, and update latency (HdrHistogram), as JSON for the control API and as
//! Prometheus text.

use crate::cpu_port::{CpuCounters, CpuLink};
use crate::registry::Registry;
use crate::worker::{WorkerStats, TRACKED};
use hdrhistogram::Histogram;
use hotplane_control::receiver::UpdateCounters;
use hotplane_control::Reason;
use hotplane_io::{PortCounters, PortStats};
use serde_json::{json, Value};
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct PortObs {
    pub name: String,
    pub kind: &'static str,
    /// How it runs where it could run several ways (`generic (SKB) XDP, copy`; `Port::mode`).
    pub mode: String,
    pub queues: Vec<Arc<PortCounters>>,
}

impl PortObs {
    pub fn totals(&self) -> PortStats {
        let mut t = PortStats::default();
        for q in &self.queues {
            t += q.snapshot();
        }
        t
    }
}

/// A service's statistics, as a JSON object.
pub type StatsSource = Arc<dyn Fn() -> Value + Send + Sync>;

pub struct Observability {
    pub ports: Vec<PortObs>,
    pub workers: Vec<Arc<WorkerStats>>,
    pub updates: Arc<UpdateCounters>,
    pub registry: Arc<Registry>,
    cpu: Arc<CpuLink>,
    /// Services next to the data plane (the P4Runtime server) and their statistics.
    sources: Mutex<Vec<(String, StatsSource)>>,
    apply_latency: Mutex<Histogram<u64>>,
    started: Instant,
    /// `hotplane trace`: which packets the workers follow, and what they found.
    pub tracer: Arc<crate::trace::Tracer>,
    /// `hotplane capture`: which packets the workers copy, and the copies.
    pub capturer: Arc<crate::capture::Capturer>,
}

impl Observability {
    pub(crate) fn new(
        ports: Vec<PortObs>,
        workers: Vec<Arc<WorkerStats>>,
        updates: Arc<UpdateCounters>,
        registry: Arc<Registry>,
        cpu: Arc<CpuLink>,
    ) -> Self {
        Self {
            ports,
            workers,
            updates,
            registry,
            cpu,
            sources: Mutex::default(),
            apply_latency: Mutex::new(
                Histogram::new_with_bounds(1, 60_000_000_000, 3)
                    .expect("static histogram bounds are valid"),
            ),
            started: Instant::now(),
            tracer: Arc::default(),
            capturer: Arc::default(),
        }
    }

    /// Report `name`'s statistics (a JSON object) with the data plane's: under `name` in
    /// `stats`, and each top-level number as `hotplane_NAME_KEY` in Prometheus.
    pub fn add_source(&self, name: &str, source: StatsSource) {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        sources.retain(|(n, _)| n != name);
        sources.push((name.to_string(), source));
    }

    /// Stop reporting `name`.
    pub fn remove_source(&self, name: &str) {
        self.sources.lock().unwrap_or_else(|e| e.into_inner()).retain(|(n, _)| n != name);
    }

    fn source_values(&self) -> Vec<(String, Value)> {
        // Called without the lock held: a source may itself read the statistics.
        let sources: Vec<(String, StatsSource)> =
            self.sources.lock().unwrap_or_else(|e| e.into_inner()).clone();
        sources.into_iter().map(|(n, f)| (n, f())).collect()
    }

    /// Time from an update's last datagram to its installation.
    pub fn record_apply(&self, d: Duration) {
        let mut h = self.apply_latency.lock().unwrap_or_else(|e| e.into_inner());
        let _ = h.record((d.as_nanos() as u64).max(1));
    }

    fn apply_quantiles(&self) -> (u64, u64, u64) {
        let h = self.apply_latency.lock().unwrap_or_else(|e| e.into_inner());
        (h.len(), h.value_at_quantile(0.5), h.value_at_quantile(0.99))
    }

    pub fn stats_json(&self) -> Value {
        let ports: Vec<Value> = self
            .ports
            .iter()
            .map(|p| {
                let mut v = serde_json::to_value(p.totals()).unwrap_or(Value::Null);
                v["name"] = json!(p.name);
                v["kind"] = json!(p.kind);
                if !p.mode.is_empty() {
                    v["mode"] = json!(p.mode);
                }
                v
            })
            .collect();
        let workers: Vec<Value> = self
            .workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let versions: serde_json::Map<String, Value> = TRACKED
                    .iter()
                    .enumerate()
                    .map(|(j, t)| (t.to_string(), json!(w.seen_version[j].get())))
                    .collect();
                json!({
                    "worker": i,
                    "running": w.running.load(Ordering::Relaxed),
                    "batches": w.batches.get(),
                    "packets": w.packets.get(),
                    "dropped": w.dropped.get(),
                    "punted": w.punted.get(),
                    "punt_overflow": w.punt_overflow.get(),
                    "no_route": w.no_route.get(),
                    "injected": w.injected.get(),
                    "replicated": w.replicated.get(),
                    "idle_polls": w.idle_polls.get(),
                    "program_panics": w.panics.get(),
                    "running_versions": versions,
                })
            })
            .collect();
        let u = &self.updates;
        let (n, p50, p99) = self.apply_quantiles();
        let c = &self.cpu.counters;
        let mut v = json!({
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "ports": ports,
            "workers": workers,
            "updates": {
                "datagrams": u.datagrams.load(Ordering::Relaxed),
                "completed": u.completed.load(Ordering::Relaxed),
                "partial": u.partial.load(Ordering::Relaxed),
                "refused": u.refused_by_reason(),
                "applied_count": n,
                "apply_us_p50": p50 as f64 / 1000.0,
                "apply_us_p99": p99 as f64 / 1000.0,
            },
            "cpu_port": {
                "port": self.cpu.port(),
                "to_controller": c.to_controller.load(Ordering::Relaxed),
                "to_controller_dropped": c.to_controller_dropped.load(Ordering::Relaxed),
                "from_controller": c.from_controller.load(Ordering::Relaxed),
                "from_controller_refused": c.from_controller_refused.load(Ordering::Relaxed),
            },
            "targets": self.registry.target_stats(),
            "slots": self.registry.slots(),
        });
        for (name, value) in self.source_values() {
            // Never in place of the data plane's own figures.
            if v.get(&name).is_none() {
                v[name] = value;
            }
        }
        v
    }

    pub fn prometheus(&self) -> String {
        let mut s = String::new();
        let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, String)>| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, v) in rows {
                let _ = writeln!(s, "{name}{labels} {v}");
            }
        };
        let port_metric = |f: fn(&PortStats) -> u64| -> Vec<(String, String)> {
            self.ports
                .iter()
                .map(|p| {
                    (
                        format!("{{port=\"{}\",kind=\"{}\"}}", p.name, p.kind),
                        f(&p.totals()).to_string(),
                    )
                })
                .collect()
        };
        family(
            "hotplane_port_rx_packets_total",
            "counter",
            "Packets received.",
            port_metric(|t| t.rx_packets),
        );
        family(
            "hotplane_port_rx_bytes_total",
            "counter",
            "Bytes received.",
            port_metric(|t| t.rx_bytes),
        );
        family(
            "hotplane_port_rx_dropped_total",
            "counter",
            "Packets lost on receive (no buffer, ring full).",
            port_metric(|t| t.rx_dropped),
        );
        family(
            "hotplane_port_tx_packets_total",
            "counter",
            "Packets transmitted.",
            port_metric(|t| t.tx_packets),
        );
        family(
            "hotplane_port_tx_bytes_total",
            "counter",
            "Bytes transmitted.",
            port_metric(|t| t.tx_bytes),
        );
        family(
            "hotplane_port_tx_dropped_total",
            "counter",
            "Packets the port could not transmit.",
            port_metric(|t| t.tx_dropped),
        );
        family(
            "hotplane_port_errors_total",
            "counter",
            "Malformed input and I/O errors.",
            port_metric(|t| t.errors),
        );
        family(
            "hotplane_port_up",
            "gauge",
            "1 while the port's interface is there.",
            port_metric(|t| 1 - t.link_down.min(1)),
        );
        let worker_metric = |f: fn(&WorkerStats) -> u64| -> Vec<(String, String)> {
            self.workers
                .iter()
                .enumerate()
                .map(|(i, w)| (format!("{{worker=\"{i}\"}}"), f(w).to_string()))
                .collect()
        };
        family(
            "hotplane_worker_packets_total",
            "counter",
            "Packets processed.",
            worker_metric(|w| w.packets.get()),
        );
        family(
            "hotplane_worker_batches_total",
            "counter",
            "Batches processed.",
            worker_metric(|w| w.batches.get()),
        );
        family(
            "hotplane_worker_dropped_total",
            "counter",
            "Packets dropped by programs.",
            worker_metric(|w| w.dropped.get()),
        );
        family(
            "hotplane_worker_no_route_total",
            "counter",
            "Packets sent to a port that does not exist.",
            worker_metric(|w| w.no_route.get()),
        );
        family(
            "hotplane_worker_punted_total",
            "counter",
            "In-band update packets handed to the control thread.",
            worker_metric(|w| w.punted.get()),
        );
        family(
            "hotplane_worker_punt_overflow_total",
            "counter",
            "In-band update packets dropped: control ring full.",
            worker_metric(|w| w.punt_overflow.get()),
        );
        let cpu = |f: fn(&CpuCounters) -> &std::sync::atomic::AtomicU64| {
            vec![(String::new(), f(&self.cpu.counters).load(Ordering::Relaxed).to_string())]
        };
        family(
            "hotplane_cpu_port_to_controller_total",
            "counter",
            "Packets programs sent to the controller through the CPU port.",
            cpu(|c| &c.to_controller),
        );
        family(
            "hotplane_cpu_port_to_controller_dropped_total",
            "counter",
            "Packets for the controller dropped: its ring was full.",
            cpu(|c| &c.to_controller_dropped),
        );
        family(
            "hotplane_cpu_port_from_controller_total",
            "counter",
            "Packets the controller sent into the pipeline.",
            cpu(|c| &c.from_controller),
        );
        let mut running = Vec::new();
        for (i, w) in self.workers.iter().enumerate() {
            for (j, t) in TRACKED.iter().enumerate() {
                running.push((
                    format!("{{worker=\"{i}\",slot=\"{t}\"}}"),
                    w.seen_version[j].get().to_string(),
                ));
            }
        }
        family(
            "hotplane_worker_running_version",
            "gauge",
            "Slot version the worker last ran.",
            running,
        );
        let slots = self
            .registry
            .slots()
            .into_iter()
            .map(|s| {
                (
                    format!("{{worker=\"{}\",target=\"{}\"}}", s.worker, s.target),
                    s.version.to_string(),
                )
            })
            .collect();
        family("hotplane_slot_version", "gauge", "Published version of each slot.", slots);
        let u = &self.updates;
        family(
            "hotplane_update_datagrams_total",
            "counter",
            "Update datagrams received.",
            vec![(String::new(), u.datagrams.load(Ordering::Relaxed).to_string())],
        );
        family(
            "hotplane_updates_completed_total",
            "counter",
            "Updates authenticated and reassembled.",
            vec![(String::new(), u.completed.load(Ordering::Relaxed).to_string())],
        );
        family(
            "hotplane_updates_refused_total",
            "counter",
            "Update datagrams or updates refused, by reason.",
            Reason::ALL
                .iter()
                .map(|r| (format!("{{reason=\"{}\"}}", r.as_str()), u.refused(*r).to_string()))
                .collect(),
        );
        let mut applied = Vec::new();
        let mut refused = Vec::new();
        for (t, st) in self.registry.target_stats() {
            applied.push((format!("{{target=\"{}\"}}", escape(&t)), st.applied.to_string()));
            for (r, n) in st.refused {
                refused
                    .push((format!("{{target=\"{}\",reason=\"{r}\"}}", escape(&t)), n.to_string()));
            }
        }
        family(
            "hotplane_target_updates_applied_total",
            "counter",
            "Updates applied, per target.",
            applied,
        );
        family(
            "hotplane_target_updates_refused_total",
            "counter",
            "Updates refused after authentication, per target and reason.",
            refused,
        );
        let (n, p50, p99) = self.apply_quantiles();
        family(
            "hotplane_update_apply_seconds",
            "summary",
            "Time from an update's last datagram to its installation.",
            vec![
                ("{quantile=\"0.5\"}".into(), format!("{:.9}", p50 as f64 / 1e9)),
                ("{quantile=\"0.99\"}".into(), format!("{:.9}", p99 as f64 / 1e9)),
                // Label text is appended to the name: this row is `..._seconds_count N`.
                ("_count".into(), n.to_string()),
            ],
        );
        for kind in self.registry.kinds.all() {
            // Every number a kind reports in `stats` is a metric too (untyped: the kind's
            // statistics mix counters and gauges), then whatever families it writes itself.
            if let Some(Value::Object(stats)) = kind.stats() {
                for (key, v) in stats.iter().filter(|(_, v)| v.is_number()) {
                    let name = format!("hotplane_{}_{}", kind.name(), metric_name(key));
                    let help = format!("`{key}` of the {} kind's statistics.", kind.name());
                    family(&name, "untyped", &help, vec![(String::new(), v.to_string())]);
                }
            }
        }
        for (source, value) in self.source_values() {
            if let Value::Object(stats) = value {
                for (key, v) in stats.iter().filter(|(_, v)| v.is_number()) {
                    let name = format!("hotplane_{}_{}", metric_name(&source), metric_name(key));
                    let help = format!("`{key}` of {source}'s statistics.");
                    family(&name, "untyped", &help, vec![(String::new(), v.to_string())]);
                }
            }
        }
        for kind in self.registry.kinds.all() {
            kind.prometheus(&mut s);
        }
        s
    }
}

/// A statistics key as a Prometheus metric name: letters, digits and underscores.
fn metric_name(key: &str) -> String {
    key.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}
