//! hotplane-p4: P4_16 programs for the v1model architecture, run by hotplane directly.
//!
//! The front-end is self-contained: a preprocessor with `core.p4` and `v1model.p4` built in
//! ([`preprocess`]), a lexer ([`lexer`]), a parser to a syntax tree ([`parser`], [`ast`]), and
//! diagnostics with file, line and column ([`diag`]); name resolution and type checking lower
//! the program to an IR of storage locations and known externs ([`lower`], [`ir`], [`types`]).
//! Programs come from outside (updates, files), so what one can make the front-end and the
//! node do is bounded by [`budget::Limits`]: a program over a budget is refused with an error
//! naming it, never a crash, a hang or unbounded memory. Nothing here needs p4c installed.
//! [`exec`] compiles the IR to machine code with Cranelift (a library, linked in; no compiler
//! is run; the `native` feature, on by default) and to closures where it does not reach.
//!
//! This crate builds on `hotplane-core` (packets, stages) and `hotplane-tables` (the match-action
//! tables behind P4 tables). It must never depend on I/O, on the control protocol, or on another
//! program kind (eBPF, Lua): P4 externs reach those through slots the engine wires in, by
//! `hotplane_core`'s calling convention ([`hotplane_core::Stage::run_one`]). [`stage`] is the
//! P4 program as a pipeline stage, [`kind`] the P4 kind the engine registers, [`control`] the
//! replacement of a running program and its tables' control operations, [`cli`]
//! simple_switch_CLI's command language over a running program.

pub mod ast;
pub mod budget;
pub mod chain;
pub mod check;
pub mod cli;
pub mod control;
pub mod diag;
pub mod exec;
pub mod ir;
pub mod kind;
pub mod lexer;
pub mod lower;
pub mod naming;
pub mod p4info;
pub mod parser;
pub mod preprocess;
pub mod runtime;
pub mod stage;
pub mod stf;
pub mod types;
pub mod v1model;

use budget::{Budget, Limits};
use diag::{CompileError, SourceMap};
use preprocess::SourceLoader;

/// The stack the front-end and code generation run on, whatever thread calls them. Both
/// recurse on the program's nesting; the budgets ([`budget::Limits::nesting_depth`],
/// `call_depth`) keep a program at every limit within a small part of this even in an
/// unoptimised build (which overflowed 2 MiB; optimised, 512 KiB is enough). It is address
/// space: only what a compilation touches becomes memory.
pub const COMPILE_STACK: usize = 32 << 20;

/// No thread could be started to compile on (the system is out of threads or memory); the
/// text is the system's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot start a thread to compile on: {0}")]
pub struct CompileThreadError(pub String);

/// Run `f` on a thread with [`COMPILE_STACK`] bytes of stack and return what it returns (a
/// panic in `f` carries on in the caller); `Err` if no thread can be started.
pub fn on_compile_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, CompileThreadError> {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("hotplane-p4-compile".into())
            .stack_size(COMPILE_STACK)
            .spawn_scoped(scope, f)
            .map_err(|e| CompileThreadError(e.to_string()))?;
        Ok(thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

/// Preprocess and parse a program. `name` is used in diagnostics and to resolve relative
/// includes; `defines` are `-D` style macros.
pub fn parse_program(
    sources: &mut SourceMap,
    loader: &mut dyn SourceLoader,
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
) -> Result<ast::Program, CompileError> {
    parse_program_with(sources, loader, name, text, defines, &Limits::default())
}

/// [`parse_program`] under `limits`, on a thread with [`COMPILE_STACK`].
pub fn parse_program_with(
    sources: &mut SourceMap,
    loader: &mut dyn SourceLoader,
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
    limits: &Limits,
) -> Result<ast::Program, CompileError> {
    on_compile_stack(|| parse_here(sources, loader, name, text, defines, limits))
        .map_err(|e| CompileError::plain(e.to_string()))?
}

fn parse_here(
    sources: &mut SourceMap,
    loader: &mut dyn SourceLoader,
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
    limits: &Limits,
) -> Result<ast::Program, CompileError> {
    if let Err(exceeded) = limits.check(Budget::SourceBytes, text.len() as u64) {
        return Err(CompileError::over_budget(format!("{name}: program too large"), exceeded));
    }
    let tokens = preprocess::preprocess_with(sources, loader, name, text, defines, limits)
        .map_err(|d| CompileError::new(sources, vec![d]))?;
    parser::parse_with(tokens, limits).map_err(|d| CompileError::new(sources, vec![d]))
}

/// Preprocess, parse, check and lower a v1model program to the IR.
pub fn check_program(
    sources: &mut SourceMap,
    loader: &mut dyn SourceLoader,
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
) -> Result<ir::Program, CompileError> {
    check_program_with(sources, loader, name, text, defines, &Limits::default())
}

/// [`check_program`] under `limits`: a program over any of them is refused with an error
/// naming the budget ([`CompileError::exceeded`]), before it can exhaust the stack, memory
/// or time of the thread compiling it. Runs on a thread with [`COMPILE_STACK`].
pub fn check_program_with(
    sources: &mut SourceMap,
    loader: &mut dyn SourceLoader,
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
    limits: &Limits,
) -> Result<ir::Program, CompileError> {
    on_compile_stack(|| {
        let ast = parse_here(sources, loader, name, text, defines, limits)?;
        check::program(&ast).map_err(|d| CompileError::new(sources, vec![d]))?;
        lower::lower_with(&ast, limits).map_err(|d| CompileError::new(sources, vec![d]))
    })
    .map_err(|e| CompileError::plain(e.to_string()))?
}

/// Read, check and lower a program file (includes resolve next to it, then in
/// `include_dirs`, then to the built-in `core.p4`/`v1model.p4`/`hotplane.p4`).
pub fn compile_file(
    path: &std::path::Path,
    include_dirs: &[std::path::PathBuf],
    defines: &[(&str, &str)],
) -> Result<ir::Program, CompileError> {
    compile_file_with(path, include_dirs, defines, &Limits::default())
}

/// [`compile_file`] under `limits`.
pub fn compile_file_with(
    path: &std::path::Path,
    include_dirs: &[std::path::PathBuf],
    defines: &[(&str, &str)],
    limits: &Limits,
) -> Result<ir::Program, CompileError> {
    let mut sources = SourceMap::default();
    let name = path.display().to_string();
    let text = preprocess::read_bounded(path, limits.source_bytes)
        .map_err(|e| CompileError::plain(format!("{name}: {e}")))?
        .ok_or_else(|| {
            CompileError::over_budget(
                format!("{name}: program too large"),
                limits.exceeded(Budget::SourceBytes),
            )
        })?;
    let mut loader = preprocess::FsLoader { include_dirs: include_dirs.to_vec() };
    check_program_with(&mut sources, &mut loader, &name, &text, defines, limits)
}

/// Check and lower a program given as text, as an update carries it: includes resolve only to
/// the built-in `core.p4`/`v1model.p4`/`hotplane.p4`, never to files on this node.
pub fn compile_source(
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
) -> Result<ir::Program, CompileError> {
    compile_source_with(name, text, defines, &Limits::default())
}

/// [`compile_source`] under `limits`.
pub fn compile_source_with(
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
    limits: &Limits,
) -> Result<ir::Program, CompileError> {
    let mut sources = SourceMap::default();
    check_program_with(&mut sources, &mut preprocess::BuiltinOnly, name, text, defines, limits)
}
