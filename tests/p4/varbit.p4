/* varbit fields (spec 7.1.6.4, v1model as BMv2 runs them): extracted with a length in bits
 * (longer than the field: HeaderTooShort; not whole bytes: ParserInvalidArgument), emitted
 * with that length, copied with their header (length included), moved with header-stack
 * elements, compared (same length and bits), and summed with their length in checksums. IPv4
 * options are the usual case. */
#include <core.p4>
#include <v1model.p4>

header len_t { bit<8> op; bit<8> bytes; }
header opt_t { bit<8> kind; varbit<64> data; }
header sum_t { bit<16> s; }

struct headers { len_t len; opt_t a; opt_t b; opt_t[2] s; sum_t sum; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.len);
        pkt.extract(hdr.a, (bit<32>)hdr.len.bytes * 8);
        transition select(hdr.len.op) {
            3: stack;
            4: odd;
            5: two;
            6: sum;
            default: accept;
        }
    }
    state odd { pkt.extract(hdr.b, 12); transition accept; }
    state sum { pkt.extract(hdr.sum); transition accept; }
    state two { pkt.extract(hdr.b, (bit<32>)hdr.len.bytes * 8); transition accept; }
    state stack {
        pkt.extract(hdr.s.next, 16);
        pkt.extract(hdr.s.next, 8);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = sm.parser_error == error.NoError ? 9w1 : 9w2;
        if (sm.parser_error == error.HeaderTooShort) {
            sm.egress_spec = 3;
        } else if (sm.parser_error == error.ParserInvalidArgument) {
            sm.egress_spec = 4;
        }
        if (hdr.len.op == 1) {
            hdr.b = hdr.a;
        } else if (hdr.len.op == 2) {
            hdr.a.kind = 0xaa;
        } else if (hdr.len.op == 3) {
            hdr.s.pop_front(1);
        } else if (hdr.len.op == 5) {
            hdr.len.op = hdr.a.data == hdr.b.data ? 8w0x51 : 8w0x50;
            hdr.len.bytes = hdr.a == hdr.b ? 8w1 : 8w0;
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.sum.isValid(), { hdr.a.kind, hdr.a.data }, hdr.sum.s,
                        HashAlgorithm.csum16);
    }
}
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
