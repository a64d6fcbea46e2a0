use super::*;
use hotplane_core::kind::{ExternSlots, MAX_LOCAL_FILE_BYTES};
use hotplane_core::Qsbr;
use std::collections::BTreeMap;
use std::path::Path;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/ebpf");

fn qsbr() -> &'static Qsbr {
    static Q: std::sync::OnceLock<Qsbr> = std::sync::OnceLock::new();
    Q.get_or_init(Qsbr::new)
}

fn externs() -> &'static ExternSlots {
    static E: std::sync::OnceLock<ExternSlots> = std::sync::OnceLock::new();
    E.get_or_init(BTreeMap::new)
}

fn cx(base_dir: Option<&Path>) -> BuildCx<'_> {
    static PORTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    BuildCx {
        workers: 1,
        port_names: PORTS.get_or_init(|| vec!["p0".to_string()]),
        externs: externs(),
        flows: &[],
        qsbr: qsbr(),
        base_dir,
    }
}

/// The kind as the engine makes it, from config sections given as TOML.
fn kind_from(config: &str) -> Result<Arc<dyn ProgramKind>, KindError> {
    let sections: BTreeMap<String, Value> = toml::from_str(config).unwrap();
    make(&KindSetup { workers: 2, qsbr: qsbr(), base_dir: None, sections: &sections })
}

fn kind() -> Arc<dyn ProgramKind> {
    kind_from("").unwrap()
}

fn build(
    kind: &dyn ProgramKind,
    spec: &str,
    base_dir: Option<&Path>,
) -> Result<Program, KindError> {
    kind.build(&serde_json::from_str(spec).unwrap(), &cx(base_dir))
}

fn build_err(kind: &dyn ProgramKind, spec: &str, base_dir: Option<&Path>) -> KindError {
    match build(kind, spec, base_dir) {
        Ok(_) => panic!("built {spec}"),
        Err(e) => e,
    }
}

#[test]
fn ebpf_specs_load_objects_and_name_bad_files() {
    let k = kind();
    let dir = Some(Path::new(EXAMPLES));
    let d =
        build(&*k, r#"{"stage":"ebpf","file":"xdp_count.o"}"#, dir).unwrap().unwrap().describe();
    assert!(d.starts_with("ebpf xdp_count (xdp_count.o"), "{d}");
    let e = build_err(&*k, r#"{"stage":"ebpf","file":"xdp_lb.o","engine":"warp"}"#, dir);
    assert!(e.to_string().contains("not an engine"), "{e}");
    let e = build_err(&*k, r#"{"stage":"ebpf","file":"missing.o"}"#, dir);
    assert!(matches!(e, KindError::Invalid(_)) && e.to_string().contains("missing.o"), "{e:?}");
    let e = build_err(&*k, r#"{"stage":"ebpf","file":"xdp_count.o","extra":1}"#, dir);
    assert!(e.to_string().contains("unknown field `extra`"), "{e}");
    let d = build(&*k, r#"{"stage":"ebpf","file":"xdp_lb.o","engine":"interp"}"#, dir)
        .unwrap()
        .unwrap()
        .describe();
    assert!(d.contains("interp"), "{d}");
}

/// Program files named by the local config are read through core's bounded reader
/// (`read_local_file`, which core's tests hold to refusing FIFOs and oversized files): an
/// oversized file is refused by name, never read into memory.
#[test]
fn local_program_files_must_be_regular_and_bounded() {
    let k = kind();
    let dir =
        std::env::temp_dir().join(format!("hotplane-ebpf-local-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.o");
    std::fs::File::create(&big).unwrap().set_len(MAX_LOCAL_FILE_BYTES + 1).unwrap();
    let spec = format!(r#"{{"stage":"ebpf","file":"{}"}}"#, big.display());
    let e = build_err(&*k, &spec, None);
    assert!(e.to_string().contains("larger than"), "{spec}: {e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_ebpf_section_sets_the_default_engine() {
    let k = kind_from("[ebpf]\nengine = \"interp\"").unwrap();
    let spec = r#"{"stage":"ebpf","file":"xdp_count.o"}"#;
    let d = build(&*k, spec, Some(Path::new(EXAMPLES))).unwrap().unwrap().describe();
    assert!(d.contains(", interp)"), "{d}");
    let d = build(&*kind(), spec, Some(Path::new(EXAMPLES))).unwrap().unwrap().describe();
    assert!(d.contains(", jit)"), "the default is the JIT: {d}");
    let e = kind_from("[ebpf]\nengine = \"warp\"").err().unwrap();
    assert_eq!(e, KindError::Invalid("ebpf.engine: `warp` is not an engine (interp, jit)".into()));
    let e = kind_from("[ebpf]\nengin = \"jit\"").err().unwrap();
    assert!(e.to_string().contains("engin"), "{e}");
}

#[test]
fn only_ebpf_specs_name_node_files() {
    let k = kind();
    let spec = serde_json::json!({"stage": "ebpf", "file": "/etc/passwd"});
    assert_eq!(k.node_files(&spec), Some("`file`"));
    assert_eq!(k.node_files(&serde_json::json!({"stage": "drop"})), None);
    let sections = &["ebpf", "chain"][..];
    assert_eq!((k.name(), k.stages(), k.sections()), ("ebpf", &["ebpf"][..], sections));
    assert_eq!(k.update_kinds(), &[16, 17, 18]);
}

fn update(kind: u8, payload: &[u8], no_jit: bool) -> UpdateProgram<'_> {
    UpdateProgram { kind, payload, seq: 7, target: "pre", workers: &[0], no_jit, opt_level: None }
}

#[test]
fn updates_build_stages_and_verifier_refusals_are_rejections() {
    let k = kind();
    let pass = Code::Asm("mov %r0, 2\nexit\n".into()).payload().unwrap();
    let built = k.build_update(&update(16, &pass, false), &cx(None)).unwrap();
    let d = built.program.unwrap().describe();
    assert!(d.starts_with("ebpf bytecode (bytecode update seq 7, 2 insns, jit)"), "{d}");
    assert!(built.note.is_none());
    let built = k.build_update(&update(16, &pass, true), &cx(None)).unwrap();
    let d = built.program.unwrap().describe();
    assert!(d.contains(", interp)"), "NO_JIT runs the interpreter: {d}");
    let elf = std::fs::read(format!("{EXAMPLES}/xdp_count.o")).unwrap();
    let d =
        k.build_update(&update(17, &elf, false), &cx(None)).unwrap().program.unwrap().describe();
    assert!(d.contains("(elf update seq 7"), "{d}");

    // r0 never set: the verifier refuses.
    let bad = Code::Asm("exit\n".into()).payload().unwrap();
    let e = k.build_update(&update(16, &bad, false), &cx(None)).err().unwrap();
    assert!(matches!(e, KindError::Rejected(_)), "{e:?}");
    assert!(e.to_string().contains("r0"), "{e}");
    let e = k.build_update(&update(16, &[0; 7], false), &cx(None)).err().unwrap();
    assert_eq!(
        e,
        KindError::Rejected("7 bytes is not a whole number of 8-byte instructions".into())
    );
    assert_eq!(k.stats().unwrap()["programs_rejected"], 2);
    assert_eq!(k.stats().unwrap()["programs_loaded"], 3);
}

#[test]
fn map_operations_answer_as_the_control_api_did() {
    let k = kind();
    let ask = |req: Value| k.request(req["op"].as_str().unwrap(), &req);
    assert_eq!(ask(json!({"op": "ebpf-maps"})).unwrap(), json!([]));
    build(&*k, r#"{"stage":"ebpf","file":"xdp_lb.o"}"#, Some(Path::new(EXAMPLES))).unwrap();
    let maps = ask(json!({"op": "ebpf-maps"})).unwrap();
    let flows = maps.as_array().unwrap().iter().find(|m| m["name"] == "xdp_lb/flows").cloned();
    let flows = flows.unwrap_or_else(|| panic!("{maps}"));
    assert_eq!((flows["kind"].as_str(), flows["entries"].as_u64()), (Some("hash"), Some(0)));

    let key_size = flows["key_size"].as_u64().unwrap() as usize;
    let r = ask(json!({"op": "ebpf-map-update", "map": "xdp_lb/flows", "key": "1", "value": "7"}));
    assert_eq!(r.unwrap(), json!("updated"));
    let dump = ask(json!({"op": "ebpf-map-dump", "map": "xdp_lb/flows"})).unwrap();
    let mut key = vec![0u8; key_size];
    key[0] = 1;
    // The object's BTF shows the key as its struct and the value as a number.
    let formatted = json!({
        "key": {"saddr": 1, "daddr": 0, "sport": 0, "dport": 0, "proto": 0, "pad": [0, 0, 0]},
        "value": 7,
    });
    assert_eq!(
        dump,
        json!({"map": "xdp_lb/flows", "kind": "hash", "entries": [{"key": hex::encode(&key), "value": "07000000", "formatted": formatted}]})
    );
    // A struct value: the backend's address, MAC as a list of bytes.
    let r = ask(
        json!({"op": "ebpf-map-update", "map": "xdp_lb/backends", "key": "0", "value": "0x0a0000640200000000020000"}),
    );
    assert_eq!(r.unwrap(), json!("updated"));
    let one = ask(json!({"op": "ebpf-map-lookup", "map": "xdp_lb/backends", "key": "0"})).unwrap();
    assert_eq!(
        one["formatted"],
        json!({"key": 0, "value": {"ip": 0x6400000au32, "mac": [2, 0, 0, 0, 0, 2], "pad": 0}}),
        "{one}"
    );
    // Per-CPU: one formatted value per worker.
    let stats = ask(json!({"op": "ebpf-map-lookup", "map": "xdp_lb/stats", "key": "0"})).unwrap();
    let per_worker = stats["formatted"]["values"].as_array().cloned().unwrap_or_default();
    assert!(!per_worker.is_empty(), "{stats}");
    assert!(per_worker
        .iter()
        .all(|v| *v == json!({"packets": 0, "new_flows": 0, "no_backend": 0})));
    let r = ask(
        json!({"op": "ebpf-map-update", "map": "xdp_lb/flows", "key": "1", "value": "8", "flags": 1}),
    );
    assert_eq!(r.unwrap_err().to_string(), "the key exists (BPF_NOEXIST)");
    assert_eq!(
        ask(json!({"op": "ebpf-map-delete", "map": "xdp_lb/flows", "key": "1"})).unwrap(),
        json!("deleted")
    );
    let r = ask(json!({"op": "ebpf-map-delete", "map": "xdp_lb/flows", "key": "1"}));
    assert_eq!(r.unwrap_err().to_string(), "no such key");
    let r = ask(json!({"op": "ebpf-map-dump", "map": "nope"}));
    assert!(
        r.unwrap_err().to_string().starts_with("no map named `nope` (maps: "),
        "lists the maps"
    );
    let r = ask(json!({"op": "ebpf-map-update", "map": "xdp_lb/flows", "key": "zz", "value": "1"}));
    assert!(r.unwrap_err().to_string().contains("give hex bytes"));
    assert_eq!(k.stats().unwrap()["maps"], 4);
}

#[test]
fn the_chain_section_is_checked() {
    let ok = kind_from("[chain]\nmode = \"off\"").unwrap();
    assert_eq!(
        ok.request("chain-status", &serde_json::json!({"op": "chain-status"})).unwrap()["mode"],
        "off"
    );
    let e = kind_from("[chain]\nmode = \"trusted\"").err().unwrap();
    assert!(e.to_string().contains("needs proof that no other path"), "{e}");
    let e = kind_from("[chain]\nmode = \"fast\"").err().unwrap();
    assert!(e.to_string().contains("the modes are"), "{e}");
    let e = kind_from("[chain]\nmod = \"off\"").err().unwrap();
    assert!(e.to_string().contains("mod"), "{e}");
    let e = kind_from("[chain]\nassume = \"/nonexistent/shape.json\"").err().unwrap();
    assert!(e.to_string().contains("[chain] assume"), "{e}");
    let dir = std::env::temp_dir().join(format!("hp-chain-kind-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"len":[100,10]}"#).unwrap();
    let e = kind_from(&format!("[chain]\nassume = \"{}\"", bad.display())).err().unwrap();
    assert!(e.to_string().contains("is empty"), "{e}");
    let good = dir.join("good.json");
    std::fs::write(&good, r#"{"len":[60,1518],"bytes":{"12":"08","13":"00"}}"#).unwrap();
    kind_from(&format!("[chain]\nassume = \"{}\"", good.display())).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
