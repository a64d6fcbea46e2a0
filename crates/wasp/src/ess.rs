//! The ephemeral state store (ESS): 64-bit keys -> 32-byte banks that live `tau` from creation
//! (no refresh), as in ESP/WASP (`docs/wasp.md` §6).
//!
//! Bounded by construction, so that a hostile packet stream cannot make it slow:
//! - the index is open addressing over a window of `max_probe` slots from the key's home: a key
//!   is found, or placed, inside its window or not at all (a full window refuses the creation and
//!   counts it), so every operation reads at most `max_probe` slots;
//! - the hash is keyed by a per-store random secret ([`Salted`]), so colliding keys cannot be
//!   computed off-line;
//! - expiry follows a per-shard FIFO in creation order (with a fixed `tau`, creation order is
//!   expiry order); every operation reclaims at most [`RECLAIM_PER_OP`] expired entries, and an
//!   expired entry is invisible before it is reclaimed, so nothing ever scans the store;
//! - workers share the store through 64 shards with one mutex each; a program's transaction
//!   ([`Txn`]) locks the shards of its (at most four) declared keys in ascending order, which
//!   cannot deadlock, and holds them for at most one bounded program run;
//! - every entry lives in the namespace of its [`Scope`] (the scope is part of the key the
//!   index matches), so a public key can never name a protected or private entry;
//! - above a fill threshold, a [`Quota`] limits the live entries each aggregate created (the
//!   stage names the aggregate, e.g. the source /24): one counter per hashed aggregate bucket,
//!   updated with one atomic add at creation and one subtraction when the entry is reclaimed.

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::wire::{Scope, MAX_KEYS};

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
/// Aggregate buckets quotas count in (an aggregate is hashed, with a per-store secret, to one).
pub const QUOTA_BUCKETS: usize = 1024;

/// Where a private key sits in its packet (see [`Ess::private_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrivateSlot {
    pub slot: u8,
    pub key_count: u8,
    /// The shim's scopes byte.
    pub scopes: u8,
}

impl PrivateSlot {
    /// Slot 0 of a packet declaring one private key.
    pub const ONLY: PrivateSlot = PrivateSlot { slot: 0, key_count: 1, scopes: 2 };
}

/// The address of an entry: its scope's namespace and a 64-bit key. For a private entry the
/// key is already derived from the code ([`Ess::private_key`]); the filter does that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StoreKey {
    pub scope: Scope,
    pub key: u64,
}

impl StoreKey {
    pub const fn public(key: u64) -> StoreKey {
        StoreKey { scope: Scope::Public, key }
    }
    pub const fn protected(key: u64) -> StoreKey {
        StoreKey { scope: Scope::Protected, key }
    }
}

/// Per-aggregate admission when demand exceeds memory (`docs/wasp.md` §8): once the store holds
/// at least `above_percent` of its capacity, an aggregate that holds `share_percent` of the
/// capacity (at least one entry) may create no more entries until some of its own expire.
/// Updates of existing entries are never limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Fill level, percent of capacity, from which quotas apply; 100 or more turns them off.
    pub above_percent: u8,
    /// Entries one aggregate may hold above that level, percent of capacity.
    pub share_percent: u8,
}

impl Default for Quota {
    fn default() -> Self {
        Quota { above_percent: 50, share_percent: 10 }
    }
}

impl Quota {
    /// No quota at any fill level.
    pub const OFF: Quota = Quota { above_percent: 100, share_percent: 100 };

    /// The most live entries one aggregate may hold while the store holds `live` of
    /// `capacity`, or `None` while quotas do not apply.
    pub fn limit(&self, live: usize, capacity: usize) -> Option<usize> {
        let (above, share) = (usize::from(self.above_percent), usize::from(self.share_percent));
        if above >= 100 || live.saturating_mul(100) < capacity.saturating_mul(above) {
            return None;
        }
        Some((capacity.saturating_mul(share) / 100).max(1))
    }
}

/// Who creates entries in a transaction, for quotas: an aggregate id (the filter derives it
/// from the source address) and the quota that applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    pub aggregate: u64,
    pub quota: Quota,
}

/// The store-wide counts quotas read: live entries and live entries per aggregate bucket.
struct AdmissionCounts {
    live: AtomicUsize,
    /// Live entries created per bucket; an entry's `owner` is its bucket + 1 (0: not counted).
    per_bucket: Box<[AtomicU32]>,
}

impl AdmissionCounts {
    fn new() -> Self {
        AdmissionCounts {
            live: AtomicUsize::new(0),
            per_bucket: (0..QUOTA_BUCKETS).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    fn held(&self, owner: u16) -> usize {
        match usize::from(owner).checked_sub(1).and_then(|b| self.per_bucket.get(b)) {
            Some(count) => count.load(Ordering::Relaxed) as usize,
            None => 0,
        }
    }

    fn acquire(&self, owner: u16) {
        if let Some(count) = usize::from(owner).checked_sub(1).and_then(|b| self.per_bucket.get(b))
        {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn release(&self, owner: u16) {
        if let Some(count) = usize::from(owner).checked_sub(1).and_then(|b| self.per_bucket.get(b))
        {
            // Never below 0: every release follows the acquire of the same entry.
            let _ = count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }
}

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
    #[error("the creating aggregate is over its quota")]
    Quota,
}

/// Counters (monotonic except `live`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EssStats {
    pub live: u64,
    pub inserts: u64,
    pub updates: u64,
    pub refused_full: u64,
    pub refused_probe: u64,
    /// Creations refused because their aggregate was over its quota.
    pub refused_quota: u64,
    pub expired: u64,
    /// Longest probe (slots read before a hit or a placement) seen so far.
    pub max_probe_seen: u64,
}

/// A shard's counters, written under its lock: no shared cache line, no atomic on the fast
/// path (a shared `fetch_add` per operation cost more than the probe itself).
#[derive(Default, Clone, Copy)]
struct Counters {
    inserts: u64,
    updates: u64,
    refused_full: u64,
    refused_probe: u64,
    refused_quota: u64,
    expired: u64,
    max_probe_seen: u64,
}

/// A creation, for expiry: the slot it went to and what it held then.
#[derive(Clone, Copy)]
struct Birth {
    slot: u32,
    scope: Scope,
    key: u64,
    born: u64,
}

struct Shard {
    keys: Vec<u64>,
    /// Namespace of each slot's key.
    scopes: Vec<Scope>,
    /// Aggregate bucket + 1 that created each slot's entry (0: not counted).
    owners: Vec<u16>,
    /// Creation time per slot, `EMPTY` for a free slot.
    born: Vec<u64>,
    banks: Vec<BankBytes>,
    mask: usize,
    /// Creations in order; records whose slot was since reused are skipped when popped.
    births: VecDeque<Birth>,
    births_cap: usize,
    live: usize,
    limit: usize,
    /// When the oldest birth record expires (`u64::MAX`: none), so that the common case of an
    /// operation's reclaim is one comparison.
    next_expiry: u64,
    counters: Counters,
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
            scopes: vec![Scope::Public; size],
            owners: vec![0; size],
            born: vec![EMPTY; size],
            banks: vec![[0; BANK_LEN]; size],
            mask: size - 1,
            births: VecDeque::with_capacity(births_cap),
            births_cap,
            live: 0,
            limit,
            next_expiry: u64::MAX,
            counters: Counters::default(),
        }
    }

    fn alive(born: u64, tau: u64, now: u64) -> bool {
        born != EMPTY && now < born.saturating_add(tau)
    }

    fn probe(&self, key: StoreKey, home: usize, max_probe: usize, tau: u64, now: u64) -> Found {
        let mut found = Found { hit: None, free: None, probes: 0 };
        for step in 0..max_probe {
            let slot = home.wrapping_add(step) & self.mask;
            found.probes = step + 1;
            let born = self.born[slot];
            if Self::alive(born, tau, now) {
                if self.keys[slot] == key.key && self.scopes[slot] == key.scope {
                    found.hit = Some(slot);
                    return found;
                }
            } else if found.free.is_none() {
                found.free = Some(slot);
            }
        }
        found
    }

    /// Frees up to `budget` expired entries, oldest first, releasing their quota counts.
    /// Returns how many were freed.
    fn reclaim(&mut self, tau: u64, now: u64, budget: usize, counts: &AdmissionCounts) -> usize {
        if now < self.next_expiry {
            return 0;
        }
        let freed = self.reclaim_due(tau, now, budget, counts);
        self.next_expiry = self.births.front().map_or(u64::MAX, |b| b.born.saturating_add(tau));
        freed
    }

    fn reclaim_due(
        &mut self,
        tau: u64,
        now: u64,
        budget: usize,
        counts: &AdmissionCounts,
    ) -> usize {
        let mut freed = 0;
        for _ in 0..budget {
            let Some(birth) = self.births.front().copied() else { break };
            if now < birth.born.saturating_add(tau) {
                break;
            }
            self.births.pop_front();
            let slot = birth.slot as usize;
            if self.born[slot] == birth.born
                && self.keys[slot] == birth.key
                && self.scopes[slot] == birth.scope
            {
                self.born[slot] = EMPTY;
                self.live = self.live.saturating_sub(1);
                counts.release(self.owners[slot]);
                self.owners[slot] = 0;
                let _ = counts
                    .live
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
                freed += 1;
            }
        }
        freed
    }
}

/// The store's hash: a folded multiply (as foldhash and ahash use) keyed by a per-store random
/// secret. Several times cheaper than SipHash on a 64-bit key; an attacker who cannot read the
/// secret cannot compute colliding keys, and one who could would still meet the probe bound
/// (a refusal, never a long chain).
#[derive(Clone, Copy, Debug)]
pub struct Salted {
    seed: u64,
    multiplier: u64,
}

impl Salted {
    /// Fresh secrets from the operating system's random source (through `RandomState`).
    pub fn random() -> Salted {
        let state = RandomState::new();
        Salted { seed: state.hash_one(0x5a17u64), multiplier: state.hash_one(0xfeedu64) | 1 }
    }
}

/// The 128-bit product of `a` and `b`, its halves folded together.
#[inline(always)]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// One [`Salted`] hash in progress.
pub struct SaltedHasher {
    state: u64,
    multiplier: u64,
}

impl Hasher for SaltedHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline(always)]
    fn write_u8(&mut self, value: u8) {
        self.write_u64(u64::from(value));
    }

    #[inline(always)]
    fn write_u64(&mut self, value: u64) {
        self.state = folded_multiply(self.state ^ value, self.multiplier).rotate_left(23);
    }

    #[inline(always)]
    fn finish(&self) -> u64 {
        folded_multiply(self.state, self.multiplier ^ 0x9e37_79b9_7f4a_7c15)
    }
}

impl BuildHasher for Salted {
    type Hasher = SaltedHasher;

    fn build_hasher(&self) -> SaltedHasher {
        SaltedHasher { state: self.seed, multiplier: self.multiplier }
    }
}

/// The store. `S` is the hash builder (a fresh [`Salted`] by default: a per-start secret).
pub struct Ess<S = Salted> {
    shards: Box<[Mutex<Shard>]>,
    hasher: S,
    tau: u64,
    max_probe: usize,
    capacity: usize,
    admission: AdmissionCounts,
    /// Hashes aggregates to quota buckets (its own secret: a test's constant `hasher` must not
    /// put every aggregate in one bucket).
    bucket_hasher: Salted,
    /// Key of the keyed hash that derives private keys from code bytes.
    secret: [u8; 32],
}

/// A per-store 256-bit secret: four outputs of a freshly keyed SipHash (`RandomState` draws
/// its keys from the operating system's random source).
fn random_secret() -> [u8; 32] {
    let state = RandomState::new();
    let mut secret = [0u8; 32];
    for (i, chunk) in secret.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&state.hash_one(i as u64).to_be_bytes());
    }
    secret
}

impl Ess<Salted> {
    pub fn new(config: &EssConfig) -> Result<Self, EssConfigError> {
        Self::with_hasher(config, Salted::random())
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
            capacity: config.capacity,
            admission: AdmissionCounts::new(),
            bucket_hasher: Salted::random(),
            secret: random_secret(),
        })
    }

    /// (shard, home slot) of a key.
    fn place(&self, key: StoreKey) -> (usize, usize) {
        let hash = self.hasher.hash_one((key.scope as u8, key.key));
        let shard = (hash as usize) & (self.shards.len() - 1);
        (shard, (hash >> 32) as usize)
    }

    fn lock(&self, shard: usize) -> MutexGuard<'_, Shard> {
        // A poisoned shard still holds consistent data: every mutation below completes before
        // anything that could panic, and nothing here panics on any input.
        self.shards[shard].lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The public bank under `key`, if it is alive at `now`.
    pub fn get(&self, key: u64, now: u64) -> Option<BankBytes> {
        self.get_scoped(StoreKey::public(key), now)
    }

    /// Stores `bank` under the public `key`: updates a live entry (its lifetime unchanged) or
    /// creates one. Returns whether it was created.
    pub fn put(&self, key: u64, bank: &BankBytes, now: u64) -> Result<bool, Refusal> {
        self.put_scoped(StoreKey::public(key), bank, now)
    }

    /// The bank under `key` in its scope's namespace, if it is alive at `now`.
    pub fn get_scoped(&self, key: StoreKey, now: u64) -> Option<BankBytes> {
        let (shard, home) = self.place(key);
        let mut guard = self.lock(shard);
        self.get_in(&mut guard, key, home, now)
    }

    /// [`Ess::put`] in any scope, outside quotas: the operator's way to install a protected
    /// entry (packets write protected entries only as authenticated admin packets).
    pub fn put_scoped(&self, key: StoreKey, bank: &BankBytes, now: u64) -> Result<bool, Refusal> {
        let (shard, home) = self.place(key);
        let mut guard = self.lock(shard);
        self.put_in(&mut guard, key, home, bank, now, None)
    }

    /// The store key of a private entry: the first 8 bytes of a BLAKE3 hash keyed with this
    /// store's secret over where the key sits (slot, key count, scopes byte), the code length,
    /// the code bytes and the declared key. Only a packet carrying the same code, declaring the
    /// same key in the same slot of the same layout, reaches it (the same code with the key in
    /// another slot would run other instructions on it); nobody without the secret can compute
    /// it.
    pub fn private_key(&self, code: &[u8], at: PrivateSlot, key: u64) -> u64 {
        let mut hasher = blake3::Hasher::new_keyed(&self.secret);
        hasher.update(&[at.slot, at.key_count, at.scopes]);
        hasher.update(&(code.len() as u64).to_be_bytes());
        hasher.update(code);
        hasher.update(&key.to_be_bytes());
        let mut word = [0u8; 8];
        word.copy_from_slice(&hasher.finalize().as_bytes()[..8]);
        u64::from_be_bytes(word)
    }

    /// Bucket + 1 of an aggregate (the `owner` recorded with the entries it creates).
    fn owner_of(&self, aggregate: u64) -> u16 {
        // QUOTA_BUCKETS fits in u16, so the bucket + 1 does too.
        (self.bucket_hasher.hash_one(aggregate) % QUOTA_BUCKETS as u64) as u16 + 1
    }

    /// Live entries the aggregate's bucket holds (for tests and metrics).
    pub fn aggregate_entries(&self, aggregate: u64) -> usize {
        self.admission.held(self.owner_of(aggregate))
    }

    fn reclaim(&self, shard: &mut Shard, now: u64, budget: usize) {
        let freed = shard.reclaim(self.tau, now, budget, &self.admission);
        shard.counters.expired += freed as u64;
    }

    fn get_in(&self, shard: &mut Shard, key: StoreKey, home: usize, now: u64) -> Option<BankBytes> {
        self.find_in(shard, key, home, now).map(|slot| shard.banks[slot])
    }

    /// The slot holding `key` alive at `now`, if any.
    fn find_in(&self, shard: &mut Shard, key: StoreKey, home: usize, now: u64) -> Option<usize> {
        self.reclaim(shard, now, RECLAIM_PER_OP);
        let found = shard.probe(key, home, self.max_probe, self.tau, now);
        let seen = &mut shard.counters.max_probe_seen;
        *seen = (*seen).max(found.probes as u64);
        found.hit
    }

    fn put_in(
        &self,
        shard: &mut Shard,
        key: StoreKey,
        home: usize,
        bank: &BankBytes,
        now: u64,
        creator: Option<(u16, Quota)>,
    ) -> Result<bool, Refusal> {
        self.reclaim(shard, now, RECLAIM_PER_OP);
        let found = shard.probe(key, home, self.max_probe, self.tau, now);
        let seen = &mut shard.counters.max_probe_seen;
        *seen = (*seen).max(found.probes as u64);
        if let Some(slot) = found.hit {
            shard.banks[slot] = *bank;
            shard.counters.updates += 1;
            return Ok(false);
        }
        let Some(slot) = found.free else {
            shard.counters.refused_probe += 1;
            return Err(Refusal::ProbeLimit);
        };
        if let Some((owner, quota)) = creator {
            let live = self.admission.live.load(Ordering::Relaxed);
            if let Some(limit) = quota.limit(live, self.capacity) {
                if self.admission.held(owner) >= limit {
                    shard.counters.refused_quota += 1;
                    return Err(Refusal::Quota);
                }
            }
        }
        // A free slot is either empty (a new live entry) or expired but not yet reclaimed (taken
        // over: the live count stays, its birth record goes stale and is skipped later).
        let takes_over = shard.born[slot] != EMPTY;
        if (!takes_over && shard.live >= shard.limit) || shard.births.len() >= shard.births_cap {
            self.reclaim(shard, now, RECLAIM_WHEN_FULL);
            let still_taken_over = shard.born[slot] != EMPTY;
            if (!still_taken_over && shard.live >= shard.limit)
                || shard.births.len() >= shard.births_cap
            {
                shard.counters.refused_full += 1;
                return Err(Refusal::Full);
            }
        }
        if shard.born[slot] == EMPTY {
            shard.live += 1;
            self.admission.live.fetch_add(1, Ordering::Relaxed);
        } else {
            // Taken over: the expired entry's quota count goes with it.
            self.admission.release(shard.owners[slot]);
        }
        let owner = creator.map_or(0, |(owner, _)| owner);
        self.admission.acquire(owner);
        shard.owners[slot] = owner;
        shard.keys[slot] = key.key;
        shard.scopes[slot] = key.scope;
        shard.born[slot] = now;
        shard.banks[slot] = *bank;
        shard.births.push_back(Birth {
            slot: slot as u32,
            scope: key.scope,
            key: key.key,
            born: now,
        });
        // Creation order is expiry order, unless a caller's clock went backwards: keep the
        // earliest, so nothing expires late.
        shard.next_expiry = shard.next_expiry.min(now.saturating_add(self.tau));
        shard.counters.inserts += 1;
        Ok(true)
    }

    /// Reclaims up to `budget_per_shard` expired entries in every shard (control thread).
    pub fn housekeeping(&self, now: u64, budget_per_shard: usize) -> usize {
        let mut freed = 0;
        for shard in 0..self.shards.len() {
            let mut guard = self.lock(shard);
            let n = guard.reclaim(self.tau, now, budget_per_shard, &self.admission);
            guard.counters.expired += n as u64;
            freed += n;
        }
        freed
    }

    pub fn stats(&self) -> EssStats {
        let mut sum = EssStats::default();
        for shard in 0..self.shards.len() {
            let guard = self.lock(shard);
            let c = guard.counters;
            sum.live += guard.live as u64;
            sum.inserts += c.inserts;
            sum.updates += c.updates;
            sum.refused_full += c.refused_full;
            sum.refused_probe += c.refused_probe;
            sum.refused_quota += c.refused_quota;
            sum.expired += c.expired;
            sum.max_probe_seen = sum.max_probe_seen.max(c.max_probe_seen);
        }
        sum
    }

    pub fn lifetime_ns(&self) -> u64 {
        self.tau
    }

    /// Starts a transaction over the declared public `keys` without quota (at most
    /// [`MAX_KEYS`]; extra keys are ignored).
    pub fn begin(&self, keys: &[u64], now: u64) -> Txn<'_, S> {
        let mut scoped = [StoreKey::default(); MAX_KEYS];
        for (to, &key) in scoped.iter_mut().zip(keys) {
            *to = StoreKey::public(key);
        }
        self.begin_scoped(&scoped[..keys.len().min(MAX_KEYS)], now, None)
    }

    /// Starts a transaction over the declared `keys` (at most [`MAX_KEYS`]; extra keys are
    /// ignored): locks their shards in ascending order until the transaction is dropped. The
    /// entries it creates count against `admission`'s aggregate (none: not counted, no quota).
    pub fn begin_scoped(
        &self,
        keys: &[StoreKey],
        now: u64,
        admission: Option<Admission>,
    ) -> Txn<'_, S> {
        let mut txn = Txn {
            ess: self,
            now,
            keys: [StoreKey::default(); MAX_KEYS],
            homes: [0; MAX_KEYS],
            guard_of: [0; MAX_KEYS],
            guards: [None, None, None, None],
            key_count: keys.len().min(MAX_KEYS),
            creator: admission.map(|a| (self.owner_of(a.aggregate), a.quota)),
            found: [None; MAX_KEYS],
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
pub struct Txn<'a, S: BuildHasher = Salted> {
    ess: &'a Ess<S>,
    now: u64,
    keys: [StoreKey; MAX_KEYS],
    homes: [usize; MAX_KEYS],
    guard_of: [u8; MAX_KEYS],
    guards: [Option<(usize, MutexGuard<'a, Shard>)>; MAX_KEYS],
    key_count: usize,
    creator: Option<(u16, Quota)>,
    /// Where `get` found each slot's entry: the shard stays locked, so a `put` of the same
    /// slot writes there without probing again.
    found: [Option<u32>; MAX_KEYS],
}

impl<S: BuildHasher> Txn<'_, S> {
    /// The live bank of key slot `slot` (`None` if absent or `slot` undeclared).
    pub fn get(&mut self, slot: usize) -> Option<BankBytes> {
        if slot >= self.key_count {
            return None;
        }
        let (key, home, now, ess) = (self.keys[slot], self.homes[slot], self.now, self.ess);
        let (_, guard) = self.guards[usize::from(self.guard_of[slot])].as_mut()?;
        let at = ess.find_in(guard, key, home, now)?;
        self.found[slot] = Some(at as u32);
        Some(guard.banks[at])
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
        if let Some(at) = self.found[slot].map(|at| at as usize) {
            // Found by `get` under this same lock: still this key's, and alive at `now` (a
            // reclaim by another slot's operation at `now` frees only what is dead at `now`).
            let ours = guard.keys.get(at) == Some(&key.key)
                && guard.scopes.get(at) == Some(&key.scope)
                && guard.born.get(at).is_some_and(|&born| Shard::alive(born, ess.tau, now));
            if ours {
                guard.banks[at] = *bank;
                guard.counters.updates += 1;
                return Ok(false);
            }
        }
        ess.put_in(guard, key, home, bank, now, self.creator)
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
        let (greedy, modest) =
            (Admission { aggregate: 1, quota }, Admission { aggregate: 2, quota });
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
        assert_eq!((ess.aggregate_entries(1), ess.aggregate_entries(2)), (0, 0));
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
}
