//! Holes (format 8): records standing for `count` sequences key
//! compaction dropped (FORMAT.md "Holes and key compaction").

use super::codec::{EXT_BATCH, EXT_HOLE, EXT_ROW_BATCH, FLAG_EXTENSION, HOLE_RECORD_LEN};
use crate::format::le_u16;

/// The record of a hole ([`EXT_HOLE`]) standing for `count` sequences, the
/// first stored at `timestamp`, without its filler.
pub fn hole(timestamp: u64, count: u16) -> [u8; HOLE_RECORD_LEN] {
    let mut r = [0u8; HOLE_RECORD_LEN];
    r[0] = FLAG_EXTENSION;
    r[1..9].copy_from_slice(&timestamp.to_le_bytes());
    r[9] = EXT_HOLE;
    r[10..12].copy_from_slice(&count.to_le_bytes());
    r
}

/// True when `record` (its bytes, not decoded) is a hole: the cheap test
/// readers make before decoding.
#[inline]
pub fn is_hole_record(record: &[u8]) -> bool {
    record.len() >= HOLE_RECORD_LEN && record[0] == FLAG_EXTENSION && record[9] == EXT_HOLE
}

/// How many sequences the record `record` (its bytes) stands for: a hole's
/// count, 1 for a message. Walkers that step over frames by their length
/// count sequences with it.
#[inline]
pub fn seqs_of(record: &[u8]) -> u64 {
    // A hole's or batch's count is at the same place; 12 bytes tell both.
    if record.len() >= HOLE_RECORD_LEN
        && record[0] == FLAG_EXTENSION
        && matches!(record[9], EXT_HOLE | EXT_BATCH | EXT_ROW_BATCH)
    {
        u64::from(le_u16(record, 10).unwrap_or(1).max(1))
    } else {
        1
    }
}
