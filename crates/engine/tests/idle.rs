//! `idle = "wait"`: a worker that sleeps when idle still forwards what arrives after a pause.

use hotplane_engine::{Config, Engine};
use std::time::{Duration, Instant};

#[test]
fn a_waiting_worker_forwards_what_comes_after_a_pause() {
    let toml = r#"
[dataplane]
workers = 1
idle = "wait"
[[port]]
name = "p0"
kind = "mem"
peer = "p1"
[[port]]
name = "p1"
kind = "mem"
sink = { capture = 64 }
"#;
    let cfg = Config::parse(toml, "idle.toml").unwrap();
    let plane = Engine::builder().start(cfg).unwrap();
    let p0 = plane.mem("p0").unwrap().clone();
    let p1 = plane.mem("p1").unwrap().clone();
    for round in 0..3 {
        // Long enough for the worker to have gone to sleep.
        std::thread::sleep(Duration::from_millis(30));
        for _ in 0..10 {
            p0.inject(vec![0u8; 64]).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !plane.drained() {
            assert!(Instant::now() < deadline, "round {round}: not forwarded");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let stats = plane.stats().unwrap();
    assert!(stats["workers"][0]["idle_polls"].as_u64().unwrap() > 0);
    assert_eq!(plane.stop().panics, 0);
    assert_eq!(p1.report().captured.len(), 30);
}
