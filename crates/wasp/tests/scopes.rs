//! The store's scopes, authenticated admin packets and per-aggregate quotas, through the filter
//! as a stage runs packets (`docs/wasp.md` §8): forged, replayed or unknown-key admin packets
//! are refused and change nothing; an admin packet writes a protected entry that public packets
//! read but cannot change; private entries are out of reach of other code; one source cannot
//! fill the store past its quota while another still creates entries.

use std::collections::BTreeMap;
use std::sync::Arc;

use hotplane_wasp::admin::{seal, AdminKey, AdminKeys};
use hotplane_wasp::asm::assemble;
use hotplane_wasp::ess::{EssConfig, PrivateSlot, Quota, StoreKey, BANK_LEN};
use hotplane_wasp::filter::OnFault;
use hotplane_wasp::wire::{flags, AdminTrailer, Scope, WaspPacket, WaspRepr, MAX_KEYS};
use hotplane_wasp::{process, Env, Ess, Fate, Fault, FilterConfig, Reject};
use proptest::prelude::*;

const KEY: AdminKey = [0x42; 32];
const KEY_ID: u32 = 7;
const PAYLOAD: &[u8] = b"\x12\x34\x00\x35 udp header and data";
/// The service advertisement's well-known key (a hash of the service name, say).
const SERVICE: u64 = 0x5e41_11ce_0000_0001;

fn store() -> Ess {
    Ess::new(&EssConfig::default()).unwrap()
}

fn admin_config() -> FilterConfig {
    FilterConfig {
        on_fault: OnFault::ForwardFlagged,
        admin: Some(Arc::new(AdminKeys::new([(KEY_ID, KEY)]).unwrap())),
        ..FilterConfig::default()
    }
}

fn repr(source: &str, keys: &[(Scope, u64)], scratch: &[u64]) -> WaspRepr {
    let mut scopes = [Scope::Public; MAX_KEYS];
    for (slot, (scope, _)) in keys.iter().enumerate() {
        scopes[slot] = *scope;
    }
    WaspRepr {
        next_header: 17,
        keys: keys.iter().map(|(_, key)| *key).collect(),
        scopes,
        scratch: scratch.iter().flat_map(|w| w.to_be_bytes()).collect(),
        code: assemble(source).unwrap().code,
        ..WaspRepr::default()
    }
}

fn public_packet(source: &str, keys: &[(Scope, u64)], scratch: &[u64]) -> Vec<u8> {
    let mut bytes = repr(source, keys, scratch).to_bytes().unwrap();
    bytes.extend_from_slice(PAYLOAD);
    bytes
}

/// An admin packet under `key_id` with sequence number `seq`, sealed with `key`.
fn admin_packet(
    source: &str,
    keys: &[(Scope, u64)],
    key_id: u32,
    seq: u64,
    key: &AdminKey,
) -> Vec<u8> {
    let repr = WaspRepr {
        admin: Some(AdminTrailer { key_id, seq, mac: [0; 32] }),
        ..repr(source, keys, &[0x0a00_0001])
    };
    let mut bytes = repr.to_bytes().unwrap();
    seal(&mut bytes, key).unwrap();
    bytes.extend_from_slice(PAYLOAD);
    bytes
}

/// Installs the provider address in the scratchpad under the protected service key.
const ADVERTISE: &str = "ld a, s.64[0]\ninsert k0";

fn run(
    bytes: &mut [u8],
    ess: &Ess,
    config: &FilterConfig,
) -> Result<(Fate, Option<Fault>), Reject> {
    run_from(bytes, ess, config, &[])
}

fn run_from(
    bytes: &mut [u8],
    ess: &Ess,
    config: &FilterConfig,
    net: &[u8],
) -> Result<(Fate, Option<Fault>), Reject> {
    let env = Env { time_ns: 1, ..Env::default() };
    let processed = process(bytes, &env, net, ess, config)?;
    assert!(bytes.ends_with(PAYLOAD), "the payload stays untouched");
    Ok((processed.fate, processed.outcome.and_then(|o| o.fault).map(|(fault, _)| fault)))
}

fn service_entry(ess: &Ess) -> Option<u64> {
    let bank = ess.get_scoped(StoreKey::protected(SERVICE), 1)?;
    Some(u64::from_be_bytes(bank[..8].try_into().unwrap()))
}

#[test]
fn an_admin_packet_writes_a_protected_entry_once() {
    let ess = store();
    let config = admin_config();
    let packet = admin_packet(ADVERTISE, &[(Scope::Protected, SERVICE)], KEY_ID, 1, &KEY);
    assert_eq!(run(&mut packet.clone(), &ess, &config), Ok((Fate::Fwd, None)));
    assert_eq!(service_entry(&ess), Some(0x0a00_0001));
    assert_eq!(ess.get(SERVICE, 1), None, "the public key of the same number is untouched");
    // The very same packet again, and an older one: replays.
    assert_eq!(run(&mut packet.clone(), &ess, &config), Err(Reject::Replayed));
    let older =
        admin_packet("imm a, 0\ninsert k0", &[(Scope::Protected, SERVICE)], KEY_ID, 1, &KEY);
    assert_eq!(run(&mut older.clone(), &ess, &config), Err(Reject::Replayed));
    assert_eq!(service_entry(&ess), Some(0x0a00_0001));
    let newer =
        admin_packet("imm a, 0\ninsert k0", &[(Scope::Protected, SERVICE)], KEY_ID, 2, &KEY);
    assert_eq!(run(&mut newer.clone(), &ess, &config), Ok((Fate::Fwd, None)));
    assert_eq!(service_entry(&ess), Some(0));
}

#[test]
fn forged_unknown_key_and_unconfigured_admin_packets_are_refused_and_change_nothing() {
    let ess = store();
    let config = admin_config();
    let keys = [(Scope::Protected, SERVICE)];
    // A forged MAC: one bit of the MAC flipped, checksum refilled as an attacker would.
    let mut forged = admin_packet(ADVERTISE, &keys, KEY_ID, 1, &KEY);
    let mac_end = WaspPacket::new_checked(&forged[..]).unwrap().total_len();
    forged[mac_end - 1] ^= 1;
    WaspPacket::new_checked(&mut forged[..]).unwrap().fill_checksum();
    let original = forged.clone();
    assert_eq!(run(&mut forged, &ess, &config), Err(Reject::BadMac));
    assert_eq!(forged, original, "a refused packet is not modified");
    // Another program of the same length under the honest packet's MAC.
    let honest = admin_packet(ADVERTISE, &keys, KEY_ID, 1, &KEY);
    let mut swapped = admin_packet("clr\ninsert k0", &keys, KEY_ID, 1, &[0; 32]);
    let shim_len = WaspPacket::new_checked(&honest[..]).unwrap().total_len();
    assert_eq!(WaspPacket::new_checked(&swapped[..]).unwrap().total_len(), shim_len);
    swapped[shim_len - 32..shim_len].copy_from_slice(&honest[shim_len - 32..shim_len]);
    WaspPacket::new_checked(&mut swapped[..]).unwrap().fill_checksum();
    assert_eq!(run(&mut swapped, &ess, &config), Err(Reject::BadMac));
    // The right key under an id the node does not hold, and another key under the right id.
    let unknown = admin_packet(ADVERTISE, &keys, KEY_ID + 1, 1, &KEY);
    assert_eq!(run(&mut unknown.clone(), &ess, &config), Err(Reject::UnknownKey));
    let wrong_key = admin_packet(ADVERTISE, &keys, KEY_ID, 1, &[0x43; 32]);
    assert_eq!(run(&mut wrong_key.clone(), &ess, &config), Err(Reject::BadMac));
    // A node without admin keys treats the ADMIN bit as reserved.
    let unconfigured = FilterConfig::default();
    assert_eq!(run(&mut honest.clone(), &ess, &unconfigured), Err(Reject::ReservedBits));
    assert_eq!(service_entry(&ess), None);
    assert_eq!(ess.stats().inserts, 0);
    // None of the refusals used up the sequence number: the honest packet still goes in.
    let ring = config.admin.as_ref().unwrap();
    assert_eq!(ring.last_sequences(), BTreeMap::from([(KEY_ID, 0)]));
    assert_eq!(run(&mut honest.clone(), &ess, &config), Ok((Fate::Fwd, None)));
    assert_eq!(service_entry(&ess), Some(0x0a00_0001));
}

#[test]
fn public_packets_read_protected_entries_and_their_writes_fault() {
    let ess = store();
    let config = admin_config();
    let mut advert = admin_packet(ADVERTISE, &[(Scope::Protected, SERVICE)], KEY_ID, 1, &KEY);
    run(&mut advert, &ess, &config).unwrap();

    // A reader copies the provider into its scratchpad.
    let mut reader =
        public_packet("lookup k0\nst s.64[0], a", &[(Scope::Protected, SERVICE)], &[0]);
    assert_eq!(run(&mut reader, &ess, &config), Ok((Fate::Fwd, None)));
    let scratch = WaspRepr::parse(&WaspPacket::new_checked(&reader[..]).unwrap()).unwrap().scratch;
    assert_eq!(scratch, 0x0a00_0001u64.to_be_bytes());

    // Writers fault `protected`; flagged forwarding reports it to the end-host.
    for source in [
        "imm a, 6\ninsert k0",
        "map k0\nimm a, 6\nst m.64[0], a",
        "map k0\nimm a, 6\nst m.8[31], a",
    ] {
        let mut writer = public_packet(source, &[(Scope::Protected, SERVICE)], &[]);
        assert_eq!(
            run(&mut writer, &ess, &config),
            Ok((Fate::Fwd, Some(Fault::Protected))),
            "{source}"
        );
        let after = WaspRepr::parse(&WaspPacket::new_checked(&writer[..]).unwrap()).unwrap();
        assert_eq!(after.flags, flags::FAULT);
        assert_eq!(Fault::from_wire_code(after.fault_code), Some(Fault::Protected));
        assert_eq!(service_entry(&ess), Some(0x0a00_0001), "{source}");
    }
    // The same number declared public is another entry, free for anyone.
    let mut public = public_packet("imm a, 6\ninsert k0", &[(Scope::Public, SERVICE)], &[]);
    assert_eq!(run(&mut public, &ess, &config), Ok((Fate::Fwd, None)));
    assert_eq!(service_entry(&ess), Some(0x0a00_0001));
    assert!(ess.get(SERVICE, 1).is_some());
}

/// Every store along the path accepts the admin packet once: each has its own verifier.
#[test]
fn an_admin_packet_is_accepted_once_by_each_router_on_its_path() {
    let routers: Vec<(Ess, FilterConfig)> = (0..3).map(|_| (store(), admin_config())).collect();
    let mut packet = admin_packet(ADVERTISE, &[(Scope::Protected, SERVICE)], KEY_ID, 10, &KEY);
    for (ess, config) in &routers {
        assert_eq!(run(&mut packet, ess, config), Ok((Fate::Fwd, None)));
        assert_eq!(service_entry(ess), Some(0x0a00_0001));
    }
    for (ess, config) in &routers {
        assert_eq!(run(&mut packet.clone(), ess, config), Err(Reject::Replayed));
    }
}

#[test]
fn an_admin_program_cannot_change_its_signed_scratchpad() {
    let ess = store();
    let mut packet = admin_packet(
        "imm a, 5\ninsert k0\nst s.64[0], a",
        &[(Scope::Protected, SERVICE)],
        KEY_ID,
        1,
        &KEY,
    );
    let before = packet.clone();
    assert_eq!(run(&mut packet, &ess, &admin_config()), Ok((Fate::Fwd, Some(Fault::ReadOnly))));
    assert_eq!(service_entry(&ess), None, "the fault discards the run's store writes");
    let after = WaspRepr::parse(&WaspPacket::new_checked(&packet[..]).unwrap()).unwrap();
    let original = WaspRepr::parse(&WaspPacket::new_checked(&before[..]).unwrap()).unwrap();
    assert_eq!(after.scratch, original.scratch);
}

#[test]
fn private_entries_are_reachable_only_by_the_same_code() {
    let ess = store();
    let config = FilterConfig::default();
    let keys = [(Scope::Private, 77)];
    // Code X stores 5 under its private key 77.
    let x = "lookup k0\nst s.64[0], a\nimm a, 5\ninsert k0";
    let mut first = public_packet(x, &keys, &[0]);
    assert_eq!(run(&mut first, &ess, &config), Ok((Fate::Fwd, None)));
    // Other code declaring the same private key sees nothing and writes its own entry.
    let y = "lookup k0\nst s.64[0], a\nimm a, 9\ninsert k0\nnop";
    let mut other = public_packet(y, &keys, &[0]);
    assert_eq!(run(&mut other, &ess, &config), Ok((Fate::Fwd, None)));
    assert_eq!(scratch_word(&other), 0, "code Y does not see X's entry");
    // Public and protected 77 are other entries still.
    let mut public = public_packet("lookup k0\nst s.64[0], a", &[(Scope::Public, 77)], &[1]);
    run(&mut public, &ess, &config).unwrap();
    assert_eq!(scratch_word(&public), 0);
    // Code X again: its own 5, untouched by Y's 9.
    let mut again = public_packet(x, &keys, &[0]);
    run(&mut again, &ess, &config).unwrap();
    assert_eq!(scratch_word(&again), 5);
    assert_eq!(ess.stats().live, 2);
}

fn scratch_word(bytes: &[u8]) -> u64 {
    let repr = WaspRepr::parse(&WaspPacket::new_checked(bytes).unwrap()).unwrap();
    u64::from_be_bytes(repr.scratch[..8].try_into().unwrap())
}

fn ipv4_header(source: [u8; 4]) -> [u8; 20] {
    let mut header = [0u8; 20];
    header[0] = 0x45;
    header[8] = 64;
    header[9] = 253;
    header[12..16].copy_from_slice(&source);
    header[16..20].copy_from_slice(&[192, 0, 2, 1]);
    header
}

#[test]
fn one_source_cannot_fill_the_store_past_its_quota() {
    let ess = Ess::new(&EssConfig { capacity: 256, shards: 4, ..EssConfig::default() }).unwrap();
    let config = FilterConfig {
        quota: Quota { above_percent: 50, share_percent: 10 },
        ..FilterConfig::default()
    };
    let create = |key: u64, source: [u8; 4]| {
        let mut packet = public_packet("imm a, 1\ninsert k0", &[(Scope::Public, key)], &[]);
        let processed =
            process(&mut packet, &Env::default(), &ipv4_header(source), &ess, &config).unwrap();
        processed.outcome.unwrap().store_refused == 0
    };
    // One /24 (every host in it is the same aggregate) floods with new keys.
    let flooded = (0..1000u64).filter(|&key| create(key, [10, 0, 0, (key % 250) as u8])).count();
    let stats = ess.stats();
    // It fills the store up to the threshold (half of 256) and no further: above it, it
    // already holds more than its 10% share.
    assert_eq!(flooded, 128);
    assert_eq!(ess.aggregate_entries(0xffff_ffff_0a00_0000), 128, "the /24 10.0.0.0");
    assert!(stats.refused_quota > 800, "{stats:?}");
    assert_eq!(stats.refused_full, 0, "the store never filled up");
    // Another source still creates, up to its own share (25 entries of 256). Aggregates are
    // hashed to 1024 buckets with a per-store secret, so one /24 in a thousand shares the
    // flooder's bucket (and its count): take the first that does not.
    let third = (1..=255u8)
        .find(|&c| ess.aggregate_entries(0xffff_ffff_0a00_0000 | u64::from(c) << 8) == 0)
        .expect("255 /24s cannot all share one bucket of 1024");
    let polite = (0..40u64).filter(|&key| create(10_000 + key, [10, 0, third, 9])).count();
    assert_eq!(polite, 25);
    assert_eq!(ess.stats().live, 128 + 25);
}

/// One line of a store-heavy program over `slots` declared keys.
fn line(op: u8, slot: u8, value: u8, slots: usize) -> String {
    let k = usize::from(slot) % slots.max(1);
    match op % 8 {
        0 => format!("imm a, {value}"),
        1 => format!("insert k{k}"),
        2 => format!("map k{k}"),
        3 => format!("st m.64[{}], a", value % 4),
        4 => format!("lookup k{k}"),
        5 => "inc".to_string(),
        6 => format!("st m.8[{}], a", value % 32),
        _ => "drop".to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Whatever store-heavy program a packet without admin rights runs, and whatever scopes it
    /// declares over the keys 0..4, the protected entries and another program's private entries
    /// stay as they were (and its public entries are the only ones it can create).
    #[test]
    fn public_packets_never_change_protected_or_foreign_private_entries(
        ops in proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 0..=12),
        keys in proptest::collection::vec((0u8..3, 0u64..4), 1..=4),
        on_fault_forward in any::<bool>(),
    ) {
        let ess = store();
        let owner_code = assemble("imm a, 1\ninsert k0").unwrap().code;
        for key in 0..4 {
            ess.put_scoped(StoreKey::protected(key), &[key as u8; BANK_LEN], 0).unwrap();
            let private = StoreKey { scope: Scope::Private, key: ess.private_key(&owner_code, PrivateSlot::ONLY, key) };
            ess.put_scoped(private, &[0x80 | key as u8; BANK_LEN], 0).unwrap();
        }
        let text: Vec<String> = ops.iter().map(|&(op, slot, value)| line(op, slot, value, keys.len())).collect();
        let code = assemble(&text.join("\n")).unwrap().code;
        let mut scopes = [Scope::Public; MAX_KEYS];
        for (slot, (scope, _)) in keys.iter().enumerate() {
            scopes[slot] = Scope::ALL[usize::from(*scope)];
        }
        let repr = WaspRepr {
            keys: keys.iter().map(|(_, key)| *key).collect(),
            scopes,
            code: code.clone(),
            ..WaspRepr::default()
        };
        let mut bytes = repr.to_bytes().unwrap();
        let config = FilterConfig {
            on_fault: if on_fault_forward { OnFault::ForwardFlagged } else { OnFault::Drop },
            ..admin_config()
        };
        let before = ess.stats().live;
        let processed = process(&mut bytes, &Env::default(), &[], &ess, &config);
        prop_assert!(processed.is_ok(), "{:?}", processed);
        for key in 0..4 {
            prop_assert_eq!(ess.get_scoped(StoreKey::protected(key), 0), Some([key as u8; BANK_LEN]));
            let private = StoreKey { scope: Scope::Private, key: ess.private_key(&owner_code, PrivateSlot::ONLY, key) };
            prop_assert_eq!(ess.get_scoped(private, 0), Some([0x80 | key as u8; BANK_LEN]));
        }
        let created = ess.stats().live - before;
        let writable = keys.iter().filter(|(scope, _)| *scope != 1).count() as u64;
        prop_assert!(created <= writable);
    }
}

/// The same code cannot reach a private entry through another slot: the victim's code counts
/// in private k0 and copies its scratchpad into public k1; run with the slots' scopes swapped,
/// it would write an attacker's scratchpad into the victim's counter (found by a red team).
#[test]
fn a_private_entry_is_bound_to_its_slot_and_layout() {
    let ess = store();
    let config = FilterConfig::default();
    let code = "lookup k0\ninc\ninsert k0\nld a, s.64[0]\ninsert k1";
    for _ in 0..3 {
        let mut own = public_packet(code, &[(Scope::Private, 0x1234), (Scope::Public, 5)], &[0]);
        assert_eq!(run(&mut own, &ess, &config), Ok((Fate::Fwd, None)));
    }
    let counter = |ess: &Ess| {
        let at = PrivateSlot {
            slot: 0,
            key_count: 2,
            scopes: Scope::pack(&[Scope::Private, Scope::Public, Scope::Public, Scope::Public]),
        };
        let key = StoreKey {
            scope: Scope::Private,
            key: ess.private_key(&assemble(code).unwrap().code, at, 0x1234),
        };
        ess.get_scoped(key, 1).map(|bank| u64::from_be_bytes(bank[..8].try_into().unwrap()))
    };
    assert_eq!(counter(&ess), Some(3));
    let mut attack =
        public_packet(code, &[(Scope::Public, 1), (Scope::Private, 0x1234)], &[0xdead_beef]);
    assert_eq!(run(&mut attack, &ess, &config), Ok((Fate::Fwd, None)));
    assert_eq!(counter(&ess), Some(3), "the victim's counter is untouched");
}
