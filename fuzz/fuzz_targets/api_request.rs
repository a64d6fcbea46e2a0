//! Any bytes as a control API request (the socket's JSON), and the requests whose fields are
//! parsed further before anything runs: a trace's flow selector, a capture's point, port,
//! selector and snap length. A refusal is an error, never a panic.
#![no_main]

use hotplane_control::api::Request;
use hotplane_core::flowtable::FlowSelector;
use hotplane_engine::capture::{CaptureSpec, Capturer};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// One capturer for every run, as a data plane has one.
static CAPTURER: OnceLock<Capturer> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Ok(request) = serde_json::from_slice::<Request>(data) else { return };
    // What the engine parsed is what a client sending it again would mean.
    let again = serde_json::to_vec(&request).expect("a request serialises");
    let reparsed: Request = serde_json::from_slice(&again).expect("its own JSON parses");
    assert_eq!(serde_json::to_vec(&reparsed).unwrap(), again);
    match request {
        Request::TraceStart { selector: Some(s), .. } => {
            if let Ok(sel) = s.parse::<FlowSelector>() {
                let shown = sel.to_string();
                assert_eq!(shown.parse::<FlowSelector>(), Ok(sel), "{s} shown as {shown}");
            }
        }
        Request::CaptureStart { point, port, selector, count, snaplen } => {
            let ports = ["p0", "p1", "2"];
            if let Ok(spec) = CaptureSpec::from_request(
                &point,
                port.as_deref(),
                selector.as_deref(),
                snaplen,
                &ports,
            ) {
                assert!(spec.port.is_none_or(|p| (p as usize) < ports.len()));
                let c = CAPTURER.get_or_init(Capturer::default);
                let (id, count) = c.start(spec, count);
                assert!(count > 0 && count <= hotplane_engine::capture::MAX_COUNT);
                assert!(c.armed(&std::cell::Cell::new(None)).is_some());
                assert_eq!(c.read(Some(id), 8).unwrap().remaining, count);
                c.stop(Some(id)).unwrap();
            }
        }
        _ => {}
    }
});
