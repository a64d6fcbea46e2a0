//! simple_switch_CLI's command language over a running P4 program.
//!
//! `table_add ipv4_lpm ipv4_forward 10.0.1.1/32 => 00:00:00:00:01:00 1`, `register_read r 3`,
//! `mirroring_add 5 2`: the commands BMv2's runtime CLI has for tables, counters, registers,
//! meters and the replication engine, with its names and its argument order, so that a
//! tutorial's `s1-commands.txt` runs unchanged. The control socket reaches it through the P4
//! kind's `p4-cli` operation (`hotplane cli`, `hotplane table` on P4 tables). It writes through
//! the same [`P4Table`] and extern cells that P4Runtime's server writes through.
//!
//! Where hotplane differs from BMv2, on purpose:
//! - An entry's handle is a hash of its key and priority, not a counter: the same entry has the
//!   same handle however it was written (CLI, runtime JSON, P4Runtime) and across restarts. Two
//!   entries of one table whose handles collide are refused by handle and reached by key
//!   (`table_delete_match`, `table_modify_match`, `table_dump_entry_from_key`).
//! - Priorities are BMv2's (the smallest number wins); they are stored in P4Runtime's
//!   convention (the largest wins) as [`PRIORITY_TOP`] minus the CLI's number.
//! - Multicast nodes are this module's bookkeeping ([`CliState`]): a node's copies are added to
//!   a group's replication list when associated and removed when dissociated.
//!
//! Every command is cold-path work: it runs on the control thread and never makes a worker
//! wait. It must not depend on the engine or on a transport.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::exec::{EntryError, InstanceRt, P4Table, Pipeline};
use crate::ir::{KeyMatch, MatchKind};
use crate::stf::ValueError;
use crate::types::mask;
use crate::v1model::Replication;
use hotplane_tables::objects::MeterError;

/// CLI priority 0 is stored as this P4Runtime priority; CLI priority `c` as `TOP - c`.
pub const PRIORITY_TOP: u32 = (1 << 24) - 1;
/// Multicast nodes one data plane keeps.
pub const MAX_NODES: usize = 4096;
/// Ports one multicast node or one group may list (the replication engine's own limit is
/// larger; a CLI line does not need more).
pub const MAX_NODE_PORTS: usize = 512;
/// Multicast groups and mirroring sessions the CLI lets the replication engine hold (P4Runtime's
/// server has the same limits).
pub const MAX_GROUPS: usize = 4096;
/// Copies one multicast group may make.
pub const MAX_GROUP_COPIES: usize = 1024;
/// Copies of all groups together.
pub const MAX_TOTAL_COPIES: usize = 65_536;
/// Entries a `table_dump` and cells a `register_read` show at most (one answer is one line
/// on the control socket).
pub const MAX_SHOWN: usize = 4096;
/// Longest command line taken.
pub const MAX_LINE: usize = 64 << 10;

/// The commands, with their usage (what `help` prints and every syntax error repeats).
pub const COMMANDS: &[(&str, &str)] = &[
    ("show_tables", "show_tables"),
    ("table_info", "table_info <table>"),
    ("table_num_entries", "table_num_entries <table>"),
    ("table_dump", "table_dump <table>"),
    ("table_dump_entry", "table_dump_entry <table> <handle>"),
    ("table_dump_entry_from_key", "table_dump_entry_from_key <table> <match fields> [priority]"),
    ("table_add", "table_add <table> <action> <match fields> => <action params> [priority]"),
    ("table_modify", "table_modify <table> <action> <handle> => <action params>"),
    (
        "table_modify_match",
        "table_modify_match <table> <action> <match fields> => <action params> [priority]",
    ),
    ("table_delete", "table_delete <table> <handle>"),
    ("table_delete_match", "table_delete_match <table> <match fields> [priority]"),
    ("table_clear", "table_clear <table>"),
    ("table_set_default", "table_set_default <table> <action> <action params>"),
    ("table_reset_default", "table_reset_default <table>"),
    ("counter_read", "counter_read <counter> <index | entry handle for a direct counter>"),
    ("counter_write", "counter_write <counter> <index> <packets> <bytes>"),
    ("counter_reset", "counter_reset <counter>"),
    ("register_read", "register_read <register> [index]"),
    ("register_write", "register_write <register> <index> <value>"),
    ("register_reset", "register_reset <register>"),
    ("meter_array_set_rates", "meter_array_set_rates <meter> <rate>:<burst> <rate>:<burst>"),
    (
        "meter_set_rates",
        "meter_set_rates <meter> <index | entry handle> <rate>:<burst> <rate>:<burst>",
    ),
    ("meter_get_rates", "meter_get_rates <meter> <index | entry handle>"),
    ("mc_mgrp_create", "mc_mgrp_create <group id>"),
    ("mc_mgrp_destroy", "mc_mgrp_destroy <group id>"),
    ("mc_node_create", "mc_node_create <rid> <port> [port ...]"),
    ("mc_node_update", "mc_node_update <node handle> <port> [port ...]"),
    ("mc_node_destroy", "mc_node_destroy <node handle>"),
    ("mc_node_associate", "mc_node_associate <group id> <node handle>"),
    ("mc_node_dissociate", "mc_node_dissociate <group id> <node handle>"),
    ("mc_dump", "mc_dump"),
    ("mirroring_add", "mirroring_add <session id> <egress port>"),
    ("mirroring_delete", "mirroring_delete <session id>"),
    ("mirroring_get", "mirroring_get <session id>"),
    ("digest_stats", "digest_stats"),
    ("help", "help [command]"),
];

/// Why a command line was refused. Nothing changed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CliError {
    #[error("unknown command `{0}` (`help` lists them)")]
    Unknown(String),
    #[error("{problem}; usage: {usage}")]
    Syntax { problem: String, usage: &'static str },
    #[error("the line is longer than {MAX_LINE} bytes")]
    TooLong,
    #[error(transparent)]
    Entry(#[from] EntryError),
    #[error("{what}: {source}")]
    Value { what: String, source: ValueError },
    #[error("no {kind} called `{name}`; there are: {known}")]
    NoInstance { kind: &'static str, name: String, known: String },
    #[error("{name} has {size} cells; index {index}")]
    Index { name: String, size: usize, index: u64 },
    #[error("table {table} has no entry with handle {handle}")]
    NoHandle { table: String, handle: u32 },
    #[error("table {table}: {count} entries share handle {handle}; name the entry by its key")]
    SharedHandle { table: String, handle: u32, count: usize },
    #[error("table {table} has no entry with this key")]
    NoEntry { table: String },
    #[error("meter {name}: {source}")]
    Meter { name: String, source: MeterError },
    #[error("{0}")]
    Replication(String),
}

/// What the CLI keeps between lines: BMv2's multicast nodes.
#[derive(Debug, Default, Clone)]
pub struct CliState {
    nodes: BTreeMap<u32, replication::Node>,
    next_node: u32,
}

/// What one line did: its result (with a `text` line or lines for people) and, when it
/// changed the replication engine, the new configuration to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub result: Value,
    pub replication: Option<Replication>,
}

impl Outcome {
    fn text(text: impl Into<String>, mut result: Value) -> Self {
        result["text"] = Value::String(text.into());
        Outcome { result, replication: None }
    }
}

/// Run one command line against `p`, whose replication engine is `replication` now. Blank
/// lines and `#` comments do nothing.
pub fn execute(
    p: &Pipeline,
    state: &mut CliState,
    replication: &Replication,
    line: &str,
) -> Result<Outcome, CliError> {
    if line.len() > MAX_LINE {
        return Err(CliError::TooLong);
    }
    let line = line.split('#').next().unwrap_or("");
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some((&command, args)) = words.split_first() else {
        return Ok(Outcome::text("", json!({})));
    };
    let usage = COMMANDS
        .iter()
        .find(|(c, _)| *c == command)
        .map(|(_, u)| *u)
        .ok_or_else(|| CliError::Unknown(command.to_string()))?;
    let cx = Line { p, usage, args };
    match command {
        "show_tables"
        | "table_info"
        | "table_num_entries"
        | "table_dump"
        | "table_dump_entry"
        | "table_dump_entry_from_key"
        | "table_add"
        | "table_modify_match"
        | "table_modify"
        | "table_delete"
        | "table_delete_match"
        | "table_clear"
        | "table_set_default"
        | "table_reset_default" => tables::run(&cx, command),
        "counter_read" | "counter_write" | "counter_reset" => externs::counters(&cx, command),
        "register_read" | "register_write" | "register_reset" => externs::registers(&cx, command),
        "meter_array_set_rates" | "meter_set_rates" | "meter_get_rates" => {
            externs::meters(&cx, command)
        }
        "mirroring_add" | "mirroring_delete" | "mirroring_get" => {
            replication::mirroring(&cx, command, replication)
        }
        "digest_stats" => Ok(externs::digest_stats(p)),
        "help" => Ok(help(args.first().copied())),
        _ => replication::multicast(&cx, command, state, replication),
    }
}

/// A line being run: the pipeline, the command's usage and its arguments.
struct Line<'a> {
    p: &'a Pipeline,
    usage: &'static str,
    args: &'a [&'a str],
}

impl Line<'_> {
    fn syntax(&self, problem: impl Into<String>) -> CliError {
        CliError::Syntax { problem: problem.into(), usage: self.usage }
    }

    fn word(&self, i: usize, what: &str) -> Result<&str, CliError> {
        self.args.get(i).copied().ok_or_else(|| self.syntax(format!("missing {what}")))
    }

    fn exactly(&self, n: usize) -> Result<(), CliError> {
        match self.args.len() == n {
            true => Ok(()),
            false => Err(self.syntax(format!("takes {n} argument(s), got {}", self.args.len()))),
        }
    }

    fn number(&self, text: &str, what: &str) -> Result<u32, CliError> {
        let v = crate::stf::parse_number(text)
            .map_err(|source| CliError::Value { what: what.to_string(), source })?;
        u32::try_from(v).map_err(|_| self.syntax(format!("{what} `{text}` is out of range")))
    }

    fn table(&self, i: usize) -> Result<&Arc<P4Table>, CliError> {
        Ok(self.p.objects.table(self.word(i, "a table")?)?)
    }

    fn handle(&self, i: usize) -> Result<u32, CliError> {
        self.number(self.word(i, "an entry handle")?, "the handle")
    }

    /// The words before and after `=>`, from argument `from` on.
    fn arrow(&self, from: usize) -> Result<(&[&str], &[&str]), CliError> {
        let rest = self.args.get(from..).unwrap_or(&[]);
        let at = rest.iter().position(|w| *w == "=>").ok_or_else(|| self.syntax("missing `=>`"))?;
        Ok((&rest[..at], &rest[at + 1..]))
    }

    /// One match per key field, then (when `priority`) an optional CLI priority.
    fn keys(
        &self,
        t: &P4Table,
        words: &[&str],
        priority: bool,
    ) -> Result<(Vec<KeyMatch>, Option<u32>), CliError> {
        let n = t.keys.len();
        let extra = match (words.len(), priority) {
            (w, _) if w == n => None,
            (w, true) if w == n + 1 && takes_priority(t) => Some(self.priority(words[n])?),
            (w, _) => {
                let names: Vec<&str> = t.keys.iter().map(|k| k.name.as_str()).collect();
                return Err(self.syntax(format!(
                    "table {} has {n} key field(s) ({}), got {w} match(es)",
                    t.name,
                    names.join(", ")
                )));
            }
        };
        let keys =
            t.keys.iter().zip(words).map(|(k, w)| key_match(k, w)).collect::<Result<_, _>>()?;
        Ok((keys, extra))
    }

    /// The action's parameter values, then an optional CLI priority.
    fn params(
        &self,
        t: &P4Table,
        action: &str,
        words: &[&str],
    ) -> Result<(Vec<u128>, Option<u32>), CliError> {
        let a = t.action_id(action)?;
        let params = &t.params[a];
        let priority = match words.len() {
            w if w == params.len() => None,
            w if w == params.len() + 1 && takes_priority(t) => Some(self.priority(words[w - 1])?),
            w => {
                let names: Vec<&str> = params.iter().map(|(n, _, _)| n.as_str()).collect();
                return Err(self.syntax(format!(
                    "action {} takes {} parameter(s) ({}), got {w}",
                    t.action_names[a],
                    params.len(),
                    names.join(", ")
                )));
            }
        };
        let args = params
            .iter()
            .zip(words)
            .map(|((name, _, _), w)| value(w, &format!("parameter {name}")))
            .collect::<Result<_, _>>()?;
        Ok((args, priority))
    }

    fn priority(&self, text: &str) -> Result<u32, CliError> {
        let c = self.number(text, "the priority")?;
        if c > PRIORITY_TOP {
            return Err(self.syntax(format!("priority {c} is above {PRIORITY_TOP}")));
        }
        Ok(PRIORITY_TOP - c)
    }

    /// The extern instance called by argument 0, of a kind `pick` accepts.
    fn instance<T>(
        &self,
        kind: &'static str,
        pick: impl Fn(&InstanceRt) -> Option<T>,
    ) -> Result<(String, T), CliError> {
        let name = self.word(0, kind)?;
        let prog = &self.p.program;
        let found = self.p.objects.instance_index(prog, name).and_then(|i| {
            pick(&self.p.objects.instances[i]).map(|x| (prog.instances[i].name.clone(), x))
        });
        found.ok_or_else(|| {
            let known: Vec<&str> = prog
                .instances
                .iter()
                .zip(&self.p.objects.instances)
                .filter(|(_, rt)| pick(rt).is_some())
                .map(|(i, _)| i.name.as_str())
                .collect();
            CliError::NoInstance {
                kind,
                name: name.to_string(),
                known: if known.is_empty() { "none".into() } else { known.join(", ") },
            }
        })
    }

    fn index(&self, i: usize, name: &str, size: usize) -> Result<usize, CliError> {
        let index = self.number(self.word(i, "an index")?, "the index")?;
        match (index as usize) < size {
            true => Ok(index as usize),
            false => Err(CliError::Index { name: name.to_string(), size, index: index.into() }),
        }
    }
}

/// Whether entries of `t` carry a priority (BMv2: a ternary, range or optional key field).
fn takes_priority(t: &P4Table) -> bool {
    t.keys
        .iter()
        .any(|k| matches!(k.kind, MatchKind::Ternary | MatchKind::Range | MatchKind::Optional))
}

/// A value: decimal, `0x` hex, `0b` binary, an IPv4 or IPv6 address, or a MAC address.
fn value(text: &str, what: &str) -> Result<u128, CliError> {
    crate::stf::parse_number(text)
        .map_err(|source| CliError::Value { what: what.to_string(), source })
}

/// One key field's match as BMv2 writes it: `V` (exact, optional), `V/LEN` (lpm), `V&&&M`
/// (ternary), `LO->HI` (range). STF's parser reads it once the form is checked (BMv2 takes
/// each kind in its one form; STF is more lenient).
fn key_match(k: &crate::exec::table::KeyField, text: &str) -> Result<KeyMatch, CliError> {
    let what = format!("key {}", k.name);
    let form = match k.kind {
        MatchKind::Lpm => Some(("/", "VALUE/LENGTH lpm")),
        MatchKind::Ternary => Some(("&&&", "VALUE&&&MASK ternary")),
        MatchKind::Range => Some(("->", "LOW->HIGH range")),
        MatchKind::Exact | MatchKind::Optional => None,
    };
    let wrong = match form {
        Some((sep, expect)) => (!text.contains(sep)).then_some(expect),
        None => {
            ["&&&", "/", "->", "..", "*"].iter().any(|s| text.contains(s)).then_some("VALUE exact")
        }
    };
    if let Some(expect) = wrong {
        let text = format!("{text} (a {expect} match)");
        return Err(CliError::Value { what, source: ValueError::NotANumber { text } });
    }
    let m = crate::stf::parse_key_match(k.kind, k.width, &text.replace("->", ".."))
        .map_err(|source| CliError::Value { what, source })?;
    Ok(match m {
        // Host bits cleared, as the table stores the prefix (the handle is of the stored entry).
        KeyMatch::Prefix { value, len } => {
            KeyMatch::Prefix { value: value & !mask(k.width - len), len }
        }
        m => m,
    })
}

fn help(command: Option<&str>) -> Outcome {
    match command.and_then(|c| COMMANDS.iter().find(|(n, _)| *n == c)) {
        Some((_, usage)) => Outcome::text(*usage, json!({"usage": usage})),
        None => {
            let lines: Vec<&str> = COMMANDS.iter().map(|(_, u)| *u).collect();
            Outcome::text(lines.join("\n"), json!({"commands": lines}))
        }
    }
}

mod externs;
mod replication;
mod tables;

pub use tables::{format_value, handle};

#[cfg(test)]
mod tests;
