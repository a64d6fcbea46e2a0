/* A direct meter on an exact table and a parser value set of two fields: for P4Runtime's
 * DirectMeterEntry, TableEntry.meter_config and ValueSetEntry (the p4rt_request fuzz target). */
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> f; bit<8> g; bit<8> colour; }
struct hs { h_t h; }
struct m { bit<2> colour; }
struct pair_t { bit<8> f; @match(ternary) bit<8> g; }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    value_set<pair_t>(8) pairs;
    state start { p.extract(h.h); transition select(h.h.f, h.h.g) { pairs: accept; default: accept; } }
}
control C(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    direct_meter<bit<2>>(MeterType.bytes) dm;
    action mark() { dm.read(meta.colour); }
    table t { key = { h.h.f: exact; } actions = { mark; NoAction; } meters = dm; }
    apply { t.apply(); h.h.colour = (bit<8>) meta.colour; }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
