//! The verifier: before a program runs, prove that it only touches memory it may (its packet
//! between `data` and `data_end`, its context, its stack, map values), never reads an
//! uninitialised register or stack byte, calls only known helpers with arguments of the right
//! types, and terminates.
//!
//! Like the Linux verifier it explores paths through the program on an abstract state (register
//! types, scalar ranges and known bits, stack contents), deciding branches whose outcome the
//! state already fixes and refining ranges on both sides of the others. A path is pruned when a
//! completely verified state at the same instruction covers it; a path that returns to an
//! unfinished ancestor's exact state is an infinite loop; any other loop is unrolled until it
//! ends or the complexity limit is reached, so loops must have provable bounds.
//!
//! For XDP programs, loads from `struct xdp_md` are rewritten to the runtime's context layout.

pub mod scalar;
pub mod state;

use crate::asm::disasm_insn;
use crate::ctx::{xdp_field, XdpFieldKind, XDP_MD_SIZE};
use crate::helpers::{Arg, Helpers, Ret};
use crate::insn::{alu, atomic, class, jmp, mem, pseudo, Insn};
use crate::interp::{MAX_CALL_DEPTH, STACK_SIZE};
use crate::maps::{MapDef, MapKind};
use scalar::Scalar;
use state::{Byte, Frame, Ptr, PtrKind, Reg, Stack, State};
use std::collections::{BTreeSet, HashMap};

/// Longest program accepted.
pub const MAX_INSNS: usize = 1 << 16;
/// Instructions the exploration may process in all before giving up.
pub const DEFAULT_COMPLEXITY: usize = 1_000_000;

/// What r1 holds when the program starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// `len` bytes of readable and writable memory, and r2 = len (the conformance suite).
    Mem { len: u64 },
    /// An XDP context (`struct xdp_md *`).
    Xdp,
}

/// What the verifier needs to know about a map the program uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapInfo {
    pub kind: MapKind,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
}

impl From<MapDef> for MapInfo {
    fn from(d: MapDef) -> Self {
        Self {
            kind: d.kind,
            key_size: d.key_size,
            value_size: d.value_size,
            max_entries: d.max_entries,
        }
    }
}

/// Everything a program may use.
#[derive(Debug, Clone)]
pub struct Env<'a> {
    pub helpers: &'a Helpers,
    pub ctx: Context,
    pub maps: &'a [MapInfo],
    pub complexity: usize,
}

/// A verified program, ready for an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The instructions, with context accesses rewritten.
    pub insns: Vec<Insn>,
    /// Instructions the exploration processed.
    pub processed: usize,
    /// Deepest stack use of any frame, in bytes.
    pub stack_depth: usize,
    pub helpers_used: BTreeSet<u32>,
}

/// A rejection: the instruction and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instruction {pc} (`{text}`): {msg}")]
pub struct VerifyError {
    pub pc: usize,
    pub text: String,
    pub msg: String,
}

type VResult<T> = Result<T, VerifyError>;

fn reject(prog: &[Insn], pc: usize, msg: impl Into<String>) -> VerifyError {
    let text =
        prog.get(pc).map_or_else(String::new, |i| disasm_insn(*i, prog.get(pc + 1).copied()));
    VerifyError { pc, text, msg: msg.into() }
}

/// Structural facts about the program.
struct Shape {
    /// Instructions where a state is worth remembering.
    prune: Vec<bool>,
}

fn valid_opcode(i: Insn, env: &Env<'_>) -> Result<(), String> {
    let bad = || Err(format!("invalid opcode {:#04x}", i.code));
    if i.dst > 10 || i.src > 10 {
        return Err("register number above 10".into());
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
                        return Err(format!("invalid sign-extension width {}", i.off));
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
                return Err("r10 is read-only".into());
            }
        }
        class::LD => {
            if !i.is_lddw() {
                return Err("legacy packet loads (LD ABS/IND) are not supported".into());
            }
            match i.src {
                0 => {}
                pseudo::MAP_FD | pseudo::MAP_VALUE => {
                    if i.imm < 0 || i.imm as usize >= env.maps.len() {
                        return Err(format!(
                            "map {} does not exist ({} maps)",
                            i.imm,
                            env.maps.len()
                        ));
                    }
                }
                s => return Err(format!("lddw with unknown source {s}")),
            }
            if i.dst == 10 {
                return Err("r10 is read-only".into());
            }
        }
        class::LDX => {
            let ok = i.mem_mode() == mem::MEM || (i.mem_mode() == mem::MEMSX && i.mem_size() < 8);
            if !ok || i.imm != 0 {
                return bad();
            }
            if i.dst == 10 {
                return Err("r10 is read-only".into());
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
                    return Err(format!("unknown atomic operation {:#x}", i.imm));
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
fn branch_target(pc: usize, i: Insn) -> Option<i64> {
    match (i.class(), i.op()) {
        (class::JMP32, jmp::JA) => Some(pc as i64 + 1 + i.imm as i64),
        (class::JMP, jmp::CALL | jmp::EXIT) => None,
        (class::JMP | class::JMP32, _) => Some(pc as i64 + 1 + i.off as i64),
        _ => None,
    }
}

fn local_call_target(pc: usize, i: Insn) -> Option<i64> {
    (i.code == crate::insn::op::CALL && i.src == pseudo::CALL).then(|| pc as i64 + 1 + i.imm as i64)
}

fn shape(prog: &[Insn], env: &Env<'_>) -> VResult<Shape> {
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
        valid_opcode(i, env).map_err(|m| reject(prog, pc, m))?;
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

/// A remembered state at a prune point, and how many unfinished paths still run below it.
struct Checkpoint {
    state: State,
    parent: Option<usize>,
    branches: u32,
}

struct Path {
    pc: usize,
    state: State,
    /// The nearest checkpoint this path passed.
    cp: Option<usize>,
}

/// Most states remembered per instruction (more are verified but not remembered).
const MAX_STATES_PER_INSN: usize = 64;

struct Explorer<'a> {
    prog: &'a [Insn],
    env: &'a Env<'a>,
    shape: Shape,
    processed: usize,
    checkpoints: Vec<Checkpoint>,
    visited: HashMap<usize, Vec<usize>>,
    work: Vec<Path>,
    next_id: u32,
    rewrites: HashMap<usize, Insn>,
    stack_depth: usize,
    helpers_used: BTreeSet<u32>,
}

/// Verify `prog` in `env`.
pub fn verify(prog: &[Insn], env: &Env<'_>) -> Result<Verified, VerifyError> {
    let shape = shape(prog, env)?;
    let mut x = Explorer {
        prog,
        env,
        shape,
        processed: 0,
        checkpoints: Vec::new(),
        visited: HashMap::new(),
        work: Vec::new(),
        next_id: 1,
        rewrites: HashMap::new(),
        stack_depth: 0,
        helpers_used: BTreeSet::new(),
    };
    let mut regs = [Reg::Uninit; 11];
    regs[1] = match env.ctx {
        Context::Mem { .. } => {
            Reg::Ptr(Ptr::new(PtrKind::Mem { size: mem_len(env) }, x.fresh_id()))
        }
        Context::Xdp => Reg::Ptr(Ptr::new(PtrKind::Ctx, x.fresh_id())),
    };
    if let Context::Mem { len } = env.ctx {
        regs[2] = Reg::constant(len);
    }
    regs[10] = Reg::Ptr(Ptr::new(PtrKind::Stack { frame: 0 }, 0));
    let start = State { frames: vec![Frame { regs, stack: Stack::default(), ret_pc: usize::MAX }] };
    x.work.push(Path { pc: 0, state: start, cp: None });
    while let Some(p) = x.work.pop() {
        x.run_path(p)?;
    }
    let mut insns = prog.to_vec();
    for (pc, i) in x.rewrites {
        insns[pc] = i;
    }
    Ok(Verified {
        insns,
        processed: x.processed,
        stack_depth: x.stack_depth,
        helpers_used: x.helpers_used,
    })
}

fn mem_len(env: &Env<'_>) -> u64 {
    match env.ctx {
        Context::Mem { len } => len,
        Context::Xdp => 0,
    }
}

/// How a memory access behaves, per pointer kind.
enum Access {
    Load { size: usize, signed: bool, dst: u8 },
    Store { size: usize, value: Reg },
    Atomic { size: usize },
}

impl Explorer<'_> {
    fn fresh_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    fn err(&self, pc: usize, msg: impl Into<String>) -> VerifyError {
        reject(self.prog, pc, msg)
    }

    /// Replace instruction `pc` in the verified program; the same on every path.
    fn rewrite(&mut self, pc: usize, new: Insn, conflict: &str) -> VResult<()> {
        match self.rewrites.insert(pc, new) {
            Some(prev) if prev != new => {
                Err(self.err(pc, format!("this instruction {conflict} on different paths")))
            }
            _ => Ok(()),
        }
    }

    /// A path ended (exit, pruned, or a dead branch): release its checkpoints.
    fn finish(&mut self, mut cp: Option<usize>) {
        while let Some(i) = cp {
            let c = &mut self.checkpoints[i];
            c.branches -= 1;
            if c.branches > 0 {
                break;
            }
            cp = c.parent;
        }
    }

    fn fork(&mut self, pc: usize, state: State, cp: Option<usize>) {
        if let Some(i) = cp {
            self.checkpoints[i].branches += 1;
        }
        self.work.push(Path { pc, state, cp });
    }

    fn is_ancestor(&self, k: usize, mut cp: Option<usize>) -> bool {
        while let Some(i) = cp {
            if i == k {
                return true;
            }
            cp = self.checkpoints[i].parent;
        }
        false
    }

    fn run_path(&mut self, p: Path) -> VResult<()> {
        let Path { mut pc, mut state, mut cp } = p;
        loop {
            self.processed += 1;
            if self.processed > self.env.complexity {
                return Err(self.err(pc, format!(
                    "the program is too complex to verify ({} instructions processed); loops need bounds the verifier can prove",
                    self.env.complexity
                )));
            }
            if self.shape.prune[pc] {
                let seen = self.visited.get(&pc).cloned().unwrap_or_default();
                let mut pruned = false;
                for k in seen {
                    let c = &self.checkpoints[k];
                    if c.branches == 0 {
                        if c.state.covers(&state) {
                            pruned = true;
                            break;
                        }
                    } else if c.state == state && self.is_ancestor(k, cp) {
                        return Err(self.err(pc, "infinite loop: the program comes back to this instruction in the same state"));
                    }
                }
                if pruned {
                    self.finish(cp);
                    return Ok(());
                }
                let list = self.visited.entry(pc).or_default();
                if list.len() < MAX_STATES_PER_INSN {
                    let k = self.checkpoints.len();
                    self.checkpoints.push(Checkpoint {
                        state: state.clone(),
                        parent: cp,
                        branches: 1,
                    });
                    self.visited.entry(pc).or_default().push(k);
                    cp = Some(k);
                }
            }
            let i = self.prog[pc];
            match self.step(pc, i, &mut state, cp)? {
                Next::Go(n) => pc = n,
                Next::End => {
                    self.finish(cp);
                    return Ok(());
                }
            }
        }
    }

    fn read_reg(&self, pc: usize, st: &State, r: u8) -> VResult<Reg> {
        match st.reg(r) {
            Reg::Uninit => Err(self.err(pc, format!("r{r} is read before it is initialised"))),
            v => Ok(v),
        }
    }

    fn step(&mut self, pc: usize, i: Insn, st: &mut State, cp: Option<usize>) -> VResult<Next> {
        match i.class() {
            class::ALU | class::ALU64 => {
                self.alu(pc, i, st)?;
                Ok(Next::Go(pc + 1))
            }
            class::LD => {
                let v = match i.src {
                    pseudo::MAP_FD => Reg::Ptr(Ptr::new(PtrKind::Map { map: i.imm as u32 }, 0)),
                    pseudo::MAP_VALUE => {
                        let map = i.imm as u32;
                        let off = self.prog[pc + 1].imm as i64;
                        let info = self.env.maps[map as usize];
                        if info.kind != MapKind::Array {
                            return Err(self
                                .err(pc, "a map value address (global data) needs an array map"));
                        }
                        let size = info.value_size as i64;
                        if off < 0 || off >= size.max(1) {
                            return Err(self.err(
                                pc,
                                format!("offset {off} is outside the map's {size}-byte value"),
                            ));
                        }
                        let mut p = Ptr::new(PtrKind::MapValue { map }, self.fresh_id());
                        p.off = off;
                        Reg::Ptr(p)
                    }
                    _ => Reg::constant(
                        ((self.prog[pc + 1].imm as u32 as u64) << 32) | i.imm as u32 as u64,
                    ),
                };
                st.set(i.dst, v);
                Ok(Next::Go(pc + 2))
            }
            class::LDX => {
                let base = self.read_reg(pc, st, i.src)?;
                let signed = i.mem_mode() == mem::MEMSX;
                self.access(
                    pc,
                    i,
                    st,
                    base,
                    i.off as i64,
                    Access::Load { size: i.mem_size(), signed, dst: i.dst },
                )?;
                Ok(Next::Go(pc + 1))
            }
            class::ST | class::STX => {
                let base = self.read_reg(pc, st, i.dst)?;
                if i.mem_mode() == mem::ATOMIC {
                    let v = self.read_reg(pc, st, i.src)?;
                    if !matches!(v, Reg::Scalar(_)) {
                        return Err(self.err(
                            pc,
                            format!("atomic operand r{} is {}, not a scalar", i.src, v.describe()),
                        ));
                    }
                    if i.imm == atomic::CMPXCHG {
                        self.read_reg(pc, st, 0)?;
                    }
                    self.access(
                        pc,
                        i,
                        st,
                        base,
                        i.off as i64,
                        Access::Atomic { size: i.mem_size() },
                    )?;
                    if i.imm == atomic::CMPXCHG {
                        st.set(0, Reg::unknown());
                    } else if i.imm & atomic::FETCH != 0 {
                        st.set(
                            i.src,
                            if i.mem_size() == 4 {
                                Reg::Scalar(Scalar::unknown32())
                            } else {
                                Reg::unknown()
                            },
                        );
                    }
                } else {
                    let value = if i.class() == class::ST {
                        Reg::constant(i.imm as i64 as u64)
                    } else {
                        self.read_reg(pc, st, i.src)?
                    };
                    self.access(
                        pc,
                        i,
                        st,
                        base,
                        i.off as i64,
                        Access::Store { size: i.mem_size(), value },
                    )?;
                }
                Ok(Next::Go(pc + 1))
            }
            class::JMP | class::JMP32 => self.jump(pc, i, st, cp),
            _ => Err(self.err(pc, "invalid instruction class")),
        }
    }

    fn alu(&mut self, pc: usize, i: Insn, st: &mut State) -> VResult<()> {
        let wide = i.class() == class::ALU64;
        let op = i.op();
        // Byte swaps and negation have no source operand (END's source bit picks the byte order).
        let unary = op == alu::END || op == alu::NEG;
        let src = if unary {
            Reg::constant(0)
        } else if i.is_src_reg() {
            self.read_reg(pc, st, i.src)?
        } else if wide {
            Reg::constant(i.imm as i64 as u64)
        } else {
            Reg::constant(i.imm as u32 as u64)
        };
        if op == alu::MOV {
            let v = match (wide, i.off, src) {
                (true, 0, v) => v,
                (_, 0, Reg::Scalar(s)) => Reg::Scalar(s.low32()),
                (_, 0, Reg::Ptr(_)) => {
                    return Err(self.err(
                        pc,
                        format!("r{} is a pointer: a 32-bit move would leak part of it", i.src),
                    ))
                }
                (_, _, Reg::Scalar(s)) => Reg::Scalar(match (wide, s.as_const()) {
                    (w, Some(c)) => {
                        let v = match i.off {
                            8 => c as i8 as i64 as u64,
                            16 => c as i16 as i64 as u64,
                            _ => c as i32 as i64 as u64,
                        };
                        Scalar::constant(if w { v } else { v as u32 as u64 })
                    }
                    (true, None) => Scalar::UNKNOWN,
                    (false, None) => Scalar::unknown32(),
                }),
                (_, _, _) => return Err(self.err(pc, "sign-extending move of a pointer")),
            };
            st.set(i.dst, v);
            return Ok(());
        }
        let dst = self.read_reg(pc, st, i.dst)?;
        let result = match (dst, src) {
            (Reg::Scalar(a), Reg::Scalar(b)) => Reg::Scalar(if wide {
                self.scalar_op(op, i, &a, &b)
            } else {
                self.scalar_op32(op, i, &a, &b)
            }),
            (Reg::Ptr(p), Reg::Scalar(s)) if wide && (op == alu::ADD || op == alu::SUB) => {
                Reg::Ptr(self.ptr_add(pc, p, &s, op == alu::SUB)?)
            }
            (Reg::Scalar(s), Reg::Ptr(p)) if wide && op == alu::ADD => {
                Reg::Ptr(self.ptr_add(pc, p, &s, false)?)
            }
            (Reg::Ptr(a), Reg::Ptr(b)) if wide && op == alu::SUB && same_base(&a, &b) => {
                Reg::unknown()
            }
            (d, s) => {
                let which = if matches!(d, Reg::Ptr(_)) { i.dst } else { i.src };
                let what = if matches!(d, Reg::Ptr(_)) { d.describe() } else { s.describe() };
                return Err(self.err(
                    pc,
                    format!(
                        "{} arithmetic on r{which}, which holds {what}, is not allowed",
                        if wide { "this" } else { "32-bit" }
                    ),
                ));
            }
        };
        st.set(i.dst, result);
        Ok(())
    }

    fn scalar_op(&self, op: u8, i: Insn, a: &Scalar, b: &Scalar) -> Scalar {
        let k = b.as_const();
        match op {
            alu::ADD => a.add(b),
            alu::SUB => a.sub(b),
            alu::MUL => a.mul(b),
            alu::DIV if i.off == 0 => a.div(b),
            alu::MOD if i.off == 0 => a.rem(b),
            alu::DIV | alu::MOD => match (a.as_const(), k) {
                (Some(x), Some(y)) => Scalar::constant(if op == alu::DIV {
                    if y == 0 {
                        0
                    } else {
                        (x as i64).wrapping_div(y as i64) as u64
                    }
                } else if y == 0 {
                    x
                } else {
                    (x as i64).wrapping_rem(y as i64) as u64
                }),
                _ => Scalar::UNKNOWN,
            },
            alu::OR => a.or(b),
            alu::AND => a.and(b),
            alu::XOR => a.xor(b),
            alu::LSH => k.map_or(Scalar::UNKNOWN, |k| a.shl(k as u32 & 63)),
            alu::RSH => k.map_or(Scalar::UNKNOWN, |k| a.shr(k as u32 & 63)),
            alu::ARSH => match (a.as_const(), k) {
                (Some(x), Some(y)) => Scalar::constant(((x as i64) >> (y & 63)) as u64),
                _ => Scalar::UNKNOWN,
            },
            alu::NEG => a
                .as_const()
                .map_or(Scalar::UNKNOWN, |x| Scalar::constant((x as i64).wrapping_neg() as u64)),
            alu::END => a.as_const().map_or(Scalar::UNKNOWN, |x| {
                Scalar::constant(match i.imm {
                    16 => (x as u16).swap_bytes() as u64,
                    32 => (x as u32).swap_bytes() as u64,
                    _ => x.swap_bytes(),
                })
            }),
            _ => Scalar::UNKNOWN,
        }
    }

    /// 32-bit operations: computed on the low halves, zero-extended. Exact for constants,
    /// ranges where they fit, otherwise any 32-bit value.
    fn scalar_op32(&self, op: u8, i: Insn, a: &Scalar, b: &Scalar) -> Scalar {
        let (a, b) = (a.low32(), b.low32());
        if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
            let (x, y) = (x as u32, y as u32);
            let v: u32 = match op {
                alu::ADD => x.wrapping_add(y),
                alu::SUB => x.wrapping_sub(y),
                alu::MUL => x.wrapping_mul(y),
                alu::DIV if i.off == 1 => {
                    if y == 0 {
                        0
                    } else {
                        (x as i32).wrapping_div(y as i32) as u32
                    }
                }
                alu::DIV => x.checked_div(y).unwrap_or(0),
                alu::MOD if i.off == 1 => {
                    if y == 0 {
                        x
                    } else {
                        (x as i32).wrapping_rem(y as i32) as u32
                    }
                }
                alu::MOD => {
                    if y == 0 {
                        x
                    } else {
                        x % y
                    }
                }
                alu::OR => x | y,
                alu::AND => x & y,
                alu::XOR => x ^ y,
                alu::LSH => x.wrapping_shl(y & 31),
                alu::RSH => x.wrapping_shr(y & 31),
                alu::ARSH => ((x as i32) >> (y & 31)) as u32,
                alu::NEG => (x as i32).wrapping_neg() as u32,
                alu::END => {
                    let v = a.as_const().unwrap_or(0);
                    return Scalar::constant(match (i.is_src_reg(), i.imm) {
                        (false, 16) => v as u16 as u64,
                        (false, 32) => v as u32 as u64,
                        (false, _) => v,
                        (true, 16) => (v as u16).swap_bytes() as u64,
                        (true, 32) => (v as u32).swap_bytes() as u64,
                        (true, _) => v.swap_bytes(),
                    });
                }
                _ => return Scalar::unknown32(),
            };
            return Scalar::constant(v as u64);
        }
        let r = match op {
            alu::AND => a.and(&b),
            alu::ADD => a.add(&b),
            alu::RSH => b.as_const().map_or(a, |k| a.shr(k as u32 & 31)),
            alu::DIV if i.off == 0 => a.div(&b),
            alu::MOD if i.off == 0 => a.rem(&b),
            alu::END if !i.is_src_reg() && i.imm == 16 => Scalar::urange(0, 0xffff),
            alu::END if i.imm == 16 => Scalar::urange(0, 0xffff),
            _ => Scalar::unknown32(),
        };
        if r.umax <= u32::MAX as u64 {
            r
        } else {
            Scalar::unknown32()
        }
    }

    fn ptr_add(&mut self, pc: usize, mut p: Ptr, s: &Scalar, sub: bool) -> VResult<Ptr> {
        match p.kind {
            PtrKind::PacketEnd
            | PtrKind::PacketMeta
            | PtrKind::Map { .. }
            | PtrKind::MapValueOrNull { .. } => {
                return Err(self.err(pc, "arithmetic on this pointer is not allowed (check it against null / compare it only)"));
            }
            _ => {}
        }
        if let Some(c) = s.as_const() {
            let c = c as i64;
            p.off = if sub { p.off.wrapping_sub(c) } else { p.off.wrapping_add(c) };
            if p.off.abs() > 1 << 29 {
                return Err(self.err(pc, "pointer offset out of range"));
            }
            return Ok(p);
        }
        if sub {
            return Err(self.err(pc, "subtracting a variable from a pointer is not allowed"));
        }
        if matches!(p.kind, PtrKind::Ctx | PtrKind::Stack { .. }) {
            return Err(
                self.err(pc, "variable offsets into the context or the stack are not allowed")
            );
        }
        if s.umax > 1 << 29 {
            return Err(self.err(
                pc,
                "the variable added to the pointer is not bounded: mask or compare it first",
            ));
        }
        p.var = p.var.add(s);
        if p.kind == PtrKind::Packet {
            // The checked range belonged to the old pointer; this one must be checked anew.
            p.id = self.fresh_id();
            p.range = 0;
        }
        Ok(p)
    }

    /// Check a memory access through `base` at `off` and update the state.
    fn access(
        &mut self,
        pc: usize,
        i: Insn,
        st: &mut State,
        base: Reg,
        off: i64,
        a: Access,
    ) -> VResult<()> {
        let Reg::Ptr(p) = base else {
            let r = if matches!(a, Access::Load { .. }) { i.src } else { i.dst };
            return Err(self
                .err(pc, format!("memory access through r{r}, which holds {}", base.describe())));
        };
        let size = match a {
            Access::Load { size, .. } | Access::Store { size, .. } | Access::Atomic { size } => {
                size as i64
            }
        };
        let write = !matches!(a, Access::Load { .. });
        let start_min = p.off + off + p.var.smin.max(-(1 << 30));
        let start_max = p.off + off + (p.var.umax.min(1 << 30) as i64);
        // The loaded value, for loads from memory other than the stack and context.
        let plain = |a: &Access| match a {
            Access::Load { size: 8, .. } | Access::Load { signed: true, .. } => Reg::unknown(),
            Access::Load { size, .. } => Reg::Scalar(Scalar::urange(0, (1u64 << (8 * size)) - 1)),
            _ => Reg::Uninit,
        };
        if let Access::Store { value: Reg::Ptr(_), .. } = a {
            if !matches!(p.kind, PtrKind::Stack { .. }) {
                return Err(self.err(pc, "storing a pointer outside the stack would leak it"));
            }
        }
        let bounded = |lo: i64, hi: i64, limit: i64| lo >= 0 && hi + size <= limit;
        match p.kind {
            PtrKind::Stack { frame } => {
                let Some(o) = p.fixed().map(|f| f + off) else {
                    return Err(self.err(pc, "stack access at a variable offset"));
                };
                if o < -(STACK_SIZE as i64) || o + size > 0 {
                    return Err(self.err(pc, format!("stack access at {o} (size {size}) is outside the {STACK_SIZE}-byte stack")));
                }
                self.stack_depth = self.stack_depth.max((-o) as usize);
                let idx = (STACK_SIZE as i64 + o) as usize;
                let n = size as usize;
                let stack = &mut st.frames[frame as usize].stack;
                match a {
                    Access::Load { dst, signed, size } => {
                        let v = if size == 8 && idx % 8 == 0 && stack.bytes[idx] == Byte::Spill {
                            *stack.spill_at((idx / 8) as u16).unwrap_or(&Reg::unknown())
                        } else if stack.initialised(idx, n) {
                            plain(&Access::Load { size, signed, dst })
                        } else {
                            return Err(self.err(
                                pc,
                                format!(
                                    "stack bytes at {o}..{} are read before they are written",
                                    o + n as i64
                                ),
                            ));
                        };
                        st.set(dst, v);
                    }
                    Access::Store { value, .. } => {
                        // Whole registers stored to aligned slots keep their type (pointers,
                        // scalar ranges); anything else is plain data.
                        if n == 8
                            && idx % 8 == 0
                            && (matches!(value, Reg::Ptr(_)) || i.class() == class::STX)
                        {
                            stack.write_spill(idx, value);
                        } else {
                            stack.write_misc(idx, n);
                        }
                    }
                    Access::Atomic { .. } => {
                        if !stack.initialised(idx, n) {
                            return Err(
                                self.err(pc, "atomic operation on uninitialised stack bytes")
                            );
                        }
                        if stack.bytes[idx] == Byte::Spill {
                            if let Some(Reg::Ptr(_)) = stack.spill_at((idx / 8) as u16) {
                                return Err(self.err(pc, "atomic operation on a spilled pointer"));
                            }
                        }
                        stack.write_misc(idx, n);
                    }
                }
            }
            PtrKind::Mem { size: limit } => {
                if !bounded(start_min, start_max, limit as i64) {
                    return Err(self.err(
                        pc,
                        format!(
                            "access at {start_min}..{} is outside the {limit}-byte memory",
                            start_max + size
                        ),
                    ));
                }
                if let Access::Load { dst, .. } = a {
                    st.set(dst, plain(&a));
                }
            }
            PtrKind::MapValue { map } => {
                let limit = self.env.maps[map as usize].value_size as i64;
                if !bounded(start_min, start_max, limit) {
                    return Err(self.err(
                        pc,
                        format!(
                            "access at {start_min}..{} is outside the {limit}-byte map value",
                            start_max + size
                        ),
                    ));
                }
                if let Access::Load { dst, .. } = a {
                    st.set(dst, plain(&a));
                }
            }
            PtrKind::Packet => {
                if matches!(a, Access::Atomic { .. }) {
                    return Err(self.err(pc, "atomic operations on packet data are not allowed"));
                }
                let lo = p.off + off + p.var.smin.max(0);
                let hi = p.off + off;
                if lo < 0 || hi + size > p.range as i64 {
                    return Err(self.err(pc, format!(
                        "packet access at offset {} (size {size}) is beyond the {} bytes checked against data_end; compare the pointer with data_end first",
                        hi, p.range
                    )));
                }
                if let Access::Load { dst, .. } = a {
                    st.set(dst, plain(&a));
                }
            }
            PtrKind::Ctx => {
                if write {
                    return Err(self.err(pc, "the context is read-only"));
                }
                let Access::Load { dst, size, signed } = a else { unreachable!() };
                let Some(o) = p.fixed().map(|f| f + off) else {
                    return Err(self.err(pc, "context access at a variable offset"));
                };
                match self.env.ctx {
                    Context::Xdp => {
                        let f = xdp_field(o)
                            .filter(|_| size == 4 && !signed && o < XDP_MD_SIZE)
                            .ok_or_else(|| {
                                self.err(
                                    pc,
                                    format!("no xdp_md field is a {size}-byte load at offset {o}"),
                                )
                            })?;
                        let v = match f.kind {
                            XdpFieldKind::Data => Reg::Ptr(Ptr::new(PtrKind::Packet, 1)),
                            XdpFieldKind::DataEnd => Reg::Ptr(Ptr::new(PtrKind::PacketEnd, 0)),
                            XdpFieldKind::DataMeta => Reg::Ptr(Ptr::new(PtrKind::PacketMeta, 0)),
                            XdpFieldKind::Scalar => Reg::Scalar(Scalar::unknown32()),
                        };
                        let size_bits = if f.ctx_size == 8 { mem::DW } else { mem::W };
                        let new = Insn::new(
                            class::LDX | mem::MEM | size_bits,
                            i.dst,
                            i.src,
                            f.ctx_offset - (o - i.off as i64) as i16,
                            0,
                        );
                        self.rewrite(pc, new, "reads different context fields")?;
                        st.set(dst, v);
                    }
                    Context::Mem { .. } => {
                        return Err(self.err(pc, "no context in this environment"))
                    }
                }
            }
            PtrKind::PacketEnd | PtrKind::PacketMeta => {
                return Err(
                    self.err(pc, "data_end and data_meta can only be compared, not dereferenced")
                );
            }
            PtrKind::MapValueOrNull { .. } => {
                return Err(
                    self.err(pc, "the map value pointer may be null: compare it with 0 first")
                );
            }
            PtrKind::Map { .. } => return Err(self.err(pc, "a map cannot be dereferenced")),
        }
        Ok(())
    }

    fn jump(&mut self, pc: usize, i: Insn, st: &mut State, cp: Option<usize>) -> VResult<Next> {
        match i.op() {
            jmp::JA => {
                let t = branch_target(pc, i).unwrap_or(0) as usize;
                Ok(Next::Go(t))
            }
            jmp::EXIT => self.exit(pc, st),
            jmp::CALL => self.call(pc, i, st),
            op => {
                let t = (pc as i64 + 1 + i.off as i64) as usize;
                let wide = i.class() == class::JMP;
                let a = self.read_reg(pc, st, i.dst)?;
                let b = if i.is_src_reg() {
                    self.read_reg(pc, st, i.src)?
                } else if wide {
                    Reg::constant(i.imm as i64 as u64)
                } else {
                    Reg::constant(i.imm as u32 as u64)
                };
                let mut taken = st.clone();
                let mut fall = std::mem::replace(st, State { frames: Vec::new() });
                let (t_ok, f_ok) = self.refine(pc, op, wide, i, a, b, &mut taken, &mut fall)?;
                match (t_ok, f_ok) {
                    (true, true) => {
                        self.fork(t, taken, cp);
                        *st = fall;
                        Ok(Next::Go(pc + 1))
                    }
                    (true, false) => {
                        *st = taken;
                        Ok(Next::Go(t))
                    }
                    (false, true) => {
                        *st = fall;
                        Ok(Next::Go(pc + 1))
                    }
                    (false, false) => Ok(Next::End),
                }
            }
        }
    }

    /// Refine both successor states of a conditional jump; returns which are reachable.
    #[allow(clippy::too_many_arguments)]
    fn refine(
        &mut self,
        pc: usize,
        op: u8,
        wide: bool,
        i: Insn,
        a: Reg,
        b: Reg,
        taken: &mut State,
        fall: &mut State,
    ) -> VResult<(bool, bool)> {
        match (a, b) {
            (Reg::Scalar(x), Reg::Scalar(y)) => {
                if !wide {
                    // 32-bit comparisons refine only values that fit in 31 bits (where the
                    // low halves and the whole registers order the same way).
                    let fits = |s: &Scalar| s.umax < 1 << 31;
                    if !(fits(&x) && fits(&y)) {
                        let (xa, ya) = (x.low32(), y.low32());
                        return Ok(match (xa.as_const(), ya.as_const()) {
                            (Some(c), Some(d)) => {
                                let t = compare32(op, c as u32, d as u32);
                                (t, !t)
                            }
                            _ => (true, true),
                        });
                    }
                }
                let (tx, ty) = cond_refine(op, &x, &y, true);
                let (fx, fy) = cond_refine(op, &x, &y, false);
                let t_ok = !tx.is_empty() && !ty.is_empty();
                let f_ok = !fx.is_empty() && !fy.is_empty();
                if t_ok {
                    set_scalar(taken, i.dst, tx);
                    if i.is_src_reg() {
                        set_scalar(taken, i.src, ty);
                    }
                }
                if f_ok {
                    set_scalar(fall, i.dst, fx);
                    if i.is_src_reg() {
                        set_scalar(fall, i.src, fy);
                    }
                }
                Ok((t_ok, f_ok))
            }
            // Null checks of map lookups.
            (Reg::Ptr(p), Reg::Scalar(z))
                if matches!(p.kind, PtrKind::MapValueOrNull { .. }) && z.as_const() == Some(0) =>
            {
                let PtrKind::MapValueOrNull { map } = p.kind else { unreachable!() };
                let (null, nonnull) = match op {
                    jmp::JEQ => (&mut *taken, &mut *fall),
                    jmp::JNE => (&mut *fall, &mut *taken),
                    _ => {
                        return Err(
                            self.err(pc, "compare a map value pointer with 0 using == or != only")
                        )
                    }
                };
                null.for_each_reg(|r| {
                    if let Reg::Ptr(q) = r {
                        if q.id == p.id && matches!(q.kind, PtrKind::MapValueOrNull { .. }) {
                            *r = Reg::constant(0);
                        }
                    }
                });
                nonnull.for_each_reg(|r| {
                    if let Reg::Ptr(q) = r {
                        if q.id == p.id && matches!(q.kind, PtrKind::MapValueOrNull { .. }) {
                            q.kind = PtrKind::MapValue { map };
                        }
                    }
                });
                Ok((true, true))
            }
            // Packet bounds checks: `pkt + n <op> data_end`.
            (Reg::Ptr(p), Reg::Ptr(e)) | (Reg::Ptr(e), Reg::Ptr(p))
                if wide && p.kind == PtrKind::Packet && e.kind == PtrKind::PacketEnd =>
            {
                let pkt_left = matches!(a, Reg::Ptr(q) if q.kind == PtrKind::Packet);
                // Normalise to "pkt OP end": which branch proves pkt <= end?
                let safe_when_taken = match (op, pkt_left) {
                    (jmp::JGT, true) | (jmp::JGE, true) => Some(false), // pkt > end: safe on fall-through
                    (jmp::JLE, true) | (jmp::JLT, true) => Some(true),
                    (jmp::JLT, false) | (jmp::JLE, false) => Some(false), // end < pkt
                    (jmp::JGE, false) | (jmp::JGT, false) => Some(true),  // end >= pkt
                    _ => None,
                };
                if let Some(t) = safe_when_taken {
                    // "pkt < end" proves one byte more than "pkt <= end".
                    let strict_safe = matches!(
                        (op, pkt_left, t),
                        (jmp::JLT, true, true)
                            | (jmp::JGT, false, true)
                            | (jmp::JGE, true, false)
                            | (jmp::JLE, false, false)
                    );
                    let reach = p.off + if strict_safe { 1 } else { 0 };
                    if reach > 0 {
                        let target = if t { &mut *taken } else { &mut *fall };
                        target.for_each_reg(|r| {
                            if let Reg::Ptr(q) = r {
                                if q.kind == PtrKind::Packet && q.id == p.id {
                                    q.range = q.range.max(reach as u64);
                                }
                            }
                        });
                    }
                }
                Ok((true, true))
            }
            (Reg::Ptr(_), _) | (_, Reg::Ptr(_)) => {
                if matches!(a, Reg::Ptr(p) if matches!(p.kind, PtrKind::Map { .. })) {
                    return Err(self.err(pc, "a map cannot be compared"));
                }
                Ok((true, true))
            }
            _ => Err(self.err(pc, "comparison of uninitialised values")),
        }
    }

    fn exit(&mut self, pc: usize, st: &mut State) -> VResult<Next> {
        let r0 = self.read_reg(pc, st, 0)?;
        if st.frames.len() == 1 {
            if !matches!(r0, Reg::Scalar(_)) {
                return Err(self.err(
                    pc,
                    format!("the program returns {}; it must return a scalar", r0.describe()),
                ));
            }
            return Ok(Next::End);
        }
        let depth = st.frames.len() - 1;
        if let Reg::Ptr(p) = r0 {
            if p.kind == (PtrKind::Stack { frame: depth as u8 }) {
                return Err(self.err(pc, "a function returns a pointer to its own stack"));
            }
        }
        let callee = st.frames.pop().unwrap_or_else(|| unreachable!());
        let f = st.frame_mut();
        f.regs[0] = r0;
        for r in 1..=5 {
            f.regs[r] = Reg::Uninit;
        }
        Ok(Next::Go(callee.ret_pc))
    }

    fn call(&mut self, pc: usize, i: Insn, st: &mut State) -> VResult<Next> {
        if i.src == pseudo::CALL && !i.is_src_reg() {
            if st.frames.len() >= MAX_CALL_DEPTH {
                return Err(self.err(pc, format!("local calls nest deeper than {MAX_CALL_DEPTH}")));
            }
            let target = (pc as i64 + 1 + i.imm as i64) as usize;
            let caller = st.frame().regs;
            let mut regs = [Reg::Uninit; 11];
            regs[1..=5].copy_from_slice(&caller[1..=5]);
            regs[10] = Reg::Ptr(Ptr::new(PtrKind::Stack { frame: st.frames.len() as u8 }, 0));
            st.frames.push(Frame { regs, stack: Stack::default(), ret_pc: pc + 1 });
            return Ok(Next::Go(target));
        }
        let id = if i.is_src_reg() {
            match self.read_reg(pc, st, i.dst)? {
                Reg::Scalar(s) => s.as_const().ok_or_else(|| {
                    self.err(pc, format!("r{} does not hold a known helper number", i.dst))
                })?,
                r => {
                    return Err(self.err(
                        pc,
                        format!("r{} holds {}, not a helper number", i.dst, r.describe()),
                    ))
                }
            }
        } else {
            i.imm as u32 as u64
        };
        let h =
            u32::try_from(id).ok().and_then(|id| self.env.helpers.get(id)).copied().ok_or_else(
                || self.err(pc, format!("helper {id} does not exist in this environment")),
            )?;
        self.helpers_used.insert(h.id);
        if i.is_src_reg() {
            // callx with a register the verifier knows: a direct call from now on.
            self.rewrite(
                pc,
                Insn::new(crate::insn::op::CALL, 0, 0, 0, h.id as i32),
                "calls different helpers",
            )?;
        }
        let mut map: Option<u32> = None;
        for (k, arg) in h.args.iter().enumerate() {
            let r = (k + 1) as u8;
            let v = st.reg(r);
            let name = h.name;
            let prog = self.prog;
            let need = |what: &str| {
                reject(
                    prog,
                    pc,
                    format!(
                        "{name} argument {} (r{r}) must be {what}; it is {}",
                        k + 1,
                        v.describe()
                    ),
                )
            };
            match arg {
                Arg::None => {}
                Arg::Anything => {
                    if v == Reg::Uninit {
                        return Err(need("initialised"));
                    }
                }
                Arg::Scalar | Arg::Size => {
                    if !matches!(v, Reg::Scalar(_)) {
                        return Err(need("a scalar"));
                    }
                }
                Arg::Map => match v {
                    Reg::Ptr(Ptr { kind: PtrKind::Map { map: m }, .. }) => map = Some(m),
                    _ => return Err(need("a map")),
                },
                Arg::DevMap => match v {
                    Reg::Ptr(Ptr { kind: PtrKind::Map { map: m }, .. })
                        if self.env.maps[m as usize].kind == MapKind::DevMap =>
                    {
                        map = Some(m)
                    }
                    _ => return Err(need("a devmap")),
                },
                Arg::Ctx => {
                    if !matches!(v, Reg::Ptr(p) if p.kind == PtrKind::Ctx && p.fixed() == Some(0)) {
                        return Err(need("the context pointer"));
                    }
                }
                Arg::MapKey | Arg::MapValue => {
                    let m = map.ok_or_else(|| need("preceded by a map argument"))?;
                    let info = self.env.maps[m as usize];
                    let n =
                        if *arg == Arg::MapKey { info.key_size } else { info.value_size } as i64;
                    let depth =
                        check_helper_mem(self.env.maps, st, v, n, false).map_err(|m| need(&m))?;
                    self.stack_depth = self.stack_depth.max(depth);
                }
                Arg::Mem | Arg::UninitMem => {
                    let size = match st.reg(r + 1) {
                        Reg::Scalar(s) if s.umax <= 1 << 16 => s.umax as i64,
                        _ => {
                            return Err(self.err(
                                pc,
                                format!(
                                    "{name} argument {} (r{}) must be a bounded size",
                                    k + 2,
                                    r + 1
                                ),
                            ))
                        }
                    };
                    if size > 0 || !matches!(v, Reg::Scalar(s) if s.as_const() == Some(0)) {
                        let depth =
                            check_helper_mem(self.env.maps, st, v, size, *arg == Arg::UninitMem)
                                .map_err(|m| need(&m))?;
                        self.stack_depth = self.stack_depth.max(depth);
                    }
                }
            }
        }
        for r in 1..=5 {
            st.set(r, Reg::Uninit);
        }
        st.set(
            0,
            match h.ret {
                Ret::Scalar => Reg::unknown(),
                Ret::MapValueOrNull => {
                    let m = map.ok_or_else(|| {
                        self.err(pc, "a helper returning a map value needs a map argument")
                    })?;
                    Reg::Ptr(Ptr::new(PtrKind::MapValueOrNull { map: m }, self.fresh_id()))
                }
            },
        );
        if h.changes_packet {
            // The packet moved: every packet pointer is stale.
            st.for_each_reg(|r| {
                if let Reg::Ptr(p) = r {
                    if matches!(p.kind, PtrKind::Packet | PtrKind::PacketEnd | PtrKind::PacketMeta)
                    {
                        *r = Reg::unknown();
                    }
                }
            });
        }
        Ok(Next::Go(pc + 1))
    }
}

/// A helper reads (or writes, when `uninit_ok`) `n` bytes through `v`; returns the stack depth
/// the access reaches (0 off the stack).
fn check_helper_mem(
    maps: &[MapInfo],
    st: &mut State,
    v: Reg,
    n: i64,
    uninit_ok: bool,
) -> Result<usize, String> {
    let Reg::Ptr(p) = v else { return Err("a pointer".into()) };
    match p.kind {
        PtrKind::Stack { frame } => {
            let o = p.fixed().ok_or("a stack pointer at a fixed offset")?;
            if o < -(STACK_SIZE as i64) || o + n > 0 {
                return Err(format!("{n} bytes of stack from offset {o}"));
            }
            let idx = (STACK_SIZE as i64 + o) as usize;
            let stack = &mut st.frames[frame as usize].stack;
            if uninit_ok {
                stack.write_misc(idx, n as usize);
            } else if !stack.initialised(idx, n as usize) {
                return Err(format!(
                    "{n} initialised bytes (stack {o}..{} is not all written)",
                    o + n
                ));
            }
            Ok((-o) as usize)
        }
        PtrKind::MapValue { map } => {
            let limit = maps[map as usize].value_size as i64;
            let lo = p.off + p.var.smin.max(0);
            let hi = p.off + p.var.umax.min(1 << 30) as i64;
            if lo < 0 || hi + n > limit {
                return Err(format!("{n} bytes inside the {limit}-byte map value"));
            }
            Ok(0)
        }
        PtrKind::Packet => {
            if p.off < 0 || p.off + n > p.range as i64 || p.var.umax != 0 {
                return Err(format!("{n} bytes of packet checked against data_end"));
            }
            Ok(0)
        }
        PtrKind::Mem { size } => {
            if p.off < 0 || p.off + n > size as i64 || p.var.umax != 0 {
                return Err(format!("{n} bytes inside the {size}-byte memory"));
            }
            Ok(0)
        }
        _ => Err(format!("a pointer to {n} readable bytes")),
    }
}

enum Next {
    Go(usize),
    End,
}

fn same_base(a: &Ptr, b: &Ptr) -> bool {
    match (a.kind, b.kind) {
        (
            PtrKind::Packet | PtrKind::PacketEnd | PtrKind::PacketMeta,
            PtrKind::Packet | PtrKind::PacketEnd | PtrKind::PacketMeta,
        ) => true,
        (x, y) => x == y,
    }
}

fn set_scalar(st: &mut State, r: u8, s: Scalar) {
    st.set(r, Reg::Scalar(s));
}

fn compare32(op: u8, a: u32, b: u32) -> bool {
    match op {
        jmp::JEQ => a == b,
        jmp::JNE => a != b,
        jmp::JGT => a > b,
        jmp::JGE => a >= b,
        jmp::JLT => a < b,
        jmp::JLE => a <= b,
        jmp::JSET => a & b != 0,
        jmp::JSGT => (a as i32) > (b as i32),
        jmp::JSGE => (a as i32) >= (b as i32),
        jmp::JSLT => (a as i32) < (b as i32),
        jmp::JSLE => (a as i32) <= (b as i32),
        _ => false,
    }
}

/// What `x OP y` being `outcome` says about x and y.
fn cond_refine(op: u8, x: &Scalar, y: &Scalar, outcome: bool) -> (Scalar, Scalar) {
    let (mut a, mut b) = (*x, *y);
    // Express as "a REL b holds".
    let rel = if outcome { op } else { negate(op) };
    match rel {
        jmp::JEQ => {
            let lo = a.umin.max(b.umin);
            let hi = a.umax.min(b.umax);
            let slo = a.smin.max(b.smin);
            let shi = a.smax.min(b.smax);
            let t = a.t.intersect(b.t);
            for s in [&mut a, &mut b] {
                s.umin = lo;
                s.umax = hi;
                s.smin = slo;
                s.smax = shi;
                s.t = t;
            }
        }
        jmp::JNE => {
            if let Some(c) = b.as_const() {
                if a.umin == c {
                    a.umin = c.wrapping_add(1).max(a.umin);
                    if c == u64::MAX {
                        a.umax = 0;
                        a.umin = 1;
                    }
                } else if a.umax == c {
                    a.umax = c.wrapping_sub(1);
                    if c == 0 {
                        a.umin = 1;
                        a.umax = 0;
                    }
                }
                if a.as_const() == Some(c) {
                    a.umin = 1;
                    a.umax = 0;
                }
            }
        }
        jmp::JGT => {
            a.umin = a.umin.max(b.umin.saturating_add(1));
            b.umax = b.umax.min(a.umax.saturating_sub(1));
            if a.umax == 0 {
                a.umin = 1;
                a.umax = 0;
            }
        }
        jmp::JGE => {
            a.umin = a.umin.max(b.umin);
            b.umax = b.umax.min(a.umax);
        }
        jmp::JLT => {
            a.umax = a.umax.min(b.umax.saturating_sub(1));
            b.umin = b.umin.max(a.umin.saturating_add(1));
            if b.umax == 0 {
                a.umin = 1;
                a.umax = 0;
            }
        }
        jmp::JLE => {
            a.umax = a.umax.min(b.umax);
            b.umin = b.umin.max(a.umin);
        }
        jmp::JSGT => {
            a.smin = a.smin.max(b.smin.saturating_add(1));
            b.smax = b.smax.min(a.smax.saturating_sub(1));
            if a.smax == i64::MIN {
                a.smin = 0;
                a.smax = -1;
            }
        }
        jmp::JSGE => {
            a.smin = a.smin.max(b.smin);
            b.smax = b.smax.min(a.smax);
        }
        jmp::JSLT => {
            a.smax = a.smax.min(b.smax.saturating_sub(1));
            b.smin = b.smin.max(a.smin.saturating_add(1));
            if b.smax == i64::MIN {
                a.smin = 0;
                a.smax = -1;
            }
        }
        jmp::JSLE => {
            a.smax = a.smax.min(b.smax);
            b.smin = b.smin.max(a.smin);
        }
        jmp::JSET => {
            // Taken: some bit in common, so a != 0. Not taken: a & b == 0.
            if let Some(c) = b.as_const() {
                if outcome {
                    if a.t.value & c != 0 || c != 0 && (a.t.value | a.t.mask) & c != 0 {
                        if (a.t.value | a.t.mask) & c == 0 {
                            a.umin = 1;
                            a.umax = 0;
                        }
                    } else {
                        a.umin = 1;
                        a.umax = 0;
                    }
                } else if a.t.value & c != 0 {
                    a.umin = 1;
                    a.umax = 0;
                } else {
                    a.t.mask &= !c;
                }
            }
        }
        _ => {}
    }
    if !a.is_empty() {
        a.sync();
    }
    if !b.is_empty() {
        b.sync();
    }
    (a, b)
}

/// The relation that holds when a jump is not taken (JSET's negation is handled by the caller).
fn negate(op: u8) -> u8 {
    match op {
        jmp::JEQ => jmp::JNE,
        jmp::JNE => jmp::JEQ,
        jmp::JGT => jmp::JLE,
        jmp::JGE => jmp::JLT,
        jmp::JLT => jmp::JGE,
        jmp::JLE => jmp::JGT,
        jmp::JSGT => jmp::JSLE,
        jmp::JSGE => jmp::JSLT,
        jmp::JSLT => jmp::JSGE,
        jmp::JSLE => jmp::JSGT,
        jmp::JSET => jmp::JSET,
        o => o,
    }
}
