//! Every application in `examples/wasp/`, assembled from its file and run as real IPv4
//! datagrams (protocol 253, a header whose TTL each router decrements) over chains of routers,
//! each with its own store, node id and address; some routers run no WASP at all ("legacy").
//! Each test checks the application's result on one node and across hops, and what must not
//! happen (a drop below the threshold, a record past the capacity, a join on disjoint paths).
//! Every run takes at most one step per code byte, and leaves the IP addresses, the transport
//! header and the payload byte-identical.

use hotplane_core::wire::internet_checksum;
use hotplane_wasp::asm::{assemble, disassemble};
use hotplane_wasp::carriage::locate;
use hotplane_wasp::ess::EssConfig;
use hotplane_wasp::wire::{WaspPacket, WaspRepr, IP_PROTOCOL};
use hotplane_wasp::{process, Env, Ess, Fate, Fault, FilterConfig, Processed};

const FWD: &str = include_str!("../../../examples/wasp/fwd.s");
const COUNT: &str = include_str!("../../../examples/wasp/count.s");
const COLLECT: &str = include_str!("../../../examples/wasp/collect.s");
const PATHSCAN: &str = include_str!("../../../examples/wasp/pathscan.s");
const TRUNK: &str = include_str!("../../../examples/wasp/trunk.s");
const ADVERTISE: &str = include_str!("../../../examples/wasp/advertise.s");
const NEAREST: &str = include_str!("../../../examples/wasp/nearest.s");
const JITTER: &str = include_str!("../../../examples/wasp/jitter.s");
const RATECTL: &str = include_str!("../../../examples/wasp/ratectl.s");

/// Every example: (name, text, key slots its code names).
const EXAMPLES: [(&str, &str, usize); 9] = [
    ("fwd", FWD, 0),
    ("count", COUNT, 1),
    ("collect", COLLECT, 1),
    ("pathscan", PATHSCAN, 0),
    ("trunk", TRUNK, 1),
    ("advertise", ADVERTISE, 1),
    ("nearest", NEAREST, 1),
    ("jitter", JITTER, 1),
    ("ratectl", RATECTL, 0),
];

/// A UDP header (ports 4660 -> 53, length 36) and data: what follows the shim, never touched.
const PAYLOAD: &[u8] = b"\x12\x34\x00\x35\x00\x24\x00\x00 udp header and data....";
const SOURCE: [u8; 4] = [192, 0, 2, 1];
const DESTINATION: [u8; 4] = [198, 51, 100, 9];
const TTL: u8 = 64;
const IPV4_HEADER_LEN: usize = 20;
const TTL_OFFSET: usize = 8;

fn code(source: &str) -> Vec<u8> {
    assemble(source).expect("the example assembles").code
}

/// An IPv4 datagram carrying a WASP shim (and `PAYLOAD` behind it).
fn datagram(source: &str, keys: &[u64], scratch: &[u8], ttl: u8) -> Vec<u8> {
    let repr = WaspRepr {
        next_header: 17,
        keys: keys.to_vec(),
        scratch: scratch.to_vec(),
        code: code(source),
        ..WaspRepr::default()
    };
    let shim = repr.to_bytes().expect("a valid shim");
    let total = IPV4_HEADER_LEN + shim.len() + PAYLOAD.len();
    let mut ip = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, ttl, IP_PROTOCOL, 0, 0];
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip.extend_from_slice(&SOURCE);
    ip.extend_from_slice(&DESTINATION);
    let checksum = internet_checksum(&ip);
    ip[10..12].copy_from_slice(&checksum.to_be_bytes());
    ip.extend_from_slice(&shim);
    ip.extend_from_slice(PAYLOAD);
    ip
}

fn words(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// The shim of a datagram, parsed (checksum verified).
fn shim(datagram: &[u8]) -> WaspRepr {
    let found = locate(datagram, None).expect("a WASP datagram");
    let view = WaspPacket::new_checked(&datagram[found.shim_offset..found.end]).unwrap();
    WaspRepr::parse(&view).expect("the shim's checksum holds")
}

fn scratch_u64(datagram: &[u8], index: usize) -> u64 {
    let s = shim(datagram).scratch;
    u64::from_be_bytes(s[8 * index..8 * index + 8].try_into().unwrap())
}

fn scratch_u32(datagram: &[u8], index: usize) -> u32 {
    let s = shim(datagram).scratch;
    u32::from_be_bytes(s[4 * index..4 * index + 4].try_into().unwrap())
}

fn ttl_of(datagram: &[u8]) -> u8 {
    datagram[TTL_OFFSET]
}

/// Conditions at a router when the packet arrives.
#[derive(Clone, Copy, Default)]
struct At {
    time_ns: u64,
    queue: u64,
}

fn at(time_ns: u64) -> At {
    At { time_ns, queue: 0 }
}

struct Router {
    id: u64,
    addr: [u8; 4],
    /// False for a plain IP router: it only decrements the TTL.
    wasp: bool,
    ess: Ess,
}

impl Router {
    fn new(id: u64) -> Router {
        Router {
            id,
            addr: [10, 0, 0, id as u8],
            wasp: true,
            ess: Ess::new(&EssConfig::default()).unwrap(),
        }
    }

    fn legacy(id: u64) -> Router {
        Router { wasp: false, ..Router::new(id) }
    }

    fn ipv4(&self) -> u32 {
        u32::from_be_bytes(self.addr)
    }

    /// Runs the datagram's program here (the router must run WASP); checks the bounds every
    /// run must keep. Faults are reported in the result, not asserted on.
    fn run(&self, datagram: &mut [u8], at: At) -> Processed {
        assert!(self.wasp, "router {} runs no WASP", self.id);
        assert_eq!(internet_checksum(&datagram[..IPV4_HEADER_LEN]), 0, "IPv4 header checksum");
        let before = datagram.to_vec();
        let found = locate(datagram, None).expect("a WASP datagram");
        // The header bank: the datagram's first 64 bytes as they arrive.
        let net = datagram[..found.end.min(64)].to_vec();
        let env = Env {
            node_id: self.id,
            node_addr: Env::ipv4_mapped(self.addr),
            in_port: 0,
            out_port: 1,
            time_ns: at.time_ns,
            queue_depth: at.queue,
            packet_len: found.end as u64,
            in_profile: true,
        };
        let shim = &mut datagram[found.shim_offset..found.end];
        let out = process(shim, &env, &net, &self.ess, &FilterConfig::default())
            .expect("a well-formed packet");
        let view = WaspPacket::new_checked(&datagram[found.shim_offset..found.end]).unwrap();
        let (code_len, shim_len) = (view.code_len(), view.total_len());
        if let Some(outcome) = out.outcome {
            assert!(outcome.steps <= code_len, "steps {} > code {code_len}", outcome.steps);
        }
        let shim_end = found.shim_offset + shim_len;
        assert_eq!(&datagram[..found.shim_offset], &before[..found.shim_offset], "IP header");
        assert_eq!(&datagram[shim_end..], &before[shim_end..], "transport header and payload");
        if !out.rewritten {
            assert_eq!(datagram, &before[..], "a shim not rewritten is byte-identical");
        }
        out
    }

    /// Forwards the datagram as a router does: runs its program (WASP routers only), then
    /// decrements the TTL and fixes the header checksum. `None` if the packet dropped itself;
    /// a fault or a return fails the test.
    fn hop(&self, mut datagram: Vec<u8>, at: At) -> Option<Vec<u8>> {
        if self.wasp {
            let out = self.run(&mut datagram, at);
            let fault = out.outcome.and_then(|o| o.fault);
            assert_eq!(fault, None, "fault at router {}", self.id);
            match out.fate {
                Fate::Fwd => {}
                Fate::Drop => return None,
                Fate::Return => panic!("router {}: no example returns", self.id),
            }
        }
        let ttl = ttl_of(&datagram);
        assert!(ttl > 1, "TTL expired at router {}", self.id);
        datagram[TTL_OFFSET] = ttl - 1;
        datagram[10..12].fill(0);
        let checksum = internet_checksum(&datagram[..IPV4_HEADER_LEN]);
        datagram[10..12].copy_from_slice(&checksum.to_be_bytes());
        Some(datagram)
    }

    /// Word `index` (64-bit) of the bank under `key`, if the entry is alive at `now`.
    fn word(&self, key: u64, index: usize, now: u64) -> Option<u64> {
        let bank = self.ess.get(key, now)?;
        Some(u64::from_be_bytes(bank[8 * index..8 * index + 8].try_into().unwrap()))
    }
}

/// Sends the datagram along `path`, every router seeing it at `time`.
fn send(path: &[&Router], datagram: Vec<u8>, time: u64) -> Option<Vec<u8>> {
    path.iter().try_fold(datagram, |d, router| router.hop(d, at(time)))
}

fn routers(ids: std::ops::RangeInclusive<u64>) -> Vec<Router> {
    ids.map(Router::new).collect()
}

// --- every example ---

#[test]
fn every_example_assembles_as_its_header_says_and_disassembles_back() {
    for (name, text, keys) in EXAMPLES {
        let out = assemble(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.keys_used, keys, "{name}: key slots");
        assert!(out.code.len() <= 64, "{name}");
        // The header comment states the code size; it must stay true.
        let stated = text
            .lines()
            .find_map(|line| {
                let end = line.find(" bytes of code").or_else(|| line.find(" byte of code"))?;
                line[..end].split_whitespace().next_back()?.parse::<usize>().ok()
            })
            .unwrap_or_else(|| panic!("{name}: no 'N bytes of code' in the header"));
        assert_eq!(out.code.len(), stated, "{name}: size in the header");
        assert_eq!(assemble(&disassemble(&out.code)).unwrap().code, out.code, "{name}");
    }
}

#[test]
fn fwd_forwards_untouched_over_four_hops() {
    assert_eq!(code(FWD), [0x01]);
    let path = routers(1..=4);
    let sent = datagram(FWD, &[], &[], TTL);
    let mut d = sent.clone();
    for router in &path {
        let out = router.run(&mut d, at(0));
        assert_eq!((out.fate, out.rewritten), (Fate::Fwd, false));
        assert_eq!(out.outcome.unwrap().steps, 1);
    }
    assert_eq!(d, sent, "nothing changed (no TTL handling in run)");
    let arrived = send(&path.iter().collect::<Vec<_>>(), sent.clone(), 0).unwrap();
    assert_eq!(ttl_of(&arrived), TTL - 4);
    assert_eq!(shim(&arrived), shim(&sent));
}

// --- count and collect on one node (hops.rs runs them across hops) ---

#[test]
fn count_on_one_node_drops_from_the_first_packet_above_the_threshold() {
    let router = Router::new(1);
    let fates: Vec<bool> = (0..5)
        .map(|_| router.hop(datagram(COUNT, &[77], &words(&[2]), TTL), at(0)).is_some())
        .collect();
    assert_eq!(fates, [true, true, false, false, false], "counters 1, 2 pass; 3.. are above 2");
    assert_eq!(router.word(77, 0, 0), Some(5), "dropped packets are counted too");
    assert_eq!(router.word(78, 0, 0), None, "another key is another counter");
}

#[test]
fn collect_on_one_node_delivers_the_sum_with_the_last_sample_only() {
    let router = Router::new(1);
    let mut delivered = Vec::new();
    for sample in [5u64, 7, 11] {
        if let Some(d) = router.hop(datagram(COLLECT, &[9], &words(&[sample, 3]), TTL), at(0)) {
            delivered.push((scratch_u64(&d, 0), scratch_u64(&d, 1)));
        }
    }
    assert_eq!(delivered, [(23, 0)]);
    // n = 1: a lone sample goes through at once with itself as the sum.
    let lone = router.hop(datagram(COLLECT, &[10], &words(&[4, 1]), TTL), at(0)).unwrap();
    assert_eq!((scratch_u64(&lone, 0), scratch_u64(&lone, 1)), (4, 0));
}

// --- pathscan ---

/// A path-scan scratchpad with room for `capacity` addresses.
fn pathscan_scratch(capacity: u32, room: usize) -> Vec<u8> {
    let mut s = vec![0u8; 8 + 4 * room];
    s[..4].copy_from_slice(&capacity.to_be_bytes());
    s.resize(s.len().next_multiple_of(8), 0);
    s
}

fn recorded(d: &[u8]) -> (u32, Vec<u32>) {
    let seen = scratch_u32(d, 1);
    let capacity = scratch_u32(d, 0);
    let n = seen.min(capacity) as usize;
    (seen, (0..n).map(|i| scratch_u32(d, 2 + i)).collect())
}

#[test]
fn pathscan_records_one_router() {
    let router = Router::new(7);
    let d = router.hop(datagram(PATHSCAN, &[], &pathscan_scratch(30, 30), TTL), at(0)).unwrap();
    assert_eq!(shim(&d).scratch.len(), 128);
    assert_eq!(recorded(&d), (1, vec![u32::from_be_bytes([10, 0, 0, 7])]));
}

#[test]
fn pathscan_records_the_wasp_hops_in_order_and_skips_the_legacy_one() {
    let path = [Router::new(1), Router::new(2), Router::legacy(3), Router::new(4), Router::new(5)];
    let hops: Vec<&Router> = path.iter().collect();
    let d = send(&hops, datagram(PATHSCAN, &[], &pathscan_scratch(30, 30), TTL), 0).unwrap();
    let expected: Vec<u32> = path.iter().filter(|r| r.wasp).map(Router::ipv4).collect();
    assert_eq!(recorded(&d), (4, expected));
    assert_eq!(ttl_of(&d), TTL - 5, "the legacy router forwarded it too");
}

#[test]
fn pathscan_stops_recording_at_30_and_keeps_counting() {
    let path = routers(1..=35);
    let hops: Vec<&Router> = path.iter().collect();
    let d = send(&hops, datagram(PATHSCAN, &[], &pathscan_scratch(30, 30), TTL), 0).unwrap();
    let (seen, addresses) = recorded(&d);
    assert_eq!(seen, 35, "the count says the path was longer than the record");
    let first_30: Vec<u32> = path[..30].iter().map(Router::ipv4).collect();
    assert_eq!(addresses, first_30);
    assert_eq!(&shim(&d).scratch[8 + 4 * 29..], &path[29].addr, "the last 4 bytes: hop 30");
}

#[test]
fn pathscan_with_a_smaller_capacity_and_a_lying_one() {
    let path = routers(1..=3);
    let hops: Vec<&Router> = path.iter().collect();
    // Room for 2: the third router is counted, not recorded.
    let d = send(&hops, datagram(PATHSCAN, &[], &pathscan_scratch(2, 2), TTL), 0).unwrap();
    assert_eq!(shim(&d).scratch.len(), 16);
    assert_eq!(recorded(&d), (3, vec![path[0].ipv4(), path[1].ipv4()]));
    // A capacity larger than the scratchpad: the router past the room faults out-of-bounds
    // (and the packet is dropped by default), its scratchpad unchanged.
    let mut d = send(&hops[..2], datagram(PATHSCAN, &[], &pathscan_scratch(3, 2), TTL), 0).unwrap();
    let before = shim(&d).scratch;
    let out = path[2].run(&mut d, at(0));
    assert_eq!(out.fate, Fate::Drop);
    assert_eq!(out.outcome.unwrap().fault, Some((Fault::OutOfBounds, 13)));
    assert_eq!(shim(&d).scratch, before);
}

// --- trunk ---

const MARKER: u64 = 0;
const FINDER: u64 = 1;

fn trunk_packet(key: u64, role: u64) -> Vec<u8> {
    datagram(TRUNK, &[key], &words(&[role, 0, 0]), TTL)
}

/// (J's node id, J's address, marked routers crossed) from a finder that arrived.
fn join(d: &[u8]) -> Option<(u64, u32, u32)> {
    let crossed = scratch_u32(d, 5);
    (crossed > 0).then(|| (scratch_u64(d, 1), scratch_u32(d, 4), crossed))
}

/// Two sources, one destination: source 1 through r1 r2 r3 r4, source 2 through r5 r6 r3 r4.
/// The paths join at r3.
#[test]
fn trunk_names_the_router_where_two_paths_join() {
    let r = routers(1..=6);
    let (path1, path2) = ([&r[0], &r[1], &r[2], &r[3]], [&r[4], &r[5], &r[2], &r[3]]);
    let key = 0x5eed_0001;
    let marker = send(&path1, trunk_packet(key, MARKER), 0).unwrap();
    assert_eq!(shim(&marker).scratch, words(&[0, 0, 0]), "the marker carries nothing");
    let marks: Vec<_> = r.iter().map(|router| router.word(key, 0, 0)).collect();
    assert_eq!(marks, [Some(1), Some(1), Some(1), Some(1), None, None]);

    let finder = send(&path2, trunk_packet(key, FINDER), 0).unwrap();
    assert_eq!(join(&finder), Some((3, r[2].ipv4(), 2)), "J = r3, trunk r3 r4");
    // Looking does not mark.
    assert_eq!(r[4].word(key, 0, 0), None);
}

#[test]
fn trunk_on_one_node_and_on_a_longer_shared_segment() {
    let single = Router::new(4);
    send(&[&single], trunk_packet(1, MARKER), 0).unwrap();
    let finder = send(&[&single], trunk_packet(1, FINDER), 0).unwrap();
    assert_eq!(join(&finder), Some((4, single.ipv4(), 1)));

    // Paths that join right after their first router: J is the second router of path 2.
    let r = routers(1..=7);
    let path1 = [&r[0], &r[2], &r[3], &r[4], &r[5], &r[6]];
    let path2 = [&r[1], &r[2], &r[3], &r[4], &r[5], &r[6]];
    send(&path1, trunk_packet(2, MARKER), 0).unwrap();
    let finder = send(&path2, trunk_packet(2, FINDER), 0).unwrap();
    assert_eq!(join(&finder), Some((3, r[2].ipv4(), 5)));
}

#[test]
fn trunk_sees_no_join_on_disjoint_paths_other_keys_or_expired_marks() {
    let r = routers(1..=6);
    let (path1, path2) = ([&r[0], &r[1], &r[2]], [&r[3], &r[4], &r[5]]);
    send(&path1, trunk_packet(3, MARKER), 0).unwrap();
    let finder = send(&path2, trunk_packet(3, FINDER), 0).unwrap();
    assert_eq!(join(&finder), None, "disjoint paths");
    assert_eq!(shim(&finder).scratch, words(&[FINDER, 0, 0]), "nothing written");

    // Same routers, another measurement's key: no join.
    let finder = send(&path1, trunk_packet(4, FINDER), 0).unwrap();
    assert_eq!(join(&finder), None, "another key");

    // The marks live tau: a finder sent later than that finds none.
    let tau = r[0].ess.lifetime_ns();
    let finder = send(&path1, trunk_packet(3, FINDER), tau - 1).unwrap();
    assert_eq!(join(&finder), Some((1, r[0].ipv4(), 3)), "still alive just before tau");
    let finder = send(&path1, trunk_packet(3, FINDER), tau).unwrap();
    assert_eq!(join(&finder), None, "marks expired");
}

#[test]
fn trunk_does_not_see_a_legacy_join_router() {
    // r3 runs no WASP: the first WASP router both packets cross is r4.
    let r = [
        Router::new(1),
        Router::new(2),
        Router::legacy(3),
        Router::new(4),
        Router::new(5),
        Router::new(6),
    ];
    send(&[&r[0], &r[1], &r[2], &r[3]], trunk_packet(5, MARKER), 0).unwrap();
    let finder = send(&[&r[4], &r[5], &r[2], &r[3]], trunk_packet(5, FINDER), 0).unwrap();
    assert_eq!(join(&finder), Some((4, r[3].ipv4(), 1)));
}

// --- advertise and nearest ---

const SERVICE: u64 = 0x5e41_71ce;
const NONE_FOUND: u64 = u64::MAX;

fn advertisement(provider: [u8; 4]) -> Vec<u8> {
    let address = u64::from(u32::from_be_bytes(provider));
    datagram(ADVERTISE, &[SERVICE], &words(&[address, u64::from(TTL)]), TTL)
}

fn query() -> Vec<u8> {
    datagram(NEAREST, &[SERVICE], &words(&[NONE_FOUND, u64::from(TTL)]), TTL)
}

/// (distance, address) as advertise.s packs them.
fn advert(distance: u64, provider: [u8; 4]) -> u64 {
    distance << 32 | u64::from(u32::from_be_bytes(provider))
}

const P1: [u8; 4] = [10, 1, 0, 1];
const P2: [u8; 4] = [10, 2, 0, 2];

#[test]
fn advertise_and_nearest_on_one_node() {
    let router = Router::new(1);
    router.hop(advertisement(P2), at(0)).unwrap();
    assert_eq!(router.word(SERVICE, 0, 0), Some(advert(0, P2)));
    let d = router.hop(query(), at(0)).unwrap();
    assert_eq!(scratch_u64(&d, 0), advert(0, P2));
}

#[test]
fn advertise_keeps_the_nearest_provider_whatever_the_order() {
    // A provider 3 routers away, then one next door, then the far one again: the near one
    // stays. The TTL on arrival gives the distance (initial TTL in the scratchpad).
    let router = Router::new(1);
    let far = {
        let mut d = advertisement(P1);
        d[TTL_OFFSET] = TTL - 3;
        d[10..12].fill(0);
        let checksum = internet_checksum(&d[..IPV4_HEADER_LEN]);
        d[10..12].copy_from_slice(&checksum.to_be_bytes());
        d
    };
    router.hop(far.clone(), at(0)).unwrap();
    assert_eq!(router.word(SERVICE, 0, 0), Some(advert(3, P1)));
    router.hop(advertisement(P2), at(0)).unwrap();
    assert_eq!(router.word(SERVICE, 0, 0), Some(advert(0, P2)), "the nearer replaces");
    router.hop(far, at(0)).unwrap();
    assert_eq!(router.word(SERVICE, 0, 0), Some(advert(0, P2)), "a farther one does not");
}

/// A line r1 r2 L r4 r5 (L a legacy router, which still decrements the TTL). P1 sits behind
/// r1 and advertises towards r5; P2 sits behind r5 and advertises towards r1.
#[test]
fn advertisements_across_hops_and_queries_find_the_nearest() {
    let line = [Router::new(1), Router::new(2), Router::legacy(3), Router::new(4), Router::new(5)];
    let eastward: Vec<&Router> = line.iter().collect();
    let westward: Vec<&Router> = line.iter().rev().collect();
    send(&eastward, advertisement(P1), 0).unwrap();
    send(&westward, advertisement(P2), 0).unwrap();
    let kept: Vec<_> = line.iter().map(|r| r.wasp.then(|| r.word(SERVICE, 0, 0))).collect();
    // Distances from P1: r1 0, r2 1, r4 3, r5 4; from P2: r5 0, r4 1, r2 3, r1 4.
    assert_eq!(
        kept,
        [
            Some(Some(advert(0, P1))),
            Some(Some(advert(1, P1))),
            None,
            Some(Some(advert(1, P2))),
            Some(Some(advert(0, P2))),
        ]
    );

    // A client behind r4 queries westwards: r4 knows P2 at 1 (total 0 + 1); r2 knows P1 at 1
    // but the query crossed r4 and L first (2 + 1); r1 knows P1 at 0 (3 + 0). P2 wins.
    let d = send(&westward[1..], query(), 0).unwrap();
    assert_eq!(scratch_u64(&d, 0), advert(1, P2));
    // A client behind r1 queries eastwards: P1 at r1, 0 routers away.
    let d = send(&eastward, query(), 0).unwrap();
    assert_eq!(scratch_u64(&d, 0), advert(0, P1));
    // From behind r2 westwards only through r2 and r1: P1, 1 away either way.
    let d = send(&westward[3..], query(), 0).unwrap();
    assert_eq!(scratch_u64(&d, 0), advert(1, P1));
}

#[test]
fn advertise_breaks_a_tie_by_the_lower_address_and_nearest_finds_nothing_unadvertised() {
    let r = routers(1..=3);
    send(&[&r[0], &r[1], &r[2]], advertisement(P2), 0).unwrap();
    send(&[&r[2], &r[1], &r[0]], advertisement(P1), 0).unwrap();
    assert_eq!(r[1].word(SERVICE, 0, 0), Some(advert(1, P1)), "tie at the middle: P1 < P2");

    let elsewhere = routers(4..=6);
    let d = send(&elsewhere.iter().collect::<Vec<_>>(), query(), 0).unwrap();
    assert_eq!(scratch_u64(&d, 0), NONE_FOUND);
    for router in &elsewhere {
        assert_eq!(router.ess.stats().inserts, 0, "a query creates no entry");
    }
}

// --- jitter ---

/// The bank jitter.s keeps, computed in plain Rust: (last, previous delta, J, n).
fn jitter_model(arrivals: &[u64]) -> (u64, u64, u64, u64) {
    let (mut last, mut previous, mut jitter) = (0u64, 0u64, 0u64);
    for (i, &now) in arrivals.iter().enumerate() {
        let delta = now.wrapping_sub(last);
        if i >= 2 {
            let d = delta.abs_diff(previous);
            jitter = jitter + (d >> 4) - (jitter >> 4);
        }
        last = now;
        previous = delta;
    }
    (last, previous, jitter, arrivals.len() as u64)
}

fn jitter_bank(router: &Router, flow: u64, now: u64) -> (u64, u64, u64, u64) {
    let w = |i| router.word(flow, i, now).unwrap();
    (w(0), w(1), w(2), w(3))
}

fn jitter_packet(flow: u64) -> Vec<u8> {
    datagram(JITTER, &[flow], &words(&[0]), TTL)
}

#[test]
fn jitter_on_one_node_follows_the_shift_ewma() {
    let router = Router::new(1);
    let arrivals = [1_000u64, 2_000, 3_000, 4_500, 5_000];
    let mut reports = Vec::new();
    for &t in &arrivals {
        let d = router.hop(jitter_packet(42), at(t)).unwrap();
        reports.push(scratch_u64(&d, 0));
    }
    // Deltas 1000 1000 1500 500: D = 0, 500, 1000; J = 0, 31, 31 + 62 - 1 = 92.
    assert_eq!(jitter_bank(&router, 42, 5_000), (5_000, 500, 92, 5));
    assert_eq!(jitter_model(&arrivals), (5_000, 500, 92, 5));
    assert_eq!(reports, [0, 0, 0, 31, 92], "reported from the third arrival on");
}

#[test]
fn jitter_is_zero_for_an_even_flow_and_near_the_swing_for_an_alternating_one() {
    let router = Router::new(1);
    let even: Vec<u64> = (1..=50).map(|i| i * 20_000).collect();
    for &t in &even {
        router.hop(jitter_packet(1), at(t)).unwrap();
    }
    assert_eq!(jitter_bank(&router, 1, 0).2, 0);

    // Gaps alternate 1000 and 3000 ns: |D| = 2000 every packet; J converges to 2000 (the
    // shifts truncate, so from below, within 16 ns of the fixed point).
    let mut t = 0;
    let alternating: Vec<u64> = (0..300)
        .map(|i| {
            t += if i % 2 == 0 { 1_000 } else { 3_000 };
            t
        })
        .collect();
    for &now in &alternating {
        router.hop(jitter_packet(2), at(now)).unwrap();
    }
    let jitter = jitter_bank(&router, 2, 0).2;
    assert_eq!(jitter, jitter_model(&alternating).2);
    assert!((1_985..=2_015).contains(&jitter), "J = {jitter}");
    assert_eq!(jitter_bank(&router, 1, 0).2, 0, "flows keep separate statistics");
}

#[test]
fn jitter_across_hops_each_router_its_own_and_the_packet_the_worst() {
    let path = routers(1..=3);
    // Router k sees packet i at i * 10 us plus a per-router queueing pattern.
    let queueing = |k: u64, i: u64| if (i + k) % 3 == 0 { 700 * k } else { 0 };
    let arrivals = |k: u64| -> Vec<u64> { (1..=12).map(|i| i * 10_000 + queueing(k, i)).collect() };
    let mut last = Vec::new();
    for i in 0..12 {
        let mut d = jitter_packet(99);
        for (k, router) in path.iter().enumerate() {
            d = router.hop(d, at(arrivals(k as u64 + 1)[i])).unwrap();
        }
        last = d;
    }
    let per_router: Vec<u64> = path.iter().map(|r| jitter_bank(r, 99, 0).2).collect();
    let modelled: Vec<u64> = (1..=3).map(|k| jitter_model(&arrivals(k)).2).collect();
    assert_eq!(per_router, modelled);
    // The swing grows with k, and so does the estimate (465, 871, 1287 ns).
    assert!(per_router[0] < per_router[1] && per_router[1] < per_router[2], "{per_router:?}");
    assert_eq!(scratch_u64(&last, 0), per_router[2], "the packet carries the worst");
}

#[test]
fn jitter_statistics_restart_after_tau() {
    let router = Router::new(1);
    let tau = router.ess.lifetime_ns();
    for t in [0, 1_000, 2_500] {
        router.hop(jitter_packet(5), at(t)).unwrap();
    }
    assert_eq!(jitter_bank(&router, 5, 2_500).3, 3);
    let d = router.hop(jitter_packet(5), at(tau)).unwrap();
    assert_eq!(jitter_bank(&router, 5, tau), (tau, tau, 0, 1), "a new entry: first arrival");
    assert_eq!(scratch_u64(&d, 0), 0);
}

// --- ratectl ---

fn rate_packet(threshold: u64) -> Vec<u8> {
    datagram(RATECTL, &[], &words(&[threshold]), TTL)
}

#[test]
fn ratectl_forwards_up_to_the_threshold_and_drops_above() {
    let router = Router::new(1);
    for (queue, forwarded) in [(0, true), (9, true), (10, true), (11, false), (5_000, false)] {
        let mut d = rate_packet(10);
        let out = router.run(&mut d, At { time_ns: 0, queue });
        assert_eq!(out.fate == Fate::Fwd, forwarded, "queue {queue}");
        assert!(!out.rewritten, "the scratchpad is only read");
    }
    // Threshold 0: any queue at all drops; an unknown queue (0) never does.
    let mut d = rate_packet(0);
    assert_eq!(router.run(&mut d, At { time_ns: 0, queue: 1 }).fate, Fate::Drop);
    assert_eq!(router.run(&mut d, At { time_ns: 0, queue: 0 }).fate, Fate::Fwd);
    assert_eq!(router.ess.stats().inserts, 0, "no state");
}

#[test]
fn ratectl_across_hops_drops_at_the_congested_router() {
    let path = routers(1..=3);
    let queues = [3, 50, 2];
    let travel = |threshold| {
        let mut d = Some(rate_packet(threshold));
        let mut reached = 0;
        for (router, &queue) in path.iter().zip(&queues) {
            d = d.and_then(|d| router.hop(d, At { time_ns: 0, queue }));
            reached += usize::from(d.is_some());
        }
        (reached, d.is_some())
    };
    assert_eq!(travel(20), (1, false), "dropped at router 2, the congested one");
    assert_eq!(travel(50), (3, true), "queue 50 is not above 50");
    assert_eq!(travel(2), (0, false), "dropped at the first router (queue 3 > 2)");
}
