; fwd (WASP paper §4.2.1, the benchmark's FWD-only program): forwards; measures the filter's
; fixed cost (shim check, checksum, decode, one step).
; Keys: none. Scratchpad: none. 1 byte of code.
        fwd
