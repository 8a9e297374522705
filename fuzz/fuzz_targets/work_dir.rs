//! A fuzz target's working directory, `fuzz/artifacts/<target>/work`
//! (ignored by git), emptied when the target starts and reused by the next
//! run. Not a `tempfile::TempDir` kept in a static: statics are never
//! dropped, so every run left its queue behind in /tmp.

use std::path::{Path, PathBuf};

/// The emptied working directory of fuzz target `target`.
pub fn fresh(target: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("artifacts")
        .join(target)
        .join("work");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
