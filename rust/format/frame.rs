//! Frames: `length:u32 | record | crc:u64`, padded with zeros to 8 bytes.
//!
//! The length counts the record only. It is never 0 for a real frame (a
//! record has at least a flags byte and a timestamp), so 0 means "not written
//! yet"; `u32::MAX` is the end-of-file marker. The CRC covers the four length
//! bytes and the record.

use super::crc::crc64;
pub use super::error::DecodeError;
use super::le_u32;
use super::walk::{self, Check, Step};

pub use super::walk::{frame_size, DATA_HEADER_LEN, END_OF_FILE, FRAME_ALIGN, FRAME_OVERHEAD};

/// What the bytes at a frame position hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameAt {
    /// Zero length: nothing published here yet.
    Empty,
    /// The end-of-file marker.
    EndOfFile,
    /// A complete frame whose CRC matches; the record is at
    /// `offset + 4 .. offset + 4 + record_len`.
    Frame {
        /// Bytes of the record.
        record_len: usize,
        /// Offset of the next frame.
        next: usize,
    },
}

/// Why a frame did not decode (the walker's [`DecodeError`]).
pub type FrameError = DecodeError;

impl<'a> From<Step<'a>> for Result<FrameAt, FrameError> {
    #[inline]
    fn from(s: Step<'a>) -> Self {
        match s {
            Step::Frame(f) => Ok(FrameAt::Frame {
                record_len: f.record.len(),
                next: f.next,
            }),
            Step::Empty => Ok(FrameAt::Empty),
            Step::EndOfFile => Ok(FrameAt::EndOfFile),
            Step::Damage(e) => Err(e),
        }
    }
}

/// Decodes the frame whose length field (already loaded, with acquire
/// ordering, by the caller) is `len`, at `offset` of `file`, checking its
/// CRC ([`walk::frame_with_len`] with [`Check::Crc`]).
#[inline]
pub fn decode(file: &[u8], offset: usize, len: u32) -> Result<FrameAt, FrameError> {
    walk::frame_with_len(file, offset, len, Check::Crc).into()
}

/// As [`decode`] for a frame inside `..end` of a frame area whose CRC the
/// caller has checked as a whole (a sealed file's footer CRC): the lengths
/// are still bounds-checked, the frame's own CRC is not computed again
/// ([`Check::Trusted`]).
#[inline]
pub fn decode_trusted(
    file: &[u8],
    offset: usize,
    len: u32,
    end: usize,
) -> Result<FrameAt, FrameError> {
    walk::frame_with_len(file, offset, len, Check::Trusted(end)).into()
}

/// Reads the length field at `offset` without atomics (for recovery and
/// tools that hold the file exclusively). `None` past the end.
pub fn plain_len(file: &[u8], offset: usize) -> Option<u32> {
    le_u32(file, offset)
}

/// Appends a frame to `out`: the length, the record `write_record` appends,
/// and the CRC of both. Returns the record's length. The padding up to
/// [`frame_size`] is not appended: in a file it is the zeros the file holds.
///
/// The writer publishes a frame by storing its length last (see
/// `ActiveFile::write_frame`), so it copies `out[4..]` first and the length
/// word after; the CRC runs over one contiguous slice (one SIMD pass, see
/// `format/crc.rs`). The inverse is [`decode`].
pub fn encode_into(out: &mut Vec<u8>, write_record: impl FnOnce(&mut Vec<u8>)) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    write_record(out);
    let record_len = out.len() - start - 4;
    let len = u32::try_from(record_len).expect("a record is shorter than a file");
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let crc = crc64(&[&out[start..]]);
    out.extend_from_slice(&crc.to_le_bytes());
    record_len
}

/// Appends the frame of a record `flags | timestamp | body`, padded to
/// [`FRAME_ALIGN`], to `out`: what the writer publishes
/// (`ActiveFile::write_frame`) and what an appender builds ahead of it (a
/// bundle of built frames). Returns the record's length.
pub fn encode_record_into(out: &mut Vec<u8>, flags: u8, timestamp: u64, body: &[u8]) -> usize {
    let start = out.len();
    let record_len = encode_into(out, |o| {
        o.push(flags);
        o.extend_from_slice(&timestamp.to_le_bytes());
        o.extend_from_slice(body);
    });
    out.resize(start + frame_size(record_len), 0);
    record_len
}

/// Gives `frame` (as [`encode_record_into`] built it) another timestamp,
/// and the CRC that goes with it.
pub fn restamp(frame: &mut [u8], timestamp: u64) {
    let record_len = le_u32(frame, 0).expect("a built frame") as usize;
    frame[5..13].copy_from_slice(&timestamp.to_le_bytes());
    let crc = crc64(&[&frame[..4 + record_len]]);
    frame[4 + record_len..12 + record_len].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restamped_frame_is_the_frame_built_with_that_timestamp() {
        let mut a = Vec::new();
        let len = encode_record_into(&mut a, 0, 7, b"payload");
        assert_eq!(a.len(), frame_size(len));
        let mut b = Vec::new();
        encode_record_into(&mut b, 0, 1_000_000, b"payload");
        assert_ne!(a, b);
        restamp(&mut a, 1_000_000);
        assert_eq!(a, b);
        match decode(&a, 0, len as u32) {
            Ok(FrameAt::Frame { record_len, .. }) => assert_eq!(record_len, len),
            other => panic!("{other:?}"),
        }
    }

    fn encode(record: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        assert_eq!(
            encode_into(&mut v, |o| o.extend_from_slice(record)),
            record.len()
        );
        v.resize(frame_size(record.len()), 0);
        v
    }

    #[test]
    fn round_trip_and_damage() {
        let mut buf = encode(b"hello world");
        buf.extend_from_slice(&[0; 16]);
        let len = plain_len(&buf, 0).unwrap();
        assert_eq!(
            decode(&buf, 0, len),
            Ok(FrameAt::Frame {
                record_len: 11,
                next: 24
            })
        );
        assert_eq!(decode(&buf, 24, 0), Ok(FrameAt::Empty));
        buf[5] ^= 1;
        assert!(matches!(
            decode(&buf, 0, len),
            Err(FrameError::BadCrc { .. })
        ));
        assert_eq!(
            decode(&buf, 0, 1 << 30),
            Err(FrameError::BadLength(1 << 30))
        );
        assert_eq!(decode(&buf, 0, END_OF_FILE), Ok(FrameAt::EndOfFile));
    }

    #[test]
    fn sizes() {
        assert_eq!(frame_size(9), 24);
        assert_eq!(frame_size(12), 24);
        assert_eq!(frame_size(13), 32);
        let max = crate::format::data_file::max_record_len(65536);
        assert!(DATA_HEADER_LEN + frame_size(max) + 8 + crate::format::footer::FOOTER_LEN <= 65536);
    }
}
