; count (WASP paper §4): one ESS counter under key k0; every packet increments it and drops
; itself once the counter is above the threshold the sender put in scratch word 0.
; Declares 1 key, 8-byte scratchpad. 8 bytes of code.
        lookup k0          ; A <- counter (0 if absent)
        inc
        insert k0          ; counter <- A (committed at the fate, DROP included)
        ld b, s.64[0]      ; B <- threshold
        cgt                ; C <- counter > threshold
        jf done
        drop
done:                      ; falling off the end forwards
