//! Consumers: tailers with a name, that remember where they stopped (Python
//! gets one from `Queue.tailer(name=...)`).
//!
//! A [`Consumer`] is a [`Tailer`] with a name and a position file
//! (`base/consumers/<base32(name)>.pos`, see [`position`]). Opening it again,
//! in this or a later process, resumes at the last committed position.
//! Delivery is at-least-once: [`Consumer::commit`] records that every
//! message read so far is done; after a crash the consumer sees again only
//! what it read after its last commit, and never skips a message.
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! # let queue = litemq::QueueBuilder::new(dir.path()).open()?;
//! # queue.appender()?.append(b"order 1")?;
//! let mut billing = queue.consumer("billing", litemq::Start::Beginning)?;
//! while let Some(msg) = billing.read_next()? {
//!     println!("bill order {}", msg.seq);
//!     // ... once the message is handled:
//! }
//! billing.commit()?;
//! // Or as an iterator of owned messages:
//! let rest: Vec<u64> = billing.map(|m| m.map(|m| m.seq)).collect::<litemq::Result<_>>()?;
//! assert!(rest.is_empty());
//! # Ok::<(), litemq::Error>(())
//! ```
//!
//! One handle per name at a time: a second open of the same name, in any
//! process, fails with [`Error::Locked`] naming the holder's pid.

pub(crate) mod lease;
pub mod name;
pub mod position;
pub mod work_queue;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::catalog::{Catalog, FileInfo};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::frame::DATA_HEADER_LEN;
use crate::index::sparse::SparseIndex;
use crate::reader::tailer::{Message, Start, Tailer};
use crate::storage::frames::{frame_at, open_data, Check, RecordKind, Step};
use crate::storage::layout::FileId;

use position::{PositionFile, Snapshot};

/// Directory, under the queue's base, that holds the position files.
pub const CONSUMERS_DIR: &str = "consumers";

/// How to open a named consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerOptions {
    /// Where a consumer that has never committed starts. Default
    /// [`Start::Beginning`]. Ignored when the name has a position already.
    pub start_if_new: Start,
    /// Commit automatically: each read first commits everything returned
    /// before it (the caller asking for the next message means it is done
    /// with the previous ones), and [`Consumer::close`] commits the rest.
    /// Default false.
    pub auto_commit: bool,
    /// What a read does when retention deleted the position (Kafka's
    /// `auto.offset.reset`). Default [`AutoReset::Error`].
    pub auto_reset: AutoReset,
    /// Start the name over: an existing name is moved (and committed) to
    /// `start_if_new` and forgets its topic filter (the caller's
    /// [`Consumer::select`] then records a new one). Without it, `start_if_new`
    /// applies only to a new name. Default false.
    pub reset: bool,
}

/// What a named consumer does when retention deleted the message it was to
/// read next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoReset {
    /// Every read fails with [`Error::NotFound`] (naming the first sequence
    /// kept) until the caller seeks: nothing is skipped silently.
    #[default]
    Error,
    /// Go on from the oldest message still kept.
    Earliest,
    /// Go on after the newest message: skip what is there now.
    Latest,
}

/// The default options, starting a new name at `start`.
impl From<Start> for ConsumerOptions {
    fn from(start_if_new: Start) -> Self {
        ConsumerOptions {
            start_if_new,
            ..ConsumerOptions::default()
        }
    }
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        ConsumerOptions {
            start_if_new: Start::Beginning,
            auto_commit: false,
            auto_reset: AutoReset::Error,
            reset: false,
        }
    }
}

/// A named consumer as listed by `Queue::consumers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerInfo {
    /// The consumer's name.
    pub name: String,
    /// Committed position: the sequence the consumer reads next.
    pub next_seq: u64,
    /// Messages still in the queue at or after `next_seq`
    /// (`queue.next_seq - max(next_seq, queue.first_seq)`): a consumer
    /// behind `first_seq` counts from it, as `lag_bytes` does. A consumer
    /// with a topic filter counts only the messages its filter selects
    /// (found by reading, with the topic indexes, what lies ahead of it).
    pub lag_messages: u64,
    /// Bytes of the frames of those messages still on disk (headers, CRCs
    /// and padding included; a consumer behind `first_seq` counts from it).
    /// Computed from the sparse indexes plus a walk of at most one index
    /// interval of length words per file: exact for what was published when
    /// the listing looked. With a topic filter too, these are the bytes of
    /// the queue ahead of it, every topic's (what it still has to pass).
    pub lag_bytes: u64,
    /// The topic filter the consumer remembers (see [`Consumer::select`]).
    pub selector: Option<crate::reader::topic::TopicSelector>,
    /// When the position was last committed, µs since the Unix epoch.
    pub committed_at: u64,
    /// When the consumer was first opened, µs since the Unix epoch.
    pub created_at: u64,
}

/// A tailer with a name whose position persists. `Send`.
#[derive(Debug)]
pub struct Consumer {
    name: String,
    tailer: Tailer,
    file: PositionFile,
    clock: Arc<dyn Clock>,
    auto_commit: bool,
    auto_reset: AutoReset,
    /// Opened with `reset`: `select` may replace the remembered filter.
    reset: bool,
    /// Position to seek to before the next read (set at open and when a
    /// seek failed); a failed seek is reported by every read until it works.
    pending: Option<u64>,
    /// Opened as new with `Start::Beginning` and not read yet: "beginning"
    /// means whatever is first when reading starts, even if retention
    /// removed the first message in between.
    from_beginning: bool,
}

/// Owned copies of the messages available now, as [`Tailer`]'s `Iterator`
/// (an error is yielded and the consumer stays at the failing message).
/// Nothing is committed until [`Consumer::commit`] (or auto-commit).
impl Iterator for Consumer {
    type Item = Result<crate::reader::tailer::OwnedMessage>;

    fn next(&mut self) -> Option<Self::Item> {
        self.read_next()
            .map(|m| m.map(|m| m.to_owned()))
            .transpose()
    }
}

impl Consumer {
    /// Opens (or creates) consumer `name` of the queue at `base`, reading
    /// with `tailer` (a tailer of that queue). A new name starts at
    /// `first_seq()` or `next_seq()` (the queue's, asked only then) as
    /// `options.start_if_new` says. The consumer layer takes these rather
    /// than the queue, which sits above it.
    pub(crate) fn open(
        base: &Path,
        name: &str,
        options: ConsumerOptions,
        tailer: Tailer,
        clock: Arc<dyn Clock>,
        first_seq: &dyn Fn() -> u64,
        next_seq: &dyn Fn() -> u64,
    ) -> Result<Consumer> {
        name::validate(name)?;
        let dir = base.join(CONSUMERS_DIR);
        let mut initial = || -> Result<u64> {
            Ok(match options.start_if_new {
                Start::Beginning => first_seq(),
                Start::End => next_seq(),
                Start::Seq(seq) => seq,
            })
        };
        let (mut file, created) =
            PositionFile::open_or_create(&dir, name, clock.now_micros(), &mut initial)?;
        if options.reset && !created {
            let seq = initial()?;
            file.commit(seq, clock.now_micros());
            file.set_selector(None)?;
            file.sync()?;
        }
        let from_beginning = (created || options.reset) && options.start_if_new == Start::Beginning;
        let mut tailer = tailer;
        if let Some(s) = file.selector() {
            tailer.select(s.clone());
        }
        Ok(Consumer {
            name: name.to_string(),
            pending: Some(file.current().next_seq),
            tailer,
            file,
            clock,
            auto_commit: options.auto_commit,
            auto_reset: options.auto_reset,
            reset: options.reset || created,
            from_beginning,
        })
    }

    /// Reads only the messages `selector` wants (see [`Tailer::select`]);
    /// the committed position stays a queue sequence. The filter is
    /// remembered with the name: a later open reads with it without being
    /// told, and [`Queue::consumers`](crate::Queue::consumers) counts the lag
    /// in its messages. A name that remembers another filter refuses this
    /// one (`InvalidArgument`) unless it was opened with
    /// [`ConsumerOptions::reset`] (or is new).
    pub fn select(&mut self, selector: crate::reader::topic::TopicSelector) -> Result<()> {
        match self.file.selector() {
            Some(s) if *s == selector => {}
            Some(s) if !self.reset => {
                return Err(Error::InvalidArgument(format!(
                    "named tailer {:?} reads {}, not {}: open it with reset=True to \
                     start it over with another filter, or use another name",
                    self.name,
                    describe(s),
                    describe(&selector)
                )))
            }
            _ => self.file.set_selector(Some(&selector))?,
        }
        self.tailer.select(selector);
        Ok(())
    }

    /// The topic filter the consumer reads with, as remembered with its name.
    pub fn selector(&self) -> Option<&crate::reader::topic::TopicSelector> {
        self.file.selector()
    }

    /// As [`Tailer::skip_expired`]: reads skip expired messages.
    pub fn skip_expired(&mut self, clock: Arc<dyn Clock>) {
        self.tailer.skip_expired(clock);
    }

    /// The consumer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sequence the next read returns.
    pub fn next_seq(&self) -> u64 {
        self.pending.unwrap_or_else(|| self.tailer.next_seq())
    }

    /// The last committed position (the sequence a reopened consumer reads first).
    pub fn committed_seq(&self) -> u64 {
        self.file.current().next_seq
    }

    /// When the last commit happened, µs since the Unix epoch.
    pub fn committed_at(&self) -> u64 {
        self.file.current().committed_us
    }

    /// Whether reads commit what came before them (see [`ConsumerOptions::auto_commit`]).
    pub fn auto_commit(&self) -> bool {
        self.auto_commit
    }

    /// Where the position file lives.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Records that every message read so far is done: a reopened consumer
    /// starts at [`Consumer::next_seq`]. Costs one 32-byte store into a
    /// mapped file; it survives the death of the process at once and a
    /// machine crash once the kernel writes it back ([`Consumer::commit_durable`]).
    pub fn commit(&mut self) -> Result<()> {
        let seq = self.next_seq();
        if seq != self.file.current().next_seq {
            self.file.commit(seq, self.clock.now_micros());
        }
        Ok(())
    }

    /// Commits `seq` as the position a reopened consumer starts at (Kafka's
    /// `commitSync(offsets)`), whatever was read: the reading position does
    /// not move. `seq` may be anything up to the queue's `next_seq`; a later
    /// one is an invalid argument.
    pub fn commit_seq(&mut self, seq: u64) -> Result<()> {
        let end = self.tailer.published_end()?;
        if seq > end {
            return Err(Error::InvalidArgument(format!(
                "cannot commit sequence {seq} for named tailer {:?}: the queue ends \
                 before it (next_seq {end})",
                self.name
            )));
        }
        if seq != self.file.current().next_seq {
            self.file.commit(seq, self.clock.now_micros());
        }
        Ok(())
    }

    /// [`Consumer::commit`], then msync: the position survives a machine crash.
    pub fn commit_durable(&mut self) -> Result<()> {
        self.commit()?;
        self.file.sync()
    }

    /// Flushes the committed position to disk (msync): it survives a
    /// machine crash.
    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }

    /// Moves to `seq` (not committed until the next commit).
    pub fn seek(&mut self, seq: u64) -> Result<()> {
        self.tailer.seek(seq)?;
        self.pending = None;
        self.from_beginning = false;
        Ok(())
    }

    /// Moves to the first message at or after `micros` (not committed).
    pub fn seek_time(&mut self, micros: u64) -> Result<()> {
        self.tailer.seek_time(micros)?;
        self.pending = None;
        self.from_beginning = false;
        Ok(())
    }

    /// Moves to message `offset` of the selected topic stream (not
    /// committed; see [`Tailer::seek_topic_offset`]).
    pub fn seek_topic_offset(&mut self, offset: u64) -> Result<()> {
        self.tailer.seek_topic_offset(offset)?;
        self.pending = None;
        self.from_beginning = false;
        Ok(())
    }

    /// Moves after the last published message (not committed).
    pub fn seek_end(&mut self) -> Result<()> {
        self.tailer.seek_end()?;
        self.pending = None;
        self.from_beginning = false;
        Ok(())
    }

    /// As [`Tailer::skip_damaged`]: steps over damage at the current
    /// position (not committed until the next commit).
    pub fn skip_damaged(&mut self) -> Result<bool> {
        let skipped = self.tailer.skip_damaged()?;
        if skipped && self.pending.is_some_and(|p| self.tailer.next_seq() >= p) {
            // The position to resume at was inside the damage.
            self.pending = None;
            self.from_beginning = false;
        }
        Ok(skipped)
    }

    /// Reads the next message, or `None` when none is published yet. With
    /// auto-commit, first commits everything read before.
    ///
    /// When the position was removed by retention, every read fails with
    /// [`Error::NotFound`] (naming the first sequence still kept) until the
    /// caller seeks: skipping silently would break at-least-once. Unless
    /// the consumer was opened with [`ConsumerOptions::auto_reset`]
    /// `Earliest` or `Latest`: then it goes on from there (not committed
    /// until the next commit).
    pub fn read_next(&mut self) -> Result<Option<Message<'_>>> {
        self.before_read()?;
        self.tailer.read_next()
    }

    /// As [`Consumer::read_next`], waiting up to `timeout` for a message.
    pub fn read_next_timeout(&mut self, timeout: Duration) -> Result<Option<Message<'_>>> {
        self.before_read()?;
        self.tailer.read_next_timeout(timeout)
    }

    /// As [`Tailer::read_next_until`].
    pub fn read_next_until(
        &mut self,
        timeout: Duration,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Message<'_>>> {
        self.before_read()?;
        self.tailer.read_next_until(timeout, interrupt)
    }

    /// Commits (with auto-commit) and releases the name. Dropping a consumer
    /// without `close` does not commit: what was read since the last commit
    /// is delivered again, which is what at-least-once needs when the caller
    /// failed half way.
    pub fn close(mut self) -> Result<()> {
        if self.auto_commit {
            self.commit()?;
        }
        Ok(())
    }

    fn before_read(&mut self) -> Result<()> {
        if let Some(seq) = self.pending {
            match self.tailer.seek(seq) {
                Ok(()) => self.pending = None,
                Err(Error::NotFound { first, .. })
                    if seq < first
                        && (self.from_beginning || self.auto_reset == AutoReset::Earliest) =>
                {
                    self.tailer.seek(first)?;
                    self.pending = None;
                }
                Err(Error::NotFound { first, .. })
                    if seq < first && self.auto_reset == AutoReset::Latest =>
                {
                    self.tailer.seek_end()?;
                    self.pending = None;
                }
                Err(e) => return Err(e),
            }
            self.from_beginning = false;
        }
        if self.auto_commit {
            self.commit()?;
        }
        Ok(())
    }
}

/// Position files of the queue at `base`, read without locks (any process,
/// read-only queues included). Sorted by name.
pub fn snapshots(base: &Path) -> Result<Vec<Snapshot>> {
    let dir = base.join(CONSUMERS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read directory", &dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
        let Some(expected) = entry.file_name().to_str().and_then(name::from_file_name) else {
            continue; // temporary files and strangers
        };
        let path = entry.path();
        match position::read_snapshot(&path) {
            Ok(s) if s.name == expected => out.push(s),
            Ok(s) => {
                return Err(Error::corrupted(
                    &path,
                    24,
                    None,
                    format!("position file of {expected:?} names consumer {:?}", s.name),
                ))
            }
            // Removed between listing and reading.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The smallest committed position of the queue's named consumers and
/// low-water mark of its work queues, if any: what `protect_unconsumed`
/// retention must keep.
pub fn min_position(base: &Path) -> Result<Option<u64>> {
    let consumers = snapshots(base)?.iter().map(|s| s.position.next_seq).min();
    let groups = work_queue::min_low(base)?;
    Ok(consumers.into_iter().chain(groups).min())
}

/// Every named consumer with its lag: the messages still in the queue
/// (`first_seq..next_seq`) at or after its position, holes left out (key
/// compaction dropped those messages). Messages retention
/// deleted before a consumer read them are gone, not lag. The lag of a
/// consumer with a topic filter counts every message here; the queue
/// (`Queue::consumers`) then counts its topic's.
pub fn list(
    base: &Path,
    catalog: &Catalog,
    first_seq: u64,
    next_seq: u64,
) -> Result<Vec<ConsumerInfo>> {
    let snaps = snapshots(base)?;
    let files = catalog.snapshot();
    let mut offsets = FrameOffsets::new(catalog.base(), &files);
    Ok(snaps
        .into_iter()
        .map(|s| {
            let pos = s.position.next_seq;
            let from = pos.max(first_seq);
            ConsumerInfo {
                lag_messages: next_seq
                    .saturating_sub(from)
                    .saturating_sub(catalog.holes_between(from, next_seq)),
                lag_bytes: offsets.bytes_between(pos, next_seq),
                selector: s.selector,
                name: s.name,
                next_seq: pos,
                committed_at: s.position.committed_us,
                created_at: s.created_us,
            }
        })
        .collect())
}

/// `topic="orders", tags=["paid"]` as an error message names a filter.
fn describe(s: &crate::reader::topic::TopicSelector) -> String {
    let mut parts = Vec::new();
    if let Some(t) = &s.topic {
        parts.push(format!("topic={t:?}"));
    }
    if let Some(q) = s.queue_id {
        parts.push(format!("queue_id={q}"));
    }
    if !s.tags.is_empty() {
        parts.push(format!("tags={:?}", s.tags));
    }
    if parts.is_empty() {
        "every message".into()
    } else {
        parts.join(", ")
    }
}

/// Removes consumer `name` (it must not be open anywhere). Returns whether
/// it existed.
pub fn remove(base: &Path, consumer: &str) -> Result<bool> {
    name::validate(consumer)?;
    position::remove(&base.join(CONSUMERS_DIR), consumer)
}

/// Finds frame offsets by sequence, caching answers within one listing.
struct FrameOffsets<'a> {
    base: &'a Path,
    files: &'a [FileInfo],
    cache: HashMap<(FileId, u64), u64>,
}

impl<'a> FrameOffsets<'a> {
    fn new(base: &'a Path, files: &'a [FileInfo]) -> Self {
        FrameOffsets {
            base,
            files,
            cache: HashMap::new(),
        }
    }

    /// Bytes of frames from sequence `from` up to `to` (exclusive).
    fn bytes_between(&mut self, from: u64, to: u64) -> u64 {
        if from >= to || self.files.is_empty() {
            return 0;
        }
        let from = from.max(self.files[0].header.first_seq);
        let holder = |seq: u64| {
            self.files
                .partition_point(|f| f.header.first_seq <= seq)
                .saturating_sub(1)
        };
        let (i, j) = (holder(from), holder(to));
        let mut total = 0;
        for k in i..=j {
            let f = self.files[k];
            let start = if k == i {
                self.offset(f, from)
            } else {
                DATA_HEADER_LEN as u64
            };
            let end = match self.files.get(k + 1) {
                Some(next) if k < j => self.offset(f, next.header.first_seq),
                _ => self.offset(f, to),
            };
            total += end.saturating_sub(start);
        }
        total
    }

    /// Offset in `f` of the frame of `seq`, or of the end of its frames when
    /// `seq` is past them. Starts from the sparse index's floor entry, then
    /// walks length words (at most one index interval of them).
    fn offset(&mut self, f: FileInfo, seq: u64) -> u64 {
        if let Some(&o) = self.cache.get(&(f.id, seq)) {
            return o;
        }
        let data = f.id.data_path(self.base);
        let Ok(map) = open_data(&data) else {
            return DATA_HEADER_LEN as u64; // removed by retention meanwhile
        };
        let (mut at_seq, mut off) = (f.header.first_seq, DATA_HEADER_LEN);
        let index = SparseIndex::open(
            &f.id.index_path(self.base),
            f.header.first_seq,
            map.mapped_len() as u64,
        );
        if let Some(e) = index.and_then(|ix| ix.floor_seq(seq)) {
            if map.covers(e.offset as usize + 4) {
                (at_seq, off) = (e.seq, e.offset as usize);
            }
        }
        while at_seq < seq {
            let Step::Frame(f) = frame_at(&map, off, Check::Lengths) else {
                break;
            };
            if !map.covers(f.next + 4) {
                break;
            }
            // A hole or batch stands for its count (a batch landed on by
            // an index entry for a later member ends at its own end).
            at_seq = RecordKind::of_or_plain(f.record).seq_after(at_seq);
            off = f.next;
        }
        self.cache.insert((f.id, seq), off as u64);
        off as u64
    }
}
