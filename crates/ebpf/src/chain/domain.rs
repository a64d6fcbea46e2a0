//! The shape interpreter's abstract state: the verifier's register types and scalars, plus
//! byte facts for the packet and the stack, and per register the memory byte each of its 8
//! byte lanes was loaded from ("provenance"), so that a branch on a loaded value teaches the
//! memory it came from.
//!
//! A lane `Some(Lane { loc, mask })` at position i claims: byte i of the register equals
//! `mem[loc] & mask`. A claim stays true until `mem[loc]` is written, so every write forgets
//! the lanes that point at the bytes it changes.

use super::shape::{ByteFact, PacketShape};
use crate::interp::STACK_SIZE;
use crate::verifier::scalar::{Scalar, Tnum};
use crate::verifier::state::{Ptr, PtrKind, Reg};
use std::collections::BTreeMap;

/// Where a byte lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Loc {
    /// Offset from `data`.
    Packet(u16),
    /// Byte `idx` (0..512, `STACK_SIZE + offset`) of call frame `frame`'s stack.
    Stack { frame: u8, idx: u16 },
}

/// A run of bytes a write changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Span {
    /// Packet offsets `[start, end)`.
    Packet { start: u32, end: u32 },
    /// Stack indices `[start, end)` of one frame.
    Stack { frame: u8, start: u16, end: u16 },
    /// Every stack byte of frames at or above `frame` (they returned).
    FramesFrom(u8),
    /// The whole packet (its bytes moved).
    AllPacket,
}

impl Span {
    pub fn contains(self, loc: Loc) -> bool {
        match (self, loc) {
            (Span::Packet { start, end }, Loc::Packet(o)) => (start..end).contains(&(o as u32)),
            (Span::Stack { frame, start, end }, Loc::Stack { frame: f, idx }) => {
                f == frame && (start..end).contains(&idx)
            }
            (Span::FramesFrom(min), Loc::Stack { frame, .. }) => frame >= min,
            (Span::AllPacket, Loc::Packet(_)) => true,
            _ => false,
        }
    }
}

/// The provenance of one byte lane of a register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Lane {
    pub loc: Loc,
    pub mask: u8,
}

pub(super) type Lanes = [Option<Lane>; 8];
pub(super) const NO_LANES: Lanes = [None; 8];

/// A register (or spilled register): its verifier type and the provenance of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Value {
    pub reg: Reg,
    pub lanes: Lanes,
}

impl Value {
    pub const UNINIT: Value = Value { reg: Reg::Uninit, lanes: NO_LANES };

    pub fn scalar(s: Scalar) -> Value {
        Value { reg: Reg::Scalar(s), lanes: NO_LANES }
    }

    pub fn constant(v: u64) -> Value {
        Value::scalar(Scalar::constant(v))
    }

    pub fn unknown() -> Value {
        Value::scalar(Scalar::UNKNOWN)
    }

    pub fn ptr(kind: PtrKind, off: i64) -> Value {
        let mut p = Ptr::new(kind, 0);
        p.off = off;
        Value { reg: Reg::Ptr(p), lanes: NO_LANES }
    }

    /// Everything `new` may be, `self` may be (for pruning): a lane here must be the same
    /// lane there, since a lane is a claim about the concrete state.
    fn covers(&self, new: &Value) -> bool {
        let lanes = self.lanes.iter().zip(&new.lanes).all(|(a, b)| a.is_none() || a == b);
        match (self.reg, new.reg) {
            (Reg::Uninit, _) => true,
            (Reg::Scalar(a), Reg::Scalar(b)) => a.contains(&b) && lanes,
            (Reg::Ptr(a), Reg::Ptr(b)) => {
                a.kind == b.kind && a.off == b.off && a.var.contains(&b.var)
            }
            _ => false,
        }
    }
}

/// A scalar from known bits alone.
pub(super) fn scalar_of(t: Tnum) -> Scalar {
    let mut s = Scalar { t, ..Scalar::UNKNOWN };
    s.sync();
    s
}

/// Byte `i` of a tnum as a fact.
pub(super) fn tnum_byte(t: Tnum, i: usize) -> ByteFact {
    ByteFact::new((t.value >> (8 * i)) as u8, (t.mask >> (8 * i)) as u8)
}

/// One call frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Frame {
    pub regs: [Value; 11],
    /// Known stack bytes by index (absent: unknown).
    pub stack: BTreeMap<u16, ByteFact>,
    /// Whole registers spilled to 8-byte slots, by slot number (index / 8).
    pub spills: BTreeMap<u16, Value>,
    pub ret_pc: usize,
}

impl Frame {
    pub fn new(regs: [Value; 11], ret_pc: usize) -> Frame {
        Frame { regs, stack: BTreeMap::new(), spills: BTreeMap::new(), ret_pc }
    }
}

/// A path's whole state: call frames and the packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AbsState {
    pub frames: Vec<Frame>,
    pub packet: PacketShape,
}

/// A refinement showed the path cannot happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Infeasible;

impl AbsState {
    pub fn frame(&self) -> Option<&Frame> {
        self.frames.last()
    }

    pub fn reg(&self, r: u8) -> Value {
        self.frame().and_then(|f| f.regs.get(r as usize)).copied().unwrap_or(Value::UNINIT)
    }

    pub fn set(&mut self, r: u8, v: Value) {
        if let Some(slot) = self.frames.last_mut().and_then(|f| f.regs.get_mut(r as usize)) {
            *slot = v;
        }
    }

    pub fn fact(&self, loc: Loc) -> ByteFact {
        match loc {
            Loc::Packet(o) => self.packet.byte(o),
            Loc::Stack { frame, idx } => self
                .frames
                .get(frame as usize)
                .and_then(|f| f.stack.get(&idx))
                .copied()
                .unwrap_or(ByteFact::UNKNOWN),
        }
    }

    /// Set a fact without touching provenance (the byte did not change; we learned about it).
    fn learn(&mut self, loc: Loc, fact: ByteFact) {
        match loc {
            Loc::Packet(o) => self.packet.set_byte(o, fact),
            Loc::Stack { frame, idx } => {
                if let Some(f) = self.frames.get_mut(frame as usize) {
                    if fact.is_unknown() {
                        f.stack.remove(&idx);
                    } else {
                        f.stack.insert(idx, fact);
                    }
                }
            }
        }
    }

    /// Apply `f` to every register and spilled register of every frame.
    pub fn for_each_value(&mut self, mut f: impl FnMut(&mut Value)) {
        for fr in &mut self.frames {
            fr.regs.iter_mut().for_each(&mut f);
            fr.spills.values_mut().for_each(&mut f);
        }
    }

    /// Bytes in `span` are about to change: claims about them end.
    pub fn forget_lanes(&mut self, span: Span) {
        self.for_each_value(|v| {
            for lane in &mut v.lanes {
                if lane.is_some_and(|l| span.contains(l.loc)) {
                    *lane = None;
                }
            }
        });
    }

    /// Bytes `locs` are written with `facts` (one per byte).
    pub fn write(&mut self, span: Span, locs: impl Iterator<Item = (Loc, ByteFact)>) {
        self.forget_lanes(span);
        if let Span::Stack { frame, start, end } = span {
            if let Some(f) = self.frames.get_mut(frame as usize) {
                let slots = start / 8..end.div_ceil(8);
                f.spills.retain(|slot, _| !slots.contains(slot));
            }
        }
        for (loc, fact) in locs {
            self.learn(loc, fact);
        }
    }

    /// Packet bytes in `[start, end)` change to something unknown.
    pub fn clobber_packet(&mut self, start: u32, end: u32) {
        self.forget_lanes(Span::Packet { start, end });
        self.packet.bytes.retain(|o, _| !(start..end).contains(&(*o as u32)));
    }

    /// The packet's bytes moved by `by` (`adjust_head`): facts and claims move with them;
    /// those that leave the 16-bit offset range are dropped.
    pub fn shift_packet(&mut self, by: i64) {
        let moved = |o: u16| u16::try_from(o as i64 + by).ok();
        let bytes = std::mem::take(&mut self.packet.bytes);
        self.packet.bytes = bytes.into_iter().filter_map(|(o, f)| Some((moved(o)?, f))).collect();
        self.for_each_value(|v| {
            for lane in &mut v.lanes {
                if let Some(Lane { loc: Loc::Packet(o), mask }) = *lane {
                    *lane = moved(o).map(|o| Lane { loc: Loc::Packet(o), mask });
                }
            }
        });
    }

    /// Load `locs` (little-endian, lowest address first) as one value.
    pub fn load(&self, locs: &[Loc], signed: bool) -> Value {
        let n = locs.len().min(8);
        let (mut value, mut mask) = (0u64, 0u64);
        let mut lanes = NO_LANES;
        for (i, loc) in locs.iter().take(n).enumerate() {
            let f = self.fact(*loc);
            value |= (f.value as u64) << (8 * i);
            mask |= (f.mask as u64) << (8 * i);
            lanes[i] = Some(Lane { loc: *loc, mask: 0xff });
        }
        if signed && n > 0 && n < 8 {
            // The upper bytes copy the sign bit: known where it is, else unknown.
            let sign = 1u64 << (8 * n - 1);
            let upper = !0u64 << (8 * n);
            if mask & sign != 0 {
                mask |= upper;
            } else if value & sign != 0 {
                value |= upper;
            }
        }
        Value { reg: Reg::Scalar(scalar_of(Tnum { value, mask })), lanes }
    }

    /// What a branch taught about register `r`'s value reaches the memory its lanes came
    /// from, and from there every other register loaded from the same bytes.
    pub fn push_to_memory(&mut self, r: u8) -> Result<(), Infeasible> {
        let v = self.reg(r);
        let Reg::Scalar(s) = v.reg else { return Ok(()) };
        let mut changed = Vec::new();
        for (i, lane) in v.lanes.iter().enumerate() {
            let Some(lane) = lane else { continue };
            let b = tnum_byte(s.t, i);
            let known = lane.mask & !b.mask;
            if known == 0 {
                continue;
            }
            let cur = self.fact(lane.loc);
            let new = cur.meet(ByteFact::new(b.value, !known)).ok_or(Infeasible)?;
            if new != cur {
                self.learn(lane.loc, new);
                changed.push(lane.loc);
            }
        }
        if changed.is_empty() {
            return Ok(());
        }
        let facts: Vec<(Loc, ByteFact)> = changed.iter().map(|l| (*l, self.fact(*l))).collect();
        let mut feasible = true;
        self.for_each_value(|v| {
            if !pull_from_memory(v, &facts) {
                feasible = false;
            }
        });
        if feasible {
            Ok(())
        } else {
            Err(Infeasible)
        }
    }

    /// Everything `new` may be, `self` may be: a path reaching `new` where a path from `self`
    /// was already explored adds nothing.
    pub fn covers(&self, new: &AbsState) -> bool {
        let (old_pkt, new_pkt) = (&self.packet, &new.packet);
        if self.frames.len() != new.frames.len()
            || old_pkt.len.0 > new_pkt.len.0
            || new_pkt.len.1 > old_pkt.len.1
            || old_pkt.bytes.iter().any(|(o, f)| !new_pkt.byte(*o).implies(*f))
        {
            return false;
        }
        self.frames.iter().zip(&new.frames).all(|(a, b)| {
            a.ret_pc == b.ret_pc
                && a.regs.iter().zip(&b.regs).all(|(x, y)| x.covers(y))
                && a.stack.iter().all(|(i, f)| b.stack.get(i).is_some_and(|g| g.implies(*f)))
                && a.spills.iter().all(|(k, v)| b.spills.get(k).is_some_and(|w| v.covers(w)))
        })
    }
}

/// Tighten `v`'s known bits from the memory bytes its lanes show; false if they contradict.
fn pull_from_memory(v: &mut Value, facts: &[(Loc, ByteFact)]) -> bool {
    let Reg::Scalar(mut s) = v.reg else { return true };
    let mut t = s.t;
    let mut touched = false;
    for (i, lane) in v.lanes.iter().enumerate() {
        let Some(lane) = lane else { continue };
        let Some((_, f)) = facts.iter().find(|(l, _)| *l == lane.loc) else { continue };
        // The lane shows the masked bits of the byte; the rest of the lane is zero.
        let shown = ByteFact::new(f.value & lane.mask, f.mask & lane.mask);
        let Some(b) = tnum_byte(t, i).meet(shown) else { return false };
        let shift = 8 * i;
        t.value = (t.value & !(0xff << shift)) | (b.value as u64) << shift;
        t.mask = (t.mask & !(0xff << shift)) | (b.mask as u64) << shift;
        touched = true;
    }
    if touched {
        s.t = t;
        s.sync();
        if s.is_empty() {
            return false;
        }
        v.reg = Reg::Scalar(s);
    }
    true
}

/// The stack bytes `[idx, idx + n)` of `frame` as locations.
pub(super) fn stack_locs(frame: u8, idx: usize, n: usize) -> Vec<Loc> {
    (idx..idx + n).map(|i| Loc::Stack { frame, idx: i as u16 }).collect()
}

/// The packet bytes `[off, off + n)`, if every offset fits in 16 bits.
pub(super) fn packet_locs(off: i64, n: usize) -> Option<Vec<Loc>> {
    (0..n as i64).map(|k| u16::try_from(off.checked_add(k)?).ok().map(Loc::Packet)).collect()
}

/// A stack offset (from the frame top) as an index, if the access fits in the frame.
pub(super) fn stack_index(off: i64, n: usize) -> Option<usize> {
    let idx = (STACK_SIZE as i64).checked_add(off)?;
    (idx >= 0 && idx.saturating_add(n as i64) <= STACK_SIZE as i64).then_some(idx as usize)
}
