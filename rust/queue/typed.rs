//! Typed reads of a typed queue (format 12): columns of its current
//! schema, and the sequences whose schema field satisfies a comparison.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::typed::SchemaVersions;
use crate::reader::tailer::Tailer;
use crate::reader::typed::{self, TypedBatch, TypedPredicate, PARALLEL_MIN_ROWS};

use super::Queue;

impl Queue {
    /// The schema versions of a typed queue; [`Error::Schema`] for an
    /// untyped one.
    fn typed_versions(&self) -> Result<Arc<SchemaVersions>> {
        self.schema_versions().ok_or_else(|| {
            Error::Schema(
                "the queue has no schema: typed reads are for queues opened with one".into(),
            )
        })
    }

    /// A tailer at `start` (at least the first sequence), after waiting
    /// for appends before `end` to be visible; `None` when the range is
    /// empty.
    fn typed_tailer(&self, start: u64, end: u64) -> Result<Option<Tailer>> {
        self.check_open()?;
        if end > self.next_seq() {
            self.wait_visible()?;
        }
        let from = start.max(self.first_seq());
        if from >= end {
            return Ok(None);
        }
        let mut t = Tailer::new(self.inner().catalog.clone(), self.inner().config.wait);
        t.seek(from)?;
        Ok(Some(t))
    }

    /// Rows `start..end` (at most `max_rows`) of a typed queue as Arrow
    /// columns of its current schema: `fields` (names, or aliases, of the
    /// current schema; all of them, in schema order, when `None`). Rows of
    /// files written in earlier schema versions are shown in the current
    /// one (a field added since is null, a renamed one under its current
    /// name, a narrower value widened). Tombstones are not rows.
    /// `next_seq` says where to read on. An unknown field is
    /// [`Error::InvalidArgument`]; an untyped queue [`Error::Schema`];
    /// damage [`Error::Corrupted`] naming the file, offset and sequence.
    pub fn read_typed(
        &self,
        start: u64,
        end: u64,
        max_rows: usize,
        fields: Option<&[String]>,
    ) -> Result<TypedBatch> {
        let versions = self.typed_versions()?;
        let current = versions.current().expect("a typed queue has a version");
        let wanted = wanted_fields(current, fields)?;
        let limit = self.inner().catalog.max_decompressed();
        // `LITEMQ_READ_THREADS` when set; unset, the cores, each part at
        // least PARALLEL_MIN_ROWS rows (unlike an untyped read: measured
        // faster, docs/PERFORMANCE.md "Typed journals: the second pass").
        let (threads, min_rows) = match crate::reader::columns::read_threads_set() {
            Some(n) => (n, 1),
            None => (crate::reader::columns::cores(), PARALLEL_MIN_ROWS),
        };
        let Some(mut t) = self.typed_tailer(start, end)? else {
            let mut b = TypedBatch {
                columns: crate::format::typed::TypedColumns::new(current, &wanted, 0),
                ..TypedBatch::default()
            };
            b.next_seq = end.max(start);
            return Ok(b);
        };
        if threads > 1 {
            let (catalog, wait) = (&self.inner().catalog, self.inner().config.wait);
            let parallel = TypedBatch::read_parallel(
                catalog,
                wait,
                &versions,
                &wanted,
                (t.next_seq(), end, max_rows),
                limit,
                (threads, min_rows),
            );
            if let Some(b) = parallel? {
                return Ok(b);
            }
        }
        TypedBatch::read(&mut t, &versions, &wanted, (end, max_rows), limit)
    }

    /// The rows of sequences `seqs` (ascending) of a typed queue, as
    /// [`Queue::read_typed`] shows rows, read one at a time (a `where`
    /// answered by an index reads only its rows). A sequence with no row
    /// (a tombstone, a hole) is left out.
    pub fn read_typed_seqs(&self, seqs: &[u64], fields: Option<&[String]>) -> Result<TypedBatch> {
        let versions = self.typed_versions()?;
        let current = versions.current().expect("a typed queue has a version");
        let wanted = wanted_fields(current, fields)?;
        let tailer = match (seqs.first(), seqs.last()) {
            (Some(&first), Some(&last)) => self.typed_tailer(first, last + 1)?,
            _ => None,
        };
        let Some(mut t) = tailer else {
            return Ok(TypedBatch {
                columns: crate::format::typed::TypedColumns::new(current, &wanted, 0),
                ..TypedBatch::default()
            });
        };
        TypedBatch::read_seqs(&mut t, &versions, &wanted, seqs)
    }

    /// The sequences in `start..end` of a typed queue whose schema field
    /// satisfies `pred` (see [`TypedPredicate`]), ascending; only that
    /// field is decoded. With an index declared on the field, sealed files
    /// with a valid index file are answered by it unread (unless the index
    /// cannot answer `pred` exactly: `!=`, `<` and `>` on strings); the
    /// others are read. An unknown field, operator arity or operand of
    /// the wrong kind is [`Error::InvalidArgument`]; an untyped queue
    /// [`Error::Schema`].
    pub fn typed_where(&self, pred: &TypedPredicate, start: u64, end: u64) -> Result<Vec<u64>> {
        self.typed_where_with(pred, (start, end), false)
            .map(Option::unwrap_or_default)
    }

    /// [`Queue::typed_where`] when an index declared on the field answers
    /// `pred` exactly (its sealed files unread); `None`, with nothing read,
    /// when none does. Lets a caller pick between the index's rows and a
    /// scan without knowing which comparisons an index answers.
    pub fn typed_where_indexed(
        &self,
        pred: &TypedPredicate,
        start: u64,
        end: u64,
    ) -> Result<Option<Vec<u64>>> {
        self.typed_where_with(pred, (start, end), true)
    }

    fn typed_where_with(
        &self,
        pred: &TypedPredicate,
        (start, end): (u64, u64),
        indexed_only: bool,
    ) -> Result<Option<Vec<u64>>> {
        let versions = self.typed_versions()?;
        typed::check_predicate(&versions, pred)?;
        let query = self.field_index_query(&versions, pred);
        if indexed_only && query.is_none() {
            return Ok(None);
        }
        let Some(mut t) = self.typed_tailer(start, end)? else {
            return Ok(Some(Vec::new()));
        };
        let limit = self.inner().catalog.max_decompressed();
        let active = match &query {
            Some(q) => self.active_field_seqs(&versions, q)?,
            None => None,
        };
        let catalog = &*self.inner().catalog;
        crate::reader::typed_where::typed_where(
            &mut t,
            &versions,
            pred,
            (end, limit),
            query.as_ref().map(|q| (catalog, q, active.as_ref())),
        )
        .map(Some)
    }

    /// Brings the handle's in-memory index of `query`'s schema field over
    /// the active file up to what is published (reading only the rows
    /// published since the last query on the field), and returns what it
    /// lists for the query (see `Queue::where_field` for headers).
    fn active_field_seqs(
        &self,
        versions: &SchemaVersions,
        query: &crate::index::fields::FieldQuery,
    ) -> Result<Option<crate::reader::field::ActiveSeqs>> {
        let current = versions
            .current()
            .ok_or_else(|| Error::Schema("the queue has no schema".into()))?;
        let Some(field) = current.find(&query.def.name) else {
            return Ok(None);
        };
        let end = self.next_seq();
        self.active_index(query, &mut |ix| {
            crate::reader::typed_where::extend_active(
                &self.inner().catalog,
                versions,
                (field, query.def.kind),
                end,
                ix,
            )
        })
    }

    /// `pred` as a query of the index declared on its field, when there is
    /// one and it answers `pred` exactly.
    fn field_index_query(
        &self,
        versions: &SchemaVersions,
        pred: &TypedPredicate,
    ) -> Option<crate::index::fields::FieldQuery> {
        let current = versions.current()?;
        let i = current.find(&pred.field)?;
        let def = self
            .indexes()
            .into_iter()
            .find(|d| d.schema_field && current.find(&d.name) == Some(i))?;
        let any = crate::reader::typed_where::key_predicates(pred, current.fields[i].ty)?;
        Some(crate::index::fields::FieldQuery { def, any })
    }
}

/// The indexes in `current` of the fields named `fields` (every field, in
/// schema order, when `None`); an unknown name is
/// [`Error::InvalidArgument`] listing the fields.
fn wanted_fields(
    current: &crate::format::typed::Schema,
    fields: Option<&[String]>,
) -> Result<Vec<usize>> {
    match fields {
        None => Ok((0..current.fields.len()).collect()),
        Some(names) => current
            .field_indexes(names)
            .map_err(|e| Error::InvalidArgument(e.0)),
    }
}
