//! The I/O thread: the only writer of the queue's files in this process.
//!
//! It takes commands off the channel, drains whatever else is queued (up to
//! a bound), writes every frame, and then syncs according to the flush mode.
//! Syncing once per drained group is the group commit: every `Sync` append
//! that arrived while the previous msync ran shares the next one.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::active::ActiveFile;
use super::command::{Command, EncodedBatch};
use super::shared::WriterShared;
use crate::clock::Clock;
use crate::config::{Config, FlushMode};
use crate::error::{Error, Result};
use crate::format::header::DataHeader;
use crate::format::record::RECORD_FIXED_LEN;
use crate::reader::catalog::Catalog;
use crate::storage::layout::FileId;

/// Most commands handled before the I/O thread syncs and publishes progress.
const DRAIN_LIMIT: usize = 4096;
/// Sealed files whose pages may still be dirty (async mode) kept for the next
/// flush; beyond this the oldest is synced at once.
const MAX_UNSYNCED_SEALED: usize = 4;

/// Where the writer resumes, as found by recovery.
#[derive(Debug)]
pub struct Resume {
    pub active: Option<ActiveFile>,
    pub last_id: Option<FileId>,
    pub next_file_number: u64,
    pub next_seq: u64,
    pub last_timestamp: u64,
}

pub struct IoThread {
    base: PathBuf,
    config: Config,
    clock: Arc<dyn Clock>,
    rx: Receiver<Command>,
    shared: Arc<WriterShared>,
    catalog: Arc<Catalog>,
    active: Option<ActiveFile>,
    last_id: Option<FileId>,
    next_file_number: u64,
    next_seq: u64,
    last_ts: u64,
    sealed_unsynced: Vec<(PathBuf, File)>,
    /// A flush was requested in the current group.
    flush_requested: bool,
    last_sync: Instant,
}

impl IoThread {
    pub fn new(
        config: Config,
        rx: Receiver<Command>,
        shared: Arc<WriterShared>,
        catalog: Arc<Catalog>,
        resume: Resume,
    ) -> IoThread {
        IoThread {
            base: config.path.clone(),
            clock: config.clock.clone(),
            config,
            rx,
            shared,
            catalog,
            active: resume.active,
            last_id: resume.last_id,
            next_file_number: resume.next_file_number,
            next_seq: resume.next_seq,
            last_ts: resume.last_timestamp,
            sealed_unsynced: Vec::new(),
            flush_requested: false,
            last_sync: Instant::now(),
        }
    }

    /// Runs until `Shutdown` (or every sender is gone). On an error the
    /// writer is poisoned, waiters are woken, and the error is returned.
    pub fn run(mut self) -> Result<()> {
        let result = self.serve();
        if let Err(e) = &result {
            let cause = Arc::new(clone_error(e));
            self.shared.poison(cause);
        }
        result
    }

    fn serve(&mut self) -> Result<()> {
        loop {
            let cmd = match self.rx.recv_timeout(self.idle_timeout()) {
                Ok(cmd) => cmd,
                Err(RecvTimeoutError::Timeout) => {
                    self.maybe_sync()?;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return self.shutdown(None),
            };
            let mut next = Some(cmd);
            let mut handled = 0;
            while let Some(cmd) = next.take() {
                match cmd {
                    Command::Append { seq, msg } => {
                        self.expect_seq(seq)?;
                        let ts = self.timestamp();
                        self.write(msg.flags, ts, &msg.body)?;
                    }
                    Command::Batch { first_seq, batch } => {
                        self.expect_seq(first_seq)?;
                        self.write_batch(&batch)?;
                    }
                    Command::Flush => self.flush_requested = true,
                    Command::Shutdown { done } => return self.shutdown(done),
                }
                handled += 1;
                if handled < DRAIN_LIMIT {
                    next = self.rx.try_recv().ok();
                }
            }
            self.shared.set_written(self.next_seq);
            self.maybe_sync()?;
        }
    }

    fn idle_timeout(&self) -> Duration {
        match self.config.flush {
            FlushMode::Batch { interval, .. } if !interval.is_zero() => {
                interval.min(Duration::from_millis(100))
            }
            _ => Duration::from_millis(100),
        }
    }

    fn expect_seq(&self, seq: u64) -> Result<()> {
        if seq != self.next_seq {
            return Err(Error::Corrupted {
                path: self.base.clone(),
                offset: 0,
                seq: Some(seq),
                reason: format!(
                    "internal: appender sent seq {seq}, writer expected {}",
                    self.next_seq
                ),
            });
        }
        Ok(())
    }

    /// Timestamps never go backwards within a queue, even if the clock does.
    fn timestamp(&mut self) -> u64 {
        self.last_ts = self.clock.now_micros().max(self.last_ts);
        self.last_ts
    }

    fn write_batch(&mut self, batch: &EncodedBatch) -> Result<()> {
        let ts = self.timestamp();
        let mut at = 0usize;
        for &(flags, len) in &batch.entries {
            let body = &batch.bodies[at..at + len as usize];
            at += len as usize;
            self.write(flags, ts, body)?;
        }
        self.shared.set_written(self.next_seq);
        Ok(())
    }

    fn write(&mut self, flags: u8, ts: u64, body: &[u8]) -> Result<()> {
        let record_len = RECORD_FIXED_LEN + body.len();
        let roll = match &self.active {
            None => true,
            Some(a) => a.must_roll(record_len, ts, &self.config.roll),
        };
        if roll {
            self.roll(ts)?;
        }
        let active = self.active.as_mut().expect("roll leaves an active file");
        active.write_frame(flags, ts, body);
        self.next_seq += 1;
        self.shared
            .counters
            .bytes_written
            .fetch_add(record_len as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Seals the active file (end-of-file marker first), then creates the next.
    fn roll(&mut self, ts: u64) -> Result<()> {
        let durable = self.config.flush != FlushMode::Async;
        if let Some(mut old) = self.active.take() {
            old.seal();
            if durable {
                old.sync()?;
                old.index.sync()?;
            } else {
                let _ = old.map.sync_range_async(
                    old.synced_pos & !4095,
                    old.map.len() - (old.synced_pos & !4095),
                );
                let file = old
                    .map
                    .file()
                    .try_clone()
                    .map_err(|e| Error::io("dup", old.map.path(), e))?;
                self.sealed_unsynced
                    .push((old.map.path().to_path_buf(), file));
                if self.sealed_unsynced.len() > MAX_UNSYNCED_SEALED {
                    let (path, f) = self.sealed_unsynced.remove(0);
                    f.sync_data().map_err(|e| Error::io("fdatasync", path, e))?;
                }
            }
            self.shared
                .counters
                .rolls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let id = match self.last_id {
            Some(prev) => prev.successor(ts),
            None => FileId::first_of_day(ts),
        };
        let header = DataHeader {
            first_seq: self.next_seq,
            created_us: ts,
            file_number: self.next_file_number,
            file_size: self.config.file_size,
            index_interval: self.config.index_interval,
        };
        let active = ActiveFile::create(&self.base, id, header, durable)?;
        self.catalog.add(id, header);
        self.last_id = Some(id);
        self.next_file_number += 1;
        self.active = Some(active);
        Ok(())
    }

    fn maybe_sync(&mut self) -> Result<()> {
        let due = match self.config.flush {
            FlushMode::Async => false,
            FlushMode::Sync => true,
            FlushMode::Batch { bytes, interval } => {
                let pending = self.active.as_ref().map_or(0, |a| a.unsynced()) as u64;
                pending > 0
                    && ((bytes > 0 && pending >= bytes) || self.last_sync.elapsed() >= interval)
            }
        };
        if due || self.flush_requested {
            self.sync_all()?;
        }
        Ok(())
    }

    /// msyncs the active file and any sealed file still dirty, then raises
    /// the durable mark to everything written.
    fn sync_all(&mut self) -> Result<()> {
        self.flush_requested = false;
        for (path, f) in self.sealed_unsynced.drain(..) {
            f.sync_data().map_err(|e| Error::io("fdatasync", path, e))?;
        }
        if let Some(a) = self.active.as_mut() {
            if a.unsynced() > 0 || self.shared.durable() < self.next_seq {
                a.sync()?;
                a.index.sync()?;
                self.shared
                    .counters
                    .syncs
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        self.last_sync = Instant::now();
        self.shared.set_durable(self.next_seq);
        Ok(())
    }

    fn shutdown(&mut self, done: Option<std::sync::mpsc::SyncSender<()>>) -> Result<()> {
        // Whatever is still queued was sent before Shutdown: write it too.
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Append { seq, msg } => {
                    self.expect_seq(seq)?;
                    let ts = self.timestamp();
                    self.write(msg.flags, ts, &msg.body)?;
                }
                Command::Batch { first_seq, batch } => {
                    self.expect_seq(first_seq)?;
                    self.write_batch(&batch)?;
                }
                Command::Flush | Command::Shutdown { .. } => {}
            }
        }
        self.shared.set_written(self.next_seq);
        self.sync_all()?;
        if let Some(done) = done {
            let _ = done.send(());
        }
        Ok(())
    }
}

/// Errors are not `Clone` (io::Error isn't); keep kind, errno and message.
fn clone_error(e: &Error) -> Error {
    match e {
        Error::Io { op, path, source } => Error::Io {
            op,
            path: path.clone(),
            source: match source.raw_os_error() {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None => std::io::Error::new(source.kind(), source.to_string()),
            },
        },
        Error::Corrupted {
            path,
            offset,
            seq,
            reason,
        } => Error::Corrupted {
            path: path.clone(),
            offset: *offset,
            seq: *seq,
            reason: reason.clone(),
        },
        other => Error::InvalidArgument(other.to_string()),
    }
}
