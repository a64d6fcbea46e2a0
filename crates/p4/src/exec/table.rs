//! P4 tables over hotplane-tables: how a P4 key maps onto one table kind, entries in P4 terms
//! (per-key matches, action by name, argument values), and the compiled `apply`.
//!
//! Keys are packed field after field, each in whole bytes and left-aligned, so that a prefix
//! of a field is a prefix of its bytes. All-exact keys use an exact table; exact fields plus
//! one `lpm` field use an LPM table with the exact fields first (an exact field is then part
//! of every prefix); anything else uses a ternary table with priorities.

use std::sync::Arc;

use super::bits::{copy_bytes, read_be, write_be};
use super::entry_error::{EntryError, KeyError};
use super::profile::{ProfileRef, ProfileRt, GROUP_ACTION, MEMBER_ACTION};
use super::{Compiler, Ctx, ExprFn, Flow, StmtFn};
use crate::ir::{self, HashAlgo, KeyMatch, MatchKind, SlotId};
use crate::types::mask;
use hotplane_core::Qsbr;
use hotplane_tables::key::MAX_KEY_BYTES;
use hotplane_tables::{
    expand_range, ActionSpec, EntryStats, MatchKind as Kind, MatchSpec, MeterRates, ParamSpec,
    Table, TableConfig, TableError,
};

/// A key field and where it sits in the packed key.
#[derive(Clone, Debug)]
pub struct KeyField {
    pub name: String,
    pub width: u32,
    pub kind: MatchKind,
    /// Byte offset in the packed key, and its length.
    pub at: usize,
    pub bytes: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Keyless,
    Exact,
    /// LPM on the packed key; the `lpm` field is last.
    Lpm,
    Ternary,
}

/// One entry in P4 terms, as STF files, runtime JSON and the control API give it.
#[derive(Clone, Debug, PartialEq)]
pub struct P4Entry {
    /// One match per key, in the table's key order.
    pub keys: Vec<KeyMatch>,
    /// Higher wins (P4Runtime's convention). Ternary tables need one unless the key has an
    /// `lpm` field, whose prefix length then orders entries.
    pub priority: Option<u32>,
    pub action: String,
    pub args: Vec<u128>,
}

/// A P4 table at run time.
pub struct P4Table {
    pub name: String,
    pub keys: Vec<KeyField>,
    pub key_bytes: usize,
    layout: Layout,
    /// Shared with the program this one replaced when the table was carried over.
    pub table: Arc<Table>,
    /// Table action id -> the program's action index.
    pub actions: Vec<u32>,
    pub action_names: Vec<String>,
    /// Directionless parameters (name, width, writable) of each table action.
    pub params: Vec<Vec<(String, u32, bool)>>,
    pub locked: bool,
    pub counters: bool,
    /// Entries keep the time of their last hit (`support_timeout`).
    pub idle: bool,
    /// Each entry has a meter (`meters = ...`, a `direct_meter`); `Some(true)` for a byte meter.
    pub meter_bytes: Option<bool>,
    pub entries_const: bool,
    pub default_const: bool,
    default_only: Vec<bool>,
    table_only: Vec<bool>,
    /// The action profile or selector whose members and groups the entries name.
    pub profile: Option<Arc<ProfileRt>>,
}

/// `action_run` when no action ran (an entry naming an empty group): no action's index.
const NO_ACTION_RUN: u128 = u32::MAX as u128;

/// Tables without a `size` hold this many entries.
pub const DEFAULT_SIZE: u32 = 1024;

/// What became of a table's state when a program replaced another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carried {
    /// The old program had no table like it: it starts empty (with its const entries).
    Fresh,
    /// Same name, key, actions and table settings: the new program uses the very same table,
    /// so every entry and every value the data plane writes carries over, even mid-swap.
    Shared,
    /// Same name, key and actions but new settings (size, store, locking): the entries, their
    /// data (`@ref` values as they were at the copy) and the default action were copied.
    Copied(usize),
}

impl P4Table {
    /// Build the table `t` of `prog`, taking over `old`'s state when `old` has the same key
    /// fields, action list and parameters and neither has const entries.
    pub(crate) fn build(
        prog: &ir::Program,
        t: &ir::Table,
        qsbr: &Qsbr,
        old: Option<&P4Table>,
        profile: Option<Arc<ProfileRt>>,
    ) -> Result<(Self, Carried), EntryError> {
        let err =
            |e: EntryError| EntryError::InTable { table: t.name.clone(), source: Box::new(e) };
        let store = |e: TableError| EntryError::Store { table: t.name.clone(), source: e };
        let lpm = t.keys.iter().filter(|k| k.kind == MatchKind::Lpm).count();
        let layout = if t.keys.is_empty() {
            Layout::Keyless
        } else if t.keys.iter().all(|k| k.kind == MatchKind::Exact) {
            Layout::Exact
        } else if lpm == 1
            && t.keys.iter().all(|k| matches!(k.kind, MatchKind::Exact | MatchKind::Lpm))
        {
            Layout::Lpm
        } else {
            Layout::Ternary
        };
        // Packing order: for LPM the lpm field goes last.
        let mut order: Vec<usize> = (0..t.keys.len()).collect();
        if layout == Layout::Lpm {
            order.sort_by_key(|&i| t.keys[i].kind == MatchKind::Lpm);
        }
        let mut keys: Vec<Option<KeyField>> = vec![None; t.keys.len()];
        let mut at = 0;
        for &i in &order {
            let k = &t.keys[i];
            let bytes = k.width.div_ceil(8) as usize;
            keys[i] =
                Some(KeyField { name: k.name.clone(), width: k.width, kind: k.kind, at, bytes });
            at += bytes;
        }
        let keys: Vec<KeyField> = keys.into_iter().flatten().collect();
        let key_bytes = at;
        if key_bytes > MAX_KEY_BYTES {
            return Err(err(EntryError::KeyTooWide { bytes: key_bytes, max: MAX_KEY_BYTES }));
        }
        let kind = match layout {
            Layout::Keyless | Layout::Exact => Kind::Exact,
            Layout::Lpm => Kind::Lpm,
            Layout::Ternary => Kind::Ternary,
        };
        let ActionParams { names: mut action_names, mut params, .. } =
            ActionParams::of(prog, Some(t));
        if profile.is_some() {
            // Entries name a member or a group: stored as a pseudo-action holding the id.
            for name in [MEMBER_ACTION, GROUP_ACTION] {
                action_names.push(name.to_string());
                params.push(vec![("id".to_string(), 32, false)]);
            }
        }
        let specs = action_names
            .iter()
            .zip(&params)
            .map(|(name, ps)| ActionSpec {
                name: name.clone(),
                params: ps
                    .iter()
                    .map(|(n, w, wr)| ParamSpec { name: n.clone(), bits: *w, writable: *wr })
                    .collect(),
            })
            .collect();
        let size = if t.size == 0 { DEFAULT_SIZE } else { t.size };
        let size = size.max(t.const_entries.len() as u32).max(1) as usize;
        let mut cfg = TableConfig::new(&t.name, kind, (key_bytes.max(1) * 8) as u32, size)
            .with_actions(specs);
        cfg.counters = t.direct_counter.is_some();
        cfg.idle_timestamps = t.support_timeout;
        let meter_bytes = t.direct_meter.as_ref().map(|name| {
            prog.instances.iter().any(|i| {
                &i.name == name && matches!(i.kind, ir::InstanceKind::DirectMeter { bytes: true })
            })
        });
        cfg.meters = meter_bytes.is_some();
        if let Some(text) = &t.tableconfig {
            cfg.apply_annotation(text).map_err(|e| store(e.into()))?;
        }
        let (locked, counters, idle) = (cfg.locked, cfg.counters, cfg.idle_timestamps);
        let old = old.filter(|o| {
            o.signature() == (signature(&keys), &action_names, &params)
                && !o.entries_const
                && t.const_entries.is_empty()
        });
        let (table, carried) = match old {
            Some(o) if *o.table.config() == cfg => (Arc::clone(&o.table), Carried::Shared),
            Some(o) => {
                let table = Table::new(cfg, qsbr).map_err(store)?;
                let n = copy_entries(&o.table, &table).map_err(err)?;
                (Arc::new(table), Carried::Copied(n))
            }
            None => (Arc::new(Table::new(cfg, qsbr).map_err(store)?), Carried::Fresh),
        };
        let this = P4Table {
            name: t.name.clone(),
            keys,
            key_bytes,
            layout,
            table,
            actions: t.actions.clone(),
            action_names,
            params,
            locked,
            counters,
            idle,
            meter_bytes,
            entries_const: t.entries_are_const,
            default_const: t.default_is_const,
            default_only: t.default_only.clone(),
            table_only: t.table_only.clone(),
            profile,
        };
        if carried != Carried::Fresh {
            return Ok((this, carried));
        }
        let default = this.action_names[this.table_action(t.default_action)?].clone();
        this.set_default_unchecked(&default, &t.default_args)?;
        // All in one batch: a ternary table rebuilds its index once, not once per entry.
        let mut batch = Vec::with_capacity(t.const_entries.len());
        for e in &t.const_entries {
            let entry = P4Entry {
                keys: e.keys.clone(),
                // Lowering ranked them (larger wins); None where the longest prefix decides.
                priority: e.priority,
                action: prog.actions[e.action as usize].name.clone(),
                args: e.args.clone(),
            };
            batch.extend(this.checked_specs(&entry).map_err(err)?);
        }
        let batch = batch.into_iter().map(|(m, p, a, words)| (m, p, &*this.action_names[a], words));
        this.table
            .insert_many(batch.collect())
            .map_err(|source| err(EntryError::Store { table: this.name.clone(), source }))?;
        Ok((this, carried))
    }

    /// Key fields, action names and parameters: what entries are written in terms of.
    #[allow(clippy::type_complexity)]
    fn signature(
        &self,
    ) -> (Vec<(&str, u32, MatchKind)>, &Vec<String>, &Vec<Vec<(String, u32, bool)>>) {
        (signature(&self.keys), &self.action_names, &self.params)
    }

    fn table_action(&self, prog_action: u32) -> Result<usize, EntryError> {
        self.actions
            .iter()
            .position(|&a| a == prog_action)
            .ok_or_else(|| EntryError::DefaultNotInList { table: self.name.clone() })
    }

    /// The table action called `name`: fully qualified (`MyIngress.drop`) or by its own name.
    pub fn action_id(&self, name: &str) -> Result<usize, EntryError> {
        find_action(&self.name, &self.action_names, name)
    }

    /// The matches of fields an entry does not give: anything, except that an exact field
    /// matches zero (as p4c's STF runner for BMv2 does).
    pub fn unset_keys(&self) -> Vec<KeyMatch> {
        self.keys
            .iter()
            .map(|k| match k.kind {
                MatchKind::Lpm => KeyMatch::Prefix { value: 0, len: 0 },
                MatchKind::Exact => KeyMatch::Mask { value: 0, mask: mask(k.width) },
                MatchKind::Range => KeyMatch::Range { lo: 0, hi: mask(k.width) },
                MatchKind::Ternary | MatchKind::Optional => KeyMatch::Mask { value: 0, mask: 0 },
            })
            .collect()
    }

    /// Action data words from argument values, checked against the parameters.
    pub fn data_words(&self, action: usize, args: &[u128]) -> Result<Vec<u64>, EntryError> {
        encode_args(&self.action_names, &self.params, action, args)
    }

    fn check_keys(&self, keys: &[KeyMatch]) -> Result<(), EntryError> {
        if keys.len() != self.keys.len() {
            return Err(EntryError::KeyCount {
                table: self.name.clone(),
                expected: self.keys.len(),
                fields: self.keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", "),
                given: keys.len(),
            });
        }
        for (k, m) in self.keys.iter().zip(keys) {
            let full = mask(k.width);
            let bad = |problem: KeyError| {
                Err(EntryError::BadKey { table: self.name.clone(), key: k.name.clone(), problem })
            };
            match *m {
                KeyMatch::Mask { value, mask } => {
                    if value & !full != 0 || mask & !full != 0 {
                        return bad(KeyError::MaskTooWide { value, mask, width: k.width });
                    }
                    let ok = match k.kind {
                        MatchKind::Exact => mask == full,
                        MatchKind::Optional => mask == full || mask == 0,
                        MatchKind::Lpm => is_prefix_mask(mask, k.width),
                        MatchKind::Ternary | MatchKind::Range => true,
                    };
                    if !ok {
                        return bad(KeyError::MaskForKind { mask, kind: k.kind });
                    }
                }
                KeyMatch::Prefix { value, len } => {
                    if len > k.width || value & !full != 0 {
                        return bad(KeyError::PrefixTooWide { value, len, width: k.width });
                    }
                    if matches!(k.kind, MatchKind::Exact | MatchKind::Range | MatchKind::Optional)
                        && len != k.width
                    {
                        return bad(KeyError::PrefixForKind { len, kind: k.kind });
                    }
                }
                KeyMatch::Range { lo, hi } => {
                    if k.kind != MatchKind::Range && !(lo == 0 && hi == full) && lo != hi {
                        return bad(KeyError::RangeOnNonRange);
                    }
                    if hi & !full != 0 || lo > hi {
                        return bad(KeyError::RangeTooWide { lo, hi, width: k.width });
                    }
                    if k.width > 64 {
                        return bad(KeyError::WideRange);
                    }
                }
            }
        }
        Ok(())
    }

    /// The table-level matches an entry becomes (several when ranges expand to prefixes),
    /// and its priority.
    fn encode(&self, e: &P4Entry) -> Result<(Vec<MatchSpec>, u32), EntryError> {
        self.check_keys(&e.keys)?;
        let n = self.key_bytes.max(1);
        match self.layout {
            Layout::Keyless => Ok((vec![MatchSpec::Exact(vec![0; n])], 0)),
            Layout::Exact => {
                let mut key = vec![0u8; n];
                for (f, m) in self.keys.iter().zip(&e.keys) {
                    let (v, _) = value_mask(m, f.width);
                    put(&mut key, f, v);
                }
                Ok((vec![MatchSpec::Exact(key)], 0))
            }
            Layout::Lpm => {
                let mut key = vec![0u8; n];
                let mut len = 0;
                for (f, m) in self.keys.iter().zip(&e.keys) {
                    let (v, mk) = value_mask(m, f.width);
                    put(&mut key, f, v & mk);
                    len +=
                        if f.kind == MatchKind::Lpm { mk.count_ones() } else { f.bytes as u32 * 8 };
                }
                Ok((vec![MatchSpec::Lpm { prefix: key, len }], 0))
            }
            Layout::Ternary => {
                // Each field contributes one or more (value, mask) pairs; the entry is their
                // cross product.
                let mut rows: Vec<(Vec<u8>, Vec<u8>)> = vec![(vec![0; n], vec![0; n])];
                let mut lpm_len = 0;
                for (f, m) in self.keys.iter().zip(&e.keys) {
                    let choices: Vec<(u128, u128)> = match *m {
                        KeyMatch::Range { lo, hi } if lo != hi => {
                            expand_range(lo as u64, hi as u64, f.width)
                                .into_iter()
                                .map(|(v, mk)| (v as u128, mk as u128))
                                .collect()
                        }
                        _ => vec![value_mask(m, f.width)],
                    };
                    if f.kind == MatchKind::Lpm {
                        lpm_len += choices[0].1.count_ones();
                    }
                    let mut next = Vec::with_capacity(rows.len() * choices.len());
                    for (v, mk) in &rows {
                        for &(cv, cm) in &choices {
                            let (mut v, mut mk) = (v.clone(), mk.clone());
                            put(&mut v, f, cv & cm);
                            put(&mut mk, f, cm);
                            next.push((v, mk));
                        }
                    }
                    if next.len() > 4096 {
                        return Err(EntryError::TooManyExpansions { table: self.name.clone() });
                    }
                    rows = next;
                }
                let priority = e.priority.unwrap_or(lpm_len);
                Ok((
                    rows.into_iter()
                        .map(|(value, mask)| MatchSpec::Ternary { value, mask })
                        .collect(),
                    priority,
                ))
            }
        }
    }

    pub fn insert(&self, e: &P4Entry) -> Result<(), EntryError> {
        self.write(e, Op::Insert)
    }

    pub fn modify(&self, e: &P4Entry) -> Result<(), EntryError> {
        self.write(e, Op::Modify)
    }

    /// Delete the entry with these matches (action and arguments are ignored).
    pub fn delete(&self, keys: &[KeyMatch], priority: Option<u32>) -> Result<(), EntryError> {
        if self.entries_const {
            return Err(EntryError::ConstEntries { table: self.name.clone() });
        }
        let e = P4Entry { keys: keys.to_vec(), priority, action: String::new(), args: vec![] };
        let (specs, prio) = self.encode(&e)?;
        for s in &specs {
            self.table.delete(s, prio)?;
        }
        Ok(())
    }

    /// Configure the direct meter of the entry with these matches, or with `None` unconfigure
    /// it (it colours every packet green again, as a new entry's meter does).
    pub fn set_entry_meter(
        &self,
        keys: &[KeyMatch],
        priority: Option<u32>,
        rates: Option<MeterRates>,
    ) -> Result<(), EntryError> {
        if self.meter_bytes.is_none() {
            return Err(EntryError::NoDirectMeter { table: self.name.clone() });
        }
        let meter_err = |source| EntryError::Meter { table: self.name.clone(), source };
        if let Some(r) = &rates {
            r.check().map_err(meter_err)?;
        }
        let e = P4Entry { keys: keys.to_vec(), priority, action: String::new(), args: vec![] };
        let (specs, prio) = self.encode(&e)?;
        for s in &specs {
            let set = |entry: hotplane_tables::EntryRef<'_>| match (entry.meter(), rates) {
                (Some(m), Some(r)) => m.set_rates(r),
                (Some(m), None) => {
                    m.clear();
                    Ok(())
                }
                (None, _) => Ok(()),
            };
            self.table
                .with_entry(s, prio, set)
                .map_err(|source| EntryError::Store { table: self.name.clone(), source })?
                .map_err(meter_err)?;
        }
        Ok(())
    }

    fn write(&self, e: &P4Entry, op: Op) -> Result<(), EntryError> {
        if self.entries_const {
            return Err(EntryError::ConstEntriesChanged { table: self.name.clone() });
        }
        // The member or group the entry names cannot be deleted between the check that it
        // exists and the write.
        let _refs = self.profile.as_ref().map(|p| p.references());
        let specs = self.checked_specs(e)?;
        if op == Op::Insert && specs.len() > 1 {
            // A range stored as several prefixes goes in whole or not at all (a ternary table
            // checks the batch first): a refused piece leaves none of the others behind.
            let batch = specs
                .into_iter()
                .map(|(s, prio, a, words)| (s, prio, self.action_names[a].as_str(), words))
                .collect();
            return self
                .table
                .insert_many(batch)
                .map_err(|source| EntryError::Store { table: self.name.clone(), source });
        }
        for (s, prio, a, words) in specs {
            let r = match op {
                Op::Insert => self.table.insert(&s, prio, &self.action_names[a], &words),
                Op::Modify => self.table.modify(&s, prio, &self.action_names[a], &words),
            };
            r.map_err(|source| EntryError::Store { table: self.name.clone(), source })?;
        }
        Ok(())
    }

    /// The table-level matches `e` is stored as, each with its priority, the table action and
    /// its data words, after checking that the entry may be written.
    #[allow(clippy::type_complexity)]
    fn checked_specs(
        &self,
        e: &P4Entry,
    ) -> Result<Vec<(MatchSpec, u32, usize, Vec<u64>)>, EntryError> {
        if self.layout == Layout::Keyless {
            return Err(EntryError::Keyless { table: self.name.clone() });
        }
        let a = self.action_id(&e.action)?;
        if let Some(profile) = &self.profile {
            let Some(r) = ProfileRef::of(&e.action, &e.args) else {
                return Err(EntryError::Indirect { table: self.name.clone() });
            };
            profile.exists(r)?;
        }
        if self.default_only.get(a) == Some(&true) {
            return Err(EntryError::DefaultOnly {
                action: self.action_names[a].clone(),
                table: self.name.clone(),
            });
        }
        let words = self.data_words(a, &e.args)?;
        let (specs, prio) = self.encode(e)?;
        Ok(specs.into_iter().map(|s| (s, prio, a, words.clone())).collect())
    }

    /// Every entry in P4 terms, with its counters. A range that was expanded into prefixes
    /// lists as one entry per prefix, each a range of its own.
    pub fn entries(&self) -> Vec<(P4Entry, EntryStats)> {
        let ternary = self.layout == Layout::Ternary;
        self.table
            .entries()
            .into_iter()
            .map(|e| {
                let args = self.args_of(&e.action, &e.data);
                let entry = P4Entry {
                    keys: self.keys_of(&e.matches),
                    priority: ternary.then_some(e.priority),
                    action: e.action,
                    args,
                };
                (entry, e.stats)
            })
            .collect()
    }

    /// The action a miss runs, and its arguments.
    pub fn default_action(&self) -> (String, Vec<u128>) {
        let (action, data) = self.table.default_data();
        let args = self.args_of(&action, &data);
        (action, args)
    }

    /// Per-field matches of a table-level match (the inverse of the packing in `specs`).
    fn keys_of(&self, m: &MatchSpec) -> Vec<KeyMatch> {
        // A range never reaches a P4 table: ranges are expanded into masks on insert.
        let (value, bits) = m.value_mask().unwrap_or_default();
        let field = |b: &[u8], k: &KeyField| {
            b.get(k.at..k.at + k.bytes)
                .map_or(0, |x| read_be(x) >> ((k.bytes * 8) as u32 - k.width))
        };
        self.keys
            .iter()
            .map(|k| {
                let (v, m) = (field(&value, k), field(&bits, k));
                match k.kind {
                    MatchKind::Lpm => KeyMatch::Prefix { value: v, len: m.count_ones() },
                    MatchKind::Range => KeyMatch::Range { lo: v, hi: v | (mask(k.width) & !m) },
                    _ => KeyMatch::Mask { value: v, mask: m },
                }
            })
            .collect()
    }

    /// Argument values from an entry's data words (the inverse of [`Self::data_words`]).
    fn args_of(&self, action: &str, data: &[u64]) -> Vec<u128> {
        let Ok(a) = self.action_id(action) else { return Vec::new() };
        let mut words = data.iter().copied();
        self.params[a]
            .iter()
            .map(|(_, width, _)| {
                let lo = words.next().unwrap_or(0) as u128;
                if *width > 64 {
                    lo | (words.next().unwrap_or(0) as u128) << 64
                } else {
                    lo
                }
            })
            .collect()
    }

    /// Set the action a miss runs.
    pub fn set_default(&self, action: &str, args: &[u128]) -> Result<(), EntryError> {
        if self.default_const {
            return Err(EntryError::ConstDefault { table: self.name.clone() });
        }
        self.set_default_unchecked(action, args)
    }

    fn set_default_unchecked(&self, action: &str, args: &[u128]) -> Result<(), EntryError> {
        let a = self.action_id(action)?;
        // A table with an action profile may run a member or group on a miss (BMv2's
        // `table_indirect_set_default`; the only way to use a keyless one).
        let _refs = self.profile.as_ref().map(|p| p.references());
        if let Some(profile) = &self.profile {
            if let Some(r) = ProfileRef::of(action, args) {
                profile.exists(r)?;
            }
        }
        if self.table_only.get(a) == Some(&true) {
            return Err(EntryError::TableOnly {
                action: self.action_names[a].clone(),
                table: self.name.clone(),
            });
        }
        let words = self.data_words(a, args)?;
        Ok(self.table.set_default(&self.action_names[a], &words)?)
    }
}

/// A table's actions as entries and members name them: names and directionless parameters
/// (name, width, writable), by table action id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionParams {
    pub names: Vec<String>,
    pub params: Vec<Vec<(String, u32, bool)>>,
    /// `@defaultonly` in the table.
    pub default_only: Vec<bool>,
}

impl ActionParams {
    /// The actions of `t` (none for `None`).
    pub(crate) fn of(prog: &ir::Program, t: Option<&ir::Table>) -> Self {
        let default_only = t.map_or_else(Vec::new, |t| t.default_only.clone());
        let actions = t.map_or(&[][..], |t| &t.actions[..]).iter();
        let actions = actions.map(|&a| &prog.actions[a as usize]);
        ActionParams {
            default_only,
            names: actions.clone().map(|a| a.name.clone()).collect(),
            params: actions
                .map(|a| {
                    a.params
                        .iter()
                        .filter(|p| p.directionless)
                        .map(|p| (p.name.clone(), p.width, p.writable))
                        .collect()
                })
                .collect(),
        }
    }
}

/// The action of `owner` (a table or profile) called `name`: fully qualified
/// (`MyIngress.drop`) or by its own name when that is unambiguous.
pub(crate) fn find_action(owner: &str, names: &[String], name: &str) -> Result<usize, EntryError> {
    if let Some(i) = names.iter().position(|n| n == name) {
        return Ok(i);
    }
    let suffix = format!(".{name}");
    let found: Vec<usize> = (0..names.len()).filter(|&i| names[i].ends_with(&suffix)).collect();
    match found[..] {
        [i] => Ok(i),
        _ => Err(EntryError::NoAction {
            table: owner.to_string(),
            action: name.to_string(),
            actions: names.join(", "),
        }),
    }
}

/// Action data words from argument values, checked against the parameters.
pub(crate) fn encode_args(
    names: &[String],
    params: &[Vec<(String, u32, bool)>],
    action: usize,
    args: &[u128],
) -> Result<Vec<u64>, EntryError> {
    let ps = &params[action];
    if ps.len() != args.len() {
        return Err(EntryError::ArgCount {
            action: names[action].clone(),
            expected: ps.len(),
            params: ps.iter().map(|p| p.0.as_str()).collect::<Vec<_>>().join(", "),
            given: args.len(),
        });
    }
    let mut words = Vec::new();
    for ((name, width, _), &v) in ps.iter().zip(args) {
        if v & !mask(*width) != 0 {
            return Err(EntryError::ArgTooWide {
                action: names[action].clone(),
                param: name.clone(),
                value: v,
                width: *width,
            });
        }
        words.push(v as u64);
        if *width > 64 {
            words.push((v >> 64) as u64);
        }
    }
    Ok(words)
}

fn signature(keys: &[KeyField]) -> Vec<(&str, u32, MatchKind)> {
    keys.iter().map(|k| (k.name.as_str(), k.width, k.kind)).collect()
}

/// Copy every entry and the default action of `from` into `to` (same kind and key width).
fn copy_entries(from: &Table, to: &Table) -> Result<usize, EntryError> {
    let entries = from.entries();
    for e in &entries {
        to.insert(&e.matches, e.priority, &e.action, &e.data).map_err(EntryError::CarryEntry)?;
        // A direct meter's rates carry with the entry (its buckets start full again).
        if let Some(rates) = e.stats.meter {
            let set =
                |entry: hotplane_tables::EntryRef<'_>| entry.meter().map(|m| m.set_rates(rates));
            let _ = to.with_entry(&e.matches, e.priority, set);
        }
    }
    let (action, data) = from.default_data();
    to.set_default(&action, &data).map_err(EntryError::CarryDefault)?;
    Ok(entries.len())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Insert,
    Modify,
}

fn is_prefix_mask(m: u128, width: u32) -> bool {
    let ones = m.count_ones();
    ones == 0 || m == mask(width) ^ mask(width - ones)
}

/// A match as value and mask within the field's width.
fn value_mask(m: &KeyMatch, width: u32) -> (u128, u128) {
    let full = mask(width);
    match *m {
        KeyMatch::Mask { value, mask } => (value & mask, mask),
        KeyMatch::Prefix { value, len } => {
            let mk = full ^ crate::types::mask(width - len.min(width));
            (value & mk, mk)
        }
        KeyMatch::Range { lo, hi } if lo == 0 && hi == full => (0, 0),
        KeyMatch::Range { lo, .. } => (lo, full),
    }
}

/// Write a field value left-aligned into its bytes of a packed key.
#[inline]
fn put(key: &mut [u8], f: &KeyField, v: u128) {
    let shift = (f.bytes * 8) as u32 - f.width;
    write_be(&mut key[f.at..f.at + f.bytes], v << shift);
}

/// Where a key field's value comes from.
enum KeySrc {
    /// A whole-byte field of a fixed header: its bytes are the key bytes.
    Bytes { from: usize, at: usize, n: usize },
    /// Anything else: evaluated, shifted to the left of its bytes.
    Expr { e: ExprFn, at: usize, n: usize, shift: u32 },
}

/// Evaluate the key fields into their places in the packed key.
#[inline(always)]
fn build_key(keys: &[KeySrc], c: &Ctx<'_>, key: &mut [u8]) {
    for k in keys {
        match k {
            KeySrc::Bytes { from, at, n } => {
                copy_bytes(&mut key[*at..*at + *n], &c.st.hdr[*from..*from + *n]);
            }
            KeySrc::Expr { e, at, n, shift } => write_be(&mut key[*at..*at + *n], e(c) << *shift),
        }
    }
}

#[cfg(feature = "native")]
/// Where generated code finds an apply's entry (see [`ApplySite::native`]).
pub(crate) enum NativeLookup {
    /// Always the default entry.
    Keyless,
    Lpm(hotplane_tables::raw::LpmView),
}

#[cfg(feature = "native")]
/// An apply as generated code does it: find the entry, read it by the seqlock protocol of
/// `hotplane_tables::raw`, count it, bind the parameters and run the action.
pub(crate) struct NativeSite {
    pub lookup: NativeLookup,
    pub default: hotplane_tables::raw::DefaultView,
    /// Per key field (in the IR's key order): byte offset and length in the packed key, width.
    pub keys: Vec<(usize, usize, u32)>,
    pub key_bytes: usize,
    /// Word of the entry's packet counter, if the apply counts.
    pub counters_at: Option<usize>,
    pub hit_slot: Option<usize>,
    pub action_slot: Option<usize>,
    /// By table action id: the program's action index and its parameters.
    pub actions: Vec<(u32, Vec<ParamWords>)>,
}

#[cfg(feature = "native")]
/// Where an action parameter's value is: its slot, first data word and number of words.
pub(crate) type ParamWords = (usize, usize, usize);

/// One `t.apply()` in a program: the table, where its key comes from, and where the hit
/// flag and action index go.
pub(crate) struct ApplySite {
    t: Arc<P4Table>,
    keys: Vec<KeySrc>,
    actions: Arc<Vec<super::ActionFn>>,
    keyless: bool,
    hit_slot: Option<usize>,
    action_slot: Option<usize>,
    data_words: usize,
    /// The table's direct meter (`Some(true)`: a byte meter), kept here next to the other
    /// per-apply fields rather than behind the table's `Arc`.
    meter_bytes: Option<bool>,
    /// Where a hit writes its direct meter's colour.
    meter_store: Option<super::expr::StoreFn>,
    /// The selector's hash and the `selector` keys it hashes (a table with an action
    /// selector).
    selector: Option<(HashAlgo, super::externs::FieldList)>,
}

impl ApplySite {
    #[cfg(feature = "native")]
    /// Some action of the table writes `@ref` parameters back (it must run under the entry).
    pub(crate) fn writes_entries(&self) -> bool {
        self.t.actions.iter().any(|&a| self.actions.get(a as usize).is_some_and(|f| f.writable))
    }

    #[cfg(feature = "native")]
    /// The program's indices of the actions the table can run.
    pub(crate) fn action_indices(&self) -> &[u32] {
        &self.t.actions
    }

    #[cfg(feature = "native")]
    /// What generated code needs to do this apply without calling into Rust, when it can:
    /// the table is keyless or LPM over a key of at most 8 bytes, keeps no idle time, has no
    /// direct meter, and no action writes its entry. The addresses stay valid while this site (which holds the
    /// table) lives.
    pub(crate) fn native(&self) -> Option<NativeSite> {
        if self.writes_entries() || self.meter_bytes.is_some() || self.t.profile.is_some() {
            return None;
        }
        let lookup = match (self.t.layout, &*self.t.table) {
            (Layout::Keyless, _) => NativeLookup::Keyless,
            (Layout::Lpm, Table::Lpm(t)) if self.t.key_bytes <= 8 => NativeLookup::Lpm(t.view()),
            _ => return None,
        };
        let default = self.t.table.default_entry().view();
        if default.body.idle_at.is_some() {
            return None;
        }
        let counters_at = if self.t.counters { Some(default.body.counters_at?) } else { None };
        let data_words = default.body.data_words;
        let actions = self
            .t
            .actions
            .iter()
            .map(|&a| {
                let f = self.actions.get(a as usize)?;
                let params: Vec<ParamWords> =
                    f.params.iter().map(|&(slot, w, n, _)| (slot, w, n)).collect();
                params.iter().all(|&(_, w, n)| w + n <= data_words).then_some((a, params))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(NativeSite {
            lookup,
            default,
            keys: self.t.keys.iter().map(|k| (k.at, k.bytes, k.width)).collect(),
            key_bytes: self.t.key_bytes,
            counters_at,
            hit_slot: self.hit_slot,
            action_slot: self.action_slot,
            actions,
        })
    }

    /// Look the packet up, count the hit, set the hit flag and action index, then either run
    /// the action (`run`) or, for a table none of whose actions writes its entry, only bind
    /// its parameters and return its index for the caller to run.
    #[inline]
    fn lookup<R>(
        &self,
        c: &mut Ctx<'_>,
        then: impl FnOnce(&mut Ctx<'_>, Entry<'_>) -> R,
    ) -> Option<R> {
        let n = self.t.key_bytes;
        let guard = c.guard;
        let found = if self.keyless {
            None
        } else if n <= 16 {
            let mut key = [0u8; 16];
            build_key(&self.keys, c, &mut key);
            self.t.table.lookup(&key[..n], guard)
        } else {
            let mut key = [0u8; MAX_KEY_BYTES];
            build_key(&self.keys, c, &mut key);
            self.t.table.lookup(&key[..n], guard)
        };
        let hit = found.is_some();
        let entry = match found {
            Some(e) => e,
            None => self.t.table.default_entry().get(),
        };
        if c.st.trace.is_some() {
            self.traced(c, hit, entry.action());
        }
        if self.t.counters || self.t.idle {
            entry.hit(c.pkt.len() as u32, c.now_ns);
        }
        if let (Some(bytes), true) = (self.meter_bytes, hit) {
            // As BMv2: a hit runs the entry's meter and writes the colour where the program
            // reads it, before the action; a miss meters nothing.
            if let Some(m) = entry.meter() {
                let units = if bytes { c.pkt.len() as u64 } else { 1 };
                let colour = m.execute(units, c.now_ns, None);
                if let Some(store) = &self.meter_store {
                    store(c, colour as u128);
                }
            }
        }
        Some(then(c, Entry { entry, hit, site: self }))
    }

    /// Record this apply for `hotplane trace`.
    #[cold]
    fn traced(&self, c: &mut Ctx<'_>, hit: bool, action: u16) {
        if let Some(events) = c.st.trace.as_mut() {
            events.push(super::TableEvent { table: Arc::clone(&self.t), hit, action });
        }
    }

    /// The whole apply, action included.
    pub(crate) fn run(&self, c: &mut Ctx<'_>) -> Flow {
        let flow = self.lookup(c, |c, e| {
            self.with_words(|words| {
                let Some((_, action)) = e.select(c, words) else { return Flow::Next };
                if action.writable {
                    e.entry.update(self.t.locked, |w| action.run_with(c, w))
                } else {
                    action.run_with(c, words)
                }
            })
        });
        match flow {
            Some(Flow::Exit) => Flow::Exit,
            _ => Flow::Next,
        }
    }

    #[cfg(feature = "native")]
    /// The apply up to the action: its parameters are bound; returns the program's index of
    /// the action to run, if any. Only for tables whose actions do not write their entries.
    pub(crate) fn bind(&self, c: &mut Ctx<'_>) -> Option<u32> {
        self.lookup(c, |c, e| {
            self.with_words(|words| {
                let (index, action) = e.select(c, words)?;
                action.bind(c, words);
                Some(index)
            })
        })
        .flatten()
    }

    /// The table action and data of the member an entry's pseudo-action `which` (0: member,
    /// 1: group) names in `words[0]`; the data replace `words`. `None` when it names nothing.
    #[cold]
    fn resolve(&self, c: &mut Ctx<'_>, which: usize, words: &mut [u64]) -> Option<u32> {
        let profile = self.t.profile.as_ref()?;
        let id = *words.first()? as u32;
        let (r, hash) = match which {
            0 => (ProfileRef::Member(id), 0),
            _ => {
                let hash = match &self.selector {
                    Some((algo, keys)) => {
                        let mut buf = std::mem::take(&mut c.st.scratch);
                        keys.assemble(c, &mut buf);
                        let h = super::externs::hash(*algo, &buf);
                        c.st.scratch = buf;
                        h
                    }
                    None => 0,
                };
                (ProfileRef::Group(id), hash)
            }
        };
        profile.resolve(r, hash, c.guard, words)
    }

    /// A buffer for an entry's data words: on the stack unless the table's entries are big.
    #[inline]
    fn with_words<R>(&self, f: impl FnOnce(&mut [u64]) -> R) -> R {
        let mut small = [0u64; 8];
        if self.data_words <= small.len() {
            f(&mut small[..self.data_words])
        } else {
            f(&mut vec![0u64; self.data_words])
        }
    }
}

/// The entry an apply chose.
struct Entry<'s> {
    entry: hotplane_tables::EntryRef<'s>,
    hit: bool,
    site: &'s ApplySite,
}

impl<'s> Entry<'s> {
    /// Read the entry's action and data; set the hit flag and action index. The program's
    /// index of the action and the action, if the entry names one the program has.
    #[inline]
    fn select(&self, c: &mut Ctx<'_>, words: &mut [u64]) -> Option<(u32, &'s super::ActionFn)> {
        let site = self.site;
        let mut aid = self.entry.read(words) as usize;
        if let Some(s) = site.hit_slot {
            c.st.slots[s] = self.hit as u128;
        }
        if aid >= site.t.actions.len() {
            // A member or group of the table's action profile: resolve it to its action. An
            // empty group runs none, and `action_run` then matches no action (it must not
            // keep the last packet's).
            match site.resolve(c, aid - site.t.actions.len(), words) {
                Some(a) => aid = a as usize,
                None => {
                    if let Some(s) = site.action_slot {
                        c.st.slots[s] = NO_ACTION_RUN;
                    }
                    return None;
                }
            }
        }
        let &prog_action = site.t.actions.get(aid)?;
        if let Some(s) = site.action_slot {
            c.st.slots[s] = prog_action as u128;
        }
        Some((prog_action, site.actions.get(prog_action as usize)?))
    }
}
impl Compiler<'_> {
    /// `t.apply()`: build the key, look it up, run the entry's (or the default) action.
    pub(crate) fn apply(
        &self,
        table: u32,
        hit_slot: Option<SlotId>,
        action_slot: Option<SlotId>,
    ) -> StmtFn {
        match self.apply_site(table, hit_slot, action_slot) {
            Some(site) => Box::new(move |c| site.run(c)),
            None => Box::new(|_| Flow::Next),
        }
    }

    /// What `t.apply()` needs at run time; `None` for a table the program does not have.
    pub(crate) fn apply_site(
        &self,
        table: u32,
        hit_slot: Option<SlotId>,
        action_slot: Option<SlotId>,
    ) -> Option<ApplySite> {
        let t = self.objects.tables.get(table as usize).cloned()?;
        let ir_table = &self.prog.tables[table as usize];
        let keys: Vec<KeySrc> = ir_table
            .keys
            .iter()
            .zip(&t.keys)
            .map(|(k, f)| {
                let direct = match &k.value {
                    ir::Expr::Read(p) => self.static_bytes(p).filter(|&(_, n)| n == f.bytes),
                    _ => None,
                };
                match direct {
                    Some((from, n)) => KeySrc::Bytes { from, at: f.at, n },
                    None => KeySrc::Expr {
                        e: self.expr(&k.value),
                        at: f.at,
                        n: f.bytes,
                        shift: (f.bytes * 8) as u32 - f.width,
                    },
                }
            })
            .collect();
        let selector = t
            .profile
            .as_ref()
            .and_then(|p| p.selector)
            .map(|algo| (algo, self.field_list(&ir_table.selector_keys)));
        let site = ApplySite {
            keyless: t.layout == Layout::Keyless,
            data_words: t.table.config().data_words(),
            meter_bytes: t.meter_bytes,
            t,
            keys,
            actions: Arc::clone(&self.actions),
            hit_slot: hit_slot.map(|s| s as usize),
            action_slot: action_slot.map(|s| s as usize),
            meter_store: ir_table.meter_dst.as_ref().map(|p| self.store(p)),
            selector,
        };
        Some(site)
    }
}
