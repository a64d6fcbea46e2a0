//! One shard's table: compact slots, the pool of bank extensions, the time base and the sweep.
//!
//! A slot is 24 bytes: the key, word 0 of the bank, the creation time in ticks (u32) and a
//! packed meta word (scope, quota owner, extension). Words 1..3 of a bank are usually zero
//! (programs that only `insert` write word 0); a bank with any of them non-zero keeps them in
//! a 24-byte extension from a bounded per-shard pool.

use hotplane_tables::words::{AllocError, WordArray};
use std::sync::atomic::Ordering;

use super::{AdmissionCounts, BankBytes, Refusal, StoreKey, BANK_LEN};
use crate::wire::Scope;

/// Meta word: bits 0..2 scope + 1 (0: a free slot), bits 2..13 quota owner (bucket + 1, 0:
/// none), bits 13..32 extension index + 1 (0: none).
const SCOPE_MASK: u32 = 0b11;
const OWNER_SHIFT: u32 = 2;
const OWNER_MASK: u32 = (1 << 11) - 1;
const EXTENSION_SHIFT: u32 = 13;
/// Entries of a key's windows a displacement considers moving, and slots of each entry's own
/// windows it reads, at most: with `max_probe` up to 64, a creation must still read a bounded
/// number of slots under its lock (8 x (1 hash + 16 reads)).
const DISPLACE_CANDIDATES: usize = 8;
const DISPLACE_READS: usize = 16;

/// Extensions one shard may hold at most (what fits the meta word's 19 bits, less the "none").
pub(super) const MAX_EXTENSIONS_PER_SHARD: usize = (1 << 19) - 1;

/// Ticks an entry's recorded creation may lag the shard's clock before the sweep must have
/// visited it: far below the 2^31 ticks at which a u32 age would turn negative.
const WRAP_GUARD_TICKS: u64 = 1 << 30;

/// Fraction of a slot table kept free, as `slots = capacity * 8 / 7` (load factor 7/8).
const LOAD_NUMERATOR: usize = 7;
const LOAD_DENOMINATOR: usize = 8;

/// One entry's place, decoded from the three words the table stores (24 bytes, no padding;
/// kept as `[u64; 3]` so that a table is allocated zeroed, its pages touched only when used).
#[derive(Clone, Copy, Default)]
pub(super) struct Slot {
    key: u64,
    /// Bytes 0..8 of the bank, as stored (native order: never interpreted here).
    word0: u64,
    /// Creation time in ticks (the low 32 bits of `now >> shift`).
    born: u32,
    meta: u32,
}

impl Slot {
    #[inline(always)]
    fn decode(raw: [u64; 3]) -> Slot {
        Slot { key: raw[0], word0: raw[1], born: raw[2] as u32, meta: (raw[2] >> 32) as u32 }
    }

    #[inline(always)]
    fn encode(self) -> [u64; 3] {
        [self.key, self.word0, u64::from(self.born) | (u64::from(self.meta) << 32)]
    }

    #[inline(always)]
    fn occupied(&self) -> bool {
        self.meta & SCOPE_MASK != 0
    }

    #[inline(always)]
    fn holds(&self, key: StoreKey) -> bool {
        self.key == key.key && self.meta & SCOPE_MASK == key.scope as u32 + 1
    }

    fn owner(&self) -> u16 {
        ((self.meta >> OWNER_SHIFT) & OWNER_MASK) as u16
    }

    /// Extension index + 1 (0: none).
    fn extension(&self) -> u32 {
        self.meta >> EXTENSION_SHIFT
    }

    pub(super) fn store_key(&self) -> Option<StoreKey> {
        let scope = Scope::from_bits(((self.meta & SCOPE_MASK) as u8).checked_sub(1)?)?;
        Some(StoreKey { scope, key: self.key })
    }
}

fn meta(scope: Scope, owner: u16, extension: u32) -> u32 {
    (scope as u32 + 1)
        | ((u32::from(owner) & OWNER_MASK) << OWNER_SHIFT)
        | (extension << EXTENSION_SHIFT)
}

/// The store's time base for one operation: `now` in ns, and ticks of `2^shift` ns.
///
/// A creation records `now >> shift` (truncated to u32); an entry is alive while
/// `now - (born_tick << shift) < tau`, so it lives `tau` less its creation's offset within
/// its tick: between `tau - tick + 1` ns and `tau` ns, never longer. `shift` makes a tick the
/// largest power of two at most `tau / 2^16`, so that loss is under 1/65536 of tau.
#[derive(Clone, Copy, Debug)]
pub(super) struct Clock {
    pub(super) now: u64,
    pub(super) shift: u32,
    pub(super) tau: u64,
}

impl Clock {
    /// The tick shift for a lifetime: log2 of the largest power of two <= tau / 2^16.
    pub(super) fn shift_for(tau: u64) -> u32 {
        match tau >> 16 {
            0 => 0,
            ticks => 63 - ticks.leading_zeros(),
        }
    }

    #[inline(always)]
    fn tick64(&self) -> u64 {
        self.now >> self.shift
    }

    #[inline(always)]
    fn tau_ticks(&self) -> u64 {
        self.tau >> self.shift
    }

    /// The full tick of a recorded creation tick (exact while ages stay below 2^31 ticks:
    /// see `Table::guard_wrap`).
    #[inline(always)]
    fn born64(&self, born: u32) -> u64 {
        let age = (self.tick64() as u32).wrapping_sub(born) as i32;
        self.tick64().saturating_add_signed(-i64::from(age))
    }

    /// Whether an entry created at tick `born` is alive now.
    #[inline(always)]
    fn alive(&self, born: u32) -> bool {
        let age = (self.tick64() as u32).wrapping_sub(born) as i32;
        if age < 0 {
            // Created "after" now: another worker's clock ran slightly ahead of this one's.
            // (Ages never reach 2^31 ticks: see `Table::guard_wrap`.)
            return true;
        }
        let age = age as u64;
        if age > self.tau_ticks() {
            return false;
        }
        // No overflow: age << shift <= tau.
        let within_tick = self.now & ((1u64 << self.shift) - 1);
        ((age << self.shift) | within_tick) < self.tau
    }
}

/// The two windows a key may live in: `first_len` slots from `first`, `second_len` from
/// `second` (each wrapping around the table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Windows {
    first: usize,
    second: usize,
    first_len: usize,
    len: usize,
}

impl Windows {
    /// The windows of a key whose store hash is `hash` in a table of `size` slots.
    #[inline(always)]
    pub(super) fn new(hash: u64, max_probe: usize, size: usize) -> Windows {
        let size = size as u64;
        let reduce = |bits: u64| (((bits >> 32) * size) >> 32) as usize;
        let second = (hash ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xff51_afd7_ed55_8ccd);
        Windows {
            first: reduce(hash),
            second: reduce(second),
            first_len: max_probe.div_ceil(2),
            len: max_probe,
        }
    }

    /// Slot of probe `step` (`step < len`), in a table of `size` slots.
    #[inline(always)]
    fn slot(&self, step: usize, size: usize) -> usize {
        let (start, offset) = if step < self.first_len {
            (self.first, step)
        } else {
            (self.second, step - self.first_len)
        };
        let at = start + offset;
        if at >= size {
            at - size
        } else {
            at
        }
    }
}

/// A shard's counters, written under its lock: no shared cache line, no atomic on the fast
/// path (a shared `fetch_add` per operation cost more than the probe itself).
#[derive(Default, Clone, Copy)]
pub(super) struct Counters {
    pub(super) inserts: u64,
    pub(super) updates: u64,
    pub(super) refused_full: u64,
    pub(super) refused_probe: u64,
    pub(super) refused_quota: u64,
    pub(super) expired: u64,
    pub(super) max_probe_seen: u64,
}

/// What a probe of a key's windows found.
pub(super) struct Found {
    /// The slot holding the key alive, if any.
    pub(super) hit: Option<usize>,
    /// The first free slot of the windows (expired entries met are freed on the way).
    pub(super) free: Option<usize>,
}

pub(super) struct Table {
    /// Encoded [`Slot`]s; all zeros is a free slot.
    slots: WordArray<[u64; 3]>,
    /// Words 1..3 of wide banks. Never-used extensions are handed out from `extensions_fresh`
    /// (their pages stay untouched until needed), released ones through a free list linked
    /// by their word 0.
    extensions: WordArray<[u64; 3]>,
    extensions_fresh: u32,
    /// Index + 1 of the first released extension (0: none).
    extensions_free: u32,
    extensions_used: u32,
    pub(super) live: usize,
    limit: usize,
    /// The sweep's next slot, and the tick at which it last started from slot 0.
    hand: usize,
    rotation_start: u64,
    /// A lower bound on the creation tick of every occupied slot (while `live > 0`): until
    /// `oldest + tau` nothing can have expired, so the sweep does nothing.
    oldest: u64,
    /// The oldest creation tick the current rotation has seen (survivors it passed, entries
    /// created or moved meanwhile): `oldest` when the rotation completes.
    rotation_oldest: u64,
    /// The latest creation tick.
    newest: u64,
    /// Windows a displacement last failed to make room in, and the tick it failed at: until a
    /// slot is freed or the tick changes (expired entries are free slots), it would fail
    /// again. Keys an attacker makes collide all share their windows: they cost one compare
    /// here instead of a hash per entry of the windows.
    undisplaceable: Option<(Windows, u64)>,
    /// Changes with every slot written or freed: a transaction that saw a key missing may
    /// create it where it saw room without probing again, while this has not changed.
    pub(super) version: u32,
    pub(super) counters: Counters,
}

impl Table {
    /// A table for `limit` entries. Its arrays are zeroed by the kernel on first touch, and
    /// large ones are aligned and advised for transparent huge pages: a store of tens of
    /// millions of entries would otherwise pay a page walk per lookup besides the cache miss.
    pub(super) fn new(
        limit: usize,
        max_probe: usize,
        extensions: usize,
    ) -> Result<Table, AllocError> {
        let size = (limit * LOAD_DENOMINATOR).div_ceil(LOAD_NUMERATOR).max(max_probe).max(1);
        let extensions = extensions.min(MAX_EXTENSIONS_PER_SHARD);
        Ok(Table {
            slots: WordArray::zeroed(size)?,
            extensions: WordArray::zeroed(extensions)?,
            extensions_fresh: 0,
            extensions_free: 0,
            extensions_used: 0,
            live: 0,
            limit,
            hand: 0,
            rotation_start: 0,
            oldest: u64::MAX,
            rotation_oldest: u64::MAX,
            newest: 0,
            undisplaceable: None,
            version: 0,
            counters: Counters::default(),
        })
    }

    /// Bytes of this table's slots and extensions.
    pub(super) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots) + std::mem::size_of_val(&*self.extensions)
    }

    pub(super) fn size(&self) -> usize {
        self.slots.len()
    }

    #[inline(always)]
    fn slot(&self, at: usize) -> Option<Slot> {
        self.slots.get(at).map(|&raw| Slot::decode(raw))
    }

    #[inline(always)]
    fn set_slot(&mut self, at: usize, slot: Slot) {
        if let Some(raw) = self.slots.get_mut(at) {
            *raw = slot.encode();
            self.version = self.version.wrapping_add(1);
        }
    }

    /// Marks slot `at` free (its meta word 0).
    #[inline(always)]
    fn clear(&mut self, at: usize) {
        if let Some(raw) = self.slots.get_mut(at) {
            raw[2] &= u64::from(u32::MAX);
            self.undisplaceable = None;
            self.version = self.version.wrapping_add(1);
        }
    }

    /// The windows of a key whose store hash is `hash`: two independent homes (multiply-shift
    /// reductions of two 32-bit parts, no power-of-two table), `max_probe` slots in all.
    #[inline(always)]
    pub(super) fn windows(&self, hash: u64, max_probe: usize) -> Windows {
        Windows::new(hash, max_probe, self.slots.len())
    }

    /// Frees an occupied slot: its quota count, its extension and its place in `live`.
    fn free(&mut self, at: usize, counts: &AdmissionCounts) {
        let Some(slot) = self.slot(at) else { return };
        if !slot.occupied() {
            return;
        }
        counts.release(slot.owner());
        self.release_extension(slot.extension());
        self.clear(at);
        self.live = self.live.saturating_sub(1);
        let _ =
            counts.live.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        self.counters.expired += 1;
    }

    /// Frees the slot if it holds an expired entry; returns whether it is free now.
    #[inline(always)]
    fn free_if_expired(&mut self, at: usize, clock: &Clock, counts: &AdmissionCounts) -> bool {
        match self.slot(at) {
            Some(slot) if slot.occupied() => {
                if clock.alive(slot.born) {
                    return false;
                }
                self.free(at, counts);
                true
            }
            Some(_) => true,
            None => false,
        }
    }

    /// Looks the key up in its windows, freeing the expired entries met on the way. Returns
    /// the result and the slots read.
    #[inline]
    pub(super) fn probe(
        &mut self,
        key: StoreKey,
        windows: &Windows,
        clock: &Clock,
        counts: &AdmissionCounts,
    ) -> Found {
        let size = self.slots.len();
        let mut found = Found { hit: None, free: None };
        for step in 0..windows.len {
            let at = windows.slot(step, size);
            let Some(slot) = self.slot(at) else { break };
            if slot.occupied() && clock.alive(slot.born) {
                if slot.holds(key) {
                    found.hit = Some(at);
                    self.note_probes(step + 1);
                    return found;
                }
            } else {
                if slot.occupied() {
                    self.free(at, counts);
                }
                found.free = found.free.or(Some(at));
            }
        }
        self.note_probes(windows.len);
        found
    }

    fn note_probes(&mut self, probes: usize) {
        let seen = &mut self.counters.max_probe_seen;
        *seen = (*seen).max(probes as u64);
    }

    /// Whether slot `at` holds `key` alive (a transaction's remembered hit, checked again).
    pub(super) fn holds_alive(&self, at: usize, key: StoreKey, clock: &Clock) -> bool {
        self.slot(at).is_some_and(|s| s.holds(key) && clock.alive(s.born))
    }

    /// Makes room in a key's full windows by moving one of their entries to a free slot of its
    /// own other window (one level of cuckoo displacement: at 7/8 load it turns most "window
    /// full" refusals into placements). `rehash` gives an entry's windows. Reads at most
    /// `max_probe` slots per entry of the windows (none for an entry whose windows are the
    /// key's). Returns the slot freed for the key.
    pub(super) fn displace(
        &mut self,
        windows: &Windows,
        rehash: impl Fn(StoreKey) -> Windows,
        clock: &Clock,
        counts: &AdmissionCounts,
    ) -> Option<usize> {
        if self.undisplaceable == Some((*windows, clock.tick64())) {
            return None;
        }
        let size = self.slots.len();
        for step in 0..windows.len.min(DISPLACE_CANDIDATES) {
            let from = windows.slot(step, size);
            let Some(moved) = self.slot(from) else { continue };
            let Some(key) = moved.store_key() else { continue };
            let theirs = rehash(key);
            if theirs == *windows {
                // Its windows are ours, all full: keys that all collide (a hash an attacker
                // knows) cost one hash each here, no slot reads.
                continue;
            }
            for their_step in 0..theirs.len.min(DISPLACE_READS) {
                let to = theirs.slot(their_step, size);
                if to != from && self.free_if_expired(to, clock, counts) {
                    self.set_slot(to, moved);
                    self.clear(from);
                    // It may have left a part of the table the sweep has not passed yet.
                    self.rotation_oldest = self.rotation_oldest.min(clock.born64(moved.born));
                    return Some(from);
                }
            }
        }
        self.undisplaceable = Some((*windows, clock.tick64()));
        None
    }

    /// Whether the shard may take one more entry, sweeping up to `sweep` slots first if not.
    pub(super) fn has_room(
        &mut self,
        sweep: usize,
        clock: &Clock,
        counts: &AdmissionCounts,
    ) -> bool {
        if self.live < self.limit {
            return true;
        }
        self.sweep(sweep, usize::MAX, clock, counts);
        self.live < self.limit
    }

    /// Creates an entry in the free slot `at`. The caller checked room and extension.
    pub(super) fn create(
        &mut self,
        at: usize,
        key: StoreKey,
        owner: u16,
        bank: &BankBytes,
        clock: &Clock,
        counts: &AdmissionCounts,
    ) -> Result<(), Refusal> {
        if at >= self.slots.len() {
            return Err(Refusal::ProbeLimit);
        }
        let slot = Slot {
            key: key.key,
            word0: 0,
            born: clock.tick64() as u32,
            meta: meta(key.scope, owner, 0),
        };
        self.set_slot(at, slot);
        if self.write(at, bank).is_err() {
            self.clear(at);
            self.counters.refused_full += 1;
            return Err(Refusal::Full);
        }
        counts.acquire(owner);
        counts.live.fetch_add(1, Ordering::Relaxed);
        self.oldest = if self.live == 0 { clock.tick64() } else { self.oldest.min(clock.tick64()) };
        self.newest = self.newest.max(clock.tick64());
        self.rotation_oldest = self.rotation_oldest.min(clock.tick64());
        self.live += 1;
        self.counters.inserts += 1;
        Ok(())
    }

    /// Overwrites the bank of the occupied slot `at`. Fails (nothing changed) when the bank
    /// needs an extension and the pool has none.
    pub(super) fn write(&mut self, at: usize, bank: &BankBytes) -> Result<(), Refusal> {
        let Some(mut slot) = self.slot(at) else { return Err(Refusal::ProbeLimit) };
        let wide = wide_words(bank);
        let mut extension = slot.extension();
        if wide == [0; 3] {
            self.release_extension(extension);
            extension = 0;
        } else {
            if extension == 0 {
                extension = self.take_extension().ok_or(Refusal::Full)?;
            }
            if let Some(words) = self.extensions.get_mut(extension as usize - 1) {
                *words = wide;
            }
        }
        slot.word0 = u64::from_ne_bytes(word(bank, 0));
        slot.meta = (slot.meta & ((1 << EXTENSION_SHIFT) - 1)) | (extension << EXTENSION_SHIFT);
        self.set_slot(at, slot);
        Ok(())
    }

    /// The bank of slot `at` (zeros where it has no extension).
    pub(super) fn bank(&self, at: usize) -> BankBytes {
        let mut bank = [0u8; BANK_LEN];
        let Some(slot) = self.slot(at) else { return bank };
        bank[..8].copy_from_slice(&slot.word0.to_ne_bytes());
        let wide = (slot.extension() as usize).checked_sub(1).and_then(|i| self.extensions.get(i));
        if let Some(words) = wide {
            for (chunk, word) in bank[8..].chunks_exact_mut(8).zip(words) {
                chunk.copy_from_slice(&word.to_ne_bytes());
            }
        }
        bank
    }

    fn take_extension(&mut self) -> Option<u32> {
        let taken = if self.extensions_free != 0 {
            let taken = self.extensions_free;
            self.extensions_free =
                self.extensions.get(taken as usize - 1).map_or(0, |words| words[0] as u32);
            taken
        } else if (self.extensions_fresh as usize) < self.extensions.len() {
            self.extensions_fresh += 1;
            self.extensions_fresh
        } else {
            return None;
        };
        self.extensions_used += 1;
        Some(taken)
    }

    fn release_extension(&mut self, extension: u32) {
        let index = (extension as usize).checked_sub(1);
        let Some(words) = index.and_then(|i| self.extensions.get_mut(i)) else { return };
        words[0] = u64::from(self.extensions_free);
        self.extensions_free = extension;
        self.extensions_used = self.extensions_used.saturating_sub(1);
    }

    /// Extensions in use (for tests and metrics).
    pub(super) fn extensions_used(&self) -> usize {
        self.extensions_used as usize
    }

    /// Moves the sweep hand over up to `slots` slots, freeing expired entries, until it has
    /// freed `max_freed`. Returns how many it freed.
    pub(super) fn sweep(
        &mut self,
        slots: usize,
        max_freed: usize,
        clock: &Clock,
        counts: &AdmissionCounts,
    ) -> usize {
        if self.live == 0 || clock.tick64() < self.oldest.saturating_add(clock.tau_ticks()) {
            // Nothing can have expired yet (a store filling up, or full of young entries).
            return 0;
        }
        let size = self.slots.len();
        let mut freed = 0;
        for _ in 0..slots.min(size) {
            if freed >= max_freed {
                break;
            }
            let at = self.hand;
            if let Some(slot) = self.slot(at) {
                if slot.occupied() {
                    if clock.alive(slot.born) {
                        self.rotation_oldest = self.rotation_oldest.min(clock.born64(slot.born));
                    } else {
                        self.free(at, counts);
                        freed += 1;
                    }
                }
            }
            self.hand += 1;
            if self.hand >= size {
                self.complete_rotation(clock);
            }
        }
        freed
    }

    /// The hand is back at slot 0: every occupied slot was passed alive, or created or moved
    /// since the rotation started, so the rotation's oldest is a bound for all of them.
    fn complete_rotation(&mut self, clock: &Clock) {
        self.hand = 0;
        self.oldest = if self.rotation_oldest != u64::MAX {
            self.rotation_oldest
        } else {
            // Nothing seen (an empty shard): a bound that holds anyway, with a margin for
            // workers whose clocks lag a little.
            self.rotation_start.saturating_sub(clock.tau_ticks() + 2)
        };
        self.rotation_oldest = u64::MAX;
        self.rotation_start = clock.tick64();
    }

    /// Keeps every occupied slot's u32 age unambiguous: if the sweep has not passed some slot
    /// for `WRAP_GUARD_TICKS` (2^30 ticks, about 2^14 tau: 39 hours at tau = 10 s; only a
    /// shard that saw almost no creations for that long), sweep the whole shard now. Called before any
    /// operation reads an age; one comparison unless it fires.
    #[inline(always)]
    pub(super) fn guard_wrap(&mut self, clock: &Clock, counts: &AdmissionCounts) {
        if self.live > 0 && clock.tick64().saturating_sub(self.oldest) >= WRAP_GUARD_TICKS {
            self.sweep_all(clock, counts);
        }
    }

    #[cold]
    fn sweep_all(&mut self, clock: &Clock, counts: &AdmissionCounts) {
        let size = self.slots.len();
        if clock.tick64() >= self.newest.saturating_add(clock.tau_ticks() + 2) {
            // Nothing was created for over tau: every entry is dead, however old (an idle
            // shard's ages may already have wrapped, so they are not read).
            for at in 0..size {
                self.free(at, counts);
            }
        } else {
            // A creation less than tau ago ran this guard: no age has reached 2^31 ticks.
            self.hand = 0;
            self.rotation_oldest = u64::MAX;
            self.sweep(size, usize::MAX, clock, counts);
        }
        // Survivors are alive now: born at most tau ago (less a margin for lagging clocks).
        self.hand = 0;
        self.rotation_oldest = u64::MAX;
        self.rotation_start = clock.tick64();
        self.oldest = clock.tick64().saturating_sub(clock.tau_ticks() + 2);
    }
}

/// Words 1..3 of a bank.
fn wide_words(bank: &BankBytes) -> [u64; 3] {
    [1, 2, 3].map(|i| u64::from_ne_bytes(word(bank, i)))
}

fn word(bank: &BankBytes, index: usize) -> [u8; 8] {
    let mut word = [0u8; 8];
    if let Some(bytes) = bank.get(8 * index..8 * index + 8) {
        word.copy_from_slice(bytes);
    }
    word
}
