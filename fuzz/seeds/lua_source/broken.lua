-- Does not compile: the update carrying it is refused with Lua's message, and the function
-- that was running keeps running.
return function(pkt)
  pkt:drop(
end
