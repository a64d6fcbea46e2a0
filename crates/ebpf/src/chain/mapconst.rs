//! Map-content specialisation (Morpheus-style): a `map_lookup_elem` into a small shared hash
//! map the program never writes becomes a few inline key compares against the map's entries,
//! each yielding its slot's value address (`lddw map_entry`), or null. The snapshot is a
//! [`MapPin`]; the guard runs the specialised program only while no write has begun since, so a
//! control-plane update sends the next packet to the original (and the chain manager
//! re-specialises to the new contents).
//!
//! Value bytes all entries share are folded too (a service map whose entries all have four
//! backends makes `% count` a constant): a value rewritten by the control plane is a write, so
//! the pin breaks and the original runs; values of a map some loaded program stores into in
//! place (which no count sees) are never folded. Maps the
//! program writes (update or delete helpers, stores into their values) are left alone: every
//! packet would break the pin.

use super::analysis::Coverage;
use crate::insn::{class, jmp, mem, op, pseudo, Insn, SRC_K, SRC_X};
use crate::maps::{Map, MapPin};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Entries a map may hold for its lookups to be inlined (each costs a few compares).
pub const MAX_INLINE_ENTRIES: usize = 4;

/// A program with lookups inlined, and the snapshots it relies on.
#[derive(Debug, Clone)]
pub struct Folded {
    pub insns: Vec<Insn>,
    pub pins: Vec<MapPin>,
    /// Per inlined map (by index): the value bytes every entry has in common (`None` where
    /// they differ): loads of those are constants while the pin holds.
    pub agreed: BTreeMap<u32, Vec<Option<u8>>>,
    /// Lookup calls replaced.
    pub lookups: usize,
}

/// Inline the lookups `cov` found into small maps `prog` never writes (`maps` in the program's
/// map order, as loaded). `None`: nothing to inline.
pub fn fold_small_maps(prog: &[Insn], cov: &Coverage, maps: &[Arc<Map>]) -> Option<Folded> {
    let mut pins: BTreeMap<u32, Option<MapPin>> = BTreeMap::new();
    let mut sites: BTreeMap<usize, Vec<Insn>> = BTreeMap::new();
    for (&pc, site) in &cov.lookups {
        let Some((map, key_off)) = *site else { continue };
        if cov.written_maps.contains(&map) || !cov.visited.get(pc).copied().unwrap_or(false) {
            continue;
        }
        let pin = pins
            .entry(map)
            .or_insert_with(|| maps.get(map as usize).and_then(|m| m.pin(MAX_INLINE_ENTRIES)));
        if let Some(pin) = pin {
            sites.insert(pc, inline_lookup(map, key_off, pin));
        }
    }
    if sites.is_empty() {
        return None;
    }
    let lookups = sites.len();
    let insns = splice(prog, &sites)?;
    let used: Vec<u32> = cov
        .lookups
        .iter()
        .filter(|(pc, _)| sites.contains_key(pc))
        .filter_map(|(_, s)| s.map(|(m, _)| m))
        .collect();
    let pins: Vec<(u32, MapPin)> = pins
        .into_iter()
        .filter(|(m, _)| used.contains(m))
        .filter_map(|(m, p)| Some((m, p?)))
        .collect();
    let agreed = pins.iter().map(|(m, p)| (*m, agreed_bytes(p))).collect();
    Some(Folded { insns, pins: pins.into_iter().map(|(_, p)| p).collect(), agreed, lookups })
}

/// The value bytes all of `pin`'s entries share (none where a program stores into the values
/// in place: only updates are counted).
fn agreed_bytes(pin: &MapPin) -> Vec<Option<u8>> {
    let Some(first) = pin.entries.first().filter(|_| pin.values_stable) else { return Vec::new() };
    (0..first.value.len())
        .map(|k| {
            let b = first.value[k];
            pin.entries.iter().all(|e| e.value.get(k) == Some(&b)).then_some(b)
        })
        .collect()
}

/// A key's bytes `at..at + size` (one load) and the little-endian value each entry has there.
struct Chunk {
    at: usize,
    size: usize,
    values: Vec<u64>,
}

/// The key cut into the widest loads the stack offset's alignment allows.
fn chunks(key_off: i64, pin: &MapPin) -> Vec<Chunk> {
    let len = pin.entries.first().map_or(0, |e| e.key.len());
    let mut out = Vec::new();
    let mut k = 0usize;
    while k < len {
        let at = key_off + k as i64;
        let size = [8usize, 4, 2, 1]
            .into_iter()
            .find(|s| k + s <= len && at.rem_euclid(*s as i64) == 0)
            .unwrap_or(1);
        let values = (pin.entries.iter())
            .map(|e| {
                let mut word = [0u8; 8];
                word[..size].copy_from_slice(&e.key[k..k + size]);
                u64::from_le_bytes(word)
            })
            .collect();
        out.push(Chunk { at: k, size, values });
        k += size;
    }
    out
}

/// `ldx r3, [r2 + at]` of `size` bytes.
fn load_chunk(out: &mut Vec<Insn>, at: usize, size: usize) {
    let width = match size {
        8 => mem::DW,
        4 => mem::W,
        2 => mem::H,
        _ => mem::B,
    };
    out.push(Insn::new(class::LDX | mem::MEM | width, 3, 2, at as i16, 0));
}

/// `if r3 <op> value goto ?` for a chunk of `size` bytes (r4 is scratch for a 64-bit value
/// with no immediate form); returns the jump's index, for its offset to be set.
fn compare_chunk(out: &mut Vec<Insn>, size: usize, value: u64, op: u8) -> usize {
    match (size, i32::try_from(value as i64)) {
        (8, Err(_)) => {
            out.push(Insn::new(op::LDDW, 4, 0, 0, value as u32 as i32));
            out.push(Insn::new(0, 0, 0, 0, (value >> 32) as u32 as i32));
            out.push(Insn::new(class::JMP | op | SRC_X, 3, 4, 0, 0));
        }
        (8, Ok(imm)) => out.push(Insn::new(class::JMP | op | SRC_K, 3, 0, 0, imm)),
        // 32-bit compare: the loaded word is zero-extended, the immediate's low 32 bits are
        // the value.
        _ => out.push(Insn::new(class::JMP32 | op | SRC_K, 3, 0, 0, value as u32 as i32)),
    }
    out.len() - 1
}

/// `r0 = map_lookup_elem(r1 = map, r2 = key on the stack at key_off)` as compares of the key
/// with `pin`'s entries: the parts of the key all entries share are compared once; where only
/// one part tells the entries apart (a service map keyed by address, one port and protocol),
/// it is loaded once and compared with each entry's value; otherwise each entry's differing
/// parts are compared in turn. r3 and r4 are scratch (a call clobbers r1 to r5 anyway).
fn inline_lookup(map: u32, key_off: i64, pin: &MapPin) -> Vec<Insn> {
    let mut out: Vec<Insn> = Vec::new();
    let mut to_miss: Vec<usize> = Vec::new();
    let mut to_end: Vec<usize> = Vec::new();
    let (common, differing): (Vec<Chunk>, Vec<Chunk>) =
        chunks(key_off, pin).into_iter().partition(|c| c.values.windows(2).all(|w| w[0] == w[1]));
    for c in &common {
        load_chunk(&mut out, c.at, c.size);
        to_miss.push(compare_chunk(&mut out, c.size, c.values[0], jmp::JNE));
    }
    let hit = |out: &mut Vec<Insn>, to_end: &mut Vec<usize>, slot: usize| {
        out.push(Insn::new(op::LDDW, 0, pseudo::MAP_ENTRY, 0, map as i32));
        out.push(Insn::new(0, 0, 0, 0, slot as i32));
        to_end.push(out.len());
        out.push(Insn::new(op::JA, 0, 0, 0, 0));
    };
    if let [c] = differing.as_slice() {
        load_chunk(&mut out, c.at, c.size);
        let to_hit: Vec<usize> =
            c.values.iter().map(|v| compare_chunk(&mut out, c.size, *v, jmp::JEQ)).collect();
        to_miss.push(out.len());
        out.push(Insn::new(op::JA, 0, 0, 0, 0));
        for (j, e) in to_hit.into_iter().zip(&pin.entries) {
            let here = out.len();
            out[j].off = (here - j - 1) as i16;
            hit(&mut out, &mut to_end, e.slot);
        }
    } else {
        for (n, e) in pin.entries.iter().enumerate() {
            let mut to_next: Vec<usize> = Vec::new();
            for c in &differing {
                load_chunk(&mut out, c.at, c.size);
                to_next.push(compare_chunk(&mut out, c.size, c.values[n], jmp::JNE));
            }
            hit(&mut out, &mut to_end, e.slot);
            let next = out.len();
            for j in to_next {
                out[j].off = (next - j - 1) as i16;
            }
        }
    }
    let miss = out.len();
    out.push(Insn::new(op::MOV64_IMM, 0, 0, 0, 0));
    for j in to_miss {
        out[j].off = (miss - j - 1) as i16;
    }
    let end = out.len();
    for j in to_end {
        out[j].off = (end - j - 1) as i16;
    }
    out
}

/// `prog` with the instruction at each key of `sites` replaced by its sequence (which jumps
/// only within itself or to just past its end); every other jump and call retargeted.
fn splice(prog: &[Insn], sites: &BTreeMap<usize, Vec<Insn>>) -> Option<Vec<Insn>> {
    let mut start = Vec::with_capacity(prog.len() + 1);
    let mut n = 0i64;
    for (pc, _) in prog.iter().enumerate() {
        start.push(n);
        n += sites.get(&pc).map_or(1, |s| s.len() as i64);
    }
    start.push(n);
    let mut out = Vec::with_capacity(n as usize);
    let mut pc = 0;
    while pc < prog.len() {
        if let Some(seq) = sites.get(&pc) {
            out.extend_from_slice(seq);
            pc += 1;
            continue;
        }
        let mut i = prog[pc];
        if i.is_lddw() {
            out.push(i);
            out.extend(prog.get(pc + 1).copied());
            pc += 2;
            continue;
        }
        if let Some(t) = super::rewrite::target(pc, i) {
            let t = usize::try_from(t).ok().and_then(|t| start.get(t)).copied()?;
            let rel = t - start[pc] - 1;
            if i.op() == jmp::CALL || (i.class() == class::JMP32 && i.op() == jmp::JA) {
                i.imm = i32::try_from(rel).ok()?;
            } else {
                i.off = i16::try_from(rel).ok()?;
            }
        }
        out.push(i);
        pc += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maps::{MapDef, MapKind};

    fn map(entries: &[[u8; 12]]) -> Arc<Map> {
        let def = MapDef { kind: MapKind::Hash, key_size: 12, value_size: 8, max_entries: 16 };
        let m = Arc::new(Map::new("t/m", def, 1).unwrap());
        for (n, k) in entries.iter().enumerate() {
            m.update_copy(k, &(n as u64 + 1).to_le_bytes(), 0).unwrap();
        }
        m
    }

    #[test]
    fn a_pin_breaks_on_every_write_and_refuses_big_maps() {
        let m = map(&[[1; 12], [2; 12]]);
        let pin = m.pin(MAX_INLINE_ENTRIES).unwrap();
        assert_eq!(pin.entries.len(), 2);
        assert!(pin.holds());
        m.update_copy(&[1; 12], &9u64.to_le_bytes(), 0).unwrap();
        assert!(!pin.holds(), "a value rewritten in place still counts as a write");
        let pin = m.pin(MAX_INLINE_ENTRIES).unwrap();
        assert!(m.delete_copy(&[7; 12]).is_err());
        assert!(!pin.holds(), "even a failed delete began a write");
        assert!(map(&[[1; 12], [2; 12], [3; 12], [4; 12], [5; 12]]).pin(4).is_none());
    }

    #[test]
    fn values_a_program_stores_into_are_never_folded() {
        let m = map(&[[1; 12], [2; 12]]);
        let pin = m.pin(MAX_INLINE_ENTRIES).unwrap();
        assert!(pin.values_stable);
        assert_eq!(agreed_bytes(&pin)[1..8], [Some(0); 7], "both values are below 256");
        // A program that stores into the values is loaded: that counts as a write...
        m.note_value_stores();
        assert!(!pin.holds());
        // ...and no later snapshot folds the values (the keys still may be inlined).
        let pin = m.pin(MAX_INLINE_ENTRIES).unwrap();
        assert!(!pin.values_stable);
        assert!(agreed_bytes(&pin).is_empty());
        m.note_value_stores();
        assert!(pin.holds(), "only the first such program counts");
    }

    #[test]
    fn jumps_across_a_spliced_site_are_retargeted() {
        // 0: ja +2 (to 3); 1: call 1 (replaced by three insns); 2: exit; 3: ja -3 (to 1)
        let prog = [
            Insn::new(op::JA, 0, 0, 2, 0),
            Insn::new(op::CALL, 0, 0, 0, 1),
            Insn::new(op::EXIT, 0, 0, 0, 0),
            Insn::new(op::JA, 0, 0, -3, 0),
        ];
        let seq = vec![Insn::new(op::MOV64_IMM, 0, 0, 0, 7); 3];
        let out = splice(&prog, &BTreeMap::from([(1, seq)])).unwrap();
        assert_eq!(out.len(), 6);
        assert_eq!(out[0].off, 4, "to the exit, now at 4");
        assert_eq!(out[5].off, -5, "back to the sequence's start at 1");
    }
}
