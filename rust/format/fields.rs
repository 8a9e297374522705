//! Secondary index files (`NAME.field-FIELD`): for one sealed data file and
//! one declared header field, the sequences of the messages carrying each
//! value, ordered by value, so that equality, range, `in` and prefix
//! queries read a few 4 KiB blocks instead of the data file.
//!
//! The layout is a two-level B+Tree, bulk-loaded: sorted leaf blocks of
//! about 4 KiB and a sparse top level (the first value of each block), read
//! once and searched by binary search. A value's sequences live in its leaf
//! entry (the seed's data block, inlined).
//!
//! ```text
//! header    (96 bytes)
//!   0  8  magic "LMQFLDX\0"
//!   8  4  version u32: 1 for a header's index, 2 for a schema field's
//!  12  1  kind u8: 1 str, 2 int
//!  13  1  name_len u8 (bytes of the field name, 1..=255)
//!  14  1  source u8: 0 a header of that name, 1 a field of a typed
//!         queue's schema (its value in each row, nulls not listed)
//!  15  1  zero
//!  16  8  file_number of the data file
//!  24  8  first_seq of the data file
//!  32  8  end_seq of the data file (one past its last message)
//!  40  8  frames_crc of the data file (its footer's): ties the index to the data
//!  48  8  row_count u64: (value, message) pairs listed
//!  56  8  value_count u64: distinct values
//!  64  4  block_count u32
//!  68  4  top_len u32: bytes of the top section that follows the header
//!  72 16  zero
//!  88  8  CRC-64 of bytes 0..88 and of the top section
//! top section:
//!   name | min_len u16 | min | max_len u16 | max          (the zone map)
//!   block_count × (first_len u16 | first value | block_at u64 | block_len u32
//!                  | block_crc u64)
//! blocks (leaves), in value order, each about 4 KiB (one entry larger than
//! that gets a block of its own):
//!   entries: value_len u16 | value | count u32 | count × delta u32
//!   (delta = seq - first_seq, ascending)
//! ```
//! Values are keys that compare as bytes: a `str` value is its UTF-8
//! bytes; an `int` value (i64) is 8 bytes big-endian of the value with its
//! sign bit flipped, so byte order is numeric order. A schema field's
//! index is `str` for string and binary fields (the bytes) and `int` for
//! bool (0, 1), the signed integers, uint8 to uint32, timestamp (µs) and
//! date (days). A value is at most 65,535 bytes (`value_len`): a file
//! holding a longer one gets no index. `min`/`max` are the
//! smallest and largest value (both empty when the file has none). The
//! file is derived data: readers use it only when every check passes, and
//! read the data file otherwise.

use super::crc::crc64;
use super::{le_u16, le_u32, le_u64};

/// First eight bytes of a secondary index file.
pub const FIELDS_MAGIC: [u8; 8] = *b"LMQFLDX\0";
/// Version of the secondary index layout of a header's index; a schema
/// field's is the next one (the same layout, byte 14 = 1), so a build that
/// knows only header indexes never reads one as a header's.
pub const FIELDS_VERSION: u32 = 1;
/// Bytes of the header.
pub const FIELDS_HEADER_LEN: usize = 96;
/// Longest value (key) an index file lists, in bytes.
pub const MAX_KEY_LEN: usize = u16::MAX as usize;
/// Target size of a leaf block.
pub const BLOCK_LEN: usize = 4096;

/// The type of an indexed field's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FieldKind {
    /// Text headers; values compare as UTF-8 bytes.
    Str,
    /// Signed 64-bit integers: a text header holding one in decimal, or a
    /// bytes header of 8 bytes little-endian.
    Int,
}

impl FieldKind {
    /// The kind's byte in the header.
    pub fn code(self) -> u8 {
        match self {
            FieldKind::Str => 1,
            FieldKind::Int => 2,
        }
    }

    /// The kind of byte `b`.
    pub fn from_code(b: u8) -> Option<FieldKind> {
        match b {
            1 => Some(FieldKind::Str),
            2 => Some(FieldKind::Int),
            _ => None,
        }
    }

    /// Its name in options and `metadata.json`: `"str"` or `"int"`.
    pub fn name(self) -> &'static str {
        match self {
            FieldKind::Str => "str",
            FieldKind::Int => "int",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<FieldKind> {
        match s {
            "str" => Some(FieldKind::Str),
            "int" => Some(FieldKind::Int),
            _ => None,
        }
    }

    /// The key of a header value, or `None` when the header does not hold
    /// a value of this kind (it is then not indexed, and never matches).
    pub fn key_of(self, value: &[u8], is_text: bool) -> Option<Vec<u8>> {
        match self {
            FieldKind::Str => is_text.then(|| value.to_vec()),
            FieldKind::Int if is_text => {
                let v: i64 = std::str::from_utf8(value).ok()?.parse().ok()?;
                Some(int_key(v).to_vec())
            }
            FieldKind::Int => Some(int_key(i64::from_le_bytes(value.try_into().ok()?)).to_vec()),
        }
    }
}

/// The order-preserving key of integer `v`.
pub fn int_key(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

/// The integer of key `k` (8 bytes), the inverse of [`int_key`].
pub fn int_of_key(k: &[u8]) -> Option<i64> {
    Some((u64::from_be_bytes(k.try_into().ok()?) ^ (1 << 63)) as i64)
}

/// What the index is of: the data file and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldsOf {
    /// The data file's number.
    pub file_number: u64,
    /// Its first sequence.
    pub first_seq: u64,
    /// One past its last sequence.
    pub end_seq: u64,
    /// Its footer's CRC of the frame area.
    pub frames_crc: u64,
    /// The header field.
    pub name: String,
    /// Its kind.
    pub kind: FieldKind,
    /// True when `name` is a field of the queue's schema, not a header.
    pub schema_field: bool,
}

/// One leaf block as the top level lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRef {
    /// The smallest value in the block.
    pub first: Vec<u8>,
    /// Offset of the block in the file.
    pub at: u64,
    /// Its bytes.
    pub len: u32,
    crc: u64,
}

/// The header and top level of an index file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldsTop {
    /// (value, message) pairs listed.
    pub row_count: u64,
    /// Distinct values.
    pub value_count: u64,
    /// The smallest value (empty when there is none).
    pub min: Vec<u8>,
    /// The largest value.
    pub max: Vec<u8>,
    /// The leaf blocks, in value order.
    pub blocks: Vec<BlockRef>,
}

/// Encodes the index of `of` from `values`: `(key, sequences)` sorted by
/// key, each list ascending and within `of`'s sequences.
pub fn encode(of: &FieldsOf, values: &[(Vec<u8>, Vec<u64>)]) -> Vec<u8> {
    encode_groups(of, values.iter().map(|(k, s)| (k.as_slice(), s.as_slice())))
}

/// [`encode`] of `(key, sequences)` groups as slices, in key order.
pub fn encode_groups<'a>(
    of: &FieldsOf,
    values: impl Iterator<Item = (&'a [u8], &'a [u64])>,
) -> Vec<u8> {
    // Leaves first: cut at about BLOCK_LEN.
    let mut blocks: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut cur_first: Vec<u8> = Vec::new();
    let mut rows = 0u64;
    let (mut value_count, mut min, mut max): (u64, &[u8], &[u8]) = (0, &[], &[]);
    for (key, seqs) in values {
        if value_count == 0 {
            min = key;
        }
        max = key;
        value_count += 1;
        let len = 2 + key.len() + 4 + 4 * seqs.len();
        if !cur.is_empty() && cur.len() + len > BLOCK_LEN {
            blocks.push((std::mem::take(&mut cur_first), std::mem::take(&mut cur)));
        }
        if cur.is_empty() {
            cur_first = key.to_vec();
        }
        cur.extend_from_slice(&(key.len() as u16).to_le_bytes());
        cur.extend_from_slice(key);
        cur.extend_from_slice(&(seqs.len() as u32).to_le_bytes());
        for s in seqs {
            cur.extend_from_slice(&((s - of.first_seq) as u32).to_le_bytes());
        }
        rows += seqs.len() as u64;
    }
    if !cur.is_empty() {
        blocks.push((cur_first, cur));
    }
    let mut top = Vec::new();
    top.extend_from_slice(of.name.as_bytes());
    for v in [min, max] {
        top.extend_from_slice(&(v.len() as u16).to_le_bytes());
        top.extend_from_slice(v);
    }
    let dir_len: usize = blocks.iter().map(|(f, _)| 2 + f.len() + 8 + 4 + 8).sum();
    let mut at = (FIELDS_HEADER_LEN + top.len() + dir_len) as u64;
    for (first, bytes) in &blocks {
        top.extend_from_slice(&(first.len() as u16).to_le_bytes());
        top.extend_from_slice(first);
        top.extend_from_slice(&at.to_le_bytes());
        top.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        top.extend_from_slice(&crc64(&[bytes]).to_le_bytes());
        at += bytes.len() as u64;
    }
    let mut out = vec![0u8; FIELDS_HEADER_LEN];
    out[0..8].copy_from_slice(&FIELDS_MAGIC);
    out[8..12].copy_from_slice(&(FIELDS_VERSION + u32::from(of.schema_field)).to_le_bytes());
    out[12] = of.kind.code();
    out[13] = of.name.len() as u8;
    out[14] = u8::from(of.schema_field);
    out[16..24].copy_from_slice(&of.file_number.to_le_bytes());
    out[24..32].copy_from_slice(&of.first_seq.to_le_bytes());
    out[32..40].copy_from_slice(&of.end_seq.to_le_bytes());
    out[40..48].copy_from_slice(&of.frames_crc.to_le_bytes());
    out[48..56].copy_from_slice(&rows.to_le_bytes());
    out[56..64].copy_from_slice(&value_count.to_le_bytes());
    out[64..68].copy_from_slice(&(blocks.len() as u32).to_le_bytes());
    out[68..72].copy_from_slice(&(top.len() as u32).to_le_bytes());
    let crc = crc64(&[&out[..88], &top]);
    out[88..96].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&top);
    for (_, bytes) in &blocks {
        out.extend_from_slice(bytes);
    }
    out
}

/// The length of header and top section, from the first
/// [`FIELDS_HEADER_LEN`] bytes of a file.
pub fn head_len(b: &[u8]) -> Option<usize> {
    FIELDS_HEADER_LEN.checked_add(le_u32(b, 68)? as usize)
}

/// Decodes the header and top section from the start of an index file
/// (`b` holds at least [`head_len`] bytes). `None` when anything does not
/// check out, or the index is of another data file or field than `of`.
pub fn decode_top(b: &[u8], of: &FieldsOf) -> Option<FieldsTop> {
    if b.get(0..8)? != FIELDS_MAGIC || le_u32(b, 8)? != FIELDS_VERSION + u32::from(*b.get(14)?) {
        return None;
    }
    let top = b.get(FIELDS_HEADER_LEN..head_len(b)?)?;
    if crc64(&[&b[..88], top]) != le_u64(b, 88)? {
        return None;
    }
    let name_len = *b.get(13)? as usize;
    let found = FieldsOf {
        file_number: le_u64(b, 16)?,
        first_seq: le_u64(b, 24)?,
        end_seq: le_u64(b, 32)?,
        frames_crc: le_u64(b, 40)?,
        name: std::str::from_utf8(top.get(..name_len)?).ok()?.to_string(),
        kind: FieldKind::from_code(*b.get(12)?)?,
        schema_field: match b.get(14..16)? {
            [0, 0] => false,
            [1, 0] => true,
            _ => return None,
        },
    };
    if found != *of {
        return None;
    }
    let mut at = name_len;
    let value = |at: &mut usize| -> Option<Vec<u8>> {
        let len = le_u16(top, *at)? as usize;
        let v = top.get(*at + 2..*at + 2 + len)?.to_vec();
        *at += 2 + len;
        Some(v)
    };
    let min = value(&mut at)?;
    let max = value(&mut at)?;
    let count = le_u32(b, 64)? as usize;
    let mut blocks = Vec::with_capacity(count.min(top.len()));
    for _ in 0..count {
        let first = value(&mut at)?;
        blocks.push(BlockRef {
            first,
            at: le_u64(top, at)?,
            len: le_u32(top, at + 8)?,
            crc: le_u64(top, at + 12)?,
        });
        at += 20;
    }
    (at == top.len()).then_some(FieldsTop {
        row_count: le_u64(b, 48)?,
        value_count: le_u64(b, 56)?,
        min,
        max,
        blocks,
    })
}

impl BlockRef {
    /// Decodes the block's entries from `b` (its bytes), as `(value,
    /// sequences)` with sequences offset by `first_seq`; `None` when the
    /// bytes fail their CRC or do not parse.
    pub fn decode(&self, b: &[u8], first_seq: u64) -> Option<Vec<(Vec<u8>, Vec<u64>)>> {
        if b.len() != self.len as usize || crc64(&[b]) != self.crc {
            return None;
        }
        let mut out = Vec::new();
        let mut at = 0;
        while at < b.len() {
            let len = le_u16(b, at)? as usize;
            let value = b.get(at + 2..at + 2 + len)?.to_vec();
            at += 2 + len;
            let count = le_u32(b, at)? as usize;
            at += 4;
            let deltas = b.get(at..at.checked_add(count.checked_mul(4)?)?)?;
            at += deltas.len();
            let seqs = deltas
                .chunks_exact(4)
                .map(|d| {
                    first_seq.checked_add(u64::from(u32::from_le_bytes([d[0], d[1], d[2], d[3]])))
                })
                .collect::<Option<Vec<u64>>>()?;
            out.push((value, seqs));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of() -> FieldsOf {
        FieldsOf {
            file_number: 3,
            first_seq: 100,
            end_seq: 10_100,
            frames_crc: 99,
            name: "customer".into(),
            kind: FieldKind::Str,
            schema_field: false,
        }
    }

    #[test]
    fn int_keys_sort_as_numbers() {
        let vals = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        let keys: Vec<_> = vals.iter().map(|&v| int_key(v)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(int_of_key(&int_key(-42)), Some(-42));
        assert_eq!(
            FieldKind::Int.key_of(b"-3", true),
            Some(int_key(-3).to_vec())
        );
        assert_eq!(
            FieldKind::Int.key_of(&9i64.to_le_bytes(), false),
            Some(int_key(9).to_vec())
        );
        assert_eq!(FieldKind::Int.key_of(b"3.5", true), None);
        assert_eq!(FieldKind::Str.key_of(b"c7", false), None);
    }

    #[test]
    fn round_trip_spans_blocks_and_refuses_damage() {
        let values: Vec<(Vec<u8>, Vec<u64>)> = (0..1000u64)
            .map(|i| {
                (
                    format!("c{i:04}").into_bytes(),
                    vec![100 + i, 100 + i + 1000],
                )
            })
            .collect();
        let b = encode(&of(), &values);
        let top = decode_top(&b[..head_len(&b).unwrap()], &of()).unwrap();
        assert!(top.blocks.len() > 3, "{} blocks", top.blocks.len());
        assert_eq!((top.row_count, top.value_count), (2000, 1000));
        assert_eq!(
            (top.min.as_slice(), top.max.as_slice()),
            (&b"c0000"[..], &b"c0999"[..])
        );
        let mut all = Vec::new();
        for blk in &top.blocks {
            let bytes = &b[blk.at as usize..blk.at as usize + blk.len as usize];
            let got = blk.decode(bytes, 100).unwrap();
            assert_eq!(got[0].0, blk.first);
            all.extend(got);
        }
        assert_eq!(all, values);
        // Another data file or field, a flipped bit anywhere: refused.
        assert!(decode_top(&b, &FieldsOf { end_seq: 1, ..of() }).is_none());
        assert!(decode_top(
            &b,
            &FieldsOf {
                kind: FieldKind::Int,
                ..of()
            }
        )
        .is_none());
        // A header's index is not a schema field's of the same name, nor
        // the other way round.
        let field = FieldsOf {
            schema_field: true,
            ..of()
        };
        assert!(decode_top(&b, &field).is_none());
        let b2 = encode(&field, &values);
        assert_eq!((b2[8], b2[14]), (2, 1));
        assert!(decode_top(&b2, &field).is_some());
        assert!(decode_top(&b2, &of()).is_none());
        let mut bad = b.clone();
        bad[FIELDS_HEADER_LEN + 3] ^= 1;
        assert!(decode_top(&bad, &of()).is_none());
        let blk = &top.blocks[1];
        let mut bad = b.clone();
        bad[blk.at as usize + 5] ^= 1;
        assert!(blk
            .decode(
                &bad[blk.at as usize..blk.at as usize + blk.len as usize],
                100
            )
            .is_none());
        assert!(decode_top(&b[..50], &of()).is_none());
    }
}
