//! The replay-state file (`control.state_file`), written and read without ever following a link.
//!
//! The data plane usually runs as root; a link planted at the state path (or at a predictable
//! temporary name beside it) would make it overwrite whatever the link points to. So the state
//! is written to a new file with an unpredictable name in the same directory (`O_CREAT |
//! O_EXCL | O_NOFOLLOW`, mode 0600), synced, and renamed over the state path (a rename replaces
//! a link, it never writes through one). It is read with `O_NOFOLLOW | O_NONBLOCK` (a FIFO would
//! block start-up), only from a regular file of this user, and only up to [`MAX_STATE_BYTES`].

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Largest state file read back. hotplane writes one short line per key id.
pub const MAX_STATE_BYTES: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is a symbolic link: refusing to follow it (replace it with the file itself)")]
    Link { path: String },
    #[error("{path} is not a regular file")]
    NotRegular { path: String },
    #[error("{path} is owned by uid {owner}, not by this process (uid {me})")]
    NotOwned { path: String, owner: u32, me: u32 },
    #[error("{path} is larger than {MAX_STATE_BYTES} bytes: not a state file hotplane wrote")]
    TooLarge { path: String },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io { path: path.display().to_string(), source }
}

/// The state file's bytes, or `None` when there is none yet.
pub fn load(path: &Path) -> Result<Option<Vec<u8>>, StateError> {
    let shown = || path.display().to_string();
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
        Ok(m) if m.file_type().is_symlink() => return Err(StateError::Link { path: shown() }),
        Ok(_) => {}
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // Swapped for a link between the check and the open.
            Some(libc::ELOOP) => StateError::Link { path: shown() },
            _ => io_err(path)(e),
        })?;
    let meta = file.metadata().map_err(io_err(path))?;
    if !meta.file_type().is_file() {
        return Err(StateError::NotRegular { path: shown() });
    }
    let me = crate::socket_dir::effective_uid();
    if meta.uid() != me {
        return Err(StateError::NotOwned { path: shown(), owner: meta.uid(), me });
    }
    if meta.len() > MAX_STATE_BYTES {
        return Err(StateError::TooLarge { path: shown() });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // Bounded again while reading: the file may grow after the check.
    file.take(MAX_STATE_BYTES + 1).read_to_end(&mut bytes).map_err(io_err(path))?;
    if bytes.len() as u64 > MAX_STATE_BYTES {
        return Err(StateError::TooLarge { path: shown() });
    }
    Ok(Some(bytes))
}

/// Replace the state file with `bytes`, atomically: readers see the old or the new state.
pub fn store(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (tmp, mut file) = create_temp(&dir, &name)?;
    let written = file
        .write_all(bytes)
        .and_then(|_| file.sync_all())
        .and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_err(path)(e));
    }
    // The rename is durable once the directory is synced; a failure here loses nothing that a
    // crash right before the rename would not.
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A new file beside the state, named so nobody can plant a link at the name beforehand.
fn create_temp(dir: &Path, name: &str) -> Result<(PathBuf, File), StateError> {
    let mut last = None;
    for _ in 0..8 {
        let tmp = dir.join(format!(".{name}.{:016x}.new", random_u64()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => {
                // The mode given to open is filtered by the umask; make it exact.
                let _ = f.set_permissions(std::fs::Permissions::from_mode(0o600));
                return Ok((tmp, f));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(io_err(&tmp)(e)),
        }
    }
    Err(io_err(dir)(last.unwrap_or_else(|| std::io::Error::other("no free temporary name"))))
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: `b` is writable for its 8 bytes, the length passed.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        // No entropy source: still unpredictable enough to others, and O_EXCL guards anyway.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return t ^ ((std::process::id() as u64) << 32);
    }
    u64::from_ne_bytes(b)
}
