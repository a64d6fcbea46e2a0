//! `stage = "table"`: a native match-action stage over one of these tables, usable from the
//! TOML config without a P4 program. It takes a key from the packet, looks it up
//! (inserting on a miss when the table says so), counts the hit, and runs the entry's action,
//! which must be one of the native actions below (chosen by the action's name in the table).

use crate::key::{pack, MAX_KEY_BYTES, MAX_KEY_WORDS};
use crate::{EntryRef, ExactTable, Lookup, Table, TableConfig};
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::metrics::PerWorker;
use hotplane_core::MAX_BATCH;
use hotplane_core::{Stage, Verdict, WorkerCx};
use std::sync::Arc;

/// Why a table stage cannot be made over a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StageError {
    #[error("bad offset in `{0}`")]
    BadOffset(String),
    #[error("bad length in `{0}`")]
    BadLength(String),
    #[error("key `{0}`: one of ipv4.src, ipv4.dst, l4.sport, l4.dport, payload:OFFSET:LEN")]
    UnknownKey(String),
    #[error("key of {key} bytes; table `{table}` has {table_key}-byte keys")]
    KeyWidth { key: usize, table: String, table_key: usize },
    #[error("table `{table}`: action `{action}` is not a native action (NoAction, drop, forward, mark, swap, count)")]
    NotNative { table: String, action: String },
    #[error("a table with a `swap` action needs `value_at` (payload offset)")]
    SwapNeedsValueAt,
}

/// Where the key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// `len` bytes at `offset` from the layer's start.
    L3 {
        offset: u16,
        len: u16,
    },
    L4 {
        offset: u16,
        len: u16,
    },
    Payload {
        offset: u16,
        len: u16,
    },
}

impl KeySource {
    /// `ipv4.src`, `ipv4.dst`, `l4.sport`, `l4.dport`, `payload:OFFSET:LEN`.
    pub fn parse(s: &str) -> Result<Self, StageError> {
        Ok(match s {
            "ipv4.src" => KeySource::L3 { offset: 12, len: 4 },
            "ipv4.dst" => KeySource::L3 { offset: 16, len: 4 },
            "l4.sport" => KeySource::L4 { offset: 0, len: 2 },
            "l4.dport" => KeySource::L4 { offset: 2, len: 2 },
            other => {
                let parts: Vec<&str> = other.split(':').collect();
                match parts.as_slice() {
                    ["payload", off, len] => KeySource::Payload {
                        offset: off.parse().map_err(|_| StageError::BadOffset(other.into()))?,
                        len: len.parse().map_err(|_| StageError::BadLength(other.into()))?,
                    },
                    _ => return Err(StageError::UnknownKey(other.into())),
                }
            }
        })
    }

    fn len(self) -> usize {
        match self {
            KeySource::L3 { len, .. }
            | KeySource::L4 { len, .. }
            | KeySource::Payload { len, .. } => len as usize,
        }
    }
}

/// A key of at most 8 bytes as the packed word a lookup takes (big-endian, left-aligned), without
/// a variable-length copy (a `memcpy` call and a store-forwarding stall cost a fifth of the
/// stage's time).
#[inline(always)]
fn key_word(k: &[u8]) -> u64 {
    match *k {
        [a, b] => (u16::from_be_bytes([a, b]) as u64) << 48,
        [a, b, c, d] => (u32::from_be_bytes([a, b, c, d]) as u64) << 32,
        [a, b, c, d, e, f, g, h] => u64::from_be_bytes([a, b, c, d, e, f, g, h]),
        _ => k.iter().take(8).enumerate().fold(0, |w, (i, &b)| w | (b as u64) << (56 - 8 * i)),
    }
}

/// The native actions a table stage can run, by action name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Native {
    Nothing,
    Drop,
    /// `forward(port)`.
    Forward,
    /// `mark(value)`: the packet's `meta.user`.
    Mark,
    /// `swap(@ref value)`: store the packet's 8-byte value (at `value_at` in the payload) in the
    /// entry and write the entry's old value in its place (the writable-table experiment).
    Swap,
    /// `count(@ref packets)`: increment the parameter in place.
    Count,
}

impl Native {
    fn of(name: &str) -> Option<Native> {
        Some(match name {
            "NoAction" | "nop" => Native::Nothing,
            "drop" => Native::Drop,
            "forward" => Native::Forward,
            "mark" => Native::Mark,
            "swap" => Native::Swap,
            "count" => Native::Count,
            _ => return None,
        })
    }
}

pub struct TableStage {
    name: String,
    table: Arc<Table>,
    key: KeySource,
    actions: Vec<Native>,
    locked: bool,
    /// Payload offset of the 8-byte value `swap` exchanges.
    value_at: u16,
    misses: PerWorker,
}

impl TableStage {
    pub fn new(table: Arc<Table>, key: &str, value_at: Option<u16>) -> Result<Self, StageError> {
        let cfg: &TableConfig = table.config();
        let key = KeySource::parse(key)?;
        if key.len() != cfg.key_bytes() || key.len() > MAX_KEY_BYTES {
            return Err(StageError::KeyWidth {
                key: key.len(),
                table: cfg.name.clone(),
                table_key: cfg.key_bytes(),
            });
        }
        let actions = cfg
            .actions
            .iter()
            .map(|a| {
                Native::of(&a.name).ok_or_else(|| StageError::NotNative {
                    table: cfg.name.clone(),
                    action: a.name.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if actions.contains(&Native::Swap) && value_at.is_none() {
            return Err(StageError::SwapNeedsValueAt);
        }
        Ok(Self {
            name: format!("table:{}", cfg.name),
            locked: cfg.locked,
            table,
            key,
            actions,
            value_at: value_at.unwrap_or(0),
            misses: PerWorker::default(),
        })
    }

    /// Override the table's `locked` setting for this stage (benchmarks compare both on one
    /// filled table).
    pub fn with_locked(mut self, locked: bool) -> Self {
        self.locked = locked;
        self
    }

    pub fn misses(&self) -> u64 {
        self.misses.sum()
    }

    #[inline(always)]
    fn act(&self, e: &EntryRef<'_>, pkt: &mut hotplane_core::Packet) {
        let native = self.actions.get(e.action() as usize).copied().unwrap_or(Native::Nothing);
        match native {
            Native::Nothing => {}
            Native::Drop => pkt.meta.verdict = Verdict::Drop,
            Native::Forward => pkt.meta.out_port = e.word(0) as u16,
            Native::Mark => pkt.meta.user = e.word(0),
            Native::Count => {
                e.modify_word(self.locked, 0, |n| n.wrapping_add(1));
            }
            Native::Swap => {
                let at = pkt.meta.payload_off as usize + self.value_at as usize;
                if let Some(v) = pkt.data_mut().get_mut(at..at + 8) {
                    let new = u64::from_be_bytes(v.try_into().unwrap_or([0; 8]));
                    let old = e.exchange_word(self.locked, 0, new);
                    v.copy_from_slice(&old.to_be_bytes());
                }
            }
        }
    }
    /// Exact tables with keys of up to 8 bytes: extract every key and prefetch its slot first,
    /// (dynamic storage: then the entry), then look up and act, so that a batch's cache misses
    /// overlap.
    fn run_exact(&self, t: &ExactTable, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let guard = cx.guard;
        let pkts = batch.as_mut_slice();
        let mut keys = [0u64; MAX_BATCH];
        let mut hashes = [0u64; MAX_BATCH];
        let mut present = Mask(0);
        for i in sel {
            let Some(pkt) = pkts.get(i) else { continue };
            if let Some(k) = self.key_bytes(pkt) {
                keys[i] = key_word(k);
                hashes[i] = t.hash(&keys[i..i + 1]);
                t.prefetch(hashes[i]);
                present.insert(i);
            }
        }
        for i in present {
            t.prefetch_entry(hashes[i]);
        }
        let mut misses = 0u64;
        let inserts = t.config().insert_on_miss.is_some();
        for i in sel {
            let Some(pkt) = pkts.get_mut(i) else { continue };
            let found = if !present.contains(i) {
                None
            } else if inserts {
                match t.lookup_or_insert_hashed(&keys[i..i + 1], hashes[i], guard) {
                    Lookup::Hit(e) | Lookup::Inserted(e) => Some(e),
                    Lookup::Miss => None,
                }
            } else {
                t.lookup_hashed(&keys[i..i + 1], hashes[i], guard)
            };
            misses += u64::from(found.is_none());
            self.finish(found, pkt, cx.now_ns);
        }
        if misses > 0 {
            self.misses.add(cx.worker, misses);
        }
    }

    /// The key bytes of `pkt`, if it has the layer and is long enough.
    #[inline(always)]
    fn key_bytes<'p>(&self, pkt: &'p hotplane_core::Packet) -> Option<&'p [u8]> {
        let m = &pkt.meta;
        let (base, offset, len) = match self.key {
            KeySource::L3 { offset, len } => (m.l3_off, offset, len),
            KeySource::L4 { offset, len } => (m.l4_off, offset, len),
            KeySource::Payload { offset, len } => (m.payload_off, offset, len),
        };
        let at = base as usize + offset as usize;
        (base != 0).then(|| pkt.data().get(at..at + len as usize)).flatten()
    }

    /// Count the hit and run the entry's action, or the default action on a miss.
    #[inline(always)]
    fn finish(&self, found: Option<EntryRef<'_>>, pkt: &mut hotplane_core::Packet, now_ns: u64) {
        match found {
            Some(e) => {
                e.hit(pkt.len() as u32, now_ns);
                self.act(&e, pkt);
            }
            None => self.act(&self.table.default_entry().get(), pkt),
        }
    }

    fn run_generic(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        let table = &*self.table;
        let guard = cx.guard;
        let pkts = batch.as_mut_slice();
        let mut misses = 0u64;
        for i in sel {
            let Some(pkt) = pkts.get_mut(i) else { continue };
            let found = match self.key_bytes(pkt) {
                None => None,
                Some(key) => match table {
                    Table::Exact(t) => {
                        let mut w = [0u64; MAX_KEY_WORDS];
                        let n = t.key_words();
                        pack(key, &mut w[..n]);
                        match t.lookup_or_insert(&w[..n], guard) {
                            Lookup::Hit(e) | Lookup::Inserted(e) => Some(e),
                            Lookup::Miss => None,
                        }
                    }
                    Table::Lpm(t) if key.len() == 4 => {
                        t.lookup_u32(u32::from_be_bytes([key[0], key[1], key[2], key[3]]), guard)
                    }
                    other => other.lookup(key, guard),
                },
            };
            misses += u64::from(found.is_none());
            self.finish(found, pkt, cx.now_ns);
        }
        if misses > 0 {
            self.misses.add(cx.worker, misses);
        }
    }
}

impl Stage for TableStage {
    fn name(&self) -> &str {
        &self.name
    }

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        match &*self.table {
            Table::Exact(t) if t.key_words() == 1 => self.run_exact(t, batch, sel, cx),
            _ => self.run_generic(batch, sel, cx),
        }
    }

    fn describe(&self) -> String {
        let c = self.table.config();
        format!(
            "table {} ({:?}, {} entries of {}, {:?}{})",
            c.name,
            c.kind,
            self.table.len(),
            c.size,
            c.store,
            if c.locked { ", locked" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::key_word;

    #[test]
    fn key_words_match_the_tables_packing() {
        let bytes = [0x12u8, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0];
        for len in 1..=8 {
            let mut w = [0u64];
            crate::key::pack(&bytes[..len], &mut w);
            assert_eq!(key_word(&bytes[..len]), w[0], "{len} bytes");
        }
    }
}
