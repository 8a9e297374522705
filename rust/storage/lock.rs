//! The writer lock: an `flock` on `base/.lock` holding the pid.
//!
//! One writer process takes it exclusively for as long as its queue is open.
//! Queues opened with several writer processes take it shared instead: the
//! first of them takes it exclusively while it recovers the queue, then
//! shares it; the last to close gets it exclusively again and records a
//! clean shutdown. A single writer and shared writers exclude each other.
//!
//! The kernel drops an flock when its holder dies, so a lock left by a dead
//! process never blocks anyone; the pid inside is only for the error message
//! (followed by ` shared` while shared writers hold it).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

const SHARED_TAG: &str = "shared";
/// How long a shared writer waits for the first one to finish recovery.
const JOIN_WAIT: Duration = Duration::from_secs(30);
/// How long a writer retries a lock its own process seems to hold: a
/// child this process is starting (fork, then exec) shares every open file
/// until its exec closes them, and with them the flock of a queue this
/// process has just closed.
const SELF_WAIT: Duration = Duration::from_millis(200);

/// Held by a writing process for as long as its queue is open.
#[derive(Debug)]
pub struct WriterLock {
    file: File,
}

/// How [`WriterLock::acquire_shared`] got the lock.
#[derive(Debug, PartialEq, Eq)]
pub enum Role {
    /// No other writer: this process recovers the queue, then shares.
    First,
    /// Other shared writers are running.
    Joined,
}

fn open(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::io("open", path, e))
}

fn contents(mut file: &File) -> String {
    let mut s = String::new();
    let _ = file.seek(SeekFrom::Start(0));
    let _ = file.read_to_string(&mut s);
    s
}

fn locked(queue: &Path, contents: &str) -> Error {
    Error::Locked {
        path: queue.to_path_buf(),
        pid: contents
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok()),
    }
}

impl WriterLock {
    /// Takes the lock exclusively or reports who holds it.
    ///
    /// When the file names this process, the holder may be a child between
    /// its fork and its exec, holding a copy of a lock this process already
    /// released: it retries for up to [`SELF_WAIT`] before reporting it.
    pub fn acquire(path: &Path, queue: &Path) -> Result<WriterLock> {
        let file = open(path)?;
        let start = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let c = contents(&file);
                    let ours = c.split_whitespace().next() == Some(&std::process::id().to_string());
                    if !ours || start.elapsed() > SELF_WAIT {
                        return Err(locked(queue, &c));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(TryLockError::Error(e)) => return Err(Error::io("flock", path, e)),
            }
        }
        let lock = WriterLock { file };
        lock.write_pid(path, "")?;
        Ok(lock)
    }

    /// Takes the lock for one of several writer processes. Fails with
    /// `Locked` when a single (exclusive) writer holds it.
    pub fn acquire_shared(path: &Path, queue: &Path) -> Result<(WriterLock, Role)> {
        let file = open(path)?;
        match file.try_lock() {
            Ok(()) => {
                let lock = WriterLock { file };
                lock.write_pid(path, SHARED_TAG)?;
                return Ok((lock, Role::First));
            }
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(Error::io("flock", path, e)),
        }
        let start = Instant::now();
        loop {
            match file.try_lock_shared() {
                Ok(()) => return Ok((WriterLock { file }, Role::Joined)),
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => return Err(Error::io("flock", path, e)),
            }
            // Held exclusively: by a single writer (refuse), or by the first
            // shared writer while it recovers (wait). An empty file is one
            // being rewritten: look again.
            let c = contents(&file);
            let shared = c.split_whitespace().nth(1) == Some(SHARED_TAG);
            if (!c.is_empty() && !shared) || start.elapsed() > JOIN_WAIT {
                return Err(locked(queue, &c));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Turns an exclusive lock into a shared one (after recovery).
    pub fn share(&self, path: &Path) -> Result<()> {
        self.file
            .lock_shared()
            .map_err(|e| Error::io("flock", path, e))
    }

    /// Tries to turn a shared lock into an exclusive one: true when no other
    /// writer holds it. On false the lock may be gone (Linux converts by
    /// unlocking first), so call this only when done writing.
    pub fn try_exclusive(&self) -> bool {
        self.file.try_lock().is_ok()
    }

    fn write_pid(&self, path: &Path, tag: &str) -> Result<()> {
        let text = format!("{} {tag}", std::process::id());
        let mut f = &self.file;
        f.set_len(0)
            .and_then(|_| f.seek(SeekFrom::Start(0)))
            .and_then(|_| f.write_all(text.trim_end().as_bytes()))
            .map_err(|e| Error::io("write", path, e))
    }

    /// Pid recorded in a lock file, if a live process holds it.
    pub fn holder(path: &Path) -> Option<u32> {
        let file = File::open(path).ok()?;
        let c = contents(&file);
        let mut words = c.split_whitespace();
        let pid = words.next()?.parse().ok()?;
        // Shared writers hold it shared: only an exclusive probe sees them.
        let free = if words.next() == Some(SHARED_TAG) {
            file.try_lock().is_ok()
        } else {
            file.try_lock_shared().is_ok()
        };
        (!free).then_some(pid)
    }
}
