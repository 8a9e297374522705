//! The queue: opens (and recovers) the files, owns the I/O thread, and
//! hands out appenders and tailers.
//!
//! [`Queue`] is one type whose methods live in one file per concern:
//! `open` (open, recover, start the writer), `metadata` (`metadata.json`,
//! the queue's identity and encryption entry), `read` (tailers and `get`),
//! `columns` (columnar reads), `fields` (secondary indexes), `keys` (key
//! lookups through the key index), `consumers` (named tailers and work
//! queues), `maintenance` (retention and compaction), `stats` (sizes and
//! figures, [`Stats`] and [`DataFileInfo`]) and `close`.

mod close;
mod columns;
mod consumers;
mod fields;
mod keys;
mod maintenance;
pub(crate) mod metadata;
mod open;
mod read;
mod schema;
mod stats;
mod typed;

pub use open::{reindex, reindex_with_key, writer_pid};
pub use stats::{DataFileInfo, Stats};

use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::config::{Config, QueueBuilder};
use crate::consumers::work_queue::QueueIdentity;
use crate::error::{Error, Result};
use crate::format::metadata::Metadata;
use crate::index::coverage::Coverage;
use crate::index::fields::{ActiveIndex, FieldIndexDef};
use crate::index::key_index::KeyIndexReader;
use crate::reader::tailer::Tailer;
use crate::reader::wake::WakeSource;
use crate::reader::watch::TailWatch;
use crate::recovery::RecoveryReport;
use crate::storage::lock::WriterLock;
use crate::writer::appender::Appender;
use crate::writer::shared::WriterShared;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

struct Writer {
    appender: Appender,
    shared: Arc<WriterShared>,
    thread: Mutex<Option<JoinHandle<Result<()>>>>,
    /// The key-compaction pass started after a roll (`compact_on_roll`),
    /// joined at close.
    compactor: Arc<Mutex<Option<JoinHandle<()>>>>,
    /// Released at close, so the queue can be reopened while this value lives.
    lock: Mutex<Option<WriterLock>>,
}

struct Inner {
    /// In-memory indexes of the active file, per declared field, built
    /// by field queries and extended by each (see `Queue::where_field`).
    active_fields: Mutex<std::collections::HashMap<FieldIndexDef, ActiveIndex>>,
    config: Config,
    catalog: Arc<Catalog>,
    writer: Option<Writer>,
    metadata: Mutex<Metadata>,
    recovery: RecoveryReport,
    /// Reader reused by `get`.
    getter: Mutex<Option<Tailer>>,
    /// Key-index lookups: the writer's (shares its mappings) or, read-only,
    /// opened on first use.
    key_reader: Mutex<Option<KeyIndexReader>>,
    /// Positions key lookups read from the data (where the key index did
    /// not cover them) and found without any keyed message: not read again.
    key_scanned: Mutex<Coverage>,
    closed: std::sync::atomic::AtomicBool,
    /// The wake-up word this handle's tailers sleep on.
    wake: Arc<WakeSource>,
    /// Waits for the tail for waiters without a thread (asyncio).
    watch: TailWatch,
    /// Which queue this is (work-queue jobs carry it).
    identity: QueueIdentity,
}

/// An open queue. `Send + Sync`; close it (or drop it) to flush and stop
/// the I/O thread.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let queue = litemq::QueueBuilder::new(dir.path().join("orders")).open()?;
/// queue.appender()?.append(b"order 1")?;
/// assert_eq!(queue.get(0)?.payload, b"order 1");
/// queue.close()?;
/// # Ok::<(), litemq::Error>(())
/// ```
pub struct Queue {
    /// This handle's own state: the writer's, or a reader's (read-only, or
    /// waiting for its first write). Calls go to [`Queue::inner`].
    own: Arc<Inner>,
    /// Set when opened with `lock_on_first_write` (and not read-only).
    lazy: Option<Box<LazyWriter>>,
}

/// The writer a handle opened with `lock_on_first_write` starts at its
/// first write: until then the handle reads as a read-only one does.
struct LazyWriter {
    /// The caller's options, for the writer's open.
    config: Config,
    writer: std::sync::OnceLock<Queue>,
    /// Held while the writer starts and while the handle closes: no writer
    /// starts on a closed handle.
    starting: Mutex<()>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("path", &self.inner().config.path)
            .field(
                "read_only",
                &(self.inner().config.read_only && self.lazy.is_none()),
            )
            .finish()
    }
}

impl QueueBuilder {
    /// Checks the options and opens (or creates) the queue.
    pub fn open(self) -> Result<Queue> {
        Queue::open(self.into_config()?)
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        // In a forked child the I/O thread does not exist: joining would hang.
        // (A lazy handle's: its writer's, once started.)
        let forked = self
            .inner()
            .writer
            .as_ref()
            .is_some_and(|w| w.appender.forked());
        if Arc::strong_count(&self.own) == 1 && !forked {
            let _ = self.shut_down(false);
        }
    }
}

impl Queue {
    /// The state calls go to: the writer's once a lazy handle started it.
    fn inner(&self) -> &Arc<Inner> {
        match self.lazy.as_ref().and_then(|l| l.writer.get()) {
            Some(w) => &w.own,
            None => &self.own,
        }
    }

    fn check_open(&self) -> Result<()> {
        if self
            .inner()
            .closed
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// The encryption key the queue was opened with, if it is encrypted
    /// (the Python work queue opens its dead-letter queue with it).
    pub fn encryption_key(&self) -> Option<[u8; 32]> {
        self.inner().config.encryption_key.as_ref().map(|k| k.0)
    }

    /// The queue's directory.
    pub fn path(&self) -> &Path {
        &self.inner().config.path
    }

    /// Whether this queue was opened for several writer processes (given,
    /// or remembered in `metadata.json`).
    pub fn is_multi_writer(&self) -> bool {
        self.inner().config.multi_writer
    }

    /// The file-shaping options in effect (given, or remembered in
    /// `metadata.json`), as they are remembered.
    pub fn options(&self) -> crate::format::metadata::StoredOptions {
        self.inner().config.stored()
    }

    /// A typed queue's schema versions (format 12), oldest first: the last
    /// is current, the one appends are checked against and reads show.
    /// `None` for an untyped queue.
    pub fn schema_versions(&self) -> Option<Arc<crate::format::typed::SchemaVersions>> {
        self.inner().catalog.schema_versions()
    }

    /// Schema version `version` of a typed queue (1-based), as bindings
    /// need it to decode a message of that version
    /// ([`Message::schema_version`](crate::Message::schema_version)): from
    /// the versions this handle knows, else from `metadata.json` read again
    /// (a writer declared it after this handle opened; the handle then
    /// knows the new versions too). `None` when the queue has no such
    /// version.
    pub fn schema_of_version(&self, version: u32) -> Result<Option<crate::format::typed::Schema>> {
        let catalog = &self.inner().catalog;
        if let Some(s) = catalog
            .schema_versions()
            .and_then(|v| v.get(version).cloned())
        {
            return Ok(Some(s));
        }
        let path = self.path().join(crate::storage::layout::METADATA_FILE);
        let Some(meta) = metadata::read_metadata(&path)? else {
            return Ok(None);
        };
        let Some(stored) = schema::stored(&meta, &path, catalog)? else {
            return Ok(None);
        };
        let found = stored.get(version).cloned();
        catalog.set_schema_versions(Some(Arc::new(stored)));
        Ok(found)
    }

    /// An appender; all appenders of a queue share one sequence.
    pub fn appender(&self) -> Result<Appender> {
        self.check_open()?;
        self.start_lazy_writer()?;
        let w = self.inner().writer.as_ref().ok_or(Error::ReadOnly)?;
        if w.appender.forked() {
            return Err(Error::Forked);
        }
        Ok(w.appender.clone())
    }

    /// The clock the queue stamps messages (and consumer commits) with.
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner().config.clock
    }

    /// Whether [`Queue::close`] was called. `len`, `first_seq`, `next_seq`
    /// and `stats` of a closed queue answer from the files as last seen.
    pub fn is_closed(&self) -> bool {
        self.inner()
            .closed
            .load(std::sync::atomic::Ordering::Acquire)
    }
}
