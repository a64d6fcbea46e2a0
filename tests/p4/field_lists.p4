/* Preserved field lists: a resubmitted, recirculated or cloned packet keeps the metadata
 * fields of the field list it names (as they are at the end of the block that asked, not at
 * the call), and every other metadata field starts again at zero. Indices from literals and
 * from an enum; a list on a nested struct; the older data-argument form of resubmit. */
#include <core.p4>
#include <v1model.p4>

header cmd_t { bit<8> op; bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
struct headers_t { cmd_t cmd; }

enum bit<8> FieldLists { resub = 1, recirc = 2 }

struct inner_t { bit<8> y; }
struct meta_t {
    @field_list(1) bit<8> kept;
    bit<8> lost;
    @field_list(FieldLists.resub, FieldLists.recirc) inner_t nested;
    @field_list(2) bit<8> rec;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.cmd); transition select(hdr.cmd.op) { 3: mark; default: accept; } }
    /* An ingress clone is parsed again; what the parser writes to metadata outside the
     * clone's field list does not reach its egress. */
    state mark { meta.rec = 0x5a; transition accept; }
}

control NoChecksum(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.instance_type == 0) {
            if (hdr.cmd.op == 1) {
                meta.kept = 0x11;
                meta.lost = 0x22;
                meta.nested.y = 0x33;
                resubmit_preserving_field_list(1);
                meta.kept = 0x44;
            } else if (hdr.cmd.op == 3) {
                meta.kept = 0x55;
                meta.lost = 0x66;
                meta.nested.y = 0x13;
                clone_preserving_field_list(CloneType.I2E, 5, 1);
            } else if (hdr.cmd.op == 4) {
                meta.lost = 0x21;
                meta.kept = 0x31;
                resubmit({ meta.lost });
            }
        } else {
            hdr.cmd.a = meta.kept;
            hdr.cmd.b = meta.lost;
            hdr.cmd.c = meta.nested.y;
            hdr.cmd.d = meta.rec;
        }
    }
}

control Egr(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 0 && hdr.cmd.op == 2) {
            meta.rec = 0x77;
            meta.lost = 0x88;
            meta.nested.y = 0x99;
            recirculate_preserving_field_list(2);
        }
        if (sm.instance_type == 0 && hdr.cmd.op == 5) {
            meta.kept = 0xab;
            meta.lost = 0xcd;
            clone_preserving_field_list(CloneType.E2E, 5, 1);
        }
        if (sm.instance_type == 1) {
            hdr.cmd.a = meta.kept;
            hdr.cmd.b = meta.lost;
            hdr.cmd.c = meta.nested.y;
            hdr.cmd.d = meta.rec;
        }
        if (sm.instance_type == 2) {
            hdr.cmd.a = meta.kept;
            hdr.cmd.b = meta.lost;
            hdr.cmd.c = meta.nested.y;
            hdr.cmd.d = (bit<8>) sm.instance_type;
        }
    }
}

control Dep(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.cmd); } }

V1Switch(P(), NoChecksum(), Ing(), Egr(), NoChecksum(), Dep()) main;
