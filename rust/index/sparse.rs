//! The sparse index: one entry every `interval` messages of a data file.
//!
//! Entry `i` describes the message `first_seq + i * interval`: its sequence,
//! timestamp and frame offset. The offset is stored last with release
//! ordering and is never 0 for a real entry (frames start at 4096), so a
//! zero offset means "not written". Entries are written in order, so the
//! valid ones form a prefix. An entry is a hint: readers still check the
//! frame it points at, and an entry that does not fit is ignored.

use std::path::Path;

use crate::error::Result;
use crate::format::crc::crc64;
use crate::format::frame::{self, frame_size, FrameAt, DATA_HEADER_LEN, FRAME_ALIGN};
use crate::format::header::{IndexHeader, INDEX_ENTRY_LEN, INDEX_HEADER_LEN};
use crate::format::le_u64;
use crate::format::record;
use crate::format::record::RECORD_FIXED_LEN;
use crate::index::file::IndexFile;
use crate::storage::mapped::Mapping;

/// A sparse-index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Sequence of the entry's message.
    pub seq: u64,
    /// Its timestamp, µs since the Unix epoch.
    pub timestamp: u64,
    /// Offset of its frame in the data file.
    pub offset: u64,
}

impl Entry {
    /// True when the frame this entry points at in `file` (whose length word,
    /// already loaded, is `len`) is complete, passes its CRC and carries the
    /// entry's timestamp. Entries are hints; a damaged one must not send a
    /// reader to the wrong message.
    pub fn points_at_frame(&self, file: &[u8], len: u32) -> bool {
        let at = self.offset as usize;
        match frame::decode(file, at, len) {
            Ok(FrameAt::Frame { record_len, .. }) => {
                record::decode(&file[at + 4..at + 4 + record_len])
                    .is_ok_and(|v| v.timestamp == self.timestamp)
            }
            _ => false,
        }
    }
}

/// Entries an index for a `file_size`-byte data file needs at most.
pub fn capacity(file_size: u64, interval: u32) -> u64 {
    let max_frames = (file_size - DATA_HEADER_LEN as u64) / frame_size(RECORD_FIXED_LEN) as u64;
    max_frames / interval as u64 + 2
}

fn entry_at(i: u64) -> usize {
    INDEX_HEADER_LEN + i as usize * INDEX_ENTRY_LEN
}

/// Where the CRC and the offset (the publication word) lie in an entry.
pub const ENTRY_CRC_AT: usize = 16;
/// Offset of the publication word in an entry.
pub const ENTRY_OFFSET_AT: usize = 24;

impl Entry {
    /// CRC-64 of the entry's seq, timestamp and offset.
    fn crc(&self) -> u64 {
        crc64(&[
            &self.seq.to_le_bytes(),
            &self.timestamp.to_le_bytes(),
            &self.offset.to_le_bytes(),
        ])
    }
}

fn plausible(e: &Entry, crc: u64, h: &IndexHeader, i: u64, data_len: u64) -> bool {
    crc == e.crc()
        && e.offset >= DATA_HEADER_LEN as u64
        && e.offset < data_len
        && e.offset.is_multiple_of(FRAME_ALIGN as u64)
        && e.seq == h.first_seq + i * h.interval as u64
}

/// The writer's side: owned by the I/O thread.
#[derive(Debug)]
pub struct SparseIndexWriter {
    /// The file is sparse (version 4) and grows with its entries (version
    /// 11): blocks are allocated before entries are written into them.
    file: IndexFile,
    header: IndexHeader,
}

impl SparseIndexWriter {
    /// Creates the index file for a new data file: one page long (the
    /// header), growing with its entries up to its full length.
    pub fn create(path: &Path, header: IndexHeader) -> Result<SparseIndexWriter> {
        let len = IndexHeader::file_len(header.capacity);
        let file = IndexFile::create(path, len, &header.encode())?;
        Ok(SparseIndexWriter { file, header })
    }

    /// Opens the index of an existing data file; a missing or damaged index
    /// (or one made for another file) is recreated empty, to be refilled by
    /// the caller's scan.
    pub fn open_or_rebuild(path: &Path, header: IndexHeader) -> Result<(SparseIndexWriter, bool)> {
        let len = IndexHeader::file_len(header.capacity);
        let (file, rebuilt) = IndexFile::open_or_create(path, len, &header.encode(), |b| {
            IndexHeader::decode(b).is_ok_and(|h| h == header)
        })?;
        Ok((SparseIndexWriter { file, header }, rebuilt))
    }

    /// Writes entry `i`, publishing its offset last. Allocates the entry's
    /// disk block first: a full disk is an error here, never SIGBUS.
    pub fn put(&mut self, i: u64, e: Entry) -> Result<()> {
        if i >= self.header.capacity {
            return Ok(()); // cannot happen with `capacity()`; an index is only a hint
        }
        let at = entry_at(i);
        self.file.ensure(at + INDEX_ENTRY_LEN)?;
        self.file.map.write(at, &e.seq.to_le_bytes());
        self.file.map.write(at + 8, &e.timestamp.to_le_bytes());
        self.file
            .map
            .write(at + ENTRY_CRC_AT, &e.crc().to_le_bytes());
        self.file.map.store_u64(at + ENTRY_OFFSET_AT, e.offset);
        Ok(())
    }

    /// The valid entries, in order, as read back from the file.
    pub fn entries(&self, data_len: u64) -> Vec<Entry> {
        // Only the first data range: see `SparseIndex::limit`.
        let data_end = self.file.map.data_ranges(0).first().map_or(0, |r| r.1);
        valid_entries(
            &self.file.map.as_slice()[..data_end],
            &self.header,
            data_len,
        )
    }

    /// Zeroes entries `i..` (after recovery cut the data they described).
    /// Only ranges holding data are read and written: holes read as zeros
    /// already.
    pub fn truncate_from(&mut self, i: u64) {
        if i < self.header.capacity {
            self.file.zero_from(entry_at(i));
        }
    }

    /// The data file is sealed with `entries` entries: gives back the disk
    /// blocks past them (the file keeps its length, so that a reader that
    /// mapped it while it was written can still search all of it; the
    /// unused tail reads as zeros, "not written").
    pub fn seal(&mut self, entries: u64) -> Result<()> {
        self.file.seal(entry_at(entries.min(self.header.capacity)))
    }

    /// msyncs the whole index file.
    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }
}

/// Entry `i` and its stored CRC.
fn read_entry(b: &[u8], i: u64) -> Option<(Entry, u64)> {
    let at = entry_at(i);
    let e = Entry {
        seq: le_u64(b, at)?,
        timestamp: le_u64(b, at + 8)?,
        offset: le_u64(b, at + ENTRY_OFFSET_AT)?,
    };
    Some((e, le_u64(b, at + ENTRY_CRC_AT)?))
}

fn valid_entries(b: &[u8], h: &IndexHeader, data_len: u64) -> Vec<Entry> {
    let mut out = Vec::new();
    for i in 0..h.capacity {
        match read_entry(b, i) {
            Some((e, crc)) if plausible(&e, crc, h, i, data_len) => out.push(e),
            _ => break,
        }
    }
    out
}

/// The reader's side: a read-only mapping of one index file.
#[derive(Debug)]
pub struct SparseIndex {
    map: Mapping,
    header: IndexHeader,
    data_len: u64,
    /// Entries in the file's first data range: searches never probe past
    /// them, since a hole read through a mapping allocates a page on tmpfs
    /// (SIGBUS when it is full), and entries are written in order.
    limit: u64,
}

impl SparseIndex {
    /// Opens the index; `None` when it is missing or its header is bad (the
    /// reader then scans from the start of the data file).
    pub fn open(path: &Path, first_seq: u64, data_len: u64) -> Option<SparseIndex> {
        // Mapped at its length: searches stop at the first hole, and from
        // format version 11 the file is no longer than its entries (and a
        // chunk), so the length is no check of the header (a version-10
        // file is `file_len(capacity)` long, a version-11 file at most).
        let map = Mapping::open(path).ok()?;
        let header = IndexHeader::decode(map.as_slice()).ok()?;
        if header.first_seq != first_seq
            || (map.len() as u64) > IndexHeader::file_len(header.capacity)
        {
            return None;
        }
        let data_end = map.data_ranges(0).first().map_or(0, |r| r.1);
        let limit = (data_end.saturating_sub(INDEX_HEADER_LEN) / INDEX_ENTRY_LEN) as u64;
        Some(SparseIndex {
            map,
            header,
            data_len,
            limit: limit.min(header.capacity),
        })
    }

    fn entry(&self, i: u64) -> Option<Entry> {
        if i >= self.limit {
            return None;
        }
        let at = entry_at(i);
        let offset = self.map.load_u64(at + ENTRY_OFFSET_AT);
        if offset == 0 {
            return None;
        }
        let b = self.map.as_slice();
        let e = Entry {
            seq: le_u64(b, at)?,
            timestamp: le_u64(b, at + 8)?,
            offset,
        };
        let crc = le_u64(b, at + ENTRY_CRC_AT)?;
        plausible(&e, crc, &self.header, i, self.data_len).then_some(e)
    }

    /// Number of published entries (they form a prefix).
    fn count(&self) -> u64 {
        self.partition(self.limit, |_| true)
    }

    /// The last entry at or before `seq`.
    pub fn floor_seq(&self, seq: u64) -> Option<Entry> {
        if seq < self.header.first_seq {
            return None;
        }
        let want = (seq - self.header.first_seq) / self.header.interval as u64;
        let last = self.count().checked_sub(1)?;
        self.entry(want.min(last))
    }

    /// The last entry whose timestamp is before `micros`: a scan from it
    /// reaches the first message at or after `micros`.
    pub fn floor_time(&self, micros: u64) -> Option<Entry> {
        let lo = self.partition(self.count(), |e| e.timestamp < micros);
        lo.checked_sub(1).and_then(|i| self.entry(i))
    }

    /// The last entry at or before byte `offset`.
    pub fn floor_offset(&self, offset: u64) -> Option<Entry> {
        let lo = self.partition(self.count(), |e| e.offset <= offset);
        lo.checked_sub(1).and_then(|i| self.entry(i))
    }

    /// The first entry after byte `offset`: where a reader resumes after
    /// damage at `offset` with a known sequence.
    pub fn ceil_after(&self, offset: u64) -> Option<Entry> {
        let n = self.count();
        let lo = self.partition(n, |e| e.offset <= offset);
        (lo..n).find_map(|i| self.entry(i))
    }

    /// Binary search over entries `0..n`: the first index whose entry is
    /// unreadable or fails `before` (entries are in order, so `before`
    /// holds for a prefix).
    fn partition(&self, n: u64, before: impl Fn(&Entry) -> bool) -> u64 {
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.entry(mid) {
                Some(e) if before(&e) => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }

    /// The last published entry.
    pub fn last(&self) -> Option<Entry> {
        self.count().checked_sub(1).and_then(|i| self.entry(i))
    }
}

/// Convenience for recovery: opens an index read-only and returns its last entry.
pub fn last_entry(path: &Path, first_seq: u64, data_len: u64) -> Option<Entry> {
    SparseIndex::open(path, first_seq, data_len)?.last()
}
