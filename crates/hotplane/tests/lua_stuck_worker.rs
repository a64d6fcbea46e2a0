//! SIGTERM ends `hotplane run` even when a worker is stuck where nothing can interrupt it: a
//! JIT-compiled Lua loop whose every iteration compares two 8 MiB strings (an operator's work is
//! not charged to the step budget, and LuaJIT calls no hook from compiled code), under the
//! largest step budget and a watchdog that would wait an hour. Stopping joins the worker, which
//! would take weeks; the exit guard ends the process instead.
#![cfg(feature = "lua")]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const STUCK: &str = "local big = ('x'):rep(2^20) for i = 1, 3 do big = big .. big end \
                     local t = {big .. 'a', big .. 'b'} \
                     return function(pkt) local i = 0 while t[1 + i % 2] <= t[2] do i = i + 1 end end";

#[test]
fn sigterm_ends_the_process_while_a_worker_is_stuck_in_lua() {
    let dir = std::env::temp_dir().join(format!("hotplane-stuck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("stuck.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[dataplane]
workers = 1
[lua]
max_steps = 2147483647
memory_mb = 256
watchdog_ms = 3600000
[[port]]
name = "p0"
kind = "mem"
gen = {{ flows = 1, rate_pps = 1000 }}
[pipeline]
flow_default = {{ stage = "lua", source = "{STUCK}" }}
"#
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .args(["run", "--config"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let the worker get into the function (the generator's first packet comes at once).
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "hotplane run ended before the signal");
    // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    // Generous: the guard gives stopping a few seconds; this only catches "never".
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let status = status.expect("hotplane run still running two minutes after SIGTERM");
    assert!(!status.success(), "a forced exit is not a clean one");
}
