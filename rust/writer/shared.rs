//! State the I/O thread shares with appenders and the queue: how far writing
//! and syncing got, and whether the writer is poisoned.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::error::{Error, Result};

#[derive(Debug, Default)]
struct Progress {
    /// Every sequence below this is msync'd.
    durable: u64,
    /// Set once, by the I/O thread, when a write or sync failed.
    poison: Option<Arc<Error>>,
}

/// Counters for `Queue::stats`.
#[derive(Debug, Default)]
pub struct Counters {
    pub syncs: AtomicU64,
    pub rolls: AtomicU64,
    pub bytes_written: AtomicU64,
    /// Data files deleted by retention at roll time.
    pub retention_deleted: AtomicU64,
    /// Retention passes at roll time that failed (the writer goes on).
    pub retention_errors: AtomicU64,
}

#[derive(Debug, Default)]
pub struct WriterShared {
    progress: Mutex<Progress>,
    cond: Condvar,
    waiters: AtomicUsize,
    poisoned: AtomicBool,
    /// Every sequence below this is written and visible to readers.
    written: AtomicU64,
    /// Key-index coverage recorded at shutdown (see `Metadata::key_index_upto`).
    indexed_upto: AtomicU64,
    key_index_last: AtomicU64,
    pub counters: Counters,
}

impl WriterShared {
    pub fn new(next_seq: u64) -> Arc<WriterShared> {
        let s = WriterShared::default();
        s.written.store(next_seq, Ordering::Relaxed);
        s.progress.lock().unwrap_or_else(|e| e.into_inner()).durable = next_seq;
        Arc::new(s)
    }

    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    pub fn set_written(&self, next: u64) {
        self.written.store(next, Ordering::Release);
    }

    pub fn set_indexed_upto(&self, pos: u64, last: Option<u64>) {
        self.indexed_upto.store(pos, Ordering::Release);
        self.key_index_last
            .store(last.unwrap_or(0), Ordering::Release);
    }

    /// The key index's last position at shutdown (0: none).
    pub fn key_index_last(&self) -> Option<u64> {
        Some(self.key_index_last.load(Ordering::Acquire)).filter(|&p| p != 0)
    }

    pub fn indexed_upto(&self) -> u64 {
        self.indexed_upto.load(Ordering::Acquire)
    }

    pub fn durable(&self) -> u64 {
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .durable
    }

    /// Raises the durable mark and wakes whoever waits for it.
    pub fn set_durable(&self, next: u64) {
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        if next > p.durable {
            p.durable = next;
        }
        drop(p);
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.cond.notify_all();
        }
    }

    /// Records the failure that stops the writer and wakes every waiter.
    pub fn poison(&self, err: Arc<Error>) {
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        p.poison.get_or_insert(err);
        self.poisoned.store(true, Ordering::Release);
        drop(p);
        self.cond.notify_all();
    }

    /// The poisoning error, if any (cheap when there is none).
    pub fn check(&self) -> Result<()> {
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(self.poison_error())
    }

    pub fn poison_error(&self) -> Error {
        let p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        match &p.poison {
            Some(cause) => Error::Poisoned {
                cause: cause.clone(),
            },
            None => Error::Closed,
        }
    }

    /// Blocks until every sequence below `target` is durable, or poison.
    pub fn wait_durable(&self, target: u64) -> Result<()> {
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if p.durable >= target {
                return Ok(());
            }
            if let Some(cause) = &p.poison {
                return Err(Error::Poisoned {
                    cause: cause.clone(),
                });
            }
            self.waiters.fetch_add(1, Ordering::AcqRel);
            p = self.cond.wait(p).unwrap_or_else(|e| e.into_inner());
            self.waiters.fetch_sub(1, Ordering::AcqRel);
        }
    }
}
