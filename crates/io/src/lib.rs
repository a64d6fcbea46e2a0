//! hotplane-io: the ports packets enter and leave by. A [`Port`] is one queue of one port, owned
//! by one worker: `mem` (a generator of stamped test traffic and a sink that measures it),
//! `pcap` (replay a capture, write one), and a software-RSS wrapper that spreads a single-queue
//! port over several workers by flow hash.
//!
//! Depends on `hotplane-core` only; never on program kinds, control or the binary.

pub mod afpacket;
pub mod afxdp;
pub mod mem;
pub mod netns;
pub mod pcap;
pub mod rss;

use hotplane_core::metrics::LocalCounter;
use hotplane_core::{Batch, Pool, PoolCache};
use std::sync::Arc;

/// Live counters of one port queue; written by its worker, read by anyone.
#[derive(Debug, Default)]
pub struct PortCounters {
    pub rx_packets: LocalCounter,
    pub rx_bytes: LocalCounter,
    /// Packets the port had but could not hand over (no free buffer, ring full).
    pub rx_dropped: LocalCounter,
    pub tx_packets: LocalCounter,
    pub tx_bytes: LocalCounter,
    /// Packets given to `send` that the port could not transmit (and freed).
    pub tx_dropped: LocalCounter,
    /// Malformed input (bad capture records, oversized frames, ...).
    pub errors: LocalCounter,
    /// 1 once the port's interface went away (deleted, down); the port stops, others go on.
    pub link_down: LocalCounter,
}

/// A snapshot of [`PortCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_dropped: u64,
    pub errors: u64,
    pub link_down: u64,
}

impl PortCounters {
    pub fn snapshot(&self) -> PortStats {
        PortStats {
            rx_packets: self.rx_packets.get(),
            rx_bytes: self.rx_bytes.get(),
            rx_dropped: self.rx_dropped.get(),
            tx_packets: self.tx_packets.get(),
            tx_bytes: self.tx_bytes.get(),
            tx_dropped: self.tx_dropped.get(),
            errors: self.errors.get(),
            link_down: self.link_down.get(),
        }
    }
}

impl std::ops::AddAssign for PortStats {
    fn add_assign(&mut self, o: Self) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.rx_dropped += o.rx_dropped;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.tx_dropped += o.tx_dropped;
        self.errors += o.errors;
        self.link_down = self.link_down.max(o.link_down);
    }
}

/// One queue of a port, owned and polled by one worker. Implementations never block.
pub trait Port: Send {
    /// The port's configured name.
    fn name(&self) -> &str;

    /// Append up to `batch.room()` received packets to `batch`, with `meta.in_port` and
    /// `meta.rx_ts = now_ns` set. Returns how many were added.
    fn recv(&mut self, batch: &mut Batch, cache: &mut PoolCache, now_ns: u64) -> usize;

    /// Transmit every packet of `batch`, leaving it empty. Packets that cannot be sent are freed
    /// and counted in `tx_dropped`. Returns how many were sent.
    fn send(&mut self, batch: &mut Batch, cache: &mut PoolCache, now_ns: u64) -> usize;

    /// This queue's live counters.
    fn counters(&self) -> Arc<PortCounters>;

    /// True once a finite source (a capture file, a generator with a packet count) has nothing
    /// left to receive. Infinite sources always return false.
    fn rx_done(&self) -> bool {
        false
    }

    /// Push out anything buffered (a capture writer). Called when the worker idles and stops.
    fn flush(&mut self) {}

    /// Slow checks (is the interface still there?), called by the worker about every 100 ms.
    fn housekeeping(&mut self) {}

    /// How the port runs where it could run several ways and fell back or chose (`native
    /// XDP, zero-copy`); empty where there is one way. Shown at start and in the statistics,
    /// so a fallback is never silent.
    fn mode(&self) -> String {
        String::new()
    }

    /// How a worker that sleeps when idle (`idle = "wait"`) learns that this queue has
    /// packets.
    fn wakeup(&self) -> Wakeup {
        Wakeup::Poll
    }
}

/// How an idle worker is woken for a queue's packets (`Port::wakeup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wakeup {
    /// This descriptor turns readable (`poll(2)`, POLLIN).
    Fd(std::os::fd::RawFd),
    /// Only by looking: the worker naps (a millisecond) instead of sleeping until woken.
    Poll,
    /// Nothing arrives on its own (a memory port without a generator: frames injected through
    /// its handle are seen after at most the worker's longest sleep).
    Quiet,
}

/// Copy `frame` into a fresh buffer and append it to `batch` as received on `port` (slow-path
/// receive: injected frames, capture records). A missing buffer counts in `rx_dropped`; a frame
/// larger than a buffer in `rx_dropped` and `errors`. Returns false when no buffer was free, so
/// the caller stops receiving for this poll.
pub(crate) fn deliver(
    frame: &[u8],
    port: u16,
    now_ns: u64,
    batch: &mut Batch,
    cache: &mut PoolCache,
    c: &PortCounters,
) -> bool {
    let Some(mut p) = cache.alloc() else {
        c.rx_dropped.add(1);
        return false;
    };
    if p.set_frame(frame).is_err() {
        c.rx_dropped.add(1);
        c.errors.add(1);
        cache.free(p);
        return true;
    }
    p.meta.in_port = port;
    p.meta.rx_ts = now_ns;
    c.rx_packets.add(1);
    c.rx_bytes.add(frame.len() as u64);
    if let Err(p) = batch.push(p) {
        cache.free(p);
    }
    true
}

/// Whether an errno means the port's interface is gone (deleted, down, moved away).
pub(crate) fn is_link_gone(errno: i32) -> bool {
    matches!(errno, libc::ENETDOWN | libc::ENXIO | libc::ENODEV)
}

/// The error pending on a socket (SO_ERROR), if any; reading it clears it.
pub(crate) fn socket_error(fd: libc::c_int) -> Option<std::io::Error> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: reading SO_ERROR into a c_int of the size given.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut err as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0 && err != 0).then(|| std::io::Error::from_raw_os_error(err))
}

/// Link state of a socket-backed port: once its interface is gone the port stops, says so once,
/// and shows `link_down`; other ports are not affected.
#[derive(Debug, Default)]
pub(crate) struct Link {
    down: bool,
}

impl Link {
    pub fn is_down(&self) -> bool {
        self.down
    }

    /// Record an error from the socket: a vanished interface marks the port down, anything
    /// else counts as an error.
    pub fn error(&mut self, e: &std::io::Error, c: &PortCounters, port: &str, interface: &str) {
        if !e.raw_os_error().is_some_and(is_link_gone) {
            c.errors.add(1);
            return;
        }
        if !self.down {
            self.down = true;
            c.link_down.set(1);
            tracing::error!(port, interface, error = %e, "interface went away; this port stops, the others keep forwarding");
        }
    }

    /// Poll the socket's pending error (from housekeeping).
    pub fn check(&mut self, fd: libc::c_int, c: &PortCounters, port: &str, interface: &str) {
        if self.down {
            return;
        }
        if let Some(e) = socket_error(fd) {
            self.error(&e, c, port, interface);
        }
    }
}

/// Why a port could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("port `{port}`: {msg}")]
    Config { port: String, msg: String },
    #[error("port `{port}`: {path}: {source}")]
    Io {
        port: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("port `{port}`: {path}: {source}")]
    Capture {
        port: String,
        path: String,
        #[source]
        source: pcap::format::CaptureError,
    },
}

/// What opening a port needs besides its own configuration.
pub struct OpenCtx<'a> {
    /// Port id: index in the data plane's port list, stamped into `meta.in_port`.
    pub id: u16,
    pub name: &'a str,
    /// One pool per worker; queue `i` belongs to worker `i`.
    pub pools: &'a [Pool],
    /// Burst size, for internal batches.
    pub burst: usize,
}
