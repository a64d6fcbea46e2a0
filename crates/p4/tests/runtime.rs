//! Runtime JSON (the p4lang tutorials' `sN-runtime.json`): entries load, modify and delete by
//! table and action name; a dump loads back into the same entries; mistakes are errors that
//! name the entry and what is wrong.

use hotplane_core::Qsbr;
use hotplane_p4::exec::Pipeline;
use hotplane_p4::runtime::{dump, load};
use serde_json::Value;

fn tables_p4(qsbr: &Qsbr) -> Pipeline {
    let text = include_str!("../../../tests/p4/tables.p4");
    let ir = hotplane_p4::compile_source("tables.p4", text, &[]).unwrap_or_else(|e| panic!("{e}"));
    Pipeline::new(ir, qsbr).expect("pipeline")
}

const ENTRIES: &str = r#"{"table_entries": [
    {"table": "Ing.by_kind", "match": {"hdr.probe.kind": 5}, "action_name": "Ing.nop"},
    {"table": "Ing.by_kind", "match": {"hdr.probe.kind": 6},
     "action_name": "Ing.to_port", "action_params": {"port": 3}},
    {"table": "Ing.by_kind", "default_action": true,
     "action_name": "Ing.to_port", "action_params": {"port": 7}},
    {"table": "Ing.classify", "match": {"hdr.probe.a": [7, 255], "hdr.probe.b": [0, 127]},
     "priority": 5, "action_name": "Ing.set_tag", "action_params": {"tag": 4660}},
    {"table": "classify", "match": {"hdr.probe.b": [256, 511]},
     "priority": 2, "action_name": "set_tag", "action_params": {"tag": "0x10"}},
    {"table": "Ing.routes", "match": {"hdr.probe.kind": 2, "hdr.probe.addr": ["10.1.0.0", 16]},
     "action_name": "Ing.set_tag", "action_params": {"tag": 22}},
    {"table": "Ing.counting", "match": {"hdr.probe.addr": "10.0.0.1"},
     "action_name": "Ing.count_in", "action_params": {"n": 0}}
]}"#;

/// Every table's dump, counters left out, in a stable order.
fn dumps(p: &Pipeline) -> Vec<Value> {
    let mut all: Vec<Value> = p
        .objects
        .tables
        .iter()
        .flat_map(|t| dump(t)["table_entries"].as_array().cloned().unwrap_or_default())
        .map(|mut e| {
            if let Some(o) = e.as_object_mut() {
                o.remove("counters");
            }
            e
        })
        .collect();
    all.sort_by_key(|e| e.to_string());
    all
}

#[test]
fn a_dump_loads_back_into_the_same_entries() {
    let qsbr = Qsbr::new();
    let p = tables_p4(&qsbr);
    let loaded = load(&p, ENTRIES).expect("load");
    assert_eq!((loaded.entries, loaded.defaults), (6, 1));
    let first = dumps(&p);
    let by_kind = first.iter().filter(|e| e["table"] == "Ing.by_kind").count();
    assert_eq!(by_kind, 3, "two entries and the default: {first:#?}");
    let route = first
        .iter()
        .find(|e| e["table"] == "Ing.routes" && e.get("default_action").is_none())
        .expect("route");
    assert_eq!(route["match"]["hdr.probe.addr"], serde_json::json!(["0xa010000", 16]));
    assert_eq!(route["match"]["hdr.probe.kind"], 2);

    // Const entries are the program's; everything else reloads into a fresh pipeline.
    let again = tables_p4(&qsbr);
    let doc = serde_json::json!({ "table_entries": first
        .iter()
        .filter(|e| e["table"] != "Ing.fixed")
        .cloned()
        .collect::<Vec<_>>() });
    load(&again, &doc.to_string()).expect("reload");
    assert_eq!(dumps(&again), first);
}

#[test]
fn entries_modify_and_delete_by_name() {
    let qsbr = Qsbr::new();
    let p = tables_p4(&qsbr);
    load(&p, ENTRIES).expect("load");
    let r = load(
        &p,
        r#"{"table_entries": [
            {"type": "MODIFY", "table": "Ing.by_kind", "match": {"hdr.probe.kind": 5},
             "action_name": "Ing.to_port", "action_params": {"port": 1}},
            {"type": "DELETE", "table": "Ing.by_kind", "match": {"hdr.probe.kind": 6}},
            {"type": "DELETE", "table": "Ing.classify", "match": {"hdr.probe.b": [256, 511]},
             "priority": 2}
        ]}"#,
    )
    .expect("modify and delete");
    assert_eq!((r.entries, r.deleted), (1, 2));
    let d = dumps(&p);
    let kinds: Vec<_> =
        d.iter().filter(|e| e["table"] == "Ing.by_kind" && e.get("match").is_some()).collect();
    assert_eq!(kinds.len(), 1);
    assert_eq!(kinds[0]["action_params"]["port"], 1);
    assert_eq!(d.iter().filter(|e| e["table"] == "Ing.classify").count(), 2, "one entry + default");
}

#[test]
fn mistakes_name_the_entry_and_the_reason() {
    let qsbr = Qsbr::new();
    let p = tables_p4(&qsbr);
    let cases = [
        (r#"{"table": "Ing.nope", "action_name": "Ing.nop"}"#, "no table `Ing.nope`"),
        (
            r#"{"table": "Ing.by_kind", "match": {"hdr.probe.kind": 256}, "action_name": "Ing.nop"}"#,
            "does not fit",
        ),
        (
            r#"{"table": "Ing.by_kind", "match": {"hdr.x": 1}, "action_name": "Ing.nop"}"#,
            "no key field `hdr.x`",
        ),
        (
            r#"{"table": "Ing.by_kind", "match": {"hdr.probe.kind": 1}, "action_name": "Ing.to_port"}"#,
            "parameter `port` is missing",
        ),
        (
            r#"{"table": "Ing.by_kind", "match": {"hdr.probe.kind": 1}, "action_name": "Ing.zap"}"#,
            "no action `Ing.zap`",
        ),
        (
            r#"{"table": "Ing.by_kind", "type": "UPSERT", "match": {"hdr.probe.kind": 1}, "action_name": "Ing.nop"}"#,
            "INSERT, MODIFY, DELETE",
        ),
        (r#"{"table": "Ing.by_kind", "type": "DELETE", "match": {"hdr.probe.kind": 9}}"#, ""),
        (
            r#"{"table": "Ing.fixed", "match": {"hdr.probe.a": 1}, "action_name": "Ing.nop"}"#,
            "const entries",
        ),
    ];
    for (entry, want) in cases {
        let doc = format!(r#"{{"table_entries": [{entry}]}}"#);
        let err = load(&p, &doc).expect_err(entry).to_string();
        assert!(err.starts_with("table_entries[0]: "), "{err}");
        assert!(err.contains(want), "{entry}: {err}");
    }
}

/// A caller (the control socket, a P4Runtime server) can tell refusals apart by their type,
/// not by parsing the message: the entry's index and the reason are fields.
#[test]
fn mistakes_are_typed() {
    use hotplane_p4::exec::{EntryError, KeyError};
    use hotplane_p4::runtime::RuntimeJsonError;
    let qsbr = Qsbr::new();
    let p = tables_p4(&qsbr);
    let doc = r#"{"table_entries": [
        {"table": "Ing.by_kind", "match": {"hdr.probe.kind": 5}, "action_name": "Ing.nop"},
        {"table": "Ing.fixed", "match": {"hdr.probe.a": 1}, "action_name": "Ing.nop"}
    ]}"#;
    let err = load(&p, doc).expect_err("const entries");
    assert!(
        matches!(
            &err,
            RuntimeJsonError::TableEntry { index: 1, source: EntryError::ConstEntriesChanged { table } }
                if table == "Ing.fixed"
        ),
        "{err:?}"
    );
    let table = p.objects.table("by_kind").expect("by_kind");
    let wide = hotplane_p4::ir::KeyMatch::Prefix { value: 0x1ff, len: 9 };
    let err = table.delete(&[wide], None).expect_err("too wide");
    assert!(
        matches!(&err, EntryError::BadKey { problem: KeyError::PrefixTooWide { len: 9, .. }, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "table Ing.by_kind key hdr.probe.kind: 0x1ff/9 does not fit in bit<8>"
    );
    let err = load(&p, "{").expect_err("not JSON");
    assert!(matches!(err, RuntimeJsonError::Json(_)), "{err:?}");
}

/// A table with an action selector: its dump carries the members and groups its entries
/// name, and loads into a fresh pipeline (members and groups first), which then forwards as
/// the first did; loading it again with the entries-as-state rule changes nothing.
#[test]
fn profiles_dump_and_load_with_their_members_and_groups() {
    use hotplane_p4::runtime::{load_with, Inserts};
    let qsbr = Qsbr::new();
    let text = include_str!("../../../tests/p4/action_profiles.p4");
    let pipeline = || {
        let ir = hotplane_p4::compile_source("ap.p4", text, &[]).unwrap_or_else(|e| panic!("{e}"));
        Pipeline::new(ir, &qsbr).expect("pipeline")
    };
    let first = pipeline();
    let doc = r#"{
      "action_profile_members": [
        {"action_profile": "I.sel", "member_id": 10, "action_name": "I.set",
         "action_params": {"v": 192, "port": 4}},
        {"action_profile": "sel", "member_id": 11, "action_name": "set",
         "action_params": {"v": "0xc2", "port": 5}}
      ],
      "action_profile_groups": [
        {"action_profile": "I.sel", "group_id": 100, "members": [10, {"member_id": 11, "weight": 3}]}
      ],
      "table_entries": [
        {"table": "I.by_group", "match": {"hdr.h.key": 32}, "action_name": "$group",
         "action_params": {"id": 100}}
      ]}"#;
    load(&first, doc).expect("loads");
    let table = first.objects.table("I.by_group").unwrap();
    let dumped = dump(table);
    assert_eq!(dumped["action_profile_members"].as_array().unwrap().len(), 2, "{dumped}");
    assert_eq!(dumped["action_profile_groups"][0]["members"][1]["weight"], 3, "{dumped}");
    assert_eq!(dumped["table_entries"][0]["action_params"]["id"], 100, "{dumped}");
    let second = pipeline();
    load(&second, &dumped.to_string()).expect("the dump loads into a fresh pipeline");
    assert_eq!(dump(second.objects.table("I.by_group").unwrap()), dumped);
    load_with(&second, &dumped.to_string(), Inserts::State).expect("and again, as state");
    assert_eq!(dump(second.objects.table("I.by_group").unwrap()), dumped);
    // A member naming an action the profile's tables do not have is refused, by index.
    let bad = r#"{"action_profile_members": [
        {"action_profile": "I.prof", "member_id": 1, "action_name": "I.nope"}]}"#;
    let e = load(&second, bad).unwrap_err().to_string();
    assert!(e.starts_with("action_profile_members[0]") && e.contains("nope"), "{e}");
}
