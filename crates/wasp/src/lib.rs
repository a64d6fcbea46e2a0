//! hotplane-wasp: active packets after WASP (Martin & Leduc). A packet carries a short bytecode
//! program (at most 64 bytes), up to four declared 64-bit keys and a sender-sized scratchpad in
//! a shim behind the IP header; every node runs the program in a tiny virtual processor (VPU)
//! against an ephemeral state store (ESS) whose entries live a fixed time. The program can only
//! change its scratchpad and the entries of its declared keys, and choose the packet's fate
//! (forward, drop, return to the source once). Execution takes at most one step per code byte.
//!
//! The byte-level specification is `docs/wasp.md`. Modules: [`wire`] (the shim as a zero-copy
//! view and its `Repr`), [`isa`] (instructions and their encoding), [`decode`] (decoder and
//! validator), [`vpu`] (the interpreter), [`ess`] (the store), [`asm`] (assembler and
//! disassembler), `jit` (the compiled tier, feature `jit`), [`carriage`] (finding the shim
//! behind IPv4/IPv6 or in UDP), [`filter`] (one packet from shim bytes to fate), [`demo`] (the
//! active packet of `hotplane demo`).
//!
//! This crate must depend on no hotplane crate but `hotplane-core` and `hotplane-tables` (its
//! huge-page word arrays); never on the engine, the binary or another program kind. It must
//! never panic on packet bytes or program text.

pub mod admin;
pub mod asm;
pub mod cache;
pub mod carriage;
pub mod decode;
pub mod demo;
pub mod error;
pub mod ess;
pub mod filter;
pub mod frame;
pub mod isa;
#[cfg(feature = "jit")]
pub mod jit;
pub mod kind;
pub mod stage;
#[cfg(feature = "cli")]
pub mod tool;
pub mod vpu;
pub mod wire;

pub use decode::{decode, DecodeError, Program};
pub use error::{Fault, Reject};
pub use ess::{Ess, EssConfig, EssStats};
pub use filter::{process, FilterConfig, OnFault, Processed};
pub use vpu::{run, Env, Fate, Outcome};
pub use wire::{WaspPacket, WaspRepr};
