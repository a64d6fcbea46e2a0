//! The shape interpreter: what a verified XDP program guarantees about the packets it lets
//! through. It explores the program's paths like the verifier does (the verifier's scalars,
//! ALU transfer functions and branch refinement), on a state that also holds byte facts for
//! the packet and the stacks, the packet length as one interval, and the provenance of
//! registers loaded from memory; at every `exit` the packet state joins the [`Guarantee`] of
//! each action `r0` may hold.
//!
//! It is a separate explorer rather than a mode of the verifier's: its state is richer, it
//! never rejects, and its pruning is that of a collecting analysis (any remembered state that
//! covers a new one ends the new path, since everything reachable from the new one is
//! described by what is reachable from the old). Over its budget, or on an instruction it does
//! not model, it gives up with no facts (⊤), never an error and never a panic.

use super::domain::*;
use super::refine::branch;
use super::shape::{Guarantee, PacketShape};
use super::transfer::{alu, atomic_op, clobber, load, store};
use crate::helpers::{Arg, Helpers, Ret};
use crate::insn::{class, jmp, mem, pseudo, Insn};
use crate::interp::MAX_CALL_DEPTH;
use crate::verifier::jump_target;
use crate::verifier::scalar::{Scalar, Tnum};
use crate::verifier::state::{Ptr, PtrKind, Reg};
use crate::xdp::id as helper;
use std::collections::BTreeMap;

/// Instructions the analysis may process in all before it gives up (⊤).
pub const DEFAULT_BUDGET: usize = 200_000;
/// The default input: Ethernet frames up to 1500 bytes of payload and one VLAN tag.
pub const DEFAULT_MAX_FRAME: u32 = 1518;
/// The shortest frame a port delivers, and the shortest `adjust_head`/`adjust_tail` leave.
pub const MIN_FRAME: u32 = 14;
static NO_MAP_VALUES: BTreeMap<u32, Vec<Option<u8>>> = BTreeMap::new();

/// States remembered per instruction for pruning (more are explored, not remembered).
const MAX_STATES_PER_INSN: usize = 64;

/// How a packet leaves an XDP program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExitAction {
    Aborted,
    Drop,
    Pass,
    Tx,
    Redirect,
}

impl ExitAction {
    pub const ALL: [ExitAction; 5] =
        [Self::Aborted, Self::Drop, Self::Pass, Self::Tx, Self::Redirect];

    /// The XDP return code.
    pub fn code(self) -> u64 {
        self as u64
    }

    pub fn from_code(code: u64) -> Option<Self> {
        Self::ALL.get(usize::try_from(code).ok()?).copied()
    }

    /// `pass`, `tx`, ... (JSON keys).
    pub fn name(self) -> &'static str {
        ["aborted", "drop", "pass", "tx", "redirect"][self as usize]
    }

    /// Whether packets leaving this way go on to another program or port.
    pub fn forwards(self) -> bool {
        matches!(self, Self::Pass | Self::Tx | Self::Redirect)
    }
}

/// Limits and environment of an analysis.
#[derive(Debug, Clone)]
pub struct AnalysisOptions {
    /// The helpers the program was verified with (their argument kinds say which memory a
    /// call may write).
    pub helpers: Helpers,
    pub budget: usize,
    /// Map values known byte by byte (by map index; `None`: unknown byte): what loads through
    /// a pointer into such a map read (`super::mapconst`, under its pins).
    pub map_values: BTreeMap<u32, Vec<Option<u8>>>,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        Self { helpers: crate::xdp::helpers(), budget: DEFAULT_BUDGET, map_values: BTreeMap::new() }
    }
}

/// Whether the analysis saw every path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Complete,
    /// More than the budget's instructions: no facts.
    OverBudget,
    /// An instruction the analysis does not model (the verifier accepted it): no facts.
    Unsupported {
        pc: usize,
        what: String,
    },
    /// A bug in the analysis (caught): no facts.
    Internal,
}

/// The result: per exit action, what every packet leaving that way satisfies. An action
/// missing from `exits` is never taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    pub exits: BTreeMap<ExitAction, Guarantee>,
    pub processed: usize,
    pub outcome: Outcome,
    /// What every path did at each instruction (empty unless the analysis is complete).
    pub coverage: Coverage,
}

/// A scalar an instruction leaves in its destination register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Konst {
    /// No path reached the instruction (or it leaves no scalar).
    #[default]
    Unseen,
    /// The same value on every path.
    Const(u64),
    Varies,
}

impl Konst {
    fn meet(self, v: Option<u64>) -> Konst {
        match (self, v) {
            (Konst::Unseen, Some(c)) => Konst::Const(c),
            (Konst::Const(a), Some(c)) if a == c => self,
            _ => Konst::Varies,
        }
    }
}

/// What the paths of an input shape did at each instruction: what a specialiser may rely on
/// for packets of that shape (`super::rewrite`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Coverage {
    /// Some path reached the instruction.
    pub visited: Vec<bool>,
    /// Conditional jumps: some path jumped.
    pub taken: Vec<bool>,
    /// Conditional jumps: some path fell through.
    pub fell: Vec<bool>,
    /// Conditional jumps comparing a packet pointer with `data_end`.
    pub bounds_check: Vec<bool>,
    /// The scalar each ALU operation or load leaves in its destination.
    pub konst: Vec<Konst>,
    /// Packet bytes (offsets from `data` at entry) some load read at a fixed offset: the only
    /// bytes whose facts can have decided anything above. Meaningless if `moves_packet`.
    pub read: std::collections::BTreeSet<u16>,
    /// Some path called a helper that moves or resizes the packet (offsets after it no longer
    /// name entry bytes).
    pub moves_packet: bool,
    /// `map_lookup_elem` calls: the map and the key's stack offset (from its frame's r10), or
    /// `None` where paths disagree (`super::mapconst` inlines the first kind).
    pub lookups: BTreeMap<usize, Option<(u32, i64)>>,
    /// Maps some path writes: through an update or delete helper, or by a store (or helper
    /// output) into one of its values.
    pub written_maps: std::collections::BTreeSet<u32>,
    /// Loads and stores: what their pointer points into on every path (for
    /// [`super::copies`], which must know two accesses cannot overlap).
    pub bases: Vec<Base>,
}

/// What a load's or store's pointer points into, joined over the paths reaching it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    Unseen,
    /// The packet; the pointer's offset from `data` at entry where every path agrees on it.
    Packet(Option<i64>),
    /// Call frame `frame`'s stack.
    Stack(u8),
    /// A value of map `map`.
    MapValue(u32),
    /// Anything else, or different regions on different paths.
    Other,
}

impl Base {
    fn of(reg: &Reg) -> Base {
        match reg {
            Reg::Ptr(p) => match p.kind {
                PtrKind::Packet => Base::Packet(p.fixed()),
                PtrKind::Stack { frame } => Base::Stack(frame),
                // Dereferenced, so not null (the verifier saw to that).
                PtrKind::MapValue { map } | PtrKind::MapValueOrNull { map } => Base::MapValue(map),
                _ => Base::Other,
            },
            _ => Base::Other,
        }
    }

    fn join(self, o: Base) -> Base {
        match (self, o) {
            (Base::Unseen, x) | (x, Base::Unseen) => x,
            (Base::Packet(a), Base::Packet(b)) => Base::Packet(a.filter(|a| Some(*a) == b)),
            (a, b) if a == b => a,
            _ => Base::Other,
        }
    }
}

impl Coverage {
    pub(super) fn new(len: usize) -> Self {
        Self {
            visited: vec![false; len],
            taken: vec![false; len],
            fell: vec![false; len],
            bounds_check: vec![false; len],
            konst: vec![Konst::Unseen; len],
            read: Default::default(),
            moves_packet: false,
            lookups: BTreeMap::new(),
            written_maps: Default::default(),
            bases: vec![Base::Unseen; len],
        }
    }

    fn note_lookup(&mut self, pc: usize, site: Option<(u32, i64)>) {
        let merged = match self.lookups.get(&pc) {
            Some(old) if *old != site => None,
            _ => site,
        };
        self.lookups.insert(pc, merged);
    }

    fn absorb(&mut self, o: Coverage) {
        let or = |a: &mut Vec<bool>, b: Vec<bool>| a.iter_mut().zip(b).for_each(|(x, y)| *x |= y);
        or(&mut self.visited, o.visited);
        or(&mut self.taken, o.taken);
        or(&mut self.fell, o.fell);
        or(&mut self.bounds_check, o.bounds_check);
        for (k, v) in self.konst.iter_mut().zip(o.konst) {
            *k = match v {
                Konst::Unseen => *k,
                Konst::Const(c) => k.meet(Some(c)),
                Konst::Varies => Konst::Varies,
            };
        }
        self.read.extend(o.read);
        self.moves_packet |= o.moves_packet;
        for (pc, site) in o.lookups {
            self.note_lookup(pc, site);
        }
        self.written_maps.extend(o.written_maps);
        for (b, o) in self.bases.iter_mut().zip(o.bases) {
            *b = b.join(o);
        }
    }
}

impl Analysis {
    /// Nothing known about any action (the analysis gave up).
    fn top(processed: usize, outcome: Outcome) -> Self {
        let exits = ExitAction::ALL.iter().map(|a| (*a, Guarantee::top())).collect();
        Self { exits, processed, outcome, coverage: Coverage::default() }
    }

    pub fn is_complete(&self) -> bool {
        self.outcome == Outcome::Complete
    }

    /// What packets leaving with `action` satisfy (⊥ if none does).
    pub fn guarantee(&self, action: ExitAction) -> Guarantee {
        self.exits.get(&action).cloned().unwrap_or_default()
    }
}

/// The input shape most programs see: frames of 14 to [`DEFAULT_MAX_FRAME`] bytes.
pub fn default_input() -> Guarantee {
    Guarantee::of(PacketShape::with_len(MIN_FRAME, DEFAULT_MAX_FRAME))
}

/// Analyse `prog`, a program the verifier accepted as XDP, as loaded (context reads at their
/// `struct xdp_md` offsets, before the verifier's rewrite), for packets described by `input`
/// (one exploration per disjunct). On a program the verifier would refuse the result means
/// nothing, but the analysis still ends without panicking.
pub fn analyse(prog: &[Insn], input: &Guarantee, opts: &AnalysisOptions) -> Analysis {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| analyse_all(prog, input, opts)))
        .unwrap_or_else(|_| Analysis::top(0, Outcome::Internal))
}

fn analyse_all(prog: &[Insn], input: &Guarantee, opts: &AnalysisOptions) -> Analysis {
    let mut total = Analysis {
        exits: BTreeMap::new(),
        processed: 0,
        outcome: Outcome::Complete,
        coverage: Coverage::new(prog.len()),
    };
    for shape in &input.shapes {
        let mut x = Explorer::new(prog, &opts.helpers, opts.budget.saturating_sub(total.processed));
        x.map_values = &opts.map_values;
        let result = x.run(shape.clone());
        total.processed += x.processed;
        match result {
            Ok(()) => {
                for (action, g) in x.exits {
                    let entry = total.exits.entry(action).or_default();
                    *entry = entry.join(&g);
                }
                total.coverage.absorb(x.cov);
            }
            Err(Stop::OverBudget) => return Analysis::top(total.processed, Outcome::OverBudget),
            Err(Stop::Unsupported { pc, what }) => {
                return Analysis::top(total.processed, Outcome::Unsupported { pc, what })
            }
        }
    }
    total
}

enum Stop {
    OverBudget,
    Unsupported { pc: usize, what: String },
}

fn unsupported(pc: usize, what: &str) -> Stop {
    Stop::Unsupported { pc, what: what.to_string() }
}

enum Next {
    Go(usize),
    End,
}

struct Explorer<'a> {
    prog: &'a [Insn],
    helpers: &'a Helpers,
    budget: usize,
    processed: usize,
    /// Instructions where states are remembered: jump targets, fall-throughs of conditional
    /// jumps, returns from calls.
    prune: Vec<bool>,
    seen: Vec<Vec<AbsState>>,
    work: Vec<(usize, AbsState)>,
    exits: BTreeMap<ExitAction, Guarantee>,
    cov: Coverage,
    map_values: &'a BTreeMap<u32, Vec<Option<u8>>>,
}

impl<'a> Explorer<'a> {
    fn new(prog: &'a [Insn], helpers: &'a Helpers, budget: usize) -> Self {
        let mut prune = vec![false; prog.len()];
        for (pc, i) in prog.iter().enumerate() {
            if let Some(t) = jump_target(pc, *i).filter(|t| *t < prog.len()) {
                prune[t] = true;
                if i.op() != jmp::JA && pc + 1 < prog.len() {
                    prune[pc + 1] = true;
                }
            }
            if i.code == crate::insn::op::CALL && i.src == pseudo::CALL && pc + 1 < prog.len() {
                prune[pc + 1] = true;
            }
        }
        Self {
            prog,
            helpers,
            budget,
            processed: 0,
            prune,
            seen: vec![Vec::new(); prog.len()],
            work: Vec::new(),
            exits: BTreeMap::new(),
            cov: Coverage::new(prog.len()),
            map_values: &NO_MAP_VALUES,
        }
    }

    fn run(&mut self, input: PacketShape) -> Result<(), Stop> {
        let mut regs = [Value::UNINIT; 11];
        regs[1] = Value::ptr(PtrKind::Ctx, 0);
        regs[10] = Value::ptr(PtrKind::Stack { frame: 0 }, 0);
        let start = AbsState { frames: vec![Frame::new(regs, usize::MAX)], packet: input };
        self.work.push((0, start));
        while let Some((pc, st)) = self.work.pop() {
            self.run_path(pc, st)?;
        }
        Ok(())
    }

    fn run_path(&mut self, mut pc: usize, mut st: AbsState) -> Result<(), Stop> {
        loop {
            // A state carries its packet facts (cloned at every fork, compared at every prune
            // point): many facts cost like many instructions.
            self.processed += 1 + st.packet.bytes.len() / 64;
            if self.processed > self.budget {
                return Err(Stop::OverBudget);
            }
            if self.prune.get(pc).copied().unwrap_or(false) {
                let seen = &mut self.seen[pc];
                if seen.iter().any(|old| old.covers(&st)) {
                    return Ok(());
                }
                if seen.len() < MAX_STATES_PER_INSN {
                    seen.push(st.clone());
                }
            }
            let Some(&i) = self.prog.get(pc) else {
                return Err(unsupported(pc, "the path runs past the last instruction"));
            };
            self.cov.visited[pc] = true;
            match self.step(pc, i, &mut st)? {
                Next::Go(n) => pc = n,
                Next::End => return Ok(()),
            }
        }
    }

    fn step(&mut self, pc: usize, i: Insn, st: &mut AbsState) -> Result<Next, Stop> {
        match i.class() {
            class::ALU | class::ALU64 => {
                alu(i, st);
                self.note_result(pc, i.dst, st);
                Ok(Next::Go(pc + 1))
            }
            class::LD => {
                let (true, Some(hi)) = (i.is_lddw(), self.prog.get(pc + 1)) else {
                    return Err(unsupported(pc, "legacy packet loads"));
                };
                let v = match i.src {
                    pseudo::MAP_FD => Value::ptr(PtrKind::Map { map: i.imm as u32 }, 0),
                    pseudo::MAP_VALUE => {
                        Value::ptr(PtrKind::MapValue { map: i.imm as u32 }, hi.imm as i64)
                    }
                    pseudo::MAP_ENTRY => Value::ptr(PtrKind::MapValue { map: i.imm as u32 }, 0),
                    _ => Value::constant(((hi.imm as u32 as u64) << 32) | i.imm as u32 as u64),
                };
                st.set(i.dst, v);
                Ok(Next::Go(pc + 2))
            }
            class::LDX => {
                self.note_base(pc, i.src, st);
                if let Reg::Ptr(p) = st.reg(i.src).reg {
                    if let (PtrKind::Packet, Some(o)) = (p.kind, p.fixed()) {
                        let start = o.saturating_add(i.off as i64);
                        let bytes = (start..start.saturating_add(i.mem_size() as i64))
                            .filter_map(|b| u16::try_from(b).ok());
                        self.cov.read.extend(bytes);
                    }
                }
                let known = self.known_map_bytes(i, st);
                load(i, st);
                if let Some(v) = known {
                    st.set(i.dst, Value::constant(v));
                }
                self.note_result(pc, i.dst, st);
                Ok(Next::Go(pc + 1))
            }
            class::ST | class::STX if i.mem_mode() == mem::ATOMIC => {
                self.note_store(st.reg(i.dst));
                atomic_op(i, st);
                Ok(Next::Go(pc + 1))
            }
            class::ST => {
                self.note_base(pc, i.dst, st);
                self.note_store(st.reg(i.dst));
                store(i, st, Value::constant(i.imm as i64 as u64));
                Ok(Next::Go(pc + 1))
            }
            class::STX => {
                self.note_base(pc, i.dst, st);
                self.note_store(st.reg(i.dst));
                let v = st.reg(i.src);
                store(i, st, v);
                Ok(Next::Go(pc + 1))
            }
            _ => self.jump(pc, i, st),
        }
    }

    fn note_base(&mut self, pc: usize, reg: u8, st: &AbsState) {
        if let Some(b) = self.cov.bases.get_mut(pc) {
            *b = b.join(Base::of(&st.reg(reg).reg));
        }
    }

    fn jump(&mut self, pc: usize, i: Insn, st: &mut AbsState) -> Result<Next, Stop> {
        let target =
            || jump_target(pc, i).ok_or_else(|| unsupported(pc, "a jump out of the program"));
        match i.op() {
            jmp::JA => Ok(Next::Go(target()?)),
            jmp::EXIT => Ok(self.exit(st)),
            jmp::CALL => self.call(pc, i, st),
            op => {
                let t = target()?;
                let b = if i.is_src_reg() { st.reg(i.src).reg } else { Reg::Uninit };
                if let (Reg::Ptr(x), Reg::Ptr(y)) = (st.reg(i.dst).reg, b) {
                    let kinds = [x.kind, y.kind];
                    if kinds.contains(&PtrKind::Packet) && kinds.contains(&PtrKind::PacketEnd) {
                        self.cov.bounds_check[pc] = true;
                    }
                }
                let here = std::mem::replace(
                    st,
                    AbsState { frames: Vec::new(), packet: PacketShape::top() },
                );
                let (taken, fall) = branch(op, i, here);
                self.cov.taken[pc] |= taken.is_some();
                self.cov.fell[pc] |= fall.is_some();
                match (taken, fall) {
                    (Some(taken), Some(fall)) => {
                        self.work.push((t, taken));
                        *st = fall;
                        Ok(Next::Go(pc + 1))
                    }
                    (Some(taken), None) => {
                        *st = taken;
                        Ok(Next::Go(t))
                    }
                    (None, Some(fall)) => {
                        *st = fall;
                        Ok(Next::Go(pc + 1))
                    }
                    (None, None) => Ok(Next::End),
                }
            }
        }
    }

    /// What load `i` reads if it reads known map value bytes.
    fn known_map_bytes(&self, i: Insn, st: &AbsState) -> Option<u64> {
        let Reg::Ptr(p @ Ptr { kind: PtrKind::MapValue { map }, .. }) = st.reg(i.src).reg else {
            return None;
        };
        let bytes = self.map_values.get(&map)?;
        let start = usize::try_from(p.fixed()?.checked_add(i.off as i64)?).ok()?;
        let n = i.mem_size();
        let mut v = 0u64;
        for k in (0..n).rev() {
            v = (v << 8) | u64::from((*bytes.get(start + k)?)?);
        }
        if i.mem_mode() == mem::MEMSX && n < 8 {
            let shift = 64 - 8 * n as u32;
            v = (((v << shift) as i64) >> shift) as u64;
        }
        Some(v)
    }

    /// A store through `ptr`: a map value written.
    fn note_store(&mut self, ptr: Value) {
        if let Reg::Ptr(Ptr {
            kind: PtrKind::MapValue { map } | PtrKind::MapValueOrNull { map },
            ..
        }) = ptr.reg
        {
            self.cov.written_maps.insert(map);
        }
    }

    /// Record the scalar instruction `pc` left in `dst` on this path.
    fn note_result(&mut self, pc: usize, dst: u8, st: &AbsState) {
        let v = match st.reg(dst).reg {
            Reg::Scalar(s) => s.as_const(),
            _ => None,
        };
        self.cov.konst[pc] = self.cov.konst[pc].meet(v);
    }

    fn exit(&mut self, st: &mut AbsState) -> Next {
        if st.frames.len() <= 1 {
            if let Reg::Scalar(r0) = st.reg(0).reg {
                for action in ExitAction::ALL {
                    let c = action.code();
                    if (r0.umin..=r0.umax).contains(&c) && r0.t.contains(Tnum::constant(c)) {
                        self.exits.entry(action).or_default().add(st.packet.clone());
                    }
                }
            }
            return Next::End;
        }
        let depth = st.frames.len() - 1;
        let Some(callee) = st.frames.pop() else { return Next::End };
        // The callee's stack is gone: no claim about its bytes survives.
        let gone = Span::FramesFrom(depth as u8);
        st.forget_lanes(gone);
        let mut r0 = callee.regs[0];
        for lane in &mut r0.lanes {
            if lane.is_some_and(
                |l| matches!(l.loc, Loc::Stack { frame, .. } if frame as usize >= depth),
            ) {
                *lane = None;
            }
        }
        st.set(0, r0);
        for r in 1..=5 {
            st.set(r, Value::UNINIT);
        }
        Next::Go(callee.ret_pc)
    }

    fn call(&mut self, pc: usize, i: Insn, st: &mut AbsState) -> Result<Next, Stop> {
        if i.src == pseudo::CALL && !i.is_src_reg() {
            let depth = st.frames.len();
            let target = usize::try_from(pc as i64 + 1 + i.imm as i64)
                .map_err(|_| unsupported(pc, "a call out of the program"))?;
            if depth >= MAX_CALL_DEPTH {
                return Err(unsupported(pc, "calls nested too deep"));
            }
            let mut regs = [Value::UNINIT; 11];
            for (r, slot) in regs.iter_mut().enumerate().take(6).skip(1) {
                *slot = st.reg(r as u8);
            }
            regs[10] = Value::ptr(PtrKind::Stack { frame: depth as u8 }, 0);
            st.frames.push(Frame::new(regs, pc + 1));
            return Ok(Next::Go(target));
        }
        let id = if i.is_src_reg() {
            match st.reg(i.dst).reg {
                Reg::Scalar(s) => s.as_const().and_then(|c| u32::try_from(c).ok()),
                _ => None,
            }
        } else {
            Some(i.imm as u32)
        };
        let Some(h) = id.and_then(|id| self.helpers.get(id)).copied() else {
            return Err(unsupported(pc, "a call to an unknown helper"));
        };
        let map_arg = match st.reg(1).reg {
            Reg::Ptr(Ptr { kind: PtrKind::Map { map }, .. }) => Some(map),
            _ => None,
        };
        if h.id == helper::MAP_LOOKUP_ELEM {
            let key = match st.reg(2).reg {
                Reg::Ptr(p @ Ptr { kind: PtrKind::Stack { .. }, .. }) => p.fixed(),
                _ => None,
            };
            self.cov.note_lookup(pc, map_arg.zip(key));
        } else if let Some(map) = map_arg {
            self.cov.written_maps.insert(map);
        }
        // Memory a helper may write becomes unknown.
        for (k, arg) in h.args.iter().enumerate().take(4) {
            if *arg == Arg::UninitMem {
                self.note_store(st.reg(k as u8 + 1));
                let size = match st.reg(k as u8 + 2).reg {
                    Reg::Scalar(s) => s.umax.min(1 << 30) as i64,
                    _ => 0,
                };
                let ptr = st.reg(k as u8 + 1);
                clobber(st, ptr, size);
            }
        }
        let r0 = match h.ret {
            Ret::Scalar => Value::unknown(),
            Ret::MapValueOrNull => match st.reg(1).reg {
                Reg::Ptr(Ptr { kind: PtrKind::Map { map }, .. }) => {
                    Value::ptr(PtrKind::MapValueOrNull { map }, 0)
                }
                // Not a known map (the verifier rules this out): nothing may be assumed.
                _ => Value::unknown(),
            },
        };
        st.set(0, r0);
        self.cov.moves_packet |= h.changes_packet;
        match h.id {
            helper::XDP_ADJUST_HEAD | helper::XDP_ADJUST_TAIL => {
                let head = h.id == helper::XDP_ADJUST_HEAD;
                if let Some(fail) = adjust_packet(st, head) {
                    self.work.push((pc + 1, fail));
                } else {
                    // Only failure is possible: the packet stays.
                    st.set(0, Value::scalar(errno()));
                }
            }
            helper::XDP_GET_BUFF_LEN => {
                let (lo, hi) = st.packet.len;
                st.set(0, Value::scalar(Scalar::urange(lo as u64, hi as u64)));
            }
            _ if h.changes_packet => {
                st.clobber_packet(0, u32::MAX);
                st.forget_lanes(Span::AllPacket);
                st.packet.len = (MIN_FRAME, u32::MAX);
            }
            _ => {}
        }
        end_call(st, h.changes_packet);
        Ok(Next::Go(pc + 1))
    }
}

/// After a helper: argument registers are dead; packet pointers are stale if it moved the
/// packet (the verifier makes them unknown scalars too).
fn end_call(st: &mut AbsState, changes_packet: bool) {
    for r in 1..=5 {
        st.set(r, Value::UNINIT);
    }
    if changes_packet {
        st.for_each_value(|v| {
            if let Reg::Ptr(p) = v.reg {
                if matches!(p.kind, PtrKind::Packet | PtrKind::PacketEnd | PtrKind::PacketMeta) {
                    *v = Value::unknown();
                }
            }
        });
    }
}

/// What a failed `adjust_head`/`adjust_tail` returns: a negative errno.
fn errno() -> Scalar {
    let mut s = Scalar::UNKNOWN;
    s.smin = -4095;
    s.smax = -1;
    s.sync();
    s
}

/// `bpf_xdp_adjust_head(ctx, delta)` (`head`) or `bpf_xdp_adjust_tail`: `st` becomes the
/// success path (r0 = 0); the failure path (packet unchanged, r0 < 0) is returned. `None`:
/// success is impossible (the packet would be shorter than [`MIN_FRAME`]), `st` untouched.
fn adjust_packet(st: &mut AbsState, head: bool) -> Option<AbsState> {
    let delta = match st.reg(2).reg {
        Reg::Scalar(s) => s,
        _ => Scalar::UNKNOWN,
    };
    // The helpers take the low 32 bits of the delta as an i32.
    let (dmin, dmax) = match delta.as_const() {
        Some(c) => (c as i32 as i64, c as i32 as i64),
        None if delta.smin >= i32::MIN as i64 && delta.smax <= i32::MAX as i64 => {
            (delta.smin, delta.smax)
        }
        None => (i32::MIN as i64, i32::MAX as i64),
    };
    let (min, max) = (st.packet.len.0 as i64, st.packet.len.1 as i64);
    let (new_min, new_max) = if head { (min - dmax, max - dmin) } else { (min + dmin, max + dmax) };
    if new_max < MIN_FRAME as i64 {
        return None;
    }
    let mut fail = st.clone();
    fail.set(0, Value::scalar(errno()));
    end_call(&mut fail, true);
    let new_min = new_min.max(MIN_FRAME as i64);
    if head {
        if dmin == dmax {
            // The byte at `o` is now at `o - delta`.
            st.shift_packet(-dmin);
        } else {
            st.clobber_packet(0, u32::MAX);
            st.forget_lanes(Span::AllPacket);
        }
    } else {
        // Bytes past the shorter of the old and new minimum may be gone or new.
        let cut = min.min(new_min).clamp(0, u32::MAX as i64) as u32;
        st.clobber_packet(cut, u32::MAX);
    }
    let clamp = |v: i64| v.clamp(0, u32::MAX as i64) as u32;
    st.packet.len = (clamp(new_min), clamp(new_max));
    st.set(0, Value::constant(0));
    Some(fail)
}
