//! Small-file helpers: atomic replacement and directory sync.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::format::frame::DATA_HEADER_LEN;
use crate::format::header::{REMOVAL_MARK, REMOVAL_MARK_AT};

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

/// Stores the removal mark in data file `path` (see
/// [`crate::format::header::REMOVAL_MARK`]): done before the file is
/// deleted or another renamed over it, so a reader in another process that
/// keeps it mapped sees the mark in its own mapping and looks again. Not
/// synced: the mark only matters to processes running while the file is
/// still there. A file already gone, or too short to be a data file, is
/// left as it is.
pub fn mark_removal(path: &Path) -> Result<()> {
    let file = match OpenOptions::new().write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("open to mark removed", path, e)),
    };
    let len = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e))?
        .len();
    if len < DATA_HEADER_LEN as u64 {
        return Ok(());
    }
    file.write_all_at(&REMOVAL_MARK, REMOVAL_MARK_AT as u64)
        .map_err(|e| Error::io("mark removed", path, e))
}

/// Deletes data file `path` (nothing when it is gone already), marked
/// first (see [`mark_removal`]).
pub fn remove_data_file(path: &Path) -> Result<()> {
    mark_removal(path)?;
    remove_if_present(path).map(drop)
}

/// Deletes `path`: `Ok(false)` when it was gone already (another process,
/// or an interrupted pass, removed it first).
pub fn remove_if_present(path: &Path) -> Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("remove", path, e)),
    }
}
