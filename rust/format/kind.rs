//! The record-kind rule: how many sequences a frame stands for.
//!
//! A frame is a plain message (one sequence), a hole (format 8: `count`
//! sequences key compaction dropped) or a batch (format 9: `count` members
//! from `first_seq`, compressed together). Every walker that steps over
//! frames by their length words counts sequences with [`RecordKind`]; see
//! FORMAT.md "Holes and key compaction" and "Batches compressed together".

use super::le_u16;
use super::le_u64;
use super::record::{
    BATCH_HEAD_LEN, EXT_BATCH, EXT_HOLE, EXT_ROW_BATCH, FLAG_EXTENSION, HOLE_RECORD_LEN,
};

/// What a frame's record stands for, read from its first bytes without
/// decoding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A message: one sequence.
    Plain,
    /// A hole of `count` sequences (at least 1).
    Hole {
        /// Sequences the hole stands for.
        count: u16,
    },
    /// A batch of `count` members (at least 1) from `first_seq`.
    Batch {
        /// Sequence of the first member, as the record says.
        first_seq: u64,
        /// Members.
        count: u16,
    },
}

impl RecordKind {
    /// The kind of `record` (a frame's bytes between its length word and
    /// its CRC). A record that says it is a hole or a batch but is shorter
    /// than that kind's head, or has a count of 0, is malformed: `None`.
    #[inline]
    pub fn of(record: &[u8]) -> Option<RecordKind> {
        if record.len() < 10 || record[0] != FLAG_EXTENSION {
            return Some(RecordKind::Plain);
        }
        match record[9] {
            EXT_HOLE => {
                if record.len() < HOLE_RECORD_LEN {
                    return None;
                }
                let count = le_u16(record, 10)?;
                (count >= 1).then_some(RecordKind::Hole { count })
            }
            EXT_BATCH | EXT_ROW_BATCH => {
                if record.len() < BATCH_HEAD_LEN {
                    return None;
                }
                let count = le_u16(record, 10)?;
                let first_seq = le_u64(record, 12)?;
                (count >= 1).then_some(RecordKind::Batch { first_seq, count })
            }
            _ => Some(RecordKind::Plain),
        }
    }

    /// As [`RecordKind::of`], leniently, for walkers that step over frames
    /// by their lengths and leave the record's checks to its decoder
    /// (which reports a malformed head at its sequence): a hole of 12 bytes
    /// or more or a batch of 25 or more with a count of 0 counts 1, and a
    /// shorter head reads as a plain message.
    #[inline]
    pub fn of_or_plain(record: &[u8]) -> RecordKind {
        if record.len() < HOLE_RECORD_LEN || record[0] != FLAG_EXTENSION {
            return RecordKind::Plain;
        }
        let count = u16::from_le_bytes([record[10], record[11]]).max(1);
        match record[9] {
            EXT_HOLE => RecordKind::Hole { count },
            EXT_BATCH | EXT_ROW_BATCH if record.len() >= BATCH_HEAD_LEN => RecordKind::Batch {
                first_seq: le_u64(record, 12).unwrap_or(0),
                count,
            },
            _ => RecordKind::Plain,
        }
    }

    /// Sequences the frame stands for: 1, or the hole's or batch's count.
    #[inline]
    pub fn count(self) -> u64 {
        match self {
            RecordKind::Plain => 1,
            RecordKind::Hole { count } | RecordKind::Batch { count, .. } => u64::from(count),
        }
    }

    /// The sequence after the frame for a walker standing on it at
    /// `at_seq`: a batch's `first_seq + count` (a walker may land on a
    /// batch at any member, by an index entry), else `at_seq + count`.
    #[inline]
    pub fn seq_after(self, at_seq: u64) -> u64 {
        match self {
            RecordKind::Batch { first_seq, count } => first_seq.saturating_add(u64::from(count)),
            k => at_seq.saturating_add(k.count()),
        }
    }

    /// `(first_seq, count)` of a batch.
    #[inline]
    pub fn batch(self) -> Option<(u64, u64)> {
        match self {
            RecordKind::Batch { first_seq, count } => Some((first_seq, u64::from(count))),
            _ => None,
        }
    }

    /// The name the test vectors use (`plain`, `hole`, `batch`).
    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Plain => "plain",
            RecordKind::Hole { .. } => "hole",
            RecordKind::Batch { .. } => "batch",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::record;

    #[test]
    fn kinds() {
        assert_eq!(RecordKind::of(&[0; 9]), Some(RecordKind::Plain));
        let h = record::hole(5, 7);
        assert_eq!(RecordKind::of(&h), Some(RecordKind::Hole { count: 7 }));
        assert_eq!(RecordKind::of(&h).unwrap().count(), 7);
        assert_eq!(RecordKind::of(&h).unwrap().seq_after(10), 17);
        assert_eq!(RecordKind::of(&h[..11]), None);
        assert_eq!(RecordKind::of(&record::hole(5, 0)), None);
        let mut b = vec![record::FLAG_EXTENSION];
        b.extend_from_slice(&0u64.to_le_bytes());
        record::encode_batch_head(3, crate::format::compression::Codec::Lz4, 0, &mut b);
        record::set_batch_first_seq(&mut b[9..], 40);
        let k = RecordKind::of(&b).unwrap();
        assert_eq!(
            k,
            RecordKind::Batch {
                first_seq: 40,
                count: 3
            }
        );
        assert_eq!(k.seq_after(41), 43);
        assert_eq!(RecordKind::of(&b[..20]), None);
        // The kind agrees with the old helpers on well-formed records.
        for r in [&h[..], &b[..]] {
            assert_eq!(RecordKind::of(r).unwrap().count(), record::seqs_of(r));
            assert_eq!(
                RecordKind::of(r).unwrap().seq_after(41),
                record::seq_after(r, 41)
            );
        }
    }
}
