//! Which engine runs a pipeline's blocks, and what the native one (the `jit` module, the
//! crate's `native` feature) shares with the rest of the crate whether it is built or not.

use crate::ir::Stmt;

/// How a pipeline runs its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Closures only (see [`crate::exec`]).
    Closures,
    /// Native code from Cranelift, with closures for what it does not cover.
    Native,
}

impl Engine {
    /// `Native` unless the environment says `HOTPLANE_P4_ENGINE=closures`, or this build has
    /// no native engine ([`Engine::NATIVE_BUILT`]).
    pub fn from_env() -> Self {
        if !Self::NATIVE_BUILT {
            return Engine::Closures;
        }
        match std::env::var("HOTPLANE_P4_ENGINE").as_deref() {
            Ok("closures") => Engine::Closures,
            _ => Engine::Native,
        }
    }

    /// Whether this build has the native engine (the crate's `native` feature, on by
    /// default). Without it, a pipeline asked to run natively runs on closures and
    /// [`crate::exec::Pipeline::native_error`] says why ([`NativeError::NotBuilt`]).
    pub const NATIVE_BUILT: bool = cfg!(feature = "native");
}

/// Why native code could not be generated; the program then runs on closures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NativeError {
    #[error("native code is not in this build (hotplane-p4 without its `native` feature)")]
    NotBuilt,
    #[error("native code needs a little-endian machine")]
    BigEndian,
    #[error("code generator setting {name}: {message}")]
    Setting { name: &'static str, message: String },
    #[error("Cranelift does not support this machine: {0}")]
    UnsupportedMachine(String),
    #[error("code generator: {0}")]
    Isa(String),
    #[error("the code generator panicked while starting")]
    PanickedStarting,
    /// A panic in the code generator: a bug in it, contained.
    #[error("code generation: the code generator panicked")]
    Panicked,
    #[error("code generation: a block could not be lowered")]
    NotLowered,
    #[error(
        "one function would hold {size} statements and select cases, more than the {max} \
         native code takes"
    )]
    TooLarge { size: usize, max: usize },
    /// The code generator refused a function or could not make it executable.
    #[error("code generation: {0}")]
    Codegen(String),
}

/// The most statements and select cases (parser states count one each) one native function
/// may hold; about a second of code generation at most.
pub const NATIVE_MAX_SIZE: usize = 4096;

/// How a whole packet's native code ([`Body::Whole`]) ended.
// Without the native engine nothing makes one (see `jit_off.rs`).
#[cfg_attr(not(feature = "native"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Whole {
    /// Multicast or drop: carry on as after ingress.
    AfterIngress,
    /// Deparsed into `st.out`.
    Deparsed,
    /// This many bytes of headers were written into the packet, ending where the payload
    /// starts.
    Placed(usize),
}

/// What one generated function runs.
#[cfg_attr(not(feature = "native"), allow(dead_code))]
pub(crate) enum Body<'s> {
    /// A block: its flow is the function's result.
    Block(&'s [Stmt]),
    /// The parser, then these controls, each to its end.
    Front(&'s [&'s [Stmt]]),
    /// These controls, each to its end; the deparser's output is cleared before the last.
    Back(&'s [&'s [Stmt]]),
    /// A whole unicast packet of a program whose egress is empty: `front` as [`Body::Front`];
    /// then, unless the packet is to be multicast or dropped (the function returns
    /// `AFTER_INGRESS` and Rust carries on from there), the checksum update and the
    /// deparser (in place when it can, see `deparse_in_place`).
    Whole { front: &'s [&'s [Stmt]], checksum: &'s [Stmt], deparser: &'s [Stmt] },
}
