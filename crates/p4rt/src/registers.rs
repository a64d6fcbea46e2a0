//! Register and meter entries: a program's registers and (indirect) meters read and written
//! cell by cell over P4Runtime. A register's value is a `P4Data` bit string of its width
//! (BMv2 refuses register entities; hotplane serves them); a meter's is its `MeterConfig`
//! (RFC 2698 rates and bursts in the meter's unit per second), none while unconfigured. Writes
//! are MODIFY only: the cells always exist.

use crate::bytes;
use crate::entities::{Op, Refused};
use crate::proto::google::rpc::Code;
use crate::proto::p4::v1::{p4_data, Index, MeterConfig, MeterEntry, P4Data, RegisterEntry};
use crate::schema::Schema;
use hotplane_p4::exec::{InstanceRt, Pipeline};
use hotplane_tables::{MeterArray, MeterRates, RegisterArray};
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

/// A meter of the schema: its name and cells.
#[derive(Debug, Clone)]
pub struct Meter {
    pub name: String,
    pub size: u64,
}

fn meter(schema: &Schema, id: u32) -> Result<(&Meter, Register), Refused> {
    let m = schema
        .meters
        .get(&id)
        .ok_or_else(|| Refused::new(Code::NotFound, format!("no meter with id {id:#x}")))?;
    // The index checks are a register's.
    Ok((m, Register { name: m.name.clone(), size: m.size, bits: 0 }))
}

fn meters_of(p: &Pipeline, m: &Meter) -> Result<Arc<MeterArray>, Refused> {
    match p.objects.instance_index(&p.program, &m.name).map(|i| p.objects.instances[i].clone()) {
        Some(InstanceRt::Meter { meter, .. }) => Ok(meter),
        _ => Err(Refused::new(
            Code::Internal,
            format!("meter {} is not in the running program", m.name),
        )),
    }
}

/// The rates of a P4Runtime config for meter `name` (v1model's meters are two-rate, RFC 2698).
pub fn rates_of(name: &str, c: &MeterConfig) -> Result<MeterRates, Refused> {
    if [c.cir, c.cburst, c.pir, c.pburst].iter().any(|v| *v < 0) {
        return Err(Refused::new(Code::InvalidArgument, "negative meter rates"));
    }
    if c.eburst != 0 {
        return Err(Refused::new(
            Code::InvalidArgument,
            "eburst belongs to single-rate meters; v1model's are two-rate (RFC 2698)",
        ));
    }
    let r = MeterRates {
        cir: c.cir as u64,
        cbs: c.cburst as u64,
        pir: c.pir as u64,
        pbs: c.pburst as u64,
    };
    r.check().map_err(|err| Refused::new(Code::InvalidArgument, format!("meter {name}: {err}")))?;
    Ok(r)
}

/// The P4Runtime config of configured meter rates.
pub fn config_of(r: MeterRates) -> MeterConfig {
    MeterConfig {
        cir: r.cir as i64,
        cburst: r.cbs as i64,
        pir: r.pir as i64,
        pburst: r.pbs as i64,
        eburst: 0,
    }
}

/// Apply one meter write: MODIFY with a config sets the rates of one cell (or of every cell
/// without an index); without a config it unconfigures them (everything green, as at start).
pub fn write_meter(schema: &Schema, p: &Pipeline, op: Op, e: &MeterEntry) -> Result<(), Refused> {
    if op != Op::Modify {
        return Err(Refused::new(
            Code::InvalidArgument,
            "meter cells are modified, never inserted or deleted",
        ));
    }
    let (m, cells_spec) = meter(schema, e.meter_id)?;
    if e.counter_data.is_some() {
        return Err(Refused::new(Code::Unimplemented, "meter counter data is not kept yet"));
    }
    // Checked once, so that a refused config changes no cell.
    let rates = e.config.as_ref().map(|c| rates_of(&m.name, c)).transpose()?;
    let cells = meters_of(p, m)?;
    let range = selected(&cells_spec, e.index)?;
    for i in range {
        let set = match rates {
            Some(r) => cells.set_rates(i as usize, r),
            None => cells.clear(i as usize),
        };
        set.map_err(|err| Refused::new(Code::Internal, format!("meter {}: {err}", m.name)))?;
    }
    Ok(())
}

/// The cells a read of `filter` selects, with their configs (none while unconfigured).
pub fn read_meter(
    schema: &Schema,
    p: &Pipeline,
    filter: &MeterEntry,
) -> Result<Vec<MeterEntry>, Refused> {
    let mut ids: Vec<u32> = if filter.meter_id == 0 {
        schema.meters.keys().copied().collect()
    } else {
        vec![filter.meter_id]
    };
    ids.sort_unstable();
    let mut out = Vec::new();
    for id in ids {
        let (m, cells_spec) = meter(schema, id)?;
        let cells = meters_of(p, m)?;
        let range = selected(&cells_spec, filter.index)?;
        if out.len() as u64 + (range.end - range.start) > MAX_READ_CELLS {
            return Err(Refused::new(
                Code::ResourceExhausted,
                format!("a read of more than {MAX_READ_CELLS} meter cells: name the meter"),
            ));
        }
        for i in range {
            let config = cells.configured(i as usize).map(config_of);
            out.push(MeterEntry {
                meter_id: id,
                index: Some(Index { index: i as i64 }),
                config,
                counter_data: None,
            });
        }
    }
    Ok(out)
}
