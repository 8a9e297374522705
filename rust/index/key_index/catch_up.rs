//! Bringing the key index level with the data when the writer opens it
//! (RocketMQ's redispatch): the key index is only ever behind the data, never
//! ahead, so opening it means dropping items past the data's end and adding
//! the keyed messages written after its last position.
//!
//! The index does not read the data itself: the caller passes the function
//! that does (`reader::keys::index_keys_from`), so this layer stays below the
//! reader.

use std::ops::Range;
use std::path::Path;

use super::{KeyIndexConfig, KeyIndexWriter};
use crate::error::Result;
use crate::index::coverage::Coverage;

/// What bringing the index level needs of the data (read by the caller).
pub struct Data<'a> {
    /// First position of the data kept (`file_number << 40` of the oldest data file).
    pub start: u64,
    /// The data ends before this position.
    pub end: u64,
    /// Adds the keyed messages at or after a position to the writer; returns how many.
    pub add_from: &'a mut dyn FnMut(&mut KeyIndexWriter, u64) -> Result<u64>,
    /// Whether a range of positions holds a keyed message.
    pub has_keys: &'a mut dyn FnMut(Range<u64>) -> Result<bool>,
    /// Positions known to hold no keyed message (`metadata.json`'s
    /// `key_index_clear`): a gap inside them is not read again.
    pub known_clear: &'a Coverage,
}

/// Opens the key index in `dir` for writing and brings it level with the
/// data, which ends before position `data.end`: items past it are dropped
/// (the data was cut by recovery), a file lost from the middle or the start
/// of the index is noticed ([`KeyIndexWriter::drop_after_gap`]: the files
/// after the gap are dropped), and `data.add_from(writer, from)` is called to
/// add the keyed messages at or after position `from` that the index lacks
/// (a crash came between data and index, or files were lost). Unless the
/// index is as it was at a clean close, `from` is its last item's position,
/// whose items are dropped first: a batch frame's keyed members share one
/// position, and a crash may have come between them. `upto` is the position
/// the index covered at the last clean close, when its last item was
/// `last_at_close`. Returns the writer and the ranges of positions found
/// to hold no keyed message while checking for lost files.
pub fn open_level_with_data(
    dir: &Path,
    cfg: KeyIndexConfig,
    upto: u64,
    last_at_close: Option<u64>,
    data: Data<'_>,
) -> Result<(KeyIndexWriter, Coverage)> {
    let data_end = data.end;
    let (mut writer, removed) = KeyIndexWriter::open_or_repair(dir, cfg)?;
    writer.truncate_after(data_end.saturating_sub(1))?;
    let (lost, clear) = writer.drop_after_gap(data.start, data.known_clear, data.has_keys)?;
    // `upto` holds only for the index as it was at that close: if files were
    // removed (failed checks, deleted) or items added since, start from the
    // index's own last position instead.
    let upto = if removed.is_empty() && !lost && writer.last_position() == last_at_close {
        upto
    } else {
        0
    };
    let from = match writer.last_position() {
        // The last item's frame may be a batch (format 9) whose keyed
        // members were only partly added (items share its position): drop
        // its items and add the frame again whole.
        Some(last) if upto <= last => {
            writer.truncate_after(last - 1)?;
            last
        }
        Some(last) => upto.max(last + 1),
        None => upto,
    };
    if from < data_end {
        (data.add_from)(&mut writer, from)?;
    }
    Ok((writer, clear))
}
