//! What a P4 program may ask of the node that compiles it.
//!
//! A program arrives from outside (an update, a file), so everything it can make the compiler
//! do or the node allocate is bounded before it is done: source and include sizes, nesting
//! (which the recursive passes turn into stack), calls inlined, counts of tables, actions,
//! parser states and select cases (passes and code generation grow with them), and the
//! entries and bytes of state its tables, registers, counters and meters declare. Each bound
//! exceeded is an [`Exceeded`] naming the budget and its limit, never a crash.
//!
//! The defaults hold on the smallest stack the compiler runs on (a thread's 2 MiB default,
//! the control thread's) with room to spare; `crates/p4/tests/hostile.rs` checks programs at
//! each nesting limit there.

use std::fmt;

/// One bounded quantity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Budget {
    /// Bytes of the program text itself.
    SourceBytes,
    /// `#include` directives followed, the built-in ones included.
    Includes,
    /// Bytes of all included text together (a file included twice counts twice).
    IncludeBytes,
    /// Tokens macro expansion may produce, intermediate ones included.
    ExpandedTokens,
    /// Bytes of token text macro expansion may produce, intermediate tokens included: a few
    /// tokens can each be a megabyte-long identifier.
    ExpandedBytes,
    /// Nesting of expressions, statements, types and `#if` (conditions and directives).
    NestingDepth,
    /// Actions, functions and controls inlined inside one another.
    CallDepth,
    /// Statements and expressions of the program after inlining.
    CodeSize,
    /// Tables.
    Tables,
    /// Actions.
    Actions,
    /// Parser states.
    ParserStates,
    /// Cases of all `select`s together.
    SelectCases,
    /// `const entries` of all tables together (each is checked and stored when the program
    /// is built, on the control thread).
    ConstEntries,
    /// Entries of one table, or cells of one register, counter or meter.
    InstanceEntries,
    /// Bytes of all tables, registers, counters and meters together, as declared.
    StateBytes,
    /// Bytes of one packet's state: headers, metadata, locals (every worker holds some).
    PacketStateBytes,
}

impl Budget {
    /// The budget's name as [`Limits`] spells the field.
    pub fn name(self) -> &'static str {
        match self {
            Budget::SourceBytes => "source_bytes",
            Budget::Includes => "includes",
            Budget::IncludeBytes => "include_bytes",
            Budget::ExpandedTokens => "expanded_tokens",
            Budget::ExpandedBytes => "expanded_bytes",
            Budget::NestingDepth => "nesting_depth",
            Budget::CallDepth => "call_depth",
            Budget::CodeSize => "code_size",
            Budget::Tables => "tables",
            Budget::Actions => "actions",
            Budget::ParserStates => "parser_states",
            Budget::SelectCases => "select_cases",
            Budget::ConstEntries => "const_entries",
            Budget::InstanceEntries => "instance_entries",
            Budget::StateBytes => "state_bytes",
            Budget::PacketStateBytes => "packet_state_bytes",
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A budget a program went over, and the limit it had.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("over the `{budget}` budget (limit {limit})")]
pub struct Exceeded {
    pub budget: Budget,
    pub limit: u64,
}

/// The budgets one compilation runs under. [`Limits::default`] is what a node uses unless its
/// configuration says otherwise (`[p4.limits]`: the field names are the keys, each optional,
/// unknown ones refused).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub source_bytes: usize,
    pub includes: usize,
    pub include_bytes: usize,
    pub expanded_tokens: usize,
    pub expanded_bytes: usize,
    pub nesting_depth: usize,
    pub call_depth: usize,
    pub code_size: usize,
    pub tables: usize,
    pub actions: usize,
    pub parser_states: usize,
    pub select_cases: usize,
    pub const_entries: usize,
    pub instance_entries: u64,
    pub state_bytes: u64,
    pub packet_state_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            source_bytes: 4 << 20,
            includes: 256,
            include_bytes: 16 << 20,
            expanded_tokens: 4_000_000,
            // Four times the largest program: room for macros that repeat text, far below
            // what the node can hold.
            expanded_bytes: 16 << 20,
            nesting_depth: 128,
            call_depth: 32,
            code_size: 250_000,
            tables: 1024,
            actions: 4096,
            parser_states: 1024,
            select_cases: 16_384,
            // Ternary entries are inserted in one batch; 65,536 build in about a second.
            const_entries: 65_536,
            instance_entries: 1 << 24,
            state_bytes: 1 << 30,
            packet_state_bytes: 1 << 20,
        }
    }
}

impl Limits {
    /// The limit of `budget`.
    pub fn limit(&self, budget: Budget) -> u64 {
        let n = match budget {
            Budget::SourceBytes => self.source_bytes,
            Budget::Includes => self.includes,
            Budget::IncludeBytes => self.include_bytes,
            Budget::ExpandedTokens => self.expanded_tokens,
            Budget::ExpandedBytes => self.expanded_bytes,
            Budget::NestingDepth => self.nesting_depth,
            Budget::CallDepth => self.call_depth,
            Budget::CodeSize => self.code_size,
            Budget::Tables => self.tables,
            Budget::Actions => self.actions,
            Budget::ParserStates => self.parser_states,
            Budget::SelectCases => self.select_cases,
            Budget::ConstEntries => self.const_entries,
            Budget::PacketStateBytes => self.packet_state_bytes,
            Budget::InstanceEntries => return self.instance_entries,
            Budget::StateBytes => return self.state_bytes,
        };
        n as u64
    }

    /// `budget` as exceeded, with its limit.
    pub fn exceeded(&self, budget: Budget) -> Exceeded {
        Exceeded { budget, limit: self.limit(budget) }
    }

    /// `Err` if `used` is over `budget`'s limit.
    pub fn check(&self, budget: Budget, used: u64) -> Result<(), Exceeded> {
        let limit = self.limit(budget);
        if used > limit {
            return Err(Exceeded { budget, limit });
        }
        Ok(())
    }
}
