//! The catalog: the list of a queue's data files with their headers, and
//! what a queue handle keeps per file (mappings, sealed files verified,
//! topic plans, hole counts).
//!
//! A service below both the reader and the writer: the writer in this
//! process adds files as it creates them; the handle's tailers read
//! through it, and readers in other processes refresh it from the
//! directory when they reach an end-of-file marker whose successor they
//! don't know. It imports neither (tests/rust/layers.rs).

pub(crate) mod holes;
pub(crate) mod sealed;
pub(crate) mod topic_cache;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::error::{Error, Result};
use crate::format::compression::DEFAULT_MAX_DECOMPRESSED;
use crate::format::footer::{trimmed_len, Footer, FOOTER_LEN};
use crate::format::frame::{DATA_HEADER_LEN, FRAME_ALIGN};
use crate::format::header::{
    typed_schema, DataHeader, HeaderError, TypedFile, REMOVAL_MARKED_SINCE, REMOVAL_MARK_AT,
};
use crate::format::typed::SchemaVersions;
use crate::index::dense::DenseIndex;
use crate::storage::layout::{list_data_files, FileId};
use crate::storage::mapped::Mapping;

/// A data file and its decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    pub id: FileId,
    pub header: DataHeader,
}

#[derive(Debug)]
pub struct Catalog {
    base: PathBuf,
    files: RwLock<Arc<Vec<FileInfo>>>,
    /// Set by `Queue::close`: tailers of the queue stop (and unmap) at
    /// their next call, blocked waits included.
    closed: AtomicBool,
    /// Sealed files whose frame area this handle verified against their
    /// footer (see `catalog::sealed`).
    pub(crate) verified: sealed::Verified,
    /// The topic messages of the active file, read once for the handle's
    /// topic tailers (see `catalog::topic_cache::ActiveTopics`).
    pub(crate) active_topics: topic_cache::ActiveTopics,
    /// Sealed files' plans for topic reads (see
    /// `catalog::topic_cache::SealedPlans`).
    pub(crate) topic_plans: topic_cache::SealedPlans,
    /// Sealed files' hole counts (see `catalog::holes`).
    holes: holes::HoleCounts,
    /// Largest payload the tailers of this handle decompress (see
    /// `QueueBuilder::max_decompressed_size`).
    max_decompressed: AtomicUsize,
    /// Sealed files mapped for this handle's tailers, least recently used
    /// first (see [`Catalog::map_file`]).
    mapped: Mutex<Vec<(FileId, MappedFile)>>,
    /// The last file's mapping while it is the last (it is still written:
    /// its frames are published through the mapping), so random reads that
    /// go back and forth between it and sealed files do not map it again.
    last: Mutex<Option<(FileId, MappedFile)>>,
    /// The queue's encryption key (encryption at rest), set once at open.
    key: std::sync::OnceLock<Arc<crate::format::crypto::QueueKey>>,
    /// The listing [`Catalog::check_order`] last found in order.
    order_checked: Mutex<Option<Arc<Vec<FileInfo>>>>,
    /// Typed files' schemas, read once per file from its header (see
    /// [`Catalog::typed_file`]), by file number.
    typed: Mutex<std::collections::HashMap<u64, Arc<TypedFile>>>,
    /// A typed queue's schema versions (format 12), as the open found them
    /// in `metadata.json` (and declared); `None` for an untyped queue.
    schemas: RwLock<Option<Arc<SchemaVersions>>>,
}

/// Sealed files whose mappings a handle keeps for its tailers.
const MAPPED_KEEP: usize = 64;

/// A data file mapped for a tailer, and its dense index once opened: for a
/// sealed file the catalog keeps, both are shared by every tailer of the
/// handle (a new tailer, a seek or a field query finds them ready).
#[derive(Debug, Clone)]
pub(crate) struct MappedFile {
    /// The whole file, mapped read-only.
    pub(crate) map: Arc<Mapping>,
    /// Its dense index, opened on first use (`None` inside: none, or unusable).
    pub(crate) dense: Arc<OnceLock<Option<Arc<DenseIndex>>>>,
}

/// True while data file `map`, of format `version`, is still the queue's
/// file under its name: not deleted, nor another file put in its place.
/// A file of format 10 or later is checked in memory: litemq marks such a
/// file before it deletes or replaces it (see
/// [`crate::storage::fsutil::mark_removal`]), so an unmarked one is still
/// there, and only a marked one is looked up. An older file (an older
/// litemq may delete it unmarked) costs an `fstat` or a `stat` (see
/// [`Mapping::still_named`]). A file a user deletes by hand, bypassing
/// litemq, is noticed by the next directory listing instead.
pub(crate) fn still_listed(map: &Mapping, version: u32) -> bool {
    let unmarked = version >= REMOVAL_MARKED_SINCE
        && map.len() >= REMOVAL_MARK_AT + 8
        && map.load_u64(REMOVAL_MARK_AT) == 0;
    unmarked || map.still_named()
}

/// Reads and checks the header of data file `path`.
pub fn read_header(path: &Path) -> Result<DataHeader> {
    let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut buf = [0u8; 64];
    file.read_exact_at(&mut buf, 0)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                Error::corrupted(path, 0, None, "file is shorter than its header")
            }
            _ => Error::io("read", path, e),
        })?;
    let header = DataHeader::decode(&buf).map_err(|e| header_error(path, e))?;
    let len = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e))?
        .len();
    // Version 4 trims a sealed file (to its end-of-file marker and footer,
    // at least a page past the header); version 3 files keep their size.
    let shortest = if header.version >= 4 {
        (DATA_HEADER_LEN + FRAME_ALIGN + FOOTER_LEN) as u64
    } else {
        header.file_size
    };
    if len > header.file_size || len < shortest || !len.is_multiple_of(FRAME_ALIGN as u64) {
        return Err(Error::corrupted(
            path,
            0,
            None,
            format!(
                "file is {len} bytes; its header says {} (version {})",
                header.file_size, header.version
            ),
        ));
    }
    Ok(header)
}

/// Turns a header decoding failure into the crate error.
pub fn header_error(path: &Path, e: HeaderError) -> Error {
    match e {
        HeaderError::Version(found) => Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found,
            supported: crate::format::FORMAT_VERSION,
        },
        other => Error::corrupted(path, 0, None, other.to_string()),
    }
}

impl Catalog {
    /// Lists the files under `base` and reads their headers.
    pub fn load(base: &Path) -> Result<Catalog> {
        let c = Catalog {
            base: base.to_path_buf(),
            files: RwLock::new(Arc::new(Vec::new())),
            closed: AtomicBool::new(false),
            verified: Default::default(),
            active_topics: Default::default(),
            topic_plans: Default::default(),
            holes: Default::default(),
            max_decompressed: AtomicUsize::new(DEFAULT_MAX_DECOMPRESSED),
            mapped: Mutex::new(Vec::new()),
            last: Mutex::new(None),
            key: std::sync::OnceLock::new(),
            order_checked: Mutex::new(None),
            typed: Mutex::default(),
            schemas: RwLock::new(None),
        };
        c.refresh()?;
        Ok(c)
    }

    /// Sets the largest payload this handle's tailers decompress.
    pub fn set_max_decompressed(&self, bytes: usize) {
        self.max_decompressed.store(bytes, Ordering::Relaxed);
    }

    /// Sets the queue's encryption key: its tailers open sealed payloads
    /// with it, its writer seals with it. Set once, at open (a second call
    /// is ignored).
    pub fn set_key(&self, key: Arc<crate::format::crypto::QueueKey>) {
        let _ = self.key.set(key);
    }

    /// The queue's encryption key, if it is encrypted.
    pub fn key(&self) -> Option<Arc<crate::format::crypto::QueueKey>> {
        self.key.get().cloned()
    }

    /// The schema and row layout of data file `info` when it is typed
    /// (format 12), read from its header once per handle and shared by
    /// every reader; `None` for an untyped file. A schema that fails its
    /// checks (CRC, length, JSON, version) is [`Error::Corrupted`].
    pub fn typed_file(&self, info: &FileInfo) -> Result<Option<Arc<TypedFile>>> {
        if info.header.schema_version == 0 {
            return Ok(None);
        }
        let number = info.header.file_number;
        if let Some(t) = self
            .typed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&number)
        {
            return Ok(Some(t.clone()));
        }
        let path = self.data_path(info.id);
        let mut head = vec![0u8; DATA_HEADER_LEN];
        File::open(&path)
            .and_then(|f| f.read_exact_at(&mut head, 0))
            .map_err(|e| Error::io("read header", &path, e))?;
        let schema = typed_schema(&head, &info.header)
            .map_err(|why| Error::corrupted(&path, 0, None, why))?;
        let Some(schema) = schema else {
            return Ok(None);
        };
        let t = Arc::new(TypedFile::new(schema));
        self.typed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(number, t.clone());
        Ok(Some(t))
    }

    /// Remembers the schema of a file this process's writer creates (it
    /// needs no reading back).
    pub(crate) fn add_typed(&self, file_number: u64, typed: Arc<TypedFile>) {
        self.typed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(file_number, typed);
    }

    /// The queue's schema versions (the last is current), if it is typed.
    pub fn schema_versions(&self) -> Option<Arc<SchemaVersions>> {
        self.schemas
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sets the queue's schema versions (at open).
    pub(crate) fn set_schema_versions(&self, v: Option<Arc<SchemaVersions>>) {
        *self.schemas.write().unwrap_or_else(|e| e.into_inner()) = v;
    }

    /// The largest payload this handle's tailers decompress.
    pub fn max_decompressed(&self) -> usize {
        self.max_decompressed.load(Ordering::Relaxed)
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Marks the queue closed: every tailer reading through this catalog
    /// reports [`Error::Closed`] from its next call on.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.mapped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.active_topics.clear();
        self.topic_plans.clear();
        self.holes.clear();
    }

    /// A mapping of data file `info` for a tailer. A sealed file's mapping
    /// (and its dense index, see [`MappedFile`]) is kept and shared by the
    /// handle's tailers (the last [`MAPPED_KEEP`] used), so a new tailer,
    /// or one that comes back to a file, finds its pages mapped instead of
    /// faulting them in again (at 1 % density a topic read faults in every
    /// page of a file; a selective field query jumps to a few messages of
    /// each file). Only a mapping made
    /// after the file was trimmed is kept (one made before reaches past
    /// the file's end, see docs/DESIGN.md "Trimming sealed files"); a file
    /// retention deleted is let go at the next [`Catalog::refresh`], and
    /// every one when the queue closes. The last file's mapping is kept too
    /// while the catalog lists no file after it (a reader only ever reads
    /// its published frames, as a tailer that follows it does), and let go
    /// once it has a successor: then it is mapped afresh, trimmed.
    pub(crate) fn map_file(&self, info: &FileInfo) -> Result<MappedFile> {
        // A kept mapping is checked against its own path (the file's), so a
        // `get` that goes back to a kept file formats no path.
        let is_last = self.successor(info.id).is_none();
        {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            match last.as_ref() {
                Some((id, f)) if *id == info.id && is_last => {
                    // One check, as for the sealed files below.
                    if still_listed(&f.map, info.header.version) {
                        let mut f = f.clone();
                        if matches!(f.dense.get(), Some(None)) {
                            // The writer may have made or rebuilt its dense
                            // index since: look again.
                            f.dense = Arc::default();
                            *last = Some((info.id, f.clone()));
                        }
                        return Ok(f);
                    }
                    *last = None;
                }
                Some((id, _)) if *id == info.id => *last = None,
                _ => {}
            }
        }
        {
            let mut kept = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = kept.iter().position(|(id, _)| *id == info.id) {
                let entry = kept.remove(i);
                // One check (see `still_listed`): a file deleted (retention
                // in another process) or replaced since is not read through
                // the old mapping; it is mapped afresh below, or reported
                // missing.
                if still_listed(&entry.1.map, info.header.version) {
                    let file = entry.1.clone();
                    kept.push(entry);
                    return Ok(file);
                }
            }
        }
        let path = self.data_path(info.id);
        // The last file may grow (format version 11): it is mapped at its
        // full size and read as far as it is long. A file with a successor
        // was sealed first: everything a reader touches in it exists.
        let extent = self
            .successor(info.id)
            .is_none()
            .then_some(info.header.file_size);
        let watched = info.header.version < REMOVAL_MARKED_SINCE;
        let map = Arc::new(Mapping::open_extent(&path, watched, |_| extent)?);
        let file = MappedFile {
            map: map.clone(),
            dense: Arc::default(),
        };
        let sealed = self.successor(info.id).is_some()
            && match info.header.version {
                v if v < 4 => true, // never trimmed
                _ => sealed::footer(&map, &info.header).is_some_and(|s| {
                    trimmed_len(s.footer.frames_end, info.header.file_size) == map.len() as u64
                }),
            };
        if is_last && !self.is_closed() {
            *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((info.id, file.clone()));
        }
        if sealed && !self.is_closed() {
            let mut kept = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
            if !kept.iter().any(|(id, _)| *id == info.id) {
                if kept.len() >= MAPPED_KEEP {
                    kept.remove(0);
                }
                kept.push((info.id, file.clone()));
            }
        }
        Ok(file)
    }

    /// Lets go of the kept mapping of file `id` when the path now names
    /// another file, `(st_dev, st_ino)` `named` (a caller that looked the
    /// path up for its own reasons): the next [`Catalog::map_file`] maps
    /// the file the path names. Only a file replaced bypassing litemq needs
    /// it (litemq marks a file before it replaces it, see [`still_listed`]);
    /// without it, indexes read by path would meet the old mapping.
    pub(crate) fn forget_if_replaced(&self, id: FileId, named: (u64, u64)) {
        let stale = |(fid, f): &(FileId, MappedFile)| *fid == id && f.map.identity() != named;
        self.mapped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|e| !stale(e));
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_ref().is_some_and(stale) {
            *last = None;
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Rereads the directory: new files are added, removed ones dropped.
    pub fn refresh(&self) -> Result<()> {
        // Hold the lock across the listing so a file the writer adds
        // meanwhile is not lost when the listing replaces the list.
        let mut guard = self.files.write().unwrap_or_else(|e| e.into_inner());
        let mut ids = list_data_files(&self.base)?;
        let known = guard.clone();
        // readdir may miss an entry renamed into the directory while it
        // runs; a known file is dropped only once it is really gone.
        for f in known.iter() {
            if !ids.contains(&f.id) && f.id.data_path(&self.base).exists() {
                ids.push(f.id);
            }
        }
        ids.sort();
        let mut files = Vec::with_capacity(ids.len());
        for id in ids {
            match known.iter().find(|f| f.id == id) {
                Some(f) => files.push(*f),
                None => {
                    let path = id.data_path(&self.base);
                    match read_header(&path) {
                        Ok(header) => files.push(FileInfo { id, header }),
                        // Removed by retention between listing and opening.
                        Err(Error::Io { source, .. })
                            if source.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        let listed: Vec<FileId> = files.iter().map(|f| f.id).collect();
        *guard = Arc::new(files);
        drop(guard);
        self.mapped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _)| listed.contains(id));
        self.holes.retain(&listed);
        Ok(())
    }

    /// The files as last seen, oldest first.
    pub fn snapshot(&self) -> Arc<Vec<FileInfo>> {
        self.files.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records the new header of file `id` (key compaction rewrote it).
    pub fn update_header(&self, id: FileId, header: DataHeader) {
        let mut guard = self.files.write().unwrap_or_else(|e| e.into_inner());
        let mut files = (**guard).clone();
        if let Some(f) = files.iter_mut().find(|f| f.id == id) {
            f.header = header;
        }
        *guard = Arc::new(files);
    }

    /// Called by the writer after it creates a file.
    pub fn add(&self, id: FileId, header: DataHeader) {
        let mut guard = self.files.write().unwrap_or_else(|e| e.into_inner());
        let mut files = (**guard).clone();
        if !files.iter().any(|f| f.id == id) {
            files.push(FileInfo { id, header });
        }
        *guard = Arc::new(files);
    }

    /// The file that holds (or would hold) `seq`: the last one starting at
    /// or before it.
    pub fn locate(&self, seq: u64) -> Option<FileInfo> {
        let files = self.snapshot();
        let i = files.partition_point(|f| f.header.first_seq <= seq);
        i.checked_sub(1).map(|i| files[i])
    }

    /// The file after `id`, if known.
    pub fn successor(&self, id: FileId) -> Option<FileInfo> {
        let files = self.snapshot();
        let i = files.partition_point(|f| f.id <= id);
        files.get(i).copied()
    }

    /// The file whose header carries `file_number`, or else the first after it.
    pub fn at_or_after_number(&self, file_number: u64) -> Option<FileInfo> {
        let files = self.snapshot();
        let i = files.partition_point(|f| f.header.file_number < file_number);
        files.get(i).copied()
    }

    pub fn first(&self) -> Option<FileInfo> {
        self.snapshot().first().copied()
    }

    /// The first position of the data kept (`format::position` of the
    /// oldest file's start), `None` when there is no file.
    pub fn first_position(&self) -> Option<u64> {
        self.first()
            .map(|f| crate::format::position::encode(f.header.file_number, 0))
    }

    /// Checks that the files, in the order their names list them, carry
    /// ascending file numbers and sequences in their headers, as the writer
    /// made them: a file renamed into another's place (two files swapped)
    /// is [`Error::Corrupted`], naming the first file out of order. What
    /// reads by position (key lookups) relies on it: a position names a
    /// file by number, and a tailer reading in sequence order reports the
    /// same damage. O(files), once per listing.
    pub fn check_order(&self) -> Result<()> {
        let files = self.snapshot();
        let mut checked = self.order_checked.lock().unwrap_or_else(|e| e.into_inner());
        if checked.as_ref().is_some_and(|c| Arc::ptr_eq(c, &files)) {
            return Ok(());
        }
        for w in files.windows(2) {
            let (a, b) = (&w[0].header, &w[1].header);
            if b.file_number <= a.file_number || b.first_seq < a.first_seq {
                return Err(Error::corrupted(
                    self.data_path(w[1].id),
                    0,
                    Some(b.first_seq),
                    format!(
                        "file number {} starting at seq {} is listed after {} (file number {}, \
                         starting at seq {}): data files are out of order",
                        b.file_number,
                        b.first_seq,
                        self.data_path(w[0].id).display(),
                        a.file_number,
                        a.first_seq
                    ),
                ));
            }
        }
        *checked = Some(files);
        Ok(())
    }

    pub fn last(&self) -> Option<FileInfo> {
        self.snapshot().last().copied()
    }

    /// The footer of sealed file `info`, read with `pread` at the file's
    /// end, when it agrees with the header and the trimming rule.
    pub(crate) fn read_footer(&self, info: &FileInfo) -> Option<Footer> {
        let file = std::fs::File::open(self.data_path(info.id)).ok()?;
        let len = file.metadata().ok()?.len();
        let mut b = vec![0u8; FOOTER_LEN];
        file.read_exact_at(&mut b, len.checked_sub(FOOTER_LEN as u64)?)
            .ok()?;
        let f = Footer::decode(&b).ok()?;
        let h = info.header;
        (f.file_number == h.file_number
            && f.first_seq == h.first_seq
            && crate::format::footer::trimmed_len(f.frames_end, h.file_size) == len)
            .then_some(f)
    }

    pub fn data_path(&self, id: FileId) -> PathBuf {
        id.data_path(&self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random reads that go back and forth between a sealed file and the
    /// last one map each once: the last file's mapping is shared while it
    /// is the last, and mapped afresh (trimmed) once it has a successor.
    #[test]
    fn the_last_files_mapping_is_kept_until_it_has_a_successor() {
        let dir = tempfile::tempdir().unwrap();
        let q = crate::QueueBuilder::new(dir.path())
            .file_size(1 << 20)
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        app.append(b"a").unwrap();
        app.flush().unwrap();
        let c = Catalog::load(dir.path()).unwrap();
        let last = c.last().unwrap();
        let a = c.map_file(&last).unwrap();
        let b = c.map_file(&last).unwrap();
        assert!(Arc::ptr_eq(&a.map, &b.map), "the last file is mapped once");
        assert_eq!(a.map.mapped_len() as u64, last.header.file_size);
        assert!(a.map.len() <= 2 << 20, "as long as its data (and a chunk)");

        app.roll().unwrap();
        c.refresh().unwrap();
        let sealed = c.map_file(&last).unwrap();
        assert!(!Arc::ptr_eq(&a.map, &sealed.map), "sealed: mapped afresh");
        assert!((sealed.map.len() as u64) < last.header.file_size, "trimmed");
        let again = c.map_file(&last).unwrap();
        assert!(
            Arc::ptr_eq(&sealed.map, &again.map),
            "kept as a sealed file"
        );
        let new_last = c.last().unwrap();
        assert_ne!(new_last.id, last.id);
        let n = c.map_file(&new_last).unwrap();
        assert!(Arc::ptr_eq(&n.map, &c.map_file(&new_last).unwrap().map));
        c.close();
        assert!(c.last.lock().unwrap().is_none(), "close lets go of it");
        q.close().unwrap();
    }
}
