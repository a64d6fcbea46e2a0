//! Bytecode through the verifier: raw instruction words, or programs built by the structured
//! generator (`ebpf_gen.rs`: the encodings behind the verifier's past holes). Whatever the
//! verifier accepts must pass the memory-safety oracle and behave the same on the interpreter
//! and the JIT (and never crash either).
#![no_main]

#[path = "ebpf_common.rs"]
mod common;
#[path = "ebpf_gen.rs"]
mod gen;

use hotplane_ebpf::insn::decode_bytes;
use hotplane_ebpf::program::ProgramSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // First byte: packet length; second: 0 for raw instructions (the rest of the input),
    // anything else for a generated program (its choices are the rest of the input).
    let [len, mode, rest @ ..] = data else { return };
    let insns = if *mode == 0 {
        let Ok(insns) = decode_bytes(&rest[..rest.len() / 8 * 8]) else { return };
        insns
    } else {
        gen::generate(rest)
    };
    let spec = ProgramSpec { name: "fuzz".into(), insns, maps: common::fuzz_maps() };
    let frame: Vec<u8> = (0..(*len).max(14)).map(|i| i.wrapping_mul(37)).collect();
    common::differential(&spec, &frame);
});
