//! What a table is: its kind, key width, size, storage design, locking, actions. The P4
//! front-end builds this from `@tableconfig(store="static", locked=true)` and `@ref`; the TOML
//! config and the control API build it from their own syntax through [`TableConfig::set_option`].

use crate::entry::{BodyLayout, MAX_DATA_WORDS};
use crate::key::MAX_KEY_BYTES;
use serde::{Deserialize, Serialize};

/// How an exact table stores its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Store {
    /// Entries inline in one preallocated, aligned array: one memory access per lookup.
    #[default]
    Static,
    /// Entries allocated one by one; the hash array holds pointers to them.
    Dynamic,
}

/// The match kind of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchKind {
    #[default]
    Exact,
    Lpm,
    Ternary,
}

/// An action parameter. `writable` is P4's `@ref`: the data plane may store into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    pub name: String,
    pub bits: u32,
    #[serde(default)]
    pub writable: bool,
}

impl ParamSpec {
    pub fn words(&self) -> usize {
        (self.bits as usize).div_ceil(64).max(1)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionSpec {
    pub name: String,
    #[serde(default)]
    pub params: Vec<ParamSpec>,
}

impl ActionSpec {
    pub fn new(name: &str, params: &[(&str, u32, bool)]) -> Self {
        Self {
            name: name.into(),
            params: params
                .iter()
                .map(|&(n, bits, writable)| ParamSpec { name: n.into(), bits, writable })
                .collect(),
        }
    }

    pub fn data_words(&self) -> usize {
        self.params.iter().map(ParamSpec::words).sum()
    }

    /// First data word of parameter `name`.
    pub fn word_of(&self, name: &str) -> Option<usize> {
        let mut at = 0;
        for p in &self.params {
            if p.name == name {
                return Some(at);
            }
            at += p.words();
        }
        None
    }
}

/// What the data plane does when a lookup misses and the table inserts on miss.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InsertOnMiss {
    /// Action of the new entry.
    pub action: String,
    /// Its data (unset words are zero).
    #[serde(default)]
    pub data: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableConfig {
    pub name: String,
    #[serde(default)]
    pub kind: MatchKind,
    /// Key width in bits (a multiple of 8 for LPM tables).
    pub key_bits: u32,
    /// Most entries the table holds.
    pub size: usize,
    #[serde(default)]
    pub store: Store,
    /// Per-entry lock around a data-plane read-modify-write.
    #[serde(default)]
    pub locked: bool,
    /// Per-entry packet and byte counters.
    #[serde(default = "yes")]
    pub counters: bool,
    /// Per-entry last-hit timestamp.
    #[serde(default)]
    pub idle_timestamps: bool,
    /// Per-entry two-rate three-colour meter (a P4 `direct_meter`).
    #[serde(default)]
    pub meters: bool,
    pub actions: Vec<ActionSpec>,
    /// Action run on a miss, by name; the first action when absent.
    #[serde(default)]
    pub default_action: Option<String>,
    #[serde(default)]
    pub default_data: Vec<u64>,
    /// Exact tables only: the data plane inserts missed keys (PNA `add_on_miss`).
    #[serde(default)]
    pub insert_on_miss: Option<InsertOnMiss>,
    /// LPM tables: second-level groups to reserve (default from size and key width).
    #[serde(default)]
    pub lpm_groups: Option<usize>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("table `{table}`: {what}")]
    Invalid { table: String, what: String },
}

impl TableConfig {
    /// A minimal table: `name`, `kind`, `key_bits`, `size`, one action.
    pub fn new(name: &str, kind: MatchKind, key_bits: u32, size: usize) -> Self {
        Self {
            name: name.into(),
            kind,
            key_bits,
            size,
            store: Store::Static,
            locked: false,
            counters: true,
            idle_timestamps: false,
            meters: false,
            actions: vec![ActionSpec::new("NoAction", &[])],
            default_action: None,
            default_data: vec![],
            insert_on_miss: None,
            lpm_groups: None,
        }
    }

    pub fn with_actions(mut self, actions: Vec<ActionSpec>) -> Self {
        self.actions = actions;
        self
    }

    fn invalid(&self, what: impl Into<String>) -> ConfigError {
        ConfigError::Invalid { table: self.name.clone(), what: what.into() }
    }

    pub fn key_bytes(&self) -> usize {
        (self.key_bits as usize).div_ceil(8)
    }

    pub fn data_words(&self) -> usize {
        self.actions.iter().map(ActionSpec::data_words).max().unwrap_or(0)
    }

    pub fn body_layout(&self) -> BodyLayout {
        BodyLayout {
            data_words: self.data_words(),
            counters: self.counters,
            idle: self.idle_timestamps,
            meter: self.meters,
        }
    }

    pub fn action_id(&self, name: &str) -> Option<u16> {
        self.actions.iter().position(|a| a.name == name).map(|i| i as u16)
    }

    /// Set one option by name, as `@tableconfig(key=value, ...)` and the TOML/CLI forms give
    /// them: `store = static|dynamic`, `locked = true|false`, `counters`, `idle_timestamps`,
    /// `size`.
    pub fn set_option(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let value = value.trim().trim_matches('"');
        let flag = |v: &str| match v {
            "true" | "1" => Ok(true),
            "false" | "0" => Ok(false),
            _ => Err(format!("`{key}` takes true or false, not `{v}`")),
        };
        let r = match key.trim() {
            "store" => match value {
                "static" => {
                    self.store = Store::Static;
                    Ok(())
                }
                "dynamic" => {
                    self.store = Store::Dynamic;
                    Ok(())
                }
                v => Err(format!("store is `static` or `dynamic`, not `{v}`")),
            },
            "locked" => flag(value).map(|b| self.locked = b),
            "counters" => flag(value).map(|b| self.counters = b),
            "idle_timestamps" => flag(value).map(|b| self.idle_timestamps = b),
            "size" => value
                .parse()
                .map(|n| self.size = n)
                .map_err(|_| format!("size takes a number, not `{value}`")),
            k => Err(format!(
                "unknown table option `{k}` (store, locked, counters, idle_timestamps, size)"
            )),
        };
        r.map_err(|w| self.invalid(w))
    }

    /// Parse the argument list of a `@tableconfig(...)` annotation: `store="static", locked=true`.
    pub fn apply_annotation(&mut self, args: &str) -> Result<(), ConfigError> {
        for part in args.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| self.invalid(format!("`{part}` is not key=value")))?;
            self.set_option(k, v)?;
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.name.is_empty() {
            return Err(self.invalid("a table needs a name"));
        }
        if self.key_bits == 0 || self.key_bytes() > MAX_KEY_BYTES {
            return Err(self.invalid(format!(
                "key width {} bits: 1..={}",
                self.key_bits,
                MAX_KEY_BYTES * 8
            )));
        }
        if self.kind == MatchKind::Lpm && self.key_bits % 8 != 0 {
            return Err(self.invalid("an LPM key is a whole number of bytes (pad narrower fields)"));
        }
        if self.size == 0 || self.size > 1 << 28 {
            return Err(self.invalid(format!("size {}: 1..={}", self.size, 1u64 << 28)));
        }
        if self.actions.is_empty() || self.actions.len() > u16::MAX as usize {
            return Err(self.invalid("a table needs 1..65535 actions"));
        }
        if self.data_words() > MAX_DATA_WORDS {
            return Err(self.invalid(format!(
                "action data of {} words; at most {MAX_DATA_WORDS}",
                self.data_words()
            )));
        }
        if let Some(d) = &self.default_action {
            if self.action_id(d).is_none() {
                return Err(self.invalid(format!("default action `{d}` is not one of its actions")));
            }
        }
        if let Some(m) = &self.insert_on_miss {
            if self.kind != MatchKind::Exact {
                return Err(self.invalid("insert on miss needs an exact table"));
            }
            if self.action_id(&m.action).is_none() {
                return Err(
                    self.invalid(format!("insert-on-miss action `{}` is unknown", m.action))
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_sets_options_and_rejects_unknown_ones() {
        let mut c = TableConfig::new("t", MatchKind::Exact, 32, 16);
        c.apply_annotation(r#"store="dynamic", locked=true"#).unwrap();
        assert_eq!((c.store, c.locked), (Store::Dynamic, true));
        let e = c.apply_annotation("speed=fast").unwrap_err();
        assert!(e.to_string().contains("unknown table option `speed`"), "{e}");
        assert!(c.apply_annotation("locked=maybe").is_err());
    }
}
