//! The footer of a sealed data file (format version 4).
//!
//! When the writer seals a file it writes the end-of-file marker, then this
//! 128-byte footer in the last 128 bytes of the file's trimmed length, then
//! truncates the file to that length. The footer says where the frames end,
//! carries a CRC-64 of the whole frame area (one pass at memory speed
//! verifies a sealed file), the file's sequence and time range, what its
//! records hold, how many sequences its holes stand for (format 11), and 32
//! reserved bytes for per-field zone maps. `docs/FORMAT.md` ("Footer") is the
//! contract.

use super::crc::crc64;
use super::frame::{DATA_HEADER_LEN, FRAME_ALIGN};
use super::header::{checked, HeaderError};
use super::{le_u32, le_u64};

/// Bytes of the footer.
pub const FOOTER_LEN: usize = 128;
/// First eight bytes of the footer.
pub const FOOTER_MAGIC: [u8; 8] = *b"LMQFOOT\0";
/// Version of the footer layout.
pub const FOOTER_VERSION: u32 = 1;
/// A sealed file's length is rounded up to a multiple of this (a page).
pub const TRIM_ALIGN: u64 = 4096;
const CRC_AT: usize = 120;
/// `content_flags` bit: some record of the file carries a topic field
/// (record flag `0x08`), so the file gets a topic index (`NAME.topics`).
pub const CONTENT_TOPICS: u64 = 1;
/// The first data-file version whose footer's `hole_seqs` counts the
/// file's holes. In a file of version 8 to 10 (holes came with 8) the field
/// is zero and means "not counted": readers count by walking the frames.
pub const HOLE_SEQS_SINCE: u32 = 11;

/// The decoded footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// Offset of the end-of-file marker: frames fill `4096..frames_end`.
    pub frames_end: u64,
    /// CRC-64 of bytes `4096..frames_end` (frames and their padding).
    pub frames_crc: u64,
    /// The data header's `file_number`.
    pub file_number: u64,
    /// Sequence of the file's first message.
    pub first_seq: u64,
    /// One past the sequence of its last message (`first_seq` when empty).
    pub end_seq: u64,
    /// Timestamp of the first message (0 when empty).
    pub first_ts: u64,
    /// Timestamp of the last message (0 when empty).
    pub last_ts: u64,
    /// What the file's records hold (`CONTENT_*` bits; version 6, zero in
    /// older files, whose records cannot hold those fields).
    pub content_flags: u64,
    /// Sequences the file's holes stand for (key compaction; format 11,
    /// see [`HOLE_SEQS_SINCE`]): the file holds `end_seq - first_seq -
    /// hole_seqs` messages. Zero in a file the writer sealed (it never
    /// writes holes) and in older files.
    pub hole_seqs: u64,
}

/// Length a sealed file is trimmed to when its end-of-file marker is at
/// `frames_end`: marker and footer included, rounded up to [`TRIM_ALIGN`],
/// never more than `file_size`.
pub fn trimmed_len(frames_end: u64, file_size: u64) -> u64 {
    let need = frames_end + FRAME_ALIGN as u64 + FOOTER_LEN as u64;
    need.div_ceil(TRIM_ALIGN)
        .saturating_mul(TRIM_ALIGN)
        .min(file_size)
}

impl Footer {
    /// The footer's bytes (docs/FORMAT.md).
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut b = [0u8; FOOTER_LEN];
        b[0..8].copy_from_slice(&FOOTER_MAGIC);
        b[8..12].copy_from_slice(&FOOTER_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(FOOTER_LEN as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.frames_end.to_le_bytes());
        b[24..32].copy_from_slice(&self.frames_crc.to_le_bytes());
        b[32..40].copy_from_slice(&self.file_number.to_le_bytes());
        b[40..48].copy_from_slice(&self.first_seq.to_le_bytes());
        b[48..56].copy_from_slice(&self.end_seq.to_le_bytes());
        b[56..64].copy_from_slice(&self.first_ts.to_le_bytes());
        b[64..72].copy_from_slice(&self.last_ts.to_le_bytes());
        b[72..80].copy_from_slice(&self.content_flags.to_le_bytes());
        b[80..88].copy_from_slice(&self.hole_seqs.to_le_bytes());
        // 88..120: reserved for zone maps, zero.
        let crc = crc64(&[&b[..CRC_AT]]);
        b[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes the footer at the start of `b` (the last 128 bytes of a file).
    pub fn decode(b: &[u8]) -> Result<Footer, HeaderError> {
        let f = checked(b, FOOTER_LEN, &FOOTER_MAGIC, CRC_AT)?;
        let version = le_u32(f, 8).ok_or(HeaderError::Truncated)?;
        if version != FOOTER_VERSION {
            return Err(HeaderError::Version(version));
        }
        if le_u32(f, 12) != Some(FOOTER_LEN as u32) {
            return Err(HeaderError::Invalid("footer length"));
        }
        let q = |at| le_u64(f, at).ok_or(HeaderError::Truncated);
        Ok(Footer {
            frames_end: q(16)?,
            frames_crc: q(24)?,
            file_number: q(32)?,
            first_seq: q(40)?,
            end_seq: q(48)?,
            first_ts: q(56)?,
            last_ts: q(64)?,
            content_flags: q(72)?,
            hole_seqs: q(80)?,
        })
    }

    /// The footer of a file `file_len` bytes long whose header says
    /// `file_number`, `first_seq` and `file_size`, if the footer at its end
    /// is valid and agrees with all of them (and with the trimming rule).
    pub fn read(
        file: &[u8],
        file_number: u64,
        first_seq: u64,
        file_size: u64,
    ) -> Result<Footer, HeaderError> {
        let len = file.len();
        let at = len.checked_sub(FOOTER_LEN).ok_or(HeaderError::Truncated)?;
        Footer::read_tail(&file[at..], len as u64, file_number, first_seq, file_size)
    }

    /// As [`Footer::read`], from the last [`FOOTER_LEN`] bytes of a file
    /// `file_len` bytes long (a ranged read of an archived file, which has
    /// no need to fetch the rest).
    pub fn read_tail(
        tail: &[u8],
        file_len: u64,
        file_number: u64,
        first_seq: u64,
        file_size: u64,
    ) -> Result<Footer, HeaderError> {
        let f = Footer::decode(tail)?;
        let ok = f.file_number == file_number
            && f.first_seq == first_seq
            && f.end_seq >= first_seq
            && f.hole_seqs <= f.end_seq - first_seq
            && f.frames_end >= DATA_HEADER_LEN as u64
            && f.frames_end.is_multiple_of(FRAME_ALIGN as u64)
            && trimmed_len(f.frames_end, file_size) == file_len
            && f.frames_end + (FRAME_ALIGN + FOOTER_LEN) as u64 <= file_len;
        if !ok {
            return Err(HeaderError::Invalid("footer does not match its file"));
        }
        Ok(f)
    }

    /// CRC of the frame area `4096..frames_end` of `file`.
    pub fn frames_crc_of(file: &[u8], frames_end: u64) -> Option<u64> {
        file.get(DATA_HEADER_LEN..frames_end as usize)
            .map(|b| crc64(&[b]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_rule() {
        assert_eq!(trimmed_len(4096, 1 << 30), 8192);
        assert_eq!(trimmed_len(8192 - 136, 1 << 30), 8192);
        assert_eq!(trimmed_len(8192 - 128, 1 << 30), 12288);
        assert_eq!(trimmed_len(65536 - 136, 65536), 65536);
        assert_eq!(trimmed_len(4096, 65536 + 8), 8192);
    }

    #[test]
    fn round_trip_and_damage() {
        let f = Footer {
            frames_end: 4096 + 64,
            frames_crc: 7,
            file_number: 3,
            first_seq: 10,
            end_seq: 12,
            first_ts: 5,
            last_ts: 6,
            content_flags: CONTENT_TOPICS,
            hole_seqs: 1,
        };
        let mut file = vec![0u8; 8192];
        file[8192 - FOOTER_LEN..].copy_from_slice(&f.encode());
        assert_eq!(Footer::read(&file, 3, 10, 1 << 30), Ok(f));
        assert_eq!(&file[8192 - FOOTER_LEN + 80..][..8], &1u64.to_le_bytes());
        assert!(Footer::read(&file, 4, 10, 1 << 30).is_err());
        // More hole sequences than the file has sequences: not its footer.
        let too_many = Footer { hole_seqs: 3, ..f };
        file[8192 - FOOTER_LEN..].copy_from_slice(&too_many.encode());
        assert!(Footer::read(&file, 3, 10, 1 << 30).is_err());
        file[8192 - FOOTER_LEN..].copy_from_slice(&f.encode());
        // A footer that the trimming rule does not put there is refused.
        assert!(Footer::read(&file, 3, 10, 8192 - 8).is_err());
        file[8192 - 100] ^= 1;
        assert_eq!(
            Footer::read(&file, 3, 10, 1 << 30),
            Err(HeaderError::BadCrc)
        );
        assert_eq!(Footer::decode(&file[..10]), Err(HeaderError::Truncated));
    }
}
