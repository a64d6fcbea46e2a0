/* v1model architecture features, one opcode each: forwarding, multicast with replication
 * ids, ingress clone, resubmit, recirculate, crc16 hash, registers, indexed counters,
 * mark_to_drop, egress drop. The `cmd` header carries the opcode, its argument and a result
 * the program writes. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header cmd_t {
    bit<8>  op;
    bit<8>  arg;
    bit<16> res;
    bit<32> extra;
}

struct headers {
    ethernet_t ethernet;
    cmd_t      cmd;
}

struct metadata {
    bit<16> scratch;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88b5: parse_cmd;
            default: accept;
        }
    }
    state parse_cmd {
        pkt.extract(hdr.cmd);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<16>>(8) hits;
    counter(8, CounterType.packets_and_bytes) per_arg;

    apply {
        if (!hdr.cmd.isValid()) {
            mark_to_drop(sm);
            exit;
        }
        sm.egress_spec = 1;
        if (hdr.cmd.op == 1) {
            sm.egress_spec = (bit<9>) hdr.cmd.arg;
        } else if (hdr.cmd.op == 2) {
            sm.mcast_grp = (bit<16>) hdr.cmd.arg;
        } else if (hdr.cmd.op == 3) {
            clone(CloneType.I2E, (bit<32>) hdr.cmd.arg);
        } else if (hdr.cmd.op == 4) {
            if (sm.instance_type == 0) {
                resubmit_preserving_field_list(0);
            } else {
                hdr.cmd.res = (bit<16>) sm.instance_type;
                sm.egress_spec = 2;
            }
        } else if (hdr.cmd.op == 5) {
            if (sm.instance_type == 4) {
                hdr.cmd.res = 0x4444;
                sm.egress_spec = 3;
            }
        } else if (hdr.cmd.op == 6) {
            hash(hdr.cmd.res, HashAlgorithm.crc16, (bit<16>) 0, { hdr.cmd.op, hdr.cmd.arg }, (bit<32>) 65536);
            hash(hdr.cmd.extra, HashAlgorithm.crc32, (bit<32>) 0, { hdr.ethernet.src }, (bit<64>) 4294967296);
        } else if (hdr.cmd.op == 7) {
            bit<16> n;
            hits.read(n, (bit<32>) hdr.cmd.arg);
            n = n + 1;
            hits.write((bit<32>) hdr.cmd.arg, n);
            hdr.cmd.res = n;
        } else if (hdr.cmd.op == 8) {
            per_arg.count((bit<32>) hdr.cmd.arg);
        } else if (hdr.cmd.op == 9) {
            sm.egress_spec = 4;
        } else {
            mark_to_drop(sm);
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 1) {
            hdr.cmd.res = 0xc1c1;
        } else if (sm.instance_type == 5) {
            hdr.cmd.res = sm.egress_rid;
            hdr.cmd.extra = (bit<32>) sm.egress_port;
        }
        if (hdr.cmd.op == 5 && sm.instance_type == 0) {
            hdr.cmd.res = 0x5555;
            recirculate_preserving_field_list(0);
        }
        if (hdr.cmd.op == 9) {
            mark_to_drop(sm);
        }
    }
}

control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.cmd);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
