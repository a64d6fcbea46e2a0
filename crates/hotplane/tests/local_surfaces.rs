//! What a local user can reach: the control socket (where it lives, who may own it, how much a
//! connection may hold), the replay-state file (never followed through a link), the Prometheus
//! endpoint (concurrent, exact routes, bounded) and capture files given to `pcap` ports.
//! Every test here uses its own temporary directory, never the real `/run/hotplane`.

mod common;
use common::TmpDir;

use hotplane::Config;
use hotplane_control::api::{Client, Request};
use hotplane_control::{Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_io::pcap::format::CaptureWriter;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const KEY_HEX: &str = "1111111111111111111111111111111111111111111111111111111111111111";
/// How long a test waits for something that should happen at once before calling it a hang.
/// A liveness bound, not a measurement: the fixed code answers in milliseconds.
const HANG: Duration = Duration::from_secs(20);

fn tmpdir(name: &str) -> TmpDir {
    TmpDir::new("local", name)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn plane_config(extra_control: &str, extra: &str) -> String {
    format!(
        "[[port]]\nname = \"p0\"\nkind = \"mem\"\n[control]\n{extra_control}\n\
         [[control.keys]]\nid = 1\nkey = \"{KEY_HEX}\"\n{extra}\n"
    )
}

fn start(cfg: &str) -> anyhow::Result<hotplane::Engine> {
    Ok(hotplane::start(Config::parse(cfg, "test")?)?)
}

fn start_with_socket(sock: &Path, extra_control: &str) -> anyhow::Result<hotplane::Engine> {
    start(&plane_config(&format!("socket = \"{}\"\n{extra_control}", sock.display()), ""))
}

fn error_text(r: anyhow::Result<hotplane::Engine>) -> String {
    match r {
        Ok(p) => {
            p.stop();
            panic!("the data plane started")
        }
        Err(e) => format!("{e:#}"),
    }
}

/// One response line from a raw connection, or None when the server closed it.
fn read_line(s: &UnixStream) -> Option<serde_json::Value> {
    s.set_read_timeout(Some(HANG)).unwrap();
    let mut line = String::new();
    match BufReader::new(s).read_line(&mut line) {
        Ok(0) => None,
        Ok(_) => Some(serde_json::from_str(&line).expect("a JSON line")),
        Err(e) => panic!("no answer and no close within {HANG:?}: {e}"),
    }
}

// ---- control socket: where it lives and who owns it ----

#[test]
fn control_socket_refuses_a_directory_others_can_write() {
    let dir = tmpdir("shared-dir");
    std::fs::set_permissions(&*dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let e = error_text(start_with_socket(&dir.join("ctl.sock"), ""));
    assert!(e.contains("writable by others"), "{e}");
    assert!(!dir.join("ctl.sock").exists(), "nothing bound in a shared directory");
}

#[test]
fn control_socket_refuses_a_path_or_directory_another_user_owns() {
    if !is_root() {
        eprintln!("skipped: needs root to create files owned by another user");
        return;
    }
    // A stale socket someone else bound first: not removed, not replaced.
    let dir = tmpdir("foreign-sock");
    let sock = dir.join("ctl.sock");
    drop(UnixListener::bind(&sock).unwrap());
    std::os::unix::fs::lchown(&sock, Some(65534), Some(65534)).unwrap();
    let e = error_text(start_with_socket(&sock, ""));
    assert!(e.contains("owned by uid 65534"), "{e}");
    assert_eq!(std::fs::symlink_metadata(&sock).unwrap().uid(), 65534, "left in place");
    // Something that is not a socket at the path is never deleted.
    let file = dir.join("precious");
    std::fs::write(&file, b"keep me").unwrap();
    let e = error_text(start_with_socket(&file, ""));
    assert!(e.contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    // A directory owned by another user, even a private one.
    let theirs = dir.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
    let e = error_text(start_with_socket(&theirs.join("ctl.sock"), ""));
    assert!(e.contains("owned by uid 65534"), "{e}");
}

#[test]
fn a_stale_socket_of_our_own_is_replaced() {
    let dir = tmpdir("stale");
    let sock = dir.join("ctl.sock");
    drop(UnixListener::bind(&sock).unwrap());
    let plane = start_with_socket(&sock, "").unwrap();
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o600);
    Client::connect(&sock).unwrap().call(&Request::Slots {}).unwrap();
    plane.stop();
}

#[test]
fn control_socket_group_may_connect() {
    if !is_root() {
        eprintln!("skipped: needs root to hand the socket to a group");
        return;
    }
    let dir = tmpdir("group");
    let sock_dir = dir.join("run");
    let sock = sock_dir.join("ctl.sock");
    let plane = start_with_socket(&sock, "socket_group = \"65534\"").unwrap();
    let d = std::fs::metadata(&sock_dir).unwrap();
    assert_eq!((d.permissions().mode() & 0o7777, d.gid()), (0o750, 65534));
    let s = std::fs::metadata(&sock).unwrap();
    assert_eq!((s.permissions().mode() & 0o777, s.gid()), (0o660, 65534));
    plane.stop();
}

/// The server's default and the client's default are the same place, in a directory only this
/// user can write (`HOTPLANE_RUNTIME_DIR` stands in for `/run/hotplane` here).
#[test]
fn default_socket_is_private_and_the_client_finds_it() {
    let dir = tmpdir("default");
    let runtime = dir.join("rt");
    let cfg = dir.join("c.toml");
    std::fs::write(&cfg, "[[port]]\nname = \"p0\"\nkind = \"mem\"\n[control]\nsocket = true\n")
        .unwrap();
    let mut child = run_in(&runtime, &cfg).stderr(Stdio::piped()).spawn().unwrap();
    let sock = runtime.join("hotplane.sock");
    wait_for(&mut child, &[&sock]);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&runtime), 0o700);
    assert_eq!(mode(&sock), 0o600);
    let push = |args: &[&str]| push_in(&runtime, args);
    let o = push(&["slots"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = push(&["shutdown"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(wait_exit(&mut child).is_some(), "run did not stop on shutdown");
}

/// A config that puts its socket elsewhere is found without `--socket` too: the data plane
/// announces the path in the default directory, and takes it back when it stops.
#[test]
fn a_socket_a_config_put_elsewhere_is_found_without_flags() {
    let dir = tmpdir("announced");
    let runtime = dir.join("rt");
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
    let sock = elsewhere.join("node.sock");
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[port]]\nname = \"p0\"\nkind = \"mem\"\n[control]\nsocket = \"{}\"\n",
            sock.display()
        ),
    )
    .unwrap();
    let mut child = run_in(&runtime, &cfg).stderr(Stdio::piped()).spawn().unwrap();
    let pointer = runtime.join("current-socket");
    wait_for(&mut child, &[&sock, &pointer]);
    assert_eq!(std::fs::metadata(&pointer).unwrap().permissions().mode() & 0o777, 0o600);
    let push = |args: &[&str]| push_in(&runtime, args);
    let o = push(&["slots"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = push(&["shutdown"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(wait_exit(&mut child).is_some(), "run did not stop on shutdown");
    assert!(!pointer.exists(), "the announcement is taken back");
    let o = push(&["slots"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("cannot reach the data plane at"), "{err}");
}

/// The log level is set by `HOTPLANE_LOG`, else by the `RUST_LOG` Rust users reach for, else
/// warnings only: a refused update is logged at info, so it shows with `RUST_LOG=info` and not
/// by default.
#[test]
fn rust_log_sets_the_log_level_as_hotplane_log_does() {
    let dir = tmpdir("log");
    let cfg = dir.join("c.toml");
    std::fs::write(&cfg, "[[port]]\nname = \"p0\"\nkind = \"mem\"\n[control]\nsocket = true\n")
        .unwrap();
    for (var, level, shown) in
        [("RUST_LOG", "info", true), ("HOTPLANE_LOG", "info", true), ("", "", false)]
    {
        let runtime = dir.join(format!("rt-{var}"));
        let mut run = run_in(&runtime, &cfg);
        run.env_remove("HOTPLANE_LOG").env_remove("RUST_LOG").stderr(Stdio::piped());
        if !var.is_empty() {
            run.env(var, level);
        }
        let mut child = run.spawn().unwrap();
        wait_for(&mut child, &[&runtime.join("hotplane.sock")]);
        // An update MACed with a key the node does not have: refused, and logged at info.
        let key = "11".repeat(32);
        let update = ["update", "--target", "pre", "--stage", r#"{"stage":"drop"}"#, "--key", &key];
        assert!(!push_in(&runtime, &update).status.success());
        assert!(push_in(&runtime, &["shutdown"]).status.success());
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(wait_exit(&mut child).is_some());
        assert_eq!(err.contains("unknown_key"), shown, "{var}={level}: {err}");
    }
}

/// `hotplane run --keep-running --config CFG` as a user whose default directory is `runtime`.
fn run_in(runtime: &Path, cfg: &Path) -> Command {
    let mut run = Command::new(env!("CARGO_BIN_EXE_hotplane"));
    run.args(["run", "--keep-running", "--config"])
        .arg(cfg)
        .env("HOTPLANE_RUNTIME_DIR", runtime)
        .env_remove("HOTPLANE_SOCKET");
    run
}

/// Until every one of `paths` exists; a run that ends first (or hangs) fails the test with its
/// stderr (piped).
fn wait_for(child: &mut Child, paths: &[&Path]) {
    let deadline = Instant::now() + HANG;
    while !paths.iter().all(|p| p.exists()) {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("{paths:?} never appeared: {err}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `hotplane push ARGS` as a user whose default directory is `runtime`, given no socket.
fn push_in(runtime: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .arg("push")
        .args(args)
        .env("HOTPLANE_RUNTIME_DIR", runtime)
        .env_remove("HOTPLANE_SOCKET")
        .output()
        .unwrap()
}

fn wait_exit(child: &mut Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

// ---- control socket: what one connection may hold ----

#[test]
fn an_unterminated_line_is_refused_at_the_limit_and_closed() {
    let dir = tmpdir("long-line");
    let sock = dir.join("ctl.sock");
    // The default limit (4 MiB): the old one was 16 MiB, and a connection held about 14 MiB.
    let plane = start_with_socket(&sock, "").unwrap();
    let s = UnixStream::connect(&sock).unwrap();
    let mut w = s.try_clone().unwrap();
    // The writer may be cut off when the server closes: its errors do not matter.
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..(4 << 20) / chunk.len() + 2 {
            if w.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let v = read_line(&s).expect("an error response before the close");
    assert_eq!(v["ok"], false);
    assert!(v["error"].as_str().unwrap().contains("longer than 4194304 bytes"), "{v}");
    assert!(read_line(&s).is_none(), "closed after the refusal");
    writer.join().unwrap();
    plane.stop();
}

#[test]
fn connections_beyond_the_limit_are_refused() {
    let dir = tmpdir("conns");
    let sock = dir.join("ctl.sock");
    // The default limit, 64.
    let plane = start_with_socket(&sock, "").unwrap();
    let mut held = Vec::new();
    for _ in 0..64 {
        let mut c = Client::connect(&sock).unwrap();
        c.call(&Request::Slots {}).unwrap();
        held.push(c);
    }
    let over = UnixStream::connect(&sock).unwrap();
    let v = read_line(&over).expect("a refusal line");
    assert!(v["error"].as_str().unwrap().contains("too many connections"), "{v}");
    assert!(read_line(&over).is_none());
    // A slot frees when a client leaves.
    drop(held.pop());
    let deadline = Instant::now() + HANG;
    loop {
        let mut c = Client::connect(&sock).unwrap();
        match c.call(&Request::Slots {}) {
            Ok(_) => break,
            Err(e) => assert!(Instant::now() < deadline, "no slot freed: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    plane.stop();
}

#[test]
fn idle_connections_are_closed() {
    let dir = tmpdir("idle");
    let sock = dir.join("ctl.sock");
    let plane = start_with_socket(&sock, "idle_timeout_s = 1").unwrap();
    let s = UnixStream::connect(&sock).unwrap();
    (&s).write_all(b"{\"op\":\"slo").unwrap();
    assert!(read_line(&s).is_none(), "an idle connection with half a request is closed");
    plane.stop();
}

// ---- replay state ----

fn apply_one_update(sock: &Path, seq: u64) {
    let key = hotplane_control::parse_key(KEY_HEX).unwrap();
    let h = UpdateHeader {
        kind: Kind::Remove,
        flags: Flags::default(),
        key_id: 1,
        seq,
        target: Target::Position(hotplane_core::Position::Pre),
        worker: WorkerScope::All,
    };
    let d = hotplane_control::envelope::build(&h, b"", Some(&key), 1000).unwrap();
    let acks = Client::connect(sock)
        .unwrap()
        .call(&Request::Update { fragments: vec![hex::encode(&d[0])] })
        .unwrap();
    assert_eq!(acks[0]["status"], "applied", "{acks}");
}

fn state_plane(dir: &Path, state: &Path) -> anyhow::Result<(hotplane::Engine, PathBuf)> {
    let sock = dir.join("ctl.sock");
    let p = start_with_socket(&sock, &format!("state_file = \"{}\"", state.display()))?;
    Ok((p, sock))
}

#[test]
fn state_is_written_without_following_planted_links() {
    let dir = tmpdir("state-write");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let state = dir.join("state.json");
    // Links planted where the state and any predictable temporary name would go.
    std::os::unix::fs::symlink(&victim, dir.join("state.tmp")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("state.json.tmp")).unwrap();
    let (plane, sock) = state_plane(&dir, &state).unwrap();
    apply_one_update(&sock, 41);
    // Planted while running: the next write replaces the link instead of writing through it.
    std::fs::remove_file(&state).unwrap();
    std::os::unix::fs::symlink(&victim, &state).unwrap();
    apply_one_update(&sock, 42);
    plane.stop();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let meta = std::fs::symlink_metadata(&state).unwrap();
    assert!(meta.file_type().is_file(), "the state file is a regular file");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(v["last_seq"]["1"], 42);
    let leftovers: Vec<_> = std::fs::read_dir(&*dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("state") && n != "state.json" && !n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left behind: {leftovers:?}");
}

#[test]
fn state_is_loaded_only_from_a_small_regular_file() {
    let dir = tmpdir("state-load");
    let good = dir.join("good.json");
    std::fs::write(&good, br#"{"last_seq":{"1":7}}"#).unwrap();
    // A link, even to a valid state file.
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let e = error_text(state_plane(&dir, &link).map(|(p, _)| p));
    assert!(e.contains("symbolic link"), "{e}");
    // A dangling link (the write would have gone through it).
    let dangling = dir.join("dangling.json");
    std::os::unix::fs::symlink(dir.join("nowhere"), &dangling).unwrap();
    let e = error_text(state_plane(&dir, &dangling).map(|(p, _)| p));
    assert!(e.contains("symbolic link"), "{e}");
    // Far larger than any state hotplane writes.
    let big = dir.join("big.json");
    let mut text = br#"{"last_seq":{"1":7}}"#.to_vec();
    text.resize(2 << 20, b' ');
    std::fs::write(&big, &text).unwrap();
    let e = error_text(state_plane(&dir, &big).map(|(p, _)| p));
    assert!(e.contains("larger than"), "{e}");
    // A FIFO would block start-up for good.
    let fifo = dir.join("fifo.json");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let (d, f) = (dir.to_path_buf(), fifo.clone());
    std::thread::spawn(move || {
        let _ = tx.send(error_text(state_plane(&d, &f).map(|(p, _)| p)));
    });
    let e = rx.recv_timeout(HANG).expect("start-up blocked on a FIFO");
    assert!(e.contains("not a regular file"), "{e}");
    // Another user's file: whoever wrote it could choose which sequence numbers replay.
    if is_root() {
        let theirs = dir.join("theirs.json");
        std::fs::write(&theirs, br#"{"last_seq":{"1":7}}"#).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = error_text(state_plane(&dir, &theirs).map(|(p, _)| p));
        assert!(e.contains("owned by uid 65534"), "{e}");
    }
    // The real thing still loads: seq 7 is a replay.
    let (plane, sock) = state_plane(&dir, &good).unwrap();
    let key = hotplane_control::parse_key(KEY_HEX).unwrap();
    let h = UpdateHeader {
        kind: Kind::Remove,
        flags: Flags::default(),
        key_id: 1,
        seq: 7,
        target: Target::Position(hotplane_core::Position::Pre),
        worker: WorkerScope::All,
    };
    let d = hotplane_control::envelope::build(&h, b"", Some(&key), 1000).unwrap();
    let acks = Client::connect(&sock)
        .unwrap()
        .call(&Request::Update { fragments: vec![hex::encode(&d[0])] })
        .unwrap();
    assert_eq!(acks[0]["reason"], "replay", "{acks}");
    plane.stop();
}

// ---- Prometheus endpoint ----

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn metrics_plane(extra: &str) -> (hotplane::Engine, u16) {
    let port = free_port();
    let cfg = plane_config("", &format!("[metrics]\nprometheus = \"127.0.0.1:{port}\"\n{extra}"));
    (start(&cfg).unwrap(), port)
}

/// Send `parts` (with a pause between them, so they arrive as separate segments) and return
/// the status line and body.
fn http(port: u16, parts: &[&[u8]]) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(100));
        }
        s.write_all(p).unwrap();
    }
    let mut text = String::new();
    s.read_to_string(&mut text).expect("a complete response");
    let status = text.lines().next().unwrap_or_default().to_string();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

const SCRAPE: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

#[test]
fn metrics_answer_while_other_connections_sit_idle() {
    let (plane, port) = metrics_plane("");
    // Served one at a time with a 2 s read timeout each, these made a scrape wait 30 s.
    let idle: Vec<_> =
        (0..15).map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(SCRAPE).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("the scrape is answered while others idle");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("hotplane_port_rx_packets_total"));
    drop(idle);
    plane.stop();
}

#[test]
fn metrics_routes_are_exact_and_requests_may_arrive_in_pieces() {
    let (plane, port) = metrics_plane("");
    let (status, body) =
        http(port, &[b"GET /met", b"rics HTTP/1.1\r\nHost: x\r\n", b"Connection: close\r\n\r\n"]);
    assert!(status.contains("200"), "{status}");
    assert!(body.contains("# TYPE hotplane_port_rx_packets_total counter"), "{body}");
    let (status, _) =
        http(port, &[b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"]);
    assert!(status.contains("200"), "a query string does not change the route: {status}");
    for path in ["/metricsfoo", "/metrics/../etc", "/", "/metrics/"] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let (status, _) = http(port, &[req.as_bytes()]);
        assert!(status.contains("404"), "{path}: {status}");
    }
    let (status, _) = http(
        port,
        &[b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"],
    );
    assert!(status.contains("405"), "{status}");
    plane.stop();
}

#[test]
fn metrics_connections_are_bounded() {
    let (plane, port) = metrics_plane("max_connections = 2");
    let held: Vec<_> =
        (0..2).map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut over = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    over.set_read_timeout(Some(HANG)).unwrap();
    let _ = over.write_all(SCRAPE);
    let mut text = String::new();
    let _ = over.read_to_string(&mut text);
    assert!(!text.contains("200 OK"), "a third connection was served: {text}");
    drop(held);
    // Once they leave, scrapes are served again.
    let deadline = Instant::now() + HANG;
    loop {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(HANG)).unwrap();
        let _ = s.write_all(SCRAPE);
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        if text.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "never served again");
        std::thread::sleep(Duration::from_millis(50));
    }
    plane.stop();
}

// ---- capture files ----

fn capture(frames: &[&[u8]]) -> Vec<u8> {
    let mut w = CaptureWriter::new(Vec::new(), 65535).unwrap();
    for f in frames {
        w.write(1, f).unwrap();
    }
    w.into_inner()
}

/// `hotplane run` over a capture: exit status and stderr, or None if it did not end.
fn run_capture(dir: &Path, bytes: &[u8], loops: u32) -> Option<(bool, String)> {
    let cap = dir.join(format!("in-{loops}.pcap"));
    std::fs::write(&cap, bytes).unwrap();
    let cfg = dir.join(format!("c-{loops}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "[[port]]\nname=\"a\"\nkind=\"pcap\"\nread=\"{}\"\nwrite=\"{}\"\nloops={loops}\n\
             [control]\nupdate_port=0\n",
            cap.display(),
            dir.join("out.pcap").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .args(["run", "--config"])
        .arg(&cfg)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let st = wait_exit(&mut child);
    let err = reader.join().unwrap();
    st.map(|st| (st.success(), err))
}

#[test]
fn a_corrupt_capture_fails_the_run() {
    let dir = tmpdir("corrupt-pcap");
    let frame = [0u8; 60];
    let mut bytes = capture(&[&frame, &frame, &frame]);
    let third = 24 + 2 * (16 + 60);
    bytes[third + 8..third + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    for loops in [1, 0] {
        let (ok, err) = run_capture(&dir, &bytes, loops)
            .unwrap_or_else(|| panic!("loops = {loops}: run never ended on a corrupt capture"));
        assert!(!ok, "loops = {loops}: exit status 0 on a corrupt capture\n{err}");
        assert!(err.contains(&format!("at byte {third}")), "loops = {loops}: {err}");
    }
    let (ok, err) = run_capture(&dir, b"", 1).expect("run ends on an empty file");
    assert!(!ok && err.contains("empty file, no pcap header"), "{err}");
    let (ok, err) = run_capture(&dir, &capture(&[]), 0).expect("loops = 0 over no packets ends");
    assert!(!ok && err.contains("nothing to loop over"), "{err}");
}

/// `run --stats-every 1` shows the mem sink's per-flow figures while the data plane runs, not
/// only at the end.
#[test]
fn run_shows_per_flow_figures_while_running() {
    let dir = tmpdir("live");
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        "[[port]]\nname = \"a\"\nkind = \"mem\"\npeer = \"b\"\n\
         gen = { flows = 2, count = 3000, rate_pps = 1000 }\n\
         [[port]]\nname = \"b\"\nkind = \"mem\"\n[control]\nupdate_port = 0\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .args(["run", "--stats-every", "1", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Periodic lines come before the final summary (whose flow lines say "sent").
    let lines: Vec<&str> = err.lines().collect();
    let summary = lines.iter().position(|l| l.contains(" sent ")).expect("a final summary");
    let live: Vec<&str> =
        lines[..summary].iter().copied().filter(|l| l.trim_start().starts_with("flow ")).collect();
    assert!(!live.is_empty(), "no per-flow line while running:\n{err}");
    assert!(live.iter().all(|l| l.contains("received") && l.contains("pps")), "{live:?}");
    assert!(lines[..summary].iter().any(|l| l.contains("packets (")), "a packet rate: {err}");
}

/// `--socket` is one global option: accepted before or after any subcommand that talks to a
/// data plane, named in the error when nothing answers there, and refused by `run` (whose
/// socket is its config's).
#[test]
fn socket_is_one_global_option_named_when_unreachable() {
    let bin = env!("CARGO_BIN_EXE_hotplane");
    let sock = "/nonexistent/hotplane-test.sock";
    let mut cases = vec![
        vec!["--socket", sock, "table", "list"],
        vec!["table", "list", "--socket", sock],
        vec!["push", "--socket", sock, "stats"],
        vec!["--json", "push", "--socket", sock, "stats"],
        vec!["ebpf", "prog", "list", "--socket", sock],
        vec!["ebpf", "map", "--socket", sock, "list"],
        vec!["trace", "--socket", sock, "--count", "1"],
        vec!["cli", "--socket", sock, "show_tables"],
    ];
    if cfg!(feature = "lua") {
        cases.push(vec!["lua", "list", "--socket", sock]);
    }
    for args in cases {
        let o = std::process::Command::new(bin).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains(&format!("cannot reach the data plane at {sock}")), "{args:?}: {err}");
    }
    let o = std::process::Command::new(bin)
        .args(["run", "--socket", sock, "--config", "x.toml"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("[control] socket"));
}
