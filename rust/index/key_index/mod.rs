//! The key index: find the positions of messages by key, optionally within a time range.
//!
//! RocketMQ's hash-slot IndexFile (seed 001): files in `<queue>/index/`, each a header, a
//! slot table and an append-only item array whose items chain newest first through the slot
//! their key hashes to. The byte layout is in `docs/FORMAT.md` ("Key index files") and in
//! [`file`]; the hash in [`hash`].
//!
//! * **One writer.** The I/O thread owns the [`KeyIndexWriter`] and calls
//!   [`KeyIndexWriter::add`] after it has written the message the position points to, so the
//!   index never gets ahead of the data. (While it sleeps, an appender may write a message
//!   on its behalf, holding the I/O thread's state lock: still one writer at a time.) A full file (or one whose millisecond time diff would
//!   overflow u32, after 49.7 days) starts a new one.
//! * **Lock-free lookups.** [`KeyIndexReader`]s share the writer's mappings in-process
//!   ([`KeyIndexWriter::reader`]) or map the files read-only in another process
//!   ([`KeyIndexReader::open`]). An item becomes visible when the header's item count, stored
//!   last with Release, covers it.
//! * **Time.** File names and headers select files; items record time to the millisecond.
//!   `lookup(key, start, end)` returns every item whose millisecond overlaps `[start, end)`:
//!   exact for millisecond-aligned bounds, otherwise a superset by less than 1 ms at each end.
//!   Callers read each candidate anyway (to drop hash collisions) and filter on its exact
//!   timestamp there.
//! * **Recovery.** A file sealed on close or roll carries CRCs of its header and of its slot
//!   table and used items, checked by the writer at open and by a reader on its first use of
//!   the file (a full default file: about 10 ms from the page cache, 37 ms cold on the test
//!   machine); a file that fails is removed and its data re-indexed. The open file left by a
//!   crash is replayed to its longest valid prefix. [`KeyIndexWriter::last_position`] then
//!   tells the engine where to re-index the data tail (RocketMQ's redispatch, [`catch_up`]).
//! * **Determinism.** Everything written (names included) is a function of the sequence of
//!   `(key, position, timestamp)` added and of the configuration, never of the wall clock, so
//!   a rebuild from the data ([`KeyIndexWriter::clear`], then `add` everything, then
//!   [`KeyIndexWriter::close`]) produces files byte-equal to the live-built ones.
//! * **Retention.** [`remove_files_before`] deletes the oldest files once every item in them
//!   points into deleted data files; the writer unmaps them in
//!   [`KeyIndexWriter::forget_deleted`], standalone readers when the directory changes.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::SystemTime;

pub mod catch_up;
pub mod file;
pub mod hash;
mod resync;

use file::{IndexFile, SUFFIX, TMP_SUFFIX};
pub use hash::{key_hash, slot_of};

use crate::error::{Error, Result};
use crate::index::coverage::Coverage;

/// A key-index file that fails its checks is reported as [`Error::Corrupted`] naming it
/// (offset 0: the file as a whole is not trusted); [`KeyIndexWriter::open_or_repair`] removes
/// such a file and every later one, then the engine re-indexes the data from
/// [`KeyIndexWriter::last_position`].
fn corrupt(path: &Path, reason: impl Into<String>) -> Error {
    Error::corrupted(path, 0, None, reason)
}

/// `add` was given a position not above the last one indexed, or a timestamp (to the
/// millisecond) below the last one: the engine adds in order, so this is a bug in litemq
/// ([`Error::Internal`]). `what` is `"position"` or `"timestamp_ms"`.
fn out_of_order(what: &str, value: u64, last: u64) -> Error {
    Error::Internal(format!(
        "key index add out of order: {what} {value} after {last}"
    ))
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::io(op, path, source)
}

/// Geometry of the largest index files: a queue's first file has [`FIRST_FILE_ITEMS`] items
/// (or `items`, when smaller) and each next one [`GROWTH`] times more, up to this (see
/// [`KeyIndexConfig::geometry_after`]). Existing files keep the geometry in their trailer,
/// so a changed configuration applies from the next new file on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyIndexConfig {
    /// Slots in the hash table (4 bytes each).
    pub slots: u32,
    /// Items per file (20 bytes each) of the largest files; a full file starts a new one.
    pub items: u32,
}

impl Default for KeyIndexConfig {
    /// 2^20 slots and 2^21 items (the largest files; the first ones are smaller, see
    /// [`KeyIndexConfig::geometry_after`]): a 44 MiB file per 2 Mi keyed messages, chains
    /// of at most 2 items per slot on average when full. See `docs/FORMAT.md` for the
    /// trade-off against RocketMQ's 5 M / 20 M (420 MB) files.
    fn default() -> Self {
        Self {
            slots: 1 << 20,
            items: 1 << 21,
        }
    }
}

/// Items of a queue's first key-index file (when the configured geometry is larger): 4096
/// items and 2048 slots with the default ratio, an 88 KiB file.
pub const FIRST_FILE_ITEMS: u32 = 4096;
/// Each next file has this many times the items of the one before, up to the configured geometry.
pub const GROWTH: u32 = 4;

impl KeyIndexConfig {
    /// Geometry (slots, items) of the file that follows one of `prev_items` items (`None`:
    /// the first file). Files start small and grow by [`GROWTH`] up to `self`, keeping its
    /// slots-to-items ratio, so a queue with a few keyed messages has a key index of
    /// kilobytes; lookups stay exact (every file is searched that can hold the time range),
    /// and a full-size file is reached after six files (4 Ki items, 16 Ki, ..., 2 Mi).
    /// Deterministic: `litemq reindex` picks the same geometry as the live writer.
    pub fn geometry_after(&self, prev_items: Option<u32>) -> (u32, u32) {
        let items = prev_items
            .map_or(FIRST_FILE_ITEMS, |p| p.saturating_mul(GROWTH))
            .max(FIRST_FILE_ITEMS)
            .min(self.items);
        let slots = (u64::from(self.slots) * u64::from(items) / u64::from(self.items)).max(1);
        (slots as u32, items)
    }

    /// Largest file this module creates (bytes).
    pub const MAX_FILE_LEN: u64 = 4 << 30;

    /// Length in bytes of a file with this geometry.
    pub fn file_len(&self) -> u64 {
        file::file_len(self.slots, self.items)
    }

    /// Checks the ranges: at least one slot and one item, files at most 4 GiB.
    pub fn validate(&self) -> Result<()> {
        if self.slots == 0 || self.items == 0 {
            return Err(Error::InvalidConfig(format!(
                "key index: slots ({}) and items ({}) must be at least 1",
                self.slots, self.items
            )));
        }
        if self.file_len() > Self::MAX_FILE_LEN {
            return Err(Error::InvalidConfig(format!(
                "key index: {} slots and {} items make a {} byte file (max {})",
                self.slots,
                self.items,
                self.file_len(),
                Self::MAX_FILE_LEN
            )));
        }
        Ok(())
    }
}

/// One file in the directory listing that lookups walk.
struct Entry {
    name_ms: u64,
    /// Lower bound of the file's first item millisecond, from names alone: a name is the
    /// first item's millisecond unless it was bumped past its predecessor (name = previous
    /// name + 1), in which case the predecessor's bound still holds. 0 for the first file.
    lower_ms: u64,
    path: PathBuf,
    ino: u64,
    file: OnceLock<Arc<IndexFile>>,
    /// The span of a file that is no longer the newest (final), once read.
    span: OnceLock<Option<FileSpan>>,
}

impl Entry {
    fn new(name_ms: u64, lower_ms: u64, path: PathBuf, ino: u64) -> Self {
        Self {
            name_ms,
            lower_ms,
            path,
            ino,
            file: OnceLock::new(),
            span: OnceLock::new(),
        }
    }

    /// What the file covers (`None`: it holds no item, or it was deleted since the
    /// listing). The newest file's is read afresh each time (the writer appends to it);
    /// an older file's once. O(1): a mapped file's header, or else its header checked
    /// against its CRC without reading items (the items are checked when a lookup uses
    /// the file).
    fn span(&self, newest: bool) -> Result<Option<FileSpan>> {
        if let Some(s) = self.span.get().filter(|_| !newest) {
            return Ok(*s);
        }
        let read = match self.file.get() {
            Some(f) => Ok(FileSpan::of(&f.header())),
            None => IndexFile::open(&self.path, false).and_then(|f| {
                let h = f.checked_header()?;
                Ok(FileSpan::of(&h))
            }),
        };
        let span = match read {
            Ok(s) => s,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        if !newest {
            let _ = self.span.set(span);
        }
        Ok(span)
    }

    /// The mapped file, opened (read-only) and checked on first use: a sealed file must pass
    /// both its CRCs (O(slots + items), once per process and file).
    fn get(&self) -> Result<&Arc<IndexFile>> {
        if let Some(f) = self.file.get() {
            return Ok(f);
        }
        let f = IndexFile::open(&self.path, false)?;
        f.check_state()?;
        if f.is_sealed() {
            if let Err(e) = f.check_sealed() {
                // The writer may have unsealed the file (to append) while we checked it:
                // then it is an open file, trusted like any open file, not a corrupt one.
                if f.is_sealed() {
                    return Err(e);
                }
            }
        }
        Ok(self.file.get_or_init(|| Arc::new(f)))
    }
}

/// What one key-index file says about the data positions it covers: every keyed message
/// from its first item's position to its last one's is in it (items are added in position
/// order, none skipped). Nothing is said of the positions between two files, before the
/// first or after the last: a file lost there leaves no trace in the others, so those
/// positions are covered only once the data shows they hold no keyed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileSpan {
    /// Position of its first item.
    pub begin_pos: u64,
    /// Position of its last item.
    pub end_pos: u64,
}

impl FileSpan {
    fn of(h: &file::Header) -> Option<Self> {
        (h.count > 0).then_some(Self {
            begin_pos: h.begin_pos,
            end_pos: h.end_pos,
        })
    }
}

/// The data positions the files `spans` answer for by themselves: each file's, from its
/// first item to its last ([`FileSpan`]).
pub fn covered(spans: &[FileSpan]) -> Coverage {
    let mut c = Coverage::new();
    for s in spans {
        c.add(s.begin_pos..s.end_pos.saturating_add(1));
    }
    c
}

fn with_lower(prev: Option<&Entry>, name_ms: u64) -> u64 {
    match prev {
        None => 0,
        Some(p) if name_ms == p.name_ms + 1 => p.lower_ms,
        Some(_) => name_ms,
    }
}

/// State shared by the writer and its readers.
struct Shared {
    dir: PathBuf,
    entries: RwLock<Vec<Arc<Entry>>>,
    /// Standalone readers (another process) rescan the directory; in-process readers see
    /// the writer's list directly.
    standalone: bool,
    dir_mtime: Mutex<Option<SystemTime>>,
}

impl Shared {
    fn read_entries(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Entry>>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_entries(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<Entry>>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The listed files' spans, oldest first (files without items left out).
    fn spans(&self) -> Result<Vec<FileSpan>> {
        let entries = self.read_entries().clone();
        let mut out = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            if let Some(s) = e.span(i + 1 == entries.len())? {
                out.push(s);
            }
        }
        Ok(out)
    }
}

/// Index files in `dir`, sorted by name: `(name_ms, path, inode)`. Fails on a `.idx` file
/// whose name is not a timestamp.
fn scan_dir(dir: &Path) -> Result<Vec<(u64, PathBuf, u64)>> {
    let mut out = Vec::new();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io_err("read directory", dir)(e)),
    };
    for ent in rd {
        let ent = ent.map_err(io_err("read directory", dir))?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(SUFFIX) else {
            continue;
        };
        let path = ent.path();
        let ms = file::parse_name(stem)
            .ok_or_else(|| corrupt(&path, "file name is not <yyyyMMddHHmmssSSS>.idx"))?;
        out.push((ms, path, ent.ino()));
    }
    out.sort();
    Ok(out)
}

fn remove_file(path: &Path) -> Result<()> {
    crate::storage::fsutil::remove_if_present(path).map(drop)
}

/// True when `path` no longer exists (deleted by retention).
fn is_gone(path: &Path) -> bool {
    fs::symlink_metadata(path).is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
}

fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
}

/// The index files in `dir`, oldest first, for retention's accounting: each file's path, the
/// position of its last item (`None` when it has none or its header does not check out) and
/// the bytes of disk allocated to it.
pub fn file_sizes(dir: &Path) -> Result<Vec<(PathBuf, Option<u64>, u64)>> {
    let mut out = Vec::new();
    for (_, path, _) in scan_dir(dir)? {
        let end = IndexFile::open(&path, false)
            .ok()
            .and_then(|f| f.checked_header().ok())
            .filter(|h| h.count > 0)
            .map(|h| h.end_pos);
        let bytes = crate::storage::mapped::allocated_bytes(&path);
        out.push((path, end, bytes));
    }
    Ok(out)
}

/// Deletes, oldest first, the index files in `dir` all of whose items are at positions below
/// `position`, for retention: `position` is the first position of the oldest data file kept,
/// so those items can only point at deleted messages. Returns the deleted files with the
/// bytes of disk they held.
///
/// A file is judged by its header's end position ([`IndexFile::checked_header`]: O(1), no
/// item is read), sealed or not: the writer seals rolled files only at its next flush or
/// close, and until then their headers are final. The walk stops at the first file that does
/// not qualify, so the files that remain are always a suffix, and the newest file is never
/// deleted (the writer appends to it, and it keeps the index's last position known). A
/// process that maps a deleted file keeps reading it until it drops it: the writer in
/// [`KeyIndexWriter::forget_deleted`], a standalone reader on its next refresh.
pub fn remove_files_before(dir: &Path, position: u64) -> Result<Vec<(PathBuf, u64)>> {
    let listed = scan_dir(dir)?;
    let mut removed = Vec::new();
    for (_, path, _) in listed.iter().take(listed.len().saturating_sub(1)) {
        let f = match IndexFile::open(path, false) {
            Ok(f) => f,
            Err(e) if is_not_found(&e) => continue, // removed meanwhile (writer repair)
            Err(_) => break,
        };
        let ended_before = f
            .checked_header()
            .is_ok_and(|h| h.count > 0 && h.end_pos < position);
        if !ended_before {
            break;
        }
        let len = crate::storage::mapped::allocated_bytes(path);
        drop(f);
        remove_file(path)?;
        removed.push((path.clone(), len));
    }
    if !removed.is_empty() {
        file::sync_dir(dir)?;
    }
    Ok(removed)
}

/// Reads the key index. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct KeyIndexReader {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for KeyIndexReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyIndexReader")
            .field("dir", &self.shared.dir)
            .field("standalone", &self.shared.standalone)
            .finish()
    }
}

impl KeyIndexReader {
    /// A reader of `dir` that maps files read-only, for a process that does not own the
    /// writer. Files are mapped lazily, the first time a lookup cannot rule them out by name;
    /// the directory is rescanned when its mtime changes or the newest file is full or sealed.
    /// A missing directory reads as empty.
    pub fn open(dir: &Path) -> Result<Self> {
        let reader = Self {
            shared: Arc::new(Shared {
                dir: dir.to_owned(),
                entries: RwLock::new(Vec::new()),
                standalone: true,
                dir_mtime: Mutex::new(None),
            }),
        };
        reader.refresh()?;
        Ok(reader)
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Rescans the directory (standalone readers only; in-process readers are always current).
    pub fn refresh(&self) -> Result<()> {
        if !self.shared.standalone {
            return Ok(());
        }
        let mtime = fs::metadata(&self.shared.dir)
            .and_then(|m| m.modified())
            .ok();
        let listed = scan_dir(&self.shared.dir)?;
        let mut entries = self.shared.write_entries();
        let old: HashMap<(u64, u64), Arc<Entry>> =
            entries.drain(..).map(|e| ((e.name_ms, e.ino), e)).collect();
        let mut fresh: Vec<Arc<Entry>> = Vec::with_capacity(listed.len());
        for (name_ms, path, ino) in listed {
            let lower_ms = with_lower(fresh.last().map(|e| &**e), name_ms);
            let entry = match old.get(&(name_ms, ino)) {
                Some(e) if e.lower_ms == lower_ms => Arc::clone(e),
                Some(e) => {
                    let fresh = Entry::new(name_ms, lower_ms, path, ino);
                    if let Some(f) = e.file.get() {
                        let _ = fresh.file.set(Arc::clone(f));
                    }
                    Arc::new(fresh)
                }
                None => Arc::new(Entry::new(name_ms, lower_ms, path, ino)),
            };
            fresh.push(entry);
        }
        *entries = fresh;
        *self
            .shared
            .dir_mtime
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = mtime;
        Ok(())
    }

    fn refresh_if_stale(&self) -> Result<()> {
        let stale = {
            let entries = self.shared.read_entries();
            match entries.last() {
                None => true,
                Some(last) => match last.get() {
                    Ok(f) => f.is_sealed() || f.count() >= f.items(),
                    Err(_) => true,
                },
            }
        };
        let mtime = fs::metadata(&self.shared.dir)
            .and_then(|m| m.modified())
            .ok();
        let changed = *self
            .shared
            .dir_mtime
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            != mtime;
        if stale || changed {
            self.refresh()?;
        }
        Ok(())
    }

    /// Positions of the items indexed under `key`'s hash whose millisecond overlaps
    /// `[start_us, end_us)` (`None` = unbounded), in ascending position order.
    ///
    /// Candidates only: a different key with the same 32-bit hash is returned too, so the
    /// caller compares each message's stored key (and, for µs exactness, its timestamp).
    /// Files whose name or header rules out the range are skipped; a standalone reader does
    /// not even open them.
    pub fn lookup(
        &self,
        key: &[u8],
        start_us: Option<u64>,
        end_us: Option<u64>,
    ) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        self.lookup_into(key, start_us, end_us, &mut out)?;
        Ok(out)
    }

    /// [`KeyIndexReader::lookup`] appending to a caller's buffer.
    pub fn lookup_into(
        &self,
        key: &[u8],
        start_us: Option<u64>,
        end_us: Option<u64>,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        if self.shared.standalone {
            self.refresh_if_stale()?;
        }
        if let (Some(s), Some(e)) = (start_us, end_us) {
            if s >= e {
                return Ok(());
            }
        }
        let hash = key_hash(key);
        let entries = self.shared.read_entries();
        for (i, entry) in entries.iter().enumerate() {
            if end_us.is_some_and(|e| entry.lower_ms.saturating_mul(1000) >= e) {
                break; // lower bounds never decrease: no later file can match either
            }
            if let (Some(s), Some(next)) = (start_us, entries.get(i + 1)) {
                // Every item here is at or before the next file's first item, whose
                // millisecond is at most the next file's name.
                if next.name_ms.saturating_mul(1000).saturating_add(999) < s {
                    continue;
                }
            }
            match entry.get() {
                Ok(f) => f.collect(hash, start_us, end_us, out),
                // Deleted since the listing (retention): its messages are gone too.
                Err(e) if is_not_found(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The data positions the index answers for ([`covered`]) and its last item's
    /// position, as the files are now (a standalone reader first rescans the directory if
    /// it changed). O(files): each file's header, read once for every file but the newest.
    pub fn coverage(&self) -> Result<(Coverage, Option<u64>)> {
        if self.shared.standalone {
            self.refresh_if_stale()?;
        }
        let spans = self.shared.spans()?;
        Ok((covered(&spans), spans.last().map(|s| s.end_pos)))
    }

    /// Number of index files currently listed.
    pub fn file_count(&self) -> usize {
        self.shared.read_entries().len()
    }

    /// Whether this reader maps the files itself ([`KeyIndexReader::open`]) rather than
    /// sharing a writer's ([`KeyIndexWriter::reader`]).
    pub fn is_standalone(&self) -> bool {
        self.shared.standalone
    }
}

/// Positions for `key` in the index at `dir`: a one-shot [`KeyIndexReader::open`] + lookup.
pub fn lookup(
    dir: &Path,
    key: &[u8],
    start_us: Option<u64>,
    end_us: Option<u64>,
) -> Result<Vec<u64>> {
    KeyIndexReader::open(dir)?.lookup(key, start_us, end_us)
}

/// The file being appended to.
struct Active {
    file: Arc<IndexFile>,
    count: u32,
    begin_ms: u64,
    sealed: bool,
}

/// Writes the key index. Owned by the I/O thread (the only writer of `<queue>/index/`;
/// an appender writing while it sleeps holds its state lock).
pub struct KeyIndexWriter {
    shared: Arc<Shared>,
    cfg: KeyIndexConfig,
    active: Option<Active>,
    /// Rolled-over files to seal at the next `flush` (sealing needs an msync first).
    pending_seal: Vec<Arc<IndexFile>>,
    last_position: Option<u64>,
    last_ms: u64,
}

impl std::fmt::Debug for KeyIndexWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyIndexWriter")
            .field("dir", &self.shared.dir)
            .field("cfg", &self.cfg)
            .field("files", &self.file_count())
            .field("last_position", &self.last_position)
            .finish()
    }
}

impl KeyIndexWriter {
    /// Opens the index in `dir` (created if missing) for writing new files with `cfg`.
    ///
    /// Every file's trailer is checked; sealed files have their header checked against its
    /// CRC; an open (unsealed) file, left by a crash, is replayed to its longest valid prefix
    /// and trimmed to it. Consecutive files must cover ascending position and time ranges.
    /// A file that fails is reported as [`Error::Corrupted`] naming it; nothing is deleted here
    /// except leftover `*.idx.tmp` files and an open last file that turned out empty.
    /// No file is created until the first `add` (its name is that item's time).
    pub fn open_or_create(dir: &Path, cfg: KeyIndexConfig) -> Result<Self> {
        cfg.validate()?;
        fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
        Self::remove_tmp_files(dir)?;
        let listed = scan_dir(dir)?;
        let mut entries: Vec<Arc<Entry>> = Vec::with_capacity(listed.len());
        let mut last: Option<(file::Header, bool)> = None;
        let total = listed.len();
        for (i, (name_ms, path, ino)) in listed.into_iter().enumerate() {
            let is_last = i + 1 == total;
            let f = IndexFile::open(&path, true)?;
            f.check_state()?;
            let sealed = f.is_sealed();
            let h = if sealed {
                f.check_sealed()?
            } else {
                let before = f.header().count;
                let h = f.recover()?;
                if h.count < before && !is_last {
                    return Err(corrupt(
                        &path,
                        format!(
                            "lost {} items in a crash; later files are out of step",
                            before - h.count
                        ),
                    ));
                }
                h
            };
            if h.count == 0 {
                if is_last {
                    remove_file(&path)?;
                    file::sync_dir(dir)?;
                    continue;
                }
                return Err(corrupt(&path, "empty file before the last"));
            }
            if let Some((prev, _)) = &last {
                if h.begin_pos <= prev.end_pos || h.begin_ts / 1000 < prev.end_ts / 1000 {
                    return Err(corrupt(
                        &path,
                        "position or time range overlaps the previous file",
                    ));
                }
            }
            if !is_last && !sealed {
                f.seal()?;
            }
            let lower_ms = with_lower(entries.last().map(|e| &**e), name_ms);
            let entry = Entry::new(name_ms, lower_ms, path, ino);
            let _ = entry.file.set(Arc::new(f));
            entries.push(Arc::new(entry));
            last = Some((h, sealed || !is_last));
        }
        let active = match (entries.last(), last) {
            (Some(e), Some((h, sealed))) => Some(Active {
                file: Arc::clone(e.file.get().expect("writer entries are mapped")),
                count: h.count,
                begin_ms: h.begin_ts / 1000,
                sealed,
            }),
            _ => None,
        };
        let last_position = last.map(|(h, _)| h.end_pos);
        let last_ms = last.map_or(0, |(h, _)| h.end_ts / 1000);
        Ok(Self {
            shared: Arc::new(Shared {
                dir: dir.to_owned(),
                entries: RwLock::new(entries),
                standalone: false,
                dir_mtime: Mutex::new(None),
            }),
            cfg,
            active,
            pending_seal: Vec::new(),
            last_position,
            last_ms,
        })
    }

    /// [`open_or_create`](Self::open_or_create), removing each file reported corrupt together
    /// with every later one until the rest opens. Returns the errors that caused removals
    /// (each an [`Error::Corrupted`] naming a file of `dir`); the engine re-indexes the data
    /// after [`last_position`](Self::last_position). Only a corrupt index file is repaired:
    /// any other error, or a `Corrupted` naming a file outside `dir`, is returned as is.
    pub fn open_or_repair(dir: &Path, cfg: KeyIndexConfig) -> Result<(Self, Vec<Error>)> {
        let mut removed = Vec::new();
        loop {
            match Self::open_or_create(dir, cfg) {
                Ok(w) => return Ok((w, removed)),
                Err(e @ Error::Corrupted { .. }) if Self::is_index_file(dir, &e) => {
                    if let Error::Corrupted { path, .. } = &e {
                        Self::remove_from(dir, path)?;
                    }
                    removed.push(e);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether `e` reports a key-index file of `dir` corrupt: the ones
    /// [`open_or_repair`](Self::open_or_repair) may remove.
    fn is_index_file(dir: &Path, e: &Error) -> bool {
        matches!(e, Error::Corrupted { path, .. } if path.parent() == Some(dir))
    }

    /// Deletes `path` and every index file named after it.
    pub fn remove_from(dir: &Path, path: &Path) -> Result<()> {
        let from = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(SUFFIX))
            .and_then(file::parse_name);
        remove_file(path)?;
        if let Some(from) = from {
            for (ms, p, _) in scan_dir(dir)? {
                if ms >= from {
                    remove_file(&p)?;
                }
            }
        }
        file::sync_dir(dir)
    }

    /// Deletes every index file in `dir` (the first step of a rebuild when no writer is open).
    pub fn remove_all(dir: &Path) -> Result<()> {
        if !dir.exists() {
            return Ok(());
        }
        Self::remove_tmp_files(dir)?;
        for ent in fs::read_dir(dir).map_err(io_err("read directory", dir))? {
            let p = ent.map_err(io_err("read directory", dir))?.path();
            if p.extension().is_some_and(|e| e == "idx") {
                remove_file(&p)?;
            }
        }
        file::sync_dir(dir)
    }

    fn remove_tmp_files(dir: &Path) -> Result<()> {
        for ent in fs::read_dir(dir).map_err(io_err("read directory", dir))? {
            let p = ent.map_err(io_err("read directory", dir))?.path();
            if p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(TMP_SUFFIX))
            {
                remove_file(&p)?;
            }
        }
        Ok(())
    }

    /// A reader sharing this writer's mappings (no directory scans, no extra mappings).
    pub fn reader(&self) -> KeyIndexReader {
        KeyIndexReader {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The configuration new files get.
    pub fn config(&self) -> KeyIndexConfig {
        self.cfg
    }

    /// Number of index files.
    pub fn file_count(&self) -> usize {
        self.shared.read_entries().len()
    }

    /// The highest position indexed, `None` when the index is empty. After opening, the
    /// engine re-adds every keyed message after this position (the data tail a crash left
    /// unindexed).
    pub fn last_position(&self) -> Option<u64> {
        self.last_position
    }

    /// Indexes `key` for the message at `position`, stored at `timestamp_us` (µs since the
    /// Unix epoch). Positions and timestamps (to the millisecond) must not decrease;
    /// position 0 is reserved. Several items share a position only for the keyed members
    /// of one batch frame (format 9), added one after the other. Starts a new file when the current one is
    /// full or `timestamp_us` is more than `u32::MAX` ms after its first item.
    #[inline]
    pub fn add(&mut self, key: &[u8], position: u64, timestamp_us: u64) -> Result<()> {
        let ts_ms = timestamp_us / 1000;
        if let Some(last) = self.last_position {
            if position < last {
                return Err(out_of_order("position", position, last));
            }
            if ts_ms < self.last_ms {
                return Err(out_of_order("timestamp_ms", ts_ms, self.last_ms));
            }
        } else if position == 0 {
            return Err(Error::InvalidArgument(
                "key index: position 0 is reserved".into(),
            ));
        }
        self.reserve(timestamp_us)?;
        let a = self.active.as_mut().expect("reserve leaves an active file");
        if a.count == 0 {
            a.begin_ms = ts_ms;
        }
        a.file
            .append(a.count, key_hash(key), position, ts_ms, a.begin_ms);
        a.count += 1;
        self.last_position = Some(position);
        self.last_ms = ts_ms;
        Ok(())
    }

    /// Does the part of [`add`](Self::add) that can fail on I/O for an item
    /// stored at `timestamp_us`: starts the next file when the current one is
    /// full (or there is none), and unseals a sealed one. The engine calls it
    /// before it writes the message, so that an index file that cannot be
    /// created fails the append before anything is stored; `add` for the
    /// same time then has no I/O left to do. Idempotent.
    #[inline]
    pub fn reserve(&mut self, timestamp_us: u64) -> Result<()> {
        let ts_ms = timestamp_us / 1000;
        let roll = match &self.active {
            None => true,
            Some(a) => {
                a.count >= a.file.items() || ts_ms.saturating_sub(a.begin_ms) > u64::from(u32::MAX)
            }
        };
        if roll {
            self.roll(ts_ms)?;
        }
        let a = self.active.as_mut().expect("roll leaves an active file");
        if a.sealed {
            a.file.unseal()?;
            a.sealed = false;
        }
        Ok(())
    }

    /// Unmaps the oldest files that no longer exist (deleted by retention, in this or
    /// another process, see [`remove_files_before`]), so their disk space is freed; readers
    /// sharing this writer stop seeing them. Call after a retention pass; `roll` calls it
    /// too, so files deleted by another process go at the latest with the next new file.
    /// Returns how many files were dropped. Costs one `stat` per dropped file, plus one.
    pub fn forget_deleted(&mut self) -> usize {
        // Retention deletes a prefix, oldest first: stop at the first file that exists.
        let gone = {
            let entries = self.shared.read_entries();
            entries.iter().take_while(|e| is_gone(&e.path)).count()
        };
        if gone == 0 {
            return 0;
        }
        let dropped: Vec<Arc<Entry>> = self.shared.write_entries().drain(..gone).collect();
        for f in dropped.iter().filter_map(|e| e.file.get()) {
            self.pending_seal.retain(|p| !Arc::ptr_eq(p, f));
            if self
                .active
                .as_ref()
                .is_some_and(|a| Arc::ptr_eq(&a.file, f))
            {
                // Never the newest file by retention's rule; if it went anyway, the next
                // `add` starts a new file.
                self.active = None;
            }
        }
        dropped.len()
    }

    #[cold]
    fn roll(&mut self, ts_ms: u64) -> Result<()> {
        self.forget_deleted();
        let last_name = self.shared.read_entries().last().map(|e| e.name_ms);
        // Names are the first item's millisecond, bumped past the previous name when two
        // files would share one: a function of the data, so a rebuild picks the same names.
        let name_ms = last_name.map_or(ts_ms, |n| ts_ms.max(n + 1));
        let prev_items = self
            .shared
            .read_entries()
            .last()
            .and_then(|e| e.get().ok().map(|f| f.items()));
        let (slots, items) = self.cfg.geometry_after(prev_items);
        let f = Arc::new(IndexFile::create(&self.shared.dir, name_ms, slots, items)?);
        if let Some(old) = self.active.take() {
            if !old.sealed {
                self.pending_seal.push(old.file);
            }
        }
        let mut entries = self.shared.write_entries();
        let lower_ms = with_lower(entries.last().map(|e| &**e), name_ms);
        let entry = Entry::new(name_ms, lower_ms, f.path().to_owned(), 0);
        let _ = entry.file.set(Arc::clone(&f));
        entries.push(Arc::new(entry));
        self.active = Some(Active {
            file: f,
            count: 0,
            begin_ms: ts_ms,
            sealed: false,
        });
        Ok(())
    }

    /// Makes everything added so far durable (msync) and seals the files rolled over since
    /// the last flush. The active file stays open.
    pub fn flush(&mut self) -> Result<()> {
        while let Some(f) = self.pending_seal.first() {
            f.seal()?;
            self.pending_seal.remove(0);
        }
        if let Some(a) = &self.active {
            a.file.flush()?;
        }
        Ok(())
    }

    /// Flushes and seals every file, so the next open checks them against their CRCs instead
    /// of replaying them. The writer stays usable: a later `add` unseals the last file again.
    pub fn close(&mut self) -> Result<()> {
        self.flush()?;
        if let Some(a) = &mut self.active {
            if !a.sealed {
                a.file.seal()?;
                a.sealed = true;
            }
        }
        Ok(())
    }

    /// The newest file's entry, if any.
    fn last_entry(&self) -> Option<Arc<Entry>> {
        self.shared.read_entries().last().cloned()
    }

    /// Drops every item whose position is above `position` (after the engine cut a torn
    /// data tail that the index had already covered, possible after a power loss since the
    /// kernel writes mapped pages back in any order). Files left empty are deleted, so a
    /// rebuild of the same data produces the same files.
    pub fn truncate_after(&mut self, position: u64) -> Result<()> {
        let dir = self.shared.dir.clone();
        loop {
            let last = self.last_entry();
            let Some(entry) = last else { break };
            let f = Arc::clone(entry.file.get().expect("writer entries are mapped"));
            let h = f.header();
            if h.count > 0 && h.begin_pos <= position {
                if h.end_pos > position {
                    if f.is_sealed() {
                        f.unseal()?;
                    }
                    f.truncate_after(position);
                }
                break;
            }
            self.shared.write_entries().pop();
            self.pending_seal.retain(|p| !Arc::ptr_eq(p, &f));
            remove_file(f.path())?;
            file::sync_dir(&dir)?;
        }
        let last = self.last_entry();
        self.active = last.map(|e| {
            let f = Arc::clone(e.file.get().expect("writer entries are mapped"));
            let h = f.header();
            let sealed = f.is_sealed();
            self.pending_seal.retain(|p| !Arc::ptr_eq(p, &f));
            self.last_position = Some(h.end_pos);
            self.last_ms = h.end_ts / 1000;
            Active {
                file: f,
                count: h.count,
                begin_ms: h.begin_ts / 1000,
                sealed,
            }
        });
        if self.active.is_none() {
            self.last_position = None;
            self.last_ms = 0;
        }
        Ok(())
    }

    /// Checks the positions the files do not cover by themselves ([`covered`]) between
    /// `data_start` (the first position of the data kept) and the last item: before the
    /// first file and between two files. `has_keys` reads a range of them from the data
    /// (unless `known_clear` holds all of it: a writer found it clear before);
    /// a range that holds a keyed message is where a file was lost (none is ever missing
    /// otherwise: a new file starts with the keyed message after the last one of the file
    /// before, and retention deletes a file only once every item of it is below
    /// `data_start`). Then that file, and every one after it, is deleted
    /// ([`truncate_after`](Self::truncate_after)): the engine re-indexes the data from the
    /// last position left. Returns whether files were deleted, and the ranges found to
    /// hold no keyed message (lookups need not read them again).
    pub fn drop_after_gap(
        &mut self,
        data_start: u64,
        known_clear: &Coverage,
        has_keys: &mut dyn FnMut(std::ops::Range<u64>) -> Result<bool>,
    ) -> Result<(bool, Coverage)> {
        let spans = self.shared.spans()?;
        let mut clear = Coverage::new();
        let mut prev: Option<&FileSpan> = None;
        for s in &spans {
            let (gap, keep_upto) = match prev {
                None => (data_start..s.begin_pos, 0),
                Some(p) => (p.end_pos.saturating_add(1)..s.begin_pos, p.end_pos),
            };
            if gap.start < gap.end {
                let known = known_clear.gaps(gap.clone()).is_empty();
                if !known && has_keys(gap.clone())? {
                    self.truncate_after(keep_upto)?;
                    return Ok((true, clear));
                }
                clear.add(gap);
            }
            prev = Some(s);
        }
        Ok((false, clear))
    }

    /// Deletes every index file (readers sharing this writer see an empty index at once).
    /// The engine then re-adds every keyed message in order and calls
    /// [`close`](Self::close): the result is byte-equal to the live-built files.
    pub fn clear(&mut self) -> Result<()> {
        self.shared.write_entries().clear();
        self.active = None;
        self.pending_seal.clear();
        self.last_position = None;
        self.last_ms = 0;
        Self::remove_all(&self.shared.dir)
    }
}
