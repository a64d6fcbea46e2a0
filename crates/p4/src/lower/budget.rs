//! The budgets lowering enforces ([`Limits`]): calls inlined inside one another and the code
//! inlining copies, statement nesting after inlining, counts of tables, actions, parser states
//! and select cases, and the entries and bytes of state the program declares.

use super::Lowerer;
use crate::budget::{Budget, Limits};
use crate::diag::{DResult, Diagnostic, Span};
use crate::ir::{self, nesting, Stmt};

/// Bytes a cell of each kind of instance takes (`hotplane_tables`' arrays).
const REGISTER_CELL_BYTES: u64 = 8;
const COUNTER_CELL_BYTES: u64 = 16;
const METER_CELL_BYTES: u64 = 80;
/// An action profile member: its data words, its `Arc`, and its place in two maps (the
/// written and the published one), plus a share of the groups that list it.
const PROFILE_MEMBER_BYTES: u64 = 128;
/// What a table entry costs beyond its key and action data (entry header, index slots at the
/// tables' load factor, its share of the table's code): measured, about 150 bytes in all.
const TABLE_ENTRY_OVERHEAD: u64 = 128;
/// An LPM table's first level has one 4-byte word per value of its first (up to) 24 bits.
const LPM_FIRST_LEVEL_BITS: u32 = 24;

/// What has been spent so far, and the limits.
#[derive(Debug, Default)]
pub(crate) struct Spent {
    pub limits: Limits,
    /// Bodies being lowered inside one another (an action lowered where it is first called,
    /// a function or control being inlined).
    pub open_calls: usize,
    /// The deepest chain of inlined calls in the body being lowered.
    pub call_height: usize,
    /// Of each action lowered (by index): its chain of inlined calls and its statements.
    pub action_calls: Vec<usize>,
    pub action_statements: Vec<usize>,
    pub inlined_statements: usize,
    pub select_cases: usize,
    pub const_entries: usize,
    pub state_bytes: u64,
}

impl Lowerer<'_> {
    pub(crate) fn over_budget(
        &self,
        span: Span,
        what: impl std::fmt::Display,
        b: Budget,
    ) -> Diagnostic {
        Diagnostic::over_budget(span, what, self.spent.limits.exceeded(b))
    }

    /// Start lowering a body inside the one being lowered; returns what
    /// [`Lowerer::leave_call`] needs.
    pub(crate) fn enter_call(&mut self, span: Span) -> DResult<usize> {
        let limit = self.spent.limits.call_depth;
        if self.spent.open_calls >= limit {
            let what = format!("calls nest deeper than {limit}");
            return Err(self.over_budget(span, what, Budget::CallDepth));
        }
        self.spent.open_calls += 1;
        Ok(std::mem::take(&mut self.spent.call_height))
    }

    /// Finish a body started by [`Lowerer::enter_call`]: returns the deepest chain of calls
    /// inlined in it.
    pub(crate) fn leave_call(&mut self, saved: usize) -> usize {
        self.spent.open_calls -= 1;
        std::mem::replace(&mut self.spent.call_height, saved)
    }

    /// A call whose body holds a chain of `inner` inlined calls and `statements` statements
    /// is inlined here.
    pub(crate) fn inlined(&mut self, inner: usize, statements: usize, span: Span) -> DResult<()> {
        let height = inner + 1;
        let limit = self.spent.limits.call_depth;
        if self.spent.open_calls + height > limit {
            let what = format!("calls nest deeper than {limit}");
            return Err(self.over_budget(span, what, Budget::CallDepth));
        }
        self.spent.call_height = self.spent.call_height.max(height);
        self.spent.inlined_statements = self.spent.inlined_statements.saturating_add(statements);
        if self.spent.inlined_statements > self.spent.limits.code_size {
            let what = "inlining calls makes the program too large";
            return Err(self.over_budget(span, what, Budget::CodeSize));
        }
        Ok(())
    }

    /// Refuse a lowered body whose statements nest deeper than the budget (inlined calls nest
    /// their callee's body inside the caller's).
    pub(crate) fn check_nesting(&self, body: &[Stmt], span: Span) -> DResult<()> {
        let limit = self.spent.limits.nesting_depth;
        if nesting(body) > limit {
            let what = format!("statements nest deeper than {limit} (inlined calls included)");
            return Err(self.over_budget(span, what, Budget::NestingDepth));
        }
        Ok(())
    }

    /// One more of `budget` (tables, actions, parser states) now that there are `count`.
    pub(crate) fn count(
        &self,
        budget: Budget,
        count: usize,
        what: &str,
        span: Span,
    ) -> DResult<()> {
        self.spent.limits.check(budget, count as u64).map_err(|exceeded| {
            let what = format!("more than {} {what}", exceeded.limit);
            Diagnostic::over_budget(span, what, exceeded)
        })
    }

    /// Refuse storage past the per-packet budget: a struct of structs of structs multiplies
    /// its fields, and every packet in flight holds all of them. Called as storage grows.
    pub(crate) fn check_packet_state(&self, name: &str, span: Span) -> DResult<()> {
        let p = &self.prog;
        let bytes = p.header_bytes as u64 + p.slots as u64 * 16 + p.headers.len() as u64;
        self.spent.limits.check(Budget::PacketStateBytes, bytes).map_err(|exceeded| {
            let what = format!("`{name}` makes each packet's state too large");
            Diagnostic::over_budget(span, what, exceeded)
        })
    }

    pub(crate) fn count_select_cases(&mut self, n: usize, span: Span) -> DResult<()> {
        self.spent.select_cases += n;
        self.count(Budget::SelectCases, self.spent.select_cases, "select cases", span)
    }

    /// A table declares `n` const entries: all tables' together are bounded, each being
    /// checked and stored when the program is built.
    pub(crate) fn count_const_entries(&mut self, n: usize, span: Span) -> DResult<()> {
        self.spent.const_entries = self.spent.const_entries.saturating_add(n);
        self.count(Budget::ConstEntries, self.spent.const_entries, "const entries", span)
    }

    /// An instance or table `name` of `entries` entries of `entry_bytes` each, plus `fixed`.
    pub(crate) fn declare_state(
        &mut self,
        name: &str,
        entries: u64,
        entry_bytes: u64,
        fixed: u64,
        span: Span,
    ) -> DResult<()> {
        let limits = &self.spent.limits;
        if let Err(exceeded) = limits.check(Budget::InstanceEntries, entries) {
            let what = format!("{name} declares {entries} entries");
            return Err(Diagnostic::over_budget(span, what, exceeded));
        }
        let bytes = entries.saturating_mul(entry_bytes).saturating_add(fixed);
        self.spent.state_bytes = self.spent.state_bytes.saturating_add(bytes);
        if let Err(exceeded) = limits.check(Budget::StateBytes, self.spent.state_bytes) {
            let what = format!(
                "{name} needs {bytes} bytes, {} with the state declared before it",
                self.spent.state_bytes
            );
            return Err(Diagnostic::over_budget(span, what, exceeded));
        }
        Ok(())
    }

    pub(crate) fn declare_instance(
        &mut self,
        name: &str,
        kind: &ir::InstanceKind,
        span: Span,
    ) -> DResult<()> {
        let (entries, cell) = match *kind {
            ir::InstanceKind::Register { size, .. } => (size, REGISTER_CELL_BYTES),
            ir::InstanceKind::Counter { size, .. } => (size, COUNTER_CELL_BYTES),
            ir::InstanceKind::Meter { size, .. } => (size, METER_CELL_BYTES),
            ir::InstanceKind::ActionProfile { size, .. } => (size, PROFILE_MEMBER_BYTES),
            _ => return Ok(()),
        };
        self.declare_state(name, entries as u64, cell, 0, span)
    }

    pub(crate) fn declare_table(&mut self, t: &ir::Table, span: Span) -> DResult<()> {
        let key_bytes: u64 = t.keys.iter().map(|k| k.width.div_ceil(8) as u64).sum();
        let data_bytes = t
            .actions
            .iter()
            .filter_map(|&a| self.prog.actions.get(a as usize))
            .map(|a| a.params.iter().map(|p| p.width.div_ceil(64) as u64 * 8).sum::<u64>())
            .max()
            .unwrap_or(0);
        let entry = key_bytes.next_multiple_of(8) + data_bytes + TABLE_ENTRY_OVERHEAD;
        let lpm = t.keys.iter().any(|k| k.kind == ir::MatchKind::Lpm);
        let first_level = if lpm {
            4u64 << (key_bytes.saturating_mul(8).min(LPM_FIRST_LEVEL_BITS as u64))
        } else {
            0
        };
        let size = (t.size as u64).max(t.const_entries.len() as u64).max(1);
        self.declare_state(&format!("table {}", t.name), size, entry, first_level, span)
    }
}
