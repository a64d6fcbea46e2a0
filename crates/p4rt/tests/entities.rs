//! P4Runtime entities against tables.p4 without a server: what is written is what reads
//! return, and a refused entry leaves nothing behind.

use hotplane_core::Qsbr;
use hotplane_p4::exec::{Engine, Objects, Pipeline};
use hotplane_p4rt::entities::{read_entity, write_update};
use hotplane_p4rt::proto::google::rpc::Code;
use hotplane_p4rt::proto::p4::v1::{
    self as v1, entity, field_match, table_action, update, Entity, FieldMatch, TableAction,
    TableEntry, Update,
};
use hotplane_p4rt::schema::{p4info_of, Schema};

const PROGRAM: &str = include_str!("../../../tests/p4/tables.p4");

fn setup() -> (Schema, Pipeline, Qsbr) {
    let ir =
        hotplane_p4::compile_source_with("tables.p4", PROGRAM, &[], &Default::default()).unwrap();
    let schema = Schema::new(p4info_of(&ir).unwrap(), &ir).unwrap();
    let qsbr = Qsbr::new();
    let objects = Objects::new(&ir, &qsbr).unwrap();
    let p = Pipeline::with_engine(ir, objects, Engine::Closures).unwrap();
    (schema, p, qsbr)
}

fn id(schema: &Schema, name: &str) -> u32 {
    let t = schema.tables.iter().find(|(_, t)| t.name == name).map(|(id, _)| *id);
    let a = schema.actions.iter().find(|(_, a)| a.name == name).map(|(id, _)| *id);
    t.or(a).unwrap_or_else(|| panic!("no {name}"))
}

/// `Ing.classify`: `a` ternary 0x10/0xf0, `b` in `lo..=hi`, priority 10, `set_tag(tag)`.
fn classify(schema: &Schema, lo: u8, hi: u8, tag: u8) -> TableEntry {
    TableEntry {
        table_id: id(schema, "Ing.classify"),
        r#match: vec![
            FieldMatch {
                field_id: 1,
                field_match_type: Some(field_match::FieldMatchType::Ternary(
                    field_match::Ternary { value: vec![0x10], mask: vec![0xf0] },
                )),
            },
            FieldMatch {
                field_id: 2,
                field_match_type: Some(field_match::FieldMatchType::Range(field_match::Range {
                    low: vec![lo],
                    high: vec![hi],
                })),
            },
        ],
        action: Some(TableAction {
            r#type: Some(table_action::Type::Action(v1::Action {
                action_id: id(schema, "Ing.set_tag"),
                params: vec![v1::action::Param { param_id: 1, value: vec![tag] }],
            })),
        }),
        priority: 10,
        ..Default::default()
    }
}

fn insert(e: TableEntry) -> Update {
    Update {
        r#type: update::Type::Insert as i32,
        entity: Some(Entity { entity: Some(entity::Entity::TableEntry(e)) }),
    }
}

fn read_all(schema: &Schema, p: &Pipeline, table: u32) -> Vec<TableEntry> {
    let filter = Entity {
        entity: Some(entity::Entity::TableEntry(TableEntry {
            table_id: table,
            ..Default::default()
        })),
    };
    read_entity(schema, p, &filter)
        .unwrap()
        .into_iter()
        .map(|e| match e {
            entity::Entity::TableEntry(t) => t,
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_range_reads_back_whole_and_a_refused_one_leaves_no_piece() {
    let (schema, p, _q) = setup();
    let table = id(&schema, "Ing.classify");
    write_update(&schema, &p, &insert(classify(&schema, 8, 9, 1))).unwrap();
    // [0, 9] is stored as [0-7] and [8-9]; [8-9] is taken, so nothing of it may stay.
    let refused = write_update(&schema, &p, &insert(classify(&schema, 0, 9, 2))).unwrap_err();
    assert_eq!(refused.code, Code::AlreadyExists, "{refused:?}");
    let got = read_all(&schema, &p, table);
    assert_eq!(got, vec![classify(&schema, 8, 9, 1)], "only the first entry, as written");
    // A range of many prefixes reads back as the one range written.
    write_update(&schema, &p, &insert(classify(&schema, 100, 200, 3))).unwrap();
    let got = read_all(&schema, &p, table);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.contains(&classify(&schema, 100, 200, 3)), "{got:?}");
}

#[test]
fn malformed_matches_are_refused_with_the_spec_codes() {
    let (schema, p, _q) = setup();
    let mut zero_mask = classify(&schema, 1, 2, 1);
    zero_mask.r#match[0].field_match_type =
        Some(field_match::FieldMatchType::Ternary(field_match::Ternary {
            value: vec![0],
            mask: vec![0],
        }));
    let mut stray_bits = classify(&schema, 1, 2, 1);
    stray_bits.r#match[0].field_match_type =
        Some(field_match::FieldMatchType::Ternary(field_match::Ternary {
            value: vec![0x11],
            mask: vec![0xf0],
        }));
    let mut full_range = classify(&schema, 0, 0, 1);
    full_range.r#match[1].field_match_type =
        Some(field_match::FieldMatchType::Range(field_match::Range {
            low: vec![0],
            high: vec![0xff, 0xff],
        }));
    let mut no_priority = classify(&schema, 1, 2, 1);
    no_priority.priority = 0;
    let mut wrong_kind = classify(&schema, 1, 2, 1);
    wrong_kind.r#match[1].field_match_type =
        Some(field_match::FieldMatchType::Exact(field_match::Exact { value: vec![1] }));
    let mut twice = classify(&schema, 1, 2, 1);
    twice.r#match.push(twice.r#match[0].clone());
    for (what, e) in [
        ("zero mask", zero_mask),
        ("value outside mask", stray_bits),
        ("full range", full_range),
        ("no priority", no_priority),
        ("wrong kind", wrong_kind),
        ("field twice", twice),
    ] {
        let r = write_update(&schema, &p, &insert(e)).unwrap_err();
        assert_eq!(r.code, Code::InvalidArgument, "{what}: {r:?}");
    }
    let unspecified = Update { r#type: 0, ..insert(classify(&schema, 1, 2, 1)) };
    assert_eq!(write_update(&schema, &p, &unspecified).unwrap_err().code, Code::InvalidArgument);
    let empty = Update { r#type: update::Type::Insert as i32, entity: None };
    assert_eq!(write_update(&schema, &p, &empty).unwrap_err().code, Code::InvalidArgument);
    assert!(read_all(&schema, &p, id(&schema, "Ing.classify")).is_empty(), "nothing was written");
}

/// Registers, which BMv2 refuses: one cell or all cells written and read back as bit strings
/// of the register's width; out-of-range cells, wrong widths and inserts refused.
#[test]
fn register_cells_are_written_and_read_back() {
    const MONITOR: &str = include_str!("../../../tests/p4/link_monitor.p4");
    let ir = hotplane_p4::compile_source_with("link_monitor.p4", MONITOR, &[], &Default::default())
        .unwrap();
    let schema = Schema::new(p4info_of(&ir).unwrap(), &ir).unwrap();
    let qsbr = Qsbr::new();
    let objects = Objects::new(&ir, &qsbr).unwrap();
    let p = Pipeline::with_engine(ir, objects, Engine::Closures).unwrap();
    let (&reg, r) =
        schema.registers.iter().find(|(_, r)| r.name.ends_with("byte_cnt_reg")).unwrap();
    assert_eq!(r.bits, 32);
    let cell = |index: Option<i64>, value: &[u8]| v1::RegisterEntry {
        register_id: reg,
        index: index.map(|index| v1::Index { index }),
        data: Some(v1::P4Data { data: Some(v1::p4_data::Data::Bitstring(value.to_vec())) }),
    };
    let update = |kind: update::Type, e: v1::RegisterEntry| Update {
        r#type: kind as i32,
        entity: Some(Entity { entity: Some(entity::Entity::RegisterEntry(e)) }),
    };
    let read = |index: Option<i64>| {
        let filter = Entity { entity: Some(entity::Entity::RegisterEntry(cell(index, &[]))) };
        read_entity(&schema, &p, &filter).unwrap()
    };
    write_update(&schema, &p, &update(update::Type::Modify, cell(None, &[7]))).unwrap();
    write_update(&schema, &p, &update(update::Type::Modify, cell(Some(2), &[0, 0, 1, 0]))).unwrap();
    let all = read(None);
    assert_eq!(all.len() as u64, r.size);
    let value = |e: &entity::Entity| match e {
        entity::Entity::RegisterEntry(r) => match r.data.clone().unwrap().data.unwrap() {
            v1::p4_data::Data::Bitstring(b) => b,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    assert_eq!(value(&all[0]), vec![7]);
    assert_eq!(value(&all[2]), vec![1, 0], "canonical");
    assert_eq!(read(Some(2)).len(), 1);
    let refused = |u: Update| write_update(&schema, &p, &u).unwrap_err().code;
    assert_eq!(refused(update(update::Type::Insert, cell(Some(1), &[1]))), Code::InvalidArgument);
    assert_eq!(refused(update(update::Type::Modify, cell(Some(999), &[1]))), Code::InvalidArgument);
    assert_eq!(
        refused(update(update::Type::Modify, cell(Some(1), &[1, 0, 0, 0, 0]))),
        Code::InvalidArgument
    );
    let mut unknown = cell(Some(1), &[1]);
    unknown.register_id = 0x1600_0001;
    assert_eq!(refused(update(update::Type::Modify, unknown)), Code::NotFound);
}

/// Indirect meters: a config set on one cell (or all) reads back; no config unconfigures;
/// RFC 2698's rules and the indices are checked, and a refused config changes nothing.
#[test]
fn meter_configs_are_written_and_read_back() {
    const METERED: &str = r#"
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> f; }
struct hs { h_t h; }
struct m { bit<2> color; }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control C(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    meter(8, MeterType.bytes) limit;
    apply { limit.execute_meter((bit<32>) h.h.f, meta.color); }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#;
    let ir =
        hotplane_p4::compile_source_with("metered.p4", METERED, &[], &Default::default()).unwrap();
    let schema = Schema::new(p4info_of(&ir).unwrap(), &ir).unwrap();
    let qsbr = Qsbr::new();
    let objects = Objects::new(&ir, &qsbr).unwrap();
    let p = Pipeline::with_engine(ir, objects, Engine::Closures).unwrap();
    let (&id, meter) = schema.meters.iter().next().expect("the meter");
    assert_eq!(meter.size, 8);
    let config = |cir, pir| v1::MeterConfig { cir, cburst: 1500, pir, pburst: 3000, eburst: 0 };
    let entry = |index: Option<i64>, config: Option<v1::MeterConfig>| v1::MeterEntry {
        meter_id: id,
        index: index.map(|index| v1::Index { index }),
        config,
        counter_data: None,
    };
    let modify = |e: v1::MeterEntry| Update {
        r#type: update::Type::Modify as i32,
        entity: Some(Entity { entity: Some(entity::Entity::MeterEntry(e)) }),
    };
    let read = |index: Option<i64>| -> Vec<Option<v1::MeterConfig>> {
        let filter = Entity { entity: Some(entity::Entity::MeterEntry(entry(index, None))) };
        read_entity(&schema, &p, &filter)
            .unwrap()
            .into_iter()
            .map(|e| match e {
                entity::Entity::MeterEntry(m) => m.config,
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert!(read(None).iter().all(Option::is_none), "unconfigured at start");
    write_update(&schema, &p, &modify(entry(Some(3), Some(config(1000, 2000))))).unwrap();
    assert_eq!(read(Some(3)), vec![Some(config(1000, 2000))]);
    let refused = |u: Update| write_update(&schema, &p, &u).unwrap_err().code;
    // PIR below CIR, an index out of range, a negative rate.
    assert_eq!(refused(modify(entry(None, Some(config(2000, 1000))))), Code::InvalidArgument);
    assert_eq!(refused(modify(entry(Some(8), Some(config(1, 2))))), Code::InvalidArgument);
    assert_eq!(refused(modify(entry(Some(1), Some(config(-1, 2))))), Code::InvalidArgument);
    assert_eq!(read(Some(3)), vec![Some(config(1000, 2000))], "nothing changed");
    write_update(&schema, &p, &modify(entry(Some(3), None))).unwrap();
    assert!(read(None).iter().all(Option::is_none));
}

/// Direct meters: each entry has its own meter, configured with the entry (`meter_config`) or
/// with a `DirectMeterEntry`, read back with either; a hit colours the packet by RFC 2698 and a
/// new or unconfigured entry's meter colours every packet green. Both engines, an exact and an
/// LPM table (the LPM one would otherwise run in native code).
#[test]
fn direct_meters_colour_each_entry_by_its_own_rates() {
    const METERED: &str = r#"
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> f; bit<8> colour; bit<8> colour2; }
struct hs { h_t h; }
struct m { bit<2> colour; bit<2> colour2; }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control C(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    direct_meter<bit<2>>(MeterType.packets) by_f;
    direct_meter<bit<2>>(MeterType.packets) by_prefix;
    action mark() { by_f.read(meta.colour); }
    action mark2() { by_prefix.read(meta.colour2); }
    table t { key = { h.h.f: exact; } actions = { mark; NoAction; } meters = by_f;
              default_action = NoAction(); }
    table l { key = { h.h.f: lpm; } actions = { mark2; NoAction; } meters = by_prefix;
              default_action = NoAction(); }
    apply {
        meta.colour = 3;
        t.apply();
        l.apply();
        h.h.colour = (bit<8>) meta.colour;
        h.h.colour2 = (bit<8>) meta.colour2;
        sm.egress_spec = 2;
    }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#;
    use hotplane_p4::v1model::{Output, Replication, V1Switch};
    use std::sync::Arc;
    for engine in [Engine::Closures, Engine::Native] {
        if engine == Engine::Native && !Engine::NATIVE_BUILT {
            continue;
        }
        let ir = hotplane_p4::compile_source_with("metered.p4", METERED, &[], &Default::default())
            .unwrap();
        let schema = Schema::new(p4info_of(&ir).unwrap(), &ir).unwrap();
        let qsbr = Qsbr::new();
        let objects = Objects::new(&ir, &qsbr).unwrap();
        let p = Arc::new(Pipeline::with_engine(ir, objects, engine).unwrap());
        let table = |name: &str| {
            *schema.tables.iter().find(|(_, t)| t.name == name).map(|(id, _)| id).unwrap()
        };
        let action = |name: &str| {
            *schema.actions.iter().find(|(_, a)| a.name == name).map(|(id, _)| id).unwrap()
        };
        let exact = |f: u8| FieldMatch {
            field_id: 1,
            field_match_type: Some(field_match::FieldMatchType::Exact(field_match::Exact {
                value: vec![f],
            })),
        };
        // The LPM table's one entry is 0/0: P4Runtime writes it without the field.
        let any = Vec::new;
        let config = |cburst, pburst| v1::MeterConfig { cir: 1, cburst, pir: 1, pburst, eburst: 0 };
        let entry =
            |t: &str, m: Vec<FieldMatch>, a: &str, meter: Option<v1::MeterConfig>| TableEntry {
                table_id: table(t),
                r#match: m,
                action: Some(TableAction {
                    r#type: Some(table_action::Type::Action(v1::Action {
                        action_id: action(a),
                        params: vec![],
                    })),
                }),
                meter_config: meter,
                ..Default::default()
            };
        let update = |ty: update::Type, e: entity::Entity| Update {
            r#type: ty as i32,
            entity: Some(Entity { entity: Some(e) }),
        };
        let insert = |e: TableEntry| update(update::Type::Insert, entity::Entity::TableEntry(e));
        // f = 1: 2 packets of committed burst, 3 of peak; f = 2: never configured.
        write_update(
            &schema,
            &p,
            &insert(entry("I.t", vec![exact(1)], "I.mark", Some(config(2, 3)))),
        )
        .unwrap();
        write_update(&schema, &p, &insert(entry("I.t", vec![exact(2)], "I.mark", None))).unwrap();
        write_update(&schema, &p, &insert(entry("I.l", any(), "I.mark2", None))).unwrap();
        let mut sw = V1Switch::new(Arc::clone(&p));
        let mut colours = |f: u8| -> (u8, u8) {
            let mut reader = qsbr.register("test");
            let mut out: Vec<Output> = Vec::new();
            // One instant: no tokens come back between packets.
            sw.process(&[f, 9, 9], 1, &Replication::default(), &reader.guard(), 1_000, &mut out);
            reader.quiescent();
            assert_eq!(out.len(), 1, "{engine:?}: one packet out");
            (out[0].data[1], out[0].data[2])
        };
        let seq = |f: u8, n: usize, colours: &mut dyn FnMut(u8) -> (u8, u8)| {
            (0..n).map(|_| colours(f)).collect::<Vec<_>>()
        };
        // Green, green (committed burst spent), yellow (peak spent), then red.
        assert_eq!(
            seq(1, 5, &mut colours).iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![0, 0, 1, 2, 2],
            "{engine:?}: entry f=1"
        );
        assert_eq!(seq(2, 3, &mut colours), vec![(0, 0); 3], "{engine:?}: unconfigured");
        assert_eq!(colours(7).0, 3, "{engine:?}: a miss runs no action and leaves the colour");
        // The LPM entry's meter, configured through a DirectMeterEntry, meters every packet.
        let direct = |t: &str, m: Vec<FieldMatch>, config: Option<v1::MeterConfig>| {
            entity::Entity::DirectMeterEntry(v1::DirectMeterEntry {
                table_entry: Some(TableEntry {
                    table_id: table(t),
                    r#match: m,
                    ..Default::default()
                }),
                config,
                counter_data: None,
            })
        };
        let modify = |e| update(update::Type::Modify, e);
        write_update(&schema, &p, &modify(direct("I.l", any(), Some(config(1, 1))))).unwrap();
        assert_eq!(seq(2, 3, &mut colours).iter().map(|c| c.1).collect::<Vec<_>>(), vec![0, 2, 2]);
        // Reads: the table entry and the direct meter entry both carry the config.
        let read = |e: entity::Entity| read_entity(&schema, &p, &Entity { entity: Some(e) });
        let configs: Vec<Option<v1::MeterConfig>> = read(direct("I.t", vec![exact(1)], None))
            .unwrap()
            .into_iter()
            .map(|e| match e {
                entity::Entity::DirectMeterEntry(d) => d.config,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(configs, vec![Some(config(2, 3))]);
        let all = read(entity::Entity::DirectMeterEntry(Default::default())).unwrap();
        assert_eq!(all.len(), 3, "every metered entry of every table");
        // A table entry read returns meter configs when its filter asks for them.
        let filter = TableEntry {
            table_id: table("I.t"),
            meter_config: Some(Default::default()),
            ..Default::default()
        };
        let by_table = read(entity::Entity::TableEntry(filter)).unwrap();
        let mut metered: Vec<Option<v1::MeterConfig>> = by_table
            .into_iter()
            .map(|e| match e {
                entity::Entity::TableEntry(t) => t.meter_config,
                other => panic!("{other:?}"),
            })
            .collect();
        metered.sort_by_key(|c| c.is_none());
        assert_eq!(metered, vec![Some(config(2, 3)), None]);
        let unasked = TableEntry { table_id: table("I.t"), ..Default::default() };
        let plain = read(entity::Entity::TableEntry(unasked)).unwrap();
        assert!(
            plain
                .iter()
                .all(|e| matches!(e, entity::Entity::TableEntry(t) if t.meter_config.is_none())),
            "not asked, not sent"
        );
        // Unconfigured again: green.
        write_update(&schema, &p, &modify(direct("I.t", vec![exact(1)], None))).unwrap();
        assert_eq!(seq(1, 3, &mut colours).iter().map(|c| c.0).collect::<Vec<_>>(), vec![0; 3]);
        // A hit writes the colour whichever action runs (NoAction reads nothing): as BMv2.
        let no_action = entry("I.t", vec![exact(4)], "NoAction", Some(config(1, 1)));
        write_update(&schema, &p, &insert(no_action.clone())).unwrap();
        assert_eq!(seq(4, 2, &mut colours).iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 2]);
        // A MODIFY without a config resets the meter (the spec's TableEntry.meter_config).
        let reset = TableEntry { meter_config: None, ..no_action };
        write_update(&schema, &p, &update(update::Type::Modify, entity::Entity::TableEntry(reset)))
            .unwrap();
        assert_eq!(seq(4, 2, &mut colours).iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 0]);
        // Refused: PIR below CIR, a missing entry, an insert, the default entry.
        let refused = |u: Update| write_update(&schema, &p, &u).unwrap_err().code;
        let bad = v1::MeterConfig { cir: 5, cburst: 1, pir: 1, pburst: 1, eburst: 0 };
        assert_eq!(
            refused(modify(direct("I.t", vec![exact(1)], Some(bad)))),
            Code::InvalidArgument
        );
        assert_eq!(
            refused(modify(direct("I.t", vec![exact(9)], Some(config(1, 1))))),
            Code::NotFound
        );
        assert_eq!(
            refused(update(
                update::Type::Insert,
                direct("I.t", vec![exact(1)], Some(config(1, 1)))
            )),
            Code::InvalidArgument
        );
        assert_eq!(
            refused(insert(entry("I.t", vec![exact(3)], "I.mark", Some(bad)))),
            Code::InvalidArgument
        );
        let absent =
            TableEntry { table_id: table("I.t"), r#match: vec![exact(3)], ..Default::default() };
        assert!(
            read(entity::Entity::TableEntry(absent)).unwrap().is_empty(),
            "nothing left behind"
        );
    }
}

/// Parser value sets: empty at start (their cases never match), filled and emptied by a
/// `ValueSetEntry` MODIFY, read back as written; exact and `@match(ternary)` fields, a set over
/// two select keys, cases tried in order around the set's; both engines.
#[test]
fn value_sets_steer_the_parser() {
    const PVS: &str = r#"
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<16> etype; }
header tag_t { bit<8> v; }
struct hs { eth_t eth; tag_t tag; }
struct m { bit<1> paired; }
struct pair_t { bit<8> a; @match(ternary) bit<8> b; }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(2) tagged;
    value_set<pair_t>(4) pairs;
    state start {
        p.extract(h.eth);
        transition select(h.eth.etype) { 0x0800: accept; tagged: parse_tag; default: accept; }
    }
    state parse_tag {
        p.extract(h.tag);
        transition select(h.tag.v, h.eth.etype[7:0]) { pairs: paired; default: accept; }
    }
    state paired { meta.paired = 1; transition accept; }
}
control C(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    apply {
        if (meta.paired == 1) { sm.egress_spec = 4; }
        else if (h.tag.isValid()) { sm.egress_spec = 3; }
        else { sm.egress_spec = 2; }
    }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.eth); p.emit(h.tag); } }
V1Switch(P(), C(), I(), E(), C(), D()) main;
"#;
    use hotplane_p4::v1model::{Output, Replication, V1Switch};
    use std::sync::Arc;
    for engine in [Engine::Closures, Engine::Native] {
        if engine == Engine::Native && !Engine::NATIVE_BUILT {
            continue;
        }
        let ir = hotplane_p4::compile_source_with("pvs.p4", PVS, &[], &Default::default()).unwrap();
        let schema = Schema::new(p4info_of(&ir).unwrap(), &ir).unwrap();
        let qsbr = Qsbr::new();
        let objects = Objects::new(&ir, &qsbr).unwrap();
        let p = Arc::new(Pipeline::with_engine(ir, objects, engine).unwrap());
        let set_id = |name: &str| {
            let v = schema
                .p4info
                .value_sets
                .iter()
                .find(|v| v.preamble.as_ref().is_some_and(|pr| pr.name == name));
            v.unwrap_or_else(|| panic!("P4Info has value set {name}")).preamble.as_ref().unwrap().id
        };
        let (tagged, pairs) = (set_id("P.tagged"), set_id("P.pairs"));
        assert_eq!(tagged >> 24, 0x03, "value set ids carry P4Info's prefix 0x03");
        let info = schema.p4info.value_sets.iter().find(|v| v.size == 4).unwrap();
        assert_eq!(
            info.r#match.iter().map(|f| (f.id, f.name.as_str(), f.bitwidth)).collect::<Vec<_>>(),
            vec![(1, "a", 8), (2, "b", 8)]
        );
        let mut sw = V1Switch::new(Arc::clone(&p));
        let mut port = |etype: u16, tag: u8| -> u32 {
            let mut reader = qsbr.register("test");
            let mut out: Vec<Output> = Vec::new();
            let [hi, lo] = etype.to_be_bytes();
            sw.process(
                &[hi, lo, tag, 0xee],
                1,
                &Replication::default(),
                &reader.guard(),
                0,
                &mut out,
            );
            reader.quiescent();
            assert_eq!(out.len(), 1, "{engine:?}: one packet out");
            assert_eq!(out[0].data, vec![hi, lo, tag, 0xee], "{engine:?}: bytes unchanged");
            out[0].port
        };
        let exact = |id: u32, v: Vec<u8>| FieldMatch {
            field_id: id,
            field_match_type: Some(field_match::FieldMatchType::Exact(field_match::Exact {
                value: v,
            })),
        };
        let ternary = |id: u32, v: u8, m: u8| FieldMatch {
            field_id: id,
            field_match_type: Some(field_match::FieldMatchType::Ternary(field_match::Ternary {
                value: vec![v],
                mask: vec![m],
            })),
        };
        let entry = |id: u32, members: Vec<Vec<FieldMatch>>| v1::ValueSetEntry {
            value_set_id: id,
            members: members.into_iter().map(|r#match| v1::ValueSetMember { r#match }).collect(),
        };
        let update = |ty: update::Type, e: v1::ValueSetEntry| Update {
            r#type: ty as i32,
            entity: Some(Entity { entity: Some(entity::Entity::ValueSetEntry(e)) }),
        };
        let modify = |e| write_update(&schema, &p, &update(update::Type::Modify, e));
        assert_eq!(port(0x1234, 5), 2, "{engine:?}: an empty set matches nothing");
        modify(entry(tagged, vec![vec![exact(1, vec![0x12, 0x34])]])).unwrap();
        assert_eq!(port(0x1234, 5), 3, "{engine:?}: a member steers to parse_tag");
        assert_eq!(port(0x0800, 5), 2, "{engine:?}: the case before the set still wins");
        assert_eq!(port(0x1235, 5), 2);
        // (tag 5, etype's low byte 0x34 under 0xf0): a ternary field.
        modify(entry(pairs, vec![vec![exact(1, vec![5]), ternary(2, 0x30, 0xf0)]])).unwrap();
        assert_eq!(port(0x1234, 5), 4, "{engine:?}: both keys match the member");
        assert_eq!(port(0x1234, 6), 3, "{engine:?}: the first key does not");
        let read = |id: u32| -> Vec<v1::ValueSetEntry> {
            let filter = Entity { entity: Some(entity::Entity::ValueSetEntry(entry(id, vec![]))) };
            read_entity(&schema, &p, &filter)
                .unwrap()
                .into_iter()
                .map(|e| match e {
                    entity::Entity::ValueSetEntry(v) => v,
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        assert_eq!(
            read(pairs),
            vec![entry(pairs, vec![vec![exact(1, vec![5]), ternary(2, 0x30, 0xf0)]])]
        );
        assert_eq!(read(0).len(), 2, "a wildcard read lists every set");
        // Refused, changing nothing: too many members, a mask on an exact field, a value too
        // wide, an insert.
        let refused = |u: Update| write_update(&schema, &p, &u).unwrap_err().code;
        let three = vec![vec![exact(1, vec![1])], vec![exact(1, vec![2])], vec![exact(1, vec![3])]];
        assert_eq!(
            refused(update(update::Type::Modify, entry(tagged, three))),
            Code::ResourceExhausted
        );
        assert_eq!(
            refused(update(update::Type::Modify, entry(tagged, vec![vec![ternary(1, 1, 1)]]))),
            Code::InvalidArgument
        );
        assert_eq!(
            refused(update(
                update::Type::Modify,
                entry(tagged, vec![vec![exact(1, vec![1, 2, 3])]])
            )),
            Code::InvalidArgument
        );
        assert_eq!(
            refused(update(update::Type::Insert, entry(tagged, vec![]))),
            Code::InvalidArgument
        );
        assert_eq!(port(0x1234, 5), 4, "{engine:?}: refused writes changed nothing");
        modify(entry(tagged, vec![])).unwrap();
        assert_eq!(port(0x1234, 5), 2, "{engine:?}: emptied");
    }
}
