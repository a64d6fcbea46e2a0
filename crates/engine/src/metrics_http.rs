//! The Prometheus endpoint: `GET /metrics` over HTTP/1.1, served by hyper on a one-thread tokio
//! runtime of its own, so connections are handled concurrently (an idle or slow client never
//! delays a scrape) and parsing is hyper's, not ours (a request split over segments is one
//! request). Routes are exact; every connection has a deadline; connections beyond
//! `metrics.max_connections` are closed at once. It reads counters only; it never touches a
//! worker or the control thread.

use crate::observe::Observability;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Time a client has to send a request's head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a connection lives, however active: keep-alive scrapers simply reconnect.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// How often the server looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serve `GET /metrics` (Prometheus text) on `addr` until `stop` is set.
pub fn serve_metrics(
    addr: &str,
    max_connections: usize,
    obs: Arc<Observability>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
    // Bound here, so a bad or busy address fails start-up instead of a background thread.
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new().name("hotplane-metrics".into()).spawn(move || {
        runtime.block_on(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, "metrics listener unusable");
                    return;
                }
            };
            let slots = Arc::new(tokio::sync::Semaphore::new(max_connections));
            while !stop.load(Ordering::Relaxed) {
                let Ok(accepted) = tokio::time::timeout(STOP_POLL, listener.accept()).await else {
                    continue;
                };
                let stream = match accepted {
                    Ok((s, _)) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics accept failed");
                        tokio::time::sleep(STOP_POLL).await;
                        continue;
                    }
                };
                // Over the limit the connection is dropped unanswered: answering would need
                // its request, and reading it is what the limit bounds.
                let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
                let obs = obs.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    let service = hyper::service::service_fn(move |req| {
                        let obs = obs.clone();
                        async move { Ok::<_, std::convert::Infallible>(route(&req, &obs)) }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .max_buf_size(16 * 1024)
                        .serve_connection(TokioIo::new(stream), service);
                    let _ = tokio::time::timeout(CONNECTION_LIFETIME, conn).await;
                });
            }
        });
    })
}

fn route(req: &Request<Incoming>, obs: &Observability) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, body: String, content_type: &str| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    // The path alone decides (a query string is ignored, as scrapers may add one).
    if req.uri().path() != "/metrics" {
        return reply(StatusCode::NOT_FOUND, "not found: try /metrics\n".into(), "text/plain");
    }
    match *req.method() {
        Method::GET | Method::HEAD => reply(StatusCode::OK, obs.prometheus(), PROMETHEUS_TEXT),
        _ => {
            let mut r =
                reply(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into(), "text/plain");
            r.headers_mut()
                .insert(hyper::header::ALLOW, hyper::header::HeaderValue::from_static("GET, HEAD"));
            r
        }
    }
}
