//! Columnar reads: messages as Arrow-layout buffers, built without a
//! per-message object, for `read_arrow` and Spark.

use crate::error::Result;
use crate::format::fields::{int_of_key, FieldKind};
use crate::format::record::{self, HeaderIter, RecordView, FLAG_EXPIRY, FLAG_PRIORITY, FLAG_TOPIC};
use crate::index::fields::FieldIndexDef;
use crate::reader::catalog::Catalog;
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

impl FieldColumn {
    fn new(def: FieldIndexDef) -> FieldColumn {
        FieldColumn {
            offsets: match def.kind {
                FieldKind::Str => vec![0],
                FieldKind::Int => Vec::new(),
            },
            def,
            valid: Vec::new(),
            nulls: 0,
            ints: Vec::new(),
            data: Vec::new(),
        }
    }

    /// Bytes row `rec` adds to `data`.
    fn len_of(&self, rec: &RecordView<'_>) -> usize {
        match self.def.kind {
            FieldKind::Str => self.def.keys(rec).next().map_or(0, |k| k.len()),
            FieldKind::Int => 0,
        }
    }

    fn push(&mut self, i: usize, rec: &RecordView<'_>) {
        let key = self.def.keys(rec).next();
        set_bit(&mut self.valid, i, key.is_some());
        if key.is_none() {
            self.nulls += 1;
        }
        match self.def.kind {
            FieldKind::Str => {
                if let Some(k) = key {
                    self.data.extend_from_slice(&k);
                }
                self.offsets.push(self.data.len() as i32);
            }
            FieldKind::Int => self
                .ints
                .push(key.and_then(|k| int_of_key(&k)).unwrap_or(0)),
        }
    }
}

const LIMIT: usize = i32::MAX as usize;

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

/// Columns reserved this large or larger are backed by huge pages.
const HUGE_MIN: usize = 4 << 20;

/// Backs `v`'s reserved capacity with huge pages when it is large (see
/// [`crate::storage::mapped::advise_huge_pages`]).
fn huge<T>(v: &mut Vec<T>) {
    if v.capacity() * std::mem::size_of::<T>() >= HUGE_MIN {
        crate::storage::mapped::advise_huge_pages(v.spare_capacity_mut());
    }
}

/// Makes room for `additional` more elements in column `v`: memory a
/// dropped result left on the shelf when there is some (see
/// `reader::spare`), else new memory, with huge pages when it is large.
fn grow<T: super::spare::Element>(v: &mut Vec<T>, additional: usize) {
    if v.capacity() - v.len() >= additional || super::spare::take(v, additional) {
        return;
    }
    v.reserve(additional);
    huge(v);
}

/// Most rows whose fixed-size columns are reserved up front.
const RESERVE_ROWS: usize = 1 << 20;
/// Most rows reserved up front by a filtered read.
const FILTERED_RESERVE_ROWS: usize = 1 << 12;
/// Most payload bytes reserved up front (from the first message's size).
const RESERVE_BYTES: usize = 256 << 20;

fn set_bit(bits: &mut Vec<u8>, i: usize, on: bool) {
    if i / 8 >= bits.len() {
        bits.push(0);
    }
    if on {
        bits[i / 8] |= 1 << (i % 8);
    }
}

impl Columns {
    pub(crate) fn empty(hint: usize, cols: ColumnSet) -> Columns {
        let mut b = Columns {
            set: Some(cols),
            ..Columns::default()
        };
        let offsets = |on: bool| if on { vec![0] } else { Vec::new() };
        b.key_offsets = offsets(cols.key);
        b.headers_offsets = offsets(cols.headers);
        b.header_name_offsets = offsets(cols.headers);
        b.header_value_offsets = offsets(cols.headers);
        b.payload_offsets = offsets(cols.payload);
        b.topic_offsets = offsets(cols.topic);
        b.tags_offsets = offsets(cols.tags);
        b.tag_offsets = offsets(cols.tags);
        b.codec_offsets = offsets(cols.codec);
        let hint_for = |on: bool| if on { hint } else { 0 };
        grow(&mut b.seq, hint);
        grow(&mut b.timestamp, hint);
        grow(&mut b.payload_offsets, hint_for(cols.payload));
        grow(&mut b.key_offsets, hint_for(cols.key));
        grow(&mut b.headers_offsets, hint_for(cols.headers));
        b.key_valid.reserve(hint_for(cols.key).div_ceil(8));
        b.headers_valid.reserve(hint_for(cols.headers).div_ceil(8));
        b
    }

    /// Makes room for `rows` more rows like those read so far when the
    /// fixed-size columns are full, backing large columns with huge pages (a
    /// column grown by `push` one row at a time gets 4 KiB pages, each
    /// faulted in on its own).
    fn reserve_more(&mut self, rows: usize) {
        if self.rows == 0 || self.seq.capacity() - self.seq.len() >= rows {
            return;
        }
        for v in [&mut self.seq, &mut self.timestamp] {
            grow(v, rows);
        }
        for v in [
            &mut self.payload_offsets,
            &mut self.key_offsets,
            &mut self.headers_offsets,
        ] {
            if !v.is_empty() {
                grow(v, rows);
            }
        }
        if !self.payload_offsets.is_empty() {
            let avg = self.payload_data.len() / self.rows;
            grow(
                &mut self.payload_data,
                avg.saturating_mul(rows).min(RESERVE_BYTES),
            );
        }
    }

    /// Adds a column per field in `defs` (filled by [`Columns::read_set`]
    /// and field reads, see [`FieldColumn`]).
    pub fn with_fields(mut self, defs: &[FieldIndexDef]) -> Columns {
        self.fields = defs.iter().cloned().map(FieldColumn::new).collect();
        self
    }

    /// As [`Columns::push`], filling the field columns too.
    #[inline]
    pub(crate) fn push_row(
        &mut self,
        seq: u64,
        rec: &RecordView<'_>,
        payload: &[u8],
        hint: usize,
        cols: ColumnSet,
    ) -> bool {
        if self.fields.is_empty() {
            if rec.flags == 0 {
                return self.push_bare(seq, rec.timestamp, payload, hint, cols);
            }
            return self.push(seq, rec, payload, hint, cols);
        }
        if self
            .fields
            .iter()
            .any(|f| f.data.len() + f.len_of(rec) > LIMIT)
        {
            return false;
        }
        let i = self.rows;
        if !self.push(seq, rec, payload, hint, cols) {
            return false;
        }
        for f in &mut self.fields {
            f.push(i, rec);
        }
        true
    }

    /// Appends one message, unless a column would pass `i32::MAX` bytes
    /// (then returns false and leaves the batch as it was). Readers call
    /// [`Columns::push_row`], which takes a bare row the short way.
    #[inline]
    fn push(
        &mut self,
        seq: u64,
        rec: &RecordView<'_>,
        payload: &[u8],
        hint: usize,
        cols: ColumnSet,
    ) -> bool {
        if !(cols.key && cols.headers && cols.payload) {
            return self.push_some(seq, rec, payload, hint, cols);
        }
        let key_len = rec.key.map_or(0, <[u8]>::len);
        let headers = rec.headers();
        let header_bytes: usize = match headers.size_hint().1 {
            Some(0) => 0,
            _ => headers.clone().map(|h| h.name.len() + h.value.len()).sum(),
        };
        if self.payload_data.len() + payload.len() > LIMIT
            || self.key_data.len() + key_len > LIMIT
            || self.header_value_data.len() + header_bytes > LIMIT
            || !(cols.no_extra() || self.extra_fits(rec, cols))
        {
            return false;
        }
        let i = self.rows;
        if i == 0 {
            self.reserve_payload(hint, payload.len());
        }
        self.fill_bare(i, cols);
        self.seq.push(seq as i64);
        self.timestamp.push(rec.timestamp as i64);
        self.push_key(i, rec.key, rec.key_is_text());
        self.push_headers(i, headers);
        self.payload_data.extend_from_slice(payload);
        self.payload_offsets.push(self.payload_data.len() as i32);
        if !cols.no_extra() {
            self.push_extra(i, rec, cols);
        }
        self.rows += 1;
        self.bare_filled = self.rows;
        true
    }

    /// Appends a bare message: its record has no flag set (no key,
    /// headers, topic, tags, priority or expiry; stored uncompressed and
    /// unencrypted), and the batch has no field columns. Only `seq`,
    /// `timestamp`, `payload` and `raw_len` get a value here: the row's
    /// nulls in `key`, `headers` and `codec` are written in bulk by
    /// [`Columns::fill_bare`], its record fields by [`Columns::fill_plain`].
    /// Returns false, and leaves the batch as it was, when the payload
    /// column would pass `i32::MAX` bytes.
    ///
    /// Always inlined: it is a few instructions per row, and the call (its
    /// arguments and saved registers) cost as much again in the bulk read.
    #[inline(always)]
    fn push_bare(
        &mut self,
        seq: u64,
        timestamp: u64,
        payload: &[u8],
        hint: usize,
        cols: ColumnSet,
    ) -> bool {
        if cols.payload {
            if self.payload_data.len() + payload.len() > LIMIT {
                return false;
            }
            if self.rows == 0 {
                self.reserve_payload(hint, payload.len());
            }
            self.payload_data.extend_from_slice(payload);
            self.payload_offsets.push(self.payload_data.len() as i32);
        }
        self.seq.push(seq as i64);
        self.timestamp.push(timestamp as i64);
        if cols.raw_len {
            self.raw_len.push(payload.len() as i64);
        }
        self.rows += 1;
        true
    }

    /// Reserves the payload column for the first row: messages of a queue
    /// are often of one size, so room for `hint` payloads like this one
    /// keeps the column from being copied as it grows.
    fn reserve_payload(&mut self, hint: usize, len: usize) {
        grow(
            &mut self.payload_data,
            hint.saturating_mul(len).min(RESERVE_BYTES),
        );
    }

    /// Fills rows `bare_filled..upto` of the `key`, `headers` and `codec`
    /// columns `cols` asks for as bare rows: null key, null headers, null
    /// codec. A column still all nulls stays zeroed memory that is never
    /// written (see [`fill_zeroed`]).
    fn fill_bare(&mut self, upto: usize, cols: ColumnSet) {
        let n = upto.saturating_sub(self.bare_filled);
        if n == 0 {
            return;
        }
        // Validity bits of the new rows are 0: the bitmaps only grow.
        let bytes = upto.div_ceil(8);
        if cols.key {
            let end = self.key_data.len() as i32;
            push_nulls(
                &mut self.key_valid,
                &mut self.key_nulls,
                &mut self.key_offsets,
                bytes,
                n,
                end,
            );
            fill_zeroed(&mut self.key_text, bytes, 0);
        }
        if cols.headers {
            let end = self.header_name_offsets.len() as i32 - 1;
            push_nulls(
                &mut self.headers_valid,
                &mut self.headers_nulls,
                &mut self.headers_offsets,
                bytes,
                n,
                end,
            );
        }
        if cols.codec {
            let end = self.codec_data.len() as i32;
            push_nulls(
                &mut self.codec_valid,
                &mut self.codec_nulls,
                &mut self.codec_offsets,
                bytes,
                n,
                end,
            );
        }
        self.bare_filled = upto;
    }

    /// Row `i`'s key: its validity bit, bytes and end offset (shared by
    /// [`Columns::push`] and [`Columns::push_some`]).
    #[inline]
    fn push_key(&mut self, i: usize, key: Option<&[u8]>, is_text: bool) {
        set_bit(&mut self.key_valid, i, key.is_some());
        set_bit(&mut self.key_text, i, key.is_some() && is_text);
        match key {
            Some(k) => self.key_data.extend_from_slice(k),
            None => self.key_nulls += 1,
        }
        self.key_offsets.push(self.key_data.len() as i32);
    }

    /// Row `i`'s headers: name and value bytes and offsets, the list's
    /// validity bit (null when there are none) and its end offset.
    #[inline]
    fn push_headers(&mut self, i: usize, headers: HeaderIter<'_>) {
        let mut has_headers = false;
        if headers.size_hint().1 != Some(0) {
            for h in headers {
                has_headers = true;
                self.header_name_data.extend_from_slice(h.name.as_bytes());
                self.header_name_offsets
                    .push(self.header_name_data.len() as i32);
                self.header_value_data.extend_from_slice(h.value);
                let entry = self.header_value_offsets.len() - 1;
                set_bit(&mut self.header_value_text, entry, h.value_is_text);
                self.header_value_offsets
                    .push(self.header_value_data.len() as i32);
            }
        }
        set_bit(&mut self.headers_valid, i, has_headers);
        if !has_headers {
            self.headers_nulls += 1;
        }
        self.headers_offsets
            .push(self.header_name_offsets.len() as i32 - 1);
    }

    /// As [`Columns::push`], for a selection of columns: the others stay
    /// empty (their bytes are not even counted against the limit).
    #[cold]
    fn push_some(
        &mut self,
        seq: u64,
        rec: &RecordView<'_>,
        payload: &[u8],
        hint: usize,
        cols: ColumnSet,
    ) -> bool {
        let payload = if cols.payload { payload } else { &[] };
        let key = if cols.key { rec.key } else { None };
        let headers = if cols.headers {
            rec.headers()
        } else {
            RecordView::no_headers()
        };
        let key_len = key.map_or(0, <[u8]>::len);
        let header_bytes: usize = headers.clone().map(|h| h.name.len() + h.value.len()).sum();
        if self.payload_data.len() + payload.len() > LIMIT
            || self.key_data.len() + key_len > LIMIT
            || self.header_value_data.len() + header_bytes > LIMIT
            || !self.extra_fits(rec, cols)
        {
            return false;
        }
        let i = self.rows;
        if i == 0 && cols.payload {
            self.reserve_payload(hint, payload.len());
        }
        self.fill_bare(i, cols);
        self.seq.push(seq as i64);
        self.timestamp.push(rec.timestamp as i64);
        if cols.key {
            self.push_key(i, key, rec.key_is_text());
        }
        if cols.headers {
            self.push_headers(i, headers);
        }
        if cols.payload {
            self.payload_data.extend_from_slice(payload);
            self.payload_offsets.push(self.payload_data.len() as i32);
        }
        self.push_extra(i, rec, cols);
        self.rows += 1;
        self.bare_filled = self.rows;
        true
    }

    /// True when row `rec`'s topic and tags keep their columns within
    /// `i32::MAX` bytes (the other extra columns are fixed-size, or a few
    /// bytes per row: `codec`).
    #[inline]
    fn extra_fits(&self, rec: &RecordView<'_>, cols: ColumnSet) -> bool {
        let topic_len = if cols.topic {
            rec.topic.map_or(0, str::len)
        } else {
            0
        };
        let tag_bytes: usize = if cols.tags {
            rec.tags().map(str::len).sum()
        } else {
            0
        };
        self.topic_data.len() + topic_len <= LIMIT && self.tag_data.len() + tag_bytes <= LIMIT
    }

    /// Row `i`'s topic, queue id, tags, priority, expiry, codec and raw
    /// length, those `cols` asks for. A row whose record has none of the
    /// record fields (most rows of most queues) adds nothing to those five
    /// columns here: its nulls and zeros are written in bulk later
    /// ([`Columns::fill_plain`]).
    #[inline]
    fn push_extra(&mut self, i: usize, rec: &RecordView<'_>, cols: ColumnSet) {
        if rec.flags & (FLAG_TOPIC | FLAG_EXPIRY | FLAG_PRIORITY) != 0 {
            self.any_fields = true;
            self.fill_plain(i, cols);
            self.push_fields(i, rec, cols);
            self.fields_filled = i + 1;
        }
        if cols.codec {
            set_bit(&mut self.codec_valid, i, rec.codec.is_some());
            match rec.codec {
                Some(c) => self.codec_data.extend_from_slice(c.name().as_bytes()),
                None => self.codec_nulls += 1,
            }
            self.codec_offsets.push(self.codec_data.len() as i32);
        }
        if cols.raw_len {
            let n = match rec.codec {
                Some(_) => rec.raw_len as usize,
                None => rec.payload.len(),
            };
            self.raw_len.push(n as i64);
        }
    }

    /// Fills rows `fields_filled..upto` of the record-field columns `cols`
    /// asks for as rows without those fields: no topic, queue id 0, no
    /// tags, priority 0, no expiry.
    fn fill_plain(&mut self, upto: usize, cols: ColumnSet) {
        let n = upto.saturating_sub(self.fields_filled);
        if n == 0 {
            return;
        }
        // Validity bits of the new rows are 0: the bitmaps only grow.
        let bytes = upto.div_ceil(8);
        if cols.topic {
            let end = self.topic_data.len() as i32;
            push_nulls(
                &mut self.topic_valid,
                &mut self.topic_nulls,
                &mut self.topic_offsets,
                bytes,
                n,
                end,
            );
        }
        if cols.queue_id {
            let len = self.queue_id.len() + n;
            fill_zeroed(&mut self.queue_id, len, 0);
        }
        if cols.tags {
            let end = self.tag_offsets.len() as i32 - 1;
            let len = self.tags_offsets.len() + n;
            fill_zeroed(&mut self.tags_offsets, len, end);
        }
        if cols.priority {
            let len = self.priority.len() + n;
            fill_zeroed(&mut self.priority, len, 0);
        }
        if cols.expires_at {
            push_nulls(
                &mut self.expires_valid,
                &mut self.expires_nulls,
                &mut self.expires_at,
                bytes,
                n,
                0,
            );
        }
        self.fields_filled = upto;
    }

    /// Completes the record-field columns up to the last row (see
    /// [`Columns::fill_plain`]). Every read calls it before it returns the
    /// batch; calling it again does nothing.
    pub(crate) fn finish(&mut self) {
        if let Some(cols) = self.set {
            self.fill_bare(self.rows, cols);
            self.fill_plain(self.rows, cols);
        }
    }

    /// Row `i`'s topic, queue id, tags, priority and expiry, those `cols`
    /// asks for.
    fn push_fields(&mut self, i: usize, rec: &RecordView<'_>, cols: ColumnSet) {
        if cols.topic {
            set_bit(&mut self.topic_valid, i, rec.topic.is_some());
            match rec.topic {
                Some(t) => self.topic_data.extend_from_slice(t.as_bytes()),
                None => self.topic_nulls += 1,
            }
            self.topic_offsets.push(self.topic_data.len() as i32);
        }
        if cols.queue_id {
            self.queue_id.push(i32::from(rec.queue_id));
        }
        if cols.tags {
            for t in rec.tags() {
                self.tag_data.extend_from_slice(t.as_bytes());
                self.tag_offsets.push(self.tag_data.len() as i32);
            }
            self.tags_offsets.push(self.tag_offsets.len() as i32 - 1);
        }
        if cols.priority {
            self.priority.push(rec.priority);
        }
        if cols.expires_at {
            set_bit(&mut self.expires_valid, i, rec.expires_at.is_some());
            if rec.expires_at.is_none() {
                self.expires_nulls += 1;
            }
            self.expires_at.push(rec.expires_at.unwrap_or(0) as i64);
        }
    }

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

/// Grows `v` to `len` items of `value`. A column still all zeros that
/// stays so (the common all-null topic, tags, expiry columns of a queue
/// without record fields) is allocated zeroed instead: large zeroed
/// allocations come from the kernel already zero, so nothing is written and
/// no page is touched until pyarrow reads it.
fn fill_zeroed<T: Copy + Default + PartialEq>(v: &mut Vec<T>, len: usize, value: T) {
    if v.len() <= 1 && value == T::default() && v.iter().all(|x| *x == value) {
        *v = vec![value; len];
    } else {
        v.resize(len, value);
    }
}

/// Appends `n` null rows to a nullable column: its validity bitmap grown to
/// `bytes` with 0 bits, its null count raised by `n`, and `n` more of
/// `values` equal to `end` (the last offset, so the rows are empty, for a
/// column of variable-length values; 0 for one of fixed-size values).
fn push_nulls<T: Copy + Default + PartialEq>(
    valid: &mut Vec<u8>,
    nulls: &mut usize,
    values: &mut Vec<T>,
    bytes: usize,
    n: usize,
    end: T,
) {
    fill_zeroed(valid, bytes, 0);
    *nulls += n;
    let len = values.len() + n;
    fill_zeroed(values, len, end);
}

/// Appends `src_rows` bits of `src` after the first `dst_rows` bits of
/// `dst` (LSB-first bitmaps whose bits past their rows are 0).
fn append_bits(dst: &mut Vec<u8>, dst_rows: usize, src: &[u8], src_rows: usize) {
    let src = &src[..src_rows.div_ceil(8).min(src.len())];
    let shift = dst_rows % 8;
    dst.resize(dst_rows.div_ceil(8), 0);
    if shift == 0 {
        dst.extend_from_slice(src);
    } else {
        dst.resize((dst_rows + src_rows).div_ceil(8), 0);
        let at = dst_rows / 8;
        for (j, &b) in src.iter().enumerate() {
            dst[at + j] |= b << shift;
            if let Some(d) = dst.get_mut(at + j + 1) {
                *d |= b >> (8 - shift);
            }
        }
    }
}

/// Appends offsets `src[1..]` rebased by `base` (`dst` and `src` both start
/// with their first row's start offset; both empty: a column left out).
fn append_offsets(dst: &mut Vec<i32>, src: &[i32], base: i32) {
    if let Some(rest) = src.get(1..) {
        dst.extend(rest.iter().map(|o| o + base));
    }
}

/// Appends `src` to `dst`, backing a large column with huge pages.
fn append_vec<T: super::spare::Element>(dst: &mut Vec<T>, src: &[T]) {
    grow(dst, src.len());
    dst.extend_from_slice(src);
}

/// Most threads a read of whole files uses: the `LITEMQ_READ_THREADS`
/// environment variable (`0` or `auto`: the cores this process may run on;
/// a number: that many, at most 16). Unset, reads are serial: on the 2-core
/// machine shared with other work where this was measured, two threads
/// reached 1.3x one thread's rate on pure computation, and the parallel
/// read, which copies every part after the first once more into the one
/// batch, was slower than the serial one (docs/PERFORMANCE.md).
pub fn read_threads() -> usize {
    let cores = || std::thread::available_parallelism().map_or(1, |n| n.get());
    match std::env::var("LITEMQ_READ_THREADS") {
        Ok(v) => match v.trim() {
            "0" | "auto" => cores(),
            n => n.parse::<usize>().unwrap_or(1),
        },
        Err(_) => 1,
    }
    .clamp(1, 16)
}

impl Columns {
    /// Appends the rows of `other`, a batch read from where this one
    /// stopped (both finished). Returns false, and leaves `self` as it was,
    /// when a column would pass `i32::MAX` bytes.
    fn append(&mut self, other: &Columns) -> bool {
        let fits = |a: usize, b: usize| a + b <= LIMIT;
        if !(fits(self.payload_data.len(), other.payload_data.len())
            && fits(self.key_data.len(), other.key_data.len())
            && fits(self.header_name_data.len(), other.header_name_data.len())
            && fits(self.header_value_data.len(), other.header_value_data.len())
            && fits(
                self.header_name_offsets.len(),
                other.header_name_offsets.len(),
            )
            && fits(self.topic_data.len(), other.topic_data.len())
            && fits(self.tag_data.len(), other.tag_data.len())
            && fits(self.tag_offsets.len(), other.tag_offsets.len())
            && fits(self.codec_data.len(), other.codec_data.len())
            && self
                .fields
                .iter()
                .zip(&other.fields)
                .all(|(a, b)| fits(a.data.len(), b.data.len())))
        {
            return false;
        }
        let (rows, n) = (self.rows, other.rows);
        let plain = !(self.any_fields || other.any_fields);
        if plain {
            // All nulls and zeros on both sides: written anew (zeroed
            // memory, not touched) by `finish` below instead of copied.
            self.clear_plain();
        }
        append_vec(&mut self.seq, &other.seq);
        append_vec(&mut self.timestamp, &other.timestamp);
        append_bits(&mut self.key_valid, rows, &other.key_valid, n);
        append_bits(&mut self.key_text, rows, &other.key_text, n);
        self.key_nulls += other.key_nulls;
        let base = self.key_data.len() as i32;
        append_offsets(&mut self.key_offsets, &other.key_offsets, base);
        append_vec(&mut self.key_data, &other.key_data);
        append_bits(&mut self.headers_valid, rows, &other.headers_valid, n);
        self.headers_nulls += other.headers_nulls;
        let entries = self.header_name_offsets.len() as i32 - 1;
        append_offsets(&mut self.headers_offsets, &other.headers_offsets, entries);
        let base = self.header_name_data.len() as i32;
        append_offsets(
            &mut self.header_name_offsets,
            &other.header_name_offsets,
            base,
        );
        append_vec(&mut self.header_name_data, &other.header_name_data);
        let (entries, more) = (
            self.header_value_offsets.len().saturating_sub(1),
            other.header_value_offsets.len().saturating_sub(1),
        );
        append_bits(
            &mut self.header_value_text,
            entries,
            &other.header_value_text,
            more,
        );
        let base = self.header_value_data.len() as i32;
        append_offsets(
            &mut self.header_value_offsets,
            &other.header_value_offsets,
            base,
        );
        append_vec(&mut self.header_value_data, &other.header_value_data);
        let base = self.payload_data.len() as i32;
        append_offsets(&mut self.payload_offsets, &other.payload_offsets, base);
        append_vec(&mut self.payload_data, &other.payload_data);
        if !plain {
            append_bits(&mut self.topic_valid, rows, &other.topic_valid, n);
            self.topic_nulls += other.topic_nulls;
            let base = self.topic_data.len() as i32;
            append_offsets(&mut self.topic_offsets, &other.topic_offsets, base);
            append_vec(&mut self.topic_data, &other.topic_data);
            append_vec(&mut self.queue_id, &other.queue_id);
            let entries = self.tag_offsets.len() as i32 - 1;
            append_offsets(&mut self.tags_offsets, &other.tags_offsets, entries);
            let base = self.tag_data.len() as i32;
            append_offsets(&mut self.tag_offsets, &other.tag_offsets, base);
            append_vec(&mut self.tag_data, &other.tag_data);
            append_vec(&mut self.priority, &other.priority);
            append_bits(&mut self.expires_valid, rows, &other.expires_valid, n);
            self.expires_nulls += other.expires_nulls;
            append_vec(&mut self.expires_at, &other.expires_at);
        }
        append_bits(&mut self.codec_valid, rows, &other.codec_valid, n);
        self.codec_nulls += other.codec_nulls;
        let base = self.codec_data.len() as i32;
        append_offsets(&mut self.codec_offsets, &other.codec_offsets, base);
        append_vec(&mut self.codec_data, &other.codec_data);
        append_vec(&mut self.raw_len, &other.raw_len);
        for (f, g) in self.fields.iter_mut().zip(&other.fields) {
            append_bits(&mut f.valid, rows, &g.valid, n);
            f.nulls += g.nulls;
            append_vec(&mut f.ints, &g.ints);
            let base = f.data.len() as i32;
            append_offsets(&mut f.offsets, &g.offsets, base);
            append_vec(&mut f.data, &g.data);
        }
        self.rows += n;
        // Both batches are finished: every column is filled to the end.
        self.bare_filled = self.rows;
        self.any_fields |= other.any_fields;
        if plain {
            self.finish();
        } else {
            self.fields_filled = self.rows;
        }
        self.next_seq = other.next_seq;
        true
    }

    /// Empties the record-field columns (topic, queue id, tags, priority,
    /// expiry) of a batch none of whose rows has those fields, for
    /// [`Columns::fill_plain`] to fill them again from row 0.
    fn clear_plain(&mut self) {
        let reset = |on: bool| if on { vec![0] } else { Vec::new() };
        let cols = self.set.unwrap_or(ColumnSet::NONE);
        self.topic_valid = Vec::new();
        self.topic_nulls = 0;
        self.topic_offsets = reset(cols.topic);
        self.queue_id = Vec::new();
        self.tags_offsets = reset(cols.tags);
        self.priority = Vec::new();
        self.expires_valid = Vec::new();
        self.expires_nulls = 0;
        self.expires_at = Vec::new();
        self.fields_filled = 0;
    }

    /// Reads `[start, end)` (at most `max_rows` rows) as
    /// [`Columns::read_fields`] does, several data files at once: the range
    /// is cut at file starts into at most `threads` parts of about equal
    /// length, each read by its own tailer on its own thread (the calling
    /// thread reads the first), and the parts are joined in sequence order.
    /// Returns `None`, having read nothing, when the range lies in one file
    /// or `threads` is 1: read it serially.
    ///
    /// The result is what a serial read returns: the same rows in the same
    /// order, or the error of the earliest part that failed after every
    /// part before it was read whole (a damaged sealed file is
    /// [`crate::error::Error::Corrupted`] naming it, the first in sequence order
    /// winning). A part stopped short by the `i32::MAX` column limit ends
    /// the result there (`next_seq` says where to go on). Since a sequence
    /// holds at most one row, the range read in parallel is cut to
    /// `max_rows` sequences; when holes (key compaction) left it short of
    /// `max_rows` rows, the rest is read serially after it.
    pub(crate) fn read_parallel(
        catalog: &Arc<Catalog>,
        wait: WaitStrategy,
        (start, end, max_rows): (u64, u64, usize),
        cols: ColumnSet,
        defs: &[FieldIndexDef],
        threads: usize,
    ) -> Result<Option<Columns>> {
        let (whole_end, end) = (end, end.min(start.saturating_add(max_rows as u64)));
        if threads < 2 || start >= end {
            return Ok(None);
        }
        let files = catalog.snapshot();
        let starts: Vec<u64> = files
            .iter()
            .map(|f| f.header.first_seq)
            .filter(|&s| s > start && s < end)
            .collect();
        if starts.is_empty() {
            return Ok(None);
        }
        let parts = threads.min(starts.len() + 1);
        // Cut at the file start nearest to each equal share.
        let mut cuts = vec![start];
        for k in 1..parts {
            let target = start + ((end - start) as u128 * k as u128 / parts as u128) as u64;
            let i = starts.partition_point(|&s| s < target);
            let near = [i.checked_sub(1), Some(i)]
                .into_iter()
                .flatten()
                .filter_map(|i| starts.get(i).copied())
                .min_by_key(|&s| s.abs_diff(target));
            if let Some(s) = near {
                if s > *cuts.last().unwrap_or(&start) {
                    cuts.push(s);
                }
            }
        }
        cuts.push(end);
        let read = |lo: u64, hi: u64| -> Result<Columns> {
            let mut t = Tailer::new(catalog.clone(), wait);
            t.seek(lo)?;
            Columns::read_fields(&mut t, hi, (hi - lo) as usize, cols, defs)
        };
        let ranges: Vec<(u64, u64)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
        let results: Vec<Result<Columns>> = std::thread::scope(|s| {
            let handles: Vec<_> = ranges[1..]
                .iter()
                .map(|&(lo, hi)| s.spawn(move || read(lo, hi)))
                .collect();
            let mut out = vec![read(ranges[0].0, ranges[0].1)];
            for h in handles {
                out.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            }
            out
        });
        let mut joined: Option<Columns> = None;
        for (r, &(_, hi)) in results.into_iter().zip(&ranges) {
            let part = r?;
            let whole = part.next_seq >= hi;
            match joined.as_mut() {
                None => joined = Some(part),
                Some(b) => {
                    if !b.append(&part) {
                        break;
                    }
                }
            }
            if !whole {
                break;
            }
        }
        if let Some(b) = joined.as_mut() {
            // Holes left rows to read before `max_rows` or the end: read
            // them serially, as the serial read would have.
            if b.next_seq >= end && end < whole_end && b.rows < max_rows {
                let mut t = Tailer::new(catalog.clone(), wait);
                t.seek(b.next_seq)?;
                let more = Columns::read_fields(&mut t, whole_end, max_rows - b.rows, cols, defs)?;
                b.append(&more);
            }
        }
        Ok(joined)
    }
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
