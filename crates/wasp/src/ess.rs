//! The ephemeral state store (ESS): 64-bit keys -> 32-byte banks that live `tau` from creation
//! (no refresh), as in ESP/WASP (`docs/wasp.md` §6).
//!
//! Bounded by construction, so that a hostile packet stream cannot make it slow:
//! - the index is open addressing over a window of `max_probe` slots from the key's home: a key
//!   is found, or placed, inside its window or not at all (a full window refuses the creation and
//!   counts it), so every operation reads at most `max_probe` slots;
//! - the hash is keyed by a per-start random secret (`RandomState`), so colliding keys cannot be
//!   computed off-line;
//! - expiry follows a per-shard FIFO in creation order (with a fixed `tau`, creation order is
//!   expiry order); every operation reclaims at most [`RECLAIM_PER_OP`] expired entries, and an
//!   expired entry is invisible before it is reclaimed, so nothing ever scans the store;
//! - workers share the store through 64 shards with one mutex each; a program's transaction
//!   ([`Txn`]) locks the shards of its (at most four) declared keys in ascending order, which
//!   cannot deadlock, and holds them for at most one bounded program run.

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::wire::MAX_KEYS;

/// Bytes of one entry's bank (the seed's two adjacent 64-bit entries, or four words).
pub const BANK_LEN: usize = 32;
pub type BankBytes = [u8; BANK_LEN];

/// Expired entries reclaimed by each store operation in its shard, at most.
pub const RECLAIM_PER_OP: usize = 4;
/// Expired entries an operation that would otherwise be refused as full may reclaim first.
const RECLAIM_WHEN_FULL: usize = 32;
const EMPTY: u64 = u64::MAX;
/// Most entries a store may hold (about 2.5 GB at today's per-entry cost).
pub const MAX_CAPACITY: usize = 1 << 24;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EssConfig {
    /// Live entries the store holds at most (split evenly over the shards).
    pub capacity: usize,
    /// Lifetime of an entry from its creation, ns (the seed's tau, default 10 s).
    pub lifetime_ns: u64,
    /// Slots a key may be placed in from its home (the "maximum chain length").
    pub max_probe: usize,
    /// Number of independently locked shards (a power of two).
    pub shards: usize,
}

impl Default for EssConfig {
    fn default() -> Self {
        EssConfig { capacity: 1 << 16, lifetime_ns: 10_000_000_000, max_probe: 8, shards: 64 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EssConfigError {
    #[error("ESS capacity must be at least one entry per shard and at most 2^24 entries")]
    Capacity,
    #[error("ESS lifetime must be above 0 ns")]
    Lifetime,
    #[error("ESS max_probe must be within 1..=64")]
    MaxProbe,
    #[error("ESS shards must be a power of two within 1..=1024")]
    Shards,
}

/// Why a write was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("store full")]
    Full,
    #[error("probe window full")]
    ProbeLimit,
}

/// Counters (monotonic except `live`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EssStats {
    pub live: u64,
    pub inserts: u64,
    pub updates: u64,
    pub refused_full: u64,
    pub refused_probe: u64,
    pub expired: u64,
    /// Longest probe (slots read before a hit or a placement) seen so far.
    pub max_probe_seen: u64,
}

#[derive(Default)]
struct Counters {
    inserts: AtomicU64,
    updates: AtomicU64,
    refused_full: AtomicU64,
    refused_probe: AtomicU64,
    expired: AtomicU64,
    max_probe_seen: AtomicU64,
}

/// A creation, for expiry: the slot it went to and what it held then.
#[derive(Clone, Copy)]
struct Birth {
    slot: u32,
    key: u64,
    born: u64,
}

struct Shard {
    keys: Vec<u64>,
    /// Creation time per slot, `EMPTY` for a free slot.
    born: Vec<u64>,
    banks: Vec<BankBytes>,
    mask: usize,
    /// Creations in order; records whose slot was since reused are skipped when popped.
    births: VecDeque<Birth>,
    births_cap: usize,
    live: usize,
    limit: usize,
}

struct Found {
    /// The slot holding the key alive, if any.
    hit: Option<usize>,
    /// The first slot of the window a new entry may take (free or expired).
    free: Option<usize>,
    /// Slots read.
    probes: usize,
}

impl Shard {
    fn new(limit: usize, max_probe: usize) -> Shard {
        let size = (limit * 2).max(max_probe).next_power_of_two();
        let births_cap = limit * 2 + RECLAIM_WHEN_FULL;
        Shard {
            keys: vec![0; size],
            born: vec![EMPTY; size],
            banks: vec![[0; BANK_LEN]; size],
            mask: size - 1,
            births: VecDeque::with_capacity(births_cap),
            births_cap,
            live: 0,
            limit,
        }
    }

    fn alive(born: u64, tau: u64, now: u64) -> bool {
        born != EMPTY && now < born.saturating_add(tau)
    }

    fn probe(&self, key: u64, home: usize, max_probe: usize, tau: u64, now: u64) -> Found {
        let mut found = Found { hit: None, free: None, probes: 0 };
        for step in 0..max_probe {
            let slot = home.wrapping_add(step) & self.mask;
            found.probes = step + 1;
            let born = self.born[slot];
            if Self::alive(born, tau, now) {
                if self.keys[slot] == key {
                    found.hit = Some(slot);
                    return found;
                }
            } else if found.free.is_none() {
                found.free = Some(slot);
            }
        }
        found
    }

    /// Frees up to `budget` expired entries, oldest first. Returns how many were freed.
    fn reclaim(&mut self, tau: u64, now: u64, budget: usize) -> usize {
        let mut freed = 0;
        for _ in 0..budget {
            let Some(birth) = self.births.front().copied() else { break };
            if now < birth.born.saturating_add(tau) {
                break;
            }
            self.births.pop_front();
            let slot = birth.slot as usize;
            if self.born[slot] == birth.born && self.keys[slot] == birth.key {
                self.born[slot] = EMPTY;
                self.live = self.live.saturating_sub(1);
                freed += 1;
            }
        }
        freed
    }
}

/// The store. `S` is the hash builder (a fresh `RandomState` by default: a per-start secret).
pub struct Ess<S = RandomState> {
    shards: Box<[Mutex<Shard>]>,
    hasher: S,
    tau: u64,
    max_probe: usize,
    counters: Counters,
}

impl Ess<RandomState> {
    pub fn new(config: &EssConfig) -> Result<Self, EssConfigError> {
        Self::with_hasher(config, RandomState::new())
    }
}

impl<S: BuildHasher> Ess<S> {
    /// A store hashing with `hasher` (tests use a constant one to force collisions).
    pub fn with_hasher(config: &EssConfig, hasher: S) -> Result<Self, EssConfigError> {
        // At least one entry per shard (fewer would round up past the configured figure), and
        // at most 2^24 entries: a config never asks for more memory than a node can give.
        if config.capacity < config.shards || config.capacity > MAX_CAPACITY {
            return Err(EssConfigError::Capacity);
        }
        if config.lifetime_ns == 0 {
            return Err(EssConfigError::Lifetime);
        }
        if !(1..=64).contains(&config.max_probe) {
            return Err(EssConfigError::MaxProbe);
        }
        if !config.shards.is_power_of_two() || config.shards > 1024 {
            return Err(EssConfigError::Shards);
        }
        // The capacity split exactly: the first `capacity % shards` shards hold one more.
        let (each, extra) = (config.capacity / config.shards, config.capacity % config.shards);
        let shards = (0..config.shards)
            .map(|i| Mutex::new(Shard::new(each + usize::from(i < extra), config.max_probe)))
            .collect();
        Ok(Ess {
            shards,
            hasher,
            tau: config.lifetime_ns,
            max_probe: config.max_probe,
            counters: Counters::default(),
        })
    }

    /// (shard, home slot) of a key.
    fn place(&self, key: u64) -> (usize, usize) {
        let hash = self.hasher.hash_one(key);
        let shard = (hash as usize) & (self.shards.len() - 1);
        (shard, (hash >> 32) as usize)
    }

    fn lock(&self, shard: usize) -> MutexGuard<'_, Shard> {
        // A poisoned shard still holds consistent data: every mutation below completes before
        // anything that could panic, and nothing here panics on any input.
        self.shards[shard].lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The bank under `key`, if it is alive at `now`.
    pub fn get(&self, key: u64, now: u64) -> Option<BankBytes> {
        let (shard, home) = self.place(key);
        let mut guard = self.lock(shard);
        self.get_in(&mut guard, key, home, now)
    }

    /// Stores `bank` under `key`: updates a live entry (its lifetime unchanged) or creates one.
    /// Returns whether it was created.
    pub fn put(&self, key: u64, bank: &BankBytes, now: u64) -> Result<bool, Refusal> {
        let (shard, home) = self.place(key);
        let mut guard = self.lock(shard);
        self.put_in(&mut guard, key, home, bank, now)
    }

    fn get_in(&self, shard: &mut Shard, key: u64, home: usize, now: u64) -> Option<BankBytes> {
        self.note_expired(shard.reclaim(self.tau, now, RECLAIM_PER_OP));
        let found = shard.probe(key, home, self.max_probe, self.tau, now);
        self.counters.max_probe_seen.fetch_max(found.probes as u64, Ordering::Relaxed);
        found.hit.map(|slot| shard.banks[slot])
    }

    fn put_in(
        &self,
        shard: &mut Shard,
        key: u64,
        home: usize,
        bank: &BankBytes,
        now: u64,
    ) -> Result<bool, Refusal> {
        self.note_expired(shard.reclaim(self.tau, now, RECLAIM_PER_OP));
        let found = shard.probe(key, home, self.max_probe, self.tau, now);
        self.counters.max_probe_seen.fetch_max(found.probes as u64, Ordering::Relaxed);
        if let Some(slot) = found.hit {
            shard.banks[slot] = *bank;
            self.counters.updates.fetch_add(1, Ordering::Relaxed);
            return Ok(false);
        }
        let Some(slot) = found.free else {
            self.counters.refused_probe.fetch_add(1, Ordering::Relaxed);
            return Err(Refusal::ProbeLimit);
        };
        // A free slot is either empty (a new live entry) or expired but not yet reclaimed (taken
        // over: the live count stays, its birth record goes stale and is skipped later).
        let takes_over = shard.born[slot] != EMPTY;
        if (!takes_over && shard.live >= shard.limit) || shard.births.len() >= shard.births_cap {
            self.note_expired(shard.reclaim(self.tau, now, RECLAIM_WHEN_FULL));
            let still_taken_over = shard.born[slot] != EMPTY;
            if (!still_taken_over && shard.live >= shard.limit)
                || shard.births.len() >= shard.births_cap
            {
                self.counters.refused_full.fetch_add(1, Ordering::Relaxed);
                return Err(Refusal::Full);
            }
        }
        if shard.born[slot] == EMPTY {
            shard.live += 1;
        }
        shard.keys[slot] = key;
        shard.born[slot] = now;
        shard.banks[slot] = *bank;
        shard.births.push_back(Birth { slot: slot as u32, key, born: now });
        self.counters.inserts.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    fn note_expired(&self, freed: usize) {
        if freed > 0 {
            self.counters.expired.fetch_add(freed as u64, Ordering::Relaxed);
        }
    }

    /// Reclaims up to `budget_per_shard` expired entries in every shard (control thread).
    pub fn housekeeping(&self, now: u64, budget_per_shard: usize) -> usize {
        let mut freed = 0;
        for shard in 0..self.shards.len() {
            let n = self.lock(shard).reclaim(self.tau, now, budget_per_shard);
            self.note_expired(n);
            freed += n;
        }
        freed
    }

    pub fn stats(&self) -> EssStats {
        let live = (0..self.shards.len()).map(|s| self.lock(s).live as u64).sum();
        let c = &self.counters;
        EssStats {
            live,
            inserts: c.inserts.load(Ordering::Relaxed),
            updates: c.updates.load(Ordering::Relaxed),
            refused_full: c.refused_full.load(Ordering::Relaxed),
            refused_probe: c.refused_probe.load(Ordering::Relaxed),
            expired: c.expired.load(Ordering::Relaxed),
            max_probe_seen: c.max_probe_seen.load(Ordering::Relaxed),
        }
    }

    pub fn lifetime_ns(&self) -> u64 {
        self.tau
    }

    /// Starts a transaction over the declared `keys` (at most [`MAX_KEYS`]; extra keys are
    /// ignored): locks their shards in ascending order until the transaction is dropped.
    pub fn begin(&self, keys: &[u64], now: u64) -> Txn<'_, S> {
        let mut txn = Txn {
            ess: self,
            now,
            keys: [0; MAX_KEYS],
            homes: [0; MAX_KEYS],
            guard_of: [0; MAX_KEYS],
            guards: [None, None, None, None],
            key_count: keys.len().min(MAX_KEYS),
        };
        let mut shard_ids = [usize::MAX; MAX_KEYS];
        for (slot, &key) in keys.iter().take(MAX_KEYS).enumerate() {
            let (shard, home) = self.place(key);
            txn.keys[slot] = key;
            txn.homes[slot] = home;
            shard_ids[slot] = shard;
        }
        let mut order = shard_ids;
        order[..txn.key_count].sort_unstable();
        let mut locked = 0;
        let mut previous = usize::MAX;
        for &shard in &order[..txn.key_count] {
            if shard != previous {
                txn.guards[locked] = Some((shard, self.lock(shard)));
                locked += 1;
                previous = shard;
            }
        }
        for (guard_of, &shard) in txn.guard_of.iter_mut().zip(&shard_ids).take(txn.key_count) {
            let position =
                txn.guards[..locked].iter().position(|g| matches!(g, Some((s, _)) if *s == shard));
            *guard_of = position.unwrap_or(0) as u8;
        }
        txn
    }
}

/// A program run's exclusive access to the entries of its declared keys.
pub struct Txn<'a, S: BuildHasher = RandomState> {
    ess: &'a Ess<S>,
    now: u64,
    keys: [u64; MAX_KEYS],
    homes: [usize; MAX_KEYS],
    guard_of: [u8; MAX_KEYS],
    guards: [Option<(usize, MutexGuard<'a, Shard>)>; MAX_KEYS],
    key_count: usize,
}

impl<S: BuildHasher> Txn<'_, S> {
    /// The live bank of key slot `slot` (`None` if absent or `slot` undeclared).
    pub fn get(&mut self, slot: usize) -> Option<BankBytes> {
        if slot >= self.key_count {
            return None;
        }
        let (key, home, now, ess) = (self.keys[slot], self.homes[slot], self.now, self.ess);
        let (_, guard) = self.guards[usize::from(self.guard_of[slot])].as_mut()?;
        ess.get_in(guard, key, home, now)
    }

    /// Stores the bank of key slot `slot`; returns whether the entry was created.
    pub fn put(&mut self, slot: usize, bank: &BankBytes) -> Result<bool, Refusal> {
        if slot >= self.key_count {
            return Err(Refusal::ProbeLimit);
        }
        let (key, home, now, ess) = (self.keys[slot], self.homes[slot], self.now, self.ess);
        let Some((_, guard)) = self.guards[usize::from(self.guard_of[slot])].as_mut() else {
            return Err(Refusal::ProbeLimit);
        };
        ess.put_in(guard, key, home, bank, now)
    }
}

#[cfg(test)]
mod tests {
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
}
