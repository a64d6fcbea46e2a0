//! Helpers shared by the integration tests.

use std::path::PathBuf;

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
