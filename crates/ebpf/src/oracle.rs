//! The memory-safety oracle: a checked mode of the interpreter that holds a run to exactly what
//! the verifier promises, so that any verified program it catches is a verifier bug.
//!
//! The plain interpreter only keeps a program inside coarse regions (the whole stack area, the
//! packet's buffer, whole map storage). Here every load, store, atomic and helper memory
//! argument must lie inside
//!
//! - the packet between `data` and `data_end` (read from the context at each access, so helpers
//!   that move the packet are followed),
//! - the stack of a live call frame, and only bytes already written when read,
//! - a field of the context (read-only, at a field's offset and size),
//! - a map value the program was given (by a lookup, or `lddw map_value`), within its size,
//!
//! and a pointer must never be stored outside the stack nor returned. Each call frame gets a
//! stack slot of its own that is not reused until many other calls have come and gone, so a
//! pointer kept into a returned function's stack lands in a dead slot and is caught. A
//! violation is reported before memory is touched.

use crate::ctx::{XdpCtx, XDP_FIELDS};
use crate::helpers::{Arg, Helper, Helpers, Ret};
use crate::insn::Insn;
use crate::interp::{self, AccessKind, Memory, Region, RunError, MAX_CALL_DEPTH, STACK_SIZE};

/// Stack slots frames rotate through: a returned frame's slot stays dead for at least
/// `STACK_SLOTS - MAX_CALL_DEPTH` further calls.
const STACK_SLOTS: usize = 4 * MAX_CALL_DEPTH;

/// An access the verifier should have ruled out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instruction {pc}: {kind}")]
pub struct Violation {
    pub pc: usize,
    pub kind: ViolationKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViolationKind {
    #[error("{} of {len} bytes at {addr:#x} is outside the packet, the live stack, the context and the map values", if *write { "write" } else { "read" })]
    OutOfBounds { addr: u64, len: usize, write: bool },
    #[error("access of {len} bytes at {addr:#x} is in the stack of a function that returned")]
    DeadFrame { addr: u64, len: usize },
    #[error("read of {len} stack bytes at {addr:#x} that were never written")]
    UninitialisedStack { addr: u64, len: usize },
    #[error("{} of {len} bytes at context offset {offset} is not a field access", if *write { "write" } else { "read" })]
    ContextField { offset: u64, len: usize, write: bool },
    #[error("the pointer {value:#x} leaks into {place}")]
    PointerLeak { value: u64, place: &'static str },
    #[error("{helper} argument {arg}: {reason}")]
    HelperArg { helper: &'static str, arg: usize, reason: &'static str },
}

/// A map as the oracle sees it.
#[derive(Debug, Clone, Copy)]
pub struct CheckedMap {
    /// The address programs hold for the map (`lddw map`).
    pub addr: u64,
    pub key_size: u32,
    pub value_size: u32,
    /// All of the map's storage (for recognising leaked pointers).
    pub storage: Region,
}

/// What r1 points to.
#[derive(Debug, Clone, Copy)]
pub enum CheckedContext {
    /// An XDP context at `ctx`; the packet lives in `buffer` (headroom and tailroom included).
    Xdp { ctx: u64, buffer: Region },
    /// Plain memory (the conformance environment: r1 = start, r2 = length).
    Mem(Region),
}

/// Run `prog` (linked: map references are addresses) in the checked mode.
///
/// # Safety
/// `ctx` must describe live memory: for `Xdp`, an `XdpCtx` whose `data`..`data_end` (at every
/// moment of the run) lies inside `buffer`; map addresses and regions must be those of live
/// maps. Helpers are called as by the plain interpreter, after their memory arguments passed
/// the oracle.
pub unsafe fn run_checked(
    prog: &[Insn],
    helpers: &Helpers,
    ctx: CheckedContext,
    maps: &[CheckedMap],
    map_values: &[Region],
    budget: u64,
) -> Result<u64, RunError> {
    let mut stack = vec![0u64; STACK_SLOTS * STACK_SIZE / 8];
    let slots_base = stack.as_mut_ptr() as u64;
    let mut oracle = Oracle {
        ctx,
        slots_base,
        initialised: vec![false; STACK_SLOTS * STACK_SIZE],
        live: vec![0],
        last_slot: 0,
        values: map_values.to_vec(),
        maps,
    };
    let (r1, r2) = match ctx {
        CheckedContext::Xdp { ctx, .. } => (ctx, 0),
        CheckedContext::Mem(r) => (r.start, r.len),
    };
    interp::run(&mut oracle, prog, helpers, r1, r2, slots_base + STACK_SIZE as u64, budget)
}

struct Oracle<'a> {
    ctx: CheckedContext,
    /// `STACK_SLOTS` frames of `STACK_SIZE` bytes.
    slots_base: u64,
    /// Per stack byte: written since its frame was entered.
    initialised: Vec<bool>,
    /// Slots of the live frames, outermost first.
    live: Vec<usize>,
    last_slot: usize,
    /// Map values the program holds.
    values: Vec<Region>,
    maps: &'a [CheckedMap],
}

fn within(addr: u64, end: u64, r: &Region) -> bool {
    addr >= r.start && end <= r.start.saturating_add(r.len)
}

impl Oracle<'_> {
    fn packet(&self) -> Option<Region> {
        match self.ctx {
            CheckedContext::Xdp { ctx, .. } => {
                // SAFETY: per `run_checked`'s contract `ctx` is a live XdpCtx; helpers that
                // move the packet update it, so it is read afresh.
                let c = unsafe { (ctx as *const XdpCtx).read() };
                Some(Region {
                    start: c.data,
                    len: c.data_end.saturating_sub(c.data),
                    writable: true,
                })
            }
            CheckedContext::Mem(r) => Some(r),
        }
    }

    /// Whether `v` points into memory a program must never see as a number.
    fn is_pointer(&self, v: u64) -> bool {
        let inside = |r: &Region| v >= r.start && v <= r.start.saturating_add(r.len);
        let stack = Region {
            start: self.slots_base,
            len: (STACK_SLOTS * STACK_SIZE) as u64,
            writable: true,
        };
        let ctx = match self.ctx {
            CheckedContext::Xdp { ctx, buffer } => {
                inside(&buffer)
                    || inside(&Region {
                        start: ctx,
                        len: std::mem::size_of::<XdpCtx>() as u64,
                        writable: false,
                    })
            }
            CheckedContext::Mem(r) => inside(&r),
        };
        ctx || inside(&stack)
            || self.maps.iter().any(|m| v == m.addr || inside(&m.storage))
            || self.values.iter().any(inside)
    }

    fn violation(pc: usize, kind: ViolationKind) -> RunError {
        RunError::Violation(Violation { pc, kind })
    }

    fn helper_map(&self, h: &Helper, regs: &[u64; 11]) -> Option<&CheckedMap> {
        let k = h.args.iter().position(|a| matches!(a, Arg::Map | Arg::DevMap))?;
        self.maps.iter().find(|m| m.addr == regs[k + 1])
    }
}

impl Memory for Oracle<'_> {
    fn check(
        &mut self,
        pc: usize,
        addr: u64,
        len: usize,
        kind: AccessKind,
    ) -> Result<(), RunError> {
        let write = kind.writes();
        let out = || Self::violation(pc, ViolationKind::OutOfBounds { addr, len, write });
        let end = addr.checked_add(len as u64).ok_or_else(out)?;
        let stack_end = self.slots_base + (STACK_SLOTS * STACK_SIZE) as u64;
        if addr >= self.slots_base && addr < stack_end {
            let idx = (addr - self.slots_base) as usize;
            let slot = idx / STACK_SIZE;
            if end > self.slots_base + ((slot + 1) * STACK_SIZE) as u64 {
                return Err(out());
            }
            if !self.live.contains(&slot) {
                return Err(Self::violation(pc, ViolationKind::DeadFrame { addr, len }));
            }
            let bytes = &mut self.initialised[idx..idx + len];
            if kind != AccessKind::Write && !bytes.iter().all(|b| *b) {
                return Err(Self::violation(pc, ViolationKind::UninitialisedStack { addr, len }));
            }
            bytes.fill(true);
            return Ok(());
        }
        if let CheckedContext::Xdp { ctx, .. } = self.ctx {
            let size = std::mem::size_of::<XdpCtx>() as u64;
            if addr >= ctx && addr < ctx + size {
                let offset = addr - ctx;
                let field =
                    XDP_FIELDS.iter().any(|f| f.ctx_offset as u64 == offset && f.ctx_size == len);
                if write || !field {
                    return Err(Self::violation(
                        pc,
                        ViolationKind::ContextField { offset, len, write },
                    ));
                }
                return Ok(());
            }
        }
        if self.packet().is_some_and(|p| within(addr, end, &p))
            || self.values.iter().any(|v| within(addr, end, v))
        {
            return Ok(());
        }
        Err(out())
    }

    fn enter_frame(&mut self, pc: usize, _caller_r10: u64) -> Result<u64, RunError> {
        let slot = (1..=STACK_SLOTS)
            .map(|k| (self.last_slot + k) % STACK_SLOTS)
            .find(|s| !self.live.contains(s))
            .ok_or(RunError::CallDepth { pc })?;
        self.last_slot = slot;
        self.live.push(slot);
        self.initialised[slot * STACK_SIZE..(slot + 1) * STACK_SIZE].fill(false);
        Ok(self.slots_base + ((slot + 1) * STACK_SIZE) as u64)
    }

    fn leave_frame(&mut self) {
        self.live.pop();
    }

    fn before_helper(&mut self, pc: usize, h: &Helper, regs: &[u64; 11]) -> Result<(), RunError> {
        let bad = |arg: usize, reason| {
            Self::violation(pc, ViolationKind::HelperArg { helper: h.name, arg, reason })
        };
        let map = self.helper_map(h, regs).copied();
        for (k, arg) in h.args.iter().enumerate() {
            let v = regs[k + 1];
            match arg {
                Arg::Map | Arg::DevMap if map.is_none() => return Err(bad(k + 1, "not a map")),
                Arg::MapKey | Arg::MapValue => {
                    let m = map.ok_or_else(|| bad(k + 1, "no map argument before it"))?;
                    let n = if *arg == Arg::MapKey { m.key_size } else { m.value_size };
                    self.check(pc, v, n as usize, AccessKind::Read)?;
                }
                Arg::Mem | Arg::UninitMem => {
                    let n = regs[k + 2];
                    if n > 1 << 16 {
                        return Err(bad(k + 2, "size above 64 KiB"));
                    }
                    if n > 0 {
                        let kind =
                            if *arg == Arg::Mem { AccessKind::Read } else { AccessKind::Write };
                        self.check(pc, v, n as usize, kind)?;
                    }
                }
                Arg::Ctx => {
                    let ctx = match self.ctx {
                        CheckedContext::Xdp { ctx, .. } => ctx,
                        CheckedContext::Mem(r) => r.start,
                    };
                    if v != ctx {
                        return Err(bad(k + 1, "not the context"));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn after_helper(&mut self, h: &Helper, regs: &[u64; 11], r0: u64) {
        if h.ret == Ret::MapValueOrNull && r0 != 0 {
            if let Some(m) = self.helper_map(h, regs) {
                let value = Region { start: r0, len: m.value_size as u64, writable: true };
                if !self.values.contains(&value) {
                    self.values.push(value);
                }
            }
        }
    }

    fn stored(&mut self, pc: usize, addr: u64, len: usize, value: u64) -> Result<(), RunError> {
        let on_stack =
            addr >= self.slots_base && addr < self.slots_base + (STACK_SLOTS * STACK_SIZE) as u64;
        if len == 8 && !on_stack && self.is_pointer(value) {
            return Err(Self::violation(
                pc,
                ViolationKind::PointerLeak { value, place: "memory outside the stack" },
            ));
        }
        Ok(())
    }

    fn compared(&mut self, pc: usize, expected: u64) -> Result<(), RunError> {
        if self.is_pointer(expected) {
            return Err(Self::violation(
                pc,
                ViolationKind::PointerLeak { value: expected, place: "a cmpxchg comparison" },
            ));
        }
        Ok(())
    }

    fn exit(&mut self, pc: usize, r0: u64) -> Result<(), RunError> {
        if self.is_pointer(r0) {
            return Err(Self::violation(
                pc,
                ViolationKind::PointerLeak { value: r0, place: "the return value" },
            ));
        }
        Ok(())
    }
}
