//! C source to an eBPF object with the system's clang ("extensible" updates).
//!
//! This runs on the control thread, never on a worker: a compile takes a few hundred
//! milliseconds. The source comes from an authenticated update; clang still runs with a time
//! limit, in a private temporary directory, and only the first lines of its diagnostics go
//! back to the sender.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Largest source accepted.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;
/// Longest a compile may take.
pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(30);
/// Diagnostic lines passed back on failure.
const DIAGNOSTIC_LINES: usize = 12;

/// The clang to use: `$HOTPLANE_CLANG`, else `clang` on the PATH.
pub fn clang() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HOTPLANE_CLANG") {
        return Some(p.into());
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| PathBuf::from(d).join("clang"))
        .find(|p| p.is_file())
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compile `source` with `clang -O2 -g -target bpf`; returns the object's bytes.
pub fn compile(source: &[u8]) -> Result<Vec<u8>, String> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(format!("C source is {} bytes; the limit is {MAX_SOURCE_BYTES}", source.len()));
    }
    let clang = clang().ok_or(
        "C updates need clang on this node (apt-get install clang libbpf-dev); send an ELF object or bytecode instead",
    )?;
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "hotplane-cc-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dir = TempDir(dir);
    let (src, obj) = (dir.0.join("prog.c"), dir.0.join("prog.o"));
    std::fs::write(&src, source).map_err(|e| format!("{}: {e}", src.display()))?;
    let arch_include = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let mut child = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-I", &arch_include, "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .current_dir(&dir.0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", clang.display()))?;
    // Drain diagnostics while clang runs: a full pipe would stall it.
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        if let Some(e) = stderr.as_mut() {
            let _ = e.take(1 << 20).read_to_string(&mut err);
        }
        err
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(s) => break s,
            None if start.elapsed() > COMPILE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("clang did not finish within {}s", COMPILE_TIMEOUT.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let err = reader.join().unwrap_or_default();
    if !status.success() {
        let path = src.display().to_string();
        let lines: Vec<String> =
            err.lines().take(DIAGNOSTIC_LINES).map(|l| l.replace(&path, "prog.c")).collect();
        return Err(format!("clang failed ({status}):\n{}", lines.join("\n")));
    }
    std::fs::read(&obj).map_err(|e| format!("{}: {e}", obj.display()))
}
