// Generic structs and headers: each use with type arguments is a type of its own.
#include <core.p4>
#include <v1model.p4>

header Wrap<T> {
    T value;
    bit<8> tag;
}

struct Pair<A, B> {
    A first;
    B second;
}

struct Nested<T> {
    Pair<T, T> both;
    bit<8> extra;
}

typedef Pair<bit<4>, bit<4>> Nibbles;

struct headers { Wrap<bit<16>> w; }
struct meta_t { Pair<bit<8>, bool> seen; }

parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.w);
        transition accept;
    }
}

control VC(inout headers hdr, inout meta_t m) { apply { } }

control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        Pair<bit<8>, bool> p = { hdr.w.tag, hdr.w.value == 16w5 };
        Nibbles n = { hdr.w.tag[7:4], hdr.w.tag[3:0] };
        Nested<bit<8>> nest = { { 8w1, 8w2 }, 8w3 };
        if (p.second) {
            hdr.w.tag = p.first + nest.both.second;
        } else {
            hdr.w.tag = n.second ++ n.first;
        }
        m.seen = p;
        sm.egress_spec = m.seen.second ? 9w1 : 9w2;
    }
}

control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.w); } }

V1Switch(P(), VC(), I(), E(), C(), D()) main;
