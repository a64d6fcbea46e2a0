//! `stage = "wasp"`: the WASP filter in a pipeline (`docs/wasp.md` §6).
//!
//! For every IP packet carrying a shim (protocol 253, or UDP to the configured port) the stage
//! runs the packet's program against the store of its port and direction (or the node's),
//! applies the fate, and counts what happened. Everything else passes untouched, and whatever
//! forwards the packet before or after the stage is not the stage's business. The stores and
//! counters belong to the kind, so replacing the stage's settings while packets flow keeps
//! both.

use crate::cache::DecodeCache;
use crate::carriage::{locate, Carriage};
use crate::error::{Fault, Reject};
use crate::ess::Ess;
use crate::filter::{process_with, FilterConfig};
use crate::vpu::{Env, Fate};
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::metrics::PerWorker;
use hotplane_core::packet::{Layers, Meta};
use hotplane_core::{Stage, Verdict, WorkerCx};
use std::cell::RefCell;
use std::sync::Arc;

/// Which store a packet's program runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreBy {
    /// The store of the port the packet arrived on (the seed's input filter, at `pre`).
    InPort,
    /// The store of the port the packet leaves by (the seed's output filter, at `post`); the
    /// program sees `e.out_port`.
    OutPort,
    /// One store for the node.
    Node,
}

/// Counter indices of [`Counters`]: fates, then refusals by reason, then faults by kind.
mod slot {
    use crate::error::{Fault, Reject};
    pub const PACKETS: usize = 0;
    pub const FORWARDED: usize = 1;
    pub const DROPPED: usize = 2;
    pub const RETURNED: usize = 3;
    /// Arrived flagged FAULT and forwarded without running.
    pub const PASSED_FAULTED: usize = 4;
    /// Not WASP (or not IP): untouched.
    pub const NOT_WASP: usize = 5;
    /// `e.out_port` names no port with a store (output filter before a forwarding decision).
    pub const NO_STORE: usize = 6;
    pub const STEPS: usize = 7;
    pub const CACHE_HITS: usize = 8;
    pub const CACHE_MISSES: usize = 9;
    /// Runs of machine code (the compiled tier).
    pub const COMPILED: usize = 10;
    pub const REJECT: usize = 11;
    pub const FAULT: usize = REJECT + Reject::COUNT;
    pub const COUNT: usize = FAULT + Fault::COUNT;
}

/// What every wasp stage of a data plane counts, per worker (shared across replacements).
pub struct Counters {
    cells: Vec<PerWorker>,
}

impl Default for Counters {
    fn default() -> Self {
        Self { cells: (0..slot::COUNT).map(|_| PerWorker::new()).collect() }
    }
}

/// A snapshot of [`Counters`], summed over workers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CounterSnapshot {
    pub packets: u64,
    pub forwarded: u64,
    pub dropped: u64,
    pub returned: u64,
    pub passed_faulted: u64,
    pub not_wasp: u64,
    pub no_store: u64,
    pub steps: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub compiled_runs: u64,
    /// Refused packets by reason, in [`Reject::ALL`] order.
    pub rejected: [u64; Reject::COUNT],
    /// Faulted runs by kind, in [`Fault::ALL`] order.
    pub faults: [u64; Fault::COUNT],
}

impl Counters {
    pub fn snapshot(&self) -> CounterSnapshot {
        let get = |i: usize| self.cells[i].sum();
        CounterSnapshot {
            packets: get(slot::PACKETS),
            forwarded: get(slot::FORWARDED),
            dropped: get(slot::DROPPED),
            returned: get(slot::RETURNED),
            passed_faulted: get(slot::PASSED_FAULTED),
            not_wasp: get(slot::NOT_WASP),
            no_store: get(slot::NO_STORE),
            steps: get(slot::STEPS),
            cache_hits: get(slot::CACHE_HITS),
            cache_misses: get(slot::CACHE_MISSES),
            compiled_runs: get(slot::COMPILED),
            rejected: std::array::from_fn(|i| get(slot::REJECT + i)),
            faults: std::array::from_fn(|i| get(slot::FAULT + i)),
        }
    }
}

/// The node as its programs see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Node {
    pub id: u64,
    /// IPv6, or IPv4-mapped.
    pub addr: [u8; 16],
}

/// How one wasp stage runs.
#[derive(Clone)]
pub struct WaspStage {
    pub(crate) store_by: StoreBy,
    /// Stores by port index (`StoreBy::Node`: one), each with the filter settings of the
    /// packets that reach it (its own admin verifier and replay state).
    pub(crate) stores: Arc<[(Arc<Ess>, FilterConfig)]>,
    pub(crate) udp_port: Option<u16>,
    pub(crate) node: Node,
    pub(crate) counters: Arc<Counters>,
    pub(crate) describe: String,
    /// Where hot programs go to be compiled, and after how many runs (`None`: interpreted).
    #[cfg(feature = "jit")]
    pub(crate) jit: Option<(Arc<crate::jit::CompileQueue>, u32)>,
}

thread_local! {
    /// Each worker's decoded programs; decoding is pure, so the cache outlives stages.
    static CACHE: RefCell<DecodeCache> = RefCell::new(DecodeCache::new());
}

/// Packets of this batch the stage has already passed, per queue: a packet's `e.queue` is how
/// many of them wait ahead of it for the same output port (output filter) or came in by the
/// same port (input filter, node store). The batch is the queue hotplane has at that point;
/// under load it fills (up to the burst), idle it holds one packet.
pub(crate) struct Backlog([u16; 64]);

impl Backlog {
    fn new() -> Self {
        Backlog([0; 64])
    }

    /// The packets ahead in `port`'s queue, counting this one for the next.
    fn take(&mut self, port: u16) -> u64 {
        let ahead = &mut self.0[usize::from(port) % 64];
        let now = *ahead;
        *ahead = ahead.saturating_add(1);
        u64::from(now)
    }
}

/// Per-batch tallies, added to the shared counters once per batch.
struct Tally([u64; slot::COUNT]);

impl WaspStage {
    /// The queue a packet's `e.queue` counts.
    fn queue_of(&self, meta: &Meta) -> u16 {
        match self.store_by {
            StoreBy::OutPort => meta.out_port,
            StoreBy::InPort | StoreBy::Node => meta.in_port,
        }
    }

    /// One packet; `frame` and `meta` as the classifier left them.
    fn one(
        &self,
        frame: &mut [u8],
        meta: &mut Meta,
        now_ns: u64,
        cache: &mut DecodeCache,
        tally: &mut Tally,
        queue: &mut Backlog,
    ) {
        tally.0[slot::PACKETS] += 1;
        // Every packet of the batch is in a queue, active or not.
        let queue_depth = queue.take(self.queue_of(meta));
        let l3 = usize::from(meta.l3_off);
        let ip_layer = meta.layers & (Layers::IPV4 | Layers::IPV6) != 0;
        let Some(ip) = frame.get_mut(l3..).filter(|_| ip_layer) else {
            tally.0[slot::NOT_WASP] += 1;
            return;
        };
        let Some(found) = locate(ip, self.udp_port) else {
            tally.0[slot::NOT_WASP] += 1;
            return;
        };
        let store = match self.store_by {
            StoreBy::Node => self.stores.first(),
            StoreBy::InPort => self.stores.get(usize::from(meta.in_port)),
            StoreBy::OutPort => self.stores.get(usize::from(meta.out_port)),
        };
        let Some((store, filter)) = store else {
            tally.0[slot::NO_STORE] += 1;
            return;
        };
        // The header bank is what precedes the shim (IP header, extension headers, UDP header
        // in UDP carriage): borrowed, not copied, beside the shim the filter may rewrite.
        let (net, rest) = ip.split_at_mut(found.shim_offset);
        let env = Env {
            node_id: self.node.id,
            node_addr: self.node.addr,
            in_port: u64::from(meta.in_port),
            out_port: match self.store_by {
                StoreBy::OutPort => u64::from(meta.out_port),
                _ => u64::MAX,
            },
            time_ns: now_ns,
            queue_depth,
            packet_len: found.end as u64,
            in_profile: false,
        };
        let shim = &mut rest[..found.end - found.shim_offset];
        let processed = match process_with(shim, &env, net, store, filter, cache) {
            Ok(processed) => processed,
            Err(reason) => {
                tally.0[slot::REJECT + reason.index()] += 1;
                meta.verdict = Verdict::Drop;
                return;
            }
        };
        tally.0[slot::COMPILED] += u64::from(processed.compiled);
        match processed.outcome {
            None => tally.0[slot::PASSED_FAULTED] += 1,
            Some(outcome) => {
                tally.0[slot::STEPS] += outcome.steps as u64;
                if let Some((fault, _)) = outcome.fault {
                    tally.0[slot::FAULT + fault.index()] += 1;
                }
            }
        }
        match processed.fate {
            Fate::Fwd => tally.0[slot::FORWARDED] += 1,
            Fate::Drop => {
                tally.0[slot::DROPPED] += 1;
                meta.verdict = Verdict::Drop;
            }
            Fate::Return => {
                tally.0[slot::RETURNED] += 1;
                return_to_source(frame, meta, found.carriage, found.shim_offset);
            }
        }
    }
}

/// Runs `f` with this thread's decode cache (or a fresh one in the never fast-path case of a
/// nested call on the same thread finding it busy), and tallies the cache's hits and misses
/// during `f`: once per call, not per packet.
fn with_cache<R>(
    stage: &WaspStage,
    tally: &mut Tally,
    f: impl FnOnce(&mut DecodeCache, &mut Tally) -> R,
) -> R {
    let counted = |cache: &mut DecodeCache, tally: &mut Tally| {
        #[cfg(feature = "jit")]
        cache.set_jit(stage.jit.as_ref().map(|(queue, after)| (queue, *after)));
        #[cfg(not(feature = "jit"))]
        let _ = stage;
        let (hits, misses) = cache.hits_and_misses();
        let result = f(cache, tally);
        let (hits_after, misses_after) = cache.hits_and_misses();
        tally.0[slot::CACHE_HITS] += hits_after - hits;
        tally.0[slot::CACHE_MISSES] += misses_after - misses;
        result
    };
    CACHE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut cache) => counted(&mut cache, tally),
        Err(_) => counted(&mut DecodeCache::new(), tally),
    })
}

impl WaspStage {
    fn add(&self, tally: &Tally, worker: usize) {
        for (cell, &n) in self.counters.cells.iter().zip(&tally.0) {
            if n != 0 {
                cell.add(worker, n);
            }
        }
    }
}

/// Sends the packet back where it came from, as a router answers an expired TTL: IP source
/// and destination swapped (and the Ethernet addresses, and in UDP carriage the UDP ports, so
/// that the sender's socket gets it), out of the port it came in by. The swaps leave the IP and
/// transport checksums valid (a sum does not depend on order). The address family is the
/// header's own version nibble, never a classification that may be stale. At an output filter
/// the Ethernet source may already be this node's own: return at the input filter.
fn return_to_source(frame: &mut [u8], meta: &mut Meta, carriage: Carriage, shim_offset: usize) {
    let l3 = usize::from(meta.l3_off);
    let (addr_at, addr_len) = match frame.get(l3).map(|b| b >> 4) {
        Some(4) => (12, 4),
        Some(6) => (8, 16),
        _ => return,
    };
    swap_halves(frame, l3 + addr_at, addr_len);
    if carriage == Carriage::Udp {
        // The UDP header sits right before the shim.
        if let Some(udp) = (l3 + shim_offset).checked_sub(8) {
            swap_halves(frame, udp, 2);
        }
    }
    if meta.layers & Layers::ETHERNET != 0 {
        swap_halves(frame, 0, 6);
    }
    meta.out_port = meta.in_port;
    meta.verdict = Verdict::Tx;
}

/// Swaps `frame[at..at+len]` with `frame[at+len..at+2len]` (no-op if the frame is shorter).
fn swap_halves(frame: &mut [u8], at: usize, len: usize) {
    if let Some(both) = frame.get_mut(at..at + 2 * len) {
        let (first, second) = both.split_at_mut(len);
        first.swap_with_slice(second);
    }
}

impl Stage for WaspStage {
    fn name(&self) -> &str {
        "wasp"
    }

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let mut tally = Tally([0; slot::COUNT]);
        let mut backlog = Backlog::new();
        with_cache(self, &mut tally, |cache, tally| {
            let packets = batch.as_mut_slice();
            for i in sel {
                let Some(packet) = packets.get_mut(i) else { continue };
                let (frame, meta) = packet.frame_mut();
                self.one(frame, meta, cx.now_ns, cache, tally, &mut backlog);
            }
        });
        self.add(&tally, cx.worker);
    }

    fn run_one(&self, frame: &mut [u8], meta: &mut Meta, cx: &mut WorkerCx<'_>) -> u64 {
        let mut tally = Tally([0; slot::COUNT]);
        meta.verdict = Verdict::Pass;
        let mut backlog = Backlog::new();
        with_cache(self, &mut tally, |cache, tally| {
            self.one(frame, meta, cx.now_ns, cache, tally, &mut backlog)
        });
        self.add(&tally, cx.worker);
        hotplane_core::xdp::action_of(meta.verdict)
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}
