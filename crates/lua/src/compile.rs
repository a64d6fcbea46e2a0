//! The control side: Lua source becomes a [`FunctionDef`] (instrumented, compiled to LuaJIT
//! bytecode, and run once in a scratch state to check that it returns a function). Workers only
//! load the bytecode; parsing, syntax errors and the first run of the top level happen here.

use crate::instrument::{instrument, InstrumentError};
use crate::state::{arm_watchdog, disarm_watchdog, LuaState, StateError, GATE_CLOSED, GATE_OPEN};
use crossbeam_utils::CachePadded;
use hotplane_core::MAX_WORKERS;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Largest accepted source text.
pub const MAX_SOURCE: usize = 256 * 1024;

/// Per-function options, from the config or an update's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionOpts {
    /// Let LuaJIT compile the function's hot paths (off: the interpreter only).
    pub jit: bool,
    /// LuaJIT optimisation level for its traces, 0..=3 (`-O0`..`-O3`).
    pub opt_level: u8,
}

impl Default for FunctionOpts {
    fn default() -> Self {
        Self { jit: true, opt_level: 3 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error("Lua source is {0} bytes; the limit is {MAX_SOURCE}")]
    TooLarge(usize),
    #[error("Lua source is not UTF-8")]
    NotUtf8,
    #[error("optimisation level {0} is not 0..3")]
    OptLevel(u8),
    #[error("{0}")]
    Instrument(#[from] InstrumentError),
    #[error("syntax error: {0}")]
    Syntax(String),
    #[error("{0}")]
    Init(String),
    #[error("internal error: {0}")]
    Internal(String),
    #[error(transparent)]
    State(#[from] StateError),
}

/// The wrapper around user code, all on the user's line 1 so that line numbers are kept. The
/// user chunk returns the flow function; the wrapper returns the batch driver, which refills
/// the fuel before each packet, starts the packet's turn (its handle is good until the next
/// one), and turns a budget that ran out inside a `pcall` into a runaway.
const PREFIX: &str = "local __hp_S, __hp_X, __hp_at, __hp_type, __hp_error, __hp_G = ... \
                      local __hp_f = (function(...) ";
const SUFFIX: &str = "\nend)() \
    if __hp_type(__hp_f) ~= \"function\" then \
      __hp_error(\"the chunk must return a function(pkt); it returned a \" .. __hp_type(__hp_f), 0) \
    end \
    return function(__hp_n, __hp_i0) \
      local __hp_s = __hp_S \
      for __hp_i = __hp_i0, __hp_n - 1 do \
        local __hp_t = __hp_s.turn + 1 \
        __hp_s.turn = __hp_t \
        __hp_s.cur = __hp_i \
        __hp_s.fuel = __hp_s.budget \
        __hp_f(__hp_at(__hp_t)) \
        if __hp_s.fuel < 0 then __hp_X() end \
      end \
    end";

/// Per-worker counters of one function (one writer each: no shared cache lines on the fast path).
#[derive(Default)]
pub struct PerWorker {
    pub packets: AtomicU64,
    pub batches: AtomicU64,
}

/// A compiled flow function, shared by every worker that runs it.
pub struct FunctionDef {
    pub uid: u64,
    pub name: String,
    pub opts: FunctionOpts,
    pub bytecode: Vec<u8>,
    pub source_len: usize,
    /// Time the control side spent: instrument, syntax check, compile, dump, trial run.
    pub compile_ns: u64,
    /// The function this one replaced at its target: the fallback if this one runs away.
    pub previous: Option<Arc<FunctionDef>>,
    condemned: AtomicBool,
    pub errors: AtomicU64,
    pub runaways: AtomicU64,
    /// Longest time a worker spent loading the bytecode and running the top level.
    pub load_ns_max: AtomicU64,
    pub loads: AtomicU64,
    pub per_worker: Box<[CachePadded<PerWorker>]>,
    last_error: Mutex<Option<String>>,
    /// Where it is installed and at which version, for error reports.
    placed: Mutex<Option<(String, u64)>>,
}

impl FunctionDef {
    /// This function, or the newest of its predecessors that has not run away.
    #[inline]
    pub fn effective(self: &Arc<Self>) -> Option<&Arc<FunctionDef>> {
        let mut d = self;
        while d.condemned.load(Ordering::Relaxed) {
            d = d.previous.as_ref()?;
        }
        Some(d)
    }

    pub fn condemn(&self) {
        self.condemned.store(true, Ordering::Relaxed);
    }

    pub fn is_condemned(&self) -> bool {
        self.condemned.load(Ordering::Relaxed)
    }

    /// Count a runtime error; keep its message (skipped, not waited for, if a report is being
    /// read at the same moment).
    pub fn record_error(&self, msg: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut e) = self.last_error.try_lock() {
            *e = Some(msg.to_string());
        }
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_placed(&self, target: &str, version: u64) {
        *self.placed.lock().unwrap_or_else(|e| e.into_inner()) = Some((target.into(), version));
    }

    /// Target and slot version it was installed at, if it was.
    pub fn placed(&self) -> Option<(String, u64)> {
        self.placed.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn packets(&self) -> u64 {
        self.per_worker.iter().map(|w| w.packets.load(Ordering::Relaxed)).sum()
    }

    pub fn describe(&self) -> String {
        format!(
            "lua {} ({}, -O{})",
            self.name,
            if self.opts.jit { "jit" } else { "interpreted" },
            self.opts.opt_level
        )
    }
}

/// Compiles on the control thread, in a scratch state of its own.
pub struct Compiler {
    state: LuaState,
    next_uid: u64,
    /// How long the trial run of a chunk's top level may take (the workers' watchdog time).
    trial_limit: Duration,
}

impl Compiler {
    pub fn new(
        memory_limit: usize,
        budget: u32,
        trial_limit: Duration,
    ) -> Result<Self, CompileError> {
        Ok(Self { state: LuaState::new(memory_limit, budget)?, next_uid: 1, trial_limit })
    }

    /// Instantiate `bytecode` in the scratch state, stopped by a timer thread (the control
    /// thread cannot watch itself) if it runs longer than `trial_limit`: its step checks read
    /// the gate the timer closes, interpreted code gets the hook.
    fn trial_run(&self, bytecode: &[u8], name: &str, jit: bool) -> Result<(), CompileError> {
        struct Target(*const std::sync::atomic::AtomicI32, *mut mlua::ffi::lua_State);
        // SAFETY: both pointers go to the timer thread below, which `thread::scope` joins before
        // this function returns, so they never outlive the state they point into.
        unsafe impl Send for Target {}
        let target = Target(self.state.gate(), self.state.raw());
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let limit = self.trial_limit;
        let r = std::thread::scope(|scope| {
            let timer = std::thread::Builder::new().name("lua-trial-watchdog".into());
            let started = timer.spawn_scoped(scope, move || {
                let target = target;
                if finished.recv_timeout(limit) == Err(RecvTimeoutError::Timeout) {
                    // SAFETY: the state is live (see `Target`); setting the hook from another
                    // thread is allowed (see `arm_watchdog`), the gate is an atomic.
                    unsafe {
                        (*target.0).store(GATE_CLOSED, Ordering::SeqCst);
                        arm_watchdog(target.1);
                    }
                }
            });
            if let Err(e) = started {
                // Without its timer the trial run would not be bounded: refuse instead.
                return Err(CompileError::Internal(format!("cannot start the trial's timer: {e}")));
            }
            let r = self.state.instantiate(bytecode, name, jit);
            drop(done);
            r.map_err(|e| CompileError::Init(lua_message(&e)))
        });
        // The timer is joined: reopen whatever it closed, for the next compile.
        disarm_watchdog(self.state.raw());
        // SAFETY: the gate lives as long as the state.
        unsafe { (*self.state.gate()).store(GATE_OPEN, Ordering::SeqCst) };
        let key = r?;
        let _ = self.state.lua().remove_registry_value(key);
        self.state.lua().expire_registry_values();
        Ok(())
    }

    pub fn compile(
        &mut self,
        source: &[u8],
        name: &str,
        opts: FunctionOpts,
        previous: Option<Arc<FunctionDef>>,
    ) -> Result<FunctionDef, CompileError> {
        let started = Instant::now();
        if source.len() > MAX_SOURCE {
            return Err(CompileError::TooLarge(source.len()));
        }
        if opts.opt_level > 3 {
            return Err(CompileError::OptLevel(opts.opt_level));
        }
        let src = std::str::from_utf8(source).map_err(|_| CompileError::NotUtf8)?;
        let chunk_name = format!("={name}");
        let internal = |e: mlua::Error| CompileError::Internal(e.to_string());
        if let Some(msg) = self.state.check_syntax(src, &chunk_name).map_err(internal)? {
            return Err(CompileError::Syntax(msg));
        }
        let body = instrument(src)?;
        let wrapped = format!("{PREFIX}{body}{SUFFIX}");
        let lua = self.state.lua();
        let chunk = lua
            .load(wrapped.as_str())
            .set_name(chunk_name.as_str())
            .set_mode(mlua::ChunkMode::Text)
            .into_function()
            .map_err(|e| CompileError::Internal(format!("instrumented source: {e}")))?;
        if let Some(why) = self.state.verify_steps(&chunk).map_err(internal)? {
            return Err(CompileError::Internal(format!("step checks: {why}")));
        }
        let bytecode = chunk.dump(false);
        drop(chunk);
        // Run the top level once here, so that errors in it (and a missing `return function`)
        // are reported now rather than on the workers.
        self.trial_run(&bytecode, &chunk_name, opts.jit)?;
        let uid = self.next_uid;
        self.next_uid += 1;
        Ok(FunctionDef {
            uid,
            name: name.to_string(),
            opts,
            bytecode,
            source_len: source.len(),
            compile_ns: started.elapsed().as_nanos() as u64,
            previous,
            condemned: AtomicBool::new(false),
            errors: AtomicU64::new(0),
            runaways: AtomicU64::new(0),
            load_ns_max: AtomicU64::new(0),
            loads: AtomicU64::new(0),
            per_worker: (0..MAX_WORKERS).map(|_| CachePadded::new(PerWorker::default())).collect(),
            last_error: Mutex::new(None),
            placed: Mutex::new(None),
        })
    }
}

/// The message of a Lua error without mlua's traceback decoration.
pub fn lua_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => lua_message(cause),
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => m.clone(),
        mlua::Error::MemoryError(m) => format!("out of memory: {m}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytecode check finds a loop or a function the source instrumenter left without a
    /// check (here: nothing was instrumented), and passes what it instrumented.
    #[test]
    fn bytecode_check_catches_uninstrumented_loops_and_functions() {
        let state = LuaState::new(16 << 20, 1000).unwrap();
        let load = |body: &str| {
            let text = format!("{PREFIX}{body}{SUFFIX}");
            state.lua().load(text.as_str()).into_function().unwrap()
        };
        let bodies = [
            "while true do end return function() end",
            "repeat until false return function() end",
            "for i = 1, 10 do end return function() end",
            "for k in pairs({}) do end return function() end",
            "::a:: goto a",
            "return function(pkt) local x = 0 while x < 1 do x = x + 1 end end",
            "local function f() return f() end return f",
            "return function(pkt) return function() end end",
        ];
        for body in bodies {
            let raw = state.verify_steps(&load(body)).unwrap();
            assert!(raw.is_some(), "{body}: an unchecked loop or function passed");
            let checked = state.verify_steps(&load(&instrument(body).unwrap())).unwrap();
            assert_eq!(checked, None, "{body}");
        }
        // Loop-free code needs no check, and the wrapper's own driver loop is not user code.
        assert_eq!(state.verify_steps(&load("local x = 1 return x")).unwrap(), None);
    }
}
