-- Destination NAT for one service: UDP to port 5000 goes to 10.9.0.7:5353. The UDP checksum
-- is cleared (allowed for IPv4) rather than recomputed.
local NEW_DST = 0x0a090007
local NEW_PORT = 5353

return function(pkt)
  local u = pkt:getUdp4Packet()
  if not u or u.udp:getDstPort() ~= 5000 then return end
  u.ip4:setDst(NEW_DST)
  u.ip4:calculateChecksum()
  u.udp:setDstPort(NEW_PORT)
  u.udp:setChecksum(0)
end
