; nearest (WASP paper §3.3, service advertisement, the query side: "a modified path-scanning
; program tells the end-system where to find the service"): a query packet, sent towards any
; destination, picks up from the WASP routers on its path the provider nearest to its source
; among those they advertise (see advertise.s).
; Deployment: k0 is the service's *protected* key (advertise.s writes it, admin only); this
; program only reads it, which any packet may. Tested with a public key for now.
; At a router R that keeps (d << 32 | address), the route to that provider through R crosses
; q + d routers besides R, where q = routers the query crossed before R (its initial TTL - the
; TTL on arrival); the query keeps the smallest (q + d) << 32 | address seen along the path.
; Keys: k0, the service (read only: lookup never creates an entry).
; Scratchpad (16 bytes):
;   s.64[0]   answer: (q + d) << 32 | provider IPv4 address; the sender sets all ones (none
;             found), and it stays so when no router on the path knows the service
;   s.64[1]   initial TTL the sender put in the IP header (IPv4; for IPv6 read h.8[7])
; 14 bytes of code.
        ld a, s.64[1]      ; initial TTL
        ld b, h.8[8]       ; TTL on arrival
        sub                ; A <- q
        shl 32
        mov b, a           ; B <- q << 32
        lookup k0          ; A <- d << 32 | address, C <- this router knows a provider
        jf done
        add                ; A <- (q + d) << 32 | address
        ld b, s.64[0]      ; the best answer so far
        min
        st s.64[0], a
done:
