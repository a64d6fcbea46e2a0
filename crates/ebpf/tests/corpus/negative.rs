//! The verifier's negative corpus: programs that touch (or could touch) memory outside packet,
//! stack, context and map values, leak pointers, break the calling convention, or never end.
//! Each names the class of hole it probes and must be refused at the stated instruction with a
//! reason containing the stated words (`negative.rs`); `kernel_verifier.rs` feeds the same
//! corpus to Linux.
//!
//! Programs are assembly with `;` between instructions, or `raw:` followed by instruction words
//! (for encodings the assembler will not produce).

use hotplane_ebpf::asm::assemble;
use hotplane_ebpf::insn::Insn;
use hotplane_ebpf::maps::MapKind;
use hotplane_ebpf::program::{MapSpec, ProgramSpec};

pub struct Case {
    pub class: &'static str,
    pub name: &'static str,
    pub program: &'static str,
    /// The instruction the refusal names.
    pub pc: usize,
    /// Words the refusal's reason contains.
    pub reason: &'static str,
}

/// `data` and `data_end` in r2 and r3 (next instruction: 2).
macro_rules! pkt {
    () => {
        "ldxw r2, [r1+0]; ldxw r3, [r1+4]; "
    };
}
/// ... and 14 bytes checked through r4, else to `out` (next instruction: 5).
macro_rules! check14 {
    () => {
        concat!(pkt!(), "mov r4, r2; add r4, 14; jgt r4, r3, out; ")
    };
}
/// A lookup of key 0 in the hash map 0 (next instruction: 6); r0 may be null.
macro_rules! lookup {
    () => {
        "stw [r10-4], 0; mov r2, r10; add r2, -4; lddw r1, map 0; call 1; "
    };
}
/// ... with the null check, to `out` (next instruction: 7).
macro_rules! lookup_checked {
    () => {
        concat!(lookup!(), "jeq r0, 0, out; ")
    };
}
/// The end of a program with an `out` label.
macro_rules! out {
    () => {
        "out: mov r0, 1; exit"
    };
}

/// Maps every case may use: 0 hash (4-byte keys, 8-byte values), 1 array (16-byte values),
/// 2 devmap, 3 per-CPU array.
pub fn maps() -> Vec<MapSpec> {
    let m = MapSpec::new;
    vec![
        m("hash", MapKind::Hash, 4, 8, 16),
        m("array", MapKind::Array, 4, 16, 4),
        m("devmap", MapKind::DevMap, 4, 4, 4),
        m("percpu", MapKind::PerCpuArray, 4, 8, 2),
    ]
}

pub fn program(c: &Case) -> Vec<Insn> {
    if let Some(words) = c.program.strip_prefix("raw:") {
        return words
            .split_whitespace()
            .map(|w| {
                let w = w.strip_prefix("0x").unwrap_or(w);
                Insn::from_u64(u64::from_str_radix(w, 16).unwrap_or_else(|e| panic!("{w}: {e}")))
            })
            .collect();
    }
    // `label: insn` puts the label on a line of its own, as the assembler wants.
    let mut text = String::new();
    for part in c.program.split(';').map(str::trim) {
        match part.split_once(':') {
            Some((label, rest))
                if label.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') =>
            {
                text.push_str(&format!("{label}:\n{}\n", rest.trim()));
            }
            _ => text.push_str(&format!("{part}\n")),
        }
    }
    assemble(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", c.name))
}

pub fn spec(c: &Case) -> ProgramSpec {
    ProgramSpec { name: c.name.into(), insns: program(c), maps: maps() }
}

#[rustfmt::skip]
pub const CASES: &[Case] = &[
    // --- packet bounds ---
    Case { class: "packet bounds", name: "read without a check", program: concat!(pkt!(), "ldxb r0, [r2+0]; exit"), pc: 2, reason: "beyond the 0 bytes checked" },
    Case { class: "packet bounds", name: "read one past the check", program: concat!(check14!(), "ldxb r0, [r2+14]; exit; ", out!()), pc: 5, reason: "offset 14 (size 1) is beyond the 14 bytes" },
    Case { class: "packet bounds", name: "wide read crossing the check", program: concat!(check14!(), "ldxdw r0, [r2+8]; exit; ", out!()), pc: 5, reason: "offset 8 (size 8)" },
    Case { class: "packet bounds", name: "read before data", program: concat!(check14!(), "ldxb r0, [r2-1]; exit; ", out!()), pc: 5, reason: "offset -1" },
    Case { class: "packet bounds", name: "write one past the check", program: concat!(check14!(), "stb [r2+14], 1; mov r0, 2; exit; ", out!()), pc: 5, reason: "beyond the 14 bytes" },
    Case { class: "packet bounds", name: "check in the wrong direction", program: concat!(pkt!(), "mov r4, r2; add r4, 14; jle r4, r3, out; ldxb r0, [r2+0]; exit; ", out!()), pc: 5, reason: "beyond the 0 bytes" },
    Case { class: "packet bounds", name: "data_end on the wrong side", program: concat!(pkt!(), "mov r4, r2; add r4, 14; jgt r3, r4, out; ldxb r0, [r2+0]; exit; ", out!()), pc: 5, reason: "beyond the 0 bytes" },
    Case { class: "packet bounds", name: "pointer moved after the check", program: concat!(check14!(), "add r2, 1; ldxb r0, [r2+13]; exit; ", out!()), pc: 6, reason: "offset 14" },
    Case { class: "packet bounds", name: "variable offset needs a new check", program: concat!(check14!(), "ldxb r5, [r2+0]; add r2, r5; ldxb r0, [r2+0]; exit; ", out!()), pc: 7, reason: "beyond the 0 bytes" },
    Case { class: "packet bounds", name: "unbounded variable offset", program: concat!(check14!(), "ldxdw r5, [r2+0]; add r2, r5; mov r0, 0; exit; ", out!()), pc: 6, reason: "not bounded" },
    Case { class: "packet bounds", name: "unbounded variable offset from a wide value", program: concat!(check14!(), "ldxw r5, [r2+0]; lsh r5, 20; add r2, r5; mov r0, 0; exit; ", out!()), pc: 7, reason: "not bounded" },
    Case { class: "packet bounds", name: "negative offset paid by a variable", program: concat!(pkt!(), "mov r4, r2; add r4, 28; jgt r4, r3, out; ldxb r5, [r2+0]; add r5, 512; add r2, r5; ldxb r0, [r2-512]; exit; ", out!()), pc: 8, reason: "offset -512" },
    Case { class: "packet bounds", name: "negative write paid by a variable", program: concat!(pkt!(), "mov r4, r2; add r4, 28; jgt r4, r3, out; ldxb r5, [r2+0]; add r5, 8; add r2, r5; stb [r2-8], 1; mov r0, 2; exit; ", out!()), pc: 8, reason: "offset -8" },
    Case { class: "packet bounds", name: "data_end dereferenced", program: concat!(pkt!(), "ldxb r0, [r3+0]; exit"), pc: 2, reason: "only be compared" },
    Case { class: "packet bounds", name: "data_end moved", program: concat!(pkt!(), "add r3, -1; mov r0, 0; exit"), pc: 2, reason: "arithmetic on this pointer is not allowed" },
    Case { class: "packet bounds", name: "data_meta dereferenced", program: "ldxw r2, [r1+8]; ldxb r0, [r2+0]; exit", pc: 1, reason: "only be compared" },
    Case { class: "packet bounds", name: "stale packet pointer after adjust_head", program: concat!("mov r6, r1; ldxw r2, [r6+0]; ldxw r3, [r6+4]; mov r4, r2; add r4, 14; jgt r4, r3, out; mov r7, r2; mov r1, r6; mov r2, 4; call 44; ldxb r0, [r7+0]; exit; ", out!()), pc: 10, reason: "memory access through r7" },
    Case { class: "packet bounds", name: "variable subtracted from a packet pointer", program: concat!(check14!(), "ldxb r5, [r2+0]; sub r2, r5; ldxb r0, [r2+0]; exit; ", out!()), pc: 6, reason: "subtracting a variable" },
    Case { class: "packet bounds", name: "atomic on packet data", program: concat!(check14!(), "mov r5, 1; lock add [r2+0], r5; mov r0, 2; exit; ", out!()), pc: 6, reason: "atomic operations on packet data" },
    Case { class: "packet bounds", name: "32-bit bounds check", program: concat!(pkt!(), "mov r4, r2; add r4, 14; jgt32 r4, r3, out; ldxb r0, [r2+0]; exit; ", out!()), pc: 4, reason: "depends on where memory lies" },
    Case { class: "packet bounds", name: "unchecked packet for a helper", program: concat!(pkt!(), "mov r1, r2; mov r2, 4; mov r3, 0; mov r4, 0; mov r5, 0; call 28; exit"), pc: 7, reason: "bytes of packet checked against data_end" },
    // --- stack bounds ---
    Case { class: "stack bounds", name: "below the frame", program: "stdw [r10-520], 0; mov r0, 0; exit", pc: 0, reason: "outside the 512-byte stack" },
    Case { class: "stack bounds", name: "at the frame pointer", program: "stdw [r10+0], 0; mov r0, 0; exit", pc: 0, reason: "outside the 512-byte stack" },
    Case { class: "stack bounds", name: "one byte below", program: "stb [r10-513], 0; mov r0, 0; exit", pc: 0, reason: "outside the 512-byte stack" },
    Case { class: "stack bounds", name: "moved stack pointer", program: "mov r2, r10; add r2, -512; ldxdw r0, [r2-8]; exit", pc: 2, reason: "outside the 512-byte stack" },
    Case { class: "stack bounds", name: "above the frame", program: "ldxw r0, [r10+4]; exit", pc: 0, reason: "outside the 512-byte stack" },
    Case { class: "stack bounds", name: "variable stack offset", program: "ldxw r2, [r1+12]; and r2, 7; mov r3, r10; add r3, r2; mov r0, 0; exit", pc: 3, reason: "variable offsets into the context or the stack" },
    Case { class: "stack bounds", name: "far below the frame", program: "mov r2, r10; add r2, -600; stdw [r2+0], 1; mov r0, 0; exit", pc: 2, reason: "outside the 512-byte stack" },
    Case { class: "stack bounds", name: "map key crossing the frame top", program: "lddw r1, map 0; mov r2, r10; add r2, -2; call 1; mov r0, 0; exit", pc: 4, reason: "4 bytes of stack from offset -2" },
    Case { class: "stack bounds", name: "helper memory crossing the frame top", program: "stdw [r10-8], 0; mov r1, r10; add r1, -8; mov r2, 16; call 6; exit", pc: 4, reason: "16 bytes of stack from offset -8" },
    // --- uninitialised registers and stack ---
    Case { class: "uninitialised", name: "register", program: "mov r0, r5; exit", pc: 0, reason: "r5 is read before it is initialised" },
    Case { class: "uninitialised", name: "stack slot", program: "ldxdw r0, [r10-8]; exit", pc: 0, reason: "read before they are written" },
    Case { class: "uninitialised", name: "half-written stack slot", program: "stw [r10-8], 1; ldxdw r0, [r10-8]; exit", pc: 1, reason: "read before they are written" },
    Case { class: "uninitialised", name: "no return value", program: "exit", pc: 0, reason: "r0 is read before it is initialised" },
    Case { class: "uninitialised", name: "argument register after a helper", program: "call 8; mov r0, r1; exit", pc: 1, reason: "r1 is read before it is initialised" },
    Case { class: "uninitialised", name: "caller's r6 in a callee", program: "mov r6, 1; call local f; exit; f: mov r0, r6; exit", pc: 3, reason: "r6 is read before it is initialised" },
    Case { class: "uninitialised", name: "map key", program: "lddw r1, map 0; mov r2, r10; add r2, -4; call 1; mov r0, 0; exit", pc: 4, reason: "initialised bytes" },
    Case { class: "uninitialised", name: "compared register", program: "jeq r3, 0, +0; mov r0, 0; exit", pc: 0, reason: "r3 is read before it is initialised" },
    Case { class: "uninitialised", name: "atomic on fresh stack", program: "mov r2, 1; lock add [r10-8], r2; mov r0, 0; exit", pc: 1, reason: "atomic operation on uninitialised stack bytes" },
    Case { class: "uninitialised", name: "argument register after a local call", program: "call local f; mov r0, r2; exit; f: mov r0, 0; exit", pc: 1, reason: "r2 is read before it is initialised" },
    Case { class: "uninitialised", name: "helper memory", program: "mov r1, r10; add r1, -8; mov r2, 8; mov r3, 0; mov r4, 0; mov r5, 0; call 28; exit", pc: 6, reason: "initialised bytes" },
    Case { class: "uninitialised", name: "callee's fresh stack", program: "stdw [r10-8], 1; call local f; exit; f: ldxdw r0, [r10-8]; exit", pc: 3, reason: "read before they are written" },
    // --- pointer arithmetic ---
    Case { class: "pointer arithmetic", name: "multiply", program: "mov r2, r10; mul r2, 2; mov r0, 0; exit", pc: 1, reason: "is not allowed" },
    Case { class: "pointer arithmetic", name: "32-bit add", program: "mov r2, r10; add32 r2, 8; mov r0, 0; exit", pc: 1, reason: "32-bit arithmetic" },
    Case { class: "pointer arithmetic", name: "pointer plus pointer", program: "mov r2, r10; add r2, r10; mov r0, 0; exit", pc: 1, reason: "is not allowed" },
    Case { class: "pointer arithmetic", name: "difference of unrelated pointers", program: "mov r2, r10; sub r2, r1; mov r0, 0; exit", pc: 1, reason: "is not allowed" },
    Case { class: "pointer arithmetic", name: "mask", program: "mov r2, r10; and r2, -8; mov r0, 0; exit", pc: 1, reason: "is not allowed" },
    Case { class: "pointer arithmetic", name: "shift", program: "mov r2, r1; lsh r2, 1; mov r0, 0; exit", pc: 1, reason: "is not allowed" },
    Case { class: "pointer arithmetic", name: "negate", program: "mov r2, r1; neg r2; mov r0, 0; exit", pc: 1, reason: "is not allowed" },
    Case { class: "pointer arithmetic", name: "map pointer", program: "lddw r1, map 0; add r1, 8; mov r0, 0; exit", pc: 2, reason: "arithmetic on this pointer is not allowed" },
    Case { class: "pointer arithmetic", name: "maybe-null map value", program: concat!(lookup!(), "add r0, 8; mov r0, 0; exit"), pc: 6, reason: "arithmetic on this pointer is not allowed" },
    Case { class: "pointer arithmetic", name: "32-bit move", program: "mov32 r2, r10; mov r0, 0; exit", pc: 0, reason: "32-bit move would leak" },
    Case { class: "pointer arithmetic", name: "sign-extending move", program: "movsx3264 r2, r10; mov r0, 0; exit", pc: 0, reason: "sign-extending move of a pointer" },
    Case { class: "pointer arithmetic", name: "variable context offset", program: "ldxw r2, [r1+12]; and r2, 4; add r1, r2; mov r0, 0; exit", pc: 2, reason: "variable offsets into the context" },
    Case { class: "pointer arithmetic", name: "huge constant offset", program: "mov r2, r10; lddw r3, 0x40000000; add r2, r3; mov r0, 0; exit", pc: 3, reason: "pointer offset out of range" },
    Case { class: "pointer arithmetic", name: "offset of i64::MIN", program: "mov r2, r10; lddw r3, 0x8000000000000000; add r2, r3; mov r0, 0; exit", pc: 3, reason: "pointer offset out of range" },
    Case { class: "pointer arithmetic", name: "offset wrapping back into range", program: "mov r2, r10; lddw r3, 0x8000000000000000; add r2, r3; add r2, r3; ldxb r0, [r2-8]; exit", pc: 3, reason: "pointer offset out of range" },
    Case { class: "pointer arithmetic", name: "xor", program: "mov r2, r1; xor r2, 1; mov r0, 0; exit", pc: 1, reason: "is not allowed" },
    Case { class: "pointer arithmetic", name: "byte swap", program: "mov r2, r10; be64 r2; mov r0, 0; exit", pc: 1, reason: "is not allowed" },
    Case { class: "pointer arithmetic", name: "divide", program: "mov r2, r1; div r2, 2; mov r0, 0; exit", pc: 1, reason: "is not allowed" },
    // --- pointer leaks ---
    Case { class: "pointer leak", name: "stack pointer into a map value", program: concat!(lookup_checked!(), "stxdw [r0+0], r10; ", out!()), pc: 7, reason: "would leak it" },
    Case { class: "pointer leak", name: "packet pointer into the packet", program: concat!(check14!(), "stxdw [r2+0], r2; mov r0, 2; exit; ", out!()), pc: 5, reason: "would leak it" },
    Case { class: "pointer leak", name: "context into the packet", program: concat!(check14!(), "stxdw [r2+0], r1; mov r0, 2; exit; ", out!()), pc: 5, reason: "would leak it" },
    Case { class: "pointer leak", name: "return the stack pointer", program: "mov r0, r10; exit", pc: 1, reason: "it must return a scalar" },
    Case { class: "pointer leak", name: "return the context", program: "mov r0, r1; exit", pc: 1, reason: "it must return a scalar" },
    Case { class: "pointer leak", name: "return a packet pointer", program: concat!(pkt!(), "mov r0, r2; exit"), pc: 3, reason: "it must return a scalar" },
    Case { class: "pointer leak", name: "data slot pruning a spilled pointer", program: "ldxw r3, [r1+16]; jeq r3, 0, taken; stdw [r10-8], 0; mov r3, 0; ja join; taken: stxdw [r10-8], r10; mov r3, 0; join: ldxdw r0, [r10-8]; exit", pc: 8, reason: "it must return a scalar" },
    Case { class: "pointer leak", name: "half a data slot pruning a spilled pointer", program: "ldxw r3, [r1+16]; jeq r3, 0, taken; stw [r10-8], 0; mov r3, 0; ja join; taken: stxdw [r10-8], r10; mov r3, 0; join: ldxw r0, [r10-8]; exit", pc: 7, reason: "reading part of the pointer" },
    Case { class: "pointer leak", name: "pointer printed by trace_printk", program: "stdw [r10-8], 0; mov r1, r10; add r1, -8; mov r2, 8; mov r3, r10; call 6; exit", pc: 5, reason: "argument 3 (r3) must be a scalar" },
    Case { class: "pointer leak", name: "context printed by trace_printk", program: "stdw [r10-8], 0; mov r5, r1; mov r1, r10; add r1, -8; mov r2, 8; mov r3, 0; mov r4, 0; call 6; exit", pc: 7, reason: "argument 5 (r5) must be a scalar" },
    Case { class: "pointer leak", name: "read half a spilled pointer", program: "stxdw [r10-8], r1; ldxw r0, [r10-8]; exit", pc: 1, reason: "reading part of the pointer spilled" },
    Case { class: "pointer leak", name: "overwrite half a spilled pointer", program: "stxdw [r10-8], r1; stw [r10-8], 0; mov r0, 0; exit", pc: 1, reason: "overwriting part of the pointer" },
    Case { class: "pointer leak", name: "unaligned spill", program: "stxdw [r10-12], r1; mov r0, 0; exit", pc: 0, reason: "spilled whole, to an 8-byte aligned" },
    Case { class: "pointer leak", name: "32-bit spill", program: "stxw [r10-8], r1; mov r0, 0; exit", pc: 0, reason: "spilled whole" },
    Case { class: "pointer leak", name: "pointer as a helper's scalar", program: "mov r1, r10; mov r2, 0; call 23; exit", pc: 2, reason: "must be a scalar" },
    Case { class: "pointer leak", name: "pointer compared with a number", program: "mov r2, r10; jeq r2, 5, +0; mov r0, 0; exit", pc: 1, reason: "depends on where memory lies" },
    Case { class: "pointer leak", name: "packet compared with the stack", program: concat!(pkt!(), "jgt r2, r10, +0; mov r0, 0; exit"), pc: 2, reason: "depends on where memory lies" },
    Case { class: "pointer leak", name: "spilled pointer read by a helper", program: "stxdw [r10-8], r1; mov r1, r10; add r1, -8; mov r2, 8; mov r3, 0; mov r4, 0; mov r5, 0; call 28; exit", pc: 7, reason: "holds a spilled pointer" },
    Case { class: "pointer leak", name: "spilled pointer as a map value", program: "stw [r10-4], 0; stxdw [r10-16], r1; lddw r1, map 0; mov r2, r10; add r2, -4; mov r3, r10; add r3, -16; mov r4, 0; call 2; exit", pc: 9, reason: "holds a spilled pointer" },
    Case { class: "pointer leak", name: "pointer as map update flags", program: "stw [r10-4], 0; stdw [r10-16], 0; lddw r1, map 0; mov r2, r10; add r2, -4; mov r3, r10; add r3, -16; mov r4, r10; call 2; exit", pc: 9, reason: "must be a scalar" },
    // --- context ---
    Case { class: "context", name: "store", program: "stw [r1+0], 0; mov r0, 0; exit", pc: 0, reason: "context is read-only" },
    Case { class: "context", name: "register store", program: "mov r2, 1; stxw [r1+12], r2; mov r0, 0; exit", pc: 1, reason: "context is read-only" },
    Case { class: "context", name: "between fields", program: "ldxw r0, [r1+2]; exit", pc: 0, reason: "no xdp_md field is a 4-byte load at offset 2" },
    Case { class: "context", name: "past the struct", program: "ldxw r0, [r1+24]; exit", pc: 0, reason: "no xdp_md field" },
    Case { class: "context", name: "8-byte load", program: "ldxdw r0, [r1+0]; exit", pc: 0, reason: "no xdp_md field is a 8-byte load" },
    Case { class: "context", name: "byte load", program: "ldxb r0, [r1+12]; exit", pc: 0, reason: "no xdp_md field is a 1-byte load" },
    Case { class: "context", name: "sign-extending load", program: "ldxsw r0, [r1+12]; exit", pc: 0, reason: "no xdp_md field" },
    Case { class: "context", name: "before the struct", program: "ldxw r0, [r1-4]; exit", pc: 0, reason: "no xdp_md field" },
    Case { class: "context", name: "moved context pointer", program: "add r1, 4; ldxw r0, [r1+0]; exit", pc: 1, reason: "moved context pointer" },
    Case { class: "context", name: "offset wrapping 16 bits", program: "mov r6, r1; add r6, -32755; ldxw r0, [r6+32767]; exit", pc: 2, reason: "moved context pointer" },
    Case { class: "context", name: "far offset", program: "ldxw r0, [r1+32764]; exit", pc: 0, reason: "no xdp_md field" },
    Case { class: "context", name: "atomic", program: "mov r2, 1; lock add [r1+0], r2; mov r0, 0; exit", pc: 1, reason: "context is read-only" },
    Case { class: "context", name: "moved context to a helper", program: "mov r6, r1; add r6, 4; mov r1, r6; mov r2, 0; call 44; exit", pc: 4, reason: "must be the context pointer" },
    // --- map value bounds ---
    Case { class: "map value bounds", name: "read past the value", program: concat!(lookup_checked!(), "ldxdw r0, [r0+4]; exit; ", out!()), pc: 7, reason: "outside the 8-byte map value" },
    Case { class: "map value bounds", name: "read before the value", program: concat!(lookup_checked!(), "ldxb r0, [r0-1]; exit; ", out!()), pc: 7, reason: "outside the 8-byte map value" },
    Case { class: "map value bounds", name: "write past the value", program: concat!(lookup_checked!(), "stw [r0+8], 1; mov r0, 0; exit; ", out!()), pc: 7, reason: "outside the 8-byte map value" },
    Case { class: "map value bounds", name: "unbounded index", program: concat!(lookup_checked!(), "ldxdw r5, [r0+0]; add r0, r5; mov r0, 0; exit; ", out!()), pc: 8, reason: "not bounded" },
    Case { class: "map value bounds", name: "masked index too large", program: concat!(lookup_checked!(), "ldxdw r5, [r0+0]; and r5, 15; add r0, r5; ldxb r0, [r0+0]; exit; ", out!()), pc: 10, reason: "outside the 8-byte map value" },
    Case { class: "map value bounds", name: "array value", program: concat!("stw [r10-4], 0; mov r2, r10; add r2, -4; lddw r1, map 1; call 1; jeq r0, 0, out; ldxb r0, [r0+16]; exit; ", out!()), pc: 7, reason: "outside the 16-byte map value" },
    Case { class: "map value bounds", name: "global data offset", program: "lddw r0, map_value 1 + 16; mov r0, 0; exit", pc: 0, reason: "outside the map's 16-byte value" },
    Case { class: "map value bounds", name: "global data in a hash map", program: "lddw r0, map_value 0 + 0; mov r0, 0; exit", pc: 0, reason: "needs an array map" },
    Case { class: "map value bounds", name: "read past global data", program: "lddw r2, map_value 1 + 8; ldxdw r0, [r2+8]; exit", pc: 2, reason: "outside the 16-byte map value" },
    Case { class: "map value bounds", name: "map that does not exist", program: "lddw r1, map 9; mov r0, 0; exit", pc: 0, reason: "map 9 does not exist" },
    Case { class: "map value bounds", name: "map dereferenced", program: "lddw r1, map 0; ldxdw r0, [r1+0]; exit", pc: 2, reason: "map cannot be dereferenced" },
    Case { class: "map value bounds", name: "atomic past the value", program: concat!(lookup_checked!(), "mov r2, 1; lock add [r0+8], r2; mov r0, 0; exit; ", out!()), pc: 8, reason: "outside the 8-byte map value" },
    // --- null map values ---
    Case { class: "null map value", name: "32-bit null check", program: concat!(lookup!(), "jeq32 r0, 0, out; ldxdw r0, [r0+0]; exit; ", out!()), pc: 6, reason: "depends on where memory lies" },
    Case { class: "null map value", name: "32-bit not-null check", program: concat!(lookup!(), "jne32 r0, 0, +2; mov r0, 1; exit; stdw [r0+0], 1; mov r0, 2; exit"), pc: 6, reason: "depends on where memory lies" },
    Case { class: "null map value", name: "read without a check", program: concat!(lookup!(), "ldxdw r0, [r0+0]; exit"), pc: 6, reason: "may be null" },
    Case { class: "null map value", name: "read on the null branch", program: concat!(lookup!(), "jne r0, 0, out; ldxdw r0, [r0+0]; exit; ", out!()), pc: 7, reason: "memory access through r0" },
    Case { class: "null map value", name: "ordered null check", program: concat!(lookup!(), "jgt r0, 0, out; mov r0, 0; exit; ", out!()), pc: 6, reason: "using == or != only" },
    Case { class: "null map value", name: "write without a check", program: concat!(lookup!(), "stw [r0+0], 1; mov r0, 0; exit"), pc: 6, reason: "may be null" },
    Case { class: "null map value", name: "compared with a number", program: concat!(lookup!(), "jeq r0, 1, out; mov r0, 0; exit; ", out!()), pc: 6, reason: "depends on where memory lies" },
    Case { class: "null map value", name: "maybe-null as a key", program: concat!(lookup!(), "mov r2, r0; lddw r1, map 0; call 1; mov r0, 0; exit"), pc: 9, reason: "readable bytes" },
    // --- helper argument types ---
    Case { class: "helper args", name: "unknown helper", program: "call 999; exit", pc: 0, reason: "helper 999 does not exist" },
    Case { class: "helper args", name: "helper zero", program: "call 0; exit", pc: 0, reason: "helper 0 does not exist" },
    Case { class: "helper args", name: "number as a map", program: "mov r1, 5; mov r2, r10; add r2, -8; call 1; mov r0, 0; exit", pc: 3, reason: "must be a map" },
    Case { class: "helper args", name: "hash map as a devmap", program: "lddw r1, map 0; mov r2, 0; mov r3, 0; call 51; exit", pc: 4, reason: "must be a devmap" },
    Case { class: "helper args", name: "number as the context", program: "mov r1, 0; mov r2, 0; call 44; exit", pc: 2, reason: "must be the context pointer" },
    Case { class: "helper args", name: "unbounded size", program: "stdw [r10-8], 0; mov r1, r10; add r1, -8; ldxw r2, [r10-8]; call 6; exit", pc: 4, reason: "must be a bounded size" },
    Case { class: "helper args", name: "number as memory", program: "mov r1, 8; mov r2, 8; call 6; exit", pc: 2, reason: "must be a pointer" },
    Case { class: "helper args", name: "unknown helper register", program: "ldxw r2, [r1+12]; call r2; exit", pc: 1, reason: "does not hold a known helper number" },
    Case { class: "helper args", name: "pointer as a helper number", program: "mov r2, r10; call r2; exit", pc: 1, reason: "not a helper number" },
    // --- calls and frames ---
    Case { class: "calls and frames", name: "read through a returned frame", program: "mov r1, r10; add r1, -8; call local leak; ldxdw r2, [r10-8]; ldxdw r0, [r2+0]; exit; leak: mov r2, r10; add r2, -8; stdw [r2+0], 7; stxdw [r1+0], r2; mov r0, 0; exit", pc: 11, reason: "stack of the returning function" },
    Case { class: "calls and frames", name: "write through a returned frame", program: "mov r1, r10; add r1, -8; call local leak; ldxdw r2, [r10-8]; stdw [r2+0], 1; mov r0, 0; exit; leak: mov r2, r10; add r2, -8; stxdw [r1+0], r2; mov r0, 0; exit", pc: 11, reason: "stack of the returning function" },
    Case { class: "calls and frames", name: "returned frame reused by the next call", program: "ldxw r6, [r1+0]; ldxw r7, [r1+4]; mov r1, r10; add r1, -8; call local leak; mov r1, r10; add r1, -8; call local smash; mov r0, 2; exit; leak: mov r2, r10; add r2, -64; stxdw [r1+0], r2; mov r0, 0; exit; smash: ldxdw r2, [r1+0]; stdw [r2+0], 1; mov r0, 0; exit", pc: 14, reason: "stack of the returning function" },
    Case { class: "calls and frames", name: "own frame returned through a deeper call", program: "call local f; mov r0, 0; exit; f: stdw [r10-8], 1; mov r1, r10; add r1, -8; call local g; exit; g: mov r0, r1; exit", pc: 7, reason: "stack" },
    Case { class: "calls and frames", name: "return a pointer to the own stack", program: "call local f; mov r0, 0; exit; f: mov r0, r10; exit", pc: 4, reason: "pointer to its own stack" },
    Case { class: "calls and frames", name: "nine frames", program: "call local f1; exit; f1: call local f2; exit; f2: call local f3; exit; f3: call local f4; exit; f4: call local f5; exit; f5: call local f6; exit; f6: call local f7; exit; f7: call local f8; exit; f8: mov r0, 0; exit", pc: 14, reason: "nest deeper than 8" },
    Case { class: "calls and frames", name: "recursion", program: "call local f; exit; f: call local f; exit", pc: 2, reason: "nest deeper than 8" },
    Case { class: "calls and frames", name: "jump into the caller", program: "mov r0, 0; call local f; out: exit; f: mov r0, 0; jeq r0, 0, out; exit", pc: 4, reason: "jump leaves its function" },
    Case { class: "calls and frames", name: "function without an end", program: "call local f; exit; f: mov r0, 0", pc: 2, reason: "last instruction of a function" },
    Case { class: "calls and frames", name: "call outside the program", program: "call local +100; exit", pc: 0, reason: "outside the program" },
    Case { class: "calls and frames", name: "pointer into the callee frame through two levels", program: "mov r1, r10; add r1, -8; call local f; ldxdw r2, [r10-8]; ldxdw r0, [r2+0]; exit; f: call local g; mov r0, 0; exit; g: mov r2, r10; add r2, -16; stdw [r2+0], 1; stxdw [r1+0], r2; mov r0, 0; exit", pc: 14, reason: "stack of the returning function" },
    // --- atomics ---
    Case { class: "atomics", name: "cmpxchg with a stack pointer expected", program: "stdw [r10-8], 0; mov r0, r10; mov r2, 1; lock cmpxchg [r10-8], r2; mov r0, 0; exit", pc: 3, reason: "r0" },
    Case { class: "atomics", name: "cmpxchg with a packet pointer expected", program: concat!(pkt!(), "stdw [r10-8], 0; mov r0, r2; mov r4, 1; lock cmpxchg [r10-8], r4; mov r0, 0; exit"), pc: 5, reason: "r0" },
    Case { class: "atomics", name: "cmpxchg with r0 unset", program: "stdw [r10-8], 0; mov r2, 1; lock cmpxchg [r10-8], r2; mov r0, 0; exit", pc: 2, reason: "r0 is read before it is initialised" },
    Case { class: "atomics", name: "unaligned", program: "stdw [r10-8], 0; mov r2, 1; lock add [r10-4], r2; mov r0, 0; exit", pc: 2, reason: "not aligned" },
    Case { class: "atomics", name: "variable offset", program: concat!(lookup_checked!(), "ldxdw r5, [r0+0]; and r5, 7; add r0, r5; mov r2, 1; lock add [r0+0], r2; mov r0, 0; exit; ", out!()), pc: 11, reason: "atomic access at a variable offset" },
    Case { class: "atomics", name: "spilled pointer", program: "stxdw [r10-8], r1; mov r2, 1; lock add [r10-8], r2; mov r0, 0; exit", pc: 2, reason: "atomic operation on a spilled pointer" },
    Case { class: "atomics", name: "map pointer", program: "lddw r1, map 0; mov r2, 1; lock add [r1+0], r2; mov r0, 0; exit", pc: 3, reason: "map cannot be dereferenced" },
    Case { class: "atomics", name: "data_end", program: concat!(pkt!(), "mov r4, 1; lock add [r3+0], r4; mov r0, 0; exit"), pc: 3, reason: "only be compared" },
    Case { class: "atomics", name: "pointer operand", program: "stdw [r10-8], 0; lock add [r10-8], r10; mov r0, 0; exit", pc: 1, reason: "atomic operand r10 is a stack pointer, not a scalar" },
    Case { class: "atomics", name: "exchange a pointer in", program: "stdw [r10-8], 0; mov r2, r1; lock xchg [r10-8], r2; mov r0, 0; exit", pc: 2, reason: "not a scalar" },
    Case { class: "atomics", name: "unknown operation", program: "raw: 0x00000000fff80a7a 0x00000002fff81adb 0x00000000000000b7 0x0000000000000095", pc: 1, reason: "unknown atomic operation" },
    Case { class: "atomics", name: "byte-sized", program: "raw: 0x00000000fff81ad3 0x00000000000000b7 0x0000000000000095", pc: 0, reason: "invalid opcode" },
    // --- ALU32 byte swaps ---
    Case { class: "alu32 end", name: "le64 keeps the high half", program: concat!(pkt!(), "mov r4, r2; add r4, 1; jgt r4, r3, out; lddw r5, 0x100000000; le64 r5; add r2, r5; ldxb r0, [r2+0]; exit; ", out!()), pc: 8, reason: "pointer offset out of range" },
    Case { class: "alu32 end", name: "be64 swaps all eight bytes", program: concat!(pkt!(), "mov r4, r2; add r4, 1; jgt r4, r3, out; lddw r5, 0x100000000; be64 r5; add r2, r5; ldxb r0, [r2+0]; exit; ", out!()), pc: 9, reason: "offset 16777216" },
    Case { class: "alu32 end", name: "le64 on a stack offset", program: "lddw r2, 0x100000000; le64 r2; mov r3, r10; add r3, r2; mov r0, 0; exit", pc: 4, reason: "pointer offset out of range" },
    Case { class: "alu32 end", name: "be16 of 1 is 256", program: concat!(check14!(), "mov r5, 1; be16 r5; add r2, r5; ldxb r0, [r2+0]; exit; ", out!()), pc: 8, reason: "offset 256" },
    Case { class: "alu32 end", name: "le64 of an unknown wide value", program: concat!(check14!(), "ldxb r5, [r2+0]; lddw r6, 0x100000000; or r5, r6; le64 r5; add r2, r5; mov r0, 0; exit; ", out!()), pc: 10, reason: "not bounded" },
    Case { class: "alu32 end", name: "bswap64 of 1", program: "mov r2, 1; bswap64 r2; mov r3, r10; add r3, r2; mov r0, 0; exit", pc: 3, reason: "pointer offset out of range" },
    Case { class: "alu32 end", name: "be32 of 1", program: "mov r2, 1; be32 r2; mov r3, r10; add r3, r2; ldxb r0, [r3+0]; exit", pc: 4, reason: "outside the 512-byte stack" },
    Case { class: "alu32 end", name: "width 8", program: "raw: 0x00000008000000d4 0x00000000000000b7 0x0000000000000095", pc: 0, reason: "invalid opcode" },
    Case { class: "alu32 end", name: "bswap with the source bit", program: "raw: 0x00000010000000df 0x00000000000000b7 0x0000000000000095", pc: 0, reason: "invalid opcode" },
    // --- division tricks ---
    Case { class: "division", name: "modulo by zero keeps the dividend", program: concat!(check14!(), "ldxb r5, [r2+0]; mod r5, 0; add r2, r5; ldxb r0, [r2+0]; exit; ", out!()), pc: 8, reason: "beyond the 0 bytes" },
    Case { class: "division", name: "signed division", program: concat!(check14!(), "ldxb r5, [r2+0]; sdiv r5, -1; add r2, r5; mov r0, 0; exit; ", out!()), pc: 7, reason: "not bounded" },
    Case { class: "division", name: "signed modulo", program: concat!(check14!(), "ldxb r5, [r2+0]; smod r5, 3; add r2, r5; mov r0, 0; exit; ", out!()), pc: 7, reason: "not bounded" },
    Case { class: "division", name: "32-bit division drops the high half", program: concat!(check14!(), "lddw r5, 0x100000010; div32 r5, 1; add r2, r5; ldxb r0, [r2+0]; exit; ", out!()), pc: 9, reason: "offset 16" },
    Case { class: "division", name: "modulo by a variable", program: concat!(check14!(), "ldxb r5, [r2+0]; ldxb r6, [r2+1]; mod r5, r6; add r2, r5; ldxb r0, [r2+0]; exit; ", out!()), pc: 9, reason: "beyond the 0 bytes" },
    Case { class: "division", name: "negation", program: concat!(check14!(), "mov r5, 1; neg r5; add r2, r5; ldxb r0, [r2+0]; exit; ", out!()), pc: 8, reason: "offset -1" },
    Case { class: "division", name: "INT_MIN / -1", program: "mov32 r5, 0x80000000; sdiv32 r5, -1; mov r3, r10; add r3, r5; mov r0, 0; exit", pc: 3, reason: "pointer offset out of range" },
    Case { class: "division", name: "division by a variable", program: concat!(check14!(), "ldxb r5, [r2+0]; ldxb r6, [r2+1]; div r5, r6; add r2, r5; ldxb r0, [r2+0]; exit; ", out!()), pc: 9, reason: "beyond the 0 bytes" },
    // --- jumps ---
    Case { class: "jumps", name: "past the end", program: "mov r0, 0; ja +5; exit", pc: 1, reason: "outside the program" },
    Case { class: "jumps", name: "before the start", program: "mov r0, 0; jeq r0, 0, -3; exit", pc: 1, reason: "outside the program" },
    Case { class: "jumps", name: "into an lddw", program: "mov r0, 0; jeq r0, 0, +1; lddw r1, 5; exit", pc: 1, reason: "middle of an lddw" },
    Case { class: "jumps", name: "falls off the end", program: "mov r0, 2", pc: 0, reason: "last instruction" },
    Case { class: "jumps", name: "ja32 past the end", program: "mov r0, 0; ja32 +100; exit", pc: 1, reason: "outside the program" },
    Case { class: "jumps", name: "ends on a conditional jump", program: "mov r0, 0; jeq r0, 1, -2", pc: 1, reason: "last instruction" },
    Case { class: "jumps", name: "lddw without its second half", program: "raw: 0x00000000000000b7 0x0000000000000018", pc: 1, reason: "missing its second half" },
    Case { class: "jumps", name: "lddw with a malformed second half", program: "raw: 0x0000000000000018 0x0000000000000095", pc: 0, reason: "second half is malformed" },
    // --- encodings ---
    Case { class: "encoding", name: "empty program", program: "", pc: 0, reason: "the program is empty" },
    Case { class: "encoding", name: "write r10", program: "mov r10, 0; exit", pc: 0, reason: "r10 is read-only" },
    Case { class: "encoding", name: "load into r10", program: "ldxdw r10, [r10-8]; exit", pc: 0, reason: "r10 is read-only" },
    Case { class: "encoding", name: "invalid opcode", program: "raw: 0x00000000000000ff 0x0000000000000095", pc: 0, reason: "invalid opcode" },
    Case { class: "encoding", name: "legacy packet load", program: "raw: 0x0000000000000020 0x0000000000000095", pc: 0, reason: "legacy packet loads" },
    Case { class: "encoding", name: "register 11", program: "raw: 0x0000000000000bb7 0x0000000000000095", pc: 0, reason: "register number above 10" },
    Case { class: "encoding", name: "sign extension from 4 bits", program: "raw: 0x00000000000410bf 0x0000000000000095", pc: 0, reason: "invalid sign-extension width" },
    Case { class: "encoding", name: "jmp32 call", program: "raw: 0x0000000100000086 0x0000000000000095", pc: 0, reason: "invalid opcode" },
    Case { class: "encoding", name: "load with an immediate", program: "raw: 0x00000001fff80a79 0x0000000000000095", pc: 0, reason: "invalid opcode" },
    // --- termination ---
    Case { class: "infinite loop", name: "jump to itself", program: "mov r0, 0; loop: ja loop; exit", pc: 1, reason: "infinite loop" },
    Case { class: "infinite loop", name: "branch on an unchanging value", program: "mov r0, 0; loop: jeq r0, 0, loop; exit", pc: 1, reason: "infinite loop" },
    Case { class: "infinite loop", name: "counter without a bound", program: "mov r0, 0; loop: add r0, 1; ja loop; exit", pc: 2, reason: "too complex" },
    Case { class: "infinite loop", name: "bound unknown", program: "ldxw r2, [r1+12]; mov r0, 0; loop: add r0, 1; jne r0, r2, loop; exit", pc: 4, reason: "too complex" },
    Case { class: "too complex", name: "two million iterations", program: "mov r0, 0; mov r1, 0; loop: add r1, 1; jlt r1, 2000000, loop; exit", pc: 2, reason: "too complex" },
    Case { class: "infinite loop", name: "loop through a call", program: "mov r0, 0; loop: call local f; ja loop; exit; f: mov r0, 0; exit", pc: 2, reason: "infinite loop" },
];
