/* Writable table entries (hotplane's @ref and @tableconfig): IPv4 forwarding by longest prefix,
 * then a per-destination packet and byte count kept in the table entry itself. The data plane
 * increments `packets` and `bytes` in place; the control plane reads them with
 * `hotplane push p4-dump MyIngress.per_dst` and they survive `hotplane push --p4` of a new
 * program whose `per_dst` table has the same key and actions.
 *
 *   hotplane run --config examples/config/p4.toml
 *   hotplane push p4-dump per_dst
 */
#include <core.p4>
#include <v1model.p4>

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
    action forward(bit<9> port) {
        sm.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    /* @ref: written back into the entry after the action. */
    action count(@ref bit<64> packets, @ref bit<64> bytes) {
        packets = packets + 1;
        bytes = bytes + (bit<64>)sm.packet_length;
    }

    table routes {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { forward; drop; }
        default_action = drop();
        size = 1024;
    }

    /* Dynamic store (entries added at run time), locked: both counters of an entry change
     * together, even when several workers hit the same entry. */
    @tableconfig(store="dynamic", locked=true)
    table per_dst {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { count; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            routes.apply();
            per_dst.apply();
        } else {
            drop();
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
