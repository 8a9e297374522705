//! Tailers: readers that walk the frames of a queue in sequence order.
//!
//! Files: [`message`] (what a tailer hands out), [`cursor`] (the file it
//! reads and the index hints that place it), [`batch_cache`], [`seek`],
//! [`damage`], [`run`] (read-ahead runs) and [`scan`] (file scans by frame
//! lengths); every frame is read with the walker (`format::walk`).

mod batch_cache;
mod cursor;
mod damage;
mod message;
mod run;
mod scan;
mod seek;
mod typed_read;

use std::sync::Arc;
use std::time::{Duration, Instant};

use self::batch_cache::BatchCache;
use self::cursor::Cursor;
pub(crate) use self::message::plain_view;
use self::message::MemberOf;
pub use self::message::{BareMessage, RunFrame};
pub use self::message::{Message, OwnedMessage};
use self::scan::*;
pub(crate) use self::scan::{file_has_batches, written_bytes};
use super::field::FieldFilter;
use super::plan::Jump;
use super::topic::{TopicFilter, TopicSelector};
use super::wait::{Sleeper, Slept, WaitStrategy, Waiter};
use super::wake::{WakeSource, RETRY};
use crate::catalog::{Catalog, FileInfo};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::frame::{self, DATA_HEADER_LEN};
use crate::format::header::TypedFile;
use crate::format::position;
use crate::format::record::{self, RecordView};
use crate::format::walk;
use crate::storage::frames::{Check, RecordKind, Step};
use crate::storage::layout::FileId;
use crate::storage::mapped::Mapping;

/// How often a tailer that keeps finding a zero length word at the same
/// place looks (a directory listing and the last file's sparse index) for
/// frames after it: a zero word is the end of the data only at the tail.
const HOLE_CHECK_EVERY: Duration = Duration::from_millis(200);

/// What a zero length word at the cursor is.
enum Zero {
    /// The end of the published data: nothing valid follows.
    Tail,
    /// A frame was published there meanwhile: read again.
    Filled,
    /// Damage (a zeroed page, a lost write): frames are known to follow.
    Hole(Error),
}

/// Polls at the same zero length word between two looks at what the tailer
/// knows without I/O (a successor file, a known end).
const HOLE_CHECK_POLLS: u32 = 64;

/// Where a tailer last found a zero length word, how often it polled there,
/// and when it last checked (with I/O) for frames after it.
#[derive(Debug, Clone, Copy)]
struct Stuck {
    id: FileId,
    offset: usize,
    polls: u32,
    checked: Instant,
}

/// Where a new tailer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The oldest message still in the queue.
    Beginning,
    /// After the last message published so far.
    End,
    /// At this sequence.
    Seq(u64),
}

/// What a bulk run ([`Tailer::read_run_frames`]) does when a sealed
/// file's frame area does not match its footer's CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMismatch {
    /// Fail with [`Error::Corrupted`] naming the file: a read that takes
    /// the file as a whole (`read_arrow`) reports damage anywhere in it,
    /// also in bytes no frame's own CRC covers.
    Fail,
    /// Check each frame by its own CRC instead: a tailer reports damage at
    /// the message where it is and reads on after it.
    CheckFrames,
}

/// A record located by [`Tailer::advance`], not yet decoded for delivery.
#[derive(Debug, Clone, Copy)]
struct Located {
    seq: u64,
    record_at: usize,
    record_len: usize,
    /// The tailer decoded the record already (a filter read it, or it is
    /// a batch): `deliver` decodes it again without the checks of names
    /// and text (`record::decode_again`).
    checked: bool,
}

/// Reads a queue in sequence order, from any starting point. Every read
/// checks the frame's CRC (bulk runs in a sealed file: the file's CRC in its
/// footer, once per queue handle, see [`Tailer::read_run_frames`]); a tailer moves to the next file only after the
/// end-of-file marker. Once its queue is closed every call returns
/// [`Error::Closed`] (a blocked wait wakes with it) and the file is unmapped.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let queue = litemq::QueueBuilder::new(dir.path()).open()?;
/// # queue.appender()?.append_batch([&b"a"[..], b"b"])?;
/// let mut tailer = queue.tailer(litemq::Start::Beginning)?;
/// while let Some(msg) = tailer.read_next()? {
///     println!("{} {:?}", msg.seq, msg.payload);
/// }
/// // Or as an iterator of owned messages (a copy each):
/// let payloads: Vec<Vec<u8>> = queue
///     .tailer(litemq::Start::Beginning)?
///     .map(|m| m.map(|m| m.payload))
///     .collect::<litemq::Result<_>>()?;
/// assert_eq!(payloads, [b"a".to_vec(), b"b".to_vec()]);
/// # Ok::<(), litemq::Error>(())
/// ```
#[derive(Debug)]
pub struct Tailer {
    catalog: Arc<Catalog>,
    wait: WaitStrategy,
    cursor: Option<Cursor>,
    /// Sequence the next read returns.
    seq: u64,
    /// Every sequence below this is known to be published (0: none known):
    /// a zero length word below it is damage, not the end of the data.
    known_end: u64,
    stuck: Option<Stuck>,
    /// First sequence of the last hole (key compaction) stepped over.
    passed_hole: Option<u64>,
    /// The queue handle's wake-up word (`None`: poll).
    wake: Option<Arc<WakeSource>>,
    sleeper: Sleeper,
    /// Reads only the messages of a topic (see [`Tailer::select`]) or of a
    /// field query (see `Queue::where_field`).
    filter: Option<Filter>,
    /// The decompressed payload of the last compressed message read (the
    /// message borrows it).
    inflated: Vec<u8>,
    /// The batch (format 9) whose members the tailer is reading.
    batch: BatchCache,
    /// Skips messages expired by this clock (see [`Tailer::skip_expired`]).
    skip_expired: Option<Arc<dyn Clock>>,
    /// Topic offset of the message a topic filter located last.
    topic_offset: Option<u64>,
    /// The schema of the typed file read last (see [`typed_of`]).
    typed: Option<(u64, Option<Arc<TypedFile>>)>,
    /// Bytes per frame in the file the last dense-index seek landed in,
    /// averaged from its start (0: none yet): where [`Tailer::seek`]
    /// guesses the next frame is, to fetch it while the dense index is read.
    stride: usize,
}

/// Iterating a tailer yields the messages published so far as owned copies
/// ([`OwnedMessage`]; [`Tailer::read_next`] borrows instead of copying) and
/// ends at the tail, like Python's `for msg in tailer`; iterate again later
/// to get newer ones. An error (damage: [`Error::Corrupted`]) is yielded as
/// `Some(Err(..))` with the tailer left at the message that failed, so the
/// next call fails again: stop, or call [`Tailer::skip_damaged`] to go on.
impl Iterator for Tailer {
    type Item = Result<OwnedMessage>;

    fn next(&mut self) -> Option<Self::Item> {
        self.read_next()
            .map(|m| m.map(|m| m.to_owned()))
            .transpose()
    }
}

impl Tailer {
    pub(crate) fn new(catalog: Arc<Catalog>, wait: WaitStrategy) -> Tailer {
        let seq = catalog.first().map_or(0, |f| f.header.first_seq);
        Tailer {
            catalog,
            wait,
            cursor: None,
            seq,
            known_end: 0,
            stuck: None,
            passed_hole: None,
            wake: None,
            sleeper: Sleeper::default(),
            filter: None,
            inflated: Vec::new(),
            batch: BatchCache::default(),
            skip_expired: None,
            topic_offset: None,
            typed: None,
            stride: 0,
        }
    }

    /// From now on, reads skip messages whose expiry (`expires_at`) has
    /// passed by `clock` (the queue's: `Queue::clock`); their sequences are
    /// not returned. Seeks still land on the target sequence; the read after
    /// skips from there.
    pub fn skip_expired(&mut self, clock: Arc<dyn Clock>) {
        self.skip_expired = Some(clock);
    }

    /// From now on, reads return only the messages `selector` wants (a
    /// topic, a queue id of it, tags), skipping files and messages that
    /// cannot match (see `reader::topic`). Seeks by sequence and time land
    /// on the first wanted message at or after the target.
    pub fn select(&mut self, selector: TopicSelector) {
        self.filter = Some(Filter::Topic(TopicFilter::new(selector, scan_topics)));
    }

    /// From now on, reads return only the messages `query` wants, reading
    /// the secondary index of each sealed file where one checks out, and
    /// `active` for the active file (see `reader::field`).
    pub(crate) fn select_field(
        &mut self,
        query: crate::index::fields::FieldQuery,
        active: Option<super::field::ActiveSeqs>,
    ) {
        self.filter = Some(Filter::Field(FieldFilter::new(query, active)));
    }

    /// Moves to message `offset` of the selected topic stream (its topic
    /// offset, see [`Message::topic_offset`]): the topic of the selector and
    /// its queue id, or queue id 0 when the selector names none. An offset
    /// equal to the stream's count moves after its last message (where the
    /// next one will be); a larger one, or a tailer without a topic
    /// selector, is [`Error::InvalidArgument`].
    pub fn seek_topic_offset(&mut self, offset: u64) -> Result<()> {
        self.check_open()?;
        let found = match self.filter.as_mut() {
            Some(Filter::Topic(f)) => f.seq_of(&self.catalog, offset)?,
            _ => {
                return Err(Error::InvalidArgument(
                    "seeking by topic offset needs a topic tailer (select a topic)".into(),
                ))
            }
        };
        match found {
            Ok(seq) => self.seek(seq),
            Err((count, after)) if offset == count => {
                if after >= published_end(&self.catalog) {
                    self.seek_end()
                } else {
                    self.seek(after)
                }
            }
            Err((count, _)) => Err(Error::InvalidArgument(format!(
                "topic offset {offset} is past the end of the stream, which holds {count} messages"
            ))),
        }
    }

    /// The selector set with [`Tailer::select`], if any.
    pub fn selector(&self) -> Option<&TopicSelector> {
        match &self.filter {
            Some(Filter::Topic(f)) => Some(f.selector()),
            _ => None,
        }
    }

    /// Lets blocking reads sleep on the queue's wake-up word
    /// (`WaitStrategy::Default` on Linux; otherwise they poll).
    pub(crate) fn set_wake(&mut self, wake: Arc<WakeSource>) {
        self.wake = Some(wake);
    }

    /// Tells the tailer that every sequence below `end` was published (the
    /// `next_seq` of a clean close, or one the writer reported): a zero
    /// length word before it is then damage, reported at once.
    pub(crate) fn expect_published(&mut self, end: u64) {
        self.known_end = self.known_end.max(end);
    }

    /// Sequence the next read returns.
    pub fn next_seq(&self) -> u64 {
        self.seq
    }

    /// Reads the next message, or `None` when none is published yet.
    #[inline]
    pub fn read_next(&mut self) -> Result<Option<Message<'_>>> {
        match self.advance()? {
            Some(loc) => self.deliver(loc),
            None => Ok(None),
        }
    }

    /// Reads message `seq`: a seek (skipped when the tailer stands at
    /// `seq` already) and a read. `None` or [`Error::NotFound`] when it is
    /// not published (or no longer kept).
    ///
    /// A sequence whose message key compaction dropped (a hole, format 8)
    /// is [`Error::Compacted`], with the tailer left past it.
    pub(crate) fn read_at(&mut self, seq: u64) -> Result<Option<Message<'_>>> {
        if let Some(c) = self.cursor.as_mut() {
            c.fresh = false;
        }
        if self.cursor.is_none() || self.seq != seq {
            self.seek(seq)?;
        }
        if self.filter.is_some() || self.skip_expired.is_some() {
            return self.read_next();
        }
        if self.seq > seq {
            // The seek stepped over a hole that covers `seq`.
            return Err(Error::Compacted { seq });
        }
        match self.advance_frame(true)? {
            Some(loc) if loc.seq != seq || self.is_hole_at(loc) => {
                Err(Error::Compacted { seq: loc.seq })
            }
            Some(loc) => self.deliver(loc),
            None => Ok(None),
        }
    }

    /// The file the last [`Tailer::read_at`] read from was opened by that
    /// call, so its path was just checked to name the file mapped (a file
    /// deleted or replaced since it was kept is mapped afresh or reported
    /// missing by [`Catalog::map_file`]): the caller need not check again.
    pub(crate) fn file_just_checked(&self) -> bool {
        self.cursor.as_ref().is_some_and(|c| c.fresh)
    }

    /// The record at `loc` is a hole.
    fn is_hole_at(&self, loc: Located) -> bool {
        self.cursor.as_ref().is_some_and(|c| {
            let rec = &c.map.as_slice()[loc.record_at..loc.record_at + loc.record_len];
            matches!(RecordKind::of_or_plain(rec), RecordKind::Hole { .. })
        })
    }

    /// Reads the next message, waiting up to `timeout` for one.
    pub fn read_next_timeout(&mut self, timeout: Duration) -> Result<Option<Message<'_>>> {
        self.read_next_until(timeout, &mut || false)
    }

    /// As [`Tailer::read_next_timeout`], also returning `None` early when
    /// `interrupt` (polled about every 50 ms, and when a signal interrupts a
    /// sleep) says so.
    ///
    /// With [`WaitStrategy::Default`] and a wake-up word (Linux, a queue whose
    /// `wake.ctl` this handle can open read-write) the tailer spins briefly,
    /// then sleeps on the word until a writer wakes it; otherwise it polls
    /// with back-off (see `reader::wait`).
    pub fn read_next_until(
        &mut self,
        timeout: Duration,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Message<'_>>> {
        let source = match self.wait {
            WaitStrategy::Default => self.wake.clone(),
            WaitStrategy::BusySpin => None,
        };
        let start = Instant::now();
        let mut last_poll = start;
        // When to ask the handle for its wake-up word again (it may have
        // none yet: a read-only handle opens it lazily, and retries).
        let mut try_word = start;
        let mut waiter = Waiter::new(self.wait);
        let loc = loop {
            if let Some(loc) = self.advance()? {
                break loc;
            }
            let now = Instant::now();
            let spent = now.duration_since(start);
            if spent >= timeout {
                return Ok(None);
            }
            if now.duration_since(last_poll) >= Duration::from_millis(50) {
                last_poll = now;
                if interrupt() {
                    return Ok(None);
                }
            }
            if let Some(source) = source.as_ref().filter(|_| now >= try_word) {
                try_word = now + RETRY;
                if let Some(file) = source.file() {
                    let mut sleeper = self.sleeper;
                    let slept =
                        sleeper.wait(&file, timeout - spent, interrupt, &mut || self.advance());
                    self.sleeper = sleeper;
                    match slept? {
                        Slept::Found {
                            value,
                            slept,
                            missed,
                        } => {
                            if missed {
                                source.missed();
                            } else if slept {
                                source.hit();
                            }
                            break value;
                        }
                        Slept::Nothing => return Ok(None),
                    }
                }
            }
            waiter.wait();
        };
        self.deliver(loc)
    }

    /// Moves to `seq`: the next read returns it, or, when key compaction
    /// dropped it (a hole), the next message after it. A sequence past the
    /// last published one, or before the first kept one, is an error.
    pub fn seek(&mut self, seq: u64) -> Result<()> {
        self.check_open()?;
        self.passed_hole = None;
        let mut info = self.catalog.locate(seq);
        if info.is_none() {
            self.catalog.refresh()?;
            info = self.catalog.locate(seq);
        }
        let first = self.catalog.first().map_or(0, |f| f.header.first_seq);
        let Some(info) = info else {
            if seq == first {
                self.cursor = None;
                self.seq = seq;
                return Ok(());
            }
            return Err(self.not_found(seq));
        };
        // Reuse the open file when the target is in it.
        let (mut cursor, reused) = match self.cursor.take() {
            Some(c) if c.info.id == info.id => (c, true),
            _ => match Cursor::open(&self.catalog, info) {
                Ok(c) => (c, false),
                Err(e) if is_not_found(&e) => {
                    // Retention removed the file after the catalog listed it.
                    self.catalog.refresh()?;
                    let first = self.catalog.first().map_or(0, |f| f.header.first_seq);
                    if seq < first || self.catalog.locate(seq).is_some_and(|f| f.id == info.id) {
                        return Err(self.not_found(seq));
                    }
                    return self.seek(seq); // the catalog no longer lists the file
                }
                Err(e) => return Err(e),
            },
        };
        // One probe of the dense index (format 5) when its entry checks out.
        let held = match self.batch.of {
            Some((file, at)) if file == cursor.info.header.file_number => Some(at),
            _ => None,
        };
        // The dense entry and the frame it points to are two loads from
        // memory, the second waiting for the first. Where frames are all the
        // same length (fixed-size records: the common case of a random
        // `get`), the frame's place is known from the last seek, and is
        // fetched while the entry is read: one wait instead of two. A wrong
        // guess costs one fetch that nothing waits for.
        let nth = seq.saturating_sub(info.header.first_seq);
        if self.stride > 0 {
            let guess = DATA_HEADER_LEN.saturating_add((nth as usize).saturating_mul(self.stride));
            cursor.map.prefetch(guess);
            cursor.map.prefetch(guess.saturating_add(self.stride - 1));
        }
        if let Some(at) = cursor.dense_frame(&self.catalog, seq, held) {
            if nth > 0 {
                self.stride = at.saturating_sub(DATA_HEADER_LEN) / nth as usize;
            }
            cursor.offset = at;
            self.cursor = Some(cursor);
            self.seq = seq;
            return Ok(());
        }
        let (mut at_seq, mut offset) = (info.header.first_seq, DATA_HEADER_LEN);
        if reused && self.seq <= seq {
            (at_seq, offset) = (self.seq, cursor.offset); // never a longer scan than from the file start
        }
        if let Some(e) = cursor.entry(&self.catalog, |ix| ix.floor_seq(seq)) {
            if e.seq > at_seq {
                (at_seq, offset) = (e.seq, e.offset as usize);
            }
        }
        cursor.offset = offset;
        self.cursor = Some(cursor);
        self.seq = at_seq;
        if !self.skip_while(|s, _, _| s < seq)? {
            // Stopped at a zero length word: the end of the data, or a hole
            // with `seq` after it.
            if self.at_zero() {
                if let Zero::Hole(e) = self.zero_kind(true)? {
                    return Err(e);
                }
            }
            let next = self.seq;
            return Err(Error::NotFound { seq, first, next });
        }
        Ok(())
    }

    /// After `Queue::close`: lets go of the file (unmapping it) and says
    /// the queue is closed.
    fn check_open(&mut self) -> Result<()> {
        if self.catalog.is_closed() {
            self.cursor = None;
            return Err(Error::Closed);
        }
        Ok(())
    }

    fn cursor_offset(&self) -> usize {
        self.cursor.as_ref().map_or(0, |c| c.offset)
    }

    /// Opens the file holding `self.seq` when no file is open. Returns false
    /// when there is none yet.
    fn ensure_cursor(&mut self) -> Result<bool> {
        if self.cursor.is_some() {
            return Ok(true);
        }
        let seq = self.seq;
        if self.catalog.locate(seq).is_none() {
            self.catalog.refresh()?;
        }
        match self.catalog.locate(seq) {
            // Retention removed the files holding `seq`: say so, naming the
            // first sequence still there, rather than wait forever.
            None if self
                .catalog
                .first()
                .is_some_and(|f| f.header.first_seq > seq) =>
            {
                Err(self.not_found(seq))
            }
            None => Ok(false),
            Some(_) => {
                self.seek(seq)?;
                Ok(self.cursor.is_some())
            }
        }
    }

    /// Finds the next message the tailer returns (every one, or those its
    /// topic filter wants) and steps past it.
    fn advance(&mut self) -> Result<Option<Located>> {
        if self.filter.is_none() && self.skip_expired.is_none() {
            return self.advance_frame(false);
        }
        loop {
            let to = match self.filter.as_mut() {
                Some(f) => f.jump(&self.catalog, self.seq),
                None => None,
            };
            if let Some(to) = to {
                // The topic index gives the frame: no seek when the cursor
                // is in that file already (the frame's CRC is checked as
                // it is read, its record's topic below).
                match (to.frame, self.cursor.as_mut()) {
                    (Some((number, offset)), Some(c))
                        if c.info.header.file_number == number && offset < c.map.len() =>
                    {
                        if let Some(a) = to.ahead {
                            // A small frame spans two or three cache lines.
                            for line in [a, a + 64, a + 128] {
                                c.map.prefetch(line);
                            }
                        }
                        c.offset = offset;
                        self.seq = to.seq;
                    }
                    _ if to.seq != self.seq => self.seek(to.seq)?,
                    _ => {}
                }
            }
            if self.filter.is_some() {
                if let Some(c) = self.cursor.as_mut() {
                    c.trust(&self.catalog);
                }
            }
            let Some(loc) = self.advance_frame(false)? else {
                return Ok(None);
            };
            let c = self.cursor.as_mut().expect("a located record has a cursor");
            let rec = &c.map.as_slice()[loc.record_at..loc.record_at + loc.record_len];
            let view = match record::decode(rec) {
                Ok(view) => view,
                Err(reason) => {
                    // Reported as `deliver` would, the tailer left at it.
                    c.offset = loc.record_at - 4;
                    self.seq = loc.seq;
                    return Err(Error::corrupted(
                        c.map.path(),
                        (loc.record_at - 4) as u64,
                        Some(loc.seq),
                        reason,
                    ));
                }
            };
            let wanted = self.filter.as_ref().is_none_or(|f| f.matches(&view))
                && self.skip_expired.as_ref().is_none_or(|clock| {
                    // Not expired by the clock.
                    view.expires_at.is_none_or(|t| t > clock.now_micros())
                });
            if !wanted {
                continue;
            }
            let offset = match self.filter.as_mut() {
                Some(Filter::Topic(f)) => {
                    let (topic, queue_id) = (view.topic.unwrap_or(""), view.queue_id);
                    Some(f.offset_of(&self.catalog, loc.seq, topic, queue_id))
                }
                _ => None,
            };
            match offset {
                Some(Ok(o)) => self.topic_offset = Some(o),
                Some(Err(e)) => {
                    // Stay at the message: the next read tries again.
                    let c = self.cursor.as_mut().expect("a located record has a cursor");
                    c.offset = loc.record_at - 4;
                    self.seq = loc.seq;
                    return Err(e);
                }
                None => {}
            }
            return Ok(Some(Located {
                checked: true,
                ..loc
            }));
        }
    }

    /// Finds the next complete frame and steps past it. Holes (sequences
    /// key compaction dropped) are stepped over unless `holes`.
    #[inline]
    fn advance_frame(&mut self, holes: bool) -> Result<Option<Located>> {
        self.check_open()?;
        if !self.ensure_cursor()? {
            return Ok(None);
        }
        loop {
            let c = self.cursor.as_mut().expect("ensure_cursor opened one");
            let len = c.length_word(self.seq)?;
            let just_checked = c.checked_frame.take() == Some((c.offset, len));
            let check = match c.trusted_end {
                Some(end) => Check::Trusted(end),
                // `seek` found this frame through the dense index and
                // checked it (a `get`): its bytes are published, immutable.
                None if just_checked => Check::Trusted(c.offset + frame::frame_size(len as usize)),
                None => Check::Crc,
            };
            match walk::frame_with_len(c.map.as_slice(), c.offset, len, check) {
                Step::Empty => match self.zero_kind(false)? {
                    Zero::Tail => return Ok(None),
                    Zero::Filled => continue,
                    Zero::Hole(e) => return Err(e),
                },
                Step::EndOfFile => {
                    if !self.next_file()? {
                        return Ok(None);
                    }
                }
                Step::Frame(f) => {
                    let (record_at, record_len, next) = (f.record_at(), f.record.len(), f.next);
                    let rec = f.record;
                    // A record delivered is decoded (and so checked) once,
                    // by `deliver`, which reports a malformed one as this
                    // would. Holes and batches are checked here: a hole is
                    // stepped over (or reported by `read_at`) undelivered,
                    // and a batch's head is read below.
                    let checked = is_hole_or_batch(rec);
                    if checked {
                        if let Err(reason) = record::decode(rec) {
                            return Err(Error::corrupted(
                                c.map.path(),
                                c.offset as u64,
                                Some(self.seq),
                                reason,
                            ));
                        }
                    }
                    let seq = self.seq;
                    let kind = RecordKind::of_or_plain(rec);
                    if let Some((first, count)) = kind.batch() {
                        // A batch (format 9): the cursor stays on its frame
                        // until its last member is read.
                        let end = first.saturating_add(count);
                        if !(first..end).contains(&seq) {
                            return Err(Error::corrupted(
                                c.map.path(),
                                c.offset as u64,
                                Some(seq),
                                format!(
                                    "batch frame holds sequences {first}..{end}, read at {seq}"
                                ),
                            ));
                        }
                        if seq + 1 == end {
                            c.offset = next;
                        }
                        self.seq = seq + 1;
                        return Ok(Some(Located {
                            seq,
                            record_at,
                            record_len,
                            checked,
                        }));
                    }
                    c.offset = next;
                    // A hole stands for `count` sequences key compaction dropped.
                    let n = kind.count();
                    self.seq += n;
                    if matches!(kind, RecordKind::Hole { .. }) {
                        self.passed_hole = Some(seq);
                        if !holes {
                            continue;
                        }
                    }
                    return Ok(Some(Located {
                        seq,
                        record_at,
                        record_len,
                        checked,
                    }));
                }
                Step::Damage(e) => {
                    return Err(Error::corrupted(
                        c.map.path(),
                        c.offset as u64,
                        Some(self.seq),
                        e.to_string(),
                    ));
                }
            }
        }
    }

    /// Moves from a sealed file to its successor. False when the successor
    /// does not exist yet. When retention removed this file and the ones
    /// after it, the next message is gone: [`Error::NotFound`].
    fn next_file(&mut self) -> Result<bool> {
        let id = self.cursor.as_ref().expect("called with a cursor").info.id;
        for attempt in 0..2 {
            let next = match self.catalog.successor(id) {
                Some(n) => n,
                None => {
                    self.catalog.refresh()?;
                    match self.catalog.successor(id) {
                        Some(n) => n,
                        None if self.seq < self.known_end => {
                            // A file is sealed only once the messages
                            // before its marker are written, and the next
                            // file exists before any later one is: the
                            // file that held these is gone.
                            let c = self.cursor.as_ref().expect("called with a cursor");
                            return Err(Error::corrupted(
                                c.map.path(),
                                c.offset as u64,
                                Some(self.seq),
                                format!(
                                    "the file is sealed at seq {}, but seq {} was published: \
                                     the data file after it is missing",
                                    self.seq,
                                    self.known_end - 1
                                ),
                            ));
                        }
                        None => return Ok(false),
                    }
                }
            };
            let path = self.catalog.data_path(next.id);
            if next.header.first_seq != self.seq {
                if self.catalog.first().is_some_and(|f| f.id > id) {
                    return Err(self.not_found(self.seq));
                }
                if attempt == 0 {
                    // A directory listing taken while the writer rolled can
                    // miss a file that was renamed in meanwhile: look again
                    // before calling it damage.
                    self.catalog.refresh()?;
                    continue;
                }
                return Err(Error::corrupted(
                    &path,
                    0,
                    Some(self.seq),
                    format!(
                        "file starts at seq {} but the previous file ended before {}",
                        next.header.first_seq, self.seq
                    ),
                ));
            }
            match Cursor::open(&self.catalog, next) {
                Ok(cursor) => {
                    cursor.map.advise_sequential();
                    self.cursor = Some(cursor);
                    return Ok(true);
                }
                Err(e) if attempt == 0 && is_not_found(&e) => self.catalog.refresh()?,
                Err(e) => return Err(e),
            }
        }
        Err(self.not_found(self.seq))
    }

    /// The error for a sequence that is not (or no longer) in the queue.
    fn not_found(&self, seq: u64) -> Error {
        let first = self.catalog.first().map_or(0, |f| f.header.first_seq);
        Error::NotFound {
            seq,
            first,
            next: published_end(&self.catalog).max(first),
        }
    }

    /// The message at `loc`, its record decoded (and so checked) here, once
    /// per message delivered ([`Tailer::advance_frame`] checks only holes
    /// and batches; a record a filter decoded already is decoded again
    /// without the checks of names, `record::decode_again`): its payload opened first when it is sealed (with the
    /// catalog's key) and decompressed when it is compressed (into
    /// `inflated`, bounded by the catalog's limit). A malformed record, or
    /// a payload that fails authentication or does not decompress, is
    /// [`Error::Corrupted`], with the tailer left at that message (so
    /// [`Tailer::skip_damaged`] steps over it).
    ///
    /// The message is built where the caller wants it: `Some` inside the
    /// `Ok` from the start, because moving the 152-byte result into an
    /// `Option` afterwards cost a memcpy per message in tailer iteration.
    /// The fields are borrowed one by one (`c.map` while `c.offset`,
    /// `self.seq`, `self.batch` and `self.inflated` change), so the view
    /// decoded here is the one the message carries.
    #[inline]
    fn deliver(&mut self, loc: Located) -> Result<Option<Message<'_>>> {
        let c = self.cursor.as_mut().expect("a located record has a cursor");
        let frame_at = loc.record_at - 4;
        // The error for this frame, the tailer left on it (a macro, not a
        // closure: `c` is borrowed in between, a field at a time).
        macro_rules! damaged {
            ($reason:expr) => {
                stay_damaged(
                    &mut c.offset,
                    &c.map,
                    &mut self.seq,
                    frame_at,
                    loc.seq,
                    $reason,
                )
            };
        }
        let rec = &c.map.as_slice()[loc.record_at..loc.record_at + loc.record_len];
        let decoded = if loc.checked {
            record::decode_again(rec)
        } else {
            record::decode(rec)
        };
        let view = match decoded {
            Ok(view) => view,
            Err(reason) => {
                return Err(damaged!(reason));
            }
        };
        let position = position::encode(c.info.header.file_number, frame_at as u64);
        if view.is_batch() {
            let of = (c.info.header.file_number, frame_at);
            let first = RecordKind::of_or_plain(rec)
                .batch()
                .map_or(0, |(first, _)| first);
            if self.batch.of != Some(of) && !c.batch_starts_at(&self.catalog, frame_at, first) {
                // Its members would be numbered from the wrong sequence:
                // another member's bytes under each one's.
                return Err(damaged!(format!(
                    "batch frame names {first} as its first sequence, \
                     which is not where it stands in the file"
                )));
            }
            let limit = self.catalog.max_decompressed();
            let typed = typed_of(&mut self.typed, &self.catalog, &c.info)?;
            let layout = typed.as_ref().map(|t| &t.layout);
            if let Err(reason) = self.batch.load(rec, &view, (of, loc.seq), limit, layout) {
                return Err(damaged!(reason));
            }
            // `load` found the member in the batch's block.
            let member = &self.batch.block[self.batch.current.clone()];
            if view.is_row_batch() {
                // A row (format 12): no key, headers or other field; the
                // batch's timestamp.
                return Ok(Some(Message {
                    seq: loc.seq,
                    timestamp: view.timestamp,
                    key: None,
                    payload: member,
                    payload_at: loc.record_at + view.payload_at,
                    position,
                    view: RecordView::row(view.timestamp, member),
                    mapping: &c.map,
                    topic_offset: None,
                    member_of: Some(MemberOf {
                        codec: view.codec,
                        block_len: view.payload.len(),
                        end: RecordKind::of_or_plain(rec).seq_after(loc.seq),
                    }),
                }));
            }
            let mut m = record::decode(member)
                .map_err(|r| Error::corrupted(c.map.path(), frame_at as u64, Some(loc.seq), r))?;
            m.timestamp = view.timestamp;
            return Ok(Some(Message {
                seq: loc.seq,
                timestamp: view.timestamp,
                key: m.key,
                payload: m.payload,
                payload_at: loc.record_at + view.payload_at,
                position,
                view: m,
                mapping: &c.map,
                topic_offset: None,
                member_of: Some(MemberOf {
                    codec: view.codec,
                    block_len: view.payload.len(),
                    end: RecordKind::of_or_plain(rec).seq_after(loc.seq),
                }),
            }));
        }
        let sealed = view.codec.is_some() || view.is_encrypted();
        if sealed {
            let key = self.catalog.key();
            let limit = self.catalog.max_decompressed();
            match view.open_payload(rec, loc.seq, key.as_deref(), limit) {
                Ok(payload) => {
                    self.inflated.clear();
                    self.inflated.extend_from_slice(&payload);
                }
                Err(reason) => {
                    return Err(damaged!(reason));
                }
            }
        }
        if c.info.header.schema_version != 0 && !view.is_tombstone() {
            // A typed file's record holds one row of the file's version.
            let typed = typed_of(&mut self.typed, &self.catalog, &c.info)?;
            let payload = if sealed {
                &self.inflated[..]
            } else {
                view.payload
            };
            if let Some(Err(why)) = typed.map(|t| t.layout.check_row(payload)) {
                return Err(damaged!(why));
            }
        }
        Ok(Some(Message {
            seq: loc.seq,
            timestamp: view.timestamp,
            key: view.key,
            payload: if sealed {
                &self.inflated[..]
            } else {
                view.payload
            },
            payload_at: loc.record_at + view.payload_at,
            position,
            view,
            mapping: &c.map,
            topic_offset: match self.filter {
                Some(Filter::Topic(_)) => self.topic_offset,
                _ => None,
            },
            member_of: None,
        }))
    }

    fn message(&mut self, loc: Located) -> Result<Message<'_>> {
        Ok(self.deliver(loc)?.expect("deliver always gives a message"))
    }
}

/// The schema and row layout of data file `info` (format 12), kept in
/// `cache` for the file the tailer reads (one lookup in the catalog per
/// file, not per message); `None` for an untyped file.
fn typed_of(
    cache: &mut Option<(u64, Option<Arc<TypedFile>>)>,
    catalog: &Catalog,
    info: &FileInfo,
) -> Result<Option<Arc<TypedFile>>> {
    match cache {
        Some((number, typed)) if *number == info.header.file_number => Ok(typed.clone()),
        _ => {
            let typed = catalog.typed_file(info)?;
            *cache = Some((info.header.file_number, typed.clone()));
            Ok(typed)
        }
    }
}

/// The error for the damaged frame at `frame_at` of `map` (message `seq`),
/// with the tailer (its cursor's `offset` and its `tailer_seq`) left on it,
/// so that [`Tailer::skip_damaged`] steps over it.
fn stay_damaged(
    offset: &mut usize,
    map: &Mapping,
    tailer_seq: &mut u64,
    frame_at: usize,
    seq: u64,
    reason: impl Into<String>,
) -> Error {
    *offset = frame_at;
    *tailer_seq = seq;
    Error::corrupted(map.path(), frame_at as u64, Some(seq), reason)
}

/// Reads data file `file_number` from sequence `from` to the end of what is
/// published in it with a tailer of its own (every frame's CRC checked),
/// calling `found(seq, topic, queue_id)` for each message with a topic or
/// tags; returns the sequence after the last one read. Topic offsets count
/// with it where no topic index serves (`reader::topic_offsets::Scanner`).
pub(crate) fn scan_topics(
    catalog: &Arc<Catalog>,
    file_number: u64,
    from: u64,
    found: &mut dyn FnMut(u64, &str, u16),
) -> Result<u64> {
    let mut t = Tailer::new(catalog.clone(), WaitStrategy::default());
    t.seek(from)?;
    let mut upto = from;
    while let Some(loc) = t.advance_frame(false)? {
        let c = t.cursor.as_ref().expect("a located record has a cursor");
        if c.info.header.file_number != file_number {
            break;
        }
        upto = loc.seq + 1;
        let rec = &c.map.as_slice()[loc.record_at..loc.record_at + loc.record_len];
        let view = record::decode(rec).map_err(|r| {
            Error::corrupted(c.map.path(), (loc.record_at - 4) as u64, Some(loc.seq), r)
        })?;
        if view.flags & record::FLAG_TOPIC != 0 {
            found(loc.seq, view.topic.unwrap_or(""), view.queue_id);
        }
    }
    Ok(upto)
}

/// The filter of a tailer: a topic selector or a field query.
#[derive(Debug)]
pub(crate) enum Filter {
    /// `Tailer::select`.
    Topic(TopicFilter),
    /// `Queue::where_field`.
    Field(FieldFilter),
}

impl Filter {
    pub(crate) fn jump(&mut self, catalog: &Catalog, seq: u64) -> Option<Jump> {
        match self {
            Filter::Topic(f) => f.jump(catalog, seq),
            Filter::Field(f) => f.jump(catalog, seq),
        }
    }

    pub(crate) fn matches(&self, rec: &RecordView<'_>) -> bool {
        match self {
            Filter::Topic(f) => f.matches(rec),
            Filter::Field(f) => f.matches(rec),
        }
    }
}
