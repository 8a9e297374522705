//! Feeding the key index from the data: a tailer reads every keyed message
//! from a position on and adds it. Used to bring the index level with the
//! data (`index::key_index::catch_up`) and by `reindex`. And reading keys
//! from the data where the key index does not cover it (see
//! `index::coverage`): lookups of a handle that cannot rebuild the index.

use std::ops::Range;
use std::sync::Arc;

use super::tailer::{Message, Tailer};
use super::wait::WaitStrategy;
use crate::catalog::Catalog;
use crate::error::Result;
use crate::index::key_index::KeyIndexWriter;

/// Adds every keyed message at or after position `from` to `writer`;
/// returns how many. `progress` is called with a sequence every 4096.
pub fn index_keys_from(
    catalog: &Arc<Catalog>,
    writer: &mut KeyIndexWriter,
    from: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    let mut t = Tailer::new(catalog.clone(), WaitStrategy::Default);
    t.seek_position(from)?;
    let mut keys = 0;
    // An encrypted queue's index holds keyed hashes (see `format::crypto`).
    let hasher = catalog.key();
    while let Some(m) = t.read_next()? {
        if let Some(key) = m.key {
            if m.position() >= from {
                match &hasher {
                    Some(k) => writer.add(&k.index_key(key), m.position(), m.timestamp)?,
                    None => writer.add(key, m.position(), m.timestamp)?,
                }
                keys += 1;
            }
        }
        if m.seq % 4096 == 0 {
            progress(m.seq);
        }
    }
    Ok(keys)
}

/// Whether the data at positions `range` holds a keyed message (read from
/// the records: what the key index lacks when a file of it was lost).
pub fn has_keys(catalog: &Arc<Catalog>, range: Range<u64>) -> Result<bool> {
    let mut found = false;
    scan_range(catalog, range, &mut |m| {
        found = m.key.is_some();
        !found
    })?;
    Ok(found)
}

/// Reads the data at positions `range` (to the end of the data when
/// `range.end` is `u64::MAX`) for the key index's part that does not cover
/// it: appends to `out` the position of every frame holding a message whose
/// key is `key`, and returns the range from `range.start` up to the first
/// keyed message found (or up to where the reading ended), which holds no
/// keyed message at all: a caller that keeps it need not read it again.
pub fn scan_for_key(
    catalog: &Arc<Catalog>,
    range: Range<u64>,
    key: &[u8],
    out: &mut Vec<u64>,
) -> Result<Range<u64>> {
    let mut first_keyed: Option<u64> = None;
    let reached = scan_range(catalog, range.clone(), &mut |m| {
        if let Some(k) = m.key {
            first_keyed.get_or_insert(m.position());
            if k == key && out.last() != Some(&m.position()) {
                out.push(m.position());
            }
        }
        true
    })?;
    Ok(range.start..first_keyed.unwrap_or(reached))
}

/// Hands the messages at positions `range` to `visit`, in order, until it
/// returns false. Returns the position up to which the data was read: past
/// the last message read, or `range.end` when a message at or past it was
/// reached.
fn scan_range(
    catalog: &Arc<Catalog>,
    range: Range<u64>,
    visit: &mut dyn FnMut(&Message<'_>) -> bool,
) -> Result<u64> {
    let mut t = Tailer::new(catalog.clone(), WaitStrategy::Default);
    t.seek_position(range.start)?;
    let mut reached = range.start;
    while let Some(m) = t.read_next()? {
        let pos = m.position();
        if pos >= range.end {
            return Ok(range.end);
        }
        if !visit(&m) {
            break;
        }
        reached = pos + 1;
    }
    Ok(reached)
}
