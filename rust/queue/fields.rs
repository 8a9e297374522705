//! Secondary indexes on header fields: declaring, dropping and checking
//! them, and queries through them.

use crate::error::{Error, Result};
use crate::index::fields::{ActiveIndex, FieldIndexDef, FieldQuery, IndexState};
use crate::reader::field::ActiveSeqs;
use crate::reader::tailer::{OwnedMessage, Start, Tailer};
use crate::storage::layout::METADATA_FILE;

use super::metadata::write_metadata;
use super::Queue;

impl Queue {
    /// The declared secondary indexes (see [`QueueBuilder::index`]).
    pub fn indexes(&self) -> Vec<FieldIndexDef> {
        self.inner()
            .config
            .fields
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Declares a secondary index on header field `def.name` and builds it
    /// now for every sealed data file that lacks a valid one (in this
    /// thread, calling `progress(done, total)` after each file); files
    /// sealed from then on get theirs from the writer's builder, and the
    /// active file is indexed in memory by queries. The index is remembered in
    /// `metadata.json`. Declaring an index again with the same type only
    /// builds what is missing; with another type it is
    /// [`Error::InvalidConfig`]. Returns how many sealed files have a valid
    /// index on the field afterwards (the writer's builder may have written
    /// some of them meanwhile).
    /// A read-only handle gets [`Error::ReadOnly`]. With several writer
    /// processes, the others learn of the index when they next open.
    pub fn add_index(
        &self,
        def: FieldIndexDef,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<usize> {
        self.check_open()?;
        // On a typed queue, an index named like a schema field is that
        // field's (its kind must be the field's).
        let versions = self.schema_versions();
        let def = def.for_schema(versions.as_deref().and_then(|v| v.current()))?;
        def.check_encrypted(self.encryption_key().is_some())?;
        self.start_lazy_writer()?;
        if self.inner().writer.is_none() {
            return Err(Error::ReadOnly);
        }
        {
            let mut defs = self
                .inner()
                .config
                .fields
                .write()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(d) = defs.iter().find(|d| d.name == def.name) {
                if d.kind != def.kind {
                    return Err(Error::InvalidConfig(format!(
                        "index {:?} is declared as {:?}; an index keeps its type",
                        d.name,
                        d.kind.name()
                    )));
                }
            } else {
                defs.push(def.clone());
            }
        }
        // Header indexes do not look inside batches compressed together
        // (format 9): refused on a queue that holds one (a schema field's
        // index reads the rows, in batches too). Appends of batches
        // check the declared indexes under the read lock taken above for
        // writing, so every batch is in the files once the flush returns.
        if let Some(w) = &self.inner().writer {
            w.appender.flush()?;
        }
        self.inner().catalog.refresh()?;
        for info in self.inner().catalog.snapshot().iter() {
            if def.schema_field {
                break;
            }
            if crate::reader::tailer::file_has_batches(&self.inner().catalog, info)? {
                let mut defs = self
                    .inner()
                    .config
                    .fields
                    .write()
                    .unwrap_or_else(|e| e.into_inner());
                defs.retain(|d| d.name != def.name);
                return Err(Error::InvalidArgument(format!(
                    "the queue holds batches compressed together (format 9, {}): \
                     field indexes do not look inside them",
                    self.inner().catalog.data_path(info.id).display()
                )));
            }
        }
        {
            let mut meta = self
                .inner()
                .metadata
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            meta.options = Some(self.inner().config.stored());
            write_metadata(&self.inner().config.path.join(METADATA_FILE), &meta)?;
        }
        self.inner().catalog.refresh()?;
        let files = self.inner().catalog.snapshot();
        // The last file is the active one: not sealed.
        let sealed = &files[..files.len().saturating_sub(1)];
        let catalog = &self.inner().catalog;
        let mut wrote = 0;
        for (i, f) in sealed.iter().enumerate() {
            wrote +=
                crate::reader::typed_where::ensure_indexes(catalog, f, std::slice::from_ref(&def));
            progress(i + 1, sealed.len());
        }
        Ok(wrote)
    }

    /// Forgets the secondary index on header field `name` and deletes its
    /// files: first the declaration (in this handle and in `metadata.json`,
    /// so a crash after it leaves only index files nobody reads, deleted
    /// with their data file by retention or by dropping the name again),
    /// then one `NAME.field-FIELD` file per data file. Returns how many
    /// index files it deleted. A field query on `name` is then
    /// [`Error::InvalidArgument`] until the index is declared again (which
    /// builds it anew). A name that is not declared and has no file left is
    /// [`Error::InvalidArgument`]; a read-only handle gets
    /// [`Error::ReadOnly`]. With several writer processes, the others keep
    /// the index until they next open (their builders may write its files
    /// for files they seal meanwhile).
    pub fn drop_index(&self, name: &str) -> Result<usize> {
        self.check_open()?;
        self.start_lazy_writer()?;
        if self.inner().writer.is_none() {
            return Err(Error::ReadOnly);
        }
        // The name becomes part of a file name: the same check as declaring.
        FieldIndexDef::new(name, "str")?;
        let dropped: Vec<FieldIndexDef> = {
            let mut defs = self
                .inner()
                .config
                .fields
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let (gone, kept) = defs.drain(..).partition(|d| d.name == name);
            *defs = kept;
            gone
        };
        if !dropped.is_empty() {
            let mut meta = self
                .inner()
                .metadata
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            meta.options = Some(self.inner().config.stored());
            if let Err(e) = write_metadata(&self.inner().config.path.join(METADATA_FILE), &meta) {
                // Still declared on disk: keep it declared here too.
                self.inner()
                    .config
                    .fields
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(dropped);
                meta.options = Some(self.inner().config.stored());
                return Err(e);
            }
        }
        self.inner()
            .active_fields
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|d, _| d.name != name);
        self.inner().catalog.refresh()?;
        let base = self.inner().config.path.as_path();
        let mut removed = 0;
        for f in self.inner().catalog.snapshot().iter() {
            let path = f.id.field_path(base, name);
            removed += usize::from(crate::storage::fsutil::remove_if_present(&path)?);
        }
        if dropped.is_empty() && removed == 0 {
            return Err(Error::InvalidArgument(format!(
                "no index on {name:?} to drop (declared: {:?})",
                self.indexes()
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
            )));
        }
        Ok(removed)
    }

    /// A tailer from the first message returning only those where `query`
    /// holds (a header value of a declared index equal to, in a range of,
    /// or starting with what it asks), in sequence order. Sealed files are
    /// read through their secondary index when it checks out (a file whose
    /// zone map excludes the query is skipped unread), the active file
    /// through the handle's in-memory index of the field (extended first
    /// over what was published since the last query on it); the others are
    /// read whole. Every message returned is checked against the query. A
    /// field that is not declared is [`Error::InvalidArgument`].
    pub fn where_field(&self, query: FieldQuery) -> Result<Tailer> {
        let declared = self.indexes();
        if declared
            .iter()
            .any(|d| d.schema_field && d.name == query.def.name)
        {
            return Err(Error::InvalidArgument(format!(
                "{:?} indexes a field of the queue's schema: query it with the typed \
                 where (Queue::typed_where)",
                query.def.name
            )));
        }
        if !declared.contains(&query.def) {
            return Err(Error::InvalidArgument(format!(
                "no {} index on {:?}: declare it with add_index (or indexes=) first",
                query.def.kind.name(),
                query.def.name
            )));
        }
        let active = self.active_seqs(&query)?;
        let mut t = self.tailer(Start::Beginning)?;
        t.select_field(query, active);
        Ok(t)
    }

    /// Brings the in-memory index of `query`'s field over the active file
    /// up to what is published (reading only the messages published since
    /// the last query on the field: the first one reads the whole file, as
    /// a scan would), and returns what it lists for the query.
    fn active_seqs(&self, query: &FieldQuery) -> Result<Option<ActiveSeqs>> {
        self.active_index(query, &mut |ix| {
            let mut t = self.new_tailer();
            match t.seek(ix.upto) {
                Ok(()) => {}
                // Nothing published past it yet.
                Err(Error::NotFound { .. }) => t.seek_end()?,
                Err(e) => return Err(e),
            }
            if t.next_seq() == ix.upto {
                while let Some(m) = t.read_next()? {
                    for k in query.def.keys(m.record()) {
                        let seqs = ix.values.entry(k).or_default();
                        if seqs.last() != Some(&m.seq) {
                            seqs.push(m.seq);
                        }
                    }
                    ix.upto = m.seq + 1;
                }
            }
            Ok(())
        })
    }

    /// The handle's in-memory index of `query`'s field (a header's or a
    /// schema field's) over the active file, started afresh when it is of
    /// another file, brought up to what is published by `extend` (which
    /// reads from its `upto` on), and what it lists for the query. `None`
    /// when the queue has no data file.
    pub(super) fn active_index(
        &self,
        query: &FieldQuery,
        extend: &mut dyn FnMut(&mut ActiveIndex) -> Result<()>,
    ) -> Result<Option<ActiveSeqs>> {
        self.inner().catalog.refresh()?;
        let Some(last) = self.inner().catalog.snapshot().last().copied() else {
            return Ok(None);
        };
        let mut cache = self
            .inner()
            .active_fields
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let ix = cache.entry(query.def.clone()).or_default();
        if ix.file_number != last.header.file_number || ix.upto < last.header.first_seq {
            *ix = ActiveIndex {
                file_number: last.header.file_number,
                upto: last.header.first_seq,
                values: Default::default(),
            };
        }
        extend(ix)?;
        Ok(Some(ActiveSeqs {
            file_number: ix.file_number,
            upto: ix.upto,
            seqs: query.seqs_in(&ix.values),
        }))
    }

    /// The messages where `query` holds, in sequence order, written in
    /// `[start, end)` (µs since the epoch; `None`: unbounded), at most
    /// `limit`: [`Queue::where_field`] read to the end of what is
    /// published now.
    pub fn query_field(
        &self,
        query: FieldQuery,
        start: Option<u64>,
        end: Option<u64>,
        limit: Option<usize>,
    ) -> Result<Vec<OwnedMessage>> {
        let mut t = self.where_field(query)?;
        if let Some(s) = start {
            t.seek_time(s)?;
        }
        let mut out = Vec::new();
        while limit.is_none_or(|l| out.len() < l) {
            let Some(m) = t.read_next()? else { break };
            if end.is_some_and(|e| m.timestamp >= e) {
                break;
            }
            out.push(m.to_owned());
        }
        Ok(out)
    }

    /// Checks every secondary index file of every sealed data file:
    /// `(index file, field, state)` for each declared index, oldest file
    /// first. Sealed files without a valid footer are left out (reading
    /// their frames reports them).
    pub fn check_indexes(&self) -> Result<Vec<(std::path::PathBuf, String, IndexState)>> {
        self.check_open()?;
        self.inner().catalog.refresh()?;
        let files = self.inner().catalog.snapshot();
        let base = self.inner().config.path.as_path();
        let defs = self.indexes();
        let mut out = Vec::new();
        for f in &files[..files.len().saturating_sub(1)] {
            for def in &defs {
                if let Some(state) = crate::index::fields::check(base, f.id, &f.header, def) {
                    out.push((f.id.field_path(base, &def.name), def.name.clone(), state));
                }
            }
        }
        Ok(out)
    }
}
