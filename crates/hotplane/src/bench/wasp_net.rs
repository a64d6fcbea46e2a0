//! `hotplane bench wasp-net` (root): every application of `examples/wasp/` across a real network
//! of four hotplane routers and one plain Linux router, in network namespaces joined by veths.
//!
//! ```text
//!   H1 ─── R1 ─── R2 ─── L ─── R3 ─── R4 ─── H2      H1 10.0.1.2 (and .11-.18), H2 10.0.2.2
//!                 │                                  L: Linux, 10.0.1.1 | 10.0.2.1, ip_forward
//!                 H3 10.0.1.3                        R1..R4: hotplane, node ids 1..4, 10.255.0.N
//! ```
//!
//! How the pieces fit (the decisions the issue leaves open):
//!
//! - **R1..R4** are `hotplane run` processes started inside their namespaces (`ip netns exec`),
//!   AF_PACKET ports (`--port afxdp` for AF_XDP), `pre = { stage = "wasp", store = "node" }`
//!   and `mid` an IPv4 router step in Lua (generated per router): drop at TTL 1, decrement the
//!   TTL, pick the output port by destination, and rewrite the MACs to the output port's own
//!   and the next hop's (static, as a router's neighbour table). So every router, WASP or
//!   legacy, decrements the TTL, and the programs that count distance by TTL (`advertise`,
//!   `nearest`) count routers; the WASP stage runs before the decrement and sees the TTL the
//!   packet arrived with.
//! - **One store per node** (`store = "node"`, not the seed's store per input port): a
//!   router must compare advertisements arriving from either side with queries from either
//!   side, which per-port stores would keep apart. `wasp-get` reads store `node`.
//! - **Link layer**: the hotplane routers have no addresses on the links (they answer no
//!   ARP), so every neighbour entry is static: a host's gateway (L's address) maps to the MAC
//!   of the router port it is wired to, L's neighbours to R2's and R3's ports. Hosts turn off
//!   TX checksum offload (a veth hands AF_PACKET a partial UDP checksum that a software data
//!   plane would forward as is); the receivers' kernels verify the UDP checksum across the
//!   shim rewrites.
//! - **Hosts** send and receive UDP-carried active packets (port 9277) with ordinary sockets
//!   opened in their namespaces; the receivers read the TTL each packet arrived with.
//! - **Trunk** needs two sources whose paths join: H3 hangs off R2 (a third port). The marker
//!   goes H3 -> H2 (R2 L R3 R4), the finder H1 -> H2 (R1 R2 L R3 R4): the finder crosses R1
//!   unmarked and must name R2, where the paths join.
//! - **Advertise/nearest**: two providers, one announced from each end (H1 -> H2 and H2 -> H1),
//!   so every router keeps the nearer; queries from H1, H2 and H3 must find the provider the
//!   topology says is nearest. The service key is *protected*: advertisements are admin packets
//!   sealed with the routers' admin key (`[wasp] admin_keys`, a fresh random key per run) and
//!   increasing sequence numbers; a public advertisement under the same key must change
//!   nothing (it faults `protected` at every router); the queries are ordinary packets that
//!   may read it.
//! - **Ratectl**: `e.queue` is the packet's batch backlog at the router (docs/wasp.md §9). With
//!   threshold 0, packets sent 3 ms apart travel alone and all arrive; a burst queues up and
//!   thins itself out.
//!
//! Ground truth (paths, distances, the join router) comes from the topology model below, the
//! results from the packets the hosts receive and the routers' stores (`wasp-get` on each
//! router's control socket). Everything made is removed at the end, also on failure: the
//! processes are killed when their handles drop (and get SIGTERM if this process dies), then
//! the namespaces go with the lab.

use super::emit;
use crate::netlab::Lab;
use anyhow::{anyhow, bail, Context as _};
use hotplane_wasp::admin::seal;
use hotplane_wasp::asm::assemble;
use hotplane_wasp::wire::{
    AdminTrailer, Scope, WaspPacket, WaspRepr, DEFAULT_UDP_PORT, NO_NEXT_HEADER,
};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub struct Opts {
    #[arg(long)]
    pub json: bool,
    /// Directory for the picture (wasp-net.png).
    #[arg(long, default_value = "target/bench-wasp-net")]
    pub out: PathBuf,
    /// Port kind of the hotplane routers: afpacket or afxdp.
    #[arg(long, default_value = "afpacket", value_parser = ["afpacket", "afxdp"])]
    pub port: String,
}

// ---------------------------------------------------------------------------------------------
// The topology model: nodes, links, paths.

const H1: usize = 0;
const R1: usize = 1;
const R2: usize = 2;
const L: usize = 3;
const R3: usize = 4;
const R4: usize = 5;
const H2: usize = 6;
const H3: usize = 7;
const NAMES: [&str; 8] = ["H1", "R1", "R2", "L", "R3", "R4", "H2", "H3"];
/// The hotplane routers, in path order (node id = position + 1).
const WASP: [usize; 4] = [R1, R2, R3, R4];
/// The main path, west to east.
const EAST: [usize; 5] = [R1, R2, L, R3, R4];

/// (node, interface, node, interface): one veth each.
const LINKS: [(usize, &str, usize, &str); 7] = [
    (H1, "eth0", R1, "west"),
    (R1, "east", R2, "west"),
    (R2, "east", L, "west"),
    (H3, "eth0", R2, "south"),
    (L, "east", R3, "west"),
    (R3, "east", R4, "west"),
    (R4, "east", H2, "eth0"),
];
/// A router's ports in configuration order (port index = position among those it has).
const ROUTER_PORTS: [&str; 3] = ["west", "east", "south"];

const WEST_NET: [u8; 3] = [10, 0, 1];
const EAST_NET: [u8; 3] = [10, 0, 2];
const INITIAL_TTL: u8 = 64;

fn host_addr(host: usize) -> Ipv4Addr {
    match host {
        H1 => Ipv4Addr::new(10, 0, 1, 2),
        H3 => Ipv4Addr::new(10, 0, 1, 3),
        _ => Ipv4Addr::new(10, 0, 2, 2),
    }
}

fn router_id(node: usize) -> u64 {
    WASP.iter().position(|&r| r == node).map_or(0, |i| i as u64 + 1)
}

fn router_addr(node: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 255, 0, router_id(node) as u8)
}

/// Where a host joins the main path: the index in [`EAST`] of its first router going east.
fn attach(host: usize) -> usize {
    match host {
        H1 => 0,
        H3 => 1,
        _ => EAST.len(),
    }
}

/// The routers a packet from host `from` to host `to` crosses, in order.
fn path(from: usize, to: usize) -> Vec<usize> {
    let (a, b) = (attach(from), attach(to));
    if a < b {
        EAST[a..b].to_vec()
    } else {
        EAST[b..a].iter().rev().copied().collect()
    }
}

fn is_wasp(node: usize) -> bool {
    WASP.contains(&node)
}

/// The MAC of `node`'s interface `ifname`: 02:00:57:00:<link>:<side>.
fn mac(node: usize, ifname: &str) -> [u8; 6] {
    for (i, &(a, a_if, b, b_if)) in LINKS.iter().enumerate() {
        if (a, a_if) == (node, ifname) {
            return [2, 0, 0x57, 0, i as u8 + 1, 1];
        }
        if (b, b_if) == (node, ifname) {
            return [2, 0, 0x57, 0, i as u8 + 1, 2];
        }
    }
    [0; 6]
}

/// The (node, interface) at the other end of `node`'s `ifname`.
fn neighbour(node: usize, ifname: &str) -> Option<(usize, &'static str)> {
    LINKS.iter().find_map(|&(a, a_if, b, b_if)| {
        if (a, a_if) == (node, ifname) {
            Some((b, b_if))
        } else if (b, b_if) == (node, ifname) {
            Some((a, a_if))
        } else {
            None
        }
    })
}

fn ports_of(node: usize) -> Vec<&'static str> {
    ROUTER_PORTS.iter().copied().filter(|p| neighbour(node, p).is_some()).collect()
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn mac_number(m: [u8; 6]) -> u64 {
    m.iter().fold(0, |acc, &b| acc << 8 | u64::from(b))
}

// ---------------------------------------------------------------------------------------------
// The network: namespaces, the Linux router, hosts and hotplane processes.

/// A private directory for configs, Lua files, logs and control sockets (mode 0700: the
/// control socket refuses a directory others can write), removed on drop.
struct TmpDir(PathBuf);

impl TmpDir {
    fn new() -> anyhow::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        const PREFIX: &str = "hotplane-wasp-net-";
        // Directories of runs that were killed (their namespaces go with remove_stale).
        for entry in std::fs::read_dir(std::env::temp_dir())?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid: u32 = name.strip_prefix(PREFIX).and_then(|p| p.parse().ok()).unwrap_or(0);
            if pid != 0 && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let path = std::env::temp_dir().join(format!("{PREFIX}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A hotplane process; killed when dropped.
struct Router {
    node: usize,
    socket: PathBuf,
    log: PathBuf,
    child: Child,
}

impl Drop for Router {
    fn drop(&mut self) {
        // SAFETY: signalling our own child, which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Router {
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }

    /// The word-0.. bank of `key` in the node's store (`None`: no entry).
    fn get(&self, key: u64, scope: &str) -> anyhow::Result<Option<[u64; 4]>> {
        let mut s = UnixStream::connect(&self.socket)
            .with_context(|| format!("{}: control socket", NAMES[self.node]))?;
        s.set_read_timeout(Some(Duration::from_secs(3)))?;
        let request = json!({"op": "wasp-get", "store": "node", "key": key, "scope": scope});
        writeln!(s, "{request}")?;
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line)?;
        let v: Value = serde_json::from_str(&line).context("wasp-get answer")?;
        if v["ok"] != true {
            bail!("{}: wasp-get: {}", NAMES[self.node], v["error"]);
        }
        if v["result"]["present"] != true {
            return Ok(None);
        }
        let mut words = [0u64; 4];
        for (w, x) in words.iter_mut().zip(v["result"]["words"].as_array().into_iter().flatten()) {
            *w = x.as_u64().unwrap_or(0);
        }
        Ok(Some(words))
    }
}

struct Host {
    node: usize,
    ns: String,
    /// Bound to port 9277: receives active packets (with their arrival TTL).
    rx: UdpSocket,
    /// Bound to the host's address: sends them.
    tx: UdpSocket,
}

/// Everything the bench made. Fields drop in order: processes, sockets, files, namespaces.
struct Net {
    routers: Vec<Router>,
    hosts: Vec<Host>,
    dir: TmpDir,
    ns: Vec<String>,
    _lab: Lab,
}

impl Drop for Net {
    /// Asks every router to stop at once; each one's own drop then waits for it (or kills it).
    fn drop(&mut self) {
        for r in &self.routers {
            // SAFETY: signalling our own child, which has not been reaped yet.
            unsafe { libc::kill(r.child.id() as i32, libc::SIGTERM) };
        }
    }
}

fn ip(lab: &Lab, ns: &str, args: &[&str]) -> anyhow::Result<()> {
    let mut all = vec!["ip"];
    all.extend_from_slice(args);
    lab.exec(ns, &all).map(|_| ())
}

/// Turns off TX checksum offload of `ifname` in the calling thread's namespace (ethtool -K
/// IFNAME tx off, without needing ethtool).
fn tx_checksum_off(ifname: &str) -> std::io::Result<()> {
    const SIOCETHTOOL: u64 = 0x8946;
    const ETHTOOL_STXCSUM: u32 = 0x17;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        data: *mut EthtoolValue,
        _pad: [u8; 16],
    }
    let sock = UdpSocket::bind("0.0.0.0:0")?;
    let mut value = EthtoolValue { cmd: ETHTOOL_STXCSUM, data: 0 };
    let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: &mut value, _pad: [0; 16] };
    let n = ifname.len().min(libc::IFNAMSIZ - 1);
    req.name[..n].copy_from_slice(&ifname.as_bytes()[..n]);
    // SAFETY: SIOCETHTOOL reads the ifreq and the ethtool_value it points at, both live here.
    if unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReq) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A UDP socket bound to `addr` inside namespace `ns`, reporting arrival TTLs.
fn udp_in(ns: &str, addr: SocketAddrV4) -> anyhow::Result<UdpSocket> {
    let sock = hotplane_io::netns::run_in(Some(ns), || UdpSocket::bind(addr))?
        .with_context(|| format!("binding {addr} in {ns}"))?;
    sock.set_ttl(u32::from(INITIAL_TTL))?;
    let on: libc::c_int = 1;
    // SAFETY: IP_RECVTTL takes an int, passed by pointer with its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_RECVTTL,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error()).context("IP_RECVTTL");
    }
    Ok(sock)
}

/// Generated Lua: the router step of `node` (TTL, output port by destination, MACs).
fn router_lua(node: usize) -> String {
    let ports = ports_of(node);
    let index = |p: &str| ports.iter().position(|q| *q == p).unwrap_or(0);
    let mut own = Vec::new();
    let mut next = Vec::new();
    for (i, p) in ports.iter().enumerate() {
        let (n, n_if) = neighbour(node, p).unwrap_or((node, p));
        own.push(format!("[{i}] = 0x{:012x}", mac_number(mac(node, p))));
        next.push(format!("[{i}] = 0x{:012x}", mac_number(mac(n, n_if))));
    }
    let east = u32::from(Ipv4Addr::new(EAST_NET[0], EAST_NET[1], EAST_NET[2], 0));
    let south = if ports.contains(&"south") {
        format!(
            "elseif dst == 0x{:08x} then out = {}\n  ",
            u32::from(host_addr(H3)),
            index("south")
        )
    } else {
        String::new()
    };
    format!(
        "-- hotplane bench wasp-net: {name}'s IPv4 router step (generated). Drop at TTL 1,\n\
         -- decrement the TTL, choose the output port by destination, rewrite the MACs to the\n\
         -- output port's own and the next hop's (static neighbours).\n\
         local OWN = {{ {own} }}\n\
         local NEXT = {{ {next} }}\n\
         return function(pkt)\n  \
           local p = pkt:getIP4Packet()\n  \
           if not p then return pkt:drop() end\n  \
           local ttl = p.ip4:getTTL()\n  \
           if ttl <= 1 then return pkt:drop() end\n  \
           local dst = p.ip4:getDst()\n  \
           local out = {west}\n  \
           if dst >= 0x{east:08x} and dst <= 0x{east_hi:08x} then out = {east_port}\n  \
           {south}end\n  \
           if out == pkt:getInPort() then return pkt:drop() end\n  \
           p.ip4:setTTL(ttl - 1)\n  \
           p.ip4:calculateChecksum()\n  \
           p.eth:setSrc(OWN[out])\n  \
           p.eth:setDst(NEXT[out])\n  \
           pkt:forward(out)\n\
         end\n",
        name = NAMES[node],
        own = own.join(", "),
        next = next.join(", "),
        west = index("west"),
        east_hi = east | 0xff,
        east_port = index("east"),
    )
}

/// The routers' admin key (id 1): fresh for every run, from the system's random source.
fn admin_key() -> [u8; 32] {
    static KEY: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        let state = std::collections::hash_map::RandomState::new();
        for (i, chunk) in key.chunks_mut(8).enumerate() {
            use std::hash::BuildHasher;
            chunk.copy_from_slice(&state.hash_one(i).to_le_bytes());
        }
        key
    })
}

fn router_config(node: usize, kind: &str, lua: &Path, socket: &Path) -> String {
    let mut cfg = String::from("[dataplane]\nworkers = 1\nidle = \"yield\"\n\n");
    for p in ports_of(node) {
        cfg += &format!("[[port]]\nname = \"{p}\"\nkind = \"{kind}\"\ninterface = \"{p}\"\n\n");
    }
    cfg += &format!(
        "[pipeline]\npre = {{ stage = \"wasp\", store = \"node\" }}\n\
         mid = {{ stage = \"lua\", file = \"{}\" }}\n\n\
         [wasp]\nnode_id = {}\naddress = \"{}\"\n\
         admin_keys = [{{ id = 1, key = \"{}\" }}]\n\n\
         [control]\nsocket = \"{}\"\nupdate_port = 0\n",
        lua.display(),
        router_id(node),
        router_addr(node),
        admin_key().iter().map(|b| format!("{b:02x}")).collect::<String>(),
        socket.display()
    );
    cfg
}

fn spawn_router(node: usize, ns: &str, kind: &str, dir: &Path) -> anyhow::Result<Router> {
    let name = NAMES[node].to_lowercase();
    let lua = dir.join(format!("{name}.lua"));
    let cfg = dir.join(format!("{name}.toml"));
    let socket = dir.join(format!("{name}.sock"));
    let log = dir.join(format!("{name}.log"));
    std::fs::write(&lua, router_lua(node))?;
    std::fs::write(&cfg, router_config(node, kind, &lua, &socket))?;
    let exe = std::env::current_exe().context("finding the hotplane binary")?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns])
        .arg(exe)
        .args(["run", "-c"])
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?);
    // SAFETY: prctl is async-signal-safe; the child only asks for SIGTERM when this process
    // dies, so that no router outlives a killed bench (`ip netns exec` execs in place).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong);
            Ok(())
        });
    }
    let child = cmd.spawn().context("starting `ip netns exec ... hotplane run`")?;
    Ok(Router { node, socket, log, child })
}

impl Net {
    fn build(kind: &str) -> anyhow::Result<Self> {
        crate::netlab::remove_stale();
        let mut lab = Lab::new("waspnet")?;
        let mut ns = Vec::new();
        for name in NAMES {
            ns.push(lab.netns(&name.to_lowercase())?);
        }
        for &(a, a_if, b, b_if) in &LINKS {
            lab.veth(&ns[a], a_if, &ns[b], b_if, 1)?;
            ip(&lab, &ns[a], &["link", "set", a_if, "address", &mac_text(mac(a, a_if))])?;
            ip(&lab, &ns[b], &["link", "set", b_if, "address", &mac_text(mac(b, b_if))])?;
        }
        // L: a plain Linux router.
        let l = &ns[L];
        ip(&lab, l, &["addr", "add", "10.0.1.1/24", "dev", "west"])?;
        ip(&lab, l, &["addr", "add", "10.0.2.1/24", "dev", "east"])?;
        lab.exec(l, &["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        for (host, dev) in [(H1, "west"), (H3, "west"), (H2, "east")] {
            let (n, n_if) = neighbour(L, dev).unwrap_or((L, dev));
            let addr = host_addr(host).to_string();
            let lladdr = mac_text(mac(n, n_if));
            ip(&lab, l, &["neigh", "replace", &addr, "lladdr", &lladdr, "dev", dev])?;
        }
        // Hosts: the gateway is L's address, its MAC the router port the host is wired to.
        let mut hosts = Vec::new();
        for host in [H1, H2, H3] {
            let h = &ns[host];
            let gw = if host == H2 { "10.0.2.1" } else { "10.0.1.1" };
            ip(&lab, h, &["addr", "add", &format!("{}/24", host_addr(host)), "dev", "eth0"])?;
            if host == H1 {
                for i in 11..=18 {
                    ip(&lab, h, &["addr", "add", &format!("10.0.1.{i}/24"), "dev", "eth0"])?;
                }
            }
            ip(&lab, h, &["route", "add", "default", "via", gw])?;
            let (n, n_if) = neighbour(host, "eth0").unwrap_or((host, "eth0"));
            let lladdr = mac_text(mac(n, n_if));
            ip(&lab, h, &["neigh", "replace", gw, "lladdr", &lladdr, "dev", "eth0"])?;
            hotplane_io::netns::run_in(Some(h), || tx_checksum_off("eth0"))?
                .with_context(|| format!("{}: turning off TX checksum offload", NAMES[host]))?;
            let rx = udp_in(h, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, DEFAULT_UDP_PORT))?;
            let tx = udp_in(h, SocketAddrV4::new(host_addr(host), 0))?;
            hosts.push(Host { node: host, ns: h.clone(), rx, tx });
        }
        let dir = TmpDir::new()?;
        let mut net = Net { routers: Vec::new(), hosts, dir, ns, _lab: lab };
        for node in WASP {
            let r = spawn_router(node, &net.ns[node], kind, &net.dir.0)?;
            net.routers.push(r);
        }
        net.wait_up()?;
        Ok(net)
    }

    /// Wait for every router's control socket, then for a packet to cross the whole path.
    fn wait_up(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        for r in &mut self.routers {
            while UnixStream::connect(&r.socket).is_err() {
                if let Ok(Some(status)) = r.child.try_wait() {
                    bail!("{} exited ({status}):\n{}", NAMES[r.node], r.log_tail());
                }
                if Instant::now() > deadline {
                    bail!("{} did not come up in 20 s:\n{}", NAMES[r.node], r.log_tail());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let probe = program_repr("fwd", &[], &[], 0x0f0f)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.send(H1, H2, &probe)?;
            if !self.receive(H2, 0x0f0f, 1, Duration::from_millis(200))?.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let logs: Vec<String> = self
                    .routers
                    .iter()
                    .map(|r| format!("{}: {}", NAMES[r.node], r.log_tail()))
                    .collect();
                bail!("no packet crossed H1 -> H2 in 10 s; router logs:\n{}", logs.join("\n"));
            }
        }
    }

    fn host(&self, node: usize) -> &Host {
        self.hosts.iter().find(|h| h.node == node).unwrap_or(&self.hosts[0])
    }

    fn router(&self, node: usize) -> &Router {
        self.routers.iter().find(|r| r.node == node).unwrap_or(&self.routers[0])
    }

    fn send(&self, from: usize, to: usize, repr: &WaspRepr) -> anyhow::Result<()> {
        send_on(&self.host(from).tx, to, repr)
    }

    /// Active packets with `cid` arriving at `at`: until `expect` came (then `settle` longer,
    /// to see any extra) or 3 s passed.
    fn receive(
        &self,
        at: usize,
        cid: u32,
        expect: usize,
        settle: Duration,
    ) -> anyhow::Result<Vec<Got>> {
        let sock = &self.host(at).rx;
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut got = Vec::new();
        let mut until = deadline;
        let mut buf = vec![0u8; 2048];
        while Instant::now() < until {
            let wait =
                until.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            sock.set_read_timeout(Some(wait))?;
            match recv_with_ttl(sock, &mut buf) {
                Ok((n, ttl)) => {
                    let shim = buf[..n].to_vec();
                    let p = WaspPacket::new_checked(&shim[..]);
                    if p.as_ref().is_ok_and(|p| p.cid() == cid) {
                        got.push(Got { ttl, shim });
                        if got.len() == expect {
                            until = Instant::now() + settle;
                        }
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(got)
    }

    fn get(&self, node: usize, key: u64) -> anyhow::Result<Option<[u64; 4]>> {
        self.router(node).get(key, "public")
    }

    fn get_protected(&self, node: usize, key: u64) -> anyhow::Result<Option<[u64; 4]>> {
        self.router(node).get(key, "protected")
    }

    fn send_bytes(&self, from: usize, to: usize, shim: &[u8]) -> anyhow::Result<()> {
        let sock = &self.host(from).tx;
        sock.send_to(shim, SocketAddrV4::new(host_addr(to), DEFAULT_UDP_PORT))?;
        Ok(())
    }
}

fn send_on(sock: &UdpSocket, to: usize, repr: &WaspRepr) -> anyhow::Result<()> {
    let bytes = repr.to_bytes().map_err(|e| anyhow!("building the shim: {e}"))?;
    sock.send_to(&bytes, SocketAddrV4::new(host_addr(to), DEFAULT_UDP_PORT))?;
    Ok(())
}

/// One datagram and the TTL it arrived with (IP_RECVTTL).
fn recv_with_ttl(sock: &UdpSocket, buf: &mut [u8]) -> std::io::Result<(usize, u8)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data, all zeros is an empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg points at `iov` (over `buf`) and `control`, both live for the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut ttl = 0u8;
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, bounded by
    // msg_controllen; the TTL is an int, read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TTL {
                ttl = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>()) as u8;
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, ttl))
}

/// A received active packet.
struct Got {
    ttl: u8,
    shim: Vec<u8>,
}

impl Got {
    fn packet(&self) -> WaspPacket<&[u8]> {
        WaspPacket::new_unchecked(&self.shim[..])
    }

    /// Scratchpad word `i` (`s.64[i]`).
    fn word(&self, i: usize) -> u64 {
        let s = self.packet().scratch().get(8 * i..8 * i + 8).map(|b| b.to_vec());
        s.map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap_or_default()))
    }

    /// Scratchpad half-word `i` (`s.32[i]`).
    fn half(&self, i: usize) -> u32 {
        let s = self.packet().scratch().get(4 * i..4 * i + 4).map(|b| b.to_vec());
        s.map_or(0, |b| u32::from_be_bytes(b.try_into().unwrap_or_default()))
    }

    /// The shim is intact: its checksum verifies and no node flagged a fault.
    fn sound(&self) -> bool {
        let p = self.packet();
        p.verify_checksum() && !p.faulted()
    }
}

// ---------------------------------------------------------------------------------------------
// The applications.

fn source(name: &str) -> &'static str {
    match name {
        "fwd" => include_str!("../../../../examples/wasp/fwd.s"),
        "count" => include_str!("../../../../examples/wasp/count.s"),
        "collect" => include_str!("../../../../examples/wasp/collect.s"),
        "pathscan" => include_str!("../../../../examples/wasp/pathscan.s"),
        "trunk" => include_str!("../../../../examples/wasp/trunk.s"),
        "advertise" => include_str!("../../../../examples/wasp/advertise.s"),
        "nearest" => include_str!("../../../../examples/wasp/nearest.s"),
        "jitter" => include_str!("../../../../examples/wasp/jitter.s"),
        _ => include_str!("../../../../examples/wasp/ratectl.s"),
    }
}

fn program_repr(name: &str, keys: &[u64], scratch: &[u64], cid: u32) -> anyhow::Result<WaspRepr> {
    let code = assemble(source(name)).map_err(|e| anyhow!("{name}.s: {e}"))?.code;
    Ok(WaspRepr {
        next_header: NO_NEXT_HEADER,
        cid,
        keys: keys.to_vec(),
        scratch: scratch.iter().flat_map(|w| w.to_be_bytes()).collect(),
        code,
        ..WaspRepr::default()
    })
}

/// One application's outcome, and what it left at each node (for the picture).
struct Outcome {
    name: &'static str,
    ok: bool,
    detail: String,
    notes: Vec<(usize, String)>,
    /// Time the application took (for advertise and nearest together).
    ms: u64,
}

fn outcome(name: &'static str, ok: bool, detail: String) -> Outcome {
    Outcome { name, ok, detail, notes: Vec::new(), ms: 0 }
}

fn ip_text(a: u32) -> String {
    Ipv4Addr::from(a).to_string()
}

fn hops_text(d: u64) -> String {
    if d == u64::MAX {
        "none".into()
    } else {
        format!("{} at {} routers", ip_text(d as u32), d >> 32)
    }
}

fn fwd(net: &Net) -> anyhow::Result<Outcome> {
    let want = INITIAL_TTL - path(H1, H2).len() as u8;
    let mut seen = Vec::new();
    for (i, (from, to)) in [(H1, H2), (H2, H1)].into_iter().enumerate() {
        let cid = 0x100 + i as u32;
        net.send(from, to, &program_repr("fwd", &[], &[], cid)?)?;
        let got = net.receive(to, cid, 1, Duration::from_millis(100))?;
        seen.push((from, to, got.len(), got.first().map(|g| (g.ttl, g.sound()))));
    }
    let ok = seen.iter().all(|s| s.2 == 1 && s.3 == Some((want, true)));
    let detail = seen
        .iter()
        .map(|(f, t, n, g)| {
            let ttl = g.map_or("-".into(), |g| g.0.to_string());
            format!("{}->{}: {n} delivered, TTL {INITIAL_TTL}->{ttl}", NAMES[*f], NAMES[*t])
        })
        .collect::<Vec<_>>()
        .join("; ");
    Ok(outcome("fwd", ok, format!("{detail} (want 1 each, TTL {want}: 5 routers decrement)")))
}

fn count(net: &Net) -> anyhow::Result<Outcome> {
    const KEY: u64 = 0xc0c0_0001;
    const CID: u32 = 0x200;
    let (sent, threshold) = (10u64, 5u64);
    let repr = program_repr("count", &[KEY], &[threshold], CID)?;
    for _ in 0..sent {
        net.send(H1, H2, &repr)?;
        std::thread::sleep(Duration::from_millis(2));
    }
    let got = net.receive(H2, CID, threshold as usize, Duration::from_millis(300))?;
    let mut counters = Vec::new();
    let mut ok = got.len() as u64 == threshold && got.iter().all(Got::sound);
    let mut o = outcome("count", false, String::new());
    for (i, &r) in WASP.iter().enumerate() {
        let c = net.get(r, KEY)?.map_or(0, |w| w[0]);
        // The first router counts every packet; those above the threshold drop there.
        let want = if i == 0 { sent } else { threshold };
        ok &= c == want;
        counters.push(format!("{}={c}", NAMES[r]));
        o.notes.push((r, format!("count: {c}")));
    }
    o.ok = ok;
    o.detail = format!(
        "{sent} sent, threshold {threshold}: {} delivered (want {threshold}); counters {} \
         (want {sent} at R1, where packets above the threshold drop, {threshold} beyond)",
        got.len(),
        counters.join(" ")
    );
    Ok(o)
}

fn collect(net: &Net) -> anyhow::Result<Outcome> {
    const KEY: u64 = 0xc0c0_0002;
    const CID: u32 = 0x300;
    let n = 8u64;
    let mut sum = 0;
    for i in 0..n {
        let src = Ipv4Addr::new(WEST_NET[0], WEST_NET[1], WEST_NET[2], 11 + i as u8);
        let sock = udp_in(&net.host(H1).ns, SocketAddrV4::new(src, 0))?;
        let sample = 10 * (i + 1);
        sum += sample;
        send_on(&sock, H2, &program_repr("collect", &[KEY], &[sample, n], CID)?)?;
        std::thread::sleep(Duration::from_millis(2));
    }
    let got = net.receive(H2, CID, 1, Duration::from_millis(400))?;
    let carried: Vec<(u64, u64)> = got.iter().map(|g| (g.word(0), g.word(1))).collect();
    let r1 = net.get(R1, KEY)?.unwrap_or_default();
    let ok = carried == [(sum, 0)] && got.iter().all(Got::sound) && r1[..2] == [sum, n];
    let mut o = outcome(
        "collect",
        ok,
        format!(
            "{n} sources (10.0.1.11-18) sent samples 10..80; H2 received {} packet(s) carrying \
             (sum, n) {carried:?} (want exactly one, ({sum}, 0)); R1's bank: sum {} seen {}",
            got.len(),
            r1[0],
            r1[1]
        ),
    );
    o.notes.push((R1, format!("collect: sum {} of {}", r1[0], r1[1])));
    Ok(o)
}

fn pathscan(net: &Net) -> anyhow::Result<Outcome> {
    const CID: u32 = 0x400;
    let mut scratch = vec![0u64; 16];
    scratch[0] = 30 << 32;
    net.send(H1, H2, &program_repr("pathscan", &[], &scratch, CID)?)?;
    let got = net.receive(H2, CID, 1, Duration::from_millis(100))?;
    let route = path(H1, H2);
    let want: Vec<u32> =
        route.iter().filter(|&&r| is_wasp(r)).map(|&r| u32::from(router_addr(r))).collect();
    let want_ttl = INITIAL_TTL - route.len() as u8;
    let legacy: Vec<usize> = route.iter().copied().filter(|&r| !is_wasp(r)).collect();
    let Some(g) = got.first() else {
        return Ok(outcome("pathscan", false, "the scan packet did not arrive at H2".into()));
    };
    let n = g.half(1) as usize;
    let recorded: Vec<u32> = (0..n.min(30)).map(|i| g.half(2 + i)).collect();
    let ok = got.len() == 1 && g.sound() && recorded == want && g.ttl == want_ttl;
    let mut o = outcome(
        "pathscan",
        ok,
        format!(
            "recorded {n}: {} (want {}); TTL {INITIAL_TTL}->{} (want {want_ttl}: L was crossed \
             and is not recorded)",
            recorded.iter().map(|&a| ip_text(a)).collect::<Vec<_>>().join(" "),
            want.iter().map(|&a| ip_text(a)).collect::<Vec<_>>().join(" "),
            g.ttl
        ),
    );
    for &r in &legacy {
        o.notes.push((r, "pathscan: not recorded".into()));
        o.notes.push((r, "(decrements the TTL)".into()));
    }
    for (i, &a) in recorded.iter().enumerate() {
        if let Some(&r) = WASP.iter().find(|&&r| u32::from(router_addr(r)) == a) {
            o.notes.push((r, format!("pathscan: #{}", i + 1)));
        }
    }
    Ok(o)
}

fn trunk(net: &Net) -> anyhow::Result<Outcome> {
    const KEY: u64 = 0xc0c0_0003;
    let (marker_from, finder_from) = (H3, H1);
    net.send(marker_from, H2, &program_repr("trunk", &[KEY], &[0, 0, 0], 0x500)?)?;
    let marker = net.receive(H2, 0x500, 1, Duration::ZERO)?;
    net.send(finder_from, H2, &program_repr("trunk", &[KEY], &[1, 0, 0], 0x501)?)?;
    let finder = net.receive(H2, 0x501, 1, Duration::from_millis(100))?;
    // The truth: the first WASP router of the finder's path that the marker also crossed.
    let marked = path(marker_from, H2);
    let found = path(finder_from, H2);
    let joined: Vec<usize> =
        found.iter().copied().filter(|r| is_wasp(*r) && marked.contains(r)).collect();
    let j = joined.first().copied().unwrap_or(H1);
    let mut o = outcome("trunk", false, String::new());
    let mut marks = Vec::new();
    let mut marks_ok = true;
    for r in WASP {
        let m = net.get(r, KEY)?.is_some_and(|w| w[0] == 1);
        marks_ok &= m == marked.contains(&r);
        if m {
            marks.push(NAMES[r]);
            o.notes.push((
                r,
                if r == j { "trunk: J (marked)".into() } else { "trunk: marked".into() },
            ));
        }
    }
    let Some(g) = finder.first() else {
        o.detail = "the finder did not arrive at H2".into();
        return Ok(o);
    };
    let (id, addr, n) = (g.word(1), g.half(4), g.half(5));
    o.ok = marker.len() == 1
        && g.sound()
        && marks_ok
        && id == router_id(j)
        && addr == u32::from(router_addr(j))
        && n as usize == joined.len();
    o.detail = format!(
        "marker H3->H2 marked {}; finder H1->H2 (crossing R1 unmarked) names node {id} {} with \
         {n} marked routers on the trunk (want {} = node {}, {}: where the paths join)",
        marks.join(" "),
        ip_text(addr),
        NAMES[j],
        router_id(j),
        joined.len()
    );
    Ok(o)
}

/// advertise and nearest: two providers announced from the two ends, queries from three hosts.
fn advertise(net: &Net) -> anyhow::Result<(Outcome, Outcome)> {
    const KEY: u64 = 0xc0c0_0004;
    let west = u32::from(Ipv4Addr::new(10, 0, 1, 100));
    let east = u32::from(Ipv4Addr::new(10, 0, 2, 100));
    let ads = [(H1, H2, west, 0x600), (H2, H1, east, 0x601)];
    // The truth: each WASP router keeps the smallest (distance << 32 | provider), distance =
    // routers the advertisement crossed before it.
    let mut kept = [u64::MAX; 8];
    let protected = |repr: WaspRepr| WaspRepr {
        scopes: [Scope::Protected, Scope::Public, Scope::Public, Scope::Public],
        ..repr
    };
    // A public packet claiming the service first: it faults at every router, nothing kept.
    let forged = protected(program_repr("advertise", &[KEY], &[0x0a00_0666, 64], 0x5ff)?);
    net.send(H1, H2, &forged)?;
    let forged_arrived = net.receive(H2, 0x5ff, 1, Duration::ZERO)?.len();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    for (seq, &(from, to, provider, cid)) in ads.iter().enumerate() {
        let repr = WaspRepr {
            // Sequence numbers are microseconds since the epoch (docs/wasp.md §8).
            admin: Some(AdminTrailer { key_id: 1, seq: now_us + seq as u64, mac: [0; 32] }),
            ..protected(program_repr("advertise", &[KEY], &[u64::from(provider), 64], cid)?)
        };
        let mut shim = repr.to_bytes().map_err(|e| anyhow!("building the shim: {e}"))?;
        seal(&mut shim, &admin_key()).map_err(|e| anyhow!("sealing: {e}"))?;
        net.send_bytes(from, to, &shim)?;
        net.receive(to, cid, 1, Duration::ZERO)?;
        for (d, &r) in path(from, to).iter().enumerate() {
            if is_wasp(r) {
                kept[r] = kept[r].min((d as u64) << 32 | u64::from(provider));
            }
        }
    }
    let mut adv = outcome("advertise", true, String::new());
    let mut parts = Vec::new();
    adv.ok &= forged_arrived == 0;
    for r in WASP {
        let have = net.get_protected(r, KEY)?.map_or(u64::MAX, |w| w[0]);
        adv.ok &= have == kept[r];
        parts.push(format!("{} {}", NAMES[r], hops_text(have)));
        adv.notes.push((r, format!("adv: {}", hops_text(have))));
    }
    adv.detail = format!(
        "providers 10.0.1.100 (announced from H1) and 10.0.2.100 (from H2) in admin packets \
         under a protected key; a public advertisement for 10.0.6.102 {} (want dropped); \
         kept: {} (want {})",
        if forged_arrived == 0 { "was dropped" } else { "ARRIVED" },
        parts.join(", "),
        WASP.map(|r| hops_text(kept[r])).join(", ")
    );
    let mut near = outcome("nearest", true, String::new());
    let mut parts = Vec::new();
    for (i, (from, to)) in [(H1, H2), (H2, H1), (H3, H2)].into_iter().enumerate() {
        let cid = 0x610 + i as u32;
        net.send(from, to, &protected(program_repr("nearest", &[KEY], &[u64::MAX, 64], cid)?))?;
        let got = net.receive(to, cid, 1, Duration::ZERO)?;
        let answer = got.first().map(|g| g.word(0));
        let want = path(from, to)
            .iter()
            .enumerate()
            .filter(|(_, r)| is_wasp(**r) && kept[**r] != u64::MAX)
            .map(|(q, r)| kept[*r] + ((q as u64) << 32))
            .min()
            .unwrap_or(u64::MAX);
        near.ok &= answer == Some(want) && got.iter().all(Got::sound);
        parts.push(format!(
            "from {}: {} (want {})",
            NAMES[from],
            answer.map_or("no answer arrived".into(), hops_text),
            hops_text(want)
        ));
    }
    near.detail = format!("queries {}", parts.join("; "));
    Ok((adv, near))
}

/// J after `updates` EWMA steps (gain 1/16) of a constant |D|, in the program's integer
/// arithmetic.
fn jitter_model(d_ns: u64, updates: u32) -> u64 {
    (0..updates).fold(0u64, |j, _| j + d_ns / 16 - j / 16)
}

fn jitter(net: &Net) -> anyhow::Result<Outcome> {
    const PACKETS: usize = 20;
    let flows: [(&str, u64, u32, [u64; 2]); 2] =
        [("even", 0xc0c0_0005, 0x700, [8, 8]), ("alternating", 0xc0c0_0006, 0x701, [2, 14])];
    let mut o = outcome("jitter", true, String::new());
    let mut results = Vec::new();
    for &(label, key, cid, gaps_ms) in &flows {
        let repr = program_repr("jitter", &[key], &[0], cid)?;
        let mut next = Instant::now();
        for i in 0..PACKETS {
            // Spin the last stretch: sleep alone would add its own jitter.
            while let Some(left) = next.checked_duration_since(Instant::now()) {
                if left > Duration::from_micros(300) {
                    std::thread::sleep(left - Duration::from_micros(200));
                } else {
                    std::hint::spin_loop();
                }
            }
            net.send(H1, H2, &repr)?;
            next += Duration::from_millis(gaps_ms[i % 2]);
        }
        let got = net.receive(H2, cid, PACKETS, Duration::from_millis(50))?;
        let last = got.last().map_or(0, |g| g.word(0));
        let mut seen = Vec::new();
        for r in WASP {
            let bank = net.get(r, key)?.unwrap_or_default();
            seen.push(bank[3]);
            if label == "alternating" {
                o.notes.push((r, format!("jitter J: {} us", bank[2] / 1000)));
            }
        }
        o.ok &= got.len() == PACKETS && seen.iter().all(|&s| s == PACKETS as u64);
        results.push((label, gaps_ms, got.len(), last, seen));
    }
    let (even, alt) = (results[0].3, results[1].3);
    let d_ns = (flows[1].3[1] - flows[1].3[0]) * 1_000_000;
    let model = jitter_model(d_ns, PACKETS as u32 - 2);
    // Plausible: the alternating flow's estimate near the model (the path adds its own delay
    // variation), the even flow's well below it.
    o.ok &= alt >= model / 2 && alt <= model * 3 / 2 && even < alt / 2;
    o.detail = results
        .iter()
        .map(|(label, gaps, n, j, seen)| {
            format!(
                "{label} gaps {}/{} ms: {n}/{PACKETS} delivered, path max J {} us, packets seen \
                 at R1..R4 {seen:?}",
                gaps[0],
                gaps[1],
                j / 1000
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
        + &format!(
            " (want the alternating J within 0.5-1.5x the model's {} us after {} updates of \
             |D| = {} ms, the even J below half of it)",
            model / 1000,
            PACKETS - 2,
            d_ns / 1_000_000
        );
    Ok(o)
}

fn ratectl(net: &Net) -> anyhow::Result<Outcome> {
    // `e.queue` is the packet's batch backlog at the router (docs/wasp.md §9): with threshold 0
    // a packet drops itself wherever another packet of its queue was ahead of it in the batch.
    // Paced packets travel alone and all arrive; a burst queues up and thins itself out.
    const PACED: u32 = 0x800;
    const BURST: u32 = 0x801;
    let paced = 10;
    let paced_repr = program_repr("ratectl", &[], &[0], PACED)?;
    for _ in 0..paced {
        net.send(H1, H2, &paced_repr)?;
        std::thread::sleep(Duration::from_millis(3));
    }
    let paced_got = net.receive(H2, PACED, paced, Duration::from_millis(100))?.len();
    let burst = 300;
    let burst_repr = program_repr("ratectl", &[], &[0], BURST)?;
    for _ in 0..burst {
        net.send(H1, H2, &burst_repr)?;
    }
    let burst_got = net.receive(H2, BURST, burst, Duration::from_millis(200))?.len();
    Ok(outcome(
        "ratectl",
        // On a loaded machine the router's worker may be descheduled long enough for two
        // paced packets to meet in one batch (one then drops itself, correctly): most paced
        // packets arrive, most of the burst does not.
        paced_got * 10 >= paced * 8 && burst_got * 2 < burst,
        format!(
            "threshold 0 (drop when any packet is queued ahead): paced 3 ms apart {paced_got} of \
             {paced} delivered (want 80% or more); a burst of {burst} back to back {burst_got} \
             delivered (want under half)"
        ),
    ))
}

/// An application run: its outcomes (advertise gives two, with nearest).
type App = fn(&Net) -> anyhow::Result<Vec<Outcome>>;

/// Every application in turn; one that fails to run is reported (and, for advertise, its
/// nearest with it). Stops early, with an error, on SIGINT or SIGTERM.
fn run_apps(net: &Net, stop: &AtomicBool, json: bool) -> anyhow::Result<Vec<Outcome>> {
    let progress = super::Progress::new("wasp-net", json);
    let apps: [(&[&'static str], App); 8] = [
        (&["fwd"], |n| fwd(n).map(|o| vec![o])),
        (&["count"], |n| count(n).map(|o| vec![o])),
        (&["collect"], |n| collect(n).map(|o| vec![o])),
        (&["pathscan"], |n| pathscan(n).map(|o| vec![o])),
        (&["trunk"], |n| trunk(n).map(|o| vec![o])),
        (&["advertise", "nearest"], |n| advertise(n).map(|(a, b)| vec![a, b])),
        (&["jitter"], |n| jitter(n).map(|o| vec![o])),
        (&["ratectl"], |n| ratectl(n).map(|o| vec![o])),
    ];
    let mut out = Vec::new();
    for (names, app) in apps {
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted; everything made is removed");
        }
        let started = Instant::now();
        let mut done = app(net).unwrap_or_else(|e| {
            names.iter().map(|&n| outcome(n, false, format!("error: {e:#}"))).collect()
        });
        for o in &mut done {
            o.ms = started.elapsed().as_millis() as u64;
            progress.note(&format!("wasp-net: {:<9} {:<4} {:>6} ms", o.name, verdict(o), o.ms));
        }
        out.extend(done);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Report: table and picture.

/// `ok`, `n/c` (not checked, with the reason in the detail) or `FAIL`.
fn verdict(a: &Outcome) -> &'static str {
    if a.ok {
        "ok"
    } else if a.detail.starts_with("not checked") {
        "n/c"
    } else {
        "FAIL"
    }
}

fn table(apps: &[Outcome]) -> String {
    let mut t = format!("{:<10} {:<4} {:>6} detail\n", "app", "ok", "ms");
    for a in apps {
        let ok = verdict(a);
        t += &format!("{:<10} {ok:<4} {:>6} {}\n", a.name, a.ms, a.detail);
    }
    t
}

/// Splits `text` into lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let last = lines.last_mut().map_or(0, |l| l.len());
        if last > 0 && last + 1 + word.len() > width {
            lines.push(String::new());
        }
        if let Some(l) = lines.last_mut() {
            if !l.is_empty() {
                l.push(' ');
            }
            l.push_str(word);
        }
    }
    lines
}

fn picture(path: &Path, apps: &[Outcome], kind: &str) -> anyhow::Result<()> {
    use plotters::prelude::*;
    crate::plot::register_font()?;
    let rows: Vec<(&str, &str, Vec<String>)> =
        apps.iter().map(|a| (verdict(a), a.name, wrap(&a.detail, 150))).collect();
    let table_h: i32 = rows.iter().map(|r| 18 * r.2.len() as i32 + 6).sum();
    let (w, h) = (1500i32, 470 + table_h);
    let root = BitMapBackend::new(path, (w as u32, h as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let font = |size: f64| ("sans-serif", size).into_font();
    let passed = apps.iter().filter(|a| a.ok).count();
    root.draw(&Text::new(
        format!(
            "hotplane bench wasp-net: 4 hotplane routers ({kind}) and 1 Linux router; \
             {passed}/{} applications ok",
            apps.len()
        ),
        (20, 14),
        font(22.0),
    ))?;
    // Nodes of the main path in a row, H3 below R2.
    let row = [H1, R1, R2, L, R3, R4, H2];
    let at = |node: usize| -> (i32, i32) {
        match row.iter().position(|&n| n == node) {
            Some(i) => (40 + 210 * i as i32, 70),
            None => (40 + 210 * 2, 300),
        }
    };
    let (bw, bh) = (150, 70);
    for &(a, _, b, _) in &LINKS {
        let ((ax, ay), (bx, by)) = (at(a), at(b));
        // A link down (to H3) leaves by the box's left edge, clear of the notes.
        let dx = if ax == bx { 14 } else { bw / 2 };
        root.draw(&PathElement::new(
            vec![(ax + dx, ay + bh / 2), (bx + dx, by + bh / 2)],
            BLACK.stroke_width(2),
        ))?;
    }
    for (node, name) in NAMES.iter().enumerate() {
        let (x, y) = at(node);
        let (fill, label, sub) = if is_wasp(node) {
            (
                RGBColor(200, 225, 250),
                format!("{} (hotplane)", name),
                format!("id {} {}", router_id(node), router_addr(node)),
            )
        } else if node == L {
            (RGBColor(220, 220, 220), "L (Linux router)".into(), "10.0.1.1 | 10.0.2.1".into())
        } else {
            (RGBColor(225, 245, 215), format!("{} (host)", name), host_addr(node).to_string())
        };
        root.draw(&Rectangle::new([(x, y), (x + bw, y + bh)], fill.filled()))?;
        root.draw(&Rectangle::new([(x, y), (x + bw, y + bh)], BLACK.stroke_width(1)))?;
        root.draw(&Text::new(label, (x + 8, y + 12), font(16.0)))?;
        root.draw(&Text::new(sub, (x + 8, y + 40), font(13.0)))?;
        let notes: Vec<&String> = apps
            .iter()
            .flat_map(|a| &a.notes)
            .filter(|(n, _)| *n == node)
            .map(|(_, t)| t)
            .collect();
        let below = if node == R2 { (x + 24, y + bh + 10) } else { (x, y + bh + 10) };
        for (i, t) in notes.iter().enumerate() {
            root.draw(&Text::new(t.as_str(), (below.0, below.1 + 17 * i as i32), font(13.0)))?;
        }
    }
    let mut y = 420;
    root.draw(&Text::new("application results", (20, y - 24), font(18.0)))?;
    for (verdict, name, lines) in rows {
        let color = match verdict {
            "ok" => RGBColor(0, 130, 0),
            "n/c" => RGBColor(210, 120, 0),
            _ => RGBColor(200, 0, 0),
        };
        let verdict = if verdict == "n/c" { "not checked" } else { verdict };
        root.draw(&Text::new(format!("{name}: {verdict}"), (20, y), font(14.0).color(&color)))?;
        for line in lines {
            root.draw(&Text::new(line, (180, y), font(13.0)))?;
            y += 18;
        }
        y += 6;
    }
    root.present()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub fn run(o: &Opts) -> anyhow::Result<()> {
    if !crate::netlab::is_root() {
        bail!(
            "bench wasp-net builds network namespaces and runs hotplane processes on packet \
             sockets: run it as root (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW)"
        );
    }
    if !cfg!(feature = "lua") {
        bail!("bench wasp-net needs the `lua` feature: the routers' IPv4 step is a Lua function");
    }
    // SIGINT/SIGTERM stop the run between applications, so that the drops clean up.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let started = Instant::now();
    let net = Net::build(&o.port).context("building the network")?;
    if !o.json {
        eprintln!(
            "wasp-net: H1 - R1 - R2 (+H3) - L - R3 - R4 - H2 up in {:.1} s ({})",
            started.elapsed().as_secs_f64(),
            o.port
        );
    }
    let apps = run_apps(&net, &stop, o.json)?;
    let teardown = Instant::now();
    drop(net);
    if !o.json {
        eprintln!("removed everything in {:.1} s", teardown.elapsed().as_secs_f64());
    }
    eprint!("{}", table(&apps));
    std::fs::create_dir_all(&o.out).with_context(|| format!("creating {}", o.out.display()))?;
    let png = o.out.join("wasp-net.png");
    picture(&png, &apps, &o.port).context("drawing the picture")?;
    if !o.json {
        eprintln!("picture: {} ({:.1} s in all)", png.display(), started.elapsed().as_secs_f64());
    }
    let out = json!({
        "bench": "wasp-net",
        "routers": WASP.len(),
        "legacy_routers": 1,
        "port": o.port,
        "topology": "H1 - R1 - R2 - L - R3 - R4 - H2, H3 on R2; R1..R4 hotplane (wasp store per node, Lua router step), L Linux",
        "picture": png.display().to_string(),
        "seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        "apps": apps.iter().map(|a| json!({"name": a.name, "ok": a.ok, "detail": a.detail, "ms": a.ms})).collect::<Vec<_>>(),
    });
    emit(&out, o.json);
    let failed: Vec<&str> = apps.iter().filter(|a| !a.ok).map(|a| a.name).collect();
    if !failed.is_empty() {
        bail!("wasp-net: not ok: {}", failed.join(", "));
    }
    Ok(())
}
