//! The guard in front of a specialised eBPF program: the packet facts the specialisation can
//! have relied on ([`PacketGuard`], shared with the P4 side in `hotplane-core`), and the map
//! contents it was specialised to ([`MapPin`]s, `super::mapconst`). A packet that fails either
//! runs the original program.

use crate::jit::guard::EntryGuard;
use crate::maps::MapPin;
use crate::program::GuardPlan;
pub use hotplane_core::shape::{GuardWord, PacketGuard};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;

use super::shape::PacketShape;

/// What a packet must satisfy to run the specialised program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Guard {
    #[serde(flatten)]
    packet: PacketGuard,
    /// Map contents the program was specialised to: each must be unwritten since its
    /// snapshot.
    #[serde(skip)]
    pins: Vec<MapPin>,
}

impl Guard {
    /// Check `shape`'s length and its facts at the offsets in `bytes` (all of them if `None`).
    pub fn from_shape(shape: &PacketShape, bytes: Option<&BTreeSet<u16>>) -> Guard {
        Guard { packet: PacketGuard::from_shape(shape, bytes), pins: Vec::new() }
    }

    /// This guard, also requiring `pins` to hold.
    pub fn with_pins(mut self, pins: Vec<MapPin>) -> Guard {
        self.pins = pins;
        self
    }

    pub fn pins(&self) -> &[MapPin] {
        &self.pins
    }

    /// The length check alone (trusted mode: the content facts are not checked, memory safety
    /// still is). Map pins stay: map contents are never the upstream's guarantee.
    pub fn length_only(&self) -> Guard {
        Guard { packet: self.packet.length_only(), pins: self.pins.clone() }
    }

    pub fn min_len(&self) -> u32 {
        self.packet.min_len()
    }

    pub fn max_len(&self) -> u32 {
        self.packet.max_len()
    }

    pub fn words(&self) -> &[GuardWord] {
        self.packet.words()
    }

    /// Bytes with at least one checked bit.
    pub fn checked_bytes(&self) -> usize {
        self.packet.checked_bytes()
    }

    /// This guard as machine code compiles it ([`crate::Program::load_guarded`]): each word
    /// as its narrowest compare. `None` when a word reaches past the shortest admitted packet
    /// (then the guard is checked here, in Rust, with its careful path).
    pub fn plan(&self) -> Option<GuardPlan> {
        self.packet.words_inside().then(|| GuardPlan {
            min_len: self.min_len(),
            max_len: self.max_len(),
            checks: (self.words().iter())
                .filter_map(|w| EntryGuard::check_of_word(u32::from(w.off), w.mask, w.value))
                .collect(),
            pins: self.pins.clone(),
        })
    }

    /// Whether `pkt` may run the specialised program.
    #[inline]
    pub fn admits(&self, pkt: &[u8]) -> bool {
        self.packet.admits(pkt) && self.pins.iter().all(MapPin::holds)
    }
}

impl fmt::Display for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.packet)?;
        for p in &self.pins {
            write!(f, "; map {} unwritten since write {}", p.map().name, p.generation())?;
        }
        Ok(())
    }
}
