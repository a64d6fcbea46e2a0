//! The TOML configuration of a data plane, and its validation. Errors name the key at fault
//! (`port[1].peer: no port named "p9"`).
//!
//! The engine's own sections are typed here; every other top-level section (`[ebpf]`, `[lua]`,
//! `[[table]]`, ...) belongs to a program kind, is kept as parsed, and is checked by that kind
//! when the data plane starts (an unknown section is refused then, with the known ones named).

use hotplane_io::afpacket::AfPacketSpec;
use hotplane_io::afxdp::AfXdpSpec;
use hotplane_io::mem::{GenSpec, MemSpec};
use hotplane_io::pcap::PcapSpec;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use crate::native::StageSpec;

/// Default UDP port for in-band updates.
pub const DEFAULT_UPDATE_PORT: u16 = 47474;

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Config {
    #[serde(default)]
    pub dataplane: DataplaneConfig,
    #[serde(default, rename = "port")]
    pub ports: Vec<PortConfig>,
    #[serde(default)]
    pub pipeline: PipelineConfig,
    #[serde(default)]
    pub predefined: Vec<PredefinedConfig>,
    #[serde(default)]
    pub control: ControlConfig,
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// The program kinds' sections (`[ebpf]`, `[lua]`, `[p4]`, `[[table]]`, ...), as parsed.
    #[serde(flatten)]
    pub sections: BTreeMap<String, serde_json::Value>,
    /// Directory of the config file: relative program paths resolve against it first.
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

/// What a worker does when a poll finds no packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdlePolicy {
    /// Busy-poll: lowest latency, one core at 100%.
    Poll,
    /// Yield the CPU after a run of empty polls: friendly to shared machines.
    #[default]
    Yield,
    /// After a run of empty polls, sleep in `poll(2)` on the ports' descriptors for at most a
    /// millisecond: a worker that has nothing to do takes no CPU, at the price of a wake-up
    /// (tens of microseconds) for the first packet after a pause. For many switches on few
    /// cores (Mininet); `hotplane switch` uses it.
    Wait,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataplaneConfig {
    /// Number of workers (one per core).
    pub workers: usize,
    /// Cores to pin workers to, one per worker; unpinned when absent.
    pub cores: Option<Vec<usize>>,
    /// Burst size, 1 to 64.
    pub batch: usize,
    pub idle: IdlePolicy,
    /// Per-worker packet buffer pool.
    pub pool: hotplane_core::PoolConfig,
}

impl Default for DataplaneConfig {
    fn default() -> Self {
        Self {
            workers: 1,
            cores: None,
            batch: hotplane_core::DEFAULT_BATCH,
            idle: IdlePolicy::Yield,
            pool: Default::default(),
        }
    }
}

/// One port: a name, where its packets go by default, and a kind with its own settings, all
/// written flat in one `[[port]]` table (`kind = "afpacket"`, `interface = "veth0"`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct PortConfig {
    pub name: String,
    /// Where packets received here go unless a program says otherwise (default: back out of
    /// this port).
    pub peer: Option<String>,
    pub kind: PortKind,
}

/// The kind-specific part of a port.
#[derive(Debug, Clone, PartialEq)]
pub enum PortKind {
    Mem(MemSpec),
    Pcap(PcapSpec),
    Afpacket(AfPacketSpec),
    Afxdp(AfXdpSpec),
}

impl PortKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            PortKind::Mem(_) => "mem",
            PortKind::Pcap(_) => "pcap",
            PortKind::Afpacket(_) => "afpacket",
            PortKind::Afxdp(_) => "afxdp",
        }
    }
}

const PORT_KINDS: &str = "mem, pcap, afpacket, afxdp";

impl PortConfig {
    pub fn new(name: &str, peer: Option<&str>, kind: PortKind) -> Self {
        Self { name: name.into(), peer: peer.map(Into::into), kind }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn peer(&self) -> Option<&str> {
        self.peer.as_deref()
    }

    pub fn kind(&self) -> &'static str {
        self.kind.as_str()
    }

    /// True when the port's input ends by itself (a capture replayed a finite number of times,
    /// a generator with a count, or no input at all).
    pub fn input_is_finite(&self) -> bool {
        match &self.kind {
            PortKind::Mem(m) => m.gen.as_ref().is_none_or(|g| {
                // A capture without a count or a duration is sent once through.
                g.count.is_some() || (g.pcap.is_some() && g.duration_ms.is_none())
            }),
            PortKind::Pcap(p) => p.read.is_none() || p.loops != 0,
            PortKind::Afpacket(_) | PortKind::Afxdp(_) => false,
        }
    }

    /// True when the port produces input at all.
    pub fn has_input(&self) -> bool {
        match &self.kind {
            PortKind::Mem(m) => m.gen.is_some(),
            PortKind::Pcap(p) => p.read.is_some(),
            PortKind::Afpacket(_) | PortKind::Afxdp(_) => true,
        }
    }
}

impl<'de> Deserialize<'de> for PortConfig {
    /// `name`, `peer` and `kind` are common; every other key belongs to the kind, whose own
    /// struct rejects keys it does not know.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table: serde_json::Map<String, serde_json::Value> = Deserialize::deserialize(d)?;
        let name = match table.remove("name") {
            Some(serde_json::Value::String(s)) => s,
            Some(_) => return Err(D::Error::custom("`name` must be a string")),
            None => return Err(D::Error::custom("missing field `name`")),
        };
        let peer = match table.remove("peer") {
            Some(serde_json::Value::String(s)) => Some(s),
            Some(_) => {
                return Err(D::Error::custom(format!("port `{name}`: `peer` must be a port name")))
            }
            None => None,
        };
        let kind = match table.remove("kind") {
            Some(serde_json::Value::String(s)) => s,
            _ => {
                return Err(D::Error::custom(format!(
                    "port `{name}`: missing `kind` ({PORT_KINDS})"
                )))
            }
        };
        let rest = serde_json::Value::Object(table);
        let bad = |e: serde_json::Error| D::Error::custom(format!("port `{name}` ({kind}): {e}"));
        let kind = match kind.as_str() {
            "mem" => PortKind::Mem(serde_json::from_value(rest).map_err(bad)?),
            "pcap" => PortKind::Pcap(serde_json::from_value(rest).map_err(bad)?),
            "afpacket" => PortKind::Afpacket(serde_json::from_value(rest).map_err(bad)?),
            "afxdp" => PortKind::Afxdp(serde_json::from_value(rest).map_err(bad)?),
            other => {
                return Err(D::Error::custom(format!(
                    "port `{name}`: kind `{other}` is not one of {PORT_KINDS}"
                )))
            }
        };
        Ok(PortConfig { name, peer, kind })
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    pub pre: Option<StageSpec>,
    pub mid: Option<StageSpec>,
    pub post: Option<StageSpec>,
    /// Per-flow functions: the most specific matching selector wins.
    pub flows: Vec<FlowConfig>,
    /// Function for flows no selector matches.
    pub flow_default: Option<StageSpec>,
    /// Named extern slots (callable by the `call` stage and by P4's `hotplane_ebpf("name")`).
    pub externs: BTreeMap<String, StageSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    /// Flow selector: `proto=udp,src=10.0.0.1,dst=10.1.0.0/16,sport=1,dport=2,vlan=3`.
    #[serde(rename = "match")]
    pub selector: String,
    pub stage: StageSpec,
}

/// A program installed at start and selectable by id at runtime ("pre-defined" mode).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredefinedConfig {
    pub id: u32,
    #[serde(default)]
    pub name: Option<String>,
    pub stage: StageSpec,
}

/// `control.socket`: `true` for the default place, or a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketSetting {
    /// `/run/hotplane/hotplane.sock` as root, else under `$XDG_RUNTIME_DIR/hotplane/`
    /// (see `runtime::socket_dir`); the client's default finds it.
    Default,
    Path(PathBuf),
}

/// `control.socket` from TOML: `true`, `false` or a path.
fn deserialize_socket<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<SocketSetting>, D::Error> {
    struct Visitor;
    impl serde::de::Visitor<'_> for Visitor {
        type Value = Option<SocketSetting>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("`true` (the default place), a path, or `false`")
        }
        fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<Self::Value, E> {
            Ok(on.then_some(SocketSetting::Default))
        }
        fn visit_str<E: serde::de::Error>(self, path: &str) -> Result<Self::Value, E> {
            if path.is_empty() {
                return Err(E::custom("an empty path; `true` means the default place"));
            }
            Ok(Some(SocketSetting::Path(path.into())))
        }
    }
    d.deserialize_any(Visitor)
}

/// Default longest control request line: an update of the default `max_update_bytes` (1 MiB)
/// travels as hex (2 MiB) with headers and JSON around it.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 << 20;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlConfig {
    /// UNIX socket of the control API: `true` for the default place, a path, or absent (or
    /// `false`) for no API. Its directory must be this user's and writable by nobody else.
    #[serde(deserialize_with = "deserialize_socket")]
    pub socket: Option<SocketSetting>,
    /// Group (name or id) whose members may connect: the directory becomes 0750 and the
    /// socket 0660, both of this group. Without it only the owner may connect.
    pub socket_group: Option<String>,
    /// Connections served at once; one more is answered with an error and closed.
    pub max_connections: usize,
    /// Longest request line in bytes (default: 4 MiB, or more when `max_update_bytes` needs
    /// it); a longer one is answered with an error and the connection closed.
    pub max_request_bytes: Option<usize>,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout_s: u64,
    /// UDP destination port that marks in-band update packets; 0 disables in-band updates.
    pub update_port: u16,
    /// The node's own addresses on every port: only datagrams to the update port *and* one of
    /// these (or an address of the port's interface, learned at start) are updates; the rest
    /// is traffic. Default `["10.0.0.254"]`; `[]` leaves only learned addresses.
    pub update_addresses: Vec<std::net::IpAddr>,
    /// Accept updates with key id 0 and no MAC. Never on unless you mean it.
    pub allow_unauthenticated: bool,
    pub max_update_bytes: u32,
    pub max_pending: usize,
    pub reassembly_timeout_ms: u64,
    /// Persist the last applied sequence number per key here, so a restart does not reopen
    /// old updates to replay.
    pub state_file: Option<PathBuf>,
    pub keys: Vec<KeyConfig>,
}

impl Default for ControlConfig {
    fn default() -> Self {
        Self {
            socket: None,
            socket_group: None,
            max_connections: 64,
            max_request_bytes: None,
            idle_timeout_s: 300,
            update_port: DEFAULT_UPDATE_PORT,
            update_addresses: vec![hotplane_control::inband::DEFAULT_NODE_ADDRESS],
            allow_unauthenticated: false,
            max_update_bytes: 1 << 20,
            max_pending: 16,
            reassembly_timeout_ms: 2000,
            state_file: None,
            keys: Vec::new(),
        }
    }
}

impl ControlConfig {
    /// The socket path, resolved (`true` means the default place), or `None` when off.
    pub fn socket_path(&self) -> Option<PathBuf> {
        match self.socket.as_ref()? {
            SocketSetting::Default => Some(crate::socket_dir::default_socket()),
            SocketSetting::Path(p) => Some(p.clone()),
        }
    }

    /// The smallest request line that still holds the largest update this node accepts.
    fn request_floor(&self) -> usize {
        2 * self.max_update_bytes as usize + (64 << 10)
    }

    /// Longest request line the control socket accepts.
    pub fn request_limit(&self) -> usize {
        self.max_request_bytes
            .unwrap_or_else(|| DEFAULT_MAX_REQUEST_BYTES.max(self.request_floor()))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    pub id: u32,
    /// 64 hex digits.
    #[serde(default)]
    pub key: Option<String>,
    /// File holding 64 hex digits.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Serve Prometheus text at http://ADDR/metrics (e.g. "127.0.0.1:9464").
    pub prometheus: Option<String>,
    /// Connections served at once; more are closed at once.
    pub max_connections: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self { prometheus: None, max_connections: 64 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Parse { path: String, msg: String },
    #[error("{key}: {msg}")]
    Invalid { key: String, msg: String },
}

fn invalid(key: impl Into<String>, msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.into(), msg: msg.into() }
}

impl Config {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        let mut cfg = Self::parse(&text, &path.display().to_string())?;
        cfg.base_dir = path.parent().map(Path::to_path_buf);
        // Captures to read, as programs, are found next to the config first.
        let mut ports = std::mem::take(&mut cfg.ports);
        for port in &mut ports {
            match &mut port.kind {
                PortKind::Mem(MemSpec { gen: Some(GenSpec { pcap: Some(p), .. }), .. })
                | PortKind::Pcap(PcapSpec { read: Some(p), .. }) => *p = cfg.resolve(p),
                _ => {}
            }
        }
        cfg.ports = ports;
        Ok(cfg)
    }

    /// A relative path from the config: against the config file's directory when the file
    /// is there, else as given (relative to the working directory).
    pub fn resolve(&self, p: &Path) -> PathBuf {
        match self.base_dir.as_ref().map(|d| d.join(p)) {
            Some(q) if p.is_relative() && q.exists() => q,
            _ => p.to_path_buf(),
        }
    }

    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let cfg: Config = toml::from_str(text)
            .map_err(|e| ConfigError::Parse { path: origin.into(), msg: e.to_string() })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks that need more than one field; the error names the key at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let d = &self.dataplane;
        if d.workers == 0 || d.workers > hotplane_core::MAX_WORKERS {
            return Err(invalid(
                "dataplane.workers",
                format!("{}: must be 1 to {}", d.workers, hotplane_core::MAX_WORKERS),
            ));
        }
        if d.batch == 0 || d.batch > hotplane_core::MAX_BATCH {
            return Err(invalid(
                "dataplane.batch",
                format!("{}: must be 1 to {}", d.batch, hotplane_core::MAX_BATCH),
            ));
        }
        if let Some(cores) = &d.cores {
            if cores.len() != d.workers {
                return Err(invalid(
                    "dataplane.cores",
                    format!("lists {} cores for {} workers", cores.len(), d.workers),
                ));
            }
            let online = crate::online_cores();
            if let Some(c) = cores.iter().find(|c| **c >= online) {
                return Err(invalid(
                    "dataplane.cores",
                    format!("core {c} does not exist (this machine has {online})"),
                ));
            }
        }
        hotplane_core::Pool::new(hotplane_core::PoolConfig { buffers: 1, ..d.pool })
            .map_err(|e| invalid("dataplane.pool", e.to_string()))?;
        if self.ports.is_empty() {
            return Err(invalid("port", "at least one [[port]] is needed"));
        }
        if self.ports.len() > u16::MAX as usize - 1 {
            return Err(invalid("port", "too many ports"));
        }
        let mut names = HashSet::new();
        for (i, p) in self.ports.iter().enumerate() {
            let key = format!("port[{i}]");
            if p.name().is_empty() {
                return Err(invalid(format!("{key}.name"), "must not be empty"));
            }
            if !names.insert(p.name()) {
                return Err(invalid(
                    format!("{key}.name"),
                    format!("`{}` is used by another port", p.name()),
                ));
            }
        }
        for (i, p) in self.ports.iter().enumerate() {
            if let Some(peer) = p.peer() {
                if !names.contains(peer) {
                    return Err(invalid(
                        format!("port[{i}].peer"),
                        format!("no port named `{peer}`"),
                    ));
                }
            }
            match &p.kind {
                PortKind::Pcap(PcapSpec { read: None, write: None, .. }) => {
                    return Err(invalid(
                        format!("port[{i}]"),
                        "a pcap port needs `read`, `write` or both",
                    ));
                }
                PortKind::Afxdp(a) if a.interface.is_empty() => {
                    return Err(invalid(
                        format!("port[{i}].interface"),
                        "an afxdp port needs an interface",
                    ));
                }
                PortKind::Afpacket(a) if a.interface.is_empty() => {
                    return Err(invalid(
                        format!("port[{i}].interface"),
                        "an afpacket port needs an interface",
                    ));
                }
                _ => {}
            }
        }
        let mut ids = HashSet::new();
        for (i, p) in self.predefined.iter().enumerate() {
            if !ids.insert(p.id) {
                return Err(invalid(
                    format!("predefined[{i}].id"),
                    format!("id {} is used twice", p.id),
                ));
            }
        }
        for (i, f) in self.pipeline.flows.iter().enumerate() {
            f.selector
                .parse::<hotplane_core::FlowSelector>()
                .map_err(|e| invalid(format!("pipeline.flows[{i}].match"), e.to_string()))?;
        }
        for name in self.pipeline.externs.keys() {
            if name.is_empty() || name.len() > hotplane_control::envelope::MAX_EXTERN_NAME {
                return Err(invalid(
                    format!("pipeline.externs.{name}"),
                    "extern names are 1 to 64 bytes",
                ));
            }
        }
        let c = &self.control;
        let mut key_ids = HashSet::new();
        for (i, k) in c.keys.iter().enumerate() {
            if k.id == 0 {
                return Err(invalid(
                    format!("control.keys[{i}].id"),
                    "key id 0 means unauthenticated; use 1 or above",
                ));
            }
            if !key_ids.insert(k.id) {
                return Err(invalid(
                    format!("control.keys[{i}].id"),
                    format!("id {} is used twice", k.id),
                ));
            }
            if k.key.is_some() == k.key_file.is_some() {
                return Err(invalid(
                    format!("control.keys[{i}]"),
                    "give exactly one of `key` and `key_file`",
                ));
            }
        }
        if self.control.keys.iter().all(|k| k.key.is_some()) {
            self.keys()?;
        }
        if c.max_pending == 0 {
            return Err(invalid("control.max_pending", "must be at least 1"));
        }
        if c.max_connections == 0 {
            return Err(invalid("control.max_connections", "must be at least 1"));
        }
        if c.idle_timeout_s == 0 {
            return Err(invalid("control.idle_timeout_s", "must be at least 1"));
        }
        if let Some(n) = c.max_request_bytes {
            if n < c.request_floor() {
                return Err(invalid(
                    "control.max_request_bytes",
                    format!(
                        "{n} cannot carry an update of control.max_update_bytes ({}) in hex: \
                         at least {}",
                        c.max_update_bytes,
                        c.request_floor()
                    ),
                ));
            }
        }
        if let Some(g) = &c.socket_group {
            crate::socket_dir::resolve_group(g)
                .map_err(|e| invalid("control.socket_group", e.to_string()))?;
        }
        if self.metrics.max_connections == 0 {
            return Err(invalid("metrics.max_connections", "must be at least 1"));
        }
        if let Some(addr) = &self.metrics.prometheus {
            addr.parse::<std::net::SocketAddr>().map_err(|_| {
                invalid(
                    "metrics.prometheus",
                    format!("`{addr}` is not an address like 127.0.0.1:9464"),
                )
            })?;
        }
        Ok(())
    }

    /// The keys, read and decoded.
    pub fn keys(&self) -> Result<std::collections::HashMap<u32, [u8; 32]>, ConfigError> {
        let mut out = std::collections::HashMap::new();
        for (i, k) in self.control.keys.iter().enumerate() {
            let text = match (&k.key, &k.key_file) {
                (Some(t), _) => t.clone(),
                (None, Some(p)) => std::fs::read_to_string(self.resolve(p)).map_err(|e| {
                    invalid(format!("control.keys[{i}].key_file"), format!("{}: {e}", p.display()))
                })?,
                (None, None) => return Err(invalid(format!("control.keys[{i}]"), "no key")),
            };
            let key = hotplane_control::parse_key(&text)
                .map_err(|e| invalid(format!("control.keys[{i}]"), e))?;
            out.insert(k.id, key);
        }
        Ok(out)
    }

    /// Index of a port by name.
    pub fn port_id(&self, name: &str) -> Option<u16> {
        self.ports.iter().position(|p| p.name() == name).map(|i| i as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Config::parse(text, "test.toml").unwrap_err().to_string()
    }

    #[test]
    fn minimal_config_parses() {
        let c = Config::parse("[[port]]\nname = \"p0\"\nkind = \"mem\"\n", "t").unwrap();
        assert_eq!(c.dataplane.workers, 1);
        assert_eq!(c.control.update_port, DEFAULT_UPDATE_PORT);
    }

    #[test]
    fn errors_name_the_key() {
        assert!(err("[dataplane]\nworkers = 0\n[[port]]\nname=\"a\"\nkind=\"mem\"")
            .starts_with("dataplane.workers"));
        assert!(err("[[port]]\nname=\"a\"\nkind=\"mem\"\npeer=\"b\"")
            .starts_with("port[0].peer: no port named `b`"));
        let e = err("[[port]]\nname=\"a\"\nkind=\"mem\"\nspeed=1");
        assert!(e.contains("unknown field `speed`"), "{e}");
        let e = err("[[port]]\nname=\"a\"\nkind=\"floppy\"");
        assert!(e.contains("floppy"), "{e}");
        let e = err("[[port]]\nname=\"a\"\nkind=\"mem\"\n[[control.keys]]\nid=1\nkey=\"00\"");
        assert!(
            e.starts_with("control.keys[0]: key must be 32 bytes") || e.contains("control.keys[0]"),
            "{e}"
        );
        let e = err("[[port]]\nname=\"a\"\nkind=\"mem\"\n[[pipeline.flows]]\nmatch=\"sport=x\"\nstage={stage=\"drop\"}");
        assert!(e.starts_with("pipeline.flows[0].match"), "{e}");
        let e = err("[[port]]\nname=\"a\"\nkind=\"mem\"\n[pipeline]\npre=\"teleport\"");
        assert!(e.contains("a stage is a table"), "{e}");
        let e = err("[[port]]\nname=\"a\"\nkind=\"mem\"\n[pipeline]\npre={file=\"x.o\"}");
        assert!(e.contains("`stage`"), "{e}");
    }

    fn control(text: &str) -> Result<ControlConfig, String> {
        Config::parse(&format!("[[port]]\nname=\"a\"\nkind=\"mem\"\n[control]\n{text}"), "t")
            .map(|c| c.control)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn control_socket_is_a_place_or_the_default() {
        assert_eq!(control("").unwrap().socket, None);
        assert_eq!(control("socket = false").unwrap().socket, None);
        assert_eq!(control("socket = true").unwrap().socket, Some(SocketSetting::Default));
        assert_eq!(
            control("socket = \"/run/x/s.sock\"").unwrap().socket,
            Some(SocketSetting::Path("/run/x/s.sock".into()))
        );
        assert!(control("socket = 3").unwrap_err().contains("a path"));
        assert!(control("socket_group = \"no-such-group-here\"")
            .unwrap_err()
            .contains("socket_group"));
    }

    #[test]
    fn request_limit_holds_the_largest_update() {
        let c = control("").unwrap();
        assert_eq!(c.request_limit(), DEFAULT_MAX_REQUEST_BYTES);
        assert!(c.request_limit() >= 2 * c.max_update_bytes as usize + 65536);
        let c = control("max_update_bytes = 8388608").unwrap();
        assert!(c.request_limit() >= 2 * 8388608 + 65536);
        assert!(control("max_request_bytes = 1000")
            .unwrap_err()
            .starts_with("control.max_request_bytes"));
        assert!(control("max_connections = 0").unwrap_err().starts_with("control.max_connections"));
    }
}
