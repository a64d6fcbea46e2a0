/* A forwarding program that signs each packet with its version: ingress writes VERSION into
 * the high byte of the generator's stamp mark, egress into the low byte. A packet processed
 * half by one program and half by another would carry two different bytes. It also counts
 * every packet in an @ref entry written by the data plane. The replacement test compiles it
 * with different VERSIONs (#define before the text). */
#include <core.p4>
#include <v1model.p4>

#ifndef VERSION
#define VERSION 1
#endif

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> len; bit<16> checksum; }
header stamp_t { bit<16> magic; bit<16> flow; bit<32> seq; bit<64> ts; bit<8> mark_hi; bit<8> mark_lo; }

struct headers { ethernet_t ethernet; ipv4_t ipv4; udp_t udp; stamp_t stamp; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 17: udp; default: accept; }
    }
    state udp {
        pkt.extract(hdr.udp);
        transition select(pkt.lookahead<bit<16>>()) { 0xa5c3: stamp; default: accept; }
    }
    state stamp { pkt.extract(hdr.stamp); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action count(@ref bit<32> n) { n = n + 1; }

    table routes {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { fwd; drop; }
        default_action = drop();
    }

    @tableconfig(locked=true)
    table counts {
        key = { hdr.udp.dstPort: exact; }
        actions = { count; NoAction; }
        default_action = NoAction();
    }

    apply {
        routes.apply();
        counts.apply();
        if (hdr.stamp.isValid()) { hdr.stamp.mark_hi = VERSION; }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { if (hdr.stamp.isValid()) { hdr.stamp.mark_lo = VERSION; } }
}

control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.udp); pkt.emit(hdr.stamp); }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
