use crate::ast::*;
use crate::diag::SourceMap;
use crate::preprocess::BuiltinOnly;

fn parse_ok(src: &str) -> Program {
    let mut sources = SourceMap::default();
    match crate::parse_program(&mut sources, &mut BuiltinOnly, "t.p4", src, &[]) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

fn parse_err(src: &str) -> String {
    let mut sources = SourceMap::default();
    match crate::parse_program(&mut sources, &mut BuiltinOnly, "t.p4", src, &[]) {
        Ok(_) => panic!("parsed but should not have:\n{src}"),
        Err(e) => e.to_string(),
    }
}

fn find<'a>(p: &'a Program, name: &str) -> &'a Decl {
    p.decls.iter().find(|d| d.kind.name().is_some_and(|n| n.name == name)).expect("declared")
}

fn body_of<'a>(p: &'a Program, control: &str) -> &'a Block {
    match &find(p, control).kind {
        DeclKind::Control { body, .. } => body,
        other => panic!("not a control: {other:?}"),
    }
}

fn first_assign_rhs(b: &Block) -> &Expr {
    b.stmts
        .iter()
        .find_map(|s| match &s.kind {
            StmtKind::Assign { rhs, .. } => Some(rhs),
            _ => None,
        })
        .expect("an assignment")
}

#[test]
fn basic_program_and_architecture_files() {
    let src = include_str!("../../../../tests/p4/basic.p4");
    let p = parse_ok(src);
    let DeclKind::Control { locals, .. } = &find(&p, "MyIngress").kind else { panic!() };
    let table = locals.iter().find(|d| matches!(d.kind, DeclKind::Table { .. })).unwrap();
    let DeclKind::Table { props, .. } = &table.kind else { unreachable!() };
    let names: Vec<&str> = props.iter().map(|p| p.name.name.as_str()).collect();
    assert_eq!(names, ["key", "actions", "size", "default_action"]);
    let PropertyValue::Key(keys) = &props[0].value else { panic!() };
    assert_eq!(keys[0].match_kind.name, "lpm");
    assert!(matches!(find(&p, "main").kind, DeclKind::Instantiation { .. }));
    // v1model's declarations came through the preprocessor.
    assert!(matches!(find(&p, "V1Switch").kind, DeclKind::PackageType { .. }));
    assert!(matches!(find(&p, "register").kind, DeclKind::Extern { .. }));
}

#[test]
fn precedence_follows_p4_not_c() {
    let p = parse_ok(
        "control C(inout bit<8> x, inout bool b) { apply { b = x & 3 == 1; x = x >> 1 + 2; x = x | 1 ^ 2 & 4; } }",
    );
    let body = body_of(&p, "C");
    // `&` binds tighter than `==` in P4.
    let StmtKind::Assign { rhs, .. } = &body.stmts[0].kind else { panic!() };
    assert!(matches!(rhs.kind, ExprKind::Binary(BinOp::Eq, ..)));
    // `>>` is two adjacent `>` tokens, lower than `+`.
    let StmtKind::Assign { rhs, .. } = &body.stmts[1].kind else { panic!() };
    let ExprKind::Binary(BinOp::Shr, _, r, _) = &rhs.kind else { panic!("{rhs:?}") };
    assert!(matches!(r.kind, ExprKind::Binary(BinOp::Add, ..)));
    let StmtKind::Assign { rhs, .. } = &body.stmts[2].kind else { panic!() };
    assert!(matches!(rhs.kind, ExprKind::Binary(BinOp::BitOr, ..)));
}

#[test]
fn language_constructs_real_programs_use() {
    let src = r#"
#include <v1model.p4>
#define MAX_HOPS 9
typedef bit<32> addr_t;
enum bit<8> Proto { TCP = 6, UDP = 17 }
error { BadHops }
header srcRoute_t { bit<1> bos; bit<15> port; }
header h_t { bit<8> a; bit<8> b; }
struct hs { srcRoute_t[MAX_HOPS] routes; h_t h; }
struct m { bit<16> x; bool flag; }
const bit<8> K = 8w3;
bit<8> twice(in bit<8> v) { return v << 1; }
parser P(packet_in pk, out hs hdr, inout m meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) ports;
    state start {
        transition select(pk.lookahead<bit<1>>(), sm.ingress_port) {
            (1w1, _): parse_h;
            (0, 0x1 &&& 0x1): parse_routes;
            (_, 5 .. 9): reject;
            default: accept;
        }
    }
    state parse_routes {
        pk.extract(hdr.routes.next);
        verify(hdr.routes.last.port != 0, error.BadHops);
        transition select(hdr.routes.last.bos) { 1: parse_h; default: parse_routes; }
    }
    state parse_h { pk.extract(hdr.h); transition accept; }
}
control I(inout hs hdr, inout m meta, inout standard_metadata_t sm) {
    register<bit<32>>(1024) r;
    counter(64, CounterType.packets) c;
    direct_counter(CounterType.packets_and_bytes) dc;
    bit<32> tmp = 0;
    action set(bit<9> port, @ref bit<32> hits) { sm.egress_spec = port; hits = hits + 1; }
    action pop() { hdr.routes.pop_front(1); }
    @tableconfig(store="dynamic", locked=true)
    table t {
        key = { hdr.h.a: exact; hdr.h.b: ternary @name("b"); meta.x: range; }
        actions = { set; @defaultonly NoAction; }
        const default_action = NoAction();
        counters = dc;
        const entries = {
            (1, 2 &&& 0xf, 1 .. 5): set(1, 0);
            priority = 10: (2, _, _): NoAction();
        }
        size = 16;
    }
    apply {
        bit<16> v = (bit<16>) hdr.h.a ++ hdr.h.b;
        meta.x = v[15:8] ++ (bit<8>) K;
        hdr.h.a = meta.flag ? 8w1 : twice(hdr.h.b);
        hash(meta.x, HashAlgorithm.crc16, (bit<16>)0, { hdr.h.a, hdr.h.b }, (bit<32>)65536);
        r.read(tmp, (bit<32>) hdr.h.a);
        tmp += 1;
        r.write((bit<32>) hdr.h.a, tmp);
        if (hdr.routes[0].isValid() && !meta.flag) { pop(); } else if (sm.ingress_port == 1) { exit; }
        switch (t.apply().action_run) {
            set: { c.count(0); }
            NoAction:
            default: { mark_to_drop(sm); }
        }
        if (t.apply().hit) { return; }
        hdr.routes[1].setInvalid();
        hdr.routes.push_front(2);
        meta = { x = 1, flag = true };
    }
}
"#;
    let p = parse_ok(src);
    let DeclKind::Parser { states, locals, .. } = &find(&p, "P").kind else { panic!() };
    assert_eq!(states.len(), 3);
    assert!(matches!(locals[0].kind, DeclKind::ValueSet { .. }));
    let Some(Transition::Select { exprs, cases, .. }) = &states[0].transition else { panic!() };
    assert_eq!(exprs.len(), 2);
    // The first select expression is a generic method call with a type argument.
    let ExprKind::Call { type_args, .. } = &exprs[0].kind else { panic!() };
    assert_eq!(type_args.len(), 1);
    assert!(matches!(cases[1].keyset[1].kind, ExprKind::Mask(..)));
    assert!(matches!(cases[2].keyset[1].kind, ExprKind::Range(..)));
    assert!(matches!(cases[3].keyset[0].kind, ExprKind::Default));

    let DeclKind::Control { locals, body, .. } = &find(&p, "I").kind else { panic!() };
    let DeclKind::Instantiation { ty, .. } = &locals[0].kind else { panic!() };
    assert!(matches!(&ty.kind, TypeKind::Named { args, .. } if args.len() == 1));
    let set = locals.iter().find(|d| d.kind.name().is_some_and(|n| n.name == "set")).unwrap();
    let DeclKind::Action { params, .. } = &set.kind else { panic!() };
    assert_eq!(params[1].annotations[0].name.name, "ref");
    let table = locals.iter().find(|d| matches!(d.kind, DeclKind::Table { .. })).unwrap();
    assert_eq!(table.annotations[0].name.name, "tableconfig");
    assert_eq!(table.annotations[0].body.len(), 7);
    let DeclKind::Table { props, .. } = &table.kind else { unreachable!() };
    let entries = props.iter().find_map(|p| match &p.value {
        PropertyValue::Entries(e) => Some(e),
        _ => None,
    });
    let entries = entries.unwrap();
    assert_eq!(entries.len(), 2);
    assert!(entries[1].priority.is_some());
    // `(bit<16>) a ++ b`: the cast binds tighter than `++`.
    let StmtKind::Decl(d) = &body.stmts[0].kind else { panic!() };
    let DeclKind::Variable { init: Some(init), .. } = &d.kind else { panic!() };
    let ExprKind::Binary(BinOp::Concat, l, ..) = &init.kind else { panic!("{init:?}") };
    assert!(matches!(l.kind, ExprKind::Cast(..)));
    let rhs = first_assign_rhs(body);
    let ExprKind::Binary(BinOp::Concat, l, ..) = &rhs.kind else { panic!() };
    assert!(matches!(l.kind, ExprKind::Slice { .. }));
    let StmtKind::Switch { cases, .. } =
        &body.stmts.iter().find(|s| matches!(s.kind, StmtKind::Switch { .. })).unwrap().kind
    else {
        unreachable!()
    };
    // `NoAction:` falls through to `default:`.
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[1].labels.len(), 2);
}

#[test]
fn errors_carry_position_and_say_what_is_wrong() {
    let e = parse_err("header h_t {\n  bit<8> a\n}\n");
    assert!(e.contains("t.p4:3:1: error: expected `;`, found `}`"), "{e}");
    let e = parse_err("control C() { apply { x = ; } }");
    assert!(e.contains("t.p4:1:27") && e.contains("expected an expression"), "{e}");
    let e = parse_err("struct s { foo_t f; }");
    assert!(e.contains("unknown type `foo_t`"), "{e}");
    let e = parse_err("control C() { apply { 1 + 2; } }");
    assert!(e.contains("an expression alone does nothing"), "{e}");
    let e = parse_err("const bit<8> table = 1;");
    assert!(e.contains("reserved word `table`"), "{e}");
    let e = parse_err("control C() { table t { key = { } } }");
    assert!(e.contains("has no apply block"), "{e}");
    let deep = format!("const bit<8> x = {}1{};", "(".repeat(5000), ")".repeat(5000));
    assert!(parse_err(&deep).contains("the program nests deeper than 128"));
}
