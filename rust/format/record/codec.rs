//! The record codec: flags, the fields they announce, encoding a
//! [`Record`] and decoding a [`RecordView`] (plain records, and the heads
//! of holes and batches, which `decode` checks). Holes, batches and sealed
//! payloads have their own files beside this one.

use std::borrow::Cow;

use crate::format::compression::{self, Codec, Compression, COMPRESSION_FIELD_LEN};
use crate::format::crypto::{QueueKey, NONCE_LEN, TAG_LEN};
use crate::format::{le_u16, le_u32, le_u64};

/// The record has a key.
pub const FLAG_KEY: u8 = 0x01;
/// The record has headers.
pub const FLAG_HEADERS: u8 = 0x02;
/// The key was given as text (UTF-8) and is returned as text.
pub const FLAG_KEY_TEXT: u8 = 0x04;
/// The record has a topic field: topic name (may be empty: no topic), queue
/// id and tags.
pub const FLAG_TOPIC: u8 = 0x08;
/// The record has an expiry time.
pub const FLAG_EXPIRY: u8 = 0x10;
/// The record has a priority (absent means 0).
pub const FLAG_PRIORITY: u8 = 0x20;
/// The payload is compressed: `codec:u8 | raw_len:u32` precede it.
pub const FLAG_COMPRESSED: u8 = 0x40;
/// An extension byte follows (bits `EXT_*`).
pub const FLAG_EXTENSION: u8 = 0x80;
/// Extension bit: the record is a tombstone, the deletion of its key's
/// value (it has a key and an empty payload).
pub const EXT_TOMBSTONE: u8 = 0x01;
/// Extension bit (format 8): the record is a hole, standing for a run of
/// `count` consecutive sequences whose messages key compaction dropped
/// (`Queue::compact`). A hole is the flags byte [`FLAG_EXTENSION`], the
/// first dropped message's timestamp, the extension byte `EXT_HOLE`, the
/// count (`u16`, at least 1), then filler (zeros) up to the end of the
/// frames it replaces: the frame spans exactly their bytes, so every later
/// frame keeps its offset, and the filler is never written (the file is
/// sparse there). No key, headers, fields or payload. Readers skip it.
pub const EXT_HOLE: u8 = 0x04;
/// Length of a hole record without filler: flags, timestamp, extension
/// byte, count.
pub const HOLE_RECORD_LEN: usize = RECORD_FIXED_LEN + 1 + 2;
/// The most sequences one hole stands for.
pub const MAX_HOLE_COUNT: u16 = u16::MAX;
/// Extension bit (format 8): the payload is sealed (encryption at rest):
/// a 24-byte nonce follows the extension byte, and the payload is the
/// ciphertext followed by its 16-byte tag (see [`crate::format::crypto`]).
pub const EXT_ENCRYPTED: u8 = 0x02;
/// Extension bit (format 9): the record is a *batch*, `count` consecutive
/// messages compressed together as one block (`Appender::append_batch_together`,
/// Python `append_batch(..., compress_together=True)`). The record is the
/// flags byte [`FLAG_EXTENSION`], the first member's timestamp, the
/// extension byte `EXT_BATCH`, `count:u16` (at least 1), the sequence of
/// the first member `first_seq:u64`, `codec:u8`, `raw_len:u32` and the
/// compressed block; the block, decompressed, is `count` members, each
/// `len:u32 | record` (an ordinary record whose timestamp field is 0:
/// a member's timestamp is the batch's). See [`super::batch::batch_members`].
pub const EXT_BATCH: u8 = 0x08;
/// Extension bit (format 12), only with [`EXT_BATCH`]: a *row batch*,
/// whose block is `count` rows of the file's schema back to back (see
/// [`crate::format::typed`]) and whose codec may be 0 (stored as is).
pub const EXT_ROWS: u8 = 0x10;
/// The extension byte of a row batch.
pub const EXT_ROW_BATCH: u8 = EXT_BATCH | EXT_ROWS;
/// Length of a batch record before its block: flags, timestamp, extension
/// byte, count, first sequence, codec, raw length.
pub const BATCH_HEAD_LEN: usize = RECORD_FIXED_LEN + 1 + 2 + 8 + 1 + 4;
/// The most members one batch record holds.
pub const MAX_BATCH_COUNT: usize = u16::MAX as usize;
/// Extension bits this version understands.
pub const KNOWN_EXT: u8 = EXT_TOMBSTONE | EXT_ENCRYPTED | EXT_HOLE | EXT_BATCH | EXT_ROWS;
/// Extension bits format 8 introduced: such a record lands only in a file
/// of version 8 or later (see [`record_version`]).
pub const EXTS_SINCE_V8: u8 = EXT_ENCRYPTED | EXT_HOLE;
/// Extension bits format 9 introduced (batches): such a record lands only
/// in a file of version 9 or later.
pub const EXTS_SINCE_V9: u8 = EXT_BATCH;
/// Extension bits format 12 introduced (row batches).
pub const EXTS_SINCE_V12: u8 = EXT_ROWS;
/// Flags this version understands.
pub const KNOWN_FLAGS: u8 = FLAG_KEY
    | FLAG_HEADERS
    | FLAG_KEY_TEXT
    | FLAG_TOPIC
    | FLAG_EXPIRY
    | FLAG_PRIORITY
    | FLAG_COMPRESSED
    | FLAG_EXTENSION;
/// Flags whose fields format 6 introduced: a writer puts such a record only
/// in a file of version 6 or later (it rolls out of an older active file
/// first), so a reader of an older build never meets them in a file it
/// claims to read.
pub const FLAGS_SINCE_V6: u8 = FLAG_TOPIC | FLAG_EXPIRY | FLAG_PRIORITY;
/// Flags whose fields format 7 introduced (compression, the extension byte
/// and its tombstone bit): such a record lands only in a file of version 7
/// or later, by the same roll as [`FLAGS_SINCE_V6`].
pub const FLAGS_SINCE_V7: u8 = FLAG_COMPRESSED | FLAG_EXTENSION;

/// The oldest file version that may hold a record with these flags and
/// extension bits: a writer rolls out of an older active file first, so a
/// reader of an older build never meets fields it does not know.
pub fn record_version(flags: u8, ext: u8) -> u32 {
    if ext & EXTS_SINCE_V12 != 0 {
        12
    } else if ext & EXTS_SINCE_V9 != 0 {
        9
    } else if ext & EXTS_SINCE_V8 != 0 {
        8
    } else if flags & FLAGS_SINCE_V7 != 0 {
        7
    } else if flags & FLAGS_SINCE_V6 != 0 {
        6
    } else {
        3
    }
}

/// Flags byte and timestamp.
pub const RECORD_FIXED_LEN: usize = 9;
/// Longest key, in bytes.
pub const MAX_KEY_LEN: usize = u16::MAX as usize;
/// Most headers on one message.
pub const MAX_HEADERS: usize = u8::MAX as usize;
/// Longest header name, in bytes (UTF-8).
pub const MAX_HEADER_NAME_LEN: usize = u8::MAX as usize;
/// Longest header value, in bytes.
pub const MAX_HEADER_VALUE_LEN: usize = u16::MAX as usize;
/// Longest topic name, in bytes (UTF-8).
pub const MAX_TOPIC_LEN: usize = u8::MAX as usize;
/// Most tags on one message.
pub const MAX_TAGS: usize = u8::MAX as usize;
/// Longest tag, in bytes (UTF-8).
pub const MAX_TAG_LEN: usize = u8::MAX as usize;

const KIND_BYTES: u8 = 0;
const KIND_TEXT: u8 = 1;

/// One header on a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderField<'a> {
    /// Header name (UTF-8).
    pub name: &'a str,
    /// Header value.
    pub value: &'a [u8],
    /// The value was given as text and is returned as text.
    pub value_is_text: bool,
}

/// A message to append: payload plus optional key, headers, topic and tags,
/// expiry and priority.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record<'a> {
    /// The message body.
    pub payload: &'a [u8],
    /// Key the message can be looked up by (the key index), if any.
    pub key: Option<&'a [u8]>,
    /// The key was given as text and is returned as text.
    pub key_is_text: bool,
    /// Named headers, in order.
    pub headers: &'a [HeaderField<'a>],
    /// Topic the message belongs to, if any (1 to 255 bytes of UTF-8
    /// without control characters).
    pub topic: Option<&'a str>,
    /// Which ordered stream of the topic (RocketMQ's queue id); 0 unless
    /// the topic is sharded. Needs a topic when not 0.
    pub queue_id: u16,
    /// Tags, in order (each 1 to 255 bytes of UTF-8 without control characters).
    pub tags: &'a [&'a str],
    /// When the message expires, µs since the Unix epoch.
    pub expires_at: Option<u64>,
    /// Priority; higher is served first by work queues. 0 is not stored.
    pub priority: u8,
    /// Whether (and how) the appender compresses the payload.
    pub compress: Compress,
    /// The record deletes its key's value (a tombstone): it needs a key and
    /// an empty payload.
    pub tombstone: bool,
}

/// How an appender treats a record's payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compress {
    /// As the queue is configured (its `compression` option, if any).
    #[default]
    Queue,
    /// Stored as given.
    Never,
    /// Compressed with this codec and level when that saves at least 5 %
    /// and the payload is at least `min_size` bytes.
    With(Compression),
}

/// Checks a topic name or tag: 1 to 255 bytes, no control characters.
fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > u8::MAX as usize {
        return Err(format!(
            "{what} {name:?} must be 1 to 255 bytes of UTF-8, not {}",
            name.len()
        ));
    }
    // Printable ASCII (the usual name) needs no char decoding.
    let printable_ascii = name.bytes().all(|b| (0x20..0x7f).contains(&b));
    if !printable_ascii && name.chars().any(char::is_control) {
        return Err(format!(
            "{what} {name:?} must not contain control characters"
        ));
    }
    Ok(())
}

/// Checks a topic name the way [`Record::validate`] does.
pub fn validate_topic(topic: &str) -> Result<(), String> {
    check_name("topic", topic)
}

impl<'a> Record<'a> {
    /// A record with just a payload.
    pub fn new(payload: &'a [u8]) -> Self {
        Record {
            payload,
            ..Default::default()
        }
    }

    /// Checks the limits on key and headers; the message says which one broke.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(k) = self.key {
            if k.len() > MAX_KEY_LEN {
                return Err(format!(
                    "key is {} bytes; the limit is {MAX_KEY_LEN}",
                    k.len()
                ));
            }
        }
        if self.headers.len() > MAX_HEADERS {
            return Err(format!(
                "{} headers; the limit is {MAX_HEADERS}",
                self.headers.len()
            ));
        }
        for h in self.headers {
            if h.name.is_empty() || h.name.len() > MAX_HEADER_NAME_LEN {
                return Err(format!(
                    "header name {:?} must be 1 to {MAX_HEADER_NAME_LEN} bytes",
                    h.name
                ));
            }
            if h.value.len() > MAX_HEADER_VALUE_LEN {
                return Err(format!(
                    "header {:?} value is {} bytes; the limit is {MAX_HEADER_VALUE_LEN}",
                    h.name,
                    h.value.len()
                ));
            }
        }
        if let Some(t) = self.topic {
            validate_topic(t)?;
        } else if self.queue_id != 0 {
            return Err(format!(
                "queue_id {} needs a topic: a queue id names a stream of a topic",
                self.queue_id
            ));
        }
        if self.tags.len() > MAX_TAGS {
            return Err(format!("{} tags; the limit is {MAX_TAGS}", self.tags.len()));
        }
        for t in self.tags {
            check_name("tag", t)?;
        }
        if self.tombstone && (self.key.is_none() || !self.payload.is_empty()) {
            return Err("a tombstone needs a key and no payload".into());
        }
        if let Compress::With(c) = self.compress {
            c.validate()?;
        }
        Ok(())
    }

    /// The record carries a topic field (a topic or tags).
    fn has_topic_field(&self) -> bool {
        self.topic.is_some() || !self.tags.is_empty()
    }

    /// Bytes of the optional fields and payload (the record minus flags
    /// and timestamp).
    pub fn body_len(&self) -> usize {
        let key = self.key.map_or(0, |k| 2 + k.len());
        let headers = if self.headers.is_empty() {
            0
        } else {
            1 + self
                .headers
                .iter()
                .map(|h| 4 + h.name.len() + h.value.len())
                .sum::<usize>()
        };
        let topic = if self.has_topic_field() {
            1 + self.topic.map_or(0, str::len)
                + 2
                + 1
                + self.tags.iter().map(|t| 1 + t.len()).sum::<usize>()
        } else {
            0
        };
        let expiry = if self.expires_at.is_some() { 8 } else { 0 };
        let priority = usize::from(self.priority != 0);
        let ext = usize::from(self.tombstone);
        key + headers + topic + expiry + priority + ext + self.payload.len()
    }

    /// Flags byte announcing this record's optional fields.
    pub fn flags(&self) -> u8 {
        let mut f = 0;
        if self.key.is_some() {
            f |= FLAG_KEY;
            if self.key_is_text {
                f |= FLAG_KEY_TEXT;
            }
        }
        if !self.headers.is_empty() {
            f |= FLAG_HEADERS;
        }
        if self.has_topic_field() {
            f |= FLAG_TOPIC;
        }
        if self.expires_at.is_some() {
            f |= FLAG_EXPIRY;
        }
        if self.priority != 0 {
            f |= FLAG_PRIORITY;
        }
        if self.tombstone {
            f |= FLAG_EXTENSION;
        }
        f
    }

    /// The extension byte, 0 when the record has none.
    fn ext(&self) -> u8 {
        if self.tombstone {
            EXT_TOMBSTONE
        } else {
            0
        }
    }

    /// Encodes the body as [`Record::encode_body`] does, compressing the
    /// payload with `c` when that is worth it ([`compression::should_compress`]);
    /// returns the record's flags ([`Record::flags`], plus
    /// [`FLAG_COMPRESSED`] when the payload was compressed). Call
    /// [`Record::validate`] first. Appenders call this on the caller's
    /// thread, so compression never runs on the I/O thread.
    pub fn encode_body_with(&self, c: Option<&Compression>, out: &mut Vec<u8>) -> u8 {
        if let Some(c) = c {
            if self.payload.len() >= c.min_size && self.payload.len() <= u32::MAX as usize {
                let packed = compression::compress(c.codec, c.level, self.payload);
                let stored = packed.len() + COMPRESSION_FIELD_LEN;
                if compression::should_compress(self.payload.len(), stored, c.min_size) {
                    self.encode_compressed_body(c.codec, self.payload.len() as u32, &packed, out);
                    return self.flags() | FLAG_COMPRESSED;
                }
            }
        }
        self.encode_body(out);
        self.flags()
    }

    /// Appends the body of the compressed form: the fields, the compression
    /// field (`codec`, `raw_len`), the extension byte, then `packed` (the
    /// payload already compressed) instead of `self.payload`. Its flags are
    /// [`Record::flags`] plus [`FLAG_COMPRESSED`].
    pub fn encode_compressed_body(
        &self,
        codec: Codec,
        raw_len: u32,
        packed: &[u8],
        out: &mut Vec<u8>,
    ) {
        self.encode_base_fields(out);
        out.push(codec as u8);
        out.extend_from_slice(&raw_len.to_le_bytes());
        if self.tombstone {
            out.push(self.ext());
        }
        out.extend_from_slice(packed);
    }

    /// Appends the record's body: the optional fields, then the payload
    /// (what [`encode_into`] puts after flags and timestamp). Call
    /// [`Record::validate`] first. Appenders encode the body on the caller's
    /// thread; the I/O thread adds flags and timestamp when it writes.
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        self.encode_fields(out);
        out.extend_from_slice(self.payload);
    }

    /// Appends the optional fields (what lies between timestamp and payload)
    /// of the uncompressed form. Call [`Record::validate`] first.
    pub fn encode_fields(&self, out: &mut Vec<u8>) {
        self.encode_base_fields(out);
        if self.tombstone {
            out.push(self.ext());
        }
    }

    /// The fields before the compression field: key to priority.
    fn encode_base_fields(&self, out: &mut Vec<u8>) {
        if let Some(k) = self.key {
            out.extend_from_slice(&(k.len() as u16).to_le_bytes());
            out.extend_from_slice(k);
        }
        if !self.headers.is_empty() {
            out.push(self.headers.len() as u8);
            for h in self.headers {
                out.push(h.name.len() as u8);
                out.extend_from_slice(h.name.as_bytes());
                out.push(if h.value_is_text {
                    KIND_TEXT
                } else {
                    KIND_BYTES
                });
                out.extend_from_slice(&(h.value.len() as u16).to_le_bytes());
                out.extend_from_slice(h.value);
            }
        }
        if self.has_topic_field() {
            let topic = self.topic.unwrap_or("");
            out.push(topic.len() as u8);
            out.extend_from_slice(topic.as_bytes());
            out.extend_from_slice(&self.queue_id.to_le_bytes());
            out.push(self.tags.len() as u8);
            for t in self.tags {
                out.push(t.len() as u8);
                out.extend_from_slice(t.as_bytes());
            }
        }
        if let Some(at) = self.expires_at {
            out.extend_from_slice(&at.to_le_bytes());
        }
        if self.priority != 0 {
            out.push(self.priority);
        }
    }
}

/// A decoded record borrowing the bytes it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Flag bits (`FLAG_*`).
    pub flags: u8,
    /// µs since the Unix epoch (UTC), assigned by the writer.
    pub timestamp: u64,
    /// The key, if the record has one.
    pub key: Option<&'a [u8]>,
    headers: &'a [u8],
    /// The topic, if the record has one.
    pub topic: Option<&'a str>,
    /// The topic's stream (0 unless sharded).
    pub queue_id: u16,
    /// The tag block: count byte, then `len:u8 | tag` each (empty: no tags).
    tags: &'a [u8],
    /// When the message expires, µs since the Unix epoch, if it does.
    pub expires_at: Option<u64>,
    /// Priority (0 when the record has none).
    pub priority: u8,
    /// The codec the payload is compressed with, if it is.
    pub codec: Option<Codec>,
    /// The payload's decompressed size when it is compressed (else 0).
    pub raw_len: u32,
    /// The extension byte (0 when the record has none).
    pub ext: u8,
    /// Offset of the payload inside the record.
    pub payload_at: usize,
    /// The payload as stored: compressed when `codec` is set (see
    /// [`RecordView::inflate`]), sealed (ciphertext and tag) when
    /// encrypted (see [`RecordView::open_payload`]).
    pub payload: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// A record of a hole or a batch: flags, timestamp and extension byte,
    /// none of the other fields, and `payload` (at `payload_at`).
    /// The view of a row of a row batch (format 12): no flags or fields,
    /// the batch's timestamp, the row as its payload.
    pub fn row(timestamp: u64, row: &'a [u8]) -> RecordView<'a> {
        RecordView::head_only(0, timestamp, 0, 0, row)
    }

    fn head_only(
        flags: u8,
        timestamp: u64,
        ext: u8,
        payload_at: usize,
        payload: &'a [u8],
    ) -> RecordView<'a> {
        RecordView {
            flags,
            timestamp,
            key: None,
            headers: &[],
            topic: None,
            queue_id: 0,
            tags: &[],
            expires_at: None,
            priority: 0,
            codec: None,
            raw_len: 0,
            ext,
            payload_at,
            payload,
        }
    }

    /// The key was stored as text.
    pub fn key_is_text(&self) -> bool {
        self.flags & FLAG_KEY_TEXT != 0
    }
    /// An empty header iterator.
    pub fn no_headers() -> HeaderIter<'a> {
        HeaderIter { rest: &[], left: 0 }
    }
    /// The headers, in the order they were given.
    pub fn headers(&self) -> HeaderIter<'a> {
        HeaderIter {
            rest: self.headers.get(1..).unwrap_or(&[]),
            left: self.headers.first().copied().unwrap_or(0),
        }
    }
    /// The tags, in the order they were given.
    pub fn tags(&self) -> TagIter<'a> {
        TagIter {
            rest: self.tags.get(1..).unwrap_or(&[]),
            left: self.tags.first().copied().unwrap_or(0),
        }
    }
    /// True when the message expired at `now_us` (µs since the Unix epoch).
    pub fn expired_at(&self, now_us: u64) -> bool {
        self.expires_at.is_some_and(|at| at <= now_us)
    }
    /// The record is a tombstone (its key's value is deleted).
    pub fn is_tombstone(&self) -> bool {
        self.ext & EXT_TOMBSTONE != 0
    }
    /// The record is a hole: its message was dropped by key compaction
    /// ([`EXT_HOLE`]). Readers skip it.
    pub fn is_hole(&self) -> bool {
        self.ext & EXT_HOLE != 0
    }
    /// The record is a batch of messages compressed together (format 9,
    /// [`EXT_BATCH`]); readers deliver its members (see [`super::batch::batch_members`]).
    pub fn is_batch(&self) -> bool {
        self.ext & EXT_BATCH != 0
    }

    /// True for a row batch (format 12, [`EXT_ROW_BATCH`]): its block is
    /// rows of the file's schema, not `len | record` members.
    pub fn is_row_batch(&self) -> bool {
        self.ext == EXT_ROW_BATCH
    }
    /// The payload is sealed (encryption at rest, format 8).
    pub fn is_encrypted(&self) -> bool {
        self.ext & EXT_ENCRYPTED != 0
    }
    /// The payload as the appender gave it, from `record` (the bytes this
    /// view was decoded from) of message `seq`: opened with `key` when it
    /// is sealed, then decompressed (at most `limit` bytes) when it is
    /// compressed; borrowed when stored as is. The error says what failed:
    /// no key for a sealed payload, failed authentication, a bad stream.
    pub fn open_payload(
        &self,
        record: &'a [u8],
        seq: u64,
        key: Option<&QueueKey>,
        limit: usize,
    ) -> Result<Cow<'a, [u8]>, String> {
        if !self.is_encrypted() {
            return self.inflate(limit);
        }
        let key = key.ok_or("the payload is encrypted and no encryption key was given")?;
        let nonce_at = self.payload_at - NONCE_LEN;
        let plain = key.open(
            seq,
            &record[..nonce_at],
            &record[nonce_at..self.payload_at],
            self.payload,
        )?;
        match self.codec {
            None => Ok(Cow::Owned(plain)),
            Some(c) => {
                compression::decompress(c, &plain, self.raw_len as usize, limit).map(Cow::Owned)
            }
        }
    }
    /// The payload as the appender gave it: borrowed when stored as is,
    /// decompressed (at most `limit` bytes) when compressed. The error says
    /// what is wrong with a payload that does not decompress to `raw_len`.
    pub fn inflate(&self, limit: usize) -> Result<Cow<'a, [u8]>, String> {
        match self.codec {
            None => Ok(Cow::Borrowed(self.payload)),
            Some(c) => compression::decompress(c, self.payload, self.raw_len as usize, limit)
                .map(Cow::Owned),
        }
    }
}

/// Iterates a record's tags. The block was validated when the record was
/// decoded, so iteration cannot fail.
#[derive(Debug, Clone)]
pub struct TagIter<'a> {
    rest: &'a [u8],
    left: u8,
}

impl<'a> Iterator for TagIter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.left == 0 {
            return None;
        }
        let (tag, used) = parse_name(self.rest)?;
        self.rest = &self.rest[used..];
        self.left -= 1;
        Some(tag)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for TagIter<'_> {}

/// Parses `len:u8 | UTF-8 bytes`; `None` when malformed.
fn parse_name(b: &[u8]) -> Option<(&str, usize)> {
    let len = *b.first()? as usize;
    let name = std::str::from_utf8(b.get(1..1 + len)?).ok()?;
    Some((name, 1 + len))
}

/// Iterates a record's headers. The block was validated when the record was
/// decoded, so iteration cannot fail.
#[derive(Debug, Clone)]
pub struct HeaderIter<'a> {
    rest: &'a [u8],
    left: u8,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = HeaderField<'a>;

    fn next(&mut self) -> Option<HeaderField<'a>> {
        if self.left == 0 {
            return None;
        }
        let (field, used) = parse_header(self.rest)?;
        self.rest = &self.rest[used..];
        self.left -= 1;
        Some(field)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for HeaderIter<'_> {}

/// Parses one header; `None` when the bytes are malformed.
fn parse_header(b: &[u8]) -> Option<(HeaderField<'_>, usize)> {
    let name_len = *b.first()? as usize;
    let name = std::str::from_utf8(b.get(1..1 + name_len)?).ok()?;
    let kind = *b.get(1 + name_len)?;
    if kind > KIND_TEXT || name.is_empty() {
        return None;
    }
    let value_len = le_u16(b, 2 + name_len)? as usize;
    let start = 4 + name_len;
    let value = b.get(start..start + value_len)?;
    if kind == KIND_TEXT && std::str::from_utf8(value).is_err() {
        return None;
    }
    Some((
        HeaderField {
            name,
            value,
            value_is_text: kind == KIND_TEXT,
        },
        start + value_len,
    ))
}

/// The key at the start of a record body (the record after flags and
/// timestamp) whose flags say it has one.
pub fn key_of_body(body: &[u8]) -> Option<&[u8]> {
    let len = le_u16(body, 0)? as usize;
    body.get(2..2 + len)
}

/// Appends a record: `flags`, `timestamp` (µs since the Unix epoch) and the
/// `body` (see [`Record::encode_body`]). The inverse is [`decode`].
pub fn encode_into(out: &mut Vec<u8>, flags: u8, timestamp: u64, body: &[u8]) {
    out.push(flags);
    out.extend_from_slice(&timestamp.to_le_bytes());
    out.extend_from_slice(body);
}

/// Decodes a record; the error says what is malformed.
#[inline]
pub fn decode(record: &[u8]) -> Result<RecordView<'_>, &'static str> {
    decode_as::<true>(record)
}

/// The timestamp and payload of a bare record, one with no flag set (no
/// key, headers, topic field, expiry, priority, compression or extension
/// byte), as [`decode`] gives them, read without building a view: the bulk
/// columnar read takes such records at this cost. `None` for any other
/// record, and for one shorter than its fixed fields.
#[inline]
pub fn decode_bare(record: &[u8]) -> Option<(u64, &[u8])> {
    if *record.first()? != 0 {
        return None;
    }
    let timestamp = le_u64(record, 1)?;
    Some((timestamp, &record[RECORD_FIXED_LEN..]))
}

/// Decodes a record that [`decode`] accepted already (the same bytes, in
/// the same reader): the same view, without checking again what only
/// names and text need (UTF-8 of a text key, header names and text values,
/// tags; control characters in topic and tags). The layout is still
/// checked, so other bytes give an error or a view that iterates short,
/// never a panic. Readers that decode a record to filter it and again to
/// deliver it pay for the checks once.
#[inline]
pub fn decode_again(record: &[u8]) -> Result<RecordView<'_>, &'static str> {
    decode_as::<false>(record)
}

/// Length of one header (`name_len:u8 | name | kind:u8 | value_len:u16 |
/// value`) at the start of `b`, read from its lengths alone.
fn header_len(b: &[u8]) -> Option<usize> {
    let name_len = *b.first()? as usize;
    let value_len = le_u16(b, 2 + name_len)? as usize;
    let used = 4 + name_len + value_len;
    (used <= b.len()).then_some(used)
}

/// Length of `len:u8 | bytes` at the start of `b`, read from its length.
fn name_len(b: &[u8]) -> Option<usize> {
    let used = 1 + *b.first()? as usize;
    (used <= b.len()).then_some(used)
}

/// [`decode`], with the checks of names and text when `CHECK`.
#[inline(always)]
fn decode_as<const CHECK: bool>(record: &[u8]) -> Result<RecordView<'_>, &'static str> {
    let flags = *record
        .first()
        .ok_or("record shorter than its fixed fields")?;
    // Every flag bit is known since format 7 (KNOWN_FLAGS is 0xFF): what a
    // later version adds is announced by extension bits, checked below.
    const _: () = assert!(KNOWN_FLAGS == u8::MAX);
    if flags & FLAG_KEY_TEXT != 0 && flags & FLAG_KEY == 0 {
        return Err("text-key flag without a key");
    }
    let timestamp = le_u64(record, 1).ok_or("record shorter than its fixed fields")?;
    let mut at = RECORD_FIXED_LEN;
    let mut key = None;
    if flags & FLAG_KEY != 0 {
        let len = le_u16(record, at).ok_or("key length past the end")? as usize;
        let k = record.get(at + 2..at + 2 + len).ok_or("key past the end")?;
        if CHECK && flags & FLAG_KEY_TEXT != 0 && std::str::from_utf8(k).is_err() {
            return Err("text key is not UTF-8");
        }
        key = Some(k);
        at += 2 + len;
    }
    let mut headers: &[u8] = &[];
    if flags & FLAG_HEADERS != 0 {
        let count = *record.get(at).ok_or("header count past the end")?;
        let mut end = at + 1;
        for _ in 0..count {
            let rest = record.get(end..).ok_or("headers past the end")?;
            let used = if CHECK {
                parse_header(rest).map(|(_, used)| used)
            } else {
                header_len(rest)
            };
            let used = used.ok_or("malformed header")?;
            end += used;
        }
        headers = &record[at..end];
        at = end;
    }
    let mut topic = None;
    let mut queue_id = 0;
    let mut tags: &[u8] = &[];
    if flags & FLAG_TOPIC != 0 {
        let (name, used) = parse_name(record.get(at..).unwrap_or(&[])).ok_or("malformed topic")?;
        topic = (!name.is_empty()).then_some(name);
        if CHECK && topic.is_some_and(|t| validate_topic(t).is_err()) {
            return Err("topic with control characters");
        }
        at += used;
        queue_id = le_u16(record, at).ok_or("topic queue id past the end")?;
        if queue_id != 0 && topic.is_none() {
            return Err("queue id without a topic");
        }
        at += 2;
        let count = *record.get(at).ok_or("tag count past the end")?;
        if count == 0 && topic.is_none() {
            return Err("topic field with neither topic nor tags");
        }
        let mut end = at + 1;
        for _ in 0..count {
            let rest = record.get(end..).ok_or("tags past the end")?;
            if !CHECK {
                end += name_len(rest).ok_or("malformed tag")?;
                continue;
            }
            let (tag, used) = parse_name(rest).ok_or("malformed tag")?;
            if check_name("tag", tag).is_err() {
                return Err("empty tag, or one with control characters");
            }
            end += used;
        }
        tags = &record[at..end];
        at = end;
    }
    let mut expires_at = None;
    if flags & FLAG_EXPIRY != 0 {
        expires_at = Some(le_u64(record, at).ok_or("expiry past the end")?);
        at += 8;
    }
    let mut priority = 0;
    if flags & FLAG_PRIORITY != 0 {
        priority = *record.get(at).ok_or("priority past the end")?;
        if priority == 0 {
            return Err("priority flag with priority 0");
        }
        at += 1;
    }
    let mut codec = None;
    let mut raw_len = 0;
    if flags & FLAG_COMPRESSED != 0 {
        let b = *record.get(at).ok_or("compression field past the end")?;
        codec = Some(Codec::try_from(b)?);
        raw_len = le_u32(record, at + 1).ok_or("compression field past the end")?;
        at += COMPRESSION_FIELD_LEN;
    }
    let mut ext = 0;
    if flags & FLAG_EXTENSION != 0 {
        ext = *record.get(at).ok_or("extension byte past the end")?;
        if ext == 0 {
            return Err("extension flag with an empty extension byte");
        }
        if ext & !KNOWN_EXT != 0 {
            return Err("record uses extension bits this version does not support");
        }
        at += 1;
    }
    if ext & EXT_ENCRYPTED != 0 {
        if ext & EXT_TOMBSTONE != 0 {
            return Err("an encrypted tombstone");
        }
        at += NONCE_LEN;
        if record.len() < at + TAG_LEN {
            return Err("encrypted payload shorter than its nonce and tag");
        }
    }
    if ext & EXT_TOMBSTONE != 0 && (flags & FLAG_KEY == 0 || at != record.len()) {
        return Err("tombstone without a key, or with a payload");
    }
    if ext & EXT_ROWS != 0 && ext != EXT_ROW_BATCH {
        return Err("rows bit without the batch bit, or with other extension bits");
    }
    if ext & EXT_BATCH != 0 {
        if flags != FLAG_EXTENSION || (ext != EXT_BATCH && ext != EXT_ROW_BATCH) {
            return Err("batch with fields or other extension bits");
        }
        if le_u16(record, at).is_none_or(|n| n == 0) {
            return Err("batch without a count of at least 1");
        }
        le_u64(record, at + 2).ok_or("batch first sequence past the end")?;
        let c = *record.get(at + 10).ok_or("batch codec past the end")?;
        // A row batch may be stored as is (codec 0); a batch of records
        // is always compressed.
        let codec = match c {
            0 if ext == EXT_ROW_BATCH => None,
            c => Some(Codec::try_from(c)?),
        };
        let raw_len = le_u32(record, at + 11).ok_or("batch raw length past the end")?;
        let at = at + 15;
        if codec.is_none() && raw_len as usize != record.len() - at {
            return Err("stored row batch whose raw length is not its block's");
        }
        return Ok(RecordView {
            codec,
            raw_len,
            ..RecordView::head_only(flags, timestamp, ext, at, &record[at..])
        });
    }
    if ext & EXT_HOLE != 0 {
        if flags != FLAG_EXTENSION || ext != EXT_HOLE {
            return Err("hole with fields or other extension bits");
        }
        if le_u16(record, at).is_none_or(|n| n == 0) {
            return Err("hole without a count of at least 1");
        }
        let at = at + 2;
        // What follows is filler (zeros up to the end of the dropped
        // frames): a hole has no payload.
        return Ok(RecordView::head_only(
            flags,
            timestamp,
            ext,
            at,
            &record[at..at],
        ));
    }
    Ok(RecordView {
        flags,
        timestamp,
        key,
        headers,
        topic,
        queue_id,
        tags,
        expires_at,
        priority,
        codec,
        raw_len,
        ext,
        payload_at: at,
        payload: &record[at..],
    })
}
