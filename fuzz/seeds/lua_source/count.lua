-- Per-flow state: the function's top-level locals live as long as the function (one copy per
-- worker). Every 1000th packet of the flow is marked in the packet metadata.
local seen = 0

return function(pkt)
  seen = seen + 1
  if seen % 1000 == 0 then
    pkt:setMark(seen)
  end
end
