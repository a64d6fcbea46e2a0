//! Tables on the control API and the command line: match keys and parameters as text, entries
//! as JSON, and `hotplane table list|dump|add|del|clear|default`.

use hotplane_control::api::{Client, Request};
use hotplane_tables::{MatchKind, MatchSpec, Table, TableEntry, TableSet};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::path::Path;

/// A number or address as big-endian bytes of exactly `width` bytes.
fn value_bytes(text: &str, width: usize) -> Result<Vec<u8>, String> {
    let t = text.trim();
    let bytes = if let Ok(ip) = t.parse::<IpAddr>() {
        match ip {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        }
    } else if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        let h = if h.len() % 2 == 1 { format!("0{h}") } else { h.to_string() };
        hex::decode(&h).map_err(|_| format!("`{t}` is not hex"))?
    } else {
        let v: u128 = t.parse().map_err(|_| format!("`{t}` is not a number, address or 0x hex"))?;
        let b = v.to_be_bytes();
        let first = b.iter().position(|&x| x != 0).unwrap_or(15);
        b[first..].to_vec()
    };
    if bytes.len() > width {
        let spare = bytes.len() - width;
        if bytes[..spare].iter().any(|&b| b != 0) {
            return Err(format!("`{t}` does not fit in {width} bytes"));
        }
        return Ok(bytes[spare..].to_vec());
    }
    let mut out = vec![0u8; width - bytes.len()];
    out.extend_from_slice(&bytes);
    Ok(out)
}

/// Parse a match key for `table` (see `Request::TableAdd`).
pub fn parse_match(table: &Table, text: &str) -> Result<MatchSpec, String> {
    let cfg = table.config();
    let w = cfg.key_bytes();
    let t = text.trim();
    if let Some((v, m)) = t.split_once("&&&") {
        return Ok(MatchSpec::Ternary { value: value_bytes(v, w)?, mask: value_bytes(m, w)? });
    }
    if let Some((lo, hi)) = t.split_once("..") {
        let n = |s: &str| -> Result<u64, String> {
            let b = value_bytes(s, 8)?;
            Ok(u64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
        };
        return Ok(MatchSpec::Range { lo: n(lo)?, hi: n(hi)? });
    }
    if let Some((v, len)) = t.rsplit_once('/') {
        let len: u32 = len.trim().parse().map_err(|_| format!("`{len}` is not a prefix length"))?;
        return Ok(MatchSpec::Lpm { prefix: value_bytes(v, w)?, len });
    }
    let v = value_bytes(t, w)?;
    Ok(match cfg.kind {
        MatchKind::Lpm => MatchSpec::Lpm { prefix: v, len: w as u32 * 8 },
        _ => MatchSpec::Exact(v),
    })
}

/// Action parameters (decimal or 0x hex, one per parameter) as data words.
pub fn parse_params(table: &Table, action: &str, params: &[String]) -> Result<Vec<u64>, String> {
    let spec = table
        .config()
        .actions
        .iter()
        .find(|a| a.name == action)
        .ok_or_else(|| format!("`{action}` is not an action of table `{}`", table.name()))?;
    if params.len() != spec.params.len() {
        return Err(format!(
            "action `{action}` takes {} parameter(s) ({}), got {}",
            spec.params.len(),
            spec.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
            params.len()
        ));
    }
    let mut words = vec![];
    for (p, text) in spec.params.iter().zip(params) {
        let b =
            value_bytes(text, p.words() * 8).map_err(|e| format!("parameter `{}`: {e}", p.name))?;
        if p.bits < 64
            && u64::from_be_bytes(b[b.len() - 8..].try_into().unwrap_or([0; 8])) >> p.bits != 0
        {
            return Err(format!("parameter `{}`: `{text}` is wider than {} bits", p.name, p.bits));
        }
        words.extend(b.chunks(8).map(|c| u64::from_be_bytes(c.try_into().unwrap_or([0; 8]))));
    }
    Ok(words)
}

fn hex_of(b: &[u8]) -> String {
    format!("0x{}", hex::encode(b))
}

/// A match key as text (the form `parse_match` reads).
pub fn match_text(m: &MatchSpec) -> String {
    let addr = |b: &[u8]| match b.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(b).unwrap_or_default()).to_string(),
        16 => IpAddr::from(<[u8; 16]>::try_from(b).unwrap_or_default()).to_string(),
        _ => hex_of(b),
    };
    match m {
        MatchSpec::Exact(v) => hex_of(v),
        MatchSpec::Lpm { prefix, len } => format!("{}/{len}", addr(prefix)),
        MatchSpec::Ternary { value, mask } => format!("{}&&&{}", hex_of(value), hex_of(mask)),
        MatchSpec::Range { lo, hi } => format!("{lo}..{hi}"),
    }
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
        Request::TableAdd { table: name, matches, action, params, priority }
        | Request::TableModify { table: name, matches, action, params, priority } => {
            let modify = matches!(req, Request::TableModify { .. });
            table(name).and_then(|t| {
                let m = parse_match(&t, matches)?;
                let data = parse_params(&t, action, params)?;
                let r = if modify {
                    t.modify(&m, *priority, action, &data)
                } else {
                    t.insert(&m, *priority, action, &data)
                };
                r.map_err(|e| format!("table `{name}`, {}: {e}", match_text(&m)))?;
                Ok(json!(if modify { "modified" } else { "added" }))
            })
        }
        Request::TableDel { table: name, matches, priority } => table(name).and_then(|t| {
            let m = parse_match(&t, matches)?;
            t.delete(&m, *priority)
                .map_err(|e| format!("table `{name}`, {}: {e}", match_text(&m)))?;
            Ok(json!("deleted"))
        }),
        Request::TableClear { table: name } => table(name).map(|t| {
            t.clear();
            json!("cleared")
        }),
        Request::TableDefault { table: name, action, params } => table(name).and_then(|t| {
            let data = parse_params(&t, action, params)?;
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
    use hotplane_tables::{ActionSpec, TableConfig};

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
