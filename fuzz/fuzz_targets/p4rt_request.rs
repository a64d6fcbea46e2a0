//! P4Runtime requests as the server receives them: any bytes, decoded as a `WriteRequest` (its
//! updates applied to a program with every kind of table and to a replication engine, then
//! everything read back), as a `ReadRequest`, as a pipeline's device config, as a packet-out (its metadata made into
//! packet_io.p4's `packet_out` header) and as a frame from the CPU port (its `packet_in` header
//! made into metadata). Digest entries configure learn.p4's digest, which then takes the input
//! as digest records and sends and acknowledges lists. Every update also goes to
//! meters_and_sets.p4 (a direct meter and a value set), its table and value set ids mapped onto
//! that program's so that the fuzzer reaches them, and to action_profiles.p4 (a profile and a
//! selector), its table, profile and action ids mapped likewise. Bad input gets a status; it
//! must never panic.
#![no_main]

use hotplane_core::Qsbr;
use hotplane_p4::exec::{Engine, Objects, Pipeline};
use hotplane_p4rt::digests::Digests;
use hotplane_p4rt::entities;
use hotplane_p4rt::packet_io::PacketIo;
use hotplane_p4rt::pre::Pre;
use hotplane_p4rt::proto::p4::v1::{
    entity, update, Entity, PacketOut, ReadRequest, TableEntry, WriteRequest,
};
use hotplane_p4rt::schema::{p4info_of, Schema};
use hotplane_tables::DigestRecord;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use std::sync::OnceLock;

const PROGRAM: &str = include_str!("../../tests/p4/tables.p4");
const PACKET_IO: &str = include_str!("../../tests/p4/packet_io.p4");
const LEARN: &str = include_str!("../../tests/p4/learn.p4");
const METERS_AND_SETS: &str = include_str!("../../tests/p4/meters_and_sets.p4");
const PROFILES: &str = include_str!("../../tests/p4/action_profiles.p4");

struct Fixture {
    qsbr: Qsbr,
    ir: hotplane_p4::ir::Program,
    schema: Schema,
    packet_io: PacketIo,
    /// learn.p4's digests by id.
    digests: std::collections::HashMap<u32, hotplane_p4::ir::DigestType>,
    /// meters_and_sets.p4, its schema, and its table and value set ids.
    metered: (hotplane_p4::ir::Program, Schema, Vec<u32>, Vec<u32>),
    /// action_profiles.p4, its schema, and its table, profile and action ids.
    profiled: (hotplane_p4::ir::Program, Schema, [Vec<u32>; 3]),
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let ir = hotplane_p4::compile_source_with("tables.p4", PROGRAM, &[], &Default::default())
            .expect("tables.p4 compiles");
        let schema = Schema::new(p4info_of(&ir).expect("its P4Info"), &ir).expect("its schema");
        let io = hotplane_p4::compile_source("packet_io.p4", PACKET_IO, &[])
            .expect("packet_io.p4 compiles");
        let learn = hotplane_p4::compile_source("learn.p4", LEARN, &[]).expect("learn.p4 compiles");
        let digests =
            hotplane_p4::p4info::digest_ids(&learn).into_iter().map(|(d, id)| (id, d)).collect();
        let m = hotplane_p4::compile_source("meters_and_sets.p4", METERS_AND_SETS, &[])
            .expect("meters_and_sets.p4 compiles");
        let m_schema = Schema::new(p4info_of(&m).expect("its P4Info"), &m).expect("its schema");
        let tables = m_schema.tables.keys().copied().collect();
        let sets = m_schema
            .p4info
            .value_sets
            .iter()
            .filter_map(|v| v.preamble.as_ref().map(|p| p.id))
            .collect();
        let a = hotplane_p4::compile_source("action_profiles.p4", PROFILES, &[])
            .expect("action_profiles.p4 compiles");
        let a_schema = Schema::new(p4info_of(&a).expect("its P4Info"), &a).expect("its schema");
        // Sorted, so that a seed's ids map onto the same objects in every run.
        let sorted = |mut ids: Vec<u32>| {
            ids.sort_unstable();
            ids
        };
        let ids = [
            sorted(a_schema.tables.keys().copied().collect()),
            sorted(a_schema.profiles.keys().copied().collect()),
            sorted(a_schema.actions.keys().copied().collect()),
        ];
        Fixture {
            qsbr: Qsbr::new(),
            metered: (m, m_schema, tables, sets),
            profiled: (a, a_schema, ids),
            ir,
            schema,
            packet_io: PacketIo::of(&io).expect("its controller headers"),
            digests,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let _ = hotplane_p4rt::device::decode(data);
    // Fresh tables each run: entries from one input must not leak into the next. Closures:
    // this target is about control input, not code generation.
    let objects = Objects::new(&f.ir, &f.qsbr).expect("tables.p4 tables");
    let p = Pipeline::with_engine(f.ir.clone(), objects, Engine::Closures).expect("builds");
    if let Ok(req) = WriteRequest::decode(data) {
        // Replication engine entries go to their own state, as the server sends them.
        let mut pre = Pre::default();
        let mut digests = Digests::default();
        for u in &req.updates {
            match u.entity.as_ref().and_then(|e| e.entity.as_ref()) {
                Some(entity::Entity::PacketReplicationEngineEntry(e)) => {
                    let op = update::Type::try_from(u.r#type).unwrap_or(update::Type::Unspecified);
                    let _ = pre.write(op, e);
                }
                Some(entity::Entity::DigestEntry(e)) => {
                    if let Ok(op) = entities::op_of(u) {
                        let _ = digests.write(&f.digests, op, e);
                    }
                }
                _ => {
                    let _ = entities::write_update(&f.schema, &p, u);
                }
            }
        }
        let _ = pre.replication();
        // The input's bytes as digest records of every digest id it names or learn.p4 has.
        let ids: Vec<u32> = f.digests.keys().copied().chain([0, u32::MAX]).collect();
        let records: Vec<DigestRecord> = data
            .chunks(32)
            .enumerate()
            .map(|(i, c)| {
                let mut words = [0u64; 4];
                for (j, b) in c.iter().enumerate() {
                    words[j / 8] |= (*b as u64) << (56 - 8 * (j % 8));
                }
                DigestRecord { id: ids[i % ids.len()], ts_ns: 0, words }
            })
            .collect();
        let t0 = std::time::Instant::now();
        digests.offer(&records, t0);
        for (i, list) in digests.due(&f.digests, t0, 0).iter().enumerate() {
            assert!(!list.data.is_empty());
            if i % 2 == 0 {
                digests.ack(list.digest_id, list.list_id);
            }
        }
        digests.offer(&records, t0);
        let _ = digests.due(&f.digests, t0 + std::time::Duration::from_secs(3600), 0);
        let _ = digests.read(&Default::default());
        let _ = pre.read(&Default::default());
        let all = Entity { entity: Some(entity::Entity::TableEntry(TableEntry::default())) };
        let _ = entities::read_entity(&f.schema, &p, &all);
        metered(f, &req);
        profiled(f, &req);
    }
    if let Ok(out) = PacketOut::decode(data) {
        if let Ok(frame) = f.packet_io.packet_out_frame(&out.metadata, &out.payload) {
            assert_eq!(frame.len(), 2 + out.payload.len(), "a 2-byte packet_out header");
        }
    }
    if let Ok(packet) = f.packet_io.packet_in(data) {
        assert_eq!(packet.payload.len() + 2, data.len());
    }
    if let Ok(req) = ReadRequest::decode(data) {
        for e in &req.entities {
            let _ = entities::read_entity(&f.schema, &p, e);
        }
    }
});

/// The write's updates against meters_and_sets.p4, ids mapped onto its table and value set,
/// then every direct meter, table entry and value set read back.
fn metered(f: &Fixture, req: &WriteRequest) {
    let (ir, schema, tables, sets) = &f.metered;
    let objects = Objects::new(ir, &f.qsbr).expect("meters_and_sets.p4 state");
    let p = Pipeline::with_engine(ir.clone(), objects, Engine::Closures).expect("builds");
    let table = |id: u32| tables[id as usize % tables.len()];
    for u in &req.updates {
        let mut u = u.clone();
        match u.entity.as_mut().and_then(|e| e.entity.as_mut()) {
            Some(entity::Entity::TableEntry(t)) => t.table_id = table(t.table_id),
            Some(entity::Entity::DirectMeterEntry(d)) => {
                if let Some(t) = d.table_entry.as_mut() {
                    t.table_id = table(t.table_id);
                }
            }
            Some(entity::Entity::ValueSetEntry(v)) => {
                v.value_set_id = sets[v.value_set_id as usize % sets.len()]
            }
            _ => continue,
        }
        let _ = entities::write_update(schema, &p, &u);
    }
    for e in [
        entity::Entity::DirectMeterEntry(Default::default()),
        entity::Entity::TableEntry(TableEntry {
            meter_config: Some(Default::default()),
            ..Default::default()
        }),
        entity::Entity::ValueSetEntry(Default::default()),
    ] {
        let _ = entities::read_entity(schema, &p, &Entity { entity: Some(e) });
    }
}

/// The write's updates against action_profiles.p4, ids mapped onto its tables, profiles and
/// actions, then every member, group and table entry read back.
fn profiled(f: &Fixture, req: &WriteRequest) {
    use hotplane_p4rt::proto::p4::v1::{table_action, Action};
    let (ir, schema, [tables, profiles, actions]) = &f.profiled;
    let objects = Objects::new(ir, &f.qsbr).expect("action_profiles.p4 state");
    let p = Pipeline::with_engine(ir.clone(), objects, Engine::Closures).expect("builds");
    let pick = |ids: &[u32], id: u32| ids[id as usize % ids.len()];
    let action = |a: &mut Option<Action>| {
        if let Some(a) = a {
            a.action_id = pick(actions, a.action_id);
        }
    };
    for u in &req.updates {
        let mut u = u.clone();
        match u.entity.as_mut().and_then(|e| e.entity.as_mut()) {
            Some(entity::Entity::TableEntry(t)) => {
                t.table_id = pick(tables, t.table_id);
                if let Some(table_action::Type::Action(a)) =
                    t.action.as_mut().and_then(|a| a.r#type.as_mut())
                {
                    a.action_id = pick(actions, a.action_id);
                }
            }
            Some(entity::Entity::ActionProfileMember(m)) => {
                m.action_profile_id = pick(profiles, m.action_profile_id);
                action(&mut m.action);
            }
            Some(entity::Entity::ActionProfileGroup(g)) => {
                g.action_profile_id = pick(profiles, g.action_profile_id)
            }
            _ => continue,
        }
        let _ = entities::write_update(schema, &p, &u);
    }
    for e in [
        entity::Entity::ActionProfileMember(Default::default()),
        entity::Entity::ActionProfileGroup(Default::default()),
        entity::Entity::TableEntry(Default::default()),
    ] {
        let _ = entities::read_entity(schema, &p, &Entity { entity: Some(e) });
    }
}
