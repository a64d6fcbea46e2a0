//! Update envelopes from outside: the receiver (MAC check, parse, replay, reassembly) and the
//! acknowledgement parser must never panic. Key 0 is allowed so the fuzzer reaches the parser
//! and reassembly without forging MACs; key 1 exercises the MAC path.
#![no_main]

use hotplane_control::{Ack, Receiver, ReceiverConfig};
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};

fuzz_target!(|data: &[u8]| {
    let mut rx = Receiver::new(
        ReceiverConfig {
            allow_unauthenticated: true,
            max_update_bytes: 4096,
            max_pending: 4,
            ..Default::default()
        },
        [(1u32, [7u8; 32])].into_iter().collect(),
    );
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
