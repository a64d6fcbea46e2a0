//! hotplane-control: how new code reaches a running data plane. The update envelope (byte
//! format, BLAKE3 keyed MAC checked before anything is parsed, per-key sequence numbers against
//! replay, fragmentation with reassembly limits and timeouts), acknowledgements, and the types
//! and client of the local control API.
//!
//! Applying an update to slots is the binary's job (it knows the program kinds); this crate
//! depends on `hotplane-core` only and must never depend on a program kind or on I/O ports.

pub mod ack;
pub mod api;
pub mod envelope;
pub mod inband;
pub mod receiver;

pub use ack::{Ack, AckStatus};
pub use envelope::{Flags, Kind, Target, TargetParseError, UpdateHeader, WorkerScope};
pub use receiver::{Reason, Received, Receiver, ReceiverConfig, Refusal, Update};

/// Parse a 32-byte key given as 64 hex digits.
pub fn parse_key(hex_text: &str) -> Result<[u8; 32], String> {
    let bytes = hex::decode(hex_text.trim()).map_err(|e| format!("key is not hex: {e}"))?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("key must be 32 bytes (64 hex digits), got {}", b.len()))
}
