//! Counters, registers and meters, indirect and direct, and the digest queue's figures.

use std::sync::Arc;

use serde_json::json;

use super::tables::by_handle;
use super::{value, CliError, Line, Outcome};
use crate::exec::{InstanceRt, P4Table, Pipeline};
use crate::types::mask;
use hotplane_tables::objects::MeterRates;

/// The table that a direct counter or meter called `name` belongs to.
pub(super) fn direct_table<'a>(
    p: &'a Pipeline,
    name: &str,
    counter: bool,
) -> Option<(&'a Arc<P4Table>, String)> {
    p.program.tables.iter().find_map(|d| {
        let attached = if counter { &d.direct_counter } else { &d.direct_meter };
        let a = attached.as_deref()?;
        let hit = a == name || a.ends_with(&format!(".{name}"));
        hit.then(|| p.objects.tables.iter().find(|t| t.name == d.name).map(|t| (t, a.to_string())))?
    })
}

pub(super) fn counters(cx: &Line<'_>, command: &str) -> Result<Outcome, CliError> {
    let name = cx.word(0, "a counter")?;
    if let Some((t, full)) = direct_table(cx.p, name, true) {
        if command != "counter_read" {
            return Err(
                cx.syntax(format!("{full} is a direct counter: it is read by entry handle"))
            );
        }
        cx.exactly(2)?;
        let (_, s) = by_handle(t, cx.handle(1)?)?;
        return Ok(Outcome::text(
            format!("{full}[{}] = {} packets, {} bytes", cx.args[1], s.packets, s.bytes),
            json!({"packets": s.packets, "bytes": s.bytes}),
        ));
    }
    let (name, cells) = cx.instance("counter", |i| match i {
        InstanceRt::Counter(c) => Some(Arc::clone(c)),
        _ => None,
    })?;
    match command {
        "counter_read" => {
            cx.exactly(2)?;
            let i = cx.index(1, &name, cells.len())?;
            let (packets, bytes) = cells.read(i);
            Ok(Outcome::text(
                format!("{name}[{i}] = {packets} packets, {bytes} bytes"),
                json!({"packets": packets, "bytes": bytes}),
            ))
        }
        "counter_write" => {
            cx.exactly(4)?;
            let i = cx.index(1, &name, cells.len())?;
            let packets = value(cx.args[2], "packets")?;
            let bytes = value(cx.args[3], "bytes")?;
            let (Ok(packets), Ok(bytes)) = (u64::try_from(packets), u64::try_from(bytes)) else {
                return Err(cx.syntax("counts are 64-bit"));
            };
            cells.set(i, packets, bytes);
            Ok(Outcome::text(format!("{name}[{i}] set"), json!({})))
        }
        _ => {
            cx.exactly(1)?;
            (0..cells.len()).for_each(|i| cells.reset(i));
            Ok(Outcome::text(format!("{name}: {} cells reset", cells.len()), json!({})))
        }
    }
}

pub(super) fn registers(cx: &Line<'_>, command: &str) -> Result<Outcome, CliError> {
    let (name, cells) = cx.instance("register", |i| match i {
        InstanceRt::Register(r) => Some(Arc::clone(r)),
        _ => None,
    })?;
    match command {
        "register_read" if cx.args.len() == 1 => {
            if cells.len() > super::MAX_SHOWN {
                return Err(cx.syntax(format!(
                    "{name} has {} cells: read them by index (at most {} at once)",
                    cells.len(),
                    super::MAX_SHOWN
                )));
            }
            let values: Vec<u64> = (0..cells.len()).map(|i| cells.read(i)).collect();
            let shown: Vec<String> = values.iter().map(u64::to_string).collect();
            Ok(Outcome::text(format!("{name}= {}", shown.join(", ")), json!({"values": values})))
        }
        "register_read" => {
            cx.exactly(2)?;
            let i = cx.index(1, &name, cells.len())?;
            let v = cells.read(i);
            Ok(Outcome::text(format!("{name}[{i}]= {v}"), json!({"value": v})))
        }
        "register_write" => {
            cx.exactly(3)?;
            let i = cx.index(1, &name, cells.len())?;
            let v = value(cx.args[2], "the value")?;
            if v & !mask(cells.bits()) != 0 {
                return Err(cx.syntax(format!("{name} holds bit<{}> values", cells.bits())));
            }
            cells.write(i, v as u64);
            Ok(Outcome::text(format!("{name}[{i}]= {v}"), json!({})))
        }
        _ => {
            cx.exactly(1)?;
            (0..cells.len()).for_each(|i| cells.write(i, 0));
            Ok(Outcome::text(format!("{name}: {} cells reset", cells.len()), json!({})))
        }
    }
}

/// BMv2's `rate:burst`, the rate in units (bytes or packets) per microsecond, as
/// units per second and a burst.
pub(super) fn rate(cx: &Line<'_>, text: &str) -> Result<(u64, u64), CliError> {
    let bad = || cx.syntax(format!("`{text}` is not <rate per microsecond>:<burst>"));
    let (r, b) = text.split_once(':').ok_or_else(bad)?;
    let r: f64 = r.parse().map_err(|_| bad())?;
    let b: u64 = b.parse().map_err(|_| bad())?;
    if !(0.0..=1e12).contains(&r) {
        return Err(bad());
    }
    Ok(((r * 1e6).round() as u64, b))
}

pub(super) fn rates_text(r: &MeterRates) -> String {
    format!(
        "0: info rate = {}, burst size = {}\n1: info rate = {}, burst size = {}",
        r.cir as f64 / 1e6,
        r.cbs,
        r.pir as f64 / 1e6,
        r.pbs
    )
}

pub(super) fn meters(cx: &Line<'_>, command: &str) -> Result<Outcome, CliError> {
    let name = cx.word(0, "a meter")?;
    let two_rates = |from: usize| -> Result<MeterRates, CliError> {
        cx.exactly(from + 2)?;
        let (cir, cbs) = rate(cx, cx.args[from])?;
        let (pir, pbs) = rate(cx, cx.args[from + 1])?;
        Ok(MeterRates { cir, cbs, pir, pbs })
    };
    if let Some((t, full)) = direct_table(cx.p, name, false) {
        if command == "meter_get_rates" {
            return Err(cx.syntax(format!("{full} is a direct meter: read it with table_dump")));
        }
        if command == "meter_array_set_rates" {
            return Err(cx.syntax(format!("{full} is a direct meter: set it per entry handle")));
        }
        let (e, _) = by_handle(t, cx.handle(1)?)?;
        t.set_entry_meter(&e.keys, e.priority, Some(two_rates(2)?))?;
        return Ok(Outcome::text(format!("{full}: rates set for entry {}", cx.args[1]), json!({})));
    }
    let (name, cells) = cx.instance("meter", |i| match i {
        InstanceRt::Meter { meter, .. } => Some(Arc::clone(meter)),
        _ => None,
    })?;
    let meter_err = |source| CliError::Meter { name: name.clone(), source };
    match command {
        "meter_array_set_rates" => {
            let r = two_rates(1)?;
            r.check().map_err(meter_err)?;
            for i in 0..cells.len() {
                cells.set_rates(i, r).map_err(meter_err)?;
            }
            Ok(Outcome::text(format!("{name}: rates set for {} cells", cells.len()), json!({})))
        }
        "meter_set_rates" => {
            let i = cx.index(1, &name, cells.len())?;
            cells.set_rates(i, two_rates(2)?).map_err(meter_err)?;
            Ok(Outcome::text(format!("{name}[{i}]: rates set"), json!({})))
        }
        _ => {
            cx.exactly(2)?;
            let i = cx.index(1, &name, cells.len())?;
            match cells.configured(i) {
                Some(r) => Ok(Outcome::text(
                    rates_text(&r),
                    json!({"cir": r.cir, "cbs": r.cbs, "pir": r.pir, "pbs": r.pbs}),
                )),
                None => Ok(Outcome::text(
                    format!("{name}[{i}]: not configured (every packet is green)"),
                    json!({"configured": false}),
                )),
            }
        }
    }
}

pub(super) fn digest_stats(p: &Pipeline) -> Outcome {
    let d = &p.objects.digests;
    let (sent, dropped, pending) = (d.sent(), d.dropped(), d.pending());
    Outcome::text(
        format!("digests: {sent} sent, {dropped} dropped (queue full), {pending} waiting"),
        json!({"sent": sent, "dropped": dropped, "pending": pending}),
    )
}
