//! Columnar reads: messages as Arrow-layout buffers, built without a
//! per-message object, for `read_arrow` and Spark.
//!
//! This file holds the columns and the reads; `build` the push side (one
//! generic builder for the nullable columns' valid / offsets / data
//! pattern), `parallel` the read of whole files on several threads.

mod build;
mod parallel;

use crate::catalog::Catalog;
use crate::error::Result;
use crate::format::fields::{int_of_key, FieldKind};
use crate::format::record::{self, HeaderIter, RecordView, FLAG_EXPIRY, FLAG_PRIORITY, FLAG_TOPIC};
use crate::index::fields::FieldIndexDef;
use crate::reader::tailer::{plain_view, Message, OnMismatch, Tailer};
use crate::reader::topic::TopicFilter;
use crate::reader::wait::WaitStrategy;
use std::sync::Arc;

/// Columns of consecutive messages in Arrow's layout: validity bitmaps are
/// LSB-first, offsets are `i32` (a read stops before any column's data
/// would pass `i32::MAX` bytes).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Columns {
    /// Messages read.
    pub rows: usize,
    /// Where a next read goes on: the sequence after the last one this
    /// batch covered, rows and holes (key compaction) alike.
    pub next_seq: u64,
    /// Sequence of each message.
    pub seq: Vec<i64>,
    /// µs since the Unix epoch, UTC.
    pub timestamp: Vec<i64>,
    /// Validity bitmap of `key` (bit set: has a key).
    pub key_valid: Vec<u8>,
    /// Rows without a key.
    pub key_nulls: usize,
    /// Row `i`'s key is `key_data[key_offsets[i]..key_offsets[i+1]]`.
    pub key_offsets: Vec<i32>,
    /// The keys' bytes.
    pub key_data: Vec<u8>,
    /// Bitmap of the keys given as text (bit set: the row has a key and it
    /// was a `str`, so `key_data` holds it as UTF-8); bits past the rows
    /// read are 0.
    pub key_text: Vec<u8>,
    /// Validity bitmap of `headers` (bit set: has headers).
    pub headers_valid: Vec<u8>,
    /// Rows without headers.
    pub headers_nulls: usize,
    /// Row `i`'s headers are entries `headers_offsets[i]..headers_offsets[i+1]`.
    pub headers_offsets: Vec<i32>,
    /// Entry `j`'s name is `header_name_data[header_name_offsets[j]..header_name_offsets[j+1]]`.
    pub header_name_offsets: Vec<i32>,
    /// The header names' bytes (UTF-8).
    pub header_name_data: Vec<u8>,
    /// Offsets of the header values, as for the names.
    pub header_value_offsets: Vec<i32>,
    /// The header values' bytes.
    pub header_value_data: Vec<u8>,
    /// Bitmap over the header entries: bit `j` set when entry `j`'s value
    /// was given as text (UTF-8 in `header_value_data`).
    pub header_value_text: Vec<u8>,
    /// Row `i`'s payload is `payload_data[payload_offsets[i]..payload_offsets[i+1]]`.
    pub payload_offsets: Vec<i32>,
    /// The payloads' bytes: decompressed, or as stored with
    /// [`ColumnSet::raw`].
    pub payload_data: Vec<u8>,
    /// Validity bitmap of `topic` (bit set: has a topic).
    pub topic_valid: Vec<u8>,
    /// Rows without a topic.
    pub topic_nulls: usize,
    /// Row `i`'s topic is `topic_data[topic_offsets[i]..topic_offsets[i+1]]`.
    pub topic_offsets: Vec<i32>,
    /// The topics' bytes (UTF-8).
    pub topic_data: Vec<u8>,
    /// Each row's queue id (0 unless the topic is sharded, and without a topic).
    pub queue_id: Vec<i32>,
    /// Row `i`'s tags are entries `tags_offsets[i]..tags_offsets[i+1]` (an
    /// empty list without tags, never null).
    pub tags_offsets: Vec<i32>,
    /// Entry `j`'s tag is `tag_data[tag_offsets[j]..tag_offsets[j+1]]`.
    pub tag_offsets: Vec<i32>,
    /// The tags' bytes (UTF-8).
    pub tag_data: Vec<u8>,
    /// Each row's priority (0 when none was given).
    pub priority: Vec<u8>,
    /// Validity bitmap of `expires_at` (bit set: the message expires).
    pub expires_valid: Vec<u8>,
    /// Rows that never expire.
    pub expires_nulls: usize,
    /// When each row expires, µs since the Unix epoch (0 where null).
    pub expires_at: Vec<i64>,
    /// Validity bitmap of `codec` (bit set: the payload is stored compressed).
    pub codec_valid: Vec<u8>,
    /// Rows stored uncompressed.
    pub codec_nulls: usize,
    /// Row `i`'s codec name is `codec_data[codec_offsets[i]..codec_offsets[i+1]]`.
    pub codec_offsets: Vec<i32>,
    /// The codec names' bytes (`zstd`, `lz4`, `gzip`).
    pub codec_data: Vec<u8>,
    /// Each row's payload size once decompressed (its stored size when it
    /// is not compressed).
    pub raw_len: Vec<i64>,
    /// Flattened header fields (see [`Columns::with_fields`]), in the order
    /// asked for.
    pub fields: Vec<FieldColumn>,
    /// The record-field columns (topic, queue id, tags, priority, expiry)
    /// are filled up to this row; rows after it without those fields are
    /// filled in bulk when a row with one comes, or by [`Columns::finish`].
    fields_filled: usize,
    /// The `key`, `headers` and `codec` columns are filled up to this row;
    /// rows after it are bare (no key, no headers, stored uncompressed) and
    /// are filled in bulk when a row that is not comes, or by
    /// [`Columns::finish`] (see [`Columns::push_bare`]).
    bare_filled: usize,
    /// The columns this batch fills (from [`Columns::empty`]).
    set: Option<ColumnSet>,
    /// Some row has a topic, an expiry or a priority: the record-field
    /// columns are not all nulls and zeros.
    any_fields: bool,
}

/// One declared secondary index's header field as a column: each row holds
/// the message's first value of the header that the index would index
/// (`FieldIndexDef::keys`), as text (`str` indexes) or a 64-bit int (`int`
/// indexes); null when it has none. A value satisfying a predicate is so a
/// value the index lists the message under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldColumn {
    /// The field.
    pub def: FieldIndexDef,
    /// Validity bitmap (bit set: has a value).
    pub valid: Vec<u8>,
    /// Rows without a value.
    pub nulls: usize,
    /// `int` fields: the values (0 in a null row).
    pub ints: Vec<i64>,
    /// `str` fields: row `i`'s text is `data[offsets[i]..offsets[i+1]]`.
    pub offsets: Vec<i32>,
    /// `str` fields: the texts' bytes (UTF-8).
    pub data: Vec<u8>,
}

const LIMIT: usize = i32::MAX as usize;
/// Most rows whose fixed-size columns are reserved up front.
const RESERVE_ROWS: usize = 1 << 20;
/// Most rows reserved up front by a filtered read.
const FILTERED_RESERVE_ROWS: usize = 1 << 12;

/// Which columns a read fills (`seq` and `timestamp` always are); one left
/// out stays empty: no offsets, no data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSet {
    /// The `key` column.
    pub key: bool,
    /// The `headers` column.
    pub headers: bool,
    /// The `payload` column.
    pub payload: bool,
    /// The `topic` column.
    pub topic: bool,
    /// The `queue_id` column.
    pub queue_id: bool,
    /// The `tags` column.
    pub tags: bool,
    /// The `priority` column.
    pub priority: bool,
    /// The `expires_at` column.
    pub expires_at: bool,
    /// The `codec` column.
    pub codec: bool,
    /// The `raw_len` column.
    pub raw_len: bool,
    /// `payload` holds the bytes as stored (compressed when `codec` says
    /// so) instead of the decompressed payload.
    pub raw: bool,
}

impl ColumnSet {
    /// Every column, payloads decompressed.
    pub const ALL: ColumnSet = ColumnSet {
        key: true,
        headers: true,
        payload: true,
        topic: true,
        queue_id: true,
        tags: true,
        priority: true,
        expires_at: true,
        codec: true,
        raw_len: true,
        raw: false,
    };
    /// Only `seq` and `timestamp`: add the columns wanted with struct update
    /// syntax (`ColumnSet { payload: true, ..ColumnSet::NONE }`).
    pub const NONE: ColumnSet = ColumnSet {
        key: false,
        headers: false,
        payload: false,
        topic: false,
        queue_id: false,
        tags: false,
        priority: false,
        expires_at: false,
        codec: false,
        raw_len: false,
        raw: false,
    };

    /// The columns besides key, headers and payload are all left out.
    #[inline]
    fn no_extra(self) -> bool {
        !(self.topic
            || self.queue_id
            || self.tags
            || self.priority
            || self.expires_at
            || self.codec
            || self.raw_len)
    }
}

impl Columns {
    /// Reads from `tailer` until sequence `end`, `max_rows` rows, or the end
    /// of what is published. Runs of plain frames are read in bulk
    /// ([`Tailer::read_run_frames`]: a sealed file verified once by its
    /// footer's CRC, other frames each by their own; a record without
    /// fields is taken from its bytes, [`Columns::push_bare`]); file
    /// switches, compressed and encrypted records, the end of the data and
    /// damage go through [`Tailer::read_next`].
    pub fn read(tailer: &mut Tailer, end: u64, max_rows: usize) -> Result<Columns> {
        Columns::read_set(tailer, end, max_rows, ColumnSet::ALL)
    }

    /// As [`Columns::read`], filling only the columns in `cols`; the others
    /// are left empty (not even their offsets).
    pub fn read_set(
        tailer: &mut Tailer,
        end: u64,
        max_rows: usize,
        cols: ColumnSet,
    ) -> Result<Columns> {
        Columns::read_fields(tailer, end, max_rows, cols, &[])
    }

    /// As [`Columns::read_set`], reading as a tailer reads: a sealed file
    /// whose frame area does not match its footer's CRC is read on frame by
    /// frame (not refused whole), and damaged frames after at least one row
    /// end the batch before them, so that the next read reports the damage
    /// at its own sequence (and [`Tailer::skip_damaged`] steps over it).
    pub fn read_as_tailer(
        tailer: &mut Tailer,
        end: u64,
        max_rows: usize,
        cols: ColumnSet,
    ) -> Result<Columns> {
        Columns::read_fields_with(tailer, end, max_rows, cols, &[], OnMismatch::CheckFrames)
    }

    /// As [`Columns::read_set`], with a column per field in `defs` (see
    /// [`FieldColumn`]).
    pub fn read_fields(
        tailer: &mut Tailer,
        end: u64,
        max_rows: usize,
        cols: ColumnSet,
        defs: &[FieldIndexDef],
    ) -> Result<Columns> {
        Columns::read_fields_with(tailer, end, max_rows, cols, defs, OnMismatch::Fail)
    }

    /// [`Columns::read_fields`], with what a sealed file failing its
    /// footer's CRC does (`Fail`: the read fails naming the file).
    fn read_fields_with(
        tailer: &mut Tailer,
        end: u64,
        max_rows: usize,
        cols: ColumnSet,
        defs: &[FieldIndexDef],
        mismatch: OnMismatch,
    ) -> Result<Columns> {
        let hint = max_rows
            .min(end.saturating_sub(tailer.next_seq()) as usize)
            .min(RESERVE_ROWS);
        let mut b = Columns::empty(hint, cols).with_fields(defs);
        let mut full = false;
        while !full && b.rows < max_rows && tailer.next_seq() < end {
            let want = (max_rows - b.rows).min((end - tailer.next_seq()) as usize);
            b.reserve_more(want.min(RESERVE_ROWS));
            let taken = tailer.read_run_frames(want, mismatch, &mut |f| {
                let ok = match record::decode_bare(f.record) {
                    // Most records of most queues: no Message, no RecordView.
                    Some((timestamp, payload)) if b.fields.is_empty() => {
                        b.push_bare(f.seq, timestamp, payload, hint, cols)
                    }
                    _ => match plain_view(f.record) {
                        // Not compressed: the payload as stored is the payload.
                        Some(rec) => b.push_row(f.seq, &rec, rec.payload, hint, cols),
                        None => return false, // for read_next
                    },
                };
                full = !ok;
                ok
            })?;
            if full || taken > 0 {
                continue;
            }
            let m = match tailer.read_next() {
                Ok(m) => m,
                // As a tailer's read_batch: the rows before the damage now,
                // the damage on the next read.
                Err(crate::error::Error::Corrupted { .. })
                    if mismatch == OnMismatch::CheckFrames && b.rows > 0 =>
                {
                    break;
                }
                Err(e) => return Err(e),
            };
            let Some(m) = m else { break };
            if m.seq >= end {
                // A filtered tailer jumps, and holes (sequences key
                // compaction dropped) up to `end` were stepped over: this
                // one belongs to the next batch.
                let seq = m.seq;
                tailer.seek(seq)?;
                break;
            }
            if !b.push_row(m.seq, m.record(), payload_of(&m, cols), hint, cols) {
                // Leave the message for the next batch.
                let seq = m.seq;
                tailer.seek(seq)?;
                break;
            }
        }
        b.next_seq = tailer.next_seq();
        b.finish();
        Ok(b)
    }

    /// As [`Columns::read_set`], keeping only the messages `filter` wants:
    /// each data file is planned by the filter (see `reader::topic`): one
    /// whose footer says it holds no topic is skipped, a sealed file with
    /// a topic index is read only at the sequences it lists, any other
    /// file is read in bulk with each record compared. Every row is
    /// compared exactly. `tailer` must have no filter of its own. `defs`
    /// adds field columns as [`Columns::read_fields`]. Returns the columns
    /// and the sequence to read on from (`end` when the read got there: the
    /// filter may have jumped over the rest).
    pub(crate) fn read_filtered(
        tailer: &mut Tailer,
        catalog: &Catalog,
        filter: &mut TopicFilter,
        (end, max_rows): (u64, usize),
        cols: ColumnSet,
        defs: &[FieldIndexDef],
    ) -> Result<(Columns, u64)> {
        // How many rows match is not known: grow as they come.
        let hint = max_rows.min(FILTERED_RESERVE_ROWS);
        let mut b = Columns::empty(hint, cols).with_fields(defs);
        let mut full = false;
        let mut next = tailer.next_seq();
        while !full && b.rows < max_rows && next < end {
            if let Some(j) = filter.jump(catalog, next) {
                if j.seq >= end {
                    next = end;
                    break;
                }
                if j.seq != next {
                    tailer.seek(j.seq)?;
                }
            } else {
                // Read every frame of this file: in bulk, keeping the wanted.
                let want = (end - next) as usize;
                let taken = tailer.read_run(want, OnMismatch::Fail, &mut |m| {
                    if !filter.matches(m.record()) {
                        return true;
                    }
                    if b.rows >= max_rows {
                        return false;
                    }
                    let ok = b.push_row(m.seq, m.record(), payload_of(m, cols), hint, cols);
                    full = !ok;
                    ok
                })?;
                next = tailer.next_seq();
                if full || taken > 0 {
                    continue;
                }
            }
            // One message: a listed sequence, a file switch, a compressed
            // frame, the end of the data or damage.
            let Some(m) = tailer.read_next()? else { break };
            if filter.matches(m.record())
                && !b.push_row(m.seq, m.record(), payload_of(&m, cols), hint, cols)
            {
                // Leave the message for the next batch.
                next = m.seq;
                break;
            }
            next = tailer.next_seq();
        }
        b.finish();
        Ok((b, next.min(end)))
    }
}

/// The payload a read hands to [`Columns::push`]: as stored with
/// [`ColumnSet::raw`], else decompressed.
#[inline]
fn payload_of<'a>(m: &Message<'a>, cols: ColumnSet) -> &'a [u8] {
    if cols.raw {
        m.record().payload
    } else {
        m.payload
    }
}

/// Most threads a read of whole files uses: the `LITEMQ_READ_THREADS`
/// environment variable (`0` or `auto`: the cores this process may run on;
/// a number: that many, at most 16). Unset, reads are serial: on the 2-core
/// machine shared with other work where this was measured, two threads
/// reached 1.3x one thread's rate on pure computation, and the parallel
/// read, which copies every part after the first once more into the one
/// batch, was slower than the serial one (docs/PERFORMANCE.md). A typed
/// read decides for itself when the variable is unset
/// ([`read_threads_set`]).
pub fn read_threads() -> usize {
    read_threads_set().unwrap_or(1)
}

/// `LITEMQ_READ_THREADS` as [`read_threads`] reads it, `None` when unset.
pub fn read_threads_set() -> Option<usize> {
    let v = std::env::var("LITEMQ_READ_THREADS").ok()?;
    Some(
        match v.trim() {
            "0" | "auto" => cores(),
            n => n.parse::<usize>().unwrap_or(1),
        }
        .clamp(1, 16),
    )
}

/// The cores this process may run on (at most 16).
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::compression::{Codec, Compression};
    use crate::format::record::{Compress, HeaderField, Record};
    use crate::{Queue, QueueBuilder, Start};

    /// Rows `start..end` pushed one at a time through [`Columns::push`],
    /// the path every row took before bare rows had their own: what a bulk
    /// read of the same rows must equal, column for column.
    fn one_by_one(q: &Queue, start: u64, end: u64, cols: ColumnSet) -> Columns {
        let mut t = q.tailer(Start::Seq(start)).unwrap();
        let mut b = Columns::empty(0, cols);
        while let Some(m) = t.read_next().unwrap() {
            if m.seq >= end {
                break;
            }
            assert!(b.push(m.seq, m.record(), payload_of(&m, cols), 0, cols));
        }
        b.next_seq = end;
        b.finish();
        b
    }

    /// Bare rows (no key, headers, record fields or compression) are taken
    /// from their bytes in bulk and their nulls written later: in batches
    /// of any size, starting anywhere, in sealed files (verified by their
    /// footer) and the active one (each frame by its CRC), mixed with rows
    /// that have a key, headers, a topic, a priority or a compressed
    /// payload, every column is what pushing each row on its own gives;
    /// and so is an archived read of each sealed file.
    #[test]
    fn bare_rows_read_in_bulk_equal_rows_pushed_one_by_one() {
        let tmp = tempfile::tempdir().unwrap();
        let q = QueueBuilder::new(tmp.path().join("q"))
            .file_size(64 << 10)
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        let n = 3000u64;
        for i in 0..n {
            let body = format!("{i:04}:").repeat(if i % 89 == 10 { 60 } else { i as usize % 20 });
            let key = format!("k{i}");
            let headers = [
                HeaderField {
                    name: "h",
                    value: key.as_bytes(),
                    value_is_text: false,
                },
                HeaderField {
                    name: "g",
                    value: b"",
                    value_is_text: false,
                },
            ];
            let mut r = Record::new(body.as_bytes());
            if i % 7 == 3 || i % 13 == 0 {
                r.key = Some(key.as_bytes());
            }
            if i % 11 == 5 || i % 13 == 0 {
                r.headers = &headers;
            }
            if (200..205).contains(&i) {
                r.topic = Some("orders");
                r.tags = &["paid"];
            }
            if i % 97 == 50 {
                r.priority = 3;
                r.expires_at = Some(4_000_000_000_000_000);
            }
            if i % 89 == 10 {
                r.compress = Compress::With(Compression::new(Codec::Zstd));
            }
            app.append_record(&r).unwrap();
        }
        app.flush().unwrap();
        assert!(
            q.data_files().unwrap().len() > 2,
            "sealed files and an active one"
        );
        let sets = [
            ColumnSet::ALL,
            ColumnSet::NONE,
            ColumnSet {
                raw: true,
                ..ColumnSet::ALL
            },
            ColumnSet {
                payload: true,
                ..ColumnSet::NONE
            },
            ColumnSet {
                key: true,
                headers: true,
                payload: true,
                ..ColumnSet::NONE
            },
            ColumnSet {
                headers: true,
                codec: true,
                raw_len: true,
                ..ColumnSet::NONE
            },
        ];
        for cols in sets {
            for (start, max_rows) in [(0, usize::MAX), (0, 1000), (1, 37), (590, 5), (2993, 3)] {
                let mut t = q.tailer(Start::Seq(start)).unwrap();
                let mut at = start;
                while at < n {
                    let c = Columns::read_set(&mut t, n, max_rows, cols).unwrap();
                    assert!(c.rows > 0);
                    assert_eq!(c.seq[0] as u64, at);
                    let want = one_by_one(&q, at, c.next_seq, cols);
                    assert_eq!(c, want, "{cols:?}, rows {at}..{}", c.next_seq);
                    at = c.next_seq;
                }
            }
            // Archived reads (one sealed file's bytes) take the same rows.
            let files = q.data_files().unwrap();
            for f in &files[..files.len() - 1] {
                let bytes = std::fs::read(&f.path).unwrap();
                let c = crate::archived::read_sealed(
                    &bytes,
                    &f.path,
                    0,
                    u64::MAX,
                    n as usize,
                    cols,
                    None,
                );
                let want = one_by_one(&q, f.first_seq, f.end_seq, cols);
                assert_eq!(c.unwrap(), want, "{cols:?}, {:?}", f.path);
            }
        }
        q.close().unwrap();
    }
}
