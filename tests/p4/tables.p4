/* Table features: exact, ternary with priorities, range, optional and mixed exact+lpm keys;
 * const entries; default actions with arguments; hit/miss; switch on action_run; an action
 * with an @ref parameter the data plane counts in; direct counters. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etherType;
}

header probe_t {
    bit<8>  kind;
    bit<8>  a;
    bit<16> b;
    bit<32> addr;
    bit<16> tag;
    bit<16> count;
}

struct headers {
    ethernet_t ethernet;
    probe_t    probe;
}

struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.probe);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    direct_counter(CounterType.packets) exact_hits;
    direct_counter(CounterType.packets_and_bytes) route_hits;

    action set_tag(bit<16> tag) { hdr.probe.tag = tag; }
    action to_port(bit<9> port) { sm.egress_spec = port; }
    action count_in(@ref bit<16> n) { n = n + 1; hdr.probe.count = n; }
    action nop() { }

    table by_kind {
        key = { hdr.probe.kind: exact; }
        actions = { to_port; nop; }
        default_action = to_port(9);
        counters = exact_hits;
    }

    table classify {
        key = { hdr.probe.a: ternary; hdr.probe.b: range; }
        actions = { set_tag; nop; }
        default_action = set_tag(0xdead);
    }

    table routes {
        key = { hdr.probe.kind: exact; hdr.probe.addr: lpm; }
        actions = { set_tag; nop; }
        default_action = nop();
        counters = route_hits;
    }

    table fixed {
        key = { hdr.probe.a: exact; hdr.probe.b: optional; }
        actions = { set_tag; nop; }
        const entries = {
            (0x10, 0x0001) : set_tag(0x1001);
            (0x10, _)      : set_tag(0x1000);
        }
        default_action = nop();
    }

    @tableconfig(store="dynamic", locked=true)
    table counting {
        key = { hdr.probe.addr: exact; }
        actions = { count_in; nop; }
        default_action = nop();
    }

    apply {
        switch (by_kind.apply().action_run) {
            to_port: {
                if (hdr.probe.kind == 1) {
                    classify.apply();
                } else if (hdr.probe.kind == 2) {
                    if (!routes.apply().hit) {
                        hdr.probe.tag = 0xffff;
                    }
                } else if (hdr.probe.kind == 3) {
                    fixed.apply();
                } else if (hdr.probe.kind == 4) {
                    counting.apply();
                }
            }
            nop: { hdr.probe.tag = 0x0bad; }
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
