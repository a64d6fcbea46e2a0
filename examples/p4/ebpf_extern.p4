/* The dynamic-eBPF extern: an action hands the IPv4 header to the eBPF program in the extern
 * slot `classify`, which may rewrite it and returns an XDP action that decides the packet's
 * fate. The slot's program is replaced while packets flow, without touching the P4 program:
 *
 *   hotplane run --config examples/config/p4-ebpf.toml
 *   hotplane push update --target extern:classify \
 *       --kind ebpf-bytecode --payload-file new.bin --key-file examples/config/demo-key.hex
 *
 * examples/p4/classify.s is the program it starts with: UDP gets DSCP EF (46), ICMP is
 * dropped, everything else passes unchanged. */
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
    hotplane_ebpf("classify") classify;

    action drop() { mark_to_drop(sm); }
    action forward(bit<48> dstAddr, bit<9> port) {
        sm.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    /* Forward what the eBPF program lets through, as it left the header. */
    action inspect_forward(bit<48> dstAddr, bit<9> port) {
        bit<64> verdict = classify.call(hdr.ipv4);
        if (verdict == HOTPLANE_XDP_DROP) {
            mark_to_drop(sm);
        } else {
            forward(dstAddr, port);
        }
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { forward; inspect_forward; drop; }
        default_action = drop();
        size = 1024;
    }

    apply { if (hdr.ipv4.isValid()) { ipv4_lpm.apply(); } }
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
