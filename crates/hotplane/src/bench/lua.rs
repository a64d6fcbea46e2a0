//! `hotplane bench lua`: per-packet time of the dynamic-update experiment's function (write a
//! constant into a payload field) as a hotplane Lua flow function, batch mode, next to the same
//! function in native Rust and to plain LuaJIT on raw pointers (the libmoon way), all in one run.

use super::pipeline::round;
use super::{emit, median, Progress};
use anyhow::anyhow;
use hotplane_core::native::{FieldBase, SetField};
use hotplane_core::wire::Stamp;
use hotplane_core::{time, Batch, Pool, PoolConfig, Qsbr, Stage, WorkerCx};
use hotplane_engine::pin_to_core;
use hotplane_lua::{FunctionOpts, LuaConfig, LuaRuntime};
use serde_json::json;
use std::time::Instant;

/// The experiment's function (examples/lua/mark.lua).
pub use super::MARK_LUA;

pub struct Opts {
    pub packets: u64,
    pub batch: usize,
    pub repeat: u32,
    pub core: usize,
    pub json: bool,
}

/// A stamped 60-byte UDP frame of the generator's first flow.
fn frame() -> Vec<u8> {
    let f = hotplane_io::mem::GenSpec::default().frame(0);
    let mut buf = vec![0u8; 128];
    let mut payload = [0u8; Stamp::<&[u8]>::LEN];
    let _ = Stamp::emit(&mut payload[..], 1, 0, 0);
    let n = f.emit(&payload, &mut buf).unwrap_or(0);
    buf.truncate(n);
    buf
}

/// ns per packet running `stage` over batches of `batch` packets.
pub fn stage_ns(stage: &dyn Stage, batch: usize, packets: u64) -> anyhow::Result<f64> {
    let pool = Pool::new(PoolConfig { buffers: 128, ..Default::default() })?;
    let mut b = Batch::new(batch);
    let f = frame();
    for _ in 0..batch {
        let mut p = pool.alloc().ok_or_else(|| anyhow!("pool empty"))?;
        p.set_frame(&f).map_err(|e| anyhow!("{e}"))?;
        p.classify();
        let _ = b.push(p);
    }
    let q = Qsbr::new();
    let reader = q.register("bench");
    let guard = reader.guard();
    let mut cx = WorkerCx::new(0, time::now_ns(), &guard);
    let all = b.all();
    let rounds = packets.div_ceil(batch as u64);
    for _ in 0..rounds / 10 + 1 {
        stage.run(&mut b, all, &mut cx);
    }
    let t = Instant::now();
    for _ in 0..rounds {
        stage.run(&mut b, all, &mut cx);
    }
    let ns = t.elapsed().as_nanos() as f64 / (rounds * batch as u64) as f64;
    let mark = b.get(0).map(|p| p.data()[42 + Stamp::<&[u8]>::MARK_OFFSET]);
    if mark != Some(0x01) {
        anyhow::bail!("{}: the mark was not written", stage.name());
    }
    Ok(ns)
}

pub fn run(o: &Opts) -> anyhow::Result<()> {
    if !(1..=hotplane_lua::MAX_BATCH).contains(&o.batch) {
        anyhow::bail!("--batch {}: 1..{}", o.batch, hotplane_lua::MAX_BATCH);
    }
    pin_to_core(o.core);
    let mut progress = Progress::new("lua", o.json);
    let mark_at = Stamp::<&[u8]>::MARK_OFFSET as u16;
    let native = SetField::new(FieldBase::Payload, mark_at, &[1, 1]).map_err(|e| anyhow!("{e}"))?;
    let rt = LuaRuntime::new(1, LuaConfig::default());
    let jit = rt.compile(MARK_LUA.as_bytes(), "mark.lua", FunctionOpts::default(), None)?;
    let interp_opts = FunctionOpts { jit: false, ..FunctionOpts::default() };
    let interp = rt.compile(MARK_LUA.as_bytes(), "mark.lua", interp_opts, None)?;
    let (jit, interp) = (rt.stage(jit), rt.stage(interp));
    let (mut n, mut l, mut i, mut raw) = (vec![], vec![], vec![], vec![]);
    let offset = 42 + Stamp::<&[u8]>::MARK_OFFSET;
    for r in 0..o.repeat {
        // Interleaved, so that drift on this shared machine hits every runner alike.
        n.push(stage_ns(&native, o.batch, o.packets)?);
        l.push(stage_ns(jit.as_ref(), o.batch, o.packets)?);
        i.push(stage_ns(interp.as_ref(), o.batch, (o.packets / 20).max(10_000))?);
        raw.push(hotplane_lua::anchor::raw_luajit_ns(o.batch, offset, o.packets / o.batch as u64)?);
        progress.update(r as u64 + 1, o.repeat as u64);
    }
    let (n, l, i, raw) = (median(n), median(l), median(i), median(raw));
    progress.finish(&format!(
        "per packet, batch {}: Lua (JIT) {:.2} ns, native Rust {:.2} ns ({:.1}x), Lua interpreted {:.1} ns, plain LuaJIT on raw pointers {:.2} ns",
        o.batch, l, n, l / n, i, raw
    ));
    let out = json!({
        "bench": "lua",
        "function": "write a 16-bit constant into the payload (examples/lua/mark.lua)",
        "batch": o.batch,
        "packets": o.packets,
        "repeat": o.repeat,
        "core": o.core,
        "lua_ns": round(l, 2),
        "native_ns": round(n, 2),
        "lua_over_native": round(l / n, 2),
        "lua_interp_ns": round(i, 2),
        "luajit_raw_ns": round(raw, 2),
        "lua_over_luajit_raw": round(l / raw, 2),
        "target_ns": 15.0,
        "met": l <= 15.0,
    });
    emit(&out, o.json);
    Ok(())
}
