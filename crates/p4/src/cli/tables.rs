//! The table commands: `table_add`, `table_dump`, `table_delete`, ... and how entries read.

use serde_json::{json, Value};

use super::{CliError, Line, Outcome, PRIORITY_TOP};
use crate::exec::table::KeyField;
use crate::exec::{EntryError, P4Entry, P4Table, Pipeline};
use crate::ir::{KeyMatch, MatchKind};
use hotplane_tables::EntryStats;

/// Run one table command.
pub(super) fn run(cx: &Line<'_>, command: &str) -> Result<Outcome, CliError> {
    let (p, args) = (cx.p, cx.args);
    match command {
        "show_tables" => Ok(show_tables(p)),
        "table_info" => cx.table(0).map(|t| table_info(p, t)),
        "table_num_entries" => cx.table(0).map(|t| {
            let n = t.table.len();
            Outcome::text(n.to_string(), json!({"entries": n}))
        }),
        "table_dump" => cx.table(0).map(|t| table_dump(t)),
        "table_dump_entry" => {
            let t = cx.table(0)?;
            let (e, stats) = by_handle(t, cx.handle(1)?)?;
            Ok(Outcome::text(entry_text(t, &e, Some(stats)), entry_json(t, &e, Some(stats))))
        }
        "table_dump_entry_from_key" => {
            let t = cx.table(0)?;
            let (keys, priority) = cx.keys(t, &args[1..], true)?;
            let (e, stats) = by_key(t, &keys, priority)?;
            Ok(Outcome::text(entry_text(t, &e, Some(stats)), entry_json(t, &e, Some(stats))))
        }
        "table_add" | "table_modify_match" => {
            let t = cx.table(0)?;
            let action = cx.word(1, "an action")?;
            // The action first: a line in the wrong order is named by what it lacks.
            t.action_id(action)?;
            let (before, after) = cx.arrow(2)?;
            let (keys, _) = cx.keys(t, before, false)?;
            let (args, priority) = cx.params(t, action, after)?;
            let e = P4Entry { keys, priority, action: action.to_string(), args };
            if command == "table_add" {
                t.insert(&e)?;
            } else {
                t.modify(&e)?;
            }
            // The handles of the entries as stored: a range may be stored as several.
            let handles: Vec<u32> = stored(t, &e).iter().map(handle).collect();
            let verb = if command == "table_add" { "added" } else { "modified" };
            let text = match &handles[..] {
                [h] => format!("Entry has been {verb} with handle {h}"),
                hs => format!(
                    "Entry has been {verb} as {} pieces (a range), with handles {}",
                    hs.len(),
                    hs.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                ),
            };
            let mut answer = json!({"handles": handles});
            if let [h] = handles[..] {
                answer["handle"] = h.into();
            }
            Ok(Outcome::text(text, answer))
        }
        "table_modify" => {
            let t = cx.table(0)?;
            let action = cx.word(1, "an action")?;
            // BMv2's table_modify has no `=>`; one is taken all the same.
            let h = cx.word(2, "an entry handle")?;
            let after = match args.get(3) {
                Some(&"=>") => &args[4..],
                _ => &args[3..],
            };
            let (old, _) = by_handle(t, cx.number(h, "the handle")?)?;
            let (args, extra) = cx.params(t, action, after)?;
            if extra.is_some() {
                return Err(cx.syntax("table_modify keeps the entry's priority"));
            }
            let e = P4Entry { args, action: action.to_string(), ..old };
            t.modify(&e)?;
            Ok(Outcome::text(
                format!("Entry {} has been modified", handle(&e)),
                json!({"handle": handle(&e)}),
            ))
        }
        "table_delete" => {
            let t = cx.table(0)?;
            cx.exactly(2)?;
            let (e, _) = by_handle(t, cx.handle(1)?)?;
            t.delete(&e.keys, e.priority)?;
            Ok(Outcome::text(
                format!("Entry {} has been deleted", handle(&e)),
                json!({"deleted": 1}),
            ))
        }
        "table_delete_match" => {
            let t = cx.table(0)?;
            let (keys, priority) = cx.keys(t, &args[1..], true)?;
            // Without a priority, the one the entry was stored with; a range the table stores
            // as several pieces is deleted whole by the table.
            let written =
                P4Entry { keys: keys.clone(), priority, action: String::new(), args: vec![] };
            let priority = match (priority, stored(t, &written).first()) {
                (None, Some(e)) => e.priority,
                (given, _) => given,
            };
            t.delete(&keys, priority)?;
            Ok(Outcome::text("Entry has been deleted", json!({"deleted": 1})))
        }
        "table_clear" => {
            let t = cx.table(0)?;
            cx.exactly(1)?;
            if t.entries_const {
                return Err(EntryError::ConstEntries { table: t.name.clone() }.into());
            }
            // One clear of the store, not a delete per entry (a ternary index is rebuilt per
            // delete).
            let n = t.table.len();
            t.table.clear();
            Ok(Outcome::text(format!("{n} entries deleted"), json!({"deleted": n})))
        }
        "table_set_default" => {
            let t = cx.table(0)?;
            let action = cx.word(1, "an action")?;
            let (args, extra) = cx.params(t, action, &args[2..])?;
            if extra.is_some() {
                return Err(cx.syntax("too many action parameters"));
            }
            t.set_default(action, &args)?;
            Ok(Outcome::text(format!("{}: default action set", t.name), json!({})))
        }
        "table_reset_default" => {
            let t = cx.table(0)?;
            cx.exactly(1)?;
            let decl = p.program.tables.iter().find(|d| d.name == t.name);
            let Some(decl) = decl else {
                return Err(CliError::Replication(format!("table {} is not declared", t.name)));
            };
            let action = &p.program.actions[decl.default_action as usize].name;
            t.set_default(action, &decl.default_args)?;
            Ok(Outcome::text(format!("{}: default action reset to {action}", t.name), json!({})))
        }
        _ => Err(CliError::Unknown(command.to_string())),
    }
}

/// An entry's handle: FNV-1a over its key and priority, the same however it was written.
pub fn handle(e: &P4Entry) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h = (h ^ u32::from(*b)).wrapping_mul(0x0100_0193);
        }
    };
    for k in &e.keys {
        match k {
            KeyMatch::Mask { value, mask } => {
                eat(&[0]);
                eat(&value.to_be_bytes());
                eat(&mask.to_be_bytes());
            }
            KeyMatch::Prefix { value, len } => {
                eat(&[1]);
                eat(&value.to_be_bytes());
                eat(&len.to_be_bytes());
            }
            KeyMatch::Range { lo, hi } => {
                eat(&[2]);
                eat(&lo.to_be_bytes());
                eat(&hi.to_be_bytes());
            }
        }
    }
    eat(&e.priority.map_or([0xff; 4], u32::to_be_bytes));
    h
}

pub(super) fn by_handle(t: &P4Table, h: u32) -> Result<(P4Entry, EntryStats), CliError> {
    let mut found: Vec<_> = t.entries().into_iter().filter(|(e, _)| handle(e) == h).collect();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(CliError::NoHandle { table: t.name.clone(), handle: h }),
        count => Err(CliError::SharedHandle { table: t.name.clone(), handle: h, count }),
    }
}

/// The entries `e` was stored as: itself (its prefix masked, its priority as the table keeps
/// it), or the pieces of a range.
fn stored(t: &P4Table, e: &P4Entry) -> Vec<P4Entry> {
    // Without a range, and with the priority given where the table takes one, the entry is
    // stored as written: no scan (a commands file of n adds stays linear).
    let ranges = e.keys.iter().any(|k| matches!(k, KeyMatch::Range { .. }));
    if !ranges && (e.priority.is_some() || !super::takes_priority(t)) {
        return vec![e.clone()];
    }
    let all = t.entries();
    let same = |s: &P4Entry| {
        s.keys.iter().zip(&e.keys).all(|(a, b)| covered(a, b))
            && (e.priority.is_none() || s.priority == e.priority)
    };
    all.into_iter().map(|(s, _)| s).filter(same).collect()
}

/// Whether the stored match `s` is (a piece of) the written match `w` (prefixes are written
/// with their host bits cleared, as the table stores them).
fn covered(s: &KeyMatch, w: &KeyMatch) -> bool {
    match (s, w) {
        (KeyMatch::Range { lo, hi }, KeyMatch::Range { lo: wlo, hi: whi }) => {
            lo >= wlo && hi <= whi
        }
        (a, b) => a == b,
    }
}

pub(super) fn by_key(
    t: &P4Table,
    keys: &[KeyMatch],
    priority: Option<u32>,
) -> Result<(P4Entry, EntryStats), CliError> {
    t.entries()
        .into_iter()
        .find(|(e, _)| e.keys == keys && (priority.is_none() || e.priority == priority))
        .ok_or_else(|| CliError::NoEntry { table: t.name.clone() })
}

pub(super) fn show_tables(p: &Pipeline) -> Outcome {
    let mut text = String::new();
    for t in &p.objects.tables {
        let kinds: Vec<String> = t
            .keys
            .iter()
            .map(|k| format!("{}({}, {})", k.name, format!("{:?}", k.kind).to_lowercase(), k.width))
            .collect();
        text.push_str(&format!("{:<40} [{}]\n", t.name, kinds.join(",\t")));
    }
    Outcome::text(text.trim_end(), json!({"tables": crate::control::tables_json(p)}))
}

pub(super) fn table_info(p: &Pipeline, t: &P4Table) -> Outcome {
    let mut text = show_tables_line(t);
    text.push_str(&format!(
        "\n{} of {} entries in use{}{}",
        t.table.len(),
        t.table.config().size,
        if t.counters { ", direct counters" } else { "" },
        if t.entries_const { ", const entries" } else { "" },
    ));
    for (name, params) in t.action_names.iter().zip(&t.params) {
        let ps: Vec<String> = params.iter().map(|(n, w, _)| format!("{n}({w})")).collect();
        text.push_str(&format!("\n  {name}\t[{}]", ps.join(",\t")));
    }
    let all = crate::control::tables_json(p);
    let this = all.as_array().and_then(|a| a.iter().find(|v| v["name"] == t.name.as_str()));
    Outcome::text(text, this.cloned().unwrap_or(json!({})))
}

pub(super) fn show_tables_line(t: &P4Table) -> String {
    let keys: Vec<String> =
        t.keys.iter().map(|k| format!("{}({:?}, {})", k.name, k.kind, k.width)).collect();
    format!("{:<40} [{}]", t.name, keys.join(", ").to_lowercase())
}

pub(super) fn table_dump(t: &P4Table) -> Outcome {
    let entries = t.entries();
    let mut text = format!("{}: {} entries", t.name, entries.len());
    let mut json_entries = Vec::new();
    for (e, stats) in entries.iter().take(super::MAX_SHOWN) {
        text.push_str("\n**********\n");
        text.push_str(&entry_text(t, e, Some(*stats)));
        json_entries.push(entry_json(t, e, Some(*stats)));
    }
    if entries.len() > super::MAX_SHOWN {
        let more = entries.len() - super::MAX_SHOWN;
        text.push_str(&format!("\n... and {more} more (`hotplane push p4-dump` lists them all)"));
    }
    let (action, args) = t.default_action();
    let default = P4Entry { keys: vec![], priority: None, action, args };
    text.push_str("\n==========\nDefault entry:\n");
    text.push_str(&action_text(t, &default));
    Outcome::text(
        text,
        json!({"table": t.name, "entries": json_entries, "default": {
            "action": default.action, "params": default.args.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>(),
        }}),
    )
}

pub(super) fn entry_text(t: &P4Table, e: &P4Entry, stats: Option<EntryStats>) -> String {
    let mut text = format!("Dumping entry {:#x}\nMatch key:", handle(e));
    for (k, m) in t.keys.iter().zip(&e.keys) {
        text.push_str(&format!("\n* {:<28}: {}", k.name, match_text(k, m)));
    }
    if let Some(p) = e.priority {
        text.push_str(&format!("\nPriority: {}", PRIORITY_TOP.saturating_sub(p)));
    }
    text.push('\n');
    text.push_str(&action_text(t, e));
    if let (true, Some(s)) = (t.counters, stats) {
        text.push_str(&format!("\nCounters: {} packets, {} bytes", s.packets, s.bytes));
    }
    text
}

pub(super) fn action_text(t: &P4Table, e: &P4Entry) -> String {
    let names = t.action_id(&e.action).map(|a| t.params[a].clone()).unwrap_or_default();
    let params: Vec<String> = names
        .iter()
        .zip(&e.args)
        // `@ref` values are mostly counts: decimal reads better.
        .map(|((n, w, r), v)| match r {
            true => format!("{n}={v}"),
            false => format!("{n}={}", format_value(*v, *w)),
        })
        .collect();
    format!("Action entry: {} - {}", e.action, params.join(", "))
}

pub(super) fn entry_json(t: &P4Table, e: &P4Entry, stats: Option<EntryStats>) -> Value {
    let keys: serde_json::Map<String, Value> = t
        .keys
        .iter()
        .zip(&e.keys)
        .map(|(k, m)| (k.name.clone(), Value::String(match_text(k, m))))
        .collect();
    let mut v = json!({
        "handle": handle(e),
        "match": keys,
        "action": e.action,
        "params": e.args.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>(),
    });
    if let Some(p) = e.priority {
        v["priority"] = PRIORITY_TOP.saturating_sub(p).into();
    }
    if let (true, Some(s)) = (t.counters, stats) {
        v["counters"] = json!({"packets": s.packets, "bytes": s.bytes});
    }
    v
}

/// A match as the CLI takes it back.
pub(super) fn match_text(k: &KeyField, m: &KeyMatch) -> String {
    let v = |x: u128| format_value(x, k.width);
    match (k.kind, m) {
        (MatchKind::Lpm, KeyMatch::Prefix { value, len }) => format!("{}/{len}", v(*value)),
        (MatchKind::Ternary, KeyMatch::Mask { value, mask }) => {
            format!("{}&&&{}", v(*value), v(*mask))
        }
        (MatchKind::Range, KeyMatch::Range { lo, hi }) => format!("{}->{}", v(*lo), v(*hi)),
        (_, KeyMatch::Mask { value, .. }) => v(*value),
        (_, KeyMatch::Prefix { value, len }) => format!("{}/{len}", v(*value)),
        (_, KeyMatch::Range { lo, hi }) => format!("{}->{}", v(*lo), v(*hi)),
    }
}

/// A value the way people write one of its width: 32 bits as an IPv4 address, 48 bits as
/// a MAC address, 128 as IPv6, others in hex.
pub fn format_value(v: u128, width: u32) -> String {
    match width {
        32 => std::net::Ipv4Addr::from(v as u32).to_string(),
        48 => {
            let b = (v as u64).to_be_bytes();
            format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[2], b[3], b[4], b[5], b[6], b[7])
        }
        128 => std::net::Ipv6Addr::from(v).to_string(),
        w if w <= 16 => v.to_string(),
        _ => format!("{v:#x}"),
    }
}
