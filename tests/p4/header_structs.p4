// Structs inside headers (spec 7.2.2): a header field of a struct type holds the struct's
// fields in its bits, in order; they are read, written, matched and emitted in place.
#include <core.p4>
#include <v1model.p4>

struct inner_t {
    bit<4> hi;
    bit<4> lo;
}

struct row_t {
    bit<8>  e;
    inner_t pair;
    bit<16> t;
}

header row_h {
    row_t row;
    bit<8> tail;
}

struct headers { row_h h; }
struct meta_t { }

parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.row.pair.hi) {
            4w0xf: reject;
            default: accept;
        }
    }
}

control VC(inout headers hdr, inout meta_t m) { apply { } }

control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table by_e {
        key = { hdr.h.row.e: exact; }
        actions = { fwd; NoAction; }
        const entries = {
            0x01 : fwd(1);
            0x02 : fwd(2);
        }
    }
    apply {
        by_e.apply();
        inner_t swapped = { hdr.h.row.pair.lo, hdr.h.row.pair.hi };
        hdr.h.row.pair = swapped;
        hdr.h.row.t = hdr.h.row.t + 1;
        hdr.h.tail = hdr.h.row.pair.hi ++ hdr.h.row.pair.lo == hdr.h.row.e ? 8w0xaa : 8w0xbb;
    }
}

control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), C(), D()) main;
