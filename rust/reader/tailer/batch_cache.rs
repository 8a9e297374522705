//! The decompressed block of the batch a tailer reads members of.

use std::ops::Range;

use crate::format::record::{self, RecordView};
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
    /// The current member's record in `block`.
    pub(super) current: Range<usize>,
}

impl BatchCache {
    /// Makes member `seq` of the batch record `rec` (decoded: `view`;
    /// frame `of`) current, decompressing its block (at most `limit`
    /// bytes) unless it is the one held. The error says what is wrong with
    /// the batch.
    pub(super) fn load(
        &mut self,
        rec: &[u8],
        view: &RecordView<'_>,
        of: (u64, usize),
        seq: u64,
        limit: usize,
    ) -> std::result::Result<(), String> {
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
}
