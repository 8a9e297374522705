//! Memory-mapped files: where most of the engine's `unsafe` is (the other
//! places are listed in docs/DESIGN.md, "Where `unsafe` is").
//!
//! Two types, two roles:
//! - [`Mapping`]: a read-only shared mapping. Readers hand out `&[u8]`
//!   slices of *published* bytes only; published bytes are never written
//!   again (the journal is append-only, and recovery only zeroes bytes past
//!   the last complete frame, which no reader has been given). Lengths are
//!   loaded with acquire ordering.
//! - [`WritableMapping`]: a read-write shared mapping owned by the single
//!   I/O thread (`&mut self` for every write). It writes a frame's record and
//!   CRC first, then stores the length with release ordering.
//!
//! The two never alias in Rust's sense: a tailer maps the file itself, even
//! in the writer's process. Bytes shared between them live in the page cache
//! and are coordinated by the length word only. `docs/DESIGN.md` explains
//! why that is sound across processes and what is assumed of other writers
//! (none may modify published bytes; none may truncate a file).
#![expect(
    unsafe_code,
    reason = "the one module that maps files; each block states its SAFETY"
)]

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, Result};

/// Loads an aligned little-endian word at `ptr` with acquire ordering.
///
/// # Safety
/// `ptr` must be valid for reads of 4 bytes for the duration of the call and
/// aligned to 4.
unsafe fn load_u32(ptr: *const u8) -> u32 {
    // SAFETY: the caller guarantees alignment and validity; AtomicU32 has the
    // same layout as u32, and an atomic load on shared file memory is a
    // plain aligned load (x86-64: mov; aarch64: ldar), valid on read-only
    // mappings too.
    u32::from_le(unsafe { (*ptr.cast::<AtomicU32>()).load(Ordering::Acquire) })
}

/// Loads an aligned little-endian u64 at `ptr` with acquire ordering.
///
/// # Safety
/// As [`load_u32`], with 8 bytes and alignment 8.
unsafe fn load_u64(ptr: *const u8) -> u64 {
    // SAFETY: as in `load_u32`; 64-bit targets load 8 aligned bytes in one
    // instruction, so this is valid on read-only memory.
    u64::from_le(unsafe { (*ptr.cast::<AtomicU64>()).load(Ordering::Acquire) })
}

fn check_word(len: usize, offset: usize, size: usize) {
    assert!(
        offset.is_multiple_of(size) && offset.checked_add(size).is_some_and(|e| e <= len),
        "word at {offset} (size {size}) outside a {len}-byte mapping or unaligned"
    );
}

/// A read-only shared mapping of a file, possibly longer than the file.
///
/// Invariant: `raw` maps `map_len` bytes of the file at `path` and lives as
/// long as `self`; `file` is that file. Only bytes below the file's length
/// may be touched (a load past end of file through a mapping is SIGBUS):
/// `valid` caches that length, at most `map_len`, and every access is
/// bounded by it ([`Mapping::as_slice`], [`Mapping::load_u32`]); an access
/// that would pass it refreshes it first with `fstat`
/// ([`Mapping::covers`]). A data file that is being written grows (format
/// version 11): it is mapped at its header's `file_size` and read up to its
/// current length, which the writer extends before it publishes a frame
/// there (see `docs/DESIGN.md`, "Files that grow"). litemq truncates a file
/// only when it seals it (format version 4), and never below its
/// end-of-file marker and footer: a reader that cached a longer length
/// only ever touches published frames and the marker, which stay (see
/// `docs/DESIGN.md`, "Trimming sealed files").
#[derive(Debug)]
pub struct Mapping {
    raw: MmapRaw,
    map_len: usize,
    /// Bytes known to exist in the file (at most `map_len`).
    valid: AtomicUsize,
    file: File,
    path: PathBuf,
    /// `(st_dev, st_ino)` of the file mapped: which file this is, even if
    /// its path is later given to another.
    identity: (u64, u64),
    /// Kept by [`Mapping::open_watched`], for [`Mapping::still_named`].
    watch: Option<Watch>,
}

/// What [`Mapping::still_named`] saw at its last path lookup.
#[derive(Debug)]
struct Watch {
    /// `(st_nlink, st_ctime, st_ctime_nsec)` the last time a path lookup
    /// found the path naming the file, and that change time was settled
    /// (see [`Mapping::still_named`]).
    seen: Mutex<Option<(u64, i64, i64)>>,
}

/// A change time at least this old is settled: a later change of the
/// inode (a link, an unlink, a rename) gets a later one, whatever the
/// granularity of the file system's clock (a kernel tick at most).
const CTIME_SETTLED: Duration = Duration::from_secs(1);

/// Largest mapping [`Mapping::open_extent`] makes for a file shorter than
/// it: files are at most 2^40 bytes (a dense-index entry's offset).
const MAX_EXTENT: u64 = 1 << 40;

impl Mapping {
    /// Maps the whole of `path` read-only (its current length).
    pub fn open(path: &Path) -> Result<Mapping> {
        Self::open_extent(path, false, |_| None)
    }

    /// As [`Mapping::open`], keeping what a path lookup saw, so that
    /// [`Mapping::still_named`] is usually one `fstat`. For the mappings a
    /// handle keeps and checks on every `get` (at most 65 per handle).
    pub fn open_watched(path: &Path) -> Result<Mapping> {
        Self::open_extent(path, true, |_| None)
    }

    /// Maps `path` read-only at the length `extent` gives for it (read
    /// from the open file: a data file's `file_size` from its header), or
    /// its current length when that is longer, or `extent` says nothing.
    /// Bytes past the file's length are never touched (see the type's
    /// invariant): a file that grows is read as it grows.
    pub fn open_extent(
        path: &Path,
        watched: bool,
        extent: impl FnOnce(&File) -> Option<u64>,
    ) -> Result<Mapping> {
        use std::os::unix::fs::MetadataExt;
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
        let len = meta.len();
        let want = extent(&file).filter(|&n| n <= MAX_EXTENT).unwrap_or(0);
        let map_len = usize::try_from(len.max(want))
            .map_err(|_| Error::io("mmap", path, std::io::Error::from_raw_os_error(libc::EFBIG)))?;
        let raw = MmapOptions::new()
            .len(map_len)
            .map_raw_read_only(&file)
            .map_err(|e| Error::io("mmap", path, e))?;
        Ok(Mapping {
            raw,
            map_len,
            valid: AtomicUsize::new(len as usize),
            file,
            path: path.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
            watch: watched.then(|| Watch {
                seen: Mutex::new(None),
            }),
        })
    }

    /// True when bytes `..end` exist (are below the file's length, and
    /// mapped): checks the cached length, and refreshes it with `fstat`
    /// when `end` passes it. A writer extends a file before it publishes a
    /// frame in the new bytes, so after a reader has loaded a length word
    /// this tells whether the frame it announces exists.
    #[inline]
    pub fn covers(&self, end: usize) -> bool {
        end <= self.valid.load(Ordering::Acquire) || self.refresh_len() >= end
    }

    /// Loads the file's current length (at most what is mapped) into the
    /// cache [`Mapping::len`] reads, and returns it.
    #[cold]
    pub fn refresh_len(&self) -> usize {
        let now = self
            .file
            .metadata()
            .map_or(0, |m| usize::try_from(m.len()).unwrap_or(usize::MAX))
            .min(self.map_len);
        self.valid.store(now, Ordering::Release);
        now
    }

    /// True while the mapping's path still names the file mapped: false
    /// once the file was deleted, or renamed, or another file put in its
    /// place (retention or compaction in another process), or when the
    /// path cannot be looked up.
    ///
    /// One path lookup (`stat`), or for a watched mapping usually one
    /// `fstat` of its descriptor: every link, unlink or rename of an inode
    /// sets its change time, so while link count and change time are those
    /// seen at the last lookup that found the path naming the file, it
    /// still does. A change time is trusted only once settled
    /// ([`CTIME_SETTLED`] old when looked up): two changes within one tick
    /// of a coarse clock may leave it unchanged. A clock stepped back by
    /// more than that while the file is relinked could fool it; a link
    /// count of 0 never does.
    pub fn still_named(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let named =
            || std::fs::metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.identity);
        let Some(w) = &self.watch else {
            return named();
        };
        let Ok(m) = self.file.metadata() else {
            return named();
        };
        if m.nlink() == 0 {
            return false;
        }
        let now = (m.nlink(), m.ctime(), m.ctime_nsec());
        let mut seen = w.seen.lock().unwrap_or_else(|e| e.into_inner());
        if *seen == Some(now) {
            return true;
        }
        if !named() {
            return false;
        }
        let changed = SystemTime::UNIX_EPOCH
            + Duration::new(
                m.ctime().max(0) as u64,
                m.ctime_nsec().clamp(0, 999_999_999) as u32,
            );
        let settled = SystemTime::now()
            .duration_since(changed)
            .is_ok_and(|age| age >= CTIME_SETTLED);
        *seen = settled.then_some(now);
        true
    }

    /// The mapped file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes that may be read: the file's length when last looked at
    /// (see [`Mapping::covers`]), at most what is mapped.
    pub fn len(&self) -> usize {
        self.valid.load(Ordering::Acquire)
    }

    /// Bytes mapped: the file's length when opened, or the longer extent
    /// asked for (a growing data file's `file_size`).
    pub fn mapped_len(&self) -> usize {
        self.map_len
    }

    /// True when nothing may be read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(st_dev, st_ino)` of the mapped file, taken when it was opened.
    pub fn identity(&self) -> (u64, u64) {
        self.identity
    }

    /// The mapped bytes the file has: `..len()`, the length last looked
    /// at ([`Mapping::covers`] refreshes it; take the slice after). Bytes
    /// not yet published by a writer may change under this slice; callers
    /// only interpret bytes behind a length word loaded with
    /// [`Mapping::load_u32`].
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `raw` is a live mapping of `map_len` bytes (invariant), of
        // which the first `len()` exist in the file: the file only shrinks
        // when sealed, never below what a reader is given (invariant), so
        // no byte of the slice is past end of file. Bytes a reader
        // interprets are published and never written again; unpublished
        // bytes may change, but they are only inspected through atomic
        // loads or as opaque `u8`s whose every bit pattern is valid.
        unsafe { std::slice::from_raw_parts(self.raw.as_ptr(), self.len()) }
    }

    /// Acquire-load of the u32 at `offset` (aligned to 4, in bounds: the
    /// caller checked [`Mapping::covers`]; a word past the file is a bug).
    pub fn load_u32(&self, offset: usize) -> u32 {
        self.covers(offset.saturating_add(4));
        check_word(self.len(), offset, 4);
        // SAFETY: bounds and alignment were checked above; the mapping is live.
        unsafe { load_u32(self.raw.as_ptr().add(offset)) }
    }

    /// Asks the CPU to bring the cache line at `offset` in ahead of a read
    /// (a hint: an offset past the end, or a page not mapped in yet, is
    /// ignored). A filtered read knows its next frames from an index and
    /// touches each of them once, far apart: without the hint each first
    /// touch waits for memory (`perf` put a quarter of a warm topic read on
    /// the load of the length word).
    #[inline]
    pub fn prefetch(&self, offset: usize) {
        #[cfg(target_arch = "x86_64")]
        if offset < self.len() {
            // SAFETY: `offset` is inside the live mapping; a prefetch reads
            // nothing into the program, never faults and has no effect on
            // memory (SSE, part of every x86_64 CPU).
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    self.raw.as_ptr().add(offset) as *const i8,
                )
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = offset;
    }

    /// Acquire-load of the u64 at `offset` (aligned to 8, in bounds).
    pub fn load_u64(&self, offset: usize) -> u64 {
        self.covers(offset.saturating_add(8));
        check_word(self.len(), offset, 8);
        // SAFETY: bounds and alignment were checked above; the mapping is live.
        unsafe { load_u64(self.raw.as_ptr().add(offset)) }
    }

    /// The u64 at `offset` (aligned to 8), or `None` when it lies past the
    /// file's current length (a growing index file: "not written yet").
    pub fn try_load_u64(&self, offset: usize) -> Option<u64> {
        self.covers(offset.checked_add(8)?)
            .then(|| self.load_u64(offset))
    }

    /// The ranges of bytes `from..len()` that hold data (see [`data_ranges`]).
    pub fn data_ranges(&self, from: usize) -> Vec<(usize, usize)> {
        let len = self.refresh_len();
        data_ranges(&self.file, from as u64, len as u64)
            .into_iter()
            .map(|(a, b)| (a as usize, b as usize))
            .collect()
    }

    /// Tells the kernel we read front to back.
    pub fn advise_sequential(&self) {
        let _ = self.raw.advise(memmap2::Advice::Sequential);
    }
}

/// A read-write shared mapping of a whole file, owned by one writer.
///
/// Invariant: as [`Mapping`]; additionally only this value writes through
/// `raw` while it lives.
#[derive(Debug)]
pub struct WritableMapping {
    raw: Arc<MmapRaw>,
    len: usize,
    path: PathBuf,
    file: File,
}

impl WritableMapping {
    /// Maps an existing file read-write, at its current length.
    pub fn open(path: &Path) -> Result<WritableMapping> {
        Self::open_at_least(path, 0)
    }

    /// Maps an existing file read-write at `len` bytes, or its current
    /// length when longer: a data file that grows (format version 11) is
    /// mapped at its `file_size`. Nothing may be written past the file's
    /// length before it is extended ([`grow_file`], a
    /// [`crate::storage::alloc::ChunkAllocator`]); [`WritableMapping::readable`]
    /// is what may be read.
    pub fn open_at_least(path: &Path, len: u64) -> Result<WritableMapping> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let have = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        Self::map(file, have.max(len) as usize, path)
    }

    /// Creates `path` (which must not exist), maps `size` bytes of it and
    /// gives it its first `first` bytes (rounded up to a page, at most
    /// `size`) with disk blocks ([`grow_file`]). Returns the mapping and
    /// how many bytes the file has. The file is as long as what is
    /// allocated (format version 11: files grow with their data); the
    /// caller must never write nor let a reader read past it without
    /// growing it first (a [`crate::storage::alloc::ChunkAllocator`]): a
    /// store past end of file is SIGBUS, a failed allocation an error.
    pub fn create_growing(path: &Path, size: u64, first: u64) -> Result<(WritableMapping, u64)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        let first = first.div_ceil(4096).saturating_mul(4096).min(size);
        match grow_file(&file, first) {
            Ok(()) => Ok((Self::map(file, size as usize, path)?, first)),
            Err(e) => {
                drop(file);
                let _ = std::fs::remove_file(path);
                Err(Error::io("preallocate", path, e))
            }
        }
    }

    /// The bytes of the mapping the file has now (one `fstat`): what
    /// recovery and a writer opening a file it did not write may read.
    pub fn readable(&self) -> &[u8] {
        let have = self
            .file
            .metadata()
            .map_or(0, |m| usize::try_from(m.len()).unwrap_or(usize::MAX));
        &self.as_slice()[..have.min(self.len)]
    }

    fn map(file: File, len: usize, path: &Path) -> Result<WritableMapping> {
        let raw = MmapOptions::new()
            .len(len)
            .map_raw(&file)
            .map_err(|e| Error::io("mmap", path, e))?;
        Ok(WritableMapping {
            raw: Arc::new(raw),
            len,
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// The ranges of bytes `from..` that hold data (see [`data_ranges`]).
    pub fn data_ranges(&self, from: usize) -> Vec<(usize, usize)> {
        data_ranges(&self.file, from as u64, self.len as u64)
            .into_iter()
            .map(|(a, b)| (a as usize, b as usize))
            .collect()
    }

    /// Records that the file was renamed (the mapping itself is unaffected).
    pub fn set_path(&mut self, path: &Path) {
        self.path = path.to_path_buf();
    }

    /// The whole mapping, for reading back what this writer wrote.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `raw` maps `len` bytes (invariant); in this process only
        // `&mut self` methods write, so nothing of ours changes while this
        // borrow lives. Other processes do write the file with `multi_writer`,
        // but each only while it holds the append lock and only past the
        // published tail (DESIGN.md, "Several writers"); the bytes are opaque
        // `u8`s (every bit pattern valid) and callers decode them with every
        // length bounds-checked and the CRC checked (DESIGN.md, "Other
        // processes"), so a change under the slice fails a check, no more.
        unsafe { std::slice::from_raw_parts(self.raw.as_ptr(), self.len) }
    }

    /// Copies `data` to `offset`. Panics when out of bounds (a bug, not bad data).
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        assert!(
            offset
                .checked_add(data.len())
                .is_some_and(|e| e <= self.len),
            "write of {} bytes at {offset} past a {}-byte mapping",
            data.len(),
            self.len
        );
        // SAFETY: bounds checked above; `&mut self` makes this the only
        // writer in the process; the target range is not published, so no
        // reader has a slice of it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.raw.as_mut_ptr().add(offset),
                data.len(),
            )
        }
    }

    /// Sets `len` bytes at `offset` to zero.
    pub fn zero(&mut self, offset: usize, len: usize) {
        assert!(offset.checked_add(len).is_some_and(|e| e <= self.len));
        // SAFETY: bounds checked above; as in `write`.
        unsafe { std::ptr::write_bytes(self.raw.as_mut_ptr().add(offset), 0, len) }
    }

    /// Publishes a length word: a release store, after the bytes it covers.
    pub fn store_u32(&mut self, offset: usize, value: u32) {
        check_word(self.len, offset, 4);
        // SAFETY: bounds and alignment checked; AtomicU32 has u32's layout;
        // the release store orders every earlier write of this thread before it.
        unsafe {
            (*self.raw.as_mut_ptr().add(offset).cast::<AtomicU32>())
                .store(value.to_le(), Ordering::Release)
        }
    }

    /// Publishes a u64 word with a release store.
    pub fn store_u64(&mut self, offset: usize, value: u64) {
        check_word(self.len, offset, 8);
        // SAFETY: as in `store_u32`, for 8 aligned bytes.
        unsafe {
            (*self.raw.as_mut_ptr().add(offset).cast::<AtomicU64>())
                .store(value.to_le(), Ordering::Release)
        }
    }

    /// Forces `len` bytes at `offset` to disk (msync, MS_SYNC).
    pub fn sync_range(&self, offset: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.raw
            .flush_range(offset, len)
            .map_err(|e| Error::io("msync", &self.path, e))
    }
}

/// Allocates `size` bytes of disk for `file`: fallocate where the file system
/// supports it, otherwise by writing zeros.
pub fn preallocate(file: &File, size: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let len =
        libc::off_t::try_from(size).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: `file` is an open descriptor for the duration of the call;
    // fallocate only reads its arguments.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => write_zeros(file, size),
        _ => Err(err),
    }
}

/// Makes `file` at least `len` bytes long, with disk blocks for the bytes
/// it gains (format version 11: a file grows ahead of its writer): a
/// `fallocate` that extends the length, so a full disk is `ENOSPC` here,
/// never SIGBUS on a store through a mapping. Never shortens the file
/// (another writer process may have grown it further). Where the file
/// system cannot allocate ranges, the bytes past the current length are
/// written with zeros (which allocates them too). Only a file's writer
/// grows it, holding the queue's append lock when there are several
/// writer processes, so nothing else writes past the length meanwhile.
pub fn grow_file(file: &File, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let have = file.metadata()?.len();
    if have >= len {
        return Ok(());
    }
    if fallocate(file, 0, have, len - have)? {
        return Ok(());
    }
    let chunk = vec![0u8; 1 << 16];
    let mut at = have;
    while at < len {
        let n = chunk.len().min((len - at) as usize);
        file.write_all_at(&chunk[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// Gives back the disk blocks allocated past the end of `file`
/// (`FALLOC_FL_KEEP_SIZE` allocations ahead of a writer): sets the length
/// the file has, which truncates nothing but frees those blocks. The
/// caller must be the only one growing the file (a growth between the
/// `fstat` and the truncate would be undone).
pub fn release_past_end(file: &File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    file.set_len(len)
}

/// Allocates disk blocks for `len` bytes at `offset` of `file` without
/// changing its length (`fallocate`, `FALLOC_FL_KEEP_SIZE`: a late call on
/// a file trimmed meanwhile never makes it long again). `Ok(false)` when the
/// file system cannot allocate ranges.
pub fn allocate_range(file: &File, offset: u64, len: u64) -> std::io::Result<bool> {
    fallocate(file, libc::FALLOC_FL_KEEP_SIZE, offset, len)
}

/// Gives back the disk blocks of `len` bytes at `offset` of `file`; they
/// read as zeros afterwards and the length is unchanged
/// (`FALLOC_FL_PUNCH_HOLE`). `Ok(false)` when the file system cannot.
pub fn punch_hole(file: &File, offset: u64, len: u64) -> std::io::Result<bool> {
    fallocate(
        file,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        offset,
        len,
    )
}

fn fallocate(file: &File, mode: libc::c_int, offset: u64, len: u64) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return Ok(true);
    }
    let big = || std::io::Error::from_raw_os_error(libc::EFBIG);
    let off = libc::off_t::try_from(offset).map_err(|_| big())?;
    let n = libc::off_t::try_from(len).map_err(|_| big())?;
    // SAFETY: `file` is an open descriptor for the duration of the call;
    // fallocate only reads its arguments and touches no memory of ours.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, off, n) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(false),
        _ => Err(err),
    }
}

/// The ranges of `from..to` in `file` that hold data (`SEEK_DATA` /
/// `SEEK_HOLE`): everything outside them is a hole and reads as zeros.
/// Reading a hole through a shared mapping allocates a page on tmpfs (and
/// SIGBUS on a full one), so scans over a sparse file visit only these.
/// Where the file system cannot tell, the whole range.
pub fn data_ranges(file: &File, from: u64, to: u64) -> Vec<(u64, u64)> {
    use std::os::fd::AsRawFd;
    let seek = |at: u64, whence: libc::c_int| -> Option<u64> {
        let at = libc::off_t::try_from(at).ok()?;
        // SAFETY: `file` is an open descriptor for the duration of the
        // call; lseek reads no memory of ours.
        let r = unsafe { libc::lseek(file.as_raw_fd(), at, whence) };
        u64::try_from(r).ok()
    };
    let mut out = Vec::new();
    let mut at = from;
    while at < to {
        let Some(data) = seek(at, libc::SEEK_DATA) else {
            let e = std::io::Error::last_os_error().raw_os_error();
            if e != Some(libc::ENXIO) {
                out.push((at, to)); // cannot tell: treat as data
            }
            break;
        };
        if data >= to {
            break;
        }
        let hole = seek(data, libc::SEEK_HOLE).unwrap_or(to).min(to);
        out.push((data, hole));
        at = hole.max(data + 1);
    }
    out
}

/// Bytes of disk allocated to `path` (`st_blocks` × 512), 0 when it is gone.
pub fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

fn write_zeros(file: &File, size: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let chunk = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < size {
        let n = chunk.len().min((size - at) as usize);
        file.write_all_at(&chunk[..n], at)?;
        at += n as u64;
    }
    file.sync_data()
}

/// A key-index file mapping viewed as atomic words (used by `index::key_index`).
/// A shared file mapping whose length is a multiple of 4 bytes (at least 32) and whose base
/// is page-aligned. Invariant: every access to the mapped bytes goes through the atomic
/// views below; the first 32 bytes (the header's four u64 fields) are only ever accessed
/// as `AtomicU64`, every other byte only as `AtomicU32`, so no two accesses of different
/// sizes overlap.
pub struct MappedWords {
    map: MmapRaw,
}

impl MappedWords {
    /// Wraps a mapping after checking the length and alignment the views rely on.
    pub fn new(map: MmapRaw, min_len: usize) -> std::result::Result<Self, String> {
        if map.len() < min_len.max(32) || !map.len().is_multiple_of(4) {
            return Err(format!(
                "mapping length {} is not a valid index length",
                map.len()
            ));
        }
        if !(map.as_ptr() as usize).is_multiple_of(8) {
            return Err("mapping is not 8-byte aligned".to_owned());
        }
        Ok(Self { map })
    }

    /// All bytes from offset 32 on, as u32 words; word `w` covers bytes `32 + 4w ..`.
    pub fn u32s(&self) -> &[AtomicU32] {
        let len = (self.map.len() - 32) / 4;
        // SAFETY: the pointer is the base of a live mapping of `map.len()` bytes that is
        // owned by `self` and unmapped only when `self` drops, so it outlives the returned
        // borrow; `new` checked the base is 8-aligned and the length covers 32 + 4*len
        // bytes. `AtomicU32` has the size and alignment of `u32` and no invalid bit
        // patterns. All in-process accesses are atomic (type invariant), so there is no
        // data race with the writer. Another process writing the same file is outside the
        // Rust memory model; the words it can change are re-validated on every read (see
        // DESIGN.md, "Other processes").
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(32).cast::<AtomicU32>(), len) }
    }

    /// The header's first 32 bytes as four u64 words.
    pub fn header_u64s(&self) -> &[AtomicU64] {
        // SAFETY: as for `u32s`: live owned mapping, base 8-aligned (checked in `new`),
        // at least 32 bytes long; `AtomicU64` has the layout of `u64`; bytes 0..32 are
        // only ever accessed through this view.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU64>(), 4) }
    }

    /// msync of the whole mapping.
    pub fn flush(&self) -> std::io::Result<()> {
        self.map.flush()
    }

    /// msync of a byte range.
    pub fn flush_range(&self, offset: usize, len: usize) -> std::io::Result<()> {
        self.map.flush_range(offset, len)
    }
}

/// A small shared file viewed as an array of `AtomicU64` (the append lock of
/// queues with several writer processes). Invariant: the mapping is
/// `8 * words` bytes, page-aligned, owned by `self`; every access to it goes
/// through [`WordFile::words`], so all accesses are 8-byte atomics.
#[derive(Debug)]
pub struct WordFile {
    map: MmapRaw,
    words: usize,
}

impl WordFile {
    /// Opens `path`, creating it and extending it with zeros to `words`
    /// words when shorter (never shrinking it).
    pub fn open(path: &Path, words: usize) -> Result<WordFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let len = (words * 8) as u64;
        let have = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        if have < len {
            // set_len extends with zeros; a concurrent opener doing the
            // same writes the same zeros.
            file.set_len(len)
                .map_err(|e| Error::io("extend", path, e))?;
        }
        Self::map(&file, words, path)
    }

    /// Opens `path`, which must exist and hold exactly `words` words (a
    /// file created whole elsewhere, such as a work-queue state file):
    /// never creates nor extends it. Every page gets its disk blocks first
    /// (a file written by an older litemq has holes): a write through the
    /// mapping into a hole on a full disk is SIGBUS, an allocation that
    /// fails here is `ENOSPC` (`op: "allocate"`). A file system that cannot
    /// allocate ranges is left as it is.
    pub fn open_existing(path: &Path, words: usize) -> Result<WordFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let have = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        if have != (words * 8) as u64 {
            return Err(Error::corrupted(
                path,
                0,
                None,
                format!("{have} bytes, expected {}", words * 8),
            ));
        }
        allocate_range(&file, 0, have).map_err(|e| Error::io("allocate", path, e))?;
        Self::map(&file, words, path)
    }

    fn map(file: &File, words: usize, path: &Path) -> Result<WordFile> {
        let map = MmapOptions::new()
            .len(words * 8)
            .map_raw(file)
            .map_err(|e| Error::io("mmap", path, e))?;
        Ok(WordFile { map, words })
    }

    /// The file's words.
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: `map` is a live shared mapping of `8 * words` bytes owned
        // by `self` (unmapped only on drop, so it outlives the borrow); mmap
        // returns page-aligned memory, so the base is 8-aligned; `AtomicU64`
        // has the layout of `u64` and every bit pattern is valid. In this
        // process the bytes are only accessed through this atomic view; other
        // processes use the same view (see DESIGN.md, "Several writers").
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU64>(), self.words) }
    }

    /// msync of the whole file.
    pub fn flush(&self) -> std::io::Result<()> {
        self.map.flush()
    }
}

// The fork counter lives here, not with the appender and the bindings that
// use it, because registering the handler is `unsafe` and this is the one
// module of the engine allowed `unsafe`.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
static FORK_HOOK: std::sync::Once = std::sync::Once::new();

extern "C" fn after_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// Counts `fork()`s this process came out of as a child. An I/O thread does
/// not survive a fork, so writers compare the generation they were made in.
pub fn fork_generation() -> u64 {
    FORK_HOOK.call_once(|| {
        // SAFETY: registers a handler that only touches an atomic, which is
        // async-signal-safe as fork's child handlers must be.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
        }
    });
    FORK_GENERATION.load(Ordering::Relaxed)
}
