//! Structured XDP programs from fuzz bytes: the shapes that produced the verifier's holes
//! (issue 18) come up often instead of once in 2^64 random instruction words. A prologue loads
//! `data`, `data_end` and the context into r6, r7, r8 and checks a few packet bytes; the body
//! mixes ALU32 and ALU64 byte swaps, wide constants, stack and packet pointers, loads, stores,
//! atomics (cmpxchg with pointer operands too), context loads at large offsets, map lookups,
//! forward branches, and bpf-to-bpf calls that pass, store and return stack pointers.
//!
//! Shared by the fuzz targets and the kernel differential test (through `#[path]`): it depends
//! on `hotplane_ebpf::insn` only.

use hotplane_ebpf::insn::{alu, atomic, class, jmp, mem, op, pseudo, Insn, SRC_K, SRC_X};

/// Fuzz bytes, read one choice at a time; zeros once exhausted.
pub struct Choices<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Choices<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn below(&mut self, n: u8) -> u8 {
        self.byte() % n
    }

    fn i32(&mut self) -> i32 {
        i32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// A register the body works with (r0..r9).
    fn reg(&mut self) -> u8 {
        self.below(10)
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.byte() as usize % xs.len()]
    }
}

/// Constants around the boundaries where 32-bit and 64-bit views differ.
const WIDE: [u64; 10] = [
    0x1_0000_0000,
    0xffff_ffff,
    0x8000_0000,
    0x8000_0000_0000_0000,
    u64::MAX,
    0x7fff_ffff_ffff_ffff,
    0x1_0000_0001,
    0xffff_ffff_0000_0000,
    0x100,
    0x10000,
];

/// Context offsets: the fields, their neighbours, and offsets that wrap 16-bit arithmetic.
const CTX_OFFSETS: [i16; 12] = [0, 4, 8, 12, 16, 20, 24, 2, 32767, -32768, 32755, -4];

const ALU_OPS: [u8; 13] = [
    alu::ADD,
    alu::SUB,
    alu::MUL,
    alu::DIV,
    alu::OR,
    alu::AND,
    alu::LSH,
    alu::RSH,
    alu::NEG,
    alu::MOD,
    alu::XOR,
    alu::MOV,
    alu::ARSH,
];

const JMP_OPS: [u8; 11] = [
    jmp::JEQ,
    jmp::JGT,
    jmp::JGE,
    jmp::JSET,
    jmp::JNE,
    jmp::JSGT,
    jmp::JSGE,
    jmp::JLT,
    jmp::JLE,
    jmp::JSLT,
    jmp::JSLE,
];

const SIZES: [u8; 4] = [mem::B, mem::H, mem::W, mem::DW];

/// One function under construction: instructions, and fix-ups to apply once the layout is
/// known.
struct Func {
    insns: Vec<Insn>,
    /// Conditional jumps to this function's epilogue.
    to_end: Vec<usize>,
    /// Local calls: (index, callee function).
    calls: Vec<(usize, usize)>,
}

impl Func {
    fn push(&mut self, i: Insn) {
        self.insns.push(i);
    }

    fn lddw(&mut self, dst: u8, src: u8, v: u64) {
        self.push(Insn::new(op::LDDW, dst, src, 0, v as u32 as i32));
        self.push(Insn::new(0, 0, 0, 0, (v >> 32) as u32 as i32));
    }

    fn mov_reg(&mut self, dst: u8, src: u8) {
        self.push(Insn::new(class::ALU64 | alu::MOV | SRC_X, dst, src, 0, 0));
    }

    fn add_imm(&mut self, dst: u8, v: i32) {
        self.push(Insn::new(class::ALU64 | alu::ADD | SRC_K, dst, 0, 0, v));
    }

    fn jump_to_end(&mut self, code: u8, dst: u8, src: u8, imm: i32) {
        self.to_end.push(self.insns.len());
        self.push(Insn::new(code, dst, src, 0, imm));
    }
}

/// Functions a generated program has at most (main included).
const MAX_FUNCS: usize = 3;

/// A program from `data`; it may or may not verify.
pub fn generate(data: &[u8]) -> Vec<Insn> {
    let mut c = Choices::new(data);
    let funcs = 1 + c.below(MAX_FUNCS as u8) as usize;
    let mut built = Vec::new();
    for f in 0..funcs {
        built.push(function(&mut c, f, funcs));
    }
    // Functions main never calls would be unreachable code, which Linux refuses: leave them
    // out, so that the kernel differential test compares the rest.
    let mut called = vec![false; funcs];
    called[0] = true;
    for k in 0..funcs {
        if called[k] {
            for &(_, callee) in &built[k].calls {
                called[callee] = true;
            }
        }
    }
    // Layout: main first, then the others; fix jumps to epilogues and calls.
    let mut starts = vec![0; funcs];
    let mut at = 0usize;
    for (k, f) in built.iter().enumerate().filter(|(k, _)| called[*k]) {
        starts[k] = at;
        at += f.insns.len();
    }
    let mut out = Vec::with_capacity(at);
    for (k, f) in built.iter().enumerate().filter(|(k, _)| called[*k]) {
        let mut insns = f.insns.clone();
        // The epilogue is the last three instructions (mov r0; exit) or two (exit only).
        let end = insns.len() - epilogue_len(&insns);
        for &j in &f.to_end {
            insns[j].off = (end as i64 - j as i64 - 1).clamp(0, i16::MAX as i64) as i16;
        }
        for &(j, callee) in &f.calls {
            let pc = starts[k] + j;
            insns[j].imm = (starts[callee] as i64 - pc as i64 - 1) as i32;
        }
        out.extend(insns);
    }
    out
}

fn epilogue_len(insns: &[Insn]) -> usize {
    if insns.len() >= 2 && insns[insns.len() - 2].code == (class::ALU64 | alu::MOV | SRC_K) {
        2
    } else {
        1
    }
}

fn function(c: &mut Choices, me: usize, funcs: usize) -> Func {
    let mut f = Func { insns: Vec::new(), to_end: Vec::new(), calls: Vec::new() };
    let main = me == 0;
    if main {
        // r6 = data, r7 = data_end, r8 = ctx; check `n` packet bytes through a copy of r6.
        f.push(Insn::new(class::LDX | mem::MEM | mem::W, 6, 1, 0, 0));
        f.push(Insn::new(class::LDX | mem::MEM | mem::W, 7, 1, 4, 0));
        f.mov_reg(8, 1);
        f.mov_reg(2, 6);
        f.add_imm(2, c.below(48) as i32);
        f.jump_to_end(class::JMP | jmp::JGT | SRC_X, 2, 7, 0);
    }
    // Registers and a few stack slots start initialised, so that bodies get somewhere.
    for r in 0..10u8 {
        // main: r0-r5 (r6-r8 are taken); others: r0 and the callee-saved r6-r9.
        if (main && r < 6) || (!main && (r == 0 || r >= 6)) {
            f.push(Insn::new(op::MOV64_IMM, r, 0, 0, c.below(16) as i32));
        }
    }
    for k in 1..=c.below(4) as i16 {
        f.push(Insn::new(class::ST | mem::MEM | mem::DW, 10, 0, -8 * k, c.below(8) as i32));
    }
    let n = 1 + c.below(12);
    for _ in 0..n {
        if c.done() {
            break;
        }
        template(c, &mut f, me, funcs);
    }
    // Epilogue: usually a scalar return, sometimes whatever r0 holds (a pointer, even).
    if c.below(4) != 0 {
        f.push(Insn::new(op::MOV64_IMM, 0, 0, 0, c.below(5) as i32));
    }
    f.push(Insn::new(op::EXIT, 0, 0, 0, 0));
    f
}

fn template(c: &mut Choices, f: &mut Func, me: usize, funcs: usize) {
    match c.below(20) {
        0 | 1 => {
            // ALU64 / ALU32 with a register or an immediate.
            let cls = if c.byte() & 1 == 0 { class::ALU64 } else { class::ALU };
            let aop = c.pick(&ALU_OPS);
            let dst = c.reg();
            if aop != alu::NEG && c.byte() & 1 == 0 {
                let src = c.reg();
                f.push(Insn::new(cls | aop | SRC_X, dst, src, 0, 0));
            } else {
                let imm = if c.byte() & 1 == 0 { c.below(64) as i32 } else { c.i32() };
                f.push(Insn::new(cls | aop | SRC_K, dst, 0, 0, imm));
            }
        }
        2 | 3 => {
            // Byte swaps: le/be in the 32-bit class (64-bit widths too), bswap in ALU64.
            let cls = if c.byte() & 1 == 0 { class::ALU } else { class::ALU64 };
            let src = if cls == class::ALU && c.byte() & 1 == 1 { SRC_X } else { SRC_K };
            let width = c.pick(&[16, 32, 64]);
            let dst = c.reg();
            if c.byte() & 1 == 0 {
                let v = c.pick(&WIDE);
                f.lddw(dst, 0, v);
            }
            f.push(Insn::new(cls | alu::END | src, dst, 0, 0, width));
            if c.byte() & 1 == 0 {
                // ... and the result used as a pointer offset.
                let p = c.pick(&[6, 2, 3]);
                f.push(Insn::new(class::ALU64 | alu::ADD | SRC_X, p, dst, 0, 0));
            }
        }
        4 => {
            let dst = c.reg();
            let v = c.pick(&WIDE);
            f.lddw(dst, 0, v);
        }
        5 => {
            // A stack pointer (a callee's to pass or leak).
            let dst = c.pick(&[0, 1, 2, 3, 4, 5, 9]);
            f.mov_reg(dst, 10);
            f.add_imm(dst, -8 * (1 + c.below(8) as i32));
        }
        6 => {
            // A packet pointer with a small offset.
            let dst = c.pick(&[1, 2, 3, 4, 5, 9]);
            f.mov_reg(dst, 6);
            f.add_imm(dst, c.below(64) as i32 - 8);
        }
        7 | 8 => {
            let size = c.pick(&SIZES);
            let (dst, src) = (c.reg(), c.pick(&[6, 10, 6, 10, 0, 1, 2, 9]));
            let off = c.pick(&[0i16, 1, 2, 4, 8, -8, -16, -24, -512, 511]);
            f.push(Insn::new(class::LDX | mem::MEM | size, dst, src, off, 0));
        }
        9 | 10 => {
            let size = c.pick(&SIZES);
            let (dst, src) = (c.pick(&[6, 10, 6, 10, 0, 1, 2, 9]), c.pick(&[0, 1, 2, 3, 6, 10]));
            let off = c.pick(&[0i16, 2, 8, -8, -16, -24, -64, 6]);
            if c.byte() & 1 == 0 {
                f.push(Insn::new(class::STX | mem::MEM | size, dst, src, off, 0));
            } else {
                f.push(Insn::new(class::ST | mem::MEM | size, dst, 0, off, c.i32()));
            }
        }
        11 => {
            // Atomics, cmpxchg with a pointer (or not) as the expected value in r0.
            let imm = c.pick(&[
                atomic::ADD,
                atomic::OR,
                atomic::AND,
                atomic::XOR,
                atomic::ADD | atomic::FETCH,
                atomic::XCHG,
                atomic::CMPXCHG,
                atomic::CMPXCHG,
            ]);
            if imm == atomic::CMPXCHG && c.byte() & 1 == 0 {
                let p = c.pick(&[10, 6, 1, 2]);
                f.mov_reg(0, p);
            }
            let size = c.pick(&[mem::W, mem::DW]);
            let (dst, src) = (c.pick(&[10, 1, 2, 3, 0]), c.pick(&[1, 2, 3, 4, 10]));
            let off = c.pick(&[-8i16, -16, 0, -4, 8]);
            f.push(Insn::new(class::STX | mem::ATOMIC | size, dst, src, off, imm));
        }
        12 => {
            // Context loads, through a moved context pointer too.
            let base = if c.byte() & 1 == 0 {
                8
            } else {
                f.mov_reg(9, 8);
                let by = c.pick(&[-32755, -32768, 32768, 4, -4, 65536, -65536]);
                f.add_imm(9, by);
                9
            };
            let off = c.pick(&CTX_OFFSETS);
            let size = c.pick(&[mem::W, mem::W, mem::DW, mem::B]);
            let dst = c.pick(&[0, 2, 3, 4, 5]);
            f.push(Insn::new(class::LDX | mem::MEM | size, dst, base, off, 0));
        }
        13 | 14 => {
            // Forward branch to the epilogue.
            let jop = c.pick(&JMP_OPS);
            let cls = if c.byte() & 1 == 0 { class::JMP } else { class::JMP32 };
            let dst = c.reg();
            if c.byte() & 1 == 0 {
                let src = c.pick(&[0, 1, 2, 3, 4, 5, 6, 7, 9, 10]);
                f.jump_to_end(cls | jop | SRC_X, dst, src, 0);
            } else {
                f.jump_to_end(cls | jop | SRC_K, dst, 0, c.below(64) as i32);
            }
        }
        15 => {
            // A local call: arguments may be pointers into this frame.
            if me + 1 < funcs {
                let callee = me + 1 + c.below((funcs - me - 1) as u8) as usize;
                let slot = -8 * (1 + c.below(4) as i16);
                let pass = c.byte() & 1 == 0;
                if pass {
                    f.mov_reg(1, 10);
                    f.add_imm(1, slot as i32);
                }
                f.calls.push((f.insns.len(), callee));
                f.push(Insn::new(op::CALL, 0, pseudo::CALL, 0, 0));
                if pass && c.byte() & 1 == 0 {
                    // Use what the callee may have left in the slot (a pointer into its
                    // frame, now dead): read or write through it, or pass it on.
                    f.push(Insn::new(class::LDX | mem::MEM | mem::DW, 9, 10, slot, 0));
                    match c.below(3) {
                        0 => f.push(Insn::new(class::LDX | mem::MEM | mem::DW, 0, 9, 0, 0)),
                        1 => f.push(Insn::new(class::ST | mem::MEM | mem::DW, 9, 0, 0, c.i32())),
                        _ => f.mov_reg(1, 9),
                    }
                }
            } else {
                // In the last function: keep a stack pointer through r1/r0 (the leak shapes).
                let (dst, src) = (c.pick(&[1, 2, 0]), c.pick(&[10, 2, 3]));
                if src != 10 {
                    f.mov_reg(src, 10);
                    f.add_imm(src, -8 * (1 + c.below(8) as i32));
                }
                if dst == 0 {
                    f.mov_reg(0, src);
                } else {
                    f.push(Insn::new(class::STX | mem::MEM | mem::DW, dst, src, 0, 0));
                }
            }
        }
        16 => {
            // A map lookup with its null check; r0 is then a map value.
            let map = c.below(4) as u64;
            f.push(Insn::new(class::ST | mem::MEM | mem::DW, 10, 0, -8, c.below(4) as i32));
            f.mov_reg(2, 10);
            f.add_imm(2, -8);
            f.lddw(1, pseudo::MAP_FD, map);
            f.push(Insn::new(op::CALL, 0, 0, 0, 1));
            f.jump_to_end(class::JMP | jmp::JEQ | SRC_K, 0, 0, 0);
        }
        17 => {
            // Spill and fill.
            let (r, slot) = (c.reg(), -8 * (1 + c.below(6) as i16));
            f.push(Insn::new(class::STX | mem::MEM | mem::DW, 10, r, slot, 0));
            let r2 = c.reg();
            f.push(Insn::new(class::LDX | mem::MEM | mem::DW, r2, 10, slot, 0));
        }
        18 => {
            // Signed division and modulo, and sign-extending moves.
            let cls = if c.byte() & 1 == 0 { class::ALU64 } else { class::ALU };
            let (dst, src) = (c.reg(), c.reg());
            match c.below(3) {
                0 => f.push(Insn::new(cls | alu::DIV | SRC_X, dst, src, 1, 0)),
                1 => f.push(Insn::new(cls | alu::MOD | SRC_X, dst, src, 1, 0)),
                _ => {
                    let widths: &[i16] = if cls == class::ALU64 { &[8, 16, 32] } else { &[8, 16] };
                    f.push(Insn::new(cls | alu::MOV | SRC_X, dst, src, c.pick(widths), 0))
                }
            }
        }
        _ if c.below(8) != 0 => {
            // Spill a packet or stack pointer and fill it into another register.
            let (p, slot) = (c.pick(&[6, 10, 8]), -8 * (1 + c.below(6) as i16));
            f.push(Insn::new(class::STX | mem::MEM | mem::DW, 10, p, slot, 0));
            let r = c.pick(&[1, 2, 3, 4, 5, 9]);
            f.push(Insn::new(class::LDX | mem::MEM | mem::DW, r, 10, slot, 0));
        }
        _ => {
            // Anything at all (the registers kept in range), now and then.
            let w = u64::from_le_bytes([
                c.byte(),
                c.byte(),
                c.byte(),
                c.byte(),
                c.byte(),
                c.byte(),
                c.byte(),
                c.byte(),
            ]);
            let mut i = Insn::from_u64(w);
            i.dst %= 11;
            i.src %= 11;
            f.push(i);
        }
    }
}
