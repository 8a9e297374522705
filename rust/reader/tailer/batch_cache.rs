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
    /// Of a row batch (format 12): where each row starts in `block`, and
    /// where the last ends; empty for a batch of records.
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
            self.row_starts = layout
                .split_block(&self.block, count as usize)
                .map_err(|why| format!("row batch: {why}"))?;
            self.of = Some(of);
        }
        let i = (seq - first) as usize;
        self.current = self.row_starts[i]..self.row_starts[i + 1];
        Ok(())
    }
}
