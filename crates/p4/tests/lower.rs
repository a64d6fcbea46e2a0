//! Checking and lowering: what a program becomes, and the errors bad programs get.

use hotplane_p4::diag::SourceMap;
use hotplane_p4::ir::{Extern, KeyMatch, MatchKind, Stmt, Transition};
use hotplane_p4::preprocess::BuiltinOnly;

fn check(src: &str) -> Result<hotplane_p4::ir::Program, String> {
    let mut sources = SourceMap::default();
    hotplane_p4::check_program(&mut sources, &mut BuiltinOnly, "t.p4", src, &[])
        .map_err(|e| e.to_string())
}

/// Each `(from, to, want)`: `src` with `from` replaced by `to` is refused with `want` in the
/// message.
fn refused_variants(src: &str, cases: &[(&str, &str, &str)]) {
    for (from, to, want) in cases {
        assert!(src.contains(from), "{from}");
        let err = check(&src.replacen(from, to, 1)).err().unwrap_or_default();
        assert!(err.contains(want), "{want}: {err}");
    }
}

fn walk<'a>(stmts: &'a [Stmt], out: &mut Vec<&'a Stmt>) {
    for s in stmts {
        out.push(s);
        match s {
            Stmt::If(_, a, b) => {
                walk(a, out);
                walk(b, out);
            }
            Stmt::Scope(a) | Stmt::Block(a) => walk(a, out),
            Stmt::Call { body, copy_out } => {
                walk(body, out);
                walk(copy_out, out);
            }
            Stmt::Switch { cases, default, .. } => {
                for (_, b) in cases {
                    walk(b, out);
                }
                walk(default, out);
            }
            _ => {}
        }
    }
}

fn all(stmts: &[Stmt]) -> Vec<&Stmt> {
    let mut v = Vec::new();
    walk(stmts, &mut v);
    v
}

const BASIC: &str = include_str!("../../../tests/p4/basic.p4");

#[test]
fn basic_lowers_to_the_expected_pipeline() {
    let p = check(BASIC).unwrap();
    let names: Vec<(&str, u32)> = p.headers.iter().map(|h| (h.name.as_str(), h.bytes)).collect();
    assert_eq!(names, [("hdr.ethernet", 14), ("hdr.ipv4", 20)]);
    assert_eq!(
        p.states.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["start", "parse_ethernet", "parse_ipv4"]
    );
    let Transition::Select { keys, cases } = &p.states[1].transition else {
        panic!("select expected")
    };
    assert_eq!(keys[0].width, 16);
    assert_eq!(cases[0].0, vec![KeyMatch::Mask { value: 0x800, mask: 0xffff }]);
    assert_eq!(p.tables.len(), 1);
    let t = &p.tables[0];
    assert_eq!(t.name, "MyIngress.ipv4_lpm");
    assert_eq!(
        (t.keys[0].name.as_str(), t.keys[0].width, t.keys[0].kind),
        ("hdr.ipv4.dstAddr", 32, MatchKind::Lpm)
    );
    let actions: Vec<&str> =
        t.actions.iter().map(|&a| p.actions[a as usize].name.as_str()).collect();
    assert_eq!(actions, ["MyIngress.ipv4_forward", "MyIngress.drop", "NoAction"]);
    assert_eq!(p.actions[t.default_action as usize].name, "MyIngress.drop");
    let fwd = &p.actions[t.actions[0] as usize];
    assert_eq!(
        fwd.params.iter().map(|x| (x.name.as_str(), x.width)).collect::<Vec<_>>(),
        [("dstAddr", 48), ("port", 9)]
    );
    assert!(all(&p.ingress).iter().any(|s| matches!(s, Stmt::Apply { table: 0, .. })));
    let sums: Vec<_> = all(&p.compute_checksum)
        .into_iter()
        .filter_map(|s| match s {
            Stmt::Extern(Extern::Checksum { data, verify: false, .. }) => Some(data.len()),
            _ => None,
        })
        .collect();
    assert_eq!(sums, [11]);
    let emits =
        all(&p.deparser).iter().filter(|s| matches!(s, Stmt::Extern(Extern::Emit(_)))).count();
    assert_eq!(emits, 2);
}

#[test]
fn bad_programs_get_clear_errors() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "bit<8> x = hdr.ethernet.etherType;",
            "expected a value of type bit<8>, found bit<16>",
            "assignment width",
        ),
        (
            "hdr.ipv4.ttl = hdr.ipv4.ttl + hdr.ethernet.etherType;",
            "different types: bit<8> and bit<16>",
            "operand widths",
        ),
        ("nosuch.apply();", "`nosuch` is not declared", "unknown name"),
        ("if (hdr.ipv4.ttl) { }", "a condition must be bool", "condition type"),
        ("hdr.ipv4.nofield = 1;", "ipv4_t has no field `nofield`", "unknown field"),
        ("bit<8> y = hdr.ipv4.ttl[9:2];", "slice [9:2] is out of range", "slice range"),
        ("ipv4_forward(1);", "takes 2 arguments, 1 given", "argument count"),
        (
            "switch (hdr.ipv4.ttl) { 1: { } default: { } default: { } }",
            "more than one `default` label",
            "two defaults",
        ),
    ];
    for (stmt, want, what) in cases {
        let src = BASIC.replacen("ipv4_lpm.apply();", &format!("ipv4_lpm.apply(); {stmt}"), 1);
        let err = check(&src).expect_err(what);
        assert!(err.contains(want), "{what}: {err}");
        assert!(err.contains("t.p4:"), "{what}: no position in {err}");
    }
    let src = BASIC
        .replace("ipv4_forward;\n            drop;", "ipv4_forward;\n            no_such_action;");
    assert!(check(&src).unwrap_err().contains("no action named `no_such_action`"));
    let src = BASIC.replacen(
        "packet.extract(hdr.ethernet);",
        "NoAction(); packet.extract(hdr.ethernet);",
        1,
    );
    assert!(check(&src).unwrap_err().contains("actions cannot be called in a parser"));
    // `default` is a keyword; two actions may not share a control-plane name (the second
    // would have been merged into the first).
    let src = BASIC.replacen("action drop()", "action default()", 1);
    assert!(check(&src).unwrap_err().contains("reserved word `default`"));
    let src = BASIC.replacen("action drop()", "@name(\"ipv4_forward\") action drop()", 1);
    assert!(check(&src).unwrap_err().contains("conflicting control-plane name"));
    let src = BASIC.replace("V1Switch(", "V1Switch(\n    MyParser(),");
    assert!(check(&src).unwrap_err().contains("V1Switch takes 6 blocks, 7 given"));
}

#[test]
fn functions_registers_and_hash_lower_once() {
    let src = BASIC
        .replacen(
            "control MyIngress(",
            "bool small(in bit<8> x) { return x < 10; }\ncontrol MyIngress(",
            1,
        )
        .replacen(
            "action drop() {",
            "register<bit<32>>(16) seen;\n    action drop() {",
            1,
        )
        .replacen(
            "ipv4_lpm.apply();",
            "ipv4_lpm.apply();\n            if (small(hdr.ipv4.ttl)) { drop(); }\n            \
             bit<16> h;\n            hash(h, HashAlgorithm.crc16, 0, { hdr.ipv4.srcAddr }, 1024);\n            \
             seen.write((bit<32>) h, hdr.ipv4.srcAddr);",
            1,
        );
    let p = check(&src).unwrap();
    let stmts = all(&p.ingress);
    // The function's `return` writes a bool result that the `if` reads.
    assert!(stmts.iter().any(|s| matches!(s, Stmt::Return)));
    let hashes = stmts.iter().filter(|s| matches!(s, Stmt::Extern(Extern::Hash { .. }))).count();
    let writes =
        stmts.iter().filter(|s| matches!(s, Stmt::Extern(Extern::RegisterWrite { .. }))).count();
    assert_eq!((hashes, writes), (1, 1));
    assert_eq!(p.instances[0].name, "MyIngress.seen");
}

/// Entry priorities the spec (and p4c) refuse, each with the reason.
#[test]
fn bad_entry_priorities_are_refused() {
    let prio = include_str!("../../../tests/p4/priorities.p4");
    let cases: &[(&str, &str, &str)] = &[
        (
            "            0x1181            : o(2);",
            "            priority = 4: 0x1181 : o(2);",
            "entries of `const entries` cannot have priorities",
        ),
        (
            "            priority = 10: 0x1111 &&& 0x000f : s(1);",
            "            0x1111 &&& 0x000f : s(1);",
            "the first entry needs a priority when others have one",
        ),
        (
            "            priority = 1:  _                 : l(4);",
            "            priority = 0:  _ : l(4); _ : l(5);",
            "this entry's priority would be 0 - 1 (below zero)",
        ),
        (
            "        const entries = {\n            (0x1000 &&& 0xf000, 1) : x(1);",
            "        entries = {\n            priority = 2: (0x1000 &&& 0xf000, 1) : x(1);",
            "exact and lpm keys need no entry priorities",
        ),
        ("        priority_delta = 10;", "        priority_delta = 0;", "must be a positive"),
        (": n(3) @priority(1);", ": n(3) @priority(x);", "@priority takes one integer"),
    ];
    refused_variants(prio, cases);
}

/// What of varbit fields is not supported yet is refused with the reason.
#[test]
fn varbit_uses_not_supported_are_refused() {
    let src = include_str!("../../../tests/p4/varbit.p4");
    let cases: &[(&str, &str, &str)] = &[
        (
            "header opt_t { bit<8> kind; varbit<64> data; }",
            "header opt_t { varbit<64> data; bit<8> kind; }",
            "a varbit field is supported as the last field",
        ),
        (
            "header opt_t { bit<8> kind; varbit<64> data; }",
            "header opt_t { bit<8> kind; varbit<60> data; }",
            "with a maximum of whole bytes",
        ),
        ("hdr.a.kind = 0xaa;", "hdr.b.data = hdr.a.data;", "assigning it alone"),
        (
            "hdr.a.kind = 0xaa;",
            "if (hdr.a.data == hdr.len.op) { exit; }",
            "operands have different types",
        ),
        ("pkt.extract(hdr.b, 12);", "pkt.extract(hdr.b);", "extracted with its length"),
        ("pkt.extract(hdr.b, 12);", "pkt.extract(hdr.len, 12);", "for headers with a varbit"),
    ];
    refused_variants(src, cases);
}

/// Loops the language or the per-packet bound rules out are refused with the reason.
#[test]
fn bad_loops_are_refused() {
    let src = include_str!("../../../tests/p4/loops.p4");
    let cases: &[(&str, &str, &str)] = &[
        ("hdr.h.sum = 0xffff;", "break;", "belong inside a `for` loop"),
        (
            "hdr.h.sum = hdr.h.sum + (bit<16>)i;\n        }",
            "hdr.h.sum = hdr.h.sum + (bit<16>)i; continue; }\n        break;",
            "belong inside a `for` loop",
        ),
        ("for (bit<8> k in 3 .. 6)", "for (bit<8> k in 3 .. hdr.h.n)", "compile-time constant"),
        ("for (bit<8> k in 3 .. 6)", "for (bit<16> k in 0 .. 5000)", "at most 4096"),
        (
            "for (bit<8> j = 0; j < hdr.h.n; j = j + 1) {",
            "for (bit<8> j = 0; j < hdr.h.n; j = j + 1) for (bit<8> m = 0; m < 1; m = m + 1) {",
            "nested loops could run",
        ),
        (
            "            hdr.h.sum = 0xffff;",
            "            for (bit<8> z = 0; z < 2; z = z + 1) { triangle(); }",
            "loops itself",
        ),
    ];
    refused_variants(src, cases);
}

/// What the spec forbids in parsers, functions and actions is refused.
#[test]
fn statements_out_of_place_are_refused() {
    let src = include_str!("../../../tests/p4/functions.p4");
    let cases: &[(&str, &str, &str)] = &[
        (
            "state start { pkt.extract(hdr.p); transition accept; }",
            "state start { pkt.extract(hdr.p); exit; }",
            "`exit` is not allowed in a parser",
        ),
        ("    h.setInvalid();\n    return h;", "    exit;", "`exit` is not allowed in a function"),
        (
            "action twice(inout bit<8> x) { x = x + x; }",
            "action twice(inout bit<8> x) { x = x + x; sum.apply(x, 1, 2); }",
            "cannot be applied inside an action",
        ),
    ];
    refused_variants(src, cases);
}
