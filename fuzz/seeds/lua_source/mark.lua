-- Write a constant into the 16-bit `mark` of hotplane's test stamp (payload bytes 16..18):
-- the function of the dynamic-update experiment (`hotplane bench lua-dyn`). A sink reading
-- the stamp sees which function processed each packet.
local MARK = 0x0101

return function(pkt)
  local u = pkt:getUdp4Packet()
  if u then
    u.payload.be16[8] = MARK
  end
end
