//! The data file being written, with its sparse index.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::options::RollStrategy;
use crate::error::{Error, Result};
use crate::format::crc::crc64;
use crate::format::footer::{trimmed_len, Footer, CONTENT_TOPICS, FOOTER_LEN};
use crate::format::frame::{self, frame_size, DATA_HEADER_LEN, END_OF_FILE, FRAME_ALIGN};
use crate::format::header::{encode_header_schema, DataHeader, IndexHeader};
use crate::format::record::{self, FLAG_TOPIC};
use crate::format::typed::{Schema, HEADER_SCHEMA_LEN_AT};
use crate::format::{data_file, position};
use crate::index::dense::{self, DenseHeader, DenseIndexWriter, DENSE_SINCE_VERSION};
use crate::index::sparse::{self, Entry, SparseIndexWriter};
use crate::storage::alloc::{data_min_chunk, ChunkAllocator, DATA_MAX_CHUNK};
use crate::storage::fsutil::sync_dir_chain;
use crate::storage::layout::FileId;
use crate::storage::mapped::WritableMapping;

/// The file the I/O thread appends to.
#[derive(Debug)]
pub struct ActiveFile {
    pub header: DataHeader,
    pub map: WritableMapping,
    pub index: SparseIndexWriter,
    /// Its dense index (one entry per message; format version 5 on).
    pub dense: Option<DenseIndexWriter>,
    /// Offset of the next frame.
    pub write_pos: usize,
    /// Sequence of the next frame.
    pub next_seq: u64,
    /// Offset up to which the file is msync'd; `usize::MAX` in a file another
    /// writer process created until this one writes into it (only our own
    /// frames are ours to sync).
    pub synced_pos: usize,
    /// Timestamp of the file's first message, if it has one.
    pub first_ts: Option<u64>,
    /// Timestamp of its last message (0 before the first).
    pub last_ts: u64,
    /// Grows the file (and allocates its disk blocks) ahead of `write_pos`.
    pub alloc: Arc<ChunkAllocator>,
    /// What its records hold, for the footer (`footer::CONTENT_*`). A file
    /// this writer did not write from its first frame (resumed, or created
    /// by another writer process) claims topics: the topic-index builder
    /// checks.
    pub content_flags: u64,
    /// Frames built but not yet in the file (see [`ActiveFile::publish`]).
    stage: Stage,
}

/// Frames built in memory, not yet in the file: [`ActiveFile::publish`]
/// writes them with one `pwrite`, then publishes them.
#[derive(Debug, Default)]
struct Stage {
    /// File offset of `bytes[0]` (the first frame's).
    at: usize,
    /// The frames, the first one's length word left 0.
    bytes: Vec<u8>,
    /// The first frame's length word, stored last.
    first_len: u32,
    /// `(count in the file, offset, timestamp)` of each staged message,
    /// for its index entries.
    entries: Vec<(u64, usize, u64)>,
}

/// True when `len` bytes at `at` lie inside one page that holds written
/// bytes before `at` (so the page is in the page cache).
fn within_written_page(at: usize, len: usize) -> bool {
    const PAGE: usize = 4096;
    !at.is_multiple_of(PAGE) && at / PAGE == (at + len - 1) / PAGE
}

/// Staged bytes past which the writer publishes before the bundle ends:
/// a large bundle is not copied whole, and the buffer stays in cache.
const STAGE_MAX: usize = 256 << 10;

/// A file just sealed whose bytes may not be on disk yet (`Async` mode):
/// the next flush fdatasyncs it.
#[derive(Debug)]
pub struct Sealed {
    pub path: PathBuf,
    pub file: File,
}

/// Bytes a file of format `version` keeps free after its last frame: the
/// end-of-file marker, and from version 4 the footer.
pub fn reserved_tail(version: u32) -> usize {
    if version >= 4 {
        FRAME_ALIGN + FOOTER_LEN
    } else {
        FRAME_ALIGN
    }
}

impl ActiveFile {
    /// Creates data file `id` and its index. The data file appears under its
    /// final name only once its header is written (temp file, then rename),
    /// so a reader never sees a file without a valid header.
    pub fn create(
        base: &Path,
        id: FileId,
        header: DataHeader,
        schema: Option<&Schema>,
        durable_dirs: bool,
    ) -> Result<ActiveFile> {
        let dir = id.parent(base);
        std::fs::create_dir_all(&dir)
            .map_err(|e| crate::error::Error::io("create directory", &dir, e))?;
        let index = SparseIndexWriter::create(&id.index_path(base), index_header(&header))?;
        // Created before the data file appears under its name: a reader
        // that finds the data file finds its dense index.
        let dense = match dense_header(&header) {
            Some(h) => Some(DenseIndexWriter::create(&id.offsets_path(base), h)?),
            None => None,
        };
        let path = id.data_path(base);
        let tmp = path.with_extension("data.tmp");
        let _ = std::fs::remove_file(&tmp);
        let min_chunk = data_min_chunk(header.file_size);
        let first_chunk = (min_chunk as u64).min(header.file_size);
        // Mapped at its full size, but only as long as its first chunk:
        // the file grows with its data (format version 11).
        let (mut map, allocated) =
            WritableMapping::create_growing(&tmp, header.file_size, first_chunk)?;
        let alloc = Arc::new(ChunkAllocator::new(
            map.file(),
            &path,
            map.len(),
            allocated as usize,
            (min_chunk, DATA_MAX_CHUNK),
        )?);
        map.write(0, &header.encode());
        if let Some(schema) = schema {
            // A typed file (format 12) is read without metadata.json.
            map.write(HEADER_SCHEMA_LEN_AT, &encode_header_schema(schema));
        }
        map.sync_range(0, DATA_HEADER_LEN)?;
        std::fs::rename(&tmp, &path).map_err(|e| crate::error::Error::io("rename", &path, e))?;
        map.set_path(&path);
        if durable_dirs {
            sync_dir_chain(base, &dir)?;
        }
        Ok(ActiveFile {
            header,
            map,
            index,
            dense,
            write_pos: DATA_HEADER_LEN,
            next_seq: header.first_seq,
            synced_pos: 0,
            first_ts: None,
            last_ts: 0,
            alloc,
            content_flags: 0,
            stage: Stage::default(),
        })
    }

    /// The file recovery resumes writing at `write_pos` (sequence `next_seq`).
    pub fn resume(
        header: DataHeader,
        map: WritableMapping,
        (index, dense): (SparseIndexWriter, Option<DenseIndexWriter>),
        write_pos: usize,
        next_seq: u64,
        (first_ts, last_ts): (Option<u64>, u64),
    ) -> Result<ActiveFile> {
        let alloc = Arc::new(ChunkAllocator::new(
            map.file(),
            map.path(),
            map.len(),
            0,
            (data_min_chunk(header.file_size), DATA_MAX_CHUNK),
        )?);
        Ok(ActiveFile {
            header,
            map,
            index,
            dense,
            write_pos,
            next_seq,
            synced_pos: write_pos,
            first_ts,
            last_ts,
            alloc,
            content_flags: if header.version >= 6 {
                CONTENT_TOPICS
            } else {
                0
            },
            stage: Stage::default(),
        })
    }

    /// Opens an existing data file (another writer process created it),
    /// positioned at its first frame; the caller moves it to the tail.
    pub fn open_existing(base: &Path, id: FileId, header: DataHeader) -> Result<ActiveFile> {
        let map = WritableMapping::open_at_least(&id.data_path(base), header.file_size)?;
        let (index, _) =
            SparseIndexWriter::open_or_rebuild(&id.index_path(base), index_header(&header))?;
        let first_ts = data_file::first_message_ts(map.readable());
        // Another writer process created it with its dense index; one
        // missing or damaged is recreated, and the entries written from
        // here on fill it (a reader falls back to the sparse index for the
        // others).
        let dense = match dense_header(&header) {
            Some(h) => Some(DenseIndexWriter::open_or_rebuild(&id.offsets_path(base), h)?.0),
            None => None,
        };
        let mut a = ActiveFile::resume(
            header,
            map,
            (index, dense),
            DATA_HEADER_LEN,
            header.first_seq,
            (first_ts, 0),
        )?;
        a.synced_pos = usize::MAX;
        Ok(a)
    }

    /// Messages in this file.
    pub fn count(&self) -> u64 {
        self.next_seq - self.header.first_seq
    }

    /// True when a frame with a `record_len`-byte record (with `flags` and
    /// extension bits `ext`) must go to a new file.
    pub fn must_roll(
        &self,
        flags: u8,
        ext: u8,
        record_len: usize,
        timestamp: u64,
        roll: &RollLimits,
    ) -> bool {
        self.must_roll_at(
            (self.write_pos, self.count()),
            (flags, ext, record_len),
            timestamp,
            roll,
        )
    }

    /// [`ActiveFile::must_roll`] for a frame written after others not yet
    /// written: at offset `write_pos`, the file then holding `count`
    /// messages (for checking a whole bundle before writing it).
    pub fn must_roll_at(
        &self,
        (write_pos, count): (usize, u64),
        (flags, ext, record_len): (u8, u8, usize),
        timestamp: u64,
        roll: &RollLimits,
    ) -> bool {
        let end = write_pos + frame_size(record_len);
        if end + reserved_tail(self.header.version) > self.map.len() {
            return true; // no room for the frame, an end-of-file marker and the footer
        }
        if record::record_version(flags, ext) > self.header.version {
            return true; // an older file never holds fields its readers do not know
        }
        if count == 0 {
            return false;
        }
        end as u64 > roll.size
            || count >= roll.count
            || roll
                .period_us
                .is_some_and(|p| self.first_ts.is_some_and(|t| t / p != timestamp / p))
    }

    /// Makes sure the bytes a frame with a `record_len`-byte record will
    /// touch exist, with disk blocks (the frame, the word after it, the
    /// end-of-file marker and the footer), growing the file by a chunk if
    /// they do not: a reader that sees the frame may read all of them, and
    /// a full disk fails here with `ENOSPC`, at a chunk boundary, instead
    /// of with SIGBUS inside the mapping.
    #[inline]
    pub fn allocate_for(&self, record_len: usize) -> Result<()> {
        let need = self.write_pos + frame_size(record_len) + reserved_tail(self.header.version);
        self.alloc.ensure(need.min(self.map.len()))
    }

    /// Builds one frame (length, record, CRC) into the stage; nothing of
    /// it is in the file, or visible to a reader, before
    /// [`ActiveFile::publish`]. The caller has called
    /// [`ActiveFile::allocate_for`]. Returns the frame's offset.
    pub fn write_frame(&mut self, flags: u8, timestamp: u64, body: &[u8]) -> usize {
        let start = self.stage.bytes.len();
        let record_len = frame::encode_record_into(&mut self.stage.bytes, flags, timestamp, body);
        self.staged(start, record_len, flags, timestamp)
    }

    /// [`ActiveFile::write_frame`] for a frame an appender built
    /// (`frame::encode_record_into`, a `record_len`-byte record with
    /// `flags` and `timestamp`).
    pub fn write_built(
        &mut self,
        frame: &[u8],
        record_len: usize,
        flags: u8,
        timestamp: u64,
    ) -> usize {
        debug_assert_eq!(frame.len(), frame_size(record_len));
        let start = self.stage.bytes.len();
        self.stage.bytes.extend_from_slice(frame);
        self.staged(start, record_len, flags, timestamp)
    }

    /// Counts the frame just staged at `start` of the stage (a
    /// `record_len`-byte record) as the file's next message.
    fn staged(&mut self, start: usize, record_len: usize, flags: u8, timestamp: u64) -> usize {
        let at = self.write_pos;
        let i = self.count();
        let st = &mut self.stage;
        if start == 0 {
            // The first frame's length is stored last, by `publish`.
            st.at = at;
            st.first_len = u32::try_from(record_len).expect("a record is shorter than a file");
            st.bytes[..4].fill(0);
        }
        st.entries.push((i, at, timestamp));
        self.next_seq += 1;
        if flags & FLAG_TOPIC != 0 {
            self.content_flags |= CONTENT_TOPICS;
        }
        self.first_ts.get_or_insert(timestamp);
        self.last_ts = timestamp;
        self.synced_pos = self.synced_pos.min(at);
        self.write_pos = at + frame_size(record_len);
        at
    }

    /// True when the stage holds enough to be published before the bundle
    /// ends ([`STAGE_MAX`]).
    pub fn stage_full(&self) -> bool {
        self.stage.bytes.len() >= STAGE_MAX
    }

    /// Writes the staged frames into the file with one `pwrite` (into the
    /// page cache every mapping of the file shares), with the zero word
    /// after the last (whatever a writer process that died there left),
    /// then publishes them: the first frame's length word by a release
    /// store into the mapping (a reader reaches the others only through
    /// it, and every byte of the `pwrite` is ordered before it), then
    /// their index entries (a reader that sees an entry sees its frame).
    /// Adds the messages it made visible to `published` as soon as they
    /// are (an index entry that fails after does not hide them).
    ///
    /// Why not stores into the mapping, as before 2026-12-02: a store to
    /// a page of the file not yet in the page cache makes the kernel zero
    /// a fresh page (or a large folio) first, and one to a page already
    /// written to disk dirties its whole folio again; `pwrite` copies
    /// into fresh pages without zeroing them and dirties only the blocks
    /// it writes (PERFORMANCE.md, "Frames written with pwrite").
    pub fn publish(&mut self, published: &mut u64) -> Result<()> {
        use std::os::unix::fs::FileExt;
        if self.stage.bytes.is_empty() {
            return Ok(());
        }
        let mut st = std::mem::take(&mut self.stage);
        let frames_end = st.bytes.len();
        if st.at + frames_end + 4 <= self.map.len() {
            st.bytes.extend_from_slice(&[0; 4]);
        }
        if within_written_page(st.at, st.bytes.len()) {
            // A few frames inside the page the last write ended in (lone
            // appends): that page is in the page cache, so stores into the
            // mapping cost no zeroing and, the page's folio being the
            // small one `pwrite` made, no folio written twice; they are
            // cheaper than a system call (issue 34's latency).
            self.map.write(st.at + 4, &st.bytes[4..]);
        } else {
            let wrote = self.map.file().write_all_at(&st.bytes, st.at as u64);
            if let Err(e) = wrote {
                st.bytes.truncate(frames_end);
                self.stage = st; // still staged: `drop_staged` forgets it
                return Err(Error::io("write", self.map.path(), e));
            }
        }
        self.map.store_u32(st.at, st.first_len);
        *published += st.entries.len() as u64;
        let indexed = st
            .entries
            .iter()
            .try_for_each(|&(i, at, ts)| self.index_entry(i, at, ts));
        st.bytes.clear();
        st.entries.clear();
        self.stage = st; // its buffers are reused
        indexed
    }

    /// Forgets the staged frames (a bundle that failed part-way: none of
    /// it reaches the file), back to the published end.
    pub fn drop_staged(&mut self) {
        if let Some(&(i, at, _)) = self.stage.entries.first() {
            self.write_pos = at;
            self.next_seq = self.header.first_seq + i;
        }
        self.stage.bytes.clear();
        self.stage.entries.clear();
    }

    /// Indexes message `i` of the file (its frame at `at`, published): its
    /// dense-index entry, and its sparse-index entry when its slot falls
    /// on it.
    fn index_entry(&mut self, i: u64, at: usize, timestamp: u64) -> Result<()> {
        if let Some(d) = &mut self.dense {
            d.put(i, at)?;
        }
        if i.is_multiple_of(self.header.index_interval as u64) {
            let entry = Entry {
                seq: self.header.first_seq + i,
                timestamp,
                offset: at as u64,
            };
            self.index
                .put(i / self.header.index_interval as u64, entry)?;
        }
        Ok(())
    }

    /// Counts `extra` more sequences for the batch frame (format 9) just
    /// written at `at` with `timestamp` (whose first member `write_frame`
    /// counted): each member gets a dense-index entry pointing at the
    /// batch frame, and a sparse-index entry when its slot falls on it
    /// (sequence: the member's; offset: the batch frame's).
    /// The batch frame is published first ([`ActiveFile::publish`]).
    pub fn add_batch_members(&mut self, at: usize, extra: u64, timestamp: u64) -> Result<()> {
        debug_assert!(self.stage.bytes.is_empty(), "the batch frame is published");
        let first = self.count();
        if let Some(d) = &mut self.dense {
            d.put_run(first, extra, at)?;
        }
        let interval = u64::from(self.header.index_interval).max(1);
        // The sparse slots that fall on members: every `interval`-th count.
        let mut i = first.next_multiple_of(interval);
        while i < first + extra {
            let entry = Entry {
                seq: self.next_seq + (i - first),
                timestamp,
                offset: at as u64,
            };
            self.index.put(i / interval, entry)?;
            i += interval;
        }
        self.next_seq += extra;
        Ok(())
    }

    /// True when `seqs` more sequences fit this file's indexes (every
    /// frame the smallest sizes them; a batch holds more sequences than
    /// frames): otherwise a batch goes to a new file.
    pub fn has_room_for_seqs(&self, seqs: u64) -> bool {
        self.count() + seqs < max_seqs(self.header.file_size)
    }

    /// Position just past the last frame: every message below it is written.
    pub fn end_position(&self) -> u64 {
        position::encode(self.header.file_number, self.write_pos as u64)
    }

    /// Seals the file: the end-of-file marker (readers move on to the next
    /// file at once), then, from format version 4, the footer at the end of
    /// the trimmed length, and the file and its sparse index trimmed (see
    /// `docs/FORMAT.md`, "Sealing"). With `durable`, marker, footer and the
    /// new length are on disk when this returns; otherwise the returned
    /// [`Sealed`] is for the next flush to fdatasync (`None`: a file another
    /// writer process created that this one never wrote to).
    pub fn seal(mut self, durable: bool) -> Result<Option<Sealed>> {
        // The I/O thread publishes first (it counts what it publishes and
        // adds the keys after); this only keeps a slip from losing frames.
        debug_assert!(self.stage.bytes.is_empty(), "published before sealing");
        self.publish(&mut 0)?;
        let ActiveFile {
            header,
            mut map,
            mut index,
            dense,
            write_pos,
            next_seq,
            synced_pos,
            first_ts,
            last_ts,
            alloc,
            content_flags,
            ..
        } = self;
        // The trimmed length (marker and footer, a page at most past what
        // `allocate_for` made exist) exists before anything is written
        // there.
        if header.version >= 4 {
            alloc.ensure(trimmed_len(write_pos as u64, header.file_size) as usize)?;
        }
        map.store_u32(write_pos, END_OF_FILE);
        // No allocation from here on: the prefault thread may still hold
        // the allocator, and must not allocate past the trimmed end.
        alloc.close();
        let trim = (header.version >= 4).then(|| {
            let frames_end = write_pos as u64;
            let len = trimmed_len(frames_end, header.file_size);
            let footer = Footer {
                frames_end,
                frames_crc: crc64(&[&map.as_slice()[DATA_HEADER_LEN..write_pos]]),
                file_number: header.file_number,
                first_seq: header.first_seq,
                end_seq: next_seq,
                first_ts: first_ts.unwrap_or(0),
                last_ts: if next_seq > header.first_seq {
                    last_ts
                } else {
                    0
                },
                content_flags,
                // The writer never writes a hole (only key compaction does).
                hole_seqs: 0,
            };
            map.write(len as usize - FOOTER_LEN, &footer.encode());
            len
        });
        if durable && synced_pos != usize::MAX {
            let start = synced_pos.min(write_pos) & !4095;
            let end = trim.map_or(write_pos + FRAME_ALIGN, |l| l as usize);
            map.sync_range(start, end.min(map.len()) - start)?;
        }
        let path = map.path().to_path_buf();
        let file = map
            .file()
            .try_clone()
            .map_err(|e| Error::io("dup", &path, e))?;
        drop(map);
        if let Some(len) = trim {
            file.set_len(len).map_err(|e| Error::io("trim", &path, e))?;
            let entries = (next_seq - header.first_seq).div_ceil(u64::from(header.index_interval));
            index.seal(entries)?;
            if let Some(mut d) = dense {
                d.seal(next_seq - header.first_seq)?;
                if durable {
                    d.sync()?;
                }
            }
            if durable {
                file.sync_data()
                    .map_err(|e| Error::io("fdatasync", &path, e))?;
            }
        }
        if durable {
            index.sync()?;
        }
        Ok((!durable && synced_pos != usize::MAX).then_some(Sealed { path, file }))
    }

    /// msyncs everything written since the last sync (and the marker after it).
    pub fn sync(&mut self) -> Result<()> {
        debug_assert!(self.stage.bytes.is_empty(), "published before syncing");
        self.publish(&mut 0)?; // as in `seal`
        let end = (self.write_pos + FRAME_ALIGN).min(self.map.len());
        if end > self.synced_pos {
            let start = self.synced_pos & !4095;
            self.map.sync_range(start, end - start)?;
            self.synced_pos = end;
        }
        Ok(())
    }

    /// At a clean close: gives back the disk blocks allocated ahead of the
    /// writer (past the page after the last frame), so that a closed queue
    /// holds about what it stores. The next writer allocates again. The
    /// file keeps its length: a reader in another process may have looked
    /// at it, and reads up to it. Best effort: a file system that cannot
    /// punch holes keeps them.
    pub fn release_unused(&self) {
        self.alloc.close();
        let from = (self.write_pos + FRAME_ALIGN).div_ceil(4096) * 4096;
        if from < self.map.len() {
            let _ = crate::storage::mapped::punch_hole(
                self.map.file(),
                from as u64,
                (self.map.len() - from) as u64,
            );
        }
        // Blocks the prefault thread allocated past the file's length
        // (`FALLOC_FL_KEEP_SIZE`) are not punched by every file system
        // (ext4 stops at the length): setting the length it has frees
        // them. Only at a close with one writer process (nobody else grows
        // the file meanwhile), and never shorter.
        let _ = crate::storage::mapped::release_past_end(self.map.file());
    }

    /// Bytes written but not yet msync'd.
    pub fn unsynced(&self) -> usize {
        self.write_pos.saturating_sub(self.synced_pos)
    }
}

/// The most sequences a data file of `file_size` bytes holds: what its
/// dense and sparse indexes have room for (one per smallest frame). A
/// batch (format 9) holds at most this many members less one.
pub fn max_seqs(file_size: u64) -> u64 {
    dense::capacity(file_size) - 1
}

/// The sparse-index header that goes with a data file.
pub fn index_header(header: &DataHeader) -> IndexHeader {
    IndexHeader {
        version: header.version,
        interval: header.index_interval,
        first_seq: header.first_seq,
        file_number: header.file_number,
        capacity: sparse::capacity(header.file_size, header.index_interval),
    }
}

/// The dense-index header that goes with a data file; `None` before
/// format version 5 (those files have none).
pub fn dense_header(header: &DataHeader) -> Option<DenseHeader> {
    (header.version >= DENSE_SINCE_VERSION).then(|| DenseHeader {
        version: header.version,
        first_seq: header.first_seq,
        file_number: header.file_number,
        capacity: dense::capacity(header.file_size),
    })
}

/// A roll strategy flattened for the per-message check: the tightest size
/// and count, and the shortest period (every longer period's boundary is
/// also one of the shortest's: UTC days start on hours, hours on minutes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollLimits {
    pub size: u64,
    pub count: u64,
    pub period_us: Option<u64>,
}

impl RollLimits {
    pub fn new(roll: &RollStrategy) -> RollLimits {
        let mut l = RollLimits {
            size: u64::MAX,
            count: u64::MAX,
            period_us: None,
        };
        roll.leaves(&mut |s| match *s {
            RollStrategy::Size(n) => l.size = l.size.min(n),
            RollStrategy::Count(n) => l.count = l.count.min(n),
            RollStrategy::Period(p) => {
                l.period_us = Some(l.period_us.map_or(p.micros(), |q| q.min(p.micros())))
            }
            RollStrategy::Any(_) => {}
        });
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::options::RollPeriod;

    #[test]
    fn only_frames_inside_an_already_written_page_skip_the_pwrite() {
        assert!(
            within_written_page(4096 + 128, 132),
            "a lone frame mid-page"
        );
        assert!(
            within_written_page(8192 - 132, 132),
            "up to the page's last byte"
        );
        assert!(
            !within_written_page(8192 - 128, 132),
            "its zero word in the next page"
        );
        assert!(
            !within_written_page(8192, 132),
            "a page nothing was written to yet"
        );
        assert!(!within_written_page(4096 + 128, 128 << 10), "a batch");
    }

    #[test]
    fn combined_roll_strategy_keeps_the_tightest_limits() {
        let roll = RollStrategy::Any(vec![
            RollStrategy::Period(RollPeriod::Daily),
            RollStrategy::Count(100),
            RollStrategy::Any(vec![
                RollStrategy::Period(RollPeriod::Hourly),
                RollStrategy::Count(50),
            ]),
            RollStrategy::Size(1 << 20),
        ]);
        let l = RollLimits::new(&roll);
        assert_eq!(
            l,
            RollLimits {
                size: 1 << 20,
                count: 50,
                period_us: Some(3_600_000_000)
            }
        );
        assert_eq!(
            RollLimits::new(&RollStrategy::Count(7)),
            RollLimits {
                size: u64::MAX,
                count: 7,
                period_us: None
            }
        );
    }
}
