//! hotplane-p4rt: hotplane as a P4Runtime v1.5 target, so that the field's controllers, test
//! suites and Mininet scripts drive it unchanged.
//!
//! The server is one more client of the engine's API, next to the control socket: it installs
//! pipelines with the engine's install request and writes the running program's tables
//! through the P4 kind. It runs on one thread of its own with a single-threaded async runtime,
//! so it never competes with the workers for more than that thread, and nothing it does makes
//! a worker wait (table writes are the tables' own lock-free publications).
//!
//! Without its `server` feature (on by default) the crate is the protocol's messages and the
//! translation between P4Runtime entities and a P4 pipeline's tables, without gRPC, the engine
//! or an async runtime (what the fuzz target links).
//!
//! It must not depend on the binary (`hotplane`) or on any program kind but P4.

#[cfg(feature = "server")]
pub mod arbitration;
pub mod bytes;
pub mod device;
pub mod digests;
pub mod entities;
pub mod idle;
pub mod packet_io;
pub mod pre;
pub mod profiles;
pub mod proto;
pub mod registers;
pub mod schema;
#[cfg(feature = "server")]
mod server;
#[cfg(feature = "server")]
pub mod service;
pub mod value_sets;

pub use device::DeviceProgram;
#[cfg(feature = "server")]
pub use server::*;
