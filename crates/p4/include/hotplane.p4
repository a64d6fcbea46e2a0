/* hotplane.p4: hotplane's extensions to v1model. Include after <v1model.p4>.
 * docs/p4.md describes each extern; examples/p4/ has a program for each. */
#ifndef _HOTPLANE_P4_
#define _HOTPLANE_P4_

#include <v1model.p4>

/* XDP action codes, as hotplane_ebpf calls return them. */
const bit<64> HOTPLANE_XDP_ABORTED = 0;
const bit<64> HOTPLANE_XDP_DROP = 1;
const bit<64> HOTPLANE_XDP_PASS = 2;
const bit<64> HOTPLANE_XDP_TX = 3;
const bit<64> HOTPLANE_XDP_REDIRECT = 4;

/* The program in one of the data plane's extern slots ([pipeline.externs]), replaceable while
 * packets flow (hotplane push update --target extern:NAME, or an in-band update). An eBPF
 * program there runs as XDP and the call returns its r0; a Lua function or native stage
 * returns its verdict as an XDP action (pass 2, drop 1, tx 3). An empty slot returns
 * HOTPLANE_XDP_PASS. */
extern hotplane_ebpf {
    hotplane_ebpf(string slot);
    /* Run on `data` (a header, struct or field) laid out as on the wire; changes are written
     * back. */
    bit<64> call<T>(inout T data);
    /* Run on a copy of the packet as it arrived; changes are discarded. */
    bit<64> call_packet();
}

/* Run the packet's per-flow function (hotplane push update --target flow:SELECTOR) on a copy
 * of the packet as it arrived; its verdict as an XDP action (pass 2, drop 1, tx 3), or
 * HOTPLANE_XDP_PASS when the flow has no function. */
extern bit<64> hotplane_flow_function();

/* Hand this packet to the control plane as an in-band update (its UDP payload must be an
 * update envelope: docs/update-protocol.md). The control plane authenticates it with the
 * node's keys and applies it (eBPF, Lua or P4 code, to the target the envelope names); the
 * packet leaves the pipeline. */
extern void hotplane_load_from_packet();

#endif /* _HOTPLANE_P4_ */
