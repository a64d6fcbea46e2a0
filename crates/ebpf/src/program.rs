//! A loaded program: verified, its maps created (or taken over from the previous version), map
//! references linked to addresses, and compiled by the chosen engine.

use crate::ctx::XdpCtx;
use crate::helpers::Helpers;
use crate::insn::{pseudo, Insn};
use crate::interp::{interpret_on, Region, RunError, STACK_BYTES};
use crate::jit::{self, JitCode};
use crate::maps::layout::MapLayout;
use crate::maps::{Map, MapDef, MapError, MapKind, MapPin};
use crate::oracle::{run_checked, CheckedContext, CheckedMap};
use crate::verifier::{self, Context, Env, MapInfo, Verified, VerifyError};
use hotplane_core::Packet;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Instructions a checked run may execute (verified programs end long before).
const CHECKED_BUDGET: u64 = 1 << 26;

/// Largest number of maps one program may use.
pub const MAX_MAPS: usize = 64;

/// A map a program declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapSpec {
    pub name: String,
    pub def: MapDef,
    /// Initial value of entry 0 (global data sections: `.data`, `.rodata`, `.bss`), written
    /// when the map is created.
    pub init: Option<Vec<u8>>,
    /// Write `init` even into a map taken over from the previous version (read-only data:
    /// the new version's constants replace the old ones; `.data` and `.bss` keep their state).
    pub reinit: bool,
    /// How its keys and values look, from the object's BTF (for showing entries).
    pub layout: Option<Arc<MapLayout>>,
}

impl MapSpec {
    /// A map without initial contents.
    pub fn new(
        name: &str,
        kind: MapKind,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    ) -> Self {
        Self {
            name: name.into(),
            def: MapDef { kind, key_size, value_size, max_entries },
            init: None,
            reinit: false,
            layout: None,
        }
    }
}

/// A program as a loader produced it: instructions whose `lddw` map references name entries
/// of `maps` by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramSpec {
    pub name: String,
    pub insns: Vec<Insn>,
    pub maps: Vec<MapSpec>,
}

impl ProgramSpec {
    /// A program without maps (raw bytecode).
    pub fn bytecode(name: &str, insns: Vec<Insn>) -> Self {
        Self { name: name.into(), insns, maps: Vec::new() }
    }
}

/// Which engine runs a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Engine {
    Interp,
    #[default]
    Jit,
}

/// A name that is not an [`Engine`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an engine (interp, jit)")]
pub struct UnknownEngine(pub String);

impl std::str::FromStr for Engine {
    type Err = UnknownEngine;
    fn from_str(s: &str) -> Result<Self, UnknownEngine> {
        match s {
            "interp" => Ok(Engine::Interp),
            "jit" => Ok(Engine::Jit),
            o => Err(UnknownEngine(o.to_string())),
        }
    }
}

impl Engine {
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Interp => "interp",
            Engine::Jit => "jit",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Verify(#[from] VerifyError),
    #[error("map `{name}`: {source}")]
    Map { name: String, source: MapError },
    #[error("{0}")]
    Jit(#[from] jit::JitError),
    #[error("{0}")]
    Invalid(String),
}

/// How to load.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    pub engine: Engine,
    /// Copies of per-CPU map values (the number of workers).
    pub cpus: usize,
    pub complexity: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self { engine: Engine::Jit, cpus: 1, complexity: verifier::DEFAULT_COMPLEXITY }
    }
}

/// Maps by name, so that a new version of a program keeps the state of the old one (its
/// counters, its flow table) when it declares a map of the same name and shape.
#[derive(Default)]
pub struct MapRegistry {
    maps: Mutex<BTreeMap<String, Arc<Map>>>,
}

impl MapRegistry {
    pub fn get(&self, name: &str) -> Option<Arc<Map>> {
        self.lock().get(name).cloned()
    }

    pub fn all(&self) -> Vec<Arc<Map>> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Map>>> {
        // A panic while holding this lock cannot leave the map half-updated (inserts are
        // single operations), so a poisoned lock is still usable.
        self.maps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The map for `spec`: the registered one if compatible, else a new one (registered);
    /// and whether it is new.
    fn obtain(&self, spec: &MapSpec, cpus: usize) -> Result<(Arc<Map>, bool), MapError> {
        let mut maps = self.lock();
        if let Some(m) = maps.get(&spec.name) {
            if m.compatible(&spec.def) && m.cpus == cpus.max(1) {
                // The newest program's names for the fields, if it has them.
                if spec.layout.is_some() {
                    m.set_layout(spec.layout.clone());
                }
                return Ok((m.clone(), false));
            }
        }
        let m = Arc::new(Map::new(&spec.name, spec.def, cpus)?);
        m.set_layout(spec.layout.clone());
        maps.insert(spec.name.clone(), m.clone());
        Ok((m, true))
    }
}

/// Time spent in each load step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadStats {
    pub verify_ns: u64,
    pub compile_ns: u64,
    pub processed: usize,
}

/// Where a program's maps come from.
#[derive(Clone, Copy)]
enum MapSource<'a> {
    /// Created, or taken from the registry by name and shape.
    Registry(Option<&'a MapRegistry>),
    /// These very maps.
    Given(&'a [Arc<Map>]),
}

/// A program ready to run.
pub struct Program {
    pub name: String,
    pub context: Context,
    pub engine: Engine,
    /// Workers that may run the program (per-CPU map copies, per-worker counters).
    pub cpus: usize,
    pub maps: Vec<Arc<Map>>,
    pub verified: Verified,
    pub stats: LoadStats,
    /// The instructions with map references replaced by addresses.
    linked: Vec<Insn>,
    helpers: Helpers,
    /// Memory the interpreter may touch besides packet, context and stack: map storage.
    map_regions: Vec<Region>,
    jit: Option<JitCode>,
    /// The JIT code's entry, looked up once.
    entry: Option<jit::Entry>,
    /// A guard compiled in front of the JIT code ([`Program::load_guarded`]).
    compiled_guard: Option<CompiledGuard>,
}

/// What a specialised program's compiled guard checks besides the packet's length: the
/// masked compares of its bytes and the map pins ([`jit::guard`]).
#[derive(Debug, Clone)]
pub struct GuardPlan {
    pub min_len: u32,
    pub max_len: u32,
    /// Each inside `min_len`.
    pub checks: Vec<jit::guard::ByteCheck>,
    pub pins: Vec<MapPin>,
}

/// The state a compiled guard's code refers to by address, owned by its program.
struct CompiledGuard {
    /// Where refused packets go: its code must live as long as this code may jump into it.
    _original: Arc<Program>,
    /// The pins' maps (their write counters are read by address).
    _pins: Vec<MapPin>,
    /// Per-CPU packets sent to the original, written by the guard's code.
    misses: Box<[MissCounter]>,
}

#[repr(align(64))]
#[derive(Default)]
struct MissCounter(AtomicU64);

const _: () = assert!(std::mem::size_of::<MissCounter>() == jit::guard::MISS_STRIDE);

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "program `{}` ({} insns, {}, {} maps)",
            self.name,
            self.linked.len(),
            self.engine.as_str(),
            self.maps.len()
        )
    }
}

thread_local! {
    /// Interpreter stack and region list, reused for every packet of this thread.
    static SCRATCH: RefCell<(Vec<u8>, Vec<Region>)> = RefCell::new((vec![0; STACK_BYTES], Vec::new()));
}

impl Program {
    /// Verify and prepare `spec`. Maps are created, or taken from `registry` when one of the
    /// same name and shape exists there.
    pub fn load(
        spec: &ProgramSpec,
        context: Context,
        helpers: &Helpers,
        opts: LoadOptions,
        registry: Option<&MapRegistry>,
    ) -> Result<Program, LoadError> {
        Self::load_from(spec, context, helpers, opts, MapSource::Registry(registry), None)
    }

    /// [`Program::load`] on exactly `maps` (in `spec`'s map order, each of the shape `spec`
    /// declares): a specialised form of a loaded program runs on the original's very maps,
    /// whatever another program registered under the same names since.
    pub fn load_with_maps(
        spec: &ProgramSpec,
        context: Context,
        helpers: &Helpers,
        opts: LoadOptions,
        maps: &[Arc<Map>],
    ) -> Result<Program, LoadError> {
        Self::load_from(spec, context, helpers, opts, MapSource::Given(maps), None)
    }

    /// A specialised form of `original` on its maps, with `plan` compiled in front of it: a
    /// packet the guard refuses runs `original`'s code (a tail jump), counted per CPU
    /// ([`Program::guard_misses`]). Only where both run as JIT code and the plan's compares
    /// lie inside its shortest packet; otherwise the program loads without a compiled guard
    /// ([`Program::has_compiled_guard`]), and the caller checks the guard itself.
    pub fn load_guarded(
        spec: &ProgramSpec,
        context: Context,
        helpers: &Helpers,
        opts: LoadOptions,
        original: &Arc<Program>,
        plan: GuardPlan,
    ) -> Result<Program, LoadError> {
        if !context.is_xdp() || u64::from(plan.min_len) < context.packet_min_len() {
            return Err(LoadError::Invalid(
                "a guard is for XDP programs, and must refuse packets shorter than the program \
                 was verified for"
                    .into(),
            ));
        }
        // The original gets the same CPU index: its per-CPU copies must be as many.
        let opts = LoadOptions { cpus: original.cpus, ..opts };
        let guarded = (original.entry.is_some() && opts.engine == Engine::Jit)
            .then(|| (plan, Arc::clone(original)));
        Self::load_from(spec, context, helpers, opts, MapSource::Given(&original.maps), guarded)
    }

    fn load_from(
        spec: &ProgramSpec,
        context: Context,
        helpers: &Helpers,
        opts: LoadOptions,
        source: MapSource<'_>,
        guarded: Option<(GuardPlan, Arc<Program>)>,
    ) -> Result<Program, LoadError> {
        if spec.maps.len() > MAX_MAPS {
            return Err(LoadError::Invalid(format!(
                "{} maps exceed the limit of {MAX_MAPS}",
                spec.maps.len()
            )));
        }
        for m in &spec.maps {
            m.def
                .validate(opts.cpus)
                .map_err(|source| LoadError::Map { name: m.name.clone(), source })?;
        }
        let infos: Vec<MapInfo> = spec.maps.iter().map(|m| m.def.into()).collect();
        let env = Env { helpers, ctx: context, maps: &infos, complexity: opts.complexity };
        let t0 = Instant::now();
        let verified = verifier::verify(&spec.insns, &env)?;
        let verify_ns = t0.elapsed().as_nanos() as u64;
        // Maps only once the program is known to be good: a rejected update leaves no trace.
        let registry = match source {
            MapSource::Given(given) => {
                if given.len() != spec.maps.len()
                    || given.iter().zip(&spec.maps).any(|(g, m)| !g.compatible(&m.def))
                {
                    return Err(LoadError::Invalid("the given maps are not the program's".into()));
                }
                None
            }
            MapSource::Registry(r) => r,
        };
        let given = match source {
            MapSource::Given(given) => Some(given),
            MapSource::Registry(_) => None,
        };
        let maps = spec
            .maps
            .iter()
            .enumerate()
            .map(|(k, m)| {
                if let Some(given) = given {
                    return Ok(Arc::clone(&given[k]));
                }
                let (map, new) = match registry {
                    Some(r) => r.obtain(m, opts.cpus),
                    None => Map::new(&m.name, m.def, opts.cpus).map(|m| (Arc::new(m), true)),
                }
                .map_err(|source| LoadError::Map { name: m.name.clone(), source })?;
                if let Some(init) = m.init.as_ref().filter(|_| new || m.reinit) {
                    map.update_copy(&0u32.to_ne_bytes(), init, 0)
                        .map_err(|source| LoadError::Map { name: m.name.clone(), source })?;
                }
                Ok(map)
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        for &m in &verified.value_stores {
            if let Some(map) = maps.get(m as usize) {
                map.note_value_stores();
            }
        }
        let linked = link(&verified.insns, &maps)?;
        let t1 = Instant::now();
        let mut compiled_guard = None;
        let jit = match opts.engine {
            Engine::Jit => {
                let inline = inline_lookups(&verified, &maps, &linked);
                let depth = verified.stack_depth;
                Some(match guarded {
                    Some((plan, original)) => {
                        let misses: Box<[MissCounter]> =
                            (0..opts.cpus.max(1)).map(|_| MissCounter::default()).collect();
                        let g = jit::guard::EntryGuard {
                            data_off: std::mem::offset_of!(XdpCtx, data) as i32,
                            data_end_off: std::mem::offset_of!(XdpCtx, data_end) as i32,
                            min_len: plan.min_len,
                            max_len: plan.max_len,
                            checks: plan.checks,
                            pins: plan.pins.iter().map(MapPin::counter).collect(),
                            misses: misses.as_ptr() as u64,
                            fallback: original.entry.map_or(0, |e| e as usize as u64),
                        };
                        let code = jit::compile_guarded(&linked, helpers, depth, &inline, &g)?;
                        compiled_guard =
                            Some(CompiledGuard { _original: original, _pins: plan.pins, misses });
                        code
                    }
                    None => jit::compile_with(&linked, helpers, depth, &inline)?,
                })
            }
            Engine::Interp => None,
        };
        let compile_ns = t1.elapsed().as_nanos() as u64;
        let map_regions = maps
            .iter()
            .map(|m| {
                let (start, len) = m.region();
                Region { start, len, writable: true }
            })
            .collect();
        Ok(Program {
            name: spec.name.clone(),
            context,
            engine: opts.engine,
            cpus: opts.cpus.max(1),
            maps,
            stats: LoadStats { verify_ns, compile_ns, processed: verified.processed },
            verified,
            linked,
            helpers: helpers.clone(),
            map_regions,
            entry: jit.as_ref().map(JitCode::entry),
            jit,
            compiled_guard,
        })
    }

    /// Whether a guard is compiled in front of the code: then every packet may be run, and
    /// the guard itself sends those it refuses to the original.
    pub fn has_compiled_guard(&self) -> bool {
        self.compiled_guard.is_some()
    }

    /// Packets the compiled guard sent to the original on `worker`'s CPU index (as
    /// [`Program::xdp_runner`] picks it); `None` without a compiled guard.
    pub fn guard_misses(&self, worker: u32) -> Option<u64> {
        let g = self.compiled_guard.as_ref()?;
        let cpu = worker as usize % g.misses.len();
        Some(g.misses[cpu].0.load(Ordering::Relaxed))
    }

    /// Instructions as they run (map references linked).
    pub fn insns(&self) -> &[Insn] {
        &self.linked
    }

    pub fn jit_code(&self) -> Option<&JitCode> {
        self.jit.as_ref()
    }

    /// Run with r1 = `r1`, r2 = `r2`, letting the interpreter also touch `extra`.
    fn run(&self, r1: u64, r2: u64, extra: [Region; 2]) -> Result<u64, RunError> {
        // A compiled guard indexes its miss counters by r2, which only the XDP runner
        // guarantees to be a CPU index: anything else is interpreted (bounds-checked).
        if let Some(entry) = self.entry.filter(|_| self.compiled_guard.is_none()) {
            // SAFETY: the program passed the verifier for this context, so it only touches
            // the memory r1 describes, its stack and its maps, which `self` keeps alive.
            return Ok(unsafe { entry(r1, r2) });
        }
        self.interpret(r1, r2, extra)
    }

    fn interpret(&self, r1: u64, r2: u64, extra: [Region; 2]) -> Result<u64, RunError> {
        SCRATCH.with(|s| {
            let (stack, regions) = &mut *s.borrow_mut();
            regions.clear();
            regions.extend_from_slice(&extra);
            regions.extend_from_slice(&self.map_regions);
            interpret_on(stack, &self.linked, &self.helpers, regions, r1, r2, u64::MAX)
        })
    }

    /// Whether the program may return `XDP_REDIRECT` with a target (it calls a redirect
    /// helper).
    pub fn redirects(&self) -> bool {
        self.verified
            .helpers_used
            .iter()
            .any(|h| matches!(*h, crate::xdp::id::REDIRECT | crate::xdp::id::REDIRECT_MAP))
    }

    /// Run an XDP program on `pkt`; returns the XDP action (r0). Interpreter errors (which the
    /// verifier rules out) count as `XDP_ABORTED`.
    ///
    /// `worker` is the running worker's index: the receive queue programs see, and the copy
    /// of per-CPU map values that inlined lookups use. Helpers find the copy through
    /// [`crate::maps::set_current_cpu`], which the stage sets once per batch; other callers
    /// running several workers' packets must set it too.
    #[inline]
    pub fn run_xdp(&self, pkt: &mut Packet, worker: u32) -> u64 {
        self.try_run_xdp(pkt, worker).unwrap_or(crate::xdp::XDP_ABORTED)
    }

    /// [`Program::run_xdp`], reporting interpreter errors (which the verifier rules out: a
    /// fuzz target checks exactly that).
    #[inline]
    pub fn try_run_xdp(&self, pkt: &mut Packet, worker: u32) -> Result<u64, RunError> {
        self.xdp_runner(worker).try_run(pkt)
    }

    /// This program bound to one worker, for a batch of its packets: the engine and the
    /// per-CPU copy are chosen once, not per packet.
    #[inline]
    pub fn xdp_runner(&self, worker: u32) -> XdpRunner<'_> {
        let cpu = worker as usize;
        let cpu = if cpu < self.cpus { cpu } else { cpu % self.cpus };
        let ctx = XdpCtx { rx_queue_index: worker, ..XdpCtx::default() };
        let min_len = match self.context {
            // The compiled guard checks the length and sends a short packet to the original.
            _ if self.compiled_guard.is_some() => 0,
            Context::XdpMinLen { min_len } => u64::from(min_len),
            _ => 0,
        };
        XdpRunner { program: self, entry: self.entry, cpu: cpu as u64, ctx, min_len }
    }

    /// The maps and the map values (`lddw map_value`) as the memory-safety oracle sees them.
    fn checked_maps(&self) -> (Vec<CheckedMap>, Vec<Region>) {
        let maps = self
            .maps
            .iter()
            .map(|m| {
                let (start, len) = m.region();
                CheckedMap {
                    addr: Arc::as_ptr(m) as u64,
                    key_size: m.def.key_size,
                    value_size: m.def.value_size,
                    storage: Region { start, len, writable: true },
                }
            })
            .collect();
        let values = self
            .verified
            .insns
            .iter()
            .enumerate()
            .filter(|(_, i)| i.is_lddw() && matches!(i.src, pseudo::MAP_VALUE | pseudo::MAP_ENTRY))
            .filter_map(|(pc, i)| {
                let m = self.maps.get(i.imm as usize)?;
                let start = match i.src {
                    pseudo::MAP_ENTRY => {
                        m.slot_value_addr(self.verified.insns.get(pc + 1)?.imm as u32 as usize)?
                    }
                    _ => m.region().0,
                };
                Some(Region { start, len: m.def.value_size as u64, writable: true })
            })
            .collect();
        (maps, values)
    }

    /// Run an XDP program on `pkt` in the interpreter's checked mode (the memory-safety
    /// oracle, [`crate::oracle`]), whatever the program's engine: any
    /// [`RunError::Violation`] is an access the verifier should have refused. A program with
    /// a compiled guard runs its own instructions, without the guard: give it only packets the
    /// guard admits.
    pub fn run_checked_xdp(&self, pkt: &mut Packet, worker: u32) -> Result<u64, RunError> {
        let mut ctx = XdpCtx { rx_queue_index: worker, ..XdpCtx::default() };
        let in_port = pkt.meta.in_port;
        let (headroom, tailroom) = (pkt.headroom() as u64, pkt.tailroom() as u64);
        ctx.packet = std::ptr::addr_of_mut!(*pkt) as u64;
        let data = pkt.data_mut();
        let start = data.as_mut_ptr() as u64;
        ctx.data = start;
        ctx.data_end = start + data.len() as u64;
        ctx.data_meta = start;
        ctx.ingress_ifindex = in_port as u32 + 1;
        let buffer = Region {
            start: start - headroom,
            len: headroom + data.len() as u64 + tailroom,
            writable: true,
        };
        let (maps, values) = self.checked_maps();
        let ctx_ptr = std::ptr::addr_of_mut!(ctx) as u64;
        // SAFETY: `ctx` lives for the call and describes `pkt`, borrowed mutably here (helpers
        // that move the packet keep data..data_end inside its buffer); the maps are `self`'s.
        unsafe {
            run_checked(
                &self.linked,
                &self.helpers,
                CheckedContext::Xdp { ctx: ctx_ptr, buffer },
                &maps,
                &values,
                CHECKED_BUDGET,
            )
        }
    }

    /// [`Program::run_mem`] in the checked mode.
    pub fn run_checked_mem(&self, mem: &mut [u8]) -> Result<u64, RunError> {
        let (maps, values) = self.checked_maps();
        // SAFETY: `mem` is borrowed mutably for the call; the maps are `self`'s.
        unsafe {
            run_checked(
                &self.linked,
                &self.helpers,
                CheckedContext::Mem(Region::of(mem, true)),
                &maps,
                &values,
                CHECKED_BUDGET,
            )
        }
    }

    /// Run on plain memory (the conformance environment: r1 = memory, r2 = its length). A
    /// program with a compiled guard runs its own instructions here, interpreted, without the
    /// guard.
    pub fn run_mem(&self, mem: &mut [u8]) -> Result<u64, RunError> {
        let r = Region::of(mem, true);
        self.run(mem.as_mut_ptr() as u64, mem.len() as u64, [r, r])
    }
}

/// A program bound to one worker: see [`Program::xdp_runner`].
pub struct XdpRunner<'a> {
    program: &'a Program,
    entry: Option<jit::Entry>,
    cpu: u64,
    /// Reused from packet to packet: programs cannot write their context, so only the
    /// per-packet fields need storing.
    ctx: XdpCtx,
    /// The packet length the program was verified for ([`Context::XdpMinLen`]); shorter
    /// packets are aborted here, whoever forgot the guard.
    min_len: u64,
}

impl XdpRunner<'_> {
    /// [`Program::run_xdp`] for this runner's worker.
    #[inline(always)]
    pub fn run(&mut self, pkt: &mut Packet) -> u64 {
        self.try_run(pkt).unwrap_or(crate::xdp::XDP_ABORTED)
    }

    /// [`Program::try_run_xdp`] for this runner's worker.
    #[inline(always)]
    pub fn try_run(&mut self, pkt: &mut Packet) -> Result<u64, RunError> {
        let in_port = pkt.meta.in_port;
        let packet = std::ptr::addr_of_mut!(*pkt) as u64;
        let data = pkt.data_mut();
        let (start, len) = (data.as_mut_ptr() as u64, data.len() as u64);
        self.enter(start, len, in_port, packet, move || {
            // SAFETY: `packet` is `pkt`, borrowed mutably by this call; reading its room is
            // fine.
            let p = unsafe { &*(packet as *const Packet) };
            let (headroom, tailroom) = (p.headroom() as u64, p.tailroom() as u64);
            Region { start: start - headroom, len: headroom + len + tailroom, writable: true }
        })
    }

    /// Run on a frame that is not a pool packet (the bytes another program hands over, such
    /// as a P4 extern calling an extern slot), received on port `in_port`; returns r0.
    /// The frame is changed in place but cannot grow or shrink: `bpf_xdp_adjust_head` and
    /// `bpf_xdp_adjust_tail` fail with `-EINVAL` and leave it as it was.
    #[inline(always)]
    pub fn run_frame(&mut self, frame: &mut [u8], in_port: u16) -> u64 {
        self.try_run_frame(frame, in_port).unwrap_or(crate::xdp::XDP_ABORTED)
    }

    /// [`XdpRunner::run_frame`], reporting interpreter errors.
    #[inline(always)]
    pub fn try_run_frame(&mut self, frame: &mut [u8], in_port: u16) -> Result<u64, RunError> {
        let (start, len) = (frame.as_mut_ptr() as u64, frame.len() as u64);
        // No packet behind the context (`packet` 0): the helpers that move the packet's
        // bounds find none to move.
        self.enter(start, len, in_port, 0, move || Region { start, len, writable: true })
    }

    /// Run with the context describing `len` bytes at `start`, the data of `packet` (a
    /// `*mut Packet`, or 0 for a bare frame); `buffer` is the memory around the data the
    /// interpreter may touch (asked only when the interpreter runs).
    #[inline(always)]
    fn enter(
        &mut self,
        start: u64,
        len: u64,
        in_port: u16,
        packet: u64,
        buffer: impl FnOnce() -> Region,
    ) -> Result<u64, RunError> {
        if len < self.min_len {
            // The verifier's precondition does not hold: running would read past the packet.
            return Ok(crate::xdp::XDP_ABORTED);
        }
        let ctx = &mut self.ctx;
        ctx.data = start;
        ctx.data_end = start + len;
        ctx.data_meta = start;
        ctx.ingress_ifindex = in_port as u32 + 1;
        ctx.packet = packet;
        let ctx_ptr = ctx as *mut XdpCtx as u64;
        if let Some(entry) = self.entry {
            // SAFETY: the callers borrow the `len` bytes at `start` mutably for the call. The
            // program passed the verifier for the XDP context, so it only touches the data
            // between data and data_end, the context, its stack and its maps (which
            // `self.program` keeps alive); helpers it calls get `ctx`, whose `packet` is the
            // caller's packet or 0 (then no helper moves the data). The second argument is the
            // per-CPU copy for inlined lookups (XDP programs never read r2 at entry: the
            // verifier has it uninitialised).
            return Ok(unsafe { entry(ctx_ptr, self.cpu) });
        }
        let ctx_region =
            Region { start: ctx_ptr, len: std::mem::size_of::<XdpCtx>() as u64, writable: false };
        self.program.interpret(ctx_ptr, 0, [buffer(), ctx_region])
    }
}

/// Lookups of arrays and per-CPU arrays at call sites the verifier tied to one map: the JIT
/// computes the value's address inline instead of calling the helper.
fn inline_lookups(v: &Verified, maps: &[Arc<Map>], insns: &[Insn]) -> jit::Inline {
    let mut inline = jit::Inline::default();
    for (&pc, &m) in &v.call_maps {
        let i = insns[pc];
        if i.code != crate::insn::op::CALL
            || i.src != 0
            || i.imm as u32 != crate::xdp::id::MAP_LOOKUP_ELEM
        {
            continue;
        }
        if let Some(arr) = maps.get(m as usize).and_then(|m| m.inline_layout()) {
            inline.lookups.insert(pc, arr);
        }
    }
    inline
}

/// Replace `lddw` map references by the map's address (`map`) or a value's (`map_value`).
fn link(insns: &[Insn], maps: &[Arc<Map>]) -> Result<Vec<Insn>, LoadError> {
    let mut out = insns.to_vec();
    let mut pc = 0;
    while pc < out.len() {
        let i = out[pc];
        if i.is_lddw() && matches!(i.src, pseudo::MAP_FD | pseudo::MAP_VALUE | pseudo::MAP_ENTRY) {
            let m = maps.get(i.imm as usize).ok_or_else(|| {
                LoadError::Invalid(format!("instruction {pc} refers to map {}", i.imm))
            })?;
            let addr = if i.src == pseudo::MAP_FD {
                Arc::as_ptr(m) as u64
            } else if i.src == pseudo::MAP_ENTRY {
                m.slot_value_addr(out[pc + 1].imm as u32 as usize).ok_or_else(|| {
                    LoadError::Invalid(format!("instruction {pc}: no such hash map slot"))
                })?
            } else {
                if m.def.kind != MapKind::Array {
                    return Err(LoadError::Invalid(format!(
                        "instruction {pc}: map_value needs an array map"
                    )));
                }
                m.region().0 + out[pc + 1].imm as u32 as u64
            };
            out[pc] = Insn::new(i.code, i.dst, 0, 0, addr as u32 as i32);
            out[pc + 1] = Insn::new(0, 0, 0, 0, (addr >> 32) as u32 as i32);
        }
        pc += if i.is_lddw() { 2 } else { 1 };
    }
    Ok(out)
}
