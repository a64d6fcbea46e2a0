//! Opening sockets inside a named network namespace (`ip netns add NAME`). A socket belongs to
//! the namespace of the thread that created it, so a port opened on a helper thread that
//! entered the namespace works from any worker afterwards: one hotplane process can join
//! interfaces of several namespaces.

use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// Where `ip netns` keeps named namespaces.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from("/var/run/netns").join(name)
}

/// Run `f` on a thread inside namespace `name` (or on this thread when `name` is `None`).
pub fn run_in<T: Send>(name: Option<&str>, f: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    let Some(name) = name else { return Ok(f()) };
    let ns = std::fs::File::open(path(name)).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("network namespace `{name}` ({}): {e}", path(name).display()),
        )
    })?;
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setns on a valid namespace fd affects only this (helper) thread.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                let e = std::io::Error::last_os_error();
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("entering network namespace `{name}`: {e} (needs CAP_SYS_ADMIN)"),
                ));
            }
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("port setup panicked")))
    })
}

/// The index of interface `name` in the calling thread's namespace.
pub fn ifindex(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}
