//! Feeding the key index from the data: a tailer reads every keyed message
//! from a position on and adds it. Used to bring the index level with the
//! data (`index::key_index::catch_up`) and by `reindex`.

use std::sync::Arc;

use super::catalog::Catalog;
use super::tailer::Tailer;
use super::wait::WaitStrategy;
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
