//! The chain shape applied to P4 parsers: selects the shape decides are folded, the guard
//! checks what the decisions read, and the folded pipeline behind its guard agrees with the
//! original on samples of the shape and on violators, for every test program.

use hotplane_core::shape::PacketShape;
use hotplane_core::Qsbr;
use hotplane_p4::chain::fold_parser;
use hotplane_p4::exec::Pipeline;
use hotplane_p4::ir;
use hotplane_p4::v1model::{Output, Replication, V1Switch};
use std::path::PathBuf;
use std::sync::Arc;

fn program(name: &str) -> ir::Program {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/p4").join(name);
    hotplane_p4::compile_file(&p, &[], &[]).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Ethernet + IPv4 + TCP to port 80, as a firewall in front might guarantee: ethertype, IP
/// version and header length, protocol.
fn ipv4_tcp() -> PacketShape {
    let mut s = PacketShape::with_len(54, 1518);
    s.set_known(12, &[0x08, 0x00]);
    s.set_known(14, &[0x45]);
    s.set_known(23, &[6]);
    s.set_known(36, &[0, 80]);
    s
}

fn ipv6_udp() -> PacketShape {
    let mut s = PacketShape::with_len(62, 1518);
    s.set_known(12, &[0x86, 0xdd]);
    s.set_known(20, &[17]);
    s
}

/// A tiny deterministic generator (the test must be reproducible).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Frames of the shape (random bytes under its facts), and as many violating one fact each.
fn frames(shape: &PacketShape, rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    let (min, max) = shape.len;
    let mut out = Vec::new();
    for k in 0..2 * n {
        let len = min + (rng.next() % u64::from((max - min).min(200) + 1)) as u32;
        let mut f: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        for (o, fact) in &shape.bytes {
            if let Some(b) = f.get_mut(*o as usize) {
                *b = (*b & fact.mask) | (fact.value & !fact.mask);
            }
        }
        if k >= n {
            // Violate one known bit.
            let known: Vec<(u16, u8)> =
                shape.bytes.iter().map(|(o, f)| (*o, !f.mask)).filter(|(_, m)| *m != 0).collect();
            let (o, m) = known[(rng.next() % known.len() as u64) as usize];
            if let Some(b) = f.get_mut(o as usize) {
                *b ^= 1 << (m.trailing_zeros());
            }
        }
        out.push(f);
    }
    out
}

fn run(p: &Arc<Pipeline>, qsbr: &Qsbr, frame: &[u8]) -> Vec<Output> {
    let reader = qsbr.register("chain");
    let mut sw = V1Switch::new(Arc::clone(p));
    let mut out = Vec::new();
    sw.process(frame, 1, &Replication::default(), &reader.guard(), 1, &mut out);
    out
}

#[test]
fn the_tunnel_parser_behind_an_ipv4_firewall_goes_straight_to_ipv4() {
    let mut prog = program("basic_tunnel.p4");
    let fold = fold_parser(&mut prog, &ipv4_tcp());
    assert_eq!(fold.decided, vec![("parse_ethernet".into(), "parse_ipv4".into())]);
    assert_eq!(fold.unreachable, vec!["parse_myTunnel".to_string()]);
    assert_eq!(fold.bytes.iter().copied().collect::<Vec<_>>(), vec![12, 13]);
    let guard = fold.guard(&ipv4_tcp());
    assert_eq!(guard.to_string(), "len in [54, 1518]; 12=08 13=00");
    // Behind an IPv6 firewall nothing it selects on is known... but the ethertype is.
    let mut prog = program("basic_tunnel.p4");
    let fold = fold_parser(&mut prog, &ipv6_udp());
    assert_eq!(fold.decided, vec![("parse_ethernet".into(), "accept".into())]);
}

#[test]
fn folded_parsers_behind_their_guard_agree_with_the_originals() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/p4");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".p4"))
        .collect();
    names.sort();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut decided, mut checked) = (0, 0);
    for name in &names {
        for shape in [ipv4_tcp(), ipv6_udp()] {
            let original = program(name);
            let mut folded = original.clone();
            let fold = fold_parser(&mut folded, &shape);
            if fold.decided.is_empty() {
                continue;
            }
            decided += 1;
            let guard = fold.guard(&shape);
            let qsbr = Qsbr::new();
            let a = Arc::new(Pipeline::new(original, &qsbr).unwrap());
            let b = Arc::new(Pipeline::new(folded, &qsbr).unwrap());
            for f in frames(&shape, &mut rng, 40) {
                let want = run(&a, &qsbr, &f);
                let got = if guard.admits(&f) { run(&b, &qsbr, &f) } else { run(&a, &qsbr, &f) };
                assert_eq!(got, want, "{name} under {}: frame {:02x?}", shape.to_json(), f);
                checked += 1;
            }
        }
    }
    eprintln!("{decided} program/shape pairs folded, {checked} frames checked");
    assert!(decided >= 10, "only {decided} program/shape pairs had a select decided");
}

/// The folded pipeline runs on the original's very tables: an entry written through either is
/// the other's (also for a table with an `entries` list, which a replacement would not share).
#[test]
fn a_folded_pipeline_shares_every_table_with_the_original() {
    let qsbr = Qsbr::new();
    let original = Pipeline::new(program("basic_tunnel.p4"), &qsbr).unwrap();
    let mut folded = program("basic_tunnel.p4");
    assert!(!fold_parser(&mut folded, &ipv4_tcp()).decided.is_empty());
    let folded = Pipeline::sharing(folded, &original).unwrap();
    assert_eq!(original.objects.tables.len(), folded.objects.tables.len());
    for (a, b) in original.objects.tables.iter().zip(&folded.objects.tables) {
        assert!(Arc::ptr_eq(a, b), "{} is not shared", a.name);
    }
}
