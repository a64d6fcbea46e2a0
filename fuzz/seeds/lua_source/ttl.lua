-- A router's IPv4 step: drop packets whose TTL has run out, else decrement the TTL, fix the
-- header checksum and send the packet out of port 1.
return function(pkt)
  local p = pkt:getIP4Packet()
  if not p then return pkt:drop() end
  local ttl = p.ip4:getTTL()
  if ttl <= 1 then return pkt:drop() end
  p.ip4:setTTL(ttl - 1)
  p.ip4:calculateChecksum()
  pkt:forward(1)
end
