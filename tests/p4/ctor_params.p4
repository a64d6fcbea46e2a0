// Constructor parameters: compile-time values of blocks, given where they are instantiated
// (in V1Switch, in a control, in a parser) or defaulted.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

struct headers { h_t h; }
struct meta_t { }

parser Tag(packet_in pkt, inout h_t h)(bit<8> mark) {
    state start {
        h.d = mark;
        transition accept;
    }
}

parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm)
        (bit<8> tag = 0x7e) {
    Tag(tag) tagger;
    state start {
        pkt.extract(hdr.h);
        tagger.apply(pkt, hdr.h);
        transition accept;
    }
}

control Add(inout bit<8> x)(bit<8> amount, bool twice) {
    const bit<8> step = amount + 1;
    apply {
        x = x + step;
        if (twice) {
            x = x + step;
        }
    }
}

// A default means what it says where it is written: DEFAULT_STEP is the top-level one, even
// when the block that instantiates Step has a constructor parameter of that name.
const bit<8> DEFAULT_STEP = 16;

control Step(inout bit<8> x)(bit<8> n = DEFAULT_STEP) {
    apply { x = x + n; }
}

control Outer(inout bit<8> x)(bit<8> DEFAULT_STEP = 4) {
    Step() step;
    apply { step.apply(x); }
}

control VC(inout headers hdr, inout meta_t m) { apply { } }

control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm)(bit<9> port) {
    Add(8w0, false) once;
    Add(8w4, true) twice;
    Outer() outer;
    apply {
        outer.apply(hdr.h.a);
        once.apply(hdr.h.b);
        twice.apply(hdr.h.c);
        sm.egress_spec = port;
    }
}

control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(9w3), E(), C(), D()) main;
