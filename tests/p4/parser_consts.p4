/* Compile-time values where the spec allows them: constants declared in a parser used in
 * its selects, slices of constants in keysets; `extract<T>(_)` skipping a header; a signed
 * value as a stack index; `lookahead` past the end of the packet. */
#include <core.p4>
#include <v1model.p4>

header k_t { bit<16> kind; int<8> idx; }
header skip_t { bit<16> x; }
header v_t { bit<8> v; }

struct headers { k_t k; v_t[3] vs; }
struct metadata { }

const bit<32> MAGIC = 0x1234abcd;

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    const bit<16> KIND_SKIP = 0x0001;
    state start {
        pkt.extract(hdr.k);
        transition select(hdr.k.kind) {
            KIND_SKIP: skip;
            MAGIC[15:0]: values;
            0x0002: peek;
            default: accept;
        }
    }
    state skip { pkt.extract<skip_t>(_); transition values; }
    /* Looking past the end of the packet is PacketTooShort (as BMv2), not zeros. */
    state peek {
        transition select(pkt.lookahead<bit<32>>()) {
            0: accept;
            default: values;
        }
    }
    state values {
        pkt.extract(hdr.vs.next);
        pkt.extract(hdr.vs.next);
        pkt.extract(hdr.vs.next);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }
control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.PacketTooShort) {
            sm.egress_spec = 3;
        }
        if (hdr.vs[2].isValid()) {
            hdr.vs[hdr.k.idx].v = 0xee;
        }
    }
}
control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
