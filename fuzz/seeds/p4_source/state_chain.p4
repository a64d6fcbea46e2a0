#include <core.p4>
#include <v1model.p4>

header h_t { bit<32> a; bit<32> b; bit<8> c; }
struct headers { h_t h; }
struct meta_t { bit<32> m; }
parser P(packet_in pkt, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
state start { pkt.extract(hdr.h); transition s0; }
state s0 { transition select(hdr.h.c) { 0: s1; default: accept; } }
state s1 { transition select(hdr.h.c) { 1: s2; default: accept; } }
state s2 { transition select(hdr.h.c) { 2: s3; default: accept; } }
state s3 { transition select(hdr.h.c) { 3: s4; default: accept; } }
state s4 { transition select(hdr.h.c) { 4: s5; default: accept; } }
state s5 { transition select(hdr.h.c) { 5: s6; default: accept; } }
state s6 { transition select(hdr.h.c) { 6: s7; default: accept; } }
state s7 { transition select(hdr.h.c) { 7: s8; default: accept; } }
state s8 { transition select(hdr.h.c) { 8: s9; default: accept; } }
state s9 { transition select(hdr.h.c) { 9: s10; default: accept; } }
state s10 { transition select(hdr.h.c) { 10: s11; default: accept; } }
state s11 { transition select(hdr.h.c) { 11: s12; default: accept; } }
state s12 { transition select(hdr.h.c) { 12: s13; default: accept; } }
state s13 { transition select(hdr.h.c) { 13: s14; default: accept; } }
state s14 { transition select(hdr.h.c) { 14: s15; default: accept; } }
state s15 { transition select(hdr.h.c) { 15: s16; default: accept; } }
state s16 { transition select(hdr.h.c) { 16: s17; default: accept; } }
state s17 { transition select(hdr.h.c) { 17: s18; default: accept; } }
state s18 { transition select(hdr.h.c) { 18: s19; default: accept; } }
state s19 { transition select(hdr.h.c) { 19: s20; default: accept; } }
state s20 { transition select(hdr.h.c) { 20: s21; default: accept; } }
state s21 { transition select(hdr.h.c) { 21: s22; default: accept; } }
state s22 { transition select(hdr.h.c) { 22: s23; default: accept; } }
state s23 { transition select(hdr.h.c) { 23: s24; default: accept; } }
state s24 { transition select(hdr.h.c) { 24: s25; default: accept; } }
state s25 { transition select(hdr.h.c) { 25: s26; default: accept; } }
state s26 { transition select(hdr.h.c) { 26: s27; default: accept; } }
state s27 { transition select(hdr.h.c) { 27: s28; default: accept; } }
state s28 { transition select(hdr.h.c) { 28: s29; default: accept; } }
state s29 { transition select(hdr.h.c) { 29: s30; default: accept; } }
state s30 { transition select(hdr.h.c) { 30: s31; default: accept; } }
state s31 { transition select(hdr.h.c) { 31: s32; default: accept; } }
state s32 { transition select(hdr.h.c) { 32: s33; default: accept; } }
state s33 { transition select(hdr.h.c) { 33: s34; default: accept; } }
state s34 { transition select(hdr.h.c) { 34: s35; default: accept; } }
state s35 { transition select(hdr.h.c) { 35: s36; default: accept; } }
state s36 { transition select(hdr.h.c) { 36: s37; default: accept; } }
state s37 { transition select(hdr.h.c) { 37: s38; default: accept; } }
state s38 { transition select(hdr.h.c) { 38: s39; default: accept; } }
state s39 { transition select(hdr.h.c) { 39: s40; default: accept; } }
state s40 { transition select(hdr.h.c) { 40: s41; default: accept; } }
state s41 { transition select(hdr.h.c) { 41: s42; default: accept; } }
state s42 { transition select(hdr.h.c) { 42: s43; default: accept; } }
state s43 { transition select(hdr.h.c) { 43: s44; default: accept; } }
state s44 { transition select(hdr.h.c) { 44: s45; default: accept; } }
state s45 { transition select(hdr.h.c) { 45: s46; default: accept; } }
state s46 { transition select(hdr.h.c) { 46: s47; default: accept; } }
state s47 { transition select(hdr.h.c) { 47: s48; default: accept; } }
state s48 { transition select(hdr.h.c) { 48: s49; default: accept; } }
state s49 { transition select(hdr.h.c) { 49: s50; default: accept; } }
state s50 { transition select(hdr.h.c) { 50: s51; default: accept; } }
state s51 { transition select(hdr.h.c) { 51: s52; default: accept; } }
state s52 { transition select(hdr.h.c) { 52: s53; default: accept; } }
state s53 { transition select(hdr.h.c) { 53: s54; default: accept; } }
state s54 { transition select(hdr.h.c) { 54: s55; default: accept; } }
state s55 { transition select(hdr.h.c) { 55: s56; default: accept; } }
state s56 { transition select(hdr.h.c) { 56: s57; default: accept; } }
state s57 { transition select(hdr.h.c) { 57: s58; default: accept; } }
state s58 { transition select(hdr.h.c) { 58: s59; default: accept; } }
state s59 { transition select(hdr.h.c) { 59: s60; default: accept; } }
state s60 { transition accept; }
}
control VC(inout headers hdr, inout meta_t meta) { apply { } }
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {

apply {
hdr.h.a = 1;
}
}
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), C(), D()) main;
