//! Execution: the IR compiled to closures ([`Pipeline`]), and the per-packet state they work
//! on. Every expression, statement, parser state and table apply becomes one boxed closure
//! built once per program, so a packet runs straight-line native code with no dispatch on
//! the IR. [`crate::v1model`] drives a pipeline through the v1model architecture.

pub mod bits;
mod engine;
mod entry_error;
mod expr;
mod externs;
/// Native code with Cranelift (the `native` feature, on by default).
#[cfg(feature = "native")]
pub mod jit;
/// No native code: the `native` feature is off, every program runs on closures.
#[cfg(not(feature = "native"))]
#[path = "jit_off.rs"]
pub mod jit;
pub mod profile;
mod stmt;
pub mod table;
pub mod value_set;

use std::sync::Arc;

use crate::ir::{self, CloneKind, KeyMatch, Target, Transition};
pub use entry_error::{EntryError, KeyError};
use hotplane_core::{Guard, Qsbr};
use hotplane_tables::objects::{CounterArray, CounterKind, DigestRing, MeterArray, RegisterArray};
pub use jit::NativeError;
use jit::{Jit, NativeCode};
pub use profile::{Group, Member, ProfileError, ProfileRef, ProfileRt};
pub use table::{ActionParams, Carried, P4Entry, P4Table};

pub use externs::{hash, ones_complement_sum};
pub use jit::Engine;

/// `egress_spec` value that drops the packet.
pub const DROP_PORT: u32 = 511;
/// Parser states one packet may visit before the parser gives up (`ParserTimeout`).
pub const MAX_PARSER_STATES: usize = 1024;
/// Digests a pipeline buffers for the control plane before it drops (and counts) them.
pub const DIGEST_RING: usize = 4096;

pub(crate) type ExprFn = Box<dyn Fn(&Ctx<'_>) -> u128 + Send + Sync>;
pub(crate) type StmtFn = Box<dyn Fn(&mut Ctx<'_>) -> Flow + Send + Sync>;

/// How a statement ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Next,
    Return,
    Exit,
    /// The parser rejects; [`Ctx::error`] says why.
    Reject,
    /// `break` and `continue`, caught by their loop (never seen outside one).
    Break,
    Continue,
}

/// What a packet asked the architecture to do once the current block is over.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Kind, session, and what the copy keeps ([`ir::Program::preserved`]).
    pub clone: Option<(CloneKind, u32, u16)>,
    /// What the resubmitted packet keeps ([`ir::Program::preserved`]), if resubmitted.
    pub resubmit: Option<u16>,
    /// What the recirculated packet keeps, if recirculated.
    pub recirculate: Option<u16>,
    pub truncate: Option<u32>,
    /// An `assert` failed (counted; the packet carries on, as BMv2 without `--assert`).
    pub assert_failed: bool,
    /// `hotplane_load_from_packet()`: the packet goes to the control plane.
    pub punt: bool,
}

impl Effects {
    /// Nothing asked for (the common case).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.clone.is_none()
            && self.resubmit.is_none()
            && self.recirculate.is_none()
            && self.truncate.is_none()
            && !self.assert_failed
            && !self.punt
    }

    /// Take the requests, leaving none. Cheaper than `mem::take` when there are none: the
    /// struct is only read, and written back only if it held something.
    #[inline]
    pub fn take(&mut self) -> Effects {
        if self.is_empty() {
            Effects::default()
        } else {
            std::mem::take(self)
        }
    }
}

/// What a program reaches outside itself through hotplane's externs: the code in the data
/// plane's extern slots and each flow's own function. The binary implements it per worker;
/// [`NoHost`] (STF runs, benchmarks) has nothing installed, so every call returns `None`.
pub trait Host {
    /// Run the code in the extern slot of `hotplane_ebpf` instance `instance` on `data`, which
    /// it may change in place. XDP programs return r0; other code its verdict as an XDP action.
    /// `None`: the slot is empty.
    fn call_slot(
        &mut self,
        instance: u32,
        data: &mut [u8],
        guard: &Guard<'_>,
        now_ns: u64,
    ) -> Option<u64>;
    /// Run the flow function of the packet `frame` (which arrived on `in_port`) on it; its
    /// verdict as an XDP action. `None`: the flow has no function.
    fn call_flow(
        &mut self,
        frame: &mut [u8],
        in_port: u32,
        guard: &Guard<'_>,
        now_ns: u64,
    ) -> Option<u64>;
}

/// A host with no extern slots and no flow functions.
pub struct NoHost;

impl Host for NoHost {
    fn call_slot(&mut self, _: u32, _: &mut [u8], _: &Guard<'_>, _: u64) -> Option<u64> {
        None
    }
    fn call_flow(&mut self, _: &mut [u8], _: u32, _: &Guard<'_>, _: u64) -> Option<u64> {
        None
    }
}

/// One packet's storage: scalar slots, headers in wire format, validity, deparser output.
/// Kept per worker and reused from packet to packet.
#[derive(Clone)]
pub struct PacketState {
    pub slots: Vec<u128>,
    pub hdr: Vec<u8>,
    pub valid: Vec<bool>,
    /// What the deparser emitted.
    pub out: Vec<u8>,
    pub(crate) scratch: Vec<u8>,
    pub fx: Effects,
    rng: u64,
    /// `hotplane trace`: while `Some`, every table apply of the packet is recorded here.
    pub trace: Option<Vec<TableEvent>>,
}

/// One table apply of a traced packet: the table, whether the key hit, and the table action
/// its entry (or the default) names.
#[derive(Clone)]
pub struct TableEvent {
    pub table: Arc<P4Table>,
    pub hit: bool,
    pub action: u16,
}

impl TableEvent {
    /// `MyIngress.ipv4_lpm: hit -> MyIngress.ipv4_forward`.
    pub fn describe(&self) -> String {
        let action = self.table.action_names.get(usize::from(self.action));
        format!(
            "table {}: {} -> {}",
            self.table.name,
            if self.hit { "hit" } else { "miss (default action)" },
            action.map_or("?", String::as_str)
        )
    }
}

impl PacketState {
    /// xorshift64*: `random()` and the `random` hash need speed, not cryptographic quality.
    #[inline]
    pub(crate) fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The closures' view of one packet in one block.
pub struct Ctx<'a> {
    pub st: &'a mut PacketState,
    /// The packet as it arrived (the parser's input; the payload follows the parsed headers).
    pub pkt: &'a [u8],
    /// Bytes the parser has consumed.
    pub cursor: usize,
    /// Where the payload starts (the parser's final position).
    pub payload: usize,
    pub guard: &'a Guard<'a>,
    pub now_ns: u64,
    /// The parser error code (0, `NoError`, unless the parser rejected).
    pub error: u128,
    pub host: &'a mut dyn Host,
}

impl Ctx<'_> {
    #[inline]
    pub(crate) fn reject(&mut self, code: u128) -> Flow {
        self.error = code;
        Flow::Reject
    }
}

/// Slots of the standard metadata fields the architecture reads and writes.
#[derive(Clone, Copy, Debug)]
pub struct StdSlots {
    pub ingress_port: usize,
    pub egress_spec: usize,
    pub egress_port: usize,
    pub instance_type: usize,
    pub packet_length: usize,
    pub enq_timestamp: usize,
    pub enq_qdepth: usize,
    pub deq_timedelta: usize,
    pub deq_qdepth: usize,
    pub ingress_global_timestamp: usize,
    pub egress_global_timestamp: usize,
    pub mcast_grp: usize,
    pub egress_rid: usize,
    pub checksum_error: usize,
    pub parser_error: usize,
}

impl StdSlots {
    fn new(p: &ir::Program) -> Result<Self, PipelineError> {
        let f = |name: &'static str| {
            p.std_meta
                .slot(name)
                .map(|s| s as usize)
                .ok_or(PipelineError::NoStandardField { field: name })
        };
        Ok(StdSlots {
            ingress_port: f("ingress_port")?,
            egress_spec: f("egress_spec")?,
            egress_port: f("egress_port")?,
            instance_type: f("instance_type")?,
            packet_length: f("packet_length")?,
            enq_timestamp: f("enq_timestamp")?,
            enq_qdepth: f("enq_qdepth")?,
            deq_timedelta: f("deq_timedelta")?,
            deq_qdepth: f("deq_qdepth")?,
            ingress_global_timestamp: f("ingress_global_timestamp")?,
            egress_global_timestamp: f("egress_global_timestamp")?,
            mcast_grp: f("mcast_grp")?,
            egress_rid: f("egress_rid")?,
            checksum_error: f("checksum_error")?,
            parser_error: f("parser_error")?,
        })
    }
}

/// A stateful extern instance at run time.
#[derive(Clone)]
pub enum InstanceRt {
    Register(Arc<RegisterArray>),
    Counter(Arc<CounterArray>),
    Meter {
        meter: Arc<MeterArray>,
        bytes: bool,
    },
    /// Direct counters and meters live in their table's entries; extern slots in the host.
    Direct,
    ValueSet(Arc<value_set::ValueSetRt>),
    Profile(Arc<profile::ProfileRt>),
}

/// Why a program could not be made into a [`Pipeline`] (its state or its code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error("standard_metadata_t has no field `{field}` (use hotplane's v1model.p4)")]
    NoStandardField { field: &'static str },
    #[error("register {name}: {width}-bit cells are not supported (at most 64)")]
    WideRegister { name: String, width: u32 },
    #[error(transparent)]
    Table(#[from] EntryError),
    #[error(transparent)]
    Native(#[from] NativeError),
    #[error(transparent)]
    Thread(#[from] crate::CompileThreadError),
}

/// What a replacement program took over from the one before it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CarryReport {
    /// Every table of the new program and what became of its state.
    pub tables: Vec<(String, Carried)>,
    /// Registers, counters and meters whose cells carried over.
    pub instances: Vec<String>,
}

impl CarryReport {
    /// One line for an acknowledgement: `tables: 2 shared, 1 copied (5 entries), 1 new; ...`.
    pub fn summary(&self) -> String {
        let (mut shared, mut copied, mut entries, mut fresh) = (0, 0, 0, 0);
        for (_, c) in &self.tables {
            match c {
                Carried::Shared => shared += 1,
                Carried::Copied(n) => {
                    copied += 1;
                    entries += n;
                }
                Carried::Fresh => fresh += 1,
            }
        }
        format!(
            "tables: {shared} carried, {copied} copied ({entries} entries), {fresh} new; {} extern instance(s) carried",
            self.instances.len()
        )
    }
}

/// The state a program keeps across packets: tables, registers, counters, meters, digests.
/// Kept apart from the compiled code so that a replacement program can take it over.
pub struct Objects {
    pub tables: Vec<Arc<P4Table>>,
    pub instances: Vec<InstanceRt>,
    pub digests: Arc<DigestRing>,
}

impl Objects {
    /// The very same state (every table, register, counter, meter and the digest queue), for
    /// a second compilation of the same program's tables (a chain-folded parser,
    /// `crate::chain`): what either pipeline writes, the other sees.
    pub fn share(&self) -> Objects {
        Objects {
            tables: self.tables.clone(),
            instances: self.instances.clone(),
            digests: Arc::clone(&self.digests),
        }
    }

    /// Fresh state for `prog`: empty tables (with their `const entries` and default actions),
    /// zeroed registers and counters, meters that pass everything until configured.
    pub fn new(prog: &ir::Program, qsbr: &Qsbr) -> Result<Self, PipelineError> {
        Self::carry_over(prog, None, qsbr).map(|(o, _)| o)
    }

    /// State for `prog` replacing `old`: a table with the same name, key and actions keeps its
    /// entries (see [`Carried`]); a register, counter or meter with the same name, kind and
    /// size keeps its cells; the digest queue carries over. Everything else starts fresh.
    pub fn carry_over(
        prog: &ir::Program,
        old: Option<&Pipeline>,
        qsbr: &Qsbr,
    ) -> Result<(Self, CarryReport), PipelineError> {
        let mut report = CarryReport::default();
        let profile_actions = |kind: &ir::InstanceKind| match kind {
            ir::InstanceKind::ActionProfile { tables, .. } => {
                ActionParams::of(prog, tables.first().map(|&t| &prog.tables[t as usize]))
            }
            _ => ActionParams::of(prog, None),
        };
        let old_instance = |i: &ir::Instance| {
            let o = old?;
            let at =
                o.program.instances.iter().position(|x| x.name == i.name && x.kind == i.kind)?;
            match o.objects.instances.get(at)? {
                // Profiles carry over by their own rule (`carry_profile`).
                InstanceRt::Direct | InstanceRt::Profile(_) => None,
                rt => Some(rt.clone()),
            }
        };
        // For each profile whose members carried over: the old profile they came from.
        let mut profiles_from: std::collections::HashMap<u32, Arc<profile::ProfileRt>> =
            std::collections::HashMap::new();
        let instances = prog
            .instances
            .iter()
            .enumerate()
            .map(|(index, i)| {
                if let Some(rt) = old_instance(i) {
                    report.instances.push(i.name.clone());
                    return Ok(rt);
                }
                match i.kind {
                    ir::InstanceKind::Register { size, width } => {
                        if width > 64 {
                            return Err(PipelineError::WideRegister {
                                name: i.name.clone(),
                                width,
                            });
                        }
                        Ok(InstanceRt::Register(Arc::new(RegisterArray::new(size as usize, width))))
                    }
                    ir::InstanceKind::Counter { size, packets, bytes } => {
                        let kind = match (packets, bytes) {
                            (true, true) => CounterKind::PacketsAndBytes,
                            (false, true) => CounterKind::Bytes,
                            _ => CounterKind::Packets,
                        };
                        Ok(InstanceRt::Counter(Arc::new(CounterArray::new(size as usize, kind))))
                    }
                    ir::InstanceKind::Meter { size, bytes } => Ok(InstanceRt::Meter {
                        meter: Arc::new(MeterArray::new(size as usize)),
                        bytes,
                    }),
                    ir::InstanceKind::ValueSet { size, ref fields } => Ok(InstanceRt::ValueSet(
                        Arc::new(value_set::ValueSetRt::new(qsbr, &i.name, size, fields)),
                    )),
                    ir::InstanceKind::ActionProfile { size, selector, max_group_size, .. } => {
                        let fresh = || {
                            profile::ProfileRt::new(
                                qsbr,
                                &i.name,
                                size,
                                selector,
                                max_group_size,
                                profile_actions(&i.kind),
                            )
                        };
                        let before = old.and_then(|o| o.objects.profile(&i.name).ok()).cloned();
                        let (rt, from) = profile::carry_profile(fresh, before);
                        if let Some(from) = from {
                            report.instances.push(i.name.clone());
                            profiles_from.insert(index as u32, from);
                        }
                        Ok(InstanceRt::Profile(rt))
                    }
                    ir::InstanceKind::DirectCounter { .. }
                    | ir::InstanceKind::DirectMeter { .. }
                    | ir::InstanceKind::ExternSlot { .. } => Ok(InstanceRt::Direct),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut tables = Vec::with_capacity(prog.tables.len());
        for t in &prog.tables {
            let profile = t.implementation.and_then(|i| match &instances[i as usize] {
                InstanceRt::Profile(p) => Some(Arc::clone(p)),
                _ => None,
            });
            let mut before = old.and_then(|o| o.objects.tables.iter().find(|x| x.name == t.name));
            // Entries name members: they carry over only with the members they name.
            if let Some(i) = t.implementation {
                let from = profiles_from.get(&i);
                let same = |bp: &Arc<profile::ProfileRt>| from.is_some_and(|f| Arc::ptr_eq(bp, f));
                if before.and_then(|b| b.profile.as_ref()).is_none_or(|bp| !same(bp)) {
                    before = None;
                }
            }
            let (table, carried) = P4Table::build(prog, t, qsbr, before.map(|b| &**b), profile)?;
            report.tables.push((t.name.clone(), carried));
            tables.push(Arc::new(table));
        }
        let digests = old.map_or_else(
            || Arc::new(DigestRing::new(DIGEST_RING)),
            |o| Arc::clone(&o.objects.digests),
        );
        Ok((Objects { tables, instances, digests }, report))
    }

    pub(crate) fn instance(&self, i: u32) -> InstanceRt {
        self.instances.get(i as usize).cloned().unwrap_or(InstanceRt::Direct)
    }

    /// The table called `name`: fully qualified (`MyIngress.ipv4_lpm`) or by its own name when
    /// that is unambiguous. The error lists the tables there are.
    pub fn table(&self, name: &str) -> Result<&Arc<P4Table>, EntryError> {
        if let Some(t) = self.tables.iter().find(|t| t.name == name) {
            return Ok(t);
        }
        let suffix = format!(".{name}");
        let found: Vec<_> = self.tables.iter().filter(|t| t.name.ends_with(&suffix)).collect();
        match found[..] {
            [t] => Ok(t),
            [] => Err(EntryError::NoTable {
                name: name.to_string(),
                tables: self.tables.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "),
            }),
            _ => Err(EntryError::AmbiguousTable { name: name.to_string() }),
        }
    }

    /// The action profile or selector called `name` (fully qualified or by its own name when
    /// that is unambiguous).
    pub fn profile(&self, name: &str) -> Result<&Arc<profile::ProfileRt>, EntryError> {
        let profiles: Vec<&Arc<profile::ProfileRt>> = self
            .instances
            .iter()
            .filter_map(|i| match i {
                InstanceRt::Profile(p) => Some(p),
                _ => None,
            })
            .collect();
        let suffix = format!(".{name}");
        let exact = profiles.iter().find(|p| p.name == name);
        let found: Vec<_> =
            profiles.iter().copied().filter(|p| p.name.ends_with(&suffix)).collect();
        match (exact.copied(), &found[..]) {
            (Some(p), _) | (None, &[p]) => Ok(p),
            _ => Err(EntryError::NoProfile {
                name: name.to_string(),
                profiles: if profiles.is_empty() {
                    "none".to_string()
                } else {
                    profiles.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
                },
            }),
        }
    }

    /// Remove a member or a group of `profile`, refused while a table entry names it.
    pub fn delete_from_profile(
        &self,
        profile: &Arc<profile::ProfileRt>,
        r: profile::ProfileRef,
    ) -> Result<(), EntryError> {
        // No entry can come to name it between the scan and the delete.
        let _refs = profile.references();
        profile.exists(r)?;
        for t in &self.tables {
            if !t.profile.as_ref().is_some_and(|p| Arc::ptr_eq(p, profile)) {
                continue;
            }
            let (default, args) = t.default_action();
            let names =
                |action: &str, args: &[u128]| profile::ProfileRef::of(action, args) == Some(r);
            if names(&default, &args) || t.entries().iter().any(|(e, _)| names(&e.action, &e.args))
            {
                let (what, id) = match r {
                    profile::ProfileRef::Member(id) => ("member", id),
                    profile::ProfileRef::Group(id) => ("group", id),
                };
                return Err(EntryError::Profile(ProfileError::InUse {
                    profile: profile.name.clone(),
                    what,
                    id,
                    table: t.name.clone(),
                }));
            }
        }
        match r {
            profile::ProfileRef::Member(id) => profile.delete_member(id)?,
            profile::ProfileRef::Group(id) => profile.delete_group(id)?,
        }
        Ok(())
    }

    /// Index of the extern instance called `name` (fully qualified or last component).
    pub fn instance_index(&self, prog: &ir::Program, name: &str) -> Option<usize> {
        prog.instances
            .iter()
            .position(|i| i.name == name)
            .or_else(|| prog.instances.iter().position(|i| i.name.ends_with(&format!(".{name}"))))
    }
}

/// An action compiled: where its control-plane parameters go, and its body.
pub(crate) struct ActionFn {
    /// (slot, first data word, words, writable) per directionless parameter.
    params: Vec<(usize, usize, usize, bool)>,
    writable: bool,
    body: StmtFn,
}

impl ActionFn {
    /// Bind the parameters from an entry's data words.
    #[inline]
    fn bind(&self, c: &mut Ctx<'_>, words: &[u64]) {
        for &(slot, w, n, _) in &self.params {
            c.st.slots[slot] = param_value(words, w, n);
        }
    }

    /// Bind the parameters, run the body, and store `@ref` parameters back into the words.
    #[inline]
    fn run_with(&self, c: &mut Ctx<'_>, words: &mut [u64]) -> Flow {
        self.bind(c, words);
        let flow = (self.body)(c);
        if self.writable {
            for &(slot, w, n, writable) in &self.params {
                if writable {
                    let v = c.st.slots[slot];
                    if let Some(lo) = words.get_mut(w) {
                        *lo = v as u64;
                    }
                    if n > 1 {
                        if let Some(hi) = words.get_mut(w + 1) {
                            *hi = (v >> 64) as u64;
                        }
                    }
                }
            }
        }
        flow
    }
}

#[inline]
fn param_value(words: &[u64], w: usize, n: usize) -> u128 {
    let lo = words.get(w).copied().unwrap_or(0) as u128;
    if n > 1 {
        lo | (words.get(w + 1).copied().unwrap_or(0) as u128) << 64
    } else {
        lo
    }
}

struct CompiledState {
    body: StmtFn,
    transition: CompiledTransition,
}

enum CompiledTransition {
    Accept,
    Reject,
    Goto(usize),
    Select {
        keys: Vec<ExprFn>,
        cases: Vec<(Vec<KeyMatch>, Target)>,
    },
    /// The common `select` on one value: no key array to fill.
    Select1 {
        key: ExprFn,
        cases: Vec<(KeyMatch, Target)>,
    },
    /// The keys (with their widths), concatenated, looked up in a value set.
    ValueSet {
        keys: Vec<(ExprFn, u32)>,
        set: Arc<value_set::ValueSetRt>,
        hit: Target,
        miss: Option<Target>,
    },
}

/// Builds closures for one program against its run-time objects.
pub(crate) struct Compiler<'p> {
    pub prog: &'p ir::Program,
    pub objects: &'p Objects,
    pub std: StdSlots,
    pub actions: Arc<Vec<ActionFn>>,
}

impl Compiler<'_> {
    pub(crate) fn error_code(&self, name: &str) -> u128 {
        self.prog.errors.iter().position(|e| e == name).unwrap_or(0) as u128
    }
}

/// A program compiled against its objects: ready to run packets.
pub struct Pipeline {
    pub program: Arc<ir::Program>,
    pub objects: Objects,
    pub std: StdSlots,
    code: Code,
    start: usize,
    /// Controls with no statements are not run at all (nothing they could do is observable).
    verify_checksum_empty: bool,
    egress_empty: bool,
    parser_timeout: u128,
    no_match: u128,
    native_error: Option<NativeError>,
    /// The engine asked for (a replacement asks for the same).
    requested: Engine,
    /// The machine code `code` calls into. Declared last: it is freed after every closure.
    native: Option<NativeCode>,
}

/// The compiled blocks of a program.
struct Code {
    /// Native code for the parser, checksum verification and ingress in one call.
    front: Option<StmtFn>,
    /// Native code for checksum update and the deparser in one call.
    back: Option<StmtFn>,
    /// Native code for a whole unicast packet in one call (see [`jit::Body::Whole`]): only
    /// for programs whose egress is empty and which never ask for clones, resubmission,
    /// recirculation, truncation or a punt.
    whole: Option<jit::WholeCode>,
    states: Vec<CompiledState>,
    verify_checksum: StmtFn,
    ingress: StmtFn,
    egress: StmtFn,
    compute_checksum: StmtFn,
    deparser: StmtFn,
}

impl Code {
    /// Compile every block, as native code when `jit` is given (an error is then the code
    /// generator's), else as closures.
    fn new(
        program: &ir::Program,
        objects: &Objects,
        std: StdSlots,
        mut jit: Option<&mut Jit>,
    ) -> Result<Self, NativeError> {
        let actions = {
            let c = Compiler { prog: program, objects, std, actions: Arc::new(Vec::new()) };
            let (bodies, pending) =
                blocks(&mut jit, &c, program.actions.iter().map(|a| &a.body[..]))?;
            if let Some(jit) = jit.as_mut() {
                jit.set_actions(&pending);
            }
            program
                .actions
                .iter()
                .zip(bodies)
                .map(|(a, body)| {
                    let mut params = Vec::new();
                    let mut word = 0;
                    for p in a.params.iter().filter(|p| p.directionless) {
                        let n = (p.width as usize).div_ceil(64).max(1);
                        params.push((p.slot as usize, word, n, p.writable));
                        word += n;
                    }
                    ActionFn { writable: params.iter().any(|p| p.3), params, body }
                })
                .collect::<Vec<_>>()
        };
        let c = Compiler { prog: program, objects, std, actions: Arc::new(actions) };
        let controls = [
            &program.verify_checksum,
            &program.ingress,
            &program.egress,
            &program.compute_checksum,
            &program.deparser,
        ];
        let (mut fns, _) = blocks(
            &mut jit,
            &c,
            program.states.iter().map(|s| &s.body[..]).chain(controls.map(|b| &b[..])),
        )?;
        let mut controls = fns.split_off(program.states.len()).into_iter();
        let mut next = move || controls.next().unwrap_or_else(|| Box::new(|_| Flow::Next));
        let states = program
            .states
            .iter()
            .zip(fns)
            .map(|(s, body)| CompiledState {
                body,
                transition: match &s.transition {
                    Transition::Accept => CompiledTransition::Accept,
                    Transition::Reject => CompiledTransition::Reject,
                    Transition::Goto(i) => CompiledTransition::Goto(*i as usize),
                    Transition::Select { keys, cases } if keys.len() == 1 => {
                        CompiledTransition::Select1 {
                            key: c.expr(&keys[0].value),
                            cases: cases
                                .iter()
                                .map(|(m, t)| {
                                    (
                                        m.first()
                                            .cloned()
                                            .unwrap_or(KeyMatch::Mask { value: 0, mask: 0 }),
                                        *t,
                                    )
                                })
                                .collect(),
                        }
                    }
                    Transition::Select { keys, cases } => CompiledTransition::Select {
                        keys: keys.iter().map(|k| c.expr(&k.value)).collect(),
                        cases: cases.clone(),
                    },
                    Transition::ValueSet { keys, set, hit, miss } => {
                        match c.objects.instance(*set) {
                            InstanceRt::ValueSet(set) => CompiledTransition::ValueSet {
                                keys: keys.iter().map(|k| (c.expr(&k.value), k.width)).collect(),
                                set,
                                hit: *hit,
                                miss: *miss,
                            },
                            // Objects made for another program: nothing matches.
                            _ => CompiledTransition::Reject,
                        }
                    }
                },
            })
            .collect();
        let (mut front, mut back, mut whole) = (None, None, None);
        if let Some(jit) = jit {
            let verify: &[&[ir::Stmt]] =
                if is_noop(&program.verify_checksum) { &[] } else { &[&program.verify_checksum] };
            let front_controls: Vec<&[ir::Stmt]> =
                verify.iter().copied().chain([&program.ingress[..]]).collect();
            let f = jit.compile_body(&c, jit::Body::Front(&front_controls))?;
            let back_controls = [&program.compute_checksum[..], &program.deparser[..]];
            let b = jit.compile_body(&c, jit::Body::Back(&back_controls))?;
            let w = if is_noop(&program.egress) && !program.may_request_effects() {
                let body = jit::Body::Whole {
                    front: &front_controls,
                    checksum: &program.compute_checksum,
                    deparser: &program.deparser,
                };
                jit.compile_body(&c, body)?
            } else {
                None
            };
            jit.finalize()?;
            front = f.map(|p| jit.stmt_fn(&p));
            back = b.map(|p| jit.stmt_fn(&p));
            whole = w.map(|p| jit.whole_code(&p));
        }
        Ok(Code {
            front,
            back,
            whole,
            states,
            verify_checksum: next(),
            ingress: next(),
            egress: next(),
            compute_checksum: next(),
            deparser: next(),
        })
    }
}

/// Compile blocks natively (when `jit` is given) or as closures; with the native functions.
/// Empty blocks stay closures: returning at once is cheaper than entering native code.
fn blocks<'s>(
    jit: &mut Option<&mut Jit>,
    c: &Compiler<'_>,
    blocks: impl Iterator<Item = &'s [ir::Stmt]>,
) -> Result<(Vec<StmtFn>, Vec<Option<jit::Pending>>), NativeError> {
    let Some(jit) = jit else { return Ok((blocks.map(|b| c.block(b)).collect(), Vec::new())) };
    let pending = blocks
        .map(|b| if is_noop(b) { Ok(None) } else { jit.compile(c, b).map(Some) })
        .collect::<Result<Vec<_>, _>>()?;
    jit.finalize()?;
    let fns = pending
        .iter()
        .map(|p| match p {
            Some(p) => jit.stmt_fn(p),
            None => Box::new(|_: &mut Ctx<'_>| Flow::Next) as StmtFn,
        })
        .collect();
    Ok((fns, pending))
}

impl Pipeline {
    /// Compile `program` with fresh objects.
    pub fn new(program: ir::Program, qsbr: &Qsbr) -> Result<Self, PipelineError> {
        let objects = Objects::new(&program, qsbr)?;
        Self::with_objects(program, objects)
    }

    /// Compile `program` to replace `old`, taking over the state the two have in common
    /// (see [`Objects::carry_over`]), on the engine `old` asked for. `old` keeps running
    /// meanwhile; from here on the two share that state, so what either writes, the other sees.
    pub fn replacing(
        program: ir::Program,
        old: &Pipeline,
        qsbr: &Qsbr,
    ) -> Result<(Self, CarryReport), PipelineError> {
        let (objects, report) = Objects::carry_over(&program, Some(old), qsbr)?;
        Ok((Self::with_engine(program, objects, old.requested)?, report))
    }

    /// Compile `program`, whose tables and externs are exactly `old`'s (only its parser
    /// differs: `crate::chain`), on `old`'s very objects and engine.
    pub fn sharing(program: ir::Program, old: &Pipeline) -> Result<Self, PipelineError> {
        Self::with_engine(program, old.objects.share(), old.requested)
    }

    /// Compile `program` against existing objects, natively unless the environment says
    /// otherwise (see [`Engine::from_env`]).
    pub fn with_objects(program: ir::Program, objects: Objects) -> Result<Self, PipelineError> {
        Self::with_engine(program, objects, Engine::from_env())
    }

    /// Compile `program` against existing objects with the given engine. If native code
    /// cannot be generated (an unsupported machine, or a code generator error, which
    /// [`Pipeline::native_error`] then reports), the program runs on closures.
    ///
    /// Code generation recurses on the program's nesting, so it runs on a thread of its own
    /// with a known stack ([`crate::on_compile_stack`]), whatever thread calls this.
    pub fn with_engine(
        program: ir::Program,
        objects: Objects,
        engine: Engine,
    ) -> Result<Self, PipelineError> {
        crate::on_compile_stack(move || Self::with_engine_here(program, objects, engine))?
    }

    fn with_engine_here(
        program: ir::Program,
        objects: Objects,
        engine: Engine,
    ) -> Result<Self, PipelineError> {
        let std = StdSlots::new(&program)?;
        let jit = match engine {
            Engine::Native => Some(Jit::new()),
            Engine::Closures => None,
        };
        let (code, native, native_error) = match jit {
            Some(Ok(mut jit)) => match Code::new(&program, &objects, std, Some(&mut jit)) {
                Ok(code) => (code, Some(jit.into_code()), None),
                Err(e) => (Code::new(&program, &objects, std, None)?, None, Some(e)),
            },
            Some(Err(e)) => (Code::new(&program, &objects, std, None)?, None, Some(e)),
            None => (Code::new(&program, &objects, std, None)?, None, None),
        };
        let c = Compiler { prog: &program, objects: &objects, std, actions: Arc::new(Vec::new()) };
        let (parser_timeout, no_match) = (c.error_code("ParserTimeout"), c.error_code("NoMatch"));
        Ok(Pipeline {
            start: program.start_state as usize,
            verify_checksum_empty: is_noop(&program.verify_checksum),
            egress_empty: is_noop(&program.egress),
            program: Arc::new(program),
            objects,
            std,
            code,
            parser_timeout,
            no_match,
            native_error,
            requested: engine,
            native,
        })
    }

    /// Which engine runs this pipeline's blocks.
    pub fn engine(&self) -> Engine {
        if self.native.is_some() {
            Engine::Native
        } else {
            Engine::Closures
        }
    }

    /// Why native code was asked for but not generated (an unsupported machine, or a code
    /// generator error).
    pub fn native_error(&self) -> Option<&NativeError> {
        self.native_error.as_ref()
    }

    /// Storage for one packet of this program (one per worker, reused).
    pub fn new_state(&self) -> PacketState {
        let p = &self.program;
        PacketState {
            slots: vec![0; p.slots as usize],
            // 8 bytes of padding: native code reads and writes fields as 8-byte windows.
            hdr: vec![0; p.header_bytes as usize + 8],
            valid: vec![false; p.headers.len()],
            out: Vec::with_capacity(256),
            scratch: Vec::with_capacity(64),
            fx: Effects::default(),
            rng: 0x9e37_79b9_7f4a_7c15,
            trace: None,
        }
    }

    /// Forget the previous packet: metadata zero, every header invalid, no requests.
    #[inline]
    pub fn reset(&self, st: &mut PacketState) {
        st.slots[..self.program.reset_slots as usize].fill(0);
        st.valid.fill(false);
        st.out.clear();
        let _ = st.fx.take();
    }

    /// Run the parser from the start state; the error (if any) goes to `parser_error`, and
    /// the packet carries on to ingress as v1model specifies.
    pub(crate) fn parse(&self, c: &mut Ctx<'_>) {
        let mut state = self.start;
        let mut visited = 0;
        loop {
            visited += 1;
            if visited > MAX_PARSER_STATES {
                c.error = self.parser_timeout;
                break;
            }
            let Some(s) = self.code.states.get(state) else { break };
            if (s.body)(c) == Flow::Reject {
                break;
            }
            let target = match &s.transition {
                CompiledTransition::Accept => break,
                CompiledTransition::Reject => break,
                CompiledTransition::Goto(i) => Target::State(*i as u32),
                CompiledTransition::ValueSet { keys, set, hit, miss } => {
                    let mut v = 0u128;
                    for (k, width) in keys {
                        v = v.checked_shl(*width).unwrap_or(0)
                            | (k(c) & crate::types::mask(*width));
                    }
                    match (set.contains(v, c.guard), miss) {
                        (true, _) => *hit,
                        (false, Some(t)) => *t,
                        (false, None) => {
                            c.error = self.no_match;
                            break;
                        }
                    }
                }
                CompiledTransition::Select1 { key, cases } => {
                    let v = key(c);
                    match cases.iter().find(|(m, _)| key_matches(m, v)) {
                        Some((_, t)) => *t,
                        None => {
                            c.error = self.no_match;
                            break;
                        }
                    }
                }
                CompiledTransition::Select { keys, cases } => {
                    let mut values = [0u128; 16];
                    let values = if keys.len() <= values.len() {
                        for (v, k) in values.iter_mut().zip(keys) {
                            *v = k(c);
                        }
                        &values[..keys.len()]
                    } else {
                        &keys.iter().map(|k| k(c)).collect::<Vec<_>>()[..]
                    };
                    match cases
                        .iter()
                        .find(|(m, _)| m.iter().zip(values).all(|(m, &v)| key_matches(m, v)))
                    {
                        Some((_, t)) => *t,
                        None => {
                            c.error = self.no_match;
                            break;
                        }
                    }
                }
            };
            match target {
                Target::Accept | Target::Reject => break,
                Target::State(i) => state = i as usize,
            }
        }
        c.payload = c.cursor;
        c.st.slots[self.std.parser_error] = c.error;
    }

    /// Whether whole packets run in one native call each (an empty egress, no effects that
    /// need copies, and native code): then [`crate::v1model::V1Switch::process_batch`] runs
    /// a batch's packets one after another in one frame.
    pub fn runs_whole_packets(&self) -> bool {
        self.code.whole.is_some()
    }

    /// The native code for a whole packet, through to the deparser in one call, if the program
    /// has it (see [`jit::WholeCode`], and [`jit::Whole`] for how it ends); else run
    /// [`Pipeline::front`].
    #[inline]
    pub(crate) fn whole_code(&self) -> Option<&jit::WholeCode> {
        self.code.whole.as_ref()
    }

    /// Parser, checksum verification and ingress: one native call where there is code for it.
    pub(crate) fn front(&self, c: &mut Ctx<'_>) {
        match &self.code.front {
            Some(f) => {
                let _ = f(c);
            }
            None => {
                self.parse(c);
                self.verify_checksum(c);
                self.ingress(c);
            }
        }
    }

    pub(crate) fn verify_checksum(&self, c: &mut Ctx<'_>) {
        if !self.verify_checksum_empty {
            stmt::run_control(&self.code.verify_checksum, c);
        }
    }

    /// The egress control has no statements: for a unicast packet, egress changes nothing.
    pub(crate) fn egress_is_empty(&self) -> bool {
        self.egress_empty
    }

    pub(crate) fn ingress(&self, c: &mut Ctx<'_>) {
        stmt::run_control(&self.code.ingress, c);
    }

    pub(crate) fn egress(&self, c: &mut Ctx<'_>) {
        stmt::run_control(&self.code.egress, c);
    }

    /// `compute_checksum` then the deparser: the emitted headers end up in `st.out`.
    pub(crate) fn deparse(&self, c: &mut Ctx<'_>) {
        if let Some(back) = &self.code.back {
            let _ = back(c);
            return;
        }
        stmt::run_control(&self.code.compute_checksum, c);
        c.st.out.clear();
        stmt::run_control(&self.code.deparser, c);
    }
}

/// Statements that do nothing: empty blocks and scopes (an empty control lowers to these).
fn is_noop(stmts: &[ir::Stmt]) -> bool {
    stmts.iter().all(|s| match s {
        ir::Stmt::Block(b) | ir::Stmt::Scope(b) => is_noop(b),
        ir::Stmt::Call { body, copy_out } => is_noop(body) && is_noop(copy_out),
        ir::Stmt::Iteration(b) => is_noop(b),
        _ => false,
    })
}

#[inline]
pub(crate) fn key_matches(m: &KeyMatch, v: u128) -> bool {
    match *m {
        KeyMatch::Mask { value, mask } => v & mask == value & mask,
        // Select cases are values, masks and ranges; prefixes only appear in tables.
        KeyMatch::Prefix { value, .. } => v == value,
        KeyMatch::Range { lo, hi } => lo <= v && v <= hi,
    }
}
