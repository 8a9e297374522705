//! [`DecodeError`]: why bytes of a data file did not decode as a frame.

/// Why a frame (or the frame-level head of its record) did not decode.
/// The messages are the ones users see in `Corrupted` errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The length runs past the end of the file (or past the verified end).
    BadLength(u32),
    /// The stored CRC does not match the bytes.
    BadCrc {
        /// The CRC in the frame.
        stored: u64,
        /// The CRC of the bytes.
        computed: u64,
    },
    /// Fewer than 4 bytes left where a length word must be.
    Truncated,
    /// The record (its hole or batch head) is malformed.
    Record(&'static str),
    /// A batch whose `first_seq` is not the sequence it stands at.
    BatchSeq {
        /// What the record says.
        first_seq: u64,
        /// Its members.
        count: u16,
        /// Where the walker counted it.
        at_seq: u64,
    },
}

impl DecodeError {
    /// The name the test vectors use for it (`tests/vectors/README.md`).
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::BadLength(_) => "length_out_of_bounds",
            DecodeError::BadCrc { .. } => "crc",
            DecodeError::Truncated => "truncated",
            DecodeError::Record(_) => "record_malformed",
            DecodeError::BatchSeq { .. } => "batch_seq_mismatch",
        }
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::BadLength(l) => {
                write!(f, "frame length {l} runs past the end of the file")
            }
            DecodeError::BadCrc { stored, computed } => {
                write!(
                    f,
                    "CRC mismatch: stored {stored:#018x}, computed {computed:#018x}"
                )
            }
            DecodeError::Truncated => {
                f.write_str("frames run to the end of the file without an end-of-file marker")
            }
            DecodeError::Record(r) => f.write_str(r),
            DecodeError::BatchSeq {
                first_seq,
                count,
                at_seq,
            } => {
                let end = first_seq.saturating_add(u64::from(*count));
                write!(
                    f,
                    "batch frame holds sequences {first_seq}..{end}, read at {at_seq}"
                )
            }
        }
    }
}

impl std::error::Error for DecodeError {}
