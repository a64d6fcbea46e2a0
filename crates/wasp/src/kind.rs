//! WASP as a program kind of the engine: the `[wasp]` section (the node and its stores), the
//! `{"stage": "wasp"}` spec, the `wasp-get` control operation, statistics, and the stores'
//! expiry on the control thread.
//!
//! The stores live here, not in a stage: a stage built again with other settings (another
//! `on_fault`, another UDP port) finds the same stores, so replacing it while packets flow
//! loses no entry.

use crate::admin::{AdminKey, AdminKeys};
use crate::error::{Fault, Reject};
use crate::ess::{Ess, EssConfig, EssStats};
use crate::ess::{Quota, StoreKey};
use crate::filter::{AggregateBy, FilterConfig, OnFault};
use crate::stage::{Counters, Node, StoreBy, WaspStage};
use crate::wire::DEFAULT_UDP_PORT;
use hotplane_core::{BuildCx, KindError, KindSetup, Program, ProgramKind};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Expired entries each shard of each store may reclaim per housekeeping pass.
const EXPIRE_BUDGET_PER_SHARD: usize = 256;

/// How far behind this node's clock an admin packet's sequence number (microseconds since the
/// Unix epoch) may be when the first one of its key reaches a new store.
pub const ADMIN_SEQUENCE_WINDOW_US: u64 = 60_000_000;

/// The lowest sequence number a new store's admin ring accepts: now less the window.
fn admin_sequence_floor() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_micros() as u64).saturating_sub(ADMIN_SEQUENCE_WINDOW_US)
}

/// `[wasp]`: who the node is and how big its stores are.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaspSection {
    /// The node id programs read as `e.node_id` (default 0).
    #[serde(default)]
    pub node_id: u64,
    /// The node address programs read (`e.addr_hi`, `e.addr_lo`; IPv4 is IPv4-mapped).
    #[serde(default)]
    pub address: Option<IpAddr>,
    /// Entries per store (default 65536).
    #[serde(default)]
    pub capacity: Option<usize>,
    /// Lifetime of an entry from its creation (the seed's tau; default 10 000 ms).
    #[serde(default)]
    pub lifetime_ms: Option<u64>,
    /// Longest probe for a key (default 8).
    #[serde(default)]
    pub max_probe: Option<usize>,
    /// Entries that may use more than the first word of their bank (`map`), percent of the
    /// capacity (default 12).
    #[serde(default)]
    pub wide_percent: Option<u8>,
    /// Keys admin packets are authenticated with (`[{ id = 1, key = "64 hex digits" }]`);
    /// without any, admin packets are refused.
    #[serde(default)]
    pub admin_keys: Vec<AdminKeySpec>,
    /// Per-aggregate quota: `{ above_percent = 50, share_percent = 10 }` (the default);
    /// `above_percent = 100` turns quotas off.
    #[serde(default)]
    pub quota: Option<QuotaSpec>,
    /// What an aggregate is: `{ ipv4_prefix = 24, ipv6_prefix = 48 }` (the default).
    #[serde(default)]
    pub aggregate: Option<AggregateSpec>,
    /// The compiled tier: programs a worker has run `jit_after` times are compiled to machine
    /// code on the control thread (default on where hotplane is built with it).
    #[serde(default)]
    pub jit: Option<bool>,
    /// Runs of a program (per worker) before it is compiled (default [`JIT_AFTER`]).
    #[serde(default)]
    pub jit_after: Option<u32>,
}

/// Runs of a program on one worker before it is compiled, by default. Compiling takes a few
/// hundred microseconds and saves a few nanoseconds per packet at most (`hotplane bench wasp`,
/// `break_even_packets`: 10^5 packets and more), so only programs that stay hot are worth it.
pub const JIT_AFTER: u32 = 10_000;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminKeySpec {
    pub id: u32,
    /// 32 bytes as 64 hex digits.
    pub key: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaSpec {
    pub above_percent: u8,
    pub share_percent: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregateSpec {
    pub ipv4_prefix: u8,
    pub ipv6_prefix: u8,
}

/// A 64-hex-digit key.
fn parse_admin_key(spec: &AdminKeySpec) -> Result<AdminKey, KindError> {
    let text = spec.key.trim();
    let bad = || {
        KindError::Invalid(format!(
            "[wasp] admin key {}: the key must be 32 bytes as 64 hex digits",
            spec.id
        ))
    };
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    if key == [0; 32] {
        return Err(KindError::Invalid(format!("[wasp] admin key {}: an all-zero key", spec.id)));
    }
    Ok(key)
}

impl WaspSection {
    fn store_config(&self) -> Result<EssConfig, KindError> {
        let defaults = EssConfig::default();
        let config = EssConfig {
            capacity: self.capacity.unwrap_or(defaults.capacity),
            lifetime_ns: match self.lifetime_ms {
                None => defaults.lifetime_ns,
                Some(ms) => ms.checked_mul(1_000_000).ok_or_else(|| {
                    KindError::Invalid(format!("[wasp] lifetime_ms = {ms}: too long"))
                })?,
            },
            max_probe: self.max_probe.unwrap_or(defaults.max_probe),
            wide_percent: self.wide_percent.unwrap_or(defaults.wide_percent),
            ..defaults
        };
        // Check it now, at start, rather than when the first stage needs a store.
        Ess::new(&config).map_err(|e| KindError::Invalid(format!("[wasp]: {e}")))?;
        Ok(config)
    }

    /// The compiled tier's queue and threshold, if it is on.
    #[cfg(feature = "jit")]
    fn jit(&self) -> Result<Option<(Arc<crate::jit::CompileQueue>, u32)>, KindError> {
        let after = self.jit_after.unwrap_or(JIT_AFTER);
        if after == 0 {
            return Err(KindError::Invalid("[wasp] jit_after: at least 1 run".into()));
        }
        Ok((self.jit != Some(false)).then(|| (Arc::default(), after)))
    }

    #[cfg(not(feature = "jit"))]
    fn jit(&self) -> Result<Option<((), u32)>, KindError> {
        if self.jit == Some(true) {
            return Err(KindError::Invalid(
                "[wasp] jit = true: this hotplane is built without the compiled tier (feature \
                 `jit` of hotplane-wasp)"
                    .into(),
            ));
        }
        Ok(None)
    }

    fn admin_keys(&self) -> Result<Vec<(u32, AdminKey)>, KindError> {
        let keys: Vec<(u32, AdminKey)> = self
            .admin_keys
            .iter()
            .map(|k| Ok((k.id, parse_admin_key(k)?)))
            .collect::<Result<_, KindError>>()?;
        // Checked now, at start; each store gets its own ring (its own replay state).
        AdminKeys::new(keys.clone()).map_err(|e| KindError::Invalid(format!("[wasp]: {e}")))?;
        Ok(keys)
    }

    fn filter(&self) -> Result<FilterConfig, KindError> {
        let mut filter = FilterConfig::default();
        if let Some(q) = self.quota {
            if q.share_percent == 0 || q.share_percent > 100 {
                return Err(KindError::Invalid("[wasp] quota.share_percent: 1 to 100".into()));
            }
            filter.quota = Quota { above_percent: q.above_percent, share_percent: q.share_percent };
        }
        if let Some(a) = self.aggregate {
            if a.ipv4_prefix > 32 || a.ipv6_prefix > 64 {
                return Err(KindError::Invalid(
                    "[wasp] aggregate: ipv4_prefix <= 32, ipv6_prefix <= 64".into(),
                ));
            }
            filter.aggregate =
                AggregateBy { ipv4_prefix: a.ipv4_prefix, ipv6_prefix: a.ipv6_prefix };
        }
        Ok(filter)
    }

    fn node(&self) -> Node {
        let addr = match self.address {
            None => [0; 16],
            Some(IpAddr::V4(v4)) => crate::vpu::Env::ipv4_mapped(v4.octets()),
            Some(IpAddr::V6(v6)) => v6.octets(),
        };
        Node { id: self.node_id, addr }
    }
}

/// `{"stage": "wasp", ...}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case", deny_unknown_fields)]
enum WaspSpec {
    Wasp {
        /// `in-port` (default: an input filter, at `pre`), `out-port` (an output filter, at
        /// `post`) or `node`.
        #[serde(default)]
        store: Option<String>,
        /// `drop` (default) or `forward-flagged`.
        #[serde(default)]
        on_fault: Option<String>,
        /// UDP destination port of the UDP carriage (default 9277; 0 turns it off).
        #[serde(default)]
        udp_port: Option<u16>,
    },
}

/// A store and the admin verifier (with its replay state) of the packets that reach it.
#[derive(Clone)]
struct Store {
    ess: Arc<Ess>,
    admin: Option<Arc<AdminKeys>>,
}

/// The stores of one data plane, by name (`in:p0`, `out:p1`, `node`).
type Stores = BTreeMap<String, Store>;

/// WASP for one data plane.
pub struct WaspKind {
    store_config: EssConfig,
    admin_keys: Vec<(u32, AdminKey)>,
    /// Quota and aggregates of every stage (`on_fault` and `admin` are set per stage/store).
    filter: FilterConfig,
    node: Node,
    stores: Mutex<Stores>,
    counters: Arc<Counters>,
    #[cfg(feature = "jit")]
    jit: Option<(Arc<crate::jit::CompileQueue>, u32)>,
}

/// Make the WASP kind from the `[wasp]` section (all of it optional).
pub fn make(setup: &KindSetup<'_>) -> Result<Arc<dyn ProgramKind>, KindError> {
    Ok(Arc::new(WaspKind::new(setup)?))
}

impl WaspKind {
    pub fn new(setup: &KindSetup<'_>) -> Result<Self, KindError> {
        let section: WaspSection = setup.section("wasp")?.unwrap_or_default();
        #[cfg_attr(not(feature = "jit"), allow(unused_variables))]
        let jit = section.jit()?;
        Ok(Self {
            #[cfg(feature = "jit")]
            jit,
            store_config: section.store_config()?,
            admin_keys: section.admin_keys()?,
            filter: section.filter()?,
            node: section.node(),
            stores: Mutex::new(BTreeMap::new()),
            counters: Arc::default(),
        })
    }

    /// The store named `name`, made on first use.
    fn store(&self, stores: &mut Stores, name: String) -> Result<Store, KindError> {
        if let Some(store) = stores.get(&name) {
            return Ok(store.clone());
        }
        let ess = Ess::new(&self.store_config)
            .map_err(|e| KindError::Invalid(format!("store {name}: {e}")))?;
        let admin = if self.admin_keys.is_empty() {
            None
        } else {
            let ring = AdminKeys::new(self.admin_keys.iter().copied())
                .map_err(|e| KindError::Invalid(format!("store {name}: {e}")))?;
            Some(Arc::new(ring.with_floor(admin_sequence_floor())))
        };
        let store = Store { ess: Arc::new(ess), admin };
        stores.insert(name, store.clone());
        Ok(store)
    }

    fn stores(&self) -> std::sync::MutexGuard<'_, Stores> {
        self.stores.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counters of every stage and the stores' statistics, summed.
    pub fn snapshot(&self) -> (crate::stage::CounterSnapshot, EssStats, usize) {
        let stores = self.stores();
        let mut sum = EssStats::default();
        for store in stores.values() {
            let s = store.ess.stats();
            sum.live += s.live;
            sum.inserts += s.inserts;
            sum.updates += s.updates;
            sum.refused_full += s.refused_full;
            sum.refused_probe += s.refused_probe;
            sum.refused_quota += s.refused_quota;
            sum.expired += s.expired;
            sum.max_probe_seen = sum.max_probe_seen.max(s.max_probe_seen);
        }
        (self.counters.snapshot(), sum, stores.len())
    }

    fn get(&self, request: &Value) -> Result<Value, KindError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Get {
            #[allow(dead_code)]
            op: String,
            store: String,
            key: u64,
            #[serde(default)]
            scope: Option<String>,
        }
        let get = Get::deserialize(request).map_err(|e| KindError::Invalid(e.to_string()))?;
        let stores = self.stores();
        let store = stores.get(&get.store).ok_or_else(|| {
            let names: Vec<&str> = stores.keys().map(String::as_str).collect();
            KindError::Invalid(format!(
                "no store `{}` (stores: {})",
                get.store,
                if names.is_empty() { "none yet".into() } else { names.join(", ") }
            ))
        })?;
        let key = match get.scope.as_deref() {
            None | Some("public") => StoreKey::public(get.key),
            Some("protected") => StoreKey::protected(get.key),
            Some(other) => {
                return Err(KindError::Invalid(format!(
                    "scope `{other}`: public or protected (private entries are reachable only \
                     by the code that made them)"
                )))
            }
        };
        let now = hotplane_core::time::now_ns();
        Ok(match store.ess.get_scoped(key, now) {
            None => json!({"present": false}),
            Some(bank) => {
                let words: Vec<u64> = bank
                    .chunks_exact(8)
                    .map(|w| u64::from_be_bytes(w.try_into().unwrap_or_default()))
                    .collect();
                json!({"present": true, "words": words})
            }
        })
    }
}

impl ProgramKind for WaspKind {
    fn name(&self) -> &'static str {
        "wasp"
    }

    fn sections(&self) -> &'static [&'static str] {
        &["wasp"]
    }

    fn stages(&self) -> &'static [&'static str] {
        &["wasp"]
    }

    fn node_files(&self, _spec: &Value) -> Option<&'static str> {
        None // the programs come in the packets
    }

    fn build(&self, spec: &Value, cx: &BuildCx<'_>) -> Result<Program, KindError> {
        let WaspSpec::Wasp { store, on_fault, udp_port } = WaspSpec::deserialize(spec)
            .map_err(|e| KindError::Invalid(format!("stage spec: {e}")))?;
        let store_by = match store.as_deref() {
            None | Some("in-port") => StoreBy::InPort,
            Some("out-port") => StoreBy::OutPort,
            Some("node") => StoreBy::Node,
            Some(other) => {
                return Err(KindError::Invalid(format!(
                    "store = \"{other}\": one of in-port, out-port, node"
                )))
            }
        };
        let on_fault = match on_fault.as_deref() {
            None | Some("drop") => OnFault::Drop,
            Some("forward-flagged") => OnFault::ForwardFlagged,
            Some(other) => {
                return Err(KindError::Invalid(format!(
                    "on_fault = \"{other}\": one of drop, forward-flagged"
                )))
            }
        };
        let udp_port = match udp_port {
            None => Some(DEFAULT_UDP_PORT),
            Some(0) => None,
            Some(port) => Some(port),
        };
        let names: Vec<String> = match store_by {
            StoreBy::Node => vec!["node".into()],
            StoreBy::InPort => cx.port_names.iter().map(|p| format!("in:{p}")).collect(),
            StoreBy::OutPort => cx.port_names.iter().map(|p| format!("out:{p}")).collect(),
        };
        let mut stores = self.stores();
        let stores: Vec<Store> =
            names.iter().map(|n| self.store(&mut stores, n.clone())).collect::<Result<_, _>>()?;
        let stores: Vec<(Arc<Ess>, FilterConfig)> = stores
            .into_iter()
            .map(|store| {
                let filter = FilterConfig { on_fault, admin: store.admin, ..self.filter.clone() };
                (store.ess, filter)
            })
            .collect();
        let describe = format!(
            "wasp (stores {}, on_fault {}, udp {})",
            names.join(" "),
            match on_fault {
                OnFault::Drop => "drop",
                OnFault::ForwardFlagged => "forward-flagged",
            },
            udp_port.map_or("off".into(), |p| p.to_string()),
        );
        Ok(Some(Arc::new(WaspStage {
            store_by,
            stores: stores.into(),
            udp_port,
            node: self.node,
            counters: self.counters.clone(),
            describe,
            #[cfg(feature = "jit")]
            jit: self.jit.clone(),
        })))
    }

    fn ops(&self) -> &'static [&'static str] {
        &["wasp-get"]
    }

    fn request(&self, _op: &str, request: &Value) -> Result<Value, KindError> {
        self.get(request)
    }

    fn stats(&self) -> Option<Value> {
        let (c, s, stores) = self.snapshot();
        let mut out = Map::new();
        let mut put = |k: &str, v: u64| {
            out.insert(k.into(), json!(v));
        };
        put("packets", c.packets);
        put("forwarded", c.forwarded);
        put("dropped", c.dropped);
        put("returned", c.returned);
        put("passed_faulted", c.passed_faulted);
        put("not_wasp", c.not_wasp);
        put("no_store", c.no_store);
        put("steps", c.steps);
        put("cache_hits", c.cache_hits);
        put("cache_misses", c.cache_misses);
        put("compiled_runs", c.compiled_runs);
        #[cfg(feature = "jit")]
        if let Some((queue, _)) = &self.jit {
            let j = queue.stats();
            put("jit_compiled", j.compiled);
            put("jit_failed", j.failed);
            put("jit_compile_us", j.compile_ns / 1000);
        }
        put("stores", stores as u64);
        put("live_entries", s.live);
        put("inserts", s.inserts);
        put("updates", s.updates);
        put("refused_full", s.refused_full);
        put("refused_probe", s.refused_probe);
        put("refused_quota", s.refused_quota);
        put("expired", s.expired);
        put("max_probe_seen", s.max_probe_seen);
        put("rejected", c.rejected.iter().sum());
        put("faulted", c.faults.iter().sum());
        for (reason, n) in Reject::ALL.iter().zip(c.rejected) {
            put(&format!("rejected_{}", reason.name()), n);
        }
        for (fault, n) in Fault::ALL.iter().zip(c.faults) {
            put(&format!("fault_{}", fault.name()), n);
        }
        Some(Value::Object(out))
    }

    fn housekeeping(&self) {
        #[cfg(feature = "jit")]
        if let Some((queue, _)) = &self.jit {
            queue.serve_paced(std::time::Instant::now());
        }
        let now = hotplane_core::time::now_ns();
        let stores: Vec<Arc<Ess>> = self.stores().values().map(|s| s.ess.clone()).collect();
        for store in stores {
            store.housekeeping(now, EXPIRE_BUDGET_PER_SHARD);
        }
    }
}

#[cfg(test)]
#[path = "kind_tests.rs"]
mod tests;
