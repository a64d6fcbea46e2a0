//! Any bytes as a WASP shim: parse, checksum, decode, validate and run on a small store must
//! never panic, and a run never takes more steps than its code has bytes. The first input byte
//! picks options: bit 0 refills the checksum first (so that the fuzzer reaches the decoder and
//! the VPU), bit 1 forwards faulting packets flagged instead of dropping them, bit 2 marks the
//! packet as already returned. The code is also disassembled, and the text must reassemble into
//! a program that decodes like the original. Tiers: the same packet through a decode cache
//! that lives across inputs (so earlier inputs fill it and collide in it) must give the same
//! fate, fault, steps and bytes as a fresh decode; and so must the compiled tier (the program
//! compiled to machine code), with the same store entries afterwards.
#![no_main]

use hotplane_wasp::asm::{assemble, disassemble};
use hotplane_wasp::cache::DecodeCache;
use hotplane_wasp::decode::decode;
use hotplane_wasp::ess::{EssConfig, Salted};
use hotplane_wasp::filter::{process_with, OnFault};
use hotplane_wasp::jit::CompileEach;
use hotplane_wasp::wire::{flags, WaspPacket};
use hotplane_wasp::{process, Env, Ess, FilterConfig};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

thread_local! {
    static CACHE: RefCell<DecodeCache> = RefCell::new(DecodeCache::new());
}

fuzz_target!(|data: &[u8]| {
    // The assembler reads text users type: any text assembles or is refused, never panics.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = assemble(text);
    }
    let Some((&options, shim)) = data.split_first() else { return };
    let mut bytes = shim.to_vec();
    if let Ok(mut packet) = WaspPacket::new_checked(&mut bytes[..]) {
        if options & 4 != 0 {
            packet.set_flags(packet.flags() | flags::RETURNED);
        }
        if options & 1 != 0 {
            packet.fill_checksum();
        }
    }
    let code_len = WaspPacket::new_checked(&bytes[..]).map(|p| p.code_len()).unwrap_or(0);
    let original = bytes.clone();
    let config = EssConfig { capacity: 16, shards: 2, max_probe: 4, lifetime_ns: 1_000, ..EssConfig::default() };
    // Both stores hash alike, so that placement (and a probe-window refusal) is the same.
    let hash = Salted::random();
    let ess = Ess::with_hasher(&config, hash).expect("valid store config");
    let on_fault = if options & 2 != 0 { OnFault::ForwardFlagged } else { OnFault::Drop };
    let env = Env { time_ns: u64::from(options), ..Env::default() };
    let filter = FilterConfig { on_fault, ..FilterConfig::default() };
    let result = process(&mut bytes, &env, shim, &ess, &filter);

    let mut cached_bytes = original.clone();
    let cached_ess = Ess::with_hasher(&config, hash).expect("valid store config");
    let cached = CACHE.with(|cache| {
        process_with(&mut cached_bytes, &env, shim, &cached_ess, &filter, &mut *cache.borrow_mut())
    });
    let summary = |r: &Result<hotplane_wasp::Processed, hotplane_wasp::Reject>| {
        r.map(|p| (p.fate, p.rewritten, p.outcome.map(|o| (o.fault, o.steps))))
    };
    assert_eq!(summary(&result), summary(&cached), "the cached tier decides as a fresh decode");
    assert_eq!(bytes, cached_bytes, "the cached tier leaves the same bytes");

    let mut compiled_bytes = original.clone();
    let compiled_ess = Ess::with_hasher(&config, hash).expect("valid store config");
    let compiled = process_with(
        &mut compiled_bytes,
        &env,
        shim,
        &compiled_ess,
        &filter,
        &mut CompileEach::default(),
    );
    let full = |r: &Result<hotplane_wasp::Processed, hotplane_wasp::Reject>| {
        r.map(|p| (p.fate, p.rewritten, p.outcome))
    };
    assert_eq!(full(&result), full(&compiled), "the compiled tier decides as the interpreter");
    assert_eq!(bytes, compiled_bytes, "the compiled tier leaves the same bytes");
    if let Ok(packet) = WaspPacket::new_checked(&original[..]) {
        let (keys, count) = packet.keys();
        for &key in &keys[..count] {
            let now = env.time_ns;
            assert_eq!(ess.get(key, now), compiled_ess.get(key, now), "the same store entry");
        }
    }

    match result {
        Ok(processed) => {
            if let Some(outcome) = processed.outcome {
                assert!(
                    outcome.steps <= code_len,
                    "{} steps for {code_len} code bytes",
                    outcome.steps
                );
                assert!(outcome.store_writes <= 4);
            }
            assert_eq!(bytes.len(), original.len());
            let shim_len =
                WaspPacket::new_checked(&original[..]).map(|p| p.total_len()).unwrap_or(0);
            assert_eq!(
                bytes[shim_len..],
                original[shim_len..],
                "bytes after the shim never change"
            );
            if !processed.rewritten {
                assert_eq!(bytes, original);
            }
        }
        Err(_) => assert_eq!(bytes, original, "a refused packet is not modified"),
    }

    // Finding a shim in the input read as an IP packet stays inside it.
    if let Some(found) = hotplane_wasp::carriage::locate(shim, Some(9277)) {
        assert!(found.shim_offset <= shim.len());
    }

    // The disassembler's text always reassembles, into a program of the same shape.
    let code = &shim[..shim.len().min(64)];
    let text = disassemble(code);
    let again = assemble(&text).expect("disassembly reassembles");
    if let Ok(program) = decode(code, 4) {
        let program_again = decode(&again.code, 4).expect("reassembled code decodes");
        assert_eq!(program.len(), program_again.len());
    }
});
