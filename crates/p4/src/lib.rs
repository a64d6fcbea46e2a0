//! hotplane-p4: P4_16 programs for the v1model architecture, run by hotplane directly.
//!
//! The front-end is self-contained: a preprocessor with `core.p4` and `v1model.p4` built in
//! ([`preprocess`]), a lexer ([`lexer`]), a parser to a syntax tree ([`parser`], [`ast`]), and
//! diagnostics with file, line and column ([`diag`]); name resolution and type checking lower
//! the program to an IR of storage locations and known externs ([`lower`], [`ir`], [`types`]).
//! Nothing here needs p4c installed.
//!
//! This crate builds on `hotplane-core` (packets, stages) and `hotplane-tables` (the match-action
//! tables behind P4 tables). It must never depend on I/O, on the control protocol, or on another
//! program kind (eBPF, Lua): P4 externs reach those through slots the binary wires in.

pub mod ast;
pub mod diag;
pub mod ir;
pub mod lexer;
pub mod lower;
pub mod parser;
pub mod preprocess;
pub mod types;

use diag::{CompileError, SourceMap};
use preprocess::SourceLoader;

/// Preprocess and parse a program. `name` is used in diagnostics and to resolve relative
/// includes; `defines` are `-D` style macros.
pub fn parse_program(
    sources: &mut SourceMap,
    loader: &mut dyn SourceLoader,
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
) -> Result<ast::Program, CompileError> {
    let tokens = preprocess::preprocess(sources, loader, name, text, defines)
        .map_err(|d| CompileError::new(sources, vec![d]))?;
    parser::parse(tokens).map_err(|d| CompileError::new(sources, vec![d]))
}

/// Preprocess, parse, check and lower a v1model program to the IR.
pub fn check_program(
    sources: &mut SourceMap,
    loader: &mut dyn SourceLoader,
    name: &str,
    text: &str,
    defines: &[(&str, &str)],
) -> Result<ir::Program, CompileError> {
    let ast = parse_program(sources, loader, name, text, defines)?;
    lower::lower(&ast).map_err(|d| CompileError::new(sources, vec![d]))
}
