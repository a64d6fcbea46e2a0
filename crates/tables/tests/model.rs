//! Property tests: random operation sequences against simple reference models.

use hotplane_core::Qsbr;
use hotplane_tables::key::pack;
use hotplane_tables::*;
use proptest::prelude::*;
use std::collections::HashMap;

fn actions() -> Vec<ActionSpec> {
    vec![
        ActionSpec::new("set", &[("value", 64, true)]),
        ActionSpec::new("other", &[("a", 16, false), ("b", 64, false)]),
    ]
}

#[derive(Debug, Clone)]
enum ExactOp {
    Insert(u16, u64),
    Modify(u16, u64),
    Delete(u16),
    Lookup(u16),
    InsertOnMiss(u16),
    Write(u16, u64),
    Quiesce,
    Clear,
}

fn exact_op() -> impl Strategy<Value = ExactOp> {
    let key = 0u16..48;
    prop_oneof![
        4 => (key.clone(), any::<u64>()).prop_map(|(k, v)| ExactOp::Insert(k, v)),
        2 => (key.clone(), any::<u64>()).prop_map(|(k, v)| ExactOp::Modify(k, v)),
        3 => key.clone().prop_map(ExactOp::Delete),
        4 => key.clone().prop_map(ExactOp::Lookup),
        2 => key.clone().prop_map(ExactOp::InsertOnMiss),
        2 => (key.clone(), any::<u64>()).prop_map(|(k, v)| ExactOp::Write(k, v)),
        2 => Just(ExactOp::Quiesce),
        1 => Just(ExactOp::Clear),
    ]
}

fn key_bytes(k: u16) -> Vec<u8> {
    // A 3-byte (24-bit) key: not a whole word, to exercise padding.
    vec![0xa5, (k >> 8) as u8, k as u8]
}

fn key_words(k: u16) -> Vec<u64> {
    let mut w = vec![0u64; 1];
    pack(&key_bytes(k), &mut w);
    w
}

fn run_exact(store: Store, ops: Vec<ExactOp>) {
    let q = Qsbr::new();
    let mut cfg = TableConfig::new("t", MatchKind::Exact, 24, 32).with_actions(actions());
    cfg.store = store;
    cfg.insert_on_miss = Some(InsertOnMiss { action: "set".into(), data: vec![7] });
    let t = ExactTable::new(cfg, &q).unwrap();
    let mut reader = q.register("model");
    let mut model: HashMap<u16, u64> = HashMap::new();
    for op in ops {
        match op {
            ExactOp::Insert(k, v) => {
                let r = t.insert(&key_bytes(k), 0, &[v]);
                match (model.contains_key(&k), model.len() >= 32) {
                    (true, _) => assert_eq!(r, Err(TableError::Exists)),
                    (false, true) => assert!(matches!(r, Err(TableError::Full { .. }))),
                    (false, false) => {
                        r.unwrap();
                        model.insert(k, v);
                    }
                }
            }
            ExactOp::Modify(k, v) => {
                let r = t.modify(&key_bytes(k), 0, &[v]);
                if let Some(m) = model.get_mut(&k) {
                    r.unwrap();
                    *m = v;
                } else {
                    assert_eq!(r, Err(TableError::NotFound));
                }
            }
            ExactOp::Delete(k) => {
                let r = t.delete(&key_bytes(k));
                assert_eq!(r.is_ok(), model.remove(&k).is_some());
            }
            ExactOp::Lookup(k) => {
                let g = reader.guard();
                let got = t.lookup(&key_words(k), &g).map(|e| e.word(0));
                assert_eq!(got, model.get(&k).copied(), "lookup {k}");
            }
            ExactOp::InsertOnMiss(k) => {
                let g = reader.guard();
                match t.lookup_or_insert(&key_words(k), &g) {
                    Lookup::Hit(e) => assert_eq!(Some(e.word(0)), model.get(&k).copied()),
                    Lookup::Inserted(e) => {
                        assert!(!model.contains_key(&k));
                        assert_eq!(e.word(0), 7);
                        model.insert(k, 7);
                    }
                    Lookup::Miss => assert!(model.len() >= 32 && !model.contains_key(&k)),
                }
            }
            ExactOp::Write(k, v) => {
                let g = reader.guard();
                if let Some(e) = t.lookup(&key_words(k), &g) {
                    e.exchange_word(k % 2 == 0, 0, v);
                    model.insert(k, v);
                }
            }
            ExactOp::Quiesce => reader.quiescent(),
            ExactOp::Clear => {
                t.clear();
                model.clear();
            }
        }
        assert_eq!(t.len(), model.len());
    }
    let mut listed: Vec<(Vec<u8>, u64)> =
        t.entries().into_iter().map(|e| (e.key, e.data.data[0])).collect();
    listed.sort();
    let mut expect: Vec<(Vec<u8>, u64)> = model.iter().map(|(k, v)| (key_bytes(*k), *v)).collect();
    expect.sort();
    assert_eq!(listed, expect);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn exact_static_matches_model(ops in prop::collection::vec(exact_op(), 1..300)) {
        run_exact(Store::Static, ops);
    }

    #[test]
    fn exact_dynamic_matches_model(ops in prop::collection::vec(exact_op(), 1..300)) {
        run_exact(Store::Dynamic, ops);
    }
}

/// Longest matching prefix by brute force.
fn naive_lpm(rules: &HashMap<(u32, u32), u64>, addr: u32) -> Option<u64> {
    rules
        .iter()
        .filter(|((p, l), _)| *l == 0 || (addr ^ p) >> (32 - l) == 0)
        .max_by_key(|((_, l), _)| *l)
        .map(|(_, v)| *v)
}

fn mask32(p: u32, l: u32) -> u32 {
    if l == 0 {
        0
    } else {
        p & (u32::MAX << (32 - l))
    }
}

#[derive(Debug, Clone)]
enum LpmOp {
    Insert(u32, u32, u64),
    Delete(u32, u32),
    Probe(u32),
}

fn lpm_op() -> impl Strategy<Value = LpmOp> {
    // Addresses in 10.0.0.0/16 (plus some elsewhere), so prefixes overlap a lot.
    let addr = prop_oneof![4 => (0u32..0x1_0000).prop_map(|a| 0x0a00_0000 | a), 1 => any::<u32>()];
    prop_oneof![
        3 => (addr.clone(), 0u32..=32, any::<u64>()).prop_map(|(a, l, v)| LpmOp::Insert(a, l, v)),
        2 => (addr.clone(), 0u32..=32).prop_map(|(a, l)| LpmOp::Delete(a, l)),
        5 => addr.prop_map(LpmOp::Probe),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn lpm_ipv4_matches_brute_force(ops in prop::collection::vec(lpm_op(), 1..200)) {
        let q = Qsbr::new();
        let cfg = TableConfig::new("r", MatchKind::Lpm, 32, 256).with_actions(actions());
        let t = LpmTable::new(cfg, &q).unwrap();
        let reader = q.register("model");
        let mut rules: HashMap<(u32, u32), u64> = HashMap::new();
        for op in ops {
            match op {
                LpmOp::Insert(a, l, v) => {
                    let r = t.insert(&a.to_be_bytes(), l, 0, &[v]);
                    let key = (mask32(a, l), l);
                    if let std::collections::hash_map::Entry::Vacant(e) = rules.entry(key) {
                        r.unwrap();
                        e.insert(v);
                    } else {
                        prop_assert_eq!(r, Err(TableError::Exists));
                    }
                }
                LpmOp::Delete(a, l) => {
                    let r = t.delete(&a.to_be_bytes(), l);
                    prop_assert_eq!(r.is_ok(), rules.remove(&(mask32(a, l), l)).is_some());
                }
                LpmOp::Probe(a) => {
                    let g = reader.guard();
                    let want = naive_lpm(&rules, a);
                    prop_assert_eq!(t.lookup_u32(a, &g).map(|e| e.word(0)), want);
                    prop_assert_eq!(t.lookup(&a.to_be_bytes(), &g).map(|e| e.word(0)), want);
                    // The bulk path (prefetching, two passes) agrees with the single one.
                    let keys: Vec<u32> = (0..70u32).map(|i| a ^ i.wrapping_mul(0x0101_0101)).collect();
                    let mut out = vec![None; keys.len()];
                    t.lookup_u32_bulk(&keys, &mut out, &g);
                    for (k, o) in keys.iter().zip(&out) {
                        prop_assert_eq!(o.map(|e| e.word(0)), naive_lpm(&rules, *k));
                    }
                    // Every rule's own edges resolve correctly too.
                    for &(p, l) in rules.keys().take(8) {
                        let last = p | if l == 32 { 0 } else { u32::MAX >> l };
                        for x in [p, last] {
                            prop_assert_eq!(t.lookup_u32(x, &g).map(|e| e.word(0)), naive_lpm(&rules, x));
                        }
                    }
                }
            }
        }
        prop_assert_eq!(t.len(), rules.len());
    }

    #[test]
    fn lpm_ipv6_matches_brute_force(
        rules in prop::collection::vec((any::<u16>(), 0u32..=128, any::<u64>()), 1..40),
        probes in prop::collection::vec((any::<u16>(), any::<u64>()), 1..60),
        deletes in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        // Addresses 2001:db8:X::... with X and the low bits varied: deep and shallow prefixes.
        let addr = |x: u16, low: u64| -> u128 { 0x2001_0db8u128 << 96 | (x as u128) << 80 | low as u128 };
        let q = Qsbr::new();
        let cfg = TableConfig::new("r6", MatchKind::Lpm, 128, 64).with_actions(actions());
        let t = LpmTable::new(cfg, &q).unwrap();
        let reader = q.register("model");
        let masked = |a: u128, l: u32| if l == 0 { 0 } else { a & (u128::MAX << (128 - l)) };
        let mut model: HashMap<(u128, u32), u64> = HashMap::new();
        for &(x, l, v) in &rules {
            let a = addr(x, v);
            let key = (masked(a, l), l);
            let r = t.insert(&a.to_be_bytes(), l, 0, &[v]);
            prop_assert_eq!(r.is_ok(), !model.contains_key(&key));
            model.entry(key).or_insert(v);
        }
        for d in deletes {
            let keys: Vec<_> = model.keys().copied().collect();
            let (p, l) = keys[d.index(keys.len())];
            t.delete(&p.to_be_bytes(), l).unwrap();
            model.remove(&(p, l));
            if model.is_empty() { break; }
        }
        let g = reader.guard();
        for (x, low) in probes {
            for a in [addr(x, low), addr(x, 0), addr(rules[0].0, low)] {
                let want = model.iter().filter(|((p, l), _)| masked(a, *l) == *p).max_by_key(|((_, l), _)| *l).map(|(_, v)| *v);
                prop_assert_eq!(t.lookup(&a.to_be_bytes(), &g).map(|e| e.word(0)), want);
            }
        }
    }

    #[test]
    fn ternary_matches_brute_force(
        rules in prop::collection::vec((any::<u16>(), prop::sample::select(vec![0xffffu16, 0xff00, 0xf0f0, 0x00ff, 0x8000, 0]), any::<bool>(), any::<u16>()), 1..60),
        probes in prop::collection::vec(any::<u16>(), 1..100),
    ) {
        let q = Qsbr::new();
        let cfg = TableConfig::new("acl", MatchKind::Ternary, 16, 128).with_actions(actions());
        let t = TernaryTable::new(cfg, &q).unwrap();
        let reader = q.register("model");
        // (matches?, priority, value): unique priorities, so the answer is unique.
        type Rule = (Box<dyn Fn(u16) -> bool>, u32, u64);
        let mut model: Vec<Rule> = vec![];
        for (i, &(v, m, range, other)) in rules.iter().enumerate() {
            let prio = i as u32 * 7 % 1000 + i as u32 * 1000;
            if range {
                let (lo, hi) = (v.min(other), v.max(other));
                t.insert(TernaryMatch::Range { lo: lo as u64, hi: hi as u64 }, prio, 0, &[i as u64]).unwrap();
                model.push((Box::new(move |k| (lo..=hi).contains(&k)), prio, i as u64));
            } else {
                t.insert(TernaryMatch::Mask { value: v.to_be_bytes().to_vec(), mask: m.to_be_bytes().to_vec() }, prio, 0, &[i as u64]).unwrap();
                model.push((Box::new(move |k| k & m == v & m), prio, i as u64));
            }
        }
        let g = reader.guard();
        for k in probes.into_iter().chain(rules.iter().map(|r| r.0)) {
            let want = model.iter().filter(|(f, _, _)| f(k)).max_by_key(|(_, p, _)| *p).map(|(_, _, v)| *v);
            let mut w = [0u64];
            pack(&k.to_be_bytes(), &mut w);
            prop_assert_eq!(t.lookup(&w, &g).map(|e| e.word(0)), want, "key {:#06x}", k);
        }
    }
}

#[test]
fn range_expansion_covers_exactly() {
    for (lo, hi) in [(0u64, 65535u64), (1, 1), (3, 12), (1000, 1023), (1, 65534), (80, 80)] {
        let pairs = expand_range(lo, hi, 16);
        assert!(pairs.len() <= 30, "{lo}..{hi}: {} pairs", pairs.len());
        for k in 0..=65535u64 {
            let n = pairs.iter().filter(|(v, m)| k & m == *v).count();
            assert_eq!(n, usize::from((lo..=hi).contains(&k)), "{k} in {lo}..={hi}");
        }
    }
    assert!(expand_range(5, 4, 16).is_empty());
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let q = Qsbr::new();
    let set = TableSet::new();
    let t = set
        .create(TableConfig::new("t", MatchKind::Exact, 12, 4).with_actions(actions()), &q)
        .unwrap();
    let e = t.insert(&MatchSpec::Exact(vec![1, 2, 3]), 0, "set", &[1]).unwrap_err();
    assert!(e.to_string().contains("takes 2"), "{e}");
    let e = t.insert(&MatchSpec::Exact(vec![0x10, 0]), 0, "set", &[1]).unwrap_err();
    assert!(e.to_string().contains("wider than"), "{e}");
    let e = t.insert(&MatchSpec::Exact(vec![0, 1]), 0, "nope", &[1]).unwrap_err();
    assert!(e.to_string().contains("not an action"), "{e}");
    let e = t.insert(&MatchSpec::Exact(vec![0, 1]), 0, "set", &[1, 2]).unwrap_err();
    assert!(e.to_string().contains("takes 1 data words"), "{e}");
    let e = t.insert(&MatchSpec::Lpm { prefix: vec![0, 1], len: 3 }, 0, "set", &[1]).unwrap_err();
    assert!(matches!(e, TableError::BadKey { .. }), "{e}");
    assert!(t.is_empty());
    assert!(matches!(set.get("zz"), Err(TableError::NoSuchTable(_))));
    let mut bad = TableConfig::new("t", MatchKind::Lpm, 12, 4);
    assert!(bad.validate().is_err());
    bad.key_bits = 16;
    bad.size = 0;
    assert!(bad.validate().is_err());
}

#[test]
fn match_specs_convert_the_same_way_for_every_operation() {
    let q = Qsbr::new();
    let set = TableSet::new();
    let lpm = set
        .create(TableConfig::new("l", MatchKind::Lpm, 16, 8).with_actions(actions()), &q)
        .unwrap();
    // An exact key is an LPM table's full-length prefix for insert, modify and delete alike.
    let full = MatchSpec::Exact(vec![0x12, 0x34]);
    lpm.insert(&full, 0, "set", &[1]).unwrap();
    lpm.modify(&full, 0, "set", &[2]).unwrap();
    let reader = q.register("specs");
    let g = reader.guard();
    assert_eq!(lpm.lookup(&[0x12, 0x34], &g).map(|e| e.word(0)), Some(2));
    lpm.delete(&full, 0).unwrap();
    assert!(lpm.is_empty());

    // A prefix in a ternary table is the mask of its leading bits.
    let ter = set
        .create(TableConfig::new("t", MatchKind::Ternary, 16, 8).with_actions(actions()), &q)
        .unwrap();
    ter.insert(&MatchSpec::Lpm { prefix: vec![0xa0, 0], len: 3 }, 1, "set", &[7]).unwrap();
    let g = reader.guard();
    assert_eq!(ter.lookup(&[0xbf, 0xff], &g).map(|e| e.word(0)), Some(7));
    assert!(ter.lookup(&[0xc0, 0], &g).is_none());
}

/// Found by the model test: a full table answered `Full` for a key it already held.
#[test]
fn a_full_exact_table_still_says_a_held_key_exists() {
    for store in [Store::Static, Store::Dynamic] {
        let q = Qsbr::new();
        let mut cfg = TableConfig::new("t", MatchKind::Exact, 24, 32).with_actions(actions());
        cfg.store = store;
        let t = ExactTable::new(cfg, &q).unwrap();
        for k in 0..32u16 {
            t.insert(&key_bytes(k), 0, &[k as u64]).unwrap();
        }
        assert_eq!(t.insert(&key_bytes(5), 0, &[1]), Err(TableError::Exists), "{store:?}");
        assert!(matches!(t.insert(&key_bytes(99), 0, &[1]), Err(TableError::Full { .. })));
    }
}
