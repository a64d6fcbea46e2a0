//! Longest-prefix match: DIR-24-8 generalised to any whole number of key bytes. The first level
//! is indexed by the key's top 24 bits (fewer for narrower keys); every further level is a group
//! of 256 entries indexed by the next key byte. IPv4 is exactly DIR-24-8 (one or two memory
//! accesses); IPv6 is DIR-24-8-8-... like DPDK's `rte_lpm6` (at most 14).
//!
//! A level entry is one `u32`: `VALID | GROUP | depth << 22 | index`, where `index` is an entry
//! in the arena (leaf) or a group (GROUP). Lookups read entries with plain atomic loads and
//! never retry. The control plane writes with single-word stores in an order that keeps every
//! intermediate state correct (a new group is filled before it is linked), so readers see each
//! address resolve to either the old or the new answer; groups and entries unlinked are reused
//! only after a grace period.

use crate::arena::{Arena, ArenaSlots};
use crate::config::{MatchKind, TableConfig};
use crate::entry::{DefaultEntry, EntryData, EntryRef, EntryStats};
use crate::exact::check_action;
use crate::words::WordArray;
use crate::TableError;
use hotplane_core::{Guard, Qsbr};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use crate::raw::{
    LEVEL_DEPTH_SHIFT as DEPTH_SHIFT, LEVEL_GROUP as GROUP, LEVEL_INDEX_MASK as INDEX_MASK,
    LEVEL_VALID as VALID,
};
/// Most entries and most groups an LPM table can address.
pub const MAX_LPM_INDEX: usize = INDEX_MASK as usize + 1;

#[inline(always)]
fn leaf(depth: u32, index: u32) -> u32 {
    VALID | depth << DEPTH_SHIFT | index
}

#[inline(always)]
fn depth_of(e: u32) -> u32 {
    (e >> DEPTH_SHIFT) & 0xff
}

/// One prefix as the control plane reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LpmEntry {
    pub prefix: Vec<u8>,
    pub len: u32,
    pub data: EntryData,
    pub stats: EntryStats,
}

struct Writer {
    slots: ArenaSlots,
    /// Every installed prefix (masked key bytes, length) and its entry.
    rules: HashMap<(Vec<u8>, u32), u32>,
    /// Groups handed out so far (groups are never merged back; see docs/tables.md).
    next_group: u32,
}

pub struct LpmTable {
    cfg: TableConfig,
    key_bytes: usize,
    /// Bits indexing the first level (24, or the key width if narrower).
    first_bits: u32,
    first: WordArray<AtomicU32>,
    groups: WordArray<AtomicU32>,
    max_groups: usize,
    default: DefaultEntry,
    /// Entries (the index points at them); which are in use is `writer.slots`.
    arena: Arena,
    writer: Mutex<Writer>,
    qsbr: Qsbr,
}

impl LpmTable {
    pub fn new(cfg: TableConfig, qsbr: &Qsbr) -> Result<Self, TableError> {
        cfg.validate()?;
        if cfg.kind != MatchKind::Lpm {
            return Err(TableError::invalid(&cfg.name, "not an LPM table"));
        }
        let key_bytes = cfg.key_bytes();
        let first_bits = (key_bytes as u32 * 8).min(24);
        let deeper_levels = key_bytes.saturating_sub(3);
        let max_groups = cfg
            .lpm_groups
            .unwrap_or_else(|| (cfg.size / 2 * deeper_levels.max(1)).max(1024))
            .min(MAX_LPM_INDEX);
        if cfg.size > MAX_LPM_INDEX {
            return Err(TableError::invalid(
                &cfg.name,
                format!("LPM size at most {MAX_LPM_INDEX}"),
            ));
        }
        let default = DefaultEntry::new(&cfg, qsbr)?;
        let arena = Arena::new(cfg.size, cfg.body_layout())?;
        let groups = if deeper_levels > 0 {
            WordArray::zeroed(max_groups * 256)?
        } else {
            WordArray::zeroed(0)?
        };
        Ok(Self {
            key_bytes,
            first_bits,
            first: WordArray::zeroed(1usize << first_bits)?,
            groups,
            max_groups: if deeper_levels > 0 { max_groups } else { 0 },
            default,
            arena,
            writer: Mutex::new(Writer {
                slots: ArenaSlots::default(),
                rules: HashMap::new(),
                next_group: 0,
            }),
            qsbr: qsbr.clone(),
            cfg,
        })
    }

    pub fn config(&self) -> &TableConfig {
        &self.cfg
    }

    pub fn len(&self) -> usize {
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry of the longest prefix matching a 32-bit key (IPv4: one or two loads).
    #[inline(always)]
    pub fn lookup_u32<'g>(&'g self, key: u32, _guard: &'g Guard<'_>) -> Option<EntryRef<'g>> {
        debug_assert_eq!(self.key_bytes, 4);
        let mut e = self.first[(key >> 8) as usize].load(Ordering::Acquire);
        if e & GROUP != 0 {
            e = self.groups[((e & INDEX_MASK) as usize) << 8 | (key & 0xff) as usize]
                .load(Ordering::Acquire);
        }
        (e & VALID != 0).then(|| self.arena.get(e & INDEX_MASK))
    }

    /// Start loading the first-level entry of a 32-bit key (batches prefetch every packet's
    /// entry before looking any up).
    #[inline(always)]
    pub fn prefetch_u32(&self, key: u32) {
        crate::key::prefetch(&self.first[(key >> 8) as usize]);
    }

    /// Look up many 32-bit keys (DPDK's bulk lookup): prefetch every first-level entry, then
    /// read them and prefetch the second-level entries of those that point to a group, then
    /// resolve. `out[i]` is the entry for `keys[i]`.
    #[inline]
    pub fn lookup_u32_bulk<'g>(
        &'g self,
        keys: &[u32],
        out: &mut [Option<EntryRef<'g>>],
        _guard: &'g Guard<'_>,
    ) {
        const CHUNK: usize = 64;
        for (keys, out) in keys.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
            for &k in keys {
                self.prefetch_u32(k);
            }
            let mut level = [0u32; CHUNK];
            for (e, &k) in level.iter_mut().zip(keys) {
                *e = self.first[(k >> 8) as usize].load(Ordering::Acquire);
                if *e & GROUP != 0 {
                    crate::key::prefetch(
                        &self.groups[((*e & INDEX_MASK) as usize) << 8 | (k & 0xff) as usize],
                    );
                }
            }
            for ((o, &e), &k) in out.iter_mut().zip(&level).zip(keys) {
                let e = if e & GROUP != 0 {
                    self.groups[((e & INDEX_MASK) as usize) << 8 | (k & 0xff) as usize]
                        .load(Ordering::Acquire)
                } else {
                    e
                };
                *o = (e & VALID != 0).then(|| self.arena.get(e & INDEX_MASK));
            }
        }
    }

    /// The entry of the longest prefix matching `key` (the table's width in bytes).
    #[inline]
    pub fn lookup<'g>(&'g self, key: &[u8], _guard: &'g Guard<'_>) -> Option<EntryRef<'g>> {
        let key = key.get(..self.key_bytes)?;
        let first_bytes = self.first_bits as usize / 8;
        let idx = key[..first_bytes].iter().fold(0usize, |a, &b| a << 8 | b as usize);
        let mut e = self.first[idx].load(Ordering::Acquire);
        let mut next = first_bytes;
        while e & GROUP != 0 && next < key.len() {
            e = self.groups[((e & INDEX_MASK) as usize) << 8 | key[next] as usize]
                .load(Ordering::Acquire);
            next += 1;
        }
        (e & VALID != 0 && e & GROUP == 0).then(|| self.arena.get(e & INDEX_MASK))
    }

    pub fn default_entry(&self) -> &DefaultEntry {
        &self.default
    }

    /// The table's addresses and encodings for generated code (see [`crate::raw`]).
    pub fn view(&self) -> crate::raw::LpmView {
        crate::raw::LpmView {
            key_bytes: self.key_bytes,
            first_bits: self.first_bits,
            first: self.first.as_ptr(),
            groups: self.groups.as_ptr(),
            entries: self.arena.base(),
            stride: self.arena.stride(),
        }
    }

    fn masked(&self, prefix: &[u8], len: u32) -> Result<Vec<u8>, TableError> {
        if prefix.len() != self.key_bytes {
            return Err(TableError::BadKey {
                what: format!(
                    "{} bytes; table `{}` takes {}",
                    prefix.len(),
                    self.cfg.name,
                    self.key_bytes
                ),
            });
        }
        if len > self.key_bytes as u32 * 8 {
            return Err(TableError::BadKey {
                what: format!("prefix length {len} > {} bits", self.key_bytes * 8),
            });
        }
        let mut m = prefix.to_vec();
        for (i, b) in m.iter_mut().enumerate() {
            let bits_here = (len as i64 - i as i64 * 8).clamp(0, 8) as u32;
            *b &= if bits_here == 0 { 0 } else { 0xffu8 << (8 - bits_here) };
        }
        Ok(m)
    }

    /// Install `prefix/len` (control plane). Fails if it is already installed.
    pub fn insert(
        &self,
        prefix: &[u8],
        len: u32,
        action: u16,
        data: &[u64],
    ) -> Result<(), TableError> {
        check_action(&self.cfg, action, data)?;
        let p = self.masked(prefix, len)?;
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if w.rules.contains_key(&(p.clone(), len)) {
            return Err(TableError::Exists);
        }
        if w.rules.len() >= self.cfg.size {
            return Err(TableError::Full { size: self.cfg.size });
        }
        let index = w.slots.alloc(&self.arena, &self.qsbr, action, data)?;
        if let Err(e) = self
            .install(&mut w, &p, len, leaf(len, index), |e| e & VALID == 0 || depth_of(e) <= len)
        {
            w.slots.release(&self.qsbr, index);
            return Err(e);
        }
        w.rules.insert((p, len), index);
        Ok(())
    }

    pub fn modify(
        &self,
        prefix: &[u8],
        len: u32,
        action: u16,
        data: &[u64],
    ) -> Result<(), TableError> {
        check_action(&self.cfg, action, data)?;
        let p = self.masked(prefix, len)?;
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let &index = w.rules.get(&(p, len)).ok_or(TableError::NotFound)?;
        self.arena.get(index).publish(&self.qsbr, action, data);
        Ok(())
    }

    /// Run `f` on the entry for `prefix/len`, holding the writer lock (control plane).
    pub fn with_entry<R>(
        &self,
        prefix: &[u8],
        len: u32,
        f: impl FnOnce(EntryRef<'_>) -> R,
    ) -> Result<R, TableError> {
        let p = self.masked(prefix, len)?;
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let &index = w.rules.get(&(p, len)).ok_or(TableError::NotFound)?;
        Ok(f(self.arena.get(index)))
    }

    /// Remove `prefix/len`; addresses it covered fall back to the next longest prefix.
    pub fn delete(&self, prefix: &[u8], len: u32) -> Result<(), TableError> {
        let p = self.masked(prefix, len)?;
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let index = w.rules.remove(&(p.clone(), len)).ok_or(TableError::NotFound)?;
        // The longest remaining prefix covering this one takes over its addresses.
        let replacement = (0..len)
            .rev()
            .find_map(|l| {
                let m = self.masked(&p, l).ok()?;
                w.rules.get(&(m, l)).map(|&i| leaf(l, i))
            })
            .unwrap_or(0);
        self.install(&mut w, &p, len, replacement, |e| e & VALID != 0 && depth_of(e) == len)?;
        w.slots.release(&self.qsbr, index);
        Ok(())
    }

    pub fn clear(&self) {
        let rules: Vec<(Vec<u8>, u32)> = {
            let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            let mut r: Vec<_> = w.rules.keys().cloned().collect();
            // Longest first: each delete then falls back to a prefix about to go too, never
            // to one already gone.
            r.sort_by_key(|rule| std::cmp::Reverse(rule.1));
            r
        };
        for (p, l) in rules {
            let _ = self.delete(&p, l);
        }
    }

    /// Write `value` over every level entry that `prefix/len` covers and `replace` accepts,
    /// descending into groups (and creating the group that holds a prefix longer than the level).
    fn install(
        &self,
        w: &mut Writer,
        prefix: &[u8],
        len: u32,
        value: u32,
        replace: impl Fn(u32) -> bool + Copy,
    ) -> Result<(), TableError> {
        let first_bytes = self.first_bits as usize / 8;
        let idx = prefix[..first_bytes].iter().fold(0usize, |a, &b| a << 8 | b as usize);
        if len <= self.first_bits {
            let span = 1usize << (self.first_bits - len);
            for i in idx..idx + span {
                self.apply(&self.first[i], value, replace);
            }
            return Ok(());
        }
        let mut cell = &self.first[idx];
        let mut level_end = self.first_bits;
        let mut byte = first_bytes;
        loop {
            let group = self.group_below(w, cell)?;
            let base = (group as usize) << 8;
            level_end += 8;
            let at = prefix[byte] as usize;
            if len <= level_end {
                let span = 1usize << (level_end - len);
                for i in at..at + span {
                    self.apply(&self.groups[base + i], value, replace);
                }
                return Ok(());
            }
            cell = &self.groups[base + at];
            byte += 1;
        }
    }

    /// Store `value` in `cell` if `replace` accepts what is there; for a group, do so for all of
    /// its entries, recursively.
    fn apply(&self, cell: &AtomicU32, value: u32, replace: impl Fn(u32) -> bool + Copy) {
        let e = cell.load(Ordering::Relaxed);
        if e & GROUP != 0 {
            let base = ((e & INDEX_MASK) as usize) << 8;
            for i in 0..256 {
                self.apply(&self.groups[base + i], value, replace);
            }
        } else if replace(e) {
            cell.store(value, Ordering::Release);
        }
    }

    /// The group a level entry points to, creating it (filled with the entry's old leaf, then
    /// linked with one store) if the entry is a leaf.
    fn group_below(&self, w: &mut Writer, cell: &AtomicU32) -> Result<u32, TableError> {
        let e = cell.load(Ordering::Relaxed);
        if e & GROUP != 0 {
            return Ok(e & INDEX_MASK);
        }
        if w.next_group as usize >= self.max_groups {
            return Err(TableError::Full { size: self.max_groups });
        }
        let g = w.next_group;
        w.next_group += 1;
        let base = (g as usize) << 8;
        for c in &self.groups[base..base + 256] {
            c.store(e, Ordering::Relaxed);
        }
        // Release: the filled group is visible to whoever follows the link.
        cell.store(VALID | GROUP | g, Ordering::Release);
        Ok(g)
    }

    /// Groups in use (for sizing `lpm_groups`).
    pub fn groups_used(&self) -> usize {
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.next_group as usize
    }

    pub fn entries(&self) -> Vec<LpmEntry> {
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<LpmEntry> = w
            .rules
            .iter()
            .map(|((p, l), &i)| {
                let e = self.arena.get(i);
                LpmEntry { prefix: p.clone(), len: *l, data: e.snapshot(), stats: e.stats() }
            })
            .collect();
        out.sort_by(|a, b| (&a.prefix, a.len).cmp(&(&b.prefix, b.len)));
        out
    }

    /// Reclaim what grace periods allow.
    pub fn maintain(&self) {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.slots.reclaim(&self.qsbr);
    }
}
