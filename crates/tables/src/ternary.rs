//! Ternary match by tuple-space search: rules are grouped by mask, each mask gets a hash table
//! of masked keys, and the masks are visited in order of the best priority they hold, stopping
//! as soon as no remaining mask can beat the match found (early exit). Ranges are expanded into
//! prefixes of the same entry.
//!
//! The index is immutable: every control-plane change builds a new one off the fast path and
//! publishes it through a [`Slot`] (one pointer swap; the old index is freed after a grace
//! period). Entries live in an arena outside the index, so in-place data-plane writes and
//! counters survive every rebuild.

use crate::arena::{Arena, ArenaSlots};
use crate::config::{MatchKind, TableConfig};
use crate::entry::{DefaultEntry, EntryData, EntryRef, EntryStats};
use crate::exact::check_action;
use crate::key::{pack, unpack, words_for, MAX_KEY_WORDS};
use crate::TableError;
use hotplane_core::{Guard, Qsbr, Slot};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What one ternary entry matches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TernaryMatch {
    /// `key & mask == value & mask` (value and mask as key bytes).
    Mask { value: Vec<u8>, mask: Vec<u8> },
    /// `lo <= key <= hi`, for keys of at most 64 bits.
    Range { lo: u64, hi: u64 },
}

/// One entry as the control plane reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TernaryEntry {
    pub matches: TernaryMatch,
    pub priority: u32,
    pub data: EntryData,
    pub stats: EntryStats,
}

/// Value/mask pairs covering `lo..=hi` over `bits`-bit keys (the classic range-to-prefix split:
/// at most `2 * bits - 2` pairs).
pub fn expand_range(lo: u64, hi: u64, bits: u32) -> Vec<(u64, u64)> {
    let full = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let mut out = Vec::new();
    if lo > hi || hi > full {
        return out;
    }
    let mut at = lo as u128;
    let end = hi as u128 + 1;
    while at < end {
        // Largest aligned block starting at `at` that fits.
        let mut size: u128 = if at == 0 { 1u128 << bits } else { at & at.wrapping_neg() };
        while at + size > end {
            size >>= 1;
        }
        out.push((at as u64, full & !((size - 1) as u64)));
        at += size;
    }
    out
}

/// A (value, mask) pair in packed key words.
type Pair = ([u64; MAX_KEY_WORDS], [u64; MAX_KEY_WORDS]);

struct Tuple {
    mask: [u64; MAX_KEY_WORDS],
    best: u32,
    /// Open addressing, power-of-two capacity; each slot is `key words..., prio << 32 | index+1`.
    slots: Box<[u64]>,
    cap_mask: usize,
}

/// The per-mask tables' hash: one multiply per key word, the words' products independent (a
/// short dependency chain: the search computes ten of these per lookup), folded so that the high
/// bits reach the low ones the index uses. The tables are small and built by us: a strong hash
/// buys nothing.
#[inline(always)]
fn tuple_hash(words: &[u64]) -> u64 {
    const K: [u64; 4] = [
        0x9e37_79b9_7f4a_7c15,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
        0x27d4_eb2f_1656_67c5,
    ];
    let mut h = 0u64;
    for (i, &w) in words.iter().enumerate() {
        h ^= (w ^ (i as u64)).wrapping_mul(K[i % 4]);
    }
    h ^ (h >> 32)
}

/// Tuple-space search over `KW`-word keys: the best tag (`priority + 1 << 32 | entry + 1`),
/// 0 when nothing matches.
#[inline(always)]
fn search<const KW: usize>(index: &Index, key: &[u64]) -> u64 {
    let mut k = [0u64; KW];
    k.copy_from_slice(&key[..KW]);
    let mut best: u64 = 0;
    for t in &index.tuples {
        if best != 0 && (best >> 32) as u32 >= t.best {
            break;
        }
        let mut m = [0u64; KW];
        for i in 0..KW {
            m[i] = k[i] & t.mask[i];
        }
        let mut s = tuple_hash(&m) as usize & t.cap_mask;
        while let Some(slot) = t.slots.get(s * (KW + 1)..s * (KW + 1) + KW + 1) {
            let tag = slot[KW];
            if tag == 0 {
                break;
            }
            if slot[..KW] == m {
                best = best.max(tag);
                break;
            }
            s = (s + 1) & t.cap_mask;
        }
    }
    best
}

/// `search` for any key width.
fn search_any(index: &Index, key: &[u64]) -> u64 {
    let kw = index.key_words;
    let mut best: u64 = 0;
    let mut masked = [0u64; MAX_KEY_WORDS];
    for t in &index.tuples {
        if best != 0 && (best >> 32) as u32 >= t.best {
            break;
        }
        for i in 0..kw {
            masked[i] = key[i] & t.mask[i];
        }
        let mut s = tuple_hash(&masked[..kw]) as usize & t.cap_mask;
        loop {
            let at = s * (kw + 1);
            let tag = t.slots[at + kw];
            if tag == 0 {
                break;
            }
            if t.slots[at..at + kw].iter().zip(&masked[..kw]).all(|(a, b)| a == b) {
                best = best.max(tag);
                break;
            }
            s = (s + 1) & t.cap_mask;
        }
    }
    best
}

struct Index {
    key_words: usize,
    tuples: Vec<Tuple>,
}

struct Writer {
    slots: ArenaSlots,
    entries: BTreeMap<(TernaryMatch, u32), (u32, Vec<Pair>)>,
}

pub struct TernaryTable {
    cfg: TableConfig,
    key_words: usize,
    index: Slot<Index>,
    default: DefaultEntry,
    /// Entries (the index points at them); which are in use is `writer.slots`.
    arena: Arena,
    writer: Mutex<Writer>,
    qsbr: Qsbr,
    masks: AtomicUsize,
}

impl TernaryTable {
    pub fn new(cfg: TableConfig, qsbr: &Qsbr) -> Result<Self, TableError> {
        cfg.validate()?;
        if cfg.kind != MatchKind::Ternary {
            return Err(TableError::invalid(&cfg.name, "not a ternary table"));
        }
        let key_words = words_for(cfg.key_bytes());
        Ok(Self {
            key_words,
            index: Slot::new(qsbr, Index { key_words, tuples: vec![] }),
            default: DefaultEntry::new(&cfg, qsbr)?,
            arena: Arena::new(cfg.size, cfg.body_layout())?,
            writer: Mutex::new(Writer { slots: ArenaSlots::default(), entries: BTreeMap::new() }),
            qsbr: qsbr.clone(),
            masks: AtomicUsize::new(0),
            cfg,
        })
    }

    pub fn config(&self) -> &TableConfig {
        &self.cfg
    }

    pub fn key_words(&self) -> usize {
        self.key_words
    }

    pub fn len(&self) -> usize {
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Masks in the current index.
    pub fn masks(&self) -> usize {
        self.masks.load(Ordering::Relaxed)
    }

    /// The highest-priority entry matching `key` (packed words).
    #[inline]
    pub fn lookup<'g>(&'g self, key: &[u64], guard: &'g Guard<'_>) -> Option<EntryRef<'g>> {
        let index = &self.index.load(guard).value;
        let key = key.get(..index.key_words)?;
        // Common key widths get a loop the compiler unrolls.
        let best = match index.key_words {
            1 => search::<1>(index, key),
            2 => search::<2>(index, key),
            3 => search::<3>(index, key),
            4 => search::<4>(index, key),
            _ => search_any(index, key),
        };
        (best != 0).then(|| self.arena.get((best as u32).wrapping_sub(1)))
    }

    pub fn default_entry(&self) -> &DefaultEntry {
        &self.default
    }

    fn expand(&self, m: &TernaryMatch) -> Result<Vec<Pair>, TableError> {
        let kb = self.cfg.key_bytes();
        match m {
            TernaryMatch::Mask { value, mask } => {
                if value.len() != kb || mask.len() != kb {
                    return Err(TableError::BadKey {
                        what: format!(
                            "value and mask of {} bytes; table `{}` takes {kb}",
                            value.len().max(mask.len()),
                            self.cfg.name
                        ),
                    });
                }
                let (mut v, mut mk) = ([0u64; MAX_KEY_WORDS], [0u64; MAX_KEY_WORDS]);
                pack(value, &mut v[..self.key_words]);
                pack(mask, &mut mk[..self.key_words]);
                for i in 0..self.key_words {
                    v[i] &= mk[i];
                }
                Ok(vec![(v, mk)])
            }
            TernaryMatch::Range { lo, hi } => {
                if self.cfg.key_bits > 64 {
                    return Err(TableError::BadKey {
                        what: "ranges need a key of at most 64 bits".into(),
                    });
                }
                let pairs = expand_range(*lo, *hi, self.cfg.key_bits);
                if pairs.is_empty() {
                    return Err(TableError::BadKey {
                        what: format!(
                            "range {lo}..={hi} is empty or beyond {} bits",
                            self.cfg.key_bits
                        ),
                    });
                }
                // Left-align the key value in its bytes as `pack` does for byte keys.
                let shift = 64 - kb as u32 * 8;
                Ok(pairs
                    .into_iter()
                    .map(|(v, m)| {
                        let (mut a, mut b) = ([0u64; MAX_KEY_WORDS], [0u64; MAX_KEY_WORDS]);
                        a[0] = v << shift;
                        b[0] = m << shift;
                        (a, b)
                    })
                    .collect())
            }
        }
    }

    /// Add an entry (control plane). Higher `priority` wins; an entry with the same match and
    /// priority must not exist.
    pub fn insert(
        &self,
        m: TernaryMatch,
        priority: u32,
        action: u16,
        data: &[u64],
    ) -> Result<(), TableError> {
        self.insert_many(vec![(m, priority, action, data.to_vec())])
    }

    /// Add several entries with one index rebuild.
    pub fn insert_many(
        &self,
        entries: Vec<(TernaryMatch, u32, u16, Vec<u64>)>,
    ) -> Result<(), TableError> {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.slots.reclaim(&self.qsbr);
        // Check everything first: a refused batch changes nothing.
        let mut checked = Vec::with_capacity(entries.len());
        let mut seen = std::collections::BTreeSet::new();
        for (m, priority, action, data) in entries {
            check_action(&self.cfg, action, &data)?;
            if priority == u32::MAX {
                return Err(TableError::BadKey { what: "priority must be below 2^32 - 1".into() });
            }
            let pairs = self.expand(&m)?;
            if w.entries.contains_key(&(m.clone(), priority)) || !seen.insert((m.clone(), priority))
            {
                return Err(TableError::Exists);
            }
            checked.push((m, priority, action, data, pairs));
        }
        if w.entries.len() + checked.len() > self.cfg.size {
            return Err(TableError::Full { size: self.cfg.size });
        }
        for (m, priority, action, data, pairs) in checked {
            let index = w.slots.alloc(&self.arena, &self.qsbr, action, &data)?;
            w.entries.insert((m, priority), (index, pairs));
        }
        self.rebuild(&w);
        Ok(())
    }

    pub fn modify(
        &self,
        m: &TernaryMatch,
        priority: u32,
        action: u16,
        data: &[u64],
    ) -> Result<(), TableError> {
        check_action(&self.cfg, action, data)?;
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let (index, _) = w.entries.get(&(m.clone(), priority)).ok_or(TableError::NotFound)?;
        self.arena.get(*index).publish(&self.qsbr, action, data);
        Ok(())
    }

    /// Run `f` on the entry `m` at `priority`, holding the writer lock (control plane).
    pub fn with_entry<R>(
        &self,
        m: &TernaryMatch,
        priority: u32,
        f: impl FnOnce(EntryRef<'_>) -> R,
    ) -> Result<R, TableError> {
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let (index, _) = w.entries.get(&(m.clone(), priority)).ok_or(TableError::NotFound)?;
        Ok(f(self.arena.get(*index)))
    }

    pub fn delete(&self, m: &TernaryMatch, priority: u32) -> Result<(), TableError> {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let (index, _) = w.entries.remove(&(m.clone(), priority)).ok_or(TableError::NotFound)?;
        self.rebuild(&w);
        w.slots.release(&self.qsbr, index);
        Ok(())
    }

    pub fn clear(&self) {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let gone: Vec<u32> = std::mem::take(&mut w.entries).into_values().map(|(i, _)| i).collect();
        self.rebuild(&w);
        for i in gone {
            w.slots.release(&self.qsbr, i);
        }
    }

    /// Build and publish a new index from the writer's entries.
    fn rebuild(&self, w: &Writer) {
        let kw = self.key_words;
        let mut by_mask: BTreeMap<Vec<u64>, Vec<(&[u64], u64)>> = BTreeMap::new();
        for ((_, priority), (index, pairs)) in &w.entries {
            let tag = (*priority as u64 + 1) << 32 | (*index as u64 + 1);
            for (v, m) in pairs {
                by_mask.entry(m[..kw].to_vec()).or_default().push((&v[..kw], tag));
            }
        }
        let mut tuples: Vec<Tuple> = by_mask
            .into_iter()
            .map(|(mask, rules)| {
                let cap = (rules.len() * 2).next_power_of_two().max(4);
                let stride = kw + 1;
                let mut slots = vec![0u64; cap * stride].into_boxed_slice();
                let mut best = 0u32;
                for (value, tag) in rules {
                    best = best.max((tag >> 32) as u32);
                    let mut s = tuple_hash(value) as usize & (cap - 1);
                    loop {
                        let at = s * stride;
                        if slots[at + kw] == 0 {
                            slots[at..at + kw].copy_from_slice(value);
                            slots[at + kw] = tag;
                            break;
                        }
                        if &slots[at..at + kw] == value {
                            slots[at + kw] = slots[at + kw].max(tag);
                            break;
                        }
                        s = (s + 1) & (cap - 1);
                    }
                }
                let mut m = [0u64; MAX_KEY_WORDS];
                m[..kw].copy_from_slice(&mask);
                Tuple { mask: m, best, slots, cap_mask: cap - 1 }
            })
            .collect();
        tuples.sort_by_key(|t| std::cmp::Reverse(t.best));
        self.masks.store(tuples.len(), Ordering::Relaxed);
        let (_, retired) = self.index.publish(Index { key_words: kw, tuples });
        drop(retired);
    }

    pub fn entries(&self) -> Vec<TernaryEntry> {
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.entries
            .iter()
            .map(|((m, p), (i, _))| {
                let e = self.arena.get(*i);
                TernaryEntry {
                    matches: m.clone(),
                    priority: *p,
                    data: e.snapshot(),
                    stats: e.stats(),
                }
            })
            .collect()
    }

    pub fn maintain(&self) {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.slots.reclaim(&self.qsbr);
    }

    /// Key bytes of a match value, for listings.
    pub fn key_bytes_of(&self, words: &[u64]) -> Vec<u8> {
        unpack(words, self.cfg.key_bytes())
    }
}
