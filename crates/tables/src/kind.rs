//! Tables as a program kind of the engine: the `[[table]]` and `[[table_entry]]` sections, the
//! `{"stage": "table"}` spec, the `table-*` control operations, and the reclaiming of deleted
//! entries.

use crate::config::TableConfig;
use crate::requests::{handle, write_entry, TableEntrySpec, TableRequest, TABLE_OPS};
use crate::set::TableSet;
use crate::stage::TableStage;
use hotplane_core::{BuildCx, KindError, KindSetup, Program, ProgramKind};
use serde::Deserialize;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often deleted entries are reclaimed: not every control pass, because reclaiming takes
/// each table's writer lock, which a worker's insert on miss only tries.
pub const MAINTAIN_PERIOD: Duration = Duration::from_millis(50);

/// `{"stage": "table", ...}`: a match-action table (`[[table]]`) run natively: `key` is
/// `ipv4.src`, `ipv4.dst`, `l4.sport`, `l4.dport` or `payload:OFFSET:LEN`; the table's actions
/// must be native ones (NoAction, drop, forward, mark, swap, count; docs/tables.md).
/// `value_at` is the payload offset `swap` exchanges. An enum of one variant so that serde reads
/// (and refuses) the `stage` tag and unknown fields exactly as the engine's other specs do.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "stage", rename_all = "kebab-case", deny_unknown_fields)]
enum TableSpec {
    Table {
        table: String,
        key: String,
        #[serde(default)]
        value_at: Option<u16>,
    },
}

/// The tables of one data plane.
pub struct TablesKind {
    tables: Arc<TableSet>,
    last_maintained: Mutex<Instant>,
}

/// Make the tables kind: create the `[[table]]`s and load the `[[table_entry]]`s.
pub fn make(setup: &KindSetup<'_>) -> Result<Arc<dyn ProgramKind>, KindError> {
    Ok(Arc::new(TablesKind::new(setup)?))
}

impl TablesKind {
    pub fn new(setup: &KindSetup<'_>) -> Result<Self, KindError> {
        let tables: Vec<TableConfig> = setup.section("table")?.unwrap_or_default();
        let entries: Vec<TableEntrySpec> = setup.section("table_entry")?.unwrap_or_default();
        let set = Arc::new(TableSet::new());
        for (i, t) in tables.into_iter().enumerate() {
            set.create(t, setup.qsbr)
                .map_err(|e| KindError::Invalid(format!("table[{i}]: {e}")))?;
        }
        for (i, e) in entries.iter().enumerate() {
            write_entry(&set, e, false)
                .map_err(|err| KindError::Invalid(format!("table_entry[{i}]: {err}")))?;
        }
        Ok(Self::with_tables(set))
    }

    /// A kind over tables made elsewhere (tests, benchmarks).
    pub fn with_tables(tables: Arc<TableSet>) -> Self {
        Self { tables, last_maintained: Mutex::new(Instant::now()) }
    }

    /// The tables by name (the CLI and benchmarks read and fill them directly).
    pub fn tables(&self) -> &Arc<TableSet> {
        &self.tables
    }
}

impl ProgramKind for TablesKind {
    fn name(&self) -> &'static str {
        "tables"
    }

    fn sections(&self) -> &'static [&'static str] {
        &["table", "table_entry"]
    }

    fn stages(&self) -> &'static [&'static str] {
        &["table"]
    }

    fn node_files(&self, _spec: &Value) -> Option<&'static str> {
        None // a table stage names a table of the node's config, never a file
    }

    fn build(&self, spec: &Value, _cx: &BuildCx<'_>) -> Result<Program, KindError> {
        let TableSpec::Table { table, key, value_at } = TableSpec::deserialize(spec)
            .map_err(|e| KindError::Invalid(format!("stage spec: {e}")))?;
        let t = self.tables.get(&table).map_err(|e| KindError::Invalid(e.to_string()))?;
        let stage =
            TableStage::new(t, &key, value_at).map_err(|e| KindError::Invalid(e.to_string()))?;
        Ok(Some(Arc::new(stage)))
    }

    fn ops(&self) -> &'static [&'static str] {
        TABLE_OPS
    }

    fn request(&self, _op: &str, request: &Value) -> Result<Value, KindError> {
        let req =
            TableRequest::deserialize(request).map_err(|e| KindError::Invalid(e.to_string()))?;
        handle(&self.tables, &req).map_err(|e| KindError::Invalid(e.to_string()))
    }

    fn housekeeping(&self) {
        let mut last = self.last_maintained.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() >= MAINTAIN_PERIOD {
            self.tables.maintain();
            *last = Instant::now();
        }
    }
}

#[cfg(test)]
#[path = "kind_tests.rs"]
mod tests;
