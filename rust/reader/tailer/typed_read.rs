//! A tailer's typed read: the rows from where it stands as Arrow columns
//! (what `pa.table(tailer)` of a typed queue reads), moving it past them.

use std::sync::Arc;

use super::Tailer;
use crate::error::{Error, Result};
use crate::format::typed::SchemaVersions;
use crate::reader::typed::TypedBatch;

impl Tailer {
    /// The queue's schema versions (the last is current) if it is typed.
    pub fn schema_versions(&self) -> Option<Arc<SchemaVersions>> {
        self.catalog.schema_versions()
    }

    /// The rows of a typed queue from this tailer's position to the end of
    /// what is published, at most `max_rows`, as `Queue::read_typed` gives
    /// them (`fields`: names or aliases of the current schema's fields);
    /// the tailer moves past them (and the holes up to them). An untyped
    /// queue is [`Error::Schema`], an unknown field
    /// [`Error::InvalidArgument`], damage [`Error::Corrupted`] (the tailer
    /// left at the frame that failed).
    pub fn read_typed(&mut self, max_rows: usize, fields: &[String]) -> Result<TypedBatch> {
        let versions = self
            .schema_versions()
            .ok_or_else(|| Error::Schema("the queue has no schema".into()))?;
        let current = versions.current().expect("a typed queue has a version");
        let wanted = fields
            .iter()
            .map(|n| {
                current.find(n).ok_or_else(|| {
                    Error::InvalidArgument(format!("no field {n:?} in the queue's schema"))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let limit = self.catalog.max_decompressed();
        let b = TypedBatch::read(self, &versions, &wanted, (u64::MAX, max_rows), limit)?;
        if self.next_seq() != b.next_seq {
            self.seek(b.next_seq)?;
        }
        Ok(b)
    }
}
