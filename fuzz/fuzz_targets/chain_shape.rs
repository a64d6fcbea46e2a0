//! Packet shapes and guarantees as JSON (`hotplane ebpf shape --json`, a node's `[chain]
//! assume` file): arbitrary text must give a typed error, never a panic; what parses prints
//! back to the same object, and the lattice operations on it keep their laws.
#![no_main]

use hotplane_ebpf::chain::{Guarantee, PacketShape};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(shape) = PacketShape::from_json(text) {
        let back = PacketShape::from_json(&shape.to_json()).expect("a printed shape parses");
        assert_eq!(back, shape);
        assert!(shape.implies(&shape.join(&PacketShape::top())));
        let _ = shape.to_string();
    }
    if let Ok(g) = Guarantee::from_json(text) {
        let back = Guarantee::from_json(&g.to_json()).expect("a printed guarantee parses");
        assert_eq!(back, g);
        assert!(g.implies(&g.join(&g)));
        if let Some(hull) = g.hull() {
            assert!(g.implies(&Guarantee::of(hull)));
        }
        let _ = g.to_string();
    }
});
