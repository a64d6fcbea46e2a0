//! P4Runtime requests as the server receives them: any bytes, decoded as a `WriteRequest` (its
//! updates applied to a program with every kind of table and to a replication engine, then
//! everything read back), as a `ReadRequest`, as a pipeline's device config, as a packet-out (its metadata made into
//! packet_io.p4's `packet_out` header) and as a frame from the CPU port (its `packet_in` header
//! made into metadata). Digest entries configure learn.p4's digest, which then takes the input
//! as digest records and sends and acknowledges lists. Bad input gets a status; it must never
//! panic.
#![no_main]

use hotplane_core::Qsbr;
use hotplane_tables::DigestRecord;
use hotplane_p4::exec::{Engine, Objects, Pipeline};
use hotplane_p4rt::digests::Digests;
use hotplane_p4rt::entities;
use hotplane_p4rt::packet_io::PacketIo;
use hotplane_p4rt::pre::Pre;
use hotplane_p4rt::proto::p4::v1::{
    entity, update, Entity, PacketOut, ReadRequest, TableEntry, WriteRequest,
};
use hotplane_p4rt::schema::{p4info_of, Schema};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use std::sync::OnceLock;

const PROGRAM: &str = include_str!("../../tests/p4/tables.p4");
const PACKET_IO: &str = include_str!("../../tests/p4/packet_io.p4");
const LEARN: &str = include_str!("../../tests/p4/learn.p4");

struct Fixture {
    qsbr: Qsbr,
    ir: hotplane_p4::ir::Program,
    schema: Schema,
    packet_io: PacketIo,
    /// learn.p4's digests by id.
    digests: std::collections::HashMap<u32, hotplane_p4::ir::DigestType>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let ir = hotplane_p4::compile_source_with("tables.p4", PROGRAM, &[], &Default::default())
            .expect("tables.p4 compiles");
        let schema = Schema::new(p4info_of(&ir).expect("its P4Info"), &ir).expect("its schema");
        let io = hotplane_p4::compile_source("packet_io.p4", PACKET_IO, &[])
            .expect("packet_io.p4 compiles");
        let learn =
            hotplane_p4::compile_source("learn.p4", LEARN, &[]).expect("learn.p4 compiles");
        let digests =
            hotplane_p4::p4info::digest_ids(&learn).into_iter().map(|(d, id)| (id, d)).collect();
        Fixture {
            qsbr: Qsbr::new(),
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
