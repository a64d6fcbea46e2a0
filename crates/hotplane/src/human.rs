//! Answers of the data plane for people: tables and sentences instead of JSON (`--json` keeps
//! the JSON). Only the terminal reads these; nothing parses them.

use serde_json::Value;

/// An update's acknowledgements for people: what was applied, at which version. A refusal is
/// said by the error that follows (`refused_update`); fragments received are not news unless
/// nothing else came.
pub fn print_acks(acks: &Value) {
    let acks: Vec<&Value> = acks.as_array().into_iter().flatten().collect();
    let decided = acks.iter().any(|a| a["status"] == "applied" || a["status"] == "refused");
    if !decided {
        match acks.last() {
            Some(a) => println!(
                "{}: {} datagram(s) received",
                a["status"].as_str().unwrap_or("?"),
                a["received"]
            ),
            None => println!("sent (the node does not acknowledge it)"),
        }
    }
    for a in acks.iter().filter(|a| a["status"] == "applied") {
        let message = a["message"].as_str().filter(|m| !m.is_empty());
        println!(
            "applied: version {} (update {}, key {}){}",
            a["version"],
            a["seq"],
            a["key_id"],
            message.map(|m| format!(": {m}")).unwrap_or_default()
        );
    }
}

/// `push stats` for people: uptime, a line per port and worker, updates, and every other
/// counter that is not zero (`--json` has them all).
pub fn print_stats(s: &Value) {
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    println!("uptime {:.1} s", s["uptime_s"].as_f64().unwrap_or(0.0));
    println!(
        "{:<12} {:<9} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10} {:>7}",
        "port",
        "kind",
        "rx packets",
        "rx bytes",
        "rx drop",
        "tx packets",
        "tx bytes",
        "tx drop",
        "errors"
    );
    for p in s["ports"].as_array().into_iter().flatten() {
        println!(
            "{:<12} {:<9} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10} {:>7}",
            p["name"].as_str().unwrap_or("?"),
            match p["mode"].as_str() {
                Some(mode) => format!("{} ({mode})", p["kind"].as_str().unwrap_or("?")),
                None => p["kind"].as_str().unwrap_or("?").to_string(),
            },
            n(p, "rx_packets"),
            n(p, "rx_bytes"),
            n(p, "rx_dropped"),
            n(p, "tx_packets"),
            n(p, "tx_bytes"),
            n(p, "tx_dropped"),
            n(p, "errors")
        );
    }
    println!(
        "{:<12} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "worker", "packets", "dropped", "no route", "punted", "replicated", "panics"
    );
    for w in s["workers"].as_array().into_iter().flatten() {
        println!(
            "{:<12} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
            n(w, "worker"),
            n(w, "packets"),
            n(w, "dropped"),
            n(w, "no_route"),
            n(w, "punted"),
            n(w, "replicated"),
            n(w, "program_panics")
        );
    }
    let u = &s["updates"];
    let refused: Vec<String> = u["refused"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(reason, count)| format!("{reason} {count}"))
        .collect();
    println!(
        "updates: {} applied (p50 {} us, p99 {} us), refused: {}",
        n(u, "applied_count"),
        u["apply_us_p50"],
        u["apply_us_p99"],
        if refused.is_empty() { "none".to_string() } else { refused.join(", ") }
    );
    // Everything else that is not zero, the tables' own columns left out.
    let shown: &[(&str, &[&str])] = &[
        (
            "ports",
            &[
                "name",
                "kind",
                "mode",
                "rx_packets",
                "rx_bytes",
                "rx_dropped",
                "tx_packets",
                "tx_bytes",
                "tx_dropped",
                "errors",
            ],
        ),
        (
            "workers",
            &[
                "worker",
                "packets",
                "dropped",
                "no_route",
                "punted",
                "replicated",
                "program_panics",
                "running_versions",
            ],
        ),
        ("updates", &["applied_count", "apply_us_p50", "apply_us_p99", "refused"]),
    ];
    let mut others = Vec::new();
    for (section, v) in s.as_object().into_iter().flatten() {
        if matches!(section.as_str(), "slots" | "uptime_s") {
            continue;
        }
        let mut v = v.clone();
        if let Some((_, keys)) = shown.iter().find(|(name, _)| name == section) {
            let strip = |o: &mut Value| {
                if let Some(m) = o.as_object_mut() {
                    m.retain(|k, _| !keys.contains(&k.as_str()));
                }
            };
            match &mut v {
                Value::Array(items) => items.iter_mut().for_each(strip),
                o => strip(o),
            }
        }
        nonzero(section, &v, &mut others);
    }
    if !others.is_empty() {
        println!("other counters (not zero):");
        for (name, value) in others {
            println!("  {name:<44} {value}");
        }
    }
}

/// The numbers under `v` that are not zero, by dotted path (lists by index).
fn nonzero(path: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Number(x) if x.as_f64() != Some(0.0) => out.push((path.to_string(), x.to_string())),
        Value::Object(m) => {
            for (k, v) in m {
                nonzero(&format!("{path}.{k}"), v, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                nonzero(&format!("{path}.{i}"), v, out);
            }
        }
        _ => {}
    }
}

/// What an install, switch or remove did (`change`: "installed at pre"), with its warning.
pub fn print_slot_change(change: &str, v: &Value) {
    println!("{change}: version {}", v["version"]);
    if let Some(w) = v["warning"].as_str() {
        eprintln!("warning: {w}");
    }
}

/// Any other answer: a string as it is; an object as `key: value` lines (lists of objects
/// as tables); a list of objects as a table.
pub fn print_value(v: &Value) {
    let mut out = String::new();
    render(v, 0, &mut out);
    print!("{out}");
}

fn render(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if m.is_empty() => out.push_str(&format!("{pad}(nothing)\n")),
        Value::Object(m) => {
            for (k, v) in m {
                match v {
                    Value::Object(_) | Value::Array(_) if !is_empty(v) => {
                        out.push_str(&format!("{pad}{k}:\n"));
                        render(v, indent + 2, out);
                    }
                    v => out.push_str(&format!("{pad}{k}: {}\n", scalar(v))),
                }
            }
        }
        Value::Array(items) if items.iter().all(Value::is_object) && !items.is_empty() => {
            table(items, &pad, out)
        }
        Value::Array(items) if items.is_empty() => out.push_str(&format!("{pad}(none)\n")),
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Object(_) | Value::Array(_) => render(item, indent, out),
                    v => out.push_str(&format!("{pad}{}\n", scalar(v))),
                }
            }
        }
        v => out.push_str(&format!("{pad}{}\n", scalar(v))),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// A value on one line: strings without quotes (control characters, which a node's text may
/// carry, escaped: nothing reaches the terminal as a command), `-` for null, others as JSON.
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s
            .chars()
            .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
            .collect(),
        Value::Null => "-".into(),
        v => v.to_string(),
    }
}

/// A table cell: a list by its items' names (`MyIngress.forward, MyIngress.drop`), joined.
fn cell(v: &Value) -> String {
    match v {
        Value::Array(items) if !items.is_empty() => {
            // A key keeps its match kind (`hdr.ipv4.dstAddr:lpm`).
            let names: Vec<String> = items
                .iter()
                .map(|i| match (i.get("name"), i.get("match")) {
                    (Some(name), Some(kind)) => format!("{}:{}", scalar(name), scalar(kind)),
                    (Some(name), None) => scalar(name),
                    (None, _) if !i.is_object() && !i.is_array() => scalar(i),
                    (None, _) => i.to_string(),
                })
                .collect();
            names.join(", ")
        }
        v => scalar(v),
    }
}

/// Objects as rows under a header of their keys: what names a row (`id`, `name`, `target`)
/// first, the rest in order.
fn table(rows: &[Value], pad: &str, out: &mut String) {
    let mut keys: Vec<&str> = Vec::new();
    for r in rows {
        for k in r.as_object().into_iter().flat_map(|m| m.keys()) {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
    }
    let naming = |k: &&str| match *k {
        "id" => 0,
        "name" => 1,
        "target" => 2,
        _ => 3,
    };
    keys.sort_by_key(naming);
    let cells: Vec<Vec<String>> =
        rows.iter().map(|r| keys.iter().map(|k| cell(&r[*k])).collect()).collect();
    let widths: Vec<usize> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            cells.iter().map(|c| c[i].chars().count()).chain([k.len()]).max().unwrap_or(0)
        })
        .collect();
    let line = |items: Vec<&str>| {
        let parts: Vec<String> =
            items.iter().zip(&widths).map(|(s, w)| format!("{s:<w$}")).collect();
        format!("{pad}{}\n", parts.join("  ").trim_end())
    };
    out.push_str(&line(keys.clone()));
    for c in &cells {
        out.push_str(&line(c.iter().map(String::as_str).collect()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(v: Value) -> String {
        let mut out = String::new();
        render(&v, 0, &mut out);
        out
    }

    #[test]
    fn objects_become_lines_and_lists_of_objects_tables() {
        assert_eq!(
            shown(json!([{"id": 1, "name": "drop-everything"}, {"id": 12, "name": "x"}])),
            "id  name\n1   drop-everything\n12  x\n"
        );
        assert_eq!(
            shown(json!({"mode": "guarded", "positions": [], "published": 0, "last": null})),
            "last: -\nmode: guarded\npositions: []\npublished: 0\n"
        );
        assert_eq!(
            shown(json!([{"name": "t", "actions": [{"name": "a", "params": []}, {"name": "b"}]}])),
            "name  actions\nt     a, b\n",
            "lists in cells by their items' names"
        );
        assert_eq!(shown(json!({"error": "bad\n\u{1b}[2Jline"})), "error: bad\\n\\u{1b}[2Jline\n");
        assert_eq!(
            shown(json!([{"name": "t", "keys": [{"name": "dst", "match": "lpm"}]}])),
            "name  keys\nt     dst:lpm\n"
        );
        assert_eq!(
            shown(json!({"store": {"key": 7, "words": [1, 2]}})),
            "store:\n  key: 7\n  words:\n    1\n    2\n"
        );
    }
}
