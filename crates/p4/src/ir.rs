//! The checked, resolved program: every name is a storage location, every expression has a
//! width, every extern call is one of a known set. [`crate::exec`] compiles this to closures.
//!
//! Storage: scalars live in `u128` slots, headers in wire format in one byte area (so that
//! `extract` and `emit` are copies), validity in one flag per header instance.

use crate::types::Ty;

pub type SlotId = u32;
pub type HdrId = u32;

/// A header instance's place in the header byte area.
#[derive(Clone, Debug)]
pub struct HeaderInst {
    /// Where it was declared, for listings: `hdr.ipv4`, `hdr.routes[3]`.
    pub name: String,
    /// The composite index of its header type.
    pub ty: usize,
    pub byte_off: u32,
    pub bytes: u32,
    /// (bit offset from the header start, width) per field.
    pub fields: Vec<(u32, u32)>,
    /// Its `varbit` field, if it has one (always the last, so `bytes` is the longest).
    pub varbit: Option<Varbit>,
}

/// A header's variable-length field: where it starts, how long it may be, and the slot
/// holding the length it was extracted with (in bits). Only the bytes up to that length are
/// emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Varbit {
    /// Bytes from the header's start to the field.
    pub byte_off: u32,
    pub max_bits: u32,
    pub len_slot: SlotId,
}

impl HeaderInst {
    /// Bytes on the wire for a varbit field of `len_bits` (the whole header if it has none).
    pub fn wire_bytes(&self, len_bits: u128) -> usize {
        match self.varbit {
            Some(v) => v.byte_off as usize + (len_bits as usize).min(v.max_bits as usize) / 8,
            None => self.bytes as usize,
        }
    }
}

/// A header stack: consecutive instances and the slot holding `nextIndex`.
#[derive(Clone, Debug, PartialEq)]
pub struct StackRef {
    pub first: HdrId,
    pub count: u32,
    pub next_slot: SlotId,
}

#[derive(Clone, Debug, PartialEq)]
pub enum HdrRef {
    Static(HdrId),
    /// `stack[index]` with a run-time index.
    Index(StackRef, Box<Expr>),
    /// `stack.next` (the element at nextIndex; extract advances it).
    Next(StackRef),
    /// `stack.last` (nextIndex - 1).
    Last(StackRef),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Place {
    Slot {
        slot: SlotId,
        width: u32,
    },
    Field {
        hdr: HdrRef,
        bit_off: u32,
        width: u32,
    },
    /// Bits `hi..=lo` of another place.
    Slice {
        base: Box<Place>,
        hi: u32,
        lo: u32,
    },
    /// A write that goes nowhere (`_` as an out argument).
    Discard {
        width: u32,
    },
}

impl Place {
    pub fn width(&self) -> u32 {
        match self {
            Place::Slot { width, .. } | Place::Field { width, .. } | Place::Discard { width } => {
                *width
            }
            Place::Slice { hi, lo, .. } => hi - lo + 1,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Not,
    BitNot,
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    AddSat,
    SubSat,
    Shl,
    Shr,
    And,
    Or,
    Xor,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LogicAnd,
    LogicOr,
}

/// A value expression. Values are kept in canonical form: masked to their width, signed
/// values as two's complement in that width.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Const(u128),
    Read(Place),
    IsValid(HdrRef),
    Unary {
        op: UnOp,
        e: Box<Expr>,
        width: u32,
    },
    /// `width`: the operands' width (the result's, except for comparisons which give 0/1).
    Binary {
        op: BinOp,
        a: Box<Expr>,
        b: Box<Expr>,
        width: u32,
        signed: bool,
    },
    /// Width conversion: truncate, zero- or sign-extend.
    Cast {
        e: Box<Expr>,
        from: u32,
        signed: bool,
        to: u32,
    },
    Slice {
        e: Box<Expr>,
        hi: u32,
        lo: u32,
    },
    Concat {
        a: Box<Expr>,
        b: Box<Expr>,
        b_width: u32,
    },
    Mux {
        cond: Box<Expr>,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    /// The next `width` bits of the packet in the parser, not consumed.
    Lookahead {
        width: u32,
    },
    /// `stack.nextIndex` / `lastIndex`.
    StackIndex {
        stack: StackRef,
        last: bool,
    },
    /// The packet's length in bytes (`packet_in.length()`).
    PacketLength,
    /// 1 when the varbit fields of two headers (of the same type) have the same length and
    /// the same bits up to it (spec: varbit equality).
    VarbitEq(HdrRef, HdrRef),
    /// A header's varbit field as its bytes up to its length: only an item of a field list
    /// (hash, checksum, digest data), with width 0.
    VarbitField(HdrRef),
}

/// Bits a digest may carry (the data plane's record holds four 64-bit words).
pub const DIGEST_BITS: u32 = 256;

/// What a digest carries, as the control plane sees it (P4Info's `digests`): a struct of
/// scalars by its members, anything else (a list, nested structs, headers) as the tuple of
/// the values it flattens to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestType {
    /// The struct type's name, or `digest_N` for a list.
    pub name: String,
    /// True when `members` are a struct's fields; false for a tuple (members unnamed).
    pub is_struct: bool,
    pub members: Vec<DigestMember>,
}

/// One member of a digest's data, back to back with the others on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestMember {
    pub name: String,
    pub width: u32,
    pub is_bool: bool,
}

impl DigestType {
    pub fn bits(&self) -> u32 {
        self.members.iter().map(|m| m.width).sum()
    }
}

/// One value of a field list (hash, checksum, digest data), with its width.
#[derive(Clone, Debug, PartialEq)]
pub struct ListItem {
    pub value: Expr,
    pub width: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashAlgo {
    Crc32,
    Crc16,
    Identity,
    Csum16,
    Xor16,
    Random,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloneKind {
    I2E,
    E2E,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Extern {
    Extract {
        hdr: HdrRef,
        varbit_bits: Option<Expr>,
    },
    Advance(Expr),
    /// Reject with `PacketTooShort` unless `bits` more bits are left to parse (a lookahead
    /// past the end, as BMv2 does); nothing is consumed.
    Need(u32),
    Verify {
        cond: Expr,
        error: Expr,
    },
    Emit(HdrRef),
    MarkToDrop,
    RegisterRead {
        reg: u32,
        dst: Place,
        index: Expr,
    },
    RegisterWrite {
        reg: u32,
        index: Expr,
        value: Expr,
    },
    CounterCount {
        counter: u32,
        index: Expr,
    },
    MeterExecute {
        meter: u32,
        index: Expr,
        dst: Place,
    },
    Hash {
        dst: Place,
        algo: HashAlgo,
        base: Expr,
        data: Vec<ListItem>,
        max: Expr,
    },
    Checksum {
        verify: bool,
        cond: Expr,
        data: Vec<ListItem>,
        sum: Place,
        algo: HashAlgo,
        with_payload: bool,
    },
    Random {
        dst: Place,
        lo: Expr,
        hi: Expr,
    },
    /// `digest<T>(receiver, data)`: the receiver is evaluated and ignored, as BMv2 does; the
    /// control plane tells digests apart by their type.
    Digest {
        receiver: Expr,
        ty: DigestType,
        data: Vec<ListItem>,
    },
    /// The copy keeps the slots `preserved[keep]` of [`Program::preserved`] as they are at the
    /// end of the block (ingress for I2E, egress for E2E); its other metadata starts at zero.
    Clone {
        kind: CloneKind,
        session: Expr,
        keep: u16,
    },
    /// Resubmit, keeping `preserved[keep]` as it is at the end of ingress.
    Resubmit {
        keep: u16,
    },
    /// Recirculate, keeping `preserved[keep]` as it is at the end of egress.
    Recirculate {
        keep: u16,
    },
    Truncate(Expr),
    Assert(Expr),
    Log {
        msg: String,
        data: Vec<ListItem>,
    },
    /// A call out of the program to code the data plane holds (see `exec::Host`); its result
    /// goes to `dst`.
    HostCall {
        target: HostTarget,
        /// Fields laid out as on the wire, which the callee may change (`None`: a copy of
        /// the packet as it arrived).
        data: Option<Vec<Place>>,
        dst: Place,
    },
    /// `hotplane_load_from_packet()`: hand the packet to the control plane as an update.
    LoadFromPacket,
}

/// Whose code a [`Extern::HostCall`] runs.
#[derive(Clone, Debug, PartialEq)]
pub enum HostTarget {
    /// The extern slot of this `hotplane_ebpf` instance.
    Slot(u32),
    /// The packet's per-flow function.
    FlowFunction,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Assign(Place, Expr),
    SetValid(HdrRef, bool),
    /// Copy a header's bytes and validity.
    CopyHeader {
        dst: HdrRef,
        src: HdrRef,
    },
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    /// A nested block (an inlined call's copy-in, body and copy-out).
    Block(Vec<Stmt>),
    /// A function or action body: `return` ends it.
    Scope(Vec<Stmt>),
    /// An inlined call with `out`/`inout` parameters: `body`, then `copy_out`, which also runs
    /// when the body exits (spec 12.5: copy-out is still performed after `exit`).
    Call {
        body: Vec<Stmt>,
        copy_out: Vec<Stmt>,
    },
    /// A loop: `body` runs until it breaks, at most `max` times (a bound that keeps every
    /// packet's work finite).
    Loop {
        body: Vec<Stmt>,
        max: u32,
    },
    /// One iteration's body: `continue` ends it.
    Iteration(Vec<Stmt>),
    Break,
    Continue,
    Exit,
    Return,
    /// Apply a table; its hit flag and action index go to the slots if given.
    Apply {
        table: u32,
        hit_slot: Option<SlotId>,
        action_slot: Option<SlotId>,
    },
    Switch {
        on: Expr,
        cases: Vec<(Vec<u128>, Vec<Stmt>)>,
        default: Vec<Stmt>,
    },
    StackPush {
        stack: StackRef,
        count: u32,
    },
    StackPop {
        stack: StackRef,
        count: u32,
    },
    Extern(Extern),
}

/// An action: parameters are slots the caller fills before the body runs.
#[derive(Clone, Debug)]
pub struct Action {
    /// Fully qualified name (`MyIngress.ipv4_forward`, `NoAction`).
    pub name: String,
    pub params: Vec<ActionParam>,
    pub body: Vec<Stmt>,
    pub annotations: Vec<crate::ast::Annotation>,
    /// Declaration order in the program text (P4Info lists in this order).
    pub order: u32,
}

#[derive(Clone, Debug)]
pub struct ActionParam {
    pub name: String,
    pub width: u32,
    /// `@ref`: the data plane writes it back to the table entry.
    pub writable: bool,
    /// Bound by the control plane (directionless) or by the caller.
    pub directionless: bool,
    /// `out` or `inout`: copied back to the caller's argument.
    pub copy_out: bool,
    pub slot: SlotId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    Exact,
    Lpm,
    Ternary,
    Range,
    Optional,
}

#[derive(Clone, Debug)]
pub struct TableKey {
    /// The name P4Info uses (`hdr.ipv4.dstAddr`, or the `@name` annotation).
    pub name: String,
    pub value: Expr,
    pub width: u32,
    pub kind: MatchKind,
}

/// A constant entry of a table (`const entries`).
#[derive(Clone, Debug)]
pub struct ConstEntry {
    /// Per key: value and mask (`Exact`: full mask), or range bounds for `Range`.
    pub keys: Vec<KeyMatch>,
    /// Larger wins; every entry of a table has a distinct one, or (keys all exact or lpm,
    /// where the longest prefix wins) none.
    pub priority: Option<u32>,
    pub action: u32,
    pub args: Vec<u128>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum KeyMatch {
    /// Matches `value` under `mask` (exact: all ones; wildcard: zero).
    Mask {
        value: u128,
        mask: u128,
    },
    /// Prefix of `len` bits.
    Prefix {
        value: u128,
        len: u32,
    },
    Range {
        lo: u128,
        hi: u128,
    },
}

#[derive(Clone, Debug)]
pub struct Table {
    pub name: String,
    pub keys: Vec<TableKey>,
    /// Action indices into [`Program::actions`], in declaration order.
    pub actions: Vec<u32>,
    /// Actions annotated `@defaultonly` / `@tableonly`.
    pub default_only: Vec<bool>,
    pub table_only: Vec<bool>,
    pub default_action: u32,
    pub default_args: Vec<u128>,
    pub default_is_const: bool,
    pub const_entries: Vec<ConstEntry>,
    pub entries_are_const: bool,
    pub size: u32,
    pub direct_counter: Option<String>,
    pub direct_meter: Option<String>,
    /// Where a hit writes its direct meter's colour: the place its `read(dst)` names. As in
    /// BMv2, the write happens on every hit, before the action, whichever action runs.
    pub meter_dst: Option<Place>,
    /// The `@tableconfig(...)` text, applied to hotplane-tables' configuration.
    pub tableconfig: Option<String>,
    /// `support_timeout = true`: entries keep the time of their last hit, so that a controller
    /// can be told when one goes idle.
    pub support_timeout: bool,
    /// `implementation = ...`: the [`InstanceKind::ActionProfile`] instance whose members and
    /// groups the entries name instead of an action of their own.
    pub implementation: Option<u32>,
    /// The `selector` key fields, in key order: what an action selector hashes to choose a
    /// member of a group. They are not part of the match key.
    pub selector_keys: Vec<ListItem>,
    pub annotations: Vec<crate::ast::Annotation>,
    /// Declaration order in the program text.
    pub order: u32,
}

#[derive(Clone, Debug)]
pub struct State {
    pub name: String,
    pub body: Vec<Stmt>,
    pub transition: Transition,
}

#[derive(Clone, Debug)]
pub enum Transition {
    Accept,
    Reject,
    Goto(u32),
    Select {
        keys: Vec<ListItem>,
        cases: Vec<(Vec<KeyMatch>, Target)>,
    },
    /// A `select` case naming a value set: the keys, concatenated, against its members. A
    /// miss goes on to the cases after it (`miss`), or, with none left, is a `NoMatch` error.
    ValueSet {
        keys: Vec<ListItem>,
        set: u32,
        hit: Target,
        miss: Option<Target>,
    },
}

/// One field of a value set's type (a `bit<N>` value set has one, named "").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueSetField {
    pub name: String,
    pub width: u32,
    /// `@match(ternary)`: members give a mask; else they match exactly.
    pub ternary: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Accept,
    Reject,
    State(u32),
}

/// A stateful extern instance (register, counter, meter, direct ones).
#[derive(Clone, Debug)]
pub struct Instance {
    pub name: String,
    pub kind: InstanceKind,
    pub annotations: Vec<crate::ast::Annotation>,
    /// Declaration order in the program text.
    pub order: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InstanceKind {
    Register {
        size: u32,
        width: u32,
    },
    Counter {
        size: u32,
        packets: bool,
        bytes: bool,
    },
    Meter {
        size: u32,
        bytes: bool,
    },
    DirectCounter {
        packets: bool,
        bytes: bool,
    },
    DirectMeter {
        bytes: bool,
    },
    /// A parser's `value_set<T>(size)`: at most `size` members, each a value under a mask
    /// per member field of `T` (name, width, matched by mask rather than exactly); the
    /// control plane fills it.
    ValueSet {
        size: u32,
        fields: Vec<ValueSetField>,
    },
    /// `action_profile(size)` or `action_selector(algorithm, size, width)`: at most `size`
    /// members (an action and its arguments) that entries of the tables in `tables` name; a
    /// selector also has groups of members, one chosen per packet by the hash `selector` of
    /// the table's `selector` keys.
    ActionProfile {
        size: u32,
        selector: Option<HashAlgo>,
        /// `@max_group_size` (a selector's), else `size`.
        max_group_size: u32,
        /// The tables it implements (filled as they are lowered), whose action lists it holds.
        tables: Vec<u32>,
    },
    /// `hotplane_ebpf("slot")`: a handle on the data plane's extern slot of that name.
    ExternSlot {
        slot: String,
    },
}

/// Where the standard metadata fields live.
#[derive(Clone, Debug, Default)]
pub struct StdMeta {
    pub slots: std::collections::HashMap<String, SlotId>,
}

impl StdMeta {
    pub fn slot(&self, field: &str) -> Option<SlotId> {
        self.slots.get(field).copied()
    }
}

/// A whole v1model program, checked and resolved.
#[derive(Clone, Debug)]
pub struct Program {
    pub headers: Vec<HeaderInst>,
    pub header_bytes: u32,
    pub slots: u32,
    /// Slots `0..reset_slots` are zeroed for each packet (metadata); others are always written
    /// before they are read.
    pub reset_slots: u32,
    pub std_meta: StdMeta,
    pub states: Vec<State>,
    pub start_state: u32,
    pub verify_checksum: Vec<Stmt>,
    pub ingress: Vec<Stmt>,
    pub egress: Vec<Stmt>,
    pub compute_checksum: Vec<Stmt>,
    pub deparser: Vec<Stmt>,
    pub actions: Vec<Action>,
    pub tables: Vec<Table>,
    pub instances: Vec<Instance>,
    /// Names of errors, by code.
    pub errors: Vec<String>,
    pub types: crate::types::Types,
    /// The user metadata type, for resubmit/recirculate field lists and digests.
    pub meta_ty: Ty,
    /// Slot sets a resubmit, recirculate or clone keeps for the new pass (its field list or
    /// data), by the index those externs name. Index 0 keeps nothing.
    pub preserved: Vec<Vec<SlotId>>,
    /// The user metadata's slots, `start..end`.
    pub meta_slots: (SlotId, SlotId),
}

impl Program {
    /// Every block of statements: parser states, controls, actions.
    pub fn blocks(&self) -> impl Iterator<Item = &[Stmt]> {
        self.states
            .iter()
            .map(|s| &s.body[..])
            .chain(self.actions.iter().map(|a| &a.body[..]))
            .chain(
                [
                    &self.verify_checksum,
                    &self.ingress,
                    &self.egress,
                    &self.compute_checksum,
                    &self.deparser,
                ]
                .map(|b| &b[..]),
            )
    }

    /// The digests the program may send, each type once, in order of name (P4Info's order;
    /// their ids come from `p4info::digest_ids`).
    pub fn digests(&self) -> Vec<DigestType> {
        let mut found = std::collections::BTreeMap::new();
        for b in self.blocks() {
            any_stmt(b, &mut |s| {
                if let Stmt::Extern(Extern::Digest { ty, .. }) = s {
                    found.entry(ty.name.clone()).or_insert_with(|| ty.clone());
                }
                false
            });
        }
        found.into_values().collect()
    }

    /// Some statement may ask the architecture for more than unicast or drop: a clone,
    /// resubmit, recirculation, truncation, punt, or a counted failed assertion.
    pub fn may_request_effects(&self) -> bool {
        self.blocks()
            .any(|b| any_stmt(b, &mut |s| matches!(s, Stmt::Extern(e) if e.requests_effects())))
    }
}

impl Extern {
    /// See [`Program::may_request_effects`].
    fn requests_effects(&self) -> bool {
        matches!(
            self,
            Extern::Clone { .. }
                | Extern::Resubmit { .. }
                | Extern::Recirculate { .. }
                | Extern::Truncate(_)
                | Extern::Assert(_)
                | Extern::LoadFromPacket
        )
    }
}

/// Whether `pred` holds for some statement of `stmts`, nested ones included.
pub fn any_stmt(stmts: &[Stmt], pred: &mut impl FnMut(&Stmt) -> bool) -> bool {
    stmts.iter().any(|s| {
        pred(s)
            || match s {
                Stmt::If(_, a, b) => any_stmt(a, pred) || any_stmt(b, pred),
                Stmt::Block(b) | Stmt::Scope(b) => any_stmt(b, pred),
                Stmt::Call { body, copy_out } => any_stmt(body, pred) || any_stmt(copy_out, pred),
                Stmt::Loop { body, .. } | Stmt::Iteration(body) => any_stmt(body, pred),
                Stmt::Switch { cases, default, .. } => {
                    cases.iter().any(|(_, b)| any_stmt(b, pred)) || any_stmt(default, pred)
                }
                _ => false,
            }
    })
}

/// How deep `stmts` nest: 1 for a flat list, one more for each body inside a statement.
/// Iterative: it measures bodies not yet known to be shallow.
pub fn nesting(stmts: &[Stmt]) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&[Stmt], usize)> = vec![(stmts, 1)];
    while let Some((list, depth)) = stack.pop() {
        if !list.is_empty() {
            deepest = deepest.max(depth);
        }
        for s in list {
            match s {
                Stmt::If(_, a, b) => stack.extend([(&a[..], depth + 1), (&b[..], depth + 1)]),
                Stmt::Block(a) | Stmt::Scope(a) => stack.push((a, depth + 1)),
                Stmt::Call { body, copy_out } => {
                    stack.extend([(&body[..], depth + 1), (&copy_out[..], depth + 1)])
                }
                Stmt::Loop { body: a, .. } | Stmt::Iteration(a) => stack.push((a, depth + 1)),
                Stmt::Switch { cases, default, .. } => {
                    stack.extend(cases.iter().map(|(_, c)| (&c[..], depth + 1)));
                    stack.push((default, depth + 1));
                }
                _ => {}
            }
        }
    }
    deepest
}

/// Statements in `stmts`, nested ones included.
pub fn statements(stmts: &[Stmt]) -> usize {
    let mut n = 0;
    let mut stack: Vec<&[Stmt]> = vec![stmts];
    while let Some(list) = stack.pop() {
        n += list.len();
        for s in list {
            match s {
                Stmt::If(_, a, b) => stack.extend([&a[..], &b[..]]),
                Stmt::Block(a) | Stmt::Scope(a) => stack.push(a),
                Stmt::Call { body, copy_out } => stack.extend([&body[..], &copy_out[..]]),
                Stmt::Loop { body: a, .. } | Stmt::Iteration(a) => stack.push(a),
                Stmt::Switch { cases, default, .. } => {
                    stack.extend(cases.iter().map(|(_, c)| &c[..]));
                    stack.push(default);
                }
                _ => {}
            }
        }
    }
    n
}
