//! Small clean-ups after the specialising rewrite ([`super::rewrite`]), each preserving what
//! the program does on every input: jumps to a `ja` go straight to its target, code nothing
//! reaches any more goes, a conditional jump over a lone `ja` becomes the inverted jump, and a
//! register operand holding a constant set earlier in the same block becomes an immediate
//! (which often leaves the `mov` that set it dead, for the liveness pass), and arithmetic
//! with constants becomes cheaper arithmetic that computes the same (a multiply by a power of
//! two a shift, a 32-bit rotate's mask and shift one 32-bit shift, an operation that changes
//! nothing a no-op). An instruction made a no-op becomes `ja +0`, which the caller's clean-up
//! removes with the jumps to the next instruction.

use super::rewrite::{is_conditional, target};
use crate::insn::{alu, class, jmp, mem, op, pseudo, Insn, SRC_K};

/// How far a chain of `ja`s is followed.
const MAX_HOPS: usize = 8;

/// Point every jump whose target is a `ja` at that `ja`'s target. Returns the jumps changed.
pub(super) fn thread_jumps(prog: &mut [Insn]) -> usize {
    let mut changed = 0;
    for pc in 0..prog.len() {
        let i = prog[pc];
        let jumps = i.code == op::JA || is_conditional(i);
        let Some(mut t) = target(pc, i).filter(|_| jumps).and_then(|t| usize::try_from(t).ok())
        else {
            continue;
        };
        let first = t;
        for _ in 0..MAX_HOPS {
            match prog.get(t) {
                Some(j) if j.code == op::JA => {
                    match target(t, *j).and_then(|n| usize::try_from(n).ok()) {
                        Some(n) if n != t => t = n,
                        _ => break,
                    }
                }
                _ => break,
            }
        }
        if t != first {
            if let Ok(off) = i16::try_from(t as i64 - pc as i64 - 1) {
                prog[pc].off = off;
                changed += 1;
            }
        }
    }
    changed
}

/// Instructions no path from the entry (or from a bpf-to-bpf call of reachable code) reaches.
pub(super) fn unreachable(prog: &[Insn]) -> Vec<bool> {
    let mut reached = vec![false; prog.len()];
    let mut work = vec![0usize];
    while let Some(pc) = work.pop() {
        let Some(&i) = prog.get(pc) else { continue };
        if reached[pc] {
            continue;
        }
        reached[pc] = true;
        if i.is_lddw() {
            if let Some(r) = reached.get_mut(pc + 1) {
                *r = true;
            }
            work.push(pc + 2);
            continue;
        }
        let t = target(pc, i).and_then(|t| usize::try_from(t).ok());
        let is_jump = matches!(i.class(), class::JMP | class::JMP32);
        match (is_jump, i.op()) {
            (true, jmp::EXIT) => {}
            (true, jmp::JA) => work.extend(t),
            (true, jmp::CALL) => {
                work.push(pc + 1);
                if i.src == pseudo::CALL && !i.is_src_reg() {
                    work.extend(t);
                }
            }
            (true, _) => {
                work.push(pc + 1);
                work.extend(t);
            }
            _ => work.push(pc + 1),
        }
    }
    reached.iter().map(|r| !r).collect()
}

/// The condition that holds exactly when `op`'s does not (`jset` has none).
fn inverse(op: u8) -> Option<u8> {
    Some(match op {
        jmp::JEQ => jmp::JNE,
        jmp::JNE => jmp::JEQ,
        jmp::JGT => jmp::JLE,
        jmp::JLE => jmp::JGT,
        jmp::JGE => jmp::JLT,
        jmp::JLT => jmp::JGE,
        jmp::JSGT => jmp::JSLE,
        jmp::JSLE => jmp::JSGT,
        jmp::JSGE => jmp::JSLT,
        jmp::JSLT => jmp::JSGE,
        _ => return None,
    })
}

/// Whether some jump or call lands on each instruction.
pub(super) fn targeted(prog: &[Insn]) -> Vec<bool> {
    let mut t = vec![false; prog.len() + 1];
    for (pc, i) in prog.iter().enumerate() {
        if let Some(x) = target(pc, *i).and_then(|x| usize::try_from(x).ok()) {
            if let Some(slot) = t.get_mut(x) {
                *slot = true;
            }
        }
    }
    t
}

/// `if c goto +1; ja T` becomes `if !c goto T` (the `ja` goes: marked `None` in `code`).
/// Returns the jumps removed.
pub(super) fn invert_over_ja(prog: &[Insn], code: &mut [Option<Insn>]) -> usize {
    let targeted = targeted(prog);
    let mut removed = 0;
    for pc in 0..prog.len().saturating_sub(1) {
        let (i, next) = (prog[pc], prog[pc + 1]);
        if !(is_conditional(i) && i.off == 1 && next.code == op::JA && !targeted[pc + 1]) {
            continue;
        }
        if code[pc].is_none() || code[pc + 1].is_none() {
            continue;
        }
        let (Some(inv), Some(off)) = (inverse(i.op()), next.off.checked_add(1)) else { continue };
        code[pc] = Some(Insn::new(
            i.class() | inv | (i.code & crate::insn::SRC_X),
            i.dst,
            i.src,
            off,
            i.imm,
        ));
        code[pc + 1] = None;
        removed += 1;
    }
    removed
}

/// The next instruction after `pc` in its block that reads or writes `prog[pc]`'s destination
/// register, if the block has one (no jump, call or jump target comes first).
fn next_touching(prog: &[Insn], targeted: &[bool], pc: usize) -> Option<usize> {
    let r = prog.get(pc)?.dst;
    let mut at = pc + 1;
    while let Some(&i) = prog.get(at) {
        if targeted.get(at).copied().unwrap_or(true) {
            return None;
        }
        let reads_src = match i.class() {
            // An atomic may read and write r0 too (cmpxchg): the block ends here for this
            // purpose.
            class::STX if i.mem_mode() == mem::ATOMIC => return None,
            class::LDX | class::STX => true,
            class::ALU | class::ALU64 => i.is_src_reg(),
            class::ST => false,
            class::LD if i.is_lddw() => false,
            _ => return None,
        };
        if i.dst == r || (reads_src && i.src == r) {
            return Some(at);
        }
        at += if i.is_lddw() { 2 } else { 1 };
    }
    None
}

/// The no-op that takes an instruction's place until the clean-up removes it.
fn nop() -> Insn {
    Insn::new(op::JA, 0, 0, 0, 0)
}

/// `op dst, src` where `src` holds a constant a `mov` or `lddw` set earlier in the same block
/// (no jump lands between) becomes `op dst, imm`; where the constant has no immediate form,
/// `and dst, src; rsh dst, k` with `src` the mask of bits k..31 (how clang writes a 32-bit
/// rotate in 64-bit registers) becomes `rsh32 dst, k`. Returns the instructions changed.
pub(super) fn constant_operands(prog: &mut [Insn]) -> usize {
    let targeted = targeted(prog);
    let mut known: [Option<u64>; 11] = [None; 11];
    let mut changed = 0;
    let mut pc = 0;
    while pc < prog.len() {
        if targeted[pc] {
            known = [None; 11];
        }
        let i = prog[pc];
        let cls = i.class();
        let wide = matches!(cls, class::ALU64 | class::JMP);
        let src_const = if i.is_src_reg() && i.src < 11 { known[i.src as usize] } else { None };
        // The immediate that means the same as the register's value in this operation.
        let imm = src_const.and_then(|v| {
            if wide {
                i32::try_from(v as i64).ok()
            } else {
                Some(v as u32 as i32)
            }
        });
        let alu_op = i.op();
        let foldable_alu = matches!(cls, class::ALU | class::ALU64)
            && match alu_op {
                alu::END | alu::NEG => false,
                // Division by a constant zero is refused by verifiers; by a register, defined.
                alu::DIV | alu::MOD => imm != Some(0),
                // A sign-extending move has no immediate form.
                alu::MOV => i.off == 0,
                _ => true,
            };
        let foldable_jump = is_conditional(i);
        if let (Some(imm), true) = (imm, foldable_alu || foldable_jump) {
            prog[pc] = Insn::new((i.code & !crate::insn::SRC_X) | SRC_K, i.dst, 0, i.off, imm);
            changed += 1;
        } else if let (Some(mask), Some(at)) = (src_const, next_touching(prog, &targeted, pc)) {
            // (x & mask) >> k with mask's bits from k up exactly bits k..31: (u32)x >> k.
            let next = prog[at];
            let shift = next.imm;
            let rotate_half = i.code == class::ALU64 | alu::AND | crate::insn::SRC_X
                && next.code == class::ALU64 | alu::RSH | SRC_K
                && next.dst == i.dst
                && i.src != i.dst
                && (1..32).contains(&shift)
                && mask >> shift == 0xffff_ffff >> shift;
            if rotate_half {
                prog[pc] = nop();
                prog[at] = Insn::new(class::ALU | alu::RSH | SRC_K, i.dst, 0, 0, shift);
                changed += 1;
            }
        }
        // A store of a known register becomes a store of an immediate (sign-extended for a
        // double word; narrower stores keep the low bytes either way).
        if cls == class::STX && i.mem_mode() == mem::MEM && i.src < 11 {
            let imm = known[i.src as usize].and_then(|v| match i.mem_size() {
                8 => i32::try_from(v as i64).ok(),
                _ => Some(v as u32 as i32),
            });
            if let Some(imm) = imm {
                let code = class::ST | mem::MEM | (i.code & 0x18);
                prog[pc] = Insn::new(code, i.dst, 0, i.off, imm);
                changed += 1;
            }
        }
        let i = prog[pc];
        // What this instruction leaves known.
        match i.class() {
            class::ALU | class::ALU64 => {
                let d = i.dst as usize;
                let value = match (i.op(), i.is_src_reg()) {
                    (alu::MOV, false) if i.off == 0 => Some(if i.class() == class::ALU64 {
                        i.imm as i64 as u64
                    } else {
                        i.imm as u32 as u64
                    }),
                    _ => None,
                };
                if d < 11 {
                    known[d] = value;
                }
            }
            class::LDX => known[(i.dst as usize).min(10)] = None,
            class::LD => {
                known[(i.dst as usize).min(10)] = None;
                if i.is_lddw() {
                    // A plain 64-bit constant (not a map reference) is known.
                    if let (0, Some(hi)) = (i.src, prog.get(pc + 1)) {
                        let v = u64::from(i.imm as u32) | u64::from(hi.imm as u32) << 32;
                        known[(i.dst as usize).min(10)] = Some(v);
                    }
                    pc += 1;
                }
            }
            class::ST | class::STX => {
                if i.class() == class::STX && i.mem_mode() == mem::ATOMIC {
                    // Fetching atomics write their source register, cmpxchg writes r0.
                    known[(i.src as usize).min(10)] = None;
                    known[0] = None;
                }
            }
            _ => {
                // Any jump, call or exit ends what this block knows.
                known = [None; 11];
            }
        }
        pc += 1;
    }
    changed
}

/// Unsigned division and remainder by a power of two become a shift and a mask (a divide is
/// tens of cycles; constants folded from map values, like a service's backend count, make
/// them common), a multiply by one a shift; 64-bit operations with an operand that changes
/// nothing (`add 0`, `or 0`, `and -1`, `lsh 0`, ...) go, `lsh 32; rsh 32` (a zero
/// extension) becomes `mov32`, `mov a, b; mov32 a, a` becomes `mov32 a, b`, and `rsh k; lsh k`
/// becomes an `and` clearing the low k bits. Returns the instructions changed.
pub(super) fn strength_reduce(prog: &mut [Insn]) -> usize {
    let targeted = targeted(prog);
    let mut changed = 0;
    for pc in 0..prog.len() {
        let i = prog[pc];
        // `mov a, b; mov32 a, a`: one zero-extending copy.
        let mov_x = class::ALU64 | alu::MOV | crate::insn::SRC_X;
        let mov32_x = class::ALU | alu::MOV | crate::insn::SRC_X;
        if let Some(&n) = prog.get(pc + 1).filter(|_| !targeted[pc + 1]) {
            let copy = i.code == mov_x && i.off == 0 && i.src != i.dst;
            let widen = n.code == mov32_x && n.off == 0 && n.dst == i.dst && n.src == i.dst;
            if copy && widen {
                prog[pc] = Insn::new(mov32_x, i.dst, i.src, 0, 0);
                prog[pc + 1] = nop();
                changed += 1;
                continue;
            }
        }
        let alu_class = matches!(i.class(), class::ALU | class::ALU64);
        // `off` 1 is the signed form (sdiv, smod), which rounds differently.
        if !alu_class || i.is_src_reg() || i.off != 0 {
            continue;
        }
        let wide = i.class() == class::ALU64;
        let power = i.imm > 0 && i.imm & (i.imm - 1) == 0;
        let reduced = match i.op() {
            alu::MOD if power => Some((alu::AND, i.imm - 1)),
            alu::DIV if power => Some((alu::RSH, i.imm.trailing_zeros() as i32)),
            alu::MUL if power => Some((alu::LSH, i.imm.trailing_zeros() as i32)),
            _ => None,
        };
        let identity = wide
            && match i.op() {
                alu::ADD | alu::SUB | alu::OR | alu::XOR | alu::LSH | alu::RSH | alu::ARSH => {
                    i.imm == 0
                }
                alu::AND => i.imm == -1,
                alu::MUL | alu::DIV => i.imm == 1,
                _ => false,
            };
        let zero_extend = wide
            && i.op() == alu::LSH
            && i.imm == 32
            && prog.get(pc + 1).is_some_and(|n| {
                n.code == class::ALU64 | alu::RSH | SRC_K
                    && n.dst == i.dst
                    && n.imm == 32
                    && !targeted[pc + 1]
            });
        let next = prog.get(pc + 1).filter(|_| !targeted[pc + 1]).copied();
        // `rsh k; lsh k`: the low k bits cleared.
        let clear_low = wide
            && i.op() == alu::RSH
            && (1..32).contains(&i.imm)
            && next.is_some_and(|n| {
                n.code == class::ALU64 | alu::LSH | SRC_K && n.dst == i.dst && n.imm == i.imm
            });
        if identity {
            prog[pc] = nop();
        } else if clear_low {
            // All ones from bit k up: sign-extended, the 64-bit mask (k <= 31).
            let mask = (u32::MAX << i.imm) as i32;
            prog[pc] = Insn::new(class::ALU64 | alu::AND | SRC_K, i.dst, 0, 0, mask);
            prog[pc + 1] = nop();
        } else if zero_extend {
            prog[pc] = Insn::new(class::ALU | alu::MOV | crate::insn::SRC_X, i.dst, i.dst, 0, 0);
            prog[pc + 1] = nop();
        } else if let Some((op, imm)) = reduced {
            prog[pc] = Insn::new(i.class() | op | SRC_K, i.dst, 0, 0, imm);
        } else {
            continue;
        }
        changed += 1;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;

    #[test]
    fn jumps_to_a_ja_go_to_its_target() {
        let mut prog = assemble("jeq r1, 1, +1\nexit\nja +1\nmov r0, 1\nexit").unwrap();
        assert_eq!(thread_jumps(&mut prog), 1);
        assert_eq!(prog[0].off, 3);
        // The `ja` is now reached by nothing.
        assert_eq!(unreachable(&prog), vec![false, false, true, true, false]);
    }

    #[test]
    fn a_conditional_over_a_lone_ja_is_inverted() {
        let prog = assemble("jne r2, 96, +1\nja +2\nmov r0, 1\nexit\nmov r0, 2\nexit").unwrap();
        let mut code: Vec<Option<Insn>> = prog.iter().copied().map(Some).collect();
        assert_eq!(invert_over_ja(&prog, &mut code), 1);
        assert_eq!(code[0], Some(assemble("jeq r2, 96, +3").unwrap()[0]));
        assert_eq!(code[1], None);
        // Not when another jump lands on the `ja`.
        let prog = assemble("jne r2, 96, +1\nja +1\njeq r3, 0, -2\nexit").unwrap();
        let mut code: Vec<Option<Insn>> = prog.iter().copied().map(Some).collect();
        assert_eq!(invert_over_ja(&prog, &mut code), 0);
    }

    #[test]
    fn constant_registers_become_immediates_within_a_block() {
        let mut prog =
            assemble("mov r1, 14\nmov r0, r8\nadd r0, r1\njgt r0, r1, +1\nexit\nadd r0, r1\nexit")
                .unwrap();
        assert_eq!(constant_operands(&mut prog), 2);
        let want =
            assemble("mov r1, 14\nmov r0, r8\nadd r0, 14\njgt r0, 14, +1\nexit\nadd r0, r1\nexit");
        // After the jump's target the value is not known (another path may come there).
        assert_eq!(prog, want.unwrap());
        // A 32-bit move's value is zero-extended: too big for a 64-bit immediate.
        let mut prog = assemble("mov32 r1, -1\nadd r0, r1\nexit").unwrap();
        assert_eq!(constant_operands(&mut prog), 0);
        let mut prog = assemble("mov32 r1, -1\nadd32 r0, r1\nexit").unwrap();
        assert_eq!(constant_operands(&mut prog), 1);
    }

    #[test]
    fn division_by_a_power_of_two_is_a_shift() {
        let mut prog = assemble(
            "mod32 r1, 4
div r2, 8
mod r3, 6
mod32 r4, r5
exit",
        )
        .unwrap();
        assert_eq!(strength_reduce(&mut prog), 2);
        let want = assemble(
            "and32 r1, 3
rsh r2, 3
mod r3, 6
mod32 r4, r5
exit",
        )
        .unwrap();
        assert_eq!(prog, want);
    }

    #[test]
    fn arithmetic_that_changes_nothing_goes_and_idioms_get_cheaper() {
        let text = "add r1, 0\nmul r2, 8\nmul32 r3, 1\nlsh r4, 32\nrsh r4, 32\nrsh r5, 2
lsh r5, 2\nmov r6, r7\nmov32 r6, r6\nadd32 r8, 0\nexit";
        let mut prog = assemble(text).unwrap();
        assert_eq!(strength_reduce(&mut prog), 6);
        let want = assemble(
            "ja +0\nlsh r2, 3\nlsh32 r3, 0\nmov32 r4, r4\nja +0\nand r5, -4\nja +0
mov32 r6, r7\nja +0\nadd32 r8, 0\nexit",
        )
        .unwrap();
        // A 32-bit `add 0` zero-extends: it stays.
        assert_eq!(prog, want);
        // The widest cleared run a sign-extended immediate can express.
        let mut prog = assemble("rsh r1, 31\nlsh r1, 31\nexit").unwrap();
        assert_eq!(strength_reduce(&mut prog), 1);
        assert_eq!(prog, assemble("and r1, 0x80000000\nja +0\nexit").unwrap());
    }

    #[test]
    fn a_rotate_half_with_a_register_mask_becomes_a_32_bit_shift() {
        let text = "lddw r4, 0xfffc0000\nmov r3, r1\nand r3, r4\nrsh r3, 18\nexit";
        let mut prog = assemble(text).unwrap();
        assert!(constant_operands(&mut prog) >= 1);
        assert_eq!(prog[3..5], assemble("ja +0\nrsh32 r3, 18").unwrap()[..]);
        // Also with other work in between that leaves r2 alone (a checksum fold).
        let text = "lddw r1, 0xffff0000\nmov r2, r0\nand r2, r1\nand r0, 0xffff\nrsh r2, 16\nexit";
        let mut prog = assemble(text).unwrap();
        constant_operands(&mut prog);
        assert_eq!(prog[3..6], assemble("ja +0\nand r0, 0xffff\nrsh32 r2, 16").unwrap()[..]);
        // Not across a read of the register in between.
        let text = "lddw r1, 0xffff0000\nand r2, r1\nmov r3, r2\nrsh r2, 16\nexit";
        let mut prog = assemble(text).unwrap();
        let before = prog.clone();
        constant_operands(&mut prog);
        assert_eq!(prog[2..], before[2..]);
        // Not past an atomic (cmpxchg reads and writes r0 unnamed).
        let text = "lddw r1, 0xffff0000\nand r0, r1\nlock cmpxchg [r10-8], r2\nrsh r0, 16\nexit";
        let mut prog = assemble(text).unwrap();
        let before = prog.clone();
        constant_operands(&mut prog);
        assert_eq!(prog[2..], before[2..]);
        // Not when the mask keeps bits above 31.
        let text = "lddw r4, 0x1fffc0000\nand r3, r4\nrsh r3, 18\nexit";
        let mut prog = assemble(text).unwrap();
        let before = prog.clone();
        constant_operands(&mut prog);
        assert_eq!(prog, before);
    }

    #[test]
    fn stores_of_constant_registers_store_immediates() {
        let mut prog = assemble("mov r1, 6\nstxb [r10-5], r1\nstxdw [r10-16], r1\nexit").unwrap();
        assert_eq!(constant_operands(&mut prog), 2);
        let want = assemble("mov r1, 6\nstb [r10-5], 6\nstdw [r10-16], 6\nexit").unwrap();
        assert_eq!(prog, want);
        // 0xffffffff as a double word does not fit a sign-extended immediate.
        let mut prog =
            assemble("mov32 r1, -1\nstxdw [r10-8], r1\nstxw [r10-16], r1\nexit").unwrap();
        assert_eq!(constant_operands(&mut prog), 1);
        assert_eq!(prog[1], assemble("stxdw [r10-8], r1").unwrap()[0]);
    }
}
