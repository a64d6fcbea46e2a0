//! Programs the P4_16 spec makes invalid, each refused with a message that names the problem
//! (p4c's front-end refuses them too), and the valid programs next to them still compile.

/// A v1model program with `types` at the top, `plocals`/`states` in the parser and
/// `locals`/`apply` in the ingress control.
fn program(types: &str, plocals: &str, states: &str, locals: &str, apply: &str) -> String {
    format!(
        r#"#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> a; bit<8> b; }}
{types}
struct hs {{ h_t h; }}
struct m {{ }}
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {{
    {plocals}
    state start {{ p.extract(h.h); transition accept; }}
    {states}
}}
control C(inout hs h, inout m meta) {{ apply {{ }} }}
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {{
    {locals}
    apply {{ {apply} }}
}}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control D(packet_out p, in hs h) {{ apply {{ p.emit(h.h); }} }}
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#
    )
}

fn refused(text: &str, expected: &str) {
    match hotplane_p4::compile_source("invalid.p4", text, &[]) {
        Ok(_) => panic!("accepted, expected an error containing {expected:?}:\n{text}"),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(expected), "expected {expected:?}, got: {msg}");
        }
    }
}

fn compiles(text: &str) {
    if let Err(e) = hotplane_p4::compile_source("valid.p4", text, &[]) {
        panic!("refused: {e}\n{text}");
    }
}

const TABLE: &str = "action a() { } action b() { }";

#[test]
fn names_declared_twice_in_one_scope() {
    refused(&program("", "", "", "bit<8> x; bit<8> x;", "x = 1;"), "`x` is declared twice");
    refused(
        &program("", "", "", "action a() { } table a { actions = { NoAction; } }", ""),
        "twice",
    );
    refused(&program("", "", "", "action a(bit<8> v, bit<8> v) { }", ""), "`v` is declared twice");
    refused(&program("enum Colour { X, Y, X }", "", "", "", ""), "`X` is declared twice");
    refused(
        &program("", "", "state s1 { transition accept; } state s1 { transition accept; }", "", ""),
        "`s1` is declared twice",
    );
    refused(&program("", "", "", "", "bit<8> y = 1; bit<8> y = 2;"), "`y` is declared twice");
    refused(&program("struct h_t { bit<8> z; }", "", "", "", ""), "`h_t` is declared twice");
    // Shadowing in a nested block is allowed, as are names in different scopes.
    compiles(&program("", "", "", "bit<8> x;", "x = 1; { bit<8> x = 2; h.h.a = x; }"));
    compiles(&program("", "", "", "action a(bit<8> v) { h.h.a = v; }", "bit<8> v = 3; a(v);"));
}

#[test]
fn parser_states_accept_and_reject_are_built_in() {
    refused(
        &program("", "", "state accept { transition accept; }", "", ""),
        "`accept` is a built-in state",
    );
}

#[test]
fn switch_labels_are_unique_and_default_is_last() {
    let t = format!("{TABLE} table t {{ key = {{ h.h.a: exact; }} actions = {{ a; b; }} }}");
    let sw = |cases: &str| {
        program("", "", "", &t, &format!("switch (t.apply().action_run) {{ {cases} }}"))
    };
    refused(&sw("a: { } a: { }"), "appears twice");
    refused(&sw("default: { } a: { }"), "`default` must be the last label");
    compiles(&sw("a: { } default: { }"));
    compiles(&sw("a: b: { }"));
}

#[test]
fn a_table_lists_an_action_once() {
    let t = format!("{TABLE} table t {{ key = {{ h.h.a: exact; }} actions = {{ a; a; }} }}");
    refused(
        &program("", "", "", &t, "t.apply();"),
        "`a` is declared twice in the table's action list",
    );
}

#[test]
fn read_only_parameters_are_not_assigned() {
    refused(&program("", "", "", "action a(in bit<8> v) { v = 1; }", "a(h.h.a);"), "read-only");
    let t =
        "action a(bit<8> v) { v[3:0] = 1; } table t { key = { h.h.a: exact; } actions = { a; } }";
    refused(&program("", "", "", t, "t.apply();"), "`v` is a read-only parameter");
    refused(
        &program("bit<8> f(in bit<8> x) { x = x + 1; return x; }", "", "", "", "h.h.a = f(1);"),
        "`x` is a read-only parameter",
    );
    // inout and out parameters are written; a local that shadows the parameter is its own.
    compiles(&program("", "", "", "action a(inout bit<8> v) { v = 1; }", "a(h.h.a);"));
    compiles(&program(
        "bit<8> f(in bit<8> x) { { bit<8> x = 2; return x; } }",
        "",
        "",
        "",
        "h.h.a = f(1);",
    ));
}

#[test]
fn functions_return_on_every_path() {
    refused(
        &program(
            "bit<8> f(in bit<8> x) { if (x == 1) { return 2; } }",
            "",
            "",
            "",
            "h.h.a = f(h.h.b);",
        ),
        "can reach its end without returning a value",
    );
    compiles(&program("bit<8> f() { if (true) { return 1; } }", "", "", "", "h.h.a = f();"));
    compiles(&program(
        "bit<8> f(in bit<8> x) { if (x == 1) { return 2; } else { return 3; } }",
        "",
        "",
        "",
        "h.h.a = f(h.h.b);",
    ));
}

#[test]
fn values_fit_where_they_go() {
    let t = format!(
        "{TABLE} table t {{ key = {{ h.h.a: exact; }} actions = {{ a; }} const entries = {{ 0x1ff : a(); }} }}"
    );
    refused(&program("", "", "", &t, "t.apply();"), "does not fit in the 8-bit key");
    refused(&program("", "", "", "", "h.h.a = h.h.a << -1;"), "must not be negative");
    refused(&program("", "", "", "", "h.h.a = h.h.a << -8s2;"), "a shift amount must");
    // A positive signed constant is an amount like any other (p4c takes it as unsigned).
    compiles(&program("", "", "", "", "h.h.a = h.h.a << 8s2;"));
    refused(&program("header w_t { int x; } struct k_t { int y; }", "", "", "k_t k;", ""), "int");
}

/// Not invalid P4, but refused rather than metered wrongly: a range is stored as several
/// entries, each of which would meter at the entry's full rate.
#[test]
fn direct_meters_on_range_keys_are_refused() {
    let t = "direct_meter<bit<2>>(MeterType.packets) dm; action a() { } \
             table t { key = { h.h.a: range; } actions = { a; } meters = dm; }";
    refused(&program("", "", "", t, "t.apply();"), "direct meters on tables with range keys");
}

/// Hostile sizes: a value set is scanned per packet, so its size is bounded at compile time.
#[test]
fn huge_value_sets_are_refused() {
    refused(&program("", "value_set<bit<8>>(4097) vs;", "", "", ""), "1 to 4096 members");
    refused(&program("", "value_set<bit<8>>(4294967295) vs;", "", "", ""), "members");
    refused(&program("", "value_set<bit<8>>(0) vs;", "", "", ""), "1 to 4096 members");
}

#[test]
fn action_profiles_are_checked() {
    let table = |props: &str| {
        format!(
            "action set(bit<8> v) {{ h.h.b = v; }} action_profile(32w4) prof; \
             table t {{ key = {{ h.h.a: exact; }} actions = {{ set; }} {props} }}"
        )
    };
    compiles(&program("", "", "", &table("implementation = prof;"), "t.apply();"));
    compiles(&program(
        "",
        "",
        "",
        "action set(bit<8> v) { h.h.b = v; } table t { key = { h.h.a: exact; h.h.b: selector; } \
         actions = { set; } implementation = action_selector(HashAlgorithm.crc16, 32w8, 32w16); }",
        "t.apply();",
    ));
    refused(
        &program("", "", "", &table("implementation = set;"), "t.apply();"),
        "not an action profile",
    );
    refused(
        &program(
            "",
            "",
            "",
            "action set(bit<8> v) { h.h.b = v; } table t { key = { h.h.b: selector; } \
             actions = { set; } }",
            "t.apply();",
        ),
        "`selector` keys need",
    );
    refused(
        &program(
            "",
            "",
            "",
            &table("implementation = prof; entries = { 1 : set(2); }"),
            "t.apply();",
        ),
        "cannot have `entries`",
    );
    refused(
        &program(
            "",
            "",
            "",
            "action set(bit<8> v) { h.h.b = v; } table t { key = { h.h.a: exact; } \
             actions = { set; } implementation = action_selector(HashAlgorithm.random, 32w8, 32w16); }",
            "t.apply();",
        ),
        "not random",
    );
    refused(
        &program(
            "",
            "",
            "",
            "action set(bit<8> v) { h.h.b = v; } action other() { } action_profile(32w4) prof; \
             table t { key = { h.h.a: exact; } actions = { set; } implementation = prof; } \
             table u { key = { h.h.a: exact; } actions = { other; } implementation = prof; }",
            "t.apply(); u.apply();",
        ),
        "shares an action profile",
    );
    refused(&program("", "", "", "action_profile(32w0) prof;", ""), "an action profile holds 1 to");
}

#[test]
fn constructor_arguments_are_checked() {
    let sub = "control Add(inout bit<8> x)(bit<8> amount) { apply { x = x + amount; } }";
    let with = |locals: &str| program(sub, "", "", locals, "a.apply(h.h.a);");
    compiles(&with("Add(8w2) a;"));
    refused(&with("Add() a;"), "takes 1 constructor argument(s), 0 given");
    refused(&with("Add(8w1, 8w2) a;"), "takes 1 constructor argument(s), 2 given");
    refused(&with("Add(h.h.b) a;"), "expected a compile-time constant");
}

#[test]
fn generic_types_take_their_arguments() {
    let types = "struct S<T> { T x; }";
    compiles(&program(types, "", "", "S<bit<8>> v;", "v.x = h.h.a;"));
    refused(
        &program(types, "", "", "S<bit<8>, bit<8>> v;", ""),
        "`S` takes 1 type argument(s), 2 given",
    );
    refused(&program("struct R<T> { R<T> again; }", "", "", "R<bit<8>> v;", ""), "recursive");
}

#[test]
fn tuple_elements_are_reached_by_constant_index() {
    let locals = "tuple<bit<8>, bool> t = { 1, true };";
    compiles(&program("", "", "", locals, "h.h.a = t[0];"));
    refused(&program("", "", "", locals, "h.h.a = t[2];"), "index 2 is out of range");
    refused(&program("", "", "", locals, "h.h.a = t[h.h.b];"), "expected a compile-time constant");
}

/// A generic's fields see the top-level names and its own parameters only, not those of a
/// generic being instantiated around it; widths see a block's constructor parameters.
#[test]
fn names_in_generics_and_widths_resolve_where_declared() {
    let types = "typedef bit<16> T; struct In<X> { T a; X b; } struct Out<T> { In<bit<8>> i; }";
    // In<bit<8>>.a is bit<16> (the typedef), also when first made inside Out<bit<32>>.
    compiles(&program(types, "", "", "Out<bit<32>> v; In<bit<8>> w;", "w.a = 16w0xffff;"));
    refused(&program(types, "", "", "Out<bit<32>> v; In<bit<8>> w;", "w.a = 32w1;"), "bit<16>");
    let sub = "const bit<32> W = 8; control Wide(inout bit<8> x)(bit<32> W) { bit<W> v; \
               apply { v = 16w1; x = v[7:0]; } }";
    compiles(&program(sub, "", "", "Wide(16) w;", "w.apply(h.h.a);"));
    let named = "control N(inout bit<8> x)(bit<8> a = 1, bit<8> b = 2) { apply { x = a + b; } }";
    refused(&program(named, "", "", "N(b = 5) n;", "n.apply(h.h.a);"), "given in order");
}
