//! A minimal x86-64 encoder: exactly the instruction forms the JIT emits.

pub const RAX: u8 = 0;
pub const RCX: u8 = 1;
pub const RDX: u8 = 2;
pub const RBX: u8 = 3;
pub const RSP: u8 = 4;
pub const RBP: u8 = 5;
pub const RSI: u8 = 6;
pub const RDI: u8 = 7;
pub const R8: u8 = 8;
pub const R10: u8 = 10;
pub const R11: u8 = 11;
pub const R12: u8 = 12;
pub const R13: u8 = 13;
pub const R14: u8 = 14;
pub const R15: u8 = 15;

/// Group-1 ALU operations (`op r/m, r` opcode and `81 /ext` extension).
#[derive(Clone, Copy)]
pub enum Alu {
    Add,
    Or,
    And,
    Sub,
    Xor,
    Cmp,
}

impl Alu {
    fn rm_r(self) -> u8 {
        match self {
            Alu::Add => 0x01,
            Alu::Or => 0x09,
            Alu::And => 0x21,
            Alu::Sub => 0x29,
            Alu::Xor => 0x31,
            Alu::Cmp => 0x39,
        }
    }

    fn ext(self) -> u8 {
        match self {
            Alu::Add => 0,
            Alu::Or => 1,
            Alu::And => 4,
            Alu::Sub => 5,
            Alu::Xor => 6,
            Alu::Cmp => 7,
        }
    }
}

/// Condition codes (low nibble of `0F 8x` / `7x`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cond {
    B = 0x2,
    Ae = 0x3,
    E = 0x4,
    Ne = 0x5,
    Be = 0x6,
    A = 0x7,
    L = 0xc,
    Ge = 0xd,
    Le = 0xe,
    G = 0xf,
}

/// Shift extensions of `C1 /ext` and `D3 /ext`.
#[derive(Clone, Copy)]
pub enum Shift {
    Ror = 1,
    Shl = 4,
    Shr = 5,
    Sar = 7,
}

#[derive(Default)]
pub struct Asm {
    pub code: Vec<u8>,
}

fn fits8(v: i64) -> bool {
    (-128..=127).contains(&v)
}

impl Asm {
    pub fn len(&self) -> usize {
        self.code.len()
    }

    pub fn is_empty(&self) -> bool {
        self.code.is_empty()
    }

    pub fn byte(&mut self, b: u8) {
        self.code.push(b);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.code.extend_from_slice(b);
    }

    pub fn imm32(&mut self, v: i32) {
        self.bytes(&v.to_le_bytes());
    }

    /// REX prefix; emitted when any bit is set or `force` (byte registers sil/dil/bpl/spl).
    fn rex(&mut self, w: bool, reg: u8, rm: u8, force: bool) {
        let v = 0x40 | (w as u8) << 3 | ((reg >> 3) & 1) << 2 | ((rm >> 3) & 1);
        if v != 0x40 || force {
            self.byte(v);
        }
    }

    fn modrm_reg(&mut self, reg: u8, rm: u8) {
        self.byte(0xc0 | (reg & 7) << 3 | (rm & 7));
    }

    /// ModRM (+SIB, +displacement) for `[base + disp]`.
    fn modrm_mem(&mut self, reg: u8, base: u8, disp: i32) {
        let md = if disp == 0 && base & 7 != RBP {
            0
        } else if fits8(disp as i64) {
            1
        } else {
            2
        };
        self.byte(md << 6 | (reg & 7) << 3 | (base & 7));
        if base & 7 == RSP {
            self.byte(0x24);
        }
        match md {
            1 => self.byte(disp as i8 as u8),
            2 => self.imm32(disp),
            _ => {}
        }
    }

    /// `op dst, src` (register to register).
    pub fn alu_rr(&mut self, w: bool, op: Alu, dst: u8, src: u8) {
        self.rex(w, src, dst, false);
        self.byte(op.rm_r());
        self.modrm_reg(src, dst);
    }

    /// `op dst, imm` (imm sign-extended to the operand size).
    pub fn alu_ri(&mut self, w: bool, op: Alu, dst: u8, imm: i32) {
        self.rex(w, 0, dst, false);
        if fits8(imm as i64) {
            self.byte(0x83);
            self.modrm_reg(op.ext(), dst);
            self.byte(imm as i8 as u8);
        } else {
            self.byte(0x81);
            self.modrm_reg(op.ext(), dst);
            self.imm32(imm);
        }
    }

    /// `test a, b`.
    pub fn test_rr(&mut self, w: bool, a: u8, b: u8) {
        self.rex(w, b, a, false);
        self.byte(0x85);
        self.modrm_reg(b, a);
    }

    /// `test a, imm32` (sign-extended for 64-bit).
    pub fn test_ri(&mut self, w: bool, a: u8, imm: i32) {
        self.rex(w, 0, a, false);
        self.byte(0xf7);
        self.modrm_reg(0, a);
        self.imm32(imm);
    }

    pub fn mov_rr(&mut self, w: bool, dst: u8, src: u8) {
        self.rex(w, src, dst, false);
        self.byte(0x89);
        self.modrm_reg(src, dst);
    }

    /// Load a 64-bit constant with the shortest encoding.
    pub fn mov_imm64(&mut self, dst: u8, v: u64) {
        if v == 0 {
            self.alu_rr(false, Alu::Xor, dst, dst);
        } else if v <= u32::MAX as u64 {
            self.mov_imm32(dst, v as u32);
        } else if v as i64 >= i32::MIN as i64 && v as i64 <= i32::MAX as i64 {
            self.rex(true, 0, dst, false);
            self.byte(0xc7);
            self.modrm_reg(0, dst);
            self.imm32(v as i32);
        } else {
            self.rex(true, 0, dst, false);
            self.byte(0xb8 + (dst & 7));
            self.bytes(&v.to_le_bytes());
        }
    }

    /// `mov dst32, imm32` (zero-extends).
    pub fn mov_imm32(&mut self, dst: u8, v: u32) {
        self.rex(false, 0, dst, false);
        self.byte(0xb8 + (dst & 7));
        self.imm32(v as i32);
    }

    /// `imul dst, src`.
    pub fn imul_rr(&mut self, w: bool, dst: u8, src: u8) {
        self.rex(w, dst, src, false);
        self.bytes(&[0x0f, 0xaf]);
        self.modrm_reg(dst, src);
    }

    /// `imul dst, dst, imm32`.
    pub fn imul_ri(&mut self, w: bool, dst: u8, imm: i32) {
        self.rex(w, dst, dst, false);
        self.byte(0x69);
        self.modrm_reg(dst, dst);
        self.imm32(imm);
    }

    /// Group-3 unary: `neg` (/3), `div` (/6), `idiv` (/7).
    pub fn unary(&mut self, w: bool, ext: u8, r: u8) {
        self.rex(w, 0, r, false);
        self.byte(0xf7);
        self.modrm_reg(ext, r);
    }

    pub fn shift_ri(&mut self, w: bool, s: Shift, dst: u8, k: u8) {
        self.rex(w, 0, dst, false);
        self.byte(0xc1);
        self.modrm_reg(s as u8, dst);
        self.byte(k);
    }

    /// Shift by `cl`.
    pub fn shift_cl(&mut self, w: bool, s: Shift, dst: u8) {
        self.rex(w, 0, dst, false);
        self.byte(0xd3);
        self.modrm_reg(s as u8, dst);
    }

    /// `ror r16, 8` (swap the two low bytes).
    pub fn ror16_8(&mut self, r: u8) {
        self.byte(0x66);
        self.rex(false, 0, r, false);
        self.byte(0xc1);
        self.modrm_reg(Shift::Ror as u8, r);
        self.byte(8);
    }

    pub fn bswap(&mut self, w: bool, r: u8) {
        self.rex(w, 0, r, false);
        self.bytes(&[0x0f, 0xc8 + (r & 7)]);
    }

    /// `movzx dst32, src16` / `movzx dst32, src8`.
    pub fn movzx_rr(&mut self, bits: u8, dst: u8, src: u8) {
        self.rex(false, dst, src, bits == 8);
        self.bytes(&[0x0f, if bits == 8 { 0xb6 } else { 0xb7 }]);
        self.modrm_reg(dst, src);
    }

    /// `movsx dst, src8|src16|src32` (64-bit destination when `w`).
    pub fn movsx_rr(&mut self, w: bool, bits: u8, dst: u8, src: u8) {
        self.rex(w, dst, src, bits == 8);
        match bits {
            8 => self.bytes(&[0x0f, 0xbe]),
            16 => self.bytes(&[0x0f, 0xbf]),
            _ => self.byte(0x63),
        }
        self.modrm_reg(dst, src);
    }

    /// Load `size` bytes from `[base + disp]`, zero-extended.
    pub fn load(&mut self, size: usize, dst: u8, base: u8, disp: i32) {
        match size {
            1 | 2 => {
                self.rex(false, dst, base, false);
                self.bytes(&[0x0f, if size == 1 { 0xb6 } else { 0xb7 }]);
            }
            4 => {
                self.rex(false, dst, base, false);
                self.byte(0x8b);
            }
            _ => {
                self.rex(true, dst, base, false);
                self.byte(0x8b);
            }
        }
        self.modrm_mem(dst, base, disp);
    }

    /// Load `size` bytes from `[base + disp]`, sign-extended to 64 bits.
    pub fn load_sx(&mut self, size: usize, dst: u8, base: u8, disp: i32) {
        self.rex(true, dst, base, false);
        match size {
            1 => self.bytes(&[0x0f, 0xbe]),
            2 => self.bytes(&[0x0f, 0xbf]),
            _ => self.byte(0x63),
        }
        self.modrm_mem(dst, base, disp);
    }

    /// Store the low `size` bytes of `src` to `[base + disp]`.
    pub fn store(&mut self, size: usize, base: u8, disp: i32, src: u8) {
        if size == 2 {
            self.byte(0x66);
        }
        self.rex(size == 8, src, base, size == 1);
        self.byte(if size == 1 { 0x88 } else { 0x89 });
        self.modrm_mem(src, base, disp);
    }

    /// Store an immediate (sign-extended to 64 bits for 8-byte stores).
    pub fn store_imm(&mut self, size: usize, base: u8, disp: i32, imm: i32) {
        if size == 2 {
            self.byte(0x66);
        }
        self.rex(size == 8, 0, base, false);
        self.byte(if size == 1 { 0xc6 } else { 0xc7 });
        self.modrm_mem(0, base, disp);
        match size {
            1 => self.byte(imm as u8),
            2 => self.bytes(&(imm as u16).to_le_bytes()),
            _ => self.imm32(imm),
        }
    }

    /// `lea dst, [base + disp]`.
    pub fn lea(&mut self, dst: u8, base: u8, disp: i32) {
        self.rex(true, dst, base, false);
        self.byte(0x8d);
        self.modrm_mem(dst, base, disp);
    }

    /// `lock op [base + disp], src` for add/or/and/xor.
    pub fn lock_alu(&mut self, w: bool, op: Alu, base: u8, disp: i32, src: u8) {
        self.byte(0xf0);
        self.rex(w, src, base, false);
        self.byte(op.rm_r());
        self.modrm_mem(src, base, disp);
    }

    /// `lock xadd [base + disp], src`.
    pub fn lock_xadd(&mut self, w: bool, base: u8, disp: i32, src: u8) {
        self.byte(0xf0);
        self.rex(w, src, base, false);
        self.bytes(&[0x0f, 0xc1]);
        self.modrm_mem(src, base, disp);
    }

    /// `xchg [base + disp], src` (implicitly locked).
    pub fn xchg(&mut self, w: bool, base: u8, disp: i32, src: u8) {
        self.rex(w, src, base, false);
        self.byte(0x87);
        self.modrm_mem(src, base, disp);
    }

    /// `lock cmpxchg [base + disp], src` (compares with rax).
    pub fn lock_cmpxchg(&mut self, w: bool, base: u8, disp: i32, src: u8) {
        self.byte(0xf0);
        self.rex(w, src, base, false);
        self.bytes(&[0x0f, 0xb1]);
        self.modrm_mem(src, base, disp);
    }

    pub fn push(&mut self, r: u8) {
        self.rex(false, 0, r, false);
        self.byte(0x50 + (r & 7));
    }

    pub fn pop(&mut self, r: u8) {
        self.rex(false, 0, r, false);
        self.byte(0x58 + (r & 7));
    }

    /// `call r`.
    pub fn call_r(&mut self, r: u8) {
        self.rex(false, 0, r, false);
        self.byte(0xff);
        self.modrm_reg(2, r);
    }

    /// `jmp r`.
    pub fn jmp_r(&mut self, r: u8) {
        self.rex(false, 0, r, false);
        self.byte(0xff);
        self.modrm_reg(4, r);
    }

    pub fn ret(&mut self) {
        self.byte(0xc3);
    }

    pub fn leave(&mut self) {
        self.byte(0xc9);
    }

    /// `jmp rel` with the given displacement from the end of the instruction; `short` picks
    /// the 2-byte form. Returns the instruction's length.
    pub fn jmp(&mut self, rel: i32, short: bool) -> usize {
        if short {
            self.bytes(&[0xeb, rel as i8 as u8]);
            2
        } else {
            self.byte(0xe9);
            self.imm32(rel);
            5
        }
    }

    /// `jcc rel`; as for `jmp`.
    pub fn jcc(&mut self, c: Cond, rel: i32, short: bool) -> usize {
        if short {
            self.bytes(&[0x70 | c as u8, rel as i8 as u8]);
            2
        } else {
            self.bytes(&[0x0f, 0x80 | c as u8]);
            self.imm32(rel);
            6
        }
    }

    /// `call rel32`.
    pub fn call_rel(&mut self, rel: i32) {
        self.byte(0xe8);
        self.imm32(rel);
    }
}
