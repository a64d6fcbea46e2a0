//! hotplane's own `.proto` files against the upstream P4Runtime v1.5.0 files, for wire
//! equality: the same packages, messages, fields (number, name, type, label, oneof, packing,
//! deprecation), enums and RPCs. Comments, declaration order, `json_name` and language options
//! are free to differ.
//!
//! The upstream files come from the `finsy==0.30.0` wheel on PyPI (byte-identical to
//! p4lang/p4runtime v1.5.0), which `scripts/test.sh` downloads, checks by sha256 and unpacks;
//! it runs this test with `HOTPLANE_FINSY_PROTO` set to the wheel's `finsy/proto` directory.
//! Without it the test is ignored (and says so), never counted as passed.

use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorProto, FileDescriptorSet};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The P4Runtime files both sets have.
const FILES: [&str; 5] = [
    "p4/v1/p4runtime.proto",
    "p4/v1/p4data.proto",
    "p4/config/v1/p4info.proto",
    "p4/config/v1/p4types.proto",
    "google/rpc/status.proto",
];

fn compile(root: &Path) -> FileDescriptorSet {
    protox::compile(["p4/v1/p4runtime.proto"], [root])
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
}

/// Every wire fact of the files in `FILES`, as sorted lines.
fn facts(set: &FileDescriptorSet) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in set.file.iter().filter(|f| FILES.contains(&f.name())) {
        file_facts(f, &mut out);
    }
    out
}

fn file_facts(f: &FileDescriptorProto, out: &mut BTreeSet<String>) {
    let name = f.name();
    out.insert(format!("file {name} package {} syntax {}", f.package(), f.syntax()));
    let deps: BTreeSet<&String> = f.dependency.iter().collect();
    out.insert(format!("file {name} imports {deps:?} public {:?}", f.public_dependency));
    let scope = format!(".{}", f.package());
    for m in &f.message_type {
        message_facts(&scope, name, m, out);
    }
    for e in &f.enum_type {
        enum_facts(&scope, e, out);
    }
    for s in &f.service {
        for m in &s.method {
            out.insert(format!(
                "service {scope}.{} rpc {}({}{}) returns ({}{})",
                s.name(),
                m.name(),
                if m.client_streaming() { "stream " } else { "" },
                m.input_type(),
                if m.server_streaming() { "stream " } else { "" },
                m.output_type()
            ));
        }
    }
}

fn message_facts(scope: &str, file: &str, m: &DescriptorProto, out: &mut BTreeSet<String>) {
    let full = format!("{scope}.{}", m.name());
    let map_entry = m.options.as_ref().is_some_and(|o| o.map_entry());
    out.insert(format!("message {full} in {file} map_entry {map_entry}"));
    let oneofs: BTreeMap<i32, &str> =
        m.oneof_decl.iter().enumerate().map(|(i, o)| (i as i32, o.name())).collect();
    for o in oneofs.values() {
        out.insert(format!("message {full} oneof {o}"));
    }
    for fld in &m.field {
        let opts = fld.options.as_ref();
        out.insert(format!(
            "message {full} field {} {} {:?} {:?} {} oneof {:?} proto3_optional {} packed {:?} deprecated {} default {:?} extendee {:?}",
            fld.number(),
            fld.name(),
            fld.label(),
            fld.r#type(),
            fld.type_name(),
            fld.oneof_index.and_then(|i| oneofs.get(&i)),
            fld.proto3_optional(),
            opts.and_then(|o| o.packed),
            opts.is_some_and(|o| o.deprecated()),
            fld.default_value,
            fld.extendee,
        ));
    }
    for r in &m.reserved_range {
        out.insert(format!("message {full} reserved {}..{}", r.start(), r.end()));
    }
    for r in &m.reserved_name {
        out.insert(format!("message {full} reserved {r}"));
    }
    for r in &m.extension_range {
        out.insert(format!("message {full} extensions {}..{}", r.start(), r.end()));
    }
    for n in &m.nested_type {
        message_facts(&full, file, n, out);
    }
    for e in &m.enum_type {
        enum_facts(&full, e, out);
    }
}

fn enum_facts(scope: &str, e: &EnumDescriptorProto, out: &mut BTreeSet<String>) {
    let full = format!("{scope}.{}", e.name());
    let alias = e.options.as_ref().is_some_and(|o| o.allow_alias());
    out.insert(format!("enum {full} allow_alias {alias}"));
    for v in &e.value {
        let deprecated = v.options.as_ref().is_some_and(|o| o.deprecated());
        out.insert(format!(
            "enum {full} value {} = {} deprecated {deprecated}",
            v.name(),
            v.number()
        ));
    }
    for r in &e.reserved_range {
        out.insert(format!("enum {full} reserved {}..{}", r.start(), r.end()));
    }
}

fn ours() -> BTreeSet<String> {
    facts(&compile(&Path::new(env!("CARGO_MANIFEST_DIR")).join("proto")))
}

#[test]
fn our_files_describe_every_p4runtime_message_and_rpc() {
    let ours = ours();
    let count = |prefix: &str| ours.iter().filter(|f| f.starts_with(prefix)).count();
    // What the v1.5.0 files define (counted from the upstream descriptors).
    assert_eq!(count("file "), 10, "5 files, each with package and imports");
    assert_eq!(count("service "), 6, "6 RPCs");
    assert!(count("message ") > 500, "{}", count("message "));
}

#[test]
#[ignore = "needs the upstream .proto files: scripts/test.sh fetches the finsy 0.30.0 wheel and sets HOTPLANE_FINSY_PROTO"]
fn our_files_are_wire_equal_to_the_upstream_v1_5_0_files() {
    let dir = std::env::var("HOTPLANE_FINSY_PROTO").expect(
        "HOTPLANE_FINSY_PROTO: the finsy wheel's finsy/proto directory (scripts/test.sh sets it)",
    );
    let upstream = facts(&compile(Path::new(&dir)));
    let ours = ours();
    assert!(
        upstream.len() > 500,
        "the upstream set is too small to be P4Runtime: {}",
        upstream.len()
    );
    let missing: Vec<_> = upstream.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&upstream).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "not wire-equal.\nupstream only:\n  {}\nours only:\n  {}",
        missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "),
        extra.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
    );
}

#[test]
fn a_changed_field_is_a_difference() {
    // The comparison is not blind: renumber one field in a copy and it must differ.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let tmp = std::env::temp_dir().join(format!("hotplane-p4rt-wire-{}", std::process::id()));
    copy_dir(&src, &tmp);
    let p = tmp.join("p4/v1/p4runtime.proto");
    let text = std::fs::read_to_string(&p).unwrap();
    let changed = text.replacen("bytes metadata = 11;", "bytes metadata = 14;", 1);
    assert_ne!(text, changed, "the field to change is in the file");
    std::fs::write(&p, changed).unwrap();
    let mutated = facts(&compile(&tmp));
    std::fs::remove_dir_all(&tmp).ok();
    let ours = ours();
    let diff: Vec<_> = ours.symmetric_difference(&mutated).collect();
    assert_eq!(diff.len(), 2, "{diff:?}");
    assert!(diff.iter().all(|d| d.contains("TableEntry field")), "{diff:?}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
