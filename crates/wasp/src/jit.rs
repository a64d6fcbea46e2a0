//! The compiled tier: a decoded [`Program`] translated to machine code with Cranelift.
//!
//! Register work (ALU, shifts, immediates, compares), control flow and fates become inline
//! code; the steps that touch a bank or the store call back into the interpreter's own
//! `execute` for that one step ([`step_helper`]), so bank bounds, scopes, copy-on-write of the
//! scratchpad and the store transaction have one implementation whichever tier runs. The
//! machine code therefore agrees with the interpreter by construction on everything but the
//! register arithmetic and the branches, which the differential fuzz target checks.
//!
//! The fast path never waits for a compilation: a worker's decode cache asks for a hot
//! program through a [`CompileQueue`] (one `try_lock`, skipped when busy), the control thread
//! compiles it ([`CompileQueue::serve`]) and publishes it in a `OnceLock` the worker polls on
//! its next hits; until then, and forever if compiling fails, the interpreter runs it.

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, MemFlags, Signature, Value};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::Module;

use crate::decode::Program;
use crate::error::Fault;
use crate::isa::{AluOp, Cond, Insn, JumpWhen, Reg};
use crate::vpu::{Fate, Machine};
use crate::wire::MAX_CODE;

/// Why a program has no machine code (it then runs on the interpreter).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JitError {
    #[error("no code generator for this machine: {0}")]
    Machine(String),
    #[error("code generation failed: {0}")]
    Codegen(String),
    #[error("the code generator panicked")]
    Panicked,
}

/// Offsets of the registers in a [`Machine`]. It is `repr(C)` with `a`, `b`, `c` and the
/// RETURNED flag first, so they do not depend on the store's hasher.
type AnyMachine = Machine<'static, crate::ess::Salted>;
const MACHINE_A: i32 = std::mem::offset_of!(AnyMachine, a) as i32;
const MACHINE_B: i32 = std::mem::offset_of!(AnyMachine, b) as i32;
const MACHINE_C: i32 = std::mem::offset_of!(AnyMachine, c) as i32;
const MACHINE_RETURNED: i32 = std::mem::offset_of!(AnyMachine, returned) as i32;

/// Exit codes, in the low byte of the machine code's result (the step index is in bits
/// 8..16, the steps executed in bits 16..32).
const EXIT_END: u64 = 0;
const EXIT_FWD: u64 = 1;
const EXIT_DROP: u64 = 2;
const EXIT_RETURN: u64 = 3;
/// `EXIT_FAULT + Fault::index()`.
const EXIT_FAULT: u64 = 0x10;
const EXIT_PANIC: u64 = 0xff;

/// `(machine, helper) -> exit`.
type NativeFn = unsafe extern "C" fn(*mut (), usize) -> u64;
/// `(machine, step index) -> 0 or an exit code`.
type HelperFn = extern "C" fn(*mut (), u32) -> u32;

fn exit_of(result: Result<Option<Fate>, Fault>) -> u32 {
    (match result {
        Ok(None) => EXIT_END,
        Ok(Some(Fate::Fwd)) => EXIT_FWD,
        Ok(Some(Fate::Drop)) => EXIT_DROP,
        Ok(Some(Fate::Return)) => EXIT_RETURN,
        Err(fault) => EXIT_FAULT + fault.index() as u64,
    }) as u32
}

/// Runs step `index` of the machine's program with the interpreter, on the registers the
/// machine code left in the machine. Returns 0 to go on, else an exit code.
extern "C" fn step_helper<S: BuildHasher>(machine: *mut (), index: u32) -> u32 {
    // SAFETY: the machine code passes on, untouched, the `Machine<S>` that
    // `CompiledProgram::run` (instantiated with this same `S`, as is this helper's address)
    // borrows mutably for the whole call; the machine code does not touch it during the call.
    let machine = unsafe { &mut *(machine as *mut Machine<'_, S>) };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let Some(&step) = machine.program.steps().get(index as usize) else {
            return EXIT_FAULT as u32 + Fault::OutOfBounds.index() as u32;
        };
        // Memory and store steps never jump: the next step is the machine code's business.
        let mut next = index as usize + 1;
        exit_of(machine.execute(step, &mut next))
    }));
    outcome.unwrap_or_else(|payload| {
        machine.panic = Some(payload);
        EXIT_PANIC as u32
    })
}

/// A program's machine code; freed when the last worker holding it lets go.
pub struct CompiledProgram {
    func: NativeFn,
    module: Option<JITModule>,
    /// Machine code bytes, for reports.
    pub code_bytes: usize,
}

// SAFETY: after finalisation the module is only kept to free its memory in `drop` (which has
// `&mut self`); the machine code is immutable and callable from any thread.
unsafe impl Send for CompiledProgram {}
// SAFETY: as above; a shared reference only calls the machine code.
unsafe impl Sync for CompiledProgram {}

impl Drop for CompiledProgram {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            // SAFETY: `func` points into this module and is only called through `&self`,
            // which cannot outlive this value.
            unsafe { module.free_memory() };
        }
    }
}

impl CompiledProgram {
    /// Runs the machine code on `machine` (whose program it was compiled from): the result
    /// as the interpreter's `interpret` gives it.
    pub(crate) fn run<S: BuildHasher>(
        &self,
        machine: &mut Machine<'_, S>,
    ) -> (Result<Fate, (Fault, usize)>, usize) {
        let helper: HelperFn = step_helper::<S>;
        // SAFETY: `func` was compiled by `compile` with the signature `NativeFn`; it reads and
        // writes only the machine's registers (at the offsets `repr(C)` fixes) and calls
        // `helper`, which is instantiated for this machine's `S`. Its steps only go forward.
        let exit =
            unsafe { (self.func)(machine as *mut Machine<'_, S> as *mut (), helper as usize) };
        if let Some(payload) = machine.panic.take() {
            std::panic::resume_unwind(payload);
        }
        let (code, index, executed) = (exit & 0xff, (exit >> 8) as u8, (exit >> 16) as u16);
        let result = match code {
            EXIT_END | EXIT_FWD => Ok(Fate::Fwd),
            EXIT_DROP => Ok(Fate::Drop),
            EXIT_RETURN => Ok(Fate::Return),
            fault => {
                let fault = Fault::ALL
                    .get(fault.saturating_sub(EXIT_FAULT) as usize)
                    .copied()
                    .unwrap_or(Fault::OutOfBounds);
                Err((fault, usize::from(index)))
            }
        };
        (result, usize::from(executed))
    }
}

fn isa() -> Result<Arc<dyn cranelift_codegen::isa::TargetIsa>, JitError> {
    let mut flags = settings::builder();
    for (name, value) in
        [("opt_level", "speed"), ("use_colocated_libcalls", "false"), ("is_pic", "false")]
    {
        flags.set(name, value).map_err(|e| JitError::Machine(format!("{name}: {e}")))?;
    }
    cranelift_native::builder()
        .map_err(|e| JitError::Machine(e.to_string()))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| JitError::Machine(e.to_string()))
}

/// The step runs as inline machine code (no call back into the interpreter).
fn inline(insn: &Insn) -> bool {
    !matches!(
        insn,
        Insn::Ld { .. }
            | Insn::St { .. }
            | Insn::Ldx { .. }
            | Insn::Stx { .. }
            | Insn::Lookup(_)
            | Insn::Insert(_)
            | Insn::Map(_)
    )
}

/// Whether machine code would run `program` faster than the interpreter: when at least half
/// of its steps, and at least four, are inline. A step handed back to the interpreter costs a
/// call, the registers' round trip and a panic guard, about what the interpreter's own
/// dispatch costs; an inline one saves that dispatch (`hotplane bench wasp`, the filter
/// columns: `jitter` 12 % faster compiled, `count` no faster).
pub fn worth_compiling(program: &Program) -> bool {
    let inline = program.steps().iter().filter(|step| inline(&step.insn)).count();
    let called = program.len() - inline;
    inline >= 4 && inline >= called
}

/// Compiles `program` to machine code.
pub fn compile(program: &Program) -> Result<CompiledProgram, JitError> {
    if cfg!(target_endian = "big") {
        return Err(JitError::Machine("big-endian machines are not supported".into()));
    }
    let isa = isa()?;
    catch_unwind(AssertUnwindSafe(|| {
        let mut module =
            JITModule::new(JITBuilder::with_isa(isa, cranelift_module::default_libcall_names()));
        let mut ctx = module.make_context();
        let ptr = module.target_config().pointer_type();
        // (machine, helper) -> exit
        ctx.func.signature.params.push(AbiParam::new(ptr));
        ctx.func.signature.params.push(AbiParam::new(ptr));
        ctx.func.signature.returns.push(AbiParam::new(types::I64));
        let signature = ctx.func.signature.clone();
        let mut helper = Signature::new(module.target_config().default_call_conv);
        helper.params.push(AbiParam::new(ptr));
        helper.params.push(AbiParam::new(types::I32));
        helper.returns.push(AbiParam::new(types::I32));
        let mut fbc = FunctionBuilderContext::new();
        lower(FunctionBuilder::new(&mut ctx.func, &mut fbc), program, helper);
        let id = module
            .declare_anonymous_function(&signature)
            .map_err(|e| JitError::Codegen(e.to_string()))?;
        module.define_function(id, &mut ctx).map_err(|e| JitError::Codegen(format!("{e:?}")))?;
        let code_bytes = ctx.compiled_code().map_or(0, |c| c.code_buffer().len());
        module.finalize_definitions().map_err(|e| JitError::Codegen(e.to_string()))?;
        let addr = module.get_finalized_function(id);
        // SAFETY: `addr` is the entry of the function just defined with the signature
        // `(ptr, ptr) -> i64` under the platform's C calling convention, i.e. `NativeFn`.
        let func = unsafe { std::mem::transmute::<*const u8, NativeFn>(addr) };
        Ok(CompiledProgram { func, module: Some(module), code_bytes })
    }))
    .map_err(|_| JitError::Panicked)?
}

/// Emits the function: one block per step, the registers in Cranelift variables, spilled to
/// the machine only around helper calls.
fn lower(mut b: FunctionBuilder<'_>, program: &Program, helper: Signature) {
    let steps = program.steps();
    let flags = MemFlags::trusted();
    let entry = b.create_block();
    let blocks: Vec<_> = (0..=steps.len()).map(|_| b.create_block()).collect();
    b.append_block_params_for_function_params(entry);
    let [a, bb, c, count] = [0u32, 1, 2, 3].map(Variable::from_u32);
    for var in [a, bb, c, count] {
        b.declare_var(var, types::I64);
    }
    let helper_sig = b.import_signature(helper);

    b.switch_to_block(entry);
    let (machine, callee) = (b.block_params(entry)[0], b.block_params(entry)[1]);
    // The registers live in variables; the machine holds them only around helper calls.
    let load_registers = |b: &mut FunctionBuilder<'_>| {
        for (var, offset) in [(a, MACHINE_A), (bb, MACHINE_B)] {
            let value = b.ins().load(types::I64, flags, machine, offset);
            b.def_var(var, value);
        }
        let value = b.ins().uload8(types::I64, flags, machine, MACHINE_C);
        b.def_var(c, value);
    };
    let store_registers = |b: &mut FunctionBuilder<'_>| {
        for (var, offset) in [(a, MACHINE_A), (bb, MACHINE_B)] {
            let value = b.use_var(var);
            b.ins().store(flags, value, machine, offset);
        }
        let value = b.use_var(c);
        b.ins().istore8(flags, value, machine, MACHINE_C);
    };
    load_registers(&mut b);
    let zero = b.ins().iconst(types::I64, 0);
    b.def_var(count, zero);
    b.ins().jump(blocks[0], &[]);

    // Leaves with `code | index << 8 | count << 16` (the registers die with the run).
    let leave = |b: &mut FunctionBuilder<'_>, code: Value, index: usize| {
        let executed = b.use_var(count);
        let executed = b.ins().ishl_imm(executed, 16);
        let code = b.ins().bor_imm(code, (index as i64) << 8);
        let result = b.ins().bor(code, executed);
        b.ins().return_(&[result]);
    };
    let leave_with = |b: &mut FunctionBuilder<'_>, code: u64, index: usize| {
        let code = b.ins().iconst(types::I64, code as i64);
        leave(b, code, index);
    };

    for (i, step) in steps.iter().enumerate() {
        b.switch_to_block(blocks[i]);
        let n = b.use_var(count);
        let n = b.ins().iadd_imm(n, 1);
        b.def_var(count, n);
        let next = blocks[i + 1];
        let (va, vb) = (b.use_var(a), b.use_var(bb));
        let set_a = |b: &mut FunctionBuilder<'_>, value: Value| b.def_var(a, value);
        match step.insn {
            Insn::Nop => {}
            Insn::Fwd => {
                leave_with(&mut b, EXIT_FWD, i);
                continue;
            }
            Insn::Drop => {
                leave_with(&mut b, EXIT_DROP, i);
                continue;
            }
            Insn::Return => {
                let returned = b.ins().uload8(types::I64, flags, machine, MACHINE_RETURNED);
                let second = b.ins().icmp_imm(IntCC::NotEqual, returned, 0);
                let fault = EXIT_FAULT + Fault::SecondReturn.index() as u64;
                let fault = b.ins().iconst(types::I64, fault as i64);
                let fate = b.ins().iconst(types::I64, EXIT_RETURN as i64);
                let code = b.ins().select(second, fault, fate);
                leave(&mut b, code, i);
                continue;
            }
            Insn::Alu(op) => {
                let v = match op {
                    AluOp::Add => b.ins().iadd(va, vb),
                    AluOp::Sub => b.ins().isub(va, vb),
                    AluOp::And => b.ins().band(va, vb),
                    AluOp::Or => b.ins().bor(va, vb),
                    AluOp::Xor => b.ins().bxor(va, vb),
                    AluOp::Min => b.ins().umin(va, vb),
                    AluOp::Max => b.ins().umax(va, vb),
                    AluOp::Not => b.ins().bnot(va),
                    AluOp::Inc => b.ins().iadd_imm(va, 1),
                    AluOp::Dec => b.ins().iadd_imm(va, -1),
                    AluOp::Swap => {
                        b.def_var(bb, va);
                        vb
                    }
                    AluOp::MovAB => vb,
                    AluOp::MovBA => {
                        b.def_var(bb, va);
                        va
                    }
                    AluOp::Clr => b.ins().iconst(types::I64, 0),
                };
                set_a(&mut b, v);
            }
            Insn::Shl(n) | Insn::Shr(n) if n >= 64 => {
                let v = b.ins().iconst(types::I64, 0);
                set_a(&mut b, v);
            }
            Insn::Shl(n) => {
                let v = b.ins().ishl_imm(va, i64::from(n));
                set_a(&mut b, v);
            }
            Insn::Shr(n) => {
                let v = b.ins().ushr_imm(va, i64::from(n));
                set_a(&mut b, v);
            }
            Insn::Imm { reg, value } => {
                let v = b.ins().iconst(types::I64, i64::from(value));
                b.def_var(if reg == Reg::A { a } else { bb }, v);
            }
            Insn::AddI(n) => {
                let v = b.ins().iadd_imm(va, i64::from(n));
                set_a(&mut b, v);
            }
            Insn::SubI(n) => {
                let v = b.ins().iadd_imm(va, -i64::from(n));
                set_a(&mut b, v);
            }
            Insn::Cmp(cond) => {
                let holds = match cond {
                    Cond::Eq => b.ins().icmp(IntCC::Equal, va, vb),
                    Cond::Ne => b.ins().icmp(IntCC::NotEqual, va, vb),
                    Cond::Lt => b.ins().icmp(IntCC::UnsignedLessThan, va, vb),
                    Cond::Le => b.ins().icmp(IntCC::UnsignedLessThanOrEqual, va, vb),
                    Cond::Gt => b.ins().icmp(IntCC::UnsignedGreaterThan, va, vb),
                    Cond::Ge => b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, va, vb),
                    Cond::Nz => b.ins().icmp_imm(IntCC::NotEqual, va, 0),
                };
                let v = b.ins().uextend(types::I64, holds);
                b.def_var(c, v);
            }
            Insn::Jump { when, .. } => {
                // Forward-only whatever the program holds, as the interpreter's `max`.
                let target = blocks[usize::from(step.target).clamp(i + 1, steps.len())];
                let vc = b.use_var(c);
                match when {
                    JumpWhen::Always => {
                        b.ins().jump(target, &[]);
                    }
                    JumpWhen::IfTrue => {
                        b.ins().brif(vc, target, &[], next, &[]);
                    }
                    JumpWhen::IfFalse => {
                        b.ins().brif(vc, next, &[], target, &[]);
                    }
                }
                continue;
            }
            _ => {
                debug_assert!(!inline(&step.insn));
                store_registers(&mut b);
                let index = b.ins().iconst(types::I32, i as i64);
                let call = b.ins().call_indirect(helper_sig, callee, &[machine, index]);
                let exit = b.inst_results(call)[0];
                load_registers(&mut b);
                let stop = b.create_block();
                b.ins().brif(exit, stop, &[], next, &[]);
                b.switch_to_block(stop);
                let code = b.ins().uextend(types::I64, exit);
                leave(&mut b, code, i);
                continue;
            }
        }
        b.ins().jump(next, &[]);
    }
    // Off the end of the code: forward.
    b.switch_to_block(blocks[steps.len()]);
    leave_with(&mut b, EXIT_END, steps.len());
    b.seal_all_blocks();
    b.finalize();
}

/// Decodes and compiles every packet's program, then runs the machine code: the compiled
/// tier with nothing cached (the fuzz target's and the tests' third tier). A program the code
/// generator refuses runs on the interpreter.
#[derive(Default)]
pub struct CompileEach {
    program: Option<Program>,
    compiled: Option<CompiledProgram>,
    workspace: crate::vpu::Workspace,
}

impl crate::cache::Decoder for CompileEach {
    fn prepare(
        &mut self,
        code: &[u8],
        key_count: usize,
    ) -> Result<crate::cache::Prepared<'_>, crate::decode::DecodeError> {
        let program = self.program.insert(crate::decode::decode(code, key_count)?);
        self.compiled = compile(program).ok();
        let tier = match &self.compiled {
            Some(compiled) => crate::vpu::Tier::Compiled(program, compiled),
            None => crate::vpu::Tier::Interpreter(program),
        };
        Ok(crate::cache::Prepared { tier, workspace: &mut self.workspace })
    }
}

/// A compilation a worker asked for, and where its result is published.
pub(crate) type Published = Arc<OnceLock<Option<Arc<CompiledProgram>>>>;

struct Request {
    code: [u8; MAX_CODE],
    code_len: u8,
    key_count: u8,
    published: Published,
}

/// Compiled programs the control thread keeps for workers that ask again, at most.
const KEPT: usize = 64;
/// Requests waiting at most; more are refused (the worker asks again later).
const WAITING: usize = 64;

/// A compiled program kept for later askers: its code, key count and machine code.
type Kept = (Vec<u8>, u8, Arc<CompiledProgram>);

/// Counters of the compiled tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JitStats {
    pub compiled: u64,
    pub failed: u64,
    /// Nanoseconds spent compiling, in total.
    pub compile_ns: u64,
}

/// Where workers ask for hot programs to be compiled and the control thread answers.
#[derive(Default)]
pub struct CompileQueue {
    waiting: Mutex<VecDeque<Request>>,
    /// Recently compiled programs by code, so that every worker gets the same machine code.
    kept: Mutex<VecDeque<Kept>>,
    compiled: AtomicU64,
    failed: AtomicU64,
    compile_ns: AtomicU64,
    last_compile: Mutex<Option<Instant>>,
}

/// Least time between two compilations of [`CompileQueue::serve_paced`].
pub const COMPILE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(20);

impl CompileQueue {
    /// Asks for `code` to be compiled; the answer appears in the returned cell. `None` when
    /// the queue is busy or full: never waits (the fast path calls this).
    pub fn request(&self, code: &[u8], key_count: usize) -> Option<Published> {
        let mut waiting = self.waiting.try_lock().ok()?;
        if waiting.len() >= WAITING || code.len() > MAX_CODE {
            return None;
        }
        let mut padded = [0u8; MAX_CODE];
        padded[..code.len()].copy_from_slice(code);
        let published = Published::default();
        waiting.push_back(Request {
            code: padded,
            code_len: code.len() as u8,
            key_count: key_count as u8,
            published: published.clone(),
        });
        Some(published)
    }

    /// Answers the waiting requests whose machine code is kept, and compiles one more program
    /// when the last compilation is at least [`COMPILE_INTERVAL`] ago (control thread). A
    /// compilation takes a fraction of a millisecond: paced, a sender of ever new programs
    /// cannot make the control thread spend more than a few percent of a core compiling.
    pub fn serve_paced(&self, now: Instant) -> usize {
        let due = self.last_compile.lock().ok().is_some_and(|mut last| {
            let due = last.is_none_or(|at| now.duration_since(at) >= COMPILE_INTERVAL);
            if due {
                *last = Some(now);
            }
            due
        });
        self.serve_with(if due { 1 } else { 0 }, WAITING)
    }

    /// Compiles up to `budget` waiting programs at once (tests, benchmarks); returns how many
    /// requests it answered.
    pub fn serve(&self, budget: usize) -> usize {
        self.serve_with(budget, budget)
    }

    /// Answers up to `answers` requests, compiling at most `compiles` programs; a request
    /// that would need a compilation beyond that waits.
    fn serve_with(&self, compiles: usize, answers: usize) -> usize {
        let (mut answered, mut compiled) = (0, 0);
        while answered < answers {
            let Some(request) = self.waiting.lock().ok().and_then(|mut w| w.pop_front()) else {
                break;
            };
            let code = &request.code[..usize::from(request.code_len)];
            let kept = self.kept(code, request.key_count);
            if kept.is_none() && compiled >= compiles {
                // Its turn comes at a later pass.
                if let Ok(mut waiting) = self.waiting.lock() {
                    waiting.push_front(request);
                }
                break;
            }
            let compiled_now = kept.is_none();
            let result = kept.or_else(|| {
                let program = crate::decode::decode(code, usize::from(request.key_count)).ok()?;
                let started = Instant::now();
                let result = compile(&program);
                self.compile_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
                match result {
                    Ok(compiled) => {
                        self.compiled.fetch_add(1, Ordering::Relaxed);
                        let compiled = Arc::new(compiled);
                        if let Ok(mut kept) = self.kept.lock() {
                            if kept.len() >= KEPT {
                                kept.pop_front();
                            }
                            kept.push_back((code.to_vec(), request.key_count, compiled.clone()));
                        }
                        Some(compiled)
                    }
                    Err(_) => {
                        self.failed.fetch_add(1, Ordering::Relaxed);
                        None
                    }
                }
            });
            let _ = request.published.set(result);
            answered += 1;
            compiled += usize::from(compiled_now);
        }
        answered
    }

    fn kept(&self, code: &[u8], key_count: u8) -> Option<Arc<CompiledProgram>> {
        let kept = self.kept.lock().ok()?;
        kept.iter().find(|(c, k, _)| c == code && *k == key_count).map(|(_, _, p)| p.clone())
    }

    pub fn stats(&self) -> JitStats {
        JitStats {
            compiled: self.compiled.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            compile_ns: self.compile_ns.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;
    use crate::decode::decode;
    use crate::ess::{Ess, EssConfig, StoreKey, BANK_LEN};
    use crate::vpu::{run_in, Access, Env, Outcome, PacketState, Tier, Workspace};
    use crate::wire::Scope;

    const KEYS: [u64; 4] = [11, 12, 11, 13];

    /// One run on a fresh store seeded with `seed` under keys 11 and 12: the outcome, the
    /// scratchpad after it, and every entry the keys name in every scope.
    fn one(
        tier: Tier<'_>,
        scratch: &[u8],
        returned: bool,
        access: &Access,
        env: &Env,
    ) -> (Outcome, Vec<u8>, Vec<Option<[u8; BANK_LEN]>>) {
        let ess = Ess::new(&EssConfig { capacity: 64, shards: 4, ..EssConfig::default() }).unwrap();
        let mut seeded = [0u8; BANK_LEN];
        for (i, byte) in seeded.iter_mut().enumerate() {
            *byte = (i as u8).wrapping_mul(37);
        }
        ess.put(11, &seeded, 0).unwrap();
        ess.put_scoped(StoreKey::protected(12), &seeded, 0).unwrap();
        let mut scratch = scratch.to_vec();
        let net = [0x45u8, 0, 0, 60, 1, 2, 3, 4, 64, 253, 9, 9, 10, 0, 0, 1, 10, 0, 0, 2];
        let state = PacketState { keys: &KEYS, scratch: &mut scratch, returned, net: &net };
        // A used workspace: whatever a previous run left in it must not matter.
        let mut ws = Workspace::default();
        let out = run_in(&mut ws, tier, state, env, access, &ess);
        let scopes = [Scope::Public, Scope::Protected, Scope::Private];
        let entries = KEYS
            .iter()
            .flat_map(|&key| scopes.map(|scope| ess.get_scoped(StoreKey { scope, key }, 0)))
            .collect();
        (out, scratch, entries)
    }

    fn agree(code: &[u8], key_count: usize, scratch: &[u8], returned: bool, access: &Access) {
        let Ok(program) = decode(code, key_count) else { return };
        let compiled = compile(&program).expect("every decodable program compiles");
        let env = Env {
            node_id: 0x0102_0304_0506_0708,
            in_port: 3,
            out_port: 5,
            time_ns: 1_000,
            queue_depth: 7,
            packet_len: 100,
            in_profile: true,
            ..Env::default()
        };
        let want = one(Tier::Interpreter(&program), scratch, returned, access, &env);
        let got = one(Tier::Compiled(&program, &compiled), scratch, returned, access, &env);
        assert_eq!(got, want, "code {code:02x?}");
    }

    #[test]
    fn every_example_agrees_with_the_interpreter() {
        for source in [
            include_str!("../../../examples/wasp/count.s"),
            include_str!("../../../examples/wasp/collect.s"),
            include_str!("../../../examples/wasp/pathscan.s"),
            include_str!("../../../examples/wasp/trunk.s"),
            include_str!("../../../examples/wasp/advertise.s"),
            include_str!("../../../examples/wasp/nearest.s"),
            include_str!("../../../examples/wasp/jitter.s"),
            include_str!("../../../examples/wasp/ratectl.s"),
            include_str!("../../../examples/wasp/fwd.s"),
        ] {
            let code = assemble(source).unwrap().code;
            for returned in [false, true] {
                for words in [0, 1, 4, 16] {
                    agree(&code, 4, &vec![3u8; 8 * words], returned, &Access::default());
                }
            }
        }
    }

    #[test]
    fn registers_branches_and_faults_agree() {
        for source in [
            "imm a, 5\nimm b, 7\nadd\nst s.64[0], a\nsub\nst s.64[1], a\nmov b, a\nshl 3\nxor\nst s.64[2], a",
            "imm a, 5\nimm b, 7\ncgt\njt big\nimm a, 1\nbig:\nst s.64[0], a\nclt\njf no\ninc\nno:\nst s.64[1], a",
            "imm a, 65535\nshl 63\nshr 1\nnot\nmin\nst s.64[0], a\nmax\nswap\ndec\nst s.64[1], a",
            "lookup k0\nst s.64[0], a\nreturn",
            "map k1\nld a, m.64[3]\nst s.64[0], a\nst m.64[0], a",
            "imm a, 9\ninsert k0\nimm b, 200\nstx s.8[b+0], a",
            "ld a, h.8[9]\nld b, e.time\nadd\nst s.64[0], a\nclr\ncnz\njt x\ndrop\nx:\nfwd",
        ] {
            let code = assemble(source).unwrap().code;
            let protected = Access {
                scopes: [Scope::Public, Scope::Protected, Scope::Public, Scope::Public],
                ..Access::default()
            };
            for access in [Access::default(), protected, Access { admin: true, ..protected }] {
                for returned in [false, true] {
                    agree(&code, 4, &[0x5a; 24], returned, &access);
                }
            }
        }
    }

    proptest::proptest! {
        /// Any decodable program: the machine code and the interpreter give the same outcome
        /// (fate, fault and its byte, steps, store reads and writes), the same scratchpad and
        /// the same store.
        #[test]
        fn random_programs_agree_with_the_interpreter(
            code in proptest::collection::vec(proptest::num::u8::ANY, 0..=64),
            key_count in 0usize..=4,
            words in 0usize..=4,
            returned in proptest::bool::ANY,
            admin in proptest::bool::ANY,
            protected in proptest::bool::ANY,
        ) {
            let scope = if protected { Scope::Protected } else { Scope::Public };
            let access = Access { scopes: [Scope::Public, scope, Scope::Public, Scope::Public], admin, admission: None };
            agree(&code, key_count, &vec![0x33u8; 8 * words], returned, &access);
        }
    }

    /// A valid program from random bytes, two per instruction (kind, operand), weighted
    /// towards register work and in-bounds accesses (random opcodes are mostly memory
    /// accesses that fault at once); jumps point at a later instruction or the end.
    fn valid_code(bytes: &[u8]) -> Vec<u8> {
        use crate::isa::{Bank, Mem, Width, MAX_INSN_LEN};
        let mut insns = Vec::new();
        let mut len = 0;
        if bytes.first().is_some_and(|b| b & 1 == 1) {
            // Registers loaded from the scratchpad: large values, both halves of the range.
            for reg in [Reg::A, Reg::B] {
                let mem = Mem { bank: Bank::Scratch, width: Width::W64, index: reg as u8 };
                insns.push((Insn::Ld { reg, mem }, 0));
                len += 2;
            }
        }
        if bytes.get(1).is_some_and(|b| b & 1 == 1) {
            insns.push((Insn::Map(1), 0));
            len += 1;
        }
        for pair in bytes.chunks_exact(2) {
            let (kind, v) = (pair[0], pair[1]);
            let mem = Mem {
                bank: Bank::ALL[usize::from(v >> 6)],
                width: Width::ALL[usize::from(v >> 4) & 3],
                index: v % 5,
            };
            let insn = match kind % 16 {
                0..=3 => Insn::Alu(AluOp::ALL[usize::from(v) % AluOp::ALL.len()]),
                4 => Insn::Imm {
                    reg: if v & 1 == 0 { Reg::A } else { Reg::B },
                    value: u16::from(v) << (v % 9),
                },
                5 => {
                    if v & 1 == 0 {
                        Insn::Shl(v % 64)
                    } else {
                        Insn::Shr(v % 64)
                    }
                }
                6 => Insn::AddI(v),
                7 | 8 => Insn::Cmp(Cond::ALL[usize::from(v) % Cond::ALL.len()]),
                9 | 10 => Insn::Jump {
                    when: [JumpWhen::Always, JumpWhen::IfTrue, JumpWhen::IfFalse]
                        [usize::from(v) % 3],
                    offset: 0,
                },
                11 => Insn::Ld { reg: if v & 8 == 0 { Reg::A } else { Reg::B }, mem },
                // Stores mostly where they are allowed: a fault hides what came before it.
                12 | 13 => {
                    let bank =
                        [Bank::Scratch, Bank::Scratch, Bank::Map, mem.bank][usize::from(v >> 6)];
                    match kind >> 6 {
                        0 => Insn::Ldx { mem },
                        1 => Insn::Stx { mem: Mem { bank, ..mem } },
                        _ => Insn::St { mem: Mem { bank, ..mem } },
                    }
                }
                14 => [Insn::Lookup(v % 4), Insn::Insert(v % 4), Insn::Map(v % 4)]
                    [usize::from(v >> 2) % 3],
                _ => [Insn::Fwd, Insn::Drop, Insn::Return, Insn::Nop, Insn::SubI(v)]
                    [usize::from(v) % 5],
            };
            let mut buf = [0u8; MAX_INSN_LEN];
            let size = insn.encode(&mut buf);
            if len + size > MAX_CODE {
                break;
            }
            len += size;
            insns.push((insn, v));
        }
        let mut starts = Vec::new();
        let mut code = Vec::new();
        for (insn, _) in &insns {
            starts.push(code.len());
            let mut buf = [0u8; MAX_INSN_LEN];
            let n = insn.encode(&mut buf);
            code.extend_from_slice(&buf[..n]);
        }
        starts.push(code.len());
        for (i, (insn, v)) in insns.iter().enumerate() {
            if let Insn::Jump { when, .. } = *insn {
                let later = &starts[i + 1..];
                let target = later[usize::from(*v) % later.len().min(6)];
                let offset = (target - (starts[i] + 2)) as i8;
                let mut buf = [0u8; MAX_INSN_LEN];
                let n = Insn::Jump { when, offset }.encode(&mut buf);
                code[starts[i]..starts[i] + n].copy_from_slice(&buf[..n]);
            }
        }
        code
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        /// As above, with programs that decode (most random bytes do not).
        #[test]
        fn random_valid_programs_agree_with_the_interpreter(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..=128),
            scratch in proptest::collection::vec(proptest::num::u8::ANY, 0..=8).prop_map(|w| {
                w.iter().flat_map(|&b| [b.rotate_left(1), !b, 0x80, b, 0, 1, b, 0xff]).collect::<Vec<u8>>()
            }),
            returned in proptest::bool::ANY,
            admin in proptest::bool::ANY,
            protected in proptest::bool::ANY,
        ) {
            let code = valid_code(&bytes);
            proptest::prop_assert!(decode(&code, 4).is_ok(), "the generator made {code:02x?}");
            let scope = if protected { Scope::Protected } else { Scope::Public };
            let access = Access { scopes: [Scope::Public, scope, Scope::Public, Scope::Public], admin, admission: None };
            agree(&code, 4, &scratch, returned, &access);
        }
    }

    /// Paced, the control thread compiles one program per interval; requests whose machine
    /// code is kept are answered at once.
    #[test]
    fn paced_serving_compiles_one_program_per_interval() {
        let queue = CompileQueue::default();
        let codes: Vec<Vec<u8>> =
            (0..3).map(|n| assemble(&format!("imm a, {n}\nfwd")).unwrap().code).collect();
        let cells: Vec<_> = codes.iter().map(|c| queue.request(c, 0).unwrap()).collect();
        let start = Instant::now();
        assert_eq!(queue.serve_paced(start), 1);
        assert_eq!(queue.serve_paced(start + COMPILE_INTERVAL / 2), 0, "not yet");
        let again = queue.request(&codes[0], 0).unwrap();
        assert_eq!(queue.serve_paced(start + COMPILE_INTERVAL / 2), 0, "kept, but queued behind");
        assert_eq!(queue.serve_paced(start + COMPILE_INTERVAL), 1);
        assert_eq!(queue.serve_paced(start + 2 * COMPILE_INTERVAL), 2, "one compiled, one kept");
        assert!(cells.iter().chain([&again]).all(|cell| matches!(cell.get(), Some(Some(_)))));
        assert_eq!(queue.stats().compiled, 3);
    }

    #[test]
    fn the_queue_compiles_once_and_answers_every_asker() {
        let queue = CompileQueue::default();
        let code = assemble(include_str!("../../../examples/wasp/count.s")).unwrap().code;
        let first = queue.request(&code, 1).unwrap();
        let second = queue.request(&code, 1).unwrap();
        let refused = queue.request(&[0xff], 0).unwrap();
        assert!(first.get().is_none(), "nothing before the control thread serves");
        assert_eq!(queue.serve(8), 3);
        let (a, b) =
            (first.get().unwrap().clone().unwrap(), second.get().unwrap().clone().unwrap());
        assert!(Arc::ptr_eq(&a, &b), "the second asker gets the kept machine code");
        assert!(
            matches!(refused.get(), Some(None)),
            "an undecodable program is answered with none"
        );
        let stats = queue.stats();
        assert_eq!((stats.compiled, stats.failed), (1, 0));
        assert!(stats.compile_ns > 0);
    }
}
