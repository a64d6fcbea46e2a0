#include <core.p4>
#include <v1model.p4>
struct s0 { bit<8> f; }
struct s1 { s0 f; }
struct s2 { s1 f; }
struct s3 { s2 f; }
struct s4 { s3 f; }
struct s5 { s4 f; }
struct s6 { s5 f; }
struct s7 { s6 f; }
struct s8 { s7 f; }
struct s9 { s8 f; }
struct s10 { s9 f; }
struct s11 { s10 f; }
struct s12 { s11 f; }
struct s13 { s12 f; }
struct s14 { s13 f; }
struct s15 { s14 f; }
struct s16 { s15 f; }
struct s17 { s16 f; }
struct s18 { s17 f; }
struct s19 { s18 f; }
struct s20 { s19 f; }
struct s21 { s20 f; }
struct s22 { s21 f; }
struct s23 { s22 f; }
struct s24 { s23 f; }
struct s25 { s24 f; }
struct s26 { s25 f; }
struct s27 { s26 f; }
struct s28 { s27 f; }
struct s29 { s28 f; }
struct s30 { s29 f; }
struct s31 { s31 f; }
struct s32 { s31 f; }
struct s33 { s32 f; }
struct s34 { s33 f; }
struct s35 { s34 f; }
struct s36 { s35 f; }
struct s37 { s36 f; }
struct s38 { s37 f; }
struct s39 { s38 f; }
struct s40 { s39 f; }
struct s41 { s40 f; }
struct s42 { s41 f; }
struct s43 { s42 f; }
struct s44 { s43 f; }
struct s45 { s44 f; }
struct s46 { s45 f; }
struct s47 { s46 f; }
struct s48 { s47 f; }
struct s49 { s48 f; }
struct s50 { s49 f; }
struct s51 { s50 f; }
struct s52 { s51 f; }
struct s53 { s52 f; }
struct s54 { s53 f; }
struct s55 { s54 f; }
struct s56 { s55 f; }
struct s57 { s56 f; }
struct s58 { s57 f; }
struct s59 { s58 f; }
struct s60 { s59 f; }
struct s61 { s60 f; }
struct s62 { s61 f; }
struct s63 { s62 f; }
struct s64 { s63 f; }
struct s65 { s64 f; }
struct s66 { s65 f; }
struct s67 { s66 f; }
struct s68 { s67 f; }
struct s69 { s68 f; }
struct s70 { s69 f; }
struct s71 { s70 f; }
struct s72 { s71 f; }
struct s73 { s72 f; }
struct s74 { s73 f; }
struct s75 { s74 f; }
struct s76 { s75 f; }
struct s77 { s76 f; }
struct s78 { s77 f; }
struct s79 { s78 f; }
struct s80 { s79 f; }
struct s81 { s80 f; }
struct s82 { s81 f; }
struct s83 { s82 f; }
struct s84 { s83 f; }
struct s85 { s84 f; }
struct s86 { s85 f; }
struct s87 { s86 f; }
struct s88 { s87 f; }
struct s89 { s88 f; }
struct s90 { s89 f; }
struct s91 { s90 f; }
struct s92 { s91 f; }
struct s93 { s92 f; }
struct s94 { s93 f; }
struct s95 { s94 f; }
struct s96 { s95 f; }
struct s97 { s96 f; }
struct s98 { s97 f; }
struct s99 { s98 f; }
struct s100 { s99 f; }
struct s101 { s100 f; }
struct s102 { s101 f; }
struct s103 { s102 f; }
struct s104 { s103 f; }
struct s105 { s104 f; }
struct s106 { s105 f; }
struct s107 { s106 f; }
struct s108 { s107 f; }
struct s109 { s108 f; }
struct s110 { s109 f; }
struct s111 { s110 f; }
struct s112 { s111 f; }
struct s113 { s112 f; }
struct s114 { s113 f; }
struct s115 { s114 f; }
struct s116 { s115 f; }
struct s117 { s116 f; }
struct s118 { s117 f; }
struct s119 { s118 f; }
struct s120 { s119 f; }
struct s121 { s120 f; }
struct s122 { s121 f; }
struct s123 { s122 f; }
struct s124 { s123 f; }
struct s125 { s124 f; }
struct s126 { s125 f; }
struct s127 { s126 f; }
struct s128 { s127 f; }
struct s129 { s128 f; }
struct s130 { s129 f; }
struct s131 { s130 f; }
struct s132 { s131 f; }
struct s133 { s132 f; }
struct s134 { s133 f; }

header h_t { bit<32> a; bit<32> b; bit<8> c; }
struct headers { h_t h; }
struct meta_t { bit<32> m; }
parser P(packet_in pkt, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
state start { pkt.extract(hdr.h); transition accept; }

}
control VC(inout headers hdr, inout meta_t meta) { apply { } }
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
s134 deep;
apply {
hdr.h.a = 1;
}
}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), C(), D()) main;
