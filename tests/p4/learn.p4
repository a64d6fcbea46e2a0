// An L2 learning switch, as controllers teach it: a source address the `smac` table does not
// know is sent to the controller as a `learn_t` digest (with the port it came in on); the
// controller answers with entries in `smac` (learned) and `dmac` (where to send), and ages
// them out when `smac` tells it an address went idle. Frames to an unknown destination go out
// of port 1.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct learn_t {
    bit<48> src;
    bit<9> port;
}

struct headers_t {
    ethernet_t ethernet;
}

struct meta_t {}

parser P(packet_in pkt, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout meta_t m) { apply {} }

control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    action learn() {
        digest<learn_t>(1, { hdr.ethernet.src, sm.ingress_port });
    }
    action known() {}
    table smac {
        key = { hdr.ethernet.src: exact; }
        actions = { learn; known; }
        default_action = learn();
        support_timeout = true;
    }
    action forward(bit<9> port) {
        sm.egress_spec = port;
    }
    action flood() {
        sm.egress_spec = 1;
    }
    table dmac {
        key = { hdr.ethernet.dst: exact; }
        actions = { forward; flood; }
        default_action = flood();
    }
    apply {
        smac.apply();
        dmac.apply();
    }
}

control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply {} }

control NoCompute(inout headers_t hdr, inout meta_t m) { apply {} }

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(P(), NoVerify(), I(), E(), NoCompute(), D()) main;
