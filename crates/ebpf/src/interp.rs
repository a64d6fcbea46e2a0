//! The interpreter: the reference semantics of the instruction set (RFC 9669), used for the
//! conformance suite, for differential testing of the JIT, and for programs loaded with the
//! `interp` engine (updates flagged NO_JIT). Every memory access is checked against the regions
//! the program may touch (its stack and the regions the caller lists), so even an unverified
//! program cannot read or write outside them.

use crate::helpers::{Helper, Helpers};
use crate::insn::{alu, atomic, class, jmp, mem, pseudo, Insn};

/// Bytes of stack per frame.
pub const STACK_SIZE: usize = 512;
/// Deepest chain of local calls.
pub const MAX_CALL_DEPTH: usize = 8;

/// Memory a program may access besides its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub len: u64,
    pub writable: bool,
}

impl Region {
    pub fn of(b: &[u8], writable: bool) -> Self {
        Self { start: b.as_ptr() as u64, len: b.len() as u64, writable }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("instruction {pc}: {} of {len} bytes at {addr:#x} is outside the program's memory", if *write { "write" } else { "read" })]
    OutOfBounds { pc: usize, addr: u64, len: usize, write: bool },
    #[error("instruction {pc}: atomic access at {addr:#x} is not aligned")]
    Misaligned { pc: usize, addr: u64 },
    #[error("instruction {pc}: opcode {code:#04x} is not valid")]
    BadOpcode { pc: usize, code: u8 },
    #[error("instruction {pc}: helper {id} does not exist")]
    UnknownHelper { pc: usize, id: u64 },
    #[error("instruction {pc}: jump to {target} is outside the program")]
    BadJump { pc: usize, target: i64 },
    #[error("instruction {pc}: local calls nested deeper than {MAX_CALL_DEPTH}")]
    CallDepth { pc: usize },
    #[error("the program ran {0} instructions without finishing")]
    Budget(u64),
    /// The checked mode found an access the verifier should have ruled out.
    #[error("memory-safety violation: {0}")]
    Violation(#[from] crate::oracle::Violation),
}

#[derive(Clone, Copy)]
struct Frame {
    ret_pc: usize,
    saved: [u64; 4],
    /// The caller's frame pointer.
    r10: u64,
}

/// Local-call frames without allocation.
struct CallStack {
    frames: [Option<Frame>; MAX_CALL_DEPTH],
    depth: usize,
}

impl CallStack {
    fn len(&self) -> usize {
        self.depth
    }

    fn push(&mut self, f: Frame) {
        self.frames[self.depth] = Some(f);
        self.depth += 1;
    }

    fn pop(&mut self) -> Option<Frame> {
        if self.depth == 0 {
            return None;
        }
        self.depth -= 1;
        self.frames[self.depth].take()
    }
}

/// How an instruction touches memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessKind {
    Read,
    Write,
    /// A read-modify-write (atomic) access.
    Atomic,
}

impl AccessKind {
    pub fn writes(self) -> bool {
        self != AccessKind::Read
    }
}

/// What memory a run may touch and where call frames live: the plain interpreter checks
/// accesses against coarse regions; the checked mode ([`crate::oracle`]) against exactly what
/// the verifier promises. Every method runs before the memory is touched.
pub(crate) trait Memory {
    /// May the instruction at `pc` access `[addr, addr + len)`?
    fn check(&mut self, pc: usize, addr: u64, len: usize, kind: AccessKind)
        -> Result<(), RunError>;
    /// A local call from a frame whose top is `caller_r10`: the callee's frame top.
    fn enter_frame(&mut self, pc: usize, caller_r10: u64) -> Result<u64, RunError>;
    /// The current frame returned.
    fn leave_frame(&mut self) {}
    /// Before helper `h` runs with these registers.
    fn before_helper(
        &mut self,
        _pc: usize,
        _h: &Helper,
        _regs: &[u64; 11],
    ) -> Result<(), RunError> {
        Ok(())
    }
    /// After helper `h` returned `r0` (it was called with `regs`).
    fn after_helper(&mut self, _h: &Helper, _regs: &[u64; 11], _r0: u64) {}
    /// A store of `value` (`len` bytes) to `addr`, already checked.
    fn stored(&mut self, _pc: usize, _addr: u64, _len: usize, _value: u64) -> Result<(), RunError> {
        Ok(())
    }
    /// `cmpxchg` compares memory with `expected` (r0): it must not be an address.
    fn compared(&mut self, _pc: usize, _expected: u64) -> Result<(), RunError> {
        Ok(())
    }
    /// The program returns `r0`.
    fn exit(&mut self, _pc: usize, _r0: u64) -> Result<(), RunError> {
        Ok(())
    }
}

/// The plain interpreter's memory: the whole stack area and the caller's regions.
struct Plain<'a> {
    stack_lo: u64,
    stack_hi: u64,
    regions: &'a [Region],
}

impl Memory for Plain<'_> {
    #[inline(always)]
    fn check(
        &mut self,
        pc: usize,
        addr: u64,
        len: usize,
        kind: AccessKind,
    ) -> Result<(), RunError> {
        let write = kind.writes();
        let end = addr.checked_add(len as u64);
        let inside = |lo: u64, hi: u64| end.is_some_and(|e| addr >= lo && e <= hi);
        if inside(self.stack_lo, self.stack_hi)
            || self
                .regions
                .iter()
                .any(|r| (!write || r.writable) && inside(r.start, r.start + r.len))
        {
            Ok(())
        } else {
            Err(RunError::OutOfBounds { pc, addr, len, write })
        }
    }

    #[inline(always)]
    fn enter_frame(&mut self, _pc: usize, caller_r10: u64) -> Result<u64, RunError> {
        Ok(caller_r10 - STACK_SIZE as u64)
    }
}

/// Run `prog` from its first instruction with r1, r2 given; returns r0 at the final `exit`.
pub fn interpret(
    prog: &[Insn],
    helpers: &Helpers,
    regions: &[Region],
    r1: u64,
    r2: u64,
    budget: u64,
) -> Result<u64, RunError> {
    let mut stack = vec![0u8; STACK_BYTES];
    interpret_on(&mut stack, prog, helpers, regions, r1, r2, budget)
}

/// Stack bytes the interpreter needs: one frame per call level.
pub const STACK_BYTES: usize = STACK_SIZE * MAX_CALL_DEPTH;

/// [`interpret`] on a caller-provided stack of at least [`STACK_BYTES`] (no allocation).
pub fn interpret_on(
    stack: &mut [u8],
    prog: &[Insn],
    helpers: &Helpers,
    regions: &[Region],
    r1: u64,
    r2: u64,
    budget: u64,
) -> Result<u64, RunError> {
    assert!(stack.len() >= STACK_BYTES, "interpreter stack too small");
    let stack = &mut stack[..STACK_BYTES];
    let stack_lo = stack.as_mut_ptr() as u64;
    let stack_hi = stack_lo + stack.len() as u64;
    let mut mem = Plain { stack_lo, stack_hi, regions };
    run(&mut mem, prog, helpers, r1, r2, stack_hi, budget)
}

/// The interpreter loop, with `mem` deciding what may be touched; `r10` is the first frame's
/// top.
pub(crate) fn run<M: Memory>(
    mem: &mut M,
    prog: &[Insn],
    helpers: &Helpers,
    r1: u64,
    r2: u64,
    r10: u64,
    budget: u64,
) -> Result<u64, RunError> {
    let mut regs = [0u64; 11];
    regs[1] = r1;
    regs[2] = r2;
    regs[10] = r10;
    let mut frames = CallStack { frames: [const { None }; MAX_CALL_DEPTH], depth: 0 };
    let mut pc = 0usize;
    let mut executed = 0u64;
    loop {
        executed += 1;
        if executed > budget {
            return Err(RunError::Budget(budget));
        }
        let Some(&i) = prog.get(pc) else {
            return Err(RunError::BadJump { pc, target: pc as i64 });
        };
        let here = pc;
        pc += 1;
        let (d, s) = (i.dst as usize, i.src as usize);
        if d > 10 || s > 10 {
            return Err(RunError::BadOpcode { pc: here, code: i.code });
        }
        let jump = |pc: usize, off: i64| -> Result<usize, RunError> {
            let t = pc as i64 + off;
            if t < 0 || t as usize >= prog.len() {
                Err(RunError::BadJump { pc: here, target: t })
            } else {
                Ok(t as usize)
            }
        };
        match i.class() {
            class::ALU64 => {
                let src = if i.is_src_reg() { regs[s] } else { i.imm as i64 as u64 };
                let dst = regs[d];
                regs[d] = match i.op() {
                    alu::ADD => dst.wrapping_add(src),
                    alu::SUB => dst.wrapping_sub(src),
                    alu::MUL => dst.wrapping_mul(src),
                    alu::DIV if i.off == 1 => {
                        if src == 0 {
                            0
                        } else {
                            (dst as i64).wrapping_div(src as i64) as u64
                        }
                    }
                    alu::DIV => dst.checked_div(src).unwrap_or(0),
                    alu::MOD if i.off == 1 => {
                        if src == 0 {
                            dst
                        } else {
                            (dst as i64).wrapping_rem(src as i64) as u64
                        }
                    }
                    alu::MOD => {
                        if src == 0 {
                            dst
                        } else {
                            dst % src
                        }
                    }
                    alu::OR => dst | src,
                    alu::AND => dst & src,
                    alu::XOR => dst ^ src,
                    alu::LSH => dst.wrapping_shl(src as u32 & 63),
                    alu::RSH => dst.wrapping_shr(src as u32 & 63),
                    alu::ARSH => ((dst as i64).wrapping_shr(src as u32 & 63)) as u64,
                    alu::NEG => (dst as i64).wrapping_neg() as u64,
                    alu::MOV => match (i.is_src_reg(), i.off) {
                        (true, 8) => regs[s] as i8 as i64 as u64,
                        (true, 16) => regs[s] as i16 as i64 as u64,
                        (true, 32) => regs[s] as i32 as i64 as u64,
                        _ => src,
                    },
                    alu::END => match i.imm {
                        16 => (dst as u16).swap_bytes() as u64,
                        32 => (dst as u32).swap_bytes() as u64,
                        64 => dst.swap_bytes(),
                        _ => return Err(RunError::BadOpcode { pc: here, code: i.code }),
                    },
                    _ => return Err(RunError::BadOpcode { pc: here, code: i.code }),
                };
            }
            class::ALU => {
                let src = if i.is_src_reg() { regs[s] as u32 } else { i.imm as u32 };
                let dst = regs[d] as u32;
                let v: u32 = match i.op() {
                    alu::ADD => dst.wrapping_add(src),
                    alu::SUB => dst.wrapping_sub(src),
                    alu::MUL => dst.wrapping_mul(src),
                    alu::DIV if i.off == 1 => {
                        if src == 0 {
                            0
                        } else {
                            (dst as i32).wrapping_div(src as i32) as u32
                        }
                    }
                    alu::DIV => dst.checked_div(src).unwrap_or(0),
                    alu::MOD if i.off == 1 => {
                        if src == 0 {
                            dst
                        } else {
                            (dst as i32).wrapping_rem(src as i32) as u32
                        }
                    }
                    alu::MOD => {
                        if src == 0 {
                            dst
                        } else {
                            dst % src
                        }
                    }
                    alu::OR => dst | src,
                    alu::AND => dst & src,
                    alu::XOR => dst ^ src,
                    alu::LSH => dst.wrapping_shl(src & 31),
                    alu::RSH => dst.wrapping_shr(src & 31),
                    alu::ARSH => ((dst as i32).wrapping_shr(src & 31)) as u32,
                    alu::NEG => (dst as i32).wrapping_neg() as u32,
                    alu::MOV => match (i.is_src_reg(), i.off) {
                        (true, 8) => regs[s] as i8 as i32 as u32,
                        (true, 16) => regs[s] as i16 as i32 as u32,
                        _ => src,
                    },
                    alu::END => {
                        // to little-endian is a truncation on this (little-endian) host;
                        // to big-endian swaps.
                        let v = regs[d];
                        regs[d] = match (i.is_src_reg(), i.imm) {
                            (false, 16) => v as u16 as u64,
                            (false, 32) => v as u32 as u64,
                            (false, 64) => v,
                            (true, 16) => (v as u16).swap_bytes() as u64,
                            (true, 32) => (v as u32).swap_bytes() as u64,
                            (true, 64) => v.swap_bytes(),
                            _ => return Err(RunError::BadOpcode { pc: here, code: i.code }),
                        };
                        continue;
                    }
                    _ => return Err(RunError::BadOpcode { pc: here, code: i.code }),
                };
                regs[d] = v as u64;
            }
            class::LD if i.is_lddw() => {
                let Some(hi) = prog.get(pc) else {
                    return Err(RunError::BadJump { pc: here, target: pc as i64 });
                };
                if i.src != 0 && i.src != pseudo::MAP_FD && i.src != pseudo::MAP_VALUE {
                    return Err(RunError::BadOpcode { pc: here, code: i.code });
                }
                regs[d] = ((hi.imm as u32 as u64) << 32) | i.imm as u32 as u64;
                pc += 1;
            }
            class::LDX if matches!(i.mem_mode(), mem::MEM | mem::MEMSX) => {
                let addr = regs[s].wrapping_add(i.off as i64 as u64);
                let n = i.mem_size();
                mem.check(here, addr, n, AccessKind::Read)?;
                // SAFETY: [addr, addr + n) lies inside the stack or a region the caller vouched
                // for (checked just above); unaligned reads are allowed.
                let v = unsafe { load(addr, n) };
                regs[d] = if i.mem_mode() == mem::MEMSX {
                    match n {
                        1 => v as i8 as i64 as u64,
                        2 => v as i16 as i64 as u64,
                        4 => v as i32 as i64 as u64,
                        _ => v,
                    }
                } else {
                    v
                };
            }
            class::ST | class::STX if i.mem_mode() == mem::MEM => {
                let addr = regs[d].wrapping_add(i.off as i64 as u64);
                let n = i.mem_size();
                mem.check(here, addr, n, AccessKind::Write)?;
                let v = if i.class() == class::ST { i.imm as i64 as u64 } else { regs[s] };
                mem.stored(here, addr, n, v)?;
                // SAFETY: checked as for loads, against writable memory.
                unsafe { store(addr, n, v) };
            }
            class::STX
                if i.mem_mode() == mem::ATOMIC && (i.mem_size() == 4 || i.mem_size() == 8) =>
            {
                let addr = regs[d].wrapping_add(i.off as i64 as u64);
                let n = i.mem_size();
                mem.check(here, addr, n, AccessKind::Atomic)?;
                if addr % n as u64 != 0 {
                    return Err(RunError::Misaligned { pc: here, addr });
                }
                mem.stored(here, addr, n, regs[s])?;
                if i.imm == atomic::CMPXCHG {
                    mem.compared(here, regs[0])?;
                }
                // SAFETY: inside writable memory and naturally aligned (checked above).
                let r = unsafe { atomic_op(addr, n, i.imm, regs[s], regs[0]) };
                match r {
                    Some(AtomicOut::Fetched(old)) => regs[s] = old,
                    Some(AtomicOut::R0(old)) => regs[0] = old,
                    Some(AtomicOut::Nothing) => {}
                    None => return Err(RunError::BadOpcode { pc: here, code: i.code }),
                }
            }
            class::JMP | class::JMP32 => {
                let op = i.op();
                match op {
                    jmp::JA => {
                        let off =
                            if i.class() == class::JMP32 { i.imm as i64 } else { i.off as i64 };
                        pc = jump(pc, off)?;
                    }
                    jmp::EXIT => match frames.pop() {
                        None => {
                            mem.exit(here, regs[0])?;
                            return Ok(regs[0]);
                        }
                        Some(f) => {
                            mem.leave_frame();
                            regs[6..10].copy_from_slice(&f.saved);
                            regs[10] = f.r10;
                            pc = f.ret_pc;
                        }
                    },
                    jmp::CALL if i.class() == class::JMP => {
                        if i.src == pseudo::CALL && !i.is_src_reg() {
                            if frames.len() + 1 >= MAX_CALL_DEPTH {
                                return Err(RunError::CallDepth { pc: here });
                            }
                            let target = jump(pc, i.imm as i64)?;
                            let callee_r10 = mem.enter_frame(here, regs[10])?;
                            frames.push(Frame {
                                ret_pc: pc,
                                saved: [regs[6], regs[7], regs[8], regs[9]],
                                r10: regs[10],
                            });
                            regs[10] = callee_r10;
                            pc = target;
                        } else {
                            let id = if i.is_src_reg() { regs[d] } else { i.imm as u32 as u64 };
                            let h = u32::try_from(id)
                                .ok()
                                .and_then(|id| helpers.get(id))
                                .ok_or(RunError::UnknownHelper { pc: here, id })?;
                            mem.before_helper(here, h, &regs)?;
                            // SAFETY: helpers are native functions of this runtime that check
                            // their own arguments (or rely on the verifier's argument types).
                            let r0 =
                                unsafe { (h.func)(regs[1], regs[2], regs[3], regs[4], regs[5]) };
                            mem.after_helper(h, &regs, r0);
                            regs[0] = r0;
                        }
                    }
                    _ => {
                        let (a, b) = if i.class() == class::JMP {
                            (regs[d], if i.is_src_reg() { regs[s] } else { i.imm as i64 as u64 })
                        } else {
                            (
                                regs[d] as u32 as u64,
                                if i.is_src_reg() {
                                    regs[s] as u32 as u64
                                } else {
                                    i.imm as u32 as u64
                                },
                            )
                        };
                        let wide = i.class() == class::JMP;
                        let (sa, sb) = if wide {
                            (a as i64, b as i64)
                        } else {
                            (a as u32 as i32 as i64, b as u32 as i32 as i64)
                        };
                        let taken = match op {
                            jmp::JEQ => a == b,
                            jmp::JNE => a != b,
                            jmp::JGT => a > b,
                            jmp::JGE => a >= b,
                            jmp::JLT => a < b,
                            jmp::JLE => a <= b,
                            jmp::JSET => a & b != 0,
                            jmp::JSGT => sa > sb,
                            jmp::JSGE => sa >= sb,
                            jmp::JSLT => sa < sb,
                            jmp::JSLE => sa <= sb,
                            _ => return Err(RunError::BadOpcode { pc: here, code: i.code }),
                        };
                        if taken {
                            pc = jump(pc, i.off as i64)?;
                        }
                    }
                }
            }
            _ => return Err(RunError::BadOpcode { pc: here, code: i.code }),
        }
    }
}

/// # Safety
/// `[addr, addr + n)` must be readable.
unsafe fn load(addr: u64, n: usize) -> u64 {
    let p = addr as *const u8;
    // SAFETY: per the function contract; read_unaligned tolerates any alignment.
    unsafe {
        match n {
            1 => p.read() as u64,
            2 => (p as *const u16).read_unaligned() as u64,
            4 => (p as *const u32).read_unaligned() as u64,
            _ => (p as *const u64).read_unaligned(),
        }
    }
}

/// # Safety
/// `[addr, addr + n)` must be writable.
unsafe fn store(addr: u64, n: usize, v: u64) {
    let p = addr as *mut u8;
    // SAFETY: per the function contract.
    unsafe {
        match n {
            1 => p.write(v as u8),
            2 => (p as *mut u16).write_unaligned(v as u16),
            4 => (p as *mut u32).write_unaligned(v as u32),
            _ => (p as *mut u64).write_unaligned(v),
        }
    }
}

pub(crate) enum AtomicOut {
    Nothing,
    /// The old value goes to the source register (FETCH, XCHG).
    Fetched(u64),
    /// The old value goes to r0 (CMPXCHG).
    R0(u64),
}

/// Perform an atomic operation; `None` for an unknown one.
///
/// # Safety
/// `addr` must be writable and aligned to `n` (4 or 8).
pub(crate) unsafe fn atomic_op(
    addr: u64,
    n: usize,
    op: i32,
    src: u64,
    r0: u64,
) -> Option<AtomicOut> {
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
    macro_rules! run {
        ($a:expr, $t:ty) => {{
            let a = $a;
            let v = src as $t;
            let old = match op & !atomic::FETCH {
                _ if op == atomic::XCHG => a.swap(v, SeqCst),
                _ if op == atomic::CMPXCHG => {
                    let old = match a.compare_exchange(r0 as $t, v, SeqCst, SeqCst) {
                        Ok(o) | Err(o) => o,
                    };
                    return Some(AtomicOut::R0(old as u64));
                }
                atomic::ADD => a.fetch_add(v, SeqCst),
                atomic::OR => a.fetch_or(v, SeqCst),
                atomic::AND => a.fetch_and(v, SeqCst),
                atomic::XOR => a.fetch_xor(v, SeqCst),
                _ => return None,
            };
            if op & atomic::FETCH != 0 {
                Some(AtomicOut::Fetched(old as u64))
            } else {
                Some(AtomicOut::Nothing)
            }
        }};
    }
    // SAFETY: per the function contract, the location is valid, writable and aligned.
    unsafe {
        if n == 8 {
            run!(&*(addr as *const AtomicU64), u64)
        } else {
            run!(&*(addr as *const AtomicU32), u32)
        }
    }
}
