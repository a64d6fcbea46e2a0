; advertise (WASP paper §3.3, "service advertisement"): a management station announces a
; service provider under a well-known key (e.g. a hash of the service name); each router keeps
; only the provider nearest to it, by the advertisement's TTL.
; Deployment: k0 is a *protected* key, written only by authenticated admin packets, so that no
; ordinary packet can redirect clients; until protected scopes exist the program runs (and is
; tested) with a public key.
; Keys: k0, the service. Its word 0 (the only word; `nearest.s` reads it with lookup) is
;   (distance << 32) | provider IPv4 address,
; so the smallest word is the nearest provider (ties: the lower address).
; distance = the sender's initial TTL - the TTL as the packet arrives here (h.8[8], IPv4) =
; routers the advertisement crossed before this one. For IPv6 read the hop limit, h.8[7].
; Scratchpad (16 bytes):
;   s.32[1]   provider IPv4 address (the low half of word 0)
;   s.64[1]   initial TTL the sender put in the IP header
; 16 bytes of code.
        ld a, s.64[1]      ; initial TTL
        ld b, h.8[8]       ; TTL on arrival (read-only header bank)
        sub                ; A <- distance in routers
        shl 32
        ld b, s.32[1]      ; provider address
        or                 ; A <- this advertisement
        mov b, a
        lookup k0          ; A <- the kept advertisement, C <- one is kept
        jt nearer
        mov a, b           ; none kept: this one
nearer: min                ; the nearer of the two
        insert k0          ; lifetime unchanged if it existed (no refresh)
