//! The data file as a whole: its header, frames, end-of-file marker and
//! footer together. Above `frame`, `record` and `footer`, which each know
//! one part.

use super::footer::FOOTER_LEN;
use super::frame::{DATA_HEADER_LEN, FRAME_ALIGN, FRAME_OVERHEAD};
use super::kind::RecordKind;
use super::record;
use super::walk::{frame_at, Check, Step};

/// Largest record a data file of `file_size` bytes can hold: the header, the
/// frame and room for an end-of-file marker and the footer after it.
pub fn max_record_len(file_size: u64) -> usize {
    let room = file_size as usize - DATA_HEADER_LEN - FRAME_ALIGN - FOOTER_LEN;
    (room & !(FRAME_ALIGN - 1)) - FRAME_OVERHEAD
}

/// Timestamp of a data file's first message, if it has one.
pub fn first_message_ts(file: &[u8]) -> Option<u64> {
    match frame_at(file, DATA_HEADER_LEN, Check::Crc) {
        Step::Frame(f) => record::decode(f.record).ok().map(|v| v.timestamp),
        _ => None,
    }
}

/// Sequences the holes (key compaction, format 8) in `4096..frames_end` of
/// `file` stand for: the footer's `hole_seqs` (format 11), and what readers
/// count in an older compacted file. Walks the length words and record
/// heads only. The flag is false when a frame could not be stepped over
/// before `frames_end` (damage): the count is then of the holes before it.
pub fn hole_seqs(file: &[u8], frames_end: usize) -> (u64, bool) {
    let mut at = DATA_HEADER_LEN;
    let mut holes = 0;
    while at < frames_end {
        let Step::Frame(f) = frame_at(file, at, Check::Lengths) else {
            return (holes, false);
        };
        if let RecordKind::Hole { count } = RecordKind::of_or_plain(f.record) {
            holes += u64::from(count);
        }
        at = f.next;
    }
    (holes, true)
}

/// The footer's `content_flags` for the frames in `4096..frames_end` of
/// `file`: what their records' flags say (`CONTENT_TOPICS` when some record
/// carries a topic field). Walks the length words and flag bytes only.
pub fn content_flags(file: &[u8], frames_end: usize) -> u64 {
    let mut at = DATA_HEADER_LEN;
    let mut flags = 0;
    while at < frames_end {
        let Step::Frame(f) = frame_at(file, at, Check::Lengths) else {
            break;
        };
        if f.record
            .first()
            .is_some_and(|f| f & record::FLAG_TOPIC != 0)
        {
            flags |= super::footer::CONTENT_TOPICS;
        }
        at = f.next;
    }
    flags
}
