//! hotplane-tables: match-action tables the data plane can write, and the stateful objects that
//! go with them.
//!
//! * [`ExactTable`]: open addressing, `static` (inline) or `dynamic` (pointer) storage,
//!   lock-free lookups, insert on miss.
//! * [`LpmTable`]: DIR-24-8, generalised to any whole number of key bytes (IPv6 too).
//! * [`TernaryTable`]: tuple-space search with priorities and range expansion.
//! * Entries ([`EntryRef`]): action id and data in two copies, written in place by the data plane
//!   (`@ref` parameters) with or without a per-entry lock, and replaced by the control plane
//!   without ever making a worker wait; packet/byte counters and idle timestamps.
//! * [`raw`]: addresses and encodings of LPM levels and entry bodies, for generated code.
//! * [`RegisterArray`], [`CounterArray`], [`MeterArray`] (RFC 2698), [`DigestRing`].
//! * [`stage::TableStage`]: `stage = "table"`, a table run natively with built-in actions;
//!   [`requests`]: the control API's table operations; [`kind`]: tables as a program kind of
//!   the engine (`[[table]]`, `[[table_entry]]`, the stage, the operations, reclaiming).
//!
//! Memory is reclaimed with `hotplane-core`'s QSBR: lookups take a [`hotplane_core::Guard`],
//! and nothing a worker can still reference is reused before a grace period.
//!
//! This crate depends only on `hotplane-core`; program kinds (P4, eBPF maps, Lua) build on it and
//! it must never depend on them, on I/O, or on the control protocol (the request shapes in
//! [`requests`] mirror the protocol's, they do not import it).

pub mod arena;
pub mod config;
pub mod entry;
pub mod exact;
pub mod key;
pub mod kind;
pub mod lpm;
pub mod objects;
pub mod raw;
pub mod requests;
pub mod set;
pub mod stage;
pub mod ternary;
pub mod text;
pub mod words;

pub use config::{ActionSpec, InsertOnMiss, MatchKind, ParamSpec, Store, TableConfig};
pub use entry::{DefaultEntry, EntryData, EntryRef, EntryStats};
pub use exact::{ExactEntry, ExactTable, Lookup};
pub use kind::TablesKind;
pub use lpm::{LpmEntry, LpmTable};
pub use objects::{
    Color, CounterArray, CounterKind, DigestRecord, DigestRing, MeterArray, MeterCell, MeterError,
    MeterRates, RegisterArray, METER_WORDS,
};
pub use requests::{TableEntrySpec, TableRequest};
pub use set::{MatchSpec, Table, TableEntry, TableSet};
pub use stage::TableStage;
pub use ternary::{expand_range, TernaryEntry, TernaryMatch, TernaryTable};

/// Why a table operation was refused. The table is unchanged after any error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("{0}")]
    Config(#[from] config::ConfigError),
    #[error("the entry already exists")]
    Exists,
    #[error("no such entry")]
    NotFound,
    #[error("table full ({size} entries)")]
    Full { size: usize },
    #[error("bad key: {what}")]
    BadKey { what: String },
    #[error("bad action: {what}")]
    BadAction { what: String },
    #[error("{0}")]
    Alloc(#[from] words::AllocError),
    #[error("no table named `{0}`")]
    NoSuchTable(String),
}

impl TableError {
    pub(crate) fn invalid(table: &str, what: impl Into<String>) -> Self {
        TableError::Config(config::ConfigError::Invalid { table: table.into(), what: what.into() })
    }
}
