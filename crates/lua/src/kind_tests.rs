use super::*;
use hotplane_core::kind::MAX_LOCAL_FILE_BYTES;
use hotplane_core::{ExternSlots, Qsbr, StageRef};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

fn qsbr() -> &'static Qsbr {
    static Q: std::sync::OnceLock<Qsbr> = std::sync::OnceLock::new();
    Q.get_or_init(Qsbr::new)
}

fn kind_with(sections: BTreeMap<String, Value>) -> Result<Arc<dyn ProgramKind>, KindError> {
    make(&KindSetup { workers: 1, qsbr: qsbr(), base_dir: None, sections: &sections })
}

fn kind() -> Arc<dyn ProgramKind> {
    kind_with(BTreeMap::new()).unwrap()
}

/// Build `spec` (JSON text) with a context of one worker and one port.
fn build_in(
    kind: &dyn ProgramKind,
    spec: &str,
    base_dir: Option<&Path>,
) -> Result<Program, KindError> {
    let ports = vec!["p0".to_string()];
    let externs = ExternSlots::new();
    let cx = BuildCx {
        workers: 1,
        port_names: &ports,
        externs: &externs,
        flows: &[],
        qsbr: qsbr(),
        base_dir,
    };
    let spec: Value = serde_json::from_str(spec).unwrap();
    kind.build(&spec, &cx)
}

fn build(kind: &dyn ProgramKind, spec: &str) -> Result<Program, KindError> {
    build_in(kind, spec, None)
}

fn update<'a>(payload: &'a [u8], seq: u64, target: &'a str) -> UpdateProgram<'a> {
    UpdateProgram {
        kind: UPDATE_KIND_LUA,
        payload,
        seq,
        target,
        workers: &[0],
        no_jit: false,
        opt_level: None,
    }
}

fn build_update(kind: &dyn ProgramKind, u: &UpdateProgram<'_>) -> Result<Built, KindError> {
    let ports = vec!["p0".to_string()];
    let externs = ExternSlots::new();
    let cx = BuildCx {
        workers: 1,
        port_names: &ports,
        externs: &externs,
        flows: &[],
        qsbr: qsbr(),
        base_dir: None,
    };
    kind.build_update(u, &cx)
}

const DROP_ALL: &str = "return function(pkt) pkt:drop() end";

#[test]
fn lua_specs_compile_and_report_errors() {
    let k = kind();
    let p = build(&*k, &json!({"stage": "lua", "source": DROP_ALL, "jit": false}).to_string());
    assert_eq!(p.unwrap().unwrap().describe(), "lua inline (interpreted, -O3)");
    let e = build(&*k, r#"{"stage":"lua","source":"return function(pkt"}"#).err().unwrap();
    assert!(e.to_string().contains("syntax error: inline:1:"), "{e}");
    let e = build(&*k, r#"{"stage":"lua"}"#).err().unwrap();
    assert_eq!(e, KindError::Invalid("give `file` or `source` (one of them)".into()));
    let e = build(&*k, r#"{"stage":"lua","file":"a.lua","source":"x"}"#).err().unwrap();
    assert!(e.to_string().contains("give `file` or `source`"), "{e}");
    let e = build(&*k, r#"{"stage":"lua","file":"nope.lua"}"#).err().unwrap();
    assert!(e.to_string().contains("nope.lua"), "{e}");
    let e = build(&*k, r#"{"stage":"lua","source":"x","extra":1}"#).err().unwrap();
    assert!(e.to_string().contains("extra"), "{e}");
}

#[test]
fn lua_files_resolve_against_the_config_directory() {
    let k = kind();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/lua");
    let p = build_in(&*k, r#"{"stage":"lua","file":"mark.lua","opt":2}"#, Some(Path::new(dir)));
    let d = p.unwrap().unwrap().describe();
    assert!(d.starts_with("lua mark.lua"), "{d}");
}

/// Function files named by the local config are read through core's bounded reader
/// (`read_local_file`, which core's tests hold to refusing FIFOs and oversized files): an
/// oversized file is refused by name, never read into memory.
#[test]
fn local_program_files_must_be_regular_and_bounded() {
    let k = kind();
    let dir = std::env::temp_dir().join(format!("hotplane-lua-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.lua");
    std::fs::File::create(&big).unwrap().set_len(MAX_LOCAL_FILE_BYTES + 1).unwrap();
    let spec = format!(r#"{{"stage":"lua","file":"{}"}}"#, big.display());
    let e = build(&*k, &spec).err().unwrap();
    assert!(e.to_string().contains("larger than"), "{spec}: {e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn only_a_file_names_a_file_of_the_node() {
    let k = kind();
    assert_eq!(k.node_files(&json!({"stage": "lua", "file": "/etc/passwd"})), Some("`file`"));
    assert_eq!(k.node_files(&json!({"stage": "lua", "source": DROP_ALL})), None);
    assert_eq!(k.node_files(&json!({"stage": "lua", "file": null, "source": DROP_ALL})), None);
}

#[test]
fn the_section_is_checked_with_the_key_at_fault() {
    let err = |v: Value| {
        let sections = BTreeMap::from([("lua".to_string(), v)]);
        kind_with(sections).err().unwrap().to_string()
    };
    assert_eq!(err(json!({"on_error": "bounce"})), "lua.on_error: `bounce` is not drop or pass");
    assert_eq!(err(json!({"memory_mb": 0})), "lua.memory_mb: 0 is not 1..4096");
    assert_eq!(err(json!({"memory_mb": 5000})), "lua.memory_mb: 5000 is not 1..4096");
    assert_eq!(err(json!({"max_steps": 0})), "lua.max_steps: 0 is not 1..2^31-1");
    assert_eq!(
        err(json!({"max_steps": 3_000_000_000u32})),
        "lua.max_steps: 3000000000 is not 1..2^31-1"
    );
    assert_eq!(err(json!({"watchdog_ms": 0})), "lua.watchdog_ms: must be at least 1");
    assert!(err(json!({"memory": 1})).contains("memory"));
    let ok = LuaSection { on_error: "pass".into(), memory_mb: 8, ..Default::default() };
    let c = ok.lua_config().unwrap();
    assert_eq!((c.on_error, c.memory_limit), (Verdict::Pass, 8 << 20));
    assert_eq!(LuaSection::default().lua_config().unwrap(), LuaConfig::default());
}

#[test]
fn updates_compile_with_their_name_and_options_and_compile_errors_are_rejections() {
    let k = kind();
    let mut u = update(DROP_ALL.as_bytes(), 7, "flow:dport=5000");
    u.no_jit = true;
    u.opt_level = Some(1);
    let built = build_update(&*k, &u).unwrap();
    assert!(built.note.is_none());
    let d = built.program.unwrap().describe();
    assert!(d.starts_with("lua lua-seq7 (interpreted, -O1"), "{d}");
    let e = build_update(&*k, &update(b"return function(pkt", 8, "pre")).err().unwrap();
    assert!(matches!(&e, KindError::Rejected(m) if m.contains("syntax error")), "{e:?}");
    assert_eq!(k.stats().unwrap()["compile_errors"], 1);
    assert_eq!(k.stats().unwrap()["compiled"], 1);

    // Sent by `lua update ttl.lua`: named after the file, and so are its errors' lines.
    let named = crate::naming::named_source("ttl.lua", DROP_ALL.as_bytes());
    let d = build_update(&*k, &update(&named, 9, "pre")).unwrap().program.unwrap().describe();
    assert!(d.starts_with("lua ttl.lua ("), "{d}");
    let broken = crate::naming::named_source("ttl.lua", b"local x = 1\nreturn function(pkt");
    let e = build_update(&*k, &update(&broken, 10, "pre")).err().unwrap();
    assert!(matches!(&e, KindError::Rejected(m) if m.contains("ttl.lua:2:")), "{e:?}");
}

/// The runtime knows its own functions by identity: a publish of one of them records its
/// target and version, a publish of anything else there (another kind's stage, or nothing)
/// forgets the target.
#[test]
fn publishes_record_own_functions_and_forget_others() {
    let k = kind();
    let functions = || k.request("lua-functions", &json!({"op": "lua-functions"})).unwrap();
    let f = build_update(&*k, &update(DROP_ALL.as_bytes(), 1, "pre")).unwrap().program;
    k.installed("pre", &[0], &f, 4);
    let list = functions();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["target"], "pre");
    assert_eq!(list[0]["name"], "lua-seq1");
    assert_eq!(list[0]["version"], 4);
    assert_eq!(list[0]["running"], "lua-seq1");

    // Another kind's stage at the same target.
    let other: StageRef = Arc::new(hotplane_core::native::DropAll);
    k.installed("pre", &[0], &Some(other), 5);
    assert_eq!(functions(), json!([]));

    // A function of another runtime is not this kind's either.
    let stranger = kind();
    let theirs = build_update(&*stranger, &update(DROP_ALL.as_bytes(), 2, "mid")).unwrap();
    k.installed("mid", &[0], &f, 6);
    k.installed("mid", &[0], &theirs.program, 7);
    assert_eq!(functions(), json!([]));

    // Emptied.
    k.installed("post", &[0], &f, 8);
    assert_eq!(functions()[0]["target"], "post");
    k.installed("post", &[0], &None, 9);
    assert_eq!(functions(), json!([]));
}

#[test]
fn requests_are_checked_like_the_control_api() {
    let k = kind();
    assert_eq!(k.ops(), &["lua-functions"]);
    assert_eq!(k.request("lua-functions", &json!({"op": "lua-functions"})).unwrap(), json!([]));
    let e = k.request("lua-functions", &json!({"op": "lua-functions", "x": 1})).err().unwrap();
    assert!(e.to_string().contains("x"), "{e}");
}

#[test]
fn stats_name_every_counter() {
    let s = kind().stats().unwrap();
    for key in [
        "compiled",
        "compile_errors",
        "runtime_errors",
        "runaways",
        "watchdog_fired",
        "states_created",
        "states_replaced",
        "busy",
    ] {
        assert_eq!(s[key], 0, "{key}: {s}");
    }
    assert_eq!(kind().watchdog_period(), Some(WATCHDOG_PERIOD));
}
