/* What simple_switch_CLI reaches (hotplane-p4's `cli` module and `hotplane cli`): an lpm
 * table, a ternary + range table with priorities and direct counters, an indirect counter,
 * a register and a meter. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

struct metadata {
    bit<2> color;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: ipv4;
            default: accept;
        }
    }
    state ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets_and_bytes) per_port;
    register<bit<32>>(8) last_src;
    meter(4, MeterType.packets) limits;
    direct_counter(CounterType.packets_and_bytes) acl_hits;

    action drop() { mark_to_drop(sm); }
    action allow() { }
    action metered() { limits.execute_meter((bit<32>)0, meta.color); }
    action forward(bit<48> dst, bit<9> port) {
        hdr.ethernet.dst = dst;
        sm.egress_spec = port;
        per_port.count((bit<32>)port);
        last_src.write((bit<32>)port, hdr.ipv4.srcAddr);
    }

    table routes {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { forward; drop; }
        default_action = drop();
        size = 64;
    }

    table acl {
        key = { hdr.ipv4.protocol: ternary; hdr.ipv4.ttl: range; }
        actions = { allow; drop; metered; }
        default_action = allow();
        counters = acl_hits;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            switch (acl.apply().action_run) {
                drop: { }
                default: { routes.apply(); }
            }
        } else {
            drop();
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(P(), VC(), MyIngress(), Eg(), CC(), D()) main;
