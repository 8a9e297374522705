//! Reading by sequence: tailers (forward and backward), `get`, and
//! read-your-writes.

use crate::catalog::still_listed;
use crate::error::{Error, Result};
use crate::format::position;
use crate::reader::backward::BackwardTailer;
use crate::reader::tailer::{Message, OwnedMessage, Start, Tailer};
use crate::reader::watch::TailWatch;
use crate::storage::mapped::Mapping;

use super::Queue;

impl Queue {
    /// Every topic stream (topic and queue id) with messages still in the
    /// queue: how many, the first and last sequence, the last timestamp.
    /// Sealed files are counted from their topic index; files without one
    /// (the active file, an index not built yet) are read.
    pub fn topics(&self) -> Result<Vec<crate::reader::topics_summary::TopicInfo>> {
        let mut t = self.tailer(Start::Beginning)?;
        crate::reader::topics_summary::topic_summary(&self.inner().catalog, &mut t)
    }

    /// The handle's [`TailWatch`]: register a [`crate::Notify`] to hear
    /// when a message is published, without a thread per waiter.
    pub fn tail_watch(&self) -> TailWatch {
        self.inner().watch.clone()
    }

    /// A tailer positioned at `start`.
    pub fn tailer(&self, start: Start) -> Result<Tailer> {
        self.check_open()?;
        self.wait_visible()?;
        if start == Start::Beginning {
            self.first_seq(); // drops files retention removed from the catalog
        }
        let mut t = self.new_tailer();
        match start {
            Start::Beginning => {}
            Start::End => t.seek_end()?,
            Start::Seq(seq) => t.seek(seq)?,
        }
        Ok(t)
    }

    /// A tailer reading newest first from `start`: [`Start::End`] the
    /// newest message, [`Start::Seq`] that one, [`Start::Beginning`] only
    /// the oldest. See [`BackwardTailer`].
    pub fn backward_tailer(&self, start: Start) -> Result<BackwardTailer> {
        self.check_open()?;
        self.wait_visible()?;
        let first = self.first_seq();
        let mut t = self.new_tailer();
        let before = match start {
            Start::End => {
                t.seek_end()?;
                t.next_seq()
            }
            Start::Beginning => {
                t.seek_end()?;
                if t.next_seq() > first {
                    first + 1
                } else {
                    first
                }
            }
            Start::Seq(seq) => {
                t.seek(seq)?;
                // `seq` may be the end (nothing there yet): start below it.
                if t.read_next()?.is_some() {
                    seq + 1
                } else {
                    seq
                }
            }
        };
        Ok(BackwardTailer::new(t, before, first))
    }

    /// A tailer at the first file, told what the metadata knows is
    /// published (after a clean close): a zero length word before that is
    /// damage.
    pub(super) fn new_tailer(&self) -> Tailer {
        let mut t = Tailer::new(self.inner().catalog.clone(), self.inner().config.wait);
        t.set_wake(self.inner().wake.clone());
        let meta = self
            .inner()
            .metadata
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if meta.clean_shutdown {
            t.expect_published(meta.next_seq);
        }
        t
    }

    /// One message by sequence, copied out. A message below `next_seq` that
    /// cannot be reached is damage ([`Error::Corrupted`]), never
    /// [`Error::NotFound`].
    pub fn get(&self, seq: u64) -> Result<OwnedMessage> {
        self.get_with(seq, |m| m.to_owned())
    }

    /// As [`Queue::get`], handing `f` the message borrowed from its file
    /// (`f` builds what the caller keeps, with one copy of the payload at
    /// most) and returning what it returns. `f` may run more than once
    /// (when the file turns out to have been deleted meanwhile): only what
    /// the last call returned is kept.
    pub fn get_with<R>(&self, seq: u64, mut f: impl FnMut(&Message<'_>) -> R) -> Result<R> {
        self.check_open()?;
        // Read-your-writes: only a sequence this process may still be
        // writing needs the wait (one atomic load otherwise). A read-only
        // handle does not look for the end of the data first (a directory
        // listing and two mappings, ~90 µs): it reads, and only a miss asks
        // where the data ends, for the error.
        if let Some(w) = &self.inner().writer {
            if self.inner().config.multi_writer || seq >= w.shared.written() {
                self.wait_visible()?;
            }
        }
        let mut guard = self
            .inner()
            .getter
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut told = false;
        let mut rechecked = false;
        loop {
            let t = match guard.as_mut() {
                Some(t) => t,
                None => guard.insert(self.new_tailer()),
            };
            let read = t
                .read_at(seq)
                .map(|m| m.map(|m| (f(&m), position::decode(m.position()).0, m.mapping().clone())));
            match read {
                Ok(Some((got, number, map))) => {
                    // One check per call that the file is still there: done
                    // already when this call mapped it.
                    if rechecked
                        || guard.as_ref().is_some_and(Tailer::file_just_checked)
                        || self.file_still_kept(number, &map)
                    {
                        return Ok(got);
                    }
                    // Retention (another process) deleted the file this
                    // reader still maps: forget it and look again.
                    *guard = None;
                    self.inner().catalog.refresh()?;
                    rechecked = true;
                    continue;
                }
                Ok(None) | Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            let (first, next) = (self.first_seq(), self.next_seq());
            if told || seq < first || seq >= next {
                return Err(Error::NotFound { seq, first, next });
            }
            // Published, yet not reached: a hole on the way. Read again,
            // knowing that, to report where.
            if let Some(t) = guard.as_mut() {
                t.expect_published(next);
            }
            told = true;
        }
    }

    /// False when data file `number`, which a message was read from through
    /// `map`, is gone: retention in
    /// another process deleted it while this handle kept it mapped. Free
    /// (no system call) for the file being written, which retention never
    /// deletes: the catalog's last file while it still has its full length
    /// (a sealed version-4 file is trimmed; a version-3 file is not, so a
    /// handle whose catalog is behind may still return a message from a
    /// sealed version-3 file that was just deleted). Otherwise
    /// [`still_listed`] of `map` (a load of its removal mark, or for a file
    /// older than format 10 an `fstat` or a `stat`).
    fn file_still_kept(&self, number: u64, map: &Mapping) -> bool {
        let catalog = &self.inner().catalog;
        let Some(f) = catalog.at_or_after_number(number) else {
            return true;
        };
        if f.header.file_number != number {
            return true;
        }
        let last = catalog.last().is_some_and(|l| l.id == f.id);
        if last && map.len() as u64 == f.header.file_size {
            return true;
        }
        still_listed(map, f.header.version)
    }

    /// Read-your-writes: returns once every message this process appended
    /// before the call is visible to readers (written to the mapping; use
    /// `Appender::flush` for durability). Called by `get` and `tailer`.
    pub fn wait_visible(&self) -> Result<()> {
        match &self.inner().writer {
            // A poisoned or closed writer writes nothing more: readers
            // read what is there.
            Some(w) if !w.appender.forked() => match w.appender.wait_written() {
                Err(Error::Closed | Error::Poisoned { .. }) => Ok(()),
                other => other,
            },
            _ => Ok(()),
        }
    }

    /// The first sequence whose message was written at or after `micros`
    /// (µs since the Unix epoch), or `next_seq` when there is none yet:
    /// Kafka's `offsetsForTimes`. Timestamps never decrease within a queue,
    /// so `seq_for_time(a)..seq_for_time(b)` are the messages written in
    /// `[a, b)`. A binary search over the files, then the sparse index.
    pub fn seq_for_time(&self, micros: u64) -> Result<u64> {
        self.check_open()?;
        let mut t = self.tailer(Start::Beginning)?;
        t.seek_time(micros)?;
        Ok(t.next_seq())
    }
}
