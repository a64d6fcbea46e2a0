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

mod arith;
mod branch;
mod call;
mod memory;
pub mod scalar;
mod shape;

// The shape interpreter (`crate::chain`) reuses the transfer functions and branch refinement.
pub(crate) use arith::{scalar_op, scalar_op32};
pub(crate) use branch::{compare32, cond_refine, negate};
use memory::{check_helper_mem, Access};
use shape::{branch_target, shape, Shape};
pub mod state;

use crate::asm::disasm_insn;
use crate::ctx::{xdp_field, XdpFieldKind, XDP_MD_SIZE};
use crate::helpers::{Arg, Helpers, Ret};
use crate::insn::{alu, atomic, class, jmp, mem, pseudo, Insn};
use crate::interp::{MAX_CALL_DEPTH, STACK_SIZE};
use crate::maps::{MapDef, MapKind};
use scalar::Scalar;
use state::{Frame, Ptr, PtrKind, Reg, Stack, State};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
    /// An XDP context whose packet is known to hold at least `min_len` bytes when the program
    /// starts (until a helper moves the packet): a program specialised to its upstream's
    /// guarantee, behind a guard that checks the length (`crate::chain`).
    XdpMinLen { min_len: u32 },
}

impl Context {
    /// Whether r1 is a `struct xdp_md *`.
    pub fn is_xdp(self) -> bool {
        matches!(self, Context::Xdp | Context::XdpMinLen { .. })
    }

    /// Bytes from `data` known to be in the packet at the start.
    pub fn packet_min_len(self) -> u64 {
        match self {
            Context::XdpMinLen { min_len } => min_len as u64,
            _ => 0,
        }
    }
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
    /// Helper calls whose map argument is the same map on every path: the JIT may inline
    /// the lookup.
    pub call_maps: BTreeMap<usize, u32>,
    /// Maps into whose values some path stores (a store, an atomic, a helper's output): their
    /// contents change without an update (`crate::maps::Map::note_value_stores`).
    pub value_stores: BTreeSet<u32>,
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
    /// Checkpoints remembered at each instruction.
    visited: Vec<Vec<usize>>,
    work: Vec<Path>,
    next_id: u32,
    rewrites: HashMap<usize, Insn>,
    stack_depth: usize,
    helpers_used: BTreeSet<u32>,
    /// Map argument per helper call site; `None` once two paths disagree.
    call_maps: HashMap<usize, Option<u32>>,
    value_stores: BTreeSet<u32>,
}

/// Verify `prog` in `env`. Never panics: a panic inside the verifier (a bug) refuses the
/// program with "internal verifier error" instead of taking the control thread down. The
/// panic's text goes to the node's log (the panic hook), not into the refusal: a refusal may
/// travel back to a remote sender, who has no business reading the verifier's internals.
pub fn verify(prog: &[Insn], env: &Env<'_>) -> Result<Verified, VerifyError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| explore(prog, env))).unwrap_or_else(
        |_| {
            Err(VerifyError {
                pc: 0,
                text: String::new(),
                msg: "internal verifier error (a bug: the node's log has the details; please \
                      report it); the program is refused"
                    .into(),
            })
        },
    )
}

fn explore(prog: &[Insn], env: &Env<'_>) -> Result<Verified, VerifyError> {
    let shape = shape(prog, env)?;
    let mut x = Explorer {
        prog,
        env,
        shape,
        processed: 0,
        checkpoints: Vec::new(),
        visited: vec![Vec::new(); prog.len()],
        work: Vec::new(),
        next_id: 1,
        rewrites: HashMap::new(),
        stack_depth: 0,
        helpers_used: BTreeSet::new(),
        call_maps: HashMap::new(),
        value_stores: BTreeSet::new(),
    };
    let mut regs = [Reg::Uninit; 11];
    regs[1] = match env.ctx {
        Context::Mem { .. } => {
            Reg::Ptr(Ptr::new(PtrKind::Mem { size: mem_len(env) }, x.fresh_id()))
        }
        Context::Xdp | Context::XdpMinLen { .. } => Reg::Ptr(Ptr::new(PtrKind::Ctx, x.fresh_id())),
    };
    if let Context::Mem { len } = env.ctx {
        regs[2] = Reg::constant(len);
    }
    regs[10] = Reg::Ptr(Ptr::new(PtrKind::Stack { frame: 0 }, 0));
    let start = State {
        frames: vec![Frame { regs, stack: Stack::default(), ret_pc: usize::MAX }],
        packet_min: env.ctx.packet_min_len(),
    };
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
        call_maps: x.call_maps.into_iter().filter_map(|(pc, m)| Some((pc, m?))).collect(),
        value_stores: x.value_stores,
    })
}

fn mem_len(env: &Env<'_>) -> u64 {
    match env.ctx {
        Context::Mem { len } => len,
        Context::Xdp | Context::XdpMinLen { .. } => 0,
    }
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
                let mut pruned = false;
                for idx in 0..self.visited[pc].len() {
                    let k = self.visited[pc][idx];
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
                if self.visited[pc].len() < MAX_STATES_PER_INSN {
                    let k = self.checkpoints.len();
                    self.checkpoints.push(Checkpoint {
                        state: state.clone(),
                        parent: cp,
                        branches: 1,
                    });
                    self.visited[pc].push(k);
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
                    pseudo::MAP_ENTRY => {
                        if !matches!(self.env.ctx, Context::XdpMinLen { .. }) {
                            return Err(self.err(pc, "map_entry is for specialised programs only"));
                        }
                        let map = i.imm as u32;
                        let slot = self.prog[pc + 1].imm as u32 as u64;
                        let info = self.env.maps[map as usize];
                        let slots = crate::maps::hash_slots(info.max_entries) as u64;
                        if info.kind != MapKind::Hash || slot >= slots {
                            return Err(self.err(pc, "map_entry needs a slot of a hash map"));
                        }
                        Reg::Ptr(Ptr::new(PtrKind::MapValue { map }, self.fresh_id()))
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
                        // cmpxchg compares memory with r0: a pointer there would tell the
                        // program whether an address equals a value it chose.
                        let expected = self.read_reg(pc, st, 0)?;
                        if !matches!(expected, Reg::Scalar(_)) {
                            return Err(self.err(
                                pc,
                                format!(
                                    "cmpxchg compares memory with r0, which holds {}; only a scalar may be compared, or the result would reveal an address",
                                    expected.describe()
                                ),
                            ));
                        }
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
}

enum Next {
    Go(usize),
    End,
}

/// Where the jump at `pc` goes (None for other instructions, calls and exits).
pub fn jump_target(pc: usize, i: Insn) -> Option<usize> {
    branch_target(pc, i).and_then(|t| usize::try_from(t).ok())
}
