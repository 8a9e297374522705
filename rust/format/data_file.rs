//! The data file as a whole: its header, frames, end-of-file marker and
//! footer together. Above `frame`, `record` and `footer`, which each know
//! one part.

use super::footer::FOOTER_LEN;
use super::frame::{decode, plain_len, FrameAt, DATA_HEADER_LEN, FRAME_ALIGN, FRAME_OVERHEAD};
use super::record;

/// Largest record a data file of `file_size` bytes can hold: the header, the
/// frame and room for an end-of-file marker and the footer after it.
pub fn max_record_len(file_size: u64) -> usize {
    let room = file_size as usize - DATA_HEADER_LEN - FRAME_ALIGN - FOOTER_LEN;
    (room & !(FRAME_ALIGN - 1)) - FRAME_OVERHEAD
}

/// Timestamp of a data file's first message, if it has one.
pub fn first_message_ts(file: &[u8]) -> Option<u64> {
    let len = plain_len(file, DATA_HEADER_LEN)?;
    match decode(file, DATA_HEADER_LEN, len) {
        Ok(FrameAt::Frame { record_len, .. }) => {
            record::decode(&file[DATA_HEADER_LEN + 4..DATA_HEADER_LEN + 4 + record_len])
                .ok()
                .map(|v| v.timestamp)
        }
        _ => None,
    }
}

/// The footer's `content_flags` for the frames in `4096..frames_end` of
/// `file`: what their records' flags say (`CONTENT_TOPICS` when some record
/// carries a topic field). Walks the length words and flag bytes only.
pub fn content_flags(file: &[u8], frames_end: usize) -> u64 {
    let mut at = DATA_HEADER_LEN;
    let mut flags = 0;
    while at < frames_end {
        let Some(len) = plain_len(file, at).filter(|&l| l != 0) else {
            break;
        };
        if file
            .get(at + 4)
            .is_some_and(|f| f & record::FLAG_TOPIC != 0)
        {
            flags |= super::footer::CONTENT_TOPICS;
        }
        at += super::frame::frame_size(len as usize);
    }
    flags
}
