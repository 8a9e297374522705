//! The writer's side of a per-data-file index (sparse or dense): a file
//! mapped at its full length that grows with the entries written into it
//! (format version 11; before, a sparse file of its full length), whose
//! unused disk blocks are given back at seal. Shared
//! by [`super::sparse::SparseIndexWriter`] and
//! [`super::dense::DenseIndexWriter`], which differ only in what an entry
//! holds.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, Result};
use crate::storage::alloc::{ChunkAllocator, INDEX_MAX_CHUNK, INDEX_MIN_CHUNK};
use crate::storage::mapped::{punch_hole, WritableMapping};

#[derive(Debug)]
pub(crate) struct IndexFile {
    pub(crate) map: WritableMapping,
    alloc: ChunkAllocator,
    /// The file's length when last looked at (it only grows while open).
    seen_len: AtomicUsize,
}

impl IndexFile {
    /// Creates the file anew, mapped at `len` bytes, one page long (the
    /// page where `header` is written); it grows as entries are written.
    pub(crate) fn create(path: &Path, len: u64, header: &[u8]) -> Result<IndexFile> {
        let _ = std::fs::remove_file(path);
        let (mut map, allocated) = WritableMapping::create_growing(path, len, 4096)?;
        let alloc = Self::allocator(&map, allocated as usize)?;
        map.write(0, header);
        Ok(IndexFile {
            map,
            alloc,
            seen_len: AtomicUsize::new(0),
        })
    }

    /// Opens the file when it is at most `len` bytes long (`len`: written
    /// by version 10 or before; shorter: version 11, grown as far as its
    /// entries) and `fits` accepts its header; otherwise (missing, damaged,
    /// made for another data file) creates it anew as
    /// [`IndexFile::create`] does, and `true` says so: the caller refills
    /// it. Which bytes of an opened file have blocks is not known: the
    /// first `ensure` allocates from the start.
    pub(crate) fn open_or_create(
        path: &Path,
        len: u64,
        header: &[u8],
        fits: impl FnOnce(&[u8]) -> bool,
    ) -> Result<(IndexFile, bool)> {
        if let Ok(map) = WritableMapping::open_at_least(path, len) {
            if map.len() as u64 == len && fits(map.readable()) {
                let alloc = Self::allocator(&map, 0)?;
                return Ok((
                    IndexFile {
                        map,
                        alloc,
                        seen_len: AtomicUsize::new(0),
                    },
                    false,
                ));
            }
        }
        Ok((Self::create(path, len, header)?, true))
    }

    fn allocator(map: &WritableMapping, allocated: usize) -> Result<ChunkAllocator> {
        ChunkAllocator::new(
            map.file(),
            map.path(),
            map.len(),
            allocated,
            (INDEX_MIN_CHUNK, INDEX_MAX_CHUNK),
        )
    }

    /// Makes sure bytes `0..need` exist with disk blocks, growing the file
    /// (a full disk is an error here, never SIGBUS on the write that
    /// follows).
    pub(crate) fn ensure(&self, need: usize) -> Result<()> {
        self.alloc.ensure(need)
    }

    /// The u64 at `at`, 0 (not written) when it lies past the file's
    /// length: a load there through the mapping would be SIGBUS.
    pub(crate) fn read_u64(&self, at: usize) -> u64 {
        let end = at + 8;
        if end > self.alloc.extended() && end > self.seen_len.load(Ordering::Relaxed) {
            let now = self.map.readable().len();
            self.seen_len.store(now, Ordering::Relaxed);
            if end > now {
                return 0;
            }
        }
        crate::format::le_u64(self.map.as_slice(), at).unwrap_or(0)
    }

    /// Zeroes bytes `at..`. Only ranges holding data are read and written:
    /// holes read as zeros already.
    pub(crate) fn zero_from(&mut self, at: usize) {
        for (start, stop) in self.map.data_ranges(at) {
            let start = start.max(at);
            let b = &self.map.as_slice()[start..stop];
            if let Some(last) = b.iter().rposition(|&x| x != 0) {
                self.map.zero(start, last + 1);
            }
        }
    }

    /// No more allocation; gives back the disk blocks past the page that
    /// holds byte `used - 1`. The file keeps its length (a reader that
    /// mapped it while it was written may still probe past the last entry;
    /// truncating would be SIGBUS for it), and the unused tail reads as zeros.
    pub(crate) fn seal(&mut self, used: usize) -> Result<()> {
        self.alloc.close();
        let used = (used as u64).div_ceil(4096) * 4096;
        let len = self.map.len() as u64;
        if used < len {
            punch_hole(self.map.file(), used, len - used)
                .map_err(|e| Error::io("punch hole", self.map.path(), e))?;
        }
        Ok(())
    }

    /// msyncs the whole file.
    pub(crate) fn sync(&self) -> Result<()> {
        self.map.sync_range(0, self.map.len())
    }
}
