//! `hotplane p4 ...`: compile P4 programs and run STF tests against them, offline.

use anyhow::{bail, Context as _};
use hotplane_core::Qsbr;
use hotplane_p4::budget::Limits;
use hotplane_p4::exec::{Engine, Pipeline};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Compile a program file under `limits` to a pipeline with fresh tables and state.
pub fn load(
    program: &Path,
    include: &[PathBuf],
    qsbr: &Qsbr,
    limits: &Limits,
) -> anyhow::Result<Arc<Pipeline>> {
    let ir = hotplane_p4::compile_file_with(program, include, &[], limits)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let p = Pipeline::new(ir, qsbr).map_err(|e| anyhow::anyhow!("{}: {e}", program.display()))?;
    Ok(Arc::new(p))
}

/// `hotplane p4 info`: the program's P4Info in text format.
pub fn info(program: &Path, include: &[PathBuf], out: Option<&Path>) -> anyhow::Result<()> {
    let ir =
        hotplane_p4::compile_file(program, include, &[]).map_err(|e| anyhow::anyhow!("{e}"))?;
    let text = hotplane_p4::p4info::text(&ir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", program.display()))?;
    match out {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}

/// The budgets of `--limit KEY=VALUE` arguments: the defaults, with each key given (a field of
/// [`Limits`], as a node's `[p4.limits]` spells it) set to its value.
pub fn limits(pairs: &[String]) -> anyhow::Result<Limits> {
    let mut given = serde_json::Map::new();
    for pair in pairs {
        let (key, value) =
            pair.split_once('=').with_context(|| format!("--limit {pair}: give KEY=VALUE"))?;
        let value: u64 = value
            .trim()
            .parse()
            .with_context(|| format!("--limit {pair}: `{value}` is not a count"))?;
        given.insert(key.trim().to_string(), value.into());
    }
    serde_json::from_value(serde_json::Value::Object(given))
        .map_err(|e| anyhow::anyhow!("--limit: {e}"))
}

/// `hotplane p4 check`: compile and summarise.
/// How the pipeline runs: native code, or closures and why.
fn engine(p: &Pipeline) -> String {
    match (p.engine(), p.native_error()) {
        (Engine::Native, _) => "native (Cranelift)".into(),
        (Engine::Closures, Some(e)) => format!("closures ({e})"),
        (Engine::Closures, None) => "closures".into(),
    }
}

pub fn check(
    program: &Path,
    include: &[PathBuf],
    json: bool,
    limits: &Limits,
) -> anyhow::Result<()> {
    let qsbr = Qsbr::new();
    let t0 = std::time::Instant::now();
    let p = load(program, include, &qsbr, limits)?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let prog = &p.program;
    if json {
        println!(
            "{}",
            json!({
                "program": program.display().to_string(),
                "compile_ms": ms,
                "headers": prog.headers.len(),
                "parser_states": prog.states.len(),
                "actions": prog.actions.len(),
                "tables": hotplane_p4::control::tables_json(&p),
                "externs": prog.instances.iter().map(|i| i.name.clone()).collect::<Vec<_>>(),
                "engine": engine(&p),
            })
        );
    } else {
        println!(
            "{}: ok ({:.1} ms): {} headers, {} parser states, {} actions, {} tables, {} extern instances",
            program.display(),
            ms,
            prog.headers.len(),
            prog.states.len(),
            prog.actions.len(),
            p.objects.tables.len(),
            prog.instances.len()
        );
        println!("  engine: {}", engine(&p));
        for t in &p.objects.tables {
            let keys: Vec<String> = t
                .keys
                .iter()
                .map(|k| format!("{}: {}", k.name, format!("{:?}", k.kind).to_lowercase()))
                .collect();
            println!("  table {} [{}] -> {}", t.name, keys.join(", "), t.action_names.join(" | "));
        }
    }
    Ok(())
}

/// `hotplane p4 stf`: run an STF test; exit 0 on pass, an error with the differences on failure.
pub fn stf(program: &Path, stf: &Path, include: &[PathBuf], json: bool) -> anyhow::Result<()> {
    let qsbr = Qsbr::new();
    let p = load(program, include, &qsbr, &Limits::default())?;
    let text =
        std::fs::read_to_string(stf).with_context(|| format!("cannot read {}", stf.display()))?;
    let report = hotplane_p4::stf::run(p, &qsbr, &stf.display().to_string(), &text)?;
    if json {
        println!(
            "{}",
            json!({
                "program": program.display().to_string(),
                "stf": stf.display().to_string(),
                "passed": report.passed(),
                "packets_sent": report.packets_sent,
                "packets_received": report.packets_received,
                "expects": report.expects,
                "checks": report.checks,
                "unattached": report.unattached,
                "failures": report.failures,
            })
        );
    }
    if report.passed() {
        if !json {
            println!(
                "PASS {}: {} packets in, {} out, {} expects, {} checks",
                stf.display(),
                report.packets_sent,
                report.packets_received,
                report.expects,
                report.checks
            );
            if report.unattached > 0 {
                println!(
                    "  {} packet(s) went to ports the test names nowhere (not compared, as \
                     under p4c's BMv2 runner)",
                    report.unattached
                );
            }
        }
        Ok(())
    } else {
        if !json {
            for f in &report.failures {
                eprintln!("{f}");
            }
        }
        bail!(
            "FAIL {}: {} of {} expectations and checks failed",
            stf.display(),
            report.failures.len(),
            report.expects + report.checks
        )
    }
}
