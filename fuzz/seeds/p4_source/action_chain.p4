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
action a0() { hdr.h.a = hdr.h.a + 1; }
action a1() { a0(); }
action a2() { a1(); }
action a3() { a2(); }
action a4() { a3(); }
action a5() { a4(); }
action a6() { a5(); }
action a7() { a6(); }
action a8() { a7(); }
action a9() { a8(); }
action a10() { a9(); }
action a11() { a10(); }
action a12() { a11(); }
action a13() { a12(); }
action a14() { a13(); }
action a15() { a14(); }
action a16() { a15(); }
action a17() { a16(); }
action a18() { a17(); }
action a19() { a18(); }
action a20() { a19(); }
action a21() { a20(); }
action a22() { a21(); }
action a23() { a22(); }
action a24() { a23(); }
action a25() { a24(); }
action a26() { a25(); }
action a27() { a26(); }
action a28() { a27(); }
action a29() { a28(); }
action a30() { a29(); }
action a31() { a30(); }
action a32() { a31(); }
action a33() { a32(); }
action a34() { a33(); }
action a35() { a34(); }
action a36() { a35(); }
action a37() { a36(); }
action a38() { a37(); }
action a39() { a38(); }

apply {
a39();
}
}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), C(), D()) main;
