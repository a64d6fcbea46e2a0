//! The two listeners a data plane may open: the control API on a UNIX socket, and the
//! Prometheus endpoint over HTTP. Both hand work to the control thread or read counters; neither
//! touches a worker.

use super::control::ApiCall;
use super::observe::Observability;
use hotplane_control::api::{Request, Response, MAX_REQUEST_BYTES};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Where API requests go: the control thread's queue, and its handle to wake it.
#[derive(Clone)]
pub struct ControlLink {
    pub tx: crossbeam_channel::Sender<ApiCall>,
    pub thread: std::thread::Thread,
}

impl ControlLink {
    /// Submit a request and wait for the control thread's answer.
    pub fn call(&self, req: Request, timeout: Duration) -> Response {
        let (reply, rx) = crossbeam_channel::bounded(1);
        if self.tx.send(ApiCall { req, reply }).is_err() {
            return Response::err("the data plane is stopping");
        }
        self.thread.unpark();
        rx.recv_timeout(timeout)
            .unwrap_or_else(|_| Response::err("no answer from the control thread"))
    }
}

/// Bind the control socket (replacing a stale one left by a crashed run) and serve it.
pub fn serve_api(
    path: &Path,
    link: ControlLink,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{}: another hotplane is serving this socket", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    let path: PathBuf = path.into();
    std::thread::Builder::new().name("hotplane-api".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => {
                    let link = link.clone();
                    let _ = std::thread::Builder::new()
                        .name("hotplane-api-conn".into())
                        .spawn(move || connection(stream, link));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "control socket accept failed");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let _ = std::fs::remove_file(&path);
    })
}

fn connection(stream: UnixStream, link: ControlLink) {
    let _ = stream.set_nonblocking(false);
    let Ok(write_half) = stream.try_clone() else { return };
    let mut out = write_half;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = Vec::new();
        let n = match (&mut reader).take(MAX_REQUEST_BYTES as u64 + 1).read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let resp = if n > MAX_REQUEST_BYTES {
            Response::err(format!("request longer than {MAX_REQUEST_BYTES} bytes"))
        } else {
            match serde_json::from_slice::<Request>(&line) {
                Ok(req) => link.call(req, Duration::from_secs(30)),
                Err(e) => Response::err(format!("bad request: {e}")),
            }
        };
        let mut text = serde_json::to_vec(&resp).unwrap_or_else(|_| b"{\"ok\":false}".to_vec());
        text.push(b'\n');
        if out.write_all(&text).is_err() || n > MAX_REQUEST_BYTES {
            return;
        }
    }
}

/// Serve `GET /metrics` (Prometheus text) on `addr`.
pub fn serve_metrics(
    addr: &str,
    obs: Arc<Observability>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new().name("hotplane-metrics".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut s, _)) => {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut head = [0u8; 2048];
                    let n = s.read(&mut head).unwrap_or(0);
                    let req = String::from_utf8_lossy(&head[..n]);
                    let (status, body) = if req.starts_with("GET /metrics") {
                        ("200 OK", obs.prometheus())
                    } else {
                        ("404 Not Found", "try /metrics\n".to_string())
                    };
                    let _ = write!(
                        s,
                        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })
}
