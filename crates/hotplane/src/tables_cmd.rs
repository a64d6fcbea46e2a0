//! Tables on the control API and the command line: match keys and parameters as text, entries
//! as JSON, and `hotplane table list|dump|add|del|clear|default`.

use hotplane_control::api::{Client, Request};
use hotplane_tables::text::{match_text, parse_match, parse_params};
use hotplane_tables::{Table, TableEntry, TableSet};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::Ordering;

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

pub fn dump_json(t: &Table) -> Value {
    let (action, data) = t.default_data();
    json!({
        "table": t.name(),
        "entries": t.entries().iter().map(|e| entry_json(t, e)).collect::<Vec<_>>(),
        "default": {"action": action, "params": params_json(t, &action, &data)},
    })
}

/// Apply a table request of the control API; `None` for requests that are not about tables.
pub fn handle(set: &TableSet, req: &Request) -> Option<Result<Value, String>> {
    let table = |name: &str| set.get(name).map_err(|e| e.to_string());
    Some(match req {
        Request::TableList {} => Ok(list_json(set)),
        Request::TableDump { table: name } => table(name).map(|t| dump_json(&t)),
        Request::TableAdd(e) | Request::TableModify(e) => {
            let modify = matches!(req, Request::TableModify(_));
            let name = &e.table;
            table(name).and_then(|t| {
                let m = parse_match(&t, &e.matches).map_err(|e| e.to_string())?;
                let data = parse_params(&t, &e.action, &e.params).map_err(|e| e.to_string())?;
                let r = if modify {
                    t.modify(&m, e.priority, &e.action, &data)
                } else {
                    t.insert(&m, e.priority, &e.action, &data)
                };
                r.map_err(|err| format!("table `{name}`, {}: {err}", match_text(&m)))?;
                Ok(json!(if modify { "modified" } else { "added" }))
            })
        }
        Request::TableDel { table: name, matches, priority } => table(name).and_then(|t| {
            let m = parse_match(&t, matches).map_err(|e| e.to_string())?;
            t.delete(&m, *priority)
                .map_err(|e| format!("table `{name}`, {}: {e}", match_text(&m)))?;
            Ok(json!("deleted"))
        }),
        Request::TableClear { table: name } => table(name).map(|t| {
            t.clear();
            json!("cleared")
        }),
        Request::TableDefault { table: name, action, params } => table(name).and_then(|t| {
            let data = parse_params(&t, action, params).map_err(|e| e.to_string())?;
            t.set_default(action, &data).map_err(|e| e.to_string())?;
            Ok(json!("default set"))
        }),
        _ => return None,
    })
}

/// `hotplane table ...`: send one request and print the answer.
pub fn call(socket: &Path, req: &Request) -> anyhow::Result<()> {
    let v = Client::connect(socket)?.call(req)?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotplane_core::Qsbr;
    use hotplane_tables::{ActionSpec, MatchKind, TableConfig};

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

    fn req(v: Value) -> Request {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn add_dump_delete_through_requests() {
        let s = set();
        let add = req(
            json!({"op":"table-add","table":"routes","match":"10.0.0.0/8","action":"forward","params":["3"]}),
        );
        assert_eq!(handle(&s, &add).unwrap().unwrap(), json!("added"));
        let again = handle(&s, &add).unwrap().unwrap_err();
        assert!(again.contains("already exists"), "{again}");
        let d = handle(&s, &req(json!({"op":"table-dump","table":"routes"}))).unwrap().unwrap();
        assert_eq!(d["entries"][0]["match"], "10.0.0.0/8");
        assert_eq!(d["entries"][0]["params"]["port"], 3);
        let acl = req(
            json!({"op":"table-add","table":"acl","match":"0x0050&&&0xffff","action":"drop","priority":5}),
        );
        handle(&s, &acl).unwrap().unwrap();
        let rng = req(
            json!({"op":"table-add","table":"acl","match":"1000..2000","action":"forward","params":["1"],"priority":1}),
        );
        handle(&s, &rng).unwrap().unwrap();
        let d = handle(&s, &req(json!({"op":"table-dump","table":"acl"}))).unwrap().unwrap();
        assert_eq!(d["entries"].as_array().unwrap().len(), 2);
        let del = req(json!({"op":"table-del","table":"routes","match":"10.0.0.0/8"}));
        assert_eq!(handle(&s, &del).unwrap().unwrap(), json!("deleted"));
        assert!(handle(&s, &del).unwrap().unwrap_err().contains("no such entry"));
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        let s = set();
        let e = |v: Value| handle(&s, &req(v)).unwrap().unwrap_err();
        assert!(e(json!({"op":"table-dump","table":"nope"})).contains("no table named `nope`"));
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
}
