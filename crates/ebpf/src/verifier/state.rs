//! The verifier's abstract machine state: register types, stacks, call frames, and the
//! "covers" relation used to prune paths that an already verified state includes.

use super::scalar::Scalar;
use crate::interp::STACK_SIZE;

/// What a pointer points into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PtrKind {
    /// The program's context (`struct xdp_md` for XDP programs).
    Ctx,
    /// A memory region of known size (r1 of the conformance environment).
    Mem { size: u64 },
    /// The stack of call frame `frame`; the base is the frame's top (r10).
    Stack { frame: u8 },
    /// Packet data; `range` bytes from the pointer's base are known to be in the packet.
    Packet,
    /// One past the packet's last byte (`data_end`): compare only.
    PacketEnd,
    /// The packet's metadata start (`data_meta`): compare only (hotplane keeps no metadata).
    PacketMeta,
    /// A value of map `map`.
    MapValue { map: u32 },
    /// A value of map `map`, or null: compare with 0 before use.
    MapValueOrNull { map: u32 },
    /// A map itself (argument to map helpers).
    Map { map: u32 },
}

/// A pointer: a base, a fixed offset and a variable offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ptr {
    pub kind: PtrKind,
    pub off: i64,
    /// The variable part of the offset (a constant zero for most pointers).
    pub var: Scalar,
    /// Copies of a pointer share an id: a packet bounds check or a null check on one applies to
    /// all of them.
    pub id: u32,
    /// Packet pointers: bytes from `base + var` known to be inside the packet.
    pub range: u64,
}

impl Ptr {
    pub fn new(kind: PtrKind, id: u32) -> Self {
        Self { kind, off: 0, var: Scalar::constant(0), id, range: 0 }
    }

    /// Whether the variable part is a known constant (then it can be folded into `off`).
    pub fn fixed(&self) -> Option<i64> {
        self.var.as_const().map(|v| self.off.wrapping_add(v as i64))
    }
}

/// The type of a register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reg {
    Uninit,
    Scalar(Scalar),
    Ptr(Ptr),
}

impl Reg {
    pub fn unknown() -> Reg {
        Reg::Scalar(Scalar::UNKNOWN)
    }

    pub fn constant(v: u64) -> Reg {
        Reg::Scalar(Scalar::constant(v))
    }

    pub fn describe(&self) -> String {
        match self {
            Reg::Uninit => "uninitialised".into(),
            Reg::Scalar(s) => match s.as_const() {
                Some(c) => format!("the constant {c:#x}"),
                None => format!("a scalar in [{}, {}]", s.umin, s.umax),
            },
            Reg::Ptr(p) => match p.kind {
                PtrKind::Ctx => "the context pointer".into(),
                PtrKind::Mem { .. } => "a memory pointer".into(),
                PtrKind::Stack { .. } => "a stack pointer".into(),
                PtrKind::Packet => "a packet pointer".into(),
                PtrKind::PacketEnd => "the packet end pointer (data_end)".into(),
                PtrKind::PacketMeta => "the packet metadata pointer".into(),
                PtrKind::MapValue { .. } => "a map value pointer".into(),
                PtrKind::MapValueOrNull { .. } => "a map value pointer that may be null".into(),
                PtrKind::Map { .. } => "a map".into(),
            },
        }
    }
}

/// One frame's 512-byte stack. Offsets are negative from the frame top, stored as index
/// `STACK_SIZE + off`. Bitmaps keep states small: they are cloned at every branch and compared
/// at every prune point.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Stack {
    /// Bit i: byte i has been written.
    init: [u64; STACK_SIZE / 64],
    /// Bit k: slot k (bytes 8k..8k+8) holds a whole spilled register, found in `spills`.
    spill: u64,
    pub spills: Vec<(u16, Reg)>,
}

impl Stack {
    pub fn spill_at(&self, slot: u16) -> Option<&Reg> {
        if self.spill >> slot & 1 == 0 {
            return None;
        }
        self.spills.iter().find(|(s, _)| *s == slot).map(|(_, r)| r)
    }

    /// Whether the 8-byte slot holding byte `idx` is a spilled register.
    pub fn is_spill(&self, idx: usize) -> bool {
        self.spill >> (idx / 8) & 1 != 0
    }

    /// Forget the spill in a slot (its bytes stay initialised data).
    fn unspill(&mut self, slot: u16) {
        if self.spill >> slot & 1 != 0 {
            self.spill &= !(1 << slot);
            self.spills.retain(|(s, _)| *s != slot);
        }
    }

    fn mark(&mut self, idx: usize, n: usize) {
        for i in idx..idx + n {
            self.init[i / 64] |= 1 << (i % 64);
        }
    }

    /// Mark `[idx, idx + n)` written with plain data.
    pub fn write_misc(&mut self, idx: usize, n: usize) {
        for slot in (idx / 8)..(idx + n).div_ceil(8) {
            self.unspill(slot as u16);
        }
        self.mark(idx, n);
    }

    /// Spill a whole register to the aligned slot at `idx`.
    pub fn write_spill(&mut self, idx: usize, r: Reg) {
        let slot = (idx / 8) as u16;
        self.unspill(slot);
        self.mark(idx, 8);
        self.spill |= 1 << slot;
        self.spills.push((slot, r));
    }

    /// Slots holding a spilled pointer that `[idx, idx + n)` touches, and whether the range
    /// covers each whole. Reading part of one, or overwriting part of one, would leak
    /// pointer bits as data.
    pub fn pointer_spills(&self, idx: usize, n: usize) -> impl Iterator<Item = (u16, bool)> + '_ {
        (idx / 8..(idx + n).div_ceil(8)).filter_map(move |slot| {
            let slot = slot as u16;
            match self.spill_at(slot) {
                Some(Reg::Ptr(_)) => {
                    let (lo, hi) = (slot as usize * 8, slot as usize * 8 + 8);
                    Some((slot, idx <= lo && idx + n >= hi))
                }
                _ => None,
            }
        })
    }

    pub fn initialised(&self, idx: usize, n: usize) -> bool {
        (idx..idx + n).all(|i| self.init[i / 64] >> (i % 64) & 1 != 0)
    }

    /// `self` (an explored state) includes every stack `new` describes.
    fn covers(&self, new: &Stack, ids: &mut IdMap) -> bool {
        // Bytes initialised here must be initialised there.
        if self.init.iter().zip(&new.init).any(|(a, b)| a & !b != 0) {
            return false;
        }
        // Spilled registers here must be spilled there, and covered.
        if self.spill & !new.spill != 0 {
            return false;
        }
        // A pointer spilled there is covered only by a spill here: where this state has data
        // (even one byte of the slot), a read of the slot is a scalar here and would be the
        // pointer's bits there (an address leak once that path is pruned).
        let data_over_pointer = new.spills.iter().any(|(slot, r)| {
            matches!(r, Reg::Ptr(_))
                && self.spill >> slot & 1 == 0
                && (0..8).any(|b| {
                    let i = *slot as usize * 8 + b;
                    self.init[i / 64] >> (i % 64) & 1 != 0
                })
        });
        if data_over_pointer {
            return false;
        }
        self.spills
            .iter()
            .all(|(slot, r)| new.spill_at(*slot).is_some_and(|n| reg_covers(r, n, ids)))
    }
}

/// One call frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    pub regs: [Reg; 11],
    pub stack: Stack,
    /// Where execution resumes in the caller when this frame exits.
    pub ret_pc: usize,
}

/// The whole abstract state at one instruction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub frames: Vec<Frame>,
    /// Bytes from `data` known to be in the packet for a pointer freshly read from the
    /// context ([`super::Context::XdpMinLen`]); 0 once a helper has moved the packet.
    pub packet_min: u64,
}

impl State {
    pub fn frame(&self) -> &Frame {
        self.frames.last().expect("a state always has a frame")
    }

    pub fn frame_mut(&mut self) -> &mut Frame {
        self.frames.last_mut().expect("a state always has a frame")
    }

    pub fn reg(&self, r: u8) -> Reg {
        self.frame().regs[r as usize]
    }

    pub fn set(&mut self, r: u8, v: Reg) {
        self.frame_mut().regs[r as usize] = v;
    }

    /// Apply `f` to every register and spilled register of every frame.
    pub fn for_each_reg(&mut self, mut f: impl FnMut(&mut Reg)) {
        for fr in &mut self.frames {
            for r in &mut fr.regs {
                f(r);
            }
            for (_, r) in &mut fr.stack.spills {
                f(r);
            }
        }
    }

    /// Whether every concrete state described by `new` is described by `self`: then a path
    /// from `new` is safe if it was from `self`.
    pub fn covers(&self, new: &State) -> bool {
        if self.frames.len() != new.frames.len() || self.packet_min > new.packet_min {
            return false;
        }
        let mut ids = IdMap::default();
        for (a, b) in self.frames.iter().zip(&new.frames) {
            if a.ret_pc != b.ret_pc {
                return false;
            }
            if !a.regs.iter().zip(&b.regs).all(|(x, y)| reg_covers(x, y, &mut ids)) {
                return false;
            }
            if !a.stack.covers(&b.stack, &mut ids) {
                return false;
            }
        }
        true
    }
}

fn reg_covers(old: &Reg, new: &Reg, ids: &mut IdMap) -> bool {
    match (old, new) {
        (Reg::Uninit, _) => true,
        (Reg::Scalar(a), Reg::Scalar(b)) => a.contains(b),
        (Reg::Ptr(a), Reg::Ptr(b)) => {
            a.kind == b.kind
                && a.off == b.off
                && a.var.contains(&b.var)
                && a.range <= b.range
                && ids.consistent(a.id, b.id)
        }
        _ => false,
    }
}

/// Pointer ids of an explored state mapped to those of a new state: copies of one pointer
/// there must be copies of one pointer here. A few entries: a vector beats a hash map.
#[derive(Default)]
pub struct IdMap(Vec<(u32, u32)>);

impl IdMap {
    fn consistent(&mut self, old: u32, new: u32) -> bool {
        match self.0.iter().find(|(o, _)| *o == old) {
            Some((_, n)) => *n == new,
            None => {
                self.0.push((old, new));
                true
            }
        }
    }
}
