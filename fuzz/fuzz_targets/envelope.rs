//! Update envelopes from outside: the receiver (MAC check, parse, replay, reassembly) and the
//! acknowledgement parser must never panic. Key 0 is allowed so the fuzzer reaches the parser
//! and reassembly without forging MACs; key 1 exercises the MAC path.
//!
//! Inputs starting with `R` drive reassembly directly: well-formed fragments of one update at
//! fuzz-chosen offsets, lengths and contents, checked against a byte-by-byte model (what is
//! complete, how many bytes are in, which fragments conflict or scatter too far).
#![no_main]

use hotplane_control::envelope::{build, Flags, Kind, Target, UpdateHeader, WorkerScope};
use hotplane_control::receiver::MAX_FRAGMENT_RANGES;
use hotplane_control::{Ack, Reason, Received, Receiver, ReceiverConfig};
use hotplane_core::Position;
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};

fn receiver() -> Receiver {
    Receiver::new(
        ReceiverConfig {
            allow_unauthenticated: true,
            max_update_bytes: 4096,
            max_pending: 4,
            ..Default::default()
        },
        [(1u32, [7u8; 32])].into_iter().collect(),
    )
}

/// One unauthenticated fragment: `data` at `offset` of a `total`-byte update.
fn fragment(total: u32, offset: u32, data: &[u8]) -> Vec<u8> {
    let header = UpdateHeader {
        kind: Kind::NativeStage,
        flags: Flags::default(),
        key_id: 0,
        seq: 1,
        target: Target::Position(Position::Pre),
        worker: WorkerScope::All,
    };
    let mut d = build(&header, data, None, u16::MAX as usize).expect("one fragment").remove(0);
    d[20..24].copy_from_slice(&total.to_be_bytes());
    d[24..28].copy_from_slice(&offset.to_be_bytes());
    d
}

/// Maximal runs of known bytes, as (start, end).
fn runs(model: &[Option<u8>]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < model.len() {
        if model[i].is_some() {
            let start = i;
            while i < model.len() && model[i].is_some() {
                i += 1;
            }
            out.push((start, i));
        } else {
            i += 1;
        }
    }
    out
}

fn reassembly(data: &[u8]) {
    let Some((&size, mut rest)) = data.split_first() else { return };
    let total = 1 + size as usize * 2; // 1..=511 bytes
    let mut model: Vec<Option<u8>> = vec![None; total];
    let mut rx = receiver();
    let now = Instant::now();
    while rest.len() >= 4 {
        let offset = u16::from_be_bytes([rest[0], rest[1]]) as usize % total;
        let len = (rest[2] as usize % 64).min(total - offset);
        let fill = rest[3];
        rest = &rest[4..];
        // Contents: mostly a function of the position (so overlaps agree), sometimes `fill`.
        let bytes: Vec<u8> = (offset..offset + len)
            .map(|i| if fill & 0x80 != 0 { fill } else { (i * 7) as u8 })
            .collect();
        let conflict =
            bytes.iter().enumerate().any(|(k, b)| model[offset + k].is_some_and(|m| m != *b));
        let known = runs(&model);
        let touches = known.iter().any(|&(a, b)| a <= offset + len && offset <= b);
        let scattered = len > 0 && !touches && known.len() >= MAX_FRAGMENT_RANGES;
        let result = rx.receive(&fragment(total as u32, offset as u32, &bytes), now);
        if offset == 0 && len == total {
            // A fragment holding the whole update is the update, whatever came before it.
            match result {
                Ok(Received::Complete(u)) => assert_eq!(u.payload, bytes),
                other => panic!("a whole update was not taken: {other:?}"),
            }
            return;
        }
        match result {
            Err(e) if e.reason == Reason::Inconsistent => assert!(conflict, "{e}"),
            Err(e) if e.reason == Reason::TooManyPending => assert!(scattered && !conflict, "{e}"),
            Err(e) => panic!("unexpected refusal: {e}"),
            Ok(got) => {
                assert!(!conflict && !scattered, "accepted a conflicting or scattering fragment");
                for (k, b) in bytes.iter().enumerate() {
                    model[offset + k] = Some(*b);
                }
                let have = model.iter().filter(|b| b.is_some()).count();
                match got {
                    Received::Complete(u) => {
                        assert_eq!(have, total, "completed with holes");
                        let want: Vec<u8> = model.iter().map(|b| b.unwrap_or(0)).collect();
                        assert_eq!(u.payload, want);
                        return;
                    }
                    Received::Partial { received, .. } => {
                        assert_eq!(received as usize, have);
                        assert!(have < total);
                        assert!(runs(&model).len() <= MAX_FRAGMENT_RANGES);
                    }
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(rest) = data.strip_prefix(b"R") {
        reassembly(rest);
        return;
    }
    let mut rx = receiver();
    let now = Instant::now();
    // The input as one datagram, then split into several at 0xFF bytes (fragments of one update).
    let _ = rx.receive(data, now);
    for (i, part) in data.split(|b| *b == 0xff).enumerate() {
        let _ = rx.receive(part, now + Duration::from_millis(i as u64 * 500));
    }
    let _ = rx.expire(now + Duration::from_secs(10));
    let _ = hotplane_control::envelope::parse(data);
    let _ = Ack::decode(data, None);
    let _ = Ack::decode(data, Some(&[7u8; 32]));
});
