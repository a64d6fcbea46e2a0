/* == and != on headers, structs and header stacks (spec 8.16-8.18): two headers are equal when
 * both are invalid, or both valid with equal fields; structs and stacks member by member. */
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<16> b; }
header r_t { bit<8> eq_hdr; bit<8> eq_local; bit<8> ne_struct; bit<8> eq_list; bit<8> eq_stack; }
struct pair_t { bit<8> x; h_t h; }

struct headers { h_t p; h_t q; h_t[2] s; r_t r; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.p);
        transition select(hdr.p.a) {
            0: accept;
            default: second;
        }
    }
    state second { pkt.extract(hdr.q); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h_t local = hdr.q;
        local.setInvalid();
        h_t other;
        other.setInvalid();
        pair_t u = { 1, hdr.p };
        pair_t v = { 1, hdr.q };
        hdr.s[0] = hdr.p;
        hdr.s[1] = hdr.q;
        h_t[2] t;
        t[0] = hdr.p;
        t[1] = hdr.q;
        hdr.r.setValid();
        hdr.r.eq_hdr = hdr.p == hdr.q ? 8w1 : 8w0;
        hdr.r.eq_local = local == other ? 8w1 : 8w0;
        hdr.r.ne_struct = u != v ? 8w1 : 8w0;
        hdr.r.eq_list = u == { 8w1, hdr.p } ? 8w1 : 8w0;
        hdr.r.eq_stack = hdr.s == t ? 8w1 : 8w0;
        hdr.s[0].setInvalid();
        hdr.s[1].setInvalid();
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
