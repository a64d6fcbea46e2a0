//! What the process does on signals and panics, whatever the subcommand.

/// How long `hotplane run` may take to stop after SIGINT or SIGTERM before the process exits
/// anyway.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// SIGINT and SIGTERM always end `hotplane run`. The first one asks `cli::run` to stop the data
/// plane cleanly; if the process is still there `STOP_GRACE` later (stopping joins every
/// thread, and a thread stuck where nothing can interrupt it would hold that forever), or when a
/// second signal comes, it exits with status 1.
pub fn exit_guard() -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new().name("exit-guard".into()).spawn(move || {
        let mut first = true;
        for _ in signals.forever() {
            if !first {
                eprintln!("hotplane: second signal, exiting now");
                std::process::exit(1);
            }
            first = false;
            std::thread::spawn(|| {
                std::thread::sleep(STOP_GRACE);
                eprintln!(
                    "hotplane: still running {} s after the signal, exiting",
                    STOP_GRACE.as_secs()
                );
                std::process::exit(1);
            });
        }
    })?;
    Ok(())
}

/// Workers survive a panicking program (the batch is dropped and counted); keep a program that
/// panics on every packet from flooding stderr: at most one report per second from workers.
/// Panics elsewhere (the control thread refusing an update whose builder hit a bug) are always
/// reported: the refusal sends the operator to this log.
pub fn quiet_panics() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    static SUPPRESSED: AtomicU64 = AtomicU64::new(0);
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // Workers are `hotplane-w0`, `hotplane-w1`, ... (not `hotplane-watchdog`).
        let on_worker = std::thread::current().name().is_some_and(|n| {
            n.strip_prefix("hotplane-w")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        });
        if !on_worker {
            return default(info);
        }
        let now = hotplane_core::time::now_ns();
        let last = LAST.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < 1_000_000_000 {
            SUPPRESSED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        LAST.store(now, Ordering::Relaxed);
        let n = SUPPRESSED.swap(0, Ordering::Relaxed);
        if n > 0 {
            eprintln!("hotplane: {n} more panic(s) suppressed in the last second");
        }
        default(info);
    }));
}
