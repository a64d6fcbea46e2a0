; trunk (WASP paper §3.3 and footnote 3, "common trunk"): where do the paths of two sources
; towards one destination join? Two packets carry the same key k0 (random, fresh for each
; measurement); each router keeps its own store.
;   - The marker (s.64[0] = 0), sent first from source 1, leaves a mark under k0 at every WASP
;     router it crosses.
;   - The finder (s.64[0] != 0), sent from source 2 to the same destination, looks the mark up at
;     every WASP router on its path and records the first marked one.
; Definition: the join router J is the first WASP router on the finder's path that the marker
; also crossed. With destination-based forwarding both packets take the same routers from J to
; the destination, so J..destination is the common trunk and J is the paper's R, the last common
; router seen from the destination (where the two paths split going back towards the sources,
; the place for a merging or duplication service). A legacy router in the trunk is not seen;
; disjoint paths (or a marker whose marks expired after tau) give no J.
; Keys: k0, the measurement's key; its word 0 is the mark (1).
; Scratchpad (24 bytes):
;   s.64[0]   role: 0 marker, anything else finder
;   s.64[1]   finder: node_id of J (valid when s.32[5] != 0)
;   s.32[4]   finder: IPv4 address of J
;   s.32[5]   finder: marked routers crossed (J and every marked router after it: the trunk's
;             WASP routers); 0 means the paths did not join at a WASP router
; 26 bytes of code.
        ld a, s.64[0]
        cnz                ; C <- finder
        jt find
        imm a, 1
        insert k0          ; marker: the mark (committed at fwd)
        fwd
find:   lookup k0          ; C <- the marker crossed this router
        jf done
        ld a, s.32[5]      ; marked routers seen before this one
        cnz                ; C <- J was found already
        inc
        st s.32[5], a      ; count this marked router (inc and st keep C)
        jt done
        ld a, e.node_id    ; the first marked router: J
        st s.64[1], a
        ld a, e.32[5]
        st s.32[4], a
done:
