local s = "a\z 
  b\
c\x41\u{48}\65"
local n = 0x1p4 + 0x.8p-1 + 1e3 + 5ULL
return function(pkt) for i = 1, #s do n = n + 1 end for k, v in pairs({1}) do end pkt:setMark(#s) end