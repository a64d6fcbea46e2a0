//! eBPF instructions (RFC 9669): the 64-bit encoding, field accessors and opcode constants.
//!
//! ```text
//! 63            32 31      16 15  12 11   8 7       0
//! |     imm (i32)  | off (i16)| src  | dst  | opcode  |
//! ```
//! `lddw` takes two slots; the second holds the upper 32 bits of the constant in its `imm`.

/// Instruction classes (low 3 bits of the opcode).
pub mod class {
    pub const LD: u8 = 0x00;
    pub const LDX: u8 = 0x01;
    pub const ST: u8 = 0x02;
    pub const STX: u8 = 0x03;
    pub const ALU: u8 = 0x04;
    pub const JMP: u8 = 0x05;
    pub const JMP32: u8 = 0x06;
    pub const ALU64: u8 = 0x07;
}

/// Operand source bit of ALU and JMP opcodes.
pub const SRC_K: u8 = 0x00;
pub const SRC_X: u8 = 0x08;

/// ALU operations (high 4 bits).
pub mod alu {
    pub const ADD: u8 = 0x00;
    pub const SUB: u8 = 0x10;
    pub const MUL: u8 = 0x20;
    pub const DIV: u8 = 0x30;
    pub const OR: u8 = 0x40;
    pub const AND: u8 = 0x50;
    pub const LSH: u8 = 0x60;
    pub const RSH: u8 = 0x70;
    pub const NEG: u8 = 0x80;
    pub const MOD: u8 = 0x90;
    pub const XOR: u8 = 0xa0;
    pub const MOV: u8 = 0xb0;
    pub const ARSH: u8 = 0xc0;
    pub const END: u8 = 0xd0;
}

/// Jump operations (high 4 bits).
pub mod jmp {
    pub const JA: u8 = 0x00;
    pub const JEQ: u8 = 0x10;
    pub const JGT: u8 = 0x20;
    pub const JGE: u8 = 0x30;
    pub const JSET: u8 = 0x40;
    pub const JNE: u8 = 0x50;
    pub const JSGT: u8 = 0x60;
    pub const JSGE: u8 = 0x70;
    pub const CALL: u8 = 0x80;
    pub const EXIT: u8 = 0x90;
    pub const JLT: u8 = 0xa0;
    pub const JLE: u8 = 0xb0;
    pub const JSLT: u8 = 0xc0;
    pub const JSLE: u8 = 0xd0;
}

/// Memory access sizes (bits 3-4) and modes (bits 5-7) of load/store opcodes.
pub mod mem {
    pub const W: u8 = 0x00;
    pub const H: u8 = 0x08;
    pub const B: u8 = 0x10;
    pub const DW: u8 = 0x18;
    pub const IMM: u8 = 0x00;
    pub const MEM: u8 = 0x60;
    pub const MEMSX: u8 = 0x80;
    pub const ATOMIC: u8 = 0xc0;
}

/// Atomic operations (the `imm` of an atomic store).
pub mod atomic {
    pub const ADD: i32 = 0x00;
    pub const OR: i32 = 0x40;
    pub const AND: i32 = 0x50;
    pub const XOR: i32 = 0xa0;
    pub const FETCH: i32 = 0x01;
    pub const XCHG: i32 = 0xe0 | FETCH;
    pub const CMPXCHG: i32 = 0xf0 | FETCH;
}

/// `src` values of `lddw` (what the 64-bit immediate means) and of `call`.
pub mod pseudo {
    /// `lddw dst, map`: imm is a map index, replaced by the map's address at load time.
    pub const MAP_FD: u8 = 1;
    /// `lddw dst, map_value`: the address of a map's value (global data) plus the second imm.
    pub const MAP_VALUE: u8 = 2;
    /// `lddw dst, map_entry`: the value of the hash map slot in the second imm. hotplane's own
    /// (a number Linux does not use): only the chain specialiser emits it, and only its
    /// verifier context, [`crate::verifier::Context::XdpMinLen`], accepts it.
    pub const MAP_ENTRY: u8 = 7;
    /// `call`: imm is the PC-relative offset of a local function.
    pub const CALL: u8 = 1;
}

/// Frequently used complete opcodes.
pub mod op {
    use super::*;
    pub const LDDW: u8 = class::LD | mem::IMM | mem::DW;
    pub const CALL: u8 = class::JMP | jmp::CALL;
    pub const CALLX: u8 = class::JMP | jmp::CALL | SRC_X;
    pub const EXIT: u8 = class::JMP | jmp::EXIT;
    pub const JA: u8 = class::JMP | jmp::JA;
    pub const JA32: u8 = class::JMP32 | jmp::JA;
    pub const MOV64_IMM: u8 = class::ALU64 | alu::MOV | SRC_K;
}

/// One 64-bit instruction slot.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Self { code, dst, src, off, imm }
    }

    /// Decode a slot from its little-endian u64 form.
    pub fn from_u64(w: u64) -> Self {
        Self {
            code: w as u8,
            dst: (w >> 8) as u8 & 0x0f,
            src: (w >> 12) as u8 & 0x0f,
            off: (w >> 16) as u16 as i16,
            imm: (w >> 32) as u32 as i32,
        }
    }

    pub fn to_u64(self) -> u64 {
        self.code as u64
            | ((self.dst as u64 & 0x0f) << 8)
            | ((self.src as u64 & 0x0f) << 12)
            | ((self.off as u16 as u64) << 16)
            | ((self.imm as u32 as u64) << 32)
    }

    pub fn class(self) -> u8 {
        self.code & 0x07
    }

    /// ALU/JMP operation (high 4 bits).
    pub fn op(self) -> u8 {
        self.code & 0xf0
    }

    /// ALU/JMP operand source: `SRC_X` uses the `src` register.
    pub fn is_src_reg(self) -> bool {
        self.code & SRC_X != 0
    }

    /// Access size in bytes of a load/store.
    pub fn mem_size(self) -> usize {
        match self.code & 0x18 {
            mem::W => 4,
            mem::H => 2,
            mem::B => 1,
            _ => 8,
        }
    }

    /// Load/store mode (bits 5-7).
    pub fn mem_mode(self) -> u8 {
        self.code & 0xe0
    }

    pub fn is_lddw(self) -> bool {
        self.code == op::LDDW
    }
}

impl Insn {
    /// The same instruction with another immediate.
    pub const fn with_imm(mut self, imm: i32) -> Self {
        self.imm = imm;
        self
    }
}

impl core::fmt::Debug for Insn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:#04x} r{} r{} {:+} {:#x}", self.code, self.dst, self.src, self.off, self.imm)
    }
}

/// A byte image whose length is not a multiple of the instruction size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{len} bytes is not a whole number of 8-byte instructions")]
pub struct PartialInsn {
    pub len: usize,
}

/// Decode a little-endian byte image (as in ELF sections) into slots; trailing bytes are an error.
pub fn decode_bytes(b: &[u8]) -> Result<Vec<Insn>, PartialInsn> {
    if b.len() % 8 != 0 {
        return Err(PartialInsn { len: b.len() });
    }
    Ok(b.chunks_exact(8)
        .map(|c| {
            Insn::from_u64(u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        })
        .collect())
}

/// The byte image of instructions.
pub fn encode_bytes(p: &[Insn]) -> Vec<u8> {
    p.iter().flat_map(|i| i.to_u64().to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_matches_the_conformance_raw_form() {
        // lddw %r0, 0x1122334455667788 as given in lddw.data
        let a = Insn::from_u64(0x5566778800000018);
        assert_eq!((a.code, a.dst, a.src, a.off, a.imm), (0x18, 0, 0, 0, 0x55667788));
        assert_eq!(Insn::from_u64(0x1122334400000000).imm, 0x11223344);
        for w in [0x5566778800000018u64, 0xffff_fffe_8765_4321, 0x95] {
            assert_eq!(Insn::from_u64(w).to_u64(), w);
        }
        assert_eq!(decode_bytes(&encode_bytes(&[a])).unwrap(), vec![a]);
        assert!(decode_bytes(&[0; 7]).is_err());
    }
}
