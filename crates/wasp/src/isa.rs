//! The VPU's instructions and their byte encoding (`docs/wasp.md` §4).
//!
//! One opcode byte, then 0, 1 or 2 operand bytes fixed by the opcode. [`decode_one`] reads one
//! instruction without program-level checks (the validator in `decode` adds those);
//! [`Insn::encode`] writes the shortest encoding, choosing the one-byte short forms for 64-bit
//! scratchpad and map-bank words when they exist.

use crate::error::Reject;

/// The longest instruction, in bytes.
pub const MAX_INSN_LEN: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reg {
    A,
    B,
}

/// The four banks of the VPU's address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Bank {
    /// `s`: the packet's scratchpad, read/write.
    Scratch = 0,
    /// `m`: the ESS bank of the last `map`, read/write.
    Map = 1,
    /// `e`: the node's environment, read-only.
    Env = 2,
    /// `h`: the network header, read-only.
    Net = 3,
}

impl Bank {
    pub const ALL: [Bank; 4] = [Bank::Scratch, Bank::Map, Bank::Env, Bank::Net];

    pub fn letter(self) -> char {
        match self {
            Bank::Scratch => 's',
            Bank::Map => 'm',
            Bank::Env => 'e',
            Bank::Net => 'h',
        }
    }

    pub fn writable(self) -> bool {
        matches!(self, Bank::Scratch | Bank::Map)
    }
}

/// Access width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Width {
    W8 = 0,
    W16 = 1,
    W32 = 2,
    W64 = 3,
}

impl Width {
    pub const ALL: [Width; 4] = [Width::W8, Width::W16, Width::W32, Width::W64];

    pub fn bytes(self) -> usize {
        1 << (self as usize)
    }
    pub fn bits(self) -> u32 {
        8 << (self as u32)
    }
}

/// A bank operand: `bank.width[index]`, index in units of the width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mem {
    pub bank: Bank,
    pub width: Width,
    pub index: u8,
}

/// Register operations without an operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AluOp {
    Add = 0,
    Sub,
    And,
    Or,
    Xor,
    Min,
    Max,
    Not,
    Inc,
    Dec,
    Swap,
    /// `mov a, b`: A <- B.
    MovAB,
    /// `mov b, a`: B <- A.
    MovBA,
    Clr,
}

impl AluOp {
    pub const ALL: [AluOp; 14] = [
        AluOp::Add,
        AluOp::Sub,
        AluOp::And,
        AluOp::Or,
        AluOp::Xor,
        AluOp::Min,
        AluOp::Max,
        AluOp::Not,
        AluOp::Inc,
        AluOp::Dec,
        AluOp::Swap,
        AluOp::MovAB,
        AluOp::MovBA,
        AluOp::Clr,
    ];

    pub fn mnemonic(self) -> &'static str {
        match self {
            AluOp::Add => "add",
            AluOp::Sub => "sub",
            AluOp::And => "and",
            AluOp::Or => "or",
            AluOp::Xor => "xor",
            AluOp::Min => "min",
            AluOp::Max => "max",
            AluOp::Not => "not",
            AluOp::Inc => "inc",
            AluOp::Dec => "dec",
            AluOp::Swap => "swap",
            AluOp::MovAB => "mov a, b",
            AluOp::MovBA => "mov b, a",
            AluOp::Clr => "clr",
        }
    }
}

/// Compare conditions, `A` against `B` unsigned (`Nz`: `A != 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Cond {
    Eq = 0,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Nz,
}

impl Cond {
    pub const ALL: [Cond; 7] =
        [Cond::Eq, Cond::Ne, Cond::Lt, Cond::Le, Cond::Gt, Cond::Ge, Cond::Nz];

    pub fn mnemonic(self) -> &'static str {
        match self {
            Cond::Eq => "ceq",
            Cond::Ne => "cne",
            Cond::Lt => "clt",
            Cond::Le => "cle",
            Cond::Gt => "cgt",
            Cond::Ge => "cge",
            Cond::Nz => "cnz",
        }
    }

    pub fn holds(self, a: u64, b: u64) -> bool {
        match self {
            Cond::Eq => a == b,
            Cond::Ne => a != b,
            Cond::Lt => a < b,
            Cond::Le => a <= b,
            Cond::Gt => a > b,
            Cond::Ge => a >= b,
            Cond::Nz => a != 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JumpWhen {
    Always,
    IfTrue,
    IfFalse,
}

impl JumpWhen {
    pub fn mnemonic(self) -> &'static str {
        match self {
            JumpWhen::Always => "jmp",
            JumpWhen::IfTrue => "jt",
            JumpWhen::IfFalse => "jf",
        }
    }
}

/// One instruction as encoded (jump offsets relative to the next instruction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insn {
    Nop,
    Fwd,
    Drop,
    Return,
    Alu(AluOp),
    Shl(u8),
    Shr(u8),
    Imm { reg: Reg, value: u16 },
    AddI(u8),
    SubI(u8),
    Cmp(Cond),
    Jump { when: JumpWhen, offset: i8 },
    Ld { reg: Reg, mem: Mem },
    St { mem: Mem },
    Ldx { mem: Mem },
    Stx { mem: Mem },
    Lookup(u8),
    Insert(u8),
    Map(u8),
}

mod op {
    pub const NOP: u8 = 0x00;
    pub const FWD: u8 = 0x01;
    pub const DROP: u8 = 0x02;
    pub const RETURN: u8 = 0x03;
    pub const ALU: u8 = 0x10;
    pub const SHL: u8 = 0x20;
    pub const SHR: u8 = 0x21;
    pub const IMM8_A: u8 = 0x22;
    pub const IMM8_B: u8 = 0x23;
    pub const IMM16_A: u8 = 0x24;
    pub const IMM16_B: u8 = 0x25;
    pub const ADDI: u8 = 0x26;
    pub const SUBI: u8 = 0x27;
    pub const CMP: u8 = 0x30;
    pub const JMP: u8 = 0x38;
    pub const JT: u8 = 0x39;
    pub const JF: u8 = 0x3a;
    pub const LD_A: u8 = 0x40;
    pub const LD_B: u8 = 0x50;
    pub const ST: u8 = 0x60;
    pub const LDX: u8 = 0x70;
    pub const STX: u8 = 0x80;
    pub const LOOKUP: u8 = 0x90;
    pub const INSERT: u8 = 0x94;
    pub const MAP: u8 = 0x98;
    pub const LD_A_S64: u8 = 0xa0;
    pub const LD_B_S64: u8 = 0xb0;
    pub const ST_S64: u8 = 0xc0;
    pub const LD_A_M64: u8 = 0xd0;
    pub const LD_B_M64: u8 = 0xd4;
    pub const ST_M64: u8 = 0xd8;
}

/// Highest 64-bit word index with a one-byte short form, per bank (scratchpad 16, map 4).
const SHORT_S64: u8 = 16;
const SHORT_M64: u8 = 4;

fn mem_of(low: u8, index: u8) -> Mem {
    Mem {
        bank: Bank::ALL[usize::from(low >> 2) & 3],
        width: Width::ALL[usize::from(low) & 3],
        index,
    }
}

fn mem_code(mem: Mem) -> u8 {
    ((mem.bank as u8) << 2) | mem.width as u8
}

/// Reads one instruction at the start of `code`: the instruction and its length. Checks only
/// what one instruction can check (known opcode, operand present, shift < 64); key slots and
/// jump targets are the validator's business.
pub fn decode_one(code: &[u8]) -> Result<(Insn, usize), Reject> {
    let opcode = *code.first().ok_or(Reject::TruncatedInstruction)?;
    let operand = |n: usize| -> Result<u8, Reject> {
        code.get(n).copied().ok_or(Reject::TruncatedInstruction)
    };
    let insn = match opcode {
        op::NOP => Insn::Nop,
        op::FWD => Insn::Fwd,
        op::DROP => Insn::Drop,
        op::RETURN => Insn::Return,
        0x10..=0x1d => Insn::Alu(AluOp::ALL[usize::from(opcode - op::ALU)]),
        op::SHL | op::SHR => {
            let shift = operand(1)?;
            if shift >= 64 {
                return Err(Reject::BadOperand);
            }
            if opcode == op::SHL {
                Insn::Shl(shift)
            } else {
                Insn::Shr(shift)
            }
        }
        op::IMM8_A => Insn::Imm { reg: Reg::A, value: u16::from(operand(1)?) },
        op::IMM8_B => Insn::Imm { reg: Reg::B, value: u16::from(operand(1)?) },
        op::IMM16_A | op::IMM16_B => {
            let value = u16::from_be_bytes([operand(1)?, operand(2)?]);
            let reg = if opcode == op::IMM16_A { Reg::A } else { Reg::B };
            Insn::Imm { reg, value }
        }
        op::ADDI => Insn::AddI(operand(1)?),
        op::SUBI => Insn::SubI(operand(1)?),
        0x30..=0x36 => Insn::Cmp(Cond::ALL[usize::from(opcode - op::CMP)]),
        op::JMP | op::JT | op::JF => {
            let when = match opcode {
                op::JMP => JumpWhen::Always,
                op::JT => JumpWhen::IfTrue,
                _ => JumpWhen::IfFalse,
            };
            Insn::Jump { when, offset: operand(1)? as i8 }
        }
        0x40..=0x4f => Insn::Ld { reg: Reg::A, mem: mem_of(opcode, operand(1)?) },
        0x50..=0x5f => Insn::Ld { reg: Reg::B, mem: mem_of(opcode, operand(1)?) },
        0x60..=0x6f => Insn::St { mem: mem_of(opcode, operand(1)?) },
        0x70..=0x7f => Insn::Ldx { mem: mem_of(opcode, operand(1)?) },
        0x80..=0x8f => Insn::Stx { mem: mem_of(opcode, operand(1)?) },
        0x90..=0x93 => Insn::Lookup(opcode - op::LOOKUP),
        0x94..=0x97 => Insn::Insert(opcode - op::INSERT),
        0x98..=0x9b => Insn::Map(opcode - op::MAP),
        0xa0..=0xaf => Insn::Ld { reg: Reg::A, mem: s64(opcode - op::LD_A_S64) },
        0xb0..=0xbf => Insn::Ld { reg: Reg::B, mem: s64(opcode - op::LD_B_S64) },
        0xc0..=0xcf => Insn::St { mem: s64(opcode - op::ST_S64) },
        0xd0..=0xd3 => Insn::Ld { reg: Reg::A, mem: m64(opcode - op::LD_A_M64) },
        0xd4..=0xd7 => Insn::Ld { reg: Reg::B, mem: m64(opcode - op::LD_B_M64) },
        0xd8..=0xdb => Insn::St { mem: m64(opcode - op::ST_M64) },
        _ => return Err(Reject::UnknownOpcode),
    };
    Ok((insn, len_of_opcode(opcode)))
}

/// Bytes an instruction with this (known) opcode occupies.
fn len_of_opcode(opcode: u8) -> usize {
    match opcode {
        op::IMM16_A | op::IMM16_B => 3,
        0x20..=0x27 | 0x38..=0x3a | 0x40..=0x8f => 2,
        _ => 1,
    }
}

fn s64(index: u8) -> Mem {
    Mem { bank: Bank::Scratch, width: Width::W64, index }
}
fn m64(index: u8) -> Mem {
    Mem { bank: Bank::Map, width: Width::W64, index }
}

/// The one-byte short form of a 64-bit word access, if there is one.
fn short_form(base: u8, mem: Mem) -> Option<u8> {
    match (mem.bank, mem.width) {
        (Bank::Scratch, Width::W64) if mem.index < SHORT_S64 => Some(base + mem.index),
        (Bank::Map, Width::W64) if mem.index < SHORT_M64 => Some(base + mem.index),
        _ => None,
    }
}

impl Insn {
    /// Length of the shortest encoding (the one `encode` writes).
    pub fn byte_len(&self) -> usize {
        let mut buf = [0u8; MAX_INSN_LEN];
        self.encode(&mut buf)
    }

    /// Writes the shortest encoding into `out`, returning its length.
    pub fn encode(&self, out: &mut [u8; MAX_INSN_LEN]) -> usize {
        let (bytes, len): ([u8; 3], usize) = match *self {
            Insn::Nop => ([op::NOP, 0, 0], 1),
            Insn::Fwd => ([op::FWD, 0, 0], 1),
            Insn::Drop => ([op::DROP, 0, 0], 1),
            Insn::Return => ([op::RETURN, 0, 0], 1),
            Insn::Alu(alu) => ([op::ALU + alu as u8, 0, 0], 1),
            Insn::Shl(n) => ([op::SHL, n, 0], 2),
            Insn::Shr(n) => ([op::SHR, n, 0], 2),
            Insn::Imm { reg, value } => {
                let [hi, lo] = value.to_be_bytes();
                match (reg, value <= 0xff) {
                    (Reg::A, true) => ([op::IMM8_A, lo, 0], 2),
                    (Reg::B, true) => ([op::IMM8_B, lo, 0], 2),
                    (Reg::A, false) => ([op::IMM16_A, hi, lo], 3),
                    (Reg::B, false) => ([op::IMM16_B, hi, lo], 3),
                }
            }
            Insn::AddI(n) => ([op::ADDI, n, 0], 2),
            Insn::SubI(n) => ([op::SUBI, n, 0], 2),
            Insn::Cmp(cond) => ([op::CMP + cond as u8, 0, 0], 1),
            Insn::Jump { when, offset } => {
                let code = match when {
                    JumpWhen::Always => op::JMP,
                    JumpWhen::IfTrue => op::JT,
                    JumpWhen::IfFalse => op::JF,
                };
                ([code, offset as u8, 0], 2)
            }
            Insn::Ld { reg, mem } => {
                let (scratch_base, map_base, long) = match reg {
                    Reg::A => (op::LD_A_S64, op::LD_A_M64, op::LD_A),
                    Reg::B => (op::LD_B_S64, op::LD_B_M64, op::LD_B),
                };
                let short = match mem.bank {
                    Bank::Scratch => short_form(scratch_base, mem),
                    Bank::Map => short_form(map_base, mem),
                    _ => None,
                };
                match short {
                    Some(code) => ([code, 0, 0], 1),
                    None => ([long + mem_code(mem), mem.index, 0], 2),
                }
            }
            Insn::St { mem } => {
                let short = match mem.bank {
                    Bank::Scratch => short_form(op::ST_S64, mem),
                    Bank::Map => short_form(op::ST_M64, mem),
                    _ => None,
                };
                match short {
                    Some(code) => ([code, 0, 0], 1),
                    None => ([op::ST + mem_code(mem), mem.index, 0], 2),
                }
            }
            Insn::Ldx { mem } => ([op::LDX + mem_code(mem), mem.index, 0], 2),
            Insn::Stx { mem } => ([op::STX + mem_code(mem), mem.index, 0], 2),
            Insn::Lookup(slot) => ([op::LOOKUP + (slot & 3), 0, 0], 1),
            Insn::Insert(slot) => ([op::INSERT + (slot & 3), 0, 0], 1),
            Insn::Map(slot) => ([op::MAP + (slot & 3), 0, 0], 1),
        };
        *out = bytes;
        len
    }

    /// The key slot an ESS instruction names.
    pub fn key_slot(&self) -> Option<u8> {
        match *self {
            Insn::Lookup(slot) | Insn::Insert(slot) | Insn::Map(slot) => Some(slot),
            _ => None,
        }
    }

    /// True for FWD, DROP, RETURN: the run ends here.
    pub fn is_fate(&self) -> bool {
        matches!(self, Insn::Fwd | Insn::Drop | Insn::Return)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte value either decodes (and re-encodes to something that decodes to the same
    /// instruction) or is an unknown opcode: the opcode table has no holes the encoder uses.
    #[test]
    fn every_opcode_round_trips_through_encode() {
        let mut known = 0;
        for opcode in 0..=255u8 {
            let code = [opcode, 5, 7];
            match decode_one(&code) {
                Ok((insn, len)) => {
                    known += 1;
                    let mut out = [0u8; MAX_INSN_LEN];
                    let n = insn.encode(&mut out);
                    assert!(n <= len, "{insn:?}: shortest encoding is never longer");
                    assert_eq!(decode_one(&out[..n]).unwrap().0, insn, "opcode {opcode:#04x}");
                }
                Err(reason) => assert_eq!(reason, Reject::UnknownOpcode, "opcode {opcode:#04x}"),
            }
        }
        // 4 fates, 14 alu, 8 immediate forms, 7 compares, 3 jumps, 80 long memory, 12 ess,
        // 48 scratch and 12 map short forms.
        assert_eq!(known, 4 + 14 + 8 + 7 + 3 + 80 + 12 + 48 + 12);
    }

    #[test]
    fn operands_are_checked_per_instruction() {
        assert_eq!(decode_one(&[0x20, 64]), Err(Reject::BadOperand));
        assert_eq!(decode_one(&[0x20, 63]), Ok((Insn::Shl(63), 2)));
        assert_eq!(decode_one(&[0x24, 1]), Err(Reject::TruncatedInstruction));
        assert_eq!(decode_one(&[0x38]), Err(Reject::TruncatedInstruction));
        assert_eq!(decode_one(&[]), Err(Reject::TruncatedInstruction));
        assert_eq!(
            decode_one(&[0x38, 0xff]).unwrap().0,
            Insn::Jump { when: JumpWhen::Always, offset: -1 }
        );
        // A long form of an access that also has a short form still occupies two bytes.
        let s0 = Mem { bank: Bank::Scratch, width: Width::W64, index: 0 };
        assert_eq!(decode_one(&[0x43, 0, 0x01]), Ok((Insn::Ld { reg: Reg::A, mem: s0 }, 2)));
    }

    #[test]
    fn short_forms_are_chosen_when_they_exist() {
        let s3 =
            Insn::Ld { reg: Reg::B, mem: Mem { bank: Bank::Scratch, width: Width::W64, index: 3 } };
        assert_eq!(s3.byte_len(), 1);
        let m2 = Insn::St { mem: Mem { bank: Bank::Map, width: Width::W64, index: 2 } };
        assert_eq!(m2.byte_len(), 1);
        let s16 = Insn::Ld {
            reg: Reg::A,
            mem: Mem { bank: Bank::Scratch, width: Width::W64, index: 16 },
        };
        assert_eq!(s16.byte_len(), 2);
        let e0 = Insn::St { mem: Mem { bank: Bank::Env, width: Width::W64, index: 0 } };
        assert_eq!(e0.byte_len(), 2);
        assert_eq!(Insn::Imm { reg: Reg::A, value: 300 }.byte_len(), 3);
    }
}
