-- hotplane Lua runtime prelude. Runs once per Lua state with the full standard library and
-- returns the runtime's private API. User code never sees this chunk's globals: each flow
-- function gets its own environment from `new_env`, without io, os, debug, package, ffi, jit,
-- load or string.dump, so it can neither reach memory outside its packets nor the host.
--
-- Packets are reached through LuaJIT FFI, so field access compiles to loads and stores. The
-- objects handed to user code (packets, header views, array views) are small structs holding
-- only a read-only slot number; they are created once per state, one per batch slot, so the
-- fast path allocates nothing. Every accessor checks its offset against the frame length, so a
-- flow function cannot read or write outside its packet.

local shared_address, max_batch = ...
local ffi = require("ffi")
local bit = require("bit")
local jit = require("jit")
local cast, typeof, metatype, cdef = ffi.cast, ffi.typeof, ffi.metatype, ffi.cdef
local band, rshift, bswap, tobit = bit.band, bit.rshift, bit.bswap, bit.tobit
local type, error, tostring, pairs, ipairs, setfenv, load = type, error, tostring, pairs, ipairs, setfenv, load

cdef(string.format([[
typedef struct hp_desc {
  uint8_t *data;
  uint64_t user;
  uint32_t len;
  uint32_t cap;
  uint32_t flow_hash;
  uint16_t in_port;
  uint16_t out_port;
  uint16_t l3;
  uint16_t l4;
  uint16_t payload;
  uint8_t layers;
  uint8_t verdict;
} hp_desc;
typedef struct hp_shared {
  int32_t fuel;
  int32_t budget;
  int32_t cur;
  int32_t reserved;
  hp_desc descs[%d];
} hp_shared;
]], max_batch))

local U8, U16, U32 = typeof("uint8_t *"), typeof("uint16_t *"), typeof("uint32_t *")
local S = cast("hp_shared *", shared_address)
local D = S.descs

-- Layer bits, as in hotplane_core::Layers.
local ETH, IP4, IP6, TCP, UDP = 1, 4, 8, 16, 32
local PASS, DROP = 0, 1

-- The packet API, built twice: for JIT-compiled functions and for interpreted ones (see
-- `handles`). Returns the handle of the packet in a batch slot.
local function make_api(pooled, suffix)
-- A handle type with metatable `mt`; `H(slot)` gives the handle of a batch slot. For JIT-compiled
-- functions `H` is the C type itself: handles are created where they are used, and LuaJIT's
-- allocation sinking removes them, leaving the slot number in a register. The interpreter
-- cannot sink allocations, so interpreted functions get handles made once per slot instead.
local function handles(name, mt)
  name = name .. suffix
  cdef("typedef struct { const int32_t slot; } " .. name .. ";")
  local T = metatype(name, mt)
  if not pooled then return T end
  local objs = {}
  for i = 0, max_batch - 1 do objs[i] = T(i) end
  return function(slot) return objs[slot] end
end

local function no_assign(what)
  return function(_, k) error("cannot assign " .. what .. "." .. tostring(k), 2) end
end

local function oob(what, off, len)
  error(what .. ": offset " .. tostring(off) .. " is outside the " .. tostring(len) .. "-byte frame", 3)
end

-- Big-endian field access at byte offset `off` of the frame, bounds-checked.
local function rd8(d, off, what)
  if off < 0 or off + 1 > d.len then oob(what, off, d.len) end
  return d.data[off]
end
local function wr8(d, off, v, what)
  if off < 0 or off + 1 > d.len then oob(what, off, d.len) end
  d.data[off] = v
end
local function rd16(d, off, what)
  if off < 0 or off + 2 > d.len then oob(what, off, d.len) end
  return rshift(bswap(cast(U16, d.data + off)[0]), 16)
end
local function wr16(d, off, v, what)
  if off < 0 or off + 2 > d.len then oob(what, off, d.len) end
  cast(U16, d.data + off)[0] = rshift(bswap(v), 16)
end
local function rd32(d, off, what)
  if off < 0 or off + 4 > d.len then oob(what, off, d.len) end
  local v = bswap(cast(U32, d.data + off)[0])
  if v < 0 then return v + 4294967296 end
  return v
end
local function wr32(d, off, v, what)
  if off < 0 or off + 4 > d.len then oob(what, off, d.len) end
  cast(U32, d.data + off)[0] = bswap(tobit(v))
end

-- Header views: methods find the header through the offsets the classifier stored.
local function methods(fields, what)
  return { __index = fields, __newindex = no_assign(what) }
end

local function field(width, base, off, what)
  local rd, wr = rd16, wr16
  if width == 8 then rd, wr = rd8, wr8 elseif width == 32 then rd, wr = rd32, wr32 end
  return function(self) local d = D[self.slot] return rd(d, d[base] + off, what) end,
         function(self, v) local d = D[self.slot] wr(d, d[base] + off, v, what) end
end

local function mac_get(off)
  return function(self)
    local d = D[self.slot]
    return rd16(d, off, "eth") * 4294967296 + rd32(d, off + 2, "eth")
  end
end
local function mac_set(off)
  return function(self, v)
    local d = D[self.slot]
    wr16(d, off, math.floor(v / 4294967296) % 65536, "eth")
    wr32(d, off + 2, v % 4294967296, "eth")
  end
end

local eth = { getDst = mac_get(0), setDst = mac_set(0), getSrc = mac_get(6), setSrc = mac_set(6) }
-- The EtherType just before the network header (inside any VLAN tag), else at byte 12.
local function ethertype_at(d) if d.l3 >= 14 then return d.l3 - 2 end return 12 end
function eth.getType(self) local d = D[self.slot] return rd16(d, ethertype_at(d), "eth") end
function eth.setType(self, v) local d = D[self.slot] wr16(d, ethertype_at(d), v, "eth") end

local ip4 = {}
ip4.getTOS, ip4.setTOS = field(8, "l3", 1, "ip4")
ip4.getLength, ip4.setLength = field(16, "l3", 2, "ip4")
ip4.getID, ip4.setID = field(16, "l3", 4, "ip4")
ip4.getTTL, ip4.setTTL = field(8, "l3", 8, "ip4")
ip4.getProtocol, ip4.setProtocol = field(8, "l3", 9, "ip4")
ip4.getChecksum, ip4.setChecksum = field(16, "l3", 10, "ip4")
ip4.getSrc, ip4.setSrc = field(32, "l3", 12, "ip4")
ip4.getDst, ip4.setDst = field(32, "l3", 16, "ip4")
function ip4.getHeaderLength(self)
  local d = D[self.slot]
  return band(rd8(d, d.l3, "ip4"), 15) * 4
end
-- Recompute the header checksum (call after changing header fields).
function ip4.calculateChecksum(self)
  local d = D[self.slot]
  local l3 = d.l3
  local n = band(rd8(d, l3, "ip4"), 15) * 4
  if l3 + n > d.len then oob("ip4", l3 + n, d.len) end
  wr16(d, l3 + 10, 0, "ip4")
  local sum = 0
  for off = l3, l3 + n - 2, 2 do sum = sum + rd16(d, off, "ip4") end
  while sum > 65535 do sum = band(sum, 65535) + rshift(sum, 16) end
  wr16(d, l3 + 10, band(bit.bnot(sum), 65535), "ip4")
end

local ip6 = {}
ip6.getPayloadLength, ip6.setPayloadLength = field(16, "l3", 4, "ip6")
ip6.getNextHeader = field(8, "l3", 6, "ip6")
ip6.getHopLimit, ip6.setHopLimit = field(8, "l3", 7, "ip6")
function ip6.getTrafficClass(self)
  local d = D[self.slot]
  return band(rshift(rd16(d, d.l3, "ip6"), 4), 255)
end
function ip6.getFlowLabel(self)
  local d = D[self.slot]
  return band(rd32(d, d.l3, "ip6"), 0xfffff)
end

local udp = {}
udp.getSrcPort, udp.setSrcPort = field(16, "l4", 0, "udp")
udp.getDstPort, udp.setDstPort = field(16, "l4", 2, "udp")
udp.getLength, udp.setLength = field(16, "l4", 4, "udp")
udp.getChecksum, udp.setChecksum = field(16, "l4", 6, "udp")

local tcp = {}
tcp.getSrcPort, tcp.setSrcPort = field(16, "l4", 0, "tcp")
tcp.getDstPort, tcp.setDstPort = field(16, "l4", 2, "tcp")
tcp.getSeq, tcp.setSeq = field(32, "l4", 4, "tcp")
tcp.getAck, tcp.setAck = field(32, "l4", 8, "tcp")
tcp.getFlags, tcp.setFlags = field(8, "l4", 13, "tcp")
tcp.getWindow, tcp.setWindow = field(16, "l4", 14, "tcp")
tcp.getChecksum, tcp.setChecksum = field(16, "l4", 16, "tcp")

local ETH_H = handles("hp_eth", methods(eth, "eth"))
local IP4_H = handles("hp_ip4", methods(ip4, "ip4"))
local IP6_H = handles("hp_ip6", methods(ip6, "ip6"))
local UDP_H = handles("hp_udp", methods(udp, "udp"))
local TCP_H = handles("hp_tcp", methods(tcp, "tcp"))

-- Array views over the frame or the payload: `view.uint32[i]` (host byte order, as libmoon),
-- `view.be16[i]` / `view.be32[i]` (network byte order); `i` counts elements from 0.
local function base_of(kind, d)
  if kind == "payload" then
    if d.payload == 0 then error("this packet has no transport payload", 3) end
    return d.payload
  end
  return 0
end

local function array_view(kind, elem)
  local size = (elem == "uint8" and 1) or ((elem == "uint16" or elem == "be16") and 2) or 4
  local what = kind .. "." .. elem
  local ptr = (size == 1 and U8) or (size == 2 and U16) or U32
  local get, set
  if elem == "be16" then
    get = function(d, off) return rshift(bswap(cast(U16, d.data + off)[0]), 16) end
    set = function(d, off, v) cast(U16, d.data + off)[0] = rshift(bswap(v), 16) end
  elseif elem == "be32" then
    get = function(d, off) local v = bswap(cast(U32, d.data + off)[0]) if v < 0 then v = v + 4294967296 end return v end
    set = function(d, off, v) cast(U32, d.data + off)[0] = bswap(tobit(v)) end
  else
    get = function(d, off) return cast(ptr, d.data + off)[0] end
    set = function(d, off, v) cast(ptr, d.data + off)[0] = v end
  end
  local function offset(self, i)
    if type(i) ~= "number" then error(what .. " is indexed by numbers", 3) end
    local k = tobit(i)
    if k ~= i then error(what .. ": index " .. tostring(i) .. " is not an integer", 3) end
    local d = D[self.slot]
    local off = base_of(kind, d) + k * size
    if k < 0 or off + size > d.len then oob(what, off, d.len) end
    return d, off
  end
  return handles("hp_" .. kind .. "_" .. elem, {
    __index = function(self, i) local d, off = offset(self, i) return get(d, off) end,
    __newindex = function(self, i, v) local d, off = offset(self, i) set(d, off, v) end,
  })
end

local function region(kind)
  local views = {}
  for _, elem in ipairs({ "uint8", "uint16", "uint32", "be16", "be32" }) do
    views[elem] = array_view(kind, elem)
  end
  local function length(self) local d = D[self.slot] return d.len - base_of(kind, d) end
  return handles("hp_" .. kind, {
    __index = function(self, k)
      local v = views[k]
      if v then return v(self.slot) end
      if k == "getLength" then return length end
      return nil
    end,
    __newindex = no_assign(kind),
  })
end
local FRAME_H = region("frame")
local PAYLOAD_H = region("payload")

-- A typed packet (`pkt:getUdp4Packet()`): `.eth`, `.ip4`/`.ip6`, `.udp`/`.tcp`, `.payload`.
local STACK_H = handles("hp_stack", {
  __index = function(self, k)
    local slot = self.slot
    local l = D[slot].layers
    if k == "eth" then return ETH_H(slot)
    elseif k == "ip4" then if band(l, IP4) ~= 0 then return IP4_H(slot) end
    elseif k == "ip6" then if band(l, IP6) ~= 0 then return IP6_H(slot) end
    elseif k == "udp" then if band(l, UDP) ~= 0 then return UDP_H(slot) end
    elseif k == "tcp" then if band(l, TCP) ~= 0 then return TCP_H(slot) end
    elseif k == "payload" then if D[slot].payload ~= 0 then return PAYLOAD_H(slot) end
    end
    return nil
  end,
  __newindex = no_assign("packet"),
})

local function stack_if(want)
  return function(self)
    local slot = self.slot
    if band(D[slot].layers, want) == want then return STACK_H(slot) end
    return nil
  end
end

local pkt = {
  getEthernetPacket = stack_if(ETH),
  getIP4Packet = stack_if(IP4),
  getIP6Packet = stack_if(IP6),
  getUdp4Packet = stack_if(IP4 + UDP),
  getTcp4Packet = stack_if(IP4 + TCP),
  getUdp6Packet = stack_if(IP6 + UDP),
  getTcp6Packet = stack_if(IP6 + TCP),
}
function pkt.getSize(self) return D[self.slot].len end
function pkt.setSize(self, n)
  local d = D[self.slot]
  if type(n) ~= "number" or n < 0 or n > d.cap or tobit(n) ~= n then
    error("setSize: " .. tostring(n) .. " is not a length from 0 to " .. tostring(d.cap), 2)
  end
  d.len = n
end
function pkt.getFrame(self) return FRAME_H(self.slot) end
function pkt.getPayload(self)
  local slot = self.slot
  if D[slot].payload ~= 0 then return PAYLOAD_H(slot) end
  return nil
end
function pkt.getInPort(self) return D[self.slot].in_port end
function pkt.getOutPort(self) return D[self.slot].out_port end
function pkt.getFlowHash(self) return D[self.slot].flow_hash end
function pkt.getMark(self) return tonumber(D[self.slot].user) end
function pkt.setMark(self, v)
  if type(v) ~= "number" or v < 0 or v >= 9007199254740992 then error("setMark: expects a number from 0 to 2^53", 2) end
  D[self.slot].user = v
end
function pkt.forward(self, port)
  if type(port) ~= "number" or port < 0 or port > 65534 or tobit(port) ~= port then
    error("forward: " .. tostring(port) .. " is not a port number", 2)
  end
  local d = D[self.slot]
  d.out_port = port
  d.verdict = PASS
end
function pkt.drop(self) D[self.slot].verdict = DROP end
function pkt.pass(self) D[self.slot].verdict = PASS end
function pkt.isDropped(self) return D[self.slot].verdict == DROP end
local PKT_H = handles("hp_pkt", methods(pkt, "pkt"))

return PKT_H
end

local packet_jit = make_api(false, "")
-- Built when the first interpreted function is loaded: most states never need it.
local packet_interp = nil


-- Budget exhausted: raise outside anything user code can recover from (the fuel stays
-- negative, so every further check raises again until the driver returns).
local RUNAWAY = "function ran away: more than its step budget for one packet (loop iterations plus calls)"
local function out_of_fuel() S.fuel = -1 error(RUNAWAY, 0) end

-- The sandbox. String pattern functions are left out: patterns can backtrack for a very long
-- time inside C, where no check can stop them.
local raw_rep = string.rep
local REP_LIMIT = 1048576
local safe_string = {
  byte = string.byte, char = string.char, format = string.format, len = string.len,
  lower = string.lower, upper = string.upper, reverse = string.reverse, sub = string.sub,
  rep = function(s, n, sep)
    if type(n) == "number" and n > 0 and (n > REP_LIMIT or (#tostring(s) + #tostring(sep or "")) * n > REP_LIMIT) then
      error("string.rep: result larger than " .. REP_LIMIT .. " bytes", 2)
    end
    return raw_rep(s, n, sep)
  end,
}
-- `("x"):upper()` goes through the string metatable; point it at the safe table and hide it.
local string_mt = getmetatable("")
string_mt.__index = safe_string
string_mt.__metatable = false

local LIBS = {
  string = safe_string,
  table = { concat = table.concat, insert = table.insert, remove = table.remove, sort = table.sort, maxn = table.maxn },
  math = math,
  bit = bit,
  coroutine = coroutine,
}
local BASE = {
  "assert", "error", "ipairs", "next", "pairs", "pcall", "rawequal", "rawget", "rawset", "select",
  "setmetatable", "getmetatable", "tonumber", "tostring", "type", "unpack", "xpcall",
}
local globals = _G
local helpers = {
  ntoh16 = function(v) return rshift(bswap(v), 16) end,
  hton16 = function(v) return rshift(bswap(v), 16) end,
  ntoh32 = function(v) local r = bswap(v) if r < 0 then r = r + 4294967296 end return r end,
  hton32 = function(v) local r = bswap(v) if r < 0 then r = r + 4294967296 end return r end,
}

local function new_env()
  local env = {}
  for _, k in ipairs(BASE) do env[k] = globals[k] end
  for name, lib in pairs(LIBS) do
    local copy = {}
    for k, v in pairs(lib) do copy[k] = v end
    env[name] = copy
  end
  for k, v in pairs(helpers) do env[k] = v end
  env._G = env
  env._VERSION = "hotplane Lua (LuaJIT)"
  return env
end

-- Turn a compiled function chunk into its batch driver. The chunk takes the runtime's private
-- values as arguments (user code cannot name them) and returns the driver.
local function instantiate(bytes, name, jit_on)
  local chunk, err = load(bytes, name, "b")
  if not chunk then error(err, 0) end
  setfenv(chunk, new_env())
  local packet_at = packet_jit
  if not jit_on then
    jit.off(chunk, true)
    packet_interp = packet_interp or make_api(true, "_i")
    packet_at = packet_interp
  end
  S.fuel = S.budget
  local driver = chunk(S, out_of_fuel, packet_at, type, error)
  if S.fuel < 0 then error(RUNAWAY, 0) end
  return driver
end

local current_opt = -1
local function set_opt_level(level)
  if level ~= current_opt then
    jit.opt.start(level)
    current_opt = level
  end
end

-- Syntax check of the user's own text (the control side does this before instrumenting, so
-- that messages point at the user's lines).
local function check_syntax(src, name)
  local f, err = load(src, name, "t")
  if not f then return err end
  return nil
end

return {
  ffi = ffi,
  instantiate = instantiate,
  set_opt_level = set_opt_level,
  check_syntax = check_syntax,
  runaway_message = RUNAWAY,
  desc_size = ffi.sizeof("hp_desc"),
  shared_size = ffi.sizeof("hp_shared"),
  desc_offsets = { ffi.offsetof("hp_desc", "len"), ffi.offsetof("hp_desc", "in_port"), ffi.offsetof("hp_desc", "verdict") },
}
