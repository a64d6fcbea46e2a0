//! A program replacing another takes over the state the two have in common: tables with the
//! same name, key and actions keep their entries (shared outright when their settings match,
//! copied when only size or store changed), `@ref` values written by the data plane included;
//! registers with the same name and shape keep their cells. Everything else starts fresh.

use hotplane_core::Qsbr;
use hotplane_p4::exec::{Carried, Pipeline};
use hotplane_p4::v1model::{Output, Replication, V1Switch};
use std::sync::Arc;

const TABLES_P4: &str = include_str!("../../../tests/p4/tables.p4");

fn compile(text: &str) -> hotplane_p4::ir::Program {
    hotplane_p4::compile_source("tables.p4", text, &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// ethernet (14 bytes) + probe: kind, a, b, addr, tag, count.
fn probe(kind: u8, a: u8, b: u16, addr: u32) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    p.extend([kind, a]);
    p.extend(b.to_be_bytes());
    p.extend(addr.to_be_bytes());
    p.extend([0u8; 4]);
    p
}

/// (egress port, tag, count) of the one packet `data` becomes.
fn run(sw: &mut V1Switch, qsbr: &Qsbr, data: &[u8]) -> (u32, u16, u16) {
    let mut reader = qsbr.register("test");
    let mut out: Vec<Output> = Vec::new();
    sw.process(data, 1, &Replication::default(), &reader.guard(), 0, &mut out);
    reader.quiescent();
    assert_eq!(out.len(), 1, "one packet out");
    let d = &out[0].data;
    (out[0].port, u16::from_be_bytes([d[22], d[23]]), u16::from_be_bytes([d[24], d[25]]))
}

const ENTRIES: &str = r#"{"table_entries": [
    {"table": "Ing.counting", "match": {"hdr.probe.addr": "10.0.0.1"},
     "action_name": "Ing.count_in", "action_params": {"n": 0}},
    {"table": "Ing.classify", "match": {"hdr.probe.a": [7, 255], "hdr.probe.b": [0, 127]},
     "priority": 5, "action_name": "Ing.set_tag", "action_params": {"tag": 4660}},
    {"table": "Ing.routes", "match": {"hdr.probe.kind": 2, "hdr.probe.addr": ["10.1.0.0", 16]},
     "action_name": "Ing.set_tag", "action_params": {"tag": 22}},
    {"table": "Ing.by_kind", "match": {"hdr.probe.kind": 5},
     "action_name": "Ing.nop", "action_params": {}}
]}"#;

#[test]
fn replacement_takes_over_matching_state() {
    let qsbr = Qsbr::new();
    let old = Arc::new(Pipeline::new(compile(TABLES_P4), &qsbr).expect("old pipeline"));
    hotplane_p4::runtime::load(&old, ENTRIES).expect("entries");
    let mut sw = V1Switch::new(Arc::clone(&old));
    for n in 1..=3 {
        assert_eq!(run(&mut sw, &qsbr, &probe(4, 0, 0, 0x0a00_0001)).2, n, "@ref counts");
    }
    assert_eq!(run(&mut sw, &qsbr, &probe(5, 0, 0, 0)).1, 0x0bad, "by_kind entry");

    // The new program: `classify` gets a size (copied), `by_kind` a third action (fresh).
    let text = TABLES_P4
        .replace(
            "default_action = set_tag(0xdead);",
            "size = 64; default_action = set_tag(0xdead);",
        )
        .replace("actions = { to_port; nop; }", "actions = { to_port; nop; set_tag; }");
    assert_ne!(text, TABLES_P4);
    let (new, report) = Pipeline::replacing(compile(&text), &old, &qsbr).expect("replacement");
    let carried = |t: &str| report.tables.iter().find(|(n, _)| n == t).map(|x| x.1);
    assert_eq!(carried("Ing.counting"), Some(Carried::Shared));
    assert_eq!(carried("Ing.routes"), Some(Carried::Shared));
    assert_eq!(carried("Ing.classify"), Some(Carried::Copied(1)));
    assert_eq!(carried("Ing.by_kind"), Some(Carried::Fresh));
    assert_eq!(carried("Ing.fixed"), Some(Carried::Fresh), "const entries come from the program");
    assert!(
        report.summary().contains("2 carried, 1 copied (1 entries), 2 new"),
        "{}",
        report.summary()
    );

    // The old program still runs, and shares `counting` with the new one from now on.
    assert_eq!(run(&mut sw, &qsbr, &probe(4, 0, 0, 0x0a00_0001)).2, 4);
    let new = Arc::new(new);
    let mut sw2 = V1Switch::new(Arc::clone(&new));
    assert_eq!(run(&mut sw2, &qsbr, &probe(4, 0, 0, 0x0a00_0001)).2, 5, "the @ref value carried");
    assert_eq!(run(&mut sw, &qsbr, &probe(4, 0, 0, 0x0a00_0001)).2, 6, "one table, two programs");
    assert_eq!(run(&mut sw2, &qsbr, &probe(1, 7, 50, 0)).1, 4660, "classify entry copied");
    assert_eq!(run(&mut sw2, &qsbr, &probe(1, 8, 50, 0)).1, 0xdead, "and nothing else");
    assert_eq!(run(&mut sw2, &qsbr, &probe(2, 0, 0, 0x0a01_0203)).1, 22, "routes carried");
    assert_eq!(run(&mut sw2, &qsbr, &probe(3, 0x10, 1, 0)).1, 0x1001, "const entries rebuilt");
    // by_kind started fresh: kind 5 now takes the default (to_port 9) instead of nop.
    let (port, tag, _) = run(&mut sw2, &qsbr, &probe(5, 0, 0, 0));
    assert_eq!((port, tag), (9, 0));
    // A copy is a copy: writing the new classify leaves the old one alone.
    hotplane_p4::runtime::load(
        &new,
        r#"{"table_entries": [{"table": "Ing.classify", "match": {"hdr.probe.a": [8, 255]},
            "priority": 1, "action_name": "Ing.set_tag", "action_params": {"tag": 1}}]}"#,
    )
    .expect("entry");
    assert_eq!(run(&mut sw2, &qsbr, &probe(1, 8, 50, 0)).1, 1);
    assert_eq!(run(&mut sw, &qsbr, &probe(1, 8, 50, 0)).1, 0xdead);
}

#[test]
fn a_changed_signature_starts_fresh() {
    let qsbr = Qsbr::new();
    let old = Pipeline::new(compile(TABLES_P4), &qsbr).expect("old pipeline");
    hotplane_p4::runtime::load(&old, ENTRIES).expect("entries");
    // A wider key field, a renamed key and a wider parameter: none of these can carry.
    let text = TABLES_P4
        .replace(
            "key = { hdr.probe.addr: exact; }",
            "key = { hdr.probe.addr: exact; hdr.probe.a: exact; }",
        )
        .replace(
            "hdr.probe.kind: exact; hdr.probe.addr: lpm;",
            "hdr.probe.a: exact; hdr.probe.addr: lpm;",
        )
        .replace(
            "action set_tag(bit<16> tag) { hdr.probe.tag = tag; }",
            "action set_tag(bit<15> tag) { hdr.probe.tag = (bit<16>)tag; }",
        );
    let (_, report) = Pipeline::replacing(compile(&text), &old, &qsbr).expect("replacement");
    let carried = |t: &str| report.tables.iter().find(|(n, _)| n == t).map(|x| x.1);
    // `classify` and `routes` use set_tag, whose parameter changed.
    for t in ["Ing.counting", "Ing.routes", "Ing.classify"] {
        assert_eq!(carried(t), Some(Carried::Fresh), "{t}");
    }
    assert_eq!(carried("Ing.by_kind"), Some(Carried::Shared), "unchanged");
}

#[test]
fn registers_with_the_same_shape_keep_their_cells() {
    use hotplane_p4::exec::InstanceRt;
    let src = include_str!("../../../tests/p4/v1model_features.p4");
    let compile = |text: &str| {
        hotplane_p4::compile_source("v1model_features.p4", text, &[])
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let register = |p: &Pipeline| {
        let i = p.objects.instance_index(&p.program, "hits").expect("register hits");
        match &p.objects.instances[i] {
            InstanceRt::Register(r) => Arc::clone(r),
            _ => panic!("hits is not a register"),
        }
    };
    let qsbr = Qsbr::new();
    let old = Pipeline::new(compile(src), &qsbr).expect("old");
    register(&old).write(3, 77);
    let (same, report) = Pipeline::replacing(compile(src), &old, &qsbr).expect("same shape");
    assert!(report.instances.iter().any(|n| n.ends_with("hits")), "{report:?}");
    assert_eq!(register(&same).read(3), 77);
    let resized = src.replace("register<bit<16>>(8) hits;", "register<bit<16>>(16) hits;");
    assert_ne!(resized, src);
    let (fresh, report) = Pipeline::replacing(compile(&resized), &old, &qsbr).expect("resized");
    assert!(!report.instances.iter().any(|n| n.ends_with("hits")), "{report:?}");
    assert_eq!(register(&fresh).read(3), 0);
}
