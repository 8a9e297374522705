//! The frame walker: where the next frame starts, and how many sequences
//! a frame stands for (FORMAT.md "Frames", "Holes", "Batches").
//!
//! Every walk over a data file's frames goes through [`frame_at`] (one
//! frame) or a [`Walker`] (frames in order, counting sequences with
//! [`RecordKind`]). Both read a [`FrameBytes`]: a byte slice (a file read
//! whole, a test vector) or a live mapping (`reader::frames` implements it
//! with an acquire load of the length word, the one ordering the writer
//! publishes frames with). No I/O happens here.
//!
//! Three ways to check a frame ([`Check`]):
//! - [`Check::Crc`]: the frame's CRC is computed and compared;
//! - [`Check::Trusted`]: the frame lies before an end whose CRC the caller
//!   checked as a whole (a sealed file's `frames_crc`, or a frame checked
//!   just before): lengths are bounds-checked against that end, no CRC;
//! - [`Check::Lengths`]: lengths only, bounds-checked against the bytes
//!   (walkers that step over frames and check the one they stop at).

use super::error::DecodeError;
use super::kind::RecordKind;
use super::{crc::crc64, le_u32, le_u64};

#[cfg(feature = "model")]
#[doc(hidden)]
pub mod model;

/// Bytes of the data-file header; the first frame starts here.
pub const DATA_HEADER_LEN: usize = 4096;
/// Length-field value that seals a file: the next message is in the next file.
pub const END_OF_FILE: u32 = u32::MAX;
/// Frame overhead around the record: length and CRC.
pub const FRAME_OVERHEAD: usize = 4 + 8;
/// Frames start on multiples of this.
pub const FRAME_ALIGN: usize = 8;

/// Total bytes a frame with a `record_len`-byte record occupies, padding included.
#[inline]
pub fn frame_size(record_len: usize) -> usize {
    (record_len + FRAME_OVERHEAD + FRAME_ALIGN - 1) & !(FRAME_ALIGN - 1)
}

/// Bytes frames are walked over.
pub trait FrameBytes {
    /// All the bytes (a file from offset 0).
    fn frame_bytes(&self) -> &[u8];
    /// The length word at `at`, `None` when fewer than 4 bytes are left.
    /// A live mapping loads it with acquire ordering.
    fn length_word(&self, at: usize) -> Option<u32>;
}

impl FrameBytes for [u8] {
    #[inline]
    fn frame_bytes(&self) -> &[u8] {
        self
    }
    #[inline]
    fn length_word(&self, at: usize) -> Option<u32> {
        le_u32(self, at)
    }
}

impl FrameBytes for Vec<u8> {
    #[inline]
    fn frame_bytes(&self) -> &[u8] {
        self
    }
    #[inline]
    fn length_word(&self, at: usize) -> Option<u32> {
        le_u32(self, at)
    }
}

/// How a frame is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// By its own CRC.
    Crc,
    /// Trusted (no CRC) up to `verified_end`, which it must not pass.
    Trusted(usize),
    /// Lengths only, bounded by the bytes.
    Lengths,
}

/// A complete frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Offset of the frame (its length word).
    pub at: usize,
    /// The record: the bytes between the length word and the CRC.
    pub record: &'a [u8],
    /// Offset of the next frame.
    pub next: usize,
}

impl<'a> Frame<'a> {
    /// Offset of the record.
    #[inline]
    pub fn record_at(&self) -> usize {
        self.at + 4
    }
    /// The record's length.
    #[inline]
    pub fn record_len(&self) -> usize {
        self.record.len()
    }
    /// The record's kind by [`RecordKind::of_or_plain`] (lenient).
    #[inline]
    pub fn kind_or_plain(&self) -> RecordKind {
        RecordKind::of_or_plain(self.record)
    }

    /// The record's kind, `None` when its hole or batch head is malformed.
    #[inline]
    pub fn kind(&self) -> Option<RecordKind> {
        RecordKind::of(self.record)
    }
}

/// What the bytes at a frame position hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// A frame that passed its check.
    Frame(Frame<'a>),
    /// Length word 0: nothing published here (yet).
    Empty,
    /// The end-of-file marker.
    EndOfFile,
    /// A frame that does not check out, or no room for a length word.
    Damage(DecodeError),
}

impl<'a> Step<'a> {
    /// The frame, when it is one and `keep` holds for it; else `Step::Empty`.
    #[inline]
    pub fn filter(self, keep: impl FnOnce(&Frame<'a>) -> bool) -> Step<'a> {
        match self {
            Step::Frame(f) if !keep(&f) => Step::Empty,
            s => s,
        }
    }
}

/// The frame at `at` of `bytes`, checked as `check` says.
#[inline]
pub fn frame_at<B: FrameBytes + ?Sized>(bytes: &B, at: usize, check: Check) -> Step<'_> {
    let Some(len) = bytes.length_word(at) else {
        return Step::Damage(DecodeError::Truncated);
    };
    frame_with_len(bytes.frame_bytes(), at, len, check)
}

/// As [`frame_at`] for a length word the caller loaded already.
#[inline]
pub fn frame_with_len(file: &[u8], at: usize, len: u32, check: Check) -> Step<'_> {
    match len {
        0 => return Step::Empty,
        END_OF_FILE => return Step::EndOfFile,
        _ => {}
    }
    let limit = match check {
        Check::Trusted(end) => end.min(file.len()),
        Check::Crc | Check::Lengths => file.len(),
    };
    let record_len = len as usize;
    let Some(record_end) = at
        .checked_add(4 + record_len)
        .filter(|&e| e.checked_add(8).is_some_and(|c| c <= limit))
    else {
        return Step::Damage(DecodeError::BadLength(len));
    };
    if check == Check::Crc {
        let stored = le_u64(file, record_end).unwrap_or(0);
        let computed = crc64(&[&file[at..record_end]]);
        if stored != computed {
            return Step::Damage(DecodeError::BadCrc { stored, computed });
        }
    }
    Step::Frame(Frame {
        at,
        record: &file[at + 4..record_end],
        next: at + frame_size(record_len),
    })
}

/// One event of a [`Walker`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// A frame standing for `kind.count()` sequences from `seq` (for a
    /// batch, `seq` is its `first_seq`).
    Frame {
        /// The frame.
        frame: Frame<'a>,
        /// Its (first) sequence.
        seq: u64,
        /// What it stands for.
        kind: RecordKind,
    },
    /// Length word 0 at `at`: the end of the published data.
    Empty {
        /// Offset of the zero word.
        at: usize,
    },
    /// The end-of-file marker at `at`.
    EndOfFile {
        /// Offset of the marker.
        at: usize,
    },
    /// Damage at `at`, where message `seq` should be.
    Damage {
        /// Offset of the damaged frame.
        at: usize,
        /// The sequence it would hold.
        seq: u64,
        /// What is wrong.
        error: DecodeError,
    },
}

/// Walks frames in order from a frame whose sequence is known, counting
/// sequences by the kind rule. It stops (returns the same event again) at
/// an empty word, the end-of-file marker or damage; a batch whose
/// `first_seq` is not the walker's count is damage
/// ([`DecodeError::BatchSeq`]), as is a malformed hole or batch head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walker {
    /// Offset of the next frame.
    pub at: usize,
    /// Sequence of the next frame.
    pub seq: u64,
    /// How frames are checked.
    pub check: Check,
}

impl Walker {
    /// A walker at `at`, whose frame holds `seq`.
    #[inline]
    pub fn new(at: usize, seq: u64, check: Check) -> Walker {
        Walker { at, seq, check }
    }

    /// The next event; after a frame the walker stands after it.
    #[inline]
    pub fn step<'a, B: FrameBytes + ?Sized>(&mut self, bytes: &'a B) -> Event<'a> {
        let at = self.at;
        match frame_at(bytes, at, self.check) {
            Step::Frame(frame) => {
                let Some(kind) = frame.kind() else {
                    return self.damage(DecodeError::Record(malformed_head(frame.record)));
                };
                if let RecordKind::Batch { first_seq, count } = kind {
                    if first_seq != self.seq {
                        return self.damage(DecodeError::BatchSeq {
                            first_seq,
                            count,
                            at_seq: self.seq,
                        });
                    }
                }
                let seq = self.seq;
                self.at = frame.next;
                self.seq = seq.saturating_add(kind.count());
                Event::Frame { frame, seq, kind }
            }
            Step::Empty => Event::Empty { at },
            Step::EndOfFile => Event::EndOfFile { at },
            Step::Damage(error) => self.damage(error),
        }
    }

    fn damage(&self, error: DecodeError) -> Event<'static> {
        Event::Damage {
            at: self.at,
            seq: self.seq,
            error,
        }
    }
}

/// Why [`RecordKind::of`] refused a record.
fn malformed_head(record: &[u8]) -> &'static str {
    if record.get(9) == Some(&super::record::EXT_HOLE) {
        "hole without a count of at least 1"
    } else {
        "batch without a count of at least 1"
    }
}

/// The first offset at or after `from` (rounded up to [`FRAME_ALIGN`])
/// where a frame passes its CRC, scanning word by word: where a reader
/// resumes after damage that left no usable length word.
pub fn next_valid_frame<B: FrameBytes + ?Sized>(bytes: &B, from: usize) -> Option<Frame<'_>> {
    let mut at = from.next_multiple_of(FRAME_ALIGN);
    while at + 4 <= bytes.frame_bytes().len() {
        if let Step::Frame(f) = frame_at(bytes, at, Check::Crc) {
            return Some(f);
        }
        at += FRAME_ALIGN;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::frame::encode_into;
    use crate::format::record;

    fn frame(out: &mut Vec<u8>, rec: &[u8]) {
        encode_into(out, |o| o.extend_from_slice(rec));
        out.resize(out.len().next_multiple_of(8), 0);
    }

    #[test]
    fn walks_counting_holes_and_batches() {
        let mut b = Vec::new();
        frame(&mut b, &[0; 9]);
        frame(&mut b, &record::hole(1, 3));
        let mut batch = vec![record::FLAG_EXTENSION];
        batch.extend_from_slice(&0u64.to_le_bytes());
        record::encode_batch_head(2, crate::format::compression::Codec::Lz4, 0, &mut batch);
        record::set_batch_first_seq(&mut batch[9..], 14);
        frame(&mut b, &batch);
        b.extend_from_slice(&END_OF_FILE.to_le_bytes());
        let mut w = Walker::new(0, 10, Check::Crc);
        let mut seqs = vec![];
        loop {
            match w.step(&b[..]) {
                Event::Frame { seq, kind, .. } => seqs.push((seq, kind.count())),
                Event::EndOfFile { .. } => break,
                e => panic!("{e:?}"),
            }
        }
        assert_eq!(seqs, [(10, 1), (11, 3), (14, 2)]);
        assert_eq!(w.seq, 16);
        // A batch out of place is damage.
        let mut w = Walker::new(0, 11, Check::Crc);
        w.step(&b[..]);
        w.step(&b[..]);
        assert!(matches!(
            w.step(&b[..]),
            Event::Damage {
                error: DecodeError::BatchSeq { .. },
                ..
            }
        ));
    }
}
