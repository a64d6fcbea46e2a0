//! hotplane-ebpf: eBPF programs as hotplane stages. Loading (bytecode, ELF, C source), an
//! assembler and disassembler, a verifier, an interpreter (the reference semantics) and an x86-64
//! JIT, maps and helpers, and the XDP context that lets objects built with `clang -target bpf`
//! run unchanged.
//!
//! [`kind`] plugs eBPF into the engine as a program kind ([`hotplane_core::ProgramKind`]):
//! config section, stage specs, updates, map operations, counters.
//!
//! Depends on `hotplane-core` only; never on other program kinds, control or I/O.

pub mod asm;
pub mod cc;
pub mod chain;
pub mod conformance;
pub mod ctx;
pub mod elf;
pub mod env;
pub mod helpers;
pub mod insn;
pub mod interp;
pub mod jit;
pub mod kernel;
pub mod kind;
pub mod maps;
pub mod oracle;
pub mod program;
pub mod progs;
pub mod stage;
pub mod verifier;
pub mod xdp;

pub use insn::Insn;
