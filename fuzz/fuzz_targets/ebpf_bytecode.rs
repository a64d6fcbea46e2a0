//! Random bytecode through the verifier; whatever it accepts must behave the same on the
//! interpreter and the JIT (and never crash either).
#![no_main]

#[path = "ebpf_common.rs"]
mod common;

use hotplane_ebpf::insn::decode_bytes;
use hotplane_ebpf::program::ProgramSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // First byte: packet length; the rest: instructions.
    let Some((&len, code)) = data.split_first() else { return };
    let code = &code[..code.len() / 8 * 8];
    let Ok(insns) = decode_bytes(code) else { return };
    let spec = ProgramSpec { name: "fuzz".into(), insns, maps: common::fuzz_maps() };
    let frame: Vec<u8> = (0..len.max(14)).map(|i| i.wrapping_mul(37)).collect();
    common::differential(&spec, &frame);
});
