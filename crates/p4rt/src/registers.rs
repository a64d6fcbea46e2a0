//! Register entries: a program's registers read and written cell by cell over P4Runtime, each
//! value a `P4Data` bit string of the register's width (BMv2 refuses register entities;
//! hotplane serves them). Writes are MODIFY only: a register's cells always exist.

use crate::bytes;
use crate::entities::{Op, Refused};
use crate::proto::google::rpc::Code;
use crate::proto::p4::v1::{p4_data, Index, P4Data, RegisterEntry};
use crate::schema::Schema;
use hotplane_p4::exec::{InstanceRt, Pipeline};
use hotplane_tables::RegisterArray;
use std::sync::Arc;

/// A register of the schema: its name, cells and cell width.
#[derive(Debug, Clone)]
pub struct Register {
    pub name: String,
    pub size: u64,
    pub bits: u32,
}

/// Cells one read may return (a wildcard read of every register stops here).
pub const MAX_READ_CELLS: u64 = 1 << 20;

fn register(schema: &Schema, id: u32) -> Result<&Register, Refused> {
    schema
        .registers
        .get(&id)
        .ok_or_else(|| Refused::new(Code::NotFound, format!("no register with id {id:#x}")))
}

fn cells_of(p: &Pipeline, r: &Register) -> Result<Arc<RegisterArray>, Refused> {
    match p.objects.instance_index(&p.program, &r.name).map(|i| p.objects.instances[i].clone()) {
        Some(InstanceRt::Register(arr)) => Ok(arr),
        _ => Err(Refused::new(
            Code::Internal,
            format!("register {} is not in the running program", r.name),
        )),
    }
}

/// The cells `index` selects: one (checked against the size), or all when unset.
fn selected(r: &Register, index: Option<Index>) -> Result<std::ops::Range<u64>, Refused> {
    match index {
        None => Ok(0..r.size),
        Some(Index { index }) if index < 0 || index as u64 >= r.size => Err(Refused::new(
            Code::InvalidArgument,
            format!("register {} has {} cells; index {index}", r.name, r.size),
        )),
        Some(Index { index }) => Ok(index as u64..index as u64 + 1),
    }
}

/// Apply one register write: MODIFY of one cell, or of every cell when no index is given.
pub fn write(schema: &Schema, p: &Pipeline, op: Op, e: &RegisterEntry) -> Result<(), Refused> {
    if op != Op::Modify {
        return Err(Refused::new(
            Code::InvalidArgument,
            "register cells are modified, never inserted or deleted",
        ));
    }
    let r = register(schema, e.register_id)?;
    let value = match e.data.as_ref().and_then(|d| d.data.as_ref()) {
        Some(p4_data::Data::Bitstring(b)) => bytes::value(b, r.bits).map_err(|err| {
            Refused::new(Code::InvalidArgument, format!("register {}: {err}", r.name))
        })?,
        Some(_) => {
            return Err(Refused::new(
                Code::InvalidArgument,
                format!("register {} holds bit<{}> values: send a bitstring", r.name, r.bits),
            ))
        }
        None => return Err(Refused::new(Code::InvalidArgument, "a register write without data")),
    };
    let cells = cells_of(p, r)?;
    for i in selected(r, e.index)? {
        // At most 64 bits wide (the pipeline refuses wider registers), so the value fits.
        cells.write(i as usize, value as u64);
    }
    Ok(())
}

/// The cells a read of `filter` selects: of one register or (id 0) of all, one cell or all.
pub fn read(
    schema: &Schema,
    p: &Pipeline,
    filter: &RegisterEntry,
) -> Result<Vec<RegisterEntry>, Refused> {
    let mut ids: Vec<u32> = if filter.register_id == 0 {
        schema.registers.keys().copied().collect()
    } else {
        vec![filter.register_id]
    };
    ids.sort_unstable();
    let mut out = Vec::new();
    for id in ids {
        let r = register(schema, id)?;
        let cells = cells_of(p, r)?;
        let range = selected(r, filter.index)?;
        if out.len() as u64 + (range.end - range.start) > MAX_READ_CELLS {
            return Err(Refused::new(
                Code::ResourceExhausted,
                format!("a read of more than {MAX_READ_CELLS} register cells: name the register"),
            ));
        }
        for i in range {
            out.push(RegisterEntry {
                register_id: id,
                index: Some(Index { index: i as i64 }),
                data: Some(P4Data {
                    data: Some(p4_data::Data::Bitstring(bytes::canonical(
                        cells.read(i as usize) as u128
                    ))),
                }),
            });
        }
    }
    Ok(out)
}
