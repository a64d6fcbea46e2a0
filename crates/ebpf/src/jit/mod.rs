//! The JIT: verified eBPF to x86-64 machine code, in the manner of Linux's
//! `arch/x86/net/bpf_jit_comp.c`.
//!
//! eBPF registers live in x86 registers for the whole program (r0 = rax, r1..r5 = rdi, rsi,
//! rdx, rcx, r8 as in the System V calling convention, so helper calls need no shuffling;
//! r6..r9 = rbx, r13, r14, r15, callee-saved; r10 = rbp, the frame pointer). r10, r11 and r12
//! of x86 are scratch. Every eBPF function becomes a native function with its own frame, so
//! bpf-to-bpf calls are native calls. Jumps start long and shrink to short forms over a few
//! passes until the layout is stable.
//!
//! The code is only as safe as its input: it performs no bounds checks, so it must only ever
//! be given programs the verifier accepted (after map references are linked to addresses).

mod arena;
pub mod guard;
pub mod x86;

use crate::helpers::Helpers;
use crate::insn::{alu, atomic, class, jmp, mem, op, pseudo, Insn, SRC_X};
use std::collections::BTreeMap;
use x86::*;

/// eBPF register -> x86 register.
const REG: [u8; 11] = [RAX, RDI, RSI, RDX, RCX, R8, RBX, R13, R14, R15, RBP];
/// Scratch registers.
const T1: u8 = R11;
const T2: u8 = R10;
const T3: u8 = R12;

/// Passes before giving up on a stable layout (in practice 3-4 suffice).
const MAX_PASSES: usize = 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("JIT: instruction {pc}: {msg}")]
pub struct JitError {
    pub pc: usize,
    pub msg: String,
}

/// Executable machine code.
pub struct JitCode {
    backing: Backing,
}

enum Backing {
    /// In the shared code arena (the usual case: no system call per program).
    Arena(arena::Placed),
    /// A private mapping made read-only and executable (when the arena is unavailable).
    Mapped { mem: *mut u8, len: usize, map_len: usize },
}

// SAFETY: the code is immutable once placed; sharing or moving the handle between threads
// shares read-only executable memory.
unsafe impl Send for JitCode {}
// SAFETY: as above.
unsafe impl Sync for JitCode {}

/// The entry point: r1 and r2 in, r0 out.
pub type Entry = unsafe extern "C" fn(u64, u64) -> u64;

impl JitCode {
    fn new(code: &[u8]) -> Result<Self, arena::ExecMemoryError> {
        match arena::place(code) {
            Ok(p) => Ok(Self { backing: Backing::Arena(p) }),
            Err(e) => {
                tracing::debug!(error = %e, "JIT arena unavailable; mapping the program on its own");
                Self::mapped(code)
            }
        }
    }

    fn mapped(code: &[u8]) -> Result<Self, arena::ExecMemoryError> {
        let page = 4096;
        let map_len = code.len().div_ceil(page).max(1) * page;
        // SAFETY: an anonymous private mapping; no existing memory is affected.
        let mem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mem == libc::MAP_FAILED {
            return Err(arena::ExecMemoryError::Mmap {
                len: map_len,
                source: std::io::Error::last_os_error(),
            });
        }
        let mem = mem as *mut u8;
        // SAFETY: the mapping is map_len >= code.len() bytes, writable, and ours alone. The
        // rest of the page is filled with int3 so a stray jump traps.
        unsafe {
            std::ptr::write_bytes(mem, 0xcc, map_len);
            std::ptr::copy_nonoverlapping(code.as_ptr(), mem, code.len());
        }
        let jit = Self { backing: Backing::Mapped { mem, len: code.len(), map_len } };
        // SAFETY: changes the protection of our own mapping: writable no more, executable now.
        if unsafe {
            libc::mprotect(mem as *mut libc::c_void, map_len, libc::PROT_READ | libc::PROT_EXEC)
        } != 0
        {
            return Err(arena::ExecMemoryError::Mprotect(std::io::Error::last_os_error()));
        }
        Ok(jit)
    }

    fn ptr(&self) -> *const u8 {
        match &self.backing {
            Backing::Arena(p) => p.ptr(),
            Backing::Mapped { mem, .. } => *mem,
        }
    }

    pub fn entry(&self) -> Entry {
        // SAFETY: the code starts with the main function's prologue (or with a guard that
        // falls through into it or tail-jumps to another program's entry, `guard`) and follows
        // the C calling convention; calling it is still unsafe (see `Entry`).
        unsafe { std::mem::transmute::<*const u8, Entry>(self.ptr()) }
    }

    /// The machine code, for dumps and tests.
    pub fn code(&self) -> &[u8] {
        let len = match &self.backing {
            Backing::Arena(p) => p.len,
            Backing::Mapped { len, .. } => *len,
        };
        // SAFETY: the executable view is readable and holds `len` bytes of code.
        unsafe { std::slice::from_raw_parts(self.ptr(), len) }
    }
}

impl Drop for JitCode {
    fn drop(&mut self) {
        if let Backing::Mapped { mem, map_len, .. } = self.backing {
            // SAFETY: unmapping the region we mapped; no code runs from it any more (the owner
            // of a JitCode keeps it alive while any thread may call it).
            unsafe { libc::munmap(mem as *mut libc::c_void, map_len) };
        }
    }
}

/// Compile `prog`, which must have passed the verifier and have its map references linked
/// (no pseudo `lddw` left), with `stack_depth` bytes of stack per frame.
pub fn compile(prog: &[Insn], helpers: &Helpers, stack_depth: usize) -> Result<JitCode, JitError> {
    compile_with(prog, helpers, stack_depth, &Inline::default())
}

/// [`compile`], inlining the map lookups `inline` lists.
pub fn compile_with(
    prog: &[Insn],
    helpers: &Helpers,
    stack_depth: usize,
    inline: &Inline,
) -> Result<JitCode, JitError> {
    let code = emit(prog, helpers, stack_depth, inline)?;
    JitCode::new(&code).map_err(|e| JitError { pc: 0, msg: e.to_string() })
}

/// [`compile_with`], with `guard` compiled in front of the program: the entry checks the
/// packet and either falls through into the program or jumps to `guard.fallback`.
pub fn compile_guarded(
    prog: &[Insn],
    helpers: &Helpers,
    stack_depth: usize,
    inline: &Inline,
    guard: &guard::EntryGuard,
) -> Result<JitCode, JitError> {
    let body = emit(prog, helpers, stack_depth, inline)?;
    let (mut code, miss) = guard::emit_prefix(guard, body.len())?;
    code.extend_from_slice(&body);
    code.extend_from_slice(&miss);
    JitCode::new(&code).map_err(|e| JitError { pc: 0, msg: e.to_string() })
}

/// An array map whose lookups the JIT may compile inline (as Linux does for arrays): the
/// value address is `base + index * stride (+ cpu * cpu_stride)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineArray {
    pub base: u64,
    pub max_entries: u32,
    pub stride: u32,
    /// Bytes between CPUs' copies of a value; 0 for a plain array. The CPU index comes in
    /// the program's second argument (r2, unused by XDP programs) and is kept in the frame.
    pub cpu_stride: u32,
}

/// Lookups to inline: `bpf_map_lookup_elem` call sites and their map's layout.
#[derive(Debug, Clone, Default)]
pub struct Inline {
    pub lookups: BTreeMap<usize, InlineArray>,
}

/// The machine code for `prog` (see [`compile`]).
pub fn emit(
    prog: &[Insn],
    helpers: &Helpers,
    stack_depth: usize,
    inline: &Inline,
) -> Result<Vec<u8>, JitError> {
    let funcs = functions(prog);
    let frame = (stack_depth.div_ceil(16) * 16) as i32;
    // Per-CPU lookups are inlined in the main function only: the CPU index arrives there.
    let main_end = funcs.get(1).copied().unwrap_or(prog.len());
    let lookups: BTreeMap<usize, InlineArray> = inline
        .lookups
        .iter()
        .filter(|(pc, a)| a.cpu_stride == 0 || **pc < main_end)
        .map(|(p, a)| (*p, *a))
        .collect();
    let frames: Vec<FrameInfo> = (0..funcs.len())
        .map(|f| {
            let (s, e) = (funcs[f], funcs.get(f + 1).copied().unwrap_or(prog.len()));
            let cpu =
                f == 0 && lookups.iter().any(|(pc, a)| a.cpu_stride != 0 && (s..e).contains(pc));
            FrameInfo::of(prog, s, e, frame, cpu)
        })
        .collect();
    let mut targets = vec![false; prog.len() + 1];
    for (pc, i) in prog.iter().enumerate() {
        if let Some(t) = crate::verifier::jump_target(pc, *i) {
            if let Some(slot) = targets.get_mut(t) {
                *slot = true;
            }
        }
    }
    let mut c = Compiler {
        prog,
        helpers,
        lookups,
        targets,
        funcs,
        frames,
        start: vec![0; prog.len() + 1],
        end: vec![0; prog.len() + 1],
        prologue: Vec::new(),
        epilogue: Vec::new(),
        first: true,
    };
    let mut last_len = usize::MAX;
    for _ in 0..MAX_PASSES {
        let a = c.pass()?;
        if a.len() == last_len {
            return Ok(a.code);
        }
        last_len = a.len();
        c.first = false;
    }
    Err(JitError { pc: 0, msg: "the code layout did not converge".into() })
}

/// Start pcs of the functions: the entry and every local call target.
fn functions(prog: &[Insn]) -> Vec<usize> {
    let mut starts = vec![0usize];
    let mut pc = 0;
    while pc < prog.len() {
        let i = prog[pc];
        if i.code == op::CALL && i.src == pseudo::CALL {
            starts.push((pc as i64 + 1 + i.imm as i64) as usize);
        }
        pc += if i.is_lddw() { 2 } else { 1 };
    }
    starts.sort_unstable();
    starts.dedup();
    starts
}

struct Compiler<'a> {
    prog: &'a [Insn],
    helpers: &'a Helpers,
    lookups: BTreeMap<usize, InlineArray>,
    /// Instructions some jump lands on (peepholes must not swallow them).
    targets: Vec<bool>,
    funcs: Vec<usize>,
    frames: Vec<FrameInfo>,
    /// Native offsets of each instruction's start and end, from the previous pass.
    start: Vec<usize>,
    end: Vec<usize>,
    /// Native offsets of each function's prologue and epilogue, from the previous pass.
    prologue: Vec<usize>,
    epilogue: Vec<usize>,
    first: bool,
}

/// Callee-saved x86 registers a function may need to preserve: r6..r9 and the scratch r12.
const SAVED: [u8; 5] = [RBX, R12, R13, R14, R15];

/// What one function's prologue sets up.
#[derive(Debug, Clone, Copy, Default)]
struct FrameInfo {
    /// Bit i: SAVED[i] is used and must be preserved.
    saved: u8,
    /// r10 is used: set up rbp and the eBPF stack.
    rbp: bool,
    /// Bytes subtracted from rsp after the frame pointer: the stack and alignment padding.
    sub: i32,
    /// rbp-relative slot holding the CPU index (functions with inlined per-CPU lookups).
    cpu_slot: Option<i32>,
}

impl FrameInfo {
    fn saved(self) -> impl DoubleEndedIterator<Item = u8> {
        SAVED.into_iter().enumerate().filter(move |(i, _)| self.saved >> i & 1 != 0).map(|(_, r)| r)
    }

    /// Scan instructions `[s, e)`.
    fn of(prog: &[Insn], s: usize, e: usize, stack: i32, cpu: bool) -> FrameInfo {
        let mut used = [false; 11];
        let (mut calls, mut fetch_loop) = (false, false);
        let mut pc = s;
        while pc < e {
            let i = prog[pc];
            used[i.dst.min(10) as usize] = true;
            used[i.src.min(10) as usize] = true;
            calls |= i.code == op::CALL;
            fetch_loop |= i.class() == class::STX
                && i.mem_mode() == mem::ATOMIC
                && i.imm & atomic::FETCH != 0
                && i.imm != atomic::ADD | atomic::FETCH
                && i.imm != atomic::XCHG
                && i.imm != atomic::CMPXCHG;
            pc += if i.is_lddw() { 2 } else { 1 };
        }
        let mut saved = 0u8;
        for (k, r) in [(0, 6), (2, 7), (3, 8), (4, 9)] {
            if used[r] {
                saved |= 1 << k;
            }
        }
        if fetch_loop {
            saved |= 1 << 1;
        }
        let rbp = used[10] || cpu;
        let frame = if used[10] { stack } else { 0 } + if cpu { 8 } else { 0 };
        // Entry rsp is 8 mod 16; calls need 0 mod 16.
        let pushed = 8 * (saved.count_ones() as i32 + rbp as i32) + frame;
        let pad = if calls && (8 + pushed) % 16 != 0 { 8 } else { 0 };
        let cpu_slot = cpu.then_some(-frame);
        FrameInfo { saved, rbp, sub: frame + pad, cpu_slot }
    }
}

impl Compiler<'_> {
    fn err(&self, pc: usize, msg: impl Into<String>) -> JitError {
        JitError { pc, msg: msg.into() }
    }

    fn pass(&mut self) -> Result<Asm, JitError> {
        let mut a = Asm::default();
        let mut start = vec![0; self.prog.len() + 1];
        let mut end = vec![0; self.prog.len() + 1];
        let mut epilogue = vec![0; self.funcs.len()];
        let mut prologue = vec![0; self.funcs.len()];
        for (f, &s) in self.funcs.iter().enumerate() {
            prologue[f] = a.len();
            let e = self.funcs.get(f + 1).copied().unwrap_or(self.prog.len());
            let fr = self.frames[f];
            // Prologue: frame pointer and eBPF stack (if r10 is used), the callee-saved
            // registers the function uses, and padding that keeps rsp 16-byte aligned at
            // calls.
            if fr.rbp {
                a.push(RBP);
                a.mov_rr(true, RBP, RSP);
            }
            if fr.sub != 0 {
                a.alu_ri(true, Alu::Sub, RSP, fr.sub);
            }
            if let Some(slot) = fr.cpu_slot {
                // The CPU index (second argument) for inlined per-CPU lookups.
                a.store(8, RBP, slot, RSI);
            }
            for r in fr.saved() {
                a.push(r);
            }
            let mut pc = s;
            while pc < e {
                start[pc] = a.len();
                let i = self.prog[pc];
                let n = self.insn(&mut a, pc, i, f, e)?;
                let next = pc + n;
                end[pc..next].fill(a.len());
                for p in pc + 1..next {
                    start[p] = start[pc];
                }
                pc = next;
            }
            epilogue[f] = a.len();
            for r in fr.saved().rev() {
                a.pop(r);
            }
            if fr.rbp {
                a.leave();
            } else if fr.sub != 0 {
                a.alu_ri(true, Alu::Add, RSP, fr.sub);
            }
            a.ret();
        }
        self.start = start;
        self.end = end;
        self.epilogue = epilogue;
        self.prologue = prologue;
        Ok(a)
    }

    /// Displacement from the end of instruction `pc` to native offset `to` (previous pass).
    fn rel(&self, pc: usize, to: usize) -> i64 {
        to as i64 - self.end[pc] as i64
    }

    fn jump_to(&self, a: &mut Asm, pc: usize, cond: Option<Cond>, to: usize) {
        let rel = self.rel(pc, to);
        let short = !self.first && (-128..=127).contains(&rel);
        match cond {
            None => a.jmp(rel as i32, short),
            Some(c) => a.jcc(c, rel as i32, short),
        };
    }

    /// Emit instruction `pc` (and, for `lddw` and peepholes, the next); returns how many
    /// instructions were consumed. `end` is the end of the function.
    fn insn(
        &self,
        a: &mut Asm,
        pc: usize,
        i: Insn,
        func: usize,
        end: usize,
    ) -> Result<usize, JitError> {
        if i.is_lddw() {
            self.insn1(a, pc, i, func)?;
            return Ok(2);
        }
        // `mov rX, r10; add rX, K` (a pointer into the stack, for helper arguments): one lea.
        if i.code == class::ALU64 | alu::MOV | SRC_X
            && i.src == 10
            && i.off == 0
            && pc + 1 < end
            && !self.targets[pc + 1]
        {
            let n = self.prog[pc + 1];
            if n.code == class::ALU64 | alu::ADD && n.dst == i.dst && n.off == 0 {
                a.lea(REG[i.dst as usize], RBP, n.imm);
                return Ok(2);
            }
        }
        self.insn1(a, pc, i, func)?;
        Ok(1)
    }

    fn insn1(&self, a: &mut Asm, pc: usize, i: Insn, func: usize) -> Result<(), JitError> {
        let dst = REG[i.dst as usize];
        let src = REG[i.src as usize];
        match i.class() {
            class::ALU | class::ALU64 => self.alu(a, pc, i),
            class::LD => {
                if !i.is_lddw() || i.src != 0 {
                    return Err(self.err(pc, "unlinked map reference or legacy load"));
                }
                let hi = self.prog.get(pc + 1).ok_or_else(|| self.err(pc, "truncated lddw"))?;
                a.mov_imm64(dst, ((hi.imm as u32 as u64) << 32) | i.imm as u32 as u64);
                Ok(())
            }
            class::LDX => {
                if i.mem_mode() == mem::MEMSX {
                    a.load_sx(i.mem_size(), dst, src, i.off as i32);
                } else {
                    a.load(i.mem_size(), dst, src, i.off as i32);
                }
                Ok(())
            }
            class::ST => {
                a.store_imm(i.mem_size(), dst, i.off as i32, i.imm);
                Ok(())
            }
            class::STX if i.mem_mode() == mem::MEM => {
                a.store(i.mem_size(), dst, i.off as i32, src);
                Ok(())
            }
            class::STX => self.atomic(a, pc, i),
            class::JMP | class::JMP32 => self.jump(a, pc, i, func),
            _ => Err(self.err(pc, "invalid instruction class")),
        }
    }

    fn alu(&self, a: &mut Asm, pc: usize, i: Insn) -> Result<(), JitError> {
        let w = i.class() == class::ALU64;
        let dst = REG[i.dst as usize];
        let src = REG[i.src as usize];
        let x = i.is_src_reg();
        let group = |op: u8| match op {
            alu::ADD => Some(Alu::Add),
            alu::SUB => Some(Alu::Sub),
            alu::OR => Some(Alu::Or),
            alu::AND => Some(Alu::And),
            alu::XOR => Some(Alu::Xor),
            _ => None,
        };
        match i.op() {
            o if group(o).is_some() => {
                let g = group(o).unwrap_or(Alu::Add);
                if x {
                    a.alu_rr(w, g, dst, src);
                } else {
                    a.alu_ri(w, g, dst, i.imm);
                }
            }
            alu::MOV => match (x, i.off) {
                (true, 0) => {
                    if dst != src || !w {
                        a.mov_rr(w, dst, src);
                    }
                }
                (true, 8) => a.movsx_rr(w, 8, dst, src),
                (true, 16) => a.movsx_rr(w, 16, dst, src),
                (true, _) => a.movsx_rr(true, 32, dst, src),
                (false, _) => {
                    if w {
                        a.mov_imm64(dst, i.imm as i64 as u64);
                    } else {
                        a.mov_imm32(dst, i.imm as u32);
                    }
                }
            },
            alu::MUL => {
                if x {
                    a.imul_rr(w, dst, src);
                } else {
                    a.imul_ri(w, dst, i.imm);
                }
            }
            alu::NEG => a.unary(w, 3, dst),
            alu::LSH | alu::RSH | alu::ARSH => {
                let s = match i.op() {
                    alu::LSH => Shift::Shl,
                    alu::RSH => Shift::Shr,
                    _ => Shift::Sar,
                };
                if !x {
                    let k = (i.imm as u32 & if w { 63 } else { 31 }) as u8;
                    a.shift_ri(w, s, dst, k);
                } else if dst == RCX {
                    a.mov_rr(true, T1, RCX);
                    a.mov_rr(true, RCX, src);
                    a.shift_cl(w, s, T1);
                    a.mov_rr(true, RCX, T1);
                } else if src == RCX {
                    a.shift_cl(w, s, dst);
                } else {
                    a.mov_rr(true, T1, RCX);
                    a.mov_rr(true, RCX, src);
                    a.shift_cl(w, s, dst);
                    a.mov_rr(true, RCX, T1);
                }
            }
            alu::DIV | alu::MOD => self.divmod(a, i, w, dst, src),
            alu::END => {
                let swap = w || x;
                match (swap, i.imm) {
                    (true, 16) => {
                        a.ror16_8(dst);
                        a.movzx_rr(16, dst, dst);
                    }
                    (true, 32) => a.bswap(false, dst),
                    (true, _) => a.bswap(true, dst),
                    (false, 16) => a.movzx_rr(16, dst, dst),
                    (false, 32) => a.mov_rr(false, dst, dst),
                    (false, _) => {}
                }
            }
            _ => return Err(self.err(pc, format!("invalid ALU opcode {:#04x}", i.code))),
        }
        Ok(())
    }

    /// Division and remainder with eBPF's rules: x / 0 = 0, x % 0 = x, and for signed
    /// operations INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0 (x86 would trap).
    fn divmod(&self, a: &mut Asm, i: Insn, w: bool, dst: u8, src: u8) {
        let is_div = i.op() == alu::DIV;
        let signed = i.off == 1;
        // Divisor into T1.
        if i.is_src_reg() {
            a.mov_rr(true, T1, src);
        } else if w {
            a.mov_imm64(T1, i.imm as i64 as u64);
        } else {
            a.mov_imm32(T1, i.imm as u32);
        }
        // The general case, emitted first to know its length.
        let mut body = Asm::default();
        if signed {
            // Divisor -1: negate (division) or zero (remainder), without idiv.
            let mut minus1 = Asm::default();
            if is_div {
                minus1.unary(w, 3, dst);
            } else {
                minus1.alu_rr(false, Alu::Xor, dst, dst);
            }
            let mut general = Asm::default();
            self.div_core(&mut general, w, signed, is_div, dst);
            minus1.jmp(general.len() as i32, true);
            body.alu_ri(w, Alu::Cmp, T1, -1);
            body.jcc(Cond::Ne, minus1.len() as i32, true);
            body.bytes(&minus1.code);
            body.bytes(&general.code);
        } else {
            self.div_core(&mut body, w, signed, is_div, dst);
        }
        // Divisor zero: quotient 0, remainder = dividend (zero-extended for 32-bit).
        let mut zero = Asm::default();
        if is_div {
            zero.alu_rr(false, Alu::Xor, dst, dst);
        } else if !w {
            zero.mov_rr(false, dst, dst);
        }
        zero.jmp(body.len() as i32, true);
        a.test_rr(w, T1, T1);
        a.jcc(Cond::Ne, zero.len() as i32, true);
        a.bytes(&zero.code);
        a.bytes(&body.code);
    }

    /// `dst = dst / T1` or `dst % T1` through rax:rdx, preserving both.
    fn div_core(&self, a: &mut Asm, w: bool, signed: bool, is_div: bool, dst: u8) {
        a.push(RAX);
        a.push(RDX);
        a.mov_rr(true, RAX, dst);
        if signed {
            // cqo / cdq: sign-extend rax into rdx.
            if w {
                a.bytes(&[0x48, 0x99]);
            } else {
                a.byte(0x99);
            }
        } else {
            a.alu_rr(false, Alu::Xor, RDX, RDX);
        }
        a.unary(w, if signed { 7 } else { 6 }, T1);
        a.mov_rr(true, T1, if is_div { RAX } else { RDX });
        a.pop(RDX);
        a.pop(RAX);
        a.mov_rr(w, dst, T1);
    }

    fn atomic(&self, a: &mut Asm, pc: usize, i: Insn) -> Result<(), JitError> {
        let w = i.mem_size() == 8;
        let base = REG[i.dst as usize];
        let src = REG[i.src as usize];
        let off = i.off as i32;
        let fetch = i.imm & atomic::FETCH != 0;
        match i.imm {
            x if x == atomic::XCHG => a.xchg(w, base, off, src),
            x if x == atomic::CMPXCHG => {
                a.lock_cmpxchg(w, base, off, src);
                if !w {
                    // On success cmpxchg r32 leaves rax's upper half alone; eBPF wants the
                    // old value zero-extended.
                    a.mov_rr(false, RAX, RAX);
                }
            }
            x if x == atomic::ADD | atomic::FETCH => a.lock_xadd(w, base, off, src),
            x if !fetch => {
                let op = match x {
                    atomic::ADD => Alu::Add,
                    atomic::OR => Alu::Or,
                    atomic::AND => Alu::And,
                    atomic::XOR => Alu::Xor,
                    _ => return Err(self.err(pc, format!("unknown atomic operation {x:#x}"))),
                };
                a.lock_alu(w, op, base, off, src);
            }
            x => {
                // Fetching or/and/xor: a compare-exchange loop on rax.
                let op = match x & !atomic::FETCH {
                    atomic::OR => Alu::Or,
                    atomic::AND => Alu::And,
                    atomic::XOR => Alu::Xor,
                    _ => return Err(self.err(pc, format!("unknown atomic operation {x:#x}"))),
                };
                a.lea(T1, base, off);
                a.mov_rr(true, T2, RAX);
                let operand = if src == RAX { T2 } else { src };
                a.load(if w { 8 } else { 4 }, RAX, T1, 0);
                let top = a.len();
                a.mov_rr(true, T3, RAX);
                a.alu_rr(w, op, T3, operand);
                a.lock_cmpxchg(w, T1, 0, T3);
                let back = top as i64 - (a.len() as i64 + 2);
                a.jcc(Cond::Ne, back as i32, true);
                if src == RAX {
                    if !w {
                        a.mov_rr(false, RAX, RAX);
                    }
                } else {
                    a.mov_rr(w, src, RAX);
                    a.mov_rr(true, RAX, T2);
                }
            }
        }
        Ok(())
    }

    fn jump(&self, a: &mut Asm, pc: usize, i: Insn, func: usize) -> Result<(), JitError> {
        let w = i.class() == class::JMP;
        match i.op() {
            jmp::EXIT => {
                // The function's last instruction falls through into the epilogue.
                let end = self.funcs.get(func + 1).copied().unwrap_or(self.prog.len());
                if pc + 1 != end {
                    self.jump_to(a, pc, None, self.epilogue.get(func).copied().unwrap_or(0));
                }
                Ok(())
            }
            jmp::JA => {
                let off = if w { i.off as i64 } else { i.imm as i64 };
                let t = (pc as i64 + 1 + off) as usize;
                self.jump_to(a, pc, None, self.start_of(t));
                Ok(())
            }
            jmp::CALL => {
                if i.src == pseudo::CALL {
                    let t = (pc as i64 + 1 + i.imm as i64) as usize;
                    let f = self
                        .funcs
                        .binary_search(&t)
                        .map_err(|_| self.err(pc, "call to a non-function"))?;
                    let rel = self.rel(pc, self.prologue.get(f).copied().unwrap_or(0));
                    a.call_rel(rel as i32);
                    return Ok(());
                }
                if i.is_src_reg() {
                    return Err(self.err(pc, "callx was not resolved by the verifier"));
                }
                if let Some(arr) = self.lookups.get(&pc) {
                    self.inline_lookup(a, *arr, func);
                    return Ok(());
                }
                let h = self
                    .helpers
                    .get(i.imm as u32)
                    .ok_or_else(|| self.err(pc, format!("helper {} does not exist", i.imm)))?;
                a.mov_imm64(RAX, h.func as usize as u64);
                a.call_r(RAX);
                Ok(())
            }
            op => {
                let dst = REG[i.dst as usize];
                let src = REG[i.src as usize];
                let x = i.is_src_reg();
                if op == jmp::JSET {
                    if x {
                        a.test_rr(w, dst, src);
                    } else {
                        a.test_ri(w, dst, i.imm);
                    }
                } else if x {
                    a.alu_rr(w, Alu::Cmp, dst, src);
                } else if i.imm == 0 {
                    // Same flags as `cmp dst, 0` (CF = OF = 0), two bytes shorter.
                    a.test_rr(w, dst, dst);
                } else {
                    a.alu_ri(w, Alu::Cmp, dst, i.imm);
                }
                let c = match op {
                    jmp::JEQ => Cond::E,
                    jmp::JNE | jmp::JSET => Cond::Ne,
                    jmp::JGT => Cond::A,
                    jmp::JGE => Cond::Ae,
                    jmp::JLT => Cond::B,
                    jmp::JLE => Cond::Be,
                    jmp::JSGT => Cond::G,
                    jmp::JSGE => Cond::Ge,
                    jmp::JSLT => Cond::L,
                    jmp::JSLE => Cond::Le,
                    _ => return Err(self.err(pc, format!("invalid jump opcode {:#04x}", i.code))),
                };
                let t = (pc as i64 + 1 + i.off as i64) as usize;
                self.jump_to(a, pc, Some(c), self.start_of(t));
                Ok(())
            }
        }
    }

    /// `r0 = bpf_map_lookup_elem(array, r2)` without a call: bounds-check the index and
    /// compute the value's address (r1..r5 are dead after a call, so only r0 and scratch
    /// registers are written).
    fn inline_lookup(&self, a: &mut Asm, arr: InlineArray, func: usize) {
        let mut hit = Asm::default();
        hit.imul_ri(true, RAX, arr.stride as i32);
        if arr.cpu_stride != 0 {
            let slot = self.frames[func].cpu_slot.unwrap_or(0);
            hit.load(8, T1, RBP, slot);
            hit.imul_ri(true, T1, arr.cpu_stride as i32);
            hit.alu_rr(true, Alu::Add, RAX, T1);
        }
        hit.mov_imm64(T1, arr.base);
        hit.alu_rr(true, Alu::Add, RAX, T1);
        let mut miss = Asm::default();
        miss.alu_rr(false, Alu::Xor, RAX, RAX);
        hit.jmp(miss.len() as i32, true);
        a.load(4, RAX, RSI, 0);
        a.alu_ri(false, Alu::Cmp, RAX, arr.max_entries as i32);
        a.jcc(Cond::Ae, hit.len() as i32, true);
        a.bytes(&hit.code);
        a.bytes(&miss.code);
    }

    fn start_of(&self, pc: usize) -> usize {
        self.start.get(pc).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
