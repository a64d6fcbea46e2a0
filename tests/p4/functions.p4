/* Functions returning headers and structs, actions whose `in` parameters take values that
 * are not locations (literals, expressions), and a table's actions whose directional
 * parameters its action list binds (`actions = { set_to(hdr.q.a); }`), header and struct
 * parameters of actions (`inout standard_metadata_t`), and constants for a sub-control's `in`
 * parameters. */
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; }
struct s_t { bit<8> x; bit<8> y; }

struct headers { h_t p; h_t q; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.p); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

h_t make(in bit<8> v) {
    h_t h;
    h.setValid();
    h.a = v;
    h.b = v + 1;
    return h;
}

h_t nothing() {
    h_t h;
    h.setInvalid();
    return h;
}

s_t swap(in s_t s) {
    return { s.y, s.x };
}

control Sum(out bit<8> r, in bit<8> a, in bit<8> b) {
    apply { r = a + b; }
}

control Twice(in bit<8> v, inout bit<8> w) {
    apply { w = w + v; w = w + v; }
}

control Forget(out h_t x) {
    apply { }
}

action to_port(inout standard_metadata_t m, in h_t h) { m.egress_spec = (bit<9>)h.b; }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Sum() sum;
    Twice() twice_c;
    Forget() forget;
    action put(in bit<8> v, inout bit<8> dst) { dst = dst + v; }
    action set_to(out bit<8> x, bit<8> v) { x = v; }
    action twice(inout bit<8> x) { x = x + x; }
    action clear(out h_t x) { }
    table setter {
        key = { hdr.p.b: exact; }
        actions = { set_to(hdr.p.a); }
        const default_action = set_to(hdr.p.a, 0x33);
        const entries = { 0x21 : set_to(hdr.p.a, 0x44); }
    }
    table doubler {
        actions = { twice(hdr.p.b); }
        default_action = twice(hdr.p.b);
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.p.a == 1) {
            hdr.q = make(hdr.p.b);
        } else if (hdr.p.a == 2) {
            hdr.q = make(8w9);
            hdr.q = nothing();
        } else if (hdr.p.a == 3) {
            s_t s = { hdr.p.a, hdr.p.b };
            s = swap(s);
            hdr.p.a = s.x;
            hdr.p.b = s.y;
        } else if (hdr.p.a == 4) {
            put(8w7, hdr.p.b);
            put(hdr.p.b + 1, hdr.p.b);
        } else if (hdr.p.a == 5) {
            setter.apply();
            doubler.apply();
        } else if (hdr.p.a == 6) {
            to_port(sm, hdr.p);
            sum.apply(hdr.p.a, 8w3, hdr.p.b);
        } else if (hdr.p.a == 7) {
            twice(hdr.p.a);
            doubler.apply();
        } else if (hdr.p.a == 8) {
            hdr.q = make(8w1);
            clear(hdr.q);
        } else if (hdr.p.a == 9) {
            twice_c.apply(hdr.p.b, hdr.p.b);
            hdr.q = make(8w1);
            forget.apply(hdr.q);
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
