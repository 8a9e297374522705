//! Columnar reads: messages as Arrow-layout buffers, built without a
//! per-message object, for `read_arrow` and Spark.

use crate::error::Result;
use crate::reader::tailer::Tailer;

/// Columns of consecutive messages in Arrow's layout: validity bitmaps are
/// LSB-first, offsets are `i32` (a read stops before any column's data
/// would pass `i32::MAX` bytes).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Columns {
    /// Messages read.
    pub rows: usize,
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

fn set_bit(bits: &mut Vec<u8>, i: usize, on: bool) {
    if i / 8 >= bits.len() {
        bits.push(0);
    }
    if on {
        bits[i / 8] |= 1 << (i % 8);
    }
}

impl Columns {
    /// Reads from `tailer` until sequence `end`, `max_rows` rows, or the end
    /// of what is published.
    pub fn read(tailer: &mut Tailer, end: u64, max_rows: usize) -> Result<Columns> {
        let mut b = Columns {
            key_offsets: vec![0],
            headers_offsets: vec![0],
            header_name_offsets: vec![0],
            header_value_offsets: vec![0],
            payload_offsets: vec![0],
            ..Columns::default()
        };
        let hint = max_rows
            .min(end.saturating_sub(tailer.next_seq()) as usize)
            .min(1 << 20);
        b.seq.reserve(hint);
        b.timestamp.reserve(hint);
        b.payload_offsets.reserve(hint);
        while b.rows < max_rows && tailer.next_seq() < end {
            let Some(m) = tailer.read_next()? else { break };
            let key_len = m.key.map_or(0, <[u8]>::len);
            let header_bytes: usize = match m.headers().len() {
                0 => 0,
                _ => m.headers().map(|h| h.name.len() + h.value.len()).sum(),
            };
            if b.payload_data.len() + m.payload.len() > LIMIT
                || b.key_data.len() + key_len > LIMIT
                || b.header_value_data.len() + header_bytes > LIMIT
            {
                // Leave the message for the next read.
                let seq = m.seq;
                tailer.seek(seq)?;
                break;
            }
            let i = b.rows;
            b.seq.push(m.seq as i64);
            b.timestamp.push(m.timestamp as i64);
            set_bit(&mut b.key_valid, i, m.key.is_some());
            if m.key.is_none() {
                b.key_nulls += 1;
            }
            b.key_data.extend_from_slice(m.key.unwrap_or_default());
            b.key_offsets.push(b.key_data.len() as i32);
            let mut has_headers = false;
            for h in m.headers() {
                has_headers = true;
                b.header_name_data.extend_from_slice(h.name.as_bytes());
                b.header_name_offsets.push(b.header_name_data.len() as i32);
                b.header_value_data.extend_from_slice(h.value);
                b.header_value_offsets
                    .push(b.header_value_data.len() as i32);
            }
            set_bit(&mut b.headers_valid, i, has_headers);
            if !has_headers {
                b.headers_nulls += 1;
            }
            b.headers_offsets
                .push(b.header_name_offsets.len() as i32 - 1);
            b.payload_data.extend_from_slice(m.payload);
            b.payload_offsets.push(b.payload_data.len() as i32);
            b.rows += 1;
        }
        Ok(b)
    }
}
