//! Batches (format 9): `count` messages compressed together in one frame
//! (FORMAT.md "Batches compressed together"): the head, the block of
//! members and each member's checks.

use super::codec::{
    decode, RecordView, BATCH_HEAD_LEN, EXT_BATCH, EXT_ROW_BATCH, EXT_TOMBSTONE, FLAG_EXPIRY,
    FLAG_EXTENSION, FLAG_HEADERS, FLAG_KEY, FLAG_KEY_TEXT, FLAG_PRIORITY, RECORD_FIXED_LEN,
};
use super::hole::seqs_of;
use crate::format::compression::Codec;
use crate::format::{le_u16, le_u32, le_u64};

/// True when `record` (its bytes, not decoded) is a batch ([`EXT_BATCH`]),
/// of records or of rows ([`EXT_ROW_BATCH`]).
#[inline]
pub fn is_batch_record(record: &[u8]) -> bool {
    record.len() >= BATCH_HEAD_LEN
        && record[0] == FLAG_EXTENSION
        && matches!(record[9], EXT_BATCH | EXT_ROW_BATCH)
}

/// The sequence of a batch record's first member (its bytes; a record
/// [`is_batch_record`] says is one).
#[inline]
pub fn batch_first_seq(record: &[u8]) -> u64 {
    le_u64(record, 12).unwrap_or(0)
}

/// The sequence after the frame whose record is `record`, for a walker that
/// stands on it at sequence `at_seq`: a batch's first sequence plus its
/// count (a walker may land on a batch at any of its members, by an index
/// entry), else `at_seq` plus [`seqs_of`].
#[inline]
pub fn seq_after(record: &[u8], at_seq: u64) -> u64 {
    if is_batch_record(record) {
        batch_first_seq(record).saturating_add(seqs_of(record))
    } else {
        at_seq.saturating_add(seqs_of(record))
    }
}

/// Writes the head of a batch record's body (what follows flags and
/// timestamp, before the block): extension byte, `count`, `first_seq`
/// (a placeholder the I/O thread overwrites, see [`set_batch_first_seq`]),
/// codec and `raw_len`.
pub fn encode_batch_head(count: u16, codec: Codec, raw_len: u32, out: &mut Vec<u8>) {
    out.push(EXT_BATCH);
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.push(codec as u8);
    out.extend_from_slice(&raw_len.to_le_bytes());
}

/// Writes the head of a row batch's body (format 12, [`EXT_ROW_BATCH`]):
/// as [`encode_batch_head`], with codec 0 when the block is stored as is.
pub fn encode_row_batch_head(count: u16, codec: Option<Codec>, raw_len: u32, out: &mut Vec<u8>) {
    out.push(EXT_ROW_BATCH);
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.push(codec.map_or(0, |c| c as u8));
    out.extend_from_slice(&raw_len.to_le_bytes());
}

/// Offset of `first_seq` in a batch record's body (after flags and timestamp).
pub const BATCH_BODY_FIRST_SEQ_AT: usize = 3;

/// True when a record body an appender encoded (flags `flags`) is a batch.
#[inline]
pub fn body_is_batch(flags: u8, body: &[u8]) -> bool {
    flags == FLAG_EXTENSION && matches!(body.first(), Some(&(EXT_BATCH | EXT_ROW_BATCH)))
}

/// The member count of a batch record body an appender encoded (see
/// [`body_is_batch`]).
pub fn seqs_of_body_batch(body: &[u8]) -> u64 {
    u64::from(le_u16(body, 1).unwrap_or(1).max(1))
}

/// Sets the first sequence in a batch record body (the I/O thread knows it).
pub fn set_batch_first_seq(body: &mut [u8], seq: u64) {
    body[BATCH_BODY_FIRST_SEQ_AT..BATCH_BODY_FIRST_SEQ_AT + 8].copy_from_slice(&seq.to_le_bytes());
}

/// Appends one member to a batch block under construction: `len:u32 |
/// record` with `flags`, a zero timestamp and `body` (see
/// [`Record::encode_body`]).
pub fn push_batch_member(
    block: &mut Vec<u8>,
    flags: u8,
    body_len: usize,
    body: impl FnOnce(&mut Vec<u8>),
) {
    block.extend_from_slice(&((RECORD_FIXED_LEN + body_len) as u32).to_le_bytes());
    block.push(flags);
    block.extend_from_slice(&0u64.to_le_bytes());
    let start = block.len();
    body(block);
    debug_assert_eq!(block.len() - start, body_len);
}

/// Checks that a decompressed batch block is exactly `count` members
/// (`len:u32 | record` each, lengths within the block); each member's
/// record is checked when it is read ([`batch_member`]).
pub fn check_batch_block(block: &[u8], count: u16) -> Result<(), &'static str> {
    let mut at = 0usize;
    for _ in 0..count {
        let len = le_u32(block, at).ok_or("batch member length past the block")? as usize;
        at = at
            .checked_add(4 + len)
            .filter(|&end| end <= block.len())
            .ok_or("batch member past the block")?;
    }
    if at != block.len() {
        return Err("batch block longer than its members");
    }
    Ok(())
}

/// Flags a batch member's record may carry: key (bytes or text), headers,
/// expiry, priority, and the extension byte for a tombstone only; never a
/// topic, a compressed payload, or another extension bit (sealed, hole,
/// batch).
pub const MEMBER_FLAGS: u8 =
    FLAG_KEY | FLAG_KEY_TEXT | FLAG_HEADERS | FLAG_EXPIRY | FLAG_PRIORITY | FLAG_EXTENSION;

/// Checks what a batch member's record (decoded) may be: see [`MEMBER_FLAGS`].
fn check_member(v: &RecordView<'_>) -> Result<(), &'static str> {
    if v.flags & !MEMBER_FLAGS != 0 || (v.ext != 0 && v.ext != EXT_TOMBSTONE) {
        return Err(
            "batch member with a topic, compression or an extension bit other than tombstone",
        );
    }
    Ok(())
}

/// The members of a decompressed batch block of `count` members (checked
/// by [`check_batch_block`] first), in order: each member's record decoded
/// and checked as [`batch_member`] does (its timestamp field is 0: a
/// member's timestamp is the batch's). Stops after the first error.
pub fn batch_members(
    block: &[u8],
    count: u16,
) -> impl Iterator<Item = Result<RecordView<'_>, &'static str>> + '_ {
    let mut at = 0usize;
    let mut failed = false;
    (0..count).map_while(move |i| {
        if failed {
            return None;
        }
        match batch_member(block, count, i, at, i) {
            Ok((range, v)) => {
                at = range.end;
                Some(Ok(v))
            }
            Err(e) => {
                failed = true;
                Some(Err(e))
            }
        }
    })
}

/// Walks a decompressed batch block of `count` members from member `index`
/// at byte `at` (0, 0 for the start), returning where member `want`'s
/// record lies in `block` (the member after it starts at its end) and the
/// record decoded. The error says what is malformed: a
/// length past the block, a member that is itself a batch or hole, or
/// sealed, compressed or with a topic (members never are; see
/// [`MEMBER_FLAGS`]).
pub fn batch_member(
    block: &[u8],
    count: u16,
    mut index: u16,
    mut at: usize,
    want: u16,
) -> Result<(std::ops::Range<usize>, RecordView<'_>), &'static str> {
    if want >= count || index > want {
        return Err("batch member out of range");
    }
    loop {
        let len = le_u32(block, at).ok_or("batch member length past the block")? as usize;
        let start = at + 4;
        let rec = block
            .get(start..start.checked_add(len).ok_or("batch member too long")?)
            .ok_or("batch member past the block")?;
        if index == want {
            let v = decode(rec)?;
            check_member(&v)?;
            let end = start + len;
            if want + 1 == count && end != block.len() {
                return Err("batch block longer than its members");
            }
            return Ok((start..end, v));
        }
        at = start + len;
        index += 1;
    }
}
