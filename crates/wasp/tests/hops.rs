//! The paper's `count` and `collect`, assembled from `examples/wasp/`, run as packets over
//! several routers ("hops"), each with its own store, and over workers sharing one store.

use hotplane_wasp::asm::assemble;
use hotplane_wasp::ess::EssConfig;
use hotplane_wasp::wire::{WaspPacket, WaspRepr};
use hotplane_wasp::{process, Ess, Fate, FilterConfig, Reject};

const COUNT: &str = include_str!("../../../examples/wasp/count.s");
const COLLECT: &str = include_str!("../../../examples/wasp/collect.s");
const PAYLOAD: &[u8] = b"\x12\x34\x00\x35 udp header and data";

struct Router {
    id: u64,
    ess: Ess,
}

impl Router {
    fn new(id: u64) -> Router {
        Router { id, ess: Ess::new(&EssConfig::default()).unwrap() }
    }

    /// Runs the packet's program; the packet if it goes on, `None` if it dropped itself.
    fn hop(&self, mut bytes: Vec<u8>, now: u64) -> Option<Vec<u8>> {
        let env = hotplane_wasp::Env { node_id: self.id, time_ns: now, ..Default::default() };
        let out = process(&mut bytes, &env, &[], &self.ess, &FilterConfig::default())
            .expect("well-formed packet");
        assert_eq!(out.outcome.map(|o| o.fault), Some(None), "no fault at router {}", self.id);
        let outcome = out.outcome.unwrap();
        let code_len = WaspPacket::new_checked(&bytes[..]).unwrap().code_len();
        assert!(outcome.steps <= code_len, "steps {} > code length {code_len}", outcome.steps);
        assert!(bytes.ends_with(PAYLOAD), "the transport header and payload stay untouched");
        match out.fate {
            Fate::Fwd => Some(bytes),
            Fate::Drop => None,
            Fate::Return => panic!("neither program returns"),
        }
    }
}

fn wasp_packet(source: &str, key: u64, scratch: &[u64]) -> Vec<u8> {
    let repr = WaspRepr {
        next_header: 17,
        keys: vec![key],
        scratch: scratch.iter().flat_map(|w| w.to_be_bytes()).collect(),
        code: assemble(source).unwrap().code,
        ..WaspRepr::default()
    };
    let mut bytes = repr.to_bytes().unwrap();
    bytes.extend_from_slice(PAYLOAD);
    bytes
}

fn scratch_words(bytes: &[u8]) -> Vec<u64> {
    let repr = WaspRepr::parse(&WaspPacket::new_checked(bytes).unwrap()).unwrap();
    repr.scratch.chunks(8).map(|w| u64::from_be_bytes(w.try_into().unwrap())).collect()
}

fn counter(router: &Router, key: u64) -> Option<u64> {
    router.ess.get(key, 0).map(|bank| u64::from_be_bytes(bank[..8].try_into().unwrap()))
}

#[test]
fn count_and_collect_fit_in_16_bytes() {
    let count = assemble(COUNT).unwrap();
    let collect = assemble(COLLECT).unwrap();
    assert_eq!((count.code.len(), count.keys_used), (8, 1));
    assert_eq!((collect.code.len(), collect.keys_used), (16, 1));
    // The encodings docs/wasp.md §4 gives, byte for byte (the fuzz seeds use them too).
    assert_eq!(count.code, [0x90, 0x18, 0x94, 0xb0, 0x34, 0x3a, 0x01, 0x02]);
    assert_eq!(
        collect.code,
        [
            0x98, 0xd1, 0x18, 0xd9, 0xb1, 0x35, 0xd0, 0xb0, 0x10, 0xd8, 0x39, 0x01, 0x02, 0xc0,
            0x1d, 0xc1
        ]
    );
}

#[test]
fn count_over_three_hops_drops_at_the_first_router_above_threshold() {
    let path = [Router::new(1), Router::new(2), Router::new(3)];
    let mut delivered = 0;
    for _ in 0..5 {
        let mut packet = Some(wasp_packet(COUNT, 0xc0ffee, &[3]));
        for router in &path {
            packet = packet.and_then(|p| router.hop(p, 0));
        }
        delivered += usize::from(packet.is_some());
    }
    assert_eq!(delivered, 3, "counters 1..=3 pass, 4 and 5 are above the threshold");
    let counters: Vec<_> = path.iter().map(|r| counter(r, 0xc0ffee)).collect();
    assert_eq!(counters, [Some(5), Some(3), Some(3)], "dropping packets still counted at router 1");
}

#[test]
fn count_on_workers_sharing_one_store_loses_no_increment() {
    let router = Router::new(9);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                for _ in 0..500 {
                    assert!(router.hop(wasp_packet(COUNT, 5, &[u64::MAX]), 0).is_some());
                }
            });
        }
    });
    assert_eq!(counter(&router, 5), Some(1000));
}

#[test]
fn collect_delivers_one_aggregate_of_eight_sources_over_three_hops() {
    let path = [Router::new(1), Router::new(2), Router::new(3)];
    let mut delivered = Vec::new();
    // Two aggregations under different keys, interleaved: keys keep them apart.
    for source in 1..=8u64 {
        for (key, scale) in [(0xaaaa, 1), (0xbbbb, 100)] {
            let mut packet = Some(wasp_packet(COLLECT, key, &[source * scale, 8]));
            for router in &path {
                packet = packet.and_then(|p| router.hop(p, 1_000));
            }
            if let Some(p) = packet {
                delivered.push((key, source, scratch_words(&p)));
            }
        }
    }
    assert_eq!(
        delivered,
        [(0xaaaa, 8, vec![36, 0]), (0xbbbb, 8, vec![3600, 0])],
        "only the 8th packet of each aggregation arrives, carrying the sum of all 8"
    );
    let bank = path[0].ess.get(0xaaaa, 0).unwrap();
    assert_eq!(u64::from_be_bytes(bank[8..16].try_into().unwrap()), 8, "router 1 saw all 8");
}

#[test]
fn collect_state_expires_after_tau() {
    let router = Router::new(1);
    let tau = router.ess.lifetime_ns();
    assert!(router.hop(wasp_packet(COLLECT, 7, &[5, 2]), 0).is_none());
    // The first sample is gone after tau: the second packet starts a new aggregation.
    assert!(router.hop(wasp_packet(COLLECT, 7, &[6, 2]), tau).is_none());
    let last = router.hop(wasp_packet(COLLECT, 7, &[7, 2]), tau + 1).unwrap();
    assert_eq!(scratch_words(&last), [13, 0]);
}

#[test]
fn a_bit_flip_anywhere_in_the_shim_is_refused_not_run() {
    let router = Router::new(1);
    let good = wasp_packet(COUNT, 1, &[10]);
    let shim_len = good.len() - PAYLOAD.len();
    for byte in 0..shim_len {
        let mut bad = good.clone();
        bad[byte] ^= 0x04;
        let env = hotplane_wasp::Env::default();
        let result = process(&mut bad, &env, &[], &router.ess, &FilterConfig::default());
        assert!(result.is_err(), "flip in byte {byte} was accepted");
        assert!(Reject::ALL.contains(&result.unwrap_err()));
    }
    assert_eq!(router.ess.stats().inserts, 0);
}
