//! The anchor of `hotplane bench lua`: the same per-packet work written the way a libmoon
//! script does it, on raw FFI pointers with no bounds checks and no sandbox, in a bare LuaJIT
//! state. The difference to a hotplane flow function is the price of safety and of handing
//! real packet buffers to Lua.

use mlua::{Lua, LuaOptions, StdLib};
use std::time::Instant;

const RAW_LOOP: &str = r#"
local ffi = require("ffi")
local batch, frame_len, offset = ...
local bufs = ffi.new("uint8_t[?]", batch * 2048)
return function(rounds)
  for r = 1, rounds do
    for i = 0, batch - 1 do
      local p = ffi.cast("uint16_t *", bufs + i * 2048 + offset)
      p[0] = 0x0101
    end
  end
end
"#;

/// Nanoseconds per packet writing a 16-bit payload field at byte `offset` of `batch` buffers,
/// `rounds` times, in plain LuaJIT.
pub fn raw_luajit_ns(batch: usize, offset: usize, rounds: u64) -> Result<f64, mlua::Error> {
    // SAFETY: an isolated state running only the fixed chunk above, which writes inside the
    // buffer it allocated (offset + 2 <= 2048 is checked below).
    let lua = unsafe { Lua::unsafe_new_with(StdLib::ALL_SAFE | StdLib::FFI, LuaOptions::new()) };
    if offset + 2 > 2048 {
        return Err(mlua::Error::runtime("offset outside the buffer"));
    }
    let f: mlua::Function = lua.load(RAW_LOOP).call((batch as i64, 0, offset as i64))?;
    f.call::<()>((rounds / 10).max(1) as i64)?;
    let t = Instant::now();
    f.call::<()>(rounds as i64)?;
    Ok(t.elapsed().as_nanos() as f64 / (rounds as f64 * batch as f64))
}
