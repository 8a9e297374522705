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

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::format::position;
use crate::format::record::{self, RecordView};
use crate::format::typed::{Projection, Room, RowDamage, SchemaVersions, TypedColumns};
use crate::reader::tailer::{OnMismatch, Tailer};
use crate::reader::wait::WaitStrategy;
use crate::storage::frames::RecordKind;
use crate::storage::mapped::Mapping;

/// Most rows whose columns are reserved up front (address space only:
/// pages are touched as rows come).
const RESERVE_ROWS: usize = 1 << 24;

/// Fewest rows per part of a typed read spread over the cores by default
/// (see [`TypedBatch::read_parallel`]): below, starting threads costs more
/// than they save.
pub const PARALLEL_MIN_ROWS: u64 = 1 << 18;

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

/// Column memory from the shelf of what earlier reads let go of.
const SHELF: Room = Room {
    bytes: crate::reader::spare::reserve::<u8>,
    offsets: crate::reader::spare::reserve::<i32>,
};

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
        let hint = max_rows.min(end.saturating_sub(tailer.next_seq()) as usize);
        TypedBatch::read_sized(tailer, versions, wanted, (end, max_rows, hint), limit)
    }

    /// [`TypedBatch::read`], the columns reserved for `hint` rows (a
    /// parallel read's first part: room for the parts joined to it).
    fn read_sized(
        tailer: &mut Tailer,
        versions: &SchemaVersions,
        wanted: &[usize],
        (end, max_rows, hint): (u64, usize, usize),
        limit: usize,
    ) -> Result<TypedBatch> {
        let current = versions
            .current()
            .ok_or_else(|| Error::Schema("the queue has no schema".into()))?;
        let hint = hint.min(RESERVE_ROWS);
        let mut b = TypedBatch {
            columns: TypedColumns::new_in(current, wanted, hint, SHELF),
            ..TypedBatch::default()
        };
        crate::reader::spare::reserve(&mut b.seq, hint);
        crate::reader::spare::reserve(&mut b.timestamp, hint);
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

    /// Reads `[start, end)` (at most `max_rows` rows) as [`TypedBatch::read`]
    /// does, on `threads` threads: the range is cut into parts of equal
    /// sequence counts, each read by its own tailer (the calling thread
    /// reads the first, its columns reserved for every part), and the parts
    /// are joined in sequence order: at most `threads` parts of at least
    /// `min_rows` sequences. `None`, having read nothing, when that leaves
    /// fewer than two parts.
    ///
    /// The result is the serial read's: the same rows, or the error of the
    /// earliest part that failed after every part before it was read whole.
    /// A part that stops short (a string column at its limit) ends the
    /// result there; `next_seq` says where to go on.
    pub(crate) fn read_parallel(
        catalog: &Arc<Catalog>,
        wait: WaitStrategy,
        versions: &SchemaVersions,
        wanted: &[usize],
        (start, end, max_rows): (u64, u64, usize),
        limit: usize,
        (threads, min_rows): (usize, u64),
    ) -> Result<Option<TypedBatch>> {
        let end = end.min(start.saturating_add(max_rows as u64));
        let total = end.saturating_sub(start);
        let parts = threads.min((total / min_rows.max(1)) as usize);
        if parts < 2 {
            return Ok(None);
        }
        let cuts: Vec<u64> = (0..=parts)
            .map(|k| start + (total as u128 * k as u128 / parts as u128) as u64)
            .collect();
        let read = |lo: u64, hi: u64, first: bool| -> Result<TypedBatch> {
            let mut t = Tailer::new(catalog.clone(), wait);
            t.seek(lo)?;
            let rows = (hi - lo) as usize;
            // The first part's columns take every part's rows.
            let hint = if first { total as usize } else { rows };
            TypedBatch::read_sized(&mut t, versions, wanted, (hi, rows, hint), limit)
        };
        let ranges: Vec<(u64, u64)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
        crate::reader::parallel::read_ranges(&ranges, &read, |b| b.next_seq, &mut |b, part| {
            b.append(part)
        })
    }

    /// Appends a later part's rows (see [`TypedBatch::read_parallel`]);
    /// false, with nothing changed, when a column cannot take them.
    fn append(&mut self, part: TypedBatch) -> bool {
        if !self.columns.append(
            part.columns,
            crate::reader::spare::give,
            crate::reader::spare::give,
        ) {
            return false;
        }
        self.rows += part.rows;
        self.next_seq = part.next_seq;
        self.seq.extend_from_slice(&part.seq);
        self.timestamp.extend_from_slice(&part.timestamp);
        crate::reader::spare::give(part.seq);
        crate::reader::spare::give(part.timestamp);
        true
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

    /// The rows of sequences `seqs` (ascending), read from `tailer` one
    /// message at a time ([`TypedBatch::read_one`]): a few rows scattered
    /// over row batches cost a seek and a row each, where a bulk read would
    /// split each batch's whole block. A sequence without a row (a
    /// tombstone, a hole) is left out; the batch ends at the end of what is
    /// published or when a column is full (`next_seq` says where).
    pub(crate) fn read_seqs(
        tailer: &mut Tailer,
        versions: &SchemaVersions,
        wanted: &[usize],
        seqs: &[u64],
    ) -> Result<TypedBatch> {
        let current = versions
            .current()
            .ok_or_else(|| Error::Schema("the queue has no schema".into()))?;
        let mut b = TypedBatch {
            columns: TypedColumns::new(current, wanted, seqs.len()),
            ..TypedBatch::default()
        };
        let mut projs = Projections::new(versions, wanted);
        for &s in seqs {
            if tailer.next_seq() != s {
                tailer.seek(s)?;
            }
            // False and still at `s`: nothing more, or a column full (a
            // hole or tombstone at `s` moves the tailer past it).
            if !b.read_one(tailer, &mut projs, s + 1)? && tailer.next_seq() <= s {
                break;
            }
        }
        b.next_seq = tailer.next_seq();
        Ok(b)
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

/// A comparison of [`TypedPredicate`]: the operators of `where()`
/// (`index::fields`' names where they exist: `==`, `between`, `in`,
/// `prefix`, `>=`, `<=`) and `!=`, `<`, `>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypedOp {
    /// `==` (or `=`): equal to the value.
    Eq,
    /// `!=`: not equal to it.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `between`: within two values, both included.
    Between,
    /// `in`: equal to one of the values.
    In,
    /// `prefix`: a string or binary starting with the value.
    Prefix,
}

impl TypedOp {
    /// The operator named `op` (`==`, `=`, `!=`, `<`, `<=`, `>`, `>=`,
    /// `between`, `in`, `prefix`).
    pub fn parse(op: &str) -> Result<TypedOp> {
        Ok(match op {
            "==" | "=" => TypedOp::Eq,
            "!=" => TypedOp::Ne,
            "<" => TypedOp::Lt,
            "<=" => TypedOp::Le,
            ">" => TypedOp::Gt,
            ">=" => TypedOp::Ge,
            "between" => TypedOp::Between,
            "in" => TypedOp::In,
            "prefix" => TypedOp::Prefix,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown operator {other:?}: ==, !=, <, <=, >, >=, between, in, prefix"
                )))
            }
        })
    }
}

/// Rows whose schema field satisfies a comparison: `field op values`
/// (`between` takes two values, `in` any number, the others one). A null
/// never satisfies it (as in SQL: not even `!=`).
#[derive(Debug, Clone, PartialEq)]
pub struct TypedPredicate {
    /// The field's name in the current schema (or an alias of it).
    pub field: String,
    /// The comparison.
    pub op: TypedOp,
    /// Its operands.
    pub values: Vec<crate::format::typed::Value>,
}

/// An operand in the form a column's cells compare with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Operand {
    Int(i128),
    Float(f64),
    Bytes(Vec<u8>),
}

impl TypedPredicate {
    /// The operands as `ty`'s cells compare, or why not.
    pub(crate) fn operands(&self, ty: crate::format::typed::FieldType) -> Result<Vec<Operand>> {
        use crate::format::typed::{FieldType as T, Value as V};
        let want = match self.op {
            TypedOp::Between => Some(2),
            TypedOp::In => None,
            _ => Some(1),
        };
        let bad = |why: String| Error::InvalidArgument(format!("{:?}: {why}", self.field));
        if want.is_some_and(|n| n != self.values.len()) {
            return Err(bad(format!(
                "{:?} takes {} value(s), not {}",
                self.op,
                want.unwrap_or(0),
                self.values.len()
            )));
        }
        if self.op == TypedOp::Prefix && !ty.is_var() {
            return Err(bad(format!(
                "prefix is for string and binary fields, not {}",
                ty.name()
            )));
        }
        self.values
            .iter()
            .map(|v| {
                Ok(match (ty, v) {
                    (T::Float32 | T::Float64, V::Float(x)) => Operand::Float(*x),
                    (T::Float32 | T::Float64, V::Int(x)) => Operand::Float(*x as f64),
                    (T::Float32 | T::Float64, V::UInt(x)) => Operand::Float(*x as f64),
                    (T::String, V::Str(s)) => Operand::Bytes(s.as_bytes().to_vec()),
                    (T::Binary, V::Bytes(b)) => Operand::Bytes(b.clone()),
                    (T::Bool, V::Bool(b)) => Operand::Int(i128::from(*b)),
                    (T::Decimal128 { .. }, V::Decimal(d)) => Operand::Int(*d),
                    (t, V::Int(x)) if !t.is_var() && t != T::Bool => Operand::Int(i128::from(*x)),
                    (t, V::UInt(x)) if !t.is_var() && t != T::Bool => Operand::Int(i128::from(*x)),
                    (t, v) => {
                        return Err(bad(format!(
                            "a {} field is not compared with {v:?}",
                            t.name()
                        )))
                    }
                })
            })
            .collect()
    }
}

/// Row `r` of `c` (not null) as an operand.
pub(crate) fn cell(c: &crate::format::typed::TypedColumn, r: usize) -> Operand {
    use crate::format::typed::FieldType as T;
    let w = c.ty.width();
    let raw = || {
        let mut a = [0u8; 16];
        a[..w].copy_from_slice(&c.data[r * w..r * w + w]);
        a
    };
    match c.ty {
        T::Bool => Operand::Int(i128::from((c.data[r / 8] >> (r % 8)) & 1)),
        T::Float32 => {
            let a = raw();
            Operand::Float(f64::from(f32::from_le_bytes([a[0], a[1], a[2], a[3]])))
        }
        T::Float64 => Operand::Float(f64::from_le_bytes(
            raw()[..8].try_into().unwrap_or_default(),
        )),
        T::UInt8 | T::UInt16 | T::UInt32 | T::UInt64 => {
            Operand::Int(u128::from_le_bytes(raw()) as i128)
        }
        T::String | T::Binary => {
            Operand::Bytes(c.data[c.offsets[r] as usize..c.offsets[r + 1] as usize].to_vec())
        }
        _ => {
            let x = i128::from_le_bytes(raw());
            let shift = 128 - 8 * w as u32;
            Operand::Int((x << shift) >> shift)
        }
    }
}

fn compare(a: &Operand, b: &Operand) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Operand::Int(x), Operand::Int(y)) => Some(x.cmp(y)),
        (Operand::Float(x), Operand::Float(y)) => x.partial_cmp(y),
        (Operand::Bytes(x), Operand::Bytes(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// True when `v` satisfies `op` over `operands`.
pub(crate) fn satisfies(op: TypedOp, v: &Operand, operands: &[Operand]) -> bool {
    use std::cmp::Ordering::*;
    let c = |i: usize| compare(v, &operands[i]);
    match op {
        TypedOp::Eq => c(0) == Some(Equal),
        TypedOp::Ne => matches!(c(0), Some(Less | Greater)),
        TypedOp::Lt => c(0) == Some(Less),
        TypedOp::Le => matches!(c(0), Some(Less | Equal)),
        TypedOp::Gt => c(0) == Some(Greater),
        TypedOp::Ge => matches!(c(0), Some(Greater | Equal)),
        TypedOp::Between => {
            matches!(c(0), Some(Greater | Equal)) && matches!(c(1), Some(Less | Equal))
        }
        TypedOp::In => (0..operands.len()).any(|i| c(i) == Some(Equal)),
        TypedOp::Prefix => match (v, &operands[0]) {
            (Operand::Bytes(x), Operand::Bytes(p)) => x.starts_with(p),
            _ => false,
        },
    }
}

/// The field's index in the current schema and the operands, or why
/// `pred` does not apply to the queue's schema.
pub(crate) fn prepare(
    versions: &SchemaVersions,
    pred: &TypedPredicate,
) -> Result<(usize, Vec<Operand>)> {
    let current = versions
        .current()
        .ok_or_else(|| Error::Schema("the queue has no schema".into()))?;
    let i = current.find(&pred.field).ok_or_else(|| {
        Error::InvalidArgument(format!("no field {:?} in the queue's schema", pred.field))
    })?;
    Ok((i, pred.operands(current.fields[i].ty)?))
}

/// Checks that `pred` applies to the queue's schema (see [`typed_where`]).
pub(crate) fn check_predicate(versions: &SchemaVersions, pred: &TypedPredicate) -> Result<()> {
    prepare(versions, pred).map(|_| ())
}

/// Rows read per step of `typed_where::typed_where` and index builds.
pub(crate) const WHERE_STEP: usize = 1 << 16;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::typed::{FieldType, TypedColumn, Value};

    /// A predicate on field `f`.
    pub(crate) fn pred(op: &str, values: Vec<Value>) -> TypedPredicate {
        TypedPredicate {
            field: "f".into(),
            op: TypedOp::parse(op).unwrap(),
            values,
        }
    }

    fn matches(c: &TypedColumn, r: usize, p: &TypedPredicate) -> bool {
        satisfies(p.op, &cell(c, r), &p.operands(c.ty).unwrap())
    }

    /// Every operator over ints (negative ones, from narrow slots),
    /// floats, strings and bools, as SQL would answer.
    #[test]
    fn comparisons_answer_as_sql_does() {
        let ints = TypedColumn {
            name: "f".into(),
            ty: FieldType::Int16,
            nullable: false,
            valid: vec![],
            nulls: 0,
            data: [-5i16, 0, 7].iter().flat_map(|v| v.to_le_bytes()).collect(),
            offsets: vec![],
        };
        let which = |p: TypedPredicate, c: &TypedColumn, n: usize| -> Vec<usize> {
            (0..n).filter(|&r| matches(c, r, &p)).collect()
        };
        let i = Value::Int;
        assert_eq!(which(pred("==", vec![i(-5)]), &ints, 3), [0]);
        assert_eq!(which(pred("!=", vec![i(-5)]), &ints, 3), [1, 2]);
        assert_eq!(which(pred("<", vec![i(0)]), &ints, 3), [0]);
        assert_eq!(which(pred("<=", vec![i(0)]), &ints, 3), [0, 1]);
        assert_eq!(which(pred(">", vec![i(0)]), &ints, 3), [2]);
        assert_eq!(which(pred(">=", vec![Value::UInt(0)]), &ints, 3), [1, 2]);
        assert_eq!(which(pred("between", vec![i(-5), i(0)]), &ints, 3), [0, 1]);
        assert_eq!(
            which(pred("in", vec![i(7), i(-5), i(99)]), &ints, 3),
            [0, 2]
        );
        let floats = TypedColumn {
            ty: FieldType::Float32,
            data: [1.5f32, -2.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            ..ints.clone()
        };
        assert_eq!(which(pred(">", vec![Value::Float(-2.0)]), &floats, 2), [0]);
        assert_eq!(which(pred("<", vec![i(0)]), &floats, 2), [1]);
        let strs = TypedColumn {
            ty: FieldType::String,
            data: b"AAPLMSFTAA".to_vec(),
            offsets: vec![0, 4, 8, 10],
            ..ints.clone()
        };
        let s = |t: &str| Value::Str(t.into());
        assert_eq!(which(pred("==", vec![s("MSFT")]), &strs, 3), [1]);
        assert_eq!(which(pred("prefix", vec![s("AA")]), &strs, 3), [0, 2]);
        assert_eq!(which(pred("<", vec![s("AB")]), &strs, 3), [0, 2]);
        let bools = TypedColumn {
            ty: FieldType::Bool,
            data: vec![0b10],
            ..ints.clone()
        };
        assert_eq!(which(pred("==", vec![Value::Bool(true)]), &bools, 2), [1]);
    }

    /// A wrong operator, arity or operand kind is an InvalidArgument naming
    /// the field.
    #[test]
    fn bad_predicates_are_refused() {
        assert!(matches!(
            TypedOp::parse("~"),
            Err(Error::InvalidArgument(_))
        ));
        let bad = |p: TypedPredicate, ty| match p.operands(ty) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("\"f\""), "{m}"),
            other => panic!("{other:?}"),
        };
        bad(pred("==", vec![Value::Str("x".into())]), FieldType::Int64);
        bad(pred("between", vec![Value::Int(1)]), FieldType::Int64);
        bad(pred("prefix", vec![Value::Int(1)]), FieldType::Int64);
        bad(pred("==", vec![Value::Int(1)]), FieldType::String);
    }
}
