//! Where the control socket lives, and the checks that keep another local user from owning it.
//!
//! A socket in a directory anyone can write (the old default, `/tmp/hotplane.sock`) can be bound
//! first by any local user, who then blocks start-up or takes the updates meant for the data
//! plane. So the socket lives in a directory only hotplane's user can write (and, with
//! `control.socket_group`, that group can enter): `/run/hotplane/` as root, else
//! `$XDG_RUNTIME_DIR/hotplane/`, else `/tmp/hotplane-UID/`. hotplane creates the directory
//! (0700, or 0750 with a group) and refuses to start over a directory or a socket path owned by
//! someone else or writable by others. The client's default finds the server's default.

use std::ffi::CString;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The system-wide socket directory, used when hotplane runs as root.
pub const SYSTEM_SOCKET_DIR: &str = "/run/hotplane";
/// File name of the socket inside the default directory.
pub const SOCKET_NAME: &str = "hotplane.sock";
/// Overrides the default directory (server and client alike); tests point it at a temporary
/// directory instead of `/run/hotplane`.
pub const RUNTIME_DIR_ENV: &str = "HOTPLANE_RUNTIME_DIR";
/// Names the socket a client talks to.
pub const SOCKET_ENV: &str = "HOTPLANE_SOCKET";
/// In the default directory: the path of a socket a config put elsewhere, so that clients
/// find the running data plane without `--socket`.
pub const POINTER_NAME: &str = "current-socket";

/// Why the control socket cannot be set up where it was asked to be.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is owned by uid {owner}, not by this process (uid {me}): another user could take over the control socket; remove it or choose another directory")]
    NotOwned { path: String, owner: u32, me: u32 },
    #[error("{path} is writable by others (mode {mode:04o}): the control socket must live in a directory only its owner can write; use the default (`socket = true`) or a private directory")]
    SharedDirectory { path: String, mode: u32 },
    #[error("{path} exists and is not a socket: refusing to replace it")]
    NotASocket { path: String },
    #[error("{path}: another hotplane is serving this socket")]
    InUse { path: String },
    #[error("{path} is not a directory")]
    NotADirectory { path: String },
    #[error("control.socket_group `{0}`: no such group")]
    NoSuchGroup(String),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SocketError + '_ {
    move |source| SocketError::Io { path: path.display().to_string(), source }
}

pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The directory the default socket lives in, for this user.
pub fn default_socket_dir() -> PathBuf {
    default_dir_for(
        effective_uid(),
        std::env::var_os(RUNTIME_DIR_ENV).map(PathBuf::from),
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
    )
}

fn default_dir_for(uid: u32, runtime_dir: Option<PathBuf>, xdg: Option<PathBuf>) -> PathBuf {
    if let Some(d) = runtime_dir.filter(|d| d.is_absolute()) {
        return d;
    }
    if uid == 0 {
        return PathBuf::from(SYSTEM_SOCKET_DIR);
    }
    match xdg.filter(|d| d.is_absolute()) {
        Some(x) => x.join("hotplane"),
        // No per-user runtime directory (a container, `su`): a per-user directory in /tmp,
        // checked like any other, so a planted one is refused rather than used.
        None => PathBuf::from(format!("/tmp/hotplane-{uid}")),
    }
}

/// Where the server puts the socket when the config says `socket = true`.
pub fn default_socket() -> PathBuf {
    default_socket_dir().join(SOCKET_NAME)
}

/// Where a client looks when it is given no `--socket`: `$HOTPLANE_SOCKET`, else the server's
/// default for this user, else the socket a running config put elsewhere (announced in the
/// default directory); an unprivileged user (a member of `control.socket_group`) falls back
/// to the system socket when it has none of its own.
pub fn client_default_socket() -> PathBuf {
    if let Some(s) = std::env::var_os(SOCKET_ENV).filter(|s| !s.is_empty()) {
        return PathBuf::from(s);
    }
    let own = default_socket();
    if own.exists() {
        return own;
    }
    if let Some(announced) = announced_socket(&default_socket_dir()) {
        return announced;
    }
    if effective_uid() == 0 || std::env::var_os(RUNTIME_DIR_ENV).is_some() {
        return own;
    }
    let system = Path::new(SYSTEM_SOCKET_DIR).join(SOCKET_NAME);
    if system.exists() {
        system
    } else {
        own
    }
}

/// Tell clients where the socket is when it is not at the default path (`hotplane run`; a
/// library user decides for itself): its path in
/// [`POINTER_NAME`] of the default directory (made private if need be). Best effort: a
/// directory that cannot be used only means clients need `--socket`.
pub fn announce(path: &Path) {
    let dir = default_socket_dir();
    if path == dir.join(SOCKET_NAME) || prepare_dir(&dir, None).is_err() {
        return;
    }
    let Ok(absolute) = std::path::absolute(path) else { return };
    let pointer = dir.join(POINTER_NAME);
    let staging = dir.join(format!(".{POINTER_NAME}.writing"));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&staging)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(absolute.as_os_str().as_encoded_bytes())
        });
    if written.and_then(|()| std::fs::rename(&staging, &pointer)).is_err() {
        let _ = std::fs::remove_file(&staging);
    }
}

/// Take the announcement back, if it still names `path` (a later run may have replaced it).
pub fn withdraw(path: &Path) {
    let dir = default_socket_dir();
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.into());
    if announced_path(&dir).is_some_and(|p| p == absolute) {
        let _ = std::fs::remove_file(dir.join(POINTER_NAME));
    }
}

/// The socket announced in `dir`, if the directory and the pointer are this user's alone, and
/// the path names a socket of this user (not a link) in a directory nobody else can write: a
/// pointer left by a run that crashed cannot lead a client to another user's socket.
fn announced_socket(dir: &Path) -> Option<PathBuf> {
    let path = announced_path(dir)?;
    let me = effective_uid();
    let socket = std::fs::symlink_metadata(&path).ok()?;
    let parent = std::fs::metadata(path.parent()?).ok()?;
    let ours = socket.file_type().is_socket() && socket.uid() == me;
    let private = parent.uid() == me && parent.permissions().mode() & 0o022 == 0;
    (ours && private).then_some(path)
}

fn announced_path(dir: &Path) -> Option<PathBuf> {
    let me = effective_uid();
    let private = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.uid() == me && m.permissions().mode() & 0o022 == 0)
    };
    let pointer = dir.join(POINTER_NAME);
    if !private(dir) || !private(&pointer) {
        return None;
    }
    let text = std::fs::read(&pointer).ok().filter(|t| t.len() <= 4096)?;
    let path = PathBuf::from(String::from_utf8(text).ok()?);
    path.is_absolute().then_some(path)
}

/// A group name or numeric id, resolved through the system's group database.
pub fn resolve_group(name: &str) -> Result<u32, SocketError> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    let c = CString::new(name).map_err(|_| SocketError::NoSuchGroup(name.into()))?;
    // SAFETY: `libc::group` is plain data (integers and pointers); all-zero is a valid value
    // that getgrnam_r overwrites.
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 64 * 1024];
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: `c` is NUL-terminated, `grp` and `found` are
    // live locals, and `buf` is writable for the length passed.
    let rc =
        unsafe { libc::getgrnam_r(c.as_ptr(), &mut grp, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc == 0 && !found.is_null() {
        Ok(grp.gr_gid)
    } else {
        Err(SocketError::NoSuchGroup(name.into()))
    }
}

/// Make sure `dir` exists, belongs to this user and only it (and `group`, to enter) can use it.
fn prepare_dir(dir: &Path, group: Option<u32>) -> Result<(), SocketError> {
    let me = effective_uid();
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new().mode(0o700).create(dir).map_err(io_err(dir))?;
        }
        Err(e) => return Err(io_err(dir)(e)),
        Ok(_) => {}
    }
    // Followed: a configured directory may be reached through a link; what matters is who can
    // write in the directory the socket ends up in.
    let meta = std::fs::metadata(dir).map_err(io_err(dir))?;
    if !meta.is_dir() {
        return Err(SocketError::NotADirectory { path: dir.display().to_string() });
    }
    if meta.uid() != me {
        return Err(SocketError::NotOwned {
            path: dir.display().to_string(),
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(SocketError::SharedDirectory { path: dir.display().to_string(), mode });
    }
    if let Some(gid) = group {
        // The group may enter (to connect), never write.
        std::os::unix::fs::chown(dir, None, Some(gid)).map_err(io_err(dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))
            .map_err(io_err(dir))?;
    }
    Ok(())
}

/// Prepare the socket's directory and clear a stale socket of our own at `path`; refuse a path
/// that someone else owns, that is not a socket, or that a live hotplane is serving.
pub fn prepare(path: &Path, group: Option<u32>) -> Result<(), SocketError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    prepare_dir(dir, group)?;
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(path)(e)),
        Ok(m) => m,
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket { path: path.display().to_string() });
    }
    let me = effective_uid();
    if meta.uid() != me {
        return Err(SocketError::NotOwned {
            path: path.display().to_string(),
            owner: meta.uid(),
            me,
        });
    }
    if UnixStream::connect(path).is_ok() {
        return Err(SocketError::InUse { path: path.display().to_string() });
    }
    // A socket of our own that nobody serves: left by a run that crashed.
    std::fs::remove_file(path).map_err(io_err(path))
}

/// Where the socket for `path` is bound before it is renamed into place (same directory).
pub fn staging_path(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(|| "hotplane.sock".into(), |n| n.to_string_lossy());
    path.with_file_name(format!(".{name}.binding"))
}

/// Permissions of a freshly bound socket: the owner, and the group when one is configured.
pub fn restrict(path: &Path, group: Option<u32>) -> Result<(), SocketError> {
    let mode = if group.is_some() { 0o660 } else { 0o600 };
    if let Some(gid) = group {
        std::os::unix::fs::chown(path, None, Some(gid)).map_err(io_err(path))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pointer is followed only to a socket of this user in a private directory: not to a
    /// file, a link, a path that is gone, or a socket in a directory others can write.
    #[test]
    fn an_announcement_is_trusted_only_for_our_own_private_socket() {
        let base = std::env::temp_dir().join(format!("hp-announce-{}", std::process::id()));
        let (dir, private, shared) = (base.join("rt"), base.join("private"), base.join("shared"));
        for (d, mode) in [(&dir, 0o700), (&private, 0o700), (&shared, 0o777)] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let point = |target: &Path| {
            let pointer = dir.join(POINTER_NAME);
            std::fs::write(&pointer, target.as_os_str().as_encoded_bytes()).unwrap();
            std::fs::set_permissions(&pointer, std::fs::Permissions::from_mode(0o600)).unwrap();
            announced_socket(&dir)
        };
        let sock = private.join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(point(&sock), Some(sock.clone()));
        let file = private.join("file");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(point(&file), None, "not a socket");
        let link = private.join("link.sock");
        std::os::unix::fs::symlink(&sock, &link).unwrap();
        assert_eq!(point(&link), None, "a link");
        assert_eq!(point(&private.join("gone.sock")), None, "gone");
        let open_sock = shared.join("s.sock");
        let _other = std::os::unix::net::UnixListener::bind(&open_sock).unwrap();
        assert_eq!(point(&open_sock), None, "in a directory others can write");
        assert_eq!(point(Path::new("relative.sock")), None);
        std::fs::set_permissions(dir.join(POINTER_NAME), std::fs::Permissions::from_mode(0o666))
            .unwrap();
        assert_eq!(announced_socket(&dir), None, "a pointer others can write");
        std::fs::remove_dir_all(&base).ok();
    }

    #[test]
    fn default_directory_depends_on_who_runs() {
        let p = PathBuf::from;
        assert_eq!(default_dir_for(0, None, Some(p("/run/user/0"))), p("/run/hotplane"));
        assert_eq!(
            default_dir_for(1000, None, Some(p("/run/user/1000"))),
            p("/run/user/1000/hotplane")
        );
        assert_eq!(default_dir_for(1000, None, None), p("/tmp/hotplane-1000"));
        assert_eq!(default_dir_for(1000, None, Some(p("relative"))), p("/tmp/hotplane-1000"));
        assert_eq!(default_dir_for(0, Some(p("/tmp/x")), None), p("/tmp/x"));
        // Never a shared file name in a shared directory, whoever runs it.
        for uid in [0, 1000] {
            for xdg in [None, Some(p("/run/user/1000"))] {
                assert_ne!(
                    default_dir_for(uid, None, xdg).join(SOCKET_NAME),
                    p("/tmp/hotplane.sock")
                );
            }
        }
    }

    #[test]
    fn groups_resolve_by_number_or_name() {
        assert_eq!(resolve_group("4242").unwrap(), 4242);
        assert_eq!(resolve_group("root").unwrap(), 0);
        assert!(matches!(resolve_group("no-such-group-here"), Err(SocketError::NoSuchGroup(_))));
    }
}
