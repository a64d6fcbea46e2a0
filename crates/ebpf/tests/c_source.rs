//! "Extensible" mode: C source compiled by the system clang at load time. Exercises what the
//! examples do not: global data, bpf-to-bpf calls into `.text`, legacy `maps` definitions,
//! devmap redirects, tail adjustment and trace_printk. Needs clang (`scripts/test.sh`
//! installs it); without it the test fails rather than skips.

use hotplane_core::{Pool, PoolConfig};
use hotplane_ebpf::program::{Engine, LoadOptions, MapRegistry, Program};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::xdp::{self, XDP_DROP, XDP_PASS, XDP_REDIRECT};
use hotplane_ebpf::{cc, elf};

const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* The pre-libbpf-1.0 way to declare a map. */
struct bpf_map_def {
    unsigned int type, key_size, value_size, max_entries, map_flags;
};
struct bpf_map_def SEC("maps") legacy_hits = {
    .type = BPF_MAP_TYPE_ARRAY, .key_size = 4, .value_size = 8, .max_entries = 2,
};

struct {
    __uint(type, BPF_MAP_TYPE_DEVMAP);
    __uint(max_entries, 4);
} ports SEC(".maps");

const volatile __u32 redirect_marker = 0x77;   /* .rodata */
__u64 seen = 0;                                 /* .bss */
__u32 last_len = 5;                             /* .data */

static __attribute__((noinline)) int classify(__u8 first, __u32 len)
{
    if (first == redirect_marker)
        return 1;
    if (len > 100)
        return 2;
    return 0;
}

SEC("xdp")
int xdp_misc(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    __u8 *p = data;
    __u32 key, len;
    __u64 *hits;

    if ((void *)(p + 1) > end)
        return XDP_ABORTED;
    len = end - data;
    seen++;
    last_len = len;
    key = classify(*p, len) == 1;
    hits = bpf_map_lookup_elem(&legacy_hits, &key);
    if (hits)
        __sync_fetch_and_add(hits, 1);
    switch (classify(*p, len)) {
    case 1:
        bpf_printk("redirect %u bytes on cpu %u", len, bpf_get_smp_processor_id());
        return bpf_redirect_map(&ports, 1, XDP_DROP);
    case 2:
        if (bpf_xdp_adjust_tail(ctx, -(int)(len - 100)))
            return XDP_ABORTED;
        return XDP_PASS;
    }
    return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
"#;

#[test]
fn c_source_compiles_and_runs_with_global_data_calls_and_legacy_maps() {
    let object = cc::compile(SOURCE.as_bytes())
        .expect("clang must be installed for this test (scripts/test.sh installs it)");
    let spec = elf::load(&object, None).unwrap();
    assert!(
        spec.insns.iter().any(|i| i.code == hotplane_ebpf::insn::op::CALL
            && i.src == hotplane_ebpf::insn::pseudo::CALL),
        "classify() stays a bpf-to-bpf call into .text"
    );
    let names: Vec<&str> = spec.maps.iter().map(|m| m.name.as_str()).collect();
    for n in [
        "xdp_misc/legacy_hits",
        "xdp_misc/ports",
        "xdp_misc/.rodata",
        "xdp_misc/.bss",
        "xdp_misc/.data",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let pool = Pool::new(PoolConfig { buffers: 16, ..PoolConfig::default() }).unwrap();
    for engine in [Engine::Interp, Engine::Jit] {
        let reg = MapRegistry::default();
        let opts = LoadOptions { engine, cpus: 1, ..LoadOptions::default() };
        let prog = Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, Some(&reg)).unwrap();
        let map = |n: &str| reg.get(&format!("xdp_misc/{n}")).unwrap();
        let u64_at = |n: &str, k: u32| {
            let v = map(n).lookup_copy(&k.to_ne_bytes()).unwrap().unwrap();
            let mut b = [0u8; 8];
            let w = v[0].len().min(8);
            b[..w].copy_from_slice(&v[0][..w]);
            u64::from_ne_bytes(b)
        };
        let run = |frame: &[u8]| {
            let mut p = pool.alloc().unwrap();
            p.set_frame(frame).unwrap();
            xdp::take_redirect();
            let a = prog.run_xdp(&mut p, 0);
            (a, p.len())
        };
        assert_eq!(u64_at(".data", 0) & 0xffff_ffff, 5, ".data starts with its initialiser");
        assert_eq!(run(&[1u8; 60]), (XDP_PASS, 60));
        assert_eq!(run(&[1u8; 300]), (XDP_PASS, 100), "trimmed by adjust_tail");
        // Marker packet: port 1 of the devmap is empty, so the fallback (XDP_DROP) applies.
        assert_eq!(run(&[0x77u8; 60]).0, XDP_DROP, "{engine:?}");
        map("ports").update_copy(&1u32.to_ne_bytes(), &4u32.to_ne_bytes(), 0).unwrap();
        assert_eq!(run(&[0x77u8; 60]).0, XDP_REDIRECT);
        assert_eq!(xdp::take_redirect(), Some(3), "ifindex 4 is port 3");
        assert_eq!(u64_at(".bss", 0), 4, "four packets seen");
        assert_eq!(u64_at(".data", 0) & 0xffff_ffff, 60);
        assert_eq!((u64_at("legacy_hits", 0), u64_at("legacy_hits", 1)), (2, 2));
    }
    assert!(
        xdp::TRACE_LINES.load(std::sync::atomic::Ordering::Relaxed) >= 1,
        "bpf_printk reached the log"
    );
}

#[test]
fn compile_errors_come_back_readable() {
    let e = cc::compile(b"int broken( {").unwrap_err().to_string();
    assert!(e.contains("clang failed") && e.contains("prog.c"), "{e}");
    assert!(!e.contains("/tmp/"), "no private paths: {e}");
}
