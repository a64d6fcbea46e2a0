/* Extern instances declared at the top level (shared by every block and action that names
 * them) and controls applied directly by type name (`Double.apply(x)`, spec: direct type
 * invocation); an extern method's arguments evaluated left to right. */
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> idx; bit<8> v; bit<8> last; }
struct headers { h_t h; }
struct metadata { }

register<bit<8>>(16) seen;
register<bit<8>>(16) order;

bit<8> bump(inout bit<8> x) { x = x + 1; return x; }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Double(inout bit<8> x) {
    apply { x = x + x; }
}

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action remember() { seen.write((bit<32>)hdr.h.idx, hdr.h.v); }
    apply {
        sm.egress_spec = 1;
        seen.read(hdr.h.last, (bit<32>)hdr.h.idx);
        remember();
        Double.apply(hdr.h.v);
        // Extern arguments left to right: the index is read before bump changes it.
        order.write((bit<32>)hdr.h.idx, bump(hdr.h.idx));
        hdr.h.idx = hdr.h.idx - 1;
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        bit<8> again;
        seen.read(again, (bit<32>)hdr.h.idx);
        hdr.h.last = hdr.h.last + again;
    }
}
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
