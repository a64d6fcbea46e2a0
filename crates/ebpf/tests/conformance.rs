//! The public eBPF conformance suite (../shared/conformance/ebpf) on every engine.

use hotplane_ebpf::conformance::run_dir;
use hotplane_ebpf::helpers;
use hotplane_ebpf::interp::{interpret, Region};
use std::path::PathBuf;

fn suite() -> PathBuf {
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/ebpf/tests");
    assert!(p.is_dir(), "conformance suite not found at {}", p.display());
    p
}

#[test]
fn interpreter_passes_the_whole_suite() {
    let h = helpers::conformance();
    let s = run_dir(&suite(), |t, prog| {
        let mut mem = t.mem.clone();
        let regions = [Region::of(&mem, true)];
        let r1 = mem.as_mut_ptr() as u64;
        interpret(prog, &h, &regions, r1, mem.len() as u64, 1 << 24).map_err(|e| e.to_string())
    })
    .unwrap();
    assert!(s.failures.is_empty(), "{} failures: {:#?}", s.failed, s.failures);
    assert!(s.passed >= 300, "only {} tests ran", s.passed);
}
