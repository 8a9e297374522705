//! The decompressed block of the batch a tailer reads members of.

use std::ops::Range;

use crate::format::record::{self, RecordView};
use crate::format::typed::RowLayout;
use crate::storage::frames::RecordKind;

/// The decompressed block of the batch (format 9) a tailer reads members
/// of, and where in it the member delivered last lies: the block is
/// decompressed once per batch, members are found in order in O(1).
#[derive(Debug, Default)]
pub(super) struct BatchCache {
    /// `(file number, frame offset)` of the batch the block is of.
    pub(super) of: Option<(u64, usize)>,
    pub(super) block: Vec<u8>,
    pub(super) count: u16,
    /// The member after the current one, and where it starts.
    pub(super) next_index: u16,
    pub(super) next_at: usize,
    /// The current member's record in `block` (of a row batch: its row).
    pub(super) current: Range<usize>,
    /// Of a row batch (format 12): where each row found so far starts in
    /// `block`, and where the last of them ends (rows are found up to the
    /// one read); empty for a batch of records.
    pub(super) row_starts: Vec<usize>,
}

impl BatchCache {
    /// Makes member `seq` of the batch record `rec` (decoded: `view`;
    /// frame `of`) current, decompressing its block (at most `limit`
    /// bytes) unless it is the one held. A row batch (format 12) needs its
    /// file's row layout (`layout`: `None` in an untyped file, where a row
    /// batch is damage); its rows are checked against it when the block is
    /// loaded. The error says what is wrong with the batch.
    pub(super) fn load(
        &mut self,
        rec: &[u8],
        view: &RecordView<'_>,
        (of, seq): ((u64, usize), u64),
        limit: usize,
        layout: Option<&RowLayout>,
    ) -> std::result::Result<(), String> {
        if view.is_row_batch() {
            return self.load_rows(rec, view, (of, seq), limit, layout);
        }
        let (first, count) = RecordKind::of_or_plain(rec).batch().unwrap_or((0, 1));
        if !(first..first + count).contains(&seq) {
            return Err(format!(
                "batch holds sequences {first}..{}, not {seq}",
                first + count
            ));
        }
        if self.of != Some(of) {
            self.of = None;
            let codec = view.codec.ok_or("batch without a codec")?;
            self.block = crate::format::compression::decompress(
                codec,
                view.payload,
                view.raw_len as usize,
                limit,
            )?;
            self.count = count as u16;
            self.row_starts.clear();
            record::check_batch_block(&self.block, self.count)?;
            self.next_index = 0;
            self.next_at = 0;
            self.of = Some(of);
        }
        let want = (seq - first) as u16;
        let (index, at) = if self.next_index <= want {
            (self.next_index, self.next_at)
        } else {
            (0, 0)
        };
        let (range, _) = record::batch_member(&self.block, self.count, index, at, want)?;
        self.next_index = want + 1;
        self.next_at = range.end;
        self.current = range;
        Ok(())
    }

    /// [`BatchCache::load`] for a row batch: the block is stored as is
    /// (copied) or compressed, and is exactly `count` rows of `layout`.
    fn load_rows(
        &mut self,
        rec: &[u8],
        view: &RecordView<'_>,
        (of, seq): ((u64, usize), u64),
        limit: usize,
        layout: Option<&RowLayout>,
    ) -> std::result::Result<(), String> {
        let layout = layout.ok_or("row batch in an untyped data file")?;
        let (first, count) = RecordKind::of_or_plain(rec).batch().unwrap_or((0, 1));
        if !(first..first + count).contains(&seq) {
            return Err(format!(
                "batch holds sequences {first}..{}, not {seq}",
                first + count
            ));
        }
        if self.of != Some(of) {
            self.of = None;
            self.block = match view.codec {
                None => view.payload.to_vec(),
                Some(codec) => crate::format::compression::decompress(
                    codec,
                    view.payload,
                    view.raw_len as usize,
                    limit,
                )?,
            };
            self.count = count as u16;
            self.row_starts.clear();
            self.row_starts.push(0);
            self.of = Some(of);
        }
        // Rows are found by their lengths as far as the one asked for, and
        // that one is checked: a damaged row is reported at its own
        // sequence (as `read_arrow` and the JVM reader report it), the
        // rows around it stay readable; reaching the last row also checks
        // that the rows tile the block.
        let i = (seq - first) as usize;
        while self.row_starts.len() <= i + 1 {
            let k = self.row_starts.len() - 1;
            let at = self.row_starts[k];
            let len = layout
                .row_len(&self.block[at..])
                .map_err(|why| format!("row batch: {why}"))?;
            if k + 1 == count as usize && at + len != self.block.len() {
                return Err("row batch: row batch longer than its rows".into());
            }
            self.row_starts.push(at + len);
        }
        let row = self.row_starts[i]..self.row_starts[i + 1];
        layout
            .check_row(&self.block[row.clone()])
            .map_err(|why| format!("row batch: {why}"))?;
        self.current = row;
        Ok(())
    }
}
