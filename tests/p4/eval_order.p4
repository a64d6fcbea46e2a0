/* Order of evaluation and side effects (P4_16 spec 8.17 and 6.8): operands left to right, the
 * right side of && and || only when the left does not decide, one arm of ?:, arguments left to
 * right with copy-in at evaluation, table applies inside conditions only when reached, and
 * the target of a compound assignment evaluated once; an assignment's or an out argument's
 * location fixed when it is evaluated (spec 6.8), before later side effects. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
}

header w_t { bit<8> x; }

struct headers { h_t h; w_t[2] w; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.op) {
            8: words;
            9: words;
            default: accept;
        }
    }
    state words { pkt.extract(hdr.w.next); pkt.extract(hdr.w.next); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

bit<8> bump(inout bit<8> x) { x = x + 1; return x; }
bool yes(inout bit<8> x) { x = x + 1; return true; }
bit<8> minus(in bit<8> x, in bit<8> y) { return x - y; }
bit<8> post(inout bit<8> x) { bit<8> rv = x; x = x + 1; return rv; }
void add40(inout bit<8> x, in bit<8> ignored) { x = x + 0x40; }
h_t older(inout h_t x) { h_t old = x; x.a = x.a + 1; return old; }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action mark() { hdr.h.d = 0x77; }
    action two(inout bit<8> x, inout bit<8> y) { x = 1; y = x + 1; }
    table t1 {
        key = { hdr.h.e: exact; }
        actions = { mark; }
        default_action = mark();
    }
    table t2 {
        key = { hdr.h.e: exact; }
        actions = { mark; }
        default_action = mark();
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            if (hdr.h.a == 1 && yes(hdr.h.b)) { hdr.h.c = 1; }
            if (hdr.h.a == 0 || yes(hdr.h.d)) { hdr.h.e = 1; }
        } else if (hdr.h.op == 2) {
            hdr.h.c = hdr.h.a == 0 ? bump(hdr.h.b) : bump(hdr.h.d);
        } else if (hdr.h.op == 3) {
            hdr.h.c = hdr.h.a + bump(hdr.h.a);
        } else if (hdr.h.op == 4) {
            hdr.h.c = minus(hdr.h.a, bump(hdr.h.a));
        } else if (hdr.h.op == 5) {
            if (hdr.h.a == 1 && t1.apply().hit) { hdr.h.c = 1; }
            if (hdr.h.a == 0 || t2.apply().miss) { hdr.h.e = 2; }
        } else if (hdr.h.op == 7) {
            two(hdr.h.c, hdr.h.c);
            hdr.h.d = bump(hdr.h.e) + bump(hdr.h.e);
        } else if (hdr.h.op == 8) {
            hdr.w[post(hdr.h.a) & 1].x |= 0x0f;
            hdr.w[post(hdr.h.a) & 1].x |= 0xf0;
        } else if (hdr.h.op == 10) {
            hdr.h.c = hdr.h == older(hdr.h) ? 8w1 : 8w0;
        } else if (hdr.h.op == 9) {
            add40(hdr.w[hdr.h.a & 1].x, post(hdr.h.a));
            hdr.w[hdr.h.a & 1].x = post(hdr.h.a);
        } else if (hdr.h.op == 6) {
            hdr.h.c = hdr.h.a == 1 ? bump(hdr.h.b) : bump(hdr.h.d);
            hdr.h.e = (hdr.h.a == 1 && yes(hdr.h.b)) ? 8w3 : 8w4;
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.w); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
