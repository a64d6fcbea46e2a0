// Action profiles and selectors: entries name members and groups; a group picks its member
// by the selector's hash of the `selector` keys (identity here, so the test can predict it).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> key;
    bit<8> flow;
    bit<8> out;
}

struct headers { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control VC(inout headers hdr, inout meta_t m) { apply { } }

control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action set(bit<8> v, bit<9> port) {
        hdr.h.out = v;
        sm.egress_spec = port;
    }
    action drop() { mark_to_drop(sm); }

    action_profile(32w4) prof;

    table by_member {
        key = { hdr.h.key: exact; }
        actions = { set; drop; }
        implementation = prof;
    }

    @max_group_size(8)
    table by_group {
        key = {
            hdr.h.key: exact;
            hdr.h.flow: selector;
        }
        actions = { set; drop; }
        @name("sel") implementation = action_selector(HashAlgorithm.identity, 32w16, 32w8);
    }

    // Keyless: only its default, a member or group, runs (BMv2's indirect default).
    table keyless {
        key = { hdr.h.flow: selector; }
        actions = { set; drop; }
        @name("ksel") implementation = action_selector(HashAlgorithm.identity, 32w4, 32w8);
    }

    apply {
        if (hdr.h.key == 0x30) {
            keyless.apply();
        } else if (hdr.h.key < 0x10) {
            by_member.apply();
        } else {
            switch (by_group.apply().action_run) {
                set: { hdr.h.out = hdr.h.out | 0x01; }
            }
        }
    }
}

control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), VC(), I(), E(), C(), D()) main;
