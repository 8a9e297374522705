//! State the I/O thread shares with appenders and the queue: how far writing
//! and syncing got, and whether the writer is poisoned.
//!
//! `written` and `durable` count *tickets*: the number an appender gives a
//! message when it takes it (see `Handoff`). With one writer process a
//! ticket is the message's sequence; with several, it is this process's own
//! count, and the sequence is known only once the message is written. The
//! one sequence-valued mark here is `Counters::durable_seq`, for `Stats`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::error::{Error, Result};
use crate::notify::Notify;
use crate::storage::wake::WakeFile;

#[derive(Debug, Default)]
struct Progress {
    /// Every ticket below this is msync'd.
    durable: u64,
    /// Set once, by the I/O thread, when a write or sync failed.
    poison: Option<Arc<Error>>,
    /// With `poison`: every ticket below this had its
    /// frame written to the data file before the failure.
    stored_below: u64,
    /// Callbacks waiting for a durable mark (`flush_then`), by target.
    on_durable: Vec<(u64, Notify)>,
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
    /// Key-compaction passes started after a roll that completed
    /// (`compact_on_roll`).
    pub compactions: AtomicU64,
    /// Key-compaction passes started after a roll that failed (the next
    /// roll starts another).
    pub compaction_errors: AtomicU64,
    /// Every sequence below this is msync'd (by this process's last sync).
    pub durable_seq: AtomicU64,
    /// Append locks this process took over from a dead writer process.
    pub takeovers: AtomicU64,
    /// Batches appending threads wrote themselves while the I/O thread slept.
    pub appender_writes: AtomicU64,
}

#[derive(Debug, Default)]
pub struct WriterShared {
    progress: Mutex<Progress>,
    cond: Condvar,
    waiters: AtomicUsize,
    /// Threads blocked in `wait_written` (several writer processes only).
    written_waiters: AtomicUsize,
    poisoned: AtomicBool,
    /// Every ticket below this is written and visible to readers.
    written: AtomicU64,
    /// Key-index coverage recorded at shutdown (see `Metadata::key_index_upto`).
    indexed_upto: AtomicU64,
    key_index_last: AtomicU64,
    pub counters: Counters,
    /// The queue's wake-up word. The I/O thread bumps its own clone
    /// ([`WriterShared::wake`] at its start); this one is for stats and is
    /// let go at close, so a closed queue maps nothing.
    wake: Mutex<Option<Arc<WakeFile>>>,
}

impl WriterShared {
    /// `next` is the appenders' first ticket;
    /// `durable_seq` the sequence everything below which is on disk.
    /// `wake`: the queue's wake-up word, if it has one.
    pub fn new(next: u64, durable_seq: u64, wake: Option<Arc<WakeFile>>) -> Arc<WriterShared> {
        let s = WriterShared {
            wake: Mutex::new(wake),
            ..WriterShared::default()
        };
        s.written.store(next, Ordering::Relaxed);
        s.progress.lock().unwrap_or_else(|e| e.into_inner()).durable = next;
        s.counters.durable_seq.store(durable_seq, Ordering::Relaxed);
        Arc::new(s)
    }

    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    pub fn set_written(&self, next: u64) {
        self.written.store(next, Ordering::SeqCst);
        // Pairs with `wait_written`: it registers, then checks `written`.
        if self.written_waiters.load(Ordering::SeqCst) > 0 {
            drop(self.progress.lock().unwrap_or_else(|e| e.into_inner()));
            self.cond.notify_all();
        }
    }

    /// The wake-up word this writer bumps (`None` once closed, or when the
    /// queue has no usable one).
    pub fn wake(&self) -> Option<Arc<WakeFile>> {
        self.wake.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Lets go of the wake-up word (at close, after the I/O thread ended).
    pub fn drop_wake(&self) {
        self.wake.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Blocks until `written` reaches `target`, or poison.
    pub fn wait_written(&self, target: u64) -> Result<()> {
        for _ in 0..64 {
            if self.written.load(Ordering::Acquire) >= target {
                return Ok(());
            }
            std::thread::yield_now();
        }
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        self.written_waiters.fetch_add(1, Ordering::SeqCst);
        let result = loop {
            if self.written.load(Ordering::SeqCst) >= target {
                break Ok(());
            }
            if let Some(cause) = &p.poison {
                break Err(Error::Poisoned {
                    cause: cause.clone(),
                });
            }
            p = self.cond.wait(p).unwrap_or_else(|e| e.into_inner());
        };
        self.written_waiters.fetch_sub(1, Ordering::SeqCst);
        result
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
        let durable = p.durable;
        let ready: Vec<(u64, Notify)> = if p.on_durable.is_empty() {
            Vec::new()
        } else {
            let (ready, rest) = std::mem::take(&mut p.on_durable)
                .into_iter()
                .partition(|(target, _)| *target <= durable);
            p.on_durable = rest;
            ready
        };
        drop(p);
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.cond.notify_all();
        }
        // Outside the lock: a callback only records and wakes its owner.
        for (_, n) in ready {
            n.fire(Ok(()));
        }
    }

    /// Calls `notify` once every ticket below `target` is durable (at
    /// once if it is), or with the poisoning error: [`Self::wait_durable`]
    /// without a blocked thread.
    pub fn on_durable(&self, target: u64, notify: Notify) {
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        if p.durable >= target {
            drop(p);
            return notify.fire(Ok(()));
        }
        if let Some(cause) = &p.poison {
            let err = Error::Poisoned {
                cause: cause.clone(),
            };
            drop(p);
            return notify.fire(Err(err));
        }
        p.on_durable.push((target, notify));
    }

    /// Records the failure that stops the writer and wakes every waiter.
    pub fn poison(&self, err: Arc<Error>) {
        self.poison_written(err, 0);
    }

    /// [`poison`](Self::poison), telling that every number below
    /// `stored_below` had its frame written before the failure.
    pub fn poison_written(&self, err: Arc<Error>, stored_below: u64) {
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        if p.poison.is_none() {
            p.poison = Some(err);
            p.stored_below = stored_below;
        }
        self.poisoned.store(true, Ordering::Release);
        let cause = p.poison.clone().expect("set above");
        let waiting = std::mem::take(&mut p.on_durable);
        drop(p);
        self.cond.notify_all();
        for (_, n) in waiting {
            n.fire(Err(Error::Poisoned {
                cause: cause.clone(),
            }));
        }
    }

    /// The error for an append numbered `first` that waited and saw
    /// `err`: [`Error::MaybeStored`] when the writer failed after writing
    /// its frame, else `err`. `seq` is its sequence when known.
    pub fn append_error(&self, err: Error, first: u64, seq: Option<u64>) -> Error {
        let Error::Poisoned { cause } = err else {
            return err;
        };
        let p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        if first < p.stored_below {
            Error::MaybeStored { seq, cause }
        } else {
            Error::Poisoned { cause }
        }
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

    /// Blocks until every ticket below `target` is durable, or poison.
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
