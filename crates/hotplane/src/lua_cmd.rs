//! `hotplane lua ...`: check and run flow functions offline, list the functions of a running
//! data plane, send a function as an authenticated update. Also the JSON the control API
//! returns for Lua.

use anyhow::{anyhow, bail, Context as _};
use hotplane_control::api::{Client, Request};
use hotplane_control::{Flags, Kind, UpdateHeader};
use hotplane_core::{Batch, Pool, PoolConfig, Qsbr, WorkerCx};
use hotplane_lua::{FunctionOpts, LuaConfig, LuaRuntime};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Runtime-wide counters (`stats.lua` in the control API).
fn read_source(file: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))
}

fn name_of(file: &Path) -> String {
    file.file_name().map_or_else(|| "lua".into(), |n| n.to_string_lossy().into_owned())
}

/// `hotplane lua check FILE`: compile as the data plane would, report errors and sizes.
pub fn check(file: &Path, opts: FunctionOpts, json_out: bool) -> anyhow::Result<()> {
    let src = read_source(file)?;
    let rt = LuaRuntime::new(1, LuaConfig::default());
    match rt.compile(&src, &name_of(file), opts, None) {
        Ok(d) => {
            let v = json!({
                "ok": true,
                "source_bytes": src.len(),
                "bytecode_bytes": d.bytecode.len(),
                "compile_us": d.compile_ns as f64 / 1000.0,
            });
            if json_out {
                println!("{v}");
            } else {
                println!(
                    "{}: ok ({} bytes of source, {} bytes of bytecode, compiled in {:.0} us)",
                    file.display(),
                    src.len(),
                    d.bytecode.len(),
                    d.compile_ns as f64 / 1000.0
                );
            }
            Ok(())
        }
        Err(e) => {
            if json_out {
                println!("{}", json!({ "ok": false, "error": e.to_string() }));
            }
            bail!("{}: {e}", file.display())
        }
    }
}

/// `hotplane lua run FILE --packet HEX`: run the function once on a frame and print the result.
pub fn run(
    file: &Path,
    opts: FunctionOpts,
    packet: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let src = read_source(file)?;
    let rt = LuaRuntime::new(1, LuaConfig::default());
    let def = rt.compile(&src, &name_of(file), opts, None).map_err(|e| anyhow!("{e}"))?;
    let stage = rt.stage(def.clone());
    let frame = match packet {
        Some(h) => hex::decode(h.trim().trim_start_matches("0x")).context("--packet: not hex")?,
        None => crate::ebpf_cmd::default_frame(),
    };
    let pool = Pool::new(PoolConfig { buffers: 4, ..PoolConfig::default() })?;
    let mut p = pool.alloc().ok_or_else(|| anyhow!("no buffer"))?;
    p.set_frame(&frame).map_err(|e| anyhow!("--packet: {e}"))?;
    p.classify();
    let mut batch = Batch::new(1);
    let _ = batch.push(p);
    let qsbr = Qsbr::new();
    let reader = qsbr.register("lua run");
    let guard = reader.guard();
    let mut cx = WorkerCx::new(0, hotplane_core::time::now_ns(), &guard);
    let all = batch.all();
    stage.run(&mut batch, all, &mut cx);
    let p = batch.get(0).ok_or_else(|| anyhow!("packet vanished"))?;
    let result = json!({
        "verdict": format!("{:?}", p.meta.verdict).to_lowercase(),
        "out_port": (p.meta.out_port != hotplane_core::NO_PORT).then_some(p.meta.out_port),
        "mark": p.meta.user,
        "error": def.last_error(),
        "frame": hex::encode(p.data()),
    });
    match json {
        true => println!("{}", serde_json::to_string_pretty(&result)?),
        false => crate::human::print_value(&result),
    }
    Ok(())
}

pub struct UpdateOpts {
    pub file: PathBuf,
    pub target: String,
    pub worker: String,
    pub opts: FunctionOpts,
    pub key_id: u32,
    pub key: [u8; 32],
    pub socket: PathBuf,
    /// The acknowledgements as JSON.
    pub json: bool,
}

/// `hotplane lua update FILE --target flow:...`: an authenticated Lua update through the API.
pub fn update(o: &UpdateOpts) -> anyhow::Result<()> {
    let file_name = o.file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let payload = hotplane_lua::naming::named_source(&file_name, &read_source(&o.file)?);
    let mut flags = Flags::default().with_opt_level(o.opts.opt_level);
    if !o.opts.jit {
        flags = Flags(flags.0 | Flags::NO_JIT);
    }
    let header = UpdateHeader {
        kind: Kind::Lua,
        flags,
        key_id: o.key_id,
        seq: hotplane_core::time::unix_micros(),
        target: o.target.parse().map_err(anyhow::Error::msg)?,
        worker: crate::cli::worker_scope(&o.worker)?,
    };
    crate::cli::submit_update(&o.socket, &header, &payload, &o.key, o.json)
}

/// `hotplane lua list`: the functions of a running data plane.
pub fn list(socket: &Path, json: bool) -> anyhow::Result<()> {
    let v = Client::connect(socket)?.call(&Request::LuaFunctions {})?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let functions = v.as_array().cloned().unwrap_or_default();
    if functions.is_empty() {
        println!("(no Lua functions)");
        return Ok(());
    }
    println!(
        "{:<24} {:<28} {:>7} {:>12} {:>7} {:>8} {:>10}  last error",
        "function", "target", "version", "packets", "errors", "runaways", "mode"
    );
    for f in functions {
        let n = |k: &str| f[k].as_u64().unwrap_or(0);
        let mode =
            format!("{} -O{}", if f["jit"] == true { "jit" } else { "interp" }, n("opt_level"));
        println!(
            "{:<24} {:<28} {:>7} {:>12} {:>7} {:>8} {:>10}  {}",
            f["name"].as_str().unwrap_or("?"),
            f["target"].as_str().unwrap_or("-"),
            n("version"),
            n("packets"),
            n("errors"),
            n("runaways"),
            mode,
            f["last_error"].as_str().unwrap_or("-")
        );
    }
    Ok(())
}
