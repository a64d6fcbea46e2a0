return function(pkt) --[ not long
repeat local x = 1 until false end