//! The writer lock: an exclusive `flock` on `base/.lock` holding the pid.
//!
//! The kernel drops an flock when its holder dies, so a lock left by a dead
//! process never blocks anyone; the pid inside is only for the error message.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// Held by the writing process for as long as its queue is open.
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
}

impl WriterLock {
    /// Takes the lock or reports who holds it.
    pub fn acquire(path: &Path, queue: &Path) -> Result<WriterLock> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut s = String::new();
                let _ = file.read_to_string(&mut s);
                return Err(Error::Locked {
                    path: queue.to_path_buf(),
                    pid: s.trim().parse().ok(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(Error::io("flock", path, e)),
        }
        let pid = std::process::id().to_string();
        file.set_len(0)
            .and_then(|_| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(pid.as_bytes()))
            .map_err(|e| Error::io("write", path, e))?;
        Ok(WriterLock { _file: file })
    }

    /// Pid recorded in a lock file, if a live process holds it.
    pub fn holder(path: &Path) -> Option<u32> {
        let file = File::open(path).ok()?;
        match file.try_lock_shared() {
            Ok(()) => None,
            Err(_) => {
                let mut s = String::new();
                (&file).read_to_string(&mut s).ok()?;
                s.trim().parse().ok()
            }
        }
    }
}
