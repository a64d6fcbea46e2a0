//! `hotplane switch`: hotplane with `simple_switch_grpc`'s command line, so that scripts, PTF
//! runs and Mininet glue written for BMv2 start hotplane instead, unchanged:
//!
//! ```text
//! hotplane switch -i 0@veth0 -i 1@veth2 --device-id 0 --no-p4 -- --grpc-server-addr 0.0.0.0:9559 --cpu-port 255
//! ```
//!
//! `-i PORT@IFACE` binds P4 port PORT to an interface (AF_PACKET by default; `--port-kind
//! afxdp` for AF_XDP); port numbers between them that no interface has are ports that drop what
//! is sent to them, as BMv2's missing ports do. The pipeline drops every packet until a
//! controller pushes one (or a program is given: a device config `hotplane p4c` wrote, or P4
//! source). Thrift, logging, pcap and debugger options are accepted and ignored. Installed as
//! (or linked to) a name containing `grpc` or starting with `simple_switch`, the binary runs this
//! command.

use crate::cli::flag_value;
use anyhow::{bail, Context as _};
use hotplane_engine::Config;
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Options of simple_switch that change nothing here, with whether they take a value.
const IGNORED: &[(&str, bool)] = &[
    ("--thrift-port", true),
    ("--log-file", true),
    ("--log-level", true),
    ("-L", true),
    ("--log-flush", false),
    ("--log-console", false),
    ("--dump-packet-data", true),
    ("--nanolog", true),
    ("--notifications-addr", true),
    ("--debugger", false),
    ("--debugger-addr", true),
    ("--restore-state", true),
    ("--use-files", true),
    ("--max-port-count", true),
    ("--priority-queues", true),
    ("--drop-port", true),
    ("--load-modules", true),
    ("--packet-in", true),
];

/// Highest P4 port number bound to an interface: the ports below it that no interface has
/// are made too.

#[derive(Debug, PartialEq)]
struct SwitchArgs {
    /// (P4 port, interface), as given.
    ports: Vec<(u32, String)>,
    device_id: u64,
    no_p4: bool,
    program: Option<PathBuf>,
    grpc_addr: String,
    cpu_port: Option<u32>,
    port_kind: String,
    ignored: Vec<String>,
    tls: TlsArgs,
}

/// simple_switch_grpc's TLS options.
#[derive(Debug, Default, PartialEq)]
struct TlsArgs {
    /// `--grpc-server-ssl`
    on: bool,
    cert: Option<String>,
    key: Option<String>,
    /// `--grpc-server-cacert`: the CA client certificates must come from.
    ca: Option<String>,
    /// `--grpc-server-with-client-auth`
    client_auth: bool,
}

const USAGE: &str = "usage: hotplane switch [-i PORT@IFACE]... [--device-id N] [--no-p4 | \
    PROGRAM] [--port-kind afpacket|afxdp] [-- [--grpc-server-addr ADDR] [--cpu-port N] \
    [--grpc-server-ssl --grpc-server-cert PEM --grpc-server-key PEM [--grpc-server-cacert PEM \
    --grpc-server-with-client-auth]]]";

fn parse(args: &[String]) -> anyhow::Result<SwitchArgs> {
    let mut a = SwitchArgs {
        ports: Vec::new(),
        // simple_switch_grpc's default.
        device_id: 0,
        no_p4: false,
        program: None,
        grpc_addr: "0.0.0.0:9559".into(),
        cpu_port: None,
        port_kind: "afpacket".into(),
        ignored: Vec::new(),
        tls: TlsArgs::default(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            // simple_switch_grpc's target options; they may come before `--` too.
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f, Some(v)),
            _ => (arg.as_str(), None),
        };
        let mut value = || flag_value(flag, inline, &mut it);
        match flag {
            "-h" | "--help" => bail!("{USAGE}"),
            "-i" | "--interface" => {
                let port = crate::cli::interface(&value()?, &a.ports)?;
                a.ports.push(port);
            }
            "--device-id" => {
                let v = value()?;
                a.device_id = v.parse().with_context(|| format!("--device-id {v}"))?;
            }
            "--no-p4" => a.no_p4 = true,
            "--grpc-server-addr" => a.grpc_addr = value()?,
            "--cpu-port" => {
                let v = value()?;
                a.cpu_port = Some(v.parse().with_context(|| format!("--cpu-port {v}"))?);
            }
            "--port-kind" => {
                let k = value()?;
                if k != "afpacket" && k != "afxdp" {
                    bail!("--port-kind {k}: afpacket or afxdp");
                }
                a.port_kind = k;
            }
            "--grpc-server-ssl" => a.tls.on = true,
            "--grpc-server-cert" => a.tls.cert = Some(value()?),
            "--grpc-server-key" => a.tls.key = Some(value()?),
            "--grpc-server-cacert" => a.tls.ca = Some(value()?),
            "--grpc-server-with-client-auth" => a.tls.client_auth = true,
            // BMv2's `--pcap [DIR]`: the directory is optional.
            "--pcap" => {
                if inline.is_none() && it.as_slice().first().is_some_and(|n| !n.starts_with('-')) {
                    it.next();
                }
                a.ignored.push("--pcap".into());
            }
            f if IGNORED.iter().any(|(i, _)| *i == f) => {
                if IGNORED.iter().any(|(i, takes)| *i == f && *takes) && inline.is_none() {
                    it.next();
                }
                a.ignored.push(f.to_string());
            }
            f if f.starts_with('-') => {
                bail!("{f}: an option hotplane switch does not know\n{USAGE}")
            }
            _ => {
                if a.program.replace(arg.into()).is_some() {
                    bail!("more than one program given\n{USAGE}");
                }
            }
        }
    }
    if a.no_p4 && a.program.is_some() {
        bail!("--no-p4 and a program: give one or the other");
    }
    let t = &a.tls;
    let given = t.cert.is_some() || t.key.is_some() || t.ca.is_some() || t.client_auth;
    if given && !t.on {
        bail!("TLS options without --grpc-server-ssl: add it, or leave them out");
    }
    if t.on && (t.cert.is_none() || t.key.is_none()) {
        bail!("--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key");
    }
    if t.client_auth && t.ca.is_none() {
        bail!("--grpc-server-with-client-auth needs --grpc-server-cacert (the clients' CA)");
    }
    Ok(a)
}

/// The address to listen on: without TLS client certificates an unspecified one (`0.0.0.0`,
/// `[::]`, what the Mininet glue passes) becomes loopback, since without them the server never
/// listens beyond it; the controllers these tools run connect to localhost.
fn listen_addr(addr: &str, tls: bool) -> anyhow::Result<SocketAddr> {
    let mut a: SocketAddr =
        addr.parse().with_context(|| format!("--grpc-server-addr {addr}: not ADDRESS:PORT"))?;
    if a.ip().is_unspecified() && !tls {
        let loopback: std::net::IpAddr = if a.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        };
        a.set_ip(loopback);
    }
    Ok(a)
}

/// The data plane config the arguments describe.
fn config(a: &SwitchArgs) -> anyhow::Result<Config> {
    let ports = crate::cli::ports_json(&a.ports, &a.port_kind);
    let pre = match &a.program {
        None => json!({"stage": "drop"}),
        Some(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let program = hotplane_p4rt::device::decode(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            json!({"stage": "p4", "source": program.source, "name": program.name})
        }
    };
    let listen = listen_addr(&a.grpc_addr, a.tls.client_auth)?;
    let mut p4runtime = json!({
        "listen": listen.to_string(),
        "device_id": a.device_id,
        "cpu_port": a.cpu_port.unwrap_or(0),
    });
    if a.tls.on {
        let mut tls = json!({"cert": a.tls.cert, "key": a.tls.key});
        // BMv2 takes the CA alone as nothing more: client certificates are asked for only
        // with --grpc-server-with-client-auth.
        if a.tls.client_auth {
            tls["client_ca"] = json!(a.tls.ca);
        }
        p4runtime["tls"] = tls;
    }
    let doc = json!({
        // Idle workers sleep in poll(2): many switches share few cores (Mininet).
        "dataplane": {"workers": 1, "idle": "wait"},
        // Traffic through a switch is not addressed to it: no in-band updates.
        "control": {"update_port": 0},
        "port": ports,
        "pipeline": {"pre": pre},
        "p4runtime": p4runtime,
    });
    let text = toml::to_string(&doc).context("the switch's config")?;
    Ok(Config::parse(&text, "hotplane switch")?)
}

/// `hotplane switch ARGS...`: runs until SIGINT or SIGTERM.
pub fn main(args: &[String]) -> anyhow::Result<()> {
    let a = parse(args)?;
    if !a.ignored.is_empty() {
        eprintln!("hotplane switch: ignoring {} (BMv2 options)", a.ignored.join(" "));
    }
    let requested = a.grpc_addr.clone();
    let cfg = config(&a)?;
    let listen = listen_addr(&requested, a.tls.client_auth)?;
    if listen.to_string() != requested {
        eprintln!(
            "hotplane switch: P4Runtime listens on {listen} (asked for {requested}): \
             loopback only without TLS client certificates (--grpc-server-with-client-auth)"
        );
    }
    if a.tls.ca.is_some() && !a.tls.client_auth {
        eprintln!(
            "hotplane switch: --grpc-server-cacert without --grpc-server-with-client-auth: \
             clients are not asked for certificates (as BMv2)"
        );
    }
    crate::cli::run_config(cfg, false, 0, true, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_mininet_and_ptf_command_lines_parse() {
        // As the tutorials' p4runtime_switch.py joins it (then the shell splits it).
        let a = parse(&args(
            "-i 1@s1-eth1 -i 2@s1-eth2 --pcap /tmp/pcaps --nanolog ipc:///tmp/bm-0-log.ipc \
             --device-id 0 build/basic.json --log-console --thrift-port 9090 -- \
             --grpc-server-addr 0.0.0.0:50051 --cpu-port 255",
        ))
        .unwrap();
        assert_eq!(a.ports, vec![(1, "s1-eth1".into()), (2, "s1-eth2".into())]);
        assert_eq!(a.program, Some("build/basic.json".into()));
        assert_eq!((a.grpc_addr.as_str(), a.cpu_port), ("0.0.0.0:50051", Some(255)));
        assert!(a.ignored.contains(&"--thrift-port".to_string()));
        let b = parse(&args(
            "--log-file ss-log --log-flush --dump-packet-data 10000 -i 0@veth0 -i 1@veth2 --no-p4",
        ))
        .unwrap();
        assert!(b.no_p4 && b.device_id == 0 && b.grpc_addr == "0.0.0.0:9559");
        assert!(parse(&args("-i 1@a -i 1@b")).is_err());
        assert!(parse(&args("-i x@a")).is_err());
        let no_cert = parse(&args("-- --grpc-server-ssl")).unwrap_err().to_string();
        assert!(no_cert.contains("--grpc-server-cert"), "{no_cert}");
        let no_ssl = parse(&args("--grpc-server-cert c.pem")).unwrap_err().to_string();
        assert!(no_ssl.contains("--grpc-server-ssl"), "{no_ssl}");
        let no_ca = "--grpc-server-ssl --grpc-server-cert c --grpc-server-key k \
                     --grpc-server-with-client-auth";
        assert!(parse(&args(no_ca)).unwrap_err().to_string().contains("cacert"));
        assert!(parse(&args("--frobnicate")).is_err());
        let c = parse(&args("--pcap -i 0@veth0 --no-p4")).unwrap();
        assert_eq!(c.ports, vec![(0, "veth0".into())], "--pcap takes no value here");
    }

    #[test]
    fn unspecified_addresses_become_loopback_and_gaps_become_ports() {
        assert_eq!(listen_addr("0.0.0.0:50051", false).unwrap().to_string(), "127.0.0.1:50051");
        assert_eq!(listen_addr("[::]:9559", false).unwrap().to_string(), "[::1]:9559");
        assert_eq!(listen_addr("127.0.0.1:1", false).unwrap().to_string(), "127.0.0.1:1");
        assert_eq!(listen_addr("0.0.0.0:50051", true).unwrap().to_string(), "0.0.0.0:50051");
        let a = parse(&args("-i 2@veth0 --no-p4")).unwrap();
        let cfg = config(&a).unwrap();
        let names: Vec<&str> = cfg.ports.iter().map(|p| p.name()).collect();
        assert_eq!(names, vec!["unbound0", "unbound1", "veth0"]);
        assert_eq!(cfg.control.update_port, 0);
    }

    #[test]
    fn tls_options_become_the_servers_tls_section() {
        let a = parse(&args(
            "--no-p4 -- --grpc-server-addr 0.0.0.0:9559 --grpc-server-ssl --grpc-server-cert \
             s.pem --grpc-server-key s.key --grpc-server-cacert ca.pem \
             --grpc-server-with-client-auth",
        ))
        .unwrap();
        let mut cfg = config(&a).unwrap();
        let p4rt = crate::p4rt_cmd::take_section(&mut cfg, None).unwrap().unwrap();
        assert_eq!(p4rt.listen.to_string(), "0.0.0.0:9559", "TLS: not only loopback");
        let tls = p4rt.tls.unwrap();
        assert_eq!((tls.cert.to_str(), tls.key.to_str()), (Some("s.pem"), Some("s.key")));
        assert_eq!(tls.client_ca.unwrap().to_str(), Some("ca.pem"));
    }
}
