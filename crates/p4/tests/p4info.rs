//! P4Info: every `tests/p4/NAME.p4info.txt` is what `NAME.p4` generates, byte for byte. Those
//! files are p4c's output for the tutorial programs (`basic.p4`, `basic_tunnel.p4`): the ids
//! (prefix and Jenkins hash), aliases, ordering and layout all match p4c's.

use std::path::{Path, PathBuf};

#[test]
fn p4info_matches_p4c_for_the_tutorial_programs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/p4");
    let mut expected: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/p4")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".p4info.txt"))
        .collect();
    expected.sort();
    assert!(expected.len() >= 2, "{expected:?}");
    for want in expected {
        let name = want.file_name().unwrap().to_string_lossy().replace(".p4info.txt", ".p4");
        let ir =
            hotplane_p4::compile_file(&dir.join(&name), &[], &[]).unwrap_or_else(|e| panic!("{e}"));
        let got = hotplane_p4::p4info::text(&ir).expect("p4info");
        let want_text = std::fs::read_to_string(&want).unwrap();
        if got != want_text {
            let line = got.lines().zip(want_text.lines()).position(|(a, b)| a != b);
            panic!(
                "{name}: P4Info differs from {} at line {:?}\n{got}",
                want.display(),
                line.map(|l| l + 1)
            );
        }
    }
}

#[test]
fn annotations_name_and_id_are_honoured() {
    let src = r#"
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> f; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control C(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    @name("renamed") action a(bit<8> v) { h.h.f = v; }
    @id(0x42) @name(".global_t") table t { key = { h.h.f: exact @name("field"); } actions = { a; } }
    apply { t.apply(); }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#;
    let ir = hotplane_p4::compile_source("names.p4", src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let text = hotplane_p4::p4info::text(&ir).expect("p4info");
    assert!(text.contains("id: 33554498\n    name: \"global_t\""), "{text}"); // 0x02000042
    assert!(text.contains("name: \"I.renamed\""), "{text}");
    assert!(text.contains("name: \"field\""), "{text}");
    // The runtime knows the table by the same name.
    let qsbr = hotplane_core::Qsbr::new();
    let p = hotplane_p4::exec::Pipeline::new(ir, &qsbr).expect("pipeline");
    assert!(p.objects.table("global_t").is_ok());
}

/// `hotplane push --p4` bundles local includes: the bundled text, compiled with only the
/// built-in includes (as a node does), is the same program as the files compiled in place.
#[test]
fn a_bundled_program_is_the_program_its_files_make() {
    let dir = std::env::temp_dir().join(format!("hotplane-bundle-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    let basic = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/p4/basic.p4"),
    )
    .unwrap();
    // Split basic.p4: its headers go to lib/headers.p4 (found through an include directory),
    // which includes core.p4 itself; a guarded second include and an include of a file that
    // does not exist, in an inactive #if, stay harmless.
    let split = basic.find("struct metadata").expect("basic.p4 has its metadata struct");
    let (head, tail) = basic.split_at(split);
    let head = head.replace("#include <v1model.p4>", "");
    std::fs::write(
        dir.join("lib/headers.p4"),
        format!("#ifndef HEADERS\n#define HEADERS\n{head}\n#endif\n"),
    )
    .unwrap();
    let main = format!(
        "#include \"headers.p4\"\n#include \"headers.p4\"\n#include <v1model.p4>\n#if 0\n#include \"missing.p4\"\n#endif\n{tail}"
    );
    std::fs::write(dir.join("main.p4"), main).unwrap();
    let includes = vec![dir.join("lib")];
    let in_place =
        hotplane_p4::compile_file(&dir.join("main.p4"), &includes, &[]).expect("files compile");
    let bundled = hotplane_p4::preprocess::bundle(&dir.join("main.p4"), &includes).expect("bundle");
    assert!(!bundled.contains("\"headers.p4\""), "local includes are inlined");
    assert!(bundled.contains("#include <v1model.p4>"), "built-in includes stay");
    assert!(bundled.contains("#include \"missing.p4\""), "an unresolved include stays");
    let sent = hotplane_p4::compile_source("pushed.p4", &bundled, &[]).expect("bundle compiles");
    assert_eq!(hotplane_p4::p4info::text(&sent), hotplane_p4::p4info::text(&in_place));
    // Without the include directory the file is not found and the line is kept: the node
    // would then refuse it, naming the file.
    let alone = hotplane_p4::preprocess::bundle(&dir.join("main.p4"), &[]).expect("bundle");
    let err = hotplane_p4::compile_source("pushed.p4", &alone, &[]).unwrap_err().to_string();
    assert!(err.contains("headers.p4"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Controller headers become `controller_packet_metadata`, named by their annotation and with
/// p4c's ids: the hash of the header type's name (ONOS's p4c-built P4Infos give
/// `packet_in_t` 80671331 and `packet_out_t` 75327753), placed before the registers.
#[test]
fn controller_headers_are_packet_metadata_with_p4c_ids() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/p4");
    let ir = hotplane_p4::compile_file(&dir.join("packet_io.p4"), &[], &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let text = hotplane_p4::p4info::text(&ir).expect("p4info");
    let at = text.find("controller_packet_metadata").expect("controller headers");
    let tail = &text[at..];
    for (id, name) in [(80671331, "packet_in"), (75327753, "packet_out")] {
        let want = format!("id: {id}\n    name: \"{name}\"\n    alias: \"{name}\"\n");
        assert!(tail.contains(&want), "{tail}");
    }
    assert!(tail.contains("name: \"ingress_port\"\n    bitwidth: 9"), "{tail}");
    let headers = hotplane_p4::p4info::controller_headers(&ir).unwrap();
    assert_eq!(headers.len(), 2);
    assert_eq!(headers[0].bits(), 16);
    assert_eq!(headers[1].fields[0], ("egress_port".to_string(), 9));
}

/// Controller header fields take their `@id`; the others the lowest ids left, from 1 (p4c).
#[test]
fn controller_header_field_ids_follow_their_id_annotations() {
    let src = r#"
#include <core.p4>
#include <v1model.p4>
@controller_header("packet_in")
header packet_in_t { bit<8> a; @id(1) bit<8> b; bit<16> c; }
struct hs { packet_in_t p; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { transition accept; }
}
control C(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.p); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#;
    let ir = hotplane_p4::compile_source("ids.p4", src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let headers = hotplane_p4::p4info::controller_headers(&ir).unwrap();
    assert_eq!(headers[0].ids, vec![2, 1, 3]);
    let text = hotplane_p4::p4info::text(&ir).expect("p4info");
    assert!(text.contains("id: 2\n    name: \"a\""), "{text}");
    // Two fields with one id, or an id of 0, are refused.
    for bad in ["@id(1) bit<8> a; @id(1) bit<8> b;", "@id(0) bit<8> a; bit<8> b;"] {
        let src = src.replace("bit<8> a; @id(1) bit<8> b;", bad);
        let ir = hotplane_p4::compile_source("ids.p4", &src, &[]).unwrap();
        assert!(hotplane_p4::p4info::text(&ir).is_err(), "{bad}");
    }
}

/// Digests become P4Info `digests` as p4c writes them: named after their struct type, with
/// the hash of that name as id (p4c gives `test_digest_t` 387015589) and the struct's members
/// in `type_info`; a list of values is a tuple. The data plane's records carry the same id.
#[test]
fn digests_are_listed_with_p4c_ids_and_their_types() {
    let src = r#"
#include <core.p4>
#include <v1model.p4>
header e_t { bit<48> dst; bit<48> src; }
struct test_digest_t { bit<48> mac; bool seen; bit<9> port; }
struct hs { e_t e; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.e); transition accept; }
}
control C(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    apply {
        digest<test_digest_t>(1, { h.e.src, true, sm.ingress_port });
        digest(1, { h.e.dst, sm.ingress_port });
    }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.e); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#;
    let ir = hotplane_p4::compile_source("digests.p4", src, &[]).unwrap_or_else(|e| panic!("{e}"));
    let ids = hotplane_p4::p4info::digest_ids(&ir);
    let names: Vec<_> = ids.iter().map(|(d, id)| (d.name.as_str(), d.is_struct, *id)).collect();
    let tuple_id = names.iter().find(|n| n.0 == "digest_0").expect("the list's digest").2;
    assert!(names.contains(&("test_digest_t", true, 387015589)), "{names:?}");
    assert_eq!(tuple_id >> 24, 0x17);
    let text = hotplane_p4::p4info::text(&ir).expect("p4info");
    let digests = &text[text.find("digests {").expect("digests")..];
    assert!(digests.contains("id: 387015589\n    name: \"test_digest_t\""), "{digests}");
    assert!(digests.contains("struct {\n      name: \"test_digest_t\""), "{digests}");
    assert!(digests.contains("tuple {\n      members {\n        bitstring {"), "{digests}");
    let info = &text[text.find("type_info {").unwrap()..];
    assert!(info.contains("key: \"test_digest_t\""), "{info}");
    assert!(info.contains("name: \"seen\"\n        type_spec {\n          bool {"), "{info}");
    assert!(info.contains("name: \"port\"\n        type_spec {\n          bitstring {\n            bit {\n              bitwidth: 9"), "{info}");
}
