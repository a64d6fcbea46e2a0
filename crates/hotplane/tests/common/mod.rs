//! Helpers shared by the integration tests (each test crate uses some of them).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A scratch directory under the system temp dir, removed when the test ends (pass or fail).
pub struct TmpDir(PathBuf);

impl TmpDir {
    /// A fresh, empty `hotplane-{kind}-{name}-{pid}` directory.
    pub fn new(kind: &str, name: &str) -> TmpDir {
        let d = std::env::temp_dir().join(format!("hotplane-{kind}-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TmpDir(d)
    }
}

impl std::ops::Deref for TmpDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed when the test ends, pass or fail (a failed assertion must not leave
/// a data plane running).
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `hotplane run --keep-running --config CFG`, once its control socket `sock` is there. Its
/// default directory is beside the socket: the test announces nothing in the machine's.
pub fn run_until_socket(cfg: &Path, sock: &Path) -> std::process::Child {
    let runtime = sock.parent().unwrap_or(Path::new(".")).join("rt");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_hotplane"))
        .args(["run", "--keep-running", "--config"])
        .arg(cfg)
        .env("HOTPLANE_RUNTIME_DIR", runtime)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "socket {} never appeared", sock.display());
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// Wait until the workers have sent `n` of the packets the control thread queued for them
/// (acknowledgements): a stop drops what is still queued, and a loaded machine may take
/// longer than any fixed sleep.
pub fn wait_sent(plane: &hotplane::Engine, n: u64) {
    let sent = || plane.worker_stats().iter().map(|w| w.injected.get()).sum::<u64>();
    let deadline = Instant::now() + Duration::from_secs(20);
    while sent() < n {
        assert!(Instant::now() < deadline, "{} of {n} acknowledgements sent", sent());
        std::thread::sleep(Duration::from_millis(1));
    }
}
