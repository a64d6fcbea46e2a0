//! A guard compiled in front of a specialised program (chain optimisation, `crate::chain`):
//! the packet's length, a few masked compares of its bytes and the map pins, checked in the
//! program's own machine code before its prologue. A packet that passes falls through into the
//! program; one that fails counts a miss and jumps to the original program's entry, which
//! returns straight to the caller (a tail call: nothing was pushed, and r1 and r2, the context
//! and the CPU index, are untouched). So the fast path costs a handful of instructions with
//! immediate operands and no call, where a guard in Rust costs a loop over its words, loads of
//! their masks and values, and a second indirect call on a miss.

use super::x86::*;
use super::JitError;

/// Bytes of the per-CPU miss counters' stride (one cache line each).
pub const MISS_STRIDE: usize = 64;

/// One compare: `le(pkt[off..off + size]) & mask == value`, `size` 1, 2, 4 or 8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteCheck {
    pub off: u32,
    pub size: u8,
    pub mask: u64,
    pub value: u64,
}

/// What the compiled guard checks, and where a refused packet goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryGuard {
    /// Offsets of the data and data-end pointers in the context r1 points to.
    pub data_off: i32,
    pub data_end_off: i32,
    /// Packet length bounds, inclusive.
    pub min_len: u32,
    pub max_len: u32,
    /// Compares of packet bytes, each inside `min_len`.
    pub checks: Vec<ByteCheck>,
    /// `(address, value)`: a u64 that must hold the value (a map's writes begun).
    pub pins: Vec<(u64, u64)>,
    /// Per-CPU miss counters, [`MISS_STRIDE`] bytes apart, indexed by r2 (the CPU index).
    /// Bumped without a lock: one thread at a time runs each CPU index (as one worker runs
    /// its own), else counts may be lost (never memory: the index is bounded).
    pub misses: u64,
    /// The original program's entry: where a refused packet goes.
    pub fallback: u64,
}

impl EntryGuard {
    /// Split a masked 8-byte word at `off` into the narrowest compare covering its checked
    /// bytes (a whole-byte 2-byte check becomes `cmp word`, not a 64-bit mask and compare).
    pub fn check_of_word(off: u32, mask: u64, value: u64) -> Option<ByteCheck> {
        if mask == 0 {
            return None;
        }
        let lo = mask.trailing_zeros() / 8;
        let hi = 7 - mask.leading_zeros() / 8;
        let width = hi - lo + 1;
        let size = [1u32, 2, 4, 8].into_iter().find(|s| *s >= width).unwrap_or(8);
        // Start at the first checked byte, or earlier so the compare stays inside the word.
        let start = lo.min(8 - size);
        let shift = 8 * start;
        let keep = if size == 8 { u64::MAX } else { (1u64 << (8 * size)) - 1 };
        Some(ByteCheck {
            off: off + start,
            size: size as u8,
            mask: (mask >> shift) & keep,
            value: (value >> shift) & keep,
        })
    }
}

/// The guard's code, to be placed right before the program whose code is `body_len` bytes
/// (the miss path goes after the program, so a packet that passes takes no jump).
pub fn emit_prefix(g: &EntryGuard, body_len: usize) -> Result<(Vec<u8>, Vec<u8>), JitError> {
    let err = |msg: &str| JitError { pc: 0, msg: format!("guard: {msg}") };
    if g.checks.iter().any(|c| u64::from(c.off) + u64::from(c.size) > u64::from(g.min_len)) {
        return Err(err("a compare reaches past the shortest admitted packet"));
    }
    if g.checks.iter().any(|c| ![1, 2, 4, 8].contains(&c.size) || c.off > i32::MAX as u32) {
        return Err(err("a compare of an unsupported size or offset"));
    }
    // Every branch to the miss path is a 6-byte `jcc rel32`; their displacements are patched
    // once the prefix's length is known.
    let mut a = Asm::default();
    let mut branches: Vec<usize> = Vec::new();
    let mut to_miss = |a: &mut Asm, c: Cond| {
        a.jcc(c, 0, false);
        branches.push(a.len());
    };
    // rax = data, r11 = data_end - data.
    a.load(8, RAX, RDI, g.data_off);
    a.load(8, R11, RDI, g.data_end_off);
    a.alu_rr(true, Alu::Sub, R11, RAX);
    if g.min_len > 0 {
        cmp_imm(&mut a, R11, u64::from(g.min_len));
        to_miss(&mut a, Cond::B);
    }
    if g.max_len < u32::MAX {
        cmp_imm(&mut a, R11, u64::from(g.max_len));
        to_miss(&mut a, Cond::A);
    }
    for c in &g.checks {
        let size = c.size as usize;
        a.load(size, R10, RAX, c.off as i32);
        let full = if size == 8 { u64::MAX } else { (1u64 << (8 * size)) - 1 };
        if c.mask & full != full {
            and_imm(&mut a, size == 8, R10, c.mask);
        }
        if size == 8 {
            cmp_imm(&mut a, R10, c.value);
        } else {
            a.alu_ri(false, Alu::Cmp, R10, c.value as u32 as i32);
        }
        to_miss(&mut a, Cond::Ne);
    }
    for &(addr, value) in &g.pins {
        a.mov_imm64(R11, addr);
        a.load(8, R10, R11, 0);
        cmp_imm(&mut a, R10, value);
        to_miss(&mut a, Cond::Ne);
    }
    // The miss path, after the body: count, then tail-jump to the original.
    let mut miss = Asm::default();
    miss.mov_rr(true, R10, RSI);
    miss.imul_ri(true, R10, MISS_STRIDE as i32);
    miss.mov_imm64(R11, g.misses);
    miss.alu_rr(true, Alu::Add, R10, R11);
    miss.load(8, R11, R10, 0);
    miss.alu_ri(true, Alu::Add, R11, 1);
    miss.store(8, R10, 0, R11);
    miss.mov_imm64(RAX, g.fallback);
    miss.jmp_r(RAX);
    let miss_at = a.len() + body_len;
    for end in branches {
        let rel = i32::try_from(miss_at - end).map_err(|_| err("the program is too long"))?;
        a.code[end - 4..end].copy_from_slice(&rel.to_le_bytes());
    }
    Ok((a.code, miss.code))
}

/// `cmp r, v` for a 64-bit `v`: an immediate when it sign-extends from 32 bits, else through
/// a scratch register (r11 or r10, whichever `r` is not).
fn cmp_imm(a: &mut Asm, r: u8, v: u64) {
    if i32::try_from(v as i64).is_ok() {
        a.alu_ri(true, Alu::Cmp, r, v as i64 as i32);
    } else {
        let t = if r == R11 { R10 } else { R11 };
        a.mov_imm64(t, v);
        a.alu_rr(true, Alu::Cmp, r, t);
    }
}

/// `and r, m`, 64-bit or 32-bit (which zero-extends).
fn and_imm(a: &mut Asm, w: bool, r: u8, m: u64) {
    if !w {
        a.alu_ri(false, Alu::And, r, m as u32 as i32);
    } else if i32::try_from(m as i64).is_ok() {
        a.alu_ri(true, Alu::And, r, m as i64 as i32);
    } else {
        let t = if r == R11 { R10 } else { R11 };
        a.mov_imm64(t, m);
        a.alu_rr(true, Alu::And, r, t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_becomes_its_narrowest_compare() {
        // Bytes 0 and 1 of a word at 12 (ethertype 0x86dd).
        let c = EntryGuard::check_of_word(12, 0xffff, 0xdd86).unwrap();
        assert_eq!(c, ByteCheck { off: 12, size: 2, mask: 0xffff, value: 0xdd86 });
        // One byte in the middle.
        let c = EntryGuard::check_of_word(16, 0xff << 24, 0x33 << 24).unwrap();
        assert_eq!(c, ByteCheck { off: 19, size: 1, mask: 0xff, value: 0x33 });
        // Bytes 6 and 7 with 3 bits: a 2-byte compare at 6.
        let c = EntryGuard::check_of_word(0, 0x0f00 << 48, 0x0600 << 48).unwrap();
        assert_eq!(c, ByteCheck { off: 7, size: 1, mask: 0x0f, value: 0x06 });
        // Bytes 5..8: 3 bytes need 4, which must end inside the word (start at 4).
        let c = EntryGuard::check_of_word(0, 0xffffff << 40, 0x010203 << 40).unwrap();
        assert_eq!(c, ByteCheck { off: 4, size: 4, mask: 0xffffff00, value: 0x01020300 });
        // Bytes 0 and 7: the whole word.
        let c = EntryGuard::check_of_word(8, 0xff00_0000_0000_00ff, 0x1100_0000_0000_0022);
        assert_eq!(c.unwrap().size, 8);
        assert_eq!(EntryGuard::check_of_word(0, 0, 0), None);
    }
}

#[cfg(test)]
mod program_tests {
    use super::*;
    use crate::asm::assemble;
    use crate::maps::{Map, MapDef, MapKind};
    use crate::program::{Engine, GuardPlan, LoadOptions, Program, ProgramSpec};
    use crate::verifier::Context;
    use hotplane_core::{Pool, PoolConfig};
    use std::sync::Arc;

    fn load(text: &str) -> Program {
        let spec = ProgramSpec::bytecode("t", assemble(text).unwrap());
        let opts = LoadOptions { engine: Engine::Jit, cpus: 2, ..LoadOptions::default() };
        Program::load(&spec, Context::Xdp, &crate::xdp::helpers(), opts, None).unwrap()
    }

    #[test]
    fn the_compiled_guard_runs_the_program_or_falls_back_and_counts() {
        // The original drops (1), the guarded program passes (2).
        let original = Arc::new(load("mov r0, 1\nexit"));
        let def = MapDef { kind: MapKind::Hash, key_size: 4, value_size: 4, max_entries: 4 };
        let map = Arc::new(Map::new("t/h", def, 1).unwrap());
        let pin = map.pin(4).unwrap();
        let plan = GuardPlan {
            min_len: 20,
            max_len: 100,
            checks: vec![
                EntryGuard::check_of_word(12, 0xffff, 0xdd86).unwrap(),
                // The high nibble of byte 14 (IPv6's version).
                EntryGuard::check_of_word(14, 0xf0, 0x60).unwrap(),
            ],
            pins: vec![pin],
        };
        let spec = ProgramSpec::bytecode("fast", assemble("mov r0, 2\nexit").unwrap());
        let opts = LoadOptions { engine: Engine::Jit, cpus: 2, ..LoadOptions::default() };
        let helpers = crate::xdp::helpers();
        let fast =
            Program::load_guarded(&spec, Context::Xdp, &helpers, opts, &original, plan).unwrap();
        assert!(fast.has_compiled_guard());
        let pool = Pool::new(PoolConfig { buffers: 4, ..PoolConfig::default() }).unwrap();
        let run = |frame: &[u8], worker: u32| {
            let mut p = pool.alloc().unwrap();
            p.set_frame(frame).unwrap();
            fast.run_xdp(&mut p, worker)
        };
        let mut good = vec![0u8; 60];
        good[12] = 0x86;
        good[13] = 0xdd;
        good[14] = 0x6a; // the low nibble is not checked
        assert_eq!(run(&good, 0), 2);
        assert_eq!(run(&good[..20], 0), 2, "the shortest admitted packet");
        assert_eq!(fast.guard_misses(0), Some(0));
        let mut wrong = good.clone();
        wrong[13] = 0x00;
        assert_eq!(run(&wrong, 0), 1);
        wrong = good.clone();
        wrong[14] = 0x4a;
        assert_eq!(run(&wrong, 1), 1);
        assert_eq!(run(&good[..19], 0), 1, "too short");
        assert_eq!(run(&[0x86; 101], 0), 1, "too long");
        assert_eq!((fast.guard_misses(0), fast.guard_misses(1)), (Some(3), Some(1)));
        // A write to the pinned map: every packet goes to the original.
        map.update_copy(&[1, 0, 0, 0], &[0; 4], 0).unwrap();
        assert_eq!(run(&good, 0), 1);
        assert_eq!(fast.guard_misses(0), Some(4));
        // Outside the XDP runner the code is not entered (r2 need not be a CPU index).
        assert!(fast.run_mem(&mut [0u8; 8]).is_ok());
    }

    #[test]
    fn a_guard_shorter_than_the_verified_length_is_refused() {
        let original = Arc::new(load("mov r0, 1\nexit"));
        let plan = GuardPlan { min_len: 10, max_len: 100, checks: Vec::new(), pins: Vec::new() };
        let spec = ProgramSpec::bytecode("fast", assemble("mov r0, 2\nexit").unwrap());
        let ctx = Context::XdpMinLen { min_len: 20 };
        let opts = LoadOptions { engine: Engine::Jit, cpus: 2, ..LoadOptions::default() };
        let r = Program::load_guarded(&spec, ctx, &crate::xdp::helpers(), opts, &original, plan);
        assert!(r.is_err());
    }
}
