//! The fuzz target's properties as a property test (cheap enough for every `cargo test`), and
//! the fuzz seeds run with the fates they were written for.

use hotplane_wasp::asm::{assemble, disassemble};
use hotplane_wasp::decode::decode;
use hotplane_wasp::ess::EssConfig;
use hotplane_wasp::filter::OnFault;
use hotplane_wasp::wire::{flags, WaspPacket, WaspRepr};
use hotplane_wasp::{process, Env, Ess, Fate, Fault, FilterConfig};
use proptest::prelude::*;

fn small_store() -> Ess {
    Ess::new(&EssConfig {
        capacity: 16,
        shards: 2,
        max_probe: 4,
        lifetime_ns: 1_000,
        ..EssConfig::default()
    })
    .unwrap()
}

/// A shim with random lengths and contents but a right checksum, so that runs are reached.
fn shim_strategy() -> impl Strategy<Value = Vec<u8>> {
    (
        0usize..=4,
        0usize..=16,
        proptest::collection::vec(any::<u8>(), 0..=64),
        any::<u8>(),
        any::<u32>(),
    )
        .prop_flat_map(|(keys, words, code, flags, cid)| {
            (
                proptest::collection::vec(any::<u64>(), keys),
                Just(words),
                Just(code),
                Just(flags & 0x03),
                Just(cid),
            )
        })
        .prop_map(|(keys, words, code, flags, cid)| {
            let repr = WaspRepr {
                flags,
                next_header: 17,
                cid,
                keys: keys.iter().map(|k| k % 8).collect(),
                scratch: (0..8 * words).map(|i| i as u8).collect(),
                code,
                ..WaspRepr::default()
            };
            let mut bytes = repr.to_bytes().unwrap();
            bytes.extend_from_slice(b"after the shim");
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn any_checksummed_shim_runs_bounded_and_contained(bytes in shim_strategy(), forward_flagged in any::<bool>()) {
        let ess = small_store();
        let on_fault = if forward_flagged { OnFault::ForwardFlagged } else { OnFault::Drop };
        let code_len = WaspPacket::new_checked(&bytes[..]).unwrap().code_len();
        let mut packet = bytes.clone();
        match process(&mut packet, &Env::default(), &[], &ess, &FilterConfig { on_fault, ..FilterConfig::default() }) {
            Ok(processed) => {
                if let Some(outcome) = processed.outcome {
                    prop_assert!(outcome.steps <= code_len);
                    if outcome.fault.is_some() {
                        prop_assert_eq!(ess.stats().inserts + ess.stats().updates, 0);
                    }
                }
                prop_assert!(packet.ends_with(b"after the shim"));
                let before = WaspRepr::parse(&WaspPacket::new_checked(&bytes[..]).unwrap()).unwrap();
                let after = WaspRepr::parse(&WaspPacket::new_checked(&packet[..]).unwrap()).unwrap();
                prop_assert_eq!((&after.keys, &after.code, after.cid), (&before.keys, &before.code, before.cid));
            }
            Err(_) => prop_assert_eq!(&packet, &bytes),
        }
    }

    #[test]
    fn any_code_disassembles_into_text_that_reassembles(code in proptest::collection::vec(any::<u8>(), 0..=64)) {
        let again = assemble(&disassemble(&code)).unwrap();
        if let Ok(program) = decode(&code, 4) {
            prop_assert_eq!(decode(&again.code, 4).unwrap().len(), program.len());
        }
    }
}

fn run_seed(name: &str) -> (Vec<u8>, Result<hotplane_wasp::Processed, hotplane_wasp::Reject>) {
    let path = format!("{}/../../fuzz/seeds/wasp_packet/{name}", env!("CARGO_MANIFEST_DIR"));
    let seed = std::fs::read(path).unwrap();
    let on_fault = if seed[0] & 2 != 0 { OnFault::ForwardFlagged } else { OnFault::Drop };
    let mut packet = seed[1..].to_vec();
    let result = process(
        &mut packet,
        &Env::default(),
        &[],
        &small_store(),
        &FilterConfig { on_fault, ..FilterConfig::default() },
    );
    (packet, result)
}

#[test]
fn fuzz_seeds_reach_the_vpu_with_their_intended_fates() {
    assert_eq!(run_seed("count").1.unwrap().fate, Fate::Fwd);
    assert_eq!(run_seed("collect").1.unwrap().fate, Fate::Drop, "first of two samples");
    for (name, fault) in
        [("return_flagged", Fault::SecondReturn), ("fault_readonly", Fault::ReadOnly)]
    {
        let (packet, result) = run_seed(name);
        let processed = result.unwrap();
        assert_eq!(processed.outcome.and_then(|o| o.fault).map(|f| f.0), Some(fault), "{name}");
        assert_eq!(processed.fate, Fate::Fwd, "{name}: forwarded flagged");
        assert!(WaspPacket::new_checked(&packet[..]).unwrap().flags() & flags::FAULT != 0);
    }
}

#[test]
fn return_happens_at_most_once_across_hops() {
    let routers = [small_store(), small_store(), small_store()];
    let code = assemble("return").unwrap().code;
    let mut packet = WaspRepr { code, ..WaspRepr::default() }.to_bytes().unwrap();
    let config = FilterConfig { on_fault: OnFault::ForwardFlagged, ..FilterConfig::default() };
    let fates: Vec<Fate> = routers
        .iter()
        .map(|ess| process(&mut packet, &Env::default(), &[], ess, &config).unwrap().fate)
        .collect();
    assert_eq!(
        fates,
        [Fate::Return, Fate::Fwd, Fate::Fwd],
        "returned once, then flagged and passed on"
    );
    let flags_now = WaspPacket::new_checked(&packet[..]).unwrap().flags();
    assert_eq!(flags_now, flags::RETURNED | flags::FAULT);
}
