//! `hotplane-lua`: per-flow functions in LuaJIT.
//!
//! Every flow can have its own Lua function; a packet (or an API call) carrying Lua source
//! replaces one flow's function while the others keep theirs, the idea of libmoon's dynamic
//! updates. The pieces:
//!
//! - [`compile`]: the control thread checks, instruments and compiles source to LuaJIT bytecode
//!   and runs its top level once in a scratch state, so compile errors come back in the
//!   acknowledgement and workers never parse anything;
//! - [`runtime`]: one Lua state per worker (LuaJIT states are single-threaded), the
//!   [`LuaFunction`] stage that hands a whole batch to Lua in one call, error containment, the
//!   watchdog;
//! - `prelude.lua`: the packet API over LuaJIT FFI (`pkt:getUdp4Packet().udp:setDstPort(53)`,
//!   `pkt.payload.uint32[0]`) and the sandbox user code runs in;
//! - [`instrument`]: the step budget that bounds a runaway function, in JIT-compiled code too;
//! - [`kind`]: Lua as a program kind of the engine (`[lua]`, `stage = "lua"`, Lua updates, the
//!   `lua-functions` operation, the watchdog), and [`report`]: the JSON the control API shows.
//!
//! Depends on `hotplane-core` only (and on `mlua` with a vendored LuaJIT: no system Lua). It
//! must not depend on the other program kinds, the control plane or the binary.

pub mod anchor;
pub mod compile;
pub mod instrument;
pub mod kind;
pub mod lexer;
pub mod naming;
pub mod report;
pub mod runtime;
mod state;

pub use compile::{CompileError, FunctionDef, FunctionOpts, MAX_SOURCE};
pub use kind::{LuaKind, LuaSection};
pub use runtime::{LuaConfig, LuaFunction, LuaRuntime, LuaStats};
pub use state::MAX_BATCH;
