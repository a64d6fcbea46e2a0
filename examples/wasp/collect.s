; collect (WASP paper §4, /map form): aggregate the samples of n sources into one packet.
; The bank under k0 holds m.64[0] = sum so far, m.64[1] = samples seen. Each packet carries its
; sample in s.64[0] and n in s.64[1]; the packets before the n-th drop themselves, the n-th
; continues with the sum of all n samples in s.64[0] and n set to 0, so that routers further
; on (which have seen nothing) forward it with the sum unchanged.
; Declares 1 key, 16-byte scratchpad. 16 bytes of code.
        map k0             ; bank m <- the tuple (zeroed when new)
        ld a, m.64[1]
        inc
        st m.64[1], a      ; seen += 1
        ld b, s.64[1]
        cge                ; C <- seen >= n (loads, add and stores keep C)
        ld a, m.64[0]
        ld b, s.64[0]
        add
        st m.64[0], a      ; sum += sample
        jt last
        drop               ; not the last sample: the store keeps it, the packet goes
last:   st s.64[0], a      ; the packet carries the sum
        clr
        st s.64[1], a      ; n <- 0: aggregated, later routers only pass it on
