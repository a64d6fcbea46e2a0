//! The ephemeral state store (ESS): 64-bit keys -> 32-byte banks that live `tau` from creation
//! (no refresh), as in ESP/WASP (`docs/wasp.md` §6).
//!
//! Compact (about 30 bytes per entry of capacity for entries of 64-bit values) and bounded by
//! construction, so that a hostile packet stream cannot make it slow:
//! - a slot is 24 bytes: key, word 0 of the bank, creation time in u32 ticks of
//!   `2^shift` ns (about tau / 2^16) and a packed meta word (scope, quota owner, extension);
//!   words 1..3 of a bank, when any is non-zero, live in a 24-byte extension from a bounded
//!   pool ([`EXTENSION_PERCENT`] of the capacity) — a write that needs one when the pool is empty
//!   is refused as full and counted;
//! - a shard's table holds `8/7` of its capacity in slots (no power-of-two rounding: homes are
//!   multiply-shift reductions). A key lives in one of two windows (`max_probe` slots in all),
//!   found or placed there or refused; when both are full, one of their entries may move to its
//!   own other window (one level of cuckoo displacement), so every operation reads a bounded
//!   number of slots;
//! - the hash is keyed by a per-store random secret ([`Salted`]), so colliding keys cannot be
//!   computed off-line;
//! - expiry is checked on every read (an entry is invisible from `tau` after its creation,
//!   within one tick, never later); expired entries are freed when a probe meets them, and by a
//!   sweep hand per shard that every creation moves over [`RECLAIM_PER_OP`] slots
//!   (`housekeeping` moves it further): nothing ever scans the store on the fast path;
//! - workers share the store through 64 shards with one spinlock each; a program's
//!   transaction ([`Txn`]) locks the shards of its (at most four) declared keys in ascending
//!   order, which cannot deadlock, and holds them for at most one bounded program run;
//! - every entry lives in the namespace of its [`Scope`] (the scope is part of the key the
//!   index matches), so a public key can never name a protected or private entry;
//! - above a fill threshold, a [`Quota`] limits the live entries each aggregate created (the
//!   stage names the aggregate, e.g. the source /24): one counter per hashed aggregate bucket,
//!   updated with one atomic add at creation and one subtraction when the entry is freed.

mod lock;
mod table;
#[cfg(test)]
mod tests;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::wire::{Scope, MAX_KEYS};
use lock::{ShardCell, ShardGuard};
use table::{Clock, Found, Table, Windows};

/// Bytes of one entry's bank (the seed's two adjacent 64-bit entries, or four words).
pub const BANK_LEN: usize = 32;
pub type BankBytes = [u8; BANK_LEN];

/// Slots the sweep hand examines in a shard at each creation there (so at most as many
/// expired entries freed).
pub const RECLAIM_PER_OP: usize = 4;
/// Slots a creation that would otherwise be refused as full may sweep first.
const RECLAIM_WHEN_FULL: usize = 64;
/// Slots `housekeeping` may examine per shard for each expired entry it is allowed to free.
const HOUSEKEEPING_SLOTS_PER_ENTRY: usize = 8;
/// Most entries a store may hold (about 2 GB for entries of 64-bit values).
pub const MAX_CAPACITY: usize = 1 << 26;
/// Entries, percent of capacity, whose bank words 1..3 may be non-zero at once: each takes a
/// 24-byte extension from its shard's pool (at most 2^19 - 1 per shard). Entries of 64-bit
/// values take none; a shard has at least 16 (or its capacity, if less). (A constant rather than an `EssConfig` field: configs are built as
/// struct literals outside this crate.)
pub const EXTENSION_PERCENT: usize = 12;
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
    /// Slots a key may be placed in (its two windows together: the "maximum chain length").
    pub max_probe: usize,
    /// Number of independently locked shards (a power of two).
    pub shards: usize,
    /// Entries whose bank uses more than its first word (programs that `map` it), percent of
    /// the capacity (each takes a 24-byte extension; default [`EXTENSION_PERCENT`]).
    pub wide_percent: u8,
}

impl Default for EssConfig {
    fn default() -> Self {
        EssConfig {
            capacity: 1 << 16,
            lifetime_ns: 10_000_000_000,
            max_probe: 8,
            shards: 64,
            wide_percent: EXTENSION_PERCENT as u8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EssConfigError {
    #[error("ESS capacity must be at least one entry per shard and at most 2^26 entries")]
    Capacity,
    #[error("ESS lifetime must be above 0 ns")]
    Lifetime,
    #[error("ESS max_probe must be within 1..=64")]
    MaxProbe,
    #[error("ESS shards must be a power of two within 1..=1024")]
    Shards,
    #[error("ESS: cannot allocate {0} bytes for the store")]
    Memory(usize),
    #[error("ESS wide_percent must be within 0..=100, and at most 2^19 wide entries per shard")]
    WidePercent,
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
    /// Entries holding a slot: alive, or expired and not yet freed (by a probe meeting them,
    /// the sweep or `housekeeping`).
    pub live: u64,
    pub inserts: u64,
    pub updates: u64,
    /// Creations refused for want of room, and writes for want of an extension.
    pub refused_full: u64,
    pub refused_probe: u64,
    /// Creations refused because their aggregate was over its quota.
    pub refused_quota: u64,
    /// Expired entries freed.
    pub expired: u64,
    /// Longest probe (slots of a key's own windows read before a hit or a placement).
    pub max_probe_seen: u64,
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
    shards: Box<[ShardCell]>,
    hasher: S,
    tau: u64,
    /// Log2 of the tick (ns) creation times are recorded in.
    tick_shift: u32,
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
        // at most 2^26 entries: a config never asks for more memory than a node can give.
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
        let per_shard = config.capacity.div_ceil(config.shards);
        let wide = (per_shard * usize::from(config.wide_percent)).div_ceil(100);
        if config.wide_percent > 100 || wide > table::MAX_EXTENSIONS_PER_SHARD {
            return Err(EssConfigError::WidePercent);
        }
        // The capacity split exactly: the first `capacity % shards` shards hold one more.
        let (each, extra) = (config.capacity / config.shards, config.capacity % config.shards);
        let shards = (0..config.shards)
            .map(|i| {
                let limit = each + usize::from(i < extra);
                let extensions =
                    (limit * usize::from(config.wide_percent)).div_ceil(100).max(limit.min(16));
                Ok(ShardCell::new(
                    Table::new(limit, config.max_probe, extensions)
                        .map_err(|e| EssConfigError::Memory(e.bytes))?,
                ))
            })
            .collect::<Result<_, EssConfigError>>()?;
        Ok(Ess {
            shards,
            hasher,
            tau: config.lifetime_ns,
            tick_shift: Clock::shift_for(config.lifetime_ns),
            max_probe: config.max_probe,
            capacity: config.capacity,
            admission: AdmissionCounts::new(),
            bucket_hasher: Salted::random(),
            secret: random_secret(),
        })
    }

    /// The store hash of a key: its low bits pick the shard, the rest its two windows.
    #[inline(always)]
    fn hash(&self, key: StoreKey) -> u64 {
        self.hasher.hash_one((key.scope as u8, key.key))
    }

    #[inline(always)]
    fn shard_of(&self, hash: u64) -> usize {
        (hash as usize) & (self.shards.len() - 1)
    }

    #[inline(always)]
    fn clock(&self, now: u64) -> Clock {
        Clock { now, shift: self.tick_shift, tau: self.tau }
    }

    /// Locks one shard for one operation (`None` only for an index past the shards, which
    /// `shard_of` never gives).
    fn lock(&self, shard: usize) -> Option<ShardGuard<'_>> {
        self.shards.get(shard).map(ShardCell::guard)
    }

    /// Bytes allocated by the store's tables (slots, extensions, shard headers and quota
    /// counters).
    pub fn memory_bytes(&self) -> usize {
        let tables: usize = (0..self.shards.len())
            .filter_map(|shard| self.lock(shard).map(|table| table.memory_bytes()))
            .sum();
        tables
            + std::mem::size_of_val(&*self.shards)
            + std::mem::size_of_val(&*self.admission.per_bucket)
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
        let hash = self.hash(key);
        let mut table = self.lock(self.shard_of(hash))?;
        let at = self.find_in(&mut table, key, hash, now)?;
        Some(table.bank(at))
    }

    /// [`Ess::put`] in any scope, outside quotas: the operator's way to install a protected
    /// entry (packets write protected entries only as authenticated admin packets).
    pub fn put_scoped(&self, key: StoreKey, bank: &BankBytes, now: u64) -> Result<bool, Refusal> {
        let hash = self.hash(key);
        let mut table = self.lock(self.shard_of(hash)).ok_or(Refusal::ProbeLimit)?;
        self.put_in(&mut table, key, hash, bank, now, None)
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

    /// The slot holding `key` alive at `now`, if any.
    #[inline]
    fn find_in(&self, table: &mut Table, key: StoreKey, hash: u64, now: u64) -> Option<usize> {
        self.probe_in(table, key, hash, now).hit
    }

    fn probe_in(&self, table: &mut Table, key: StoreKey, hash: u64, now: u64) -> Found {
        let clock = self.clock(now);
        table.guard_wrap(&clock, &self.admission);
        let windows = table.windows(hash, self.max_probe);
        table.probe(key, &windows, &clock, &self.admission)
    }

    fn put_in(
        &self,
        table: &mut Table,
        key: StoreKey,
        hash: u64,
        bank: &BankBytes,
        now: u64,
        creator: Option<Admission>,
    ) -> Result<bool, Refusal> {
        let found = self.probe_in(table, key, hash, now);
        if let Some(at) = found.hit {
            return self.update(table, at, bank);
        }
        self.create_in(table, key, hash, bank, now, creator, found.free)
    }

    /// Creates `key`'s entry, `free` the first room its windows had (a probe just showed the
    /// key absent).
    #[allow(clippy::too_many_arguments)]
    fn create_in(
        &self,
        table: &mut Table,
        key: StoreKey,
        hash: u64,
        bank: &BankBytes,
        now: u64,
        creator: Option<Admission>,
        free: Option<usize>,
    ) -> Result<bool, Refusal> {
        let clock = self.clock(now);
        let windows = table.windows(hash, self.max_probe);
        // The aggregate's bucket is hashed only now: most transactions create nothing.
        let owner = creator.map_or(0, |who| self.owner_of(who.aggregate));
        if let Some(who) = creator {
            let live = self.admission.live.load(Ordering::Relaxed);
            if let Some(limit) = who.quota.limit(live, self.capacity) {
                if self.admission.held(owner) >= limit {
                    table.counters.refused_quota += 1;
                    return Err(Refusal::Quota);
                }
            }
        }
        table.sweep(RECLAIM_PER_OP, usize::MAX, &clock, &self.admission);
        if !table.has_room(RECLAIM_WHEN_FULL, &clock, &self.admission) {
            table.counters.refused_full += 1;
            return Err(Refusal::Full);
        }
        let place = match free {
            Some(at) => Some(at),
            None => {
                let (max_probe, size) = (self.max_probe, table.size());
                let rehash = |key: StoreKey| Windows::new(self.hash(key), max_probe, size);
                table.displace(&windows, rehash, &clock, &self.admission)
            }
        };
        let Some(at) = place else {
            table.counters.refused_probe += 1;
            return Err(Refusal::ProbeLimit);
        };
        table.create(at, key, owner, bank, &clock, &self.admission)?;
        Ok(true)
    }

    /// Writes the bank of the live entry at `at`.
    fn update(&self, table: &mut Table, at: usize, bank: &BankBytes) -> Result<bool, Refusal> {
        match table.write(at, bank) {
            Ok(()) => {
                table.counters.updates += 1;
                Ok(false)
            }
            Err(refusal) => {
                table.counters.refused_full += 1;
                Err(refusal)
            }
        }
    }

    /// Frees up to `budget_per_shard` expired entries in every shard (control thread), moving
    /// each shard's sweep hand over at most `8 * budget_per_shard` slots (one rotation at
    /// most). Returns how many it freed.
    ///
    /// A shard a worker holds is skipped until the next pass: the control thread may share a
    /// core with a worker, and a worker must never spin behind a preempted housekeeper that
    /// waited for it.
    pub fn housekeeping(&self, now: u64, budget_per_shard: usize) -> usize {
        let clock = self.clock(now);
        let slots = budget_per_shard.saturating_mul(HOUSEKEEPING_SLOTS_PER_ENTRY);
        let mut freed = 0;
        for shard in 0..self.shards.len() {
            let Some(mut table) = self.shards.get(shard).and_then(ShardCell::try_guard) else {
                continue;
            };
            let before = table.counters.expired;
            // (The wrap guard may free a whole idle shard beyond the budget: rare, and due.)
            table.guard_wrap(&clock, &self.admission);
            table.sweep(slots, budget_per_shard, &clock, &self.admission);
            freed += table.counters.expired.saturating_sub(before) as usize;
        }
        freed
    }

    pub fn stats(&self) -> EssStats {
        let mut sum = EssStats::default();
        for shard in 0..self.shards.len() {
            let Some(table) = self.lock(shard) else { continue };
            let c = table.counters;
            sum.live += table.live as u64;
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

    /// Extensions (bank words 1..3) in use over all shards (for tests and metrics).
    pub fn extensions_in_use(&self) -> usize {
        (0..self.shards.len())
            .filter_map(|shard| self.lock(shard).map(|table| table.extensions_used()))
            .sum()
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
            keys: [0; MAX_KEYS],
            scopes: [Scope::Public; MAX_KEYS],
            hashes: [0; MAX_KEYS],
            found: [NOT_FOUND; MAX_KEYS],
            versions: [0; MAX_KEYS],
            locked: [0; MAX_KEYS],
            locked_count: 0,
            key_count: 0,
            creator: admission.map_or(NO_ADMISSION, |a| (a.aggregate, a.quota, true)),
        };
        for (slot, &key) in keys.iter().take(MAX_KEYS).enumerate() {
            let hash = self.hash(key);
            txn.keys[slot] = key.key;
            txn.scopes[slot] = key.scope;
            txn.hashes[slot] = hash;
            // Shards are at most 1024: an index fits in u16.
            txn.locked[slot] = self.shard_of(hash) as u16;
            txn.key_count += 1;
        }
        let count = usize::from(txn.key_count);
        txn.locked[..count].sort_unstable();
        let mut previous = None;
        for at in 0..count {
            let shard = txn.locked[at];
            if previous != Some(shard) {
                let Some(cell) = self.shards.get(usize::from(shard)) else { continue };
                cell.lock();
                // Recorded at once: were anything below to panic, `Drop` unlocks it.
                txn.locked[usize::from(txn.locked_count)] = shard;
                txn.locked_count += 1;
                previous = Some(shard);
            }
        }
        txn
    }
}

/// `Txn::creator` of a transaction without admission.
const NO_ADMISSION: (u64, Quota, bool) = (0, Quota::OFF, false);

/// `Txn::found` of a slot `get` did not find.
const NOT_FOUND: u32 = u32::MAX;
/// `Txn::found` of a slot `get` saw missing: this bit, with the slot where its windows had room
/// (or `NO_ROOM`) below it.
const MISSED: u32 = 1 << 31;
const NO_ROOM: u32 = MISSED - 2;

/// A program run's exclusive access to the entries of its declared keys: their shards stay
/// locked (ascending, each once) until it is dropped.
pub struct Txn<'a, S: BuildHasher = Salted> {
    ess: &'a Ess<S>,
    now: u64,
    keys: [u64; MAX_KEYS],
    scopes: [Scope; MAX_KEYS],
    hashes: [u64; MAX_KEYS],
    /// Where `get` found each slot's entry: the shard stays locked, so a `put` of the same
    /// slot writes there after one check, without probing again. Or, `MISSED` set, where it
    /// saw room for the missing key, while its table's version stayed `versions`: `put`
    /// creates the entry there without probing again. (16 bits of version: a transaction
    /// changes a table far fewer than 2^16 times between its `get` and its `put`.)
    found: [u32; MAX_KEYS],
    versions: [u16; MAX_KEYS],
    /// The locked shards, ascending, without repeats.
    locked: [u16; MAX_KEYS],
    locked_count: u8,
    key_count: u8,
    /// The admission of the entries it creates: (aggregate, quota, whether any), flat so
    /// that the transaction stays within two cache lines.
    creator: (u64, Quota, bool),
}

impl<S: BuildHasher> Txn<'_, S> {
    fn key(&self, slot: usize) -> StoreKey {
        StoreKey { scope: self.scopes[slot], key: self.keys[slot] }
    }

    /// The table of key slot `slot`'s shard, locked by this transaction.
    fn table(&mut self, slot: usize) -> Option<&mut Table> {
        let shard = self.ess.shard_of(*self.hashes.get(slot)?);
        let locked = self.locked.get(..usize::from(self.locked_count))?;
        if !locked.contains(&(shard as u16)) {
            return None;
        }
        let cell = self.ess.shards.get(shard)?;
        // SAFETY: this transaction locked `shard` in `begin_scoped` (it is in `locked`) and
        // unlocks it only in `Drop`; `&mut self` makes the returned reference the only one
        // this transaction has out, and the lock keeps every other thread and transaction out.
        Some(unsafe { cell.table_unchecked() })
    }

    /// The live bank of key slot `slot` (`None` if absent or `slot` undeclared).
    pub fn get(&mut self, slot: usize) -> Option<BankBytes> {
        if slot >= usize::from(self.key_count) {
            return None;
        }
        let (key, hash, now, ess) = (self.key(slot), self.hashes[slot], self.now, self.ess);
        let table = self.table(slot)?;
        let found = ess.probe_in(table, key, hash, now);
        let Some(at) = found.hit else {
            let room = found.free.map_or(NO_ROOM, |at| (at as u32).min(NO_ROOM));
            self.versions[slot] = table.version as u16;
            self.found[slot] = MISSED | room;
            return None;
        };
        let bank = table.bank(at);
        self.found[slot] = at as u32;
        Some(bank)
    }

    /// Stores the bank of key slot `slot`; returns whether the entry was created.
    pub fn put(&mut self, slot: usize, bank: &BankBytes) -> Result<bool, Refusal> {
        if slot >= usize::from(self.key_count) {
            return Err(Refusal::ProbeLimit);
        }
        let (key, hash, now, ess) = (self.key(slot), self.hashes[slot], self.now, self.ess);
        let (found, (aggregate, quota, counted)) = (self.found[slot], self.creator);
        let version = self.versions[slot];
        let creator = counted.then_some(Admission { aggregate, quota });
        let table = self.table(slot).ok_or(Refusal::ProbeLimit)?;
        if found & MISSED == 0 {
            // Found by `get` under this same lock: still this key's and alive unless another
            // slot's operation moved or freed it meanwhile (one slot read tells).
            let at = found as usize;
            if table.holds_alive(at, key, &ess.clock(now)) {
                return ess.update(table, at, bank);
            }
        }
        if found != NOT_FOUND && found & MISSED != 0 && version == table.version as u16 {
            // Seen missing by `get`, and nothing in the table changed since (this lock).
            let room = found & !MISSED;
            let free = (room != NO_ROOM).then_some(room as usize);
            return ess.create_in(table, key, hash, bank, now, creator, free);
        }
        ess.put_in(table, key, hash, bank, now, creator)
    }
}

impl<S: BuildHasher> Drop for Txn<'_, S> {
    fn drop(&mut self) {
        for &shard in self.locked.iter().take(usize::from(self.locked_count)) {
            if let Some(cell) = self.ess.shards.get(usize::from(shard)) {
                cell.unlock();
            }
        }
    }
}
