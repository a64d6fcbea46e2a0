//! `hotplane push`: talk to a running data plane over its control socket, and replace its P4
//! program (`hotplane push --p4 new.p4`).

use crate::cli::{self, PushOp};
use anyhow::{bail, Context as _};
use clap::Subcommand;
use hotplane_control::api::Request;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(subcommand_negates_reqs = true)]
pub struct PushArgs {
    /// The global --socket (`hotplane --help`).
    #[arg(skip)]
    pub socket: PathBuf,
    /// The data plane's answer as JSON, as it gave it, instead of tables and lines for people.
    #[arg(long, global = true)]
    json: bool,
    /// Replace the running P4 program with FILE, hitlessly: tables whose name, key and actions
    /// are unchanged keep their entries. FILE is compiled here first (errors point into your
    /// files); its local #includes are bundled into the update (the node resolves only
    /// core.p4, v1model.p4 and hotplane.p4 itself).
    #[arg(long, value_name = "FILE")]
    p4: Option<PathBuf>,
    /// With --p4: a directory to search for #include files (repeatable).
    #[arg(short = 'I', long = "include", value_name = "DIR", requires = "p4")]
    include: Vec<PathBuf>,
    /// With --p4: a runtime JSON file (s1-runtime.json format) loaded into the new program
    /// before it goes live.
    #[arg(long, value_name = "FILE", requires = "p4")]
    entries: Option<PathBuf>,
    /// With --p4: pre, mid or post (default: wherever a P4 program runs now).
    #[arg(long, requires = "p4")]
    target: Option<String>,
    /// With --p4: the key id the update is MACed with (0: unauthenticated).
    #[arg(long, default_value_t = 1, requires = "p4")]
    key_id: u32,
    /// With --p4: the key, 64 hex digits.
    #[arg(long, requires = "p4")]
    key: Option<String>,
    /// With --p4: a file holding the key.
    #[arg(long, requires = "p4")]
    key_file: Option<PathBuf>,
    /// With --p4: send the update without a key (the node accepts it only if it allows
    /// unauthenticated updates).
    #[arg(long, requires = "p4", conflicts_with_all = ["key", "key_file"])]
    unauthenticated: bool,
    #[command(subcommand)]
    op: Option<PushCmd>,
}

#[derive(Subcommand)]
pub enum PushCmd {
    /// Counters of ports, workers, slots and updates.
    Stats,
    /// Every slot with its program and version.
    Slots,
    /// Flow-table entries of a worker.
    Flows {
        #[arg(long)]
        worker: Option<u16>,
    },
    /// Pre-defined programs.
    Predefined,
    /// Prometheus text.
    Metrics,
    /// Install a native stage: --target pre|mid|post|extern:NAME|flow:SELECTOR|flow:default.
    Install {
        #[arg(long)]
        target: String,
        /// JSON stage spec, e.g. '{"stage":"count"}'.
        #[arg(long)]
        stage: String,
        #[arg(long)]
        worker: Option<u16>,
    },
    /// Switch a target to a pre-defined program.
    Switch {
        #[arg(long)]
        target: String,
        #[arg(long)]
        id: u32,
        #[arg(long)]
        worker: Option<u16>,
    },
    /// Remove the program at a target.
    Remove {
        #[arg(long)]
        target: String,
        #[arg(long)]
        worker: Option<u16>,
    },
    /// Send an update envelope, MACed with a key, exactly as an in-band update is checked.
    Update {
        #[arg(long)]
        target: String,
        /// native-stage, select-predefined, remove, ebpf-bytecode, ebpf-elf, ebpf-c, lua, p4.
        #[arg(long, default_value = "native-stage")]
        kind: String,
        /// JSON stage spec (native-stage).
        #[arg(long)]
        stage: Option<String>,
        /// Pre-defined program id (select-predefined).
        #[arg(long)]
        id: Option<u32>,
        /// Raw payload from a file.
        #[arg(long)]
        payload_file: Option<PathBuf>,
        #[arg(long, default_value_t = 1)]
        key_id: u32,
        /// 64 hex digits.
        #[arg(long)]
        key: Option<String>,
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// Sequence number (default: microseconds since the epoch).
        #[arg(long)]
        seq: Option<u64>,
        /// all, receiving, or a worker index.
        #[arg(long, default_value = "all")]
        worker: String,
        #[arg(long)]
        no_ack: bool,
    },
    /// Tables of the running P4 program: keys, actions, size, entries in use.
    P4Tables {
        /// pre, mid or post (default: the only P4 program).
        #[arg(long)]
        target: Option<String>,
    },
    /// A P4 table's entries and default action, as runtime JSON (loadable by p4-entries).
    P4Dump {
        /// Table name, qualified (MyIngress.ipv4_lpm) or short when unambiguous.
        table: String,
        #[arg(long)]
        target: Option<String>,
    },
    /// Write a running P4 program's tables from a runtime JSON file (s1-runtime.json format;
    /// an entry may say "type": "MODIFY" or "DELETE").
    P4Entries {
        file: PathBuf,
        #[arg(long)]
        target: Option<String>,
    },
    /// One entry of a WASP store (in:PORT, out:PORT or node) as four words.
    WaspGet {
        store: String,
        key: u64,
        /// public (default) or protected.
        #[arg(long)]
        scope: Option<String>,
    },
    /// What each position's eBPF program is specialised to, its guard and the guard's counts.
    ChainStatus,
    /// Stop the data plane.
    Shutdown,
}

/// Run `hotplane push`.
pub fn run(args: PushArgs) -> anyhow::Result<()> {
    let op = match (args.p4, args.op) {
        (Some(_), Some(_)) => bail!("--p4 replaces the P4 program; it takes no subcommand"),
        (None, None) => bail!("give a subcommand (see --help) or --p4 FILE"),
        (None, Some(PushCmd::Slots)) if !args.json => return print_slots(&args.socket),
        (None, Some(PushCmd::Flows { worker })) if !args.json => {
            return print_flows(&args.socket, worker)
        }
        (None, Some(op)) => push_op(op)?,
        (Some(file), None) => {
            let mut payload = p4_payload(&file, &args.include)?;
            if let Some(e) = &args.entries {
                let text = std::fs::read_to_string(e)
                    .with_context(|| format!("--entries {}", e.display()))?;
                serde_json::from_str::<serde_json::Value>(&text)
                    .with_context(|| format!("--entries {}", e.display()))?;
                payload.push(0);
                payload.extend_from_slice(text.as_bytes());
            }
            let key = key_of(args.key, args.key_file)?;
            if key.is_none() && !args.unauthenticated {
                bail!(
                    "--p4 without a key: give --key-file FILE (a key the node has, e.g. \
                     examples/config/demo-key.hex), or --unauthenticated to send it without one"
                );
            }
            let target = match args.target {
                Some(t) => t,
                None => running_p4_target(&args.socket)?,
            };
            PushOp::Update {
                target,
                kind: "p4".into(),
                payload,
                key_id: if key.is_some() { args.key_id } else { 0 },
                key,
                seq: None,
                worker: "all".into(),
                no_ack: false,
            }
        }
    };
    cli::push(&args.socket, op, args.json)
}

/// `push slots` for people: one line per target and program, with the workers running it.
fn print_slots(socket: &std::path::Path) -> anyhow::Result<()> {
    let slots = hotplane_control::api::Client::connect(socket)?.call(&Request::Slots {})?;
    // (target, version, program) -> workers, in target order.
    let mut rows: Vec<(String, u64, String, Vec<u64>)> = Vec::new();
    for s in slots.as_array().into_iter().flatten() {
        let key = (
            s["target"].as_str().unwrap_or("?").to_string(),
            s["version"].as_u64().unwrap_or(0),
            s["program"].as_str().unwrap_or("?").to_string(),
        );
        let worker = s["worker"].as_u64().unwrap_or(0);
        match rows.iter_mut().find(|r| (&r.0, r.1, &r.2) == (&key.0, key.1, &key.2)) {
            Some(r) => r.3.push(worker),
            None => rows.push((key.0, key.1, key.2, vec![worker])),
        }
    }
    println!("{:<16} {:<8} {:>8}  program", "target", "workers", "version");
    for (target, version, program, workers) in rows {
        let ws: Vec<String> = workers.iter().map(u64::to_string).collect();
        println!("{target:<16} {:<8} {version:>8}  {program}", ws.join(","));
    }
    Ok(())
}

/// `push flows` for people: each flow function with its selector and packets.
fn print_flows(socket: &std::path::Path, worker: Option<u16>) -> anyhow::Result<()> {
    let flows = hotplane_control::api::Client::connect(socket)?.call(&Request::Flows { worker })?;
    let flows = flows.as_array().cloned().unwrap_or_default();
    if flows.is_empty() {
        println!("(no flow functions on worker {})", worker.unwrap_or(0));
        return Ok(());
    }
    println!("{:<36} {:>8} {:>12}  function", "selector", "version", "packets");
    for f in flows {
        println!(
            "{:<36} {:>8} {:>12}  {}",
            f["selector"].as_str().unwrap_or("?"),
            f["version"].as_u64().unwrap_or(0),
            f["packets"].as_u64().unwrap_or(0),
            f["function"].as_str().unwrap_or("?")
        );
    }
    Ok(())
}

/// Where the running P4 program is, from the slot listing.
fn running_p4_target(socket: &std::path::Path) -> anyhow::Result<String> {
    let mut client = hotplane_control::api::Client::connect(socket)?;
    let slots = client.call(&Request::Slots {})?;
    let mut targets: Vec<String> = slots
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["program"].as_str().is_some_and(|p| p.starts_with("p4 ")))
        .filter_map(|s| s["target"].as_str().map(String::from))
        .collect();
    targets.sort();
    targets.dedup();
    match &targets[..] {
        [t] => Ok(t.clone()),
        [] => bail!("no P4 program is running; give --target pre|mid|post"),
        many => bail!("P4 programs run at {}; give --target", many.join(", ")),
    }
}

fn key_of(key: Option<String>, key_file: Option<PathBuf>) -> anyhow::Result<Option<[u8; 32]>> {
    Ok(match (key, key_file) {
        (Some(k), None) => Some(hotplane_control::parse_key(&k).map_err(anyhow::Error::msg)?),
        (None, Some(f)) => {
            let text = std::fs::read_to_string(&f)
                .map_err(|e| anyhow::anyhow!("--key-file {}: {e}", f.display()))?;
            Some(hotplane_control::parse_key(&text).map_err(anyhow::Error::msg)?)
        }
        (None, None) => None,
        _ => bail!("give --key or --key-file, not both"),
    })
}

fn push_op(op: PushCmd) -> anyhow::Result<PushOp> {
    let stage_json = |s: &str| {
        serde_json::from_str::<serde_json::Value>(s).map_err(|e| anyhow::anyhow!("--stage: {e}"))
    };
    Ok(match op {
        PushCmd::Stats => PushOp::Request(Request::Stats {}),
        PushCmd::Slots => PushOp::Request(Request::Slots {}),
        PushCmd::Flows { worker } => PushOp::Request(Request::Flows { worker }),
        PushCmd::Predefined => PushOp::Request(Request::Predefined {}),
        PushCmd::Metrics => PushOp::Request(Request::Metrics {}),
        PushCmd::Shutdown => PushOp::Request(Request::Shutdown {}),
        PushCmd::ChainStatus => PushOp::Request(Request::ChainStatus {}),
        PushCmd::WaspGet { store, key, scope } => {
            PushOp::Request(Request::WaspGet { store, key, scope })
        }
        PushCmd::P4Tables { target } => PushOp::Request(Request::P4Tables { target }),
        PushCmd::P4Dump { table, target } => PushOp::Request(Request::P4Dump { target, table }),
        PushCmd::P4Entries { file, target } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let doc = serde_json::from_str(&text)
                .with_context(|| format!("{}: not JSON", file.display()))?;
            PushOp::Request(Request::P4Entries { target, doc })
        }
        PushCmd::Install { target, stage, worker } => {
            PushOp::Request(Request::Install { target, worker, stage: stage_json(&stage)? })
        }
        PushCmd::Switch { target, id, worker } => {
            PushOp::Request(Request::Switch { target, worker, id })
        }
        PushCmd::Remove { target, worker } => PushOp::Request(Request::Remove { target, worker }),
        PushCmd::Update {
            target,
            kind,
            stage,
            id,
            payload_file,
            key_id,
            key,
            key_file,
            seq,
            worker,
            no_ack,
        } => {
            let payload = match (stage, id, payload_file) {
                (Some(s), None, None) => {
                    stage_json(&s)?;
                    s.into_bytes()
                }
                (None, Some(id), None) => id.to_be_bytes().to_vec(),
                (None, None, Some(f)) => std::fs::read(&f)
                    .map_err(|e| anyhow::anyhow!("--payload-file {}: {e}", f.display()))?,
                (None, None, None) if kind == "remove" => Vec::new(),
                _ => anyhow::bail!("give one of --stage, --id, --payload-file"),
            };
            let key = key_of(key, key_file)?;
            PushOp::Update { target, kind, payload, key_id, key, seq, worker, no_ack }
        }
    })
}

/// The P4 source of `--p4 FILE` with its includes bundled, compiled here first: a mistake is
/// reported against the user's own files, and the update is not sent.
#[cfg(feature = "p4")]
fn p4_payload(file: &std::path::Path, include: &[PathBuf]) -> anyhow::Result<Vec<u8>> {
    hotplane_p4::compile_file(file, include, &[]).map_err(|e| anyhow::anyhow!("{e}"))?;
    let bundled =
        hotplane_p4::preprocess::bundle(file, include).map_err(|e| anyhow::anyhow!("--p4: {e}"))?;
    let name = file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    Ok(hotplane_p4::naming::named_source(&name, bundled).into_bytes())
}

#[cfg(not(feature = "p4"))]
fn p4_payload(_: &std::path::Path, _: &[PathBuf]) -> anyhow::Result<Vec<u8>> {
    bail!("--p4: this hotplane was built without P4 (cargo feature `p4`)")
}
