/* Per-flow functions as policy, P4 as forwarding: the program asks the packet's flow function
 * (a Lua function installed per flow: hotplane push update --target flow:SELECTOR --kind lua)
 * for its verdict. A flow whose function says drop is diverted to the monitor port (1) instead
 * of being routed; other flows, and flows without a function, are routed. The function runs on
 * a copy of the packet and once per packet: the data plane's flow step skips packets a P4
 * program already ran the function for.
 *
 * crates/hotplane/tests/p4_externs.rs runs it with a Lua function that drops one flow.
 */
#include <core.p4>
#include <v1model.p4>
#include <hotplane.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata { }

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port) { sm.egress_spec = port; }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { forward; drop; }
        default_action = drop();
        size = 1024;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            if (hotplane_flow_function() == HOTPLANE_XDP_DROP) {
                sm.egress_spec = 1;
            } else {
                ipv4_lpm.apply();
            }
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
