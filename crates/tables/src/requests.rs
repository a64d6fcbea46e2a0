//! Tables on the control API: the request shapes (`table-list`, `table-add`, ...), match keys
//! and parameters as text, entries and listings as JSON.
//!
//! The shapes mirror `hotplane_control::api::Request`'s table variants field for field (this
//! crate does not depend on the control protocol): the control socket parses a request once
//! as a `Request`, and the engine hands the same JSON here.

use crate::set::{Table, TableEntry, TableSet};
use crate::text::{match_text, parse_match, parse_params, TextError};
use crate::TableError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;

/// One entry as the control API and `[[table_entry]]` write it: `match` is the key as text
/// (`10.0.0.1`, `0x0a000001`, `42`), a prefix (`10.0.0.0/8`, lpm), `VALUE&&&MASK` or `LO..HI`
/// (ternary); `params` are the action's parameter values in order (decimal or 0x hex).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableEntrySpec {
    pub table: String,
    #[serde(rename = "match")]
    pub matches: String,
    pub action: String,
    #[serde(default)]
    pub params: Vec<String>,
    #[serde(default)]
    pub priority: u32,
}

/// The control operations on tables (JSON: `{"op": "table-add", ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TableRequest {
    /// Match-action tables: name, kind, size, entries, storage, locking.
    TableList {},
    /// Every entry of a table with its counters, and the default action.
    TableDump { table: String },
    /// Add an entry (see [`TableEntrySpec`]).
    TableAdd(TableEntrySpec),
    /// Replace an entry's action and parameters (its counters stay).
    TableModify(TableEntrySpec),
    /// Delete an entry.
    TableDel {
        table: String,
        #[serde(rename = "match")]
        matches: String,
        #[serde(default)]
        priority: u32,
    },
    /// Delete every entry.
    TableClear { table: String },
    /// Set the action run on a miss.
    TableDefault {
        table: String,
        action: String,
        #[serde(default)]
        params: Vec<String>,
    },
}

/// The `op` names of [`TableRequest`].
pub const TABLE_OPS: &[&str] = &[
    "table-list",
    "table-dump",
    "table-add",
    "table-modify",
    "table-del",
    "table-clear",
    "table-default",
];

/// Why a table request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Text(#[from] TextError),
    /// A write of one entry failed: names the table and the entry.
    #[error("table `{table}`, {entry}: {source}")]
    Entry { table: String, entry: String, source: TableError },
}

fn params_json(table: &Table, action: &str, data: &[u64]) -> Value {
    let Some(spec) = table.config().actions.iter().find(|a| a.name == action) else {
        return json!(data);
    };
    let mut out = serde_json::Map::new();
    let mut at = 0;
    for p in &spec.params {
        let v = data.get(at).copied().unwrap_or(0);
        out.insert(p.name.clone(), json!(v));
        at += p.words();
    }
    Value::Object(out)
}

fn entry_json(table: &Table, e: &TableEntry) -> Value {
    json!({
        "match": match_text(&e.matches),
        "priority": e.priority,
        "action": e.action,
        "params": params_json(table, &e.action, &e.data),
        "packets": e.stats.packets,
        "bytes": e.stats.bytes,
        "last_hit_ns": e.stats.last_hit_ns,
    })
}

/// Every table with its settings and fill (`table-list`).
pub fn list_json(set: &TableSet) -> Value {
    Value::Array(
        set.all()
            .iter()
            .map(|t| {
                let c = t.config();
                json!({
                    "name": c.name,
                    "kind": c.kind,
                    "key_bits": c.key_bits,
                    "size": c.size,
                    "entries": t.len(),
                    "store": c.store,
                    "locked": c.locked,
                    "actions": c.actions.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
                    "insert_on_miss": match &**t {
                        Table::Exact(e) if c.insert_on_miss.is_some() => json!({
                            "inserted": e.counters.inserted_on_miss.load(Ordering::Relaxed),
                            "deferred": e.counters.insert_deferred.load(Ordering::Relaxed),
                            "full": e.counters.insert_full.load(Ordering::Relaxed),
                        }),
                        _ => Value::Null,
                    },
                })
            })
            .collect(),
    )
}

/// A table's entries with their counters, and its default action (`table-dump`).
pub fn dump_json(t: &Table) -> Value {
    let (action, data) = t.default_data();
    json!({
        "table": t.name(),
        "entries": t.entries().iter().map(|e| entry_json(t, e)).collect::<Vec<_>>(),
        "default": {"action": action, "params": params_json(t, &action, &data)},
    })
}

/// Add (or with `modify`, replace) one entry.
pub fn write_entry(set: &TableSet, e: &TableEntrySpec, modify: bool) -> Result<(), RequestError> {
    let name = &e.table;
    let t = set.get(name)?;
    let m = parse_match(&t, &e.matches)?;
    let data = parse_params(&t, &e.action, &e.params)?;
    let r = if modify {
        t.modify(&m, e.priority, &e.action, &data)
    } else {
        t.insert(&m, e.priority, &e.action, &data)
    };
    r.map_err(|source| RequestError::Entry { table: name.clone(), entry: match_text(&m), source })
}

/// Answer one table request.
pub fn handle(set: &TableSet, req: &TableRequest) -> Result<Value, RequestError> {
    Ok(match req {
        TableRequest::TableList {} => list_json(set),
        TableRequest::TableDump { table } => dump_json(&*set.get(table)?),
        TableRequest::TableAdd(e) => {
            write_entry(set, e, false)?;
            json!("added")
        }
        TableRequest::TableModify(e) => {
            write_entry(set, e, true)?;
            json!("modified")
        }
        TableRequest::TableDel { table: name, matches, priority } => {
            let t = set.get(name)?;
            let m = parse_match(&t, matches)?;
            t.delete(&m, *priority).map_err(|source| RequestError::Entry {
                table: name.clone(),
                entry: match_text(&m),
                source,
            })?;
            json!("deleted")
        }
        TableRequest::TableClear { table } => {
            set.get(table)?.clear();
            json!("cleared")
        }
        TableRequest::TableDefault { table, action, params } => {
            let t = set.get(table)?;
            let data = parse_params(&t, action, params)?;
            t.set_default(action, &data)?;
            json!("default set")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ActionSpec, MatchKind, TableConfig};
    use hotplane_core::Qsbr;

    fn set() -> TableSet {
        let s = TableSet::new();
        let q = Qsbr::new();
        let acts =
            vec![ActionSpec::new("forward", &[("port", 16, false)]), ActionSpec::new("drop", &[])];
        s.create(TableConfig::new("routes", MatchKind::Lpm, 32, 16).with_actions(acts.clone()), &q)
            .unwrap();
        s.create(TableConfig::new("acl", MatchKind::Ternary, 16, 16).with_actions(acts), &q)
            .unwrap();
        s
    }

    fn req(v: Value) -> TableRequest {
        serde_json::from_value(v).unwrap()
    }

    fn answer(s: &TableSet, v: Value) -> Result<Value, String> {
        handle(s, &req(v)).map_err(|e| e.to_string())
    }

    #[test]
    fn add_dump_delete_through_requests() {
        let s = set();
        let add = json!({"op":"table-add","table":"routes","match":"10.0.0.0/8","action":"forward","params":["3"]});
        assert_eq!(answer(&s, add.clone()).unwrap(), json!("added"));
        let again = answer(&s, add).unwrap_err();
        assert_eq!(again, "table `routes`, 10.0.0.0/8: the entry already exists");
        let d = answer(&s, json!({"op":"table-dump","table":"routes"})).unwrap();
        assert_eq!(d["entries"][0]["match"], "10.0.0.0/8");
        assert_eq!(d["entries"][0]["params"]["port"], 3);
        let modify = json!({"op":"table-modify","table":"routes","match":"10.0.0.0/8","action":"forward","params":["4"]});
        assert_eq!(answer(&s, modify).unwrap(), json!("modified"));
        let d = answer(&s, json!({"op":"table-dump","table":"routes"})).unwrap();
        assert_eq!(d["entries"][0]["params"]["port"], 4);
        let acl = json!({"op":"table-add","table":"acl","match":"0x0050&&&0xffff","action":"drop","priority":5});
        answer(&s, acl).unwrap();
        let rng = json!({"op":"table-add","table":"acl","match":"1000..2000","action":"forward","params":["1"],"priority":1});
        answer(&s, rng).unwrap();
        let d = answer(&s, json!({"op":"table-dump","table":"acl"})).unwrap();
        assert_eq!(d["entries"].as_array().unwrap().len(), 2);
        let del = json!({"op":"table-del","table":"routes","match":"10.0.0.0/8"});
        assert_eq!(answer(&s, del.clone()).unwrap(), json!("deleted"));
        assert!(answer(&s, del).unwrap_err().contains("no such entry"));
        let dflt = json!({"op":"table-default","table":"routes","action":"forward","params":["9"]});
        assert_eq!(answer(&s, dflt).unwrap(), json!("default set"));
        let d = answer(&s, json!({"op":"table-dump","table":"routes"})).unwrap();
        assert_eq!(d["default"], json!({"action": "forward", "params": {"port": 9}}));
        assert_eq!(
            answer(&s, json!({"op":"table-clear","table":"acl"})).unwrap(),
            json!("cleared")
        );
        let list = answer(&s, json!({"op":"table-list"})).unwrap();
        let names: Vec<_> = list.as_array().unwrap().iter().map(|t| t["name"].clone()).collect();
        assert_eq!(names, [json!("acl"), json!("routes")]);
        assert_eq!(list[0]["entries"], 0);
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        let s = set();
        let e = |v: Value| answer(&s, v).unwrap_err();
        assert_eq!(e(json!({"op":"table-dump","table":"nope"})), "no table named `nope`");
        assert!(e(json!({"op":"table-add","table":"routes","match":"10.0.0.0/40","action":"forward","params":["1"]})).contains("prefix length 40"));
        assert!(e(json!({"op":"table-add","table":"routes","match":"10.0.0.0/8","action":"fly","params":[]})).contains("not an action"));
        assert!(e(json!({"op":"table-add","table":"routes","match":"10.0.0.0/8","action":"forward","params":[]})).contains("takes 1 parameter"));
        assert!(e(json!({"op":"table-add","table":"routes","match":"10.0.0.0/8","action":"forward","params":["70000"]})).contains("wider than 16 bits"));
        assert!(e(json!({"op":"table-add","table":"routes","match":"1.2.3.4.5/8","action":"forward","params":["1"]})).contains("not a number"));
        assert!(e(
            json!({"op":"table-add","table":"acl","match":"0x123456&&&0xffff","action":"drop"})
        )
        .contains("does not fit"));
    }

    /// The shapes are the control API's: `match` for the key, defaults for `params` and
    /// `priority`, unknown fields refused.
    #[test]
    fn request_shapes_mirror_the_control_api() {
        assert_eq!(
            req(json!({"op":"table-add","table":"t","match":"1","action":"a"})),
            TableRequest::TableAdd(TableEntrySpec {
                table: "t".into(),
                matches: "1".into(),
                action: "a".into(),
                params: vec![],
                priority: 0,
            })
        );
        let bad = serde_json::from_value::<TableRequest>(
            json!({"op":"table-del","table":"t","match":"1","extra":2}),
        );
        assert!(bad.unwrap_err().to_string().contains("extra"));
        let bad = serde_json::from_value::<TableRequest>(
            json!({"op":"table-add","table":"t","matches":"1","action":"a"}),
        );
        assert!(bad.is_err());
        for op in TABLE_OPS {
            let v = json!({"op": op, "table": "t", "match": "1", "action": "a"});
            let r = serde_json::from_value::<TableRequest>(v.clone());
            // Every op name parses as a table request (the fields may not fit all of them).
            if let Err(e) = r {
                assert!(!e.to_string().contains("unknown variant"), "{op}: {e}");
            }
        }
    }
}
