//! Lua source as an update carries it: instrumentation, LuaJIT's parser, the trial run on the
//! control thread, and, when it compiles, a run on a packet with a small step budget. Nothing
//! may crash, hang (run with `-timeout=`: a loop the instrumentation missed spins), or touch
//! memory outside the packet.
//!
//! Differential check of the lexer against LuaJIT: the compiler asks LuaJIT's own `load`
//! before instrumenting, so whenever LuaJIT accepts the text, hotplane's lexer must accept it
//! too, the instrumented text must compile, and the compiled bytecode must pass the check that
//! every loop and function has a step check.
#![no_main]

use hotplane_core::{Batch, Pool, PoolConfig, Qsbr, WorkerCx};
use hotplane_lua::instrument::InstrumentError;
use hotplane_lua::{CompileError, FunctionOpts, LuaConfig, LuaRuntime};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

struct Env {
    rt: Arc<LuaRuntime>,
    pool: Pool,
    qsbr: Qsbr,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| Env {
        rt: LuaRuntime::new(
            1,
            LuaConfig { memory_limit: 32 << 20, max_steps: 20_000, ..LuaConfig::default() },
        ),
        pool: Pool::new(PoolConfig { buffers: 8, ..PoolConfig::default() }).unwrap(),
        qsbr: Qsbr::new(),
    })
}

/// A 64-byte IPv4/UDP frame.
const FRAME: [u8; 64] = {
    let mut f = [0u8; 64];
    f[12] = 0x08;
    f[14] = 0x45;
    f[17] = 50;
    f[22] = 64;
    f[23] = 17;
    f[26] = 10;
    f[29] = 1;
    f[30] = 10;
    f[33] = 2;
    f[35] = 1;
    f[37] = 2;
    f[39] = 30;
    f
};

fuzz_target!(|data: &[u8]| {
    // The name an update gives itself: any bytes, and named again, it reads back.
    let _ = hotplane_lua::naming::source_name(data);
    let named = hotplane_lua::naming::named_source("fuzz.lua", data);
    assert_eq!(hotplane_lua::naming::source_name(&named), Some("fuzz.lua"));
    let e = env();
    let opts = FunctionOpts { jit: data.first().is_none_or(|b| b & 1 == 0), opt_level: 3 };
    // The lexer alone never panics, whatever the bytes.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = hotplane_lua::lexer::tokenize(text);
    }
    let def = match e.rt.compile(data, "fuzz", opts, None) {
        Ok(def) => def,
        Err(CompileError::Instrument(InstrumentError::Lex { line, what })) => {
            panic!("LuaJIT accepted the source but the lexer refused it: line {line}: {what}")
        }
        Err(CompileError::Internal(m)) if m.starts_with("step checks") => {
            panic!("the instrumented bytecode has an unchecked loop or function: {m}")
        }
        // LuaJIT's own limits (upvalues, registers, constants) can be crossed by the inserted
        // checks; anything else means the instrumented text does not parse as its source did.
        Err(CompileError::Internal(m))
            if m.starts_with("instrumented source")
                && !["too many", "overflow", "complex"].iter().any(|w| m.contains(w)) =>
        {
            panic!("the instrumented source does not compile: {m}")
        }
        Err(_) => return,
    };
    let stage = e.rt.stage(def);
    let mut batch = Batch::new(4);
    for _ in 0..2 {
        let Some(mut p) = e.pool.alloc() else { return };
        if p.set_frame(&FRAME).is_err() {
            return;
        }
        p.classify();
        let _ = batch.push(p);
    }
    let reader = e.qsbr.register("fuzz");
    let guard = reader.guard();
    let mut cx = WorkerCx::new(0, 1, &guard);
    let all = batch.all();
    stage.run(&mut batch, all, &mut cx);
    for p in batch.iter() {
        assert!(p.len() <= p.max_len());
    }
    // What the control thread does between updates: drop states thrown away after a runaway.
    e.rt.maintain(1);
});
