//! Exact-match table: open addressing with linear probing, lock-free lookups, in-place
//! data-plane writes, and structural changes (insert, delete) serialised by a per-table writer
//! lock that the data plane only ever *tries* (insert on miss gives up and counts instead of
//! waiting).
//!
//! Each hash slot starts with a state word, `tag << 32 | state`; a lookup compares the 32-bit
//! tag before touching the key. `static` storage keeps key and body inline in the slot array
//! (stride rounded to a cache line where it fits), `dynamic` keeps a pointer to a separately
//! allocated entry. Deleted slots become tombstones; they are reused (and dynamic entries freed)
//! only after a QSBR grace period, so a worker holding an [`EntryRef`] from before the delete
//! never writes into a different key's entry.

use crate::config::{MatchKind, Store, TableConfig};
use crate::entry::{BodyLayout, DefaultEntry, EntryData, EntryRef, EntryStats, COPY_GRACE_TIMEOUT};
use crate::key::{hash_words, pack, prefetch, reduce, unpack, words_for, MAX_KEY_WORDS};
use crate::words::WordArray;
use crate::TableError;
use hotplane_core::{Guard, Qsbr};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

const EMPTY: u64 = 0;
const OCCUPIED: u64 = 1;
/// Deleted; a worker may still hold a reference. Probing continues past it.
const TOMBSTONE: u64 = 2;
/// Deleted and past its grace period: reusable. Probing continues past it.
const FREE: u64 = 3;
const STATE_MASK: u64 = 3;

/// Counters of what the data plane could not do (shared; incremented only on rare paths).
#[derive(Debug, Default)]
pub struct ExactCounters {
    pub inserted_on_miss: AtomicU64,
    /// Insert on miss found the table at its size.
    pub insert_full: AtomicU64,
    /// Insert on miss found the writer lock held (by the control plane or another worker) and
    /// left the key for a later packet.
    pub insert_deferred: AtomicU64,
}

struct Writer {
    /// Deleted slots waiting for a grace period: (epoch, slot).
    retired: VecDeque<(u64, usize)>,
    /// Slots not EMPTY (occupied, tombstones, free): at least one slot must stay EMPTY so every
    /// probe ends.
    in_use: usize,
    /// Set while `compact` retries an insert (once).
    compacting: bool,
}

/// The result of a data-plane lookup that may insert.
pub enum Lookup<'g> {
    Hit(EntryRef<'g>),
    /// Missed, and the key was inserted with the insert-on-miss action.
    Inserted(EntryRef<'g>),
    Miss,
}

/// One entry as the control plane reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactEntry {
    pub key: Vec<u8>,
    pub data: EntryData,
    pub stats: EntryStats,
}

pub struct ExactTable {
    cfg: TableConfig,
    key_words: usize,
    body: BodyLayout,
    /// Words of a dynamic entry (key + body).
    entry_words: usize,
    cap: usize,
    stride: usize,
    /// One state word per slot (`tag << 32 | state`), dense: probing scans 8 slots per line.
    meta: WordArray<AtomicU64>,
    /// Static: key and body of each slot; dynamic: a pointer per slot.
    slots: WordArray<AtomicU64>,
    len: AtomicUsize,
    default: DefaultEntry,
    on_miss: Option<(u16, Vec<u64>)>,
    writer: Mutex<Writer>,
    qsbr: Qsbr,
    pub counters: ExactCounters,
}

impl ExactTable {
    pub fn new(cfg: TableConfig, qsbr: &Qsbr) -> Result<Self, TableError> {
        cfg.validate()?;
        if cfg.kind != MatchKind::Exact {
            return Err(TableError::invalid(&cfg.name, "not an exact table"));
        }
        let key_words = words_for(cfg.key_bytes());
        let body = cfg.body_layout();
        let stride = match cfg.store {
            Store::Static => {
                let w = key_words + body.words();
                if w <= 8 {
                    w.next_power_of_two()
                } else {
                    w.next_multiple_of(8)
                }
            }
            Store::Dynamic => 1,
        };
        // Load factor at most 2/3 when full: short probes on hits and misses alike.
        let cap = (cfg.size + cfg.size / 2).max(16);
        let meta = WordArray::zeroed(cap)?;
        let slots = WordArray::zeroed(cap * stride)?;
        let default = DefaultEntry::new(&cfg, qsbr)?;
        let on_miss = cfg
            .insert_on_miss
            .as_ref()
            .map(|m| (cfg.action_id(&m.action).unwrap_or(0), m.data.clone()));
        Ok(Self {
            key_words,
            body,
            entry_words: key_words + body.words(),
            cap,
            stride,
            meta,
            slots,
            len: AtomicUsize::new(0),
            default,
            on_miss,
            writer: Mutex::new(Writer { retired: VecDeque::new(), in_use: 0, compacting: false }),
            qsbr: qsbr.clone(),
            counters: ExactCounters::default(),
            cfg,
        })
    }

    pub fn config(&self) -> &TableConfig {
        &self.cfg
    }

    /// Key words a lookup takes.
    pub fn key_words(&self) -> usize {
        self.key_words
    }

    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of slot storage reserved.
    pub fn storage_bytes(&self) -> usize {
        self.slots.bytes() + self.meta.bytes()
    }

    /// The default (miss) entry.
    pub fn default_entry(&self) -> &DefaultEntry {
        &self.default
    }

    #[inline(always)]
    fn state(&self, slot: usize) -> &AtomicU64 {
        &self.meta[slot]
    }

    /// Key and body words of an occupied slot.
    ///
    /// # Safety
    /// For dynamic storage the slot's pointer must be live: the caller observed the slot
    /// OCCUPIED (Acquire) inside a QSBR read-side section, or holds the writer lock.
    #[inline(always)]
    unsafe fn entry_words(&self, slot: usize) -> &[AtomicU64] {
        let base = slot * self.stride;
        match self.cfg.store {
            Store::Static => &self.slots[base..base + self.entry_words],
            Store::Dynamic => {
                let p = self.slots[base].load(Ordering::Acquire) as *const AtomicU64;
                // SAFETY: per this function's contract the pointer came from `alloc_entry` (a
                // live allocation of `entry_words` atomics), freed only after a grace period.
                unsafe { std::slice::from_raw_parts(p, self.entry_words) }
            }
        }
    }

    /// Find `key` (packed words). Lock-free: a few loads; never waits.
    #[inline]
    pub fn lookup<'g>(&'g self, key: &[u64], _guard: &'g Guard<'_>) -> Option<EntryRef<'g>> {
        self.find(key).map(|slot| self.body_at(slot))
    }

    #[inline(always)]
    fn body_at(&self, slot: usize) -> EntryRef<'_> {
        // SAFETY: `slot` was found OCCUPIED by the caller inside a read-side section (or under
        // the writer lock): see `entry_words`.
        let words = unsafe { self.entry_words(slot) };
        EntryRef::new(&words[self.key_words..], self.body)
    }

    /// The hash a lookup of `key` uses (for [`prefetch`](Self::prefetch) and
    /// [`lookup_hashed`](Self::lookup_hashed)).
    #[inline(always)]
    pub fn hash(&self, key: &[u64]) -> u64 {
        hash_words(&key[..self.key_words.min(key.len())])
    }

    /// First step of a batched lookup: start loading the home slot's state line and (static
    /// storage) its entry. A batch does this for every packet before looking any up, so that
    /// the cache misses overlap instead of queueing.
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        let slot = reduce(hash, self.cap);
        prefetch(&self.meta[slot]);
        if self.cfg.store == Store::Static {
            prefetch(self.slots[slot * self.stride..].as_ptr());
        }
    }

    /// Second step: find the slot whose tag matches (its state line is in cache by now) and
    /// start loading its entry, unless that is the home slot's, loaded already (static).
    #[inline(always)]
    pub fn prefetch_entry(&self, hash: u64) {
        let tag = hash >> 32;
        let home = reduce(hash, self.cap);
        let mut slot = home;
        for _ in 0..8 {
            let s = self.state(slot).load(Ordering::Relaxed);
            if s & STATE_MASK == EMPTY {
                return;
            }
            if s & STATE_MASK == OCCUPIED && s >> 32 == tag {
                match self.cfg.store {
                    Store::Static if slot != home => {
                        prefetch(self.slots[slot * self.stride..].as_ptr())
                    }
                    Store::Static => {}
                    Store::Dynamic => {
                        prefetch(self.slots[slot].load(Ordering::Relaxed) as *const u64)
                    }
                }
                return;
            }
            slot = if slot + 1 == self.cap { 0 } else { slot + 1 };
        }
    }

    /// [`lookup`](Self::lookup) with the hash already computed.
    #[inline(always)]
    pub fn lookup_hashed<'g>(
        &'g self,
        key: &[u64],
        hash: u64,
        _guard: &'g Guard<'_>,
    ) -> Option<EntryRef<'g>> {
        self.find_hashed(key, hash).map(|slot| self.body_at(slot))
    }

    #[inline(always)]
    fn find(&self, key: &[u64]) -> Option<usize> {
        let key = key.get(..self.key_words)?;
        self.find_hashed(key, hash_words(key))
    }

    #[inline(always)]
    fn find_hashed(&self, key: &[u64], h: u64) -> Option<usize> {
        let key = key.get(..self.key_words)?;
        let tag = h >> 32;
        let mut slot = reduce(h, self.cap);
        for _ in 0..self.cap {
            let s = self.state(slot).load(Ordering::Acquire);
            if s & STATE_MASK == EMPTY {
                return None;
            }
            if s & STATE_MASK == OCCUPIED && s >> 32 == tag {
                // SAFETY: observed OCCUPIED with Acquire just above; see `entry_words`.
                let words = unsafe { self.entry_words(slot) };
                if words[..self.key_words]
                    .iter()
                    .zip(key)
                    .all(|(w, k)| w.load(Ordering::Relaxed) == *k)
                {
                    return Some(slot);
                }
            }
            slot += 1;
            if slot == self.cap {
                slot = 0;
            }
        }
        None
    }

    /// Lookup, inserting the key with the insert-on-miss action when the table has one. The
    /// insert only *tries* the writer lock: if it is held the key is left for a later packet
    /// (counted in `insert_deferred`); at the size limit it is counted in `insert_full`.
    #[inline]
    pub fn lookup_or_insert<'g>(&'g self, key: &[u64], guard: &'g Guard<'_>) -> Lookup<'g> {
        self.lookup_or_insert_hashed(key, self.hash(key), guard)
    }

    /// [`lookup_or_insert`](Self::lookup_or_insert) with the hash already computed.
    #[inline]
    pub fn lookup_or_insert_hashed<'g>(
        &'g self,
        key: &[u64],
        hash: u64,
        guard: &'g Guard<'_>,
    ) -> Lookup<'g> {
        if let Some(e) = self.lookup_hashed(key, hash, guard) {
            return Lookup::Hit(e);
        }
        let Some((action, data)) = &self.on_miss else { return Lookup::Miss };
        let mut w = match self.writer.try_lock() {
            Ok(w) => w,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.counters.insert_deferred.fetch_add(1, Ordering::Relaxed);
                return Lookup::Miss;
            }
        };
        match self.insert_locked(&mut w, key, *action, data, false) {
            Ok(slot) => {
                self.counters.inserted_on_miss.fetch_add(1, Ordering::Relaxed);
                Lookup::Inserted(self.body_at(slot))
            }
            Err(TableError::Exists) => match self.find(key) {
                Some(slot) => Lookup::Hit(self.body_at(slot)),
                None => Lookup::Miss,
            },
            Err(_) => {
                self.counters.insert_full.fetch_add(1, Ordering::Relaxed);
                Lookup::Miss
            }
        }
    }

    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.reclaim(&mut w);
        w
    }

    fn pack_key(&self, key: &[u8]) -> Result<[u64; MAX_KEY_WORDS], TableError> {
        check_key(&self.cfg, key)?;
        let mut words = [0u64; MAX_KEY_WORDS];
        pack(key, &mut words[..self.key_words]);
        Ok(words)
    }

    /// Insert a new entry (control plane). Fails if the key exists or the table is full.
    pub fn insert(&self, key: &[u8], action: u16, data: &[u64]) -> Result<(), TableError> {
        check_action(&self.cfg, action, data)?;
        let k = self.pack_key(key)?;
        let mut w = self.lock_writer();
        self.insert_locked(&mut w, &k[..self.key_words], action, data, true).map(|_| ())
    }

    fn insert_locked(
        &self,
        w: &mut Writer,
        key: &[u64],
        action: u16,
        data: &[u64],
        may_wait: bool,
    ) -> Result<usize, TableError> {
        let key = key
            .get(..self.key_words)
            .ok_or(TableError::BadKey { what: "key shorter than the table's".into() })?;
        let h = hash_words(key);
        let tag = h >> 32;
        let mut slot = reduce(h, self.cap);
        let mut reusable = None;
        let mut target = None;
        for _ in 0..self.cap {
            let s = self.state(slot).load(Ordering::Acquire);
            match s & STATE_MASK {
                EMPTY => {
                    target = Some(reusable.unwrap_or(slot));
                    break;
                }
                OCCUPIED if s >> 32 == tag => {
                    // SAFETY: under the writer lock; the slot is occupied.
                    let words = unsafe { self.entry_words(slot) };
                    if words[..self.key_words]
                        .iter()
                        .zip(key)
                        .all(|(a, b)| a.load(Ordering::Relaxed) == *b)
                    {
                        return Err(TableError::Exists);
                    }
                }
                FREE => {
                    reusable.get_or_insert(slot);
                }
                _ => {}
            }
            slot += 1;
            if slot == self.cap {
                slot = 0;
            }
        }
        // After the probe: a key that is already there is `Exists`, even in a full table.
        if self.len() >= self.cfg.size {
            return Err(TableError::Full { size: self.cfg.size });
        }
        let slot = target.or(reusable).ok_or(TableError::Full { size: self.cfg.size })?;
        let was_empty = self.state(slot).load(Ordering::Relaxed) & STATE_MASK == EMPTY;
        if was_empty && w.in_use + 2 > self.cap {
            // Out of empty slots although below size: tombstones and free slots fill the
            // array. The control plane (never a worker: it would stall the fast path) waits
            // for deleted slots to pass their grace period, empties what can be emptied (a
            // scan of the table) and retries once.
            if may_wait && !std::mem::replace(&mut w.compacting, true) {
                if let Some(&(epoch, _)) = w.retired.back() {
                    let _ = self.qsbr.wait_for(epoch, COPY_GRACE_TIMEOUT);
                }
                self.reclaim(w);
                self.compact(w);
                let r = self.insert_locked(w, key, action, data, may_wait);
                w.compacting = false;
                return r;
            }
            return Err(TableError::Full { size: self.cfg.size });
        }
        let base = slot * self.stride;
        let words: &[AtomicU64] = match self.cfg.store {
            Store::Static => &self.slots[base..base + self.entry_words],
            Store::Dynamic => {
                let fresh: Box<[AtomicU64]> =
                    (0..self.entry_words).map(|_| AtomicU64::new(0)).collect();
                let p = Box::into_raw(fresh) as *mut AtomicU64;
                self.slots[base].store(p as u64, Ordering::Relaxed);
                // SAFETY: just allocated with `entry_words` elements; freed only in `reclaim`.
                unsafe { std::slice::from_raw_parts(p, self.entry_words) }
            }
        };
        for (w, k) in words.iter().zip(key) {
            w.store(*k, Ordering::Relaxed);
        }
        EntryRef::new(&words[self.key_words..], self.body).init(action, data);
        // Release: key and body are visible to whoever sees OCCUPIED.
        self.state(slot).store(tag << 32 | OCCUPIED, Ordering::Release);
        self.len.fetch_add(1, Ordering::Relaxed);
        if was_empty {
            w.in_use += 1;
        }
        Ok(slot)
    }

    /// Replace an entry's action and data (control plane). Data-plane writes to it before this
    /// are overwritten, those after land in the new data; counters are kept.
    pub fn modify(&self, key: &[u8], action: u16, data: &[u64]) -> Result<(), TableError> {
        check_action(&self.cfg, action, data)?;
        let k = self.pack_key(key)?;
        let _w = self.lock_writer();
        let slot = self.find(&k[..self.key_words]).ok_or(TableError::NotFound)?;
        self.body_at(slot).publish(&self.qsbr, action, data);
        Ok(())
    }

    /// Run `f` on the entry under `key`, holding the writer lock (control plane: its meter).
    pub fn with_entry<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(EntryRef<'_>) -> R,
    ) -> Result<R, TableError> {
        let k = self.pack_key(key)?;
        let _w = self.lock_writer();
        let slot = self.find(&k[..self.key_words]).ok_or(TableError::NotFound)?;
        Ok(f(self.body_at(slot)))
    }

    /// Insert, or modify if present.
    pub fn upsert(&self, key: &[u8], action: u16, data: &[u64]) -> Result<(), TableError> {
        match self.insert(key, action, data) {
            Err(TableError::Exists) => self.modify(key, action, data),
            r => r,
        }
    }

    /// Delete an entry (control plane). A worker still holding it keeps a valid reference until
    /// its next quiescent state; the slot is reused only after that.
    pub fn delete(&self, key: &[u8]) -> Result<(), TableError> {
        let k = self.pack_key(key)?;
        let mut w = self.lock_writer();
        let slot = self.find(&k[..self.key_words]).ok_or(TableError::NotFound)?;
        self.retire(&mut w, slot);
        Ok(())
    }

    fn retire(&self, w: &mut Writer, slot: usize) {
        let s = self.state(slot).load(Ordering::Relaxed);
        self.state(slot).store((s & !STATE_MASK) | TOMBSTONE, Ordering::Release);
        self.len.fetch_sub(1, Ordering::Relaxed);
        w.retired.push_back((self.qsbr.advance(), slot));
    }

    /// Delete every entry.
    pub fn clear(&self) {
        let mut w = self.lock_writer();
        for slot in 0..self.cap {
            if self.state(slot).load(Ordering::Relaxed) & STATE_MASK == OCCUPIED {
                self.retire(&mut w, slot);
            }
        }
    }

    /// Turn tombstones past their grace period into reusable slots, free dynamic entries, and
    /// empty runs of free slots that end at an empty slot (no probe passes through them).
    fn reclaim(&self, w: &mut Writer) {
        while let Some(&(epoch, slot)) = w.retired.front() {
            if !self.qsbr.poll(epoch) {
                break;
            }
            w.retired.pop_front();
            if self.cfg.store == Store::Dynamic {
                let cell = &self.slots[slot * self.stride];
                let p = cell.swap(0, Ordering::Relaxed) as *mut AtomicU64;
                if !p.is_null() {
                    // SAFETY: allocated in `insert_locked` as a boxed slice of `entry_words`;
                    // unreachable since the tombstone's grace period completed.
                    drop(unsafe {
                        Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, self.entry_words))
                    });
                }
            }
            self.state(slot).store(FREE, Ordering::Release);
            self.empty_from(w, slot);
        }
    }

    /// Turn the free slot `slot`, and free slots before it, back into empty slots where no
    /// probe sequence needs to pass them.
    fn empty_from(&self, w: &mut Writer, slot: usize) {
        let mut s = slot;
        while self.state(s).load(Ordering::Relaxed) & STATE_MASK == FREE && self.can_empty(s) {
            self.state(s).store(EMPTY, Ordering::Release);
            w.in_use -= 1;
            s = if s == 0 { self.cap - 1 } else { s - 1 };
        }
    }

    /// Whether free slot `i` can become empty: every occupied slot after it (up to the next
    /// empty slot) has its home after `i`, so no lookup for a live key probes across `i`.
    /// Writer lock held.
    fn can_empty(&self, i: usize) -> bool {
        let dist = |a: usize, b: usize| if b >= a { b - a } else { b + self.cap - a };
        let mut j = i;
        for _ in 1..self.cap {
            j = if j + 1 == self.cap { 0 } else { j + 1 };
            let s = self.state(j).load(Ordering::Relaxed);
            match s & STATE_MASK {
                EMPTY => return true,
                OCCUPIED => {
                    // SAFETY: occupied, under the writer lock.
                    let words = unsafe { self.entry_words(j) };
                    let key: [u64; MAX_KEY_WORDS] = std::array::from_fn(|n| {
                        words
                            .get(n)
                            .filter(|_| n < self.key_words)
                            .map_or(0, |w| w.load(Ordering::Relaxed))
                    });
                    let home = reduce(hash_words(&key[..self.key_words]), self.cap);
                    let d = dist(i, home);
                    if d == 0 || d > dist(i, j) {
                        return false;
                    }
                }
                _ => {}
            }
        }
        false
    }

    /// Try to empty every free slot (when inserts run short of empty slots).
    fn compact(&self, w: &mut Writer) {
        for s in (0..self.cap).rev() {
            if self.state(s).load(Ordering::Relaxed) & STATE_MASK == FREE {
                self.empty_from(w, s);
            }
        }
    }

    /// Reclaim what grace periods allow (the control loop calls this now and then).
    pub fn maintain(&self) {
        let _w = self.lock_writer();
    }

    /// Read one entry (control plane).
    pub fn get(&self, key: &[u8]) -> Result<ExactEntry, TableError> {
        let k = self.pack_key(key)?;
        let _w = self.lock_writer();
        let slot = self.find(&k[..self.key_words]).ok_or(TableError::NotFound)?;
        let e = self.body_at(slot);
        Ok(ExactEntry { key: key.to_vec(), data: e.snapshot(), stats: e.stats() })
    }

    /// Every entry (control plane), in slot order.
    pub fn entries(&self) -> Vec<ExactEntry> {
        let _w = self.lock_writer();
        let mut out = Vec::with_capacity(self.len());
        for slot in 0..self.cap {
            if self.state(slot).load(Ordering::Acquire) & STATE_MASK != OCCUPIED {
                continue;
            }
            // SAFETY: occupied, under the writer lock.
            let words = unsafe { self.entry_words(slot) };
            let key: Vec<u64> =
                words[..self.key_words].iter().map(|w| w.load(Ordering::Relaxed)).collect();
            let e = EntryRef::new(&words[self.key_words..], self.body);
            out.push(ExactEntry {
                key: unpack(&key, self.cfg.key_bytes()),
                data: e.snapshot(),
                stats: e.stats(),
            });
        }
        out
    }
}

impl Drop for ExactTable {
    fn drop(&mut self) {
        if self.cfg.store == Store::Dynamic {
            for slot in 0..self.cap {
                let p = self.slots[slot * self.stride].load(Ordering::Relaxed) as *mut AtomicU64;
                if !p.is_null() {
                    // SAFETY: every non-null pointer came from `insert_locked` and is freed once
                    // (here, or in `reclaim`, which nulls it); `&mut self` excludes readers.
                    drop(unsafe {
                        Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, self.entry_words))
                    });
                }
            }
        }
    }
}

/// A control-plane key: exactly the table's width, no bits set above it.
pub(crate) fn check_key(cfg: &TableConfig, key: &[u8]) -> Result<(), TableError> {
    if key.len() != cfg.key_bytes() {
        return Err(TableError::BadKey {
            what: format!(
                "{} bytes; table `{}` takes {} ({} bits)",
                key.len(),
                cfg.name,
                cfg.key_bytes(),
                cfg.key_bits
            ),
        });
    }
    let spare = cfg.key_bytes() as u32 * 8 - cfg.key_bits;
    if spare > 0 && key[0] >> (8 - spare) != 0 {
        return Err(TableError::BadKey {
            what: format!("value wider than the table's {} bits", cfg.key_bits),
        });
    }
    Ok(())
}

pub(crate) fn check_action(cfg: &TableConfig, action: u16, data: &[u64]) -> Result<(), TableError> {
    let spec = cfg.actions.get(action as usize).ok_or_else(|| TableError::BadAction {
        what: format!("action id {action}; table `{}` has {}", cfg.name, cfg.actions.len()),
    })?;
    if data.len() > spec.data_words() {
        return Err(TableError::BadAction {
            what: format!(
                "action `{}` takes {} data words, got {}",
                spec.name,
                spec.data_words(),
                data.len()
            ),
        });
    }
    Ok(())
}
