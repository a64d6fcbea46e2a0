/* Compound assignments (P4_16 1.2.4: +=, -=, *=, |=, &=, ^=, <<=, >>=, |+|=, |-|=) on fields,
 * on slices of fields (slices of slices too) and on fields wider than a machine word. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>   op;
    bit<8>   a;
    bit<16>  b;
    bit<128> w;
    int<8>   s;
}

struct headers { h_t h; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            hdr.h.a |= 0x0f;
            hdr.h.b &= 0xff00;
            hdr.h.w ^= 128w0xffffffffffffffff0000000000000001;
            hdr.h.s >>= 1;
        } else if (hdr.h.op == 2) {
            hdr.h.a[3:0] |= 4w0x5;
            hdr.h.b[11:4] += 8w0x11;
            hdr.h.w[127:64] ^= 64w0xff;
            hdr.h.w[71:56] |= 16w0xffff;
        } else if (hdr.h.op == 3) {
            hdr.h.w += 128w1;
            hdr.h.b <<= 4;
            hdr.h.a -= 8w3;
            hdr.h.s |-|= 8s100;
        } else if (hdr.h.op == 5) {
            hdr.h.a[7:4][2:1] = 2w3;
            hdr.h.b[15:0][11:4][3:0] |= 4w0xf;
            hdr.h.s = (int<8>)hdr.h.w[127:64][15:8];
        } else if (hdr.h.op == 4) {
            hdr.h.w <<= 8w68;
            hdr.h.a |+|= 8w200;
            hdr.h.b *= 16w3;
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
