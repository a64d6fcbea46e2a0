#include <core.p4>
#include <v1model.p4>
header h1 { bit<4> version; bit<4> ihl; }
header ipv4_t { bit<4> version; bit<4> ihl; varbit<320> options; }
typedef tuple<
    bit<4>,
    varbit<56>
    > myTuple1;
struct headers { ipv4_t ipv4; }
struct metadata { bit<16> l4Len; }
parser parserI(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t stdmeta) {
    state start {
        pkt.extract(hdr.ipv4, (bit<32>) (8 * (4 * (bit<9>) (pkt.lookahead<h1 >().ihl) - 20)));
        meta.l4Len = meta.l4Len - (bit<16>)(hdr.ipv4.ihl*4);
        transition select (hdr.ipv4.version) { 6: accept; default: reject; }
    }
}
control c(inout headers hdr, inout metadata meta, inout standard_metadata_t s) { apply { } }
control vc(inout headers hdr, inout metadata meta) { apply {} }
control d(packet_out p, in headers hdr) { apply { p.emit(hdr); } }
V1Switch<headers, metadata>(parserI(), vc(), c(), c(), vc(), d()) main;
