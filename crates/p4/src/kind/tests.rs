use super::*;
use hotplane_core::native::DropAll;
use hotplane_core::{ExternSlots, FlowTable, Qsbr};
use serde_json::json;
use std::path::PathBuf;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/p4");

/// `flow_function.p4`'s one table, with one entry.
const ENTRIES: &str = r#"{"table_entries": [{"table": "MyIngress.ipv4_lpm",
    "match": {"hdr.ipv4.dstAddr": ["10.1.0.0", 16]},
    "action_name": "MyIngress.forward", "action_params": {"port": 2}}]}"#;

/// What building needs: one worker, no externs, one flow table.
struct Env {
    qsbr: Qsbr,
    ports: Vec<String>,
    externs: ExternSlots,
    flows: Vec<Arc<FlowTable>>,
    dir: PathBuf,
}

impl Env {
    fn new(name: &str) -> Self {
        let qsbr = Qsbr::new();
        let flows = vec![Arc::new(FlowTable::new(&qsbr))];
        let dir =
            std::env::temp_dir().join(format!("hotplane-p4-kind-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Env { qsbr, ports: vec!["p0".into()], externs: ExternSlots::new(), flows, dir }
    }

    fn cx(&self) -> BuildCx<'_> {
        BuildCx {
            workers: 1,
            port_names: &self.ports,
            externs: &self.externs,
            flows: &self.flows,
            qsbr: &self.qsbr,
            base_dir: Some(&self.dir),
        }
    }

    fn kind(&self, sections: &BTreeMap<String, Value>) -> Result<Arc<dyn ProgramKind>, KindError> {
        make(&KindSetup { workers: 1, qsbr: &self.qsbr, base_dir: Some(&self.dir), sections })
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn program_file() -> String {
    format!("{EXAMPLES}/flow_function.p4")
}

fn error(r: Result<Program, KindError>) -> String {
    r.err().expect("an error").to_string()
}

#[test]
fn the_p4_section_sets_the_limits_and_refuses_unknown_keys() {
    let env = Env::new("section");
    let kind = env.kind(&BTreeMap::new()).unwrap();
    assert_eq!((kind.name(), kind.sections(), kind.stages()), ("p4", &["p4"][..], &["p4"][..]));
    let sections = BTreeMap::from([("p4".to_string(), json!({"limits": {"source_bytes": 100}}))]);
    let kind = env.kind(&sections).unwrap();
    let spec = json!({"stage": "p4", "program": program_file()});
    let e = error(kind.build(&spec, &env.cx()));
    assert!(e.contains("program too large"), "{e}");
    let sections = BTreeMap::from([("p4".to_string(), json!({"limit": {}}))]);
    let e = env.kind(&sections).err().unwrap().to_string();
    assert!(e.starts_with("[p4]: unknown field `limit`"), "{e}");
}

#[test]
fn specs_build_programs_with_entries() {
    let env = Env::new("specs");
    let kind = env.kind(&BTreeMap::new()).unwrap();
    env.write("entries.json", ENTRIES);
    // Relative names resolve against the config file's directory.
    let spec = json!({"stage": "p4", "program": program_file(), "entries": "entries.json",
        "engine": "closures"});
    let stage = kind.build(&spec, &env.cx()).unwrap().unwrap();
    assert_eq!(stage.describe(), "p4 flow_function.p4 (1 tables)");
    assert_eq!(kind.node_files(&spec), Some("`program`, `entries`, `include`"));
}

#[test]
fn bad_specs_say_what_is_wrong() {
    let env = Env::new("bad");
    let kind = env.kind(&BTreeMap::new()).unwrap();
    let build = |spec: Value| error(kind.build(&spec, &env.cx()));
    let e = build(json!({"stage": "p4", "program": program_file(), "extra": 1}));
    assert!(e.contains("unknown field `extra`"), "{e}");
    let e = build(json!({"stage": "p4", "program": program_file(), "engine": "warp"}));
    assert_eq!(e, "engine = \"warp\": use \"native\" or \"closures\"");
    // Asking for the native engine: granted, or refused by a build without it.
    let spec = json!({"stage": "p4", "program": program_file(), "engine": "native"});
    let refused = kind.build(&spec, &env.cx()).err().map(|e| e.to_string());
    if Engine::NATIVE_BUILT {
        assert_eq!(refused, None);
    } else {
        let e = refused.expect("refused");
        assert!(e.contains("without its `native` feature"), "{e}");
    }
    let e = build(json!({"stage": "p4", "program": "missing.p4"}));
    assert!(e.contains("cannot read missing.p4"), "{e}");
    let bad = env.write("bad.p4", "control C() { apply { x = ; } }");
    let e = build(json!({"stage": "p4", "program": bad}));
    assert!(e.contains("bad.p4"), "{e}");
    env.write("not-json.json", "{");
    let e = build(json!({"stage": "p4", "program": program_file(), "entries": "not-json.json"}));
    assert!(e.starts_with(&format!("{}: ", env.dir.join("not-json.json").display())), "{e}");
    let uses_slot = format!("{EXAMPLES}/ebpf_extern.p4");
    let e = build(json!({"stage": "p4", "program": uses_slot}));
    assert!(e.starts_with(&format!("{uses_slot}: ")), "{e}");
    assert!(e.contains("declare it in [pipeline.externs] (there are none)"), "{e}");
}

/// Program and entries files named by the local config are read through core's bounded
/// reader (`read_local_file`, which core's tests hold to refusing FIFOs and oversized files):
/// an oversized file is refused by name, never read into memory.
#[test]
fn local_program_files_must_be_regular_and_bounded() {
    let env = Env::new("local");
    let kind = env.kind(&BTreeMap::new()).unwrap();
    let big = env.dir.join("big.json");
    let max = hotplane_core::kind::MAX_LOCAL_FILE_BYTES;
    std::fs::File::create(&big).unwrap().set_len(max + 1).unwrap();
    for spec in [
        json!({"stage": "p4", "program": big}),
        json!({"stage": "p4", "program": program_file(), "entries": big}),
    ] {
        let e = error(kind.build(&spec, &env.cx()));
        assert!(e.contains("larger than"), "{spec}: {e}");
    }
}

fn update<'a>(payload: &'a [u8], seq: u64, target: &'a str) -> UpdateProgram<'a> {
    UpdateProgram {
        kind: UPDATE_KIND_P4,
        payload,
        seq,
        target,
        workers: &[0],
        no_jit: false,
        opt_level: None,
    }
}

/// The kind finds its programs by what the engine reports installed, and only its own.
#[test]
fn operations_find_the_programs_installed_by_identity() {
    let env = Env::new("ops");
    let kind = env.kind(&BTreeMap::new()).unwrap();
    let op = |op: &str, req: Value| kind.request(op, &req).map_err(|e| e.to_string());
    let tables =
        |target: Option<&str>| op("p4-tables", json!({"op": "p4-tables", "target": target}));
    assert_eq!(tables(None).unwrap_err(), "no P4 program is installed");
    let spec = json!({"stage": "p4", "program": program_file(), "engine": "closures"});
    let program = kind.build(&spec, &env.cx()).unwrap();
    // Built but not installed yet: still none.
    assert_eq!(tables(None).unwrap_err(), "no P4 program is installed");
    kind.installed("pre", &[0], &program, 1);
    let answer = tables(None).unwrap();
    assert_eq!(answer["target"], "pre");
    assert_eq!(answer["tables"][0]["name"], "MyIngress.ipv4_lpm");
    assert_eq!(answer["tables"][0]["entries"], 0);
    assert_eq!(tables(Some("mid")).unwrap_err(), "no P4 program is installed at mid");
    // Another kind's program is not ours; a second P4 program makes the target ambiguous.
    kind.installed("post", &[0], &Some(Arc::new(DropAll)), 1);
    kind.installed("mid", &[0], &program, 2);
    assert_eq!(tables(None).unwrap_err(), "P4 programs are installed at mid, pre: give --target");
    // Writing and dumping entries reach the same tables.
    let doc: Value = serde_json::from_str(ENTRIES).unwrap();
    let written =
        op("p4-entries", json!({"op": "p4-entries", "target": "pre", "doc": doc})).unwrap();
    assert_eq!(written, json!({"entries": 1, "defaults": 0, "deleted": 0}));
    let dump =
        op("p4-dump", json!({"op": "p4-dump", "target": "mid", "table": "MyIngress.ipv4_lpm"}))
            .unwrap();
    assert_eq!(dump["table_entries"][0]["action_name"], "MyIngress.forward", "{dump}");
    let e = op(
        "p4-entries",
        json!({"op": "p4-entries", "target": "pre",
        "doc": {"multicast_group_entries": []}}),
    )
    .unwrap_err();
    assert_eq!(
        e,
        "multicast_group_entries are set with the program (hotplane push --p4 FILE --entries FILE)"
    );
    let e = op("p4-dump", json!({"op": "p4-dump", "target": "pre", "table": "nope"})).unwrap_err();
    assert!(e.contains("nope"), "{e}");
    // Emptying a target, or installing another kind's program there, forgets it.
    kind.installed("mid", &[0], &None, 3);
    kind.installed("pre", &[0], &Some(Arc::new(DropAll)), 3);
    assert_eq!(tables(None).unwrap_err(), "no P4 program is installed");
}

/// An update replaces the program at its target and keeps the tables the two share.
#[test]
fn updates_replace_the_program_at_their_target_carrying_its_tables() {
    let env = Env::new("update");
    let kind = env.kind(&BTreeMap::new()).unwrap();
    assert_eq!(kind.update_kinds(), &[UPDATE_KIND_P4]);
    let source = std::fs::read_to_string(program_file()).unwrap();
    let mut payload = source.clone().into_bytes();
    payload.push(0);
    payload.extend(ENTRIES.as_bytes());
    let first = kind.build_update(&update(&payload, 7, "pre"), &env.cx()).unwrap();
    assert_eq!(first.note.as_deref(), Some("no P4 program was there: all state is new"));
    let stage = first.program.clone().unwrap();
    assert_eq!(stage.name(), "p4-seq7");
    kind.installed("pre", &[0], &first.program, 1);
    // The same program again, without entries: the table and its entry carry over.
    let second = kind.build_update(&update(source.as_bytes(), 8, "pre"), &env.cx()).unwrap();
    let note = second.note.unwrap();
    assert!(note.starts_with("tables: 1 carried"), "{note}");
    kind.installed("pre", &[0], &second.program, 2);
    let answer = kind.request("p4-tables", &json!({"op": "p4-tables"})).unwrap();
    assert_eq!(answer["tables"][0]["entries"], 1);
    // At another target there is nothing to carry.
    let third = kind.build_update(&update(source.as_bytes(), 9, "mid"), &env.cx()).unwrap();
    assert_eq!(third.note.as_deref(), Some("no P4 program was there: all state is new"));
    // Refusals are the program's: compile errors, bad entries, bad text.
    let rejected = |payload: &[u8]| match kind.build_update(&update(payload, 10, "pre"), &env.cx())
    {
        Err(KindError::Rejected(m)) => m,
        Err(e) => panic!("not rejected: {e:?}"),
        Ok(_) => panic!("accepted"),
    };
    assert!(rejected(b"control C() {").contains("p4-seq10"));
    let mut bad_entries = source.clone().into_bytes();
    bad_entries.extend(b"\0{");
    assert!(rejected(&bad_entries).starts_with("entries: "));
    assert!(rejected(b"\xff").starts_with("the P4 source is not UTF-8"));
    // An update never reads this node's files: an include of one is refused.
    let includes = format!("#include \"{}\"\n", program_file());
    let e = rejected(includes.as_bytes());
    assert!(e.contains("flow_function.p4"), "{e}");
}

#[test]
fn a_spec_carries_a_file_or_its_source_and_carries_state_only_from_a_p4_program() {
    let env = Env::new("source");
    let kind = env.kind(&BTreeMap::new()).unwrap();
    let source = std::fs::read_to_string(format!("{EXAMPLES}/flow_function.p4")).unwrap();
    let built = kind.build(&json!({"stage": "p4", "source": source, "name": "ff.p4"}), &env.cx());
    let stage = built.expect("inline source builds").expect("a program");
    assert!(stage.describe().contains("ff.p4"), "{}", stage.describe());
    let both = json!({"stage": "p4", "source": "x", "program": "y.p4"});
    let err = kind.build(&both, &env.cx()).err().expect("refused").to_string();
    assert!(err.contains("either `program`") && err.contains("`source`"), "{err}");
    let neither = kind.build(&json!({"stage": "p4"}), &env.cx()).err().expect("refused");
    assert!(neither.to_string().contains("either `program`"), "{neither}");
    let orphan = json!({"stage": "p4", "source": source, "carry_from": "mid"});
    let err = kind.build(&orphan, &env.cx()).err().expect("refused").to_string();
    assert!(err.contains("carry_from: no P4 program is installed at mid"), "{err}");
    let broken = json!({"stage": "p4", "source": "control C( {", "name": "broken.p4"});
    let err = kind.build(&broken, &env.cx()).err().expect("refused").to_string();
    assert!(err.contains("broken.p4"), "{err}");
}
