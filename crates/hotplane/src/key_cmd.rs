//! `hotplane key gen FILE`: a new update key (32 random bytes as 64 hex digits), written with
//! owner-only permissions, and the lines that give it to a node and to a sender.

use anyhow::Context as _;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Write a new key to `file` (refusing to replace one unless `force`), for key id `id`.
pub fn gen(file: &Path, id: u32, force: bool) -> anyhow::Result<()> {
    if id == 0 {
        anyhow::bail!("--id 0 means unauthenticated; give a key id from 1");
    }
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut r| r.read_exact(&mut key))
        .context("reading /dev/urandom")?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).mode(0o600);
    if force {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    let mut f = opts.open(file).with_context(|| {
        format!(
            "{}: cannot create it (an existing key is kept; --force replaces it)",
            file.display()
        )
    })?;
    // A replaced file keeps its old mode: make it owner-only too.
    std::fs::set_permissions(file, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    writeln!(f, "{}", hex::encode(key))?;
    println!(
        "wrote a new key, id {id}, to {} (owner-only)\n\
         the node: [[control.keys]] id = {id}, key_file = \"{}\"\n\
         a sender: --key-file {} --key-id {id}",
        file.display(),
        file.display(),
        file.display()
    );
    Ok(())
}
