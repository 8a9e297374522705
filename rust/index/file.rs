//! The writer's side of a per-data-file index (sparse or dense): a sparse
//! file of its full length, mapped whole, whose disk blocks are allocated
//! ahead of the entries written into them and given back at seal. Shared
//! by [`super::sparse::SparseIndexWriter`] and
//! [`super::dense::DenseIndexWriter`], which differ only in what an entry
//! holds.

use std::path::Path;

use crate::error::{Error, Result};
use crate::storage::alloc::{ChunkAllocator, INDEX_MAX_CHUNK, INDEX_MIN_CHUNK};
use crate::storage::mapped::{punch_hole, WritableMapping};

#[derive(Debug)]
pub(crate) struct IndexFile {
    pub(crate) map: WritableMapping,
    alloc: ChunkAllocator,
}

impl IndexFile {
    /// Creates the file anew, `len` bytes long, with a disk block for its
    /// first page, where `header` is written.
    pub(crate) fn create(path: &Path, len: u64, header: &[u8]) -> Result<IndexFile> {
        let _ = std::fs::remove_file(path);
        let (mut map, allocated) = WritableMapping::create_sparse(path, len, 4096)?;
        let alloc = Self::allocator(&map, allocated as usize)?;
        map.write(0, header);
        Ok(IndexFile { map, alloc })
    }

    /// Opens the file when it is `len` bytes long and `fits` accepts its
    /// header; otherwise (missing, damaged, made for another data file)
    /// creates it anew as [`IndexFile::create`] does, and `true` says so:
    /// the caller refills it. Which bytes of an opened file have blocks is
    /// not known: the first `ensure` allocates from the start.
    pub(crate) fn open_or_create(
        path: &Path,
        len: u64,
        header: &[u8],
        fits: impl FnOnce(&[u8]) -> bool,
    ) -> Result<(IndexFile, bool)> {
        if let Ok(map) = WritableMapping::open(path) {
            if map.len() as u64 == len && fits(map.as_slice()) {
                let alloc = Self::allocator(&map, 0)?;
                return Ok((IndexFile { map, alloc }, false));
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

    /// Makes sure bytes `0..need` have disk blocks (a full disk is an
    /// error here, never SIGBUS on the write that follows).
    pub(crate) fn ensure(&self, need: usize) -> Result<()> {
        self.alloc.ensure(need)
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
