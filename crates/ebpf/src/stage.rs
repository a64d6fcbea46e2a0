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

use crate::maps::set_current_cpu;
use crate::program::Program;
use crate::xdp::{self, XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_REDIRECT, XDP_TX};
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::metrics::PerWorker;
use hotplane_core::{Stage, Verdict, WorkerCx};
use std::sync::Arc;

/// Packets per XDP action, per worker.
#[derive(Debug, Default)]
pub struct ActionCounters {
    pub aborted: PerWorker,
    pub drop: PerWorker,
    pub pass: PerWorker,
    pub tx: PerWorker,
    pub redirect: PerWorker,
    /// Return values that are no XDP action, and redirects without a target.
    pub invalid: PerWorker,
}

/// An XDP program in a slot.
pub struct XdpStage {
    pub program: Arc<Program>,
    pub counters: ActionCounters,
    /// Where the program came from (file name, "bytecode", ...), for listings.
    pub origin: String,
}

impl XdpStage {
    pub fn new(program: Arc<Program>, origin: impl Into<String>) -> Self {
        Self { program, counters: ActionCounters::default(), origin: origin.into() }
    }
}

impl Stage for XdpStage {
    fn name(&self) -> &str {
        &self.program.name
    }

    #[inline]
    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        set_current_cpu(cx.worker as u32);
        let w = cx.worker;
        let (mut pass, mut drop, mut tx) = (0, 0, 0);
        let pkts = batch.as_mut_slice();
        for i in sel {
            let p = &mut pkts[i];
            // A target set for an earlier packet must not leak into this one.
            xdp::take_redirect();
            match self.program.run_xdp(p, w as u32) {
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
                XDP_REDIRECT => match xdp::take_redirect() {
                    Some(port) => {
                        p.meta.verdict = Verdict::Tx;
                        p.meta.out_port = port as u16;
                        self.counters.redirect.add(w, 1);
                    }
                    None => {
                        p.meta.verdict = Verdict::Drop;
                        self.counters.invalid.add(w, 1);
                    }
                },
                XDP_ABORTED => {
                    p.meta.verdict = Verdict::Drop;
                    self.counters.aborted.add(w, 1);
                }
                _ => {
                    p.meta.verdict = Verdict::Drop;
                    self.counters.invalid.add(w, 1);
                }
            }
        }
        self.counters.pass.add(w, pass);
        self.counters.drop.add(w, drop);
        self.counters.tx.add(w, tx);
    }

    fn describe(&self) -> String {
        let c = &self.counters;
        format!(
            "ebpf {} ({}, {} insns, {}) pass={} drop={} tx={} redirect={} aborted={} invalid={}",
            self.program.name,
            self.origin,
            self.program.insns().len(),
            self.program.engine.as_str(),
            c.pass.sum(),
            c.drop.sum(),
            c.tx.sum(),
            c.redirect.sum(),
            c.aborted.sum(),
            c.invalid.sum()
        )
    }
}
