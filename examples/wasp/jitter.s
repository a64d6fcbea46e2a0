; jitter (WASP paper §2.1, flow statistics): per-flow jitter at each WASP router, kept in the
; store: the arrival time of the flow's last packet and a running mean of |D|, where D is the
; change between successive inter-arrival times (D = delta - previous delta, as RFC 3550's
; jitter for a sender that paces evenly). The mean is an EWMA with gain 1/16 done with shifts
; (J <- J + |D|/16 - J/16; no multiply or divide in the ISA).
; Keys: k0, the flow (random, chosen by the sender; every packet of the flow carries it).
; Bank (k0): m.64[0] last arrival, ns (e.time)   m.64[1] last inter-arrival time, ns
;            m.64[2] J, jitter estimate, ns        m.64[3] packets of the flow seen here
; The entry lives tau from the flow's first packet at this router (no refresh), so the
; statistics restart every tau.
; Scratchpad (8 bytes): s.64[0] the largest J of the WASP routers crossed so far (the sender
; sets 0; a router writes it once it has seen 3 packets of the flow, the first J).
; 37 bytes of code.
        map k0             ; m <- the flow's bank (zeroed when new)
        ld a, m.64[3]
        inc
        st m.64[3], a      ; n += 1
        imm b, 3
        cge                ; C <- n >= 3: a previous inter-arrival time exists
        ld a, e.time
        ld b, m.64[0]      ; B <- last arrival
        st m.64[0], a      ; last <- now
        sub                ; A <- delta (on the first packet a meaningless now - 0, never used)
        mov b, a
        ld a, m.64[1]
        swap               ; A <- delta, B <- previous delta
        st m.64[1], a      ; previous <- delta
        jf done            ; fewer than 3 arrivals: no D yet
        clt                ; C <- delta < previous
        sub                ; A <- delta - previous, wrapping
        jf positive
        not
        inc                ; A <- previous - delta
positive:
        shr 4              ; A <- |D| / 16
        ld b, m.64[2]      ; B <- J
        add                ; A <- J + |D|/16
        swap
        shr 4              ; A <- J / 16, B <- J + |D|/16
        swap
        sub                ; A <- J + |D|/16 - J/16
        st m.64[2], a
        ld b, s.64[0]
        max                ; the path's worst jitter so far
        st s.64[0], a
done:
