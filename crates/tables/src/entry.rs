//! A table entry's body: action id and action data, kept in two copies so that the control plane
//! can replace them without ever holding a lock a worker waits for, plus optional packet/byte
//! counters, an idle timestamp and a meter (a P4 `direct_meter`).
//!
//! ```text
//! [ctl][copy 0: hdr, data * W][copy 1: hdr, data * W][packets][bytes][last hit ns][meter * 9]
//! ctl: bit 0 LOCKED (a worker's read-modify-write), bit 1 current copy, bits 2.. version
//! hdr: bits 0..16 action id, bits 16.. epoch the copy stopped being current (control only)
//! ```
//!
//! * A worker writes data in place in the current copy: one atomic store per word (unlocked
//!   tables), or under the LOCKED bit with a version bump on release (locked tables). Only
//!   workers ever set LOCKED, so a worker spins only on another worker, for a few nanoseconds.
//! * The control plane writes the other copy, then flips the current bit with one
//!   compare-and-swap (which fails while a worker holds LOCKED, and is retried). A copy is
//!   rewritten only after a grace period since it stopped being current, so no worker can still
//!   be writing it: the control plane may wait, workers never do.
//! * A reader that wants a consistent snapshot re-reads `ctl` after the data and retries if a
//!   locked worker write ran in between (a seqlock whose only writers are workers).

use hotplane_core::Qsbr;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::time::Duration;

use crate::raw::{ACTION_MASK, CTL_CURRENT as CURRENT, CTL_LOCKED as LOCKED};
const VERSION_ONE: u64 = 4;
const EPOCH_SHIFT: u32 = 16;

/// Most action-data words an entry holds (sum over an action's parameters).
pub const MAX_DATA_WORDS: usize = 32;

/// How long a control-plane write waits for workers to leave a retired copy.
pub const COPY_GRACE_TIMEOUT: Duration = Duration::from_secs(2);

/// Where an entry body's fields sit, in words from its first word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLayout {
    pub data_words: usize,
    pub counters: bool,
    pub idle: bool,
    /// A two-rate three-colour meter per entry ([`crate::MeterCell`]).
    pub meter: bool,
}

impl BodyLayout {
    #[inline(always)]
    fn copy_at(&self, copy: usize) -> usize {
        crate::raw::copy_at(self.data_words, copy)
    }

    #[inline(always)]
    fn counters_at(&self) -> usize {
        1 + 2 * (1 + self.data_words)
    }

    #[inline(always)]
    fn idle_at(&self) -> usize {
        self.counters_at() + if self.counters { 2 } else { 0 }
    }

    #[inline(always)]
    fn meter_at(&self) -> usize {
        self.idle_at() + usize::from(self.idle)
    }

    /// Words a body occupies.
    pub fn words(&self) -> usize {
        self.meter_at() + if self.meter { crate::METER_WORDS } else { 0 }
    }

    /// The layout for generated code.
    pub fn view(&self) -> crate::raw::BodyView {
        crate::raw::BodyView {
            data_words: self.data_words,
            counters_at: self.counters.then(|| self.counters_at()),
            idle_at: self.idle.then(|| self.idle_at()),
        }
    }
}

/// What a consistent read of an entry returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryData {
    pub action: u16,
    pub data: Vec<u64>,
}

/// Counters and idle time of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EntryStats {
    pub packets: u64,
    pub bytes: u64,
    /// `time::now_ns` of the last hit, 0 if never hit (or idle timestamps are off).
    pub last_hit_ns: u64,
    /// The entry's meter rates, if the table meters and this entry's meter is configured.
    pub meter: Option<crate::MeterRates>,
}

/// A shared reference to an entry body. Obtained from a table lookup; valid for the lookup's
/// guard (workers) or the writer lock (control plane).
#[derive(Clone, Copy)]
pub struct EntryRef<'t> {
    words: &'t [AtomicU64],
    layout: BodyLayout,
}

#[inline(always)]
fn current(ctl: u64) -> usize {
    ((ctl & CURRENT) >> 1) as usize
}

impl<'t> EntryRef<'t> {
    /// `words` must be exactly one body laid out by `layout`.
    #[inline(always)]
    pub(crate) fn new(words: &'t [AtomicU64], layout: BodyLayout) -> Self {
        debug_assert_eq!(words.len(), layout.words());
        Self { words, layout }
    }

    /// Initialise a body no reader can see yet.
    pub(crate) fn init(&self, action: u16, data: &[u64]) {
        for w in self.words {
            w.store(0, Ordering::Relaxed);
        }
        self.write_copy(0, action, data);
    }

    fn write_copy(&self, copy: usize, action: u16, data: &[u64]) {
        let at = self.layout.copy_at(copy);
        let hdr = &self.words[at];
        let epoch_bits = hdr.load(Ordering::Relaxed) & !ACTION_MASK;
        hdr.store(epoch_bits | action as u64, Ordering::Relaxed);
        for (i, w) in self.words[at + 1..at + 1 + self.layout.data_words].iter().enumerate() {
            w.store(data.get(i).copied().unwrap_or(0), Ordering::Relaxed);
        }
    }

    /// The action id of the current copy.
    #[inline(always)]
    pub fn action(&self) -> u16 {
        let ctl = self.words[0].load(Ordering::Acquire);
        (self.words[self.layout.copy_at(current(ctl))].load(Ordering::Relaxed) & ACTION_MASK) as u16
    }

    /// One data word of the current copy (a single atomic load; no snapshot across words).
    #[inline(always)]
    pub fn word(&self, i: usize) -> u64 {
        let ctl = self.words[0].load(Ordering::Acquire);
        self.words[self.layout.copy_at(current(ctl)) + 1 + i].load(Ordering::Relaxed)
    }

    /// A consistent snapshot of action id and data: never a mix of two control-plane writes or
    /// of a half-done locked worker write. Returns the action id; fills `out` (up to its length).
    pub fn read(&self, out: &mut [u64]) -> u16 {
        loop {
            let c1 = self.words[0].load(Ordering::Acquire);
            if c1 & LOCKED != 0 {
                std::hint::spin_loop();
                continue;
            }
            let at = self.layout.copy_at(current(c1));
            let action = (self.words[at].load(Ordering::Relaxed) & ACTION_MASK) as u16;
            let n = out.len().min(self.layout.data_words);
            for (o, w) in out[..n].iter_mut().zip(&self.words[at + 1..]) {
                *o = w.load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            if self.words[0].load(Ordering::Relaxed) == c1 {
                return action;
            }
        }
    }

    /// `read` into an owned value (control plane).
    pub fn snapshot(&self) -> EntryData {
        let mut data = vec![0; self.layout.data_words];
        let action = self.read(&mut data);
        EntryData { action, data }
    }

    /// Store one data word in place (unlocked tables: single-word atomic, no ordering with
    /// other words or other workers).
    #[inline(always)]
    pub fn set_word(&self, i: usize, value: u64) {
        let ctl = self.words[0].load(Ordering::Acquire);
        self.words[self.layout.copy_at(current(ctl)) + 1 + i].store(value, Ordering::Relaxed);
    }

    /// Run an action's read-modify-write of the data words.
    ///
    /// With `locked`, the whole of `f` is atomic with respect to other workers' locked writes
    /// and to control-plane writes (the per-entry lock). Without, the words are read, `f` runs,
    /// and changed words are stored back one by one: a racing writer's update can be lost.
    #[inline(always)]
    pub fn update<R>(&self, locked: bool, f: impl FnOnce(&mut [u64]) -> R) -> R {
        let w = self.layout.data_words;
        let mut buf = [0u64; MAX_DATA_WORDS];
        let ctl = if locked { self.lock() } else { self.words[0].load(Ordering::Acquire) };
        let at = self.layout.copy_at(current(ctl)) + 1;
        let cells = &self.words[at..at + w];
        for (b, c) in buf.iter_mut().zip(cells) {
            *b = c.load(Ordering::Relaxed);
        }
        let before = buf;
        let r = f(&mut buf[..w]);
        for ((b, old), c) in buf.iter().zip(&before).zip(cells) {
            if b != old {
                c.store(*b, Ordering::Relaxed);
            }
        }
        if locked {
            self.unlock(ctl);
        }
        r
    }

    /// Replace data word `i` by `f(old)` and return the old value: the one-word case of
    /// [`update`](Self::update), without its buffers (a counter, the experiment's swap).
    #[inline(always)]
    pub fn modify_word(&self, locked: bool, i: usize, f: impl FnOnce(u64) -> u64) -> u64 {
        let ctl = if locked { self.lock() } else { self.words[0].load(Ordering::Acquire) };
        let cell = &self.words[self.layout.copy_at(current(ctl)) + 1 + i];
        let old = cell.load(Ordering::Relaxed);
        cell.store(f(old), Ordering::Relaxed);
        if locked {
            self.unlock(ctl);
        }
        old
    }

    /// The experiment's action: store `value` in data word `i` and return the old value.
    #[inline(always)]
    pub fn exchange_word(&self, locked: bool, i: usize, value: u64) -> u64 {
        self.modify_word(locked, i, |_| value)
    }

    /// Take the entry's worker lock; returns the control word it was taken at.
    #[inline(always)]
    fn lock(&self) -> u64 {
        let ctl = &self.words[0];
        loop {
            let c = ctl.load(Ordering::Relaxed);
            if c & LOCKED == 0
                && ctl
                    .compare_exchange_weak(c, c | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return c;
            }
            std::hint::spin_loop();
        }
    }

    /// Release the lock taken at `c`, bumping the version so snapshot readers retry.
    #[inline(always)]
    fn unlock(&self, c: u64) {
        self.words[0].store(c.wrapping_add(VERSION_ONE), Ordering::Release);
    }

    /// Count a hit: packets, bytes and idle time, as the table's layout has them.
    #[inline(always)]
    pub fn hit(&self, bytes: u32, now_ns: u64) {
        if self.layout.counters {
            let at = self.layout.counters_at();
            self.words[at].fetch_add(1, Ordering::Relaxed);
            self.words[at + 1].fetch_add(bytes as u64, Ordering::Relaxed);
        }
        if self.layout.idle {
            self.words[self.layout.idle_at()].store(now_ns, Ordering::Relaxed);
        }
    }

    pub fn stats(&self) -> EntryStats {
        let mut s = EntryStats::default();
        if self.layout.counters {
            let at = self.layout.counters_at();
            s.packets = self.words[at].load(Ordering::Relaxed);
            s.bytes = self.words[at + 1].load(Ordering::Relaxed);
        }
        if self.layout.idle {
            s.last_hit_ns = self.words[self.layout.idle_at()].load(Ordering::Relaxed);
        }
        s.meter = self.meter().and_then(|m| m.configured());
        s
    }

    /// The entry's meter, if the table meters its entries. New entries' meters are
    /// unconfigured (everything green).
    #[inline]
    pub fn meter(&self) -> Option<crate::MeterCell<'t>> {
        if !self.layout.meter {
            return None;
        }
        let at = self.layout.meter_at();
        let words: &'t [AtomicU64; crate::METER_WORDS] =
            self.words[at..at + crate::METER_WORDS].try_into().ok()?;
        Some(crate::MeterCell::new(words))
    }

    /// Zero the counters (control plane; a hit racing this may count either side of it).
    pub fn reset_stats(&self) {
        if self.layout.counters {
            let at = self.layout.counters_at();
            self.words[at].store(0, Ordering::Relaxed);
            self.words[at + 1].store(0, Ordering::Relaxed);
        }
    }

    /// Control plane: replace action and data. Writes the copy that is not current (after a
    /// grace period since it was last current, so no worker still writes it), then makes it
    /// current with one compare-and-swap. Workers never wait for this.
    pub(crate) fn publish(&self, qsbr: &Qsbr, action: u16, data: &[u64]) {
        let ctl = &self.words[0];
        loop {
            let c = ctl.load(Ordering::Acquire);
            if c & LOCKED != 0 {
                std::hint::spin_loop();
                continue;
            }
            let next = 1 - current(c);
            let retired =
                self.words[self.layout.copy_at(next)].load(Ordering::Relaxed) >> EPOCH_SHIFT;
            if retired != 0 && !qsbr.poll(retired) {
                // A worker that saw this copy as current may still be writing it. If the wait
                // times out the worker is stuck, not merely slow; writing anyway would at worst
                // let its one in-flight store land in the new data, so go on.
                let _ = qsbr.wait_for(retired, COPY_GRACE_TIMEOUT);
            }
            self.write_copy(next, action, data);
            let flipped = (c ^ CURRENT).wrapping_add(VERSION_ONE);
            if ctl.compare_exchange(c, flipped, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                let old = &self.words[self.layout.copy_at(1 - next)];
                let epoch = qsbr.advance();
                let action_bits = old.load(Ordering::Relaxed) & ACTION_MASK;
                old.store((epoch << EPOCH_SHIFT) | action_bits, Ordering::Relaxed);
                return;
            }
        }
    }
}

/// The entry a table falls back to on a miss: one body of the table's layout, replaced by the
/// control plane like any entry (and written in place by the data plane like any entry).
pub struct DefaultEntry {
    words: crate::words::WordArray<AtomicU64>,
    layout: BodyLayout,
    /// Serialises control-plane replacements; the data plane never takes it.
    writer: std::sync::Mutex<()>,
    qsbr: Qsbr,
}

impl DefaultEntry {
    /// The configured default action (the first action when none is named).
    pub fn new(cfg: &crate::config::TableConfig, qsbr: &Qsbr) -> Result<Self, crate::TableError> {
        let layout = cfg.body_layout();
        let e = Self {
            words: crate::words::WordArray::zeroed(layout.words())?,
            layout,
            writer: std::sync::Mutex::new(()),
            qsbr: qsbr.clone(),
        };
        let action = cfg.default_action.as_deref().and_then(|a| cfg.action_id(a)).unwrap_or(0);
        e.get().init(action, &cfg.default_data);
        Ok(e)
    }

    #[inline(always)]
    pub fn get(&self) -> EntryRef<'_> {
        EntryRef::new(&self.words, self.layout)
    }

    /// The entry's address and layout for generated code (see [`crate::raw`]).
    pub fn view(&self) -> crate::raw::DefaultView {
        crate::raw::DefaultView { body_at: self.words.as_ptr(), body: self.layout.view() }
    }

    /// Replace action and data (control plane; `action` checked by the caller).
    pub fn set(&self, action: u16, data: &[u64]) {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.get().publish(&self.qsbr, action, data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(layout: BodyLayout) -> Vec<AtomicU64> {
        (0..layout.words()).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn publish_flips_copies_and_keeps_counters() {
        let l = BodyLayout { data_words: 2, counters: true, idle: true, meter: false };
        let w = body(l);
        let e = EntryRef::new(&w, l);
        e.init(3, &[10, 20]);
        e.hit(100, 7);
        assert_eq!(e.snapshot(), EntryData { action: 3, data: vec![10, 20] });
        let q = Qsbr::new();
        e.publish(&q, 4, &[30]);
        assert_eq!(e.snapshot(), EntryData { action: 4, data: vec![30, 0] });
        e.publish(&q, 5, &[1, 2]);
        assert_eq!(e.snapshot(), EntryData { action: 5, data: vec![1, 2] });
        assert_eq!(e.stats(), EntryStats { packets: 1, bytes: 100, last_hit_ns: 7, meter: None });
    }

    #[test]
    fn in_place_writes_land_in_the_current_copy() {
        let l = BodyLayout { data_words: 1, counters: false, idle: false, meter: false };
        let w = body(l);
        let e = EntryRef::new(&w, l);
        e.init(0, &[1]);
        e.publish(&Qsbr::new(), 0, &[5]);
        assert_eq!(e.exchange_word(true, 0, 6), 5);
        assert_eq!(e.exchange_word(false, 0, 7), 6);
        assert_eq!(e.update(true, |d| std::mem::replace(&mut d[0], 8)), 7);
        assert_eq!(e.word(0), 8);
    }
}
