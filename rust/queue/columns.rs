//! Columnar reads (Arrow layout), whole or filtered by a field query or a
//! topic selector.

use crate::error::{Error, Result};
use crate::index::fields::{FieldIndexDef, FieldQuery};
use crate::reader::columns::{ColumnSet, Columns};
use crate::reader::tailer::Tailer;
use crate::reader::topic::{TopicFilter, TopicSelector};

use super::Queue;

impl Queue {
    /// Columns of messages `start..end` (at most `max_rows`), in Arrow layout.
    pub fn read_columns(&self, start: u64, end: u64, max_rows: usize) -> Result<Columns> {
        self.read_column_set(start, end, max_rows, ColumnSet::ALL)
    }

    /// As [`Queue::read_columns`], filling only the columns in `cols`.
    pub fn read_column_set(
        &self,
        start: u64,
        end: u64,
        max_rows: usize,
        cols: ColumnSet,
    ) -> Result<Columns> {
        self.read_field_columns(None, start, end, max_rows, cols, &[])
            .map(|(b, _)| b)
    }

    /// As [`Queue::read_column_set`], with a column per declared index in
    /// `fields` (see [`crate::reader::columns::FieldColumn`]) and, with
    /// `query`, only the messages where it holds, read as
    /// [`Queue::where_field`] reads them (a sealed file whose zone map
    /// excludes the query is not opened). A field or query on an index not
    /// declared is [`Error::InvalidArgument`]. Returns the columns and the
    /// sequence to read on from (at most `end`).
    pub fn read_field_columns(
        &self,
        query: Option<FieldQuery>,
        start: u64,
        end: u64,
        max_rows: usize,
        cols: ColumnSet,
        fields: &[FieldIndexDef],
    ) -> Result<(Columns, u64)> {
        self.check_open()?;
        let declared = self.indexes();
        if let Some(d) = fields.iter().find(|d| !declared.contains(d)) {
            return Err(Error::InvalidArgument(format!(
                "no {} index on {:?}: declare it with add_index (or indexes=) first",
                d.kind.name(),
                d.name
            )));
        }
        if end > self.next_seq() {
            self.wait_visible()?;
        }
        let first = self.first_seq();
        let whole = query.is_none();
        let mut t = match query {
            Some(q) => self.where_field(q)?,
            None => Tailer::new(self.inner().catalog.clone(), self.inner().config.wait),
        };
        if start.max(first) >= end {
            return Ok((Columns::empty(0, cols).with_fields(fields), end.max(start)));
        }
        if whole {
            // Whole files on several threads (see `Columns::read_parallel`).
            let range = (start.max(first), end, max_rows);
            let (catalog, wait) = (&self.inner().catalog, self.inner().config.wait);
            let threads = crate::reader::columns::read_threads();
            if let Some(b) = Columns::read_parallel(catalog, wait, range, cols, fields, threads)? {
                let next = b.next_seq.min(end);
                return Ok((b, next));
            }
        }
        t.seek(start.max(first))?;
        let b = Columns::read_fields(&mut t, end, max_rows, cols, fields)?;
        Ok((b, t.next_seq().min(end)))
    }

    /// As [`Queue::read_column_set`], keeping only the messages `selector`
    /// wants (a topic, a queue id of it, tags; as [`Tailer::select`]):
    /// files without topics are skipped, a sealed file's topic index gives
    /// the frames to read, other files are read frame by frame; every row
    /// is compared exactly. `fields` adds a column per declared index, as
    /// [`Queue::read_field_columns`]. Returns the columns and the sequence
    /// to read on from (`end` once the read got there).
    pub fn read_column_selected(
        &self,
        (start, end, max_rows): (u64, u64, usize),
        cols: ColumnSet,
        selector: TopicSelector,
        fields: &[FieldIndexDef],
    ) -> Result<(Columns, u64)> {
        self.check_open()?;
        if end > self.next_seq() {
            self.wait_visible()?;
        }
        let first = self.first_seq();
        let start = start.max(first);
        if start >= end {
            return Ok((Columns::empty(0, cols).with_fields(fields), end.max(start)));
        }
        let catalog = &self.inner().catalog;
        let mut t = Tailer::new(catalog.clone(), self.inner().config.wait);
        t.seek(start)?;
        let mut filter = TopicFilter::new(selector, crate::reader::tailer::scan_topics);
        Columns::read_filtered(&mut t, catalog, &mut filter, (end, max_rows), cols, fields)
    }
}
