//! What the tests share: running a batch through the data plane's path.

use hotplane_core::{Batch, Guard, Verdict};
use hotplane_p4::v1model::{Output, Replication, V1Switch};
use std::collections::BTreeMap;

/// Run every packet of `batch` through `process_batch`; what leaves for each, in order:
/// the packet itself where it was sent, its copies where it became copies, else nothing.
pub fn run_batch(
    sw: &mut V1Switch,
    batch: &mut Batch,
    pre: &Replication,
    guard: &Guard<'_>,
    now_ns: u64,
) -> Vec<Vec<Output>> {
    let (all, mut scratch, mut copies) = (batch.all(), Vec::new(), BTreeMap::new());
    sw.process_batch(batch, all, pre, guard, now_ns, &mut scratch, |i, _, out| {
        copies.insert(i, std::mem::take(out));
    });
    batch
        .iter()
        .enumerate()
        .map(|(i, p)| match copies.remove(&i) {
            Some(c) => c,
            None if p.meta.verdict == Verdict::Pass => {
                vec![Output { port: p.meta.out_port as u32, data: p.data().to_vec() }]
            }
            None => Vec::new(),
        })
        .collect()
}
