//! Why a table entry, a default action or a table itself was refused: the errors of control
//! plane writes (STF files, runtime JSON, the control socket) and of building a program's
//! tables. The messages name the table, key, action or parameter so that an operator can fix
//! the entry without reading the program.

use hotplane_tables::TableError;

use crate::ir::MatchKind;
use crate::stf::ValueError;

/// A refused entry, default action or table. The table is unchanged after any of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// What went wrong while building or filling the table called `table`.
    #[error("table {table}: {source}")]
    InTable { table: String, source: Box<EntryError> },
    /// The table store refused an operation on the table called `table`.
    #[error("table {table}: {source}")]
    Store { table: String, source: TableError },
    /// The table store refused an operation (its message names the table when it matters).
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("the key is {bytes} bytes; at most {max}")]
    KeyTooWide { bytes: usize, max: usize },
    #[error("carrying an entry over: {0}")]
    CarryEntry(TableError),
    #[error("carrying the default action: {0}")]
    CarryDefault(TableError),
    #[error("table {table}: its default action is not in its action list")]
    DefaultNotInList { table: String },
    #[error("no table `{name}` (the program has {tables})")]
    NoTable { name: String, tables: String },
    #[error("table name `{name}` is ambiguous")]
    AmbiguousTable { name: String },
    #[error("table {table} has no action `{action}` (it has {actions})")]
    NoAction { table: String, action: String, actions: String },
    #[error("action {action} takes {expected} parameter(s) ({params}), {given} given")]
    ArgCount { action: String, expected: usize, params: String, given: usize },
    #[error("action {action} parameter {param}: {value:#x} does not fit in bit<{width}>")]
    ArgTooWide { action: String, param: String, value: u128, width: u32 },
    #[error("table {table} has {expected} key field(s) ({fields}), the entry gives {given}")]
    KeyCount { table: String, expected: usize, fields: String, given: usize },
    #[error("table {table} key {key}: {problem}")]
    BadKey { table: String, key: String, problem: KeyError },
    #[error("table {table}: the entry's ranges expand to more than 4096 ternary entries")]
    TooManyExpansions { table: String },
    #[error("table {table} has const entries")]
    ConstEntries { table: String },
    #[error("table {table} has const entries; they cannot be changed")]
    ConstEntriesChanged { table: String },
    #[error("table {table} has no key; only its default action can be set")]
    Keyless { table: String },
    #[error("action {action} is @defaultonly in table {table}")]
    DefaultOnly { action: String, table: String },
    #[error("action {action} is @tableonly in table {table}")]
    TableOnly { action: String, table: String },
    #[error("table {table} has a const default action")]
    ConstDefault { table: String },
    #[error("table {table} has no key field `{field}` (its key is {fields})")]
    NoKeyField { table: String, field: String, fields: String },
    #[error("key {field}: {source}")]
    KeyValue { field: String, source: ValueError },
    #[error("parameter {param}: {source}")]
    ParamValue { param: String, source: ValueError },
    #[error("action {action}: parameter `{param}` is missing")]
    MissingParam { action: String, param: String },
    #[error("action {action} has no parameter `{param}`")]
    NoParam { action: String, param: String },
    #[error("priority {0} is not a 32-bit number")]
    BadPriority(String),
    #[error("table {table} has no direct meter")]
    NoDirectMeter { table: String },
    #[error("table {table}: {source}")]
    Meter { table: String, source: hotplane_tables::MeterError },
    #[error(
        "table {table} has an action profile: an entry names a member or a group \
         ($member(ID) or $group(ID)), not an action"
    )]
    Indirect { table: String },
    #[error(transparent)]
    Profile(#[from] crate::exec::ProfileError),
    #[error("no action profile `{name}` (the program has {profiles})")]
    NoProfile { name: String, profiles: String },
    /// A runtime JSON member or group whose `field` is missing or not a 32-bit number.
    #[error("`{field}` must be a number from 0 to 4294967295")]
    NotU32 { field: &'static str },
    /// A runtime JSON entry of the wrong shape; the text says which member.
    #[error("{0}")]
    Json(&'static str),
}

impl EntryError {
    /// The table already has the entry (an INSERT of a key it holds).
    pub fn is_exists(&self) -> bool {
        match self {
            EntryError::InTable { source, .. } => source.is_exists(),
            EntryError::Store { source, .. } | EntryError::Table(source) => {
                matches!(source, TableError::Exists)
            }
            _ => false,
        }
    }
}

/// Why one key field's match does not suit the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{value:#x} &&& {mask:#x} does not fit in bit<{width}>")]
    MaskTooWide { value: u128, mask: u128, width: u32 },
    #[error("a mask of {mask:#x} is not valid for a {} key", kind_name(*.kind))]
    MaskForKind { mask: u128, kind: MatchKind },
    #[error("{value:#x}/{len} does not fit in bit<{width}>")]
    PrefixTooWide { value: u128, len: u32, width: u32 },
    #[error("a /{len} prefix on a {} key", kind_name(*.kind))]
    PrefixForKind { len: u32, kind: MatchKind },
    #[error("a range on a key that is not a range key")]
    RangeOnNonRange,
    #[error("range {lo:#x}..{hi:#x} does not fit in bit<{width}>")]
    RangeTooWide { lo: u128, hi: u128, width: u32 },
    #[error("ranges on keys wider than 64 bits are not supported")]
    WideRange,
}

/// A match kind as P4 spells it (`lpm`, `ternary`...).
fn kind_name(kind: MatchKind) -> String {
    format!("{kind:?}").to_lowercase()
}
