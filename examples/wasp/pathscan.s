; pathscan (WASP paper §3.3, "scanning path"): records the IPv4 address (e.32[5], the low 32
; bits of the IPv4-mapped node address) of every WASP router the packet crosses, in order, up to
; a capacity the sender gives: 30 addresses fit in one packet (the paper's figure). Routers that
; do not run WASP execute nothing and so are simply not recorded.
; Keys: none. Scratchpad (128 bytes for 30 hops; 8 + 4 x capacity in general):
;   s.32[0]          capacity: addresses the scratchpad has room for (sender sets, <= 30)
;   s.32[1]          WASP routers crossed so far, counted even when full: more than the
;                    capacity means the path was longer than what was recorded
;   s.32[2 + i]      IPv4 address of the i-th WASP router crossed (i < capacity)
; A capacity above (scratch_len - 8) / 4 makes the next router fault out-of-bounds.
; 15 bytes of code.
        ld a, s.32[1]      ; A <- n, routers recorded or counted so far
        mov b, a           ; B <- n: the index of this router's address
        inc
        st s.32[1], a      ; n + 1 (C is untouched: only compares, lookup and map set it)
        ld a, s.32[0]      ; A <- capacity
        cle                ; C <- capacity <= n: no room left
        jt done
        ld a, e.32[5]      ; A <- this router's IPv4 address
        stx s.32[b+2], a   ; address n at byte 8 + 4n
done:                      ; falling off the end forwards
