//! Re-indexing keys from the data (RocketMQ's redispatch): the key index is
//! only ever behind the data, never ahead, so opening it means adding the
//! keyed messages written after its last position.

use std::sync::Arc;

use super::catalog::Catalog;
use super::tailer::Tailer;
use super::wait::WaitStrategy;
use crate::config::Config;
use crate::error::Result;
use crate::index::key_index::KeyIndexWriter;
use crate::storage::layout::KEY_INDEX_DIR;

/// Opens the key index for writing and brings it level with the data: items
/// past the data's end are dropped (the data was cut by recovery), and keyed
/// messages the index lacks (a crash came between data and index) are added.
pub fn open_key_index(
    config: &Config,
    catalog: &Arc<Catalog>,
    upto: u64,
    last_at_close: Option<u64>,
    data_end: u64,
) -> Result<KeyIndexWriter> {
    let dir = config.path.join(KEY_INDEX_DIR);
    let (mut writer, removed) = KeyIndexWriter::open_or_repair(&dir, config.key_index)?;
    writer.truncate_after(data_end.saturating_sub(1))?;
    // `upto` holds only for the index as it was at that close: if files were
    // removed (failed checks, deleted) or items added since, start from the
    // index's own last position instead.
    let upto = if removed.is_empty() && writer.last_position() == last_at_close {
        upto
    } else {
        0
    };
    let from = writer.last_position().map_or(0, |p| p + 1).max(upto);
    if from < data_end {
        index_keys_from(catalog, &mut writer, from, &mut |_| {})?;
    }
    Ok(writer)
}

/// Adds every keyed message at or after position `from` to `writer`.
pub fn index_keys_from(
    catalog: &Arc<Catalog>,
    writer: &mut KeyIndexWriter,
    from: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    let mut t = Tailer::new(catalog.clone(), WaitStrategy::Default);
    t.seek_position(from)?;
    let mut keys = 0;
    while let Some(m) = t.read_next()? {
        if let Some(key) = m.key {
            if m.position() >= from {
                writer.add(key, m.position(), m.timestamp)?;
                keys += 1;
            }
        }
        if m.seq % 4096 == 0 {
            progress(m.seq);
        }
    }
    Ok(keys)
}
