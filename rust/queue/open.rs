//! Opening a queue: recovery, the key index brought level with the data,
//! the I/O thread started (one writer, several, or lazily at the first
//! write), and the offline tools that take the writer lock (`reindex`).

use crate::catalog::Catalog;
use crate::compact::{self, CompactOptions};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::format::crypto;
use crate::format::metadata::Metadata;
use crate::format::position;
use crate::format::record::{self};
use crate::format::FORMAT_VERSION;
use crate::index::coverage::Coverage;
use crate::index::key_index::{self, KeyIndexConfig, KeyIndexWriter};
use crate::reader::keys::index_keys_from;
use crate::reader::wake::WakeSource;
use crate::reader::watch::TailWatch;
use crate::recovery::{recover, RecoveryReport};
use crate::retention::{self};
use crate::storage::layout::{KEY_INDEX_DIR, LOCK_FILE, METADATA_FILE};
use crate::storage::lock::{Role, WriterLock};
use crate::storage::wake::WakeFile;
use crate::writer::append_lock::{AppendLock, APPEND_LOCK_FILE};
use crate::writer::appender::{Appender, Batching};
use crate::writer::handoff::Handoff;
use crate::writer::io_thread::{AfterRoll, IoThread, KeyData, Resume};
use crate::writer::shared::WriterShared;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::metadata::{
    check_key, new_encryption, no_queue_here, queue_identity, read_metadata,
    refuse_foreign_directory, unlock, write_metadata,
};
use super::{schema, Inner, LazyWriter, Queue, Writer};
use crate::format::typed::SchemaVersions;

/// `coverage` as `metadata.json`'s `[start, end)` pairs.
fn ranges_of(coverage: &Coverage) -> Vec<(u64, u64)> {
    coverage.ranges().iter().map(|r| (r.start, r.end)).collect()
}

/// What the I/O thread runs after a roll: the retention policy, then (with
/// `compact_on_roll`) a key-compaction pass on a thread of its own, unless
/// the previous one still runs. `None` when the queue has neither.
fn after_roll(
    config: &Config,
    catalog: &Arc<Catalog>,
    compactor: &Arc<Mutex<Option<JoinHandle<()>>>>,
    shared: &Arc<WriterShared>,
) -> Option<AfterRoll> {
    use std::sync::atomic::Ordering::Relaxed;
    let policy = config.retention;
    let grace = config.compact_on_roll;
    if policy.is_none() && grace.is_none() {
        return None;
    }
    let (catalog, compactor, shared) = (catalog.clone(), compactor.clone(), shared.clone());
    let (fields, clock) = (config.fields.clone(), config.clock.clone());
    Some(Box::new(move |cat, now_us| {
        let deleted = match policy {
            Some(policy) => {
                let base = cat.base().to_path_buf();
                let min_consumer = || crate::consumers::min_position(&base);
                retention::run_if_idle(cat, &policy, now_us, &min_consumer)?
                    .map(|report| report.deleted_files)
            }
            None => None,
        };
        if let Some(grace_us) = grace {
            let mut slot = compactor.lock().unwrap_or_else(|e| e.into_inner());
            if slot.as_ref().is_none_or(JoinHandle::is_finished) {
                if let Some(done) = slot.take() {
                    let _ = done.join();
                }
                let (catalog, counters) = (catalog.clone(), shared.clone());
                let (fields, clock) = (fields.clone(), clock.clone());
                let spawned = std::thread::Builder::new()
                    .name("litemq-compact".into())
                    .spawn(move || {
                        let defs = fields.read().unwrap_or_else(|e| e.into_inner()).clone();
                        let opts = CompactOptions {
                            grace_us,
                            ..Default::default()
                        };
                        let now = clock.now_micros();
                        let c = &counters.counters;
                        match compact::run(&catalog, &opts, &defs, now, &mut |_, _| {}) {
                            Ok(_) => c.compactions.fetch_add(1, Relaxed),
                            Err(_) => c.compaction_errors.fetch_add(1, Relaxed),
                        };
                    });
                match spawned {
                    Ok(h) => *slot = Some(h),
                    Err(_) => {
                        shared.counters.compaction_errors.fetch_add(1, Relaxed);
                    }
                }
            }
        }
        Ok(deleted)
    }))
}

/// Rebuilds every key-index file of the queue at `path` from its data files.
/// The queue must not be open for writing (this takes the writer lock).
/// `progress` gets sequences as the scan passes them; returns the number of
/// keys indexed. The files equal those the writer built live.
pub fn reindex(path: &Path, config: KeyIndexConfig, progress: &mut dyn FnMut(u64)) -> Result<u64> {
    reindex_with_key(path, config, None, progress)
}

/// [`reindex`] of a queue that may be encrypted: `key` is its encryption
/// key (checked as an open checks it; the index gets keyed hashes).
pub fn reindex_with_key(
    path: &Path,
    config: KeyIndexConfig,
    key: Option<[u8; 32]>,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    let _lock = WriterLock::acquire(&path.join(LOCK_FILE), path)?;
    let Some(meta) = read_metadata(&path.join(METADATA_FILE))? else {
        return Err(no_queue_here(path));
    };
    let catalog = Arc::new(Catalog::load(path)?);
    let key = key.map(crate::config::EncryptionKey);
    if let Some(k) = check_key(path, key.as_ref(), &meta)? {
        catalog.set_key(Arc::new(k));
    }
    let mut writer =
        KeyIndexWriter::open_or_create(&path.join(KEY_INDEX_DIR), config).or_else(|_| {
            KeyIndexWriter::remove_all(&path.join(KEY_INDEX_DIR))?;
            KeyIndexWriter::open_or_create(&path.join(KEY_INDEX_DIR), config)
        })?;
    writer.clear()?;
    let keys = index_keys_from(&catalog, &mut writer, 0, progress)?;
    writer.close()?;
    Ok(keys)
}

/// Pid of the process holding the writer lock of the queue at `path`, if any.
pub fn writer_pid(path: &Path) -> Option<u32> {
    WriterLock::holder(&path.join(LOCK_FILE))
}

impl Queue {
    pub(crate) fn open(mut config: Config) -> Result<Queue> {
        // Indexes given with a schema are checked against it before
        // anything is created (the schema given is the current one after
        // the open, or the open fails).
        if let Some(s) = &config.schema {
            for d in config
                .fields
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                d.clone()
                    .for_schema(Some(s))?
                    .check_encrypted(config.encryption_key.is_some())?;
            }
        }
        // Verifying at startup is a writer's open: asked for, it runs now.
        if config.lock_on_first_write && !config.read_only && !config.verify_on_startup {
            return Queue::open_lazily(config);
        }
        config.lock_on_first_write = false;
        // The queue's own list of indexes (`add_index` adds to it), not one
        // shared with a clone of the builder.
        let defs = config
            .fields
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        config.fields = crate::index::fields::SharedDefs::new(std::sync::RwLock::new(defs));
        let base = config.path.clone();
        let meta_path = base.join(METADATA_FILE);
        // Options the caller did not give come from what the queue remembers
        // (read before locking: `multi_writer` decides how to lock).
        if let Ok(Some(m)) = read_metadata(&meta_path) {
            match &m.options {
                Some(stored) => config.apply_stored(stored, &meta_path)?,
                None => config.apply_before_v4(&m, &meta_path)?,
            }
        }
        if config.read_only {
            let Some(meta) = read_metadata(&meta_path)? else {
                return Err(no_queue_here(&base));
            };
            let catalog = Arc::new(Catalog::load(&base)?);
            unlock(&config, &meta, &catalog)?;
            let stored = schema::stored(&meta, &meta_path, &catalog)?;
            schema::install(
                &catalog,
                schema::for_reader(config.schema.as_ref(), stored)?,
                &config.fields,
            )?;
            let wake = WakeSource::reader(base);
            return Ok(Queue::assemble(
                config,
                catalog,
                None,
                meta,
                RecoveryReport::default(),
                wake,
            ));
        }

        if base.exists() && !base.is_dir() {
            return Err(Error::io(
                "open queue",
                &base,
                std::io::Error::from_raw_os_error(libc::ENOTDIR),
            ));
        }
        if !meta_path.exists() {
            refuse_foreign_directory(&base)?;
        }
        std::fs::create_dir_all(&base).map_err(|e| Error::io("create directory", &base, e))?;
        let lock_path = base.join(LOCK_FILE);
        let (lock, role) = if config.multi_writer {
            WriterLock::acquire_shared(&lock_path, &base)?
        } else {
            (WriterLock::acquire(&lock_path, &base)?, Role::First)
        };
        let append_lock = if config.multi_writer || base.join(APPEND_LOCK_FILE).exists() {
            Some(Arc::new(AppendLock::open(&base)?))
        } else {
            None
        };
        if role == Role::Joined {
            let append_lock = append_lock.expect("opened for several writers");
            return Queue::join(config, lock, append_lock);
        }
        let existing = read_metadata(&meta_path)?;
        // A writer process that died holding the append lock may have left
        // a half-written frame: recover as after a crash.
        let clean = existing.as_ref().is_some_and(|m| m.clean_shutdown)
            && !append_lock.as_ref().is_some_and(|l| l.is_held());
        let mut meta = existing.unwrap_or(Metadata {
            format_version: FORMAT_VERSION,
            created_us: config.clock.now_micros(),
            file_size: config.file_size,
            index_interval: config.index_interval,
            clean_shutdown: false,
            next_seq: 0,
            writer_pid: 0,
            key_index_upto: 0,
            key_index_last: None,
            key_index_clear: Vec::new(),
            options: None,
            encryption: config
                .encryption_key
                .as_ref()
                .map(|k| new_encryption(k, config.fixture_queue_id)),
            queue_id: None,
            schema: None,
        });
        // A queue's id is drawn once and kept for good (a restored copy
        // comes with its own): an encrypted queue's is the one its records
        // are sealed with.
        if meta.queue_id.is_none() {
            meta.queue_id = Some(
                meta.effective_queue_id()
                    .map_or_else(|| crypto::to_hex(&crypto::new_queue_id()), str::to_owned),
            );
        }
        let catalog = Arc::new(Catalog::load(&base)?);
        // Before recovery: re-indexing keys reads payloads and hashes keys.
        unlock(&config, &meta, &catalog)?;
        let (resume, report) = recover(
            &config.path,
            config.verify_on_startup,
            &catalog,
            clean.then_some(meta.next_seq),
        )?;
        // Work-queue marks past the data's end (a machine crash lost the
        // tail): moved back before anything new is written at those sequences.
        crate::consumers::work_queue::rewind_groups_past(&base, resume.next_seq)?;
        let data_end = match &resume.active {
            Some(a) => a.end_position(),
            None => position::encode(resume.next_file_number, 0),
        };
        let mut known_clear = Coverage::new();
        for &(start, end) in &meta.key_index_clear {
            known_clear.add(start..end);
        }
        let (key_index, key_clear) = key_index::catch_up::open_level_with_data(
            &config.path.join(KEY_INDEX_DIR),
            config.key_index,
            meta.key_index_upto,
            meta.key_index_last,
            key_index::catch_up::Data {
                start: catalog.first_position().unwrap_or(data_end),
                end: data_end,
                add_from: &mut |writer, from| index_keys_from(&catalog, writer, from, &mut |_| {}),
                has_keys: &mut |range| crate::reader::keys::has_keys(&catalog, range),
                known_clear: &known_clear,
            },
        )?;
        // The schema (format 12), as declared by this open: a new version is
        // recorded before any row of it is written.
        let holds_messages = catalog
            .first()
            .is_some_and(|f| resume.next_seq > f.header.first_seq);
        let stored = schema::stored(&meta, &meta_path, &catalog)?;
        let before = stored.clone();
        let versions = schema::for_writer(config.schema.as_ref(), stored, holds_messages)?;
        schema::check_dropped_indexes(before.as_ref(), versions.as_ref(), &config.fields)?;
        meta.schema = versions.as_ref().map(SchemaVersions::to_json_value);
        schema::install(&catalog, versions, &config.fields)?;
        // What this open checked (or kept): the next one, and read-only
        // lookups, need not read it again.
        meta.key_index_clear = ranges_of(&key_clear);
        let key_reader = key_index.reader();
        meta.clean_shutdown = false;
        // New files are written in this version (older files stay as they are).
        meta.format_version = FORMAT_VERSION;
        meta.writer_pid = std::process::id();
        meta.file_size = config.file_size;
        meta.index_interval = config.index_interval;
        meta.options = Some(config.stored());
        write_metadata(&meta_path, &meta)?;
        // Before other writer processes are let in: the first one creates
        // (or repairs) the wake-up word.
        let wake = WakeFile::create_or_open(&base)?.map(Arc::new);

        let multi = match append_lock {
            Some(l) if config.multi_writer => {
                // Start the shared tail from what recovery found, then let
                // other writer processes in.
                l.reset(resume.tail())?;
                lock.share(&lock_path)?;
                Some(l)
            }
            _ => None,
        };
        let q = Queue::start_writer(
            config, catalog, resume, key_index, lock, multi, meta, report, wake,
        )?;
        if !q.own.config.multi_writer {
            // Lookups share the writer's mappings; with several writers they
            // open the index like a reader (other processes add files).
            *q.own.key_reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(key_reader);
        }
        // What the open read of the data: lookups need not read it again.
        q.own
            .key_scanned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add_all(&key_clear);
        Ok(q)
    }

    /// Opens the queue as one more of several writer processes: no
    /// recovery (the first one did it), the tail comes from `append.lock`.
    pub(super) fn join(
        config: Config,
        lock: WriterLock,
        append_lock: Arc<AppendLock>,
    ) -> Result<Queue> {
        let base = config.path.clone();
        let Some(meta) = read_metadata(&base.join(METADATA_FILE))? else {
            return Err(no_queue_here(&base));
        };
        let catalog = Arc::new(Catalog::load(&base)?);
        unlock(&config, &meta, &catalog)?;
        let stored = schema::stored(&meta, &base.join(METADATA_FILE), &catalog)?;
        schema::install(
            &catalog,
            schema::for_joined(config.schema.as_ref(), stored)?,
            &config.fields,
        )?;
        // The first batch this process writes reloads the index under the
        // append lock (and repairs it if a writer died holding the lock).
        let key_index = KeyIndexWriter::attach(&base.join(KEY_INDEX_DIR), config.key_index)?;
        // Where this writer is comes from `append.lock` at its first batch.
        let resume = Resume::empty();
        let multi = Some(append_lock);
        let wake = WakeFile::create_or_open(&base)?.map(Arc::new);
        Queue::start_writer(
            config,
            catalog,
            resume,
            key_index,
            lock,
            multi,
            meta,
            RecoveryReport::default(),
            wake,
        )
    }

    /// Starts the I/O thread and assembles the queue around it.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of a queue, each built by open before the writer starts"
    )]
    fn start_writer(
        config: Config,
        catalog: Arc<Catalog>,
        resume: Resume,
        key_index: KeyIndexWriter,
        lock: WriterLock,
        append_lock: Option<Arc<AppendLock>>,
        meta: Metadata,
        report: RecoveryReport,
        wake: Option<Arc<WakeFile>>,
    ) -> Result<Queue> {
        // With several writer processes appenders count tickets (see Handoff).
        let multi = append_lock.is_some();
        let first = if multi { 0 } else { resume.next_seq };
        let shared = WriterShared::new(first, resume.next_seq, wake.clone());
        let compactor = Arc::new(Mutex::new(None));
        let (tx, rx) = crossbeam_channel::bounded(config.channel_capacity);
        let handoff = Arc::new(Handoff::new(tx, first, multi));
        let mut options = config.writer_options();
        options.key = catalog.key();
        let typed = catalog
            .schema_versions()
            .and_then(|v| v.current().cloned())
            .map(|s| Arc::new(crate::format::header::TypedFile::new(s)));
        options.typed = typed.clone();
        // Appenders build the frames of a batch themselves, but for an
        // encrypted queue (sealing needs the sequence, known to the I/O
        // thread only).
        let frame_clock = options.key.is_none().then(|| options.clock.clone());
        let (for_add, for_has) = (catalog.clone(), catalog.clone());
        let key_data = KeyData {
            add_from: Box::new(move |writer, from| {
                index_keys_from(&for_add, writer, from, &mut |_| {})
            }),
            has_keys: Box::new(move |range| crate::reader::keys::has_keys(&for_has, range)),
        };
        let io = IoThread::new(
            options,
            rx,
            handoff.clone(),
            shared.clone(),
            catalog.clone(),
            resume,
            key_index,
            append_lock,
            after_roll(&config, &catalog, &compactor, &shared),
            key_data,
        );
        let thread = std::thread::Builder::new()
            .name("litemq-io".into())
            .spawn(move || io.run())
            .map_err(|e| Error::io("spawn I/O thread", &config.path, e))?;
        // Sealing adds a nonce, a tag and maybe the extension byte: an
        // encrypted queue's largest record is that much smaller.
        let seal = if config.encryption_key.is_some() {
            crypto::SEAL_OVERHEAD + 1
        } else {
            0
        };
        let appender = Appender::new(
            handoff,
            shared.clone(),
            config.flush,
            crate::format::data_file::max_record_len(config.file_size) - seal,
            config.compression,
            config.max_decompressed,
            Batching {
                frame_clock,
                refusal: if config.encryption_key.is_some() {
                    Some("an encrypted queue (batches are not sealed)".into())
                } else {
                    None
                },
                fields: config.fields.clone(),
                max_members: (crate::writer::active::max_seqs(config.file_size) - 1)
                    .min(record::MAX_BATCH_COUNT as u64) as usize,
                typed: typed.clone(),
            },
        );
        let writer = Writer {
            appender,
            shared,
            thread: Mutex::new(Some(thread)),
            compactor,
            lock: Mutex::new(Some(lock)),
        };
        let wake = WakeSource::writer(config.path.clone(), wake);
        Ok(Queue::assemble(
            config,
            catalog,
            Some(writer),
            meta,
            report,
            wake,
        ))
    }

    fn assemble(
        config: Config,
        catalog: Arc<Catalog>,
        writer: Option<Writer>,
        meta: Metadata,
        recovery: RecoveryReport,
        wake: WakeSource,
    ) -> Queue {
        let wake = Arc::new(wake);
        catalog.set_max_decompressed(config.max_decompressed);
        let watch = TailWatch::new(catalog.clone(), wake.clone());
        let identity = queue_identity(&config.path, &meta);
        Queue {
            lazy: None,
            own: Arc::new(Inner {
                active_fields: Mutex::new(std::collections::HashMap::new()),
                config,
                catalog,
                writer,
                metadata: Mutex::new(meta),
                recovery,
                getter: Mutex::new(None),
                key_reader: Mutex::new(None),
                key_scanned: Mutex::new(Coverage::new()),
                closed: std::sync::atomic::AtomicBool::new(false),
                wake,
                watch,
                identity,
            }),
        }
    }

    /// Starts the writer of a handle opened with `lock_on_first_write` (takes
    /// the lock, recovers, starts the I/O thread), once; a no-op otherwise.
    /// `Locked` when another writer holds the queue.
    pub(super) fn start_lazy_writer(&self) -> Result<()> {
        let Some(lazy) = &self.lazy else {
            return Ok(());
        };
        if lazy.writer.get().is_some() {
            return Ok(());
        }
        let _starting = lazy.starting.lock().unwrap_or_else(|e| e.into_inner());
        self.check_open()?;
        if lazy.writer.get().is_none() {
            let writer = Queue::open(lazy.config.clone())?;
            let _ = lazy.writer.set(writer);
        }
        Ok(())
    }

    /// Opens with `lock_on_first_write`: a read-only handle that starts its
    /// writer at the first write. A queue not yet there is created now, by a
    /// writer that closes at once (its clean-shutdown mark spares the next
    /// writer a recovery).
    fn open_lazily(mut config: Config) -> Result<Queue> {
        config.lock_on_first_write = false;
        let meta_path = config.path.join(METADATA_FILE);
        if !meta_path.exists() {
            match Queue::open(config.clone()) {
                Ok(q) => q.close()?,
                // Another process created it meanwhile, and writes to it.
                Err(Error::Locked { .. }) if meta_path.exists() => {}
                Err(e) => return Err(e),
            }
        }
        let mut reader = config.clone();
        reader.read_only = true;
        // The writer declares the schema at the first write (an evolution
        // is not a read-only handle's to refuse).
        reader.schema = None;
        let mut q = Queue::open(reader)?;
        q.lazy = Some(Box::new(LazyWriter {
            config,
            writer: std::sync::OnceLock::new(),
            starting: Mutex::new(()),
        }));
        Ok(q)
    }
}
