#!/usr/bin/env luajit
local function f(k) if k > 0 then return f(k - 1) end return pkt end
return function(pkt) local co = coroutine.wrap(function() while true do coroutine.yield() end end) co() co() pcall(f, 10) end