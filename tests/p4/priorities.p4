/* Which of several matching initial entries applies (spec "Entry priorities", as p4c and BMv2
 * do it): `const entries` in program order; `@priority(N)` on an entry (p4c's BMv2 back-end:
 * the smallest wins); `priority = N:` with largest_priority_wins and priority_delta; and, where
 * the keys are all exact or lpm, the longest prefix whatever the order. */
#include <core.p4>
#include <v1model.p4>

header p_t {
    bit<16> k;
    bit<8>  a;
    bit<8>  in_order;
    bit<8>  annotated;
    bit<8>  smallest;
    bit<8>  largest;
    bit<8>  prefix;
}

struct headers { p_t p; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.p); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action o(bit<8> v) { hdr.p.in_order = v; }
    action n(bit<8> v) { hdr.p.annotated = v; }
    action s(bit<8> v) { hdr.p.smallest = v; }
    action l(bit<8> v) { hdr.p.largest = v; }
    action x(bit<8> v) { hdr.p.prefix = v; }

    table in_order {
        key = { hdr.p.k: ternary; }
        actions = { o; }
        const entries = {
            0x1111 &&& 0x000f : o(1);
            0x1181            : o(2);
            _                 : o(3);
        }
    }
    table annotated {
        key = { hdr.p.k: ternary; }
        actions = { n; }
        const entries = {
            0x1111 &&& 0x000f : n(1) @priority(3);
            0x1181            : n(2);
            0x1181 &&& 0xf00f : n(3) @priority(1);
        }
    }
    table smallest {
        key = { hdr.p.k: ternary; }
        actions = { s; }
        largest_priority_wins = false;
        priority_delta = 10;
        entries = {
            priority = 10: 0x1111 &&& 0x000f : s(1);
                           0x1181            : s(2);
            priority = 5:  0x1000 &&& 0xf000 : s(3);
                           _                 : s(4);
        }
    }
    table largest {
        key = { hdr.p.k: ternary; }
        actions = { l; }
        entries = {
            priority = 20: 0x1111 &&& 0x000f : l(1);
            priority = 30: 0x1181            : l(2);
                           0x1000 &&& 0xf000 : l(3);
            priority = 1:  _                 : l(4);
        }
    }
    table prefix {
        key = { hdr.p.k: lpm; hdr.p.a: exact; }
        actions = { x; }
        const entries = {
            (0x1000 &&& 0xf000, 1) : x(1);
            (0x1100 &&& 0xff00, 1) : x(2);
            (0x1180 &&& 0xfff0, 1) : x(3);
        }
    }
    apply {
        sm.egress_spec = 1;
        in_order.apply();
        annotated.apply();
        smallest.apply();
        largest.apply();
        prefix.apply();
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.p); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
