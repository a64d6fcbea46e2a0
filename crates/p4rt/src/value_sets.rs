//! Parser value sets over P4Runtime: a `ValueSetEntry` MODIFY replaces a set's members as a
//! whole; a read returns them as written.

use crate::bytes;
use crate::entities::{Op, Refused};
use crate::proto::google::rpc::Code;
use crate::proto::p4::v1::{field_match, FieldMatch, ValueSetEntry, ValueSetMember};
use crate::schema::Schema;
use hotplane_p4::exec::value_set::{Member, ValueSetError, ValueSetRt};
use hotplane_p4::exec::{InstanceRt, Pipeline};
use hotplane_p4::types::mask;
use std::sync::Arc;

/// The running value set with P4Info id `id`.
fn value_set(schema: &Schema, p: &Pipeline, id: u32) -> Result<Arc<ValueSetRt>, Refused> {
    let info = schema
        .p4info
        .value_sets
        .iter()
        .find(|v| v.preamble.as_ref().is_some_and(|pr| pr.id == id))
        .ok_or_else(|| Refused::new(Code::NotFound, format!("no value set with id {id:#x}")))?;
    let name = info.preamble.as_ref().map(|pr| pr.name.clone()).unwrap_or_default();
    match p.objects.instance_index(&p.program, &name).map(|i| p.objects.instances[i].clone()) {
        Some(InstanceRt::ValueSet(rt)) => Ok(rt),
        _ => Err(Refused::new(
            Code::Internal,
            format!("value set {name} is not in the running program"),
        )),
    }
}

/// Replace a value set's members (MODIFY only).
pub fn write(schema: &Schema, p: &Pipeline, op: Op, e: &ValueSetEntry) -> Result<(), Refused> {
    if op != Op::Modify {
        return Err(Refused::new(
            Code::InvalidArgument,
            "value set entries are modified (their members replaced), never inserted or deleted",
        ));
    }
    let set = value_set(schema, p, e.value_set_id)?;
    // Checked before any member is converted: a huge request is refused cheaply.
    if e.members.len() > set.size {
        return Err(Refused::new(
            Code::ResourceExhausted,
            format!(
                "value set {} holds at most {} members, {} given",
                set.name,
                set.size,
                e.members.len()
            ),
        ));
    }
    let members = e.members.iter().map(|m| member(&set, m)).collect::<Result<Vec<_>, _>>()?;
    set.set(members).map_err(|err| {
        let code = match err {
            ValueSetError::TooMany { .. } => Code::ResourceExhausted,
            _ => Code::InvalidArgument,
        };
        Refused::new(code, err.to_string())
    })
}

/// One member's value and mask per field, from its field matches (by id, 1 up).
fn member(set: &ValueSetRt, m: &ValueSetMember) -> Result<Member, Refused> {
    let invalid = |msg: String| Refused::new(Code::InvalidArgument, msg);
    if let Some(fm) =
        m.r#match.iter().find(|f| f.field_id == 0 || f.field_id as usize > set.fields.len())
    {
        return Err(invalid(format!("value set {} has no field {}", set.name, fm.field_id)));
    }
    set.fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut given = m.r#match.iter().filter(|x| x.field_id as usize == i + 1);
            let (fm, again) = (given.next(), given.next());
            if again.is_some() {
                return Err(invalid(format!("value set {} field {} given twice", set.name, i + 1)));
            }
            let value = |b: &[u8]| {
                bytes::value(b, f.width)
                    .map_err(|e| invalid(format!("value set {}: {e}", set.name)))
            };
            use field_match::FieldMatchType as F;
            match fm.and_then(|x| x.field_match_type.as_ref()) {
                Some(F::Exact(x)) => Ok((value(&x.value)?, mask(f.width))),
                Some(F::Ternary(x)) if f.ternary => {
                    let (v, mk) = (value(&x.value)?, value(&x.mask)?);
                    // As for table entries: a don't-care field is left out, and a value has
                    // no bits outside its mask.
                    if mk == 0 {
                        return Err(invalid(format!(
                            "value set {} field {}: a zero mask (leave the field out instead)",
                            set.name,
                            i + 1
                        )));
                    }
                    if v & !mk != 0 {
                        return Err(invalid(format!(
                            "value set {} field {}: value {v:#x} has bits outside mask {mk:#x}",
                            set.name,
                            i + 1
                        )));
                    }
                    Ok((v, mk))
                }
                None if f.ternary => Ok((0, 0)),
                None => Err(invalid(format!(
                    "value set {}: field {} matches exactly and is missing",
                    set.name,
                    i + 1
                ))),
                Some(_) => Err(invalid(format!(
                    "value set {} field {} matches {}",
                    set.name,
                    i + 1,
                    if f.ternary { "exact or ternary" } else { "exactly" }
                ))),
            }
        })
        .collect()
}

/// The members of one value set (or of every one, for id 0), as written.
pub fn read(
    schema: &Schema,
    p: &Pipeline,
    filter: &ValueSetEntry,
) -> Result<Vec<ValueSetEntry>, Refused> {
    if !filter.members.is_empty() {
        return Err(Refused::new(
            Code::InvalidArgument,
            "a value set read names the set only (no members)",
        ));
    }
    let ids: Vec<u32> = match filter.value_set_id {
        0 => schema
            .p4info
            .value_sets
            .iter()
            .filter_map(|v| v.preamble.as_ref().map(|p| p.id))
            .collect(),
        id => vec![id],
    };
    ids.into_iter()
        .map(|id| {
            let set = value_set(schema, p, id)?;
            let members = set
                .members()
                .into_iter()
                .map(|m| ValueSetMember {
                    r#match: set
                        .fields
                        .iter()
                        .zip(m)
                        .enumerate()
                        .filter(|(_, (_, (_, mk)))| *mk != 0)
                        .map(|(i, (f, (v, mk)))| {
                            use field_match::FieldMatchType as F;
                            let m = if f.ternary {
                                F::Ternary(field_match::Ternary {
                                    value: bytes::canonical(v),
                                    mask: bytes::canonical(mk),
                                })
                            } else {
                                F::Exact(field_match::Exact { value: bytes::canonical(v) })
                            };
                            FieldMatch { field_id: i as u32 + 1, field_match_type: Some(m) }
                        })
                        .collect(),
                })
                .collect();
            Ok(ValueSetEntry { value_set_id: id, members })
        })
        .collect()
}
