//! The CPU port: how a controller exchanges packets with the pipeline (P4Runtime's packet-in
//! and packet-out, BMv2's `--cpu-port`). A program sends a packet to the controller by choosing
//! the CPU port's number as its output port; a packet the controller sends enters the pipeline
//! as if received on that port, and the program decides where it goes.
//!
//! Both directions are bounded rings per worker. A worker never waits on the controller: a
//! packet for a controller that is absent or slow is dropped and counted, and a controller
//! whose ring into the data plane is full is told so.

use crossbeam_queue::ArrayQueue;
use hotplane_core::{Packet, Pool};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Depth of each ring between a worker and the controller.
const RING_DEPTH: usize = 1024;

/// No CPU port is open.
const CLOSED: u32 = u32::MAX;

/// What the workers share with the controller's [`CpuPort`].
#[derive(Debug)]
pub(crate) struct CpuLink {
    /// The open CPU port's number, or [`CLOSED`].
    port: AtomicU32,
    /// Per worker: packets for the controller.
    up: Vec<ArrayQueue<Packet>>,
    /// Per worker: packets from the controller, to run through the pipeline.
    down: Vec<ArrayQueue<Packet>>,
    pub counters: CpuCounters,
}

/// What passed through the CPU port (all workers).
#[derive(Debug, Default)]
pub struct CpuCounters {
    /// Packets programs sent to the controller and the controller took.
    pub to_controller: AtomicU64,
    /// Packets for the controller dropped: its ring was full (a slow controller), or a
    /// pipeline change came before the controller took them.
    pub to_controller_dropped: AtomicU64,
    /// Packets the controller sent into the pipeline.
    pub from_controller: AtomicU64,
    /// Packets the controller could not send: no buffer, or every worker's ring full.
    pub from_controller_refused: AtomicU64,
}

impl CpuLink {
    pub(crate) fn new(workers: usize) -> Self {
        CpuLink {
            port: AtomicU32::new(CLOSED),
            up: (0..workers).map(|_| ArrayQueue::new(RING_DEPTH)).collect(),
            down: (0..workers).map(|_| ArrayQueue::new(RING_DEPTH)).collect(),
            counters: CpuCounters::default(),
        }
    }

    /// The open CPU port's number (worker side; one relaxed load).
    #[inline]
    pub(crate) fn port(&self) -> Option<u16> {
        match self.port.load(Ordering::Relaxed) {
            CLOSED => None,
            p => Some(p as u16),
        }
    }

    /// Hand `pkt` (sent by worker `w` to the CPU port) to the controller; gives it back when
    /// the ring is full, for the worker to free and count.
    #[inline]
    pub(crate) fn up(&self, w: usize, pkt: Packet) -> Result<(), Packet> {
        self.up[w].push(pkt)
    }

    /// A packet from the controller for worker `w` to run, if any.
    #[inline]
    pub(crate) fn down(&self, w: usize) -> Option<Packet> {
        if self.down[w].is_empty() {
            return None;
        }
        self.down[w].pop()
    }

    /// Drop every packet waiting for the controller (back to their pools).
    pub(crate) fn drain_up(&self) {
        for q in &self.up {
            while q.pop().is_some() {}
        }
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.down.iter().all(|q| q.is_empty())
    }
}

/// Why the CPU port could not be opened, or a packet could not be sent through it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuPortError {
    #[error("CPU port {port} is one of the data plane's own ports (0..{ports}): pick a number above them (255 is usual)")]
    TakenByAPort { port: u32, ports: usize },
    #[error("CPU port {0} is out of range (at most 65534)")]
    OutOfRange(u32),
    #[error("a CPU port is already open (port {0}): one controller at a time")]
    AlreadyOpen(u32),
    #[error("the packet is {len} bytes; buffers hold {max}")]
    TooLong { len: usize, max: usize },
    #[error("no packet buffer is free")]
    NoBuffer,
    #[error("the data plane's rings from the controller are full; try again")]
    Full,
}

/// The controller's end of the CPU port; closed when dropped.
pub struct CpuPort {
    link: Arc<CpuLink>,
    pools: Vec<Pool>,
    port: u16,
    /// The worker ring `send` tries first (round robin).
    next: AtomicUsize,
    /// The worker ring `receive` takes from first (round robin, so no worker's packets
    /// starve behind another's).
    first: AtomicUsize,
}

impl CpuPort {
    pub(crate) fn open(
        link: Arc<CpuLink>,
        pools: Vec<Pool>,
        port: u32,
        ports: usize,
    ) -> Result<Self, CpuPortError> {
        if (port as usize) < ports {
            return Err(CpuPortError::TakenByAPort { port, ports });
        }
        // `NO_PORT` (u16::MAX) means "no output" to the workers.
        if port >= u16::MAX as u32 {
            return Err(CpuPortError::OutOfRange(port));
        }
        link.port
            .compare_exchange(CLOSED, port, Ordering::AcqRel, Ordering::Acquire)
            .map_err(CpuPortError::AlreadyOpen)?;
        // A worker that saw the last port open just before it closed may have left a packet:
        // it was for the controller before this one.
        link.drain_up();
        Ok(CpuPort {
            link,
            pools,
            port: port as u16,
            next: AtomicUsize::new(0),
            first: AtomicUsize::new(0),
        })
    }

    /// The port's number, as programs see it (`standard_metadata.ingress_port`, `egress_spec`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Run `frame` through the pipeline as if it arrived on the CPU port (workers take turns).
    pub fn send(&self, frame: &[u8]) -> Result<(), CpuPortError> {
        let refuse = |e| {
            self.link.counters.from_controller_refused.fetch_add(1, Ordering::Relaxed);
            Err(e)
        };
        let n = self.pools.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            let w = (start + i) % n;
            if self.link.down[w].is_full() {
                continue;
            }
            let Some(mut p) = self.pools[w].alloc() else { continue };
            if p.set_frame(frame).is_err() {
                return refuse(CpuPortError::TooLong { len: frame.len(), max: p.max_len() });
            }
            p.meta.in_port = self.port;
            match self.link.down[w].push(p) {
                Ok(()) => {
                    self.link.counters.from_controller.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(_) => continue,
            }
        }
        let full = self.link.down.iter().all(|q| q.is_full());
        refuse(if full { CpuPortError::Full } else { CpuPortError::NoBuffer })
    }

    /// Packets programs sent to the controller, oldest first per worker; at most `max`.
    pub fn receive(&self, max: usize, mut each: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        let rings = self.link.up.len();
        let first = self.first.fetch_add(1, Ordering::Relaxed);
        for k in 0..rings {
            let q = &self.link.up[(first + k) % rings];
            while n < max {
                let Some(p) = q.pop() else { break };
                each(p.data());
                n += 1;
            }
        }
        self.link.counters.to_controller.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Drop the packets waiting for the controller: programs sent them before a pipeline
    /// change, and their controller headers are the old program's.
    pub fn discard_pending(&self) -> usize {
        let mut n = 0;
        for q in &self.link.up {
            while q.pop().is_some() {
                n += 1;
            }
        }
        self.link.counters.to_controller_dropped.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// What passed through the port so far.
    pub fn counters(&self) -> &CpuCounters {
        &self.link.counters
    }
}

impl Drop for CpuPort {
    fn drop(&mut self) {
        self.link.port.store(CLOSED, Ordering::Release);
        // Packets nobody will take go back to their pools.
        self.link.drain_up();
    }
}
