; ratectl (WASP paper §3.3, "rate control"): the packet drops itself when the router says its
; output queue is deep: e.queue (output queue depth in packets, exported by the router; 0 when
; unknown, so run it where the output port is known) above the threshold the sender put in
; s.64[0]. A sender marks its expendable packets (MPEG B-frames rather than I-frames) this way.
; Keys: none. Scratchpad (8 bytes): s.64[0] threshold, packets.
; 7 bytes of code.
        ld a, e.queue
        ld b, s.64[0]      ; threshold
        cgt                ; C <- queue > threshold
        jf done
        drop
done:
