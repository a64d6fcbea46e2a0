//! DPDK testpmd as the anchor of the pipeline benchmark: `macswap` forwarding between two
//! `net_null` ports on one forwarding core, without hugepages. Installed by
//! `bench/install-testpmd.sh` (Debian's `dpdk-dev` package).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Result of a testpmd run.
pub struct TestpmdRun {
    /// Packets per second forwarded over both ports, median of the measured periods.
    pub mpps: f64,
    pub periods: usize,
    pub command: String,
}

/// Find testpmd on PATH.
pub fn find() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join("dpdk-testpmd"))
        .find(|p| p.is_file())
}

/// Run testpmd for `seconds` with the forwarding lcore on `core` and the main lcore on
/// `main_core`; returns its forwarding rate.
pub fn run(
    seconds: u64,
    main_core: usize,
    core: usize,
    burst: usize,
) -> Result<TestpmdRun, String> {
    let bin = find().ok_or("dpdk-testpmd not found (run bench/install-testpmd.sh)")?;
    let lcores = format!("{main_core},{core}");
    let args = vec![
        "--no-huge".to_string(),
        "-m".into(),
        "512".into(),
        "--no-pci".into(),
        "--vdev".into(),
        "net_null0".into(),
        "--vdev".into(),
        "net_null1".into(),
        "-l".into(),
        lcores,
        "--file-prefix".into(),
        format!("hotplane-bench-{}", std::process::id()),
        "--".into(),
        "--forward-mode=macswap".into(),
        "--auto-start".into(),
        "--stats-period".into(),
        "1".into(),
        "--nb-cores=1".into(),
        format!("--burst={burst}"),
        "--total-num-mbufs=16384".into(),
    ];
    let command = format!("{} {}", bin.display(), args.join(" "));
    let mut child = Command::new(&bin)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start testpmd: {e}"))?;
    let stdout = child.stdout.take().ok_or("no testpmd stdout")?;
    let deadline = Instant::now() + Duration::from_secs(seconds + 10);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Each stats period prints one block per port; sum the two ports' Rx-pps.
    let mut periods: Vec<f64> = Vec::new();
    let mut current: Vec<f64> = Vec::new();
    while Instant::now() < deadline && periods.len() < seconds as usize + 2 {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) else { continue };
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Rx-pps:") {
            if let Some(v) = rest.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()) {
                current.push(v);
                if current.len() == 2 {
                    periods.push(current.iter().sum());
                    current.clear();
                }
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    // The first periods include start-up; keep the rest.
    let mut steady: Vec<f64> = periods.iter().skip(2).copied().filter(|v| *v > 0.0).collect();
    if steady.is_empty() {
        return Err("testpmd reported no forwarding rate".into());
    }
    steady.sort_by(|a, b| a.total_cmp(b));
    Ok(TestpmdRun { mpps: steady[steady.len() / 2] / 1e6, periods: steady.len(), command })
}
