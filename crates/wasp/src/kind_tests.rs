use super::*;
use crate::asm::assemble;
use crate::frame::{active_frame, Hosts, Send};
use crate::wire::{WaspPacket, WaspRepr};
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::packet::Verdict;
use hotplane_core::pool::{Pool, PoolConfig};
use hotplane_core::wire::{udp_checksum, UdpFrame, UdpPacket};
use hotplane_core::{ExternSlots, Meta, Qsbr, WorkerCx};
use std::collections::BTreeMap;

const COUNT: &str = include_str!("../../../examples/wasp/count.s");
const PAYLOAD: &[u8] = b"\x00\x35\x00\x35\x00\x0c\x00\x00data";

fn qsbr() -> &'static Qsbr {
    static Q: std::sync::OnceLock<Qsbr> = std::sync::OnceLock::new();
    Q.get_or_init(Qsbr::new)
}

fn make_with(sections: Value) -> Result<Arc<dyn ProgramKind>, KindError> {
    let sections: BTreeMap<String, Value> = serde_json::from_value(sections).unwrap();
    make(&KindSetup { workers: 1, qsbr: qsbr(), base_dir: None, sections: &sections })
}

fn kind() -> Arc<dyn ProgramKind> {
    make_with(json!({"wasp": {"node_id": 7, "address": "10.9.0.1"}})).unwrap()
}

fn build(kind: &dyn ProgramKind, spec: Value) -> Result<Program, KindError> {
    let ports = vec!["p0".to_string(), "p1".to_string()];
    let externs = ExternSlots::new();
    let cx = BuildCx {
        workers: 1,
        port_names: &ports,
        externs: &externs,
        flows: &[],
        qsbr: qsbr(),
        base_dir: None,
    };
    kind.build(&spec, &cx)
}

fn repr(source: &str, keys: Vec<u64>, scratch_words: usize) -> WaspRepr {
    WaspRepr {
        next_header: 17,
        keys,
        // All ones: as `count`'s threshold, never reached.
        scratch: vec![0xff; 8 * scratch_words],
        code: assemble(source).unwrap().code,
        ..WaspRepr::default()
    }
}

/// Runs `frames` through `program` as one batch arriving on `in_port`; frames and metas after.
fn run_batch(program: &Program, frames: &[Vec<u8>], in_port: u16) -> Vec<(Vec<u8>, Meta)> {
    let stage = program.as_ref().unwrap();
    let pool = Pool::new(PoolConfig { buffers: 64, buffer_size: 2048, headroom: 64 }).unwrap();
    let mut batch = Batch::new(32);
    for frame in frames {
        let mut p = pool.alloc().unwrap();
        p.set_frame(frame).unwrap();
        p.classify();
        p.meta.in_port = in_port;
        p.meta.out_port = 1 - in_port;
        batch.push(p).ok().unwrap();
    }
    let reader = qsbr().register("test");
    let guard = reader.guard();
    let mut cx = WorkerCx::new(0, hotplane_core::time::now_ns(), &guard);
    let sel = Mask::first(batch.len());
    stage.run(&mut batch, sel, &mut cx);
    batch.drain().map(|p| (p.data().to_vec(), p.meta)).collect()
}

fn stored(kind: &dyn ProgramKind, store: &str, key: u64) -> Value {
    kind.request("wasp-get", &json!({"op": "wasp-get", "store": store, "key": key})).unwrap()
}

fn stat(kind: &dyn ProgramKind, key: &str) -> u64 {
    kind.stats().unwrap()[key].as_u64().unwrap()
}

#[test]
fn count_runs_per_port_store_in_both_carriages() {
    let k = kind();
    assert_eq!((k.name(), k.stages(), k.sections()), ("wasp", &["wasp"][..], &["wasp"][..]));
    let p = build(&*k, json!({"stage": "wasp"})).unwrap();
    let udp = active_frame(&Hosts::default(), Send::default(), &repr(COUNT, vec![5], 1), PAYLOAD)
        .unwrap();
    let ip = active_frame(&Hosts::default(), Send::Ip, &repr(COUNT, vec![5], 1), PAYLOAD).unwrap();
    let out = run_batch(&p, &[udp.clone(), ip.clone(), udp], 0);
    assert!(out.iter().all(|(_, m)| m.verdict == Verdict::Pass));
    assert_eq!(stored(&*k, "in:p0", 5), json!({"present": true, "words": [3, 0, 0, 0]}));
    assert_eq!(stored(&*k, "in:p1", 5), json!({"present": false}));
    // Another port, another store.
    run_batch(&p, &[ip], 1);
    assert_eq!(stored(&*k, "in:p1", 5)["words"][0], 1);
    assert_eq!(
        (stat(&*k, "packets"), stat(&*k, "forwarded"), stat(&*k, "live_entries")),
        (4, 4, 2)
    );
    assert_eq!((stat(&*k, "cache_misses"), stat(&*k, "cache_hits")), (1, 3));
    let e = k.request("wasp-get", &json!({"op": "wasp-get", "store": "out:p0", "key": 5}));
    assert_eq!(e.unwrap_err().to_string(), "no store `out:p0` (stores: in:p0, in:p1)");
}

#[test]
fn a_replaced_stage_keeps_the_store_and_counters() {
    let k = kind();
    let first = build(&*k, json!({"stage": "wasp"})).unwrap();
    let frame =
        active_frame(&Hosts::default(), Send::Ip, &repr(COUNT, vec![9], 1), PAYLOAD).unwrap();
    run_batch(&first, &[frame.clone(), frame.clone()], 0);
    let second =
        build(&*k, json!({"stage": "wasp", "on_fault": "forward-flagged", "udp_port": 0})).unwrap();
    assert!(second.as_ref().unwrap().describe().contains("forward-flagged, udp off"));
    run_batch(&second, &[frame], 0);
    assert_eq!(stored(&*k, "in:p0", 9)["words"][0], 3);
    assert_eq!(stat(&*k, "packets"), 3);
}

#[test]
fn only_the_scratchpad_changes_and_the_udp_checksum_stays_valid() {
    let k = kind();
    let p = build(&*k, json!({"stage": "wasp", "store": "node"})).unwrap();
    let source = "ld a, e.node_id\nst s.64[0], a\nld a, e.32[5]\nst s.32[2], a";
    let sent = active_frame(&Hosts::default(), Send::default(), &repr(source, vec![], 2), PAYLOAD)
        .unwrap();
    let (after, meta) = run_batch(&p, std::slice::from_ref(&sent), 0).remove(0);
    assert_eq!(meta.verdict, Verdict::Pass);
    let shim_at = 14 + 20 + 8;
    let shim = WaspRepr::parse(&WaspPacket::new_checked(&after[shim_at..]).unwrap()).unwrap();
    assert_eq!(&shim.scratch[..8], &7u64.to_be_bytes());
    assert_eq!(&shim.scratch[8..12], &[10, 9, 0, 1]);
    // Everything but the scratchpad and the shim's checksum is as sent.
    let scratch_at = shim_at + 16;
    let (cks, cke) = (shim_at + 12, shim_at + 14);
    for (i, (a, b)) in sent.iter().zip(&after).enumerate() {
        if !(scratch_at..scratch_at + 16).contains(&i) && !(cks..cke).contains(&i) {
            assert_eq!(a, b, "byte {i} changed");
        }
    }
    // The UDP checksum the host computed still holds over the rewritten datagram.
    let udp = &after[14 + 20..];
    let mut zeroed = udp.to_vec();
    zeroed[6..8].fill(0);
    let (src, dst) = (Hosts::default().src_ip, Hosts::default().dst_ip);
    assert_eq!(UdpPacket::new_unchecked(udp).checksum(), udp_checksum(src, dst, &zeroed));
}

#[test]
fn return_swaps_the_addresses_and_leaves_by_the_port_it_came_in() {
    let k = kind();
    let p = build(&*k, json!({"stage": "wasp"})).unwrap();
    let sent =
        active_frame(&Hosts::default(), Send::Ip, &repr("return", vec![], 0), PAYLOAD).unwrap();
    let (back, meta) = run_batch(&p, std::slice::from_ref(&sent), 1).remove(0);
    assert_eq!((meta.verdict, meta.out_port), (Verdict::Tx, 1));
    assert_eq!((&back[0..6], &back[6..12]), (&sent[6..12], &sent[0..6]));
    assert_eq!((&back[26..30], &back[30..34]), (&sent[30..34], &sent[26..30]));
    assert!(hotplane_core::wire::Ipv4Packet::new_unchecked(&back[14..]).verify_checksum());
    let shim = WaspPacket::new_checked(&back[34..]).unwrap();
    assert!(shim.returned() && shim.verify_checksum());
    // On its way back, a second hop sees it RETURNED: a second `return` faults and drops.
    let (_, again) = run_batch(&p, &[back], 0).remove(0);
    assert_eq!(again.verdict, Verdict::Drop);
    assert_eq!((stat(&*k, "returned"), stat(&*k, "fault_second-return")), (1, 1));
}

#[test]
fn bad_packets_are_dropped_by_reason_and_others_pass_untouched() {
    let k = kind();
    let p = build(&*k, json!({"stage": "wasp"})).unwrap();
    let mut corrupt =
        active_frame(&Hosts::default(), Send::Ip, &repr(COUNT, vec![5], 1), PAYLOAD).unwrap();
    let last = corrupt.len() - PAYLOAD.len() - 1;
    corrupt[last] ^= 0xff; // a code byte: the shim checksum no longer holds
                           // Code using k0 with no key declared: the decoder refuses it.
    let undeclared =
        active_frame(&Hosts::default(), Send::Ip, &repr(COUNT, vec![], 1), PAYLOAD).unwrap();
    let plain = plain_udp(5000);
    let out = run_batch(&p, &[corrupt, undeclared, plain.clone()], 0);
    assert_eq!(out[0].1.verdict, Verdict::Drop);
    assert_eq!(out[1].1.verdict, Verdict::Drop);
    assert_eq!((out[2].0.as_slice(), out[2].1.verdict), (plain.as_slice(), Verdict::Pass));
    assert_eq!(stat(&*k, "rejected_bad-checksum"), 1);
    assert_eq!(stat(&*k, "rejected_undeclared-key"), 1);
    assert_eq!((stat(&*k, "not_wasp"), stat(&*k, "live_entries")), (1, 0));
}

#[test]
fn an_output_filter_uses_the_out_ports_store_and_sees_the_port() {
    let k = kind();
    let p = build(&*k, json!({"stage": "wasp", "store": "out-port"})).unwrap();
    let source = "ld a, e.out_port\nst s.64[0], a\nlookup k0\ninc\ninsert k0";
    let sent =
        active_frame(&Hosts::default(), Send::Ip, &repr(source, vec![3], 1), PAYLOAD).unwrap();
    let (after, _) = run_batch(&p, &[sent], 0).remove(0);
    let shim = WaspRepr::parse(&WaspPacket::new_checked(&after[34..]).unwrap()).unwrap();
    assert_eq!(shim.scratch, 1u64.to_be_bytes());
    assert_eq!(stored(&*k, "out:p1", 3)["words"][0], 1);
}

#[test]
fn bad_specs_and_sections_say_what_is_wrong() {
    let k = kind();
    let e = |spec: Value| build(&*k, spec).err().unwrap().to_string();
    assert_eq!(
        e(json!({"stage": "wasp", "store": "port"})),
        "store = \"port\": one of in-port, out-port, node"
    );
    assert_eq!(
        e(json!({"stage": "wasp", "on_fault": "ignore"})),
        "on_fault = \"ignore\": one of drop, forward-flagged"
    );
    assert!(e(json!({"stage": "wasp", "colour": 1})).contains("unknown field `colour`"));
    let e = make_with(json!({"wasp": {"capacity": 1}})).err().unwrap().to_string();
    assert!(e.starts_with("[wasp]: ESS capacity"), "{e}");
    let e = make_with(json!({"wasp": {"lifetime_ms": 0}})).err().unwrap().to_string();
    assert_eq!(e, "[wasp]: ESS lifetime must be above 0 ns");
    let e = make_with(json!({"wasp": {"adress": "10.0.0.1"}})).err().unwrap().to_string();
    assert!(e.contains("unknown field `adress`"), "{e}");
}

#[test]
fn expired_entries_are_reclaimed_by_housekeeping() {
    let k = make_with(json!({"wasp": {"lifetime_ms": 1}})).unwrap();
    let p = build(&*k, json!({"stage": "wasp", "store": "node"})).unwrap();
    let frame =
        active_frame(&Hosts::default(), Send::Ip, &repr(COUNT, vec![1], 1), PAYLOAD).unwrap();
    run_batch(&p, &[frame], 0);
    assert_eq!(stat(&*k, "live_entries"), 1);
    std::thread::sleep(std::time::Duration::from_millis(5));
    k.housekeeping();
    assert_eq!((stat(&*k, "live_entries"), stat(&*k, "expired")), (0, 1));
}

/// A plain UDP frame (not WASP).
fn plain_udp(dport: u16) -> Vec<u8> {
    let h = Hosts::default();
    let f = UdpFrame {
        src_mac: h.src_mac,
        dst_mac: h.dst_mac,
        vlan: None,
        src_ip: h.src_ip,
        dst_ip: h.dst_ip,
        src_port: 1,
        dst_port: dport,
    };
    let mut buf = vec![0u8; 128];
    let n = f.emit(b"not active", &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn admin_packets_write_protected_entries_once_and_public_ones_cannot() {
    use crate::admin::seal;
    use crate::frame::frame_around;
    use crate::wire::{AdminTrailer, Scope};
    const KEY_HEX: &str = "4242424242424242424242424242424242424242424242424242424242424242";
    let k = make_with(json!({"wasp": {"admin_keys": [{"id": 7, "key": KEY_HEX}]}})).unwrap();
    let p = build(&*k, json!({"stage": "wasp", "store": "node"})).unwrap();
    let service = 0x5e41_11ce;
    let protected = |source: &str| WaspRepr {
        scopes: [Scope::Protected, Scope::Public, Scope::Public, Scope::Public],
        scratch: 0x0a01_0001u64.to_be_bytes().to_vec(),
        ..repr(source, vec![service], 0)
    };
    let admin = |seq: u64, key: [u8; 32]| {
        let mut shim = WaspRepr {
            admin: Some(AdminTrailer { key_id: 7, seq, mac: [0; 32] }),
            ..protected("ld a, s.64[0]\ninsert k0")
        }
        .to_bytes()
        .unwrap();
        seal(&mut shim, &key).unwrap();
        frame_around(&Hosts::default(), Send::default(), &shim).unwrap()
    };
    let get = |scope: &str| {
        let r = json!({"op": "wasp-get", "store": "node", "key": service, "scope": scope});
        k.request("wasp-get", &r).unwrap()
    };
    // Sequence numbers are microseconds since the epoch; older than a minute is refused.
    let now_us =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros()
            as u64;
    let (first, second) = (now_us, now_us + 1);
    let out = run_batch(
        &p,
        &[admin(first, [0x42; 32]), admin(first, [0x42; 32]), admin(second, [0x11; 32])],
        0,
    );
    let verdicts: Vec<Verdict> = out.iter().map(|(_, m)| m.verdict).collect();
    assert_eq!(verdicts, [Verdict::Pass, Verdict::Drop, Verdict::Drop]);
    assert_eq!((stat(&*k, "rejected_replayed"), stat(&*k, "rejected_bad-mac")), (1, 1));
    assert_eq!(get("protected")["words"][0], 0x0a01_0001);
    assert_eq!(get("public"), json!({"present": false}), "namespaces are apart");
    // A public packet naming the protected key reads it but cannot write it.
    let public = |source: &str| {
        active_frame(&Hosts::default(), Send::default(), &protected(source), b"").unwrap()
    };
    let out = run_batch(&p, &[public("lookup k0\nst s.64[0], a"), public("clr\ninsert k0")], 0);
    let shim = WaspRepr::parse(&WaspPacket::new_checked(&out[0].0[42..]).unwrap()).unwrap();
    assert_eq!(shim.scratch, 0x0a01_0001u64.to_be_bytes());
    assert_eq!(out[1].1.verdict, Verdict::Drop);
    assert_eq!(stat(&*k, "fault_protected"), 1);
    assert_eq!(get("protected")["words"][0], 0x0a01_0001);
    // The replay state belongs to the store: a replaced stage still refuses sequence 1.
    let again = build(&*k, json!({"stage": "wasp", "store": "node"})).unwrap();
    assert_eq!(run_batch(&again, &[admin(first, [0x42; 32])], 0)[0].1.verdict, Verdict::Drop);
    assert_eq!(stat(&*k, "rejected_replayed"), 2);
    // A new node (a restart) refuses what is older than the window: the captured packets of
    // the last minute at most replay, not those of last week.
    let restarted =
        make_with(json!({"wasp": {"admin_keys": [{"id": 7, "key": KEY_HEX}]}})).unwrap();
    let p = build(&*restarted, json!({"stage": "wasp", "store": "node"})).unwrap();
    let week_old = now_us - 7 * 86_400_000_000;
    assert_eq!(run_batch(&p, &[admin(week_old, [0x42; 32])], 0)[0].1.verdict, Verdict::Drop);
    assert_eq!(stat(&*restarted, "rejected_replayed"), 1);
    for key in ["42".to_string(), "+f".repeat(32), "é".repeat(32)] {
        let bad = make_with(json!({"wasp": {"admin_keys": [{"id": 7, "key": key}]}}));
        assert_eq!(
            bad.err().unwrap().to_string(),
            "[wasp] admin key 7: the key must be 32 bytes as 64 hex digits"
        );
    }
    let zero = make_with(json!({"wasp": {"admin_keys": [{"id": 7, "key": "0".repeat(64)}]}}));
    assert_eq!(zero.err().unwrap().to_string(), "[wasp] admin key 7: an all-zero key");
    let long = make_with(json!({"wasp": {"lifetime_ms": 18_446_744_073_710u64}}));
    assert_eq!(long.err().unwrap().to_string(), "[wasp] lifetime_ms = 18446744073710: too long");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(100))]

    /// Any program (random code that decodes or not, random scratchpad and keys) across three
    /// nodes: headers before the shim and bytes after it are as sent (but for a return's address
    /// swap), inside the shim only the scratchpad, flags, fault fields and checksum change, and
    /// the packet returns at most once over the path.
    #[test]
    fn random_programs_across_hops_change_only_what_they_may(
        code in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..=64),
        keys in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..=4),
        words in 0usize..=4,
        forward_flagged in proptest::prelude::any::<bool>(),
    ) {
        let on_fault = if forward_flagged { "forward-flagged" } else { "drop" };
        let nodes: Vec<(Arc<dyn ProgramKind>, Program)> = (1..=3)
            .map(|id| {
                let k = make_with(json!({"wasp": {"node_id": id}})).unwrap();
                let p = build(&*k, json!({"stage": "wasp", "on_fault": on_fault})).unwrap();
                (k, p)
            })
            .collect();
        let repr = WaspRepr {
            next_header: 17,
            keys,
            scratch: vec![0x5a; 8 * words],
            code,
            ..WaspRepr::default()
        };
        let sent = active_frame(&Hosts::default(), Send::default(), &repr, PAYLOAD).unwrap();
        let shim_len = repr.buffer_len();
        let (shim_at, scratch_at) = (42, 42 + 16 + 8 * repr.keys.len());
        let mut frame = sent.clone();
        let mut returns = 0;
        for (_, p) in &nodes {
            let (after, meta) = run_batch(p, std::slice::from_ref(&frame), 0).remove(0);
            let mut expected_head = frame[..shim_at].to_vec();
            if meta.verdict == Verdict::Tx {
                returns += 1;
                expected_head[..12].rotate_left(6);
                let (src, dst) = expected_head[26..34].split_at_mut(4);
                src.swap_with_slice(dst);
            }
            proptest::prop_assert_eq!(&after[..shim_at], &expected_head[..]);
            proptest::prop_assert_eq!(&after[shim_at + shim_len..], &frame[shim_at + shim_len..]);
            for i in shim_at..shim_at + shim_len {
                let may_change = [shim_at + 1, shim_at + 6, shim_at + 7, shim_at + 12, shim_at + 13]
                    .contains(&i)
                    || (scratch_at..scratch_at + 8 * words).contains(&i);
                proptest::prop_assert!(may_change || after[i] == frame[i], "shim byte {} changed", i - shim_at);
            }
            if meta.verdict == Verdict::Drop {
                break;
            }
            frame = after;
        }
        proptest::prop_assert!(returns <= 1, "returned {} times", returns);
        proptest::prop_assert_eq!(&frame[frame.len() - PAYLOAD.len()..], PAYLOAD);
    }
}

#[test]
fn e_queue_is_the_batch_backlog_of_the_packets_queue() {
    let k = kind();
    let p = build(&*k, json!({"stage": "wasp", "store": "out-port"})).unwrap();
    let ratectl = include_str!("../../../examples/wasp/ratectl.s");
    let threshold_2 = WaspRepr { scratch: 2u64.to_be_bytes().to_vec(), ..repr(ratectl, vec![], 1) };
    let active = active_frame(&Hosts::default(), Send::default(), &threshold_2, PAYLOAD).unwrap();
    // Five packets to one port: the ones with more than two ahead drop themselves; a plain
    // packet counts in the queue too.
    let frames = [plain_udp(1), active.clone(), active.clone(), active.clone(), active];
    let verdicts: Vec<Verdict> = run_batch(&p, &frames, 0).iter().map(|(_, m)| m.verdict).collect();
    assert_eq!(
        verdicts,
        [Verdict::Pass, Verdict::Pass, Verdict::Pass, Verdict::Drop, Verdict::Drop]
    );
}

#[test]
fn a_udp_carried_return_reaches_the_senders_socket_over_ipv4_and_ipv6() {
    let k = kind();
    let p = build(&*k, json!({"stage": "wasp"})).unwrap();
    let send = Send::Udp { src_port: 40000, dst_port: 9277 };
    let v6 = Hosts {
        src_ip: "2001:db8::1".parse().unwrap(),
        dst_ip: "2001:db8::2".parse().unwrap(),
        ..Hosts::default()
    };
    for (hosts, ip_len) in [(Hosts::default(), 20), (v6, 40)] {
        let sent = active_frame(&hosts, send, &repr("return", vec![], 0), PAYLOAD).unwrap();
        let (back, meta) = run_batch(&p, std::slice::from_ref(&sent), 1).remove(0);
        assert_eq!((meta.verdict, meta.out_port), (Verdict::Tx, 1));
        let (addr_at, addr_len) = if ip_len == 20 { (26, 4) } else { (22, 16) };
        let (src, dst) = (addr_at..addr_at + addr_len, addr_at + addr_len..addr_at + 2 * addr_len);
        assert_eq!((&back[src.clone()], &back[dst.clone()]), (&sent[dst], &sent[src]));
        let udp = &back[14 + ip_len..];
        let ports = (u16::from_be_bytes([udp[0], udp[1]]), u16::from_be_bytes([udp[2], udp[3]]));
        assert_eq!(ports, (9277, 40000), "the ports are swapped too");
        let mut zeroed = udp.to_vec();
        zeroed[6..8].fill(0);
        let checksum = udp_checksum(hosts.dst_ip, hosts.src_ip, &zeroed);
        assert_eq!(UdpPacket::new_unchecked(udp).checksum(), checksum, "UDP checksum still valid");
    }
}

/// Hot programs run as machine code once the control thread has compiled them, with the same
/// results; until then, with `jit = false`, and for programs made mostly of store steps
/// (machine code would not be faster), they are interpreted.
#[cfg(feature = "jit")]
#[test]
fn hot_programs_move_to_machine_code_with_the_same_results() {
    const PLUS5: &str = "lookup k0\ninc\ninc\ninc\ninc\ninc\ninsert k0";
    const PLUS1: &str = "lookup k0\ninc\ninsert k0";
    for (source, jit, per_packet, want_compiled) in
        [(PLUS5, true, 5, true), (PLUS5, false, 5, false), (PLUS1, true, 1, false)]
    {
        let frame =
            active_frame(&Hosts::default(), Send::Ip, &repr(source, vec![77], 1), PAYLOAD).unwrap();
        let kind = make_with(json!({"wasp": {"jit": jit, "jit_after": 3}})).unwrap();
        let program = build(kind.as_ref(), json!({"stage": "wasp", "store": "node"})).unwrap();
        let frames = vec![frame.clone(); 4];
        for _ in 0..2 {
            run_batch(&program, &frames, 0);
        }
        assert_eq!(stat(kind.as_ref(), "compiled_runs"), 0, "nothing compiled before asked");
        kind.housekeeping();
        for _ in 0..3 {
            let out = run_batch(&program, &frames, 0);
            assert!(out.iter().all(|(_, meta)| meta.verdict == Verdict::Pass));
        }
        let what = format!("{source:?} with jit = {jit}");
        assert_eq!(stored(kind.as_ref(), "node", 77)["words"][0], 20 * per_packet, "{what}");
        assert_eq!(stat(kind.as_ref(), "compiled_runs") > 0, want_compiled, "{what}");
        let compiled = kind.stats().unwrap()["jit_compiled"].as_u64();
        assert_eq!(compiled, jit.then_some(u64::from(want_compiled)), "{what}");
    }
}
