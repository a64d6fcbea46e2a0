use super::*;
use std::hash::{BuildHasherDefault, Hasher};

const SECOND: u64 = 1_000_000_000;

fn bank(word0: u64) -> BankBytes {
    let mut b = [0u8; BANK_LEN];
    b[..8].copy_from_slice(&word0.to_be_bytes());
    b
}

/// Every key hashes to the same place: what an attacker would want.
#[derive(Default)]
struct Colliding;
impl Hasher for Colliding {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, _: &[u8]) {}
}

#[test]
fn entries_live_tau_from_creation_without_refresh() {
    let ess = Ess::new(&EssConfig::default()).unwrap();
    assert_eq!(ess.put(7, &bank(1), 0), Ok(true));
    assert_eq!(ess.put(7, &bank(2), 9 * SECOND), Ok(false), "an update, not a re-creation");
    assert_eq!(ess.get(7, 10 * SECOND - 1), Some(bank(2)), "readable until ctime + tau");
    assert_eq!(ess.get(7, 10 * SECOND), None, "gone at ctime + tau despite the update");
    assert_eq!(ess.put(7, &bank(3), 10 * SECOND), Ok(true), "a new life");
    assert_eq!(ess.get(7, 19 * SECOND), Some(bank(3)));
}

#[test]
fn expiry_reclaims_in_creation_order_and_counts() {
    let config = EssConfig { shards: 1, capacity: 100, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    for key in 0..10u64 {
        ess.put(key, &bank(key), key * SECOND).unwrap();
    }
    assert_eq!(ess.stats().live, 10);
    // At 13 s the entries born at 0..=3 s are expired; housekeeping frees exactly them.
    assert_eq!(ess.housekeeping(13 * SECOND, 100), 4);
    let stats = ess.stats();
    assert_eq!((stats.live, stats.expired), (6, 4));
    assert_eq!(ess.get(4, 13 * SECOND), Some(bank(4)));
}

#[test]
fn capacity_refuses_creations_but_not_updates() {
    let config = EssConfig { shards: 1, capacity: 3, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    for key in 0..3 {
        assert_eq!(ess.put(key, &bank(0), 0), Ok(true));
    }
    assert_eq!(ess.put(99, &bank(0), 0), Err(Refusal::Full));
    assert_eq!(ess.put(1, &bank(5), 0), Ok(false));
    assert_eq!(ess.stats().refused_full, 1);
    // Once the old entries expire, room comes back without a housekeeping call.
    assert_eq!(ess.put(99, &bank(0), 10 * SECOND), Ok(true));
}

#[test]
fn colliding_keys_cannot_build_a_chain_longer_than_max_probe() {
    let config = EssConfig { shards: 4, capacity: 1000, max_probe: 8, ..EssConfig::default() };
    let ess = Ess::with_hasher(&config, BuildHasherDefault::<Colliding>::default()).unwrap();
    for key in 0..8 {
        assert_eq!(ess.put(key, &bank(key), 0), Ok(true));
    }
    for key in 8..100 {
        assert_eq!(ess.put(key, &bank(key), 0), Err(Refusal::ProbeLimit));
    }
    let stats = ess.stats();
    assert_eq!(stats.refused_probe, 92);
    assert!(stats.max_probe_seen <= 8);
    assert_eq!(ess.get(3, 0), Some(bank(3)));
    assert_eq!(ess.get(50, 0), None);
}

/// A failed displacement is remembered only while nothing can have changed: room made by an
/// entry that expires (a later tick) or one that is freed is found again.
#[test]
fn colliding_keys_get_room_again_when_an_entry_goes() {
    let config = EssConfig { shards: 1, capacity: 100, max_probe: 8, ..EssConfig::default() };
    let ess = Ess::with_hasher(&config, BuildHasherDefault::<Colliding>::default()).unwrap();
    for key in 0..8 {
        assert_eq!(ess.put(key, &bank(key), key * SECOND), Ok(true));
    }
    assert_eq!(ess.put(100, &bank(0), 8 * SECOND), Err(Refusal::ProbeLimit));
    let again = ess.put(101, &bank(0), 8 * SECOND);
    assert_eq!(again, Err(Refusal::ProbeLimit), "remembered: still full");
    // Key 0's entry expires at tau: its slot is room again, at once.
    let tau = ess.lifetime_ns();
    assert_eq!(ess.put(102, &bank(0), tau), Ok(true));
    assert_eq!(ess.put(103, &bank(0), tau), Err(Refusal::ProbeLimit));
}

/// A key `get` saw missing is created where `get` saw room, without a second probe, only while
/// nothing changed: two slots naming one missing key make one entry, not two.
#[test]
fn a_missing_key_is_created_once_whatever_the_slots() {
    let ess = Ess::new(&EssConfig { shards: 1, ..EssConfig::default() }).unwrap();
    let mut txn = ess.begin(&[5, 5, 6], 0);
    assert_eq!((txn.get(0), txn.get(1), txn.get(2)), (None, None, None));
    assert_eq!(txn.put(0, &bank(1)), Ok(true));
    assert_eq!(txn.put(1, &bank(2)), Ok(false), "the same key: an update");
    assert_eq!(txn.put(2, &bank(3)), Ok(true), "another key, after the table changed");
    drop(txn);
    let stats = ess.stats();
    assert_eq!((stats.live, stats.inserts, stats.updates), (2, 2, 1));
    assert_eq!((ess.get(5, 0), ess.get(6, 0)), (Some(bank(2)), Some(bank(3))));
}

#[test]
fn transaction_reads_and_writes_keys_in_shared_shards() {
    let config = EssConfig { shards: 2, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    ess.put(1, &bank(10), 0).unwrap();
    {
        let mut txn = ess.begin(&[1, 2, 3, 1], 0);
        assert_eq!(txn.get(0), Some(bank(10)));
        assert_eq!(txn.get(1), None);
        assert_eq!(txn.put(1, &bank(20)), Ok(true));
        assert_eq!(txn.put(3, &bank(11)), Ok(false), "slot 3 names key 1 again");
        assert_eq!(txn.get(4), None);
    }
    assert_eq!(ess.get(1, 0), Some(bank(11)));
    assert_eq!(ess.get(2, 0), Some(bank(20)));
}

#[test]
fn concurrent_transactions_do_not_lose_increments() {
    let ess = Ess::new(&EssConfig::default()).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..1000 {
                    let mut txn = ess.begin(&[5, 6], 0);
                    for slot in 0..2 {
                        let old = txn
                            .get(slot)
                            .map_or(0, |b| u64::from_be_bytes(b[..8].try_into().unwrap()));
                        txn.put(slot, &bank(old + 1)).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(ess.get(5, 0), Some(bank(4000)));
    assert_eq!(ess.get(6, 0), Some(bank(4000)));
}

#[test]
fn scopes_are_separate_namespaces() {
    let ess = Ess::new(&EssConfig::default()).unwrap();
    let private = StoreKey { scope: Scope::Private, key: 7 };
    assert_eq!(ess.put(7, &bank(1), 0), Ok(true));
    assert_eq!(ess.put_scoped(StoreKey::protected(7), &bank(2), 0), Ok(true));
    assert_eq!(ess.put_scoped(private, &bank(3), 0), Ok(true));
    assert_eq!(ess.get(7, 0), Some(bank(1)));
    assert_eq!(ess.get_scoped(StoreKey::protected(7), 0), Some(bank(2)));
    assert_eq!(ess.get_scoped(private, 0), Some(bank(3)));
    assert_eq!(ess.stats().live, 3);
    // Private keys depend on the code and the key, and on nothing a packet can see.
    let only = PrivateSlot::ONLY;
    let (a, b) = (ess.private_key(&[0x01], only, 7), ess.private_key(&[0x02], only, 7));
    assert_ne!(a, b);
    assert_ne!(a, ess.private_key(&[0x01], only, 8));
    assert_eq!(a, ess.private_key(&[0x01], only, 7));
    let second = PrivateSlot { slot: 1, key_count: 2, scopes: 0b1000 };
    assert_ne!(a, ess.private_key(&[0x01], second, 7), "bound to its slot");
    let other = Ess::new(&EssConfig::default()).unwrap();
    assert_ne!(a, other.private_key(&[0x01], only, 7), "a per-store secret");
}

#[test]
fn quota_limits_each_aggregate_above_the_fill_threshold() {
    let config = EssConfig { shards: 1, capacity: 100, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    let quota = Quota { above_percent: 50, share_percent: 10 };
    // Aggregates share a bucket one time in 1024 (a per-store secret): pick two that do not.
    let other = (2..).find(|&a| ess.owner_of(a) != ess.owner_of(1)).unwrap();
    let (greedy, modest) =
        (Admission { aggregate: 1, quota }, Admission { aggregate: other, quota });
    let create = |who: Admission, key: u64, now: u64| {
        let mut txn = ess.begin_scoped(&[StoreKey::public(key)], now, Some(who));
        txn.put(0, &bank(key))
    };
    // Below half full nothing limits the greedy aggregate; from then on it is over its 10.
    for key in 0..50 {
        assert_eq!(create(greedy, key, 0), Ok(true));
    }
    assert_eq!(create(greedy, 50, 0), Err(Refusal::Quota));
    assert_eq!(ess.aggregate_entries(1), 50);
    // Updates are never limited; the modest aggregate gets its share.
    assert_eq!(create(greedy, 3, 0), Ok(false));
    for key in 100..110 {
        assert_eq!(create(modest, key, 0), Ok(true));
    }
    assert_eq!(create(modest, 110, 0), Err(Refusal::Quota));
    // Entries outside admissions (operator, admin packets) are not limited.
    assert_eq!(ess.put(200, &bank(0), 0), Ok(true));
    let stats = ess.stats();
    assert_eq!((stats.live, stats.refused_quota, stats.refused_full), (61, 2, 0));
    // When the greedy entries expire, their counts go with them.
    assert_eq!(ess.housekeeping(10 * SECOND, 1000), 61);
    assert_eq!((ess.aggregate_entries(1), ess.aggregate_entries(other)), (0, 0));
    assert_eq!(create(greedy, 50, 10 * SECOND), Ok(true));
}

#[test]
fn a_taken_over_slot_releases_its_quota_count() {
    let config = EssConfig { shards: 1, capacity: 4, max_probe: 8, ..EssConfig::default() };
    let ess = Ess::with_hasher(&config, BuildHasherDefault::<Colliding>::default()).unwrap();
    let quota = Quota { above_percent: 0, share_percent: 100 };
    let who = Admission { aggregate: 9, quota };
    ess.begin_scoped(&[StoreKey::public(1)], 0, Some(who)).put(0, &bank(1)).unwrap();
    assert_eq!(ess.aggregate_entries(9), 1);
    // Expired but not reclaimed (the births queue is not popped by a takeover).
    let mut txn = ess.begin_scoped(&[StoreKey::public(2)], 10 * SECOND, None);
    assert_eq!(txn.put(0, &bank(2)), Ok(true));
    drop(txn);
    assert_eq!(ess.aggregate_entries(9), 0);
    assert_eq!(ess.stats().live, 1);
}

#[test]
fn quota_limits_follow_the_percentages() {
    let quota = Quota { above_percent: 50, share_percent: 10 };
    assert_eq!(quota.limit(49, 100), None);
    assert_eq!(quota.limit(50, 100), Some(10));
    assert_eq!(quota.limit(5, 8), Some(1), "at least one entry");
    assert_eq!(Quota::OFF.limit(100, 100), None);
}

#[test]
fn bad_configs_are_refused() {
    let with = |f: fn(&mut EssConfig)| {
        let mut c = EssConfig::default();
        f(&mut c);
        Ess::new(&c).err()
    };
    assert_eq!(with(|c| c.capacity = 0), Some(EssConfigError::Capacity));
    assert_eq!(with(|c| c.lifetime_ns = 0), Some(EssConfigError::Lifetime));
    assert_eq!(with(|c| c.max_probe = 0), Some(EssConfigError::MaxProbe));
    assert_eq!(with(|c| c.shards = 3), Some(EssConfigError::Shards));
    assert_eq!(with(|c| c.capacity = 63), Some(EssConfigError::Capacity), "< one per shard");
    assert_eq!(with(|c| c.capacity = MAX_CAPACITY + 1), Some(EssConfigError::Capacity));
    assert_eq!(with(|c| c.capacity = 64), None);
}

fn word(bank: &BankBytes, index: usize) -> u64 {
    u64::from_be_bytes(bank[8 * index..8 * index + 8].try_into().unwrap())
}

#[test]
fn a_store_of_64_bit_entries_costs_at_most_32_bytes_per_entry() {
    let config = EssConfig { capacity: 1 << 20, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    let per_entry = ess.memory_bytes() as f64 / config.capacity as f64;
    assert!(per_entry <= 32.0, "{per_entry} bytes per entry");
    // And the slots are really there: not the bound of an empty allocation.
    assert!(per_entry >= 24.0, "{per_entry} bytes per entry");
}

#[test]
fn a_store_fills_to_its_capacity_with_few_window_refusals() {
    let config = EssConfig { shards: 4, capacity: 40_000, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut created = 0;
    while created + ess.stats().refused_probe < 40_000 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        if ess.put(state, &bank(state), 0) == Ok(true) {
            created += 1;
        }
    }
    let stats = ess.stats();
    // Two windows and one level of displacement at 7/8 load: a fraction of a percent.
    assert!(stats.refused_probe < 400, "{stats:?}");
    assert_eq!(stats.live, created);
    assert!(stats.max_probe_seen <= 8);
}

#[test]
fn wide_banks_round_trip_and_plain_ones_take_no_extension() {
    let ess = Ess::new(&EssConfig::default()).unwrap();
    let mut wide = bank(1);
    wide[8..16].copy_from_slice(&7u64.to_be_bytes());
    wide[31] = 9;
    assert_eq!(ess.put(1, &bank(5), 0), Ok(true));
    assert_eq!(ess.put(2, &wide, 0), Ok(true));
    assert_eq!(ess.extensions_in_use(), 1);
    assert_eq!(ess.get(1, 0), Some(bank(5)), "words 1..3 read as zero");
    assert_eq!(ess.get(2, 0), Some(wide));
    assert_eq!((word(&wide, 1), word(&wide, 3)), (7, 9));
    // Narrowing gives the extension back; widening again takes one.
    assert_eq!(ess.put(2, &bank(3), 0), Ok(false));
    assert_eq!((ess.get(2, 0), ess.extensions_in_use()), (Some(bank(3)), 0));
    assert_eq!(ess.put(1, &wide, 0), Ok(false));
    assert_eq!((ess.get(1, 0), ess.extensions_in_use()), (Some(wide), 1));
    // Expiry frees it too.
    assert_eq!(ess.housekeeping(10 * SECOND, 1 << 20), 2);
    assert_eq!(ess.extensions_in_use(), 0);
}

#[test]
fn an_empty_extension_pool_refuses_wide_writes_as_full() {
    // One shard of 100 entries: 12 % of it, but at least 16 extensions.
    let config = EssConfig { shards: 1, capacity: 100, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    let mut wide = bank(1);
    wide[16] = 1;
    for key in 0..16 {
        assert_eq!(ess.put(key, &wide, 0), Ok(true), "key {key}");
    }
    assert_eq!(ess.put(16, &wide, 0), Err(Refusal::Full), "a wide creation");
    assert_eq!(ess.get(16, 0), None, "nothing created");
    assert_eq!(ess.put(16, &bank(1), 0), Ok(true), "a plain one is still welcome");
    assert_eq!(ess.put(16, &wide, 0), Err(Refusal::Full), "widening an update");
    assert_eq!(ess.get(16, 0), Some(bank(1)), "the entry keeps its bank");
    let stats = ess.stats();
    assert_eq!((stats.refused_full, stats.live, stats.inserts), (2, 17, 17));
    // A narrowed entry's extension serves the next wide write.
    assert_eq!(ess.put(0, &bank(0), 0), Ok(false));
    assert_eq!(ess.put(16, &wide, 0), Ok(false));
    assert_eq!(ess.get(16, 0), Some(wide));
}

#[test]
fn creations_sweep_expired_entries_and_release_their_quota_counts() {
    let config = EssConfig { shards: 1, capacity: 64, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    let who = Admission { aggregate: 3, quota: Quota::OFF };
    let create = |key: u64, now: u64| {
        ess.begin_scoped(&[StoreKey::public(key)], now, Some(who)).put(0, &bank(key))
    };
    for key in 0..20 {
        assert_eq!(create(key, 0), Ok(true));
    }
    assert_eq!(ess.aggregate_entries(3), 20);
    // Later creations (of other keys, elsewhere in the table) move the sweep hand over every
    // slot (4 per creation, 74 slots): all 20 old entries are freed without housekeeping.
    for key in 1000..1030 {
        assert_eq!(ess.put(key, &bank(key), 10 * SECOND), Ok(true));
    }
    let stats = ess.stats();
    assert_eq!((stats.live, stats.expired), (30, 20), "{stats:?}");
    assert_eq!(ess.aggregate_entries(3), 0);
    assert_eq!(ess.get(5, 10 * SECOND), None);
}

#[test]
fn expired_entries_are_invisible_at_once_whether_swept_or_not() {
    let config = EssConfig { shards: 1, capacity: 64, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    ess.put(1, &bank(1), 0).unwrap();
    assert_eq!(ess.stats().live, 1, "not swept yet");
    let mut txn = ess.begin(&[1], 10 * SECOND);
    assert_eq!(txn.get(0), None);
    assert_eq!(txn.put(0, &bank(2)), Ok(true), "a new life, not an update");
}

#[test]
fn lifetimes_are_tau_to_within_one_tick_and_never_longer() {
    // tau = 10 s: ticks of 2^17 ns (131 us). An entry created on a tick boundary lives exactly
    // tau; one created within a tick loses that offset (the old store kept exact ns).
    let ess = Ess::new(&EssConfig::default()).unwrap();
    let tick = 1u64 << 17;
    let on_tick = 5 * tick;
    let mid_tick = 1_000 * tick + tick / 2;
    ess.put(1, &bank(1), on_tick).unwrap();
    ess.put(2, &bank(2), mid_tick).unwrap();
    assert!(ess.get(1, on_tick + 10 * SECOND - 1).is_some());
    assert!(ess.get(1, on_tick + 10 * SECOND).is_none());
    assert!(ess.get(2, mid_tick + 10 * SECOND - tick / 2 - 1).is_some(), "tau less the offset");
    assert!(ess.get(2, mid_tick + 10 * SECOND - tick / 2).is_none(), "never past tau");
    // A tiny tau has ticks of 1 ns: exact.
    let small = EssConfig { lifetime_ns: 1_000, ..EssConfig::default() };
    let ess = Ess::new(&small).unwrap();
    ess.put(1, &bank(1), 12_345).unwrap();
    assert!(ess.get(1, 13_344).is_some());
    assert!(ess.get(1, 13_345).is_none());
}

#[test]
fn a_lagging_worker_clock_does_not_kill_a_fresh_entry() {
    let ess = Ess::new(&EssConfig::default()).unwrap();
    let now = 1_000 * SECOND;
    ess.put(1, &bank(1), now).unwrap();
    // Another worker's batch time, a little older than the creation's.
    assert_eq!(ess.get(1, now - 3_000_000), Some(bank(1)));
    assert_eq!(ess.housekeeping(now - 3_000_000, 1000), 0);
    assert_eq!(ess.stats().live, 1);
}

#[test]
fn u32_creation_ticks_never_wrap_into_life() {
    // tau = 1 us: ticks of 1 ns, so u32 ticks wrap every 4.3 s.
    let config = EssConfig { shards: 1, capacity: 64, lifetime_ns: 1_000, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    let wrap = 1u64 << 32;
    ess.put(1, &bank(1), 100).unwrap();
    // An idle shard: the next operation comes exactly one wrap later (and at 1.5 wraps).
    assert_eq!(ess.get(1, 100 + wrap), None, "same u32 tick, long dead");
    assert_eq!(ess.stats().live, 0, "the whole idle shard was freed");
    ess.put(2, &bank(2), 100).unwrap();
    assert_eq!(ess.get(2, 100 + wrap + wrap / 2), None, "an age past 2^31 ticks");
    // A busy shard: entries created all along, one read every 2^29 ns over three wraps.
    for step in 0..24u64 {
        let now = 1_000 + step * (1 << 29);
        assert_eq!(ess.get(7, now), None, "step {step}");
        ess.put(7, &bank(step), now).unwrap();
        assert_eq!(ess.get(7, now + 999), Some(bank(step)));
        assert_eq!(ess.get(7, now + 1_000), None);
    }
}

#[test]
fn spinlocks_keep_transactions_exclusive_under_contention() {
    // Two shards, eight threads, each transaction over keys of both: every increment lands.
    let config = EssConfig { shards: 2, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    let keys: Vec<u64> = (0..4).collect();
    std::thread::scope(|scope| {
        for thread in 0..8 {
            let (ess, keys) = (&ess, &keys);
            scope.spawn(move || {
                for round in 0..500 {
                    // Keys in a thread-dependent order: the shard order still is ascending.
                    let mut mine = [0u64; 4];
                    for (i, key) in mine.iter_mut().enumerate() {
                        *key = keys[(i + thread + round) % 4];
                    }
                    let mut txn = ess.begin(&mine, 0);
                    for slot in 0..4 {
                        let old = txn.get(slot).map_or(0, |b| word(&b, 0));
                        txn.put(slot, &bank(old + 1)).unwrap();
                    }
                }
            });
        }
    });
    for key in 0..4 {
        assert_eq!(ess.get(key, 0), Some(bank(4000)), "key {key}");
    }
}

#[test]
fn a_put_after_a_get_does_not_probe_again_unless_the_entry_moved() {
    let config = EssConfig { shards: 1, capacity: 64, max_probe: 8, ..EssConfig::default() };
    let ess = Ess::with_hasher(&config, BuildHasherDefault::<Colliding>::default()).unwrap();
    for key in 0..7 {
        ess.put(key, &bank(key), 0).unwrap();
    }
    let mut txn = ess.begin(&[6, 6], 0);
    assert_eq!(txn.get(0), Some(bank(6)));
    assert_eq!(txn.put(0, &bank(60)), Ok(false));
    assert_eq!(txn.put(1, &bank(61)), Ok(false), "the same entry through another slot");
    drop(txn);
    assert_eq!(ess.get(6, 0), Some(bank(61)));
    assert_eq!(ess.stats().updates, 2);
}

#[test]
fn a_transaction_is_small_and_holds_no_guards() {
    // Made once per packet and moved into the VPU: keys, scopes, hashes, found slots (or the
    // room seen for missing keys, with 16 bits of table version) and the locked shard
    // indices, nothing else.
    assert!(std::mem::size_of::<Txn<'_>>() <= 136, "{}", std::mem::size_of::<Txn<'_>>());
}

#[test]
fn a_slow_sweep_cannot_let_an_old_entry_wrap_into_life() {
    // tau = 1 us (1 ns ticks, u32 ages wrap every 4.3 s) and a shard of 11429 slots: creations
    // every 2^28 ns move the hand 4 slots each, far too slowly to reach entry 1 in time.
    let config =
        EssConfig { shards: 1, capacity: 10_000, lifetime_ns: 1_000, ..EssConfig::default() };
    let ess = Ess::new(&config).unwrap();
    ess.put(1, &bank(1), 0).unwrap();
    for step in 1..16u64 {
        ess.put(1_000 + step, &bank(step), step << 28).unwrap();
    }
    // Entry 1's recorded tick, one wrap later, would read as age 0.
    assert_eq!(ess.get(1, 1 << 32), None);
    assert_eq!(ess.get(1, (1 << 32) + 500), None);
    assert!(ess.stats().expired >= 1);
}

#[cfg(target_os = "linux")]
#[test]
fn a_large_store_costs_resident_memory_only_as_it_fills() {
    let resident = || {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        statm.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap() * 4096
    };
    let before = resident();
    let ess = Ess::new(&EssConfig { capacity: 1 << 24, ..EssConfig::default() }).unwrap();
    assert!(ess.memory_bytes() > 400 << 20, "{} bytes", ess.memory_bytes());
    // The tables are allocated zeroed: their pages are the kernel's until written. (A margin
    // for the other tests of this process.)
    let grown = resident().saturating_sub(before);
    assert!(grown < 64 << 20, "{grown} bytes resident for an empty store");
    ess.put(1, &bank(1), 0).unwrap();
    assert_eq!(ess.get(1, 0), Some(bank(1)));
}
