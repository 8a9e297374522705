//! Files grown and disk blocks allocated ahead of the writer, in chunks.
//!
//! A data file (and its sparse and dense index) is mapped at its full size
//! but is only as long as the chunks its writer has reached (format version
//! 11; before, it was a sparse file of its full size): a store or a load
//! through a mapping past end of file is SIGBUS, and a store into a hole
//! on a full disk too. So nothing is written past [`ChunkAllocator::extended`]:
//! the writer calls [`ChunkAllocator::ensure`] before it writes, which
//! makes the file longer with disk blocks for what it gains (`fallocate`
//! without `FALLOC_FL_KEEP_SIZE`; a failed allocation is an ordinary I/O
//! error, `ENOSPC`, that poisons the writer). The prefault thread calls
//! [`ChunkAllocator::ahead`], which allocates blocks past the length
//! (`FALLOC_FL_KEEP_SIZE`) so that the writer's next growth rarely waits
//! for the disk; only the writer changes the length (with several writer
//! processes, while it holds the append lock: a late growth by another
//! process's thread could otherwise lengthen a file sealed and trimmed
//! meanwhile). Chunks grow with the file (as large as what is there
//! already, between `min_chunk` and `max_chunk`), so a file holding one
//! message is one chunk long and a file being filled fast grows 64 MiB at
//! a time.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::storage::mapped::{allocate_range, grow_file};

/// Allocation granularity: a page.
const PAGE: usize = 4096;

/// Chunk sizes for data files: the first chunk is [`data_min_chunk`].
pub const DATA_MIN_CHUNK: usize = 1 << 20;
pub const DATA_MAX_CHUNK: usize = 64 << 20;

/// The first (and smallest) chunk of a data file of `file_size` bytes:
/// [`DATA_MIN_CHUNK`], or a sixteenth of a smaller file (at least two
/// pages: the header and room for frames, marker and footer),
/// so that a small file grows in several steps as a large one does.
pub fn data_min_chunk(file_size: u64) -> usize {
    let sixteenth = usize::try_from(file_size / 16).unwrap_or(usize::MAX);
    round_up(sixteenth).clamp(2 * PAGE, DATA_MIN_CHUNK)
}

/// Chunk sizes for sparse-index files.
pub const INDEX_MIN_CHUNK: usize = 16 << 10;
pub const INDEX_MAX_CHUNK: usize = 1 << 20;

/// Allocates a sparse file's blocks ahead of its writer. Shared by the I/O
/// thread and the prefault thread.
#[derive(Debug)]
pub struct ChunkAllocator {
    file: File,
    path: PathBuf,
    len: usize,
    min_chunk: usize,
    max_chunk: usize,
    /// Bytes `0..allocated` have disk blocks.
    allocated: AtomicUsize,
    /// The file is at least this long (its writer made it so).
    extended: AtomicUsize,
    /// Held while allocating; `true` once the file is sealed (no more
    /// allocation: the file is about to be trimmed).
    closed: Mutex<bool>,
}

fn round_up(n: usize) -> usize {
    n.div_ceil(PAGE).saturating_mul(PAGE)
}

impl ChunkAllocator {
    /// An allocator for `file` (mapped `len` bytes long) of which
    /// `allocated` bytes are known to have blocks (0 when unknown: the
    /// first `ensure` allocates from the start, which costs nothing where
    /// blocks exist). The file's length is looked up: `ensure` grows it
    /// only past it.
    pub fn new(
        file: &File,
        path: &Path,
        len: usize,
        allocated: usize,
        (min_chunk, max_chunk): (usize, usize),
    ) -> Result<ChunkAllocator> {
        let extended = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len()
            .try_into()
            .unwrap_or(usize::MAX);
        Ok(ChunkAllocator {
            file: file.try_clone().map_err(|e| Error::io("dup", path, e))?,
            path: path.to_path_buf(),
            len,
            min_chunk,
            max_chunk,
            allocated: AtomicUsize::new(allocated.min(len)),
            extended: AtomicUsize::new(extended.min(len)),
            closed: Mutex::new(false),
        })
    }

    /// Bytes from the start of the file that have disk blocks.
    pub fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Acquire)
    }

    /// Bytes from the start of the file that exist (the file is at least
    /// this long): what may be written.
    pub fn extended(&self) -> usize {
        self.extended.load(Ordering::Acquire)
    }

    /// Makes sure bytes `0..need` exist with disk blocks, growing the file
    /// by the chunk that holds `need` if they do not. Called by the file's
    /// writer only (see the module's comment). Errors name the file
    /// (`ENOSPC` on a full disk).
    #[inline]
    pub fn ensure(&self, need: usize) -> Result<()> {
        if need <= self.extended() && need <= self.allocated() {
            return Ok(());
        }
        self.grow(need, true).map(|_| ())
    }

    /// Called by the prefault thread: allocates the blocks of the next
    /// chunk (past the file's length, which it leaves as it is) when the
    /// writer at `write_pos` is within half a chunk of the allocated end.
    /// Errors are left for the writer's own `ensure` to meet and report.
    pub fn ahead(&self, write_pos: usize) -> bool {
        if write_pos < self.ahead_from() {
            return false;
        }
        let have = self.allocated();
        self.grow(write_pos.max(have) + 1, false).unwrap_or(false)
    }

    /// The write position from which [`ChunkAllocator::ahead`] allocates
    /// the next chunk (`usize::MAX` once the whole file is allocated).
    pub fn ahead_from(&self) -> usize {
        let have = self.allocated();
        if have >= self.len {
            return usize::MAX;
        }
        have.saturating_sub(self.chunk(have) / 2)
    }

    /// No more allocation: the file is sealed and about to be trimmed, or
    /// closed and about to give back what lies past its data. Waits for an
    /// allocation in progress.
    pub fn close(&self) {
        *self.closed.lock().unwrap_or_else(|e| e.into_inner()) = true;
    }

    fn chunk(&self, have: usize) -> usize {
        have.clamp(self.min_chunk, self.max_chunk)
    }

    #[cold]
    fn grow(&self, need: usize, writer: bool) -> Result<bool> {
        let closed = self.closed.lock().unwrap_or_else(|e| e.into_inner());
        let (ext, have) = (self.extended(), self.allocated());
        let short = writer && need > ext;
        if need <= have && !short {
            return Ok(false);
        }
        if *closed {
            if writer {
                return Err(Error::InvalidArgument(format!(
                    "internal: write past the allocated end of sealed file {}",
                    self.path.display()
                )));
            }
            return Ok(false);
        }
        let io = |e| Error::io("allocate", &self.path, e);
        if short {
            // The file grows by a chunk as long as it is; blocks below its
            // length may be missing (a file opened again, whose unused
            // tail a clean close punched out) and are allocated first;
            // past it, `grow_file` allocates what the prefault thread did
            // not.
            let target = round_up(need.max(ext + self.chunk(ext))).min(self.len);
            let start = have & !(PAGE - 1);
            if start < target {
                allocate_range(&self.file, start as u64, (target - start) as u64).map_err(io)?;
            }
            grow_file(&self.file, target as u64).map_err(io)?;
            self.extended.store(target, Ordering::Release);
            self.allocated.fetch_max(target, Ordering::AcqRel);
            return Ok(true);
        }
        // Blocks only: ahead of the writer (past the length, which the
        // prefault thread leaves as it is), or below the length of a file
        // opened again.
        let mut target = round_up(need.max(have + self.chunk(have))).min(self.len);
        if writer {
            target = target.min(ext);
        }
        let start = have & !(PAGE - 1);
        let supported =
            allocate_range(&self.file, start as u64, (target - start) as u64).map_err(io)?;
        // A file system that cannot allocate ranges gets its blocks from
        // the zeros `grow_file` writes when the writer grows the file: no
        // allocation ahead.
        let now = if supported { target } else { self.len };
        self.allocated.store(now, Ordering::Release);
        Ok(supported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn chunks_grow_with_the_file_and_stay_ahead() {
        let dir = std::env::temp_dir().join(format!("litemq-alloc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let len = 64 << 20;
        let a = ChunkAllocator::new(&file, &path, len, 0, (1 << 20, 8 << 20)).unwrap();
        let size = || std::fs::metadata(&path).unwrap().len();
        a.ensure(100).unwrap();
        assert_eq!(a.allocated(), 1 << 20, "first chunk: the minimum");
        assert_eq!(size(), 1 << 20, "the file grows with its chunks");
        a.ensure((1 << 20) + 1).unwrap();
        assert_eq!(a.allocated(), 2 << 20, "then as large as what is there");
        assert_eq!(size(), 2 << 20);
        assert!(!a.ahead(0), "the writer is far from the end");
        assert!(a.ahead((2 << 20) - 10));
        assert_eq!(a.allocated(), 4 << 20);
        assert_eq!(a.extended(), 2 << 20);
        assert_eq!(size(), 2 << 20, "blocks ahead leave the length as it is");
        let blocks = std::fs::metadata(&path).unwrap().blocks() * 512;
        assert!((4 << 20..5 << 20).contains(&blocks), "{blocks}");
        a.ensure((2 << 20) + 1).unwrap();
        assert_eq!(size(), 4 << 20, "the writer grows it over the blocks ahead");
        a.close();
        assert!(!a.ahead((4 << 20) - 10), "no allocation once closed");
        assert!(a.ensure(5 << 20).is_err());
        assert_eq!(size(), 4 << 20, "nor growth");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
