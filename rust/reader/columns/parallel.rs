//! Reading whole files on several threads, and joining their batches.

use super::build::{append_bits, append_offsets, append_vec};
use super::*;

impl Columns {
    /// Appends the rows of `other`, a batch read from where this one
    /// stopped (both finished). Returns false, and leaves `self` as it was,
    /// when a column would pass `i32::MAX` bytes.
    fn append(&mut self, other: &mut Columns) -> bool {
        let fits = |a: usize, b: usize| a + b <= LIMIT;
        if !(fits(self.payload_data.len(), other.payload_data.len())
            && fits(self.key_data.len(), other.key_data.len())
            && fits(self.header_name_data.len(), other.header_name_data.len())
            && fits(self.header_value_data.len(), other.header_value_data.len())
            && fits(
                self.header_name_offsets.len(),
                other.header_name_offsets.len(),
            )
            && fits(self.topic_data.len(), other.topic_data.len())
            && fits(self.tag_data.len(), other.tag_data.len())
            && fits(self.tag_offsets.len(), other.tag_offsets.len())
            && fits(self.codec_data.len(), other.codec_data.len())
            && self
                .fields
                .iter()
                .zip(&other.fields)
                .all(|(a, b)| fits(a.data.len(), b.data.len())))
        {
            return false;
        }
        let (rows, n) = (self.rows, other.rows);
        let plain = !(self.any_fields || other.any_fields);
        if plain {
            // All nulls and zeros on both sides: written anew (zeroed
            // memory, not touched) by `finish` below instead of copied.
            self.clear_plain();
        }
        append_vec(&mut self.seq, &other.seq);
        append_vec(&mut self.timestamp, &other.timestamp);
        append_bits(&mut self.key_text, rows, &other.key_text, n);
        self.key_column().append(rows, other.key_column(), n);
        self.headers_column()
            .append(rows, other.headers_column(), n);
        let base = self.header_name_data.len() as i32;
        append_offsets(
            &mut self.header_name_offsets,
            &other.header_name_offsets,
            base,
        );
        append_vec(&mut self.header_name_data, &other.header_name_data);
        let (entries, more) = (
            self.header_value_offsets.len().saturating_sub(1),
            other.header_value_offsets.len().saturating_sub(1),
        );
        append_bits(
            &mut self.header_value_text,
            entries,
            &other.header_value_text,
            more,
        );
        let base = self.header_value_data.len() as i32;
        append_offsets(
            &mut self.header_value_offsets,
            &other.header_value_offsets,
            base,
        );
        append_vec(&mut self.header_value_data, &other.header_value_data);
        let base = self.payload_data.len() as i32;
        append_offsets(&mut self.payload_offsets, &other.payload_offsets, base);
        append_vec(&mut self.payload_data, &other.payload_data);
        if !plain {
            self.topic_column().append(rows, other.topic_column(), n);
            append_vec(&mut self.queue_id, &other.queue_id);
            let entries = self.tag_offsets.len() as i32 - 1;
            append_offsets(&mut self.tags_offsets, &other.tags_offsets, entries);
            let base = self.tag_data.len() as i32;
            append_offsets(&mut self.tag_offsets, &other.tag_offsets, base);
            append_vec(&mut self.tag_data, &other.tag_data);
            append_vec(&mut self.priority, &other.priority);
            self.expires_column()
                .append(rows, other.expires_column(), n);
        }
        self.codec_column().append(rows, other.codec_column(), n);
        append_vec(&mut self.raw_len, &other.raw_len);
        for (f, g) in self.fields.iter_mut().zip(&mut other.fields) {
            match f.def.kind {
                FieldKind::Str => f.text().append(rows, g.text(), n),
                FieldKind::Int => f.int().append(rows, g.int(), n),
            }
        }
        self.rows += n;
        // Both batches are finished: every column is filled to the end.
        self.bare_filled = self.rows;
        self.any_fields |= other.any_fields;
        if plain {
            self.finish();
        } else {
            self.fields_filled = self.rows;
        }
        self.next_seq = other.next_seq;
        true
    }

    /// Empties the record-field columns (topic, queue id, tags, priority,
    /// expiry) of a batch none of whose rows has those fields, for
    /// [`Columns::fill_plain`] to fill them again from row 0.
    fn clear_plain(&mut self) {
        let reset = |on: bool| if on { vec![0] } else { Vec::new() };
        let cols = self.set.unwrap_or(ColumnSet::NONE);
        self.topic_valid = Vec::new();
        self.topic_nulls = 0;
        self.topic_offsets = reset(cols.topic);
        self.queue_id = Vec::new();
        self.tags_offsets = reset(cols.tags);
        self.priority = Vec::new();
        self.expires_valid = Vec::new();
        self.expires_nulls = 0;
        self.expires_at = Vec::new();
        self.fields_filled = 0;
    }

    /// Reads `[start, end)` (at most `max_rows` rows) as
    /// [`Columns::read_fields`] does, several data files at once: the range
    /// is cut at file starts into at most `threads` parts of about equal
    /// length, each read by its own tailer on its own thread (the calling
    /// thread reads the first), and the parts are joined in sequence order.
    /// Returns `None`, having read nothing, when the range lies in one file
    /// or `threads` is 1: read it serially.
    ///
    /// The result is what a serial read returns: the same rows in the same
    /// order, or the error of the earliest part that failed after every
    /// part before it was read whole (a damaged sealed file is
    /// [`crate::error::Error::Corrupted`] naming it, the first in sequence order
    /// winning). A part stopped short by the `i32::MAX` column limit ends
    /// the result there (`next_seq` says where to go on). Since a sequence
    /// holds at most one row, the range read in parallel is cut to
    /// `max_rows` sequences; when holes (key compaction) left it short of
    /// `max_rows` rows, the rest is read serially after it.
    pub(crate) fn read_parallel(
        catalog: &Arc<Catalog>,
        wait: WaitStrategy,
        (start, end, max_rows): (u64, u64, usize),
        cols: ColumnSet,
        defs: &[FieldIndexDef],
        threads: usize,
    ) -> Result<Option<Columns>> {
        let (whole_end, end) = (end, end.min(start.saturating_add(max_rows as u64)));
        if threads < 2 || start >= end {
            return Ok(None);
        }
        let files = catalog.snapshot();
        let starts: Vec<u64> = files
            .iter()
            .map(|f| f.header.first_seq)
            .filter(|&s| s > start && s < end)
            .collect();
        if starts.is_empty() {
            return Ok(None);
        }
        let parts = threads.min(starts.len() + 1);
        // Cut at the file start nearest to each equal share.
        let mut cuts = vec![start];
        for k in 1..parts {
            let target = start + ((end - start) as u128 * k as u128 / parts as u128) as u64;
            let i = starts.partition_point(|&s| s < target);
            let near = [i.checked_sub(1), Some(i)]
                .into_iter()
                .flatten()
                .filter_map(|i| starts.get(i).copied())
                .min_by_key(|&s| s.abs_diff(target));
            if let Some(s) = near {
                if s > *cuts.last().unwrap_or(&start) {
                    cuts.push(s);
                }
            }
        }
        cuts.push(end);
        let read = |lo: u64, hi: u64, _first: bool| -> Result<Columns> {
            let mut t = Tailer::new(catalog.clone(), wait);
            t.seek(lo)?;
            Columns::read_fields(&mut t, hi, (hi - lo) as usize, cols, defs)
        };
        let ranges: Vec<(u64, u64)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
        let mut joined = crate::reader::parallel::read_ranges(
            &ranges,
            &read,
            |b| b.next_seq,
            &mut |b, mut part| b.append(&mut part),
        )?;
        if let Some(b) = joined.as_mut() {
            // Holes left rows to read before `max_rows` or the end: read
            // them serially, as the serial read would have.
            if b.next_seq >= end && end < whole_end && b.rows < max_rows {
                let mut t = Tailer::new(catalog.clone(), wait);
                t.seek(b.next_seq)?;
                let mut more =
                    Columns::read_fields(&mut t, whole_end, max_rows - b.rows, cols, defs)?;
                b.append(&mut more);
            }
        }
        Ok(joined)
    }
}
