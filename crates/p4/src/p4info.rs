//! P4Info: the control-plane description of a program (tables, actions, counters, meters,
//! registers) in protobuf text format, with the ids p4c assigns, so that a P4Runtime
//! controller written against p4c's output works unchanged.
//!
//! Ids follow the P4Runtime convention p4c implements: an 8-bit resource prefix, then the low 24
//! bits of the Jenkins one-at-a-time hash of the fully qualified control-plane name. Within a
//! resource type names are hashed in sorted order and a taken id is resolved by trying the next
//! hash value, so ids are deterministic and match p4c's even when two names collide. An `@id`
//! annotation fixes an id (its prefix is added when missing); those are reserved first. Aliases
//! are the shortest dot-separated suffix that no other symbol shares.

use crate::ir::{self, InstanceKind, MatchKind, Program};
use crate::lower::annotation_text;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

/// P4Runtime resource prefixes (`p4info.proto`, `P4Ids.Prefix`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Resource {
    Action = 0x01,
    Table = 0x02,
    ValueSet = 0x03,
    ControllerHeader = 0x04,
    ActionProfile = 0x11,
    Counter = 0x12,
    DirectCounter = 0x13,
    Meter = 0x14,
    DirectMeter = 0x15,
    Register = 0x16,
    Digest = 0x17,
}

impl Resource {
    /// The P4Info resource of an extern instance; hotplane's extern slots are none.
    fn of(kind: &InstanceKind) -> Option<Resource> {
        Some(match kind {
            InstanceKind::Register { .. } => Resource::Register,
            InstanceKind::Counter { .. } => Resource::Counter,
            InstanceKind::Meter { .. } => Resource::Meter,
            InstanceKind::DirectCounter { .. } => Resource::DirectCounter,
            InstanceKind::DirectMeter { .. } => Resource::DirectMeter,
            InstanceKind::ValueSet { .. } => Resource::ValueSet,
            InstanceKind::ActionProfile { .. } => Resource::ActionProfile,
            InstanceKind::ExternSlot { .. } => return None,
        })
    }
}

/// A header the program exchanges with its controller through the CPU port
/// (`@controller_header("packet_in")`): P4Info's `controller_packet_metadata`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerHeader {
    /// The annotation's name (`packet_in`, `packet_out`), which P4Runtime uses.
    pub name: String,
    /// The header type's name.
    pub header: String,
    /// Fields in wire order with their widths.
    pub fields: Vec<(String, u32)>,
    /// Each field's metadata id, as p4c gives them: its `@id`, else the lowest id from 1 up
    /// that no `@id` of the header took.
    pub ids: Vec<u32>,
}

impl ControllerHeader {
    /// The index of the field whose metadata id is `id`.
    pub fn field_of(&self, id: u32) -> Option<usize> {
        self.ids.iter().position(|&x| x == id)
    }

    /// Its length on the wire, in bits.
    pub fn bits(&self) -> u32 {
        self.fields.iter().map(|f| f.1).sum()
    }
}

/// The program's controller headers, in declaration order. A field's `@id` must be a positive
/// 32-bit number that no other field of the header has.
pub fn controller_headers(prog: &Program) -> Result<Vec<ControllerHeader>, P4InfoError> {
    use crate::types::CompositeKind;
    let types = &prog.types;
    types
        .composites
        .iter()
        .filter(|c| c.kind == CompositeKind::Header)
        .filter_map(|c| {
            let a = c.annotations.iter().find(|a| a.name.name == "controller_header")?;
            let name = match a.body.first().map(|t| &t.tok) {
                Some(crate::lexer::Tok::Str(s)) => s.clone(),
                _ => return None,
            };
            let fields = c
                .fields
                .iter()
                .map(|f| (f.name.clone(), f.ty.scalar_width(types).unwrap_or(0)))
                .collect();
            let fixed = match field_ids(c) {
                Ok(f) => f,
                Err(e) => return Some(Err(e)),
            };
            let mut next = 1;
            let ids = fixed
                .iter()
                .map(|f| {
                    f.unwrap_or_else(|| {
                        while fixed.contains(&Some(next)) {
                            next += 1;
                        }
                        next += 1;
                        next - 1
                    })
                })
                .collect();
            Some(Ok(ControllerHeader { name, header: c.name.clone(), fields, ids }))
        })
        .collect()
}

/// The `@id`s of a controller header's fields (`None` where there is none), checked.
fn field_ids(c: &crate::types::Composite) -> Result<Vec<Option<u32>>, P4InfoError> {
    let mut seen = BTreeSet::new();
    c.fields
        .iter()
        .map(|f| {
            let id = id_annotation(&f.annotations)?;
            match id {
                Some(0) => Err(P4InfoError::BadIdAnnotation),
                Some(id) if !seen.insert(id) => Err(P4InfoError::DuplicateId { id }),
                _ => Ok(id),
            }
        })
        .collect()
}

/// The program's digests with their P4Info ids. A digest's id depends on the names of the
/// program's digests only (ids are assigned within a resource type).
pub fn digest_ids(prog: &Program) -> Vec<(ir::DigestType, u32)> {
    let digests = prog.digests();
    let symbols: Vec<_> =
        digests.iter().map(|d| (Resource::Digest, d.name.clone(), None)).collect();
    // Without fixed ids, assignment cannot fail short of 2^24 digests.
    let ids = assign_ids(&symbols).unwrap_or_default();
    digests
        .into_iter()
        .map(|d| {
            let id = ids.get(&(Resource::Digest, d.name.clone())).copied().unwrap_or(0);
            (d, id)
        })
        .collect()
}

/// The Jenkins one-at-a-time hash of `bytes`.
pub fn one_at_a_time(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &b in bytes {
        h = h.wrapping_add(b as u32);
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

/// Why ids could not be assigned to a program's tables, actions and extern instances.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum P4InfoError {
    #[error("{name}: @id {id:#x} has the wrong 8-bit prefix for a {resource:?}")]
    WrongPrefix { name: String, id: u32, resource: Resource },
    #[error("@id {id:#x} is assigned to more than one declaration")]
    DuplicateId { id: u32 },
    #[error("no id is left for {name}")]
    NoIdLeft { name: String },
    #[error("@id takes an unsigned 32-bit number")]
    BadIdAnnotation,
}

/// Assign ids to `(resource, name, @id)` symbols as p4c does.
pub fn assign_ids(
    symbols: &[(Resource, String, Option<u32>)],
) -> Result<HashMap<(Resource, String), u32>, P4InfoError> {
    let mut taken = BTreeSet::new();
    let mut ids = HashMap::new();
    for (res, name, fixed) in symbols {
        let Some(id) = fixed else { continue };
        let prefix = (*res as u32) << 24;
        if id & 0xff00_0000 != 0 && id & 0xff00_0000 != prefix {
            return Err(P4InfoError::WrongPrefix { name: name.clone(), id: *id, resource: *res });
        }
        let id = id | prefix;
        if !taken.insert(id) {
            return Err(P4InfoError::DuplicateId { id });
        }
        ids.insert((*res, name.clone()), id);
    }
    let mut by_type: BTreeMap<Resource, BTreeSet<&str>> = BTreeMap::new();
    for (res, name, fixed) in symbols {
        if fixed.is_none() {
            by_type.entry(*res).or_default().insert(name);
        }
    }
    for (res, names) in by_type {
        let prefix = (res as u32) << 24;
        for name in names {
            let start = one_at_a_time(name.as_bytes());
            let mut h = start;
            let id = loop {
                let id = prefix | (h & 0xff_ffff);
                if !taken.contains(&id) {
                    break id;
                }
                h = h.wrapping_add(1);
                if h == start {
                    return Err(P4InfoError::NoIdLeft { name: name.to_string() });
                }
            };
            taken.insert(id);
            ids.insert((res, name.to_string()), id);
        }
    }
    Ok(ids)
}

/// The shortest dot-separated suffix of each name that no other name ends with.
fn aliases<'a>(names: impl Iterator<Item = &'a str>) -> HashMap<String, String> {
    let names: BTreeSet<&str> = names.collect();
    let parts: Vec<Vec<&str>> = names.iter().map(|n| n.split('.').collect()).collect();
    let mut out = HashMap::new();
    for (name, p) in names.iter().zip(&parts) {
        let mut k = 1;
        while k < p.len() {
            let suffix = &p[p.len() - k..];
            let sharing = parts.iter().filter(|q| q.len() >= k && &q[q.len() - k..] == suffix);
            if sharing.count() < 2 {
                break;
            }
            k += 1;
        }
        out.insert(name.to_string(), p[p.len() - k..].join("."));
    }
    out
}

/// Protobuf text-format string literal.
fn quoted(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// Annotations a preamble lists: everything but those P4Info represents otherwise.
fn listed(annotations: &[crate::ast::Annotation]) -> Vec<String> {
    annotations
        .iter()
        .filter(|a| {
            !matches!(
                a.name.name.as_str(),
                "name" | "id" | "brief" | "description" | "hidden" | "defaultonly" | "tableonly"
            )
        })
        .map(|a| match a.body.is_empty() {
            true => format!("@{}", a.name.name),
            false => format!("@{}({})", a.name.name, annotation_text(&a.body)),
        })
        .collect()
}

fn id_annotation(annotations: &[crate::ast::Annotation]) -> Result<Option<u32>, P4InfoError> {
    let Some(a) = annotations.iter().find(|a| a.name.name == "id") else { return Ok(None) };
    match a.body.first().map(|t| &t.tok) {
        Some(crate::lexer::Tok::Int { value, .. }) if *value <= u32::MAX as u128 => {
            Ok(Some(*value as u32))
        }
        _ => Err(P4InfoError::BadIdAnnotation),
    }
}

/// Indented text-format writer.
struct Out {
    text: String,
    depth: usize,
}

impl Out {
    fn open(&mut self, name: &str) {
        let _ = writeln!(self.text, "{:w$}{name} {{", "", w = self.depth * 2);
        self.depth += 1;
    }
    fn close(&mut self) {
        self.depth -= 1;
        let _ = writeln!(self.text, "{:w$}}}", "", w = self.depth * 2);
    }
    fn field(&mut self, name: &str, value: impl std::fmt::Display) {
        let _ = writeln!(self.text, "{:w$}{name}: {value}", "", w = self.depth * 2);
    }
    /// A digest member's `P4DataTypeSpec` body: `bool`, else a bit string of its width.
    fn member_type(&mut self, m: &ir::DigestMember) {
        if m.is_bool {
            self.open("bool");
        } else {
            self.open("bitstring");
            self.open("bit");
            self.field("bitwidth", m.width);
            self.close();
        }
        self.close();
    }
    fn preamble(&mut self, id: u32, name: &str, alias: &str, annotations: &[String]) {
        self.open("preamble");
        self.field("id", id);
        self.field("name", quoted(name));
        self.field("alias", quoted(alias));
        for a in annotations {
            self.field("annotations", quoted(a));
        }
        self.close();
    }
}

/// The P4Info of `prog` in protobuf text format (`p4info.txt`, as `p4c --p4runtime-files`
/// writes it for v1model).
pub fn text(prog: &Program) -> Result<String, P4InfoError> {
    let mut symbols = Vec::new();
    for t in &prog.tables {
        symbols.push((Resource::Table, t.name.clone(), id_annotation(&t.annotations)?));
    }
    for a in &prog.actions {
        symbols.push((Resource::Action, a.name.clone(), id_annotation(&a.annotations)?));
    }
    for i in &prog.instances {
        if let Some(res) = Resource::of(&i.kind) {
            symbols.push((res, i.name.clone(), id_annotation(&i.annotations)?));
        }
    }
    let controller = controller_headers(prog)?;
    for h in &controller {
        let decl = prog.types.composites.iter().find(|c| c.name == h.header);
        let fixed = match decl {
            Some(c) => id_annotation(&c.annotations)?,
            None => None,
        };
        // p4c hashes the header type's name (`packet_in_t`), not the annotation's.
        symbols.push((Resource::ControllerHeader, h.header.clone(), fixed));
    }
    let ids = assign_ids(&symbols)?;
    let alias =
        aliases(symbols.iter().filter(|s| s.0 != Resource::ControllerHeader).map(|s| s.1.as_str()));
    let id = |res: Resource, name: &str| ids.get(&(res, name.to_string())).copied().unwrap_or(0);
    let alias_of = |name: &str| alias.get(name).cloned().unwrap_or_else(|| name.to_string());
    // Which table each direct counter or meter belongs to.
    let mut direct_table: HashMap<&str, &str> = HashMap::new();
    for t in &prog.tables {
        for d in [&t.direct_counter, &t.direct_meter].into_iter().flatten() {
            direct_table.insert(d, &t.name);
        }
    }
    let instance_res = |name: &str| {
        prog.instances.iter().find(|i| i.name == name).and_then(|i| Resource::of(&i.kind))
    };

    let mut out = Out { text: String::new(), depth: 0 };
    out.open("pkg_info");
    out.field("arch", quoted("v1model"));
    out.close();

    let mut tables: Vec<&ir::Table> = prog.tables.iter().collect();
    tables.sort_by_key(|t| t.order);
    for t in tables {
        out.open("tables");
        out.preamble(
            id(Resource::Table, &t.name),
            &t.name,
            &alias_of(&t.name),
            &listed(&t.annotations),
        );
        for (i, k) in t.keys.iter().enumerate() {
            out.open("match_fields");
            out.field("id", i + 1);
            out.field("name", quoted(&k.name));
            out.field("bitwidth", k.width);
            let kind = match k.kind {
                MatchKind::Exact => "EXACT",
                MatchKind::Lpm => "LPM",
                MatchKind::Ternary => "TERNARY",
                MatchKind::Range => "RANGE",
                MatchKind::Optional => "OPTIONAL",
            };
            out.field("match_type", kind);
            out.close();
        }
        for (i, &a) in t.actions.iter().enumerate() {
            out.open("action_refs");
            out.field("id", id(Resource::Action, &prog.actions[a as usize].name));
            // Field-number order: id (1), annotations (2), scope (3).
            if t.default_only.get(i) == Some(&true) {
                out.field("annotations", quoted("@defaultonly"));
                out.field("scope", "DEFAULT_ONLY");
            } else if t.table_only.get(i) == Some(&true) {
                out.field("annotations", quoted("@tableonly"));
                out.field("scope", "TABLE_ONLY");
            }
            out.close();
        }
        if t.default_is_const {
            let name = &prog.actions[t.default_action as usize].name;
            out.field("const_default_action_id", id(Resource::Action, name));
        }
        if let Some(i) = t.implementation {
            out.field(
                "implementation_id",
                id(Resource::ActionProfile, &prog.instances[i as usize].name),
            );
        }
        for d in [&t.direct_counter, &t.direct_meter].into_iter().flatten() {
            if let Some(res) = instance_res(d) {
                out.field("direct_resource_ids", id(res, d));
            }
        }
        out.field("size", if t.size == 0 { crate::exec::table::DEFAULT_SIZE } else { t.size });
        if t.support_timeout {
            out.field("idle_timeout_behavior", "NOTIFY_CONTROL");
        }
        if t.entries_are_const {
            out.field("is_const_table", true);
        }
        out.close();
    }

    let mut actions: Vec<&ir::Action> = prog.actions.iter().collect();
    actions.sort_by_key(|a| a.order);
    for a in actions {
        out.open("actions");
        out.preamble(
            id(Resource::Action, &a.name),
            &a.name,
            &alias_of(&a.name),
            &listed(&a.annotations),
        );
        for (i, p) in a.params.iter().filter(|p| p.directionless).enumerate() {
            out.open("params");
            out.field("id", i + 1);
            out.field("name", quoted(&p.name));
            out.field("bitwidth", p.width);
            out.close();
        }
        out.close();
    }

    let mut instances: Vec<&ir::Instance> = prog.instances.iter().collect();
    instances.sort_by_key(|i| i.order);
    // Field 4, between actions and counters.
    for i in &instances {
        let InstanceKind::ActionProfile { size, selector, max_group_size, tables } = &i.kind else {
            continue;
        };
        out.open("action_profiles");
        let the_id = id(Resource::ActionProfile, &i.name);
        out.preamble(the_id, &i.name, &alias_of(&i.name), &listed(&i.annotations));
        for &t in tables {
            out.field("table_ids", id(Resource::Table, &prog.tables[t as usize].name));
        }
        if selector.is_some() {
            out.field("with_selector", true);
        }
        out.field("size", size);
        if selector.is_some() {
            out.field("max_group_size", max_group_size);
        }
        out.close();
    }
    let counter_unit = |packets: bool, bytes: bool| match (packets, bytes) {
        (true, true) => "BOTH",
        (false, true) => "BYTES",
        _ => "PACKETS",
    };
    let meter_unit = |bytes: bool| if bytes { "BYTES" } else { "PACKETS" };
    // Text format lists each repeated field together, in field-number order.
    let sections = [
        (Resource::Counter, "counters"),
        (Resource::DirectCounter, "direct_counters"),
        (Resource::Meter, "meters"),
        (Resource::DirectMeter, "direct_meters"),
        (Resource::Register, "registers"),
    ];
    for (res, section) in sections {
        // Field 9, between direct meters (8) and registers (11).
        if res == Resource::Register {
            for h in &controller {
                let decl = prog.types.composites.iter().find(|c| c.name == h.header);
                let annotations = decl.map(|c| listed(&c.annotations)).unwrap_or_default();
                out.open("controller_packet_metadata");
                let the_id = id(Resource::ControllerHeader, &h.header);
                out.preamble(the_id, &h.name, &h.name, &annotations);
                for ((name, bits), id) in h.fields.iter().zip(&h.ids) {
                    out.open("metadata");
                    out.field("id", id);
                    out.field("name", quoted(name));
                    out.field("bitwidth", bits);
                    out.close();
                }
                out.close();
            }
            // Field 10.
            for i in &instances {
                let InstanceKind::ValueSet { size, fields } = &i.kind else { continue };
                out.open("value_sets");
                let the_id = id(Resource::ValueSet, &i.name);
                out.preamble(the_id, &i.name, &alias_of(&i.name), &listed(&i.annotations));
                for (n, f) in fields.iter().enumerate() {
                    out.open("match");
                    out.field("id", n + 1);
                    if !f.name.is_empty() {
                        out.field("name", quoted(&f.name));
                    }
                    out.field("bitwidth", f.width);
                    out.field("match_type", if f.ternary { "TERNARY" } else { "EXACT" });
                    out.close();
                }
                out.field("size", size);
                out.close();
            }
        }
        for i in instances.iter().filter(|i| Resource::of(&i.kind) == Some(res)) {
            let the_id = id(res, &i.name);
            out.open(section);
            out.preamble(the_id, &i.name, &alias_of(&i.name), &listed(&i.annotations));
            match i.kind {
                InstanceKind::Counter { size, packets, bytes } => {
                    out.open("spec");
                    out.field("unit", counter_unit(packets, bytes));
                    out.close();
                    out.field("size", size);
                }
                InstanceKind::DirectCounter { packets, bytes } => {
                    out.open("spec");
                    out.field("unit", counter_unit(packets, bytes));
                    out.close();
                    let table = direct_table.get(i.name.as_str()).copied().unwrap_or_default();
                    out.field("direct_table_id", id(Resource::Table, table));
                }
                InstanceKind::Meter { size, bytes } => {
                    out.open("spec");
                    out.field("unit", meter_unit(bytes));
                    out.close();
                    out.field("size", size);
                }
                InstanceKind::DirectMeter { bytes } => {
                    out.open("spec");
                    out.field("unit", meter_unit(bytes));
                    out.close();
                    let table = direct_table.get(i.name.as_str()).copied().unwrap_or_default();
                    out.field("direct_table_id", id(Resource::Table, table));
                }
                // Listed with field 10 above.
                InstanceKind::ExternSlot { .. }
                | InstanceKind::ValueSet { .. }
                | InstanceKind::ActionProfile { .. } => {}
                InstanceKind::Register { size, width } => {
                    out.open("type_spec");
                    out.open("bitstring");
                    out.open("bit");
                    out.field("bitwidth", width);
                    out.close();
                    out.close();
                    out.close();
                    out.field("size", size);
                }
            }
            out.close();
        }
    }
    // Field 12, after registers.
    let digests = digest_ids(prog);
    for (d, id) in &digests {
        out.open("digests");
        out.preamble(*id, &d.name, &d.name, &[]);
        out.open("type_spec");
        if d.is_struct {
            out.open("struct");
            out.field("name", quoted(&d.name));
        } else {
            out.open("tuple");
            for m in &d.members {
                out.open("members");
                out.member_type(m);
                out.close();
            }
        }
        out.close();
        out.close();
        out.close();
    }
    out.open("type_info");
    for (d, _) in digests.iter().filter(|(d, _)| d.is_struct) {
        out.open("structs");
        out.field("key", quoted(&d.name));
        out.open("value");
        for m in &d.members {
            out.open("members");
            out.field("name", quoted(&m.name));
            out.open("type_spec");
            out.member_type(m);
            out.close();
            out.close();
        }
        out.close();
        out.close();
    }
    out.close();
    Ok(out.text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colliding_names_probe_upwards_in_sorted_order() {
        // Two names with the same low 24 bits: the one sorting first keeps its hash.
        let h = |s: &str| one_at_a_time(s.as_bytes()) & 0xff_ffff;
        let mut seen: HashMap<u32, String> = HashMap::new();
        let (a, b) = (0u32..)
            .map(|i| format!("t{i}"))
            .find_map(|n| seen.insert(h(&n), n.clone()).map(|prev| (prev, n)))
            .expect("a 24-bit collision");
        let (first, second) = if a < b { (a, b) } else { (b, a) };
        let symbols =
            [(Resource::Table, second.clone(), None), (Resource::Table, first.clone(), None)];
        let ids = assign_ids(&symbols).unwrap();
        let base = (2 << 24) | h(&first);
        assert_eq!(ids[&(Resource::Table, second)], (2 << 24) | ((h(&first) + 1) & 0xff_ffff));
        assert_eq!(ids[&(Resource::Table, first)], base);
    }

    #[test]
    fn fixed_ids_take_their_prefix_and_are_reserved_first() {
        let hashed = (1 << 24) | (one_at_a_time(b"a") & 0xff_ffff);
        let symbols = [
            (Resource::Action, "a".to_string(), None),
            (Resource::Action, "b".to_string(), Some(hashed & 0xff_ffff)),
        ];
        let ids = assign_ids(&symbols).unwrap();
        assert_eq!(ids[&(Resource::Action, "b".into())], hashed, "prefix added");
        assert_eq!(ids[&(Resource::Action, "a".into())], hashed + 1, "a probes past b's @id");
        let wrong = [(Resource::Table, "t".to_string(), Some(0x0100_0001))];
        assert!(assign_ids(&wrong).unwrap_err().to_string().contains("wrong 8-bit prefix"));
    }

    #[test]
    fn aliases_are_shortest_unique_suffixes() {
        let a = aliases(["I.a.c", "E.b.c", "I.drop", "NoAction"].into_iter());
        assert_eq!(a["I.a.c"], "a.c");
        assert_eq!(a["E.b.c"], "b.c");
        assert_eq!(a["I.drop"], "drop");
        assert_eq!(a["NoAction"], "NoAction");
    }
}
