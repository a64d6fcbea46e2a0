//! Longest-prefix-match map (`BPF_MAP_TYPE_LPM_TRIE`). Keys are `{ u32 prefixlen; u8 data[] }`
//! with the prefix length in host order and the data in network order, as in Linux.
//!
//! Entries live in a [`HashStore`] under their masked key; a count per prefix length says which
//! lengths exist, so a lookup tries only those, longest first: lock-free, and for IPv4 tables at
//! most a few hash probes.

use super::hash::HashStore;
use super::{errno, Arena, Who};
use std::sync::atomic::{AtomicU32, Ordering};

/// Largest data part of a key (Linux allows 256 bytes).
const MAX_DATA: usize = 256;

pub(crate) struct LpmStore {
    table: HashStore,
    key_size: usize,
    /// Entries per prefix length, 0..=8 * data bytes.
    lengths: Box<[AtomicU32]>,
}

impl LpmStore {
    pub(crate) fn new(key_size: usize, value_stride: usize, max_entries: u32) -> Self {
        let bits = 8 * (key_size - 4);
        Self {
            table: HashStore::new(key_size, value_stride, max_entries),
            key_size,
            lengths: (0..=bits).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    pub(crate) fn arena(&self) -> &Arena {
        self.table.arena()
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    fn max_bits(&self) -> usize {
        self.lengths.len() - 1
    }

    /// `key` with its prefix length replaced by `len` and the data bits past `len` cleared.
    fn masked(&self, key: &[u8], len: usize, out: &mut [u8; 4 + MAX_DATA]) -> usize {
        let n = self.key_size;
        out[..4].copy_from_slice(&(len as u32).to_ne_bytes());
        let data = &key[4..n];
        for (i, b) in data.iter().enumerate() {
            let keep = len.saturating_sub(i * 8).min(8);
            out[4 + i] = if keep == 0 { 0 } else { b & (0xffu8 << (8 - keep)) };
        }
        n
    }

    fn prefix_len(key: &[u8]) -> usize {
        u32::from_ne_bytes([key[0], key[1], key[2], key[3]]) as usize
    }

    /// The value of the longest prefix that matches `key`'s first `prefixlen` bits.
    pub(crate) fn longest_match(&self, key: &[u8]) -> Option<*mut u8> {
        let mut buf = [0u8; 4 + MAX_DATA];
        let top = Self::prefix_len(key).min(self.max_bits());
        for len in (0..=top).rev() {
            if self.lengths[len].load(Ordering::Relaxed) == 0 {
                continue;
            }
            let n = self.masked(key, len, &mut buf);
            if let Some(p) = self.table.find(&buf[..n]) {
                return Some(p);
            }
        }
        None
    }

    /// The entry stored under exactly this prefix (control plane).
    pub(crate) fn exact_offset(&self, key: &[u8]) -> Option<usize> {
        let len = Self::prefix_len(key);
        if len > self.max_bits() {
            return None;
        }
        let mut buf = [0u8; 4 + MAX_DATA];
        let n = self.masked(key, len, &mut buf);
        self.table.find_offset(&buf[..n])
    }

    pub(crate) fn upsert(&self, key: &[u8], flags: u64, who: Who) -> Result<*mut u8, i64> {
        let len = Self::prefix_len(key);
        if len > self.max_bits() {
            return Err(-errno::EINVAL);
        }
        let mut buf = [0u8; 4 + MAX_DATA];
        let n = self.masked(key, len, &mut buf);
        let (p, new) = self.table.upsert(&buf[..n], flags, who)?;
        if new {
            self.lengths[len].fetch_add(1, Ordering::Relaxed);
        }
        Ok(p)
    }

    pub(crate) fn remove(&self, key: &[u8], who: Who) -> i64 {
        let len = Self::prefix_len(key);
        if len > self.max_bits() {
            return -errno::ENOENT;
        }
        let mut buf = [0u8; 4 + MAX_DATA];
        let n = self.masked(key, len, &mut buf);
        let r = self.table.remove(&buf[..n], who);
        if r == 0 {
            self.lengths[len].fetch_sub(1, Ordering::Relaxed);
        }
        r
    }

    pub(crate) fn keys(&self) -> Vec<Vec<u8>> {
        self.table.keys()
    }
}
