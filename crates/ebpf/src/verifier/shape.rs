//! Structural checks before exploration: valid opcodes, jumps inside the program and inside
//! their function, functions that end, and where states are worth remembering.

use super::*;

/// Structural facts about the program.
pub(super) struct Shape {
    /// Instructions where a state is worth remembering.
    pub(super) prune: Vec<bool>,
}

/// An instruction that is not well formed, whatever the program's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum OpcodeError {
    #[error("invalid opcode {0:#04x}")]
    Invalid(u8),
    #[error("register number above 10")]
    NoSuchRegister,
    #[error("invalid sign-extension width {0}")]
    SignExtensionWidth(i16),
    #[error("r10 is read-only")]
    FramePointerWrite,
    #[error("legacy packet loads (LD ABS/IND) are not supported")]
    LegacyPacketLoad,
    #[error("map {map} does not exist ({maps} maps)")]
    NoSuchMap { map: i32, maps: usize },
    #[error("lddw with unknown source {0}")]
    LddwSource(u8),
    #[error("unknown atomic operation {0:#x}")]
    Atomic(i32),
}

pub(super) fn valid_opcode(i: Insn, env: &Env<'_>) -> Result<(), OpcodeError> {
    let bad = || Err(OpcodeError::Invalid(i.code));
    if i.dst > 10 || i.src > 10 {
        return Err(OpcodeError::NoSuchRegister);
    }
    match i.class() {
        class::ALU | class::ALU64 => {
            let wide = i.class() == class::ALU64;
            match i.op() {
                alu::END => {
                    if ![16, 32, 64].contains(&i.imm) || (wide && i.is_src_reg()) {
                        return bad();
                    }
                }
                alu::MOV if i.off != 0 => {
                    let ok = i.is_src_reg() && (i.off == 8 || i.off == 16 || (wide && i.off == 32));
                    if !ok {
                        return Err(OpcodeError::SignExtensionWidth(i.off));
                    }
                }
                alu::DIV | alu::MOD if i.off == 0 || i.off == 1 => {}
                alu::NEG if i.is_src_reg() => return bad(),
                alu::ADD
                | alu::SUB
                | alu::MUL
                | alu::DIV
                | alu::OR
                | alu::AND
                | alu::LSH
                | alu::RSH
                | alu::NEG
                | alu::MOD
                | alu::XOR
                | alu::MOV
                | alu::ARSH
                    if i.off == 0 => {}
                _ => return bad(),
            }
            if i.dst == 10 {
                return Err(OpcodeError::FramePointerWrite);
            }
        }
        class::LD => {
            if !i.is_lddw() {
                return Err(OpcodeError::LegacyPacketLoad);
            }
            match i.src {
                0 => {}
                pseudo::MAP_ENTRY if !matches!(env.ctx, super::Context::XdpMinLen { .. }) => {
                    return Err(OpcodeError::LddwSource(i.src));
                }
                pseudo::MAP_FD | pseudo::MAP_VALUE | pseudo::MAP_ENTRY => {
                    if i.imm < 0 || i.imm as usize >= env.maps.len() {
                        return Err(OpcodeError::NoSuchMap { map: i.imm, maps: env.maps.len() });
                    }
                }
                s => return Err(OpcodeError::LddwSource(s)),
            }
            if i.dst == 10 {
                return Err(OpcodeError::FramePointerWrite);
            }
        }
        class::LDX => {
            let ok = i.mem_mode() == mem::MEM || (i.mem_mode() == mem::MEMSX && i.mem_size() < 8);
            if !ok || i.imm != 0 {
                return bad();
            }
            if i.dst == 10 {
                return Err(OpcodeError::FramePointerWrite);
            }
        }
        class::ST => {
            if i.mem_mode() != mem::MEM || i.src != 0 {
                return bad();
            }
        }
        class::STX => match i.mem_mode() {
            mem::MEM if i.imm == 0 => {}
            mem::ATOMIC if i.mem_size() >= 4 => {
                let ok = [atomic::ADD, atomic::OR, atomic::AND, atomic::XOR]
                    .iter()
                    .any(|o| i.imm == *o || i.imm == *o | atomic::FETCH)
                    || i.imm == atomic::XCHG
                    || i.imm == atomic::CMPXCHG;
                if !ok {
                    return Err(OpcodeError::Atomic(i.imm));
                }
            }
            _ => return bad(),
        },
        class::JMP | class::JMP32 => match i.op() {
            jmp::JA if i.class() == class::JMP32 => {}
            jmp::JA | jmp::EXIT => {}
            jmp::CALL if i.class() == class::JMP => {}
            jmp::JEQ
            | jmp::JGT
            | jmp::JGE
            | jmp::JSET
            | jmp::JNE
            | jmp::JSGT
            | jmp::JSGE
            | jmp::JLT
            | jmp::JLE
            | jmp::JSLT
            | jmp::JSLE => {}
            _ => return bad(),
        },
        _ => return bad(),
    }
    Ok(())
}

/// Jump target of a branch instruction, if any.
pub(super) fn branch_target(pc: usize, i: Insn) -> Option<i64> {
    match (i.class(), i.op()) {
        (class::JMP32, jmp::JA) => Some(pc as i64 + 1 + i.imm as i64),
        (class::JMP, jmp::CALL | jmp::EXIT) => None,
        (class::JMP | class::JMP32, _) => Some(pc as i64 + 1 + i.off as i64),
        _ => None,
    }
}

pub(super) fn local_call_target(pc: usize, i: Insn) -> Option<i64> {
    (i.code == crate::insn::op::CALL && i.src == pseudo::CALL).then(|| pc as i64 + 1 + i.imm as i64)
}

pub(super) fn shape(prog: &[Insn], env: &Env<'_>) -> VResult<Shape> {
    if prog.is_empty() {
        return Err(VerifyError { pc: 0, text: String::new(), msg: "the program is empty".into() });
    }
    if prog.len() > MAX_INSNS {
        return Err(VerifyError {
            pc: 0,
            text: String::new(),
            msg: format!("{} instructions exceed the limit of {MAX_INSNS}", prog.len()),
        });
    }
    let n = prog.len();
    let mut wide_tail = vec![false; n];
    let mut pc = 0;
    while pc < n {
        let i = prog[pc];
        valid_opcode(i, env).map_err(|e| reject(prog, pc, e.to_string()))?;
        if i.is_lddw() {
            let tail = prog
                .get(pc + 1)
                .ok_or_else(|| reject(prog, pc, "lddw is missing its second half"))?;
            if tail.code != 0 || tail.dst != 0 || tail.src != 0 || tail.off != 0 {
                return Err(reject(prog, pc, "lddw's second half is malformed"));
            }
            wide_tail[pc + 1] = true;
            pc += 2;
        } else {
            pc += 1;
        }
    }
    // Functions: the entry and every local call target.
    let mut starts = BTreeSet::from([0usize]);
    let mut prune = vec![false; n];
    for (pc, i) in prog.iter().enumerate() {
        if wide_tail[pc] {
            continue;
        }
        for t in [branch_target(pc, *i), local_call_target(pc, *i)].into_iter().flatten() {
            if t < 0 || t as usize >= n {
                return Err(reject(
                    prog,
                    pc,
                    format!("jump to {t} is outside the program (0..{n})"),
                ));
            }
            if wide_tail[t as usize] {
                return Err(reject(prog, pc, "jump into the middle of an lddw"));
            }
            prune[t as usize] = true;
        }
        if let Some(t) = local_call_target(pc, *i) {
            starts.insert(t as usize);
            if pc + 1 < n {
                prune[pc + 1] = true;
            }
        }
        if branch_target(pc, *i).is_some() && i.op() != jmp::JA && pc + 1 < n {
            prune[pc + 1] = true;
        }
    }
    // Jumps stay inside their function; functions end with exit or an unconditional jump.
    let starts: Vec<usize> = starts.into_iter().collect();
    for (k, &s) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(n);
        for pc in s..end {
            if wide_tail[pc] {
                continue;
            }
            if let Some(t) = branch_target(pc, prog[pc]) {
                if (t as usize) < s || t as usize >= end {
                    return Err(reject(prog, pc, "jump leaves its function"));
                }
            }
        }
        let mut last = end - 1;
        if wide_tail[last] {
            last -= 1;
        }
        let li = prog[last];
        let ends = li.code == crate::insn::op::EXIT
            || li.code == crate::insn::op::JA
            || li.code == crate::insn::op::JA32;
        if !ends {
            return Err(reject(
                prog,
                last,
                "the last instruction of a function must be exit or an unconditional jump",
            ));
        }
    }
    Ok(Shape { prune })
}
