/* Code from packets (as the reference's *_load_prog_from_packet externs): UDP datagrams to
 * the ports in `code_sources`, from the addresses there, are handed to the control plane as
 * updates. The control plane authenticates each with the node's keys (BLAKE3 keyed MAC,
 * replay protection) and installs what it carries (eBPF, Lua or P4, at the target the envelope
 * names); everything else is routed.
 *
 * crates/hotplane/tests/p4_externs.rs replays update packets through it: the authentic one
 * is applied and acknowledged, a forged one refused, one to another port routed untouched.
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
header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> len; bit<16> checksum; }
struct headers { ethernet_t ethernet; ipv4_t ipv4; udp_t udp; }
struct metadata { }

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 17: parse_udp; default: accept; }
    }
    state parse_udp { pkt.extract(hdr.udp); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action load_code() { hotplane_load_from_packet(); }

    /* Where code may come from: a management prefix and port. */
    table code_sources {
        key = { hdr.ipv4.srcAddr: lpm; hdr.udp.dstPort: exact; }
        actions = { load_code; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { forward; drop; }
        default_action = drop();
        size = 1024;
    }

    apply {
        if (hdr.udp.isValid() && code_sources.apply().hit) {
            exit;
        }
        if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.udp); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
