//! What tailers hand out: [`Message`] (borrowed from a mapping),
//! [`OwnedMessage`], and the frames of a read-ahead run ([`RunFrame`]).

use std::ops::Range;
use std::sync::Arc;

use crate::format::compression::Codec;
use crate::format::header::TYPED_SINCE_VERSION;
use crate::format::position;
use crate::format::record::{self, HeaderIter, RecordView, TagIter};
use crate::storage::mapped::Mapping;

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
    pub(super) view: RecordView<'a>,
    pub(super) mapping: &'a Arc<Mapping>,
    pub(super) payload_at: usize,
    pub(super) position: u64,
    pub(super) topic_offset: Option<u64>,
    /// A member of a batch (format 9): see [`MemberOf`].
    pub(super) member_of: Option<MemberOf>,
}

/// A frame [`Tailer::read_run_frames`] hands on: checked (by its CRC or its
/// sealed file's), its record not decoded.
pub struct RunFrame<'a> {
    /// The message's sequence.
    pub seq: u64,
    /// The record: the frame's bytes between its length and its CRC.
    pub record: &'a [u8],
    /// Offset of the frame in its file.
    pub(super) at: usize,
    /// The file's number (for the message's position).
    pub(super) file_number: u64,
    /// The file.
    pub(super) mapping: &'a Arc<Mapping>,
}

impl<'a> RunFrame<'a> {
    /// The file the frame is in; holding it keeps it mapped.
    pub fn mapping(&self) -> &'a Arc<Mapping> {
        self.mapping
    }

    /// Offset of the frame in its file.
    pub fn offset(&self) -> usize {
        self.at
    }

    /// A bare record's message (no key, headers, record fields, compression
    /// or extension byte: see `record::decode_bare`), read from the
    /// record's bytes without decoding it into a view; `None` for any
    /// other record (and for one shorter than its fixed fields).
    #[inline]
    pub fn bare(&self) -> Option<BareMessage<'a>> {
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
    pub fn message(&self) -> Option<Message<'a>> {
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
pub struct BareMessage<'a> {
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
pub(super) struct MemberOf {
    /// The batch's codec (`None`: a row batch stored as is).
    pub(super) codec: Option<Codec>,
    /// Length of the stored (compressed) block, which `payload_at` points at.
    pub(super) block_len: usize,
    /// The sequence after the batch's last member.
    pub(super) end: u64,
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
        self.view.codec.or(self.member_of.and_then(|m| m.codec))
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
    /// The schema version of the message's row (format 12, read from its
    /// data file's header): bindings decode the payload with that version's
    /// layout. 0 for a message of an untyped queue.
    pub fn schema_version(&self) -> u32 {
        schema_version_of(self.mapping)
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
            schema_version: self.schema_version(),
        }
    }
}

/// The schema version data file `map`'s header records (bytes 52..56 of a
/// file of format 12; 0 before, and for an untyped file). The header was
/// checked when the catalog listed the file.
pub(crate) fn schema_version_of(map: &Mapping) -> u32 {
    let head = map.as_slice();
    match crate::format::le_u32(head, 8) {
        Some(v) if v >= TYPED_SINCE_VERSION => crate::format::le_u32(head, 52).unwrap_or(0),
        _ => 0,
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
    /// The schema version of its row (see [`Message::schema_version`]).
    pub schema_version: u32,
}
