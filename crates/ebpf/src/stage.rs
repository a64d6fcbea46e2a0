//! An XDP program as a pipeline stage: XDP actions become pipeline verdicts.
//!
//! | XDP action | verdict |
//! |---|---|
//! | `XDP_PASS` | `Pass`: the packet continues through the pipeline |
//! | `XDP_DROP` | `Drop` |
//! | `XDP_ABORTED` | `Drop`, counted as aborted |
//! | `XDP_TX` | `Tx` out of the port it came in on |
//! | `XDP_REDIRECT` | `Tx` to the port chosen by `bpf_redirect`/`bpf_redirect_map` |
//! | anything else | `Drop`, counted as invalid |

use crate::chain::live::ChainCell;
use crate::maps::set_current_cpu;
use crate::program::Program;
use crate::xdp::{self, XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_REDIRECT, XDP_TX};
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::metrics::LocalCounter;
use hotplane_core::{Meta, Stage, Verdict, WorkerCx};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether stages time their runs, as the kernel's `kernel.bpf_stats_enabled` does for
/// bpftool's `run_time_ns`: off by default, since it costs two clock reads per batch.
static TIMING: AtomicBool = AtomicBool::new(false);

/// Time every eBPF stage's runs from now on (`hotplane ebpf prog stats on`), or stop.
pub fn set_timing(on: bool) {
    TIMING.store(on, Ordering::Relaxed);
}

/// Whether runs are being timed.
pub fn timing() -> bool {
    TIMING.load(Ordering::Relaxed)
}

/// The counters of one worker, on a cache line of their own.
#[derive(Debug, Default)]
#[repr(align(64))]
struct WorkerActions([LocalCounter; 8]);

const ABORTED: usize = 0;
const DROP: usize = 1;
const PASS: usize = 2;
const TX: usize = 3;
const REDIRECT: usize = 4;
/// Return values that are no XDP action, and redirects without a target.
const INVALID: usize = 5;
/// Nanoseconds spent running, and the packets run, while timing was on.
const RUN_NS: usize = 6;
const RUN_CNT: usize = 7;

/// Packets per XDP action, per worker. Sized by the number of workers (a program is loaded on
/// every update: a fixed 64-worker table would cost more to allocate than to compile).
#[derive(Debug)]
pub struct ActionCounters {
    workers: Box<[WorkerActions]>,
}

impl ActionCounters {
    pub fn new(workers: usize) -> Self {
        Self { workers: (0..workers.max(1)).map(|_| WorkerActions::default()).collect() }
    }

    #[inline(always)]
    fn add(&self, worker: usize, action: usize, n: u64) {
        if let Some(w) = self.workers.get(worker) {
            w.0[action].add(n);
        }
    }

    fn sum(&self, action: usize) -> u64 {
        self.workers.iter().map(|w| w.0[action].get()).sum()
    }

    pub fn aborted(&self) -> u64 {
        self.sum(ABORTED)
    }
    pub fn drop(&self) -> u64 {
        self.sum(DROP)
    }
    pub fn pass(&self) -> u64 {
        self.sum(PASS)
    }
    pub fn tx(&self) -> u64 {
        self.sum(TX)
    }
    pub fn redirect(&self) -> u64 {
        self.sum(REDIRECT)
    }
    pub fn invalid(&self) -> u64 {
        self.sum(INVALID)
    }
    /// Nanoseconds spent in the program while timing was on (bpftool's `run_time_ns`).
    pub fn run_time_ns(&self) -> u64 {
        self.sum(RUN_NS)
    }
    /// Packets run while timing was on (bpftool's `run_cnt`).
    pub fn run_cnt(&self) -> u64 {
        self.sum(RUN_CNT)
    }
}

/// An XDP program in a slot.
pub struct XdpStage {
    pub program: Arc<Program>,
    pub counters: ActionCounters,
    /// Where the program came from (file name, "bytecode", ...), for listings.
    pub origin: String,
    /// The program calls a redirect helper (else XDP_REDIRECT has no target).
    redirects: bool,
    /// Where a specialised form of the program is published (`crate::chain::live`); `None`
    /// for stages built outside a data plane's kind (benchmarks).
    pub chain: Option<ChainCell>,
}

impl XdpStage {
    /// Count `packets` run since `started` (timing on).
    #[cold]
    fn time(&self, worker: usize, started: u64, packets: u64) {
        let spent = hotplane_core::time::now_ns().saturating_sub(started);
        self.counters.add(worker, RUN_NS, spent);
        self.counters.add(worker, RUN_CNT, packets);
    }

    pub fn new(program: Arc<Program>, origin: impl Into<String>) -> Self {
        let counters = ActionCounters::new(program.cpus);
        let redirects = program.redirects();
        Self { program, counters, origin: origin.into(), redirects, chain: None }
    }

    /// A stage whose program may be replaced by a specialised form behind a guard.
    pub fn with_chain(program: Arc<Program>, origin: impl Into<String>, chain: ChainCell) -> Self {
        Self { chain: Some(chain), ..Self::new(program, origin) }
    }
}

/// The counter an XDP program's return value is counted under.
fn action_counter(r0: u64) -> usize {
    match r0 {
        XDP_ABORTED => ABORTED,
        XDP_DROP => DROP,
        XDP_PASS => PASS,
        XDP_TX => TX,
        XDP_REDIRECT => REDIRECT,
        _ => INVALID,
    }
}

impl Stage for XdpStage {
    fn name(&self) -> &str {
        &self.program.name
    }

    fn pass_guarantee(&self) -> Option<hotplane_core::shape::Guarantee> {
        self.chain.as_ref().map(|c| c.pass_guarantee())
    }

    #[inline]
    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        set_current_cpu(cx.worker as u32);
        let w = cx.worker;
        let started = timing().then(hotplane_core::time::now_ns);
        let (mut pass, mut drop, mut tx) = (0, 0, 0);
        let pkts = batch.as_mut_slice();
        let mut runner = self.program.xdp_runner(w as u32);
        // A specialised form, if one is published: one atomic load per batch.
        let variant = self.chain.as_ref().and_then(|c| c.variant(cx.guard));
        let mut fast = variant.map(|v| {
            (v.fast.has_compiled_guard(), &v.specialised.guard, v.fast.xdp_runner(w as u32))
        });
        // A compiled guard counts the packets it refuses itself.
        let misses_before = variant.and_then(|v| v.fast.guard_misses(w as u32));
        let mut admitted = 0;
        for i in sel {
            let p = &mut pkts[i];
            if self.redirects {
                // A target set for an earlier packet must not leak into this one.
                xdp::take_redirect();
            }
            let r0 = match &mut fast {
                Some((compiled, guard, fast)) if *compiled || guard.admits(p.data()) => {
                    admitted += 1;
                    fast.run(p)
                }
                _ => runner.run(p),
            };
            match r0 {
                XDP_PASS => pass += 1,
                XDP_DROP => {
                    p.meta.verdict = Verdict::Drop;
                    drop += 1;
                }
                XDP_TX => {
                    p.meta.verdict = Verdict::Tx;
                    p.meta.out_port = p.meta.in_port;
                    tx += 1;
                }
                XDP_REDIRECT => match xdp::take_redirect().filter(|_| self.redirects) {
                    Some(port) => {
                        p.meta.verdict = Verdict::Tx;
                        p.meta.out_port = port as u16;
                        self.counters.add(w, REDIRECT, 1);
                    }
                    None => {
                        p.meta.verdict = Verdict::Drop;
                        self.counters.add(w, INVALID, 1);
                    }
                },
                XDP_ABORTED => {
                    p.meta.verdict = Verdict::Drop;
                    self.counters.add(w, ABORTED, 1);
                }
                _ => {
                    p.meta.verdict = Verdict::Drop;
                    self.counters.add(w, INVALID, 1);
                }
            }
        }
        self.counters.add(w, PASS, pass);
        self.counters.add(w, DROP, drop);
        self.counters.add(w, TX, tx);
        if let (Some(chain), Some(v)) = (&self.chain, variant) {
            if let (Some(before), Some(after)) = (misses_before, v.fast.guard_misses(w as u32)) {
                admitted -= after.wrapping_sub(before).min(admitted);
            }
            chain.count(w, admitted, sel.count() as u64 - admitted);
        }
        if let Some(t) = started {
            self.time(w, t, sel.count() as u64);
        }
    }

    /// Runs the program on the caller's bytes themselves (no copy into a packet) and returns
    /// r0 unchanged; the action is counted like a pipeline run. The frame cannot grow or
    /// shrink: `bpf_xdp_adjust_head`/`_tail` fail cleanly on it.
    fn run_one(&self, frame: &mut [u8], meta: &mut Meta, cx: &mut WorkerCx<'_>) -> u64 {
        let w = cx.worker;
        set_current_cpu(w as u32);
        if self.redirects {
            // A target set by an earlier run must not leak into this one.
            xdp::take_redirect();
        }
        let started = timing().then(hotplane_core::time::now_ns);
        let r0 = self.program.xdp_runner(w as u32).run_frame(frame, meta.in_port);
        self.counters.add(w, action_counter(r0), 1);
        if let Some(t) = started {
            self.time(w, t, 1);
        }
        r0
    }

    fn describe(&self) -> String {
        let c = &self.counters;
        let chain = match self.chain.as_ref().and_then(|c| c.current().map(|v| (c, v))) {
            Some((cell, v)) => {
                let (hits, misses) = cell.guard_counts();
                format!(
                    " chain: specialised to {} ({} -> {} insns) guard hits={hits} misses={misses}",
                    v.upstream,
                    v.specialised.original_slots,
                    v.specialised.slots()
                )
            }
            None => String::new(),
        };
        format!(
            "ebpf {} ({}, {} insns, {}) pass={} drop={} tx={} redirect={} aborted={} invalid={}{chain}",
            self.program.name,
            self.origin,
            self.program.insns().len(),
            self.program.engine.as_str(),
            c.pass(),
            c.drop(),
            c.tx(),
            c.redirect(),
            c.aborted(),
            c.invalid()
        )
    }
}
