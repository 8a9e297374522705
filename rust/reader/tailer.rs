//! Tailers: readers that walk the frames of a queue in sequence order.

use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::catalog::{Catalog, FileInfo};
use super::field::FieldFilter;
use super::frames::{frame_at, Check, RecordKind, Step};
use super::plan::Jump;
use super::topic::{TopicFilter, TopicSelector};
use super::wait::{Sleeper, Slept, WaitStrategy, Waiter};
use super::wake::{WakeSource, RETRY};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::compression::Codec;
use crate::format::error::DecodeError;
use crate::format::footer::{Footer, FOOTER_LEN};
use crate::format::frame::{self, DATA_HEADER_LEN};
use crate::format::position;
use crate::format::record::{self, HeaderIter, RecordView, TagIter};
use crate::format::walk;
use crate::index::dense::{DenseIndex, DENSE_SINCE_VERSION};
use crate::index::sparse::{Entry, SparseIndex};
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

/// A message borrowed from a data file's mapping.
#[derive(Debug, Clone)]
pub struct Message<'a> {
    /// Sequence of the message.
    pub seq: u64,
    /// µs since the Unix epoch (UTC), assigned when the message was written.
    pub timestamp: u64,
    /// Key given at append, if any.
    pub key: Option<&'a [u8]>,
    /// The message body.
    pub payload: &'a [u8],
    view: RecordView<'a>,
    mapping: &'a Arc<Mapping>,
    payload_at: usize,
    position: u64,
    topic_offset: Option<u64>,
    /// A member of a batch (format 9): see [`MemberOf`].
    member_of: Option<MemberOf>,
}

/// A frame [`Tailer::read_run_frames`] hands on: checked (by its CRC or its
/// sealed file's), its record not decoded.
pub(crate) struct RunFrame<'a> {
    /// The message's sequence.
    pub seq: u64,
    /// The record: the frame's bytes between its length and its CRC.
    pub record: &'a [u8],
    /// Offset of the frame in its file.
    at: usize,
    /// The file's number (for the message's position).
    file_number: u64,
    /// The file.
    mapping: &'a Arc<Mapping>,
}

impl<'a> RunFrame<'a> {
    /// The file the frame is in; holding it keeps it mapped.
    #[cfg_attr(
        not(feature = "python"),
        allow(
            dead_code,
            reason = "the engine's read-ahead API; the Python bindings are its caller today"
        )
    )]
    pub(crate) fn mapping(&self) -> &'a Arc<Mapping> {
        self.mapping
    }

    /// Offset of the frame in its file.
    #[cfg_attr(
        not(feature = "python"),
        allow(
            dead_code,
            reason = "the engine's read-ahead API; the Python bindings are its caller today"
        )
    )]
    pub(crate) fn offset(&self) -> usize {
        self.at
    }

    /// A bare record's message (no key, headers, record fields, compression
    /// or extension byte: see `record::decode_bare`), read from the
    /// record's bytes without decoding it into a view; `None` for any
    /// other record (and for one shorter than its fixed fields).
    #[cfg_attr(
        not(feature = "python"),
        allow(
            dead_code,
            reason = "the engine's read-ahead API; the Python bindings are its caller today"
        )
    )]
    #[inline]
    pub(crate) fn bare(&self) -> Option<BareMessage<'a>> {
        let (timestamp, payload) = record::decode_bare(self.record)?;
        Some(BareMessage {
            timestamp,
            payload,
            payload_at: self.at + 4 + (self.record.len() - payload.len()),
        })
    }

    /// The message the frame holds when it is plain (see [`plain_view`]),
    /// as [`Tailer::read_run`] hands it on.
    #[inline]
    pub(crate) fn message(&self) -> Option<Message<'a>> {
        let view = plain_view(self.record)?;
        Some(Message {
            seq: self.seq,
            timestamp: view.timestamp,
            key: view.key,
            payload: view.payload,
            payload_at: self.at + 4 + view.payload_at,
            position: position::encode(self.file_number, self.at as u64),
            view,
            mapping: self.mapping,
            topic_offset: None,
            member_of: None,
        })
    }
}

/// What [`RunFrame::bare`] reads of a bare record.
#[cfg_attr(
    not(feature = "python"),
    allow(
        dead_code,
        reason = "the engine's read-ahead API; the Python bindings are its caller today"
    )
)]
pub(crate) struct BareMessage<'a> {
    /// µs since the Unix epoch (UTC).
    pub timestamp: u64,
    /// The payload, in the file's mapping.
    pub payload: &'a [u8],
    /// Offset of the payload in the file.
    pub payload_at: usize,
}

/// `record` decoded, when it is a message [`Tailer::read_run`] hands on as
/// it is stored: `None` for a malformed record, and for one that needs
/// [`Tailer::read_next`] (a compressed or encrypted payload, a hole, a batch).
#[inline]
pub(crate) fn plain_view(record: &[u8]) -> Option<RecordView<'_>> {
    let view = record::decode(record).ok()?;
    let special = view.codec.is_some() || view.is_encrypted() || view.is_hole() || view.is_batch();
    (!special).then_some(view)
}

/// What a message read from a batch (format 9) knows of its batch.
#[derive(Debug, Clone, Copy)]
struct MemberOf {
    /// The batch's codec.
    codec: Codec,
    /// Length of the stored (compressed) block, which `payload_at` points at.
    block_len: usize,
    /// The sequence after the batch's last member.
    end: u64,
}

impl<'a> Message<'a> {
    /// The key was given as text.
    pub fn key_is_text(&self) -> bool {
        self.view.key_is_text()
    }
    /// The decoded record the message was read from.
    pub(crate) fn record(&self) -> &RecordView<'a> {
        &self.view
    }
    /// The message's headers, in the order given.
    pub fn headers(&self) -> HeaderIter<'a> {
        self.view.headers()
    }
    /// The message's topic, if any.
    pub fn topic(&self) -> Option<&'a str> {
        self.view.topic
    }
    /// The topic's stream the message belongs to (0 unless sharded).
    pub fn queue_id(&self) -> u16 {
        self.view.queue_id
    }
    /// The message's tags, in the order given.
    pub fn tags(&self) -> TagIter<'a> {
        self.view.tags()
    }
    /// The message's priority (0 when none was given).
    pub fn priority(&self) -> u8 {
        self.view.priority
    }
    /// When the message expires, µs since the Unix epoch, if it does.
    pub fn expires_at(&self) -> Option<u64> {
        self.view.expires_at
    }
    /// The codec the payload was stored with, if it was compressed (the
    /// payload here is always the decompressed one): for a member of a
    /// batch compressed together (format 9), the batch's codec.
    pub fn codec(&self) -> Option<Codec> {
        self.view.codec.or(self.member_of.map(|m| m.codec))
    }
    /// The message is a member of a batch compressed together (format 9):
    /// [`Message::position`] is the batch frame's and
    /// [`Message::payload_range`] the batch's compressed block.
    pub fn in_batch(&self) -> bool {
        self.member_of.is_some()
    }
    /// For a member of a batch (format 9), the sequence after the batch's
    /// last member: the members `seq..batch_end` follow it in the same frame.
    pub fn batch_end(&self) -> Option<u64> {
        self.member_of.map(|m| m.end)
    }
    /// The payload was stored encrypted (the payload here is always the
    /// opened one).
    pub fn is_encrypted(&self) -> bool {
        self.view.is_encrypted()
    }
    /// The message is a tombstone: its key's value was deleted.
    pub fn is_tombstone(&self) -> bool {
        self.view.is_tombstone()
    }
    /// The file mapping the payload lives in; holding it keeps it mapped.
    pub fn mapping(&self) -> &Arc<Mapping> {
        self.mapping
    }
    /// Where the payload lies inside `mapping().as_slice()`: the stored
    /// (compressed) bytes when [`Message::codec`] is set; for a member of a
    /// batch ([`Message::in_batch`]), the whole compressed block of the
    /// batch, which holds it among the other members.
    pub fn payload_range(&self) -> Range<usize> {
        match self.member_of {
            Some(m) => self.payload_at..self.payload_at + m.block_len,
            None => self.payload_at..self.payload_at + self.view.payload.len(),
        }
    }
    /// Where the frame is: `(data file number << 40) | offset` (see FORMAT.md).
    pub fn position(&self) -> u64 {
        self.position
    }
    /// The message's offset in its topic stream (topic and queue id): 0,
    /// 1, 2, ... over that stream's messages still in the queue. Set on
    /// messages read by a topic tailer ([`Tailer::select`] with a topic or
    /// tags), `None` otherwise (see `reader::topic_offsets`).
    pub fn topic_offset(&self) -> Option<u64> {
        self.topic_offset
    }
    /// Copies the message out of the mapping.
    pub fn to_owned(&self) -> OwnedMessage {
        OwnedMessage {
            seq: self.seq,
            timestamp: self.timestamp,
            key: self.key.map(<[u8]>::to_vec),
            key_is_text: self.key_is_text(),
            headers: self
                .headers()
                .map(|h| (h.name.to_string(), h.value.to_vec(), h.value_is_text))
                .collect(),
            topic: self.topic().map(str::to_string),
            queue_id: self.queue_id(),
            tags: self.tags().map(str::to_string).collect(),
            priority: self.priority(),
            expires_at: self.expires_at(),
            payload: self.payload.to_vec(),
            codec: self.codec(),
            tombstone: self.is_tombstone(),
            file: self.mapping.path().to_path_buf(),
            offset: position::decode(self.position).1,
            topic_offset: self.topic_offset,
        }
    }
}

/// A message copied out of the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedMessage {
    /// Sequence of the message.
    pub seq: u64,
    /// µs since the Unix epoch (UTC), assigned when the message was written.
    pub timestamp: u64,
    /// Key given at append, if any.
    pub key: Option<Vec<u8>>,
    /// The key was given as text.
    pub key_is_text: bool,
    /// `(name, value, value_is_text)`.
    pub headers: Vec<(String, Vec<u8>, bool)>,
    /// Topic, if any.
    pub topic: Option<String>,
    /// The topic's stream (0 unless sharded).
    pub queue_id: u16,
    /// Tags, in order.
    pub tags: Vec<String>,
    /// Priority (0 when none was given).
    pub priority: u8,
    /// When the message expires, µs since the Unix epoch, if it does.
    pub expires_at: Option<u64>,
    /// The message body (decompressed).
    pub payload: Vec<u8>,
    /// The codec the payload was stored with, if it was compressed.
    pub codec: Option<Codec>,
    /// The message is a tombstone: its key's value was deleted.
    pub tombstone: bool,
    /// The data file the message was read from.
    pub file: std::path::PathBuf,
    /// Offset of its frame in that file.
    pub offset: u64,
    /// Its offset in its topic stream, when read by a topic tailer (see
    /// [`Message::topic_offset`]).
    pub topic_offset: Option<u64>,
}

#[derive(Debug)]
struct Cursor {
    info: FileInfo,
    map: Arc<Mapping>,
    offset: usize,
    /// The file's sparse index, opened on first use (`Some(None)`: unusable).
    index: Option<Option<SparseIndex>>,
    /// The file's footer when it is a sealed file, looked up on a bulk
    /// read's first use (`Some(None)`: none usable).
    footer: Option<Option<super::sealed::Sealed>>,
    /// Its frame area matched the footer's CRC in this process.
    verified: bool,
    /// Frames runs ([`Tailer::read_run_frames`]) read from this file: once
    /// they and the run asked for reach a quarter of a sealed file, the
    /// file is verified whole (see there).
    run_frames: u64,
    /// The file's dense index (format 5), opened on first use (`None`
    /// inside: none, or unusable); shared with the catalog's other tailers
    /// for a sealed file it keeps.
    dense: Arc<OnceLock<Option<Arc<DenseIndex>>>>,
    /// Where the frames of a sealed file this handle verified end (see
    /// [`Cursor::trust`]): frames before it are read without their own CRC.
    trusted_end: Option<usize>,
    /// [`Cursor::trust`] looked already.
    trust_checked: bool,
    /// `(offset, length word)` of the frame [`Cursor::dense_frame`] just
    /// CRC-checked, so that reading it next does not check it again (once:
    /// taken by that read).
    checked_frame: Option<(usize, u32)>,
    /// Opened by the tailer's current [`Tailer::read_at`], so
    /// [`Catalog::map_file`] has just checked that the file is still there
    /// (see [`Tailer::file_just_checked`]).
    fresh: bool,
}

impl Cursor {
    fn open(catalog: &Catalog, info: FileInfo) -> Result<Cursor> {
        let file = catalog.map_file(&info)?;
        Ok(Cursor::new(
            info,
            file.map,
            file.dense,
            DATA_HEADER_LEN,
            true,
        ))
    }

    /// A cursor at `offset` of the mapped file, nothing about it looked up.
    fn new(
        info: FileInfo,
        map: Arc<Mapping>,
        dense: Arc<OnceLock<Option<Arc<DenseIndex>>>>,
        offset: usize,
        fresh: bool,
    ) -> Cursor {
        Cursor {
            info,
            map,
            offset,
            index: None,
            footer: None,
            verified: false,
            run_frames: 0,
            dense,
            trusted_end: None,
            trust_checked: false,
            checked_frame: None,
            fresh,
        }
    }

    /// A filtered read (which reads a few frames here and there, never a
    /// whole file) trusts the frames of a sealed file whose frame area this
    /// queue handle verified against its footer's CRC (a bulk read did, see
    /// `reader::sealed`): each frame is then CRC-checked by that checksum
    /// instead of its own. Looked up once per file.
    fn trust(&mut self, catalog: &Catalog) {
        if self.trust_checked {
            return;
        }
        self.trust_checked = true;
        let footer = *self
            .footer
            .get_or_insert_with(|| super::sealed::footer(&self.map, &self.info.header));
        if let Some(sealed) = footer {
            if self.verified || catalog.verified.contains(&sealed) {
                self.verified = true;
                self.trusted_end = Some(sealed.footer.frames_end as usize);
            }
        }
    }

    /// The length word of the frame at the cursor, which is message `seq`'s
    /// (or a marker). A damaged file whose frames reach its (trimmed) end,
    /// with no room left for a word, is an error.
    fn length_word(&self, seq: u64) -> Result<u32> {
        if self.offset + 4 > self.map.len() {
            return Err(Error::corrupted(
                self.map.path(),
                self.offset as u64,
                Some(seq),
                "frames run to the end of the file without an end-of-file marker",
            ));
        }
        Ok(self.map.load_u32(self.offset))
    }

    /// Offset of message `seq`'s frame from the dense index, if the file has
    /// one, its entry for `seq` is written and matches, and the frame there
    /// passes its CRC and decodes. A damaged entry must not send a reader to
    /// the wrong message: anything else is `None`, and the caller scans.
    fn dense_frame(&mut self, catalog: &Catalog, seq: u64) -> Option<usize> {
        let ix = self.dense_index(catalog)?.clone();
        let at = ix.offset(seq, self.map.len())?;
        match frame_at(&*self.map, at, Check::Crc) {
            Step::Frame(f) => {
                let ok = record::decode(f.record).is_ok();
                self.checked_frame = ok.then_some((at, f.record.len() as u32));
                ok.then_some(at)
            }
            _ => None,
        }
    }

    /// The first message after `seq` (whose frame, damaged, is at the
    /// cursor) that the dense index places in a later frame that checks
    /// out: `(its sequence, its frame's offset)`. The members of a batch
    /// share its frame and are passed over; a few entries that do not check
    /// out (damaged, or dropped by key compaction) are looked past; `None`
    /// when the file has no dense index or none of those entries answers.
    fn next_by_dense(&mut self, catalog: &Catalog, seq: u64) -> Option<(u64, usize)> {
        const LOOK: u64 = 64;
        let here = self.offset;
        self.dense_index(catalog)?;
        let mut s = seq + 1;
        let mut misses = 0;
        while misses < LOOK && s - seq <= u64::from(u16::MAX) + 1 {
            match self.dense_frame(catalog, s) {
                Some(at) if at > here => return Some((s, at)),
                Some(_) => {}
                None => misses += 1,
            }
            s += 1;
        }
        None
    }

    /// Whether the batch frame at `at`, whose record names `first` as its
    /// first member, stands at sequence `first` (a batch whose `first_seq`
    /// disagrees with its place is corrupted for every member, FORMAT.md):
    /// the dense index, written from the writer's own count, has message
    /// `first` at `at` and message `first - 1` before it (or `first` is the
    /// file's first). Two probes per batch decoded. Where the dense index
    /// does not say so (none, an entry not written yet or damaged), the
    /// file's frames are counted from its start up to `at`.
    fn batch_starts_at(&self, catalog: &Catalog, at: usize, first: u64) -> bool {
        let file_first = self.info.header.first_seq;
        if first < file_first {
            return false;
        }
        let len = self.map.len();
        if let Some(ix) = self.dense_index(catalog) {
            let here = ix.offset(first, len);
            let before = if first > file_first {
                ix.offset(first - 1, len).filter(|&b| b < at)
            } else {
                Some(DATA_HEADER_LEN)
            };
            if here == Some(at) && before.is_some() {
                return true;
            }
        }
        count_frames(&self.map, DATA_HEADER_LEN, Some(at))
            .is_some_and(|(n, end)| end == at && file_first + n == first)
    }

    /// The file's dense index, opened on first use.
    fn dense_index(&self, catalog: &Catalog) -> Option<&Arc<DenseIndex>> {
        let info = self.info;
        self.dense
            .get_or_init(|| {
                (info.header.version >= DENSE_SINCE_VERSION)
                    .then(|| {
                        DenseIndex::open(
                            &info.id.offsets_path(catalog.base()),
                            info.header.first_seq,
                            info.header.file_number,
                        )
                    })
                    .flatten()
                    .map(Arc::new)
            })
            .as_ref()
    }

    /// A sparse-index entry chosen by `pick`, if the frame it points at
    /// checks out. An entry is a hint: a damaged one must not send a reader
    /// to the wrong message, so it is ignored and the caller scans instead.
    fn entry(
        &mut self,
        catalog: &Catalog,
        pick: impl FnOnce(&SparseIndex) -> Option<Entry>,
    ) -> Option<Entry> {
        let e = self.index(catalog).and_then(pick)?;
        entry_matches(&self.map, &e).then_some(e)
    }

    fn index(&mut self, catalog: &Catalog) -> Option<&SparseIndex> {
        let (info, len) = (self.info, self.map.len() as u64);
        self.index
            .get_or_insert_with(|| {
                SparseIndex::open(
                    &info.id.index_path(catalog.base()),
                    info.header.first_seq,
                    len,
                )
            })
            .as_ref()
    }
}

/// The decompressed block of the batch (format 9) a tailer reads members
/// of, and where in it the member delivered last lies: the block is
/// decompressed once per batch, members are found in order in O(1).
#[derive(Debug, Default)]
struct BatchCache {
    /// `(file number, frame offset)` of the batch the block is of.
    of: Option<(u64, usize)>,
    block: Vec<u8>,
    count: u16,
    /// The member after the current one, and where it starts.
    next_index: u16,
    next_at: usize,
    /// The current member's record in `block`.
    current: Range<usize>,
}

impl BatchCache {
    /// Makes member `seq` of the batch record `rec` (decoded: `view`;
    /// frame `of`) current, decompressing its block (at most `limit`
    /// bytes) unless it is the one held. The error says what is wrong with
    /// the batch.
    fn load(
        &mut self,
        rec: &[u8],
        view: &RecordView<'_>,
        of: (u64, usize),
        seq: u64,
        limit: usize,
    ) -> std::result::Result<(), String> {
        let (first, count) = RecordKind::of_or_plain(rec).batch().unwrap_or((0, 1));
        if !(first..first + count).contains(&seq) {
            return Err(format!(
                "batch holds sequences {first}..{}, not {seq}",
                first + count
            ));
        }
        if self.of != Some(of) {
            self.of = None;
            let codec = view.codec.ok_or("batch without a codec")?;
            self.block = crate::format::compression::decompress(
                codec,
                view.payload,
                view.raw_len as usize,
                limit,
            )?;
            self.count = count as u16;
            record::check_batch_block(&self.block, self.count)?;
            self.next_index = 0;
            self.next_at = 0;
            self.of = Some(of);
        }
        let want = (seq - first) as u16;
        let (index, at) = if self.next_index <= want {
            (self.next_index, self.next_at)
        } else {
            (0, 0)
        };
        let (range, _) = record::batch_member(&self.block, self.count, index, at, want)?;
        self.next_index = want + 1;
        self.next_at = range.end;
        self.current = range;
        Ok(())
    }
}

/// What a bulk run ([`Tailer::read_run_frames`]) does when a sealed
/// file's frame area does not match its footer's CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnMismatch {
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
        if let Some(at) = cursor.dense_frame(&self.catalog, seq) {
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

    /// True when the cursor stands on a zero length word.
    fn at_zero(&self) -> bool {
        self.cursor
            .as_ref()
            .is_some_and(|c| c.offset + 4 <= c.map.len() && c.map.load_u32(c.offset) == 0)
    }

    /// Why frames must follow a zero length word at `self.seq` in file
    /// `id`, from what the tailer knows without I/O.
    fn frames_follow(&self, id: FileId) -> Option<String> {
        if let Some(n) = self.catalog.successor(id) {
            return Some(format!(
                "the file is followed by {}, from seq {}",
                self.catalog.data_path(n.id).display(),
                n.header.first_seq
            ));
        }
        (self.seq < self.known_end).then(|| format!("seq {} was published", self.known_end - 1))
    }

    /// Tells the end of the data from a hole, for the zero length word at
    /// the cursor. Without `deep`, the check that costs a directory listing
    /// runs only when the tailer has waited at the same word for a while.
    fn zero_kind(&mut self, deep: bool) -> Result<Zero> {
        let c = self.cursor.as_ref().expect("called with a cursor");
        let (id, offset) = (c.info.id, c.offset);
        let mut stuck = match self.stuck {
            Some(s) if s.id == id && s.offset == offset => s,
            // First time here: the cheap checks at once.
            _ => Stuck {
                id,
                offset,
                polls: 0,
                checked: Instant::now(),
            },
        };
        stuck.polls = stuck.polls.wrapping_add(1);
        self.stuck = Some(stuck);
        // A tailer polling at the tail: nothing to do most of the time.
        if !deep && stuck.polls % HOLE_CHECK_POLLS != 1 {
            return Ok(Zero::Tail);
        }
        let mut why = self.frames_follow(id);
        if why.is_none() {
            let now = Instant::now();
            if deep || now.duration_since(stuck.checked) >= HOLE_CHECK_EVERY {
                stuck.checked = now;
                self.stuck = Some(stuck);
                self.catalog.refresh()?;
                why = self.frames_follow(id);
                if why.is_none() {
                    let end = published_end(&self.catalog);
                    if end > self.seq {
                        why = Some(format!(
                            "the last file's sparse index shows messages up to seq {}",
                            end - 1
                        ));
                    }
                }
            }
        }
        let Some(why) = why else {
            return Ok(Zero::Tail);
        };
        let c = self.cursor.as_ref().expect("called with a cursor");
        // Whatever told us that frames follow may have been published after
        // the word was read: read it again before calling it damage.
        if c.map.load_u32(offset) != 0 {
            return Ok(Zero::Filled);
        }
        Ok(Zero::Hole(Error::corrupted(
            c.map.path(),
            offset as u64,
            Some(self.seq),
            format!(
                "zero length word where a frame must be ({why}): \
                 a zeroed page or a lost write; skip_damaged() steps over it"
            ),
        )))
    }

    /// Steps over published frames by their lengths alone (no CRC: the
    /// frame finally read is checked) while `more(seq, file_number, offset)` holds,
    /// crossing into later files at end-of-file markers. Returns false when
    /// it ran out of published frames first.
    fn skip_while(&mut self, mut more: impl FnMut(u64, u64, usize) -> bool) -> Result<bool> {
        loop {
            let Some(c) = self.cursor.as_mut() else {
                return Ok(false);
            };
            if !more(self.seq, c.info.header.file_number, c.offset) {
                return Ok(true);
            }
            let f = match frame_at(&*c.map, c.offset, Check::Lengths) {
                Step::Empty => return Ok(false),
                Step::EndOfFile => {
                    if !self.next_file()? {
                        return Ok(false);
                    }
                    continue;
                }
                Step::Frame(f) if f.next + 4 <= c.map.len() => f,
                Step::Damage(e @ DecodeError::Truncated) => {
                    return Err(Error::corrupted(
                        c.map.path(),
                        c.offset as u64,
                        Some(self.seq),
                        e.to_string(),
                    ));
                }
                Step::Frame(_) | Step::Damage(_) => {
                    return Err(Error::corrupted(
                        c.map.path(),
                        c.offset as u64,
                        Some(self.seq),
                        "frame length runs past the end of the file",
                    ));
                }
            };
            let next = f.next;
            let kind = RecordKind::of_or_plain(f.record);
            if let Some((first, count)) = kind.batch() {
                // A batch (format 9): its members share the frame;
                // stop on it at the first one `more` refuses.
                let end = first.saturating_add(count);
                let mut m = self.seq + 1;
                while m < end {
                    if !more(m, c.info.header.file_number, c.offset) {
                        self.seq = m;
                        return Ok(true);
                    }
                    m += 1;
                }
                c.offset = next;
                self.seq = end.max(self.seq + 1);
                continue;
            }
            let n = kind.count();
            if n > 1 {
                self.passed_hole = Some(self.seq);
            }
            c.offset = next;
            self.seq += n;
        }
    }

    /// Moves to the first message whose timestamp is at or after `micros`
    /// (or to the end when there is none yet).
    pub fn seek_time(&mut self, micros: u64) -> Result<()> {
        self.check_open()?;
        self.catalog.refresh()?;
        let files = self.catalog.snapshot();
        // The last file whose first message is before `micros` holds the
        // answer, or the answer is the first message of the file after it.
        let mut chosen: Option<(FileInfo, Arc<Mapping>, u64, usize)> = None;
        let (mut lo, mut hi) = (0usize, files.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let info = files[mid];
            let map = Arc::new(Mapping::open(&self.catalog.data_path(info.id))?);
            let first_ts = first_timestamp(&map);
            match first_ts {
                Some(ts) if ts < micros => {
                    chosen = Some((info, map, info.header.first_seq, DATA_HEADER_LEN));
                    lo = mid + 1;
                }
                _ => hi = mid,
            }
        }
        let Some((info, map, mut at_seq, mut offset)) = chosen else {
            return self.seek_to_start();
        };
        let mut cursor = Cursor::new(info, map, Arc::default(), offset, false);
        if let Some(e) = cursor.entry(&self.catalog, |ix| ix.floor_time(micros)) {
            // From a batch's first member: the members before the entry's
            // share its timestamp.
            (at_seq, offset) = (entry_frame_seq(&cursor.map, &e), e.offset as usize);
        }
        cursor.offset = offset;
        self.cursor = Some(cursor);
        self.seq = at_seq;
        loop {
            let before = (
                self.cursor_offset(),
                self.seq,
                self.cursor.as_ref().map(|c| c.info.id),
            );
            match self.advance()? {
                None => return Ok(()),
                Some(loc) => {
                    let ts = self.message(loc)?.timestamp;
                    if ts >= micros {
                        // Step back onto this message.
                        let c = self.cursor.as_mut().expect("advance keeps a cursor");
                        if before.2 == Some(c.info.id) {
                            c.offset = before.0;
                            self.seq = before.1;
                        } else {
                            self.seek(loc.seq)?;
                        }
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Moves to the first frame at or after `position` (see
    /// [`Message::position`]), at a batch frame (format 9) to its first
    /// member; used to re-index the data after a crash and by key lookups.
    pub fn seek_position(&mut self, pos: u64) -> Result<()> {
        self.check_open()?;
        let (number, offset) = position::decode(pos);
        let known = |c: &Catalog| c.at_or_after_number(number);
        // A file another process created since the catalog last looked.
        let info = match known(&self.catalog) {
            Some(info) => Some(info),
            None => {
                self.catalog.refresh()?;
                known(&self.catalog)
            }
        };
        let Some(info) = info else {
            return self.seek_end();
        };
        let mut cursor = match self.cursor.take() {
            Some(c) if c.info.id == info.id => c,
            _ => match Cursor::open(&self.catalog, info) {
                Ok(c) => c,
                Err(e) if is_not_found(&e) => {
                    // Retention removed it: the refreshed catalog no longer lists it.
                    self.catalog.refresh()?;
                    return self.seek_position(pos);
                }
                Err(e) => return Err(e),
            },
        };
        let (mut seq, mut at) = (info.header.first_seq, DATA_HEADER_LEN);
        if info.header.file_number == number {
            if let Some(e) = cursor.entry(&self.catalog, |ix| ix.floor_offset(offset)) {
                // An entry at a batch frame may name a later member: the
                // frame's position is its first member.
                (seq, at) = (entry_frame_seq(&cursor.map, &e), e.offset as usize);
            }
        }
        cursor.offset = at;
        self.cursor = Some(cursor);
        self.seq = seq;
        let target = offset as usize;
        self.skip_while(|_, file, at| file == number && at < target)?;
        Ok(())
    }

    fn seek_to_start(&mut self) -> Result<()> {
        self.cursor = None;
        self.seq = self.catalog.first().map_or(0, |f| f.header.first_seq);
        Ok(())
    }

    /// Moves after the last published message.
    /// Costs a directory listing and a walk over at most one sparse-index
    /// interval of frames, by their lengths.
    pub fn seek_end(&mut self) -> Result<()> {
        self.check_open()?;
        self.catalog.refresh()?;
        let Some(last) = self.catalog.last() else {
            return self.seek_to_start();
        };
        let (mut cursor, reused) = match self.cursor.take() {
            Some(c) if c.info.id == last.id => (c, true),
            _ => (Cursor::open(&self.catalog, last)?, false),
        };
        let (mut seq, mut at) = (last.header.first_seq, DATA_HEADER_LEN);
        if let Some(e) = cursor.entry(&self.catalog, SparseIndex::last) {
            (seq, at) = (e.seq, e.offset as usize);
        }
        if reused && self.seq > seq {
            (seq, at) = (self.seq, cursor.offset);
        }
        cursor.offset = at;
        self.cursor = Some(cursor);
        self.seq = seq;
        self.skip_while(|_, _, _| true)?;
        Ok(())
    }

    /// The sequence after the last published message (the queue's
    /// `next_seq` as files show it), without moving the tailer.
    pub(crate) fn published_end(&mut self) -> Result<u64> {
        self.check_open()?;
        self.catalog.refresh()?;
        Ok(published_end(&self.catalog))
    }

    /// Steps forward over every published frame by their lengths (no CRC)
    /// and returns the sequence after the last one: the tail as far as
    /// this tailer can tell, cheaply (a `TailWatch` follows the tail so).
    pub(crate) fn skip_to_end(&mut self) -> Result<u64> {
        self.check_open()?;
        if !self.ensure_cursor()? {
            return Ok(self.seq);
        }
        self.skip_while(|_, _, _| true)?;
        Ok(self.seq)
    }

    /// Steps over damage at the current position, after a read raised
    /// [`Error::Corrupted`]: a frame whose length is intact but whose
    /// contents are damaged is skipped by its length; a hole (a zero or
    /// unusable length word where frames follow) is skipped to the next
    /// frame that checks out, numbered from the next sparse-index entry or
    /// the next file (the messages in between are lost). Returns false when
    /// there is nothing to step over (the end of the data) or no later
    /// frame can be numbered.
    pub fn skip_damaged(&mut self) -> Result<bool> {
        self.check_open()?;
        self.ensure_cursor()?;
        let Some(c) = self.cursor.as_mut() else {
            return Ok(false);
        };
        if c.offset + 4 > c.map.len() {
            return Ok(false);
        }
        let len = c.map.load_u32(c.offset);
        match len {
            frame::END_OF_FILE => return Ok(false),
            0 => match self.zero_kind(true)? {
                Zero::Tail | Zero::Filled => return Ok(false),
                Zero::Hole(_) => {}
            },
            _ => {
                // The damage may have hit the frame's own length word (or
                // its count): where the dense index knows the frame of a
                // later message, it wins over the length word.
                if let Some((seq, at)) = c.next_by_dense(&self.catalog, self.seq) {
                    c.offset = at;
                    self.seq = seq;
                    return Ok(true);
                }
                let step = frame_at(&*c.map, c.offset, Check::Lengths);
                if let Step::Frame(f) = step.filter(|f| f.next + 4 <= c.map.len()) {
                    // A tailer on a batch may stand at any of its members
                    // (a seek lands on one): the batch ends where its head
                    // says, when that holds the tailer's sequence.
                    let kind = RecordKind::of_or_plain(f.record);
                    let after = match kind.batch() {
                        Some((first, count)) if (first..first + count).contains(&self.seq) => {
                            first + count
                        }
                        _ => self.seq + kind.count(),
                    };
                    c.offset = f.next;
                    self.seq = after;
                    return Ok(true);
                }
            }
        }
        self.resync()
    }

    /// Moves past a hole at the cursor to the next frame that checks out
    /// and whose sequence is known: from the first sparse-index entry after
    /// the hole, the next file's first sequence, or `known_end`, counting
    /// frames back from there. Without any, to the next file.
    fn resync(&mut self) -> Result<bool> {
        let c = self.cursor.as_mut().expect("called with a cursor");
        let hole = c.offset;
        let found = next_valid_frame(&c.map, hole + frame::FRAME_ALIGN);
        let after = c.entry(&self.catalog, |ix| ix.ceil_after(hole as u64));
        let id = c.info.id;
        let mut to: Option<(u64, usize)> = None;
        if let Some(mut e) = after {
            let e_at = e.offset as usize;
            e.seq = entry_frame_seq(&c.map, &e);
            to = Some((e.seq, e_at));
            if let Some(p) = found.filter(|&p| p < e_at) {
                if let Some((n, end)) = count_frames(&c.map, p, Some(e_at)) {
                    if end == e_at && e.seq >= n {
                        to = Some((e.seq - n, p));
                    }
                }
            }
        } else if let Some(p) = found {
            if let Some((n, end)) = count_frames(&c.map, p, None) {
                let sealed = c.map.load_u32(end) == frame::END_OF_FILE;
                let anchor = if sealed {
                    if self.catalog.successor(id).is_none() {
                        self.catalog.refresh()?;
                    }
                    self.catalog.successor(id).map(|n| n.header.first_seq)
                } else {
                    (self.catalog.successor(id).is_none() && self.known_end > self.seq)
                        .then_some(self.known_end)
                };
                to = anchor.filter(|&a| a >= n).map(|a| (a - n, p));
            }
        }
        match to {
            Some((seq, at)) if seq >= self.seq => {
                let c = self.cursor.as_mut().expect("called with a cursor");
                c.offset = at;
                self.seq = seq;
                Ok(true)
            }
            Some(_) => Ok(false),
            None => {
                // Nothing numbered after the hole in this file: go on with
                // the next one (the rest of this one is lost).
                if self.catalog.successor(id).is_none() {
                    self.catalog.refresh()?;
                }
                match self.catalog.successor(id) {
                    Some(n) if n.header.first_seq >= self.seq => {
                        self.seq = n.header.first_seq;
                        self.cursor = None;
                        Ok(true)
                    }
                    _ => Ok(false),
                }
            }
        }
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

    /// The first sequence of the hole a seek to `seq` stepped over, when
    /// `seq` is a hole (key compaction dropped it); for a backward reader,
    /// which goes on before it.
    pub(crate) fn hole_start(&mut self, seq: u64) -> Option<u64> {
        if self.seq > seq {
            return Some(self.passed_hole.filter(|&s| s <= seq).unwrap_or(seq));
        }
        self.at_hole().then_some(seq)
    }

    /// The frame under the cursor is a complete hole (a sequence key
    /// compaction dropped).
    pub(crate) fn at_hole(&self) -> bool {
        let Some(c) = self.cursor.as_ref() else {
            return false;
        };
        if c.offset + 4 > c.map.len() {
            return false;
        }
        match frame_at(&*c.map, c.offset, Check::Crc) {
            Step::Frame(f) => matches!(RecordKind::of_or_plain(f.record), RecordKind::Hole { .. }),
            _ => false,
        }
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

    /// The length of the next message's record when [`Tailer::read_run`]
    /// can take it, `None` when it cannot: when the tailer does not read
    /// every message (a filter, expiry skipping), has no file open, or the
    /// frame at its cursor is not there or its record's flags byte has the
    /// compression or the extension bit. The length and the flags byte are
    /// read unchecked, only to choose the path and size a run (the run
    /// checks the frame, [`Tailer::read_next`] everything else): a reader
    /// that runs only where this says so does not pay a futile run, and
    /// its CRC, at a compressed or encrypted message, a batch (whose frame
    /// the cursor stays on for each member), a hole, a tombstone or the
    /// end of a file.
    #[cfg_attr(
        not(feature = "python"),
        allow(
            dead_code,
            reason = "the engine's read-ahead API; the Python bindings are its caller today"
        )
    )]
    #[inline]
    pub(crate) fn run_start(&self) -> Option<usize> {
        if self.filter.is_some() || self.skip_expired.is_some() {
            return None;
        }
        let c = self.cursor.as_ref()?;
        if c.offset + 5 > c.map.len() {
            return None;
        }
        let len = c.map.load_u32(c.offset);
        if len == 0 || len == frame::END_OF_FILE {
            return None;
        }
        // The flags byte is published once the length word is.
        let flags = c.map.as_slice()[c.offset + 4];
        (flags & (record::FLAG_COMPRESSED | record::FLAG_EXTENSION) == 0).then_some(len as usize)
    }

    /// Moves back to message `seq`, whose frame is at `frame_at` in the
    /// file under the cursor, read by a [`Tailer::read_run`] since the
    /// tailer last moved otherwise: a reader that read a run ahead gives
    /// back the messages it did not hand out. The tailer is then where it
    /// would be had the run stopped before `seq` (a run changes only the
    /// cursor's offset and the sequence). Without a cursor (the queue was
    /// closed meanwhile) only the sequence is set; the next read seeks.
    #[cfg_attr(
        not(feature = "python"),
        allow(
            dead_code,
            reason = "the engine's read-ahead API; the Python bindings are its caller today"
        )
    )]
    pub(crate) fn rewind_run(&mut self, seq: u64, frame_at: usize) {
        debug_assert!(seq <= self.seq, "a run is given back, not skipped");
        if let Some(c) = self.cursor.as_mut() {
            debug_assert!(frame_at <= c.offset);
            c.offset = frame_at;
        }
        self.seq = seq;
    }

    /// Reads up to `max` consecutive messages of the file under the cursor
    /// in one tight loop, handing each to `take`; stops before
    /// a message `take` refuses (returning false), and at anything that is
    /// not a plain complete frame (the end of the published data or of the
    /// file, a damaged frame, a compressed or encrypted record, a hole, a
    /// batch): [`Tailer::read_next`] handles those (and reports damage).
    /// Returns how many messages were taken.
    ///
    /// Each frame is checked as [`Tailer::read_run_frames`] says.
    #[inline]
    pub(crate) fn read_run<F: FnMut(&Message<'_>) -> bool + ?Sized>(
        &mut self,
        max: usize,
        mismatch: OnMismatch,
        take: &mut F,
    ) -> Result<usize> {
        self.read_run_frames(max, mismatch, &mut |f| match f.message() {
            Some(m) => take(&m),
            None => false,
        })
    }

    /// The loop of [`Tailer::read_run`], one level down: hands `take` the
    /// record bytes of up to `max` consecutive complete frames of the file
    /// under the cursor, undecoded, for a reader that decodes only what it
    /// needs (`Columns` reads a record without fields from its bytes, and
    /// builds no [`Message`]). Stops before a frame `take` refuses, which
    /// it must for any record that is not plain (see [`plain_view`]), and
    /// at the end of the published data or of the file and at a damaged
    /// frame. Returns how many frames were taken.
    ///
    /// Each frame is checked by its own CRC, except in a sealed file whose
    /// whole frame area this process verified against its footer's CRC (see
    /// `reader::sealed`, remembered per queue handle): a bulk read that
    /// wants at least a quarter of such a file's messages verifies it first
    /// and then parses its frames without per-frame CRC. When that check
    /// fails, `mismatch` says what happens: [`OnMismatch::Fail`] (a read of
    /// the file as a whole, `read_arrow`) is [`Error::Corrupted`] naming the
    /// file; [`OnMismatch::CheckFrames`] (a tailer: `read_batch`, a Python
    /// tailer's read-ahead) checks the frames one by one from there on, so
    /// the run stops before the damaged frame and the read after it reports
    /// the damage at its own sequence, as [`Tailer::read_next`] does (and
    /// [`Tailer::skip_damaged`] steps over that frame alone). Smaller runs
    /// verify the file once the frames runs have read from it and the run
    /// asked for reach a quarter of it, and go on frame by frame when that
    /// check fails, whatever `mismatch` says.
    ///
    /// `take` is a type parameter, not a `dyn`, so that the caller's
    /// closure is compiled into the loop.
    #[inline]
    pub(crate) fn read_run_frames<F: FnMut(&RunFrame<'_>) -> bool + ?Sized>(
        &mut self,
        max: usize,
        mismatch: OnMismatch,
        take: &mut F,
    ) -> Result<usize> {
        self.check_open()?;
        if self.filter.is_some() || self.skip_expired.is_some() {
            return Ok(0); // one message at a time, through the filter
        }
        let seq0 = self.seq;
        let Some(c) = self.cursor.as_mut() else {
            return Ok(0);
        };
        let footer = *c
            .footer
            .get_or_insert_with(|| super::sealed::footer(&c.map, &c.info.header));
        let mut trusted_end = None;
        if let Some(sealed) = footer {
            let f = sealed.footer;
            let wanted = (max as u64).min(f.end_seq.saturating_sub(seq0));
            let rows = f.end_seq - f.first_seq;
            let verified = &self.catalog.verified;
            if !c.verified {
                if verified.contains(&sealed) || wanted * 4 >= rows {
                    match verified.verify(&c.map, &sealed) {
                        Ok(()) => c.verified = true,
                        Err(e) if mismatch == OnMismatch::Fail => return Err(e),
                        // Some frame of the file is damaged (or a byte no
                        // frame's CRC covers): find it frame by frame.
                        Err(_) => c.footer = Some(None),
                    }
                } else if (c.run_frames + wanted) * 4 >= rows {
                    // A tailer reading on, run after run. Its frames so far
                    // were checked one by one; a mismatch here only means
                    // some frame ahead is damaged, which the per-frame check
                    // then reports at the message where it is, as it did
                    // before: the file is treated as not sealed from here on.
                    match verified.verify(&c.map, &sealed) {
                        Ok(()) => c.verified = true,
                        Err(_) => c.footer = Some(None),
                    }
                }
            }
            if c.verified {
                trusted_end = Some(f.frames_end as usize);
            }
        }
        let map = &c.map;
        let file_number = c.info.header.file_number;
        let mut at = c.offset;
        let mut n = 0usize;
        let check = trusted_end.map_or(Check::Crc, Check::Trusted);
        while n < max {
            // Anything but a complete frame (the end of the data or of
            // the file, damage) ends the run: `read_next` handles it.
            let Step::Frame(fr) = frame_at(&**map, at, check) else {
                break;
            };
            let f = RunFrame {
                seq: seq0 + n as u64,
                record: fr.record,
                at,
                file_number,
                mapping: map,
            };
            if !take(&f) {
                break;
            }
            at = fr.next;
            n += 1;
        }
        c.offset = at;
        c.run_frames += n as u64;
        self.seq = seq0 + n as u64;
        Ok(n)
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
        let rec = &c.map.as_slice()[loc.record_at..loc.record_at + loc.record_len];
        let decoded = if loc.checked {
            record::decode_again(rec)
        } else {
            record::decode(rec)
        };
        let view = match decoded {
            Ok(view) => view,
            Err(reason) => {
                return Err(stay_damaged(
                    &mut c.offset,
                    &c.map,
                    &mut self.seq,
                    frame_at,
                    loc.seq,
                    reason,
                ));
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
                return Err(stay_damaged(
                    &mut c.offset,
                    &c.map,
                    &mut self.seq,
                    frame_at,
                    loc.seq,
                    format!(
                        "batch frame names {first} as its first sequence, \
                         which is not where it stands in the file"
                    ),
                ));
            }
            let limit = self.catalog.max_decompressed();
            if let Err(reason) = self.batch.load(rec, &view, of, loc.seq, limit) {
                return Err(stay_damaged(
                    &mut c.offset,
                    &c.map,
                    &mut self.seq,
                    frame_at,
                    loc.seq,
                    reason,
                ));
            }
            // `load` found the member in the batch's block.
            let member = &self.batch.block[self.batch.current.clone()];
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
                    codec: view.codec.unwrap_or(Codec::Zstd),
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
                    return Err(stay_damaged(
                        &mut c.offset,
                        &c.map,
                        &mut self.seq,
                        frame_at,
                        loc.seq,
                        reason,
                    ));
                }
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

/// True when the frame an index entry points at is complete, passes its CRC
/// and carries the entry's timestamp.
fn entry_matches(map: &Mapping, e: &Entry) -> bool {
    let at = e.offset as usize;
    at + 4 <= map.len() && e.points_at_frame(map.as_slice(), map.load_u32(at))
}

/// Offset of the first frame at or after `from` (on the frame alignment)
/// whose length, CRC and record check out.
fn next_valid_frame(map: &Mapping, from: usize) -> Option<usize> {
    let mut at = from.next_multiple_of(frame::FRAME_ALIGN);
    while at + 4 <= map.len() {
        if let Step::Frame(f) = frame_at(map, at, Check::Crc) {
            if record::decode(f.record).is_ok() {
                return Some(at);
            }
        }
        at += frame::FRAME_ALIGN;
    }
    None
}

/// True when `record` (its bytes) claims to be a hole or a batch: flags
/// exactly [`record::FLAG_EXTENSION`] and an extension byte with either
/// bit. Anything else a walker meets counts one sequence and is delivered.
#[inline]
fn is_hole_or_batch(record: &[u8]) -> bool {
    record.len() > record::RECORD_FIXED_LEN
        && record[0] == record::FLAG_EXTENSION
        && record[record::RECORD_FIXED_LEN] & (record::EXT_HOLE | record::EXT_BATCH) != 0
}

/// What the published frame at `at` (length word `len`) stands for, by the
/// record-kind rule, reading the record's head only (no CRC, no decoding:
/// the frame finally read is checked).
#[inline]
fn frame_kind(map: &Mapping, at: usize, len: u32) -> RecordKind {
    let head = (len as usize).min(record::BATCH_HEAD_LEN);
    map.as_slice()
        .get(at + 4..(at + 4).saturating_add(head))
        .map_or(RecordKind::Plain, RecordKind::of_or_plain)
}

/// The sequence a walker stands at on the frame a sparse-index entry `e`
/// points at, to count frames from: a batch's first member (the entry may
/// name a later member), else the entry's sequence.
fn entry_frame_seq(map: &Mapping, e: &Entry) -> u64 {
    let at = e.offset as usize;
    match map.as_slice().get(at..at + 4) {
        Some(_) => frame_kind(map, at, map.load_u32(at))
            .batch()
            .map_or(e.seq, |(first, _)| first),
        None => e.seq,
    }
}

/// True when data file `info` holds a batch frame (format 9): its frames
/// walked by their length words, a batch's head read (no CRC: a damaged
/// frame is reported by the reads, not here).
pub(crate) fn file_has_batches(catalog: &Catalog, info: &FileInfo) -> Result<bool> {
    if info.header.version < 9 {
        return Ok(false);
    }
    let map = match Mapping::open(&catalog.data_path(info.id)) {
        Ok(m) => m,
        Err(e) if is_not_found(&e) => return Ok(false), // deleted by retention
        Err(e) => return Err(e),
    };
    let mut at = DATA_HEADER_LEN;
    while let Step::Frame(f) = frame_at(&map, at, Check::Lengths) {
        if RecordKind::of_or_plain(f.record).batch().is_some() {
            return Ok(true);
        }
        at = f.next;
    }
    Ok(false)
}

/// Walks frames by their lengths from `from` until `until` (or the first
/// zero length or end-of-file marker); returns how many it stepped over and
/// where it stopped, or `None` when a length runs past the file.
fn count_frames(map: &Mapping, from: usize, until: Option<usize>) -> Option<(u64, usize)> {
    let (mut at, mut n) = (from, 0u64);
    loop {
        if until.is_some_and(|u| at >= u) {
            return Some((n, at));
        }
        match frame_at(map, at, Check::Lengths) {
            Step::Empty | Step::EndOfFile => return Some((n, at)),
            Step::Frame(f) => {
                n += RecordKind::of_or_plain(f.record).count();
                at = f.next;
            }
            // A length past the file (it cannot end at `until`, inside it).
            Step::Damage(_) => return None,
        }
    }
}

/// Timestamp of a file's first message, if it has one that decodes.
fn first_timestamp(map: &Mapping) -> Option<u64> {
    match frame_at(map, DATA_HEADER_LEN, Check::Crc) {
        Step::Frame(f) => record::decode(f.record).ok().map(|v| v.timestamp),
        _ => None,
    }
}

fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

/// Bytes of data file `info` that hold data: its header and frames, up to
/// its end-of-file marker or the end of what is published. A trimmed sealed
/// file says so in its footer (read with `pread`); otherwise from its last
/// sparse-index entry plus a walk of at most one interval.
pub(crate) fn written_bytes(catalog: &Catalog, info: &FileInfo) -> u64 {
    use std::os::unix::fs::FileExt;
    let path = catalog.data_path(info.id);
    let h = &info.header;
    if let Ok(file) = std::fs::File::open(&path) {
        let len = file.metadata().map_or(0, |m| m.len());
        if h.version >= 4 && len < h.file_size && len >= FOOTER_LEN as u64 {
            let mut b = [0u8; FOOTER_LEN];
            if file.read_exact_at(&mut b, len - FOOTER_LEN as u64).is_ok() {
                if let Ok(f) = Footer::decode(&b) {
                    return f.frames_end;
                }
            }
        }
    }
    let Ok(map) = Mapping::open(&path) else {
        return 0;
    };
    let mut off = DATA_HEADER_LEN;
    let index = SparseIndex::open(
        &info.id.index_path(catalog.base()),
        h.first_seq,
        map.len() as u64,
    );
    if let Some(e) = index
        .and_then(|ix| ix.last())
        .filter(|e| entry_matches(&map, e))
    {
        off = e.offset as usize;
    }
    loop {
        match frame_at(&map, off, Check::Lengths) {
            Step::Frame(f) => off = f.next,
            // A length past the file: data up to its end.
            Step::Damage(DecodeError::BadLength(_)) => off = map.len(),
            _ => break,
        }
    }
    off.min(map.len()) as u64
}

/// Sequence after the last published message, found from the last file's
/// sparse index plus a walk of at most one index interval of length words.
fn published_end(catalog: &Catalog) -> u64 {
    let Some(last) = catalog.last() else { return 0 };
    let Ok(map) = Mapping::open(&catalog.data_path(last.id)) else {
        return last.header.first_seq;
    };
    let (mut seq, mut off) = (last.header.first_seq, DATA_HEADER_LEN);
    let index = SparseIndex::open(&last.id.index_path(catalog.base()), seq, map.len() as u64);
    if let Some(e) = index
        .and_then(|ix| ix.last())
        .filter(|e| entry_matches(&map, e))
    {
        (seq, off) = (entry_frame_seq(&map, &e), e.offset as usize);
    }
    loop {
        match frame_at(&map, off, Check::Lengths) {
            Step::Frame(f) => {
                seq += RecordKind::of_or_plain(f.record).count();
                off = f.next;
            }
            // A length past the file: its frame counts, nothing follows.
            Step::Damage(DecodeError::BadLength(len)) => {
                seq += frame_kind(&map, off, len).count();
                break;
            }
            _ => break,
        }
    }
    seq
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
