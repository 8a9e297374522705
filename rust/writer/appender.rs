//! The appender: the handle callers append through.

use std::ops::Range;
use std::sync::Arc;

use super::command::{Bundle, BundleSlot};
use super::handoff::{Handoff, Numbered, SendError};
use super::options::FlushMode;
use super::shared::WriterShared;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::compression::{self, Compression};
use crate::format::frame::{self, frame_size};
use crate::format::header::TypedFile;
use crate::format::record::{self, Compress, Record, BATCH_HEAD_LEN, RECORD_FIXED_LEN};
use crate::index::fields::SharedDefs;
use crate::notify::Notify;
use crate::storage::mapped::fork_generation;

#[derive(Debug)]
pub(crate) struct AppenderInner {
    handoff: Arc<Handoff>,
    shared: Arc<WriterShared>,
    flush: FlushMode,
    max_record_len: usize,
    fork_gen: u64,
    /// The queue's `compression` option: how payloads of records that do
    /// not say otherwise ([`Compress::Queue`]) are compressed.
    compression: Option<Compression>,
    /// Payloads longer than this are never compressed: this handle's
    /// readers would refuse to decompress them (`max_decompressed_size`).
    max_inflate: usize,
    /// What batches compressed together need (see
    /// [`Appender::append_batch_together`]).
    batching: Batching,
}

/// What [`Appender::append_batch`] and
/// [`Appender::append_batch_together`] need to know about the queue.
#[derive(Debug, Clone, Default)]
pub(crate) struct Batching {
    /// The queue's clock when [`Appender::append_batch`] builds the frames
    /// itself (`None`: an encrypted queue, whose I/O thread seals each).
    pub frame_clock: Option<Arc<dyn Clock>>,
    /// Why the queue takes no batches (encryption), if it does not.
    pub refusal: Option<String>,
    /// The queue's declared field indexes: batches are refused while one
    /// on a header is declared (its builder does not look inside batches;
    /// a schema field's reads the rows in them).
    pub fields: SharedDefs,
    /// Most members per batch: what a file's indexes hold, at most 65,535.
    pub max_members: usize,
    /// A typed queue's current schema version (format 12): every event
    /// appended is a row of it.
    pub typed: Option<Arc<TypedFile>>,
}

/// A row batch's block (its rows, uncompressed) is cut at this many bytes.
pub const ROW_BATCH_BLOCK_BYTES: usize = 1 << 20;

/// Where each of `count` rows of `block` starts (and, last, where the
/// block ends), each row checked against `typed`'s layout: the error names
/// the first bad row and why.
fn split_rows(typed: &TypedFile, block: &[u8], count: usize, check: bool) -> Result<Vec<usize>> {
    let bad = |i: usize, why: &str| {
        Error::Schema(format!(
            "row {i} of append_rows is not a row of schema version {}: {why}",
            typed.schema.version
        ))
    };
    let mut starts = Vec::with_capacity(count + 1);
    let mut at = 0usize;
    for i in 0..count {
        starts.push(at);
        let len = typed
            .layout
            .row_len(&block[at..])
            .map_err(|why| bad(i, why))?;
        if check {
            typed
                .layout
                .check_row(&block[at..at + len])
                .map_err(|why| bad(i, why))?;
        }
        at += len;
    }
    if at != block.len() {
        return Err(Error::Schema(format!(
            "append_rows: the block holds {} bytes after its {count} rows",
            block.len() - at
        )));
    }
    starts.push(at);
    Ok(starts)
}

/// A batch's block (its members, uncompressed) is cut at this many bytes:
/// a `get` of one member decompresses at most about this much.
pub const BATCH_BLOCK_BYTES: usize = 64 * 1024;

/// Appends messages to a queue. Cheap to clone; share it between threads.
/// Sequences are 0-based, dense, and assigned when `append` is called.
///
/// An append that fails with [`Error::Poisoned`] was not stored. One that
/// waited for its frame (`FlushMode::Sync`, or several writer processes
/// when this one did not hold the append lock) and fails with
/// [`Error::MaybeStored`] may be in the queue: the writer failed after
/// writing it, so read before retrying.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let queue = litemq::QueueBuilder::new(dir.path()).open()?;
/// let appender = queue.appender()?;
/// let first = appender.append(b"hello")?;
/// let rest = appender.append_batch([&b"a"[..], b"b"])?;
/// assert_eq!(rest.start, first + 1);
/// appender.flush()?; // durable once this returns
/// # Ok::<(), litemq::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Appender {
    inner: Arc<AppenderInner>,
}

impl Appender {
    pub(crate) fn new(
        handoff: Arc<Handoff>,
        shared: Arc<WriterShared>,
        flush: FlushMode,
        max_record_len: usize,
        compression: Option<Compression>,
        max_inflate: usize,
        batching: Batching,
    ) -> Appender {
        Appender {
            inner: Arc::new(AppenderInner {
                handoff,
                shared,
                flush,
                max_record_len,
                fork_gen: fork_generation(),
                compression,
                max_inflate,
                batching,
            }),
        }
    }

    /// The queue's compression option, which payloads are compressed with
    /// unless a record says otherwise.
    pub fn compression(&self) -> Option<Compression> {
        self.inner.compression
    }

    /// How `record`'s payload is compressed, if it may be.
    fn compression_for(&self, record: &Record<'_>) -> Option<Compression> {
        if record.payload.len() > self.inner.max_inflate {
            return None; // stored as given: a reader could not decompress it
        }
        match record.compress {
            Compress::Queue => self.inner.compression,
            Compress::Never => None,
            Compress::With(c) => Some(c),
        }
    }

    /// On a typed queue, checks that `payload` is one row of its current
    /// schema version (`tombstone`: empty, deleting its key's value).
    fn check_event(&self, payload: &[u8], tombstone: bool) -> Result<()> {
        let Some(t) = &self.inner.batching.typed else {
            return Ok(());
        };
        if tombstone {
            return Ok(());
        }
        t.layout.check_row(payload).map_err(|why| {
            Error::Schema(format!(
                "the payload is not a row of schema version {}: {why}",
                t.schema.version
            ))
        })
    }

    /// Appends one message with just a payload; returns its sequence. It is
    /// compressed as the queue's `compression` option says. On a typed
    /// queue the payload is one row of its current schema version
    /// ([`Error::Schema`] otherwise).
    pub fn append(&self, payload: &[u8]) -> Result<u64> {
        self.check_event(payload, false)?;
        if self.inner.compression.is_some() {
            return self.append_record(&Record::new(payload));
        }
        self.check_size(payload.len())?;
        self.push(0, |out| out.extend_from_slice(payload))
    }

    /// Appends one message with key and headers; returns its sequence.
    pub fn append_record(&self, record: &Record<'_>) -> Result<u64> {
        record.validate().map_err(Error::InvalidArgument)?;
        self.check_event(record.payload, record.tombstone)?;
        if let Some(c) = self.compression_for(record) {
            // Compressed here, on the caller's thread, before the handoff
            // (whose lock the encode closure runs under).
            let mut body = Vec::new();
            let flags = record.encode_body_with(Some(&c), &mut body);
            self.check_size(body.len())?;
            return self.push(flags, |out| out.extend_from_slice(&body));
        }
        self.check_size(record.body_len())?;
        self.push(record.flags(), |out| record.encode_body(out))
    }

    /// Appends payloads in one command; returns their sequences.
    pub fn append_batch<'a, I>(&self, payloads: I) -> Result<Range<u64>>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let payloads = payloads.into_iter();
        if self.inner.compression.is_some() {
            let records: Vec<Record<'_>> = payloads.map(Record::new).collect();
            return self.append_records(&records);
        }
        let mut bundle = self.inner.handoff.spare_bundle();
        bundle.entries.reserve(payloads.size_hint().0);
        let Some(clock) = &self.inner.batching.frame_clock else {
            for p in payloads {
                self.check_size(p.len())?;
                self.check_event(p, false)?;
                bundle.bodies.extend_from_slice(p);
                bundle.entries.push((0, p.len() as u32));
            }
            return self.send_bundle(bundle);
        };
        // The frames, CRCs included, are built here, on the caller's
        // thread, while the I/O thread writes the previous bundle; it only
        // copies them into the file (PERFORMANCE.md, "Frames written with
        // pwrite").
        let ts = clock.now_micros();
        for p in payloads {
            self.check_size(p.len())?;
            self.check_event(p, false)?;
            frame::encode_record_into(&mut bundle.bodies, 0, ts, p);
            bundle.entries.push((0, p.len() as u32));
        }
        bundle.built = Some(ts);
        self.send_bundle(bundle)
    }

    /// Appends records (with keys or headers) in one command.
    pub fn append_records(&self, records: &[Record<'_>]) -> Result<Range<u64>> {
        let mut bundle = self.inner.handoff.spare_bundle();
        bundle.entries.reserve(records.len());
        for r in records {
            r.validate().map_err(Error::InvalidArgument)?;
            self.check_event(r.payload, r.tombstone)?;
            let start = bundle.bodies.len();
            let flags = match self.compression_for(r) {
                Some(c) => r.encode_body_with(Some(&c), &mut bundle.bodies),
                None => {
                    self.check_size(r.body_len())?;
                    r.encode_body(&mut bundle.bodies);
                    r.flags()
                }
            };
            self.check_size(bundle.bodies.len() - start)?;
            bundle
                .entries
                .push((flags, (bundle.bodies.len() - start) as u32));
        }
        self.send_bundle(bundle)
    }

    /// Appends records in one command, compressing runs of them together
    /// (format 9 batches, Kafka's record batches): members are grouped
    /// into blocks of up to [`BATCH_BLOCK_BYTES`] (and at most 65,535
    /// members, or what a data file's indexes hold), each block compressed
    /// as one with `compression` (the queue's `compression` option when
    /// `None`) on this thread, and written as one frame. A block whose
    /// frame would not save at least 5 % over the members' plain frames is
    /// written as plain frames. Every member keeps its own sequence;
    /// readers deliver members one by one (a `get` decompresses its block).
    ///
    /// Members may have a key and be tombstones: the key index gets an
    /// entry per keyed member, at the batch frame's position, and
    /// [`Queue::find`](crate::Queue::find) and
    /// [`Queue::get_latest`](crate::Queue::get_latest) look inside the batch.
    ///
    /// Refused ([`Error::InvalidArgument`]), with nothing appended: members
    /// with a topic or tags (the topic index), an expiry, a per-record
    /// `compress` other than the queue default; an encrypted queue or one
    /// with field indexes declared; no codec at all.
    pub fn append_batch_together(
        &self,
        records: &[Record<'_>],
        compression: Option<Compression>,
    ) -> Result<Range<u64>> {
        let b = &self.inner.batching;
        if b.typed.is_some() {
            return Err(Error::Schema(
                "a typed queue takes rows compressed together through append_rows, \
                 not compress_together batches of records"
                    .into(),
            ));
        }
        if let Some(why) = &b.refusal {
            return Err(Error::InvalidArgument(format!(
                "compress_together is not available on {why}"
            )));
        }
        // Held until the batch is sent: `Queue::add_index` declares under
        // the write lock, then flushes and looks for batches in the files.
        let fields = b.fields.read().unwrap_or_else(|e| e.into_inner());
        if fields.iter().any(|d| !d.schema_field) {
            return Err(Error::InvalidArgument(
                "compress_together is not available while header field indexes are declared: \
                 their builders do not look inside batches"
                    .into(),
            ));
        }
        let c = compression.or(self.inner.compression).ok_or_else(|| {
            Error::InvalidArgument(
                "compress_together needs a codec: give the queue a compression option".into(),
            )
        })?;
        c.validate().map_err(Error::InvalidArgument)?;
        for (i, r) in records.iter().enumerate() {
            r.validate().map_err(Error::InvalidArgument)?;
            let why = if r.topic.is_some() || !r.tags.is_empty() {
                Some("a topic or tags (the topic index points at frames)")
            } else if r.expires_at.is_some() {
                Some("an expiry (readers skip expired messages by their frame)")
            } else if r.compress != Compress::Queue {
                Some("a compress option of its own (the batch is compressed as one)")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(Error::InvalidArgument(format!(
                    "message {i} of a compress_together batch has {why}"
                )));
            }
            self.check_size(r.body_len())?;
        }
        let mut bundle = self.inner.handoff.spare_bundle();
        let mut block = Vec::with_capacity(BATCH_BLOCK_BYTES.min(records.len() * 64) + 64);
        let mut from = 0;
        for (i, r) in records.iter().enumerate() {
            let member = 4 + RECORD_FIXED_LEN + r.body_len();
            if i > from && (block.len() + member > BATCH_BLOCK_BYTES || i - from >= b.max_members) {
                self.push_block(&mut bundle, &records[from..i], &block, &c);
                block.clear();
                from = i;
            }
            record::push_batch_member(&mut block, r.flags(), r.body_len(), |out| {
                r.encode_body(out)
            });
        }
        if from < records.len() {
            self.push_block(&mut bundle, &records[from..], &block, &c);
        }
        let sent = self.send_bundle(bundle);
        drop(fields);
        sent
    }

    /// Appends `count` rows of a typed queue's current schema version,
    /// `block` holding them back to back (FORMAT.md "Typed records"), as
    /// row batches (format 12): each of at most 65,535 rows (and what a
    /// data file's indexes hold) and at most [`ROW_BATCH_BLOCK_BYTES`] of
    /// block (a longer row is a batch of its own), stored as is, or
    /// compressed with `compress` (codec, level) when that saves at least
    /// 5 %. Every row gets its own sequence, the batch's timestamp, no key
    /// or headers; returns the sequences.
    ///
    /// [`Error::Schema`], with nothing stored, when the queue has no schema
    /// or when a row does not check against the schema (naming the row's
    /// index and why), or the block holds more or fewer than `count` rows;
    /// [`Error::InvalidArgument`] on an encrypted queue (row batches are not
    /// sealed: append events one by one there) and while header field
    /// indexes are declared (as for [`Appender::append_batch_together`]).
    pub fn append_rows(
        &self,
        block: &[u8],
        count: usize,
        compress: Option<(compression::Codec, i32)>,
    ) -> Result<Range<u64>> {
        self.append_rows_checked(block, count, compress, None)
    }

    /// [`Appender::append_rows`] for a block that [`encode_row`] or
    /// [`encode_columns`] just wrote for schema version `version`: those
    /// check every value as they write it, so only the rows' lengths are
    /// walked here, not every field again (the re-check was the largest
    /// cost of a 1,000-row `append_batch` after the encoder). A `version`
    /// that is not the writer's current one is [`Error::Schema`].
    ///
    /// [`encode_row`]: crate::format::typed::encode_row
    /// [`encode_columns`]: crate::format::typed::arrow_in::encode_columns
    pub fn append_encoded_rows(
        &self,
        block: &[u8],
        count: usize,
        compress: Option<(compression::Codec, i32)>,
        version: u32,
    ) -> Result<Range<u64>> {
        self.append_rows_checked(block, count, compress, Some(version))
    }

    /// [`Appender::append_rows`], checking every row unless `encoded_for`
    /// names the schema version the rows were encoded for.
    fn append_rows_checked(
        &self,
        block: &[u8],
        count: usize,
        compress: Option<(compression::Codec, i32)>,
        encoded_for: Option<u32>,
    ) -> Result<Range<u64>> {
        let b = &self.inner.batching;
        let typed = b.typed.as_ref().ok_or_else(|| {
            Error::Schema("the queue has no schema: append_rows needs a typed queue".into())
        })?;
        if let Some(v) = encoded_for.filter(|&v| v != typed.schema.version) {
            return Err(Error::Schema(format!(
                "rows encoded for schema version {v}, the writer's is version {}: reopen the queue",
                typed.schema.version
            )));
        }
        if let Some(why) = &b.refusal {
            return Err(Error::InvalidArgument(format!(
                "append_rows is not available on {why}: append the events one by one"
            )));
        }
        // Held until the rows are sent, as for `append_batch_together`.
        let fields = b.fields.read().unwrap_or_else(|e| e.into_inner());
        if fields.iter().any(|d| !d.schema_field) {
            return Err(Error::InvalidArgument(
                "append_rows is not available while header field indexes are declared: \
                 their builders do not look inside batches"
                    .into(),
            ));
        }
        let starts = split_rows(typed, block, count, encoded_for.is_none())?;
        let c = compress.map(|(codec, level)| Compression {
            codec,
            level,
            min_size: 0,
        });
        if let Some(c) = &c {
            c.validate().map_err(Error::InvalidArgument)?;
        }
        let max_rows = b.max_members.clamp(1, record::MAX_BATCH_COUNT);
        // A batch's frame fits a data file (a small `file_size` holds less
        // than the 1 MiB a block may be): the block, stored, is cut so.
        let max_block = ROW_BATCH_BLOCK_BYTES.min(
            self.max_message_len()
                .saturating_sub(BATCH_HEAD_LEN - RECORD_FIXED_LEN),
        );
        let mut bundle = self.inner.handoff.spare_bundle();
        let mut from = 0;
        while from < count {
            let mut to = from + 1;
            while to < count && to - from < max_rows && starts[to + 1] - starts[from] <= max_block {
                to += 1;
            }
            self.push_row_batch(&mut bundle, &block[starts[from]..starts[to]], to - from, c)?;
            from = to;
        }
        let sent = self.send_bundle(bundle);
        drop(fields);
        sent
    }

    /// Adds one row batch of `rows` rows (`block`) to `bundle`: compressed
    /// with `c` when that saves at least 5 % of its frame and readers may
    /// decompress it, else stored.
    fn push_row_batch(
        &self,
        bundle: &mut crate::writer::command::Bundle,
        block: &[u8],
        rows: usize,
        c: Option<Compression>,
    ) -> Result<()> {
        let head = BATCH_HEAD_LEN - RECORD_FIXED_LEN;
        let packed = c
            .filter(|_| block.len() <= self.inner.max_inflate)
            .map(|c| (c.codec, compression::compress(c.codec, c.level, block)))
            .filter(|(_, packed)| {
                !packed.is_empty()
                    && compression::should_compress(
                        frame_size(RECORD_FIXED_LEN + head + block.len()),
                        frame_size(RECORD_FIXED_LEN + head + packed.len()),
                        0,
                    )
            });
        let stored = packed.as_ref().map_or(block, |(_, p)| &p[..]);
        self.check_size(head + stored.len())?;
        let start = bundle.bodies.len();
        record::encode_row_batch_head(
            rows as u16,
            packed.as_ref().map(|(codec, _)| *codec),
            block.len() as u32,
            &mut bundle.bodies,
        );
        bundle.bodies.extend_from_slice(stored);
        bundle
            .entries
            .push((record::FLAG_EXTENSION, (bundle.bodies.len() - start) as u32));
        bundle.extra_seqs += rows as u64 - 1;
        bundle.push_batch_keys(std::iter::empty());
        Ok(())
    }

    /// Adds one block of members to `bundle`: one batch record when it
    /// saves at least 5 % of the members' plain frames and fits a frame and
    /// the readers' decompression limit, else the members' plain records.
    fn push_block(
        &self,
        bundle: &mut crate::writer::command::Bundle,
        members: &[Record<'_>],
        block: &[u8],
        c: &Compression,
    ) {
        let plain: usize = members
            .iter()
            .map(|r| frame_size(RECORD_FIXED_LEN + r.body_len()))
            .sum();
        if block.len() <= self.inner.max_inflate && block.len() <= u32::MAX as usize {
            let packed = compression::compress(c.codec, c.level, block);
            let body_len = BATCH_HEAD_LEN - RECORD_FIXED_LEN + packed.len();
            if !packed.is_empty()
                && body_len <= self.max_message_len()
                && compression::should_compress(plain, frame_size(RECORD_FIXED_LEN + body_len), 0)
            {
                let start = bundle.bodies.len();
                record::encode_batch_head(
                    members.len() as u16,
                    c.codec,
                    block.len() as u32,
                    &mut bundle.bodies,
                );
                bundle.bodies.extend_from_slice(&packed);
                bundle
                    .entries
                    .push((record::FLAG_EXTENSION, (bundle.bodies.len() - start) as u32));
                bundle.extra_seqs += members.len() as u64 - 1;
                // The I/O thread indexes the members' keys from here: it
                // has only the compressed block.
                bundle.push_batch_keys(members.iter().filter_map(|r| r.key));
                return;
            }
        }
        for r in members {
            let start = bundle.bodies.len();
            r.encode_body(&mut bundle.bodies);
            bundle
                .entries
                .push((r.flags(), (bundle.bodies.len() - start) as u32));
        }
    }

    /// Returns once every message appended before this call is written and
    /// msync'd, or the error that stopped the writer.
    pub fn flush(&self) -> Result<()> {
        self.check_alive()?;
        let target = self
            .inner
            .handoff
            .flush_direct()
            .map_err(|e| self.send_error(e))?;
        self.inner.shared.wait_durable(target)
    }

    /// Seals the file being written, once every earlier append is in it, so
    /// that it can be archived, indexed by topic or deleted by retention;
    /// the next append starts a new file. Returns when the seal and
    /// everything before it are on disk, as [`Appender::flush`] does. A no-op
    /// (but a flush) when the active file holds no message.
    pub fn roll(&self) -> Result<()> {
        self.check_alive()?;
        if self.inner.handoff.shared_writers() {
            return Err(Error::InvalidArgument(
                "roll() is not available with several writer processes (multi_writer=True)".into(),
            ));
        }
        let (done, outcome) = crossbeam_channel::bounded(1);
        self.inner
            .handoff
            .request_roll(done)
            .map_err(|e| self.send_error(e))?;
        match outcome.recv() {
            Ok(result) => result,
            // The I/O thread stopped before answering: its error poisons.
            Err(_) => self.check_alive().and(Err(Error::Closed)),
        }
    }

    /// [`Appender::flush`] without blocking for the sync: asks for the
    /// flush and returns; `notify` runs (on the I/O thread, or here when
    /// there is nothing to wait for) once every message appended before
    /// this call is written and msync'd, or with the error that stopped the
    /// writer. Asking may still wait while the channel is full
    /// (backpressure), as `append` does.
    pub fn flush_then(&self, notify: Notify) {
        if let Err(e) = self.check_alive() {
            return notify.fire(Err(e));
        }
        match self.inner.handoff.request_flush() {
            Ok(target) => self.inner.shared.on_durable(target, notify),
            Err(e) => notify.fire(Err(self.send_error(e))),
        }
    }

    /// Largest body (key, headers and payload) one message may have.
    pub fn max_message_len(&self) -> usize {
        self.inner.max_record_len - RECORD_FIXED_LEN
    }

    fn check_size(&self, body_len: usize) -> Result<()> {
        if body_len > self.max_message_len() {
            return Err(Error::InvalidArgument(format!(
                "message of {body_len} bytes exceeds the limit of {} bytes for this file size",
                self.max_message_len()
            )));
        }
        Ok(())
    }

    fn check_alive(&self) -> Result<()> {
        if self.forked() {
            return Err(Error::Forked);
        }
        self.inner.shared.check()
    }

    fn send_error(&self, e: SendError) -> Error {
        match e {
            SendError::Closed => Error::Closed,
            SendError::Disconnected => self.inner.shared.poison_error(),
            // Written on this thread and failed: stored or not, as the
            // frames written before the failure say.
            SendError::Failed { seq } => {
                let e = self.inner.shared.poison_error();
                self.inner.shared.append_error(e, seq, Some(seq))
            }
        }
    }

    fn push(&self, flags: u8, encode: impl FnOnce(&mut Vec<u8>)) -> Result<u64> {
        self.check_alive()?;
        let sync = self.inner.flush == FlushMode::Sync;
        let (seq, numbered) = self
            .inner
            .handoff
            .push(flags, sync, encode)
            .map_err(|e| self.send_error(e))?;
        if sync {
            self.inner
                .shared
                .wait_durable(seq + 1)
                .map_err(|e| self.failed(e, seq, &numbered))?;
        }
        match numbered {
            Numbered::Seq => Ok(seq),
            Numbered::Lease(delta) => Ok(seq + delta),
            Numbered::Slot(slot) => self.seq_of(&slot, seq),
        }
    }

    fn send_bundle(&self, bundle: Bundle) -> Result<Range<u64>> {
        self.check_alive()?;
        let (range, numbered) = self
            .inner
            .handoff
            .push_bundle(bundle)
            .map_err(|e| self.send_error(e))?;
        if self.inner.flush == FlushMode::Sync && !range.is_empty() {
            self.inner
                .shared
                .wait_durable(range.end)
                .map_err(|e| self.failed(e, range.start, &numbered))?;
        }
        match numbered {
            Numbered::Seq => Ok(range),
            Numbered::Lease(delta) => Ok(range.start + delta..range.end + delta),
            Numbered::Slot(slot) => {
                let first = self.seq_of(&slot, range.start)?;
                Ok(first..first + (range.end - range.start))
            }
        }
    }

    /// The error for an append (numbered `first`) whose wait failed: says
    /// when its frame may be stored although the append failed.
    fn failed(&self, e: Error, first: u64, numbered: &Numbered) -> Error {
        let seq = match numbered {
            Numbered::Seq => Some(first),
            Numbered::Lease(delta) => Some(first + delta),
            Numbered::Slot(slot) => slot.seq_of(first),
        };
        self.inner.shared.append_error(e, first, seq)
    }

    /// Several writer processes: waits until the I/O thread has written the
    /// message with `ticket` and returns the sequence it got.
    fn seq_of(&self, slot: &BundleSlot, ticket: u64) -> Result<u64> {
        self.inner.shared.wait_written(ticket + 1).map_err(|e| {
            let seq = slot.seq_of(ticket);
            self.inner.shared.append_error(e, ticket, seq)
        })?;
        slot.seq_of(ticket)
            .ok_or_else(|| self.inner.shared.poison_error())
    }

    /// Whether an `append` now would wait for its write (`FlushMode::Sync`,
    /// or several writer processes while this one does not hold the append
    /// lock). A hint: the answer may change before the append. Bindings use
    /// it to decide whether an append is worth releasing their interpreter
    /// lock for (the Python one keeps the GIL when it is not).
    pub fn may_wait(&self) -> bool {
        self.inner.flush == FlushMode::Sync || !self.inner.handoff.numbers_now()
    }

    /// Stops accepting appends and tells the I/O thread to finish. Returns
    /// false when it was already closed.
    pub(crate) fn shut(&self) -> bool {
        self.inner.handoff.shutdown()
    }

    /// Returns once every message appended before the call is written to
    /// the mapping (visible to readers; not necessarily durable).
    /// One mechanism for every wait on `written`: [`WriterShared::wait_written`]
    /// (spin briefly, then a condition variable the I/O thread signals).
    pub(crate) fn wait_written(&self) -> Result<()> {
        self.check_alive()?;
        self.inner
            .shared
            .wait_written(self.inner.handoff.assigned())
    }

    pub(crate) fn forked(&self) -> bool {
        fork_generation() != self.inner.fork_gen
    }
}
