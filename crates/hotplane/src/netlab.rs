//! A small network lab for tests and benchmarks: network namespaces joined by veth pairs,
//! created with iproute2 and removed when the lab is dropped (also after a failure or panic).
//! Interfaces live only inside the lab's namespaces: nothing touches the host's own network.

use anyhow::{bail, Context};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Names of namespaces a lab creates start with this, so stale ones are easy to find.
pub const PREFIX: &str = "hplab";

pub struct Lab {
    tag: String,
    namespaces: Vec<String>,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out =
        Command::new("ip").args(args).output().context("running `ip` (is iproute2 installed?)")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Whether this process may create namespaces and open packet sockets.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Lab {
    /// A new, empty lab; `label` appears in its namespace names (`hplab-<pid>-<n>-<label>-...`).
    pub fn new(label: &str) -> anyhow::Result<Self> {
        if !is_root() {
            bail!("network namespaces and packet sockets need root (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW)");
        }
        static N: AtomicU32 = AtomicU32::new(0);
        let tag = format!(
            "{PREFIX}-{}-{}-{label}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        Ok(Self { tag, namespaces: Vec::new() })
    }

    /// Create namespace `<tag>-<name>` with loopback up and IPv6 off (no stray router or
    /// neighbour solicitations on the test links). Returns its full name.
    pub fn netns(&mut self, name: &str) -> anyhow::Result<String> {
        let full = format!("{}-{name}", self.tag);
        ip(&["netns", "add", &full])?;
        self.namespaces.push(full.clone());
        ip(&["-n", &full, "link", "set", "lo", "up"])?;
        for key in ["all", "default"] {
            let path = format!("net.ipv6.conf.{key}.disable_ipv6=1");
            let _ =
                Command::new("ip").args(["netns", "exec", &full, "sysctl", "-qw", &path]).status();
        }
        Ok(full)
    }

    /// A veth pair: `a_if` in namespace `a`, `b_if` in namespace `b`, both up, with `queues`
    /// RX/TX queues each.
    pub fn veth(
        &self,
        a: &str,
        a_if: &str,
        b: &str,
        b_if: &str,
        queues: u32,
    ) -> anyhow::Result<()> {
        let q = queues.max(1).to_string();
        ip(&[
            "-n",
            a,
            "link",
            "add",
            a_if,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            b_if,
            "netns",
            b,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        ip(&["-n", a, "link", "set", a_if, "up"])?;
        ip(&["-n", b, "link", "set", b_if, "up"])?;
        Ok(())
    }

    /// Run a command inside a namespace.
    pub fn exec(&self, ns: &str, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new("ip").args(["netns", "exec", ns]).args(args).output()?;
        if !out.status.success() {
            bail!("{}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Delete an interface (and with it its veth peer).
    pub fn delete_link(&self, ns: &str, ifname: &str) -> anyhow::Result<()> {
        ip(&["-n", ns, "link", "del", ifname])
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in self.namespaces.drain(..).rev() {
            if let Err(e) = ip(&["netns", "del", &ns]) {
                eprintln!("netlab: could not remove namespace {ns}: {e}");
            }
        }
    }
}

/// Remove namespaces left by labs of processes that no longer run (a killed test or benchmark).
pub fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else { return };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(&format!("{PREFIX}-")) else { continue };
        let pid: u32 = rest.split('-').next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if pid != 0 && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}
