//! eBPF maps: the state programs keep between packets and share with the control plane.
//!
//! Every map preallocates its storage when it is created, so programs never allocate: lookups
//! return pointers into that storage, which stays put for the map's life. Values are plain
//! memory shared by workers and the control plane without locks, exactly as in Linux: a program
//! updating a value in place races with other readers unless it uses atomic instructions.
//!
//! Programs reach maps through helpers that take the map's address (the loader rewrites
//! `lddw rX, map` to that address); the control plane uses the `*_copy` methods.

mod hash;
pub mod layout;
mod lpm;

use hash::HashStore;
use lpm::LpmStore;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Slots of a hash map of `max_entries` (the bound of a `map_entry` slot index).
pub fn hash_slots(max_entries: u32) -> usize {
    hash::capacity(max_entries)
}

/// Map kinds, numbered as in Linux (`enum bpf_map_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MapKind {
    Hash = 1,
    Array = 2,
    PerCpuHash = 5,
    PerCpuArray = 6,
    LpmTrie = 11,
    DevMap = 14,
}

/// A map that cannot be declared as asked, or a control-plane operation on a map that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("map type 9 (lru_hash) is not supported; use a hash map")]
    LruHash,
    #[error("map type 10 (lru_percpu_hash) is not supported; use percpu_hash")]
    LruPerCpuHash,
    #[error("map type {0} is not supported (hash, array, percpu_hash, percpu_array, lpm_trie, devmap are)")]
    UnsupportedType(u32),
    #[error("`{0}` is not a map kind")]
    UnknownKind(String),
    #[error("{kind} map: {field} {value} must be in 1..={max}")]
    OutOfRange { kind: &'static str, field: &'static str, value: u32, max: u32 },
    #[error("{kind} map: key_size must be 4 (a u32 index), not {key_size}")]
    IndexKeySize { kind: &'static str, key_size: u32 },
    #[error("devmap: value_size must be 4 or 8, not {0}")]
    DevMapValueSize(u32),
    #[error("lpm_trie map: key_size {0} must be 4 (prefix length) + 1..=256 data bytes")]
    LpmKeySize(u32),
    #[error("{kind} map would need {bytes} bytes (limit {MAX_MAP_BYTES})")]
    TooLarge { kind: &'static str, bytes: u64 },
    #[error("map `{map}` has {expected}-byte keys; got {got} bytes")]
    KeySize { map: String, expected: usize, got: usize },
    #[error("map `{map}` has {expected}-byte values; got {got} bytes")]
    ValueSize { map: String, expected: usize, got: usize },
    #[error("no such key")]
    NoSuchKey,
    #[error("the key exists (BPF_NOEXIST)")]
    KeyExists,
    #[error("map `{map}` is full or the index is out of range")]
    Full { map: String },
    #[error("invalid operation on a {kind} map")]
    InvalidOperation { kind: &'static str },
    /// Any other negative errno a map operation returned.
    #[error("error {0}")]
    Errno(i64),
}

impl MapKind {
    pub fn from_linux(t: u32) -> Result<Self, MapError> {
        Ok(match t {
            1 => MapKind::Hash,
            2 => MapKind::Array,
            5 => MapKind::PerCpuHash,
            6 => MapKind::PerCpuArray,
            11 => MapKind::LpmTrie,
            14 => MapKind::DevMap,
            9 => return Err(MapError::LruHash),
            10 => return Err(MapError::LruPerCpuHash),
            t => return Err(MapError::UnsupportedType(t)),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            MapKind::Hash => "hash",
            MapKind::Array => "array",
            MapKind::PerCpuHash => "percpu_hash",
            MapKind::PerCpuArray => "percpu_array",
            MapKind::LpmTrie => "lpm_trie",
            MapKind::DevMap => "devmap",
        }
    }

    pub fn per_cpu(self) -> bool {
        matches!(self, MapKind::PerCpuHash | MapKind::PerCpuArray)
    }
}

impl std::str::FromStr for MapKind {
    type Err = MapError;
    fn from_str(s: &str) -> Result<Self, MapError> {
        [
            MapKind::Hash,
            MapKind::Array,
            MapKind::PerCpuHash,
            MapKind::PerCpuArray,
            MapKind::LpmTrie,
            MapKind::DevMap,
        ]
        .into_iter()
        .find(|k| k.name() == s)
        .ok_or_else(|| MapError::UnknownKind(s.to_string()))
    }
}

/// A map's shape, as declared by the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MapDef {
    pub kind: MapKind,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
}

/// Largest key, value and entry count accepted (keeps preallocation bounded).
pub const MAX_KEY_SIZE: u32 = 512;
pub const MAX_VALUE_SIZE: u32 = 64 * 1024;
pub const MAX_ENTRIES: u32 = 1 << 24;
/// Largest preallocation of one map.
pub const MAX_MAP_BYTES: u64 = 1 << 30;

/// Linux errno values helpers return (negated).
pub mod errno {
    pub const ENOENT: i64 = 2;
    pub const E2BIG: i64 = 7;
    pub const EBUSY: i64 = 16;
    pub const EEXIST: i64 = 17;
    pub const EINVAL: i64 = 22;
}

/// `flags` of map updates.
pub const BPF_ANY: u64 = 0;
pub const BPF_NOEXIST: u64 = 1;
pub const BPF_EXIST: u64 = 2;

impl MapDef {
    /// Check the shape: sizes the kind requires, bounded memory.
    pub fn validate(&self, cpus: usize) -> Result<(), MapError> {
        let k = self.kind.name();
        if self.max_entries == 0 || self.max_entries > MAX_ENTRIES {
            return Err(MapError::OutOfRange {
                kind: k,
                field: "max_entries",
                value: self.max_entries,
                max: MAX_ENTRIES,
            });
        }
        if self.value_size == 0 || self.value_size > MAX_VALUE_SIZE {
            return Err(MapError::OutOfRange {
                kind: k,
                field: "value_size",
                value: self.value_size,
                max: MAX_VALUE_SIZE,
            });
        }
        if self.key_size == 0 || self.key_size > MAX_KEY_SIZE {
            return Err(MapError::OutOfRange {
                kind: k,
                field: "key_size",
                value: self.key_size,
                max: MAX_KEY_SIZE,
            });
        }
        match self.kind {
            MapKind::Array | MapKind::PerCpuArray | MapKind::DevMap if self.key_size != 4 => {
                return Err(MapError::IndexKeySize { kind: k, key_size: self.key_size });
            }
            MapKind::DevMap if self.value_size != 4 && self.value_size != 8 => {
                return Err(MapError::DevMapValueSize(self.value_size));
            }
            MapKind::LpmTrie if self.key_size < 5 || self.key_size > 4 + 256 => {
                return Err(MapError::LpmKeySize(self.key_size));
            }
            _ => {}
        }
        if self.bytes(cpus) > MAX_MAP_BYTES {
            return Err(MapError::TooLarge { kind: k, bytes: self.bytes(cpus) });
        }
        Ok(())
    }

    /// Bytes of storage the map preallocates.
    pub fn bytes(&self, cpus: usize) -> u64 {
        let copies = if self.kind.per_cpu() { cpus as u64 } else { 1 };
        let value = round8(self.value_size) as u64 * copies;
        match self.kind {
            MapKind::Array | MapKind::PerCpuArray | MapKind::DevMap => {
                value * self.max_entries as u64
            }
            MapKind::Hash | MapKind::PerCpuHash | MapKind::LpmTrie => {
                hash::capacity(self.max_entries) as u64 * (8 + round8(self.key_size) as u64 + value)
            }
        }
    }
}

pub(crate) fn round8(n: u32) -> usize {
    (n as usize).div_ceil(8) * 8
}

thread_local! {
    /// The worker running on this thread: selects per-CPU values (`bpf_get_smp_processor_id`).
    static CPU: Cell<u32> = const { Cell::new(0) };
}

/// Declare which worker this thread is (workers call it once at start).
pub fn set_current_cpu(cpu: u32) {
    CPU.with(|c| c.set(cpu));
}

pub fn current_cpu() -> u32 {
    CPU.with(|c| c.get())
}

/// Zeroed, 8-byte aligned memory that programs address directly.
pub(crate) struct Arena {
    words: Box<[AtomicU64]>,
}

impl Arena {
    fn new(bytes: usize) -> Self {
        Self { words: (0..bytes.div_ceil(8)).map(|_| AtomicU64::new(0)).collect() }
    }

    pub(crate) fn base(&self) -> *mut u8 {
        self.words.as_ptr() as *mut u8
    }

    pub(crate) fn len(&self) -> usize {
        self.words.len() * 8
    }

    /// Copy out `len` bytes at `off` for the control plane. Bytewise relaxed atomic loads: a
    /// program may be writing them at the same moment.
    fn read(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off + len <= self.len());
        // SAFETY: in bounds (asserted); AtomicU8 has the alignment and size of u8, and the arena
        // is only accessed atomically from Rust (programs write it as plain memory, as in Linux).
        (0..len)
            .map(|i| {
                unsafe { AtomicU8::from_ptr(self.base().add(off + i)) }.load(Ordering::Relaxed)
            })
            .collect()
    }

    /// Copy `data` in at `off` (control plane).
    fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len());
        for (i, b) in data.iter().enumerate() {
            // SAFETY: as in `read`.
            unsafe { AtomicU8::from_ptr(self.base().add(off + i)) }.store(*b, Ordering::Relaxed);
        }
    }
}

enum Store {
    /// Array, per-CPU array and devmap: values at `index * stride`.
    Array(Arena),
    Hash(HashStore),
    Lpm(LpmStore),
}

/// One map.
pub struct Map {
    pub name: String,
    pub def: MapDef,
    /// Per-CPU maps keep this many copies of every value.
    pub cpus: usize,
    store: Store,
    /// Bytes between one CPU's copy of a value and the next (per-CPU maps).
    cpu_stride: usize,
    /// Bytes between entries of an array (all CPUs' copies).
    stride: usize,
    per_cpu: bool,
    /// Updates from programs that gave up on a contended lock (returned -EBUSY).
    pub busy: AtomicU64,
    /// Writes to a (shared) hash map, for code specialised to its contents.
    writes: WriteCount,
    /// Some program loaded with this map stores into its values in place (no update counts
    /// that): its values are never folded into code (`crate::chain::mapconst`).
    values_stored: std::sync::atomic::AtomicBool,
    /// How keys and values look (BTF), for the control plane's listings only.
    layout: std::sync::Mutex<Option<Arc<layout::MapLayout>>>,
}

/// Writes begun and ended, counted around every update and delete of a shared hash map: a
/// program specialised to the map's contents ([`Map::pin`]) runs only while no write has begun
/// since its snapshot, so it never acts on contents a finished write replaced.
#[derive(Default)]
#[repr(align(64))]
struct WriteCount {
    begun: AtomicU64,
    ended: AtomicU64,
}

/// A hash map's entries as one consistent snapshot, taken between writes: what code
/// specialised to the contents may rely on while [`MapPin::holds`].
#[derive(Debug, Clone)]
pub struct MapPin {
    map: std::sync::Arc<Map>,
    /// Writes begun when the snapshot was taken.
    begun: u64,
    pub entries: Vec<PinnedEntry>,
    /// No program stored into the values in place when the snapshot was taken (one that is
    /// loaded later counts as a write): the values, not only the keys, may be relied on.
    pub values_stable: bool,
}

/// One entry of a [`MapPin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedEntry {
    pub key: Vec<u8>,
    /// The hash slot holding it (`lddw map_entry`).
    pub slot: usize,
    pub value: Vec<u8>,
}

impl MapPin {
    /// No write has begun since the snapshot (one load: the guard's per-packet check).
    #[inline]
    pub fn holds(&self) -> bool {
        self.map.writes.begun.load(Ordering::Acquire) == self.begun
    }

    pub fn map(&self) -> &std::sync::Arc<Map> {
        &self.map
    }

    /// The address of the map's writes-begun counter and the value it must hold: what a
    /// compiled guard compares (`crate::jit::guard`). The address is valid while this pin
    /// (which holds the map) lives.
    pub fn counter(&self) -> (u64, u64) {
        (self.map.writes.begun.as_ptr() as u64, self.begun)
    }

    /// Writes begun before the snapshot (its generation).
    pub fn generation(&self) -> u64 {
        self.begun
    }
}

impl PartialEq for MapPin {
    fn eq(&self, o: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.map, &o.map) && self.begun == o.begun
    }
}

impl Eq for MapPin {}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} map `{}` ({}-byte keys, {}-byte values, {} entries)",
            self.def.kind.name(),
            self.name,
            self.def.key_size,
            self.def.value_size,
            self.def.max_entries
        )
    }
}

/// An entry as the control plane sees it: the key and, for per-CPU maps, one value per CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub values: Vec<Vec<u8>>,
}

impl Map {
    pub fn new(name: &str, def: MapDef, cpus: usize) -> Result<Self, MapError> {
        let cpus = cpus.max(1);
        def.validate(cpus)?;
        let cpu_stride = round8(def.value_size);
        let copies = if def.kind.per_cpu() { cpus } else { 1 };
        let store = match def.kind {
            MapKind::Array | MapKind::PerCpuArray | MapKind::DevMap => {
                Store::Array(Arena::new(cpu_stride * copies * def.max_entries as usize))
            }
            MapKind::Hash | MapKind::PerCpuHash => Store::Hash(HashStore::new(
                def.key_size as usize,
                cpu_stride * copies,
                def.max_entries,
            )),
            MapKind::LpmTrie => {
                Store::Lpm(LpmStore::new(def.key_size as usize, cpu_stride, def.max_entries))
            }
        };
        Ok(Self {
            name: name.to_string(),
            def,
            cpus,
            store,
            cpu_stride,
            stride: cpu_stride * copies,
            per_cpu: def.kind.per_cpu(),
            busy: AtomicU64::new(0),
            writes: WriteCount::default(),
            values_stored: std::sync::atomic::AtomicBool::new(false),
            layout: std::sync::Mutex::new(None),
        })
    }

    /// How its keys and values look, as the newest program that described them said.
    pub fn layout(&self) -> Option<Arc<layout::MapLayout>> {
        self.layout.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_layout(&self, layout: Option<Arc<layout::MapLayout>>) {
        *self.layout.lock().unwrap_or_else(|e| e.into_inner()) = layout;
    }

    /// A program that stores into this map's values was loaded: from now on the values are not
    /// stable between updates. Counted as a write, so code already specialised to the values
    /// stops running before the program can change one.
    pub fn note_value_stores(&self) {
        if !self.values_stored.swap(true, Ordering::AcqRel) && self.counts_writes() {
            self.counted(|| ());
        }
    }

    /// Whether values change only through updates (no loaded program stores into them).
    pub fn values_stable(&self) -> bool {
        !self.values_stored.load(Ordering::Acquire)
    }

    /// Whether writes are counted (shared hash maps: the only maps whose contents code is
    /// specialised to; per-CPU values change per packet, arrays are inlined anyway).
    fn counts_writes(&self) -> bool {
        self.def.kind == MapKind::Hash
    }

    /// A snapshot of a shared hash map of at most `max` entries, taken while no write is in
    /// progress; `None` for other maps, bigger ones, or when writes keep coming.
    pub fn pin(self: &std::sync::Arc<Self>, max: usize) -> Option<MapPin> {
        let Store::Hash(h) = &self.store else { return None };
        if !self.counts_writes() {
            return None;
        }
        for _ in 0..4 {
            let ended = self.writes.ended.load(Ordering::Acquire);
            let begun = self.writes.begun.load(Ordering::Acquire);
            if begun != ended {
                std::thread::yield_now();
                continue;
            }
            if h.len() > max {
                return None;
            }
            let values_stable = self.values_stable();
            let entries: Vec<PinnedEntry> = h
                .slotted_keys()
                .into_iter()
                .filter_map(|(key, slot)| {
                    let value = self.lookup_copy(&key).ok().flatten()?.pop()?;
                    Some(PinnedEntry { key, slot, value })
                })
                .collect();
            std::sync::atomic::fence(Ordering::Acquire);
            if self.writes.begun.load(Ordering::Acquire) == begun && entries.len() <= max {
                return Some(MapPin { map: self.clone(), begun, entries, values_stable });
            }
        }
        None
    }

    /// Address of the value in hash slot `slot` (`lddw map_entry`), if there is such a slot.
    pub fn slot_value_addr(&self, slot: usize) -> Option<u64> {
        let Store::Hash(h) = &self.store else { return None };
        (slot < h.slots()).then(|| h.value_ptr(slot) as u64)
    }

    /// Run a write, counted for [`MapPin`]s: `begun` is bumped before it touches anything, so a
    /// packet that checks the pin after the write returns sees it changed.
    #[inline]
    fn counted<T>(&self, write: impl FnOnce() -> T) -> T {
        if !self.counts_writes() {
            return write();
        }
        self.writes.begun.fetch_add(1, Ordering::SeqCst);
        // What the write stores must not become visible before the count (as in a seqlock):
        // a snapshot that sees new contents sees the write begun.
        std::sync::atomic::fence(Ordering::Release);
        let r = write();
        self.writes.ended.fetch_add(1, Ordering::Release);
        r
    }

    /// The layout the JIT needs to inline lookups, for arrays and per-CPU arrays.
    pub fn inline_layout(&self) -> Option<crate::jit::InlineArray> {
        let Store::Array(a) = &self.store else { return None };
        if !matches!(self.def.kind, MapKind::Array | MapKind::PerCpuArray) {
            return None;
        }
        Some(crate::jit::InlineArray {
            base: a.base() as u64,
            max_entries: self.def.max_entries,
            stride: u32::try_from(self.stride).ok()?,
            cpu_stride: if self.per_cpu { u32::try_from(self.cpu_stride).ok()? } else { 0 },
        })
    }

    /// Same shape: a new program version may keep using this map.
    pub fn compatible(&self, def: &MapDef) -> bool {
        self.def == *def
    }

    /// The memory programs may address through this map's values (for the interpreter's
    /// bounds checks).
    pub fn region(&self) -> (u64, u64) {
        let a = match &self.store {
            Store::Array(a) => a,
            Store::Hash(h) => h.arena(),
            Store::Lpm(l) => l.arena(),
        };
        (a.base() as u64, a.len() as u64)
    }

    #[inline(always)]
    fn stride(&self) -> usize {
        self.stride
    }

    #[inline(always)]
    fn cpu_offset(&self) -> usize {
        if !self.per_cpu {
            return 0;
        }
        let cpu = current_cpu() as usize;
        // Workers are numbered below `cpus`; anything else (a test thread) shares a copy.
        let cpu = if cpu < self.cpus { cpu } else { cpu % self.cpus };
        cpu * self.cpu_stride
    }

    #[inline(always)]
    fn array_index(&self, key: &[u8]) -> Option<usize> {
        let i = u32::from_ne_bytes(key.try_into().ok()?) as usize;
        (i < self.def.max_entries as usize).then_some(i)
    }

    /// `bpf_map_lookup_elem`: a pointer to this CPU's value, or null.
    ///
    /// # Safety
    /// `key` must point to `key_size` readable bytes.
    #[inline]
    pub unsafe fn lookup_raw(&self, key: *const u8) -> *mut u8 {
        if let Store::Array(a) = &self.store {
            // SAFETY: array keys are 4 bytes (checked at creation); the caller guarantees them.
            let i = unsafe { (key as *const u32).read_unaligned() } as usize;
            if i >= self.def.max_entries as usize {
                return std::ptr::null_mut();
            }
            // SAFETY: index < max_entries, so the value lies inside the arena.
            return unsafe { a.base().add(i * self.stride + self.cpu_offset()) };
        }
        // SAFETY: the caller guarantees key_size readable bytes.
        let key = unsafe { std::slice::from_raw_parts(key, self.def.key_size as usize) };
        let at = match &self.store {
            Store::Array(a) => match self.array_index(key) {
                // SAFETY: index < max_entries, so the value lies inside the arena.
                Some(i) => return unsafe { a.base().add(i * self.stride() + self.cpu_offset()) },
                None => return std::ptr::null_mut(),
            },
            Store::Hash(h) => h.find(key),
            Store::Lpm(l) => l.longest_match(key),
        };
        match at {
            // SAFETY: `find` returns value offsets inside the arena.
            Some(p) => unsafe { p.add(self.cpu_offset()) },
            None => std::ptr::null_mut(),
        }
    }

    /// `bpf_map_update_elem` from a program; 0 or a negative errno.
    ///
    /// # Safety
    /// `key` and `value` must point to `key_size` and `value_size` readable bytes.
    pub unsafe fn update_raw(&self, key: *const u8, value: *const u8, flags: u64) -> i64 {
        // SAFETY: the caller guarantees the sizes.
        let (key, value) = unsafe {
            (
                std::slice::from_raw_parts(key, self.def.key_size as usize),
                std::slice::from_raw_parts(value, self.def.value_size as usize),
            )
        };
        self.update_from(key, flags, Who::Program, |dst| {
            // SAFETY: `dst` is a value slot of value_size bytes in the arena; programs race
            // on values exactly as in Linux.
            unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), dst, value.len()) }
        })
    }

    /// `bpf_map_delete_elem` from a program.
    ///
    /// # Safety
    /// `key` must point to `key_size` readable bytes.
    pub unsafe fn delete_raw(&self, key: *const u8) -> i64 {
        // SAFETY: the caller guarantees key_size readable bytes.
        let key = unsafe { std::slice::from_raw_parts(key, self.def.key_size as usize) };
        self.delete_from(key, Who::Program)
    }

    fn busy(&self) -> i64 {
        self.busy.fetch_add(1, Ordering::Relaxed);
        -errno::EBUSY
    }

    fn update_from(&self, key: &[u8], flags: u64, who: Who, write: impl Fn(*mut u8)) -> i64 {
        self.counted(|| self.update_uncounted(key, flags, who, write))
    }

    fn update_uncounted(&self, key: &[u8], flags: u64, who: Who, write: impl Fn(*mut u8)) -> i64 {
        if flags > BPF_EXIST {
            return -errno::EINVAL;
        }
        let per_cpu_off = if who == Who::Program { self.cpu_offset() } else { 0 };
        match &self.store {
            Store::Array(a) => {
                let Some(i) = self.array_index(key) else { return -errno::E2BIG };
                if flags == BPF_NOEXIST {
                    return -errno::EEXIST;
                }
                // SAFETY: index < max_entries.
                write(unsafe { a.base().add(i * self.stride() + per_cpu_off) });
                0
            }
            Store::Hash(h) => match h.upsert(key, flags, who) {
                // SAFETY: value offsets are inside the arena.
                Ok((p, _)) => {
                    write(unsafe { p.add(per_cpu_off) });
                    0
                }
                Err(e) if e == -errno::EBUSY => self.busy(),
                Err(e) => e,
            },
            Store::Lpm(l) => match l.upsert(key, flags, who) {
                Ok(p) => {
                    write(p);
                    0
                }
                Err(e) if e == -errno::EBUSY => self.busy(),
                Err(e) => e,
            },
        }
    }

    fn delete_from(&self, key: &[u8], who: Who) -> i64 {
        let r = self.counted(|| self.delete_uncounted(key, who));
        if r == -errno::EBUSY {
            return self.busy();
        }
        r
    }

    fn delete_uncounted(&self, key: &[u8], who: Who) -> i64 {
        match &self.store {
            // A devmap entry is removed by clearing its interface index.
            Store::Array(a) if self.def.kind == MapKind::DevMap => match self.array_index(key) {
                Some(i) => {
                    a.write(i * self.stride(), &[0; 4]);
                    0
                }
                None => -errno::ENOENT,
            },
            Store::Array(_) => -errno::EINVAL,
            Store::Hash(h) => h.remove(key, who),
            Store::Lpm(l) => l.remove(key, who),
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<(), MapError> {
        if key.len() != self.def.key_size as usize {
            return Err(MapError::KeySize {
                map: self.name.clone(),
                expected: self.def.key_size as usize,
                got: key.len(),
            });
        }
        Ok(())
    }

    /// Control plane: the value(s) under `key` (one per CPU for per-CPU maps).
    pub fn lookup_copy(&self, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>, MapError> {
        self.check_key(key)?;
        let (arena, base) = match &self.store {
            Store::Array(a) => match self.array_index(key) {
                Some(i) => (a, i * self.stride()),
                None => return Ok(None),
            },
            Store::Hash(h) => match h.find_offset(key) {
                Some(o) => (h.arena(), o),
                None => return Ok(None),
            },
            Store::Lpm(l) => match l.exact_offset(key) {
                Some(o) => (l.arena(), o),
                None => return Ok(None),
            },
        };
        let copies = if self.def.kind.per_cpu() { self.cpus } else { 1 };
        Ok(Some(
            (0..copies)
                .map(|c| arena.read(base + c * self.cpu_stride, self.def.value_size as usize))
                .collect(),
        ))
    }

    /// Control plane update. `value` is one value (written to every CPU's copy of a per-CPU
    /// map) or, for per-CPU maps, one value per CPU concatenated.
    pub fn update_copy(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        self.check_key(key)?;
        let vs = self.def.value_size as usize;
        let copies = if self.def.kind.per_cpu() { self.cpus } else { 1 };
        if value.len() != vs && value.len() != vs * copies {
            return Err(MapError::ValueSize {
                map: self.name.clone(),
                expected: vs,
                got: value.len(),
            });
        }
        let arena = match &self.store {
            Store::Array(a) => a,
            Store::Hash(h) => h.arena(),
            Store::Lpm(l) => l.arena(),
        };
        let base = arena.base() as usize;
        let r = self.update_from(key, flags, Who::Control, |dst| {
            let off = dst as usize - base;
            for c in 0..copies {
                let src = if value.len() == vs { value } else { &value[c * vs..(c + 1) * vs] };
                arena.write(off + c * self.cpu_stride, src);
            }
        });
        self.result(r)
    }

    pub fn delete_copy(&self, key: &[u8]) -> Result<(), MapError> {
        self.check_key(key)?;
        let r = self.delete_from(key, Who::Control);
        self.result(r)
    }

    fn result(&self, r: i64) -> Result<(), MapError> {
        match -r {
            0 => Ok(()),
            errno::ENOENT => Err(MapError::NoSuchKey),
            errno::EEXIST => Err(MapError::KeyExists),
            errno::E2BIG => Err(MapError::Full { map: self.name.clone() }),
            errno::EINVAL => Err(MapError::InvalidOperation { kind: self.def.kind.name() }),
            e => Err(MapError::Errno(e)),
        }
    }

    /// Control plane: every entry (arrays: every index).
    pub fn entries(&self) -> Vec<Entry> {
        let keys: Vec<Vec<u8>> = match &self.store {
            Store::Array(_) => {
                (0..self.def.max_entries).map(|i| i.to_ne_bytes().to_vec()).collect()
            }
            Store::Hash(h) => h.keys(),
            Store::Lpm(l) => l.keys(),
        };
        keys.into_iter()
            .filter_map(|k| {
                let values = self.lookup_copy(&k).ok().flatten()?;
                Some(Entry { key: k, values })
            })
            .collect()
    }

    /// Entries in use (arrays: max_entries).
    pub fn len(&self) -> usize {
        match &self.store {
            Store::Array(_) => self.def.max_entries as usize,
            Store::Hash(h) => h.len(),
            Store::Lpm(l) => l.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Who performs an update: programs must not wait long for a lock; the control plane may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    Program,
    Control,
}

#[cfg(test)]
mod tests;
