//! The C examples, compiled by clang (`examples/ebpf/build.sh`), load from their ELF objects
//! and run unchanged on both engines.

mod common;

use common::*;
use hotplane_core::{Pool, PoolConfig};
use hotplane_ebpf::elf;
use hotplane_ebpf::maps::MapKind;
use hotplane_ebpf::program::{Engine, LoadOptions, MapRegistry, Program};
use hotplane_ebpf::verifier::Context;
use hotplane_ebpf::xdp::{self, XDP_DROP, XDP_PASS, XDP_TX};

fn load(object: &str, engine: Engine, cpus: usize) -> Program {
    let spec = elf::load(&example(object), None).unwrap_or_else(|e| panic!("{object}: {e}"));
    let opts = LoadOptions { engine, cpus, ..LoadOptions::default() };
    Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, None)
        .unwrap_or_else(|e| panic!("{object}: {e}"))
}

fn pool() -> Pool {
    Pool::new(PoolConfig { buffers: 64, ..PoolConfig::default() }).unwrap()
}

/// Run `prog` on a copy of `frame`; returns the action and the frame afterwards.
fn run(prog: &Program, pool: &Pool, frame: &[u8]) -> (u64, Vec<u8>) {
    let mut p = pool.alloc().unwrap();
    p.set_frame(frame).unwrap();
    let act = prog.run_xdp(&mut p, 0);
    (act, p.data().to_vec())
}

const ENGINES: [Engine; 2] = [Engine::Interp, Engine::Jit];

#[test]
fn objects_list_their_programs_and_maps() {
    let bytes = example("xdp_lb.o");
    let o = elf::ElfObject::parse(&bytes).unwrap();
    let progs = o.programs();
    assert_eq!(progs.len(), 1);
    assert_eq!((progs[0].name.as_str(), progs[0].section.as_str()), ("xdp_lb", "xdp"));
    let mut maps: Vec<(&str, MapKind, u32, u32, u32)> = o
        .maps()
        .iter()
        .map(|m| (m.name.as_str(), m.def.kind, m.def.key_size, m.def.value_size, m.def.max_entries))
        .collect();
    maps.sort_by_key(|m| m.0);
    assert_eq!(
        maps,
        vec![
            ("backends", MapKind::Array, 4, 12, 16),
            ("config", MapKind::Array, 4, 8, 1),
            ("flows", MapKind::Hash, 16, 4, 65536),
            ("stats", MapKind::PerCpuArray, 4, 24, 1),
        ]
    );
    assert_eq!(o.license(), Some("GPL"));
    assert!(elf::load(&example("xdp_lb.o"), Some("nope"))
        .unwrap_err()
        .to_string()
        .contains("no program `nope`"));
}

#[test]
fn dummy_filter_and_change() {
    let pool = pool();
    let hit = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 1234, 5000, 64, 18);
    let miss = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 1234, 5001, 64, 18);
    for e in ENGINES {
        assert_eq!(run(&load("xdp_dummy.o", e, 1), &pool, &hit).0, XDP_PASS);
        let filter = load("xdp_filter.o", e, 1);
        assert_eq!(run(&filter, &pool, &hit).0, XDP_DROP, "{e:?}");
        assert_eq!(run(&filter, &pool, &miss).0, XDP_PASS, "{e:?}");
        assert_eq!(run(&filter, &pool, &hit[..30]).0, XDP_PASS, "a runt is not parsed");
        let change = load("xdp_change.o", e, 1);
        for ttl in [1u8, 63, 64, 200] {
            let f = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 1234, 5000, ttl, 18);
            let (act, out) = run(&change, &pool, &f);
            assert_eq!(act, XDP_PASS);
            assert_eq!(out[22], 64, "TTL rewritten");
            assert!(checksums_valid(&out), "{e:?}: IPv4 checksum patched from TTL {ttl}");
        }
    }
}

#[test]
fn protocol_counter_counts_each_layer() {
    let pool = pool();
    for e in ENGINES {
        let prog = load("xdp_count.o", e, 2);
        let udp = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 64, 10);
        let tcp = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 64, 10);
        let mut vlan_udp = udp[..12].to_vec();
        vlan_udp.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        vlan_udp.extend_from_slice(&udp[12..]);
        let mut arp = udp.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let mut v6 = vec![0u8; 14 + 40 + 8];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        v6[14] = 0x60;
        v6[14 + 6] = 58; // ICMPv6
        let mut frag = udp.clone();
        frag[20] = 0x00;
        frag[21] = 0x10; // fragment offset 16
        for (f, n) in [(&udp, 3), (&tcp, 2), (&vlan_udp, 1), (&arp, 1), (&v6, 1), (&frag, 1)] {
            for _ in 0..n {
                assert_eq!(run(&prog, &pool, f).0, XDP_PASS);
            }
        }
        assert_eq!(run(&prog, &pool, &udp[..10]).0, XDP_PASS);
        let count = |k: u32| -> u64 {
            let v = prog.maps[0].lookup_copy(&k.to_ne_bytes()).unwrap().unwrap();
            v.iter().map(|c| u64::from_ne_bytes(c[..8].try_into().unwrap())).sum()
        };
        // enum proto: OTHER_L2, ARP, IPV4, IPV6, TCP, UDP, ICMP, ICMPV6, OTHER_L4, FRAGMENT, TRUNCATED
        let got: Vec<u64> = (0..11).map(count).collect();
        assert_eq!(got, vec![0, 1, 7, 1, 2, 4, 0, 1, 0, 1, 1], "{e:?}");
    }
}

#[test]
fn per_cpu_counts_land_in_the_running_workers_copy() {
    let pool = pool();
    let udp = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 64, 10);
    for e in ENGINES {
        let prog = load("xdp_count.o", e, 3);
        for (worker, n) in [(0u32, 1), (2, 3), (1, 2)] {
            hotplane_ebpf::maps::set_current_cpu(worker);
            for _ in 0..n {
                run_on(&prog, &pool, &udp, worker);
            }
        }
        hotplane_ebpf::maps::set_current_cpu(0);
        // Key 5 is UDP.
        let v = prog.maps[0].lookup_copy(&5u32.to_ne_bytes()).unwrap().unwrap();
        let per: Vec<u64> =
            v.iter().map(|c| u64::from_ne_bytes(c[..8].try_into().unwrap())).collect();
        assert_eq!(per, vec![1, 2, 3], "{e:?}");
    }
}

fn run_on(prog: &Program, pool: &Pool, frame: &[u8], worker: u32) -> u64 {
    let mut p = pool.alloc().unwrap();
    p.set_frame(frame).unwrap();
    prog.run_xdp(&mut p, worker)
}

#[test]
fn load_balancer_keeps_flows_on_their_backend() {
    let pool = pool();
    for e in ENGINES {
        let reg = MapRegistry::default();
        let spec = elf::load(&example("xdp_lb.o"), None).unwrap();
        let opts = LoadOptions { engine: e, cpus: 1, ..LoadOptions::default() };
        let prog = Program::load(&spec, Context::Xdp, &xdp::helpers(), opts, Some(&reg)).unwrap();
        let map = |n: &str| reg.get(&format!("xdp_lb/{n}")).unwrap();
        // config: vip 10.0.0.100, port 80, 2 backends.
        let mut cfg = vec![10, 0, 0, 100];
        cfg.extend_from_slice(&80u16.to_be_bytes());
        cfg.extend_from_slice(&2u16.to_ne_bytes());
        map("config").update_copy(&0u32.to_ne_bytes(), &cfg, 0).unwrap();
        for b in 0..2u8 {
            let mut v = vec![10, 0, 1, 10 + b];
            v.extend_from_slice(&[2, 0, 0, 0, 1, b]);
            v.extend_from_slice(&[0, 0]);
            map("backends").update_copy(&(b as u32).to_ne_bytes(), &v, 0).unwrap();
        }
        let mut chosen = std::collections::HashMap::new();
        for sport in 1000..1040u16 {
            for proto in [6u8, 17] {
                let f = ipv4(
                    proto,
                    [192, 168, 0, (sport % 7) as u8],
                    [10, 0, 0, 100],
                    sport,
                    80,
                    64,
                    12,
                );
                let (act, out) = run(&prog, &pool, &f);
                assert_eq!(act, XDP_TX, "{e:?}");
                assert_eq!(&out[6..12], &MAC_B, "source MAC is the old destination");
                let b = out[33] - 10;
                assert_eq!(&out[0..6], &[2, 0, 0, 0, 1, b]);
                assert_eq!(&out[30..34], &[10, 0, 1, 10 + b]);
                assert!(checksums_valid(&out), "{e:?}: checksums after rewriting to backend {b}");
                chosen.insert((proto, sport), b);
            }
        }
        assert!(
            chosen.values().any(|b| *b == 0) && chosen.values().any(|b| *b == 1),
            "both backends used"
        );
        assert_eq!(map("flows").len(), 80);
        // Shrink to one backend: existing flows stay where they were.
        cfg[6..8].copy_from_slice(&1u16.to_ne_bytes());
        map("config").update_copy(&0u32.to_ne_bytes(), &cfg, 0).unwrap();
        for ((proto, sport), b) in &chosen {
            let f = ipv4(
                *proto,
                [192, 168, 0, (*sport % 7) as u8],
                [10, 0, 0, 100],
                *sport,
                80,
                64,
                12,
            );
            assert_eq!(run(&prog, &pool, &f).1[33] - 10, *b);
        }
        // Not the service: untouched.
        let other = ipv4(17, [192, 168, 0, 1], [10, 0, 0, 100], 5, 81, 64, 12);
        assert_eq!(run(&prog, &pool, &other), (XDP_PASS, other.clone()));
        let stats = map("stats").lookup_copy(&0u32.to_ne_bytes()).unwrap().unwrap();
        assert_eq!(u64::from_ne_bytes(stats[0][0..8].try_into().unwrap()), 160);
        assert_eq!(u64::from_ne_bytes(stats[0][8..16].try_into().unwrap()), 80);
    }
}

#[test]
fn hostile_objects_are_refused_with_a_reason() {
    assert!(elf::load(b"not an elf", None).unwrap_err().to_string().contains("not an ELF"));
    assert!(elf::load(&[], None).is_err());
    let mut o = example("xdp_filter.o");
    o[18] = 62; // e_machine = x86-64
    assert!(elf::load(&o, None).unwrap_err().to_string().contains("not BPF"));
    // Unaligned bytes (a network buffer, include_bytes!) load all the same.
    let good = example("xdp_lb.o");
    let mut shifted = vec![0u8];
    shifted.extend_from_slice(&good);
    assert_eq!(elf::load(&shifted[1..], None).unwrap(), elf::load(&good, None).unwrap());
    // Truncations and bit flips never panic.
    for cut in (0..good.len()).step_by(97) {
        let _ = elf::load(&good[..cut], None);
    }
    for i in (0..good.len()).step_by(13) {
        let mut b = good.clone();
        b[i] ^= 0xff;
        if let Ok(spec) = elf::load(&b, None) {
            let _ =
                Program::load(&spec, Context::Xdp, &xdp::helpers(), LoadOptions::default(), None);
        }
    }
}
