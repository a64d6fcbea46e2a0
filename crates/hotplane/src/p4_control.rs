//! P4 programs in a running data plane: replacing one by an update of kind P4, and reaching
//! its tables by name through the control API.
//!
//! An update's payload is the program's source, optionally followed by one NUL byte and a
//! runtime JSON document (the p4lang tutorials' format). The source may include only the
//! built-in `core.p4`, `v1model.p4` and `hotplane.p4`: an update never reads this node's files.
//! Compilation, carrying state over and loading the entries all happen here, on the control
//! thread, before the new program is published; workers pick it up at their next batch.

use crate::p4_stage::P4Stage;
use crate::runtime::registry::Registry;
use crate::stages::Program;
use hotplane_core::Stage;
use hotplane_p4::exec::Pipeline;
use serde_json::{json, Value};
use std::sync::Arc;

/// Split an update payload into the program source and the optional runtime JSON.
pub fn split_payload(payload: &[u8]) -> Result<(&str, Option<&str>), String> {
    let (src, entries) = match payload.iter().position(|&b| b == 0) {
        Some(i) => (&payload[..i], Some(&payload[i + 1..])),
        None => (payload, None),
    };
    Ok((utf8(src, "P4 source")?, entries.map(|e| utf8(e, "runtime JSON")).transpose()?))
}

fn utf8<'a>(b: &'a [u8], what: &str) -> Result<&'a str, String> {
    std::str::from_utf8(b).map_err(|e| format!("the {what} is not UTF-8: {e}"))
}

/// The P4 stage a program is, if it is one.
pub fn as_p4(stage: &dyn Stage) -> Option<&P4Stage> {
    stage.as_any()?.downcast_ref::<P4Stage>()
}

/// Compile `payload` into a P4 stage that replaces the P4 program at `target` on `worker`
/// (if there is one), carrying over the state the two have in common. Returns the stage and
/// a one-line account of what carried over.
pub fn replacement(
    reg: &Registry,
    target: &str,
    worker: usize,
    payload: &[u8],
    name: String,
) -> Result<(Program, String), String> {
    let (source, entries) = split_payload(payload)?;
    let ir = hotplane_p4::compile_source_with(&name, source, &[], &reg.p4_limits)
        .map_err(|e| e.to_string())?;
    if let Some(text) = entries {
        // A dry run on fresh tables first: a bad entries document is refused before it can
        // touch tables the running program shares with the new one.
        // Closures: the scratch copy only checks entries, so it skips code generation.
        let objects = hotplane_p4::exec::Objects::new(&ir, &reg.qsbr).map_err(|e| e.to_string())?;
        let scratch =
            Pipeline::with_engine(ir.clone(), objects, hotplane_p4::exec::Engine::Closures)
                .map_err(|e| e.to_string())?;
        hotplane_p4::runtime::load(&scratch, text).map_err(|e| format!("entries: {e}"))?;
    }
    let current = reg.installed(worker, target);
    let old = current.as_deref().and_then(as_p4);
    let (pipeline, note) = match old {
        Some(o) => {
            let (p, report) =
                Pipeline::replacing(ir, o.pipeline(), &reg.qsbr).map_err(|e| e.to_string())?;
            (p, report.summary())
        }
        None => (
            Pipeline::new(ir, &reg.qsbr).map_err(|e| e.to_string())?,
            "no P4 program was there: all state is new".into(),
        ),
    };
    let mut replication = old.map(|o| o.replication().clone()).unwrap_or_default();
    if let Some(text) = entries {
        // Can still fail on a clash with a carried entry; those before it stay written.
        let loaded =
            hotplane_p4::runtime::load(&pipeline, text).map_err(|e| format!("entries: {e}"))?;
        if loaded.replication != Default::default() {
            replication = loaded.replication;
        }
    }
    let wiring = reg.extern_wiring(&pipeline.program)?;
    let stage: Arc<dyn Stage> =
        Arc::new(P4Stage::new(name, Arc::new(pipeline), replication, wiring));
    Ok((Some(stage), note))
}

/// The P4 pipeline the control API means: the one at `target` (worker 0), or the only one.
pub fn locate(reg: &Registry, target: Option<&str>) -> Result<(String, Arc<Pipeline>), String> {
    let mut found: Vec<(String, Arc<Pipeline>)> = Vec::new();
    for (w, t, stage) in reg.installed_all() {
        if w != 0 || target.is_some_and(|want| want != t) {
            continue;
        }
        if let Some(p) = as_p4(&*stage) {
            found.push((t, Arc::clone(p.pipeline())));
        }
    }
    match (found.len(), target) {
        (1, _) => Ok(found.remove(0)),
        (0, Some(t)) => Err(format!("no P4 program is installed at {t}")),
        (0, None) => Err("no P4 program is installed".into()),
        _ => Err(format!(
            "P4 programs are installed at {}: give --target",
            found.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The tables of a pipeline: name, kind, key fields, actions, size and entries in use.
pub fn tables_json(p: &Pipeline) -> Value {
    Value::Array(
        p.objects
            .tables
            .iter()
            .map(|t| {
                let c = t.table.config();
                json!({
                    "name": t.name,
                    "kind": format!("{:?}", c.kind).to_lowercase(),
                    "keys": t.keys.iter().map(|k| json!({
                        "name": k.name,
                        "bits": k.width,
                        "match": format!("{:?}", k.kind).to_lowercase(),
                    })).collect::<Vec<_>>(),
                    "actions": t.action_names.iter().zip(&t.params).map(|(a, ps)| json!({
                        "name": a,
                        "params": ps.iter().map(|(n, w, r)| json!({"name": n, "bits": w, "ref": r})).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                    "size": c.size,
                    "entries": t.table.len(),
                    "const": t.entries_const,
                })
            })
            .collect(),
    )
}

/// Apply a runtime JSON document to a running program's tables. Multicast groups and clone
/// sessions come with the program (`push --p4 FILE --entries FILE`), not here.
pub fn write_entries(p: &Pipeline, doc: &Value) -> Result<Value, String> {
    for key in ["multicast_group_entries", "clone_session_entries"] {
        if doc.get(key).is_some() {
            return Err(format!(
                "{key} are set with the program (hotplane push --p4 FILE --entries FILE)"
            ));
        }
    }
    let loaded = hotplane_p4::runtime::load(p, &doc.to_string()).map_err(|e| e.to_string())?;
    Ok(json!({"entries": loaded.entries, "defaults": loaded.defaults, "deleted": loaded.deleted}))
}
