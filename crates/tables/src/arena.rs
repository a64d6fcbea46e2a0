//! A fixed arena of entry bodies addressed by index, for tables whose index structure (an LPM
//! trie, a tuple space) points at entries rather than holding them.
//!
//! The storage ([`Arena`]) is shared: workers read and write entries through it. Which indices
//! are in use ([`ArenaSlots`]) is control-plane state, kept under the table's writer lock; an
//! index freed there is reused only after a grace period.

use crate::entry::{BodyLayout, EntryRef};
use crate::words::WordArray;
use crate::TableError;
use hotplane_core::Qsbr;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;

pub struct Arena {
    words: WordArray<AtomicU64>,
    layout: BodyLayout,
    stride: usize,
}

impl Arena {
    pub fn new(capacity: usize, layout: BodyLayout) -> Result<Self, TableError> {
        let stride = layout.words();
        Ok(Self { words: WordArray::zeroed(capacity * stride)?, layout, stride })
    }

    pub fn capacity(&self) -> usize {
        self.words.len() / self.stride.max(1)
    }

    /// The first word of entry 0 (entry `i` starts `i * stride` words on).
    pub fn base(&self) -> *const AtomicU64 {
        self.words.as_ptr()
    }

    /// Words from one entry to the next.
    pub fn stride(&self) -> usize {
        self.stride
    }

    #[inline(always)]
    pub fn get(&self, index: u32) -> EntryRef<'_> {
        let at = index as usize * self.stride;
        EntryRef::new(&self.words[at..at + self.stride], self.layout)
    }
}

/// The control plane's record of which arena indices are in use.
#[derive(Default)]
pub struct ArenaSlots {
    free: Vec<u32>,
    retired: VecDeque<(u64, u32)>,
    next_unused: u32,
}

impl ArenaSlots {
    /// A fresh entry initialised with `action`/`data`, not yet reachable by readers.
    pub fn alloc(
        &mut self,
        arena: &Arena,
        qsbr: &Qsbr,
        action: u16,
        data: &[u64],
    ) -> Result<u32, TableError> {
        let capacity = arena.capacity();
        self.reclaim(qsbr);
        if self.free.is_empty() && self.next_unused as usize >= capacity {
            // Full of entries deleted moments ago: the control plane may wait for their grace
            // period rather than refuse.
            if let Some(&(epoch, _)) = self.retired.front() {
                let _ = qsbr.wait_for(epoch, crate::entry::COPY_GRACE_TIMEOUT);
                self.reclaim(qsbr);
            }
        }
        let index = match self.free.pop() {
            Some(i) => i,
            None if (self.next_unused as usize) < capacity => {
                self.next_unused += 1;
                self.next_unused - 1
            }
            None => return Err(TableError::Full { size: capacity }),
        };
        arena.get(index).init(action, data);
        Ok(index)
    }

    /// `index` was unlinked from the index structure: reuse it after a grace period.
    pub fn release(&mut self, qsbr: &Qsbr, index: u32) {
        self.retired.push_back((qsbr.advance(), index));
    }

    pub fn reclaim(&mut self, qsbr: &Qsbr) {
        while let Some(&(epoch, index)) = self.retired.front() {
            if !qsbr.poll(epoch) {
                break;
            }
            self.retired.pop_front();
            self.free.push(index);
        }
    }
}
