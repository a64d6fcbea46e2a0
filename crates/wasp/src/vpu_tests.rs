use super::*;
use crate::asm::assemble;
use crate::decode::decode;
use crate::ess::EssConfig;

fn program(source: &str, keys: usize) -> Program {
    decode(&assemble(source).unwrap().code, keys).unwrap()
}

fn store() -> Ess {
    Ess::new(&EssConfig::default()).unwrap()
}

fn word(bank: &[u8], index: usize) -> u64 {
    read_be(&bank[8 * index..8 * index + 8])
}

const COUNT: &str = include_str!("../../../examples/wasp/count.s");

#[test]
fn count_drops_above_threshold_and_drop_commits() {
    let ess = store();
    let count = program(COUNT, 1);
    let env = Env::default();
    let mut fates = Vec::new();
    for _ in 0..4 {
        let mut scratch = 2u64.to_be_bytes();
        let out = run(&count, &[77], &mut scratch, false, &env, &[], &ess);
        assert_eq!(out.fault, None);
        assert!(!out.scratch_dirty, "count never writes its packet");
        assert!(out.steps <= count.code_len());
        fates.push(out.fate);
    }
    assert_eq!(fates, [Fate::Fwd, Fate::Fwd, Fate::Drop, Fate::Drop]);
    assert_eq!(ess.get(77, 0).map(|b| word(&b, 0)), Some(4), "every run committed, drops too");
}

#[test]
fn a_fault_discards_store_and_scratchpad_writes() {
    let ess = store();
    let env = Env::default();
    let cases = [
        ("lookup k0\ninc\ninsert k0\nst s.64[0], a\nst e.64[0], a", Fault::ReadOnly, 4),
        ("lookup k0\ninc\ninsert k0\nst s.64[0], a\nst h.8[0], a", Fault::ReadOnly, 4),
        ("lookup k0\ninc\ninsert k0\nst s.64[0], a\nst s.64[1], a", Fault::OutOfBounds, 4),
        ("insert k0\nst s.64[0], a\nimm b, 0xffff\nstx s.8[b+255], a", Fault::OutOfBounds, 5),
        ("insert k0\nst s.64[0], a\nld a, m.64[0]", Fault::NotMapped, 2),
        ("map k0\nst s.64[0], a\nld a, m.32[8]", Fault::OutOfBounds, 2),
        ("insert k0\nst s.64[0], a\nld a, e.64[9]", Fault::OutOfBounds, 2),
    ];
    for (source, fault, pc) in cases {
        let p = program(source, 1);
        let mut scratch = [0xaa; 8];
        let out = run(&p, &[9], &mut scratch, false, &env, &[], &ess);
        assert_eq!(out.fault, Some((fault, pc)), "{source}");
        assert_eq!(out.store_writes, 0, "{source}");
        assert_eq!(scratch, [0xaa; 8], "{source}: scratchpad restored");
        assert_eq!(ess.get(9, 0), None, "{source}: store untouched");
    }
}

#[test]
fn return_happens_once_per_packet() {
    let ess = store();
    let p = program("return", 0);
    let out = run(&p, &[], &mut [], false, &Env::default(), &[], &ess);
    assert_eq!((out.fate, out.fault), (Fate::Return, None));
    let out = run(&p, &[], &mut [], true, &Env::default(), &[], &ess);
    assert_eq!(out.fault, Some((Fault::SecondReturn, 0)));
}

/// A packet on its way back sees bit 1 of `e.flags` and can forward itself instead of
/// faulting on a second `return` (the path scan's reverse path).
#[test]
fn a_returned_packet_sees_its_flag_and_forwards() {
    let ess = store();
    let p = program("ld a, e.flags\nimm b, 2\nand\ncnz\njt back\nreturn\nback:\nfwd", 0);
    let out = run(&p, &[], &mut [], false, &Env::default(), &[], &ess);
    assert_eq!((out.fate, out.fault), (Fate::Return, None));
    let out = run(&p, &[], &mut [], true, &Env::default(), &[], &ess);
    assert_eq!((out.fate, out.fault), (Fate::Fwd, None), "forwarded on the way back");
}

/// `lookup` and `map` see what this run's own `insert` or `map` created.
#[test]
fn a_run_sees_the_entries_it_created() {
    let ess = store();
    let p = program("imm a, 9\ninsert k0\nlookup k0\nst s.64[0], a\nclr\njf no\ninc\nno:\nst s.64[1], a\nmap k1\nmap k1\nclr\njt yes\ninc\nyes:\nst s.64[2], a", 2);
    let mut scratch = [0u8; 24];
    let out = run(&p, &[1, 2], &mut scratch, false, &Env::default(), &[], &ess);
    assert_eq!(out.fault, None);
    let words: Vec<u64> = (0..3).map(|i| word(&scratch, i)).collect();
    assert_eq!(words, [9, 1, 1], "lookup after insert: present; second map: not created");
}

#[test]
fn environment_and_header_banks_are_readable() {
    let ess = store();
    let env = Env {
        node_id: 7,
        node_addr: Env::ipv4_mapped([10, 0, 0, 1]),
        in_port: 3,
        time_ns: 123,
        in_profile: true,
        ..Env::default()
    };
    let p = program(
        "ld a, e.node_id\nst s.64[0], a\nld a, e.32[5]\nst s.64[1], a\nld a, e.in_port\nst s.64[2], a\n\
         ld a, e.flags\nst s.64[3], a\nld a, h.8[9]\nst s.64[4], a\nld a, h.16[31]\nst s.64[5], a",
        0,
    );
    let header = [0x45, 0, 0, 40, 0, 0, 0, 0, 64, 253];
    let mut scratch = [0u8; 48];
    let out = run(&p, &[], &mut scratch, false, &env, &header, &ess);
    assert_eq!(out.fault, None);
    let words: Vec<u64> = (0..6).map(|i| word(&scratch, i)).collect();
    assert_eq!(words, [7, 0x0a00_0001, 3, 1, 253, 0], "bytes past the header read as zero");
}

#[test]
fn two_slots_naming_one_key_share_one_entry() {
    let ess = store();
    let p = program("lookup k0\ninc\ninsert k0\nlookup k1\ninc\ninsert k1", 2);
    let out = run(&p, &[5, 5], &mut [], false, &Env::default(), &[], &ess);
    assert_eq!(out.store_reads, 1);
    assert_eq!(ess.get(5, 0).map(|b| word(&b, 0)), Some(2));
}

#[test]
fn indexed_stores_walk_the_scratchpad() {
    let ess = store();
    // Path-scan style: the hop counter in s.32[0], the hop's address appended after it.
    let p =
        program("ld b, s.32[0]\nld a, e.32[5]\nstx s.32[b+1], a\nmov a, b\ninc\nst s.32[0], a", 0);
    let mut scratch = [0u8; 16];
    for hop in 1..=3u8 {
        let env = Env { node_addr: Env::ipv4_mapped([10, 0, 0, hop]), ..Env::default() };
        let out = run(&p, &[], &mut scratch, false, &env, &[], &ess);
        assert_eq!(out.fault, None);
    }
    assert_eq!(scratch, [0, 0, 0, 3, 10, 0, 0, 1, 10, 0, 0, 2, 10, 0, 0, 3]);
    // A fourth hop runs out of room: a fault, the scratchpad as it was.
    let out = run(&p, &[], &mut scratch, false, &Env::default(), &[], &ess);
    assert_eq!(out.fault, Some((Fault::OutOfBounds, 4)));
    assert_eq!(&scratch[..4], &[0, 0, 0, 3]);
}

fn protected_slot0() -> Access {
    Access {
        scopes: [Scope::Protected, Scope::Public, Scope::Public, Scope::Public],
        ..Access::default()
    }
}

fn run_as(source: &str, keys: &[u64], scratch: &mut [u8], access: &Access, ess: &Ess) -> Outcome {
    let p = program(source, keys.len());
    run_with_access(&p, keys, scratch, false, &Env::default(), access, &[], ess)
}

/// A packet without admin rights reads a protected entry but every way of writing it
/// faults `protected`, and the run's other writes are discarded with it.
#[test]
fn protected_slots_are_read_only_without_admin_rights() {
    let ess = store();
    ess.put_scoped(StoreKey::protected(4), &[7; BANK_LEN], 0).unwrap();
    let access = protected_slot0();
    let mut scratch = [0u8; 8];
    let out = run_as("lookup k0\nst s.64[0], a", &[4], &mut scratch, &access, &ess);
    assert_eq!(out.fault, None);
    assert_eq!(scratch, [7; 8], "readable");
    for (source, pc) in [
        ("imm a, 1\ninsert k1\ninsert k0", 3),
        ("imm a, 1\ninsert k1\nmap k0\nst m.64[0], a", 4),
        ("imm a, 1\ninsert k1\nmap k0\nimm b, 1\nstx m.8[b+0], a", 6),
    ] {
        let out = run_as(source, &[4, 5], &mut [], &access, &ess);
        assert_eq!(out.fault, Some((Fault::Protected, pc)), "{source}");
        assert_eq!(ess.get_scoped(StoreKey::protected(4), 0), Some([7; BANK_LEN]));
        assert_eq!(ess.get(5, 0), None, "{source}: the public write went with the fault");
    }
    // Mapping an absent protected entry reads zeros and creates nothing.
    let mut scratch = [0xffu8; 16];
    let out = run_as(
        "map k0\nld a, m.64[0]\nst s.64[0], a\nclr\njf was\ninc\nwas:\nst s.64[1], a",
        &[9],
        &mut scratch,
        &access,
        &ess,
    );
    assert_eq!((out.fault, out.store_writes), (None, 0));
    assert_eq!(scratch[..8], [0; 8]);
    assert_eq!(scratch[15], 1, "C says absent");
    assert_eq!(ess.get_scoped(StoreKey::protected(9), 0), None);
}

#[test]
fn admin_rights_write_protected_entries_but_not_the_scratchpad() {
    let ess = store();
    let admin = Access { admin: true, ..protected_slot0() };
    let out = run_as("ld a, e.flags\ninsert k0", &[4], &mut [], &admin, &ess);
    assert_eq!(out.fault, None);
    assert_eq!(
        ess.get_scoped(StoreKey::protected(4), 0).map(|b| word(&b, 0)),
        Some(4),
        "e.flags bit 2"
    );
    assert_eq!(ess.get(4, 0), None, "the public key 4 is another entry");
    let mut scratch = [0u8; 8];
    let out = run_as("imm a, 9\ninsert k0\nst s.64[0], a", &[4], &mut scratch, &admin, &ess);
    assert_eq!(out.fault, Some((Fault::ReadOnly, 3)), "the MAC covers the scratchpad");
    assert_eq!(ess.get_scoped(StoreKey::protected(4), 0).map(|b| word(&b, 0)), Some(4));
}

/// Two slots share one entry only when scope and key both match.
#[test]
fn slots_naming_one_key_in_two_scopes_are_two_entries() {
    let ess = store();
    let access = Access {
        scopes: [Scope::Public, Scope::Private, Scope::Public, Scope::Public],
        ..Access::default()
    };
    let out = run_as(
        "imm a, 1\ninsert k0\nimm a, 2\ninsert k1\nlookup k0\nst s.64[0], a",
        &[6, 6],
        &mut [0; 8],
        &access,
        &ess,
    );
    assert_eq!((out.fault, out.store_writes, out.store_reads), (None, 2, 2));
    assert_eq!(ess.get(6, 0).map(|b| word(&b, 0)), Some(1));
    let private = StoreKey { scope: Scope::Private, key: 6 };
    assert_eq!(ess.get_scoped(private, 0).map(|b| word(&b, 0)), Some(2));
}

proptest::proptest! {
    /// Any decodable program: steps <= code length, the store is touched at most once per
    /// key slot each way, and a faulting run changes nothing.
    #[test]
    fn random_programs_are_bounded_and_contained(
        code in proptest::collection::vec(proptest::num::u8::ANY, 0..=64),
        words in 0usize..=4,
        returned in proptest::bool::ANY,
    ) {
        let scratch = vec![0x5au8; 8 * words];
        let ess = Ess::new(&EssConfig { capacity: 64, shards: 4, ..EssConfig::default() }).unwrap();
        let Ok(p) = decode(&code, 2) else { return Ok(()) };
        let mut packet_scratch = scratch.clone();
        let out = run(&p, &[1, 2], &mut packet_scratch, returned, &Env::default(), &[0x45; 20], &ess);
        proptest::prop_assert!(out.steps <= code.len());
        proptest::prop_assert!(out.store_reads <= 2 && out.store_writes <= 2);
        if out.fault.is_some() {
            proptest::prop_assert_eq!(&packet_scratch, &scratch);
            proptest::prop_assert_eq!(ess.stats().inserts, 0);
        }
        if out.fate == Fate::Return {
            proptest::prop_assert!(!returned);
        }
    }
}
