// The packet replication engine: IPv4 frames go to multicast group 1; frames of ether type
// 0x0801 go to port 1 and a clone (clone session 5) goes where the session says. Egress drops
// the copy that would leave by the port the frame came in on, as the tutorials' multicast does.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers_t { ethernet_t ethernet; }
struct meta_t {}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout meta_t m) { apply {} }

control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (hdr.ethernet.ether_type == 0x0801) {
            clone(CloneType.I2E, 5);
            sm.egress_spec = 1;
        } else {
            sm.mcast_grp = 1;
        }
    }
}

control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == sm.ingress_port) {
            mark_to_drop(sm);
        }
    }
}

control NoCompute(inout headers_t hdr, inout meta_t m) { apply {} }

control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); }
}

V1Switch(P(), NoVerify(), I(), E(), NoCompute(), D()) main;
