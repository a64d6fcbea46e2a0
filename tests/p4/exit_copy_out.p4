/* `exit` (spec 12.5): it ends the ingress control from inside an action, a table's action or a
 * nested call, the rest of the statement or expression does not run, the copy-out of the
 * actions and functions being executed is still performed, and egress runs as usual.
 * `return` ends only the action, after which its copy-out runs and the caller goes on. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
}

struct headers { h_t h; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set_and_exit(inout bit<8> x) { x = 5; exit; }
    action set_and_return(inout bit<8> x) { x = 7; return; }
    action outer(inout bit<8> x, out bit<8> y) { y = 9; set_and_exit(x); y = 10; }
    action maybe_exit() {
        if (hdr.h.a == 1) { exit; }
        hdr.h.b = 0xbb;
    }
    table t {
        key = { hdr.h.op: exact; }
        actions = { maybe_exit; NoAction; }
        default_action = maybe_exit();
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            set_and_exit(hdr.h.c);
            hdr.h.d = 0xdd;
        } else if (hdr.h.op == 2) {
            if (t.apply().hit) { hdr.h.e = 0x11; } else { hdr.h.e = 0xee; }
            hdr.h.d = 0xdd;
        } else if (hdr.h.op == 3) {
            switch (t.apply().action_run) {
                maybe_exit: { hdr.h.e = 0x33; }
            }
            hdr.h.d = 0xdd;
        } else if (hdr.h.op == 4) {
            set_and_return(hdr.h.c);
            hdr.h.d = 0xdd;
        } else if (hdr.h.op == 5) {
            outer(hdr.h.c, hdr.h.e);
            hdr.h.d = 0xdd;
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { hdr.h.f = 0xf0; }
}
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
