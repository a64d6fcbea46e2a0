// Tuples as values: variables, fields, parameters, elements by constant index.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers { h_t h; }
struct meta_t { tuple<bit<8>, bool> saved; }

parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control VC(inout headers hdr, inout meta_t m) { apply { } }

bit<8> sum(in tuple<bit<8>, bit<8>> t) {
    return t[0] + t[1];
}

control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        tuple<bit<8>, bit<8>> pair = { hdr.h.a, hdr.h.b };
        pair[1] = pair[1] + 1;
        m.saved = { sum(pair), hdr.h.a == 8w1 };
        hdr.h.c = m.saved[0];
        if (m.saved[1]) {
            sm.egress_spec = 2;
        } else {
            sm.egress_spec = 3;
        }
    }
}

control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), C(), D()) main;
