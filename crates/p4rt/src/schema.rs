//! What a pipeline offers the control plane, by P4Runtime id: its P4Info (derived from the
//! compiled program with p4c's ids, so a controller written against p4c's output works
//! unchanged), an index of its tables, actions and counters, and the check that a P4Info a
//! client pushes describes the same program.

use crate::proto::p4::config::v1::{self as info, P4Info};
use hotplane_p4::ir;
use prost_reflect::{DescriptorPool, DynamicMessage};
use std::collections::{BTreeSet, HashMap};

/// Why a program's P4Info could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("P4Info: {0}")]
    Ids(#[from] hotplane_p4::p4info::P4InfoError),
    #[error("P4Info text: {0}")]
    Text(String),
    #[error("table {0} of the P4Info is not a table of the program (or is named twice)")]
    NoTable(String),
}

/// A match field of a table.
#[derive(Debug, Clone)]
pub struct MatchField {
    pub id: u32,
    pub name: String,
    pub bitwidth: u32,
    pub kind: info::match_field::MatchType,
}

/// A table, as P4Info describes it; `index` is its place in the program's table list.
#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub index: usize,
    /// In id order, which is the program's key order.
    pub fields: Vec<MatchField>,
    pub actions: BTreeSet<u32>,
    pub is_const: bool,
    pub has_direct_counter: bool,
    pub has_direct_meter: bool,
    /// Ternary, range or optional fields: entries need a priority.
    pub needs_priority: bool,
    /// `idle_timeout_behavior: NOTIFY_CONTROL` (`support_timeout = true`): entries may have
    /// an idle timeout.
    pub supports_timeout: bool,
    /// The action profile or selector (P4Info id) whose members and groups entries name.
    pub implementation: Option<u32>,
}

/// An action profile or selector: its name, whether it has groups, and the actions its
/// members may run (those of the tables it implements).
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub with_selector: bool,
    pub actions: BTreeSet<u32>,
}

/// An action and its parameters (id, name, bitwidth) in id order, the program's order.
#[derive(Debug, Clone)]
pub struct Action {
    pub name: String,
    pub params: Vec<(u32, String, u32)>,
}

/// The pipeline's control-plane objects by id.
#[derive(Debug, Clone)]
pub struct Schema {
    /// The program's own P4Info.
    pub p4info: P4Info,
    pub tables: HashMap<u32, Table>,
    pub actions: HashMap<u32, Action>,
    /// Action profiles and selectors by id.
    pub profiles: HashMap<u32, Profile>,
    /// Indirect counters: id -> (name, size).
    pub counters: HashMap<u32, (String, u64)>,
    /// Registers by id.
    pub registers: HashMap<u32, crate::registers::Register>,
    /// Indirect meters by id.
    pub meters: HashMap<u32, crate::registers::Meter>,
    /// The controller headers packets to and from the controller carry.
    pub packet_io: crate::packet_io::PacketIo,
    /// The program's digests by id, with the layout of their data.
    pub digests: HashMap<u32, hotplane_p4::ir::DigestType>,
}

/// The P4Info of `program`, with p4c's ids.
pub fn p4info_of(program: &ir::Program) -> Result<P4Info, SchemaError> {
    let text = hotplane_p4::p4info::text(program)?;
    parse_text(&text)
}

/// A P4Info in protobuf text format (`p4c --p4runtime-files x.p4info.txtpb`).
pub fn parse_text(text: &str) -> Result<P4Info, SchemaError> {
    dynamic_of_text(text)?.transcode_to::<P4Info>().map_err(|e| SchemaError::Text(e.to_string()))
}

/// A P4Info in text format, parsed against hotplane's own descriptors.
fn dynamic_of_text(text: &str) -> Result<DynamicMessage, SchemaError> {
    let pool = DescriptorPool::decode(crate::proto::DESCRIPTOR_SET)
        .map_err(|e| SchemaError::Text(e.to_string()))?;
    let desc = pool
        .get_message_by_name("p4.config.v1.P4Info")
        .ok_or_else(|| SchemaError::Text("no P4Info in the descriptor set".into()))?;
    DynamicMessage::parse_text_format(desc, text).map_err(|e| SchemaError::Text(e.to_string()))
}

/// A P4Info in text format as the protobuf wire format (`p4c --p4runtime-files x.p4info.binpb`).
pub fn binary_of_text(text: &str) -> Result<Vec<u8>, SchemaError> {
    Ok(prost::Message::encode_to_vec(&parse_text(text)?))
}

/// A P4Info in text format as protobuf JSON (`p4c --p4runtime-files x.p4info.json`).
pub fn json_of_text(text: &str) -> Result<String, SchemaError> {
    serde_json::to_string_pretty(&dynamic_of_text(text)?)
        .map_err(|e| SchemaError::Text(e.to_string()))
}

impl Schema {
    /// Index `p4info`, the P4Info of `program` as [`p4info_of`] derives it (never one a client
    /// pushed: sizes, field order and flags come from the program).
    pub fn new(p4info: P4Info, program: &ir::Program) -> Result<Schema, SchemaError> {
        let direct: BTreeSet<u32> =
            p4info.direct_counters.iter().map(|c| c.direct_table_id).collect();
        let metered: BTreeSet<u32> =
            p4info.direct_meters.iter().map(|c| c.direct_table_id).collect();
        let preamble = |p: &Option<info::Preamble>| p.clone().unwrap_or_default();
        let tables = p4info
            .tables
            .iter()
            .map(|t| -> Result<(u32, Table), SchemaError> {
                let p = preamble(&t.preamble);
                let fields: Vec<MatchField> = t
                    .match_fields
                    .iter()
                    .map(|f| MatchField {
                        id: f.id,
                        name: f.name.clone(),
                        bitwidth: f.bitwidth as u32,
                        kind: match f.r#match {
                            Some(info::match_field::Match::MatchType(k)) => {
                                info::match_field::MatchType::try_from(k).unwrap_or_default()
                            }
                            _ => info::match_field::MatchType::Unspecified,
                        },
                    })
                    .collect();
                use info::match_field::MatchType as M;
                let needs_priority =
                    fields.iter().any(|f| matches!(f.kind, M::Ternary | M::Range | M::Optional));
                let mut same = program.tables.iter().enumerate().filter(|(_, x)| x.name == p.name);
                let index = match (same.next(), same.next()) {
                    (Some((i, _)), None) => i,
                    _ => return Err(SchemaError::NoTable(p.name.clone())),
                };
                let table = Table {
                    name: p.name.clone(),
                    index,
                    fields,
                    actions: t.action_refs.iter().map(|a| a.id).collect(),
                    is_const: t.is_const_table,
                    has_direct_counter: direct.contains(&p.id),
                    has_direct_meter: metered.contains(&p.id),
                    needs_priority,
                    supports_timeout: t.idle_timeout_behavior
                        == info::table::IdleTimeoutBehavior::NotifyControl as i32,
                    implementation: (t.implementation_id != 0).then_some(t.implementation_id),
                };
                Ok((p.id, table))
            })
            .collect::<Result<HashMap<u32, Table>, _>>()?;
        let actions = p4info
            .actions
            .iter()
            .map(|a| {
                let p = preamble(&a.preamble);
                let params =
                    a.params.iter().map(|x| (x.id, x.name.clone(), x.bitwidth as u32)).collect();
                (p.id, Action { name: p.name, params })
            })
            .collect();
        let counters = p4info
            .counters
            .iter()
            .map(|c| {
                let p = preamble(&c.preamble);
                (p.id, (p.name, c.size as u64))
            })
            .collect();
        let registers = p4info
            .registers
            .iter()
            .map(|r| {
                use info::{p4_bitstring_like_type_spec as bs, p4_data_type_spec as ts};
                let p = preamble(&r.preamble);
                let bits = match r.type_spec.as_ref().and_then(|t| t.type_spec.as_ref()) {
                    Some(ts::TypeSpec::Bitstring(b)) => match &b.type_spec {
                        Some(bs::TypeSpec::Bit(w)) => w.bitwidth as u32,
                        Some(bs::TypeSpec::Int(w)) => w.bitwidth as u32,
                        _ => 0,
                    },
                    _ => 0,
                };
                let r = crate::registers::Register { name: p.name, size: r.size as u64, bits };
                (p.id, r)
            })
            .collect();
        let meters = p4info
            .meters
            .iter()
            .map(|m| {
                let p = preamble(&m.preamble);
                (p.id, crate::registers::Meter { name: p.name, size: m.size as u64 })
            })
            .collect();
        let profiles = p4info
            .action_profiles
            .iter()
            .map(|a| {
                let p = preamble(&a.preamble);
                let actions = a
                    .table_ids
                    .first()
                    .and_then(|t| tables.get(t))
                    .map(|t: &Table| t.actions.clone())
                    .unwrap_or_default();
                (p.id, Profile { name: p.name, with_selector: a.with_selector, actions })
            })
            .collect();
        let packet_io = crate::packet_io::PacketIo::of(program)?;
        let digests =
            hotplane_p4::p4info::digest_ids(program).into_iter().map(|(ty, id)| (id, ty)).collect();
        Ok(Schema {
            p4info,
            tables,
            actions,
            profiles,
            counters,
            registers,
            meters,
            packet_io,
            digests,
        })
    }

    /// The table with `id`.
    pub fn table(&self, id: u32) -> Option<&Table> {
        self.tables.get(&id)
    }
}

/// How `pushed` differs from `ours` in what the data plane relies on (ids, names, widths,
/// match kinds, the actions a table offers), as one line per difference; empty when they
/// agree. Annotations, aliases and documentation are free to differ.
pub fn differences(pushed: &P4Info, ours: &P4Info) -> Vec<String> {
    let pushed = facts(pushed);
    let ours = facts(ours);
    let mut out: Vec<String> = pushed
        .difference(&ours)
        .map(|f| format!("pushed P4Info has {f}, the program not"))
        .collect();
    out.extend(ours.difference(&pushed).map(|f| format!("the program has {f}, the P4Info not")));
    out
}

fn facts(p: &P4Info) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let pre = |p: &Option<info::Preamble>| p.clone().unwrap_or_default();
    for t in &p.tables {
        let tp = pre(&t.preamble);
        out.insert(format!("table {} ({:#x})", tp.name, tp.id));
        for f in &t.match_fields {
            let kind = match &f.r#match {
                Some(info::match_field::Match::MatchType(k)) => {
                    info::match_field::MatchType::try_from(*k)
                        .map_or("?".into(), |k| k.as_str_name().to_string())
                }
                Some(info::match_field::Match::OtherMatchType(o)) => o.clone(),
                None => "?".into(),
            };
            out.insert(format!(
                "table {} match field {} {} ({} bits, {kind})",
                tp.name, f.id, f.name, f.bitwidth
            ));
        }
        for a in &t.action_refs {
            out.insert(format!("table {} action {:#x}", tp.name, a.id));
        }
    }
    for a in &p.actions {
        let ap = pre(&a.preamble);
        out.insert(format!("action {} ({:#x})", ap.name, ap.id));
        for x in &a.params {
            out.insert(format!(
                "action {} parameter {} {} ({} bits)",
                ap.name, x.id, x.name, x.bitwidth
            ));
        }
    }
    let mut named = |what: &str, p: &Option<info::Preamble>| {
        let p = pre(p);
        out.insert(format!("{what} {} ({:#x})", p.name, p.id));
    };
    p.counters.iter().for_each(|c| named("counter", &c.preamble));
    p.direct_counters.iter().for_each(|c| named("direct counter", &c.preamble));
    p.meters.iter().for_each(|c| named("meter", &c.preamble));
    p.direct_meters.iter().for_each(|c| named("direct meter", &c.preamble));
    p.registers.iter().for_each(|c| named("register", &c.preamble));
    p.action_profiles.iter().for_each(|c| named("action profile", &c.preamble));
    p.digests.iter().for_each(|c| named("digest", &c.preamble));
    out
}
