//! The control API on a UNIX socket: newline-delimited JSON requests handed to the control
//! thread. A local surface: where the socket lives is `socket_dir`'s business; here every
//! connection is bounded (count, line length, idle time). The Prometheus endpoint is in
//! `metrics_http`.

use crate::control::ApiCall;
use crate::socket_dir::{self, SocketError};
use hotplane_control::api::{Request, Response};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// What one client of the control socket may hold.
#[derive(Debug, Clone, Copy)]
pub struct ApiLimits {
    /// Connections served at once; one more is told so and closed.
    pub max_connections: usize,
    /// Longest request line, newline excluded.
    pub max_request_bytes: usize,
    /// A connection silent (or not reading its answers) for this long is closed.
    pub idle_timeout: Duration,
}

/// Bind the control socket in a directory only this user (and `group`) can use, replacing a
/// stale socket of our own left by a crashed run, and serve it.
pub fn serve_api(
    path: &Path,
    group: Option<u32>,
    limits: ApiLimits,
    link: ControlLink,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, SocketError> {
    socket_dir::prepare(path, group)?;
    let io = |source| SocketError::Io { path: path.display().to_string(), source };
    // Bound under a staging name, restricted, then renamed into place: the socket appears at
    // `path` already listening and with its final permissions, so a client that sees the path
    // can connect (no refusal between bind and listen) and nobody else ever could.
    let staging = socket_dir::staging_path(path);
    // A staging socket left by a crash; the directory is ours (`prepare` checked it).
    let _ = std::fs::remove_file(&staging);
    let listener = UnixListener::bind(&staging).map_err(io)?;
    socket_dir::restrict(&staging, group)?;
    std::fs::rename(&staging, path).map_err(io)?;
    listener.set_nonblocking(true).map_err(io)?;
    let path: PathBuf = path.into();
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("hotplane-api".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if active.fetch_add(1, Ordering::AcqRel) >= limits.max_connections {
                            active.fetch_sub(1, Ordering::AcqRel);
                            refuse_busy(stream, limits.max_connections);
                            continue;
                        }
                        let held = ConnectionSlot(active.clone());
                        let link = link.clone();
                        let spawned = std::thread::Builder::new()
                            .name("hotplane-api-conn".into())
                            .spawn(move || {
                                let _held = held;
                                connection(stream, link, limits)
                            });
                        if let Err(e) = spawned {
                            tracing::warn!(error = %e, "no thread for a control connection");
                        }
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
        .map_err(io)
}

/// One of `max_connections`, given back when the connection ends.
struct ConnectionSlot(Arc<AtomicUsize>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn refuse_busy(stream: UnixStream, max: usize) {
    // One short line into an empty socket buffer: the acceptor never waits on this client.
    let _ = stream.set_nonblocking(true);
    let resp = Response::err(format!("too many connections ({max}); try again later"));
    let _ = respond(&stream, &resp);
}

fn respond(mut out: &UnixStream, resp: &Response) -> std::io::Result<()> {
    let mut text = serde_json::to_vec(resp).unwrap_or_else(|_| b"{\"ok\":false}".to_vec());
    text.push(b'\n');
    out.write_all(&text)
}

/// How reading one request line ended.
#[derive(Debug, PartialEq, Eq)]
enum LineRead {
    /// A full line (or the last bytes before the client closed), newline included.
    Line,
    /// The client closed with nothing pending.
    Closed,
    /// Longer than the limit: the rest is not read.
    TooLong,
}

/// Read one line into `line`, never holding more than `limit` bytes plus the newline: the
/// buffer grows geometrically but is capped, so a client cannot make it double past the limit.
fn read_line_bounded(
    r: &mut impl BufRead,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<LineRead> {
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(if line.is_empty() { LineRead::Closed } else { LineRead::Line });
        }
        let (take, complete) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let content = line.len() + take - usize::from(complete);
        if content > limit {
            return Ok(LineRead::TooLong);
        }
        let need = line.len() + take;
        if need > line.capacity() {
            let target = (line.capacity() * 2).clamp(need, (limit + 1).max(need));
            line.reserve_exact(target - line.len());
        }
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if complete {
            return Ok(LineRead::Line);
        }
    }
}

/// Request lines above this size are not kept allocated between requests.
const KEEP_BUFFER: usize = 64 << 10;

fn connection(stream: UnixStream, link: ControlLink, limits: ApiLimits) {
    let _ = stream.set_nonblocking(false);
    // Silence ends the connection: a timed-out read or write is an error like any other.
    let _ = stream.set_read_timeout(Some(limits.idle_timeout));
    let _ = stream.set_write_timeout(Some(limits.idle_timeout));
    let Ok(write_half) = stream.try_clone() else { return };
    let mut reader = BufReader::with_capacity(KEEP_BUFFER, stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        if line.capacity() > KEEP_BUFFER {
            line = Vec::new();
        }
        let resp = match read_line_bounded(&mut reader, &mut line, limits.max_request_bytes) {
            Ok(LineRead::Closed) | Err(_) => return,
            Ok(LineRead::TooLong) => {
                let limit = limits.max_request_bytes;
                let _ = respond(
                    &write_half,
                    &Response::err(format!(
                        "request longer than {limit} bytes (control.max_request_bytes); closing"
                    )),
                );
                linger(&write_half, reader.get_mut(), limit);
                return;
            }
            Ok(LineRead::Line) => match serde_json::from_slice::<Request>(&line) {
                Ok(req) => link.call(req, Duration::from_secs(30)),
                Err(e) => Response::err(format!("bad request: {e}")),
            },
        };
        if respond(&write_half, &resp).is_err() {
            return;
        }
    }
}

/// Close after a refusal so the client reads it: closing with its unread bytes still queued
/// would reset the connection and discard the answer. The rest of the request is read and
/// dropped, a bounded amount, for a bounded time, through a small buffer.
fn linger(out: &UnixStream, input: &mut UnixStream, limit: usize) {
    let _ = out.shutdown(std::net::Shutdown::Write);
    let _ = input.set_read_timeout(Some(Duration::from_secs(1)));
    let mut sink = [0u8; 16 * 1024];
    let mut left = limit.saturating_mul(2);
    while left > 0 {
        match input.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_without_doubling_past_the_limit() {
        let limit = 100_000;
        let mut line = Vec::new();
        let text = vec![b'x'; limit];
        let input = [&text[..], b"\n{}\n"].concat();
        let mut r = BufReader::with_capacity(4096, &input[..]);
        assert_eq!(read_line_bounded(&mut r, &mut line, limit).unwrap(), LineRead::Line);
        assert_eq!(line.len(), limit + 1);
        assert!(line.capacity() <= limit + 1, "capacity {}", line.capacity());
        line.clear();
        assert_eq!(read_line_bounded(&mut r, &mut line, limit).unwrap(), LineRead::Line);
        assert_eq!(line, b"{}\n");
        line.clear();
        assert_eq!(read_line_bounded(&mut r, &mut line, limit).unwrap(), LineRead::Closed);
        let long = vec![b'y'; limit + 1];
        let mut r = BufReader::with_capacity(4096, &long[..]);
        line.clear();
        assert_eq!(read_line_bounded(&mut r, &mut line, limit).unwrap(), LineRead::TooLong);
        assert!(line.capacity() <= limit + 1);
    }
}
