//! File scans by frame lengths: counting frames, finding where data
//! ends, the next frame that checks out.

use crate::catalog::{Catalog, FileInfo};
use crate::error::{Error, Result};
use crate::format::error::DecodeError;
use crate::format::footer::{Footer, FOOTER_LEN};
use crate::format::frame::{self, DATA_HEADER_LEN};
use crate::format::record::{self};
use crate::index::sparse::{Entry, SparseIndex};
use crate::storage::frames::{frame_at, open_data, Check, RecordKind, Step};
use crate::storage::mapped::Mapping;

/// True when the frame an index entry points at is complete, passes its CRC
/// and carries the entry's timestamp.
pub(super) fn entry_matches(map: &Mapping, e: &Entry) -> bool {
    use crate::format::walk::FrameBytes;
    map.length_word(e.offset as usize)
        .is_some_and(|len| e.points_at_frame(map.as_slice(), len))
}

/// Offset of the first frame at or after `from` (on the frame alignment)
/// whose length, CRC and record check out.
pub(super) fn next_valid_frame(map: &Mapping, from: usize) -> Option<usize> {
    let mut at = from.next_multiple_of(frame::FRAME_ALIGN);
    while map.covers(at + 4) {
        if let Step::Frame(f) = frame_at(map, at, Check::Crc) {
            if record::decode(f.record).is_ok() {
                return Some(at);
            }
        }
        at += frame::FRAME_ALIGN;
    }
    None
}

/// True when `record` (its bytes) claims to be a hole or a batch: flags
/// exactly [`record::FLAG_EXTENSION`] and an extension byte with either
/// bit. Anything else a walker meets counts one sequence and is delivered.
#[inline]
pub(super) fn is_hole_or_batch(record: &[u8]) -> bool {
    record.len() > record::RECORD_FIXED_LEN
        && record[0] == record::FLAG_EXTENSION
        && record[record::RECORD_FIXED_LEN] & (record::EXT_HOLE | record::EXT_BATCH) != 0
}

/// What the published frame at `at` (length word `len`) stands for, by the
/// record-kind rule, reading the record's head only (no CRC, no decoding:
/// the frame finally read is checked).
#[inline]
pub(super) fn frame_kind(map: &Mapping, at: usize, len: u32) -> RecordKind {
    let head = (len as usize).min(record::BATCH_HEAD_LEN);
    map.as_slice()
        .get(at + 4..(at + 4).saturating_add(head))
        .map_or(RecordKind::Plain, RecordKind::of_or_plain)
}

/// The sequence a walker stands at on the frame a sparse-index entry `e`
/// points at, to count frames from: a batch's first member (the entry may
/// name a later member), else the entry's sequence.
pub(super) fn entry_frame_seq(map: &Mapping, e: &Entry) -> u64 {
    use crate::format::walk::FrameBytes;
    match map.length_word(e.offset as usize) {
        Some(len) => frame_kind(map, e.offset as usize, len)
            .batch()
            .map_or(e.seq, |(first, _)| first),
        None => e.seq,
    }
}

/// True when data file `info` holds a batch frame (format 9): its frames
/// walked by their length words, a batch's head read (no CRC: a damaged
/// frame is reported by the reads, not here).
pub(crate) fn file_has_batches(catalog: &Catalog, info: &FileInfo) -> Result<bool> {
    if info.header.version < 9 {
        return Ok(false);
    }
    let map = match open_data(&catalog.data_path(info.id)) {
        Ok(m) => m,
        Err(e) if is_not_found(&e) => return Ok(false), // deleted by retention
        Err(e) => return Err(e),
    };
    let mut at = DATA_HEADER_LEN;
    while let Step::Frame(f) = frame_at(&map, at, Check::Lengths) {
        if RecordKind::of_or_plain(f.record).batch().is_some() {
            return Ok(true);
        }
        at = f.next;
    }
    Ok(false)
}

/// Walks frames by their lengths from `from` until `until` (or the first
/// zero length or end-of-file marker); returns how many it stepped over and
/// where it stopped, or `None` when a length runs past the file.
pub(super) fn count_frames(
    map: &Mapping,
    from: usize,
    until: Option<usize>,
) -> Option<(u64, usize)> {
    let (mut at, mut n) = (from, 0u64);
    loop {
        if until.is_some_and(|u| at >= u) {
            return Some((n, at));
        }
        match frame_at(map, at, Check::Lengths) {
            Step::Empty | Step::EndOfFile => return Some((n, at)),
            Step::Frame(f) => {
                n += RecordKind::of_or_plain(f.record).count();
                at = f.next;
            }
            // A length past the file (it cannot end at `until`, inside it).
            Step::Damage(_) => return None,
        }
    }
}

/// Timestamp of a file's first message, if it has one that decodes.
pub(super) fn first_timestamp(map: &Mapping) -> Option<u64> {
    match frame_at(map, DATA_HEADER_LEN, Check::Crc) {
        Step::Frame(f) => record::decode(f.record).ok().map(|v| v.timestamp),
        _ => None,
    }
}

pub(super) fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

/// Bytes of data file `info` that hold data: its header and frames, up to
/// its end-of-file marker or the end of what is published. A trimmed sealed
/// file says so in its footer (read with `pread`); otherwise from its last
/// sparse-index entry plus a walk of at most one interval.
pub(crate) fn written_bytes(catalog: &Catalog, info: &FileInfo) -> u64 {
    use std::os::unix::fs::FileExt;
    let path = catalog.data_path(info.id);
    let h = &info.header;
    if let Ok(file) = std::fs::File::open(&path) {
        let len = file.metadata().map_or(0, |m| m.len());
        if h.version >= 4 && len < h.file_size && len >= FOOTER_LEN as u64 {
            let mut b = [0u8; FOOTER_LEN];
            if file.read_exact_at(&mut b, len - FOOTER_LEN as u64).is_ok() {
                if let Ok(f) = Footer::decode(&b) {
                    return f.frames_end;
                }
            }
        }
    }
    let Ok(map) = open_data(&path) else {
        return 0;
    };
    let mut off = DATA_HEADER_LEN;
    let index = SparseIndex::open(
        &info.id.index_path(catalog.base()),
        h.first_seq,
        map.mapped_len() as u64,
    );
    if let Some(e) = index
        .and_then(|ix| ix.last())
        .filter(|e| entry_matches(&map, e))
    {
        off = e.offset as usize;
    }
    loop {
        match frame_at(&map, off, Check::Lengths) {
            Step::Frame(f) => off = f.next,
            // A length past the file: data up to its end.
            Step::Damage(DecodeError::BadLength(_)) => off = map.len(),
            _ => break,
        }
    }
    off.min(map.len()) as u64
}

/// Sequence after the last published message, found from the last file's
/// sparse index plus a walk of at most one index interval of length words.
pub(super) fn published_end(catalog: &Catalog) -> u64 {
    let Some(last) = catalog.last() else { return 0 };
    let Ok(map) = open_data(&catalog.data_path(last.id)) else {
        return last.header.first_seq;
    };
    let (mut seq, mut off) = (last.header.first_seq, DATA_HEADER_LEN);
    let index = SparseIndex::open(
        &last.id.index_path(catalog.base()),
        seq,
        map.mapped_len() as u64,
    );
    if let Some(e) = index
        .and_then(|ix| ix.last())
        .filter(|e| entry_matches(&map, e))
    {
        (seq, off) = (entry_frame_seq(&map, &e), e.offset as usize);
    }
    loop {
        match frame_at(&map, off, Check::Lengths) {
            Step::Frame(f) => {
                seq += RecordKind::of_or_plain(f.record).count();
                off = f.next;
            }
            // A length past the file: its frame counts, nothing follows.
            Step::Damage(DecodeError::BadLength(len)) => {
                seq += frame_kind(&map, off, len).count();
                break;
            }
            _ => break,
        }
    }
    seq
}
