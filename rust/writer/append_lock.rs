//! The append lock of a queue opened by several writer processes.
//!
//! `base/append.lock` is a 4 KiB file every writer process maps. One word is
//! the lock: 0 when free, else the holder's identity (pid and the process's
//! start time, so a reused pid is not mistaken for the holder). A writer
//! holds it for one bundle: it takes the lock, moves to the tail the last
//! holder recorded, writes its frames, records the new tail and lets go.
//!
//! A holder that dies keeps the word set. A waiter checks the holder's
//! liveness once it has waited [`LIVENESS_CHECK`], then every
//! [`LIVENESS_CHECK`] again; a dead holder's lock is taken over with a
//! compare-and-swap (only one waiter wins) and the winner repairs the tail
//! (see `IoThread::catch_up`). The layout is in `docs/FORMAT.md`.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::storage::mapped::WordFile;
use crate::storage::process::{identity, is_alive, pid_of};

pub const APPEND_LOCK_FILE: &str = "append.lock";

/// How long a waiter waits before it first asks whether the holder lives,
/// and between later checks. A live holder keeps the lock for one bundle
/// (microseconds, a few milliseconds when it rolls a file).
pub const LIVENESS_CHECK: Duration = Duration::from_millis(10);

const MAGIC: u64 = u64::from_le_bytes(*b"LMQALOCK");
const VERSION: u64 = 1;
const WORDS: usize = 512; // 4 KiB

// Word numbers (see FORMAT.md, "append.lock").
const W_MAGIC: usize = 0;
const W_VERSION: usize = 1;
const W_HOLDER: usize = 2;
const W_TAIL_GEN: usize = 3;
const W_FILE_NUMBER: usize = 4;
const W_WRITE_POS: usize = 5;
const W_NEXT_SEQ: usize = 6;
const W_LAST_TS: usize = 7;
const W_KEY_GEN: usize = 8;
const W_TAKEOVERS: usize = 9;
const W_WANTED: usize = 10;

/// Where the last holder left the queue's tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tail {
    /// Number of the file being written (0: no file yet).
    pub file_number: u64,
    /// Offset of the next frame in that file.
    pub write_pos: u64,
    /// Sequence the next message gets.
    pub next_seq: u64,
    /// Timestamp of the last message (timestamps never go backwards).
    pub last_ts: u64,
    /// Bumped by every holder that changed the key index.
    pub key_gen: u64,
}

/// How the lock was obtained.
#[derive(Debug)]
pub struct Acquired {
    /// The recorded tail; `None` when its holder died while recording it.
    pub tail: Option<Tail>,
    /// Pid of a dead holder whose lock was taken over.
    pub took_over_from: Option<u32>,
}

#[derive(Debug)]
pub struct AppendLock {
    file: WordFile,
    me: u64,
}

impl AppendLock {
    pub fn open(base: &Path) -> Result<AppendLock> {
        let path = base.join(APPEND_LOCK_FILE);
        let file = WordFile::open(&path, WORDS)?;
        let me = identity(std::process::id()).ok_or_else(|| {
            Error::io(
                "read /proc/self/stat",
                &path,
                std::io::Error::other("process start time unavailable"),
            )
        })?;
        Ok(AppendLock { file, me })
    }

    fn w(&self, i: usize) -> &AtomicU64 {
        &self.file.words()[i]
    }

    /// Starts over from `tail`: called by the first writer process after
    /// recovery, when no other writer can be alive (it holds the directory
    /// lock exclusively).
    pub fn reset(&self, tail: Tail) -> Result<()> {
        self.w(W_HOLDER).store(0, Ordering::SeqCst);
        self.w(W_WANTED).store(0, Ordering::SeqCst);
        self.w(W_TAIL_GEN).store(0, Ordering::SeqCst);
        self.record(tail);
        self.w(W_VERSION).store(VERSION, Ordering::SeqCst);
        self.w(W_MAGIC).store(MAGIC, Ordering::SeqCst);
        self.file
            .flush()
            .map_err(|e| Error::io("msync", APPEND_LOCK_FILE, e))
    }

    /// Whether a process (alive or not) holds the lock: after an exclusive
    /// open that means it died holding it.
    pub fn is_held(&self) -> bool {
        self.w(W_MAGIC).load(Ordering::SeqCst) == MAGIC
            && self.w(W_HOLDER).load(Ordering::SeqCst) != 0
    }

    /// The key-index generation as stored, even in a torn record: the
    /// highest any writer has recorded (generations only grow).
    pub fn key_gen_now(&self) -> u64 {
        self.w(W_KEY_GEN).load(Ordering::Acquire)
    }

    /// Whether a writer waits for the lock (a holder that keeps it across
    /// bundles lets it go soon, see `IoThread::lease`).
    pub fn wanted(&self) -> bool {
        self.w(W_WANTED).load(Ordering::Relaxed) != 0
    }

    /// After letting the lock go because another writer wants it: waits (at
    /// most `max`) until another writer took it, so that this one does not
    /// take it straight back while the other is still waking up.
    pub fn let_others_in(&self, max: Duration) {
        let start = Instant::now();
        let mut round = 0u32;
        while self.w(W_HOLDER).load(Ordering::Relaxed) == 0 {
            round += 1;
            if round < 64 {
                std::hint::spin_loop();
                continue;
            }
            if start.elapsed() >= max {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Locks taken over from dead holders since the file was reset.
    #[cfg(test)]
    pub fn takeovers(&self) -> u64 {
        self.w(W_TAKEOVERS).load(Ordering::Relaxed)
    }

    /// Takes the lock, waiting for a live holder and taking it over from a
    /// dead one.
    pub fn acquire(&self) -> Result<Acquired> {
        let holder = self.w(W_HOLDER);
        // Read the clock only once the lock turns out to be taken.
        let mut clock: Option<(Instant, Instant)> = None;
        let mut round = 0u32;
        loop {
            let cur =
                match holder.compare_exchange(0, self.me, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => {
                        return Ok(Acquired {
                            tail: self.read_tail(),
                            took_over_from: None,
                        })
                    }
                    Err(cur) => cur,
                };
            round += 1;
            if round < 64 {
                std::hint::spin_loop();
                continue;
            }
            // Tell a holder that keeps the lock across bundles to let go.
            let wanted = self.w(W_WANTED);
            if wanted.load(Ordering::Relaxed) == 0 {
                wanted.store(1, Ordering::Relaxed);
            }
            let now = Instant::now();
            let (start, next_check) = clock.get_or_insert((now, now + LIVENESS_CHECK));
            let start = *start;
            if now >= *next_check {
                *next_check = now + LIVENESS_CHECK;
                if !is_alive(cur)
                    && holder
                        .compare_exchange(cur, self.me, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    self.w(W_TAKEOVERS).fetch_add(1, Ordering::Relaxed);
                    return Ok(Acquired {
                        tail: self.read_tail(),
                        took_over_from: Some(pid_of(cur)),
                    });
                }
            }
            if now - start < Duration::from_micros(200) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    /// Records `tail` (when given) and lets the lock go.
    pub fn release(&self, tail: Option<Tail>) {
        if let Some(t) = tail {
            self.record(t);
        }
        // Waiters still waiting say so again while the next holder holds it.
        self.w(W_WANTED).store(0, Ordering::Relaxed);
        self.w(W_HOLDER).store(0, Ordering::Release);
    }

    /// Writes the tail under a generation counter: odd while writing, so a
    /// holder that dies halfway leaves a record the next one ignores.
    fn record(&self, t: Tail) {
        let gen = self.w(W_TAIL_GEN);
        gen.fetch_add(1, Ordering::AcqRel);
        self.w(W_FILE_NUMBER)
            .store(t.file_number, Ordering::Relaxed);
        self.w(W_WRITE_POS).store(t.write_pos, Ordering::Relaxed);
        self.w(W_NEXT_SEQ).store(t.next_seq, Ordering::Relaxed);
        self.w(W_LAST_TS).store(t.last_ts, Ordering::Relaxed);
        self.w(W_KEY_GEN).store(t.key_gen, Ordering::Relaxed);
        gen.fetch_add(1, Ordering::Release);
    }

    fn read_tail(&self) -> Option<Tail> {
        if self.w(W_MAGIC).load(Ordering::Acquire) != MAGIC
            || self.w(W_VERSION).load(Ordering::Acquire) != VERSION
            || self.w(W_TAIL_GEN).load(Ordering::Acquire) % 2 == 1
        {
            return None;
        }
        Some(Tail {
            file_number: self.w(W_FILE_NUMBER).load(Ordering::Relaxed),
            write_pos: self.w(W_WRITE_POS).load(Ordering::Relaxed),
            next_seq: self.w(W_NEXT_SEQ).load(Ordering::Relaxed),
            last_ts: self.w(W_LAST_TS).load(Ordering::Relaxed),
            key_gen: self.w(W_KEY_GEN).load(Ordering::Relaxed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::process::{proc_stat, PID_BITS};

    #[test]
    fn lock_taken_over_from_a_dead_holder() {
        let dir = tempfile::tempdir().unwrap();
        let lock = AppendLock::open(dir.path()).unwrap();
        let tail = Tail {
            file_number: 3,
            write_pos: 4096,
            next_seq: 17,
            last_ts: 5,
            key_gen: 2,
        };
        lock.reset(tail).unwrap();
        let got = lock.acquire().unwrap();
        assert_eq!(got.tail, Some(tail));
        assert!(got.took_over_from.is_none());
        // A dead process's identity in the holder word, as a SIGKILL leaves it.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let (start, _) = proc_stat(pid).unwrap();
        child.wait().unwrap();
        lock.w(W_HOLDER)
            .store((start << PID_BITS) | u64::from(pid), Ordering::SeqCst);
        let t0 = Instant::now();
        let got = lock.acquire().unwrap();
        assert_eq!(got.took_over_from, Some(pid));
        assert!(t0.elapsed() < Duration::from_secs(1));
        assert_eq!(lock.takeovers(), 1);
        lock.release(None);
        assert!(!lock.is_held());
    }
}
