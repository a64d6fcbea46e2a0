//! Differential test against the Linux kernel: the same objects loaded with bpf(2) and run
//! with BPF_PROG_TEST_RUN on generated packets must give the same verdicts and packet bytes
//! as both of hotplane's engines. Needs root (CI runs as root); fails, rather than skips,
//! without it.

mod common;

use common::*;
use hotplane_core::{Pool, PoolConfig};
use hotplane_ebpf::elf;
use hotplane_ebpf::kernel::{self, KernelProgram};
use hotplane_ebpf::program::{Engine, LoadOptions, Program, ProgramSpec};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::xdp;

/// Packets of many shapes: protocols, addresses, ports, TTLs, lengths, truncations.
fn packets() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut seed = 0x1234_5678u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for k in 0..300 {
        let proto = [6u8, 17, 17, 1][k % 4];
        let dst = if k % 3 == 0 { [10, 0, 0, 2] } else { [10, 0, 0, 100] };
        let dport = [5000u16, 80, 5001, 53][(rnd() % 4) as usize];
        let ttl = (rnd() % 4) as u8;
        let mut f = ipv4(
            if proto == 1 { 17 } else { proto },
            [192, 168, (k / 256) as u8, k as u8],
            dst,
            1000 + k as u16,
            dport,
            ttl,
            (rnd() % 40) as usize,
        );
        if proto == 1 {
            f[23] = 1;
        }
        match k % 17 {
            // The kernel refuses test runs shorter than an Ethernet header.
            0 => f.truncate((rnd() % 40) as usize + 14),
            1 => f[12..14].copy_from_slice(&[0x86, 0xdd]),
            2 => f[12..14].copy_from_slice(&[0x08, 0x06]),
            3 => {
                let mut v = f[..12].to_vec();
                v.extend_from_slice(&[0x81, 0x00, 0, 5]);
                v.extend_from_slice(&f[12..]);
                f = v;
            }
            _ => {}
        }
        out.push(f);
    }
    out
}

/// Run every packet through the kernel and each engine; returns the kernel program and ours
/// (maps included) for further checks.
fn compare(
    object: &str,
    setup: impl Fn(&dyn Fn(&str, &[u8], &[u8])),
) -> (KernelProgram, Vec<Program>) {
    kernel::available()
        .unwrap_or_else(|e| panic!("the kernel refused a trivial XDP program (run as root): {e}"));
    let spec: ProgramSpec = elf::load(&example(object), None).unwrap();
    let k = KernelProgram::load_xdp(&spec).unwrap_or_else(|e| panic!("{object}: {e}"));
    let pool = Pool::new(PoolConfig { buffers: 16, ..PoolConfig::default() }).unwrap();
    let mut programs = Vec::new();
    for engine in [Engine::Interp, Engine::Jit] {
        let reg = hotplane_ebpf::program::MapRegistry::default();
        let opts = LoadOptions { engine, cpus: 1, ..LoadOptions::default() };
        let ours = Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, Some(&reg)).unwrap();
        setup(&|name, key, value| {
            reg.get(name).unwrap().update_copy(key, value, 0).unwrap();
            if engine == Engine::Interp {
                k.map(name).unwrap().update(key, value).unwrap();
            }
        });
        for (n, f) in packets().iter().enumerate() {
            let expect =
                k.test_run(f, 1).unwrap_or_else(|e| panic!("packet {n} ({} bytes): {e}", f.len()));
            let mut p = pool.alloc().unwrap();
            p.set_frame(f).unwrap();
            let got = ours.run_xdp(&mut p, 0);
            assert_eq!(got, expect.retval as u64, "{object} {engine:?} packet {n}: verdict");
            assert_eq!(p.data(), &expect.data[..], "{object} {engine:?} packet {n}: bytes");
        }
        programs.push(ours);
    }
    (k, programs)
}

#[test]
fn dummy_filter_change_match_the_kernel() {
    for o in ["xdp_dummy.o", "xdp_filter.o", "xdp_change.o"] {
        compare(o, |_| {});
    }
}

#[test]
fn protocol_counter_matches_the_kernel() {
    let (k, ours) = compare("xdp_count.o", |_| {});
    // The kernel saw every packet once per engine.
    for key in 0..11u32 {
        let sum = |v: Vec<Vec<u8>>| {
            v.iter().map(|c| u64::from_ne_bytes(c[..8].try_into().unwrap())).sum::<u64>()
        };
        let kernel =
            sum(k.map("xdp_count/proto_count").unwrap().lookup(&key.to_ne_bytes()).unwrap());
        for p in &ours {
            let mine = sum(p.maps[0].lookup_copy(&key.to_ne_bytes()).unwrap().unwrap());
            assert_eq!(kernel, 2 * mine, "counter {key}");
        }
    }
}

#[test]
fn load_balancer_matches_the_kernel() {
    compare("xdp_lb.o", |set| {
        let mut cfg = vec![10, 0, 0, 100];
        cfg.extend_from_slice(&80u16.to_be_bytes());
        cfg.extend_from_slice(&3u16.to_ne_bytes());
        set("xdp_lb/config", &0u32.to_ne_bytes(), &cfg);
        for b in 0..3u8 {
            let mut v = vec![10, 0, 1, 10 + b, 2, 0, 0, 0, 1, b, 0, 0];
            v.truncate(12);
            set("xdp_lb/backends", &(b as u32).to_ne_bytes(), &v);
        }
    });
}
