//! The queue: opens (and recovers) the files, owns the I/O thread, and
//! hands out appenders and tailers.

use crate::compact::{self, CompactOptions, CompactReport};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::clock::Clock;
use crate::config::{Config, QueueBuilder};
use crate::consumers::work_queue::{
    DeadLetterSink, Handles, PendingJob, QueueIdentity, WorkQueue, WorkQueueInfo, WorkQueueOptions,
};
use crate::consumers::{Consumer, ConsumerInfo, ConsumerOptions};
use crate::error::{Error, Result};
use crate::format::crypto;
use crate::format::metadata::{is_queue_id, Metadata, StoredEncryption};
use crate::format::position;
use crate::format::record::{self, Record};
use crate::format::{FORMAT_VERSION, OLDEST_READABLE_VERSION};
use crate::index::coverage::Coverage;
use crate::index::fields::{ActiveIndex, FieldIndexDef, FieldQuery, IndexState};
use crate::index::key_index::{self, KeyIndexConfig, KeyIndexReader, KeyIndexWriter};
use crate::reader::backward::BackwardTailer;
use crate::reader::catalog::{still_listed, Catalog};
use crate::reader::columns::{ColumnSet, Columns};
use crate::reader::field::ActiveSeqs;
use crate::reader::keys::index_keys_from;
use crate::reader::tailer::{Message, OwnedMessage, Start, Tailer};
use crate::reader::topic::{TopicFilter, TopicSelector};
use crate::reader::wake::WakeSource;
use crate::reader::watch::TailWatch;
use crate::recovery::{recover, RecoveryReport};
use crate::retention::{self, RetentionPolicy, RetentionReport};
use crate::storage::fsutil::write_atomic;
use crate::storage::layout::{KEY_INDEX_DIR, LOCK_FILE, METADATA_FILE};
use crate::storage::lock::{Role, WriterLock};
use crate::storage::mapped::allocated_bytes;
use crate::storage::mapped::Mapping;
use crate::storage::wake::WakeFile;
use crate::writer::append_lock::{AppendLock, APPEND_LOCK_FILE};
use crate::writer::appender::{Appender, Batching};
use crate::writer::handoff::Handoff;
use crate::writer::io_thread::{AfterRoll, IoThread, Resume};
use crate::writer::shared::WriterShared;

/// One data file of a queue, for planning parallel reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFileInfo {
    /// The data file.
    pub path: std::path::PathBuf,
    /// Its number (the name without the date directories).
    pub file_number: u64,
    /// Sequence of the file's first message.
    pub first_seq: u64,
    /// One past its last message (the next file's first, or the queue's end).
    pub end_seq: u64,
    /// When it was created, µs since the Unix epoch.
    pub created_us: u64,
    /// The largest the file may grow to (`file_size` when it was created).
    pub size: u64,
    /// Bytes holding data: the header and the frames (up to the end-of-file
    /// marker, or what is published of the file being written).
    pub bytes_written: u64,
    /// Bytes of disk the data file holds (`st_blocks` × 512).
    pub bytes_allocated: u64,
    /// Bytes of disk its sparse and dense indexes hold.
    pub index_bytes_allocated: u64,
}

/// Figures describing a queue, for monitoring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Sequence of the oldest message kept.
    pub first_seq: u64,
    /// Sequence the next message gets.
    pub next_seq: u64,
    /// Data files on disk.
    pub files: u64,
    /// Bytes of disk the queue's files hold (`st_blocks` × 512): data,
    /// sparse-index, dense-index and key-index files.
    pub disk_bytes: u64,
    /// Bytes of the data files that hold data (headers and frames).
    pub data_bytes_written: u64,
    /// Bytes of disk the data files hold.
    pub data_bytes_allocated: u64,
    /// Bytes of disk the sparse-index, dense-index and key-index files hold.
    pub index_bytes_allocated: u64,
    /// Every sequence below this is msync'd (writer only).
    pub durable_seq: u64,
    /// msyncs done (writer only).
    pub syncs: u64,
    /// Files started since open (writer only).
    pub rolls: u64,
    /// Key-compaction passes run after a roll that completed, and that
    /// failed (writer only, `compact_on_roll`).
    pub compactions: u64,
    /// See `compactions`.
    pub compaction_errors: u64,
    /// Record bytes written since open (writer only).
    pub bytes_written: u64,
    /// Batches an appending thread wrote itself, finding the I/O thread
    /// asleep (writer only; `Async` and `Batch` modes, one writer process).
    pub appender_writes: u64,
    /// Append locks this process took over from dead writer processes
    /// (several writers only).
    pub takeovers: u64,
    /// Blocking reads of this handle sleep on the queue's wake-up word
    /// (`wake.ctl`); false: they poll with back-off (no usable control file,
    /// one this handle cannot open read-write, or not Linux).
    pub wake_word: bool,
    /// Followers registered to sleep on the wake-up word now, in every
    /// process (a follower killed while registered counts until a writer
    /// resets the count, see `waiter_resets`).
    pub waiters: u64,
    /// `FUTEX_WAKE` calls this handle's writer made: only when followers
    /// were registered, never for a queue nobody waits on.
    pub wake_calls: u64,
    /// Followers those calls woke.
    pub woken: u64,
    /// Waiter counts this handle's writer found stale (left by followers
    /// killed while waiting) and reset to 0.
    pub waiter_resets: u64,
    /// Opened with `read_only`.
    pub read_only: bool,
    /// What recovery found when the queue was opened.
    pub recovery: RecoveryReport,
}

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

/// The identity of the queue at `base` whose metadata is `meta`: its
/// `queue_id` (or an encrypted queue's id); for a queue without one yet
/// (a read-only handle of a queue no writer of this version has opened),
/// the metadata file's device and inode and the queue's creation time.
fn queue_identity(base: &Path, meta: &Metadata) -> QueueIdentity {
    if let Some(id) = meta
        .effective_queue_id()
        .and_then(crypto::from_hex)
        .and_then(|b| <[u8; 16]>::try_from(b).ok())
    {
        return QueueIdentity::Id(u128::from_be_bytes(id));
    }
    let (dev, ino) = std::fs::metadata(base.join(METADATA_FILE))
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        })
        .unwrap_or((0, 0));
    QueueIdentity::File {
        dev,
        ino,
        created_us: meta.created_us,
    }
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

fn read_metadata(path: &Path) -> Result<Option<Metadata>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let m: Metadata = serde_json::from_slice(&bytes).map_err(|e| {
                Error::corrupted(path, 0, None, format!("metadata.json does not parse: {e}"))
            })?;
            if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&m.format_version) {
                return Err(Error::UnsupportedVersion {
                    path: path.to_path_buf(),
                    found: m.format_version,
                    supported: FORMAT_VERSION,
                });
            }
            if let Some(id) = m.queue_id.as_deref().filter(|id| !is_queue_id(id)) {
                return Err(Error::corrupted(
                    path,
                    0,
                    None,
                    format!("queue_id {id:?} is not 32 lowercase hex digits"),
                ));
            }
            Ok(Some(m))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

fn no_queue_here(base: &Path) -> Error {
    Error::io(
        "open queue",
        base,
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no litemq queue here (metadata.json missing)",
        ),
    )
}

/// Whether `name`, found in a directory without `metadata.json`, may be
/// litemq's own: a queue whose metadata file is missing (its writer died
/// while creating it, or the file was lost) is still opened and recovered.
fn is_queue_entry(name: &str) -> bool {
    // What an atomic write killed before its rename leaves (`write_atomic`).
    let tmp_of = |file: &str| name.strip_suffix(".tmp").is_some_and(|n| n == file);
    name.starts_with('.')
        || tmp_of(METADATA_FILE)
        || tmp_of(crate::storage::wake::WAKE_FILE)
        || [
            APPEND_LOCK_FILE,
            crate::storage::wake::WAKE_FILE,
            KEY_INDEX_DIR,
            crate::consumers::CONSUMERS_DIR,
            crate::consumers::work_queue::WORK_QUEUES_DIR,
        ]
        .contains(&name)
        || (name.len() == 4 && name.bytes().all(|b| b.is_ascii_digit()))
}

/// Refuses to create a queue in a directory that holds something else (a
/// Spark output dataset, a directory of queues, anyone's files): a queue
/// made there would hide what is in it from readers of datasets.
fn refuse_foreign_directory(base: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(base) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        // Not a directory, or unreadable: the open reports it.
        Err(_) => return Ok(()),
    };
    let mut foreign: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !is_queue_entry(name))
        .collect();
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    let more = foreign.len().saturating_sub(5);
    foreign.truncate(5);
    let mut listed = foreign.join(", ");
    if more > 0 {
        listed.push_str(&format!(" and {more} more"));
    }
    Err(Error::io(
        "create queue",
        base,
        std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{} is not empty and holds no litemq queue (no metadata.json; it holds {listed}): \
                 a queue is created only in a new or empty directory (to read a directory of \
                 queues, open each queue in it)",
                base.display()
            ),
        ),
    ))
}

/// The `"encryption"` entry of a new encrypted queue: a random queue id and
/// the key check value.
fn new_encryption(key: &crate::config::EncryptionKey, id: Option<[u8; 16]>) -> StoredEncryption {
    StoredEncryption {
        cipher: crypto::CIPHER_NAME.to_owned(),
        queue_id: crypto::to_hex(&id.unwrap_or_else(crypto::new_queue_id)),
        key_check: crypto::to_hex(&crypto::key_check(&key.0)),
    }
}

/// Checks the key given (if any) against the queue's `metadata.json` and
/// hands the queue key to the catalog: an encrypted queue opened without
/// its key or with another one, or a key given to a queue created without
/// encryption, is an error here, at open, never garbage later.
fn unlock(config: &Config, meta: &Metadata, catalog: &Catalog) -> Result<()> {
    if let Some(mut key) = check_key(&config.path, config.encryption_key.as_ref(), meta)? {
        if let (Some(_), Some(k)) = (config.fixture_queue_id, &config.encryption_key) {
            key = key.with_synthetic_nonces(&k.0);
        }
        catalog.set_key(Arc::new(key));
    }
    Ok(())
}

/// The queue key of a queue whose metadata is `meta`, opened with `key`
/// (see [`unlock`]); `None` when the queue is not encrypted.
pub(crate) fn check_key(
    path: &Path,
    key: Option<&crate::config::EncryptionKey>,
    meta: &Metadata,
) -> Result<Option<crypto::QueueKey>> {
    let refuse = |reason: &str| Error::Encryption {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };
    match (&meta.encryption, key) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(refuse(
            "the queue is encrypted; open it with its encryption_key",
        )),
        (None, Some(_)) => Err(refuse(
            "the queue was created without encryption (encryption is chosen when a queue \
             is created); open it without encryption_key",
        )),
        (Some(e), Some(key)) => {
            if e.cipher != crypto::CIPHER_NAME {
                return Err(refuse(&format!(
                    "metadata.json names cipher {:?}; this litemq knows {:?}",
                    e.cipher,
                    crypto::CIPHER_NAME
                )));
            }
            let id: [u8; crypto::QUEUE_ID_LEN] = crypto::from_hex(&e.queue_id)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| refuse("metadata.json has a malformed encryption queue_id"))?;
            if crypto::from_hex(&e.key_check).is_none() {
                return Err(refuse("metadata.json has a malformed key_check"));
            }
            if crypto::from_hex(&e.key_check).as_deref() != Some(&crypto::key_check(&key.0)[..]) {
                return Err(Error::WrongKey {
                    path: path.to_path_buf(),
                });
            }
            Ok(Some(crypto::QueueKey::new(&key.0, id)))
        }
    }
}

fn write_metadata(path: &Path, m: &Metadata) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(m).expect("metadata serializes");
    write_atomic(path, &bytes)
}

impl QueueBuilder {
    /// Checks the options and opens (or creates) the queue.
    pub fn open(self) -> Result<Queue> {
        Queue::open(self.into_config()?)
    }
}

impl Queue {
    pub(crate) fn open(mut config: Config) -> Result<Queue> {
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
    fn join(config: Config, lock: WriterLock, append_lock: Arc<AppendLock>) -> Result<Queue> {
        let base = config.path.clone();
        let Some(meta) = read_metadata(&base.join(METADATA_FILE))? else {
            return Err(no_queue_here(&base));
        };
        let catalog = Arc::new(Catalog::load(&base)?);
        unlock(&config, &meta, &catalog)?;
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
        let io = IoThread::new(
            config.writer_options(),
            rx,
            handoff.clone(),
            shared.clone(),
            catalog.clone(),
            resume,
            key_index,
            append_lock,
            after_roll(&config, &catalog, &compactor, &shared),
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
                refusal: if config.encryption_key.is_some() {
                    Some("an encrypted queue (batches are not sealed)".into())
                } else {
                    None
                },
                fields: config.fields.clone(),
                max_members: (crate::writer::active::max_seqs(config.file_size) - 1)
                    .min(record::MAX_BATCH_COUNT as u64) as usize,
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

    /// The state calls go to: the writer's once a lazy handle started it.
    fn inner(&self) -> &Arc<Inner> {
        match self.lazy.as_ref().and_then(|l| l.writer.get()) {
            Some(w) => &w.own,
            None => &self.own,
        }
    }

    /// Starts the writer of a handle opened with `lock_on_first_write` (takes
    /// the lock, recovers, starts the I/O thread), once; a no-op otherwise.
    /// `Locked` when another writer holds the queue.
    fn start_lazy_writer(&self) -> Result<()> {
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
        let mut q = Queue::open(reader)?;
        q.lazy = Some(Box::new(LazyWriter {
            config,
            writer: std::sync::OnceLock::new(),
            starting: Mutex::new(()),
        }));
        Ok(q)
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
    #[cfg(feature = "python")]
    pub(crate) fn encryption_key(&self) -> Option<[u8; 32]> {
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

    /// Every topic stream (topic and queue id) with messages still in the
    /// queue: how many, the first and last sequence, the last timestamp.
    /// Sealed files are counted from their topic index; files without one
    /// (the active file, an index not built yet) are read.
    pub fn topics(&self) -> Result<Vec<crate::reader::topics_summary::TopicInfo>> {
        let mut t = self.tailer(Start::Beginning)?;
        crate::reader::topics_summary::topic_summary(&self.inner().catalog, &mut t)
    }

    /// The handle's [`TailWatch`]: register a [`crate::Notify`] to hear
    /// when a message is published, without a thread per waiter.
    pub fn tail_watch(&self) -> TailWatch {
        self.inner().watch.clone()
    }

    /// A tailer positioned at `start`.
    pub fn tailer(&self, start: Start) -> Result<Tailer> {
        self.check_open()?;
        self.wait_visible()?;
        if start == Start::Beginning {
            self.first_seq(); // drops files retention removed from the catalog
        }
        let mut t = self.new_tailer();
        match start {
            Start::Beginning => {}
            Start::End => t.seek_end()?,
            Start::Seq(seq) => t.seek(seq)?,
        }
        Ok(t)
    }

    /// A tailer reading newest first from `start`: [`Start::End`] the
    /// newest message, [`Start::Seq`] that one, [`Start::Beginning`] only
    /// the oldest. See [`BackwardTailer`].
    pub fn backward_tailer(&self, start: Start) -> Result<BackwardTailer> {
        self.check_open()?;
        self.wait_visible()?;
        let first = self.first_seq();
        let mut t = self.new_tailer();
        let before = match start {
            Start::End => {
                t.seek_end()?;
                t.next_seq()
            }
            Start::Beginning => {
                t.seek_end()?;
                if t.next_seq() > first {
                    first + 1
                } else {
                    first
                }
            }
            Start::Seq(seq) => {
                t.seek(seq)?;
                // `seq` may be the end (nothing there yet): start below it.
                if t.read_next()?.is_some() {
                    seq + 1
                } else {
                    seq
                }
            }
        };
        Ok(BackwardTailer::new(t, before, first))
    }

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
        // Field indexes do not look inside batches compressed together
        // (format 9): refused on a queue that holds one. Appends of batches
        // check the declared indexes under the read lock taken above for
        // writing, so every batch is in the files once the flush returns.
        if let Some(w) = &self.inner().writer {
            w.appender.flush()?;
        }
        self.inner().catalog.refresh()?;
        for info in self.inner().catalog.snapshot().iter() {
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
        let base = self.inner().config.path.as_path();
        let mut wrote = 0;
        for (i, f) in sealed.iter().enumerate() {
            wrote +=
                crate::index::fields::ensure(base, f.id, &f.header, std::slice::from_ref(&def));
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
        if !self.indexes().contains(&query.def) {
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

    /// A tailer at the first file, told what the metadata knows is
    /// published (after a clean close): a zero length word before that is
    /// damage.
    fn new_tailer(&self) -> Tailer {
        let mut t = Tailer::new(self.inner().catalog.clone(), self.inner().config.wait);
        t.set_wake(self.inner().wake.clone());
        let meta = self
            .inner()
            .metadata
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if meta.clean_shutdown {
            t.expect_published(meta.next_seq);
        }
        t
    }

    /// One message by sequence, copied out. A message below `next_seq` that
    /// cannot be reached is damage ([`Error::Corrupted`]), never
    /// [`Error::NotFound`].
    pub fn get(&self, seq: u64) -> Result<OwnedMessage> {
        self.get_with(seq, |m| m.to_owned())
    }

    /// As [`Queue::get`], handing `f` the message borrowed from its file
    /// (`f` builds what the caller keeps, with one copy of the payload at
    /// most) and returning what it returns. `f` may run more than once
    /// (when the file turns out to have been deleted meanwhile): only what
    /// the last call returned is kept.
    pub fn get_with<R>(&self, seq: u64, mut f: impl FnMut(&Message<'_>) -> R) -> Result<R> {
        self.check_open()?;
        // Read-your-writes: only a sequence this process may still be
        // writing needs the wait (one atomic load otherwise). A read-only
        // handle does not look for the end of the data first (a directory
        // listing and two mappings, ~90 µs): it reads, and only a miss asks
        // where the data ends, for the error.
        if let Some(w) = &self.inner().writer {
            if self.inner().config.multi_writer || seq >= w.shared.written() {
                self.wait_visible()?;
            }
        }
        let mut guard = self
            .inner()
            .getter
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut told = false;
        let mut rechecked = false;
        loop {
            let t = match guard.as_mut() {
                Some(t) => t,
                None => guard.insert(self.new_tailer()),
            };
            let read = t
                .read_at(seq)
                .map(|m| m.map(|m| (f(&m), position::decode(m.position()).0, m.mapping().clone())));
            match read {
                Ok(Some((got, number, map))) => {
                    // One check per call that the file is still there: done
                    // already when this call mapped it.
                    if rechecked
                        || guard.as_ref().is_some_and(Tailer::file_just_checked)
                        || self.file_still_kept(number, &map)
                    {
                        return Ok(got);
                    }
                    // Retention (another process) deleted the file this
                    // reader still maps: forget it and look again.
                    *guard = None;
                    self.inner().catalog.refresh()?;
                    rechecked = true;
                    continue;
                }
                Ok(None) | Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            let (first, next) = (self.first_seq(), self.next_seq());
            if told || seq < first || seq >= next {
                return Err(Error::NotFound { seq, first, next });
            }
            // Published, yet not reached: a hole on the way. Read again,
            // knowing that, to report where.
            if let Some(t) = guard.as_mut() {
                t.expect_published(next);
            }
            told = true;
        }
    }

    /// False when data file `number`, which a message was read from through
    /// `map`, is gone: retention in
    /// another process deleted it while this handle kept it mapped. Free
    /// (no system call) for the file being written, which retention never
    /// deletes: the catalog's last file while it still has its full length
    /// (a sealed version-4 file is trimmed; a version-3 file is not, so a
    /// handle whose catalog is behind may still return a message from a
    /// sealed version-3 file that was just deleted). Otherwise
    /// [`still_listed`] of `map` (a load of its removal mark, or for a file
    /// older than format 10 an `fstat` or a `stat`).
    fn file_still_kept(&self, number: u64, map: &Mapping) -> bool {
        let catalog = &self.inner().catalog;
        let Some(f) = catalog.at_or_after_number(number) else {
            return true;
        };
        if f.header.file_number != number {
            return true;
        }
        let last = catalog.last().is_some_and(|l| l.id == f.id);
        if last && map.len() as u64 == f.header.file_size {
            return true;
        }
        still_listed(map, f.header.version)
    }

    /// Read-your-writes: returns once every message this process appended
    /// before the call is visible to readers (written to the mapping; use
    /// `Appender::flush` for durability). Called by `get` and `tailer`.
    pub fn wait_visible(&self) -> Result<()> {
        match &self.inner().writer {
            // A poisoned or closed writer writes nothing more: readers
            // read what is there.
            Some(w) if !w.appender.forked() => match w.appender.wait_written() {
                Err(Error::Closed | Error::Poisoned { .. }) => Ok(()),
                other => other,
            },
            _ => Ok(()),
        }
    }

    /// Columns of messages `start..end` (at most `max_rows`), in Arrow layout.
    pub fn read_columns(&self, start: u64, end: u64, max_rows: usize) -> Result<Columns> {
        self.read_column_set(start, end, max_rows, ColumnSet::ALL)
    }

    /// As [`Queue::read_columns`], filling only the columns in `cols`.
    pub fn read_column_set(
        &self,
        start: u64,
        end: u64,
        max_rows: usize,
        cols: ColumnSet,
    ) -> Result<Columns> {
        self.read_field_columns(None, start, end, max_rows, cols, &[])
            .map(|(b, _)| b)
    }

    /// As [`Queue::read_column_set`], with a column per declared index in
    /// `fields` (see [`crate::reader::columns::FieldColumn`]) and, with
    /// `query`, only the messages where it holds, read as
    /// [`Queue::where_field`] reads them (a sealed file whose zone map
    /// excludes the query is not opened). A field or query on an index not
    /// declared is [`Error::InvalidArgument`]. Returns the columns and the
    /// sequence to read on from (at most `end`).
    pub fn read_field_columns(
        &self,
        query: Option<FieldQuery>,
        start: u64,
        end: u64,
        max_rows: usize,
        cols: ColumnSet,
        fields: &[FieldIndexDef],
    ) -> Result<(Columns, u64)> {
        self.check_open()?;
        let declared = self.indexes();
        if let Some(d) = fields.iter().find(|d| !declared.contains(d)) {
            return Err(Error::InvalidArgument(format!(
                "no {} index on {:?}: declare it with add_index (or indexes=) first",
                d.kind.name(),
                d.name
            )));
        }
        if end > self.next_seq() {
            self.wait_visible()?;
        }
        let first = self.first_seq();
        let whole = query.is_none();
        let mut t = match query {
            Some(q) => self.where_field(q)?,
            None => Tailer::new(self.inner().catalog.clone(), self.inner().config.wait),
        };
        if start.max(first) >= end {
            return Ok((Columns::empty(0, cols).with_fields(fields), end.max(start)));
        }
        if whole {
            // Whole files on several threads (see `Columns::read_parallel`).
            let range = (start.max(first), end, max_rows);
            let (catalog, wait) = (&self.inner().catalog, self.inner().config.wait);
            let threads = crate::reader::columns::read_threads();
            if let Some(b) = Columns::read_parallel(catalog, wait, range, cols, fields, threads)? {
                let next = b.next_seq.min(end);
                return Ok((b, next));
            }
        }
        t.seek(start.max(first))?;
        let b = Columns::read_fields(&mut t, end, max_rows, cols, fields)?;
        Ok((b, t.next_seq().min(end)))
    }

    /// As [`Queue::read_column_set`], keeping only the messages `selector`
    /// wants (a topic, a queue id of it, tags; as [`Tailer::select`]):
    /// files without topics are skipped, a sealed file's topic index gives
    /// the frames to read, other files are read frame by frame; every row
    /// is compared exactly. `fields` adds a column per declared index, as
    /// [`Queue::read_field_columns`]. Returns the columns and the sequence
    /// to read on from (`end` once the read got there).
    pub fn read_column_selected(
        &self,
        (start, end, max_rows): (u64, u64, usize),
        cols: ColumnSet,
        selector: TopicSelector,
        fields: &[FieldIndexDef],
    ) -> Result<(Columns, u64)> {
        self.check_open()?;
        if end > self.next_seq() {
            self.wait_visible()?;
        }
        let first = self.first_seq();
        let start = start.max(first);
        if start >= end {
            return Ok((Columns::empty(0, cols).with_fields(fields), end.max(start)));
        }
        let catalog = &self.inner().catalog;
        let mut t = Tailer::new(catalog.clone(), self.inner().config.wait);
        t.seek(start)?;
        let mut filter = TopicFilter::new(selector, crate::reader::tailer::scan_topics);
        Columns::read_filtered(&mut t, catalog, &mut filter, (end, max_rows), cols, fields)
    }

    /// Messages whose key is exactly `key`, in sequence order, stored in
    /// `[start_us, end_us)` when given, at most `limit` of them. Answered
    /// from the key index: only files whose time range can match are read;
    /// a batch frame (format 9) it points at is decoded, and each member
    /// with the key is a match.
    /// Items pointing into a data file missing from the middle of the queue
    /// are [`Error::Corrupted`] (those retention deleted are skipped).
    pub fn find(
        &self,
        key: &[u8],
        start_us: Option<u64>,
        end_us: Option<u64>,
        limit: Option<usize>,
    ) -> Result<Vec<OwnedMessage>> {
        self.find_where(key, None, start_us, end_us, limit)
    }

    /// As [`Queue::find`], returning only the messages `selector` wants (its
    /// topic, queue id and tags, compared exactly on each message the key
    /// index finds): RocketMQ's query by key within a topic.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let queue = litemq::QueueBuilder::new(dir.path()).open()?;
    /// let app = queue.appender()?;
    /// for topic in ["orders", "audit"] {
    ///     app.append_record(&litemq::Record {
    ///         key: Some(b"k"),
    ///         topic: Some(topic),
    ///         ..litemq::Record::new(b"v")
    ///     })?;
    /// }
    /// let orders = litemq::TopicSelector { topic: Some("orders".into()), ..Default::default() };
    /// let found = queue.find_in_topic(b"k", &orders, None, None, None)?;
    /// assert_eq!(found.iter().map(|m| m.seq).collect::<Vec<_>>(), [0]);
    /// # Ok::<(), litemq::Error>(())
    /// ```
    pub fn find_in_topic(
        &self,
        key: &[u8],
        selector: &TopicSelector,
        start_us: Option<u64>,
        end_us: Option<u64>,
        limit: Option<usize>,
    ) -> Result<Vec<OwnedMessage>> {
        self.find_where(key, Some(selector), start_us, end_us, limit)
    }

    fn find_where(
        &self,
        key: &[u8],
        selector: Option<&TopicSelector>,
        start_us: Option<u64>,
        end_us: Option<u64>,
        limit: Option<usize>,
    ) -> Result<Vec<OwnedMessage>> {
        let positions = self.key_positions(key, start_us, end_us)?;
        let limit = limit.unwrap_or(usize::MAX);
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.read_key_positions(key, positions, false, &mut |m| {
            let in_range = start_us.is_none_or(|s| m.timestamp >= s)
                && end_us.is_none_or(|e| m.timestamp < e)
                && selector.is_none_or(|s| s.matches(m.record()));
            if in_range {
                out.push(m.to_owned());
            }
            out.len() < limit
        })?;
        Ok(out)
    }

    /// The last message appended with `key`, through the key index: `None`
    /// when there is none, or when the last one is a tombstone
    /// ([`Record::tombstone`](crate::Record), the key's value deleted).
    /// Kafka's compacted-topic reading of a key: the latest value wins, by
    /// sequence, members of batches (format 9) included.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let queue = litemq::QueueBuilder::new(dir.path()).open()?;
    /// let app = queue.appender()?;
    /// app.append_record(&litemq::Record { key: Some(b"k"), ..litemq::Record::new(b"v1") })?;
    /// app.append_record(&litemq::Record { key: Some(b"k"), ..litemq::Record::new(b"v2") })?;
    /// assert_eq!(queue.get_latest(b"k")?.unwrap().payload, b"v2");
    /// app.append_record(&litemq::Record { key: Some(b"k"), tombstone: true, ..litemq::Record::new(b"") })?;
    /// assert!(queue.get_latest(b"k")?.is_none());
    /// # Ok::<(), litemq::Error>(())
    /// ```
    pub fn get_latest(&self, key: &[u8]) -> Result<Option<OwnedMessage>> {
        let positions = self.key_positions(key, None, None)?;
        let mut latest = None;
        self.read_key_positions(key, positions, true, &mut |m| {
            latest = Some(m.to_owned());
            false
        })?;
        Ok(latest.filter(|m| !m.tombstone))
    }

    /// The positions between the data's start and the key index's last
    /// item that no key-index file covers (a writer's own index, complete:
    /// they hold no keyed message). `None` without an index to ask.
    fn key_index_gaps(&self) -> Option<Vec<(u64, u64)>> {
        let guard = self
            .inner()
            .key_reader
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (covered, last) = guard.as_ref()?.coverage().ok()?;
        let first = self.inner().catalog.first_position()?;
        let within = first..last?.saturating_add(1);
        Some(
            covered
                .gaps(within)
                .into_iter()
                .map(|r| (r.start, r.end))
                .collect(),
        )
    }

    /// Positions of the frames that may hold a message with `key` stored in
    /// `[start_us, end_us)`, ascending (hash collisions included): the key
    /// index's, and, for the positions the index does not cover (see
    /// `index::coverage`: a file of it lost, none at all, or its newest
    /// items not yet added by a writer in another process), those read from
    /// the data itself. Never fewer than the queue holds: what cannot be
    /// read is an error. Data files out of order (swapped) are
    /// [`Error::Corrupted`].
    fn key_positions(
        &self,
        key: &[u8],
        start_us: Option<u64>,
        end_us: Option<u64>,
    ) -> Result<Vec<u64>> {
        self.check_open()?;
        self.wait_visible()?;
        let catalog = &self.inner().catalog;
        catalog.check_order()?;
        let mut positions = Vec::new();
        let mut covered = Coverage::new();
        {
            let mut guard = self
                .inner()
                .key_reader
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if guard.is_none() {
                let dir = self.path().join(KEY_INDEX_DIR);
                if dir.is_dir() {
                    *guard = Some(KeyIndexReader::open(&dir)?);
                }
            }
            if let Some(reader) = guard.as_ref() {
                let (c, last) = reader.coverage()?;
                covered = c;
                if !reader.is_standalone() {
                    // The writer of this handle adds every keyed message it
                    // writes (and brought the index level with the data
                    // when it opened): past the last item, it covers all.
                    covered.add(last.map_or(0, |l| l + 1)..u64::MAX);
                }
                match catalog.key() {
                    Some(k) => {
                        reader.lookup_into(&k.index_key(key), start_us, end_us, &mut positions)?
                    }
                    None => reader.lookup_into(key, start_us, end_us, &mut positions)?,
                }
            }
        }
        let Some(first) = catalog.first_position() else {
            return Ok(positions);
        };
        let mut scanned = self
            .inner()
            .key_scanned
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        covered.add_all(&scanned);
        {
            // A clean close (before this handle opened) recorded that no
            // keyed message follows the index's last item up to where the
            // data then ended.
            let m = self
                .inner()
                .metadata
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if m.clean_shutdown {
                covered.add(m.key_index_last.map_or(0, |l| l + 1)..m.key_index_upto);
            }
            // Where the last writer found no keyed message outside the files.
            for &(start, end) in &m.key_index_clear {
                covered.add(start..end);
            }
        }
        let gaps = covered.gaps(first..u64::MAX);
        if gaps.is_empty() {
            return Ok(positions);
        }
        let mut found = Vec::new();
        for gap in gaps {
            let clear = crate::reader::keys::scan_for_key(catalog, gap, key, &mut found)?;
            scanned.add(clear);
        }
        drop(scanned);
        if !found.is_empty() {
            positions.extend(found);
            positions.sort_unstable();
            positions.dedup();
        }
        Ok(positions)
    }

    /// Reads the message at each position (ascending, as the key index
    /// gives them) that really has `key` (hash collisions and files removed
    /// by retention fall out), handing it to `visit` until it returns
    /// false; newest first when `newest_first`. A position that is a batch
    /// frame (format 9; its keyed members share it) is decoded, and every
    /// member with `key` is a match, in sequence order (reversed too when
    /// `newest_first`).
    fn read_key_positions(
        &self,
        key: &[u8],
        mut positions: Vec<u64>,
        newest_first: bool,
        visit: &mut dyn FnMut(&crate::reader::tailer::Message<'_>) -> bool,
    ) -> Result<()> {
        positions.dedup();
        if newest_first {
            positions.reverse();
        }
        // The reader `get` keeps: its file stays mapped between calls, so a
        // lookup costs no mmap.
        let mut guard = self
            .inner()
            .getter
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(self.new_tailer());
        }
        let t = guard.as_mut().expect("set above");
        let mut refreshed = false;
        for pos in positions {
            t.seek_position(pos)?;
            let Some(m) = t.read_next()? else { continue };
            if position::decode(m.position()).0 != position::decode(pos).0 {
                // The file the item points into is gone: retention deleted
                // it (it is older than every file kept), or it is missing
                // from the middle of the queue, which is damage.
                self.check_file_kept(pos, &mut refreshed)?;
                continue;
            }
            if m.position() != pos {
                continue;
            }
            let Some(end) = m.batch_end() else {
                if m.key == Some(key) && !visit(&m) {
                    break;
                }
                continue;
            };
            // A batch frame: its members from the first on (the seek
            // landed on it), those with `key` matching.
            let mut matched = Vec::new();
            let mut next = Some(m);
            while let Some(m) = next {
                if m.key == Some(key) {
                    if newest_first {
                        matched.push(m.seq);
                    } else if !visit(&m) {
                        return Ok(());
                    }
                }
                if m.seq + 1 >= end {
                    break;
                }
                next = t.read_next()?;
            }
            for seq in matched.into_iter().rev() {
                t.seek(seq)?;
                if let Some(m) = t.read_next()? {
                    if !visit(&m) {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// For a key-index item at `pos` whose data file is not in the catalog:
    /// fine when retention deleted it, [`Error::Corrupted`] when it is
    /// missing between files that are there.
    fn check_file_kept(&self, pos: u64, refreshed: &mut bool) -> Result<()> {
        let (number, offset) = position::decode(pos);
        let catalog = &self.inner().catalog;
        if !std::mem::replace(refreshed, true) {
            catalog.refresh()?;
        }
        let files = catalog.snapshot();
        if files.iter().any(|f| f.header.file_number == number) {
            return Ok(());
        }
        let before = files.iter().rev().find(|f| f.header.file_number < number);
        let after = files.iter().find(|f| f.header.file_number > number);
        match (before, after) {
            (Some(b), Some(a)) => Err(Error::corrupted(
                catalog.data_path(a.id),
                0,
                None,
                format!(
                    "data file number {number} is missing from the middle of the queue \
                     (between {} and {}); the key index points into it at offset {offset}",
                    catalog.data_path(b.id).display(),
                    catalog.data_path(a.id).display()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The data files, oldest first, with the sequences each holds.
    pub fn data_files(&self) -> Result<Vec<DataFileInfo>> {
        self.check_open()?;
        self.inner().catalog.refresh()?;
        let files = self.inner().catalog.snapshot();
        let end = self.next_seq();
        Ok(files
            .iter()
            .enumerate()
            .map(|(i, f)| DataFileInfo {
                path: self.inner().catalog.data_path(f.id),
                file_number: f.header.file_number,
                first_seq: f.header.first_seq,
                end_seq: files.get(i + 1).map_or(end, |n| n.header.first_seq),
                created_us: f.header.created_us,
                size: f.header.file_size,
                bytes_written: crate::reader::tailer::written_bytes(&self.inner().catalog, f),
                bytes_allocated: allocated_bytes(&self.inner().catalog.data_path(f.id)),
                index_bytes_allocated: index_bytes(self.path(), f.id),
            })
            .collect())
    }

    /// Sequence of the oldest message kept.
    pub fn first_seq(&self) -> u64 {
        let catalog = &self.inner().catalog;
        // Retention (in this or another process) may have removed the
        // oldest files since the catalog last looked: one stat tells.
        if let Some(f) = catalog.first() {
            if !catalog.data_path(f.id).exists() {
                let _ = catalog.refresh();
            }
        }
        if let Some(f) = catalog.first() {
            return f.header.first_seq;
        }
        // No file yet; `next_seq` waits for this process's appends, which
        // may create the first file.
        let next = self.next_seq();
        catalog.first().map_or(next, |f| f.header.first_seq)
    }

    /// The clock the queue stamps messages (and consumer commits) with.
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner().config.clock
    }

    /// A consumer (a tailer with a name whose position persists): resumes
    /// at the position `name` last committed (in this or an earlier
    /// process), or starts where `options` say when the name is new. Pass a
    /// [`Start`] for the default options. See [`Consumer`].
    pub fn consumer(&self, name: &str, options: impl Into<ConsumerOptions>) -> Result<Consumer> {
        self.check_open()?;
        let options = options.into();
        Consumer::open(
            self.path(),
            name,
            options,
            self.tailer(Start::Beginning)?,
            self.clock().clone(),
            &|| self.first_seq(),
            &|| self.next_seq(),
        )
    }

    /// The queue's id (`queue_id` in `metadata.json`: 32 lowercase hex
    /// digits, drawn when the queue was created and kept by copies and
    /// restores). `None` only for a read-only handle of a queue that no
    /// writer of this version has opened yet (its work-queue jobs then
    /// know the queue by its `metadata.json` file).
    pub fn queue_id(&self) -> Option<String> {
        self.inner()
            .metadata
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .effective_queue_id()
            .map(str::to_owned)
    }

    /// A handle on work-queue group `name` (created when new): hands each
    /// message to exactly one of the handles that opened the group, in any
    /// process, until acked. See [`WorkQueue`].
    pub fn work_queue(&self, name: &str, options: WorkQueueOptions) -> Result<WorkQueue> {
        self.check_open()?;
        let handles = Handles {
            queue: self.inner().identity,
            scout: self.tailer(Start::Beginning)?,
            random: self.tailer(Start::Beginning)?,
            catalog: self.inner().catalog.clone(),
            clock: self.clock().clone(),
            wake: self.inner().wake.clone(),
            wait: self.inner().config.wait,
            first_seq: self.first_seq(),
        };
        let end = || {
            self.wait_visible()?;
            Ok(self.next_seq())
        };
        WorkQueue::open(self.path(), name, options, handles, &end)
    }

    /// A sink that appends dead-lettered jobs to the queue at `path`, opened
    /// (created when missing) for several writer processes, since every
    /// worker process may dead-letter: pass it as
    /// [`WorkQueueOptions::dead_letter`].
    pub fn dead_letter_sink(path: &Path) -> Result<DeadLetterSink> {
        Queue::dead_letter_sink_with_key(path, None)
    }

    /// [`Queue::dead_letter_sink`] for an encrypted queue: the dead-letter
    /// queue is opened (or created) with the same `key`, so a job's payload
    /// never lands in clear in it.
    pub fn dead_letter_sink_with_key(path: &Path, key: Option<[u8; 32]>) -> Result<DeadLetterSink> {
        let dlq = QueueBuilder::new(path)
            .multi_writer(true)
            .encryption_key(key)
            .open()?;
        let appender = dlq.appender()?;
        Ok(Arc::new(move |record: &Record<'_>| {
            let _keep_open = &dlq;
            appender.append_record(record)?;
            appender.flush()
        }))
    }

    /// Every work-queue group with its figures. Works on read-only queues
    /// and takes no lock.
    pub fn work_queues(&self) -> Result<Vec<WorkQueueInfo>> {
        self.check_open()?;
        let next = self.next_seq();
        let mut infos = crate::consumers::work_queue::list(self.path(), next, &**self.clock())?;
        for info in &mut infos {
            if info.low < next {
                info.oldest_timestamp = self.get(info.low).ok().map(|m| m.timestamp);
            }
        }
        Ok(infos)
    }

    /// Work-queue group `name`'s jobs handed out and not finished, oldest
    /// first, at most `limit` (see [`WorkQueue::pending`]). Works on
    /// read-only queues and takes no lock; `NotFound`-like
    /// `InvalidArgument` when the group does not exist.
    pub fn work_queue_pending(&self, name: &str, limit: usize) -> Result<Vec<PendingJob>> {
        self.check_open()?;
        crate::consumers::name::validate(name)?;
        let path = crate::consumers::work_queue::state_path(self.path(), name);
        crate::consumers::work_queue::read_pending(&path, &**self.clock(), limit)?.ok_or_else(
            || {
                Error::InvalidArgument(format!(
                    "no work queue named {name:?} in {}",
                    self.path().display()
                ))
            },
        )
    }

    /// Removes work-queue group `name` (its state file), so that it no
    /// longer holds back retention. Returns whether it existed.
    pub fn remove_work_queue(&self, name: &str) -> Result<bool> {
        self.check_open()?;
        crate::consumers::work_queue::remove(self.path(), name)
    }

    /// Every consumer with its committed position and lag. Works on
    /// read-only queues and takes no lock.
    pub fn consumers(&self) -> Result<Vec<ConsumerInfo>> {
        self.check_open()?;
        let next = self.next_seq();
        // After next_seq: first_seq refreshes the catalog if retention ran.
        let first = self.first_seq();
        let mut infos = crate::consumers::list(self.path(), &self.inner().catalog, first, next)?;
        // A consumer with a topic filter lags by its topic's messages only.
        for info in &mut infos {
            let Some(selector) = info.selector.clone() else {
                continue;
            };
            let mut t = self.tailer(Start::Beginning)?;
            t.select(selector);
            t.expect_published(next);
            t.seek(info.next_seq.max(first))?;
            let mut n = 0;
            while let Some(m) = t.read_next()? {
                if m.seq >= next {
                    break;
                }
                n += 1;
            }
            info.lag_messages = n;
        }
        Ok(infos)
    }

    /// The first sequence whose message was written at or after `micros`
    /// (µs since the Unix epoch), or `next_seq` when there is none yet:
    /// Kafka's `offsetsForTimes`. Timestamps never decrease within a queue,
    /// so `seq_for_time(a)..seq_for_time(b)` are the messages written in
    /// `[a, b)`. A binary search over the files, then the sparse index.
    pub fn seq_for_time(&self, micros: u64) -> Result<u64> {
        self.check_open()?;
        let mut t = self.tailer(Start::Beginning)?;
        t.seek_time(micros)?;
        Ok(t.next_seq())
    }

    /// Forgets consumer `name` (it must not be open anywhere), so that it no
    /// longer holds back retention. Returns whether it existed.
    pub fn remove_consumer(&self, name: &str) -> Result<bool> {
        self.check_open()?;
        crate::consumers::remove(self.path(), name)
    }

    /// Applies the queue's retention policy now (it also runs at every
    /// roll). A queue opened without a policy keeps everything.
    pub fn apply_retention(&self) -> Result<RetentionReport> {
        match self.inner().config.retention {
            Some(policy) => self.apply_retention_with(&policy),
            None => Ok(RetentionReport {
                first_seq: self.first_seq(),
                ..RetentionReport::default()
            }),
        }
    }

    /// Key compaction (Kafka's compacted topics): rewrites the sealed data
    /// files keeping, for every key, only its latest message in the queue,
    /// and dropping a tombstone that is its key's latest message once it is
    /// `opts.grace_us` old. Messages without a key are kept. A dropped
    /// message becomes a hole: its sequence stays in the queue's range,
    /// tailers step over it, [`Queue::get`] of it is [`Error::Compacted`].
    /// The file being written is never touched; the pass holds the
    /// retention lock (it waits for a retention pass, and retention for
    /// it). Allowed on read-only handles and while a writer appends.
    /// `progress` gets `(files done, files to examine)`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let queue = litemq::QueueBuilder::new(dir.path()).file_size(1 << 20).open()?;
    /// let app = queue.appender()?;
    /// app.append_record(&litemq::Record { key: Some(b"k"), ..litemq::Record::new(b"v1") })?;
    /// app.append_record(&litemq::Record { key: Some(b"k"), ..litemq::Record::new(b"v2") })?;
    /// app.roll()?; // only sealed files are compacted
    /// let report = queue.compact(&litemq::CompactOptions::default(), &mut |_, _| {})?;
    /// assert_eq!(report.records_dropped, 1);
    /// assert!(matches!(queue.get(0), Err(litemq::Error::Compacted { seq: 0 })));
    /// assert_eq!(queue.get_latest(b"k")?.unwrap().payload, b"v2");
    /// # Ok::<(), litemq::Error>(())
    /// ```
    pub fn compact(
        &self,
        opts: &CompactOptions,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<CompactReport> {
        self.check_open()?;
        self.wait_visible()?;
        let now = self.inner().config.clock.now_micros();
        let defs = self.indexes();
        let report = compact::run(&self.inner().catalog, opts, &defs, now, progress)?;
        if report.files_rewritten > 0 {
            // The cached `get` reader may map a file as it was before.
            *self
                .inner()
                .getter
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = None;
        }
        Ok(report)
    }

    /// Deletes the oldest data files whose messages all lie below `before`
    /// (`litemq archive --delete-local`, after a verified copy): under the
    /// retention lock like a retention pass, never the last file, never a
    /// file a named consumer has not consumed. Allowed on read-only queues.
    pub fn delete_files_before(&self, before: u64) -> Result<RetentionReport> {
        self.check_open()?;
        let base = self.path();
        let min_consumer = || crate::consumers::min_position(base);
        let report = retention::run_before(&self.inner().catalog, before, &min_consumer)?;
        if !report.deleted_files.is_empty() {
            *self
                .inner()
                .getter
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = None;
        }
        Ok(report)
    }

    /// Applies `policy` once (for tools such as `litemq retain`). Allowed on
    /// read-only queues: deleting old sealed files never touches what the
    /// writer writes.
    pub fn apply_retention_with(&self, policy: &RetentionPolicy) -> Result<RetentionReport> {
        self.check_open()?;
        let now = self.inner().config.clock.now_micros();
        let base = self.path();
        let min_consumer = || crate::consumers::min_position(base);
        let report = retention::run(&self.inner().catalog, policy, now, &min_consumer)?;
        if !report.deleted_files.is_empty() {
            // The cached `get` reader may map a deleted file: let it go.
            *self
                .inner()
                .getter
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = None;
        }
        Ok(report)
    }

    /// Sequence the next message gets (one past the last published).
    /// In the writing process this includes every message appended before
    /// the call (it waits for the I/O thread to write them).
    pub fn next_seq(&self) -> u64 {
        match &self.inner().writer {
            Some(w) if !self.inner().config.multi_writer => {
                let _ = self.wait_visible();
                w.shared.written()
            }
            // Other processes write too: the files tell.
            Some(_) => {
                let _ = self.wait_visible();
                self.end_on_disk()
            }
            None => self.end_on_disk(),
        }
    }

    /// One past the last message published in the files.
    fn end_on_disk(&self) -> u64 {
        let mut t = self.new_tailer();
        match t.seek_end() {
            Ok(()) => t.next_seq(),
            Err(_) => self
                .inner()
                .catalog
                .last()
                .map_or(0, |f| f.header.first_seq),
        }
    }

    /// Messages currently kept.
    pub fn len(&self) -> u64 {
        self.next_seq() - self.first_seq()
    }

    /// True when the queue holds no message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Figures for monitoring.
    pub fn stats(&self) -> Stats {
        let first_seq = self.first_seq();
        let next_seq = self.next_seq();
        let catalog = &self.inner().catalog;
        let files = catalog.snapshot();
        let data_bytes_allocated = files
            .iter()
            .map(|f| allocated_bytes(&catalog.data_path(f.id)))
            .sum();
        let key_index: u64 = std::fs::read_dir(self.path().join(KEY_INDEX_DIR))
            .map(|rd| rd.flatten().map(|e| allocated_bytes(&e.path())).sum())
            .unwrap_or(0);
        let index_bytes_allocated = key_index
            + files
                .iter()
                .map(|f| index_bytes(self.path(), f.id))
                .sum::<u64>();
        let mut s = Stats {
            first_seq,
            next_seq,
            files: files.len() as u64,
            disk_bytes: data_bytes_allocated + index_bytes_allocated,
            data_bytes_written: files
                .iter()
                .map(|f| crate::reader::tailer::written_bytes(catalog, f))
                .sum(),
            data_bytes_allocated,
            index_bytes_allocated,
            read_only: self.inner().config.read_only && self.lazy.is_none(),
            recovery: self.inner().recovery.clone(),
            ..Stats::default()
        };
        if let Some(w) = &self.inner().writer {
            use std::sync::atomic::Ordering::Relaxed;
            s.durable_seq = w.shared.counters.durable_seq.load(Relaxed);
            s.takeovers = w.shared.counters.takeovers.load(Relaxed);
            s.syncs = w.shared.counters.syncs.load(Relaxed);
            s.rolls = w.shared.counters.rolls.load(Relaxed);
            s.compactions = w.shared.counters.compactions.load(Relaxed);
            s.compaction_errors = w.shared.counters.compaction_errors.load(Relaxed);
            s.bytes_written = w.shared.counters.bytes_written.load(Relaxed);
            s.appender_writes = w.shared.counters.appender_writes.load(Relaxed);
            if let Some(wake) = w.shared.wake() {
                (s.wake_calls, s.woken, s.waiter_resets) = wake.counters();
            }
        }
        if let Some(wake) = self.inner().wake.file() {
            s.wake_word = true;
            s.waiters = u64::from(wake.waiters());
        }
        s
    }

    /// Writes and syncs everything appended, stops the I/O thread, records
    /// a clean shutdown and releases the writer lock. Then lets go of every
    /// file: the queue's own mappings at once, and every [`Tailer`] and
    /// [`Consumer`] made from it at its next call, which reports
    /// [`Error::Closed`] (a blocked `read_next_timeout` wakes with it);
    /// drop them to unmap their files at once. Appenders report
    /// [`Error::Closed`] too. Later calls do nothing.
    ///
    /// A poisoned writer is closed all the same (lock released, files let
    /// go, no clean shutdown recorded: the next open recovers as after a
    /// crash), then its error is returned.
    pub fn close(&self) -> Result<()> {
        self.shut_down(true)
    }

    /// `close`; with `stop_tailers` false (dropping the queue), tailers
    /// made from it keep reading the files.
    fn shut_down(&self, stop_tailers: bool) -> Result<()> {
        let Some(lazy) = &self.lazy else {
            return self.shut_down_own(stop_tailers);
        };
        // No writer starts once this handle is closing.
        let _starting = lazy.starting.lock().unwrap_or_else(|e| e.into_inner());
        let writer = match lazy.writer.get() {
            Some(w) => w.shut_down(stop_tailers),
            None => Ok(()),
        };
        let own = self.shut_down_own(stop_tailers);
        writer.and(own)
    }

    /// `shut_down` of this handle's own state (a lazy handle's writer is
    /// another `Queue`).
    fn shut_down_own(&self, stop_tailers: bool) -> Result<()> {
        if self
            .own
            .closed
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return Ok(());
        }
        let result = match &self.own.writer {
            Some(w) => self.close_writer(w),
            None => Ok(()),
        };
        if stop_tailers {
            self.own.catalog.close();
        }
        if let Some(w) = &self.own.writer {
            w.shared.drop_wake();
        }
        self.own.wake.close();
        if stop_tailers {
            // Dropped, not closed: tailers made from the queue read on, and
            // their async waits with them.
            self.own.watch.close();
        }
        *self.own.getter.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *self
            .inner()
            .key_reader
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        result
    }

    /// Whether [`Queue::close`] was called. `len`, `first_seq`, `next_seq`
    /// and `stats` of a closed queue answer from the files as last seen.
    pub fn is_closed(&self) -> bool {
        self.inner()
            .closed
            .load(std::sync::atomic::Ordering::Acquire)
    }

    fn close_writer(&self, w: &Writer) -> Result<()> {
        if w.appender.forked() {
            // The lock's descriptor is shared with the parent: leave it.
            return Err(Error::Forked);
        }
        w.appender.shut();
        let handle = w.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        let compactor = w.compactor.lock().unwrap_or_else(|e| e.into_inner()).take();
        let result = match handle.map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::Internal("the I/O thread panicked".into())),
            None => Ok(()),
        };
        // A compaction pass started at a roll ends before the files go.
        if let Some(c) = compactor {
            let _ = c.join();
        }
        // Released whatever happens below (dropped on every return).
        let lock = w.lock.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Err(e) = result {
            // The thread's files went with it; metadata keeps
            // `clean_shutdown: false`, so the next open recovers.
            drop(lock);
            return Err(Error::Poisoned { cause: Arc::new(e) });
        }
        let next_seq = if self.inner().config.multi_writer {
            // Only the last of several writers records a clean shutdown.
            if !lock.as_ref().is_some_and(WriterLock::try_exclusive) {
                return Ok(());
            }
            self.end_on_disk()
        } else {
            w.shared.written()
        };
        let mut meta = self
            .inner()
            .metadata
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        meta.clean_shutdown = true;
        meta.next_seq = next_seq;
        meta.key_index_upto = w.shared.indexed_upto();
        meta.key_index_last = w.shared.key_index_last();
        if !self.inner().config.multi_writer {
            // This writer added every keyed message since its open, which
            // found the index whole: what its files do not cover holds none.
            meta.key_index_clear = self.key_index_gaps().unwrap_or_default();
        }
        write_metadata(&self.inner().config.path.join(METADATA_FILE), &meta)?;
        drop(lock);
        Ok(())
    }
}

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

/// Bytes of disk a data file's indexes (sparse, dense, topics, fields) hold.
fn index_bytes(base: &Path, id: crate::storage::layout::FileId) -> u64 {
    id.index_paths(base)
        .iter()
        .map(|p| allocated_bytes(p))
        .sum()
}
