#include <core.p4>
#include <v1model.p4>

header h_t { bit<32> a; bit<32> b; bit<8> c; }
struct headers { h_t h; }
struct meta_t { bit<32> m; }
parser P(packet_in pkt, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
state start { pkt.extract(hdr.h); transition accept; }

}
control VC(inout headers hdr, inout meta_t meta) { apply { } }
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
register<bit<32>>(32w4294967295) r;
counter(32w4294967295, CounterType.packets) c;
meter(32w65536, MeterType.bytes) m;
apply {
r.write(0, hdr.h.a); c.count(1);
}
}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), C(), D()) main;
