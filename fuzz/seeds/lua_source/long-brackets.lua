--[==[ ]] ]=] while true do end ]==]
local s = [=[ ]] ::top:: goto top ]=]
return function(pkt) local t = {} t[ [[k]] ] = s if pkt:getSize() > 0 then goto done end ::done:: end