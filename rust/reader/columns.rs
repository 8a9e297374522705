//! Columnar reads: messages as Arrow-layout buffers, built without a
//! per-message object, for `read_arrow` and Spark.

use crate::error::Result;
use crate::format::record::{HeaderIter, RecordView};
use crate::reader::tailer::Tailer;

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
    /// Row `i`'s payload is `payload_data[payload_offsets[i]..payload_offsets[i+1]]`.
    pub payload_offsets: Vec<i32>,
    /// The payloads' bytes.
    pub payload_data: Vec<u8>,
}

const LIMIT: usize = i32::MAX as usize;

/// Which of the variable-size columns a read fills (`seq` and `timestamp`
/// always are); one left out stays empty: no offsets, no data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSet {
    /// The `key` column.
    pub key: bool,
    /// The `headers` column.
    pub headers: bool,
    /// The `payload` column.
    pub payload: bool,
}

impl ColumnSet {
    /// Every column.
    pub const ALL: ColumnSet = ColumnSet {
        key: true,
        headers: true,
        payload: true,
    };
}

/// Most rows whose fixed-size columns are reserved up front.
const RESERVE_ROWS: usize = 1 << 20;
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
        let mut b = Columns::default();
        let offsets = |on: bool| if on { vec![0] } else { Vec::new() };
        b.key_offsets = offsets(cols.key);
        b.headers_offsets = offsets(cols.headers);
        b.header_name_offsets = offsets(cols.headers);
        b.header_value_offsets = offsets(cols.headers);
        b.payload_offsets = offsets(cols.payload);
        let hint_for = |on: bool| if on { hint } else { 0 };
        b.seq.reserve(hint);
        b.timestamp.reserve(hint);
        b.payload_offsets.reserve(hint_for(cols.payload));
        b.key_offsets.reserve(hint_for(cols.key));
        b.headers_offsets.reserve(hint_for(cols.headers));
        b.key_valid.reserve(hint_for(cols.key).div_ceil(8));
        b.headers_valid.reserve(hint_for(cols.headers).div_ceil(8));
        b
    }

    /// Appends one message, unless a column would pass `i32::MAX` bytes
    /// (then returns false and leaves the batch as it was).
    #[inline]
    pub(crate) fn push(
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
        {
            return false;
        }
        let i = self.rows;
        if i == 0 {
            // Messages of a queue are often of one size: reserve for as many
            // as expected like the first, so the column is not copied as it grows.
            let want = hint.saturating_mul(payload.len()).min(RESERVE_BYTES);
            self.payload_data.reserve(want);
        }
        self.seq.push(seq as i64);
        self.timestamp.push(rec.timestamp as i64);
        self.push_key(i, rec.key);
        self.push_headers(i, headers);
        self.payload_data.extend_from_slice(payload);
        self.payload_offsets.push(self.payload_data.len() as i32);
        self.rows += 1;
        true
    }

    /// Row `i`'s key: its validity bit, bytes and end offset (shared by
    /// [`Columns::push`] and [`Columns::push_some`]).
    #[inline]
    fn push_key(&mut self, i: usize, key: Option<&[u8]>) {
        set_bit(&mut self.key_valid, i, key.is_some());
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
        {
            return false;
        }
        let i = self.rows;
        if i == 0 && cols.payload {
            let want = hint.saturating_mul(payload.len()).min(RESERVE_BYTES);
            self.payload_data.reserve(want);
        }
        self.seq.push(seq as i64);
        self.timestamp.push(rec.timestamp as i64);
        if cols.key {
            self.push_key(i, key);
        }
        if cols.headers {
            self.push_headers(i, headers);
        }
        if cols.payload {
            self.payload_data.extend_from_slice(payload);
            self.payload_offsets.push(self.payload_data.len() as i32);
        }
        self.rows += 1;
        true
    }

    /// Reads from `tailer` until sequence `end`, `max_rows` rows, or the end
    /// of what is published. Runs of plain frames are read in bulk
    /// ([`Tailer::read_run`]: a sealed file verified once by its footer's
    /// CRC, other frames each by their own); file switches, the end of the
    /// data and damage go through [`Tailer::read_next`].
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
        let hint = max_rows
            .min(end.saturating_sub(tailer.next_seq()) as usize)
            .min(RESERVE_ROWS);
        let mut b = Columns::empty(hint, cols);
        let mut full = false;
        while !full && b.rows < max_rows && tailer.next_seq() < end {
            let want = (max_rows - b.rows).min((end - tailer.next_seq()) as usize);
            let taken = tailer.read_run(want, &mut |m| {
                let ok = b.push(m.seq, m.record(), m.payload, hint, cols);
                full = !ok;
                ok
            })?;
            if full || taken > 0 {
                continue;
            }
            let Some(m) = tailer.read_next()? else { break };
            if m.seq >= end {
                // Holes (sequences key compaction dropped) up to `end`
                // were stepped over: this one belongs to the next batch.
                let seq = m.seq;
                tailer.seek(seq)?;
                break;
            }
            if !b.push(m.seq, m.record(), m.payload, hint, cols) {
                // Leave the message for the next batch.
                let seq = m.seq;
                tailer.seek(seq)?;
                break;
            }
        }
        b.next_seq = tailer.next_seq();
        Ok(b)
    }
}
