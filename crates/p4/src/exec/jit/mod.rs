//! Native code for P4 blocks, generated with Cranelift.
//!
//! Each top-level block (a parser state's body, a control, an action) becomes one machine-code
//! function over a [`Frame`]: raw pointers to the packet's slots, header bytes and validity
//! flags, the packet, and the parser cursor. Values of up to 64 bits live in registers; header
//! fields are read and written as big-endian windows of the header area; `if`, `switch`,
//! `return` and `exit` are branches; applies of keyless and LPM tables are generated code, other
//! applies bind in Rust ([`apply_bind`]) and call the action's code. A statement the code
//! generator does not handle (most externs, values wider than 64 bits, header stack elements
//! chosen at run time) stays the closure [`Compiler::stmt`] builds, and the native code calls
//! it through [`run_fallback`]. So every program runs natively as far as it can and correctly
//! everywhere. Fused entries run a whole packet ([`Body::Whole`]) or its front and back halves
//! in one call each. A whole packet's code starts by resetting the packet state itself, so the
//! data plane runs a batch's packets one after another in one frame ([`WholeRun`]), setting
//! only each packet's own fields between calls.
//!
//! `HOTPLANE_P4_ENGINE=closures` turns code generation off (closures only), for comparison.
//! This module is the crate's `native` feature (on by default); without it, `jit_off.rs`
//! stands in and every program runs on closures.

mod lower;

pub(crate) use super::engine::{Body, Whole};
pub use super::engine::{Engine, NativeError, NATIVE_MAX_SIZE};

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use cranelift_codegen::ir::{types, AbiParam};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Module};

use super::table::ApplySite;
use super::{Compiler, Ctx, Flow, StmtFn};
use crate::ir::{statements, Stmt};

/// The statements (nested ones included) and select cases of `body`, with the parser's if
/// it is part of it.
fn native_size(c: &Compiler<'_>, body: &Body<'_>) -> usize {
    let parser = || -> usize {
        c.prog
            .states
            .iter()
            .map(|s| {
                let cases = match &s.transition {
                    crate::ir::Transition::Select { cases, .. } => cases.len(),
                    _ => 0,
                };
                1 + statements(&s.body) + cases
            })
            .sum()
    };
    let controls = |cs: &[&[Stmt]]| cs.iter().map(|b| statements(b)).sum::<usize>();
    match body {
        Body::Block(stmts) => statements(stmts),
        Body::Front(cs) => parser() + controls(cs),
        Body::Back(cs) => controls(cs),
        Body::Whole { front, checksum, deparser } => {
            parser() + controls(front) + statements(checksum) + statements(deparser)
        }
    }
}

/// What native code sees of one packet. The pointers are refreshed from the context after
/// every call back into Rust (see [`run_fallback`]), so they are always freshly derived.
#[repr(C)]
pub(crate) struct Frame {
    slots: *mut u128,
    hdr: *mut u8,
    valid: *mut bool,
    pkt: *const u8,
    pkt_len: usize,
    cursor: usize,
    /// Where the parser stopped, and its error code (`Ctx::payload`, `Ctx::error`).
    payload: usize,
    error: u64,
    /// The deparser's output: start, bytes written, capacity (`st.out`).
    out: *mut u8,
    out_len: usize,
    out_cap: usize,
    /// `*mut Ctx<'_>` of the packet, for fallbacks.
    ctx: *mut (),
    /// [`Body::Whole`] only: the packet's first byte, writable together with the `headroom`
    /// bytes before it (null: deparse into `out`); and what was written in front of the
    /// payload when the function returns [`code::PLACED`].
    dst: *mut u8,
    headroom: usize,
    placed: usize,
    /// [`Body::Whole`] only: the standard metadata it sets on entry (see `Lower::enter`).
    in_port: u64,
    instance_type: u64,
    /// `ingress_global_timestamp`: microseconds, 48 bits.
    timestamp: u64,
    /// A fallback's panic, carried past the native frames (which cannot unwind).
    panic: Option<Box<dyn Any + Send>>,
}

/// Field offsets in [`Frame`] for the code generator.
pub(crate) mod frame {
    use super::Frame;
    use std::mem::offset_of;
    pub const SLOTS: i32 = offset_of!(Frame, slots) as i32;
    pub const HDR: i32 = offset_of!(Frame, hdr) as i32;
    pub const VALID: i32 = offset_of!(Frame, valid) as i32;
    pub const PKT: i32 = offset_of!(Frame, pkt) as i32;
    pub const PKT_LEN: i32 = offset_of!(Frame, pkt_len) as i32;
    pub const CURSOR: i32 = offset_of!(Frame, cursor) as i32;
    pub const PAYLOAD: i32 = offset_of!(Frame, payload) as i32;
    pub const ERROR: i32 = offset_of!(Frame, error) as i32;
    pub const OUT: i32 = offset_of!(Frame, out) as i32;
    pub const OUT_LEN: i32 = offset_of!(Frame, out_len) as i32;
    pub const OUT_CAP: i32 = offset_of!(Frame, out_cap) as i32;
    pub const DST: i32 = offset_of!(Frame, dst) as i32;
    pub const HEADROOM: i32 = offset_of!(Frame, headroom) as i32;
    pub const PLACED: i32 = offset_of!(Frame, placed) as i32;
    pub const IN_PORT: i32 = offset_of!(Frame, in_port) as i32;
    pub const INSTANCE_TYPE: i32 = offset_of!(Frame, instance_type) as i32;
    pub const TIMESTAMP: i32 = offset_of!(Frame, timestamp) as i32;
}

impl Frame {
    /// A frame for the packet in `c`, which native code reaches for fallbacks.
    #[inline]
    fn for_ctx(c: &mut Ctx<'_>) -> Frame {
        // The context was written field by field moments ago; the compiler would read these
        // two neighbours with one 16-byte load, which waits for both stores to reach the
        // cache (a store-forwarding stall, 5 ns per call). Volatile keeps them 8-byte loads.
        // SAFETY: both are references to initialised `usize`s.
        let (cursor, payload) =
            unsafe { (std::ptr::read_volatile(&c.cursor), std::ptr::read_volatile(&c.payload)) };
        let mut frame = Frame {
            slots: std::ptr::null_mut(),
            hdr: std::ptr::null_mut(),
            valid: std::ptr::null_mut(),
            pkt: std::ptr::null(),
            pkt_len: 0,
            cursor,
            payload,
            error: c.error as u64,
            out: std::ptr::null_mut(),
            out_len: 0,
            out_cap: 0,
            ctx: std::ptr::null_mut(),
            dst: std::ptr::null_mut(),
            headroom: 0,
            placed: 0,
            in_port: 0,
            instance_type: 0,
            timestamp: 0,
            panic: None,
        };
        frame.refresh(c);
        frame.ctx = c as *mut Ctx<'_> as *mut ();
        frame
    }

    /// Take the pointers (and the output's length) from the context.
    fn refresh(&mut self, c: &mut Ctx<'_>) {
        self.slots = c.st.slots.as_mut_ptr();
        self.hdr = c.st.hdr.as_mut_ptr();
        self.valid = c.st.valid.as_mut_ptr();
        self.pkt = c.pkt.as_ptr();
        self.pkt_len = c.pkt.len();
        self.out = c.st.out.as_mut_ptr();
        self.out_len = c.st.out.len();
        self.out_cap = c.st.out.capacity();
    }

    /// Give the context what native code changed: the parser's position and error, and the
    /// output's length.
    fn settle(&self, c: &mut Ctx<'_>) {
        // Native code stored these one by one; one 16-byte load of both would stall on
        // store forwarding (see `Frame::for_ctx`).
        // SAFETY: references to initialised fields of `self`.
        unsafe {
            c.cursor = std::ptr::read_volatile(&self.cursor);
            c.payload = std::ptr::read_volatile(&self.payload);
            c.error = std::ptr::read_volatile(&self.error) as u128;
        }
        debug_assert!(self.out_len <= c.st.out.capacity());
        // SAFETY: native code only raises `out_len` after writing the bytes up to it, and
        // never past `out_cap`, the capacity of this same vector (refreshed after every call
        // into Rust, the only place it can reallocate).
        unsafe { c.st.out.set_len(self.out_len) };
    }
}

/// Flow codes between native code and Rust.
pub(crate) mod code {
    pub const NEXT: i64 = 0;
    pub const RETURN: i64 = 1;
    pub const EXIT: i64 = 2;
    pub const REJECT: i64 = 3;
    /// A fallback panicked; the panic is in [`super::Frame::panic`].
    pub const PANICKED: i64 = 4;
    /// [`super::Body::Whole`] stopped after ingress.
    pub const AFTER_INGRESS: i64 = 5;
    /// [`super::Body::Whole`] wrote the headers into the packet (see `Frame::dst`).
    pub const PLACED: i64 = 6;
}

fn flow_code(f: Flow) -> i64 {
    match f {
        Flow::Next => code::NEXT,
        Flow::Return => code::RETURN,
        Flow::Exit => code::EXIT,
        Flow::Reject => code::REJECT,
        // Loops run whole in closures (a fallback), so these never leave one.
        Flow::Break | Flow::Continue => code::NEXT,
    }
}

/// Run `f` on the packet's context, with the cursor in step and a panic caught.
///
/// # Safety
/// `frame` is the live frame of a call made by [`NativeBlock::run`], whose `ctx` points to
/// the context that call borrows and does not use while native code runs.
unsafe fn with_ctx<R>(frame: *mut Frame, f: impl FnOnce(&mut Ctx<'_>) -> R) -> Result<R, ()> {
    // SAFETY: per the contract above; native code passes the frame it was given.
    let frame = unsafe { &mut *frame };
    // SAFETY: per the contract above; the lifetime is erased only for the call.
    let c = unsafe { &mut *(frame.ctx as *mut Ctx<'static>) };
    // A batch's context ([`WholeRun`]) serves one packet after another: the frame says which.
    // SAFETY: `frame.pkt` and `pkt_len` are the packet the call runs on (see `WholeRun::packet`
    // and `Frame::refresh`), readable for the call.
    c.pkt = unsafe { std::slice::from_raw_parts(frame.pkt, frame.pkt_len) };
    frame.settle(c);
    let result = catch_unwind(AssertUnwindSafe(|| f(c)));
    frame.cursor = c.cursor;
    frame.payload = c.payload;
    frame.error = c.error as u64;
    frame.refresh(c);
    result.map_err(|p| frame.panic = Some(p))
}

/// Run fallback closure `index` of `fallbacks` on the packet.
///
/// # Safety
/// As for [`with_ctx`]; `fallbacks` is a block's fallback list (kept alive by [`NativeCode`])
/// and `index` is below its length.
pub(crate) unsafe extern "C" fn run_fallback(
    frame: *mut Frame,
    fallbacks: *const Vec<StmtFn>,
    index: usize,
) -> i64 {
    // SAFETY: the code generator passes a list it keeps and an index into it.
    let f = unsafe { &(&*fallbacks)[index] };
    // SAFETY: per this function's contract.
    match unsafe { with_ctx(frame, |c| f(c)) } {
        Ok(flow) => flow_code(flow),
        Err(()) => code::PANICKED,
    }
}

/// `t.apply()` up to the action: look up, bind the parameters; the program's index of the
/// action to run, -1 for none, or -2 if key evaluation panicked.
///
/// # Safety
/// As for [`with_ctx`]; `site` is kept alive by [`NativeCode`].
pub(crate) unsafe extern "C" fn apply_bind(frame: *mut Frame, site: *const ApplySite) -> i64 {
    // SAFETY: the code generator passes a site it keeps.
    let site = unsafe { &*site };
    // SAFETY: per this function's contract.
    match unsafe { with_ctx(frame, |c| site.bind(c)) } {
        Ok(Some(a)) => a as i64,
        Ok(None) => -1,
        Err(()) => -2,
    }
}

type NativeFn = unsafe extern "C" fn(*mut Frame) -> i64;

/// One compiled block's entry.
struct NativeBlock {
    func: NativeFn,
}

impl NativeBlock {
    #[inline]
    fn run(&self, c: &mut Ctx<'_>) -> Flow {
        let mut frame = Frame::for_ctx(c);
        let r = self.enter(&mut frame);
        frame.settle(c);
        match r {
            code::NEXT => Flow::Next,
            code::RETURN => Flow::Return,
            code::EXIT => Flow::Exit,
            code::REJECT => Flow::Reject,
            _ => Flow::Next,
        }
    }

    /// Run the function on `frame` (made by [`Frame::for_ctx`], its context unused meanwhile);
    /// its result code. A fallback's panic is raised again here, past the native frames.
    #[inline]
    fn enter(&self, frame: &mut Frame) -> i64 {
        // SAFETY: the function was generated for this frame layout; it reads and writes only
        // within the slot, header (plus its 8 bytes of padding) and validity areas, reads the
        // packet's `pkt_len` bytes, writes the output below `out_cap` (and, for a whole
        // packet, the `headroom` bytes before `dst`), and calls back only through
        // `run_fallback`, `apply_bind` and other functions generated with it.
        let r = unsafe { (self.func)(frame) };
        if r == code::PANICKED {
            if let Some(p) = frame.panic.take() {
                std::panic::resume_unwind(p);
            }
        }
        r
    }
}

fn whole_of(r: i64, placed: usize) -> Whole {
    match r {
        code::AFTER_INGRESS => Whole::AfterIngress,
        code::PLACED => Whole::Placed(placed),
        _ => Whole::Deparsed,
    }
}

/// A whole packet's native code ([`Body::Whole`]). On entry it forgets the previous packet
/// (metadata zero, every header invalid, no output) and sets the standard metadata v1model
/// gives an arriving packet, so callers need not.
pub(crate) struct WholeCode {
    block: NativeBlock,
}

impl WholeCode {
    /// Run the packet in `c`, which arrived on `in_port` as `instance_type`; the headers go
    /// into `st.out` (the data plane's [`WholeRun`] places them in the packet instead).
    #[inline]
    pub fn call(&self, c: &mut Ctx<'_>, in_port: u32, instance_type: u32) -> Whole {
        let mut frame = Frame::for_ctx(c);
        frame.in_port = in_port as u64;
        frame.instance_type = instance_type as u64;
        frame.timestamp = crate::v1model::timestamp_us(c.now_ns);
        let r = self.block.enter(&mut frame);
        frame.settle(c);
        whole_of(r, frame.placed)
    }

    /// A run of packets that share `c` (its `pkt` is not used: each packet brings its own).
    /// `c` is the run's alone until it ends.
    pub fn begin<'r>(&'r self, c: &'r mut Ctx<'_>) -> WholeRun<'r> {
        let mut frame = Frame::for_ctx(c);
        frame.timestamp = crate::v1model::timestamp_us(c.now_ns);
        frame.instance_type = crate::v1model::instance::NORMAL as u64;
        WholeRun { code: self, frame, _ctx: std::marker::PhantomData }
    }
}

/// Whole packets one after another in one frame, so that each costs only its own fields
/// (see [`WholeCode::begin`]). The frame's context stays borrowed while the run lives.
pub(crate) struct WholeRun<'r> {
    code: &'r WholeCode,
    frame: Frame,
    _ctx: std::marker::PhantomData<&'r mut ()>,
}

impl WholeRun<'_> {
    /// Run the packet of `len` bytes at `data`, which arrived on `in_port`; the headers go in
    /// place before it when they fit in the packet and its `headroom`.
    ///
    /// # Safety
    /// `data` is the packet's first byte, readable and writable for `len` bytes and for the
    /// `headroom` bytes before it, and nothing else reads or writes those bytes during the
    /// call.
    #[inline]
    pub unsafe fn packet(
        &mut self,
        data: *mut u8,
        len: usize,
        headroom: usize,
        in_port: u32,
    ) -> Whole {
        let f = &mut self.frame;
        f.pkt = data;
        f.pkt_len = len;
        f.dst = data;
        f.headroom = headroom;
        f.in_port = in_port as u64;
        let r = self.code.block.enter(f);
        whole_of(r, f.placed)
    }

    /// Where the last packet's payload starts.
    #[inline]
    pub fn payload(&self) -> usize {
        self.frame.payload
    }

    /// The low 64 bits of the last packet's slot `i` (a standard metadata field).
    #[inline]
    pub fn slot(&self, i: usize) -> u64 {
        // SAFETY: `slots` is the state's slot vector (`Frame::refresh`), which the run
        // borrows; native code does not run while this reads.
        unsafe { self.frame.slots.add(i).cast::<u64>().read() }
    }

    /// The headers the last packet's deparser wrote to the output ([`Whole::Deparsed`]).
    #[inline]
    pub fn out(&self) -> &[u8] {
        // SAFETY: native code wrote `out_len` bytes from `out` (the state's output buffer,
        // which the run borrows), and raises `out_len` only after writing up to it.
        unsafe { std::slice::from_raw_parts(self.frame.out, self.frame.out_len) }
    }
}

impl Drop for WholeRun<'_> {
    fn drop(&mut self) {
        // SAFETY: `ctx` is the context `begin` borrowed for the run's life, unused meanwhile.
        let c = unsafe { &mut *(self.frame.ctx as *mut Ctx<'static>) };
        // The context no longer points at any packet; its output holds the last one's.
        c.pkt = &[];
        self.frame.settle(c);
    }
}

/// A block compiled but not yet finalised.
pub(crate) struct Pending {
    id: FuncId,
}

/// What generated code points at: fallback lists and apply sites. Boxed, so their addresses
/// (compiled into the code) stay put; kept until the code is freed.
/// Never read: they are only kept.
#[allow(clippy::box_collection)] // the code holds the vector's address, which must not move
pub(crate) enum Kept {
    Fallbacks(#[allow(dead_code)] Box<Vec<StmtFn>>),
    Apply(#[allow(dead_code)] Box<ApplySite>),
}

/// The code generator for one pipeline; owns the machine code it made.
pub(crate) struct Jit {
    module: JITModule,
    ctx: cranelift_codegen::Context,
    fbc: FunctionBuilderContext,
    kept: Vec<Kept>,
    /// By program action index: the entry of the action's native code (`None`: empty body).
    actions: Vec<Option<usize>>,
}

impl Jit {
    /// A code generator for this machine, or why there is none.
    pub fn new() -> Result<Self, NativeError> {
        if cfg!(target_endian = "big") {
            // Slots are read as their low 64 bits in memory order.
            return Err(NativeError::BigEndian);
        }
        let mut flags = settings::builder();
        for (name, value) in
            [("opt_level", "speed"), ("use_colocated_libcalls", "false"), ("is_pic", "false")]
        {
            flags
                .set(name, value)
                .map_err(|e| NativeError::Setting { name, message: e.to_string() })?;
        }
        let isa = cranelift_native::builder()
            .map_err(|e| NativeError::UnsupportedMachine(e.to_string()))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| NativeError::Isa(e.to_string()))?;
        let module = catch_unwind(AssertUnwindSafe(|| {
            JITModule::new(JITBuilder::with_isa(isa, cranelift_module::default_libcall_names()))
        }))
        .map_err(|_| NativeError::PanickedStarting)?;
        let ctx = module.make_context();
        Ok(Jit {
            module,
            ctx,
            fbc: FunctionBuilderContext::new(),
            kept: Vec::new(),
            actions: Vec::new(),
        })
    }

    /// Generate a function for `stmts`.
    pub fn compile(&mut self, c: &Compiler<'_>, stmts: &[Stmt]) -> Result<Pending, NativeError> {
        self.compile_body(c, Body::Block(stmts))?.ok_or(NativeError::NotLowered)
    }

    /// Generate a function for `body`; `None` if some part (a parser transition) cannot be
    /// lowered.
    pub fn compile_body(
        &mut self,
        c: &Compiler<'_>,
        body: Body<'_>,
    ) -> Result<Option<Pending>, NativeError> {
        // Cranelift's time grows faster than linearly with one function's blocks (its
        // dominator tree and verifier walk chains of them), so a huge body is refused here and
        // the program runs on closures, whose compile time is linear.
        let size = native_size(c, &body);
        if size > NATIVE_MAX_SIZE {
            return Err(NativeError::TooLarge { size, max: NATIVE_MAX_SIZE });
        }
        self.module.clear_context(&mut self.ctx);
        let ptr = self.module.target_config().pointer_type();
        let sig = &mut self.ctx.func.signature;
        sig.params.push(AbiParam::new(ptr));
        sig.returns.push(AbiParam::new(types::I64));
        let signature = sig.clone();
        let cfg = self.module.target_config();
        // A panic in the code generator is a bug, but it must not take the node down: the
        // program then runs on closures (see `Pipeline::native_error`).
        let lowered = catch_unwind(AssertUnwindSafe(|| {
            let b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fbc);
            lower::function(b, cfg, c, body, &self.actions, &mut self.kept)
        }));
        match lowered {
            Ok(true) => {}
            Ok(false) => {
                // Not lowered: start the next function from clean state.
                self.fbc = FunctionBuilderContext::new();
                self.module.clear_context(&mut self.ctx);
                return Ok(None);
            }
            Err(_) => return Err(NativeError::Panicked),
        }
        let id = self
            .module
            .declare_anonymous_function(&signature)
            .map_err(|e| NativeError::Codegen(e.to_string()))?;
        catch_unwind(AssertUnwindSafe(|| {
            self.module
                .define_function(id, &mut self.ctx)
                .map_err(|e| NativeError::Codegen(format!("{e:?}")))
        }))
        .map_err(|_| NativeError::Panicked)??;
        Ok(Some(Pending { id }))
    }

    /// Make the functions generated so far executable.
    pub fn finalize(&mut self) -> Result<(), NativeError> {
        // Making memory executable can fail (a system that forbids it); never panic for that.
        catch_unwind(AssertUnwindSafe(|| {
            self.module.finalize_definitions().map_err(|e| NativeError::Codegen(e.to_string()))
        }))
        .map_err(|_| NativeError::Panicked)?
    }

    /// A finalised block as a statement closure.
    ///
    /// The closure calls into this generator's memory: the caller keeps the [`NativeCode`]
    /// from [`Jit::into_code`] alive for as long as the closure can run.
    pub fn stmt_fn(&self, p: &Pending) -> StmtFn {
        let addr = self.module.get_finalized_function(p.id);
        // SAFETY: `addr` is the entry of a finalised function generated by `compile` with
        // signature `(ptr) -> i64` under the platform's C calling convention.
        let func = unsafe { std::mem::transmute::<*const u8, NativeFn>(addr) };
        let block = NativeBlock { func };
        Box::new(move |c| block.run(c))
    }

    /// A finalised [`Body::Whole`] function; the same contract as [`Jit::stmt_fn`].
    pub fn whole_code(&self, p: &Pending) -> WholeCode {
        let addr = self.module.get_finalized_function(p.id);
        // SAFETY: as in `stmt_fn`.
        let func = unsafe { std::mem::transmute::<*const u8, NativeFn>(addr) };
        WholeCode { block: NativeBlock { func } }
    }

    /// Native code of each action (by program index), for applies to call directly.
    pub fn set_actions(&mut self, actions: &[Option<Pending>]) {
        self.actions = actions
            .iter()
            .map(|p| p.as_ref().map(|p| self.module.get_finalized_function(p.id) as usize))
            .collect();
    }

    pub fn into_code(self) -> NativeCode {
        NativeCode { module: Some(self.module), _kept: self.kept }
    }
}

/// Machine code of a pipeline and what it points at, freed when dropped.
pub struct NativeCode {
    module: Option<JITModule>,
    _kept: Vec<Kept>,
}

// SAFETY: after finalisation the module is never used again except to free its memory in
// `drop`, which needs `&mut self`; the code itself is immutable and callable from any thread.
unsafe impl Send for NativeCode {}
// SAFETY: as above: shared references give no access to the module.
unsafe impl Sync for NativeCode {}

impl Drop for NativeCode {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the owner ([`super::Pipeline`]) drops this after every closure that
            // calls into the code (its last field), and no packet runs during that drop.
            unsafe { m.free_memory() };
        }
    }
}

impl std::fmt::Debug for NativeCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NativeCode")
    }
}
