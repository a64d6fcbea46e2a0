//! Chain specialisation of a P4 parser: what the program before the pipeline guarantees about
//! the packets it passes (a [`PacketShape`], computed by the eBPF side or exported by another
//! node) decides `select`s whose keys are header fields at known packet offsets. Such a
//! `select` becomes a plain transition, in the IR, before code generation.
//!
//! The pass follows the parser's extract cursor through its states (an offset known on every
//! path into a state, or not at all), remembers where each fixed-size header was extracted,
//! and folds a `select` only when every key is made of known packet bits and a case matches
//! (a key that matches no case raises `NoMatch`, which a plain transition cannot; such selects
//! stay). Headers a parser state writes are forgotten, and a statement it does not model (an
//! extract inside an `if`, say) forgets everything. The packet bytes the decisions read are
//! returned for the guard: a packet that does not have them runs the original pipeline.

use crate::exec::key_matches;
use crate::ir::{Expr, Extern, HdrRef, Place, Program, Stmt, Target, Transition};
use hotplane_core::shape::{PacketGuard, PacketShape};
use std::collections::{BTreeMap, BTreeSet};

/// What [`fold_parser`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParserFold {
    /// States whose `select` became a plain transition: (state, where it now goes).
    pub decided: Vec<(String, String)>,
    /// States no path from the start reaches any more.
    pub unreachable: Vec<String>,
    /// Packet bytes (offsets from the frame's start) the decisions read.
    pub bytes: BTreeSet<u16>,
}

impl ParserFold {
    /// The guard a folded pipeline needs: the shape's length and the facts it relied on.
    pub fn guard(&self, shape: &PacketShape) -> PacketGuard {
        PacketGuard::from_shape(shape, Some(&self.bytes))
    }
}

/// Where the parser stands entering or leaving a state.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cursor {
    /// Bytes extracted so far, if the same on every path.
    at: Option<u32>,
    /// Where each header (by instance) starts, if extracted there on every path and unwritten.
    headers: BTreeMap<u32, u32>,
}

impl Cursor {
    fn join(&self, o: &Cursor) -> Cursor {
        Cursor {
            at: self.at.filter(|a| o.at == Some(*a)),
            headers: self
                .headers
                .iter()
                .filter(|(h, at)| o.headers.get(h) == Some(at))
                .map(|(h, at)| (*h, *at))
                .collect(),
        }
    }

    fn unknown() -> Cursor {
        Cursor { at: None, headers: BTreeMap::new() }
    }
}

/// Fold the `select`s of `prog`'s parser that `shape` decides.
pub fn fold_parser(prog: &mut Program, shape: &PacketShape) -> ParserFold {
    let Some(exits) = state_exits(prog) else { return ParserFold::default() };
    let mut fold = ParserFold::default();
    for (i, exit) in exits.iter().enumerate() {
        let Some(exit) = exit else { continue };
        let Transition::Select { keys, cases } = &prog.states[i].transition else { continue };
        let mut read = BTreeSet::new();
        let values: Option<Vec<u128>> =
            keys.iter().map(|k| value(&k.value, exit, shape, &mut read)).collect();
        let Some(values) = values else { continue };
        let hit =
            cases.iter().find(|(ms, _)| ms.iter().zip(&values).all(|(m, v)| key_matches(m, *v)));
        let Some((_, target)) = hit else { continue };
        let (transition, name) = match *target {
            Target::Accept => (Transition::Accept, "accept".to_string()),
            Target::Reject => (Transition::Reject, "reject".to_string()),
            Target::State(s) => {
                let name = prog.states.get(s as usize).map_or_else(String::new, |s| s.name.clone());
                (Transition::Goto(s), name)
            }
        };
        fold.decided.push((prog.states[i].name.clone(), name));
        fold.bytes.extend(read);
        prog.states[i].transition = transition;
    }
    let reached = reachable(prog);
    fold.unreachable = prog
        .states
        .iter()
        .zip(&reached)
        .filter(|(_, r)| !**r)
        .map(|(s, _)| s.name.clone())
        .collect();
    fold
}

/// The cursor leaving each state (after its body, before its transition), joined over every
/// path from the start; `None` for states no path reaches, and `None` overall when the
/// iteration does not settle within its bound.
fn state_exits(prog: &Program) -> Option<Vec<Option<Cursor>>> {
    let n = prog.states.len();
    let mut entry: Vec<Option<Cursor>> = vec![None; n];
    let start = prog.start_state as usize;
    *entry.get_mut(start)? = Some(Cursor { at: Some(0), headers: BTreeMap::new() });
    let mut work = vec![start];
    // Every join either changes nothing or loses information, which can happen only so often.
    let mut budget = 64 * n + 64;
    while let Some(s) = work.pop() {
        budget = budget.checked_sub(1)?;
        let Some(cx) = entry[s].clone() else { continue };
        let exit = body(&prog.states[s].body, cx, prog);
        for t in successors(&prog.states[s].transition) {
            let t = t as usize;
            let Some(slot) = entry.get_mut(t) else { continue };
            let joined = match slot {
                Some(old) => old.join(&exit),
                None => exit.clone(),
            };
            if slot.as_ref() != Some(&joined) {
                *slot = Some(joined);
                work.push(t);
            }
        }
    }
    Some(
        entry
            .into_iter()
            .enumerate()
            .map(|(s, cx)| cx.map(|cx| body(&prog.states[s].body, cx, prog)))
            .collect(),
    )
}

fn successors(t: &Transition) -> Vec<u32> {
    match t {
        Transition::Goto(s) => vec![*s],
        Transition::ValueSet { hit, miss, .. } => [Some(*hit), *miss]
            .into_iter()
            .flatten()
            .filter_map(|t| match t {
                Target::State(s) => Some(s),
                _ => None,
            })
            .collect(),
        Transition::Select { cases, .. } => cases
            .iter()
            .filter_map(|(_, t)| match t {
                Target::State(s) => Some(*s),
                _ => None,
            })
            .collect(),
        Transition::Accept | Transition::Reject => Vec::new(),
    }
}

/// States reachable from the start.
fn reachable(prog: &Program) -> Vec<bool> {
    let mut seen = vec![false; prog.states.len()];
    let mut work = vec![prog.start_state];
    while let Some(s) = work.pop() {
        match seen.get_mut(s as usize) {
            Some(r) if !*r => *r = true,
            _ => continue,
        }
        work.extend(successors(&prog.states[s as usize].transition));
    }
    seen
}

/// The cursor after a state's statements.
fn body(stmts: &[Stmt], mut cx: Cursor, prog: &Program) -> Cursor {
    for s in stmts {
        match s {
            Stmt::Extern(Extern::Extract { hdr, varbit_bits }) => {
                let fixed = |h: u32| prog.headers.get(h as usize).filter(|i| i.varbit.is_none());
                match hdr {
                    HdrRef::Static(h) if varbit_bits.is_none() && fixed(*h).is_some() => {
                        let bytes = fixed(*h).map_or(0, |i| i.bytes);
                        match cx.at {
                            Some(at) => cx.headers.insert(*h, at),
                            None => cx.headers.remove(h),
                        };
                        cx.at = cx.at.and_then(|a| a.checked_add(bytes));
                    }
                    HdrRef::Next(st) | HdrRef::Last(st) | HdrRef::Index(st, _)
                        if varbit_bits.is_none() && fixed(st.first).is_some() =>
                    {
                        // Which element is written depends on the packet: forget them all.
                        cx.headers.retain(|h, _| !(st.first..st.first + st.count).contains(h));
                        let bytes = fixed(st.first).map_or(0, |i| i.bytes);
                        cx.at = cx.at.and_then(|a| a.checked_add(bytes));
                    }
                    _ => cx = Cursor::unknown(),
                }
            }
            Stmt::Extern(Extern::Advance(Expr::Const(bits))) if bits % 8 == 0 => {
                let bytes = u32::try_from(bits / 8).ok();
                cx.at = cx.at.zip(bytes).and_then(|(a, b)| a.checked_add(b));
            }
            Stmt::Extern(Extern::Need(_) | Extern::Verify { .. }) => {}
            // Writes to a slot (metadata, locals) leave headers alone.
            Stmt::Assign(Place::Slot { .. } | Place::Discard { .. }, _) => {}
            Stmt::Assign(Place::Slice { base, .. }, _) if matches!(**base, Place::Slot { .. }) => {}
            _ if moves_or_writes(s) => cx = Cursor::unknown(),
            _ => {}
        }
    }
    cx
}

/// Whether a statement may move the cursor or write a header (anything not known harmless).
fn moves_or_writes(s: &Stmt) -> bool {
    let any = |b: &[Stmt]| b.iter().any(moves_or_writes);
    match s {
        Stmt::Assign(Place::Slot { .. } | Place::Discard { .. }, _) => false,
        Stmt::Assign(Place::Slice { base, .. }, _) => !matches!(**base, Place::Slot { .. }),
        Stmt::Assign(..) | Stmt::SetValid(..) | Stmt::CopyHeader { .. } => true,
        Stmt::StackPush { .. } | Stmt::StackPop { .. } | Stmt::Apply { .. } => true,
        Stmt::If(_, a, b) => any(a) || any(b),
        Stmt::Block(b) | Stmt::Scope(b) | Stmt::Iteration(b) => any(b),
        Stmt::Loop { body, .. } => any(body),
        Stmt::Call { body, copy_out } => any(body) || any(copy_out),
        Stmt::Switch { cases, default, .. } => cases.iter().any(|(_, b)| any(b)) || any(default),
        Stmt::Break | Stmt::Continue | Stmt::Exit | Stmt::Return => false,
        Stmt::Extern(Extern::Need(_) | Extern::Verify { .. }) => false,
        Stmt::Extern(_) => true,
    }
}

/// An expression's value if it is made of constants and known packet bits; the bytes read are
/// added to `read`.
fn value(e: &Expr, cx: &Cursor, shape: &PacketShape, read: &mut BTreeSet<u16>) -> Option<u128> {
    let mask = |w: u32| if w >= 128 { u128::MAX } else { (1u128 << w) - 1 };
    Some(match e {
        Expr::Const(v) => *v,
        Expr::Read(place) => place_value(place, cx, shape, read)?,
        Expr::Lookahead { width } => packet_bits(u64::from(cx.at?) * 8, *width, shape, read)?,
        Expr::Slice { e, hi, lo } => {
            (value(e, cx, shape, read)? >> lo) & mask(hi.checked_sub(*lo)? + 1)
        }
        Expr::Cast { e, from, signed, to } => {
            let v = value(e, cx, shape, read)? & mask(*from);
            let negative = *signed && *from > 0 && *from < 128 && (v >> (from - 1)) & 1 == 1;
            let v = if negative { v | !mask(*from) } else { v };
            v & mask(*to)
        }
        Expr::Concat { a, b, b_width } => {
            let (a, b) = (value(a, cx, shape, read)?, value(b, cx, shape, read)?);
            if *b_width >= 128 {
                return None;
            }
            (a << b_width) | (b & mask(*b_width))
        }
        _ => return None,
    })
}

fn place_value(
    place: &Place,
    cx: &Cursor,
    shape: &PacketShape,
    read: &mut BTreeSet<u16>,
) -> Option<u128> {
    match place {
        Place::Field { hdr: HdrRef::Static(h), bit_off, width } => {
            let start = u64::from(*cx.headers.get(h)?) * 8 + u64::from(*bit_off);
            packet_bits(start, *width, shape, read)
        }
        Place::Slice { base, hi, lo } => {
            let v = place_value(base, cx, shape, read)?;
            let w = hi.checked_sub(*lo)? + 1;
            Some((v >> lo) & if w >= 128 { u128::MAX } else { (1u128 << w) - 1 })
        }
        _ => None,
    }
}

/// `width` bits of the packet from bit `start` (network order, most significant first), if
/// the shape knows every one of them.
fn packet_bits(
    start: u64,
    width: u32,
    shape: &PacketShape,
    read: &mut BTreeSet<u16>,
) -> Option<u128> {
    if width == 0 || width > 128 {
        return None;
    }
    let mut v = 0u128;
    let mut bytes = BTreeSet::new();
    for bit in start..start + u64::from(width) {
        let byte = u16::try_from(bit / 8).ok()?;
        let fact = shape.byte(byte);
        let pos = 7 - (bit % 8) as u32;
        if (fact.mask >> pos) & 1 == 1 {
            return None;
        }
        v = (v << 1) | u128::from((fact.value >> pos) & 1);
        bytes.insert(byte);
    }
    read.extend(bytes);
    Some(v)
}
