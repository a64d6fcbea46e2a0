-- hotplane Lua runtime prelude. Runs once per Lua state with the full standard library and
-- returns the runtime's private API. User code never sees this chunk's globals: each flow
-- function gets its own environment from `new_env`, without io, os, debug, package, ffi, jit,
-- load or string.dump, so it can neither reach memory outside its packets nor the host.
--
-- Packets are reached through LuaJIT FFI, so field access compiles to loads and stores. The
-- objects handed to user code (packets, header views, array views) are small read-only structs
-- that only say which packet turn they belong to (see "Packet handles" below): they cannot be
-- forged, and one kept past its packet's turn is refused. Every accessor checks its offset
-- against the frame length, so a flow function cannot read or write outside its packet.

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
  double turn;
  hp_desc descs[%d];
} hp_shared;
]], max_batch))

local U8, U16, U32 = typeof("uint8_t *"), typeof("uint16_t *"), typeof("uint32_t *")
local S = cast("hp_shared *", shared_address)
local D = S.descs

-- Layer bits, as in hotplane_core::Layers.
local ETH, IP4, IP6, TCP, UDP = 1, 4, 8, 16, 32
local PASS, DROP = 0, 1

-- Packet handles. A handle is a small FFI struct holding the turn it was issued for: the driver
-- counts the packets it hands to functions (`S.turn`, bumped by Rust after every call too), and
-- a handle is good only while that count stands still. Every method and metamethod checks that
-- `self` is a handle of its own C type (`ffi.istype`: tables, numbers and handles of other
-- types are refused; user code has no way to make a cdata of these types) and that its turn is
-- the current one, and then works on the packet being processed, `D[S.cur]`: never on a
-- descriptor that anything user code holds names. A forged handle is refused, and so is one
-- kept past its packet's turn (it would otherwise reach another packet, or a slot of the
-- descriptor block no packet of this call fills).
--
-- For JIT-compiled code the checks cost nothing per packet: handles are created where they are
-- used, LuaJIT's allocation sinking removes them, and the trace knows both the type and the turn
-- it just stored, so the comparisons fold away. Interpreted code allocates its handles.
local istype = ffi.istype

local function handle_type(name)
  cdef("typedef struct { const double turn; } " .. name .. ";")
  return typeof(name)
end

local function stale(what)
  error(what .. ": not a handle of the packet being processed (a handle is good during its packet's turn only)", 4)
end

-- The descriptor of the packet being processed, if `self` is a current handle of type `T`.
local function desc_of(self, T, what)
  if not istype(T, self) or self.turn ~= S.turn then stale(what) end
  return D[S.cur]
end

local PKT_T, STACK_T = handle_type("hp_pkt"), handle_type("hp_stack")
local ETH_T, IP4_T, IP6_T = handle_type("hp_eth"), handle_type("hp_ip4"), handle_type("hp_ip6")
local UDP_T, TCP_T = handle_type("hp_udp"), handle_type("hp_tcp")
local FRAME_T, PAYLOAD_T = handle_type("hp_frame"), handle_type("hp_payload")

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

local function field(T, width, base, off, what)
  local rd, wr = rd16, wr16
  if width == 8 then rd, wr = rd8, wr8 elseif width == 32 then rd, wr = rd32, wr32 end
  return function(self) local d = desc_of(self, T, what) return rd(d, d[base] + off, what) end,
         function(self, v) local d = desc_of(self, T, what) wr(d, d[base] + off, v, what) end
end

local function mac_get(off)
  return function(self)
    local d = desc_of(self, ETH_T, "eth")
    return rd16(d, off, "eth") * 4294967296 + rd32(d, off + 2, "eth")
  end
end
local function mac_set(off)
  return function(self, v)
    local d = desc_of(self, ETH_T, "eth")
    wr16(d, off, math.floor(v / 4294967296) % 65536, "eth")
    wr32(d, off + 2, v % 4294967296, "eth")
  end
end

local eth = { getDst = mac_get(0), setDst = mac_set(0), getSrc = mac_get(6), setSrc = mac_set(6) }
-- The EtherType just before the network header (inside any VLAN tag), else at byte 12.
local function ethertype_at(d) if d.l3 >= 14 then return d.l3 - 2 end return 12 end
function eth.getType(self) local d = desc_of(self, ETH_T, "eth") return rd16(d, ethertype_at(d), "eth") end
function eth.setType(self, v) local d = desc_of(self, ETH_T, "eth") wr16(d, ethertype_at(d), v, "eth") end

local ip4 = {}
ip4.getTOS, ip4.setTOS = field(IP4_T, 8, "l3", 1, "ip4")
ip4.getLength, ip4.setLength = field(IP4_T, 16, "l3", 2, "ip4")
ip4.getID, ip4.setID = field(IP4_T, 16, "l3", 4, "ip4")
ip4.getTTL, ip4.setTTL = field(IP4_T, 8, "l3", 8, "ip4")
ip4.getProtocol, ip4.setProtocol = field(IP4_T, 8, "l3", 9, "ip4")
ip4.getChecksum, ip4.setChecksum = field(IP4_T, 16, "l3", 10, "ip4")
ip4.getSrc, ip4.setSrc = field(IP4_T, 32, "l3", 12, "ip4")
ip4.getDst, ip4.setDst = field(IP4_T, 32, "l3", 16, "ip4")
function ip4.getHeaderLength(self)
  local d = desc_of(self, IP4_T, "ip4")
  return band(rd8(d, d.l3, "ip4"), 15) * 4
end
-- Recompute the header checksum (call after changing header fields).
function ip4.calculateChecksum(self)
  local d = desc_of(self, IP4_T, "ip4")
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
ip6.getPayloadLength, ip6.setPayloadLength = field(IP6_T, 16, "l3", 4, "ip6")
ip6.getNextHeader = field(IP6_T, 8, "l3", 6, "ip6")
ip6.getHopLimit, ip6.setHopLimit = field(IP6_T, 8, "l3", 7, "ip6")
function ip6.getTrafficClass(self)
  local d = desc_of(self, IP6_T, "ip6")
  return band(rshift(rd16(d, d.l3, "ip6"), 4), 255)
end
function ip6.getFlowLabel(self)
  local d = desc_of(self, IP6_T, "ip6")
  return band(rd32(d, d.l3, "ip6"), 0xfffff)
end

local udp = {}
udp.getSrcPort, udp.setSrcPort = field(UDP_T, 16, "l4", 0, "udp")
udp.getDstPort, udp.setDstPort = field(UDP_T, 16, "l4", 2, "udp")
udp.getLength, udp.setLength = field(UDP_T, 16, "l4", 4, "udp")
udp.getChecksum, udp.setChecksum = field(UDP_T, 16, "l4", 6, "udp")

local tcp = {}
tcp.getSrcPort, tcp.setSrcPort = field(TCP_T, 16, "l4", 0, "tcp")
tcp.getDstPort, tcp.setDstPort = field(TCP_T, 16, "l4", 2, "tcp")
tcp.getSeq, tcp.setSeq = field(TCP_T, 32, "l4", 4, "tcp")
tcp.getAck, tcp.setAck = field(TCP_T, 32, "l4", 8, "tcp")
tcp.getFlags, tcp.setFlags = field(TCP_T, 8, "l4", 13, "tcp")
tcp.getWindow, tcp.setWindow = field(TCP_T, 16, "l4", 14, "tcp")
tcp.getChecksum, tcp.setChecksum = field(TCP_T, 16, "l4", 16, "tcp")

metatype(ETH_T, methods(eth, "eth"))
metatype(IP4_T, methods(ip4, "ip4"))
metatype(IP6_T, methods(ip6, "ip6"))
metatype(UDP_T, methods(udp, "udp"))
metatype(TCP_T, methods(tcp, "tcp"))

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
  local T = handle_type("hp_" .. kind .. "_" .. elem)
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
    local d = desc_of(self, T, what)
    if type(i) ~= "number" then error(what .. " is indexed by numbers", 3) end
    local k = tobit(i)
    if k ~= i then error(what .. ": index " .. tostring(i) .. " is not an integer", 3) end
    local off = base_of(kind, d) + k * size
    if k < 0 or off + size > d.len then oob(what, off, d.len) end
    return d, off
  end
  return metatype(T, {
    __index = function(self, i) local d, off = offset(self, i) return get(d, off) end,
    __newindex = function(self, i, v) local d, off = offset(self, i) set(d, off, v) end,
  })
end

local function region(T, kind)
  local views = {}
  for _, elem in ipairs({ "uint8", "uint16", "uint32", "be16", "be32" }) do
    views[elem] = array_view(kind, elem)
  end
  local function length(self) local d = desc_of(self, T, kind) return d.len - base_of(kind, d) end
  metatype(T, {
    __index = function(self, k)
      desc_of(self, T, kind)
      local v = views[k]
      if v then return v(self.turn) end
      if k == "getLength" then return length end
      return nil
    end,
    __newindex = no_assign(kind),
  })
end
region(FRAME_T, "frame")
region(PAYLOAD_T, "payload")

-- A typed packet (`pkt:getUdp4Packet()`): `.eth`, `.ip4`/`.ip6`, `.udp`/`.tcp`, `.payload`.
metatype(STACK_T, {
  __index = function(self, k)
    local d = desc_of(self, STACK_T, "packet")
    local turn, l = self.turn, d.layers
    if k == "eth" then return ETH_T(turn)
    elseif k == "ip4" then if band(l, IP4) ~= 0 then return IP4_T(turn) end
    elseif k == "ip6" then if band(l, IP6) ~= 0 then return IP6_T(turn) end
    elseif k == "udp" then if band(l, UDP) ~= 0 then return UDP_T(turn) end
    elseif k == "tcp" then if band(l, TCP) ~= 0 then return TCP_T(turn) end
    elseif k == "payload" then if d.payload ~= 0 then return PAYLOAD_T(turn) end
    end
    return nil
  end,
  __newindex = no_assign("packet"),
})

local function stack_if(want)
  return function(self)
    local d = desc_of(self, PKT_T, "pkt")
    if band(d.layers, want) == want then return STACK_T(self.turn) end
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
local function P(self) return desc_of(self, PKT_T, "pkt") end
function pkt.getSize(self) return P(self).len end
function pkt.setSize(self, n)
  local d = P(self)
  if type(n) ~= "number" or n < 0 or n > d.cap or tobit(n) ~= n then
    error("setSize: " .. tostring(n) .. " is not a length from 0 to " .. tostring(d.cap), 2)
  end
  d.len = n
end
function pkt.getFrame(self) P(self) return FRAME_T(self.turn) end
function pkt.getPayload(self)
  if P(self).payload ~= 0 then return PAYLOAD_T(self.turn) end
  return nil
end
function pkt.getInPort(self) return P(self).in_port end
function pkt.getOutPort(self) return P(self).out_port end
function pkt.getFlowHash(self) return P(self).flow_hash end
function pkt.getMark(self) return tonumber(P(self).user) end
function pkt.setMark(self, v)
  local d = P(self)
  if type(v) ~= "number" or v < 0 or v >= 9007199254740992 then error("setMark: expects a number from 0 to 2^53", 2) end
  d.user = v
end
function pkt.forward(self, port)
  local d = P(self)
  if type(port) ~= "number" or port < 0 or port > 65534 or tobit(port) ~= port then
    error("forward: " .. tostring(port) .. " is not a port number", 2)
  end
  d.out_port = port
  d.verdict = PASS
end
function pkt.drop(self) P(self).verdict = DROP end
function pkt.pass(self) P(self).verdict = PASS end
function pkt.isDropped(self) return P(self).verdict == DROP end
metatype(PKT_T, methods(pkt, "pkt"))


-- The watchdog's stop. Every step check (instrument.rs) reads `G.closed`, which the watchdog
-- on the control thread sets to 1 to stop a call that ran longer than `watchdog_ms` (the
-- worker sets it back to 0 after the call). Where it lives matters for compiled code: LuaJIT
-- hoists a load out of a loop unless a store in the loop may alias it, and it ignores
-- `volatile` on FFI fields. A field of `S` would be hoisted: `S` is a constant pointer, and
-- LuaJIT proves two fields of one constant pointer apart (lj_opt_mem.c, aa_xref). `G` is an
-- FFI object in the Lua heap instead: its address is "object + offset", which LuaJIT cannot
-- tell apart from the constant pointer the check stores `fuel` through, so `G.closed` is
-- "may alias" with that store and is read from memory after every one of them. (A load that
-- partly overlapped `fuel` would be reloaded too, but it would stall on store forwarding on
-- every check.) LuaJIT does not move objects, so the address stays valid for the state's life.
cdef("typedef struct hp_gate { int32_t closed; } hp_gate;")
local G = ffi.new("hp_gate")
-- (The same message as the hook's in state.rs.)
local WATCHDOG = "hotplane watchdog: flow function stopped after running too long"

-- Budget exhausted or the watchdog's stop: raise outside anything user code can recover from
-- (the fuel stays negative and the gate closed, so every further check raises again until the
-- driver returns).
local RUNAWAY = "function ran away: more than its step budget for one packet (loop iterations plus calls)"
local function out_of_fuel()
  S.fuel = -1
  if G.closed ~= 0 then error(WATCHDOG, 0) end
  error(RUNAWAY, 0)
end

-- The sandbox. String pattern functions are left out: patterns can backtrack for a very long
-- time inside C, where no check can stop them.
--
-- Library calls pay for their work in steps too (one step per 64 bytes a string function
-- makes or reads, per 8 elements a table function moves, compares or returns), so a loop of
-- calls on large values runs out of budget as its time grows, not only as its iterations do.
-- Counts go through `tonumber` first, as Lua coerces them: `string.rep("x", "1e7")` is 10^7.
local function charge(units)
  local left = S.fuel - units
  if left < 0 then out_of_fuel() end
  S.fuel = left
end
local BYTES, ELEMS = 1 / 64, 1 / 8

local raw_rep, raw_sub, raw_byte, raw_char = string.rep, string.sub, string.byte, string.char
local raw_upper, raw_lower, raw_reverse, raw_format = string.upper, string.lower, string.reverse, string.format
local raw_concat, raw_insert, raw_remove, raw_sort = table.concat, table.insert, table.remove, table.sort
local raw_unpack, raw_tonumber, select = unpack, tonumber, select
local floor = math.floor
local REP_LIMIT = 1048576

-- The length `string.*` sees for an argument (numbers become strings; anything else is an
-- error the function itself raises).
local function strlen(v)
  local t = type(v)
  if t == "string" then return #v elseif t == "number" then return #tostring(v) end
  return 0
end

-- Elements `from..to` (Lua's defaults and negative positions) of something `len` long.
local function span(len, from, to)
  from, to = raw_tonumber(from) or 1, raw_tonumber(to) or len
  if from < 0 then from = len + from + 1 end
  if to < 0 then to = len + to + 1 end
  if from < 1 then from = 1 end
  if to > len then to = len end
  if to < from then return 0 end
  return to - from + 1
end

local function charged_result(s) charge(#s * BYTES) return s end

local safe_string = {
  len = string.len,
  rep = function(s, n, sep)
    local count = raw_tonumber(n)
    if count and count > 0 then
      count = floor(count)
      local size = count * strlen(s) + (count - 1) * strlen(sep)
      if count > REP_LIMIT or size > REP_LIMIT then
        error("string.rep: result larger than " .. REP_LIMIT .. " bytes", 2)
      end
      charge(size * BYTES)
    end
    return raw_rep(s, n, sep)
  end,
  sub = function(s, i, j) return charged_result(raw_sub(s, i, j)) end,
  upper = function(s) return charged_result(raw_upper(s)) end,
  lower = function(s) return charged_result(raw_lower(s)) end,
  reverse = function(s) return charged_result(raw_reverse(s)) end,
  format = function(...) return charged_result(raw_format(...)) end,
  byte = function(s, i, j)
    if j ~= nil then charge(span(strlen(s), i, j) * ELEMS) end
    return raw_byte(s, i, j)
  end,
  char = function(...)
    charge(select("#", ...) * ELEMS)
    return raw_char(...)
  end,
}
-- `("x"):upper()` goes through the string metatable; point it at the safe table and hide it.
local string_mt = getmetatable("")
string_mt.__index = safe_string
string_mt.__metatable = false

local function table_len(t) if type(t) == "table" then return #t end return 0 end
-- Without a comparator, `table.sort` compares inside C, where no check runs: on large strings
-- one call could compare for minutes. Its default order is this Lua function instead, which
-- looks at the watchdog's gate before every comparison (the steps are charged up front).
local function default_less(a, b)
  if G.closed ~= 0 then out_of_fuel() end
  return a < b
end
local safe_table = {
  concat = function(t, sep, i, j)
    charge(span(table_len(t), i, j) * ELEMS)
    return charged_result(raw_concat(t, sep, i, j))
  end,
  insert = function(t, ...)
    if select("#", ...) > 1 then charge(table_len(t) * ELEMS) end
    return raw_insert(t, ...)
  end,
  remove = function(t, ...)
    if select("#", ...) > 0 then charge(table_len(t) * ELEMS) end
    return raw_remove(t, ...)
  end,
  sort = function(t, cmp)
    local n = table_len(t)
    if n > 1 then charge(n * math.ceil(math.log(n) / math.log(2)) * ELEMS) end
    return raw_sort(t, cmp or default_less)
  end,
  maxn = function(t)
    local m, n = 0, 0
    for k in next, t do
      n = n + 1
      if type(k) == "number" and k > m then m = k end
    end
    charge(n * ELEMS)
    return m
  end,
}
-- `unpack` pushes every position from i to j, holes and all (LuaJIT refuses more than 8000).
local safe_unpack = function(t, i, j)
  local from, to = raw_tonumber(i) or 1, raw_tonumber(j) or table_len(t)
  if to >= from then charge(math.min(to - from + 1, 8192) * ELEMS) end
  return raw_unpack(t, i, j)
end
local safe_tonumber = function(v, base)
  if type(v) == "string" then charge(#v * BYTES) end
  return raw_tonumber(v, base)
end

local LIBS = {
  string = safe_string,
  table = safe_table,
  math = math,
  bit = bit,
  coroutine = coroutine,
}
local BASE = {
  "assert", "error", "ipairs", "next", "pairs", "pcall", "rawequal", "rawget", "rawset", "select",
  "setmetatable", "getmetatable", "tostring", "type", "xpcall",
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
  env.unpack = safe_unpack
  env.tonumber = safe_tonumber
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
  if not jit_on then jit.off(chunk, true) end
  S.fuel = S.budget
  local driver = chunk(S, out_of_fuel, PKT_T, type, error, G)
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

-- Defence in depth for the source instrumenter: read the compiled bytecode (jit.util) and check
-- that every function of user code starts with a step check and that every backward jump (every
-- loop, every backward `goto`) has a call of the runaway handler `__hp_X` between its target and
-- itself. A lexer mistake that left a loop without a check makes the compile fail instead.
-- Instruction modes are LuaJIT's BCMode fields: `m & 7` is operand A, `m & (15*128)` is D.
local jutil = require("jit.util")
local funcinfo, funcbc, funck, funcuvname = jutil.funcinfo, jutil.funcbc, jutil.funck, jutil.funcuvname
local MODE_D, MODE_A, BCM_JUMP, BCM_UV, BCM_DST = 15 * 128, 7, 13 * 128, 5 * 128, 1
-- `LOOP` marks a loop for the JIT and jumps nowhere (its operand may even point at itself); its
-- opcode is taken from a loop LuaJIT compiles here rather than from a table of this version.
local LOOP_OP = band((funcbc(load("while true do end"), 1)), 255)
-- The entry check's instructions up to its call of `__hp_X` (see instrument.rs).
local ENTRY_CHECK_LEN = 16

local function child_protos(fn)
  local list = {}
  for n = -1, -1000000000, -1 do
    local k = funck(fn, n)
    if k == nil then break end
    if type(k) == "proto" then list[#list + 1] = k end
  end
  return list
end

-- Whether instruction `ins` (mode `m`) of `fn` loads upvalue `name`.
local function loads_upvalue(fn, ins, m, name)
  return band(m, MODE_D) == BCM_UV and band(m, MODE_A) == BCM_DST and funcuvname(fn, rshift(ins, 16)) == name
end

local function verify_proto(fn, needs_entry_check)
  local checks, loops = {}, {}
  for pc = 1, 1000000000 do
    local ins, m = funcbc(fn, pc)
    if not ins then break end
    if loads_upvalue(fn, ins, m, "__hp_X") then
      checks[#checks + 1] = pc
    elseif band(m, MODE_D) == BCM_JUMP and band(ins, 255) ~= LOOP_OP then
      local target = pc + rshift(ins, 16) - 0x7fff
      if target <= pc then loops[#loops + 1] = { target, pc } end
    end
  end
  local where = "function at line " .. tostring(funcinfo(fn).linedefined)
  if needs_entry_check then
    local ins, m = funcbc(fn, 1)
    if not (ins and loads_upvalue(fn, ins, m, "__hp_S") and checks[1] and checks[1] <= ENTRY_CHECK_LEN) then
      return where .. " does not start with a step check (first call of the handler at bytecode " .. tostring(checks[1]) .. ")"
    end
  end
  for _, loop in ipairs(loops) do
    local covered = false
    for _, pc in ipairs(checks) do
      -- `pc == end + 1`: the jump is the check's own `if` skipping the call (LuaJIT threads
      -- that jump straight to the loop head).
      if pc >= loop[1] and pc <= loop[2] + 1 then covered = true break end
    end
    if not covered then return where .. ": a loop at bytecode " .. loop[1] .. ".." .. loop[2] .. " has no step check" end
  end
  return nil
end

local function verify_tree(fn, needs_entry_check)
  local err = verify_proto(fn, needs_entry_check)
  if err then return err end
  for _, child in ipairs(child_protos(fn)) do
    err = verify_tree(child, true)
    if err then return err end
  end
  return nil
end

-- `chunk` is a compiled wrapper (compile.rs): the main chunk has two functions, the user's chunk
-- (defined on line 1, run once at load, its loops checked) and the driver (defined on the last
-- line, looping over at most one batch); everything inside the user's chunk is user code.
local function verify_steps(chunk)
  local err = verify_proto(chunk, false)
  if err then return err end
  local user = 0
  for _, child in ipairs(child_protos(chunk)) do
    if funcinfo(child).linedefined == 1 then
      user = user + 1
      err = verify_proto(child, false)
      if err then return err end
      for _, f in ipairs(child_protos(child)) do
        err = verify_tree(f, true)
        if err then return err end
      end
    end
  end
  if user ~= 1 then return "the compiled chunk does not have the wrapper's shape" end
  return nil
end

return {
  ffi = ffi,
  instantiate = instantiate,
  set_opt_level = set_opt_level,
  check_syntax = check_syntax,
  verify_steps = verify_steps,
  runaway_message = RUNAWAY,
  desc_size = ffi.sizeof("hp_desc"),
  shared_size = ffi.sizeof("hp_shared"),
  -- The gate's address (exact in a double: user-space addresses have 47 bits); `G` stays
  -- anchored as an upvalue of `instantiate`.
  gate_address = tonumber(ffi.cast("uintptr_t", ffi.cast("hp_gate *", G))),
  desc_offsets = { ffi.offsetof("hp_desc", "len"), ffi.offsetof("hp_desc", "in_port"), ffi.offsetof("hp_desc", "verdict") },
}
