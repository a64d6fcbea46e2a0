//! What the control API shows of Lua: the runtime's counters (`stats.lua`) and the installed
//! functions (`lua-functions`).

use crate::runtime::LuaRuntime;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// Runtime-wide counters (`stats.lua` in the control API).
pub fn stats_json(rt: &LuaRuntime) -> Value {
    let s = &rt.stats;
    let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
    json!({
        "compiled": g(&s.compiled),
        "compile_errors": g(&s.compile_errors),
        "runtime_errors": g(&s.runtime_errors),
        "runaways": g(&s.runaways),
        "watchdog_fired": g(&s.watchdog_fired),
        "states_created": g(&s.states_created),
        "states_replaced": g(&s.states_replaced),
        "busy": g(&s.busy),
    })
}

/// Installed functions with their counters (`lua-functions` in the control API).
pub fn functions_json(rt: &LuaRuntime) -> Value {
    let list = rt
        .installed_functions()
        .into_iter()
        .map(|(target, d)| {
            let effective = d.effective().map(|e| e.name.clone());
            json!({
                "target": target,
                "name": d.name,
                "version": d.placed().map(|p| p.1),
                "jit": d.opts.jit,
                "opt_level": d.opts.opt_level,
                "source_bytes": d.source_len,
                "bytecode_bytes": d.bytecode.len(),
                "compile_us": d.compile_ns as f64 / 1000.0,
                "load_us_max": d.load_ns_max.load(Ordering::Relaxed) as f64 / 1000.0,
                "packets": d.packets(),
                "errors": d.errors.load(Ordering::Relaxed),
                "runaways": d.runaways.load(Ordering::Relaxed),
                "condemned": d.is_condemned(),
                "running": effective,
                "last_error": d.last_error(),
            })
        })
        .collect();
    Value::Array(list)
}
