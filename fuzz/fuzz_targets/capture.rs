//! Capture files (pcap and pcapng) from outside.
#![no_main]

use hotplane_io::pcap::format::CaptureReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut r) = CaptureReader::new(data) {
        let mut buf = Vec::new();
        for _ in 0..1000 {
            match r.next_record(&mut buf) {
                Ok(Some(_)) => {}
                _ => break,
            }
        }
    }
});
