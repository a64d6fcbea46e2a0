//! Hot swapping under load: nothing lost or duplicated, old programs never run after `replace`
//! returns and are freed only after the grace period, and other flows are left alone.

use hotplane::Config;
use hotplane::StageSpec;
use hotplane_control::Target;
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::wire::Stamp;
use hotplane_core::{time, FlowSelector, Position, Stage, StageRef, WorkerCx};
use hotplane_io::mem::{GenSpec, MemReport};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn two_worker_plane(extra: &str) -> hotplane::Engine {
    let cfg = Config::parse(
        &format!(
            r#"
[dataplane]
workers = 2
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 2 }}
sink = {{ record = 3000000 }}
{extra}
"#
        ),
        "test",
    )
    .unwrap();
    hotplane::start(cfg).unwrap()
}

/// Generated flow `i` of the default generator, as the config writes it.
fn flow(i: u16) -> FlowSelector {
    let g = GenSpec::default();
    format!(
        "proto=udp,src={},dst={},sport={},dport={}",
        g.src_ip,
        g.dst_ip,
        g.src_port + i,
        g.dst_port
    )
    .parse()
    .unwrap()
}

fn wait_for_traffic(plane: &hotplane::Engine, packets: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while plane.worker_stats().iter().any(|w| w.packets.get() < packets) {
        assert!(std::time::Instant::now() < deadline, "no traffic");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn thousands_of_swaps_under_load_lose_and_duplicate_nothing() {
    let plane = two_worker_plane("");
    let reg = plane.registry().clone();
    wait_for_traffic(&plane, 10_000);
    let all = [0, 1];
    for i in 0..2000u16 {
        let target =
            if i % 2 == 0 { Target::Position(Position::Pre) } else { Target::Flow(flow(0)) };
        let prog = reg.build(&StageSpec::stamp_mark(i)).unwrap();
        let inst = reg.install(&target, &all, prog).unwrap();
        assert!(inst.warning.is_none(), "{:?}", inst.warning);
    }
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    assert!(r.sent() > 100_000, "too little traffic to mean anything: {}", r.sent());
    assert_eq!(r.received(), r.sent());
    assert_eq!(r.lost(), 0);
    assert_eq!(r.duplicates(), 0);
}

/// A stage that records when it last finished running and when it was freed.
struct Probe {
    id: u32,
    last_run_end: Arc<AtomicU64>,
    dropped_at: Arc<AtomicU64>,
}

impl Stage for Probe {
    fn name(&self) -> &str {
        "probe"
    }

    fn run(&self, batch: &mut Batch, sel: Mask, _cx: &mut WorkerCx<'_>) {
        for i in sel {
            let p = batch.get_mut(i).unwrap();
            let off = p.meta.payload_off as usize;
            if let Some(s) = p.data_mut().get_mut(off..) {
                if let Ok(mut st) = Stamp::new_checked(s) {
                    st.set_mark(self.id as u16);
                }
            }
        }
        self.last_run_end.fetch_max(time::now_ns(), Ordering::SeqCst);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.dropped_at.store(time::now_ns(), Ordering::SeqCst);
    }
}

#[test]
fn old_program_never_runs_after_replace_returns_and_is_freed_after_grace() {
    let plane = two_worker_plane("");
    let reg = plane.registry().clone();
    wait_for_traffic(&plane, 10_000);
    let mut returned_at = Vec::new();
    let mut probes: Vec<(Arc<AtomicU64>, Arc<AtomicU64>)> = Vec::new();
    for id in 1..=600u32 {
        let (run, dropped) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let p: StageRef =
            Arc::new(Probe { id, last_run_end: run.clone(), dropped_at: dropped.clone() });
        reg.install(&Target::Position(Position::Pre), &[0, 1], Some(p)).unwrap();
        let t = time::now_ns();
        returned_at.push(t);
        if let Some((old_run, old_dropped)) = probes.last() {
            let (r, d) = (old_run.load(Ordering::SeqCst), old_dropped.load(Ordering::SeqCst));
            assert!(r <= t, "probe {} ran after replace returned", id - 1);
            assert_ne!(d, 0, "probe {} not freed when replace returned", id - 1);
            assert!(r <= d, "probe {} ran after it was freed", id - 1);
        }
        probes.push((run, dropped));
        // Let some traffic through the new probe now and then.
        if id % 50 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    assert_eq!(r.lost(), 0);
    // Packets received after replace(k) returned carry mark >= k.
    let mut checked = 0;
    for s in &r.samples {
        let k = returned_at.partition_point(|&t| t < s.tx_ts) as u16; // probes 1..=k returned before
        if k > 0 {
            assert!(s.mark >= k, "packet received at {} carries mark {} < {k}", s.tx_ts, s.mark);
            checked += 1;
        }
    }
    assert!(checked > 1000, "only {checked} packets checked");
}

#[test]
fn flow_two_is_untouched_by_flow_one_updates() {
    // Both functions are installed before the first packet is generated.
    let plane = two_worker_plane(
        r#"
[[pipeline.flows]]
match = "proto=udp,src=10.0.0.1,dst=10.1.0.1,sport=1024,dport=5000"
stage = { stage = "set-field", base = "payload", offset = 16, value = 1, width = 2 }
[[pipeline.flows]]
match = "proto=udp,src=10.0.0.1,dst=10.1.0.1,sport=1025,dport=5000"
stage = { stage = "set-field", base = "payload", offset = 16, value = 2, width = 2 }
"#,
    );
    let reg = plane.registry().clone();
    let before: Vec<_> = reg.workers.iter().map(|w| w.flows.function(&flow(1)).unwrap()).collect();
    wait_for_traffic(&plane, 10_000);
    for i in 0..500u16 {
        reg.install(
            &Target::Flow(flow(0)),
            &[0, 1],
            reg.build(&StageSpec::stamp_mark(100 + i)).unwrap(),
        )
        .unwrap();
    }
    for (w, b) in reg.workers.iter().zip(&before) {
        let after = w.flows.function(&flow(1)).unwrap();
        assert!(Arc::ptr_eq(&after.stage, &b.stage), "flow 2's function object was replaced");
        assert_eq!(after.version, b.version);
    }
    std::thread::sleep(Duration::from_millis(20));
    let handles = plane.mem_handles();
    plane.stop();
    let r = MemReport::merge(&handles);
    let f2 = r.flow(1).unwrap();
    assert_eq!(f2.marks.len(), 1, "flow 2 saw other functions: {:?}", f2.marks);
    assert_eq!(f2.marks[0].mark, 2);
    assert_eq!(f2.lost, 0);
    let f1 = r.flow(0).unwrap();
    assert!(f1.marks.len() > 2, "flow 1 should have seen several functions: {:?}", f1.marks);
    assert!(f1.marks.iter().any(|m| m.mark >= 100));
}
