//! Table entries from a runtime JSON file in the format of the p4lang tutorials'
//! `sN-runtime.json`: `table_entries` (table, match, action_name, action_params, priority,
//! default_action), `multicast_group_entries` and `clone_session_entries`.
//!
//! Match values follow the tutorials' P4Runtime helper: exact `value`, lpm `[value, len]`,
//! ternary `[value, mask]`, range `[lo, hi]`, optional `value`. Values are numbers or
//! strings (`"10.0.1.1"`, `"08:00:00:00:01:11"`, `"0x1f"`, `"42"`).

use serde_json::Value;

use crate::exec::{P4Entry, Pipeline};
use crate::ir::{KeyMatch, MatchKind};
use crate::stf::parse_number;
use crate::types::mask;
use crate::v1model::Replication;

/// What a runtime file set up.
#[derive(Debug, Default, PartialEq)]
pub struct Loaded {
    pub entries: usize,
    pub defaults: usize,
    pub replication: Replication,
}

fn value(v: &Value) -> Result<u128, String> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .map(|x| x as u128)
            .ok_or_else(|| format!("{n} is not a non-negative integer")),
        Value::String(s) => parse_number(s),
        other => Err(format!("{other} is not a value")),
    }
}

fn pair(v: &Value, what: &str) -> Result<(u128, u128), String> {
    match v.as_array().map(|a| &a[..]) {
        Some([a, b]) => Ok((value(a)?, value(b)?)),
        _ => Err(format!(
            "a {what} match is [value, {}]",
            if what == "lpm" { "prefix_len" } else { "mask" }
        )),
    }
}

/// Apply a runtime JSON document to a pipeline's tables; returns the replication config.
pub fn load(p: &Pipeline, text: &str) -> Result<Loaded, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("runtime JSON: {e}"))?;
    let mut loaded = Loaded::default();
    let entries = doc.get("table_entries").and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, e) in entries.iter().enumerate() {
        let at = |m: String| format!("table_entries[{i}]: {m}");
        let tname =
            e.get("table").and_then(Value::as_str).ok_or_else(|| at("no `table`".into()))?;
        let table = p.objects.table(tname).map_err(at)?;
        let action = e
            .get("action_name")
            .and_then(Value::as_str)
            .ok_or_else(|| at("no `action_name`".into()))?;
        let a = table.action_id(action).map_err(at)?;
        let params = e.get("action_params").cloned().unwrap_or(Value::Object(Default::default()));
        let params =
            params.as_object().ok_or_else(|| at("`action_params` must be an object".into()))?;
        let mut args = Vec::new();
        for (name, _, _) in &table.params[a] {
            let v = params
                .get(name)
                .ok_or_else(|| at(format!("action {action}: parameter `{name}` is missing")))?;
            args.push(value(v).map_err(|m| at(format!("parameter {name}: {m}")))?);
        }
        if let Some(extra) = params.keys().find(|k| !table.params[a].iter().any(|p| &p.0 == *k)) {
            return Err(at(format!("action {action} has no parameter `{extra}`")));
        }
        if e.get("default_action").and_then(Value::as_bool) == Some(true) {
            table.set_default(action, &args).map_err(at)?;
            loaded.defaults += 1;
            continue;
        }
        let matches = e.get("match").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut keys = table.unset_keys();
        for (field, v) in &matches {
            let k = table.keys.iter().position(|k| &k.name == field).ok_or_else(|| {
                at(format!(
                    "table {tname} has no key field `{field}` (its key is {})",
                    table.keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ")
                ))
            })?;
            let kf = &table.keys[k];
            let bad = |m: String| at(format!("key {field}: {m}"));
            keys[k] = match kf.kind {
                MatchKind::Exact => {
                    KeyMatch::Mask { value: value(v).map_err(bad)?, mask: mask(kf.width) }
                }
                MatchKind::Optional => KeyMatch::Mask {
                    value: value(v.get("value").unwrap_or(v)).map_err(bad)?,
                    mask: mask(kf.width),
                },
                MatchKind::Lpm => {
                    let (value, len) = pair(v, "lpm").map_err(bad)?;
                    KeyMatch::Prefix { value, len: len.min(u32::MAX as u128) as u32 }
                }
                MatchKind::Ternary => {
                    let (value, m) = pair(v, "ternary").map_err(bad)?;
                    KeyMatch::Mask { value: value & m, mask: m }
                }
                MatchKind::Range => {
                    let (lo, hi) = pair(v, "range").map_err(bad)?;
                    KeyMatch::Range { lo, hi }
                }
            };
        }
        let priority = e.get("priority").and_then(Value::as_u64).map(|p| p as u32);
        table.insert(&P4Entry { keys, priority, action: action.to_string(), args }).map_err(at)?;
        loaded.entries += 1;
    }
    let ports = |e: &Value| -> Result<Vec<(u32, u32)>, String> {
        e.get("replicas")
            .and_then(Value::as_array)
            .ok_or("no `replicas`")?
            .iter()
            .map(|r| {
                let port = r
                    .get("egress_port")
                    .and_then(Value::as_u64)
                    .ok_or("a replica needs `egress_port`")?;
                let rid = r.get("instance").and_then(Value::as_u64).unwrap_or(0);
                Ok((rid as u32, port as u32))
            })
            .collect()
    };
    for (i, g) in doc
        .get("multicast_group_entries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let id = g
            .get("multicast_group_id")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("multicast_group_entries[{i}]: no `multicast_group_id`"))?;
        let copies = ports(g).map_err(|m| format!("multicast_group_entries[{i}]: {m}"))?;
        loaded.replication.groups.insert(id as u32, copies);
    }
    for (i, c) in
        doc.get("clone_session_entries").and_then(Value::as_array).into_iter().flatten().enumerate()
    {
        let id = c
            .get("clone_session_id")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("clone_session_entries[{i}]: no `clone_session_id`"))?;
        let copies = ports(c).map_err(|m| format!("clone_session_entries[{i}]: {m}"))?;
        let Some(&(_, port)) = copies.first() else {
            return Err(format!("clone_session_entries[{i}]: no replicas"));
        };
        loaded.replication.mirror.insert(id as u32, port);
    }
    Ok(loaded)
}
