//! `hotplane run`, `push` and `gen`: the commands that are thin layers over the library.

use crate::config::Config;
use crate::human;

use anyhow::{bail, Context};
use hotplane_control::api::{Client, Request};
use hotplane_control::{Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_io::mem::Vary;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `hotplane run`: start the data plane and keep it running until SIGINT/SIGTERM, a `shutdown`
/// request, or (when every input is finite) the inputs are exhausted and drained.
pub fn run(
    config: &Path,
    json_out: bool,
    stats_every: u64,
    keep_running: bool,
    p4runtime: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    run_config(Config::load(config)?, json_out, stats_every, keep_running, p4runtime)
}

/// `hotplane run --p4 PROGRAM [--entries FILE] -i PORT@IFACE...`: a switch in one line.
pub struct OneLine {
    pub p4: PathBuf,
    pub entries: Option<PathBuf>,
    pub interfaces: Vec<String>,
    pub port_kind: String,
}

/// The config a one-line switch stands for: its ports numbered as BMv2 numbers them, the
/// program (with its entries) as the pipeline, one worker, no in-band updates.
pub fn one_line_config(a: &OneLine) -> anyhow::Result<Config> {
    if !matches!(a.port_kind.as_str(), "afpacket" | "afxdp") {
        bail!("--port-kind {}: afpacket or afxdp", a.port_kind);
    }
    let mut ports = Vec::new();
    for spec in &a.interfaces {
        let port = interface(spec, &ports)?;
        ports.push(port);
    }
    if ports.is_empty() {
        bail!("--p4 needs its ports: -i 1@veth1 -i 2@veth2 (P4 port number @ interface)");
    }
    let absolute = |p: &Path| -> anyhow::Result<String> {
        let p = std::fs::canonicalize(p).with_context(|| format!("cannot read {}", p.display()))?;
        Ok(p.display().to_string())
    };
    let mut pre = json!({"stage": "p4", "program": absolute(&a.p4)?});
    if let Some(e) = &a.entries {
        pre["entries"] = json!(absolute(e)?);
    }
    let doc = json!({
        "control": {"update_port": 0},
        "port": ports_json(&ports, &a.port_kind),
        "pipeline": {"pre": pre},
    });
    let text = toml::to_string(&doc).context("the one-line switch's config")?;
    Ok(Config::parse(&text, "hotplane run --p4")?)
}

/// `-i PORT@IFACE` (BMv2's numbering), checked against the ports `taken` already.
pub(crate) fn interface(spec: &str, taken: &[(u32, String)]) -> anyhow::Result<(u32, String)> {
    let (port, iface) = spec
        .split_once('@')
        .with_context(|| format!("-i {spec}: give PORT@INTERFACE (0@veth0)"))?;
    let port: u32 =
        port.parse().with_context(|| format!("-i {spec}: {port} is not a port number"))?;
    if port > MAX_PORT {
        bail!("-i {spec}: port numbers go up to {MAX_PORT}");
    }
    if taken.iter().any(|(p, _)| *p == port) {
        bail!("-i {spec}: port {port} is given twice");
    }
    Ok((port, iface.to_string()))
}

/// The `[[port]]` list for BMv2-numbered ports: port N is the Nth entry, an interface of
/// `kind`; numbers no `-i` names are `mem` ports (what is sent there is counted and dropped).
pub(crate) fn ports_json(ports: &[(u32, String)], kind: &str) -> Vec<Value> {
    match ports.iter().map(|p| p.0).max() {
        None => vec![json!({"name": "unbound0", "kind": "mem"})],
        Some(top) => (0..=top)
            .map(|n| match ports.iter().find(|p| p.0 == n) {
                Some((_, iface)) => json!({"name": iface, "kind": kind, "interface": iface}),
                None => json!({"name": format!("unbound{n}"), "kind": "mem"}),
            })
            .collect(),
    }
}

/// Highest P4 port number bound to an interface: the ports below it that no interface has
/// are made too.
pub(crate) const MAX_PORT: u32 = 63;

/// The value of `flag` in a hand-parsed command line of another tool's shape (`hotplane p4c`,
/// `hotplane switch`): the part after `=`, or the next argument.
pub fn flag_value(
    flag: &str,
    inline: Option<&str>,
    rest: &mut std::slice::Iter<'_, String>,
) -> anyhow::Result<String> {
    match inline {
        Some(v) => Ok(v.to_string()),
        None => rest.next().cloned().with_context(|| format!("{flag} needs a value")),
    }
}

/// `hotplane run` on a config already loaded (`hotplane switch` makes one).
pub fn run_config(
    #[allow(unused_mut)] mut cfg: Config,
    json_out: bool,
    stats_every: u64,
    keep_running: bool,
    p4runtime: Option<std::net::SocketAddr>,
) -> anyhow::Result<()> {
    #[cfg(feature = "p4runtime")]
    let p4rt = crate::p4rt_cmd::take_section(&mut cfg, p4runtime)?;
    #[cfg(not(feature = "p4runtime"))]
    if p4runtime.is_some() {
        bail!("--p4runtime: this build has no P4Runtime server (feature `p4runtime`)");
    }
    let finite = cfg.ports.iter().all(|p| p.input_is_finite());
    let has_input = cfg.ports.iter().any(|p| p.has_input());
    let exit_when_drained = finite && has_input && !keep_running;
    // A capture replayed forever that stopped anyway was unreadable: nothing more will come.
    let exit_when_inputs_fail = has_input && !keep_running;
    let signalled = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, signalled.clone())
            .context("installing signal handlers")?;
    }
    let socket = cfg.control.socket_path();
    let plane = crate::start(cfg.clone())?;
    eprintln!(
        "hotplane: {} worker(s), ports: {}{}{}",
        cfg.dataplane.workers,
        // With the mode each took where it could fall back (AF_XDP: native or generic XDP,
        // zero-copy or copy).
        plane
            .observability()
            .ports
            .iter()
            .map(|p| match p.mode.as_str() {
                "" => format!("{} ({})", p.name, p.kind),
                mode => format!("{} ({}: {mode})", p.name, p.kind),
            })
            .collect::<Vec<_>>()
            .join(", "),
        socket.as_ref().map(|s| format!(", control socket {}", s.display())).unwrap_or_default(),
        if cfg.control.update_port != 0 {
            format!(", in-band updates on UDP {}", cfg.control.update_port)
        } else {
            String::new()
        }
    );
    // Clients given no socket find one a config put elsewhere (taken back at the end).
    let announced = socket.clone();
    if let Some(s) = &announced {
        hotplane_engine::socket_dir::announce(s);
    }
    let _withdraw = Withdraw(announced);
    #[cfg(feature = "p4runtime")]
    let p4rt = p4rt.map(|c| crate::p4rt_cmd::serve(&plane, &c)).transpose()?;
    let mut last_stats = Instant::now();
    let mut last_packets = 0u64;
    let mut last_received: std::collections::BTreeMap<u16, u64> = Default::default();
    let mem = plane.mem_handles();
    loop {
        std::thread::sleep(Duration::from_millis(10));
        if signalled.load(Ordering::Relaxed) {
            eprintln!("hotplane: signal received, stopping");
            break;
        }
        if plane.shutdown_requested() {
            eprintln!("hotplane: shutdown requested, stopping");
            break;
        }
        if (exit_when_drained || exit_when_inputs_fail) && plane.drained() {
            break;
        }
        if stats_every > 0 && last_stats.elapsed() >= Duration::from_secs(stats_every) {
            let secs = last_stats.elapsed().as_secs_f64();
            last_stats = Instant::now();
            let s = plane.observability().stats_json();
            let pkts: u64 = s["workers"]
                .as_array()
                .map_or(0, |w| w.iter().filter_map(|w| w["packets"].as_u64()).sum());
            let rate = pkts.saturating_sub(last_packets) as f64 / secs;
            last_packets = pkts;
            let u = &s["updates"];
            let refused: u64 =
                u["refused"].as_object().map_or(0, |r| r.values().filter_map(|v| v.as_u64()).sum());
            eprintln!(
                "hotplane: {pkts} packets ({}), updates applied {} refused {refused}",
                per_second(rate),
                u["applied_count"].as_u64().unwrap_or(0)
            );
            // The mem sinks' flows as they stand (packets in flight count as lost).
            for f in &hotplane_io::mem::MemReport::live(&mem).flows {
                let before = last_received.insert(f.flow, f.received).unwrap_or(0);
                eprintln!(
                    "  flow {}: received {} ({}) lost {} reordered {} latency p99 {:.1} us",
                    f.flow,
                    f.received,
                    per_second(f.received.saturating_sub(before) as f64 / secs),
                    f.lost,
                    f.reordered,
                    f.latency_ns_p99 as f64 / 1e3
                );
            }
        }
    }
    #[cfg(feature = "p4runtime")]
    drop(p4rt);
    let stats = plane.observability().stats_json();
    let summary = plane.stop();
    for (name, st) in &summary.ports {
        eprintln!(
            "  {name}: rx {} tx {} rx_dropped {} tx_dropped {} errors {}",
            st.rx_packets, st.tx_packets, st.rx_dropped, st.tx_dropped, st.errors
        );
    }
    // What the mem ports' generators sent and their sinks received, flow by flow (complete
    // once the data plane stopped).
    let flows = hotplane_io::mem::MemReport::merge(&mem).flows;
    for f in &flows {
        eprintln!(
            "  flow {} ({}): sent {} received {} lost {} reordered {} duplicated {} \
             latency p50 {:.1} us p99 {:.1} us max {:.1} us",
            f.flow,
            f.tuple,
            f.sent,
            f.received,
            f.lost,
            f.reordered,
            f.duplicates,
            f.latency_ns_p50 as f64 / 1e3,
            f.latency_ns_p99 as f64 / 1e3,
            f.latency_ns_max as f64 / 1e3
        );
    }
    if json_out {
        println!("{}", json!({ "summary": summary, "stats": stats, "flows": flows }));
    }
    if summary.panics > 0 {
        bail!("{} thread(s) panicked", summary.panics);
    }
    // A capture that could not be read to the end (its port went down) is a failed run, not an
    // empty one.
    let failed: Vec<&str> = summary
        .ports
        .iter()
        .zip(&cfg.ports)
        .filter(|((_, st), pc)| pc.kind() == "pcap" && st.link_down > 0)
        .map(|((name, _), _)| name.as_str())
        .collect();
    if !failed.is_empty() {
        bail!("capture unreadable on port(s) {} (see the error above)", failed.join(", "));
    }
    Ok(())
}

/// A packet rate for people: `812 pps`, `45.3 kpps`, `12.04 Mpps`.
fn per_second(pps: f64) -> String {
    match pps {
        r if r >= 1e6 => format!("{:.2} Mpps", r / 1e6),
        r if r >= 1e3 => format!("{:.1} kpps", r / 1e3),
        r => format!("{r:.0} pps"),
    }
}

/// What `hotplane push` does.
pub enum PushOp {
    Request(Request),
    Update {
        target: String,
        kind: String,
        payload: Vec<u8>,
        key_id: u32,
        key: Option<[u8; 32]>,
        seq: Option<u64>,
        worker: String,
        no_ack: bool,
    },
}

/// `$HOTPLANE_SOCKET`, else where `socket = true` puts the server's socket (see
/// `runtime::socket_dir`).
pub fn default_socket() -> PathBuf {
    hotplane_engine::socket_dir::client_default_socket()
}

pub fn push(socket: &Path, op: PushOp, json: bool) -> anyhow::Result<()> {
    let mut client = Client::connect(socket)?;
    let req = match op {
        PushOp::Request(r) => r,
        PushOp::Update { target, kind, payload, key_id, key, seq, worker, no_ack } => {
            let target: Target = target.parse().map_err(anyhow::Error::msg)?;
            let kind = match kind.as_str() {
                "native-stage" | "native" => Kind::NativeStage,
                "select-predefined" | "switch" => Kind::SelectPredefined,
                "remove" => Kind::Remove,
                "ebpf-bytecode" => Kind::EbpfBytecode,
                "ebpf-elf" => Kind::EbpfElf,
                "ebpf-c" => Kind::EbpfC,
                "lua" => Kind::Lua,
                "wasp" => Kind::Wasp,
                "p4" => Kind::P4,
                other => bail!("--kind {other}: not one of native-stage, select-predefined, remove, ebpf-bytecode, ebpf-elf, ebpf-c, lua, wasp, p4"),
            };
            let worker = match worker.as_str() {
                "all" => WorkerScope::All,
                "receiving" => WorkerScope::Receiving,
                n => WorkerScope::One(n.parse().map_err(|_| {
                    anyhow::anyhow!("--worker {n}: a number, `all` or `receiving`")
                })?),
            };
            if key_id != 0 && key.is_none() {
                bail!("--key-id {key_id} needs --key or --key-file");
            }
            // Sequence numbers must grow across invocations: microseconds since the epoch do.
            let seq = seq.unwrap_or_else(hotplane_core::time::unix_micros);
            let flags = if no_ack { Flags(Flags::NO_ACK) } else { Flags::default() };
            let header = UpdateHeader { kind, flags, key_id, seq, target, worker };
            let datagrams = hotplane_control::envelope::build(
                &header,
                &payload,
                key.as_ref(),
                crate::inband::API_FRAGMENT,
            )?;
            Request::Update { fragments: datagrams.iter().map(hex::encode).collect() }
        }
    };
    let is_update = matches!(req, Request::Update { .. });
    let is_stats = matches!(req, Request::Stats {});
    // A runtime JSON document (`p4-dump`) is for `p4-entries` to take back: kept as it is.
    let is_document = matches!(req, Request::P4Dump { .. });
    let slot_change = match &req {
        Request::Install { target, .. } => Some(format!("installed at {target}")),
        Request::Switch { target, id, .. } => Some(format!("{target} switched to program {id}")),
        Request::Remove { target, .. } => Some(format!("removed from {target}")),
        _ => None,
    };
    let v = client.call(&req)?;
    match v {
        _ if json || is_document => println!("{}", serde_json::to_string_pretty(&v)?),
        _ if is_update => human::print_acks(&v),
        _ if is_stats => human::print_stats(&v),
        serde_json::Value::Object(ref m) if m.get("text").is_some_and(|t| t.is_string()) => {
            print!("{}", m["text"].as_str().unwrap_or_default());
        }
        ref v => match &slot_change {
            Some(change) => human::print_slot_change(change, v),
            None => human::print_value(v),
        },
    }
    if is_update {
        refused_update(&v)?;
    }
    Ok(())
}

/// An update the node refused is an error (a non-zero exit) with the node's reason: for
/// `push`, `ebpf update` and `lua update` alike.
fn refused_update(acks: &serde_json::Value) -> anyhow::Result<()> {
    let refused = acks.as_array().into_iter().flatten().find(|a| a["status"] == "refused");
    if let Some(a) = refused {
        let reason = a["reason"].as_str().unwrap_or("refused");
        match a["message"].as_str().filter(|m| !m.is_empty()) {
            Some(m) => bail!("the node refused the update: {reason}: {m}"),
            None => bail!("the node refused the update: {reason}"),
        }
    }
    Ok(())
}

/// `--worker`: `all` or a worker index.
pub fn worker_scope(s: &str) -> anyhow::Result<WorkerScope> {
    match s {
        "all" => Ok(WorkerScope::All),
        n => Ok(WorkerScope::One(
            n.parse().map_err(|_| anyhow::anyhow!("--worker {n}: a number or `all`"))?,
        )),
    }
}

/// Send one authenticated update through the control API, print the acknowledgements, and
/// fail if it was refused.
pub fn submit_update(
    socket: &Path,
    header: &UpdateHeader,
    payload: &[u8],
    key: &[u8; 32],
    json: bool,
) -> anyhow::Result<()> {
    let frags =
        hotplane_control::envelope::build(header, payload, Some(key), crate::inband::API_FRAGMENT)?;
    let v = Client::connect(socket)?
        .call(&Request::Update { fragments: frags.iter().map(hex::encode).collect() })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        human::print_acks(&v);
    }
    refused_update(&v)
}

/// Takes back the socket's announcement when `run` ends, however it ends.
struct Withdraw(Option<PathBuf>);

impl Drop for Withdraw {
    fn drop(&mut self) {
        if let Some(s) = &self.0 {
            hotplane_engine::socket_dir::withdraw(s);
        }
    }
}

/// Options many commands share may also come before the command, as `--socket` can:
/// `hotplane --json push stats`, `hotplane --key-file k.hex lua update f.lua ...`. They are
/// moved behind the command's name (its deepest subcommand in `cli`), where the commands that
/// take them read them; where no command on the way takes one, it stays, and is refused.
pub fn hoist_shared_options(
    args: impl IntoIterator<Item = OsString>,
    cli: &clap::Command,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let mut hoisted: Vec<(&str, Vec<OsString>)> = Vec::new();
    let mut i = 1;
    while let Some(arg) = args.get(i).and_then(|a| a.to_str()) {
        if !arg.starts_with('-') || arg == "--" {
            break; // the command
        }
        match arg {
            "--json" => hoisted.push(("json", vec![args.remove(i)])),
            "--key-file" if i + 1 < args.len() => {
                let flag = args.remove(i);
                hoisted.push(("key-file", vec![flag, args.remove(i)]));
            }
            a if a.starts_with("--key-file=") => hoisted.push(("key-file", vec![args.remove(i)])),
            // `--socket PATH` stays: clap reads it anywhere.
            "--socket" => i += 2,
            _ => i += 1,
        }
    }
    // The command's path: its name and subcommands' names, up to the first other word.
    let mut path = vec![cli];
    while let Some(sub) = args
        .get(i)
        .and_then(|a| a.to_str())
        .and_then(|name| path.last().and_then(|c| c.find_subcommand(name)))
    {
        path.push(sub);
        i += 1;
    }
    for (name, words) in hoisted.into_iter().rev() {
        let taken = path[1..].iter().any(|c| c.get_arguments().any(|a| a.get_long() == Some(name)));
        let at = if taken { i } else { 1 };
        for (k, w) in words.into_iter().enumerate() {
            args.insert(at + k, w);
        }
    }
    args
}

pub fn parse_vary(s: &str) -> Result<Vary, String> {
    match s {
        "src-ip" => Ok(Vary::SrcIp),
        "dst-ip" => Ok(Vary::DstIp),
        "src-port" => Ok(Vary::SrcPort),
        "dst-port" => Ok(Vary::DstPort),
        o => Err(format!("`{o}`: one of src-ip, dst-ip, src-port, dst-port")),
    }
}

pub fn parse_ip(s: &str) -> Result<IpAddr, String> {
    s.parse().map_err(|_| format!("`{s}` is not an IP address"))
}

#[cfg(all(test, feature = "p4"))]
mod tests {
    use super::*;

    fn repo(p: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p)
    }

    /// `run --p4 basic.p4 --entries basic.json -i 1@veth1 -i 3@veth3`: port N is the Nth
    /// `[[port]]` (BMv2's numbering; gaps are mem ports), the program and its entries the
    /// pipeline.
    #[test]
    fn a_one_line_switch_is_the_config_it_stands_for() {
        let one = OneLine {
            p4: repo("tests/p4/basic.p4"),
            entries: Some(repo("tests/p4/basic.json")),
            interfaces: vec!["1@veth1".into(), "3@veth3".into()],
            port_kind: "afxdp".into(),
        };
        let cfg = one_line_config(&one).unwrap();
        let ports: Vec<(String, String)> =
            cfg.ports.iter().map(|p| (p.name().to_string(), p.kind().to_string())).collect();
        let want =
            [("unbound0", "mem"), ("veth1", "afxdp"), ("unbound2", "mem"), ("veth3", "afxdp")];
        assert_eq!(ports, want.map(|(a, b)| (a.to_string(), b.to_string())));
        let pre = format!("{:?}", cfg.pipeline.pre);
        assert!(pre.contains("basic.p4") && pre.contains("basic.json"), "{pre}");
        assert_eq!(cfg.control.update_port, 0);
        // Refusals name what to give.
        let no_ports = OneLine { interfaces: vec![], ..one };
        let e = one_line_config(&no_ports).unwrap_err().to_string();
        assert!(e.contains("-i 1@veth1"), "{e}");
        let twice = OneLine { interfaces: vec!["1@a".into(), "1@b".into()], ..no_ports };
        let e = one_line_config(&twice).unwrap_err().to_string();
        assert!(e.contains("given twice"), "{e}");
        let missing = OneLine { p4: repo("tests/p4/nonexistent.p4"), ..twice };
        let missing = OneLine { interfaces: vec!["1@a".into()], ..missing };
        let e = one_line_config(&missing).unwrap_err().to_string();
        assert!(e.contains("cannot read"), "{e}");
    }
}

#[cfg(test)]
mod shared_option_tests {
    use super::hoist_shared_options;
    use clap::{Arg, ArgAction, Command};

    /// A command line shaped as hotplane's: `push` with a `--json` for all its subcommands,
    /// `cli` taking words, `lua update` with `--key-file`, `switch` with neither.
    fn cli() -> Command {
        let json = || Arg::new("json").long("json").action(ArgAction::SetTrue);
        Command::new("hotplane")
            .arg(Arg::new("socket").long("socket").global(true))
            .subcommand(
                Command::new("push").arg(json().global(true)).subcommand(Command::new("stats")),
            )
            .subcommand(Command::new("cli").arg(json()).arg(Arg::new("words").num_args(0..)))
            .subcommand(
                Command::new("lua").subcommand(
                    Command::new("update")
                        .arg(Arg::new("file"))
                        .arg(Arg::new("key-file").long("key-file")),
                ),
            )
            .subcommand(
                Command::new("switch")
                    .arg(Arg::new("rest").num_args(0..).allow_hyphen_values(true)),
            )
    }

    fn hoist(args: &str) -> String {
        let out = hoist_shared_options(args.split(' ').map(std::ffi::OsString::from), &cli());
        out.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn shared_options_before_the_command_move_behind_its_name() {
        assert_eq!(hoist("hotplane --json push stats"), "hotplane push stats --json");
        assert_eq!(
            hoist("hotplane --json cli counter_read C 0"),
            "hotplane cli --json counter_read C 0"
        );
        assert_eq!(
            hoist("hotplane --socket s --key-file k.hex lua update f.lua"),
            "hotplane --socket s lua update --key-file k.hex f.lua"
        );
        assert_eq!(
            hoist("hotplane --key-file=k lua update f"),
            "hotplane lua update --key-file=k f"
        );
        // No command on the way takes it: it stays where it was (and clap refuses it there),
        // never handed to a command that passes words on.
        assert_eq!(hoist("hotplane --json switch -x"), "hotplane --json switch -x");
        // Behind the command they are the command's own; a value that looks like an option
        // (`--socket --json`) is the socket's.
        assert_eq!(hoist("hotplane push --json stats"), "hotplane push --json stats");
        assert_eq!(hoist("hotplane --socket --json push"), "hotplane --socket --json push");
        assert_eq!(hoist("hotplane --key-file"), "hotplane --key-file");
    }
}
