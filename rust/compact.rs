//! Key compaction (Kafka's compacted topics): sealed data files are
//! rewritten keeping, for every key, only its latest message across the
//! whole queue; a tombstone that is its key's latest message goes too once
//! it is older than a grace period. Messages without a key are kept.
//!
//! **Batches** (format 9) are kept whole, never split: their keyed members
//! count for "latest" like any message (a member that is its key's latest
//! makes the older messages of that key holes), a superseded member stays
//! readable by iteration, and a tombstone that is its key's latest stays
//! past the grace period while a batch member holds an older value of its
//! key, so `get_latest` stays exact.
//!
//! **Holes in place.** A dropped message's frame becomes a *hole* of the
//! same length (docs/FORMAT.md, "Records", extension bit `0x04`): the hole
//! record (flags `0x80`, the message's timestamp, extension byte `0x04`)
//! followed by zeros up to the frame's old record length, and the frame's
//! CRC. So every frame keeps its offset: sequence addressing stays one
//! probe, and the dense and sparse indexes and the key index (positions =
//! file number and offset) stay valid as they are. The new file is written
//! sparse: zeros are never written, so the disk blocks under runs of holes
//! are never allocated, and that is the space compaction gives back (the
//! file's length does not change; `du`, not `ls`, shows the gain).
//!
//! **Crash safety.** The new file is written complete under
//! `NAME.data.compact.tmp` (header of the current format version, frames, end-of-file marker,
//! footer with the new `frames_crc` and, format 11, the sequences its holes
//! stand for in `hole_seqs`), fsynced, and renamed over the old one,
//! then the directory is fsynced: a crash leaves the old file or the new
//! one, never a mix, and a leftover temp file (deleted by the next
//! compaction and by the next writer, like every `*.tmp`). A reader that
//! maps the old file keeps reading it (its inode lives while mapped).
//! Because offsets do not change, the indexes beside the file fit both the
//! old and the new file; the derived indexes (topics, fields), which name
//! the file's `frames_crc`, are rebuilt after the rename (a stale one fails
//! its check and readers read the data file meanwhile).
//!
//! **Order.** Files are compacted oldest first, so when a tombstone is
//! dropped every older message of its key is already a hole: a crash
//! between two files never brings a deleted value back. Only files with a
//! footer (sealed, format 4 and later) and never the last file (the one
//! being written) are rewritten. A pass holds the retention lock
//! (`base/.retention.lock`): compaction and retention never run at once.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::catalog::{Catalog, FileInfo};
use crate::error::{Error, Result};
use crate::format::crc::{crc64, Crc64};
use crate::format::error::DecodeError;
use crate::format::footer::{Footer, FOOTER_LEN};
use crate::format::frame::{DATA_HEADER_LEN, END_OF_FILE, FRAME_ALIGN};
use crate::format::header::DataHeader;
use crate::format::record::{self, HOLE_RECORD_LEN};
use crate::format::FORMAT_VERSION;
use crate::index::fields::FieldIndexDef;
use crate::retention::RetentionLock;
use crate::storage::frames::{self, Check, RecordKind};
use crate::storage::fsutil::{mark_removal, sync_dir};
use crate::storage::mapped::{allocated_bytes, Mapping};
use crate::writer::derived::ensure_topics;

/// Suffix of the file a compaction writes before renaming it over the data file.
pub const COMPACT_TMP_SUFFIX: &str = "data.compact.tmp";

/// What a compaction pass keeps.
#[derive(Debug, Clone, Default)]
pub struct CompactOptions {
    /// A tombstone that is its key's latest message is dropped only once
    /// it is at least this old (µs): until then a reader of the compacted
    /// queue still sees the deletion (Kafka's `delete.retention.ms`).
    pub grace_us: u64,
    /// Test hook: stop with [`Error::Internal`] right after this step of the
    /// first file rewritten, leaving the files as a crash there would.
    #[doc(hidden)]
    pub fail_after: Option<CompactStep>,
}

/// The steps of rewriting one file, for crash tests.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactStep {
    /// The temp file is written, not yet synced.
    Written,
    /// The temp file is fsynced.
    Synced,
    /// The temp file was renamed over the data file (directory not yet synced).
    Renamed,
}

/// What a compaction pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Sealed files looked at.
    pub files_examined: usize,
    /// Files rewritten (those with something to drop).
    pub files_rewritten: usize,
    /// Messages turned into holes by this pass (tombstones included).
    pub records_dropped: u64,
    /// Of those, tombstones past the grace period.
    pub tombstones_dropped: u64,
    /// Disk space (allocated blocks) of the rewritten files before.
    pub bytes_before: u64,
    /// Disk space (allocated blocks) of the rewritten files after.
    pub bytes_after: u64,
}

/// Progress of a pass: `(files done, files to examine)`.
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize);

/// One frame as the walk found it.
struct Frame<'a> {
    seq: u64,
    at: usize,
    rec: record::RecordView<'a>,
}

/// Walks the frames of `map` from the header on until the end of the
/// published data or the end-of-file marker, decoding each (a damaged frame
/// is an error: compaction never rewrites what it cannot read).
fn walk<'a>(
    map: &'a Mapping,
    first_seq: u64,
    each: &mut dyn FnMut(Frame<'a>) -> Result<()>,
) -> Result<usize> {
    let mut at = DATA_HEADER_LEN;
    let mut seq = first_seq;
    loop {
        let f = match frames::frame_at(map, at, Check::Crc) {
            frames::Step::Frame(f) => f,
            frames::Step::Empty
            | frames::Step::EndOfFile
            | frames::Step::Damage(DecodeError::Truncated) => return Ok(at),
            frames::Step::Damage(e) => {
                return Err(Error::corrupted(
                    map.path(),
                    at as u64,
                    Some(seq),
                    e.to_string(),
                ))
            }
        };
        let rec = record::decode(f.record)
            .map_err(|r| Error::corrupted(map.path(), at as u64, Some(seq), r))?;
        let n = RecordKind::of_or_plain(f.record).count();
        each(Frame { seq, at, rec })?;
        at = f.next;
        seq += n; // a hole stands for several, a batch for its members
    }
}

/// Runs one compaction pass over the queue `catalog` lists (see the module
/// documentation). `defs` are the declared secondary indexes, rebuilt for
/// each file rewritten. Waits for a retention pass that holds the lock.
pub fn run(
    catalog: &std::sync::Arc<Catalog>,
    opts: &CompactOptions,
    defs: &[FieldIndexDef],
    now_us: u64,
    progress: Progress<'_>,
) -> Result<CompactReport> {
    let base = catalog.base().to_path_buf();
    let _lock = RetentionLock::acquire(&base, true)?;
    catalog.refresh()?;
    let files = catalog.snapshot();
    let mut report = CompactReport::default();
    let Some((_active, sealed)) = files.split_last() else {
        return Ok(report);
    };
    remove_leftovers(&base, &files);

    // Pass 1: the latest sequence of every key, over every file (the
    // active one too: a message there supersedes older ones), members of
    // batches (format 9) included; and the keys some batch member has
    // (batch frames are kept whole, so such a member stays).
    let mut latest: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut in_batches: HashSet<Vec<u8>> = HashSet::new();
    let limit = catalog.max_decompressed();
    for f in files.iter() {
        let map = match Mapping::open(&catalog.data_path(f.id)) {
            Ok(m) => m,
            Err(e) if is_gone(&e) => continue, // retention (before we locked)
            Err(e) => return Err(e),
        };
        let mut saw = |k: &[u8], seq: u64| match latest.get_mut(k) {
            Some(s) => *s = seq,
            None => {
                latest.insert(k.to_vec(), seq);
            }
        };
        walk(&map, f.header.first_seq, &mut |fr| {
            if let Some(k) = fr.rec.key {
                saw(k, fr.seq);
            } else if fr.rec.is_batch() && !fr.rec.is_row_batch() {
                // (A row batch's rows, format 12, have no keys.)
                batch_keys(&map, &fr, limit, &mut |k, seq| {
                    saw(k, seq);
                    if !in_batches.contains(k) {
                        in_batches.insert(k.to_vec());
                    }
                })?;
            }
            Ok(())
        })?;
    }

    // Pass 2: rewrite the sealed files with something to drop, oldest first.
    let total = sealed.len();
    let mut fail = opts.fail_after;
    for (i, f) in sealed.iter().enumerate() {
        progress(i, total);
        if f.header.version < 4 {
            continue; // no footer to rewrite: version-3 files stay as they are
        }
        report.files_examined += 1;
        let path = catalog.data_path(f.id);
        let map = match Mapping::open(&path) {
            Ok(m) => m,
            Err(e) if is_gone(&e) => continue,
            Err(e) => return Err(e),
        };
        let h = f.header;
        let Ok(footer) = Footer::read(map.as_slice(), h.file_number, h.first_seq, h.file_size)
        else {
            continue; // not sealed (a crash mid-seal): recovery finishes it first
        };
        let mut drop_at: Vec<usize> = Vec::new();
        let mut tombstones = 0u64;
        walk(&map, h.first_seq, &mut |fr| {
            let Some(k) = fr.rec.key else { return Ok(()) };
            let last = latest.get(k).copied();
            let superseded = last != Some(fr.seq);
            // A tombstone stays while an older member of a batch has its
            // key: the batch is kept whole, and `get_latest` would find
            // that member again.
            let expired_tombstone = fr.rec.is_tombstone()
                && !superseded
                && !in_batches.contains(k)
                && now_us.saturating_sub(fr.rec.timestamp) >= opts.grace_us;
            if superseded || expired_tombstone {
                drop_at.push(fr.at);
                if expired_tombstone {
                    tombstones += 1;
                }
            }
            Ok(())
        })?;
        if drop_at.is_empty() {
            continue;
        }
        let before = allocated_bytes(&path);
        let new_header = rewrite(&map, &h, &footer, &drop_at, fail.take())?;
        drop(map);
        report.files_rewritten += 1;
        report.records_dropped += drop_at.len() as u64;
        report.tombstones_dropped += tombstones;
        report.bytes_before += before;
        report.bytes_after += allocated_bytes(&path);
        catalog.update_header(f.id, new_header);
        update_index_headers(&base, f, new_header.version);
        let info = FileInfo {
            id: f.id,
            header: new_header,
        };
        ensure_topics(&base, &info);
        crate::reader::typed_where::ensure_indexes(catalog, &info, defs);
    }
    progress(total, total);
    Ok(report)
}

/// Calls `each(key, seq)` for every keyed member of the batch frame `fr`
/// (format 9) of `map`, in sequence order: the block decompressed (at most
/// `limit` bytes) and checked whole; a batch that fails is an error
/// (compaction never rewrites what it cannot read).
fn batch_keys(
    map: &Mapping,
    fr: &Frame<'_>,
    limit: usize,
    each: &mut dyn FnMut(&[u8], u64),
) -> Result<()> {
    let bytes = &map.as_slice()[fr.at + 4..];
    let bad = |r: String| Error::corrupted(map.path(), fr.at as u64, Some(fr.seq), r);
    let (first, count) = RecordKind::of_or_plain(bytes).batch().unwrap_or((0, 1));
    let count = count as u16;
    let codec = fr
        .rec
        .codec
        .ok_or_else(|| bad("batch without a codec".into()))?;
    let block = crate::format::compression::decompress(
        codec,
        fr.rec.payload,
        fr.rec.raw_len as usize,
        limit,
    )
    .map_err(bad)?;
    record::check_batch_block(&block, count).map_err(|r| bad(r.into()))?;
    for (i, member) in record::batch_members(&block, count).enumerate() {
        let member = member.map_err(|r| bad(r.into()))?;
        if let Some(k) = member.key {
            each(k, first + i as u64);
        }
    }
    Ok(())
}

fn is_gone(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

/// Deletes `NAME.data.compact.tmp` files a crashed pass left beside the
/// queue's data files.
fn remove_leftovers(base: &Path, files: &[FileInfo]) {
    let mut dirs: Vec<PathBuf> = files.iter().map(|f| f.id.parent(base)).collect();
    dirs.dedup();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(COMPACT_TMP_SUFFIX))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Writes a buffer of file bytes at increasing offsets, leaving gaps of at
/// least a page unwritten (they read as zeros; the file stays sparse there).
struct SparseWriter<'a> {
    file: &'a File,
    path: &'a Path,
    start: usize,
    buf: Vec<u8>,
}

impl SparseWriter<'_> {
    const FLUSH_AT: usize = 4 << 20;

    fn put(&mut self, at: usize, bytes: &[u8]) -> Result<()> {
        let end = self.start + self.buf.len();
        debug_assert!(at >= end);
        if at - end >= 4096 || self.buf.len() >= Self::FLUSH_AT {
            self.flush()?;
            self.start = at;
        } else {
            self.buf.resize(self.buf.len() + (at - end), 0);
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file
                .write_all_at(&self.buf, self.start as u64)
                .map_err(|e| Error::io("write", self.path, e))?;
            self.start += self.buf.len();
            self.buf.clear();
        }
        Ok(())
    }
}

/// Feeds `n` zero bytes to `crc`.
fn crc_zeros(crc: &mut Crc64, mut n: usize) {
    static ZEROS: [u8; 4096] = [0; 4096];
    while n > 0 {
        let k = n.min(ZEROS.len());
        crc.write(&ZEROS[..k]);
        n -= k;
    }
}

/// A run of dropped frames becoming one hole: where it starts, the first
/// one's timestamp, how many sequences.
struct Run {
    at: usize,
    ts: u64,
    count: u64,
}

/// The most bytes one hole spans (its length word is a `u32`).
const MAX_HOLE_SPAN: usize = 1 << 30;

/// Writes the hole for `run`, spanning the file from `run.at` to `end` (the
/// next kept frame): length word `L = end - run.at - 12`, the hole record,
/// zeros (not written), and the frame's CRC in its last 8 bytes, so the
/// next frame stays where it was. Feeds all of it to `frames_crc`. Returns
/// the sequences the hole stands for.
fn put_hole(w: &mut SparseWriter<'_>, frames_crc: &mut Crc64, run: Run, end: usize) -> Result<u64> {
    let record_len = end - run.at - 4 - 8;
    let count = u16::try_from(run.count).expect("runs are cut at MAX_HOLE_COUNT");
    let hole = record::hole(run.ts, count);
    let len_word = (record_len as u32).to_le_bytes();
    let crc = hole_crc(len_word, &hole, record_len);
    let mut head = [0u8; 4 + HOLE_RECORD_LEN];
    head[..4].copy_from_slice(&len_word);
    head[4..].copy_from_slice(&hole);
    w.put(run.at, &head)?;
    w.put(run.at + 4 + record_len, &crc.to_le_bytes())?;
    frames_crc.write(&head);
    crc_zeros(frames_crc, record_len - HOLE_RECORD_LEN);
    frames_crc.write(&crc.to_le_bytes());
    Ok(run.count)
}

/// The CRC of a hole frame: its length word, the hole record and zeros up
/// to `record_len`.
fn hole_crc(len_word: [u8; 4], hole: &[u8; HOLE_RECORD_LEN], record_len: usize) -> u64 {
    if record_len == HOLE_RECORD_LEN {
        return crc64(&[&len_word, hole]);
    }
    let mut crc = Crc64::new();
    crc.write(&len_word);
    crc.write(hole);
    crc_zeros(&mut crc, record_len - HOLE_RECORD_LEN);
    crc.finish()
}

/// Rewrites the sealed file `map` (header `h`, footer `footer`) with the
/// frames at the offsets `drop_at` (sorted) turned into holes, through a
/// temp file renamed over it. Returns the new header.
fn rewrite(
    map: &Mapping,
    h: &DataHeader,
    footer: &Footer,
    drop_at: &[usize],
    fail_after: Option<CompactStep>,
) -> Result<DataHeader> {
    let path = map.path();
    let tmp = path.with_extension(COMPACT_TMP_SUFFIX);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| Error::io("create", &tmp, e))?;
    let result = (|| {
        let src = map.as_slice();
        file.set_len(src.len() as u64)
            .map_err(|e| Error::io("truncate", &tmp, e))?;
        let header = DataHeader {
            version: FORMAT_VERSION,
            ..*h
        };
        let mut w = SparseWriter {
            file: &file,
            path: &tmp,
            start: 0,
            buf: Vec::with_capacity(1 << 20),
        };
        w.put(0, &header.encode())?;
        if h.schema_version != 0 {
            // A typed file keeps its schema (format 12): bytes 72.. of the
            // header, past the removal mark, which the new file leaves zero.
            let at = crate::format::typed::HEADER_SCHEMA_LEN_AT;
            w.put(at, &src[at..DATA_HEADER_LEN])?;
        }
        // The frame area's CRC, fed frame by frame (holes' zeros included).
        let mut frames_crc = Crc64::new();
        let end = footer.frames_end as usize;
        let mut drops = drop_at.iter().peekable();
        let mut at = DATA_HEADER_LEN;
        let mut count = footer.first_seq;
        // Consecutive dropped frames (and holes already there) become one
        // hole spanning their bytes.
        let mut run: Option<Run> = None;
        // Sequences the file's holes stand for (old ones included): the
        // footer's `hole_seqs` (format 11), so readers count without a walk.
        let mut hole_seqs = 0u64;
        while at < end {
            let frames::Step::Frame(f) = frames::frame_at(&*map, at, Check::Crc) else {
                return Err(Error::corrupted(
                    path,
                    at as u64,
                    Some(count),
                    "frame changed or damaged while compacting",
                ));
            };
            let (rec, record_len, next) = (f.record, f.record.len(), f.next);
            let n = RecordKind::of_or_plain(rec).count();
            let dropped = drops.peek() == Some(&&at);
            if dropped {
                drops.next();
            }
            if dropped || matches!(RecordKind::of_or_plain(rec), RecordKind::Hole { .. }) {
                let ts = record::decode(rec)
                    .map_err(|r| Error::corrupted(path, at as u64, Some(count), r))?
                    .timestamp;
                match run.as_mut() {
                    Some(r)
                        if r.count + n <= u64::from(record::MAX_HOLE_COUNT)
                            && next - r.at <= MAX_HOLE_SPAN =>
                    {
                        r.count += n
                    }
                    _ => {
                        if let Some(r) = run.take() {
                            hole_seqs += put_hole(&mut w, &mut frames_crc, r, at)?;
                        }
                        run = Some(Run { at, ts, count: n });
                    }
                }
            } else {
                if let Some(r) = run.take() {
                    hole_seqs += put_hole(&mut w, &mut frames_crc, r, at)?;
                }
                // Kept: the frame as it is, CRC included (it does not
                // depend on the frame's offset).
                let bytes = &src[at..at + 4 + record_len + 8];
                w.put(at, bytes)?;
                frames_crc.write(bytes);
                crc_zeros(&mut frames_crc, next - (at + 4 + record_len + 8));
            }
            at = next;
            count += n;
        }
        if let Some(r) = run.take() {
            hole_seqs += put_hole(&mut w, &mut frames_crc, r, at)?;
        }
        if at != end || count != footer.end_seq {
            return Err(Error::corrupted(
                path,
                at as u64,
                Some(count),
                "the frames do not end where the footer says",
            ));
        }
        debug_assert_eq!(end % FRAME_ALIGN, 0);
        w.put(end, &END_OF_FILE.to_le_bytes())?;
        let new_footer = Footer {
            frames_crc: frames_crc.finish(),
            hole_seqs,
            ..*footer
        };
        w.put(src.len() - FOOTER_LEN, &new_footer.encode())?;
        w.flush()?;
        if fail_after == Some(CompactStep::Written) {
            return Err(Error::Internal("injected failure after writing".into()));
        }
        file.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
        if fail_after == Some(CompactStep::Synced) {
            return Err(Error::Internal("injected failure after fsync".into()));
        }
        Ok(header)
    })();
    let header = match result {
        Ok(h) => h,
        Err(e) => {
            // A real failure cleans up; an injected one leaves what a
            // crash would.
            if !matches!(e, Error::Internal(_)) {
                let _ = std::fs::remove_file(&tmp);
            }
            return Err(e);
        }
    };
    // Readers in other processes that keep the old file mapped look again.
    mark_removal(path)?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io("rename", &tmp, e))?;
    if fail_after == Some(CompactStep::Renamed) {
        return Err(Error::Internal("injected failure after rename".into()));
    }
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(header)
}

/// Sets the data-file version in the headers of the sparse and dense
/// indexes of `f` (their entries are unchanged: offsets did not move), so
/// that the writer's check of them at open does not rebuild them. A header
/// that does not decode is left alone (readers ignore such an index and the
/// writer rebuilds it).
fn update_index_headers(base: &Path, f: &FileInfo, version: u32) {
    use crate::format::header::IndexHeader;
    use crate::index::dense::DenseHeader;
    let rewrite_header = |path: PathBuf, len: usize, fix: &dyn Fn(&[u8]) -> Option<Vec<u8>>| {
        let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else {
            return;
        };
        let mut b = vec![0u8; len];
        if file.read_exact_at(&mut b, 0).is_err() {
            return;
        }
        if let Some(new) = fix(&b) {
            let _ = file.write_all_at(&new, 0);
        }
    };
    rewrite_header(f.id.index_path(base), 48, &|b| {
        let h = IndexHeader::decode(b).ok()?;
        (h.version != version).then(|| IndexHeader { version, ..h }.encode().to_vec())
    });
    rewrite_header(f.id.offsets_path(base), 64, &|b| {
        let h = DenseHeader::decode(b)?;
        (h.version != version).then(|| DenseHeader { version, ..h }.encode().to_vec())
    });
}
