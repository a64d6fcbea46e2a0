//! Capture files (pcap and pcapng) from outside: no panic, and every error about the content
//! names an offset inside the file (where a person would look with `xxd -s`).
#![no_main]

use hotplane_io::pcap::format::{CaptureError, CaptureReader};
use libfuzzer_sys::fuzz_target;

fn check(e: &CaptureError, len: usize) {
    if let Some(offset) = e.offset() {
        assert!(offset <= len as u64, "{e} names byte {offset} of a {len}-byte file");
    }
    if len == 0 {
        assert!(matches!(e, CaptureError::Empty), "an empty file is reported as {e}");
    }
}

fuzz_target!(|data: &[u8]| {
    match CaptureReader::new(data) {
        Ok(mut r) => {
            let mut buf = Vec::new();
            for _ in 0..1000 {
                match r.next_record(&mut buf) {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        check(&e, data.len());
                        break;
                    }
                }
            }
        }
        Err(e) => check(&e, data.len()),
    }
});
