/* Parsers instantiated inside a parser (sub-parsers), applied from parser states: each apply
 * runs the sub-parser's states with the arguments given (an `out` one starts invalid), its own
 * fresh locals and its own sub-parsers, then the statements after the apply and the state's
 * transition; a reject in the sub-parser rejects the packet. */
#include <core.p4>
#include <v1model.p4>

header tag_t { bit<8> kind; }
header word_t { bit<8> v; }
struct words_t { word_t a; word_t b; }

struct headers { tag_t tag; words_t first; words_t second; word_t seen; }
struct metadata { bit<8> count; }

parser Leaf(packet_in pkt, out word_t w, inout bit<8> count) {
    state start { pkt.extract(w); count = count + 1; transition accept; }
}

parser Pair(packet_in pkt, out words_t ws, inout bit<8> count) {
    Leaf() leaf;
    word_t scratch;
    state start {
        leaf.apply(pkt, ws.a, count);
        transition select(ws.a.v) {
            0xff: reject;
            0x00: accept;
            default: more;
        }
    }
    state more {
        leaf.apply(pkt, scratch, count);
        ws.b = scratch;
        transition accept;
    }
}

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Pair() pair;
    state start {
        pkt.extract(hdr.tag);
        meta.count = 0;
        transition select(hdr.tag.kind) {
            1: one;
            2: two;
            default: accept;
        }
    }
    state one {
        pair.apply(pkt, hdr.first, meta.count);
        hdr.seen.setValid();
        hdr.seen.v = meta.count;
        transition accept;
    }
    state two {
        pair.apply(pkt, hdr.first, meta.count);
        pair.apply(pkt, hdr.second, meta.count);
        hdr.seen.setValid();
        hdr.seen.v = meta.count;
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }
control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
    }
}
control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
