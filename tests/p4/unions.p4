/* Header unions (spec 8.20): at most one member is valid; setValid() on one member makes the
 * others invalid, extracting into a member does too, setInvalid() on the valid one leaves none,
 * isValid() of the union says whether any member is, and the deparser emits the valid one. */
#include <core.p4>
#include <v1model.p4>

header op_t { bit<8> op; bit<8> sel; }
header a_t { bit<8> x; }
header b_t { bit<16> y; }
header_union u_t { a_t a; b_t b; }
header out_t { bit<8> va; bit<8> vb; bit<8> vu; }

struct headers { op_t op; u_t u; out_t out; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.op);
        transition select(hdr.op.sel) {
            1: get_a;
            2: get_b;
            3: get_both;
            default: accept;
        }
    }
    state get_a { pkt.extract(hdr.u.a); transition accept; }
    state get_b { pkt.extract(hdr.u.b); transition accept; }
    /* The second extract leaves only b valid. */
    state get_both { pkt.extract(hdr.u.a); pkt.extract(hdr.u.b); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.op.op == 1) {
            hdr.u.b.setValid();
            hdr.u.b.y = 0xbbbb;
        } else if (hdr.op.op == 2) {
            hdr.u.a.setValid();
            hdr.u.a.x = 0xaa;
        } else if (hdr.op.op == 3) {
            hdr.u.a.setInvalid();
            hdr.u.b.setInvalid();
        }
        hdr.out.setValid();
        hdr.out.va = hdr.u.a.isValid() ? 8w1 : 8w0;
        hdr.out.vb = hdr.u.b.isValid() ? 8w1 : 8w0;
        hdr.out.vu = hdr.u.isValid() ? 8w1 : 8w0;
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.op); pkt.emit(hdr.u); pkt.emit(hdr.out); }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
