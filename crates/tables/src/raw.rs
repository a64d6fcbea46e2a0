//! Raw views of table memory, for code generators that look entries up and read them in
//! generated machine code instead of calling back into Rust (hotplane-p4's native engine).
//!
//! A view is a set of addresses and encodings, nothing more: the storage is fixed for the
//! table's lifetime (no array here is ever reallocated), so the addresses hold while the table
//! lives. Generated code that uses a view must
//!
//! * keep the table alive (hold the `Arc` that owns it) for as long as the code can run;
//! * run lookups inside a QSBR read-side section, as the Rust lookups do with their `Guard`;
//! * read an entry by the protocol of [`crate::EntryRef::read`]: load `ctl` (acquire), give up
//!   or retry while [`CTL_LOCKED`] is set, read the current copy's header and data words, then
//!   load `ctl` again (after an acquire fence) and use the data only if it is unchanged;
//! * never write an entry except its counters (atomic adds) and idle timestamp.
//!
//! These constants are the ones the Rust code itself uses: the encodings live here so that a
//! change to one is a change to both.

use std::sync::atomic::{AtomicU32, AtomicU64};

/// Entry body, word 0 (`ctl`): a worker holds the entry for a read-modify-write.
pub const CTL_LOCKED: u64 = 1;
/// Entry body, word 0 (`ctl`): which of the two copies is current.
pub const CTL_CURRENT: u64 = 2;
/// A copy's header word: the action id in its low bits.
pub const ACTION_MASK: u64 = 0xffff;

/// LPM level entry: it points somewhere (a leaf or a group).
pub const LEVEL_VALID: u32 = 1 << 31;
/// LPM level entry: it points at a group of 256 level entries (indexed by the next key byte).
pub const LEVEL_GROUP: u32 = 1 << 30;
/// LPM level entry: the prefix depth sits above this bit.
pub const LEVEL_DEPTH_SHIFT: u32 = 22;
/// LPM level entry: the entry index (leaf) or group index (group).
pub const LEVEL_INDEX_MASK: u32 = (1 << LEVEL_DEPTH_SHIFT) - 1;

/// Where an entry body's words are (see [`crate::entry`] for the layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyView {
    pub data_words: usize,
    /// Word of the packet counter (the byte counter follows), if the table counts.
    pub counters_at: Option<usize>,
    /// Word of the idle timestamp, if the table keeps one.
    pub idle_at: Option<usize>,
}

/// Word of copy `copy`'s header in a body with `data_words` data words; its data words
/// follow it.
#[inline(always)]
pub const fn copy_at(data_words: usize, copy: usize) -> usize {
    1 + copy * (1 + data_words)
}

impl BodyView {
    /// Word of copy `copy`'s header.
    pub fn copy_at(&self, copy: usize) -> usize {
        copy_at(self.data_words, copy)
    }
}

/// An LPM table (DIR-24-8 generalised, see [`crate::lpm`]).
///
/// A key is `key_bytes` bytes, read as a big-endian number. The first level is indexed by its
/// top `first_bits` bits; while the level entry is a group and key bytes remain, the next level
/// entry is `groups[(index << 8) | next key byte]`. A final entry that is valid and not a group
/// names the body at `entries + index * stride` (in words); anything else is a miss.
#[derive(Debug, Clone, Copy)]
pub struct LpmView {
    pub key_bytes: usize,
    pub first_bits: u32,
    pub first: *const AtomicU32,
    pub groups: *const AtomicU32,
    pub entries: *const AtomicU64,
    /// Words from one entry body to the next (bodies are laid out as the default entry's,
    /// [`DefaultView::body`]).
    pub stride: usize,
}

/// A table's default entry: one body, read like any other.
#[derive(Debug, Clone, Copy)]
pub struct DefaultView {
    pub body_at: *const AtomicU64,
    pub body: BodyView,
}
