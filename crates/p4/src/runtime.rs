//! Table entries from a runtime JSON file in the format of the p4lang tutorials'
//! `sN-runtime.json`: `table_entries` (table, match, action_name, action_params, priority,
//! default_action), `multicast_group_entries` and `clone_session_entries`; and, hotplane's
//! addition for tables with action profiles, `action_profile_members` (action_profile,
//! member_id, action_name, action_params) and `action_profile_groups` (action_profile,
//! group_id, members: ids or {member_id, weight}), loaded before the table entries that name
//! them (`"action_name": "$member"`, `"action_params": {"id": 1}`).
//!
//! Match values follow the tutorials' P4Runtime helper: exact `value`, lpm `[value, len]`,
//! ternary `[value, mask]`, range `[lo, hi]`, optional `value`. Values are numbers or
//! strings (`"10.0.1.1"`, `"08:00:00:00:01:11"`, `"0x1f"`, `"42"`).

use serde_json::{json, Value};

use crate::exec::{EntryError, Group, Member, P4Entry, P4Table, Pipeline, ProfileRef, ProfileRt};
use crate::ir::{KeyMatch, MatchKind};
use crate::stf::{parse_number, ValueError};
use crate::types::mask;
use crate::v1model::Replication;
use std::sync::Arc;

/// What a runtime file set up.
#[derive(Debug, Default, PartialEq)]
pub struct Loaded {
    /// Entries inserted or modified.
    pub entries: usize,
    pub deleted: usize,
    pub defaults: usize,
    pub replication: Replication,
}

/// Why a runtime JSON document was refused. Entries before the bad one stay applied.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeJsonError {
    #[error("runtime JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("table_entries[{index}]: {source}")]
    TableEntry { index: usize, source: EntryError },
    #[error("action_profile_members[{index}]: {source}")]
    ProfileMember { index: usize, source: EntryError },
    #[error("action_profile_groups[{index}]: {source}")]
    ProfileGroup { index: usize, source: EntryError },
    /// `problem` says what the group lacks.
    #[error("multicast_group_entries[{index}]: {problem}")]
    MulticastGroup { index: usize, problem: &'static str },
    /// `problem` says what the session lacks.
    #[error("clone_session_entries[{index}]: {problem}")]
    CloneSession { index: usize, problem: &'static str },
}

fn value(v: &Value) -> Result<u128, ValueError> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .map(|x| x as u128)
            .ok_or_else(|| ValueError::NotNonNegative { number: n.to_string() }),
        Value::String(s) => parse_number(s),
        other => Err(ValueError::NotAValue { value: other.to_string() }),
    }
}

fn pair(v: &Value, kind: &'static str) -> Result<(u128, u128), ValueError> {
    match v.as_array().map(|a| &a[..]) {
        Some([a, b]) => Ok((value(a)?, value(b)?)),
        _ => Err(ValueError::NotAPair {
            kind,
            second: if kind == "lpm" { "prefix_len" } else { "mask" },
        }),
    }
}

/// Apply a runtime JSON document to a pipeline's tables; returns the replication config.
///
/// Each entry of `table_entries` may carry `"type"`: `"INSERT"` (the default), `"MODIFY"` or
/// `"DELETE"`, as P4Runtime names them; a delete needs only `table`, `match` and, for
/// ternary tables, `priority`. Entries apply in order; the first bad one stops the load
/// and is named in the error, and those before it stay applied.
pub fn load(p: &Pipeline, text: &str) -> Result<Loaded, RuntimeJsonError> {
    load_with(p, text, Inserts::Strict)
}

/// What an INSERT of an entry that is already there does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserts {
    /// Refused (ALREADY_EXISTS), as P4Runtime has it: `push p4-entries`.
    Strict,
    /// The entry takes the document's action: the document describes the tables' state. A
    /// program replaced with its entries document (`push --p4 FILE --entries FILE`) finds the
    /// entries of its carried tables already there.
    State,
}

/// [`load`], with INSERTs as `inserts` says.
pub fn load_with(p: &Pipeline, text: &str, inserts: Inserts) -> Result<Loaded, RuntimeJsonError> {
    let doc: Value = serde_json::from_str(text)?;
    let mut loaded = Loaded::default();
    let listed = |key: &str| doc.get(key).and_then(Value::as_array).into_iter().flatten();
    for (index, m) in listed("action_profile_members").enumerate() {
        apply_member(p, m, inserts)
            .map_err(|source| RuntimeJsonError::ProfileMember { index, source })?;
    }
    for (index, g) in listed("action_profile_groups").enumerate() {
        apply_group(p, g, inserts)
            .map_err(|source| RuntimeJsonError::ProfileGroup { index, source })?;
    }
    let entries = doc.get("table_entries").and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, e) in entries.iter().enumerate() {
        let at = |source| RuntimeJsonError::TableEntry { index: i, source };
        match apply_entry(p, e, inserts).map_err(at)? {
            Applied::Default => loaded.defaults += 1,
            Applied::Entry => loaded.entries += 1,
            Applied::Deleted => loaded.deleted += 1,
        }
    }
    let ports = |e: &Value| -> Result<Vec<(u32, u32)>, &'static str> {
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
        let id = g.get("multicast_group_id").and_then(Value::as_u64).ok_or(
            RuntimeJsonError::MulticastGroup { index: i, problem: "no `multicast_group_id`" },
        )?;
        let copies =
            ports(g).map_err(|problem| RuntimeJsonError::MulticastGroup { index: i, problem })?;
        loaded.replication.groups.insert(id as u32, copies);
    }
    for (i, c) in
        doc.get("clone_session_entries").and_then(Value::as_array).into_iter().flatten().enumerate()
    {
        let id = c
            .get("clone_session_id")
            .and_then(Value::as_u64)
            .ok_or(RuntimeJsonError::CloneSession { index: i, problem: "no `clone_session_id`" })?;
        let copies =
            ports(c).map_err(|problem| RuntimeJsonError::CloneSession { index: i, problem })?;
        let Some(&(_, port)) = copies.first() else {
            return Err(RuntimeJsonError::CloneSession { index: i, problem: "no replicas" });
        };
        loaded.replication.mirror.insert(id as u32, port);
    }
    Ok(loaded)
}

enum Applied {
    Entry,
    Default,
    Deleted,
}

fn apply_entry(p: &Pipeline, e: &Value, inserts: Inserts) -> Result<Applied, EntryError> {
    let tname = e.get("table").and_then(Value::as_str).ok_or(EntryError::Json("no `table`"))?;
    let table = p.objects.table(tname)?;
    let kind = e.get("type").map_or(Some("INSERT"), Value::as_str);
    let priority = match e.get("priority") {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| EntryError::BadPriority(v.to_string()))?,
        ),
    };
    if kind == Some("DELETE") {
        let keys = match_keys(table, tname, e)?;
        table.delete(&keys, priority)?;
        return Ok(Applied::Deleted);
    }
    let (action, args) = action_of(&table.name, &table.action_names, &table.params, e)?;
    let action = action.as_str();
    if e.get("default_action").and_then(Value::as_bool) == Some(true) {
        table.set_default(action, &args)?;
        return Ok(Applied::Default);
    }
    let entry =
        P4Entry { keys: match_keys(table, tname, e)?, priority, action: action.into(), args };
    match kind {
        Some("INSERT") if inserts == Inserts::State => match table.insert(&entry) {
            Err(e) if e.is_exists() => table.modify(&entry)?,
            r => r?,
        },
        Some("INSERT") => table.insert(&entry)?,
        Some("MODIFY") => table.modify(&entry)?,
        _ => return Err(EntryError::Json("`type` is one of INSERT, MODIFY, DELETE")),
    }
    Ok(Applied::Entry)
}

/// The entry's `match` object as one match per key field; fields it leaves out match anything.
/// An entry's or member's `action_name` and `action_params`, against the actions `names`
/// (with their `params`) of `owner`: the action's full name and its argument values.
fn action_of(
    owner: &str,
    names: &[String],
    params: &[Vec<(String, u32, bool)>],
    e: &Value,
) -> Result<(String, Vec<u128>), EntryError> {
    let action =
        e.get("action_name").and_then(Value::as_str).ok_or(EntryError::Json("no `action_name`"))?;
    let a = crate::exec::table::find_action(owner, names, action)?;
    let given = e.get("action_params").cloned().unwrap_or(Value::Object(Default::default()));
    let given = given.as_object().ok_or(EntryError::Json("`action_params` must be an object"))?;
    let mut args = Vec::new();
    for (name, _, _) in &params[a] {
        let v = given.get(name).ok_or_else(|| EntryError::MissingParam {
            action: action.to_string(),
            param: name.clone(),
        })?;
        args.push(
            value(v).map_err(|source| EntryError::ParamValue { param: name.clone(), source })?,
        );
    }
    if let Some(extra) = given.keys().find(|k| !params[a].iter().any(|p| &p.0 == *k)) {
        return Err(EntryError::NoParam { action: action.to_string(), param: extra.clone() });
    }
    Ok((names[a].clone(), args))
}

/// A 32-bit id at `key` of `e`.
fn id_at(e: &Value, key: &'static str) -> Result<u32, EntryError> {
    e.get(key)
        .and_then(Value::as_u64)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or(EntryError::NotU32 { field: key })
}

/// The 32-bit number at `key` of `e`, or `default` when absent; anything else is refused.
fn optional_u32(e: &Value, key: &'static str, default: u32) -> Result<u32, EntryError> {
    match e.get(key) {
        None => Ok(default),
        Some(v) => {
            v.as_u64().and_then(|v| u32::try_from(v).ok()).ok_or(EntryError::NotU32 { field: key })
        }
    }
}

/// The profile a member or group names (`action_profile`).
fn profile_of<'p>(p: &'p Pipeline, v: &Value) -> Result<&'p Arc<ProfileRt>, EntryError> {
    let name = v
        .get("action_profile")
        .and_then(Value::as_str)
        .ok_or(EntryError::Json("no `action_profile`"))?;
    p.objects.profile(name)
}

/// Whether a member's or group's write replaces one (`"type"`: INSERT, the default, or
/// MODIFY; an INSERT of one that `exists` replaces it under [`Inserts::State`]).
fn is_modify(v: &Value, inserts: Inserts, exists: bool) -> Result<bool, EntryError> {
    match v.get("type").map_or(Some("INSERT"), Value::as_str) {
        Some("MODIFY") => Ok(true),
        Some("INSERT") => Ok(inserts == Inserts::State && exists),
        _ => Err(EntryError::Json("`type` is one of INSERT, MODIFY")),
    }
}

/// One of `action_profile_members`: INSERT (the default) or MODIFY; under
/// [`Inserts::State`] an INSERT of a member that exists replaces it.
fn apply_member(p: &Pipeline, m: &Value, inserts: Inserts) -> Result<(), EntryError> {
    let profile = profile_of(p, m)?;
    let id = id_at(m, "member_id")?;
    let acts = &profile.actions;
    let (action, args) = action_of(&profile.name, &acts.names, &acts.params, m)?;
    let member = Member { action, args };
    let modify = is_modify(m, inserts, profile.exists(ProfileRef::Member(id)).is_ok())?;
    Ok(profile.write_member(id, member, modify)?)
}

/// One of `action_profile_groups`, as [`apply_member`].
fn apply_group(p: &Pipeline, g: &Value, inserts: Inserts) -> Result<(), EntryError> {
    let profile = profile_of(p, g)?;
    let id = id_at(g, "group_id")?;
    let members = g
        .get("members")
        .and_then(Value::as_array)
        .ok_or(EntryError::Json("no `members`"))?
        .iter()
        .map(|m| match m.as_u64() {
            Some(id) => u32::try_from(id)
                .map(|id| (id, 1))
                .map_err(|_| EntryError::Json("member ids are 32-bit")),
            None => Ok((id_at(m, "member_id")?, optional_u32(m, "weight", 1)?)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let max_size = optional_u32(g, "max_size", 0)?;
    let modify = is_modify(g, inserts, profile.exists(ProfileRef::Group(id)).is_ok())?;
    Ok(profile.write_group(id, Group { members, max_size }, modify)?)
}

fn match_keys(table: &P4Table, tname: &str, e: &Value) -> Result<Vec<KeyMatch>, EntryError> {
    let matches = match e.get("match") {
        None => Default::default(),
        Some(m) => m.as_object().cloned().ok_or(EntryError::Json("`match` must be an object"))?,
    };
    let mut keys = table.unset_keys();
    for (field, v) in &matches {
        let k = table.keys.iter().position(|k| &k.name == field).ok_or_else(|| {
            EntryError::NoKeyField {
                table: tname.to_string(),
                field: field.clone(),
                fields: table.keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", "),
            }
        })?;
        let kf = &table.keys[k];
        let bad = |source| EntryError::KeyValue { field: field.clone(), source };
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
    Ok(keys)
}

/// A value as the dump writes it: small fields as numbers, wider ones as hex strings.
fn json_value(v: u128, width: u32) -> Value {
    if width <= 16 {
        Value::from(v as u64)
    } else {
        Value::from(format!("{v:#x}"))
    }
}

/// A table's entries and default action as a runtime JSON document that [`load`] takes back.
/// Match-anything fields are left out; counters ride along as `"counters"`. Values of up to
/// 16 bits and `@ref` parameters are numbers, wider ones hex strings.
pub fn dump(table: &P4Table) -> Value {
    let params = |action: &str, args: &[u128]| -> Value {
        if let (Some(_), [id]) = (crate::exec::ProfileRef::of(action, args), args) {
            return json!({ "id": *id as u64 });
        }
        let Ok(a) = table.action_id(action) else { return json!({}) };
        let m: serde_json::Map<String, Value> = table.params[a]
            .iter()
            .zip(args)
            .map(|((name, width, writable), v)| {
                // `@ref` values are mostly counts: decimal reads better.
                let v = match writable {
                    true if *width <= 64 => Value::from(*v as u64),
                    _ => json_value(*v, *width),
                };
                (name.clone(), v)
            })
            .collect();
        Value::Object(m)
    };
    let mut out = Vec::new();
    for (e, stats) in table.entries() {
        let mut m = serde_json::Map::new();
        for (k, km) in table.keys.iter().zip(&e.keys) {
            let v = match (k.kind, km.clone()) {
                (_, KeyMatch::Mask { mask: 0, .. }) if k.kind != MatchKind::Exact => continue,
                (MatchKind::Ternary, KeyMatch::Mask { value, mask }) => {
                    json!([json_value(value, k.width), json_value(mask, k.width)])
                }
                (_, KeyMatch::Mask { value, .. }) => json_value(value, k.width),
                (_, KeyMatch::Prefix { len: 0, .. }) => continue,
                (_, KeyMatch::Prefix { value, len }) => json!([json_value(value, k.width), len]),
                (_, KeyMatch::Range { lo, hi }) if lo == 0 && hi == mask(k.width) => continue,
                (_, KeyMatch::Range { lo, hi }) => {
                    json!([json_value(lo, k.width), json_value(hi, k.width)])
                }
            };
            m.insert(k.name.clone(), v);
        }
        let mut entry = json!({
            "table": table.name,
            "match": m,
            "action_name": e.action,
            "action_params": params(&e.action, &e.args),
        });
        if let Some(p) = e.priority {
            entry["priority"] = p.into();
        }
        if table.counters {
            entry["counters"] = json!({"packets": stats.packets, "bytes": stats.bytes});
        }
        out.push(entry);
    }
    let (action, args) = table.default_action();
    out.push(json!({
        "table": table.name,
        "default_action": true,
        "action_name": action,
        "action_params": params(&action, &args),
    }));
    let mut doc = json!({ "table_entries": out });
    if let Some(profile) = &table.profile {
        // The members and groups its entries name: a fresh pipeline loads them first.
        let acts = &profile.actions;
        let members: Vec<Value> = profile
            .members()
            .into_iter()
            .map(|(id, m)| {
                let a = acts.names.iter().position(|n| *n == m.action).unwrap_or(0);
                let params: serde_json::Map<String, Value> = acts.params[a]
                    .iter()
                    .zip(&m.args)
                    .map(|((name, width, _), v)| (name.clone(), json_value(*v, *width)))
                    .collect();
                json!({"action_profile": profile.name, "member_id": id, "action_name": m.action, "action_params": params})
            })
            .collect();
        let groups: Vec<Value> = profile
            .groups()
            .into_iter()
            .map(|(id, g)| {
                let members: Vec<Value> = g
                    .members
                    .iter()
                    .map(|&(m, w)| json!({"member_id": m, "weight": w}))
                    .collect();
                json!({"action_profile": profile.name, "group_id": id, "members": members, "max_size": g.max_size})
            })
            .collect();
        doc["action_profile_members"] = members.into();
        doc["action_profile_groups"] = groups.into();
    }
    doc
}
