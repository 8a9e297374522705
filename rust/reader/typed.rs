//! Typed reads: the rows of a typed queue as Arrow columns of its current
//! schema ([`TypedBatch`]), for `read_arrow` and Spark; and the sequences
//! whose field satisfies a comparison ([`TypedPredicate`]), decoding only
//! that field, for `where()` and pushdown on schema fields.
//!
//! Frames are walked as [`crate::reader::columns::Columns`] walks them:
//! runs of bare records (a row as the payload, nothing else) in bulk by
//! [`Tailer::read_run_frames`]; a row batch (FORMAT.md "Typed records")
//! there too, its whole block decoded at once (one CRC per batch, checked
//! by the run; the block decompressed when stored compressed); everything
//! else (keys, headers, compression or encryption of one record, holes,
//! file switches, damage) one message at a time by [`Tailer::read_next`].
//! Each data file's rows are read in the schema version its header names
//! and projected onto the current version ([`Projection`]).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::position;
use crate::format::record::{self, RecordView};
use crate::format::typed::{Projection, RowDamage, SchemaVersions, TypedColumns};
use crate::reader::tailer::{OnMismatch, Tailer};
use crate::storage::frames::RecordKind;
use crate::storage::mapped::Mapping;

/// Most rows whose fixed-size columns are reserved up front.
const RESERVE_ROWS: usize = 1 << 20;

/// Bytes 52..56 of a data file's header: its schema version (0: untyped).
const HEADER_SCHEMA_VERSION_AT: usize = 52;

/// Rows of a typed queue: their sequences and timestamps, and a column per
/// requested field of the current schema.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypedBatch {
    /// Rows read.
    pub rows: usize,
    /// The sequence a next read goes on from: after the last row read and
    /// any holes up to it.
    pub next_seq: u64,
    /// Each row's sequence.
    pub seq: Vec<i64>,
    /// Each row's timestamp, µs since the Unix epoch, UTC.
    pub timestamp: Vec<i64>,
    /// The fields' columns, in the order asked for.
    pub columns: TypedColumns,
}

/// The projection of each schema version met (built once per version per
/// read).
struct Projections<'a> {
    versions: &'a SchemaVersions,
    wanted: &'a [usize],
    by_version: Vec<Option<Projection>>,
}

impl<'a> Projections<'a> {
    fn new(versions: &'a SchemaVersions, wanted: &'a [usize]) -> Projections<'a> {
        Projections {
            versions,
            wanted,
            by_version: Vec::new(),
        }
    }

    /// The projection of the rows of the data file `map`.
    fn of(&mut self, map: &Mapping) -> Result<&Projection> {
        let v = crate::format::le_u32(map.as_slice(), HEADER_SCHEMA_VERSION_AT).unwrap_or(0);
        let i = v as usize;
        if self.by_version.len() <= i {
            self.by_version.resize(i + 1, None);
        }
        if self.by_version[i].is_none() {
            let file = self.versions.get(v).ok_or_else(|| {
                Error::corrupted(
                    map.path(),
                    HEADER_SCHEMA_VERSION_AT as u64,
                    None,
                    format!(
                        "data file of schema version {v} in a typed queue whose versions \
                         are 1..={}",
                        self.versions.versions.len()
                    ),
                )
            })?;
            let p = Projection::new(self.versions, file, self.wanted)?;
            self.by_version[i] = Some(p);
        }
        Ok(self.by_version[i].as_ref().expect("set above"))
    }
}

/// Damage in a row, as the error every reader reports.
fn damaged(map: &Mapping, offset: usize, seq: u64, d: RowDamage) -> Error {
    Error::corrupted(map.path(), offset as u64, Some(seq), d.why)
}

/// What the bulk run's callback stopped at.
enum Stop {
    /// A row batch it read (some of): go on at this sequence.
    SeekTo(u64),
    /// A column is full: the batch ends here.
    Full,
    /// An error to return.
    Fail(Error),
}

impl TypedBatch {
    /// Reads from `tailer` (positioned, no filter) until sequence `end`,
    /// `max_rows` rows, or the end of what is published: the fields
    /// `wanted` (indexes into `versions`' current schema). Tombstones (a
    /// typed record with no row) are not rows. `limit`: most bytes a
    /// compressed block may declare.
    pub(crate) fn read(
        tailer: &mut Tailer,
        versions: &SchemaVersions,
        wanted: &[usize],
        (end, max_rows): (u64, usize),
        limit: usize,
    ) -> Result<TypedBatch> {
        let current = versions
            .current()
            .ok_or_else(|| Error::Schema("the queue has no schema".into()))?;
        let hint = max_rows
            .min(end.saturating_sub(tailer.next_seq()) as usize)
            .min(RESERVE_ROWS);
        let mut b = TypedBatch {
            columns: TypedColumns::new(current, wanted, hint),
            ..TypedBatch::default()
        };
        b.seq.reserve(hint);
        b.timestamp.reserve(hint);
        let mut projs = Projections::new(versions, wanted);
        while b.rows < max_rows && tailer.next_seq() < end {
            let want = (max_rows - b.rows).min((end - tailer.next_seq()) as usize);
            let mut stop = None;
            let taken = tailer.read_run_frames(
                want,
                OnMismatch::Fail,
                &mut |f| match b.take_frame(f, &mut projs, (end, max_rows), limit) {
                    Ok(true) => true,
                    Ok(false) => false,
                    Err(s) => {
                        stop = Some(s);
                        false
                    }
                },
            )?;
            match stop {
                Some(Stop::Fail(e)) => return Err(e),
                Some(Stop::Full) => break,
                Some(Stop::SeekTo(seq)) => {
                    tailer.seek(seq)?;
                    continue;
                }
                None if taken > 0 => continue,
                None => {}
            }
            if !b.read_one(tailer, &mut projs, end)? {
                break;
            }
        }
        b.next_seq = tailer.next_seq().min(end);
        Ok(b)
    }

    /// One frame of a bulk run: a bare record's row (`Ok(true)`), a row
    /// batch read in bulk (`Err(SeekTo)`: go on after it), anything else
    /// left for [`Tailer::read_next`] (`Ok(false)`).
    fn take_frame(
        &mut self,
        f: &crate::reader::tailer::RunFrame<'_>,
        projs: &mut Projections<'_>,
        (end, max_rows): (u64, usize),
        limit: usize,
    ) -> std::result::Result<bool, Stop> {
        if let Some((timestamp, row)) = record::decode_bare(f.record) {
            let proj = projs.of(f.mapping()).map_err(Stop::Fail)?;
            return match self.columns.push_row(proj, row) {
                Ok(true) => {
                    self.push_meta(f.seq, timestamp, 1);
                    Ok(true)
                }
                Ok(false) => Err(Stop::Full),
                Err(d) => Err(Stop::Fail(damaged(f.mapping(), f.offset(), f.seq, d))),
            };
        }
        let Some((first, count)) = RecordKind::of_or_plain(f.record).batch() else {
            return Ok(false);
        };
        let Ok(view) = record::decode(f.record) else {
            return Ok(false); // read_next reports it
        };
        if !view.is_row_batch() || view.is_encrypted() {
            return Ok(false);
        }
        // A run's first frame may be a batch the tailer stands inside of.
        let skip = f.seq.saturating_sub(first) as usize;
        let max = (max_rows - self.rows).min(end.saturating_sub(f.seq) as usize);
        let taken = self
            .push_row_batch(f, &view, (count as usize, skip, max), projs, limit)
            .map_err(Stop::Fail)?;
        if taken == 0 {
            return Err(Stop::Full);
        }
        Err(Stop::SeekTo(f.seq + taken as u64))
    }

    /// Rows `skip..skip + max` of the row batch `view` (frame `f`).
    fn push_row_batch(
        &mut self,
        f: &crate::reader::tailer::RunFrame<'_>,
        view: &RecordView<'_>,
        (count, skip, max): (usize, usize, usize),
        projs: &mut Projections<'_>,
        limit: usize,
    ) -> Result<usize> {
        let map = f.mapping();
        let inflated;
        let block = match view.codec {
            None => view.payload,
            Some(codec) => {
                inflated = crate::format::compression::decompress(
                    codec,
                    view.payload,
                    view.raw_len as usize,
                    limit,
                )
                .map_err(|why| Error::corrupted(map.path(), f.offset() as u64, Some(f.seq), why))?;
                &inflated
            }
        };
        let proj = projs.of(map)?;
        let taken = self
            .columns
            .push_block(proj, block, count, skip, max)
            .map_err(|d| {
                let first = f.seq - skip as u64;
                damaged(map, f.offset(), first + d.row as u64, d)
            })?;
        self.push_meta(f.seq, view.timestamp, taken);
        Ok(taken)
    }

    /// One message through [`Tailer::read_next`]. False: the batch ends
    /// (nothing more, `end` reached, a column full).
    fn read_one(
        &mut self,
        tailer: &mut Tailer,
        projs: &mut Projections<'_>,
        end: u64,
    ) -> Result<bool> {
        let Some(m) = tailer.read_next()? else {
            return Ok(false);
        };
        let (seq, timestamp) = (m.seq, m.timestamp);
        if seq >= end {
            // Holes were stepped over up to `end`: this one is the next
            // batch's.
            tailer.seek(seq)?;
            return Ok(false);
        }
        if m.is_tombstone() {
            return Ok(true);
        }
        let map: Arc<Mapping> = m.mapping().clone();
        let proj = projs.of(&map)?;
        match self.columns.push_row(proj, m.payload) {
            Ok(true) => {
                self.push_meta(seq, timestamp, 1);
                Ok(true)
            }
            Ok(false) => {
                tailer.seek(seq)?;
                Ok(false)
            }
            Err(d) => Err(damaged(
                &map,
                position::decode(m.position()).1 as usize,
                seq,
                d,
            )),
        }
    }

    /// `n` rows from sequence `seq` on, with `timestamp`.
    #[inline]
    fn push_meta(&mut self, seq: u64, timestamp: u64, n: usize) {
        self.seq.extend((seq..seq + n as u64).map(|s| s as i64));
        self.timestamp
            .extend(std::iter::repeat_n(timestamp as i64, n));
        self.rows += n;
    }
}
