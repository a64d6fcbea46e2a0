//! P4Runtime entities against a running pipeline: table entries (every match kind, priorities,
//! default entries, direct counters) and indirect counters, written and read with the spec's
//! validity rules and status codes.

use crate::bytes::{self, BytesError};
use crate::proto::google::rpc::Code;
use crate::proto::p4::config::v1::match_field::MatchType;
use crate::proto::p4::v1::{
    action, entity, field_match, table_action, update, Action, CounterData, CounterEntry,
    DirectCounterEntry, DirectMeterEntry, Entity, FieldMatch, Index, TableAction, TableEntry,
    Update,
};
use crate::registers::{config_of, rates_of};
use crate::schema::{Schema, Table};
use hotplane_p4::exec::{EntryError, InstanceRt, Pipeline};
use hotplane_p4::exec::{P4Entry, ProfileRef};
use hotplane_p4::ir::KeyMatch;
use hotplane_tables::{EntryStats, TableError};

/// A refused entity: the status code and a message for `p4.v1.Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub code: Code,
    pub message: String,
}

impl Refused {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Refused { code, message: message.into() }
    }
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Refused::new(Code::InvalidArgument, message)
    }
}

/// The status code a table's refusal maps to.
pub(crate) fn entry_error(e: EntryError) -> Refused {
    let code = match &e {
        EntryError::Store { source, .. } | EntryError::Table(source) => match source {
            TableError::Exists => Code::AlreadyExists,
            TableError::NotFound => Code::NotFound,
            TableError::Full { .. } | TableError::Alloc(_) => Code::ResourceExhausted,
            _ => Code::InvalidArgument,
        },
        EntryError::ConstEntries { .. }
        | EntryError::ConstEntriesChanged { .. }
        | EntryError::ConstDefault { .. } => Code::PermissionDenied,
        EntryError::InTable { source, .. } => return entry_error((**source).clone()),
        EntryError::Profile(p) => crate::profiles::code_of(p),
        _ => Code::InvalidArgument,
    };
    Refused::new(code, e.to_string())
}

fn bytes_error(what: &str, e: BytesError) -> Refused {
    let code = match e {
        BytesError::Unsupported { .. } => Code::Unimplemented,
        _ => Code::InvalidArgument,
    };
    Refused::new(code, format!("{what}: {e}"))
}

/// The kinds of table write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Insert,
    Modify,
    Delete,
}

/// The table of `entry`, by id.
fn table_of<'s>(schema: &'s Schema, entry: &TableEntry) -> Result<&'s Table, Refused> {
    schema.table(entry.table_id).ok_or_else(|| {
        Refused::new(Code::NotFound, format!("no table with id {:#x}", entry.table_id))
    })
}

/// The per-field matches of `entry`'s key in the table's key order; omitted fields are
/// "don't care" (an exact field cannot be omitted).
fn keys(t: &Table, entry: &TableEntry) -> Result<Vec<KeyMatch>, Refused> {
    let mut out = Vec::with_capacity(t.fields.len());
    for f in &entry.r#match {
        if !t.fields.iter().any(|x| x.id == f.field_id) {
            return Err(Refused::invalid(format!(
                "table {} has no match field {}",
                t.name, f.field_id
            )));
        }
    }
    for (i, f) in entry.r#match.iter().enumerate() {
        if entry.r#match[..i].iter().any(|g| g.field_id == f.field_id) {
            return Err(Refused::invalid(format!("match field {} given twice", f.field_id)));
        }
    }
    for field in &t.fields {
        let given = entry.r#match.iter().find(|m| m.field_id == field.id);
        let w = field.bitwidth;
        let full = if w >= 128 { u128::MAX } else { (1u128 << w) - 1 };
        let val = |b: &[u8]| bytes::value(b, w).map_err(|e| bytes_error(&field.name, e));
        let km = match (given.and_then(|g| g.field_match_type.as_ref()), field.kind) {
            (None, MatchType::Exact) => {
                return Err(Refused::invalid(format!(
                    "exact match field {} is missing",
                    field.name
                )))
            }
            (None, MatchType::Lpm) => KeyMatch::Prefix { value: 0, len: 0 },
            (None, MatchType::Range) => KeyMatch::Range { lo: 0, hi: full },
            (None, _) => KeyMatch::Mask { value: 0, mask: 0 },
            (Some(field_match::FieldMatchType::Exact(e)), MatchType::Exact) => {
                KeyMatch::Mask { value: val(&e.value)?, mask: full }
            }
            (Some(field_match::FieldMatchType::Lpm(l)), MatchType::Lpm) => {
                let value = val(&l.value)?;
                if l.prefix_len <= 0 || l.prefix_len as u32 > w {
                    return Err(Refused::invalid(format!(
                        "{}: prefix length {} (a zero length is written by omitting the field)",
                        field.name, l.prefix_len
                    )));
                }
                let len = l.prefix_len as u32;
                let host = full.checked_shr(len).unwrap_or(0);
                if value & host != 0 {
                    return Err(Refused::invalid(format!(
                        "{}: bits beyond the /{len} prefix are set",
                        field.name
                    )));
                }
                KeyMatch::Prefix { value, len }
            }
            (Some(field_match::FieldMatchType::Ternary(t)), MatchType::Ternary) => {
                let (value, mask) = (val(&t.value)?, val(&t.mask)?);
                if mask == 0 {
                    return Err(Refused::invalid(format!(
                        "{}: a zero mask is written by omitting the field",
                        field.name
                    )));
                }
                if value & !mask != 0 {
                    return Err(Refused::invalid(format!(
                        "{}: value bits outside the mask are set",
                        field.name
                    )));
                }
                KeyMatch::Mask { value, mask }
            }
            (Some(field_match::FieldMatchType::Range(r)), MatchType::Range) => {
                let (lo, hi) = (val(&r.low)?, val(&r.high)?);
                if lo > hi {
                    return Err(Refused::invalid(format!("{}: low is above high", field.name)));
                }
                if lo == 0 && hi == full {
                    return Err(Refused::invalid(format!(
                        "{}: the full range is written by omitting the field",
                        field.name
                    )));
                }
                KeyMatch::Range { lo, hi }
            }
            (Some(field_match::FieldMatchType::Optional(o)), MatchType::Optional) => {
                KeyMatch::Mask { value: val(&o.value)?, mask: full }
            }
            (Some(_), kind) => {
                return Err(Refused::invalid(format!(
                    "{}: the match is not of the field's kind ({})",
                    field.name,
                    kind.as_str_name()
                )))
            }
        };
        out.push(km);
    }
    Ok(out)
}

/// The action (or, in a table with an action profile, the member or group) and argument
/// values an entry names.
fn action_of(
    schema: &Schema,
    t: &Table,
    a: &Option<TableAction>,
) -> Result<(String, Vec<u128>), Refused> {
    let Some(a) = a.as_ref().and_then(|a| a.r#type.as_ref()) else {
        return Err(Refused::invalid("the entry has no action"));
    };
    let indirect = |r: ProfileRef| match t.implementation.map(|i| schema.profiles.get(&i)) {
        Some(Some(p)) if matches!(r, ProfileRef::Group(_)) && !p.with_selector => {
            Err(Refused::invalid(format!(
                "table {}'s action profile {} has no selector: its entries name members",
                t.name, p.name
            )))
        }
        Some(_) => Ok(r.as_action()),
        None => Err(Refused::invalid(format!(
            "table {} has no action profile: its entries name an action",
            t.name
        ))),
    };
    match a {
        table_action::Type::Action(a) if t.implementation.is_none() => {
            direct_action(schema, &t.name, &t.actions, a)
        }
        table_action::Type::Action(_) => Err(Refused::invalid(format!(
            "table {} has an action profile: its entries name a member or a group",
            t.name
        ))),
        table_action::Type::ActionProfileMemberId(id) => indirect(ProfileRef::Member(*id)),
        table_action::Type::ActionProfileGroupId(id) => indirect(ProfileRef::Group(*id)),
        table_action::Type::ActionProfileActionSet(_) => Err(Refused::new(
            Code::Unimplemented,
            "one-shot action selector programming (action_profile_action_set) is not \
             supported yet: create members and a group, and name the group",
        )),
    }
}

/// The action and argument values of `a`, one of the `allowed` actions of `owner` (a table
/// or an action profile).
pub(crate) fn direct_action(
    schema: &Schema,
    owner: &str,
    allowed: &std::collections::BTreeSet<u32>,
    a: &Action,
) -> Result<(String, Vec<u128>), Refused> {
    let Some(act) = schema.actions.get(&a.action_id) else {
        return Err(Refused::new(Code::NotFound, format!("no action with id {:#x}", a.action_id)));
    };
    if !allowed.contains(&a.action_id) {
        return Err(Refused::invalid(format!("action {} is not an action of {owner}", act.name)));
    }
    for p in &a.params {
        if !act.params.iter().any(|x| x.0 == p.param_id) {
            return Err(Refused::invalid(format!(
                "action {} has no parameter {}",
                act.name, p.param_id
            )));
        }
    }
    let args = act
        .params
        .iter()
        .map(|(id, name, width)| {
            let mut given = a.params.iter().filter(|p| p.param_id == *id);
            match (given.next(), given.next()) {
                (Some(p), None) => bytes::value(&p.value, *width).map_err(|e| bytes_error(name, e)),
                (None, _) => Err(Refused::invalid(format!(
                    "action {}: parameter {name} is missing",
                    act.name
                ))),
                (Some(_), Some(_)) => {
                    Err(Refused::invalid(format!("parameter {name} given twice")))
                }
            }
        })
        .collect::<Result<_, _>>()?;
    Ok((act.name.clone(), args))
}

/// Apply one table-entry update.
pub fn write_table_entry(
    schema: &Schema,
    p: &Pipeline,
    op: Op,
    entry: &TableEntry,
) -> Result<(), Refused> {
    let t = table_of(schema, entry)?;
    if entry.time_since_last_hit.is_some() {
        return Err(Refused::invalid("time_since_last_hit is read-only"));
    }
    if entry.idle_timeout_ns < 0 {
        return Err(Refused::invalid(format!(
            "idle_timeout_ns is negative ({})",
            entry.idle_timeout_ns
        )));
    }
    if entry.idle_timeout_ns > 0 && entry.is_default_action {
        return Err(Refused::invalid("a default entry has no idle timeout"));
    }
    if entry.idle_timeout_ns > 0 && !t.supports_timeout {
        return Err(Refused::invalid(format!(
            "table {} does not support idle timeouts (support_timeout = true)",
            t.name
        )));
    }
    if entry.meter_config.is_some() && !t.has_direct_meter {
        return Err(Refused::invalid(format!("table {} has no direct meter", t.name)));
    }
    if entry.meter_config.is_some() && (entry.is_default_action || op == Op::Delete) {
        return Err(Refused::invalid("a meter config goes with an entry's insert or modify"));
    }
    let rates = entry.meter_config.as_ref().map(|c| rates_of(&t.name, c)).transpose()?;
    let table = p.objects.tables.get(t.index).filter(|x| x.name == t.name).ok_or_else(|| {
        Refused::new(Code::Internal, format!("table {} is not in the running program", t.name))
    })?;
    if entry.is_default_action {
        if !entry.r#match.is_empty() || entry.priority != 0 {
            return Err(Refused::invalid("a default entry has no match and no priority"));
        }
        if op != Op::Modify {
            return Err(Refused::invalid("the default entry can only be modified"));
        }
        if entry.action.is_none() {
            // MODIFY without an action resets the default to the program's.
            let ir = &p.program.tables[t.index];
            let name = &p.program.actions[ir.default_action as usize].name;
            if table.default_const {
                return Err(Refused::new(
                    Code::PermissionDenied,
                    format!("table {} has a const default action", t.name),
                ));
            }
            return table.set_default(name, &ir.default_args).map_err(entry_error);
        }
        let (name, args) = action_of(schema, t, &entry.action)?;
        return table.set_default(&name, &args).map_err(entry_error);
    }
    if t.is_const {
        return Err(Refused::new(Code::PermissionDenied, format!("table {} is const", t.name)));
    }
    let keys = keys(t, entry)?;
    let priority = match (t.needs_priority, entry.priority) {
        (true, p) if p > 0 => Some(p as u32),
        (true, _) => {
            return Err(Refused::invalid(format!("table {} needs a priority above 0", t.name)))
        }
        (false, 0) => None,
        (false, _) => {
            return Err(Refused::invalid(format!(
                "table {} takes no priority (no ternary, range or optional field)",
                t.name
            )))
        }
    };
    match op {
        Op::Delete => table.delete(&keys, priority).map_err(entry_error),
        Op::Insert | Op::Modify => {
            let (action, args) = action_of(schema, t, &entry.action)?;
            let e = P4Entry { keys, priority, action, args };
            if op == Op::Insert { table.insert(&e) } else { table.modify(&e) }
                .map_err(entry_error)?;
            // Rates were checked above: setting them cannot fail once the entry is there. A
            // MODIFY without a config resets the meter to its default (everything green), as
            // the spec's TableEntry says.
            match (rates, op) {
                (Some(r), _) => {
                    table.set_entry_meter(&e.keys, priority, Some(r)).map_err(entry_error)
                }
                (None, Op::Modify) if t.has_direct_meter => {
                    table.set_entry_meter(&e.keys, priority, None).map_err(entry_error)
                }
                (None, _) => Ok(()),
            }
        }
    }
}

/// The field matches of stored keys, don't-care fields omitted, values canonical.
pub fn field_matches(t: &Table, keys: &[KeyMatch]) -> Vec<FieldMatch> {
    use field_match::FieldMatchType as F;
    t.fields
        .iter()
        .zip(keys)
        .filter_map(|(f, k)| {
            let w = f.bitwidth;
            let full = if w >= 128 { u128::MAX } else { (1u128 << w) - 1 };
            let b = bytes::canonical;
            let m = match (f.kind, k.clone()) {
                (MatchType::Exact, KeyMatch::Mask { value, .. }) => {
                    F::Exact(field_match::Exact { value: b(value) })
                }
                (MatchType::Lpm, KeyMatch::Prefix { len: 0, .. }) => return None,
                (MatchType::Lpm, KeyMatch::Prefix { value, len }) => {
                    F::Lpm(field_match::Lpm { value: b(value), prefix_len: len as i32 })
                }
                (MatchType::Lpm, KeyMatch::Mask { mask: 0, .. }) => return None,
                (MatchType::Lpm, KeyMatch::Mask { value, mask }) => F::Lpm(field_match::Lpm {
                    value: b(value),
                    prefix_len: mask.count_ones() as i32,
                }),
                (MatchType::Range, KeyMatch::Range { lo: 0, hi }) if hi == full => return None,
                (MatchType::Range, KeyMatch::Range { lo, hi }) => {
                    F::Range(field_match::Range { low: b(lo), high: b(hi) })
                }
                (_, KeyMatch::Mask { mask: 0, .. }) => return None,
                (MatchType::Optional, KeyMatch::Mask { value, .. }) => {
                    F::Optional(field_match::Optional { value: b(value) })
                }
                (_, KeyMatch::Mask { value, mask }) => {
                    F::Ternary(field_match::Ternary { value: b(value), mask: b(mask) })
                }
                (_, KeyMatch::Prefix { value, len }) => {
                    let mask = if len == 0 { 0 } else { full & !(full >> len) };
                    F::Ternary(field_match::Ternary { value: b(value), mask: b(mask) })
                }
                (_, KeyMatch::Range { lo, hi }) => {
                    F::Range(field_match::Range { low: b(lo), high: b(hi) })
                }
            };
            Some(FieldMatch { field_id: f.id, field_match_type: Some(m) })
        })
        .collect()
}

/// The action of table `t` called `name` (as the table layer names it) with `args`; in a
/// table with an action profile, the member or group it names.
fn table_action(schema: &Schema, t: &Table, name: &str, args: &[u128]) -> Option<TableAction> {
    let r#type = match ProfileRef::of(name, args) {
        Some(ProfileRef::Member(id)) => table_action::Type::ActionProfileMemberId(id),
        Some(ProfileRef::Group(id)) => table_action::Type::ActionProfileGroupId(id),
        None => table_action::Type::Action(action_message(schema, &t.actions, name, args)?),
    };
    Some(TableAction { r#type: Some(r#type) })
}

/// The action among `allowed` called `name` (as the table layer names it) with `args`.
pub(crate) fn action_message(
    schema: &Schema,
    allowed: &std::collections::BTreeSet<u32>,
    name: &str,
    args: &[u128],
) -> Option<Action> {
    let of_table = || allowed.iter().filter_map(|id| Some((id, schema.actions.get(id)?)));
    let (id, act) = of_table().find(|(_, a)| a.name == name).or_else(|| {
        let suffix = format!(".{name}");
        let mut found = of_table().filter(|(_, a)| a.name.ends_with(&suffix));
        match (found.next(), found.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    })?;
    let params = act
        .params
        .iter()
        .zip(args)
        .map(|((pid, _, _), v)| action::Param { param_id: *pid, value: bytes::canonical(*v) })
        .collect();
    Some(Action { action_id: *id, params })
}

/// The table entries a read filter selects: every table when `table_id` is 0; only the
/// default entry when `is_default_action` is set; the entries with the given key when it
/// has a match.
/// The table entries `filter` selects; with the idle watch (and the time now), entries of
/// tables that support idle timeouts carry their timeout and, when the filter asks, the time
/// since their last hit.
pub fn read_table_entries(
    schema: &Schema,
    p: &Pipeline,
    filter: &TableEntry,
    idle: Option<(&crate::idle::Idle, u64)>,
) -> Result<Vec<TableEntry>, Refused> {
    let mut ids: Vec<u32> = if filter.table_id == 0 {
        schema.tables.keys().copied().collect()
    } else {
        let t = table_of(schema, filter)?;
        if filter.time_since_last_hit.is_some() && !t.supports_timeout {
            return Err(Refused::invalid(format!(
                "table {} keeps no hit times (no support_timeout): time_since_last_hit",
                t.name
            )));
        }
        vec![filter.table_id]
    };
    ids.sort_unstable();
    let wanted_keys = if filter.table_id != 0 && !filter.r#match.is_empty() {
        Some(keys(&schema.tables[&filter.table_id], filter)?)
    } else {
        None
    };
    let mut out = Vec::new();
    for id in ids {
        let t = &schema.tables[&id];
        let Some(table) = p.objects.tables.get(t.index).filter(|x| x.name == t.name) else {
            continue;
        };
        if filter.is_default_action {
            let (name, args) = table.default_action();
            out.push(TableEntry {
                table_id: id,
                action: table_action(schema, t, &name, &args),
                is_default_action: true,
                ..Default::default()
            });
            continue;
        }
        for (e, stats) in entries_as_written(t, table.entries()) {
            if wanted_keys.as_ref().is_some_and(|k| *k != e.keys) {
                continue;
            }
            if filter.priority != 0 && e.priority != Some(filter.priority as u32) {
                continue;
            }
            let mut entry = TableEntry {
                table_id: id,
                r#match: field_matches(t, &e.keys),
                action: table_action(schema, t, &e.action, &e.args),
                priority: e.priority.unwrap_or(0) as i32,
                counter_data: t.has_direct_counter.then_some(CounterData {
                    byte_count: stats.bytes as i64,
                    packet_count: stats.packets as i64,
                }),
                // Only when the read asks for it (sets the field in its filter).
                meter_config: stats
                    .meter
                    .filter(|_| t.has_direct_meter && filter.meter_config.is_some())
                    .map(config_of),
                is_const: t.is_const,
                ..Default::default()
            };
            if let (true, Some((idle, now))) = (t.supports_timeout, idle) {
                let asked = filter.time_since_last_hit.is_some();
                idle.annotate(&mut entry, stats.last_hit_ns, asked, now);
            }
            out.push(entry);
        }
    }
    Ok(out)
}

/// The entries as they were written: the table stores a range as the prefixes that cover it,
/// which list one by one; pieces that agree in everything else and are contiguous join back
/// into one range (field by field, so a product of two ranges joins too), their counters
/// summed.
pub fn entries_as_written(
    t: &Table,
    mut entries: Vec<(P4Entry, EntryStats)>,
) -> Vec<(P4Entry, EntryStats)> {
    for (i, _) in t.fields.iter().enumerate().filter(|(_, f)| f.kind == MatchType::Range) {
        let range = |e: &P4Entry| match e.keys.get(i) {
            Some(KeyMatch::Range { lo, hi }) => Some((*lo, *hi)),
            _ => None,
        };
        entries.sort_by(|(a, _), (b, _)| {
            let rest = |e: &P4Entry| {
                let mut k = e.keys.clone();
                k.remove(i);
                format!("{k:?} {:?} {} {:?}", e.priority, e.action, e.args)
            };
            rest(a).cmp(&rest(b)).then(range(a).cmp(&range(b)))
        });
        let mut merged: Vec<(P4Entry, EntryStats)> = Vec::with_capacity(entries.len());
        for (e, st) in entries {
            if let Some((last, last_st)) = merged.last_mut() {
                let same_rest = last.priority == e.priority
                    && last.action == e.action
                    && last.args == e.args
                    && last
                        .keys
                        .iter()
                        .zip(&e.keys)
                        .enumerate()
                        .all(|(j, (a, b))| j == i || a == b);
                if let (true, Some((llo, lhi)), Some((lo, hi))) =
                    (same_rest, range(last), range(&e))
                {
                    if lhi.checked_add(1) == Some(lo) {
                        last.keys[i] = KeyMatch::Range { lo: llo, hi };
                        last_st.packets += st.packets;
                        last_st.bytes += st.bytes;
                        last_st.last_hit_ns = last_st.last_hit_ns.max(st.last_hit_ns);
                        continue;
                    }
                }
            }
            merged.push((e, st));
        }
        entries = merged;
    }
    entries
}

/// The cells of an indirect counter (all of them without an index).
pub fn read_counter(
    schema: &Schema,
    p: &Pipeline,
    filter: &CounterEntry,
) -> Result<Vec<CounterEntry>, Refused> {
    let mut ids: Vec<u32> = if filter.counter_id == 0 {
        schema.counters.keys().copied().collect()
    } else {
        vec![filter.counter_id]
    };
    ids.sort_unstable();
    let mut out = Vec::new();
    for id in ids {
        let (name, size) = schema
            .counters
            .get(&id)
            .ok_or_else(|| Refused::new(Code::NotFound, format!("no counter with id {id:#x}")))?;
        let Some(InstanceRt::Counter(arr)) =
            p.objects.instance_index(&p.program, name).map(|i| p.objects.instances[i].clone())
        else {
            return Err(Refused::new(
                Code::Internal,
                format!("counter {name} is not in the running program"),
            ));
        };
        let cells: Vec<u64> = match &filter.index {
            Some(Index { index }) if *index < 0 || *index as u64 >= *size => {
                return Err(Refused::invalid(format!(
                    "counter {name} has {size} cells; index {index}"
                )))
            }
            Some(Index { index }) => vec![*index as u64],
            None => (0..*size).collect(),
        };
        for i in cells {
            let (packets, bytes) = arr.read(i as usize);
            out.push(CounterEntry {
                counter_id: id,
                index: Some(Index { index: i as i64 }),
                data: Some(CounterData { byte_count: bytes as i64, packet_count: packets as i64 }),
            });
        }
    }
    Ok(out)
}

/// Set one counter cell (MODIFY); a wildcard write is not offered (as BMv2).
pub fn write_counter(
    schema: &Schema,
    p: &Pipeline,
    op: Op,
    e: &CounterEntry,
) -> Result<(), Refused> {
    if op != Op::Modify {
        return Err(Refused::invalid("counter cells can only be modified"));
    }
    let (name, size) = schema.counters.get(&e.counter_id).ok_or_else(|| {
        Refused::new(Code::NotFound, format!("no counter with id {:#x}", e.counter_id))
    })?;
    let Some(Index { index }) = e.index else {
        return Err(Refused::new(Code::Unimplemented, "a wildcard counter write"));
    };
    if index < 0 || index as u64 >= *size {
        return Err(Refused::invalid(format!("counter {name} has {size} cells; index {index}")));
    }
    let Some(InstanceRt::Counter(arr)) =
        p.objects.instance_index(&p.program, name).map(|i| p.objects.instances[i].clone())
    else {
        return Err(Refused::new(
            Code::Internal,
            format!("counter {name} is not in the running program"),
        ));
    };
    let d = e.data.unwrap_or_default();
    arr.set(index as usize, d.packet_count.max(0) as u64, d.byte_count.max(0) as u64);
    Ok(())
}

/// The idle watch's key of a (non-default) entry of a table that supports idle timeouts.
pub fn watch_key(schema: &Schema, entry: &TableEntry) -> Option<crate::idle::Key> {
    let t = table_of(schema, entry).ok()?;
    if !t.supports_timeout || entry.is_default_action {
        return None;
    }
    let k = keys(t, entry).ok()?;
    Some(crate::idle::key(entry.table_id, &field_matches(t, &k), entry.priority))
}

/// What an update does.
pub fn op_of(u: &Update) -> Result<Op, Refused> {
    match update::Type::try_from(u.r#type) {
        Ok(update::Type::Insert) => Ok(Op::Insert),
        Ok(update::Type::Modify) => Ok(Op::Modify),
        Ok(update::Type::Delete) => Ok(Op::Delete),
        _ => Err(Refused::invalid("the update's type is unspecified")),
    }
}

/// Apply one update of a `Write`.
pub fn write_update(schema: &Schema, p: &Pipeline, u: &Update) -> Result<(), Refused> {
    let op = op_of(u)?;
    match u.entity.as_ref().and_then(|e| e.entity.as_ref()) {
        None => Err(Refused::invalid("the update has no entity")),
        Some(entity::Entity::TableEntry(t)) => write_table_entry(schema, p, op, t),
        Some(entity::Entity::CounterEntry(e)) => write_counter(schema, p, op, e),
        Some(entity::Entity::RegisterEntry(e)) => crate::registers::write(schema, p, op, e),
        Some(entity::Entity::MeterEntry(e)) => crate::registers::write_meter(schema, p, op, e),
        Some(entity::Entity::DirectMeterEntry(e)) => write_direct_meter(schema, p, op, e),
        Some(entity::Entity::ValueSetEntry(e)) => crate::value_sets::write(schema, p, op, e),
        Some(entity::Entity::ActionProfileMember(m)) => {
            crate::profiles::write_member(schema, p, op, m)
        }
        Some(entity::Entity::ActionProfileGroup(g)) => {
            crate::profiles::write_group(schema, p, op, g)
        }
        Some(other) => Err(Refused::new(
            Code::Unimplemented,
            format!("{} writes are not supported yet", entity_name(other)),
        )),
    }
}

/// What one entity of a `Read` selects.
pub fn read_entity(
    schema: &Schema,
    p: &Pipeline,
    e: &Entity,
) -> Result<Vec<entity::Entity>, Refused> {
    Ok(match &e.entity {
        None => return Err(Refused::invalid("an empty entity in a read")),
        Some(entity::Entity::TableEntry(t)) => {
            let entries = read_table_entries(schema, p, t, None)?;
            entries.into_iter().map(entity::Entity::TableEntry).collect()
        }
        Some(entity::Entity::CounterEntry(c)) => {
            read_counter(schema, p, c)?.into_iter().map(entity::Entity::CounterEntry).collect()
        }
        Some(entity::Entity::RegisterEntry(r)) => crate::registers::read(schema, p, r)?
            .into_iter()
            .map(entity::Entity::RegisterEntry)
            .collect(),
        Some(entity::Entity::MeterEntry(m)) => crate::registers::read_meter(schema, p, m)?
            .into_iter()
            .map(entity::Entity::MeterEntry)
            .collect(),
        Some(entity::Entity::DirectCounterEntry(d)) => read_direct_counters(schema, p, d)?
            .into_iter()
            .map(entity::Entity::DirectCounterEntry)
            .collect(),
        Some(entity::Entity::ValueSetEntry(v)) => crate::value_sets::read(schema, p, v)?
            .into_iter()
            .map(entity::Entity::ValueSetEntry)
            .collect(),
        Some(entity::Entity::DirectMeterEntry(d)) => read_direct_meters(schema, p, d)?
            .into_iter()
            .map(entity::Entity::DirectMeterEntry)
            .collect(),
        Some(entity::Entity::ActionProfileMember(m)) => {
            crate::profiles::read_members(schema, p, m)?
                .into_iter()
                .map(entity::Entity::ActionProfileMember)
                .collect()
        }
        Some(entity::Entity::ActionProfileGroup(g)) => crate::profiles::read_groups(schema, p, g)?
            .into_iter()
            .map(entity::Entity::ActionProfileGroup)
            .collect(),
        Some(other) => {
            return Err(Refused::new(
                Code::Unimplemented,
                format!("{} reads are not supported yet", entity_name(other)),
            ))
        }
    })
}

/// The entries of tables with a direct resource (`has`, named `what`) that `filter` selects:
/// every such table's (no table), a table's (no match), or one entry's.
fn direct_entries(
    schema: &Schema,
    p: &Pipeline,
    filter: Option<&TableEntry>,
    has: fn(&Table) -> bool,
    what: &str,
) -> Result<Vec<TableEntry>, Refused> {
    let filter = filter.cloned().unwrap_or_default();
    if filter.table_id != 0 {
        let t = table_of(schema, &filter)?;
        if !has(t) {
            return Err(Refused::invalid(format!("table {} has no {what}", t.name)));
        }
    }
    let entries = read_table_entries(schema, p, &filter, None)?;
    Ok(entries.into_iter().filter(|e| schema.tables.get(&e.table_id).is_some_and(has)).collect())
}

/// An entry's key alone, as direct resources name their entry.
fn key_of(e: &TableEntry) -> TableEntry {
    TableEntry {
        table_id: e.table_id,
        r#match: e.r#match.clone(),
        priority: e.priority,
        is_default_action: e.is_default_action,
        ..Default::default()
    }
}

/// The direct counters `d` selects, each with its entry's key.
fn read_direct_counters(
    schema: &Schema,
    p: &Pipeline,
    d: &DirectCounterEntry,
) -> Result<Vec<DirectCounterEntry>, Refused> {
    let has = |t: &Table| t.has_direct_counter;
    let entries = direct_entries(schema, p, d.table_entry.as_ref(), has, "direct counter")?;
    Ok(entries
        .into_iter()
        .map(|e| DirectCounterEntry { table_entry: Some(key_of(&e)), data: e.counter_data })
        .collect())
}

/// A direct meter write: MODIFY of one entry's meter, with a config to set its rates or
/// without one to unconfigure it (everything green, as a new entry's meter).
fn write_direct_meter(
    schema: &Schema,
    p: &Pipeline,
    op: Op,
    d: &DirectMeterEntry,
) -> Result<(), Refused> {
    if op != Op::Modify {
        return Err(Refused::invalid(
            "direct meter entries are modified, never inserted or deleted",
        ));
    }
    if d.counter_data.is_some() {
        return Err(Refused::new(Code::Unimplemented, "meter counter data is not kept yet"));
    }
    let entry = d.table_entry.as_ref().ok_or_else(|| {
        Refused::invalid("a direct meter entry names its table entry (table_entry)")
    })?;
    let t = table_of(schema, entry)?;
    if !t.has_direct_meter {
        return Err(Refused::invalid(format!("table {} has no direct meter", t.name)));
    }
    if entry.is_default_action {
        return Err(Refused::invalid(
            "the default entry has no meter of its own (a miss is not metered)",
        ));
    }
    let rates = d.config.as_ref().map(|c| rates_of(&t.name, c)).transpose()?;
    let table = p.objects.tables.get(t.index).filter(|x| x.name == t.name).ok_or_else(|| {
        Refused::new(Code::Internal, format!("table {} is not in the running program", t.name))
    })?;
    let keys = keys(t, entry)?;
    let priority = (entry.priority > 0).then_some(entry.priority as u32);
    table.set_entry_meter(&keys, priority, rates).map_err(entry_error)
}

/// The direct meters `d` selects, each with its entry's key and config (none: unconfigured).
fn read_direct_meters(
    schema: &Schema,
    p: &Pipeline,
    d: &DirectMeterEntry,
) -> Result<Vec<DirectMeterEntry>, Refused> {
    let has = |t: &Table| t.has_direct_meter;
    // The table entry read returns meter configs only when its filter asks.
    let filter = TableEntry {
        meter_config: Some(Default::default()),
        ..d.table_entry.clone().unwrap_or_default()
    };
    let entries = direct_entries(schema, p, Some(&filter), has, "direct meter")?;
    Ok(entries
        .into_iter()
        .map(|e| DirectMeterEntry {
            table_entry: Some(key_of(&e)),
            config: e.meter_config,
            counter_data: None,
        })
        .collect())
}

pub fn entity_name(e: &entity::Entity) -> &'static str {
    match e {
        entity::Entity::ExternEntry(_) => "extern entry",
        entity::Entity::TableEntry(_) => "table entry",
        entity::Entity::ActionProfileMember(_) => "action profile member",
        entity::Entity::ActionProfileGroup(_) => "action profile group",
        entity::Entity::MeterEntry(_) => "meter entry",
        entity::Entity::DirectMeterEntry(_) => "direct meter entry",
        entity::Entity::CounterEntry(_) => "counter entry",
        entity::Entity::DirectCounterEntry(_) => "direct counter entry",
        entity::Entity::PacketReplicationEngineEntry(_) => "packet replication engine entry",
        entity::Entity::ValueSetEntry(_) => "value set entry",
        entity::Entity::RegisterEntry(_) => "register entry",
        entity::Entity::DigestEntry(_) => "digest entry",
    }
}
