/* for loops (P4_16 1.2.5): `for (init; cond; update)` with a run-time bound, nested, with
 * `break` and `continue` (`continue` still runs the update), `for (T x in lo .. hi)` over a
 * constant range, and `exit` inside a loop. A loop over a w-bit variable runs at most 2^w + 1
 * times, any loop at most 4096 times. */
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> op; bit<8> n; bit<16> sum; bit<8> last; }
struct headers { h_t h; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action triangle() {
        hdr.h.sum = 0;
        for (bit<8> i = 1; i <= hdr.h.n; i = i + 1) {
            hdr.h.sum = hdr.h.sum + (bit<16>)i;
        }
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            triangle();
        } else if (hdr.h.op == 2) {
            hdr.h.sum = 0;
            for (bit<8> i = 0; i < hdr.h.n; i = i + 1) {
                for (bit<8> j = 0; j < hdr.h.n; j = j + 1) {
                    hdr.h.sum = hdr.h.sum + 1;
                }
            }
        } else if (hdr.h.op == 3) {
            hdr.h.sum = 0;
            for (bit<8> i = 0; i < 100; i = i + 1) {
                hdr.h.last = i;
                if (i == hdr.h.n) {
                    break;
                }
                if (i[0:0] == 1) {
                    continue;
                }
                hdr.h.sum = hdr.h.sum + 1;
            }
        } else if (hdr.h.op == 4) {
            hdr.h.sum = 0;
            for (bit<8> k in 3 .. 6) {
                hdr.h.sum = hdr.h.sum + (bit<16>)k;
            }
        } else if (hdr.h.op == 5) {
            for (bit<8> i = 0; i < 10; i = i + 1) {
                hdr.h.last = i;
                if (i == hdr.h.n) {
                    exit;
                }
            }
            hdr.h.sum = 0xffff;
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
