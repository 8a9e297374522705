//! Building columns row by row: the push side of [`Columns`].

use super::*;

/// Makes room for `additional` more elements in column `v`: memory a
/// dropped result left on the shelf when there is some (see
/// `reader::spare`), else new memory. New memory gets the kernel's
/// ordinary 4 KiB pages: columns are no longer advised to use transparent
/// huge pages (`MADV_HUGEPAGE`), which made a fresh process's first large
/// read either fast or 5 to 10 times slower, by where the kernel found the
/// 2 MiB pages (docs/PERFORMANCE.md, "The first read_arrow, every time").
pub(super) fn grow<T: crate::reader::spare::Element>(v: &mut Vec<T>, additional: usize) {
    crate::reader::spare::reserve(v, additional);
}

/// Most payload bytes reserved up front (from the first message's size).
const RESERVE_BYTES: usize = 256 << 20;

pub(super) fn set_bit(bits: &mut Vec<u8>, i: usize, on: bool) {
    if i / 8 >= bits.len() {
        bits.push(0);
    }
    if on {
        bits[i / 8] |= 1 << (i % 8);
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

pub(super) use crate::format::bits::{append_bits, append_offsets};

/// Appends `src` to `dst`.
pub(super) fn append_vec<T: crate::reader::spare::Element>(dst: &mut Vec<T>, src: &[T]) {
    grow(dst, src.len());
    dst.extend_from_slice(src);
}

/// A nullable column of [`Columns`] (or a [`FieldColumn`]), borrowed as one
/// value: its validity bitmap, its null count, and its values `V`
/// ([`Bytes`]: offsets and data; or a `Vec` of fixed-size values). The
/// columns' public fields keep the layout Arrow takes (the bindings hand
/// them over as they are); this is the one place their valid / offsets /
/// data pattern is written: a row pushed, null rows filled in bulk, a
/// batch appended ([`Nullable::append`]). Built for each use by an
/// accessor such as [`Columns::key_column`]; inlined, it costs nothing
/// over the fields spelled out.
pub(super) struct Nullable<'a, V> {
    pub(super) valid: &'a mut Vec<u8>,
    pub(super) nulls: &'a mut usize,
    pub(super) values: V,
}

/// Variable-length values: row `i`'s are `data[offsets[i]..offsets[i+1]]`.
pub(super) struct Bytes<'a> {
    pub(super) offsets: &'a mut Vec<i32>,
    pub(super) data: &'a mut Vec<u8>,
}

/// List values: row `i`'s entries are `offsets[i]..offsets[i+1]` of a
/// child column (the headers' names and values), which has `entries` so
/// far.
pub(super) struct List<'a> {
    pub(super) offsets: &'a mut Vec<i32>,
    pub(super) entries: i32,
}

impl<V> Nullable<'_, V> {
    /// Row `i`'s validity bit and the null count.
    #[inline(always)]
    pub(super) fn set_valid(&mut self, i: usize, valid: bool) {
        set_bit(self.valid, i, valid);
        if !valid {
            *self.nulls += 1;
        }
    }
}

impl Nullable<'_, Bytes<'_>> {
    /// Appends row `i`: `value`'s bytes, or null.
    #[inline(always)]
    pub(super) fn push(&mut self, i: usize, value: Option<&[u8]>) {
        self.set_valid(i, value.is_some());
        if let Some(v) = value {
            self.values.data.extend_from_slice(v);
        }
        self.values.offsets.push(self.values.data.len() as i32);
    }

    /// Appends `n` null rows, the bitmap grown to `bytes` (see
    /// [`fill_zeroed`]: a column still all nulls stays untouched zeroed
    /// memory).
    pub(super) fn push_nulls(&mut self, bytes: usize, n: usize) {
        let end = self.values.data.len() as i32;
        fill_zeroed(self.valid, bytes, 0);
        *self.nulls += n;
        let len = self.values.offsets.len() + n;
        fill_zeroed(self.values.offsets, len, end);
    }

    /// Appends the `n` rows of `other` after this column's first `rows`.
    pub(super) fn append(&mut self, rows: usize, other: Nullable<'_, Bytes<'_>>, n: usize) {
        append_bits(self.valid, rows, other.valid, n);
        *self.nulls += *other.nulls;
        let base = self.values.data.len() as i32;
        append_offsets(self.values.offsets, other.values.offsets, base);
        append_vec(self.values.data, other.values.data);
    }
}

impl Nullable<'_, List<'_>> {
    /// Ends row `i`, whose entries were pushed to the child column (now
    /// `entries` long): a list, or null when it has none.
    #[inline(always)]
    pub(super) fn push(&mut self, i: usize, entries: i32, valid: bool) {
        self.set_valid(i, valid);
        self.values.offsets.push(entries);
    }

    /// Appends `n` null rows, the bitmap grown to `bytes`.
    pub(super) fn push_nulls(&mut self, bytes: usize, n: usize) {
        fill_zeroed(self.valid, bytes, 0);
        *self.nulls += n;
        let len = self.values.offsets.len() + n;
        fill_zeroed(self.values.offsets, len, self.values.entries);
    }

    /// Appends the `n` rows of `other` after this column's first `rows`
    /// (its child column is appended by the caller).
    pub(super) fn append(&mut self, rows: usize, other: Nullable<'_, List<'_>>, n: usize) {
        append_bits(self.valid, rows, other.valid, n);
        *self.nulls += *other.nulls;
        let base = self.values.entries;
        append_offsets(self.values.offsets, other.values.offsets, base);
    }
}

impl<T: Copy + Default + PartialEq + crate::reader::spare::Element> Nullable<'_, &mut Vec<T>> {
    /// Appends row `i`: `value`, valid or null (a null row holds `value`
    /// all the same, the default by convention).
    #[inline(always)]
    pub(super) fn push(&mut self, i: usize, valid: bool, value: T) {
        self.set_valid(i, valid);
        self.values.push(value);
    }

    /// Appends `n` null rows holding the default, the bitmap grown to
    /// `bytes`.
    pub(super) fn push_nulls(&mut self, bytes: usize, n: usize) {
        fill_zeroed(self.valid, bytes, 0);
        *self.nulls += n;
        let len = self.values.len() + n;
        fill_zeroed(self.values, len, T::default());
    }

    /// Appends the `n` rows of `other` after this column's first `rows`.
    pub(super) fn append(&mut self, rows: usize, other: Nullable<'_, &mut Vec<T>>, n: usize) {
        append_bits(self.valid, rows, other.valid, n);
        *self.nulls += *other.nulls;
        append_vec(self.values, other.values);
    }
}

impl FieldColumn {
    pub(super) fn new(def: FieldIndexDef) -> FieldColumn {
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
    pub(super) fn len_of(&self, rec: &RecordView<'_>) -> usize {
        match self.def.kind {
            FieldKind::Str => self.def.keys(rec).next().map_or(0, |k| k.len()),
            FieldKind::Int => 0,
        }
    }

    pub(super) fn push(&mut self, i: usize, rec: &RecordView<'_>) {
        let key = self.def.keys(rec).next();
        match self.def.kind {
            FieldKind::Str => self.text().push(i, key.as_deref()),
            FieldKind::Int => {
                let value = key.as_ref().and_then(|k| int_of_key(k)).unwrap_or(0);
                self.int().push(i, key.is_some(), value)
            }
        }
    }

    /// The column of a `str` field.
    #[inline(always)]
    pub(super) fn text(&mut self) -> Nullable<'_, Bytes<'_>> {
        Nullable {
            valid: &mut self.valid,
            nulls: &mut self.nulls,
            values: Bytes {
                offsets: &mut self.offsets,
                data: &mut self.data,
            },
        }
    }

    /// The column of an `int` field.
    #[inline(always)]
    pub(super) fn int(&mut self) -> Nullable<'_, &mut Vec<i64>> {
        Nullable {
            valid: &mut self.valid,
            nulls: &mut self.nulls,
            values: &mut self.ints,
        }
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
    /// fixed-size columns are full (one reservation per run of frames
    /// instead of a column doubled by `push` one row at a time).
    pub(super) fn reserve_more(&mut self, rows: usize) {
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
    pub(super) fn push(
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
    pub(super) fn push_bare(
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
    pub(super) fn reserve_payload(&mut self, hint: usize, len: usize) {
        grow(
            &mut self.payload_data,
            hint.saturating_mul(len).min(RESERVE_BYTES),
        );
    }

    /// Fills rows `bare_filled..upto` of the `key`, `headers` and `codec`
    /// columns `cols` asks for as bare rows: null key, null headers, null
    /// codec. A column still all nulls stays zeroed memory that is never
    /// written (see [`fill_zeroed`]).
    pub(super) fn fill_bare(&mut self, upto: usize, cols: ColumnSet) {
        let n = upto.saturating_sub(self.bare_filled);
        if n == 0 {
            return;
        }
        // Validity bits of the new rows are 0: the bitmaps only grow.
        let bytes = upto.div_ceil(8);
        if cols.key {
            self.key_column().push_nulls(bytes, n);
            fill_zeroed(&mut self.key_text, bytes, 0);
        }
        if cols.headers {
            self.headers_column().push_nulls(bytes, n);
        }
        if cols.codec {
            self.codec_column().push_nulls(bytes, n);
        }
        self.bare_filled = upto;
    }

    /// Row `i`'s key: its validity bit, bytes and end offset (shared by
    /// [`Columns::push`] and [`Columns::push_some`]).
    #[inline]
    pub(super) fn push_key(&mut self, i: usize, key: Option<&[u8]>, is_text: bool) {
        set_bit(&mut self.key_text, i, key.is_some() && is_text);
        self.key_column().push(i, key);
    }

    /// Row `i`'s headers: name and value bytes and offsets, the list's
    /// validity bit (null when there are none) and its end offset.
    #[inline]
    pub(super) fn push_headers(&mut self, i: usize, headers: HeaderIter<'_>) {
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
        let entries = self.header_name_offsets.len() as i32 - 1;
        self.headers_column().push(i, entries, has_headers);
    }

    /// As [`Columns::push`], for a selection of columns: the others stay
    /// empty (their bytes are not even counted against the limit).
    #[cold]
    pub(super) fn push_some(
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
    pub(super) fn extra_fits(&self, rec: &RecordView<'_>, cols: ColumnSet) -> bool {
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
    pub(super) fn push_extra(&mut self, i: usize, rec: &RecordView<'_>, cols: ColumnSet) {
        if rec.flags & (FLAG_TOPIC | FLAG_EXPIRY | FLAG_PRIORITY) != 0 {
            self.any_fields = true;
            self.fill_plain(i, cols);
            self.push_fields(i, rec, cols);
            self.fields_filled = i + 1;
        }
        if cols.codec {
            let name = rec.codec.map(|c| c.name().as_bytes());
            self.codec_column().push(i, name);
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
    pub(super) fn fill_plain(&mut self, upto: usize, cols: ColumnSet) {
        let n = upto.saturating_sub(self.fields_filled);
        if n == 0 {
            return;
        }
        // Validity bits of the new rows are 0: the bitmaps only grow.
        let bytes = upto.div_ceil(8);
        if cols.topic {
            self.topic_column().push_nulls(bytes, n);
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
            self.expires_column().push_nulls(bytes, n);
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
    pub(super) fn push_fields(&mut self, i: usize, rec: &RecordView<'_>, cols: ColumnSet) {
        if cols.topic {
            self.topic_column().push(i, rec.topic.map(str::as_bytes));
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
            let at = rec.expires_at.map(|t| t as i64);
            self.expires_column().push(i, at.is_some(), at.unwrap_or(0));
        }
    }

    /// The `key` column (its text bitmap, `key_text`, is the caller's).
    #[inline(always)]
    pub(super) fn key_column(&mut self) -> Nullable<'_, Bytes<'_>> {
        Nullable {
            valid: &mut self.key_valid,
            nulls: &mut self.key_nulls,
            values: Bytes {
                offsets: &mut self.key_offsets,
                data: &mut self.key_data,
            },
        }
    }

    /// The `headers` column (its entries, names and values, are the
    /// caller's).
    #[inline(always)]
    pub(super) fn headers_column(&mut self) -> Nullable<'_, List<'_>> {
        let entries = self.header_name_offsets.len() as i32 - 1;
        Nullable {
            valid: &mut self.headers_valid,
            nulls: &mut self.headers_nulls,
            values: List {
                offsets: &mut self.headers_offsets,
                entries,
            },
        }
    }

    /// The `topic` column.
    #[inline(always)]
    pub(super) fn topic_column(&mut self) -> Nullable<'_, Bytes<'_>> {
        Nullable {
            valid: &mut self.topic_valid,
            nulls: &mut self.topic_nulls,
            values: Bytes {
                offsets: &mut self.topic_offsets,
                data: &mut self.topic_data,
            },
        }
    }

    /// The `codec` column.
    #[inline(always)]
    pub(super) fn codec_column(&mut self) -> Nullable<'_, Bytes<'_>> {
        Nullable {
            valid: &mut self.codec_valid,
            nulls: &mut self.codec_nulls,
            values: Bytes {
                offsets: &mut self.codec_offsets,
                data: &mut self.codec_data,
            },
        }
    }

    /// The `expires_at` column.
    #[inline(always)]
    pub(super) fn expires_column(&mut self) -> Nullable<'_, &mut Vec<i64>> {
        Nullable {
            valid: &mut self.expires_valid,
            nulls: &mut self.expires_nulls,
            values: &mut self.expires_at,
        }
    }
}
