//! What a queue reports about itself: its sequences, its data files
//! ([`DataFileInfo`]) and its figures ([`Stats`]), each defined once here.

use crate::error::Result;
use crate::recovery::RecoveryReport;
use crate::storage::layout::KEY_INDEX_DIR;
use crate::storage::mapped::allocated_bytes;
use std::path::Path;

use super::Queue;

/// One data file of a queue, for planning parallel reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFileInfo {
    /// The data file.
    pub path: std::path::PathBuf,
    /// Its number (the name without the date directories).
    pub file_number: u64,
    /// Sequence of the file's first message.
    pub first_seq: u64,
    /// One past its last message (the next file's first, or the queue's end).
    pub end_seq: u64,
    /// When it was created, µs since the Unix epoch.
    pub created_us: u64,
    /// The largest the file may grow to (`file_size` when it was created).
    pub size: u64,
    /// Bytes holding data: the header and the frames (up to the end-of-file
    /// marker, or what is published of the file being written).
    pub bytes_written: u64,
    /// Bytes of disk the data file holds (`st_blocks` × 512).
    pub bytes_allocated: u64,
    /// Bytes of disk its sparse and dense indexes hold.
    pub index_bytes_allocated: u64,
    /// The schema version of its rows (format 12); 0 for an untyped file.
    pub schema_version: u32,
}

/// Figures describing a queue, for monitoring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Sequence of the oldest message kept.
    pub first_seq: u64,
    /// Sequence the next message gets.
    pub next_seq: u64,
    /// Messages kept, as [`Queue::len`] counts them: `next_seq - first_seq`
    /// less the sequences key compaction's holes stand for.
    pub messages: u64,
    /// Data files on disk.
    pub files: u64,
    /// Bytes of disk the queue's files hold (`st_blocks` × 512): data,
    /// sparse-index, dense-index and key-index files.
    pub disk_bytes: u64,
    /// Bytes of the data files that hold data (headers and frames).
    pub data_bytes_written: u64,
    /// Bytes of disk the data files hold.
    pub data_bytes_allocated: u64,
    /// Bytes of disk the sparse-index, dense-index and key-index files hold.
    pub index_bytes_allocated: u64,
    /// Every sequence below this is msync'd (writer only).
    pub durable_seq: u64,
    /// msyncs done (writer only).
    pub syncs: u64,
    /// Files started since open (writer only).
    pub rolls: u64,
    /// Key-compaction passes run after a roll that completed, and that
    /// failed (writer only, `compact_on_roll`).
    pub compactions: u64,
    /// See `compactions`.
    pub compaction_errors: u64,
    /// Record bytes written since open (writer only).
    pub bytes_written: u64,
    /// Batches an appending thread wrote itself, finding the I/O thread
    /// asleep (writer only; `Async` and `Batch` modes, one writer process).
    pub appender_writes: u64,
    /// Append locks this process took over from dead writer processes
    /// (several writers only).
    pub takeovers: u64,
    /// Blocking reads of this handle sleep on the queue's wake-up word
    /// (`wake.ctl`); false: they poll with back-off (no usable control file,
    /// one this handle cannot open read-write, or not Linux).
    pub wake_word: bool,
    /// Followers registered to sleep on the wake-up word now, in every
    /// process (a follower killed while registered counts until a writer
    /// resets the count, see `waiter_resets`).
    pub waiters: u64,
    /// `FUTEX_WAKE` calls this handle's writer made: only when followers
    /// were registered, never for a queue nobody waits on.
    pub wake_calls: u64,
    /// Followers those calls woke.
    pub woken: u64,
    /// Waiter counts this handle's writer found stale (left by followers
    /// killed while waiting) and reset to 0.
    pub waiter_resets: u64,
    /// Opened with `read_only`.
    pub read_only: bool,
    /// What recovery found when the queue was opened.
    pub recovery: RecoveryReport,
}

/// Bytes of disk a data file's indexes (sparse, dense, topics, fields) hold.
fn index_bytes(base: &Path, id: crate::storage::layout::FileId) -> u64 {
    id.index_paths(base)
        .iter()
        .map(|p| allocated_bytes(p))
        .sum()
}

impl Queue {
    /// The data files, oldest first, with the sequences each holds.
    pub fn data_files(&self) -> Result<Vec<DataFileInfo>> {
        self.check_open()?;
        self.inner().catalog.refresh()?;
        let files = self.inner().catalog.snapshot();
        let end = self.next_seq();
        Ok(files
            .iter()
            .enumerate()
            .map(|(i, f)| DataFileInfo {
                path: self.inner().catalog.data_path(f.id),
                file_number: f.header.file_number,
                first_seq: f.header.first_seq,
                end_seq: files.get(i + 1).map_or(end, |n| n.header.first_seq),
                created_us: f.header.created_us,
                size: f.header.file_size,
                bytes_written: crate::reader::tailer::written_bytes(&self.inner().catalog, f),
                bytes_allocated: allocated_bytes(&self.inner().catalog.data_path(f.id)),
                index_bytes_allocated: index_bytes(self.path(), f.id),
                schema_version: f.header.schema_version,
            })
            .collect())
    }

    /// Sequence of the oldest message kept.
    pub fn first_seq(&self) -> u64 {
        let catalog = &self.inner().catalog;
        // Retention (in this or another process) may have removed the
        // oldest files since the catalog last looked: one stat tells.
        if let Some(f) = catalog.first() {
            if !catalog.data_path(f.id).exists() {
                let _ = catalog.refresh();
            }
        }
        if let Some(f) = catalog.first() {
            return f.header.first_seq;
        }
        // No file yet; `next_seq` waits for this process's appends, which
        // may create the first file.
        let next = self.next_seq();
        catalog.first().map_or(next, |f| f.header.first_seq)
    }

    /// Sequence the next message gets (one past the last published).
    /// In the writing process this includes every message appended before
    /// the call (it waits for the I/O thread to write them).
    pub fn next_seq(&self) -> u64 {
        match &self.inner().writer {
            Some(w) if !self.inner().config.multi_writer => {
                let _ = self.wait_visible();
                w.shared.written()
            }
            // Other processes write too: the files tell.
            Some(_) => {
                let _ = self.wait_visible();
                self.end_on_disk()
            }
            None => self.end_on_disk(),
        }
    }

    /// One past the last message published in the files.
    pub(super) fn end_on_disk(&self) -> u64 {
        let mut t = self.new_tailer();
        match t.seek_end() {
            Ok(()) => t.next_seq(),
            Err(_) => self
                .inner()
                .catalog
                .last()
                .map_or(0, |f| f.header.first_seq),
        }
    }

    /// Messages currently kept: the sequences `first_seq..next_seq` but
    /// for the holes key compaction left (their messages were dropped), so
    /// the messages a tailer reads from the start. Counting the holes costs
    /// a `stat` per day directory (and per sealed file in a directory
    /// changed within the last second); the first count of a handle reads
    /// each sealed file's footer, and walks a compacted file of format 8 to
    /// 10 once (its footer does not say).
    pub fn len(&self) -> u64 {
        let next = self.next_seq();
        let first = self.first_seq();
        next.saturating_sub(first)
            .saturating_sub(self.inner().catalog.holes_between(first, next))
    }

    /// True when the queue holds no message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Figures for monitoring.
    pub fn stats(&self) -> Stats {
        let first_seq = self.first_seq();
        let next_seq = self.next_seq();
        let catalog = &self.inner().catalog;
        let files = catalog.snapshot();
        let data_bytes_allocated = files
            .iter()
            .map(|f| allocated_bytes(&catalog.data_path(f.id)))
            .sum();
        let key_index: u64 = std::fs::read_dir(self.path().join(KEY_INDEX_DIR))
            .map(|rd| rd.flatten().map(|e| allocated_bytes(&e.path())).sum())
            .unwrap_or(0);
        let index_bytes_allocated = key_index
            + files
                .iter()
                .map(|f| index_bytes(self.path(), f.id))
                .sum::<u64>();
        let mut s = Stats {
            first_seq,
            next_seq,
            messages: next_seq
                .saturating_sub(first_seq)
                .saturating_sub(catalog.holes_between(first_seq, next_seq)),
            files: files.len() as u64,
            disk_bytes: data_bytes_allocated + index_bytes_allocated,
            data_bytes_written: files
                .iter()
                .map(|f| crate::reader::tailer::written_bytes(catalog, f))
                .sum(),
            data_bytes_allocated,
            index_bytes_allocated,
            read_only: self.inner().config.read_only && self.lazy.is_none(),
            recovery: self.inner().recovery.clone(),
            ..Stats::default()
        };
        if let Some(w) = &self.inner().writer {
            use std::sync::atomic::Ordering::Relaxed;
            s.durable_seq = w.shared.counters.durable_seq.load(Relaxed);
            s.takeovers = w.shared.counters.takeovers.load(Relaxed);
            s.syncs = w.shared.counters.syncs.load(Relaxed);
            s.rolls = w.shared.counters.rolls.load(Relaxed);
            s.compactions = w.shared.counters.compactions.load(Relaxed);
            s.compaction_errors = w.shared.counters.compaction_errors.load(Relaxed);
            s.bytes_written = w.shared.counters.bytes_written.load(Relaxed);
            s.appender_writes = w.shared.counters.appender_writes.load(Relaxed);
            if let Some(wake) = w.shared.wake() {
                (s.wake_calls, s.woken, s.waiter_resets) = wake.counters();
            }
        }
        if let Some(wake) = self.inner().wake.file() {
            s.wake_word = true;
            s.waiters = u64::from(wake.waiters());
        }
        s
    }
}
