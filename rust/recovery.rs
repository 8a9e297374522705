//! Recovery on open: find where the writer left off and repair the tail.
//!
//! Only the last data file can hold a torn tail, because a file is sealed
//! with an end-of-file marker before the next one exists. Recovery scans it
//! from its last sparse-index entry (so the cost follows the tail, not the
//! queue; after a clean close the frames before the entry are stepped over
//! by their length words, which must lead to it), cuts off the first frame
//! that does not check out, zeroes what lies after the cut, drops index
//! entries past it and refills missing ones.

use std::path::Path;

use crate::catalog::{Catalog, FileInfo};
use crate::error::{Error, Result};
use crate::format::error::DecodeError;
use crate::format::footer::{trimmed_len, Footer, FOOTER_LEN, HOLE_SEQS_SINCE};
use crate::format::frame::{self, frame_size, DATA_HEADER_LEN, END_OF_FILE, FRAME_ALIGN};
use crate::format::{data_file, record};
use crate::index::dense::DenseIndexWriter;
use crate::index::sparse::{self, Entry, SparseIndexWriter};
use crate::storage::frames::{frame_at, Check, RecordKind, Step};
use crate::storage::fsutil::{remove_data_file, remove_if_present};
use crate::storage::layout::list_temp_files;
use crate::storage::mapped::{Mapping, WritableMapping};
use crate::writer::active::{dense_header, index_header, ActiveFile};
use crate::writer::io_thread::{Resume, MAX_UNSYNCED_SEALED};

/// What recovery found and changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Bytes of a torn or invalid tail that were zeroed.
    pub cut_bytes: u64,
    /// Offset in the last file where the tail was cut, if it was.
    pub cut_at: Option<u64>,
    /// Why the tail was cut.
    pub cut_reason: Option<String>,
    /// A missing end-of-file marker was written into the previous file.
    pub repaired_end_marker: bool,
    /// Sparse-index entries rewritten.
    pub index_entries_rebuilt: u64,
    /// Dense-index entries rewritten (missing or different from the data).
    pub dense_entries_rebuilt: u64,
    /// Frames checked by `verify_on_startup`.
    pub frames_verified: u64,
    /// Newer data files removed because an older one ends before they start
    /// (a machine crash lost its unsynced tail; nothing after it was durable).
    pub dropped_files: Vec<std::path::PathBuf>,
    /// Sealed files whose footer or trim a crash interrupted, finished now.
    pub finished_seals: u64,
    /// Always false from format version 11 (kept for callers that read
    /// it): a last file trimmed by a crash whose end-of-file marker had not
    /// reached the disk used to be given back its full length; it is now
    /// written on as it is, growing as files do.
    pub restored_length: bool,
}

/// End of a frame walk over one file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum WalkEnd {
    /// A zero length: nothing written past here.
    Empty,
    /// The end-of-file marker.
    Sealed,
    /// A frame that does not check out.
    Bad(String),
}

struct Walk {
    seq: u64,
    offset: usize,
    last_ts: u64,
    end: WalkEnd,
    frames: u64,
}

/// Walks frames of `file` from `(seq, offset)`, calling `on_frame` for each.
/// `from_start`: `(seq, offset)` is the file's first frame, not an index
/// entry's (which may name a later member of the batch frame it points at).
fn walk(
    file: &[u8],
    (mut seq, mut offset, from_start): (u64, usize, bool),
    mut on_frame: impl FnMut(u64, usize, u64),
) -> Walk {
    let mut last_ts = 0;
    let mut frames = 0;
    let end = loop {
        let f = match frame_at(file, offset, Check::Crc) {
            Step::Frame(f) => f,
            Step::Empty => break WalkEnd::Empty,
            Step::EndOfFile => break WalkEnd::Sealed,
            Step::Damage(DecodeError::Truncated) => {
                break WalkEnd::Bad("frames run to the end of the file".into())
            }
            Step::Damage(e) => break WalkEnd::Bad(e.to_string()),
        };
        let rec = f.record;
        // A hole (key compaction) stands for several sequences; a batch
        // (format 9) for its members, each indexed at its frame (a walk may
        // start at any of them, from an index entry).
        let kind = RecordKind::of_or_plain(rec);
        let after = kind.seq_after(seq);
        // A walk that stepped onto the frame from the one before knows its
        // first sequence; only its first frame may be entered at a later
        // member (from an index entry).
        if let Some((first, _)) = kind.batch() {
            let exact = frames > 0 || from_start;
            if !(first..after).contains(&seq) || exact && first != seq {
                break WalkEnd::Bad(format!(
                    "batch frame names {first} as its first sequence, \
                     but stands at sequence {seq}"
                ));
            }
        }
        match record::decode(rec) {
            Ok(view) => {
                last_ts = view.timestamp;
                if view.is_batch() {
                    for s in seq..after {
                        on_frame(s, offset, view.timestamp);
                    }
                } else {
                    on_frame(seq, offset, view.timestamp);
                }
            }
            Err(reason) => break WalkEnd::Bad(reason.to_string()),
        }
        if f.next + 4 > file.len() {
            break WalkEnd::Bad("frames run to the end of the file".into());
        }
        offset = f.next;
        seq = after;
        frames += 1;
    };
    Walk {
        seq,
        offset,
        last_ts,
        end,
        frames,
    }
}

/// Checks every frame of a sealed file; returns the sequence after its last.
fn verify_sealed(
    path: &Path,
    info: &FileInfo,
    on_frame: impl FnMut(u64, usize, u64),
) -> Result<Walk> {
    let map = Mapping::open(path)?;
    let w = walk(
        map.as_slice(),
        (info.header.first_seq, DATA_HEADER_LEN, true),
        on_frame,
    );
    match &w.end {
        WalkEnd::Sealed if info.header.version >= 4 => {
            // Version 4: the footer must describe exactly these frames.
            let h = &info.header;
            let footer = Footer::read(map.as_slice(), h.file_number, h.first_seq, h.file_size)
                .map_err(|e| {
                    Error::corrupted(path, map.len() as u64, None, format!("footer: {e}"))
                })?;
            let crc = Footer::frames_crc_of(map.as_slice(), footer.frames_end);
            if footer.frames_end != w.offset as u64
                || footer.end_seq != w.seq
                || crc != Some(footer.frames_crc)
            {
                return Err(Error::corrupted(
                    path,
                    w.offset as u64,
                    Some(w.seq),
                    "footer does not match the frames (end, sequence or CRC)",
                ));
            }
            Ok(w)
        }
        WalkEnd::Sealed => Ok(w),
        WalkEnd::Empty => Err(Error::corrupted(
            path,
            w.offset as u64,
            Some(w.seq),
            "file is followed by another but has no end-of-file marker",
        )),
        WalkEnd::Bad(reason) => Err(Error::corrupted(
            path,
            w.offset as u64,
            Some(w.seq),
            reason.clone(),
        )),
    }
}

/// Zeroes every non-zero byte of `map` from `from` to its end; returns how
/// many bytes were in non-zero chunks. Only ranges holding data are read:
/// holes read as zeros already (and reading them would allocate pages on
/// tmpfs).
fn zero_tail(map: &mut WritableMapping, from: usize) -> u64 {
    const CHUNK: usize = 64 * 1024;
    let mut cleared = 0u64;
    for (start, stop) in map.data_ranges(from) {
        let mut at = start.max(from);
        while at < stop {
            let end = (at - at % CHUNK + CHUNK).min(stop);
            if map.as_slice()[at..end].iter().any(|&b| b != 0) {
                map.zero(at, end - at);
                cleared += (end - at) as u64;
            }
            at = end;
        }
    }
    cleared
}

/// Opens the writer side of the queue: returns where to resume.
///
/// `clean` is `Some(next_seq)` after a clean close (the metadata's
/// `next_seq` then): nothing can be torn, so the data must reach that far;
/// where it stops short (a zeroed page, a lost write), recovery refuses with
/// [`Error::Corrupted`] instead of cutting the queue and handing the lost
/// sequences to new appends. `verify_on_startup` checks the CRC of every
/// frame of every file.
pub fn recover(
    base: &Path,
    verify_on_startup: bool,
    catalog: &Catalog,
    clean: Option<u64>,
) -> Result<(Resume, RecoveryReport)> {
    let expected_next = clean;
    let clean = clean.is_some();
    for tmp in list_temp_files(base)? {
        std::fs::remove_file(&tmp).map_err(|e| Error::io("remove", &tmp, e))?;
    }
    let mut report = RecoveryReport::default();
    let mut files = catalog.snapshot().to_vec();
    if !clean {
        cut_at_first_gap(catalog, &mut files, &mut report)?;
    } else if files.len() >= 2 {
        let (prev, last) = (&files[files.len() - 2], &files[files.len() - 1]);
        report.repaired_end_marker = match check_boundary(catalog, prev, last, false)? {
            Boundary::Sealed => false,
            Boundary::MissingMarker => repair_end_marker(catalog, prev, last)?,
            Boundary::Gap(e) => return Err(e),
        };
    }
    let Some(last) = files.last().copied() else {
        return Ok((Resume::empty(), report));
    };

    if verify_on_startup {
        for pair in files.windows(2) {
            let path = catalog.data_path(pair[0].id);
            let f = &pair[0];
            // A writer process killed between a file's end-of-file marker and
            // its footer leaves it sealed, full length and without footer;
            // with several writers the others go on in the next file. Its
            // frames are checked below all the same; finish its seal first.
            if !has_footer_or_is_trimmed(&path, f)? {
                report.finished_seals += u64::from(finish_sealed_file(catalog, f)?);
            }
            // The dense index (format 5) is checked against every frame and
            // rewritten where it is missing, damaged or wrong.
            let mut dense = match dense_header(&f.header) {
                Some(h) => Some(DenseIndexWriter::open_or_rebuild(&f.id.offsets_path(base), h)?.0),
                None => None,
            };
            let mut failed = None;
            let mut rebuilt = 0u64;
            let w = verify_sealed(&path, f, |seq, offset, _| {
                if let Some(d) = dense.as_mut().filter(|_| failed.is_none()) {
                    match d.repair(seq - f.header.first_seq, offset) {
                        Ok(changed) => rebuilt += u64::from(changed),
                        Err(e) => failed = Some(e),
                    }
                }
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
            if let Some(mut d) = dense {
                d.truncate_from(w.seq - f.header.first_seq);
                if rebuilt > 0 {
                    d.seal(w.seq - f.header.first_seq)?;
                    d.sync()?;
                }
                report.dense_entries_rebuilt += rebuilt;
            }
            report.frames_verified += w.frames;
            if w.seq != pair[1].header.first_seq {
                return Err(Error::corrupted(
                    catalog.data_path(pair[1].id),
                    0,
                    Some(w.seq),
                    format!(
                        "file starts at seq {}, previous file ends before {}",
                        pair[1].header.first_seq, w.seq
                    ),
                ));
            }
        }
    }

    let path = catalog.data_path(last.id);
    // Mapped at its full size and read as far as it is long: a last file
    // shorter than its `file_size` and without a footer is the normal
    // state of an active file (format version 11: files grow with their
    // data), or a version-4 to 10 file whose trim survived a crash that
    // lost its marker or footer. Either is recovered and written on as an
    // active file; the writer grows it as it writes.
    let mut map = WritableMapping::open_at_least(&path, last.header.file_size)?;
    let (mut index, rebuilt) =
        SparseIndexWriter::open_or_rebuild(&last.id.index_path(base), index_header(&last.header))?;
    let (mut dense, dense_rebuilt) = match dense_header(&last.header) {
        Some(h) => {
            let (d, r) = DenseIndexWriter::open_or_rebuild(&last.id.offsets_path(base), h)?;
            (Some(d), r)
        }
        None => (None, false),
    };
    // After an unclean shutdown, walk the whole last file: a machine crash
    // can leave a hole (lost pages) before the last index entry, and a walk
    // starting at the entry would step over it. The walk also refills the
    // dense index (a missing one, or entries behind the data).
    let start = if verify_on_startup || rebuilt || dense_rebuilt || !clean {
        None
    } else {
        let file = map.readable();
        index
            .entries(file.len() as u64)
            .last()
            .copied()
            .filter(|e| {
                frame::plain_len(file, e.offset as usize)
                    .is_some_and(|len| e.points_at_frame(file, len))
            })
    };
    if let Some(e) = &start {
        // After a clean close the walk below starts at the last entry; the
        // frames before it must lead there (a zeroed page before the entry
        // would otherwise go unseen and the writer resume over it).
        check_frames_reach(&path, map.readable(), last.header.first_seq, e)?;
    }
    let (seq0, off0) = start.map_or((last.header.first_seq, DATA_HEADER_LEN), |e| {
        (e.seq, e.offset as usize)
    });
    let interval = last.header.index_interval as u64;
    let first_seq = last.header.first_seq;
    let mut entries = Vec::new();
    let mut dense_entries = Vec::new();
    let w = walk(
        map.readable(),
        (seq0, off0, start.is_none()),
        |seq, offset, timestamp| {
            if dense.is_some() {
                dense_entries.push((seq - first_seq, offset));
            }
            if (seq - first_seq) % interval == 0 {
                entries.push((
                    (seq - first_seq) / interval,
                    Entry {
                        seq,
                        timestamp,
                        offset: offset as u64,
                    },
                ));
            }
        },
    );
    report.frames_verified += if verify_on_startup { w.frames } else { 0 };
    report.index_entries_rebuilt = entries.len() as u64;
    for (i, e) in entries {
        index.put(i, e)?;
    }
    let next_index = (w.seq - first_seq).div_ceil(interval);
    index.truncate_from(next_index);
    if let Some(d) = &mut dense {
        for (i, offset) in dense_entries {
            report.dense_entries_rebuilt += u64::from(d.repair(i, offset)?);
        }
        d.truncate_from(w.seq - first_seq);
    }

    let sealed = w.end == WalkEnd::Sealed;
    if let Some(expected) = expected_next.filter(|&e| w.seq < e) {
        // The data stops before what the clean close recorded: the frames
        // after the stop were lost or damaged, and a cut would reuse their
        // sequences. Refuse, and say where.
        let what = match &w.end {
            WalkEnd::Empty => "zero length word".to_string(),
            WalkEnd::Sealed => "end-of-file marker".to_string(),
            WalkEnd::Bad(reason) => reason.clone(),
        };
        return Err(Error::corrupted(
            &path,
            w.offset as u64,
            Some(w.seq),
            format!(
                "{what} at seq {}, but the queue was closed cleanly at next_seq {expected}: \
                 messages {}..{expected} are damaged or lost (a zeroed page?); \
                 read the rest with skip_damaged(), or move the queue aside",
                w.seq, w.seq
            ),
        ));
    }
    if let WalkEnd::Bad(reason) = &w.end {
        if clean && valid_frame_follows(map.readable(), w.offset) {
            // After a clean close nothing can be torn: this is damage in
            // the middle of the data, and cutting would destroy good
            // messages, so refuse and say where. After an unclean shutdown
            // the same picture is what out-of-order write-back leaves, and
            // the tail is cut (as Kafka truncates its active segment).
            return Err(Error::corrupted(
                &path,
                w.offset as u64,
                Some(w.seq),
                reason.clone(),
            ));
        }
        report.cut_reason = Some(reason.clone());
        report.cut_at = Some(w.offset as u64);
    }
    if !sealed && (!clean || report.cut_at.is_some()) {
        report.cut_bytes = zero_tail(&mut map, w.offset);
        if report.cut_bytes > 0 && report.cut_at.is_none() {
            report.cut_at = Some(w.offset as u64);
            report.cut_reason = Some("bytes after the last complete frame".into());
        }
    }
    map.sync_range(0, map.readable().len())?;
    index.sync()?;
    if let Some(d) = &dense {
        d.sync()?;
    }

    // The last timestamp must be known even when the walk started at the
    // end of the data (a file whose last frame is an index entry's).
    let last_ts = if w.frames > 0 {
        w.last_ts
    } else {
        start.map_or(last.header.created_us, |e| e.timestamp)
    };
    // Time rolls compare against the first message's timestamp.
    let first_ts = if w.seq > first_seq {
        data_file::first_message_ts(map.readable())
    } else {
        None
    };
    let active = if sealed {
        drop((map, index, dense));
        // Sealed, but the footer or the trim may not have been done or
        // reached the disk: finish them (the next file starts anew).
        report.finished_seals += u64::from(finish_seal(
            &path,
            &last.header,
            w.offset,
            w.seq,
            (first_ts, last_ts),
        )?);
        None
    } else {
        Some(ActiveFile::resume(
            last.header,
            map,
            (index, dense),
            w.offset,
            w.seq,
            (first_ts, last_ts),
        )?)
    };
    let resume = Resume {
        active,
        last_id: Some(last.id),
        next_file_number: last.header.file_number + 1,
        next_seq: w.seq,
        last_timestamp: last_ts.max(last.header.created_us),
    };
    Ok((resume, report))
}

/// Steps over the frames of `file` from its first by their length words
/// alone (no CRC: one load per frame) up to the frame sparse-index entry
/// `e` points at: they must lead exactly there, at the entry's sequence,
/// with no zero length word (a zeroed page), end-of-file marker or length
/// that overshoots on the way; otherwise [`Error::Corrupted`] where the
/// walk went wrong.
fn check_frames_reach(path: &Path, file: &[u8], first_seq: u64, e: &Entry) -> Result<()> {
    let target = e.offset as usize;
    let (mut at, mut seq) = (DATA_HEADER_LEN, first_seq);
    let bad = |at: usize, seq: u64, what: String| {
        Err(Error::corrupted(
            path,
            at as u64,
            Some(seq),
            format!(
                "{what} at seq {seq}, before the frame of seq {} the sparse index has at \
                 offset {target}: messages of {seq}..{} are damaged or lost (a zeroed page?); \
                 read the rest with skip_damaged(), or move the queue aside",
                e.seq, e.seq
            ),
        ))
    };
    while at < target {
        match frame_at(file, at, Check::Lengths) {
            Step::Frame(f) => {
                seq = RecordKind::of_or_plain(f.record).seq_after(seq);
                at = f.next;
            }
            Step::Empty => return bad(at, seq, "zero length word".into()),
            Step::EndOfFile => return bad(at, seq, "end-of-file marker".into()),
            Step::Damage(DecodeError::BadLength(len)) => {
                // Past the end: the frames do not reach the entry.
                let rec = file.get(at + 4..).unwrap_or_default();
                seq = RecordKind::of_or_plain(rec).seq_after(seq);
                at = at.saturating_add(frame_size(len as usize));
            }
            Step::Damage(_) => return bad(at, seq, "frames run to the end of the file".into()),
        }
    }
    let at_entry = RecordKind::of_or_plain(file.get(at + 4..).unwrap_or_default())
        .batch()
        .map_or(e.seq, |(first, _)| first);
    if at != target || seq != at_entry {
        return bad(
            at.min(target),
            seq,
            format!("frames that do not lead to offset {target} (they reach {at})"),
        );
    }
    Ok(())
}

/// True when the frame at `offset` has a usable length and a valid frame
/// follows it: the sign of a damaged frame rather than a torn tail.
fn valid_frame_follows(file: &[u8], offset: usize) -> bool {
    match frame_at(file, offset, Check::Lengths) {
        Step::Frame(f) => matches!(frame_at(file, f.next, Check::Crc), Step::Frame(_)),
        _ => false,
    }
}

/// Walks a file's frames from its last sparse-index entry that checks out,
/// or, with `whole`, every frame from its start with its CRC: a machine
/// crash can leave a hole before the last entry that reached the disk, or a
/// lost page inside a frame whose length words all survived. (As Kafka
/// checks every segment after its recovery point, this checks every file
/// that may not have been synced; only after an unclean shutdown.)
fn walk_tail(catalog: &Catalog, info: &FileInfo, file: &[u8], whole: bool) -> Walk {
    if whole {
        return walk(
            file,
            (info.header.first_seq, DATA_HEADER_LEN, true),
            |_, _, _| {},
        );
    }
    let start = sparse::last_entry(
        &info.id.index_path(catalog.base()),
        info.header.first_seq,
        file.len() as u64,
    )
    .filter(|e| {
        frame::plain_len(file, e.offset as usize).is_some_and(|len| e.points_at_frame(file, len))
    });
    let (seq, off) = start.map_or((info.header.first_seq, DATA_HEADER_LEN), |e| {
        (e.seq, e.offset as usize)
    });
    walk(file, (seq, off, start.is_none()), |_, _, _| {})
}

/// How a file followed by another ends.
enum Boundary {
    /// With its end-of-file marker.
    Sealed,
    /// Its frames reach exactly where the next file starts, but the marker
    /// did not reach the disk.
    MissingMarker,
    /// Its frames stop before the next file's first sequence.
    Gap(Error),
}

fn check_boundary(
    catalog: &Catalog,
    prev: &FileInfo,
    next: &FileInfo,
    whole: bool,
) -> Result<Boundary> {
    let path = catalog.data_path(prev.id);
    let map = Mapping::open(&path)?;
    let w = walk_tail(catalog, prev, map.as_slice(), whole);
    Ok(match w.end {
        WalkEnd::Sealed if w.seq == next.header.first_seq => Boundary::Sealed,
        WalkEnd::Empty if w.seq == next.header.first_seq && w.offset + FRAME_ALIGN <= map.len() => {
            Boundary::MissingMarker
        }
        WalkEnd::Bad(reason) => Boundary::Gap(Error::corrupted(
            &path,
            w.offset as u64,
            Some(w.seq),
            reason,
        )),
        _ => Boundary::Gap(Error::corrupted(
            &path,
            w.offset as u64,
            Some(w.seq),
            format!(
                "file ends before seq {} where the next file starts",
                next.header.first_seq
            ),
        )),
    })
}

/// After an unclean shutdown: checks the boundaries between the newest files
/// (in `Async` mode up to `MAX_UNSYNCED_SEALED` sealed files may not have
/// been synced) and, at the first file that ends short, removes every newer
/// file. Nothing in them was durable: a completed flush syncs sealed files
/// before the active one, so it would have covered the short file too.
fn cut_at_first_gap(
    catalog: &Catalog,
    files: &mut Vec<FileInfo>,
    report: &mut RecoveryReport,
) -> Result<()> {
    let from = files.len().saturating_sub(MAX_UNSYNCED_SEALED + 2);
    for i in from..files.len().saturating_sub(1) {
        match check_boundary(catalog, &files[i], &files[i + 1], true)? {
            Boundary::Sealed => {
                report.finished_seals += u64::from(finish_sealed_file(catalog, &files[i])?);
            }
            Boundary::MissingMarker => {
                report.repaired_end_marker |= repair_end_marker(catalog, &files[i], &files[i + 1])?;
            }
            Boundary::Gap(_) => {
                for f in files.drain(i + 1..).rev() {
                    remove_data_file(&catalog.data_path(f.id))?;
                    for path in f.id.index_paths(catalog.base()) {
                        remove_if_present(&path)?;
                    }
                    report.dropped_files.push(catalog.data_path(f.id));
                }
                report.dropped_files.reverse();
                catalog.refresh()?;
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Writes the end-of-file marker a machine crash lost, after the frames of a
/// file that reach exactly where the next file starts.
fn repair_end_marker(catalog: &Catalog, prev: &FileInfo, next: &FileInfo) -> Result<bool> {
    let path = catalog.data_path(prev.id);
    let mut map = WritableMapping::open(&path)?;
    let w = walk_tail(catalog, prev, map.as_slice(), false);
    if w.end == WalkEnd::Empty
        && w.seq == next.header.first_seq
        && w.offset + FRAME_ALIGN <= map.len()
    {
        // The marker's page has frames before it, so it has a disk block.
        map.store_u32(w.offset, END_OF_FILE);
        map.sync_range(w.offset & !4095, FRAME_ALIGN)?;
        drop(map);
        finish_sealed_file(catalog, prev)?;
        return Ok(true);
    }
    Ok(false)
}

/// Whether a sealed file is past the state "marker written, footer not yet":
/// a version-3 file (no footer), one whose footer reads at its end, or one
/// whose last 128 bytes are not all zero (a damaged footer, which
/// `verify_sealed` then reports). A file whose last 128 bytes are zero has
/// no footer yet, whatever its length: from format version 11 a file is
/// only as long as its data and a chunk while it is written, so a length
/// below `file_size` no longer says it was trimmed (and a trimmed file
/// whose footer page a crash lost is finished the same way).
fn has_footer_or_is_trimmed(path: &Path, info: &FileInfo) -> Result<bool> {
    let h = &info.header;
    if h.version < 4 {
        return Ok(true);
    }
    let map = Mapping::open(path)?;
    let file = map.as_slice();
    let tail = file
        .get(file.len().saturating_sub(FOOTER_LEN)..)
        .unwrap_or_default();
    Ok(
        Footer::read(file, h.file_number, h.first_seq, h.file_size).is_ok()
            || tail.iter().any(|&b| b != 0),
    )
}

/// Finishes the seal of `info`, a file with its end-of-file marker (see
/// [`finish_seal`]); returns whether it changed anything.
fn finish_sealed_file(catalog: &Catalog, info: &FileInfo) -> Result<bool> {
    if info.header.version < 4 {
        return Ok(false);
    }
    let path = catalog.data_path(info.id);
    let (w, first_ts) = {
        let map = Mapping::open(&path)?;
        let first_ts = data_file::first_message_ts(map.as_slice());
        (walk_tail(catalog, info, map.as_slice(), false), first_ts)
    };
    if w.end != WalkEnd::Sealed {
        return Ok(false);
    }
    let last_ts = if w.frames > 0 {
        w.last_ts
    } else {
        sparse::last_entry(
            &info.id.index_path(catalog.base()),
            info.header.first_seq,
            u64::MAX,
        )
        .map_or(0, |e| e.timestamp)
    };
    finish_seal(&path, &info.header, w.offset, w.seq, (first_ts, last_ts))
}

/// A version-4 file whose end-of-file marker is at `frames_end` must end
/// with its footer at its trimmed length. A crash can leave the marker
/// without the footer, or both without the trim (in either order the kernel
/// wrote them back): writes the footer where it is missing, then trims.
/// Returns whether it changed anything. Version-3 files are left as they are.
pub(crate) fn finish_seal(
    path: &Path,
    header: &crate::format::header::DataHeader,
    frames_end: usize,
    end_seq: u64,
    (first_ts, last_ts): (Option<u64>, u64),
) -> Result<bool> {
    if header.version < 4 {
        return Ok(false);
    }
    let want = trimmed_len(frames_end as u64, header.file_size);
    let mut map = WritableMapping::open(path)?;
    let len = map.len() as u64;
    if len == want
        && Footer::read(
            map.as_slice(),
            header.file_number,
            header.first_seq,
            header.file_size,
        )
        .is_ok()
    {
        return Ok(false);
    }
    if len < want {
        return Err(Error::corrupted(
            path,
            len,
            None,
            format!("sealed file is {len} bytes, shorter than its trimmed length {want}"),
        ));
    }
    let at = want as usize - FOOTER_LEN;
    let footer = Footer {
        frames_end: frames_end as u64,
        frames_crc: Footer::frames_crc_of(map.as_slice(), frames_end as u64).unwrap_or(0),
        file_number: header.file_number,
        first_seq: header.first_seq,
        end_seq,
        first_ts: first_ts.unwrap_or(0),
        last_ts: if end_seq > header.first_seq {
            last_ts
        } else {
            0
        },
        content_flags: if header.version >= 6 {
            data_file::content_flags(map.as_slice(), frames_end)
        } else {
            0
        },
        // The writer never writes holes, but a compacted file whose footer
        // was damaged gets its count back (format 11; zero, "not counted",
        // in older files).
        hole_seqs: if header.version >= HOLE_SEQS_SINCE {
            data_file::hole_seqs(map.as_slice(), frames_end).0
        } else {
            0
        },
    };
    let bytes = footer.encode();
    if map.as_slice()[at..at + FOOTER_LEN] != bytes {
        // The footer's page follows the marker's or is the same page: it was
        // allocated before the writer wrote the last frame.
        crate::storage::mapped::allocate_range(map.file(), at as u64, FOOTER_LEN as u64)
            .map_err(|e| Error::io("allocate", path, e))?;
        map.write(at, &bytes);
        map.sync_range(at & !4095, FOOTER_LEN + at % 4096)?;
    }
    let file = map
        .file()
        .try_clone()
        .map_err(|e| Error::io("dup", path, e))?;
    drop(map);
    file.set_len(want).map_err(|e| Error::io("trim", path, e))?;
    file.sync_data()
        .map_err(|e| Error::io("fdatasync", path, e))?;
    Ok(true)
}
