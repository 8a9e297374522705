//! The dense index (format version 5): one 8-byte entry per message of a
//! data file, `seq -> offset`, so that a lookup by sequence is one probe
//! (RocketMQ's ConsumeQueue, Chronicle's index).
//!
//! Entry `i` describes message `first_seq + i`. It packs the frame's offset
//! (low 40 bits: files are at most 2^40 bytes) with a 24-bit check, the top
//! 24 bits of a SplitMix64 mix of `seq` and `offset`, and is stored with one release
//! store after the frame is published, so a reader that sees an entry sees
//! its frame. 0 means "not written". An entry is a hint: a reader uses it
//! only when its check matches the sequence it wants and the frame at the
//! offset passes its own CRC; otherwise it scans from the sparse index, as
//! for a version-3 or 4 file, which has no dense index. The data file is
//! the truth: recovery rebuilds the index from it.

use std::path::Path;

use crate::error::Result;
use crate::format::crc::crc64;
use crate::format::frame::{frame_size, DATA_HEADER_LEN, FRAME_ALIGN};
use crate::format::record::RECORD_FIXED_LEN;
use crate::format::{le_u32, le_u64};
use crate::index::file::IndexFile;
use crate::storage::mapped::Mapping;

/// First eight bytes of a dense-index file.
pub const DENSE_MAGIC: [u8; 8] = *b"LMQDIDX\0";
/// Bytes before the first entry.
pub const DENSE_HEADER_LEN: usize = 64;
/// Bytes of one entry.
pub const DENSE_ENTRY_LEN: usize = 8;
/// The first format version whose data files have a dense index.
pub const DENSE_SINCE_VERSION: u32 = 5;
const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
const CRC_AT: usize = 56;

/// The header of a dense-index file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenseHeader {
    /// Format version of its data file (5).
    pub version: u32,
    /// Sequence of the data file's first message (entry 0).
    pub first_seq: u64,
    /// Number of its data file, as in the data file's header.
    pub file_number: u64,
    /// Entries the file has room for.
    pub capacity: u64,
}

impl DenseHeader {
    /// The header's bytes, CRC included (docs/FORMAT.md, "Dense index files").
    pub fn encode(&self) -> [u8; DENSE_HEADER_LEN] {
        let mut b = [0u8; DENSE_HEADER_LEN];
        b[0..8].copy_from_slice(&DENSE_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(DENSE_ENTRY_LEN as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        b[24..32].copy_from_slice(&self.file_number.to_le_bytes());
        b[32..40].copy_from_slice(&self.capacity.to_le_bytes());
        let crc = crc64(&[&b[..CRC_AT]]);
        b[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// `None` when the bytes are not a valid header.
    pub fn decode(b: &[u8]) -> Option<DenseHeader> {
        let b = b.get(..DENSE_HEADER_LEN)?;
        if b[0..8] != DENSE_MAGIC
            || le_u64(b, CRC_AT)? != crc64(&[&b[..CRC_AT]])
            || le_u32(b, 12)? != DENSE_ENTRY_LEN as u32
        {
            return None;
        }
        Some(DenseHeader {
            version: le_u32(b, 8)?,
            first_seq: le_u64(b, 16)?,
            file_number: le_u64(b, 24)?,
            capacity: le_u64(b, 32)?,
        })
    }

    /// Length of the file.
    pub fn file_len(capacity: u64) -> u64 {
        DENSE_HEADER_LEN as u64 + DENSE_ENTRY_LEN as u64 * capacity
    }
}

/// Entries a dense index for a `file_size`-byte data file needs at most
/// (every frame the smallest).
pub fn capacity(file_size: u64) -> u64 {
    (file_size - DATA_HEADER_LEN as u64) / frame_size(RECORD_FIXED_LEN) as u64 + 1
}

fn entry_at(i: u64) -> usize {
    DENSE_HEADER_LEN + i as usize * DENSE_ENTRY_LEN
}

/// The 24-bit check that ties an entry to its sequence: the top bits of the
/// SplitMix64 finalizer of `seq ^ offset·φ` (docs/FORMAT.md, "Entries").
/// A mixing function, not a CRC: it is computed once per message on the
/// I/O thread, where a second CRC-64 per message cost as much as the
/// frame's own (a third more CPU per 64-byte append).
fn check(seq: u64, offset: u64) -> u64 {
    let mut z = seq ^ offset.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) >> OFFSET_BITS
}

/// The entry word for message `seq` at `offset`.
pub fn encode_entry(seq: u64, offset: u64) -> u64 {
    debug_assert!(offset <= OFFSET_MASK);
    (check(seq, offset) << OFFSET_BITS) | offset
}

/// The offset entry word `word` gives for message `seq`, if it is written,
/// its check matches `seq`, and the offset can be a frame's (past the
/// header, aligned, before `data_len`).
pub fn decode_entry(seq: u64, word: u64, data_len: usize) -> Option<usize> {
    let offset = word & OFFSET_MASK;
    let ok = word != 0
        && word >> OFFSET_BITS == check(seq, offset)
        && offset >= DATA_HEADER_LEN as u64
        && offset.is_multiple_of(FRAME_ALIGN as u64)
        && offset + 4 <= data_len as u64;
    ok.then_some(offset as usize)
}

/// The writer's side, owned by the I/O thread (or recovery).
#[derive(Debug)]
pub struct DenseIndexWriter {
    file: IndexFile,
    header: DenseHeader,
}

impl DenseIndexWriter {
    /// Creates the dense index of a new data file: mapped at its full
    /// length, one page long (the header), growing with its entries.
    pub fn create(path: &Path, header: DenseHeader) -> Result<DenseIndexWriter> {
        let len = DenseHeader::file_len(header.capacity);
        let file = IndexFile::create(path, len, &header.encode())?;
        Ok(DenseIndexWriter { file, header })
    }

    /// Opens the dense index of an existing data file; a missing or damaged
    /// one (or one made for another file) is recreated empty, and `true`
    /// says so: the caller refills it from the data.
    pub fn open_or_rebuild(path: &Path, header: DenseHeader) -> Result<(DenseIndexWriter, bool)> {
        let len = DenseHeader::file_len(header.capacity);
        let (file, rebuilt) = IndexFile::open_or_create(path, len, &header.encode(), |b| {
            DenseHeader::decode(b).is_some_and(|h| h == header)
        })?;
        Ok((DenseIndexWriter { file, header }, rebuilt))
    }

    /// Publishes entry `i` (message `first_seq + i` at `offset`), after its
    /// frame. Allocates the entry's disk block first: a full disk is an
    /// error here, never SIGBUS.
    #[inline]
    pub fn put(&mut self, i: u64, offset: usize) -> Result<()> {
        if i >= self.header.capacity {
            return Ok(()); // cannot happen with `capacity()`
        }
        let at = entry_at(i);
        self.file.ensure(at + DENSE_ENTRY_LEN)?;
        let word = encode_entry(self.header.first_seq + i, offset as u64);
        self.file.map.store_u64(at, word);
        Ok(())
    }

    /// Publishes entries `i..i + n` (the members of one batch frame at
    /// `offset`): [`DenseIndexWriter::put`] for each, with one allocation
    /// check for them all (a 1,000-row batch spent as long in the checks as
    /// in the stores).
    pub fn put_run(&mut self, i: u64, n: u64, offset: usize) -> Result<()> {
        let end = (i + n).min(self.header.capacity);
        if end <= i {
            return Ok(());
        }
        self.file.ensure(entry_at(end - 1) + DENSE_ENTRY_LEN)?;
        for k in i..end {
            let word = encode_entry(self.header.first_seq + k, offset as u64);
            self.file.map.store_u64(entry_at(k), word);
        }
        Ok(())
    }

    /// As [`DenseIndexWriter::put`], writing only when the entry differs
    /// (recovery rewalks files whose entries are mostly right).
    pub fn repair(&mut self, i: u64, offset: usize) -> Result<bool> {
        if i >= self.header.capacity {
            return Ok(false);
        }
        let word = encode_entry(self.header.first_seq + i, offset as u64);
        if self.word(i) == word {
            return Ok(false);
        }
        self.put(i, offset)?;
        Ok(true)
    }

    fn word(&self, i: u64) -> u64 {
        self.file.read_u64(entry_at(i))
    }

    /// Zeroes entries `i..` (recovery cut the data they described). Only
    /// ranges holding data are read and written: holes read as zeros.
    pub fn truncate_from(&mut self, i: u64) {
        if i < self.header.capacity {
            self.file.zero_from(entry_at(i));
        }
    }

    /// The data file is sealed with `entries` messages: gives back the disk
    /// blocks past them. The file keeps its length (a reader that mapped it
    /// while it was written may still probe past the last entry; truncating
    /// would be SIGBUS for it), and the unused tail reads as zeros.
    pub fn seal(&mut self, entries: u64) -> Result<()> {
        self.file.seal(entry_at(entries.min(self.header.capacity)))
    }

    /// msyncs the whole file (after a rebuild by recovery).
    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }
}

/// The reader's side: a read-only mapping of one dense-index file.
#[derive(Debug)]
pub struct DenseIndex {
    map: Mapping,
    header: DenseHeader,
}

impl DenseIndex {
    /// Opens the dense index of the data file starting at `first_seq`;
    /// `None` when it is missing, its header is bad or it belongs to
    /// another file (the reader then uses the sparse index).
    ///
    /// The file is mapped at the length its header gives (`64 + 8 ×
    /// capacity`); from format version 11 it is only as long as the
    /// entries written so far (and a chunk), and an entry past its current
    /// length reads as "not written".
    pub fn open(path: &Path, first_seq: u64, file_number: u64) -> Option<DenseIndex> {
        let map = Mapping::open_extent(path, false, |f| {
            use std::os::unix::fs::FileExt;
            let mut b = [0u8; DENSE_HEADER_LEN];
            f.read_exact_at(&mut b, 0).ok()?;
            Some(DenseHeader::file_len(DenseHeader::decode(&b)?.capacity))
        })
        .ok()?;
        let header = DenseHeader::decode(map.as_slice())?;
        let ok = header.first_seq == first_seq
            && header.file_number == file_number
            && map.mapped_len() as u64 >= DenseHeader::file_len(header.capacity);
        ok.then_some(DenseIndex { map, header })
    }

    /// The offset entry `seq` gives, when written and its check matches
    /// (see [`decode_entry`]); the caller still checks the frame there.
    /// An entry past the file's current length is not written yet.
    #[inline]
    pub fn offset(&self, seq: u64, data_len: usize) -> Option<usize> {
        let i = seq.checked_sub(self.header.first_seq)?;
        if i >= self.header.capacity {
            return None;
        }
        decode_entry(seq, self.map.try_load_u64(entry_at(i))?, data_len)
    }

    /// Entries the file has room for.
    pub fn capacity(&self) -> u64 {
        self.header.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_only_answers_for_its_own_sequence() {
        let w = encode_entry(1000, 4096 + 128);
        assert_eq!(decode_entry(1000, w, 1 << 20), Some(4096 + 128));
        assert_eq!(decode_entry(1001, w, 1 << 20), None, "another seq");
        assert_eq!(
            decode_entry(1000, w ^ 8, 1 << 20),
            None,
            "a flipped offset bit"
        );
        assert_eq!(
            decode_entry(1000, w ^ (1 << 50), 1 << 20),
            None,
            "a flipped check bit"
        );
        assert_eq!(decode_entry(1000, 0, 1 << 20), None, "not written");
        assert_eq!(decode_entry(1000, w, 4096 + 128), None, "past the file");
        let h = DenseHeader {
            version: 5,
            first_seq: 7,
            file_number: 3,
            capacity: 99,
        };
        assert_eq!(DenseHeader::decode(&h.encode()), Some(h));
        let mut b = h.encode();
        b[20] ^= 1;
        assert_eq!(DenseHeader::decode(&b), None);
    }
}
