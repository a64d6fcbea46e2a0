//! Random ELF objects through the loader and the verifier: never a panic; whatever loads
//! and verifies must behave the same on the interpreter and the JIT. The BTF layouts of its
//! maps show any bytes (the object's own data, cut anywhere) without a panic.
#![no_main]

#[path = "ebpf_common.rs"]
mod common;

use hotplane_ebpf::elf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = elf::load(data, None) else { return };
    for map in &spec.maps {
        if let Some(layout) = &map.layout {
            for l in layout.key.iter().chain(&layout.value) {
                for cut in [0, data.len() / 2, data.len()] {
                    let _ = l.format(&data[..cut]);
                }
            }
        }
    }
    let mut frame = vec![0u8; 64];
    frame[12] = 0x08; // IPv4
    frame[14] = 0x45;
    frame[23] = 17; // UDP
    common::differential(&spec, &frame);
});
