//! P4 programs in a running data plane: replacing one by an update of kind P4, and reaching
//! its tables by name through the control API.
//!
//! An update's payload is the program's source, optionally followed by one NUL byte and a
//! runtime JSON document (the p4lang tutorials' format). The source may include only the
//! built-in `core.p4`, `v1model.p4` and `hotplane.p4`: an update never reads this node's files.
//! Compilation, carrying state over and loading the entries all happen here, on the control
//! thread, before the new program is published; workers pick it up at their next batch.

use crate::budget::Limits;
use crate::exec::{Engine, EntryError, Objects, Pipeline};
use crate::runtime::RuntimeJsonError;
use crate::stage::{ExternWiring, P4Stage};
use hotplane_core::{BuildCx, KindError};
use serde_json::{json, Value};
use std::sync::Arc;

/// A part of an update's payload that is not text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {what} is not UTF-8: {source}")]
pub struct PayloadError {
    /// `P4 source` or `runtime JSON`.
    pub what: &'static str,
    pub source: std::str::Utf8Error,
}

/// Split an update payload into the program source and the optional runtime JSON.
pub fn split_payload(payload: &[u8]) -> Result<(&str, Option<&str>), PayloadError> {
    let (src, entries) = match payload.iter().position(|&b| b == 0) {
        Some(i) => (&payload[..i], Some(&payload[i + 1..])),
        None => (payload, None),
    };
    Ok((utf8(src, "P4 source")?, entries.map(|e| utf8(e, "runtime JSON")).transpose()?))
}

fn utf8<'a>(b: &'a [u8], what: &'static str) -> Result<&'a str, PayloadError> {
    std::str::from_utf8(b).map_err(|source| PayloadError { what, source })
}

/// Why a replacement was refused; every one is the update's `rejected` reason.
fn rejected(e: impl std::fmt::Display) -> KindError {
    KindError::Rejected(e.to_string())
}

/// A bad entries document, as the update's refusal shows it.
fn entries_rejected(e: RuntimeJsonError) -> KindError {
    KindError::Rejected(format!("entries: {e}"))
}

/// Compile `payload` into a P4 stage that replaces `old`, the P4 program at the update's
/// target (if there is one), carrying over the state the two have in common. Returns the
/// stage and a one-line account of what carried over. Every error is
/// [`KindError::Rejected`].
pub fn replacement(
    old: Option<&P4Stage>,
    payload: &[u8],
    name: String,
    limits: &Limits,
    cx: &BuildCx<'_>,
) -> Result<(Arc<P4Stage>, String), KindError> {
    let (source, entries) = split_payload(payload).map_err(rejected)?;
    let ir = crate::compile_source_with(&name, source, &[], limits).map_err(rejected)?;
    if let Some(text) = entries {
        // A dry run on fresh tables first: a bad entries document is refused before it can
        // touch tables the running program shares with the new one.
        // Closures: the scratch copy only checks entries, so it skips code generation.
        let objects = Objects::new(&ir, cx.qsbr).map_err(rejected)?;
        let scratch =
            Pipeline::with_engine(ir.clone(), objects, Engine::Closures).map_err(rejected)?;
        // As the real load below: the document describes the state (the dumps of two tables
        // sharing a profile both list its members).
        crate::runtime::load_with(&scratch, text, crate::runtime::Inserts::State)
            .map_err(entries_rejected)?;
    }
    let (pipeline, note) = match old {
        Some(o) => {
            let (p, report) = Pipeline::replacing(ir, o.pipeline(), cx.qsbr).map_err(rejected)?;
            (p, report.summary())
        }
        None => (
            Pipeline::new(ir, cx.qsbr).map_err(rejected)?,
            "no P4 program was there: all state is new".into(),
        ),
    };
    let mut replication = old.map(|o| o.replication().clone()).unwrap_or_default();
    if let Some(text) = entries {
        // The document describes the tables: an entry a carried table already has takes the
        // document's action rather than refusing the program (reloading the same document
        // after an edit works).
        let loaded = crate::runtime::load_with(&pipeline, text, crate::runtime::Inserts::State)
            .map_err(entries_rejected)?;
        if loaded.replication != Default::default() {
            replication = loaded.replication;
        }
    }
    let wiring = ExternWiring::resolve(&pipeline.program, cx.externs, cx.flows)
        .map_err(|e| rejected(e.message()))?;
    Ok((Arc::new(P4Stage::new(name, Arc::new(pipeline), replication, wiring, cx.qsbr)), note))
}

/// Why the control API's P4 request found no program to act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocateError {
    #[error("no P4 program is installed at {0}")]
    NoneAt(String),
    #[error("no P4 program is installed")]
    NoneInstalled,
    /// The installed programs' targets, comma-separated.
    #[error("P4 programs are installed at {0}: give --target")]
    Several(String),
}

/// The P4 pipeline the control API means among `installed` ((target, pipeline) on worker 0,
/// in target order): the one at `target`, or the only one.
pub fn locate(
    mut installed: Vec<(String, Arc<Pipeline>)>,
    target: Option<&str>,
) -> Result<(String, Arc<Pipeline>), LocateError> {
    installed.retain(|(t, _)| target.is_none_or(|want| want == t));
    match (installed.len(), target) {
        (1, _) => Ok(installed.remove(0)),
        (0, Some(t)) => Err(LocateError::NoneAt(t.to_string())),
        (0, None) => Err(LocateError::NoneInstalled),
        _ => Err(LocateError::Several(
            installed.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(", "),
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

/// Why a runtime JSON document was not applied to a running program.
#[derive(Debug, thiserror::Error)]
pub enum WriteEntriesError {
    /// `multicast_group_entries` or `clone_session_entries`: they come with the program.
    #[error("{0} are set with the program (hotplane push --p4 FILE --entries FILE)")]
    WithTheProgram(&'static str),
    #[error(transparent)]
    Entries(Box<RuntimeJsonError>),
}

/// Apply a runtime JSON document to a running program's tables. Multicast groups and clone
/// sessions come with the program (`push --p4 FILE --entries FILE`), not here.
pub fn write_entries(p: &Pipeline, doc: &Value) -> Result<Value, WriteEntriesError> {
    for key in ["multicast_group_entries", "clone_session_entries"] {
        if doc.get(key).is_some() {
            return Err(WriteEntriesError::WithTheProgram(key));
        }
    }
    let loaded = crate::runtime::load(p, &doc.to_string())
        .map_err(|e| WriteEntriesError::Entries(Box::new(e)))?;
    Ok(json!({"entries": loaded.entries, "defaults": loaded.defaults, "deleted": loaded.deleted}))
}

/// A table of `p` by (qualified) name, as runtime JSON.
pub fn dump_table(p: &Pipeline, table: &str) -> Result<Value, EntryError> {
    Ok(crate::runtime::dump(p.objects.table(table)?))
}
