//! [`BackwardTailer`]: reads a queue newest first (Chronicle's
//! `TailerDirection.BACKWARD`).
//!
//! Frames carry their length only in front, so a reader cannot step back
//! over them; it does not need to. Each step is a seek to the previous
//! sequence: one probe of the file's dense index (`NAME.offsets`, format 5
//! and later, see `docs/FORMAT.md`), then an ordinary, CRC-checked read.
//! Files written before format 5 have no dense index: the seek starts from
//! the sparse-index entry at or before the sequence and steps forward over
//! at most `index_interval` frames by their length words. No byte on disk
//! was added for backward reading.

use super::tailer::{Message, Tailer};
use crate::error::{Error, Result};

/// Reads messages from a starting point towards the oldest, one sequence
/// lower at each read, across files.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let queue = litemq::QueueBuilder::new(dir.path()).open()?;
/// queue.appender()?.append_batch([&b"a"[..], b"b", b"c"])?;
/// let mut newest_first = queue.backward_tailer(litemq::Start::End)?;
/// while let Some(msg) = newest_first.read_next()? {
///     println!("{} {:?}", msg.seq, msg.payload);
/// }
/// let seqs: Vec<u64> = queue
///     .backward_tailer(litemq::Start::End)?
///     .map(|m| m.map(|m| m.seq))
///     .collect::<litemq::Result<_>>()?;
/// assert_eq!(seqs, [2, 1, 0]);
/// # Ok::<(), litemq::Error>(())
/// ```
#[derive(Debug)]
pub struct BackwardTailer {
    inner: Tailer,
    /// The next read returns `before - 1`; 0: nothing older is left.
    before: u64,
    /// The oldest sequence to return (the first kept when it started).
    floor: u64,
}

impl BackwardTailer {
    /// A backward reader whose first read returns `before - 1`.
    pub(crate) fn new(inner: Tailer, before: u64, floor: u64) -> BackwardTailer {
        BackwardTailer {
            inner,
            before,
            floor,
        }
    }

    /// The sequence the next read returns, or `None` when the oldest
    /// message was read.
    pub fn next_seq(&self) -> Option<u64> {
        (self.before > self.floor).then(|| self.before - 1)
    }

    /// The next older message, or `None` past the oldest one kept (or
    /// once retention deleted the files of the older ones).
    pub fn read_next(&mut self) -> Result<Option<Message<'_>>> {
        // Holes (sequences key compaction dropped) are stepped over.
        let seq = loop {
            let Some(seq) = self.next_seq() else {
                return Ok(None);
            };
            match self.inner.seek(seq) {
                Ok(()) => {}
                Err(Error::NotFound { first, .. }) if seq < first => {
                    // Retention deleted the rest: nothing older to read.
                    self.before = self.floor;
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
            self.before = seq;
            match self.inner.hole_start(seq) {
                // A hole of key compaction: go on before its first sequence.
                Some(start) => self.before = start,
                None => break seq,
            }
        };
        match self.inner.read_next() {
            Ok(Some(m)) => Ok(Some(m)),
            Ok(None) => Err(Error::NotFound {
                seq,
                first: self.floor,
                next: seq,
            }),
            Err(e) => {
                self.before = seq + 1; // read (and fail) again next time
                Err(e)
            }
        }
    }

    /// Moves so the next read returns `seq` (which must be in the queue).
    pub fn seek(&mut self, seq: u64) -> Result<()> {
        self.inner.seek(seq)?;
        self.before = seq + 1;
        Ok(())
    }

    /// Moves to the newest message published: the next read returns it.
    pub fn seek_end(&mut self) -> Result<()> {
        self.inner.seek_end()?;
        self.before = self.inner.next_seq();
        Ok(())
    }

    /// Moves to the newest message written before `micros` (µs since the
    /// epoch): the next read returns it.
    pub fn seek_time(&mut self, micros: u64) -> Result<()> {
        self.inner.seek_time(micros)?;
        self.before = self.inner.next_seq();
        Ok(())
    }

    /// Steps over a message whose read raised [`Error::Corrupted`] (it is
    /// lost); false when there is nothing older.
    pub fn skip_damaged(&mut self) -> Result<bool> {
        match self.next_seq() {
            Some(seq) => {
                self.before = seq;
                Ok(self.next_seq().is_some())
            }
            None => Ok(false),
        }
    }
}

/// Newest first, owned copies; see [`Tailer`]'s `Iterator` for how errors
/// are reported.
impl Iterator for BackwardTailer {
    type Item = Result<crate::reader::tailer::OwnedMessage>;

    fn next(&mut self) -> Option<Self::Item> {
        self.read_next()
            .map(|m| m.map(|m| m.to_owned()))
            .transpose()
    }
}
