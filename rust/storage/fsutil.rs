//! Small-file helpers: atomic replacement and directory sync.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Makes a directory entry change (create, rename) durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync directory", dir, e))
}

/// Makes a new file's name durable: fsyncs `dir` and every directory above
/// it up to and including `base` (a new day directory's own entry lives in
/// its month's directory, and so on). A directory that is gone (retention
/// removed it, with its files) is skipped.
pub fn sync_dir_chain(base: &Path, dir: &Path) -> Result<()> {
    let mut d = Some(dir);
    while let Some(p) = d {
        match sync_dir(p) {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
        if p == base {
            break;
        }
        d = p.parent().filter(|q| q.starts_with(base));
    }
    Ok(())
}

/// Replaces `path` with `bytes` so that a crash leaves either the old or the
/// new contents: write a temporary file, fsync it, rename it over `path`,
/// fsync the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let mut f = File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
    f.write_all(bytes)
        .map_err(|e| Error::io("write", &tmp, e))?;
    f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| Error::io("rename", path, e))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}
