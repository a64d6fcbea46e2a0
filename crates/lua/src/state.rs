//! One LuaJIT state: the prelude, the memory limit, the descriptor block shared with Lua, and
//! the raw batch call. A state is used by one thread at a time (its worker, or the compiler on
//! the control thread).

use mlua::ffi;
use mlua::{Lua, LuaOptions, RegistryKey, StdLib, Table};
use std::ffi::{c_int, CStr};
use std::ptr::NonNull;
use std::sync::atomic::AtomicI32;

/// Most packets handed to Lua in one call (a batch `Mask` has 64 bits).
pub const MAX_BATCH: usize = 64;

const PRELUDE: &str = include_str!("prelude.lua");

/// One packet as Lua sees it (`hp_desc` in the prelude; the layouts must match).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Desc {
    pub data: *mut u8,
    pub user: u64,
    pub len: u32,
    pub cap: u32,
    pub flow_hash: u32,
    pub in_port: u16,
    pub out_port: u16,
    pub l3: u16,
    pub l4: u16,
    pub payload: u16,
    pub layers: u8,
    pub verdict: u8,
}

impl Desc {
    const EMPTY: Desc = Desc {
        data: std::ptr::null_mut(),
        user: 0,
        len: 0,
        cap: 0,
        flow_hash: 0,
        in_port: 0,
        out_port: 0,
        l3: 0,
        l4: 0,
        payload: 0,
        layers: 0,
        verdict: 0,
    };
}

/// The watchdog's gate (`hp_gate.closed` in the prelude) while calls may run.
pub(crate) const GATE_OPEN: i32 = 0;
/// The gate once the watchdog stopped the call: every step check raises.
pub(crate) const GATE_CLOSED: i32 = 1;

/// The block Lua reaches through `hp_shared *` (the prelude's `S`).
#[repr(C)]
pub(crate) struct Shared {
    /// Steps left for the current packet; negative once a function ran away.
    pub fuel: i32,
    /// Steps each packet gets.
    pub budget: i32,
    /// Index of the packet being processed (to find the one an error belongs to).
    pub cur: i32,
    pub reserved: i32,
    /// Packets handed to Lua so far in this state: a packet handle is good while this still
    /// holds the value it was made with (see prelude.lua). Bumped by the driver before each
    /// packet and here after each call, so no handle outlives its call.
    pub turn: f64,
    pub descs: [Desc; MAX_BATCH],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("cannot create a Lua state: {0}")]
    Create(String),
}

/// Outcome of one raw call.
pub(crate) enum CallError {
    /// A Lua error (runtime error, or the watchdog's) with its message.
    Error(String),
    /// The step budget ran out.
    Runaway(String),
}

pub(crate) struct LuaState {
    // Field order is drop order: the prelude's table before the state, the state before the
    // block its code points into.
    api: Table,
    raw: NonNull<ffi::lua_State>,
    lua: Lua,
    shared: Box<Shared>,
    /// The watchdog's gate, an `hp_gate` in the state's heap (anchored by the prelude).
    gate: NonNull<AtomicI32>,
}

// SAFETY: the state is used by one thread at a time (the owner holds it behind `&mut`); `raw`
// points into `lua`, which moves with it (mlua's `send` feature makes `Lua` itself `Send`), and
// `shared` is a heap block only this state's Lua code and its owner touch; `gate` points into
// the state's heap, and the control thread only writes it atomically.
unsafe impl Send for LuaState {}

impl LuaState {
    /// A fresh state with the prelude loaded, at most `memory_limit` bytes, and `budget` steps
    /// per packet.
    pub fn new(memory_limit: usize, budget: u32) -> Result<Self, StateError> {
        let err = |e: mlua::Error| StateError::Create(e.to_string());
        let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::BIT | StdLib::JIT;
        // SAFETY: `ffi` is loaded for the prelude only; user code runs in environments built by
        // the prelude that contain neither `ffi`, `require` nor `load` (see prelude.lua).
        let lua = unsafe {
            Lua::unsafe_new_with(libs | StdLib::FFI | StdLib::PACKAGE, LuaOptions::new())
        };
        let mut shared = Box::new(Shared {
            fuel: budget.min(i32::MAX as u32) as i32,
            budget: budget.min(i32::MAX as u32) as i32,
            cur: 0,
            reserved: 0,
            turn: 0.0,
            descs: [Desc::EMPTY; MAX_BATCH],
        });
        let address = mlua::LightUserData(std::ptr::addr_of_mut!(*shared).cast());
        let api: Table = lua
            .load(PRELUDE)
            .set_name("=hotplane-prelude")
            .call((address, MAX_BATCH as i64))
            .map_err(err)?;
        let desc_size: usize = api.get("desc_size").map_err(err)?;
        let shared_size: usize = api.get("shared_size").map_err(err)?;
        if desc_size != size_of::<Desc>() || shared_size != size_of::<Shared>() {
            return Err(StateError::Create(format!(
                "prelude layout mismatch: hp_desc {desc_size} vs {}, hp_shared {shared_size} vs {}",
                size_of::<Desc>(),
                size_of::<Shared>()
            )));
        }
        let gate_address: f64 = api.get("gate_address").map_err(err)?;
        let gate = NonNull::new(gate_address as usize as *mut AtomicI32)
            .filter(|g| g.as_ptr().is_aligned())
            .ok_or_else(|| StateError::Create("the prelude's gate has no usable address".into()))?;
        // The state's own globals (ffi, require, load...) stay as they are: LuaJIT anchors the
        // FFI's metatables through the ffi module, and user code never sees these globals (each
        // function runs in an environment built by the prelude).
        lua.set_memory_limit(memory_limit).map_err(err)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: the closure only copies the state pointer out; it is valid for as long as
        // `lua` lives, which is as long as `self`.
        unsafe { lua.exec_raw::<()>((), |l| raw = l) }.map_err(err)?;
        let raw = NonNull::new(raw).ok_or_else(|| StateError::Create("null lua_State".into()))?;
        Ok(Self { api, raw, lua, shared, gate })
    }

    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    pub fn raw(&self) -> *mut ffi::lua_State {
        self.raw.as_ptr()
    }

    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    pub fn shared_mut(&mut self) -> &mut Shared {
        &mut self.shared
    }

    /// The watchdog's gate of this state, for the control thread. Valid while the state lives.
    pub fn gate(&self) -> *const AtomicI32 {
        self.gate.as_ptr()
    }

    /// Set LuaJIT's optimisation level for traces compiled from now on.
    pub fn set_opt_level(&self, level: u8) {
        if let Ok(f) = self.api.get::<mlua::Function>("set_opt_level") {
            let _ = f.call::<()>(level as i64);
        }
    }

    /// A syntax error in `src`, if any (text mode only).
    pub fn check_syntax(&self, src: &str, name: &str) -> Result<Option<String>, mlua::Error> {
        let f: mlua::Function = self.api.get("check_syntax")?;
        f.call((self.lua.create_string(src)?, name))
    }

    /// Why the compiled wrapper `chunk` is missing a step check, if it is (see `verify_steps`
    /// in prelude.lua).
    pub fn verify_steps(&self, chunk: &mlua::Function) -> Result<Option<String>, mlua::Error> {
        let f: mlua::Function = self.api.get("verify_steps")?;
        f.call(chunk)
    }

    /// Load a compiled function chunk and return a registry key for its batch driver. Runs the
    /// chunk's top level (bounded by the step budget).
    pub fn instantiate(
        &self,
        bytecode: &[u8],
        name: &str,
        jit: bool,
    ) -> Result<RegistryKey, mlua::Error> {
        let f: mlua::Function = self.api.get("instantiate")?;
        let driver: mlua::Function = f.call((self.lua.create_string(bytecode)?, name, jit))?;
        self.lua.create_registry_value(driver)
    }

    /// Call the driver (registry reference `driver`) for descriptors `start..n`. No Rust-to-Lua conversion happens
    /// here: two integers are pushed and the driver runs the whole batch inside Lua.
    pub fn call(&mut self, driver: c_int, start: usize, n: usize) -> Result<(), CallError> {
        let l = self.raw.as_ptr();
        // SAFETY: `l` is this state's main thread and only this thread uses the state now. The
        // stack is left as it was found: pcall pops the function and arguments and leaves either
        // nothing (0 results) or the error value, which is popped below. Errors raised inside
        // the call are caught by lua_pcall, so nothing unwinds through this frame.
        let rc = unsafe {
            ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, driver as _);
            ffi::lua_pushinteger(l, n as ffi::lua_Integer);
            ffi::lua_pushinteger(l, start as ffi::lua_Integer);
            ffi::lua_pcall(l, 2, 0, 0)
        };
        // Handles of this call's packets die with it (whether it ended well or not).
        self.shared.turn += 1.0;
        if rc == 0 {
            return Ok(());
        }
        // SAFETY: after a failed pcall the error value is on top of the stack; tolstring returns
        // null for non-string values and otherwise a string the state owns until the pop.
        let msg = unsafe {
            let s = ffi::lua_tolstring(l, -1, std::ptr::null_mut());
            let m = if s.is_null() {
                "error object is not a string".to_string()
            } else {
                CStr::from_ptr(s).to_string_lossy().into_owned()
            };
            ffi::lua_settop(l, -2);
            m
        };
        if self.shared.fuel < 0 {
            Err(CallError::Runaway(msg))
        } else {
            Err(CallError::Error(msg))
        }
    }
}

/// The watchdog's hook: raised on the worker's thread at the next interpreted instruction after
/// the watchdog armed it.
pub(crate) extern "C-unwind" fn watchdog_hook(l: *mut ffi::lua_State, _ar: *mut ffi::lua_Debug) {
    const MSG: &CStr = c"hotplane watchdog: flow function stopped after running too long";
    // SAFETY: called by Lua on the thread that runs `l`; clearing the hook and raising an error
    // are what a hook may do. lua_error does not return; no Rust value with a destructor lives
    // in this frame.
    unsafe {
        ffi::lua_sethook(l, None, 0, 0);
        ffi::lua_pushstring(l, MSG.as_ptr());
        ffi::lua_error(l);
    }
}

/// Arm the watchdog hook on `l` from another thread.
///
/// # Safety
/// `l` must be a live state. Setting a hook is the one operation Lua allows from outside the
/// running thread (it is how lua.c interrupts scripts from a signal handler): it writes the hook
/// fields, which the interpreter reads at instruction boundaries.
pub(crate) unsafe fn arm_watchdog(l: *mut ffi::lua_State) {
    let mask: c_int = ffi::LUA_MASKCOUNT | ffi::LUA_MASKCALL | ffi::LUA_MASKRET;
    ffi::lua_sethook(l, Some(watchdog_hook), mask, 1);
}

/// Remove the watchdog hook (on the owning thread).
pub(crate) fn disarm_watchdog(l: *mut ffi::lua_State) {
    // SAFETY: called by the thread that owns `l`, outside any Lua call.
    unsafe {
        ffi::lua_sethook(l, None, 0, 0);
    }
}
