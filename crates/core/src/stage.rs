//! The `Stage` trait every kind of program implements, and what a stage sees of its worker.

use crate::batch::{Batch, Mask};
use crate::packet::{Meta, Verdict};
use crate::pool::{Pool, PoolConfig};
use crate::qsbr::Guard;
use std::cell::RefCell;
use std::sync::Arc;

/// Most workers a data plane runs; sizes per-worker counter arrays.
pub const MAX_WORKERS: usize = 64;

/// What a stage knows about the worker running it.
pub struct WorkerCx<'g> {
    /// Index of the worker (0-based), for per-worker state.
    pub worker: usize,
    /// Time of this batch, `time::now_ns`.
    pub now_ns: u64,
    /// Lets a stage load other slots (externs) for the rest of this batch.
    pub guard: &'g Guard<'g>,
    /// Packets of this batch whose flow function already ran (a P4 program called it): the
    /// flow step skips them rather than run the function twice.
    pub flows_done: Mask,
    /// Packets a stage made beyond those of its batch (multicast and clone copies). The worker
    /// sends them after the batch, as they are: later positions do not see them. Empty, and
    /// without an allocation, unless a stage copies.
    pub replicas: Vec<Replica>,
    /// Packets of this batch `hotplane trace` follows (almost always none): a stage may
    /// explain what it did with them in `notes`. Checking it costs a stage one test per batch.
    pub trace: Mask,
    /// (packet index, line) explanations of traced packets (table hits, actions, ...).
    pub notes: Vec<(usize, String)>,
}

/// A packet a stage made: its frame and the port it leaves by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub port: u16,
    pub data: Vec<u8>,
}

impl<'g> WorkerCx<'g> {
    pub fn new(worker: usize, now_ns: u64, guard: &'g Guard<'g>) -> Self {
        WorkerCx {
            worker,
            now_ns,
            guard,
            flows_done: Mask::EMPTY,
            replicas: Vec::new(),
            trace: Mask::EMPTY,
            notes: Vec::new(),
        }
    }
}

/// A program in the pipeline. `run` processes the packets of `batch` selected by `sel`, setting
/// their verdicts and `out_port`s; it must not block, and must not panic on any packet.
pub trait Stage: Send + Sync + 'static {
    /// Short name for listings and metrics (`l2fwd`, `set-field`, an eBPF program name, ...).
    fn name(&self) -> &str;

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>);

    /// The calling convention between kinds: run on one frame that another program hands
    /// over (a P4 extern calling an extern slot, P4 asking for the packet's flow function).
    /// `frame` is changed in place and keeps its length; `meta` is the frame's classification
    /// (`flow::classify`). The answer is an eBPF program's r0, and for every other kind its
    /// verdict as an XDP action ([`crate::xdp::action_of`]).
    ///
    /// The default runs [`Stage::run`] on a copy of the frame in a one-packet batch: correct
    /// for every stage, at the price of two copies. Kinds called per packet override it.
    fn run_one(&self, frame: &mut [u8], meta: &mut Meta, cx: &mut WorkerCx<'_>) -> u64 {
        run_one_through_batch(self, frame, meta, cx)
    }

    /// A one-line description of the configuration, for `hotplane` listings.
    fn describe(&self) -> String {
        self.name().to_string()
    }

    /// What every packet this stage passes on satisfies ([`crate::shape`]), for the stage after
    /// it to specialise to (chain optimisation). Control thread only; may take milliseconds
    /// the first time. `None`: nothing is known (the default).
    fn pass_guarantee(&self) -> Option<crate::shape::Guarantee> {
        None
    }

    /// Get ready to explain traced packets ([`WorkerCx::trace`]) without making a worker
    /// wait: the control thread calls it when a trace starts. Control thread only; may take
    /// milliseconds. The default needs nothing.
    fn prepare_trace(&self) {}
}

/// The scratch packet of [`run_one_through_batch`], one per thread.
enum Scratch {
    /// Not needed yet.
    Unmade,
    /// The pool could not be made: never tried again (not once per packet).
    Failed,
    Ready(Pool, Batch),
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch::Unmade) };
}

/// [`Stage::run_one`] for stages that only run batches: copy the frame into a packet, run a
/// batch of one, copy back what fits. The stage runs with a context of its own, so nothing it
/// records for its one-packet batch (`flows_done`) reaches the caller's. A nested call on the
/// same thread (a called stage that itself calls through a copy) finds the scratch busy and
/// answers `XDP_ABORTED`.
pub fn run_one_through_batch<S: Stage + ?Sized>(
    stage: &S,
    frame: &mut [u8],
    meta: &mut Meta,
    cx: &mut WorkerCx<'_>,
) -> u64 {
    use crate::xdp::XDP_ABORTED;
    SCRATCH.with(|cell| {
        let Ok(mut scratch) = cell.try_borrow_mut() else { return XDP_ABORTED };
        if let Scratch::Unmade = *scratch {
            let config = PoolConfig { buffers: 2, buffer_size: 10240, headroom: 128 };
            *scratch = match Pool::new(config) {
                Ok(pool) => Scratch::Ready(pool, Batch::new(1)),
                Err(_) => Scratch::Failed,
            };
        }
        let Scratch::Ready(pool, batch) = &mut *scratch else { return XDP_ABORTED };
        // A stage that panicked on the last call left its packet here (the worker caught the
        // panic): free it, or every later call would find the batch full.
        batch.drain().for_each(drop);
        let Some(mut p) = pool.alloc() else { return XDP_ABORTED };
        if p.set_frame(frame).is_err() {
            return XDP_ABORTED;
        }
        p.meta = *meta;
        p.meta.verdict = Verdict::Pass;
        if batch.push(p).is_err() {
            return XDP_ABORTED;
        }
        let mut own = WorkerCx::new(cx.worker, cx.now_ns, cx.guard);
        stage.run(batch, Mask::single(0), &mut own);
        let Some(back) = batch.drain().next() else { return XDP_ABORTED };
        let n = frame.len().min(back.len());
        frame[..n].copy_from_slice(&back.data()[..n]);
        *meta = back.meta;
        crate::xdp::action_of(back.meta.verdict)
    })
}

/// Stages are shared between slots and workers by reference count.
pub type StageRef = Arc<dyn Stage>;

/// Fixed pipeline positions a program can occupy (DESIGN.md: pre -> P4 ingress -> mid -> P4
/// egress -> post).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Position {
    /// Before parsing: sees every received packet.
    Pre,
    /// Between ingress and egress (after the per-flow functions).
    Mid,
    /// Before transmit.
    Post,
}

impl Position {
    pub const ALL: [Position; 3] = [Position::Pre, Position::Mid, Position::Post];

    pub fn as_str(self) -> &'static str {
        match self {
            Position::Pre => "pre",
            Position::Mid => "mid",
            Position::Post => "post",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn from_index(i: u8) -> Option<Self> {
        Self::ALL.get(i as usize).copied()
    }
}

/// A name that is not a [`Position`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a position (pre, mid, post)")]
pub struct UnknownPosition(pub String);

impl core::str::FromStr for Position {
    type Err = UnknownPosition;
    fn from_str(s: &str) -> Result<Self, UnknownPosition> {
        match s {
            "pre" => Ok(Position::Pre),
            "mid" => Ok(Position::Mid),
            "post" => Ok(Position::Post),
            other => Err(UnknownPosition(other.to_string())),
        }
    }
}

impl core::fmt::Display for Position {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}
