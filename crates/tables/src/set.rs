//! One handle over the three table kinds, with control-plane operations addressed by match
//! specification and action name, and the set of named tables a data plane owns.

use crate::config::{MatchKind, TableConfig};
use crate::entry::{DefaultEntry, EntryData, EntryRef, EntryStats};
use crate::exact::check_action;
use crate::exact::ExactTable;
use crate::key::{pack, MAX_KEY_WORDS};
use crate::lpm::LpmTable;
use crate::ternary::{TernaryMatch, TernaryTable};
use crate::TableError;
use hotplane_core::{Guard, Qsbr};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// What an entry matches, in the table's kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchSpec {
    Exact(Vec<u8>),
    Lpm { prefix: Vec<u8>, len: u32 },
    Ternary { value: Vec<u8>, mask: Vec<u8> },
    Range { lo: u64, hi: u64 },
}

impl MatchSpec {
    /// The match as value and mask bytes (an exact key has an all-ones mask, a prefix the
    /// mask of its length); `None` for a range.
    pub fn value_mask(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        match self {
            MatchSpec::Exact(v) => Some((v.clone(), vec![0xff; v.len()])),
            MatchSpec::Lpm { prefix, len } => {
                let mask = (0..prefix.len())
                    .map(|i| {
                        let bits = len.saturating_sub(i as u32 * 8).min(8);
                        (0xffu16 << (8 - bits)) as u8
                    })
                    .collect();
                Some((prefix.clone(), mask))
            }
            MatchSpec::Ternary { value, mask } => Some((value.clone(), mask.clone())),
            MatchSpec::Range { .. } => None,
        }
    }
}

/// One entry as listings show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    pub matches: MatchSpec,
    pub priority: u32,
    pub action: String,
    pub data: Vec<u64>,
    pub stats: EntryStats,
}

pub enum Table {
    Exact(Box<ExactTable>),
    Lpm(Box<LpmTable>),
    Ternary(Box<TernaryTable>),
}

impl Table {
    pub fn new(cfg: TableConfig, qsbr: &Qsbr) -> Result<Self, TableError> {
        Ok(match cfg.kind {
            MatchKind::Exact => Table::Exact(Box::new(ExactTable::new(cfg, qsbr)?)),
            MatchKind::Lpm => Table::Lpm(Box::new(LpmTable::new(cfg, qsbr)?)),
            MatchKind::Ternary => Table::Ternary(Box::new(TernaryTable::new(cfg, qsbr)?)),
        })
    }

    pub fn config(&self) -> &TableConfig {
        match self {
            Table::Exact(t) => t.config(),
            Table::Lpm(t) => t.config(),
            Table::Ternary(t) => t.config(),
        }
    }

    pub fn name(&self) -> &str {
        &self.config().name
    }

    pub fn len(&self) -> usize {
        match self {
            Table::Exact(t) => t.len(),
            Table::Lpm(t) => t.len(),
            Table::Ternary(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Data-plane lookup by key bytes (the table's width), falling back to nothing on a miss.
    #[inline]
    pub fn lookup<'g>(&'g self, key: &[u8], guard: &'g Guard<'_>) -> Option<EntryRef<'g>> {
        match self {
            Table::Lpm(t) => t.lookup(key, guard),
            Table::Exact(t) => {
                let mut w = [0u64; MAX_KEY_WORDS];
                let n = t.key_words();
                pack(key, &mut w[..n]);
                t.lookup(&w[..n], guard)
            }
            Table::Ternary(t) => {
                let mut w = [0u64; MAX_KEY_WORDS];
                let n = t.key_words();
                pack(key, &mut w[..n]);
                t.lookup(&w[..n], guard)
            }
        }
    }

    /// The entry a miss runs.
    pub fn default_entry(&self) -> &DefaultEntry {
        match self {
            Table::Exact(t) => t.default_entry(),
            Table::Lpm(t) => t.default_entry(),
            Table::Ternary(t) => t.default_entry(),
        }
    }

    fn action(&self, name: &str) -> Result<u16, TableError> {
        self.config().action_id(name).ok_or_else(|| TableError::BadAction {
            what: format!(
                "`{name}` is not an action of table `{}` ({})",
                self.name(),
                self.config()
                    .actions
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
    }

    fn kind_mismatch(&self, m: &MatchSpec) -> TableError {
        TableError::BadKey {
            what: format!(
                "table `{}` is {:?}; a {m:?} match does not fit it",
                self.name(),
                self.config().kind
            ),
        }
    }

    fn ternary(m: &MatchSpec) -> Option<TernaryMatch> {
        match m {
            MatchSpec::Range { lo, hi } => Some(TernaryMatch::Range { lo: *lo, hi: *hi }),
            m => m.value_mask().map(|(value, mask)| TernaryMatch::Mask { value, mask }),
        }
    }

    /// An LPM table takes a prefix, or an exact key as its full-length prefix.
    fn lpm(m: &MatchSpec) -> Option<(&[u8], u32)> {
        match m {
            MatchSpec::Lpm { prefix, len } => Some((prefix, *len)),
            MatchSpec::Exact(k) => Some((k, k.len() as u32 * 8)),
            MatchSpec::Ternary { .. } | MatchSpec::Range { .. } => None,
        }
    }

    pub fn insert(
        &self,
        m: &MatchSpec,
        priority: u32,
        action: &str,
        data: &[u64],
    ) -> Result<(), TableError> {
        let a = self.action(action)?;
        match (self, m) {
            (Table::Exact(t), MatchSpec::Exact(k)) => t.insert(k, a, data),
            (Table::Lpm(t), m) => match Self::lpm(m) {
                Some((prefix, len)) => t.insert(prefix, len, a, data),
                None => Err(self.kind_mismatch(m)),
            },
            (Table::Ternary(t), m) => match Self::ternary(m) {
                Some(tm) => t.insert(tm, priority, a, data),
                None => Err(self.kind_mismatch(m)),
            },
            _ => Err(self.kind_mismatch(m)),
        }
    }

    /// Add `entries` (match, priority, action, data) at once. A ternary table checks them all
    /// and rebuilds its index once (inserting one at a time rebuilds it per entry: quadratic),
    /// and refuses the whole batch if one is bad; exact and LPM tables insert them in turn and
    /// stop at the first refused.
    pub fn insert_many(
        &self,
        entries: Vec<(MatchSpec, u32, &str, Vec<u64>)>,
    ) -> Result<(), TableError> {
        let Table::Ternary(t) = self else {
            for (m, priority, action, data) in &entries {
                self.insert(m, *priority, action, data)?;
            }
            return Ok(());
        };
        let mut batch = Vec::with_capacity(entries.len());
        for (m, priority, action, data) in entries {
            let a = self.action(action)?;
            let tm = Self::ternary(&m).ok_or_else(|| self.kind_mismatch(&m))?;
            batch.push((tm, priority, a, data));
        }
        t.insert_many(batch)
    }

    pub fn modify(
        &self,
        m: &MatchSpec,
        priority: u32,
        action: &str,
        data: &[u64],
    ) -> Result<(), TableError> {
        let a = self.action(action)?;
        match (self, m) {
            (Table::Exact(t), MatchSpec::Exact(k)) => t.modify(k, a, data),
            (Table::Lpm(t), m) => match Self::lpm(m) {
                Some((prefix, len)) => t.modify(prefix, len, a, data),
                None => Err(self.kind_mismatch(m)),
            },
            (Table::Ternary(t), m) => match Self::ternary(m) {
                Some(tm) => t.modify(&tm, priority, a, data),
                None => Err(self.kind_mismatch(m)),
            },
            _ => Err(self.kind_mismatch(m)),
        }
    }

    /// Run `f` on the entry stored under `m` (and `priority`, for ternary tables), holding the
    /// table's writer lock: the control plane's way to an entry's meter.
    pub fn with_entry<R>(
        &self,
        m: &MatchSpec,
        priority: u32,
        f: impl FnOnce(EntryRef<'_>) -> R,
    ) -> Result<R, TableError> {
        match (self, m) {
            (Table::Exact(t), MatchSpec::Exact(k)) => t.with_entry(k, f),
            (Table::Lpm(t), m) => match Self::lpm(m) {
                Some((prefix, len)) => t.with_entry(prefix, len, f),
                None => Err(self.kind_mismatch(m)),
            },
            (Table::Ternary(t), m) => match Self::ternary(m) {
                Some(tm) => t.with_entry(&tm, priority, f),
                None => Err(self.kind_mismatch(m)),
            },
            _ => Err(self.kind_mismatch(m)),
        }
    }

    pub fn delete(&self, m: &MatchSpec, priority: u32) -> Result<(), TableError> {
        match (self, m) {
            (Table::Exact(t), MatchSpec::Exact(k)) => t.delete(k),
            (Table::Lpm(t), m) => match Self::lpm(m) {
                Some((prefix, len)) => t.delete(prefix, len),
                None => Err(self.kind_mismatch(m)),
            },
            (Table::Ternary(t), m) => match Self::ternary(m) {
                Some(tm) => t.delete(&tm, priority),
                None => Err(self.kind_mismatch(m)),
            },
            _ => Err(self.kind_mismatch(m)),
        }
    }

    pub fn set_default(&self, action: &str, data: &[u64]) -> Result<(), TableError> {
        let a = self.action(action)?;
        check_action(self.config(), a, data)?;
        self.default_entry().set(a, data);
        Ok(())
    }

    pub fn default_data(&self) -> (String, Vec<u64>) {
        let d = self.default_entry().get().snapshot();
        (self.action_name(&d), d.data)
    }

    fn action_name(&self, d: &EntryData) -> String {
        self.config()
            .actions
            .get(d.action as usize)
            .map_or_else(|| format!("#{}", d.action), |a| a.name.clone())
    }

    pub fn clear(&self) {
        match self {
            Table::Exact(t) => t.clear(),
            Table::Lpm(t) => t.clear(),
            Table::Ternary(t) => t.clear(),
        }
    }

    pub fn maintain(&self) {
        match self {
            Table::Exact(t) => t.maintain(),
            Table::Lpm(t) => t.maintain(),
            Table::Ternary(t) => t.maintain(),
        }
    }

    /// Every entry, with action names and counters (control plane).
    pub fn entries(&self) -> Vec<TableEntry> {
        let trim = |d: &EntryData, a: &str| -> Vec<u64> {
            let n = self
                .config()
                .actions
                .iter()
                .find(|s| s.name == a)
                .map_or(d.data.len(), |s| s.data_words());
            d.data[..n.min(d.data.len())].to_vec()
        };
        match self {
            Table::Exact(t) => t
                .entries()
                .into_iter()
                .map(|e| {
                    let action = self.action_name(&e.data);
                    TableEntry {
                        data: trim(&e.data, &action),
                        matches: MatchSpec::Exact(e.key),
                        priority: 0,
                        action,
                        stats: e.stats,
                    }
                })
                .collect(),
            Table::Lpm(t) => t
                .entries()
                .into_iter()
                .map(|e| {
                    let action = self.action_name(&e.data);
                    TableEntry {
                        data: trim(&e.data, &action),
                        matches: MatchSpec::Lpm { prefix: e.prefix, len: e.len },
                        priority: 0,
                        action,
                        stats: e.stats,
                    }
                })
                .collect(),
            Table::Ternary(t) => t
                .entries()
                .into_iter()
                .map(|e| {
                    let action = self.action_name(&e.data);
                    let matches = match e.matches {
                        TernaryMatch::Mask { value, mask } => MatchSpec::Ternary { value, mask },
                        TernaryMatch::Range { lo, hi } => MatchSpec::Range { lo, hi },
                    };
                    TableEntry {
                        data: trim(&e.data, &action),
                        matches,
                        priority: e.priority,
                        action,
                        stats: e.stats,
                    }
                })
                .collect(),
        }
    }
}

/// The named tables of a data plane. Workers hold `Arc<Table>`s directly (no lock on the fast
/// path); the map's lock is taken only by the control plane.
#[derive(Default)]
pub struct TableSet {
    tables: RwLock<BTreeMap<String, Arc<Table>>>,
}

impl TableSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Create and register a table; fails if the name is taken or the config is invalid.
    pub fn create(&self, cfg: TableConfig, qsbr: &Qsbr) -> Result<Arc<Table>, TableError> {
        let mut map = self.tables.write().unwrap_or_else(|e| e.into_inner());
        if map.contains_key(&cfg.name) {
            return Err(TableError::invalid(&cfg.name, "a table of that name exists"));
        }
        let name = cfg.name.clone();
        let t = Arc::new(Table::new(cfg, qsbr)?);
        map.insert(name, t.clone());
        Ok(t)
    }

    pub fn get(&self, name: &str) -> Result<Arc<Table>, TableError> {
        self.tables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .ok_or_else(|| TableError::NoSuchTable(name.into()))
    }

    pub fn names(&self) -> Vec<String> {
        self.tables.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }

    pub fn all(&self) -> Vec<Arc<Table>> {
        self.tables.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }

    /// Reclaim memory of deleted entries whose grace period has passed.
    pub fn maintain(&self) {
        for t in self.all() {
            t.maintain();
        }
    }
}
