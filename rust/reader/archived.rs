//! Data files held in memory instead of mapped: sealed files copied to an
//! archive (object stores, shared file systems) and read back with ranged
//! reads, where `mmap` is not available or not safe.
//!
//! The checks are those of a mapped read: a whole sealed file is trusted
//! only after its header, its footer and the footer's `frames_crc` over
//! `4096..frames_end` check out (a version-3 file, which has no footer, is
//! walked frame by frame, each checked by its own CRC, up to its end-of-file
//! marker); a byte range cut out of a file (found through its dense index)
//! is decoded frame by frame, each frame checked by its own CRC, and must
//! hold exactly the messages asked for. Anything else is
//! [`Error::Corrupted`] naming the file and the offset. `docs/FORMAT.md`
//! ("Archives") describes what an archive holds.

use std::path::Path;

use crate::error::{Error, Result};
use crate::format::compression::DEFAULT_MAX_DECOMPRESSED;
use crate::format::crypto::QueueKey;
use crate::format::error::DecodeError;
use crate::format::footer::{Footer, FOOTER_LEN};
use crate::format::frame::{DATA_HEADER_LEN, END_OF_FILE};
use crate::format::header::{typed_schema, DataHeader, TypedFile};
use crate::format::kind::RecordKind;
use crate::format::record::RecordView;
use crate::format::typed::RowLayout;
use crate::format::walk::{frame_at, Check, Step};
use crate::format::{le_u32, record};
use crate::reader::columns::{ColumnSet, Columns};

/// What a sealed data file holds, from its header and footer (or, for a
/// file without a footer, from walking its frames).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedSummary {
    /// The file's format version.
    pub version: u32,
    /// The header's `file_number`.
    pub file_number: u64,
    /// Sequence of its first message.
    pub first_seq: u64,
    /// One past the sequence of its last message.
    pub end_seq: u64,
    /// Timestamp of its first message (0 when empty).
    pub first_ts: u64,
    /// Timestamp of its last message (0 when empty).
    pub last_ts: u64,
    /// Offset of the end-of-file marker.
    pub frames_end: u64,
    /// CRC-64 of bytes `4096..frames_end`.
    pub frames_crc: u64,
    /// Whether a valid footer vouched for the file (false: version 3, walked).
    pub footer: bool,
}

fn corrupted(path: &Path, offset: u64, seq: Option<u64>, reason: impl Into<String>) -> Error {
    Error::Corrupted {
        path: path.to_path_buf(),
        offset,
        seq,
        reason: reason.into(),
    }
}

/// Checks the whole sealed data file `file` (named `path` in errors) and
/// returns what it holds. A version-4 or later file needs a valid footer
/// whose `frames_crc` matches the frames and an end-of-file marker at
/// `frames_end`; a version-3 file is walked frame by frame (every CRC) to
/// its end-of-file marker. A file that is not sealed is an error: only
/// sealed files are archived.
pub fn summarize(file: &[u8], path: &Path) -> Result<SealedSummary> {
    let h = DataHeader::decode(file)
        .map_err(|e| corrupted(path, 0, None, format!("data file header: {e}")))?;
    typed_file(file, &h, path)?;
    if h.version >= 4 {
        let f = Footer::read(file, h.file_number, h.first_seq, h.file_size).map_err(|e| {
            corrupted(
                path,
                file.len().saturating_sub(FOOTER_LEN) as u64,
                None,
                format!("not a sealed data file (footer: {e})"),
            )
        })?;
        if le_u32(file, f.frames_end as usize) != Some(END_OF_FILE) {
            return Err(corrupted(
                path,
                f.frames_end,
                None,
                "no end-of-file marker where the footer says the frames end",
            ));
        }
        let crc = Footer::frames_crc_of(file, f.frames_end);
        if crc != Some(f.frames_crc) {
            return Err(corrupted(
                path,
                DATA_HEADER_LEN as u64,
                None,
                format!(
                    "frames do not match the footer's frames_crc {:#018x} (computed {})",
                    f.frames_crc,
                    crc.map_or("nothing".into(), |c| format!("{c:#018x}"))
                ),
            ));
        }
        return Ok(SealedSummary {
            version: h.version,
            file_number: h.file_number,
            first_seq: h.first_seq,
            end_seq: f.end_seq,
            first_ts: f.first_ts,
            last_ts: f.last_ts,
            frames_end: f.frames_end,
            frames_crc: f.frames_crc,
            footer: true,
        });
    }
    // Version 3: no footer; every frame's own CRC, up to the marker.
    let w = walk(file, path, h.first_seq)?;
    Ok(SealedSummary {
        version: h.version,
        file_number: h.file_number,
        first_seq: h.first_seq,
        end_seq: w.end_seq,
        first_ts: w.first_ts,
        last_ts: w.last_ts,
        frames_end: w.frames_end,
        frames_crc: Footer::frames_crc_of(file, w.frames_end).unwrap_or(0),
        footer: false,
    })
}

/// Checks the whole sealed data file `file` as [`summarize`] does, and then
/// every frame on its own: its CRC, its record, a batch's first sequence at
/// its place, and the count of sequences up to the end-of-file marker,
/// which must be where the footer says, after the footer's `end_seq - 1`.
/// What `litemq restore` runs on each archived file before it joins a
/// queue: a file that passes holds exactly the frames it was sealed with.
pub fn verify(file: &[u8], path: &Path) -> Result<SealedSummary> {
    let s = summarize(file, path)?;
    if s.footer {
        let w = walk(file, path, s.first_seq)?;
        if w.frames_end != s.frames_end || w.end_seq != s.end_seq {
            return Err(corrupted(
                path,
                w.frames_end,
                Some(w.end_seq),
                format!(
                    "the frames end at offset {} after message {}, the footer says offset {} \
                     after message {}",
                    w.frames_end,
                    w.end_seq as i128 - 1,
                    s.frames_end,
                    s.end_seq as i128 - 1
                ),
            ));
        }
    }
    Ok(s)
}

/// What walking a data file's frames found.
struct Walked {
    end_seq: u64,
    first_ts: u64,
    last_ts: u64,
    /// Offset of the end-of-file marker.
    frames_end: u64,
}

/// Walks the frames of `file` from the first (message `first_seq`) to its
/// end-of-file marker, each checked by its own CRC and decoded; a frame
/// that fails, a batch whose first sequence is not its place, or frames
/// that stop without a marker, is [`Error::Corrupted`] naming `path`.
fn walk(file: &[u8], path: &Path, first_seq: u64) -> Result<Walked> {
    let mut at = DATA_HEADER_LEN;
    let mut seq = first_seq;
    let (mut first_ts, mut last_ts) = (0, 0);
    loop {
        match frame_at(file, at, Check::Crc) {
            Step::EndOfFile => break,
            Step::Empty => {
                return Err(corrupted(
                    path,
                    at as u64,
                    Some(seq),
                    "not a sealed data file (the frames end without an end-of-file marker)",
                ))
            }
            Step::Frame(f) => {
                let bytes = f.record;
                let rec =
                    record::decode(bytes).map_err(|r| corrupted(path, at as u64, Some(seq), r))?;
                let kind = RecordKind::of_or_plain(bytes);
                if kind.batch().is_some_and(|(first, _)| first != seq) {
                    return Err(corrupted(
                        path,
                        at as u64,
                        Some(seq),
                        "batch frame names another first sequence than its place",
                    ));
                }
                if seq == first_seq {
                    first_ts = rec.timestamp;
                }
                last_ts = rec.timestamp;
                seq += kind.count();
                at = f.next;
            }
            Step::Damage(DecodeError::Truncated) => {
                return Err(corrupted(
                    path,
                    at as u64,
                    Some(seq),
                    "no end-of-file marker",
                ))
            }
            Step::Damage(e) => return Err(corrupted(path, at as u64, Some(seq), e.to_string())),
        }
    }
    Ok(Walked {
        end_seq: seq,
        first_ts,
        last_ts,
        frames_end: at as u64,
    })
}

/// The header of an archived data file, and its footer from version 4 on,
/// from its two ends only: `head`, its first bytes (at least the 64 the
/// header uses), and `tail`, its last [`FOOTER_LEN`] bytes, of a file
/// `file_len` bytes long. A ranged read checks these against the archive's
/// manifest before it trusts a frame of the file. [`Error::Corrupted`]
/// naming `path` when the header does not decode, or when a version-4 file
/// has no valid footer agreeing with its header and length.
pub fn ends(
    head: &[u8],
    tail: &[u8],
    file_len: u64,
    path: &Path,
) -> Result<(DataHeader, Option<Footer>)> {
    let h = DataHeader::decode(head)
        .map_err(|e| corrupted(path, 0, None, format!("data file header: {e}")))?;
    if h.version < 4 {
        return Ok((h, None));
    }
    let f = Footer::read_tail(tail, file_len, h.file_number, h.first_seq, h.file_size).map_err(
        |e| {
            corrupted(
                path,
                file_len.saturating_sub(FOOTER_LEN as u64),
                None,
                format!("not a sealed data file (footer: {e})"),
            )
        },
    )?;
    Ok((h, Some(f)))
}

/// The schema and row layout a data file's header records (format 12):
/// `head` is the file's first 4096 bytes (fewer for an untyped file),
/// `h` its decoded header; `None` for an untyped file. A schema that fails
/// its checks is [`Error::Corrupted`]. Ranged readers get `head` with the
/// header ([`ends`]) and pass the result to [`read_frames_typed`].
pub fn typed_file(head: &[u8], h: &DataHeader, path: &Path) -> Result<Option<TypedFile>> {
    let schema = typed_schema(head, h).map_err(|why| corrupted(path, 0, None, why))?;
    Ok(schema.map(TypedFile::new))
}

/// [`typed_file`] from the head of a data file alone (its first 4096
/// bytes, the header; fewer for an untyped file), for a ranged reader that
/// has not decoded the header: `None` for an untyped file, the header not
/// decoding is [`Error::Corrupted`] naming `path`.
pub fn typed_head(head: &[u8], path: &Path) -> Result<Option<TypedFile>> {
    let h = DataHeader::decode(head)
        .map_err(|e| corrupted(path, 0, None, format!("data file header: {e}")))?;
    typed_file(head, &h, path)
}

/// Messages `[start, end)` of the whole sealed data file `file`, at most
/// `max_rows` (fewer when a column would pass 2 GiB: read on from the
/// sequence after the last row). The file is checked as by [`summarize`]
/// first; its frames are then trusted (a version-4 file's `frames_crc`
/// covered them, a version-3 file's frames were each checked). Sealed
/// payloads (encryption at rest) are opened with `key`; without it, or when
/// one fails authentication, [`Error::Corrupted`].
pub fn read_sealed(
    file: &[u8],
    path: &Path,
    start: u64,
    end: u64,
    max_rows: usize,
    cols: ColumnSet,
    key: Option<&QueueKey>,
) -> Result<Columns> {
    let s = summarize(file, path)?;
    let h = DataHeader::decode(file)
        .map_err(|e| corrupted(path, 0, None, format!("data file header: {e}")))?;
    let typed = typed_file(file, &h, path)?;
    let layout = typed.as_ref().map(|t| &t.layout);
    let start = start.max(s.first_seq);
    let end = end.min(s.end_seq);
    let want = (end.saturating_sub(start) as usize).min(max_rows);
    let mut out = Columns::empty(want.min(1 << 20), cols);
    let frames_end = s.frames_end as usize;
    let mut at = DATA_HEADER_LEN;
    let mut seq = s.first_seq;
    while seq < end && out.rows < want {
        // The frames were checked (summarize): trusted up to the marker.
        let Step::Frame(f) = frame_at(file, at, Check::Trusted(frames_end)) else {
            return Err(corrupted(
                path,
                at as u64,
                Some(seq),
                format!(
                    "the frames end before message {} the footer promises",
                    s.end_seq - 1
                ),
            ));
        };
        // A hole (key compaction) stands for several sequences and has no row.
        let bytes = f.record;
        let kind = RecordKind::of_or_plain(bytes);
        let seqs = kind.count();
        if let Some((first, _)) = kind.batch() {
            if first != seq {
                return Err(corrupted(
                    path,
                    at as u64,
                    Some(seq),
                    "batch frame names another first sequence than its place",
                ));
            }
            let from = seq.max(start);
            if from < end.min(seq + seqs)
                && !push_members(
                    &mut out,
                    bytes,
                    (path, at as u64, layout),
                    from,
                    end,
                    want,
                    cols,
                )?
            {
                break;
            }
        } else if seq >= start && kind == RecordKind::Plain {
            let rec =
                record::decode(bytes).map_err(|r| corrupted(path, at as u64, Some(seq), r))?;
            let payload = rec
                .open_payload(bytes, seq, key, DEFAULT_MAX_DECOMPRESSED)
                .map_err(|r| corrupted(path, at as u64, Some(seq), r))?;
            check_row(layout, &rec, &payload)
                .map_err(|r| corrupted(path, at as u64, Some(seq), r))?;
            let payload = if cols.raw { rec.payload } else { &payload[..] };
            if !out.push_row(seq, &rec, payload, want, cols) {
                break;
            }
        }
        at = f.next;
        seq += seqs;
    }
    out.next_seq = match out.seq.last() {
        Some(&last) if out.rows >= want || seq < end => last as u64 + 1,
        _ => seq.max(start),
    };
    out.finish();
    Ok(out)
}

/// `rows` consecutive messages from a byte range of a data file: `buf`
/// holds the file's bytes from `offset` on (a frame's first byte), where
/// message `first_seq` starts. Every frame is checked by its own CRC;
/// fewer than `rows` whole frames in `buf` is an error. Stops early (fewer
/// rows, `next_offset` says where to go on) only when a column would pass
/// 2 GiB. Returns the columns and the file offset after the last frame read.
/// Sealed payloads are opened with `key`, as in [`read_sealed`].
pub fn read_frames(
    buf: &[u8],
    path: &Path,
    offset: u64,
    first_seq: u64,
    rows: usize,
    cols: ColumnSet,
    key: Option<&QueueKey>,
) -> Result<(Columns, u64)> {
    read_frames_typed(buf, path, offset, first_seq, rows, cols, key, None)
}

/// [`read_frames`] of a typed file (format 12): `typed` is its schema and
/// row layout ([`typed_file`] of its header); rows are checked against it
/// and a row batch's members are its rows. `None` reads an untyped file,
/// where a row batch is [`Error::Corrupted`].
#[expect(
    clippy::too_many_arguments,
    reason = "read_frames' arguments and the file's schema"
)]
pub fn read_frames_typed(
    buf: &[u8],
    path: &Path,
    offset: u64,
    first_seq: u64,
    rows: usize,
    cols: ColumnSet,
    key: Option<&QueueKey>,
    typed: Option<&TypedFile>,
) -> Result<(Columns, u64)> {
    let layout = typed.map(|t| &t.layout);
    let mut out = Columns::empty(rows.min(1 << 20), cols);
    let mut at = 0usize;
    let mut seq = first_seq;
    // `rows` sequences: holes (key compaction) count without a row.
    let end_seq = first_seq.saturating_add(rows as u64);
    while seq < end_seq {
        let here = offset + at as u64;
        match frame_at(buf, at, Check::Crc) {
            Step::Frame(f) => {
                let (bytes, next) = (f.record, f.next);
                let rec = record::decode(bytes).map_err(|r| corrupted(path, here, Some(seq), r))?;
                let kind = RecordKind::of_or_plain(bytes);
                if rec.is_batch() {
                    // The range may start inside the batch (its dense
                    // entries all point at the batch frame): members before
                    // `seq` are not rows here.
                    if !push_members(
                        &mut out,
                        bytes,
                        (path, here, layout),
                        seq,
                        end_seq,
                        rows,
                        cols,
                    )? {
                        // A column is full: go on from the row after the last.
                        seq = out.seq.last().map_or(seq, |&s| s as u64 + 1);
                        break;
                    }
                    seq = kind.seq_after(seq).max(seq + 1);
                    at = next;
                    continue;
                }
                if rec.is_hole() {
                    seq += kind.count();
                    at = next;
                    continue;
                }
                let payload = rec
                    .open_payload(bytes, seq, key, DEFAULT_MAX_DECOMPRESSED)
                    .map_err(|r| corrupted(path, here, Some(seq), r))?;
                check_row(layout, &rec, &payload)
                    .map_err(|r| corrupted(path, here, Some(seq), r))?;
                let payload = if cols.raw { rec.payload } else { &payload[..] };
                if !out.push_row(seq, &rec, payload, rows, cols) {
                    break;
                }
                at = next;
                seq += 1;
            }
            Step::Empty | Step::EndOfFile => {
                return Err(corrupted(
                    path,
                    here,
                    Some(seq),
                    "the frames end before the messages the index promises",
                ))
            }
            Step::Damage(DecodeError::Truncated) => {
                return Err(corrupted(
                    path,
                    here,
                    Some(seq),
                    "the byte range ends before the messages it should hold",
                ))
            }
            Step::Damage(e) => return Err(corrupted(path, here, Some(seq), e.to_string())),
        }
    }
    out.next_seq = seq;
    out.finish();
    Ok((out, offset + at as u64))
}

/// Pushes the members of the batch record `bytes` (format 9, messages
/// compressed together; frame at `offset`) whose sequences lie in
/// `[from, end)` onto `out` (`from` must be one of its members), while it
/// has fewer than `want` rows. Each
/// member has the batch's timestamp. The block is decompressed (bounded by
/// the default limit) and checked whole first: a damaged one is
/// [`Error::Corrupted`]. Returns false when `out` took no more rows (a
/// column is full, or `want` rows are there) before the members ran out.
fn push_members(
    out: &mut Columns,
    bytes: &[u8],
    (path, offset, layout): (&Path, u64, Option<&RowLayout>),
    from: u64,
    end: u64,
    want: usize,
    cols: ColumnSet,
) -> Result<bool> {
    let (first, count) = RecordKind::of_or_plain(bytes).batch().unwrap_or((0, 1));
    let count = count as u16;
    let bad = |r: &str| corrupted(path, offset, Some(from), r.to_string());
    if !(first..first + u64::from(count)).contains(&from) {
        return Err(bad("batch frame does not hold the sequence its place says"));
    }
    let view = record::decode(bytes).map_err(&bad)?;
    if view.is_row_batch() {
        let layout = layout.ok_or_else(|| bad("row batch in an untyped data file"))?;
        let block = match view.codec {
            None => std::borrow::Cow::Borrowed(view.payload),
            Some(codec) => std::borrow::Cow::Owned(
                crate::format::compression::decompress(
                    codec,
                    view.payload,
                    view.raw_len as usize,
                    DEFAULT_MAX_DECOMPRESSED,
                )
                .map_err(|r| bad(&r))?,
            ),
        };
        let starts = layout
            .split_block(&block, usize::from(count))
            .map_err(|r| bad(&format!("row batch: {r}")))?;
        for i in (from - first) as usize..usize::from(count) {
            let seq = first + i as u64;
            if seq >= end {
                return Ok(true);
            }
            if out.rows >= want {
                return Ok(false);
            }
            let row = &block[starts[i]..starts[i + 1]];
            if !out.push_row(seq, &RecordView::row(view.timestamp, row), row, want, cols) {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    let codec = view.codec.ok_or_else(|| bad("batch without a codec"))?;
    let block = crate::format::compression::decompress(
        codec,
        view.payload,
        view.raw_len as usize,
        DEFAULT_MAX_DECOMPRESSED,
    )
    .map_err(|r| bad(&r))?;
    record::check_batch_block(&block, count).map_err(bad)?;
    let mut at = 0usize;
    for i in 0..count {
        let seq = first + u64::from(i);
        let (range, mut member) = record::batch_member(&block, count, i, at, i).map_err(bad)?;
        at = range.end;
        if seq < from {
            continue;
        }
        if seq >= end {
            return Ok(true);
        }
        if out.rows >= want {
            return Ok(false);
        }
        member.timestamp = view.timestamp;
        let payload = member.payload;
        if !out.push_row(seq, &member, payload, want, cols) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Checks a plain record's payload against its typed file's row layout
/// (format 12; a tombstone has no row).
fn check_row(
    layout: Option<&RowLayout>,
    rec: &RecordView<'_>,
    payload: &[u8],
) -> std::result::Result<(), &'static str> {
    match layout {
        Some(l) if !rec.is_tombstone() => l.check_row(payload),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let p = Path::new("x.data");
        assert!(summarize(&[], p).is_err());
        assert!(summarize(&[0u8; 9000], p).is_err());
        assert!(verify(&[], p).is_err());
        assert!(verify(&[0u8; 9000], p).is_err());
        assert!(ends(&[], &[], 0, p).is_err());
        assert!(ends(&[0u8; 64], &[0u8; 128], 9000, p).is_err());
        assert!(read_frames(&[1, 0, 0, 0], p, 4096, 0, 1, ColumnSet::ALL, None).is_err());
        assert!(read_frames(&[0; 16], p, 4096, 0, 1, ColumnSet::ALL, None).is_err());
        let (c, next) = read_frames(&[], p, 4096, 0, 0, ColumnSet::ALL, None).unwrap();
        assert_eq!((c.rows, next), (0, 4096));
    }
}
