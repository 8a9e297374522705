//! Queue configuration: the builder and the policies it carries.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::format::compression::{Codec, Compression, DEFAULT_MAX_DECOMPRESSED};
use crate::format::metadata::{Metadata, StoredCompression, StoredOptions, StoredRetention};
use crate::index::fields::{FieldIndexDef, SharedDefs};
use crate::index::key_index::KeyIndexConfig;
use crate::reader::wait::WaitStrategy;
use crate::retention::RetentionPolicy;
use crate::writer::options::WriterOptions;
pub use crate::writer::options::{FlushMode, RollPeriod, RollStrategy};

/// Smallest data file allowed: a header and room for real messages.
pub const MIN_FILE_SIZE: u64 = 64 * 1024;
/// Largest data file: offsets in key-index positions have 40 bits.
pub const MAX_FILE_SIZE: u64 = 1 << 40;
/// Most batches the appenders may queue ahead of the I/O thread. The channel
/// allocates a slot per batch up front, and each queued batch holds up to
/// 64 KiB, so this bounds both (at most 4 GiB in flight).
pub const MAX_CHANNEL_CAPACITY: usize = 1 << 16;
/// Largest `index_interval`: the sparse-index header stores it in 32 bits.
pub const MAX_INDEX_INTERVAL: u32 = u32::MAX;
/// The tombstone grace of key compaction when the caller names none (one
/// day, Kafka's `delete.retention.ms` default): Python's
/// `compact_on_roll=True`, `Queue.compact()` and `litemq compact` use it.
/// Written here once; the bindings and the Python package read it from
/// here.
pub const DEFAULT_COMPACT_GRACE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Everything a queue is opened with. Built by [`QueueBuilder`].
/// A 32-byte encryption key, kept out of `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct EncryptionKey(pub [u8; 32]);

impl std::fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncryptionKey(..)")
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub path: PathBuf,
    pub file_size: u64,
    pub roll: RollStrategy,
    pub flush: FlushMode,
    pub index_interval: u32,
    pub verify_on_startup: bool,
    pub channel_capacity: usize,
    pub read_only: bool,
    /// Take the writer lock (recover, start the I/O thread) at the first
    /// append rather than at open; see [`QueueBuilder::lock_on_first_write`].
    pub lock_on_first_write: bool,
    pub wait: WaitStrategy,
    pub clock: Arc<dyn Clock>,
    /// Applied at every roll and by `Queue::apply_retention`; `None`: keep everything.
    pub retention: Option<RetentionPolicy>,
    /// Key compaction after every roll, with this tombstone grace (µs);
    /// `None`: only when `Queue::compact` is called. Not remembered.
    pub compact_on_roll: Option<u64>,
    pub key_index: KeyIndexConfig,
    /// Several processes may append at once (see `QueueBuilder::multi_writer`).
    pub multi_writer: bool,
    /// How appenders compress payloads (`None`: they do not).
    pub compression: Option<Compression>,
    /// Largest payload a reader decompresses.
    pub max_decompressed: usize,
    /// The encryption key (encryption at rest), if any.
    pub encryption_key: Option<EncryptionKey>,
    /// Fixtures only: the queue id of a new encrypted queue, and synthetic
    /// nonces (see `QueueBuilder::synthetic_nonces_for_fixtures`).
    pub fixture_queue_id: Option<[u8; 16]>,
    /// Declared secondary indexes (see `QueueBuilder::index`), shared with
    /// the writer's builder; `Queue::add_index` adds to them.
    pub fields: SharedDefs,
    /// Which of the options remembered in `metadata.json` the caller gave;
    /// the others come from there when the queue exists.
    pub explicit: Explicit,
    /// The schema the caller declared (see [`QueueBuilder::schema`]).
    pub schema: Option<crate::format::typed::Schema>,
}

/// The remembered options a caller set explicitly (see [`StoredOptions`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Explicit {
    pub file_size: bool,
    pub roll: bool,
    pub index_interval: bool,
    pub key_index: bool,
    pub retention: bool,
    pub multi_writer: bool,
    pub compression: bool,
}

/// Opens a queue with options; every option has a documented default.
///
/// The options that shape the queue's files (`file_size`, `roll`,
/// `index_interval`, `key_index`, `retention`, `multi_writer`) are
/// remembered in `metadata.json` when the queue is created: opening it
/// again without one of them uses the remembered value, not the default.
/// Giving a different value is allowed for each of them (none is fixed by
/// the format: every file records its own size, index interval and
/// key-index geometry); it is remembered from then on and applies to files
/// created from then on (`file_size`, `index_interval`, `key_index`), to the
/// file being written from its next message (`roll`), or from this open
/// (`retention`, `multi_writer`). `litemq info` shows the remembered values.
/// A remembered value that does not validate (a hand-edited file) is an
/// [`Error::InvalidConfig`] naming `metadata.json`.
///
/// ```
/// use litemq::{FlushMode, QueueBuilder, RollPeriod, RollStrategy};
/// use std::time::Duration;
/// # let dir = tempfile::tempdir().unwrap();
/// let queue = QueueBuilder::new(dir.path().join("trades"))
///     .file_size(256 << 20)
///     .roll(RollStrategy::Any(vec![
///         RollStrategy::Period(RollPeriod::Hourly),
///         RollStrategy::Count(1_000_000),
///     ]))
///     .flush_mode(FlushMode::Batch { bytes: 1 << 20, interval: Duration::from_millis(10) })
///     .open()?;
/// # Ok::<(), litemq::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct QueueBuilder {
    config: Config,
}

impl QueueBuilder {
    /// Starts a builder for the queue at `path` (created when missing).
    pub fn new(path: impl AsRef<Path>) -> Self {
        QueueBuilder {
            config: Config {
                path: path.as_ref().to_path_buf(),
                file_size: 1 << 30,
                roll: RollStrategy::Period(RollPeriod::Daily),
                flush: FlushMode::Async,
                index_interval: 1024,
                verify_on_startup: false,
                channel_capacity: 256,
                read_only: false,
                lock_on_first_write: false,
                wait: WaitStrategy::Default,
                clock: Arc::new(SystemClock),
                retention: None,
                compact_on_roll: None,
                key_index: KeyIndexConfig::default(),
                multi_writer: false,
                compression: None,
                max_decompressed: DEFAULT_MAX_DECOMPRESSED,
                encryption_key: None,
                fixture_queue_id: None,
                fields: SharedDefs::default(),
                explicit: Explicit::default(),
                schema: None,
            },
        }
    }

    /// Largest size of a data file. Default 1 GiB; from [`MIN_FILE_SIZE`]
    /// (64 KiB) to [`MAX_FILE_SIZE`] (1 TiB), a multiple of 8. Files are
    /// sparse: disk blocks are allocated as they fill (1 to 64 MiB at a
    /// time) and a sealed file is trimmed to its data and footer.
    pub fn file_size(mut self, bytes: u64) -> Self {
        self.config.file_size = bytes;
        self.config.explicit.file_size = true;
        self
    }
    /// When to start a new file. Default: daily (UTC), and whenever a file is full.
    pub fn roll(mut self, roll: RollStrategy) -> Self {
        self.config.roll = roll;
        self.config.explicit.roll = true;
        self
    }
    /// When bytes are forced to disk. Default [`FlushMode::Async`].
    pub fn flush_mode(mut self, flush: FlushMode) -> Self {
        self.config.flush = flush;
        self
    }
    /// One sparse-index entry every this many messages. Default 1024, at
    /// least 1 (at most [`MAX_INDEX_INTERVAL`] by its type). `seek_time`
    /// walks at most this many frames; `get` and `seek` by sequence use the
    /// dense index (format 5), and walk at most this many only in older
    /// files or past a damaged dense-index entry.
    pub fn index_interval(mut self, interval: u32) -> Self {
        self.config.index_interval = interval;
        self.config.explicit.index_interval = true;
        self
    }
    /// Check the CRC of every frame of every file when opening. Default false.
    pub fn verify_on_startup(mut self, verify: bool) -> Self {
        self.config.verify_on_startup = verify;
        self
    }
    /// Bundles (of up to 1024 messages or 64 KiB) the appenders may queue
    /// ahead of the I/O thread before an append waits. Default 256 (at most
    /// 16 MiB in flight), 1 to [`MAX_CHANNEL_CAPACITY`].
    pub fn channel_capacity(mut self, capacity: usize) -> Self {
        self.config.channel_capacity = capacity;
        self
    }
    /// Open for reading only: no lock, no I/O thread, no repair. Default false.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.config.read_only = read_only;
        self
    }
    /// Open as a reader and become the writer at the first call that
    /// writes (`appender`, `add_index`, `drop_index`), as Chronicle Queue
    /// does: until then the handle holds no lock and no I/O thread, so a
    /// process that only reads never locks a writer in another process out.
    /// A queue that does not exist yet is still created at open. Recovery of
    /// a queue whose writer died runs when the writer starts, before the
    /// first append. Default false (the writer starts at open); the Python
    /// `litemq.Queue` sets it.
    pub fn lock_on_first_write(mut self, lazy: bool) -> Self {
        self.config.lock_on_first_write = lazy;
        self
    }
    /// How blocking reads wait. Default [`WaitStrategy::Default`].
    pub fn wait_strategy(mut self, wait: WaitStrategy) -> Self {
        self.config.wait = wait;
        self
    }
    /// Where timestamps come from. Default [`SystemClock`].
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.config.clock = clock;
        self
    }

    /// Geometry of the largest key-index files. Default 2^20 slots, 2^21
    /// items (44 MiB); the first file is smaller (4096 items, 88 KiB) and
    /// each next one 4 times larger, up to this.
    pub fn key_index(mut self, config: KeyIndexConfig) -> Self {
        self.config.key_index = config;
        self.config.explicit.key_index = true;
        self
    }

    /// Which old data files to delete, at every roll and on
    /// `Queue::apply_retention`. Default: keep everything.
    pub fn retention(mut self, policy: RetentionPolicy) -> Self {
        self.config.retention = Some(policy);
        self.config.explicit.retention = true;
        self
    }

    /// Runs key compaction (`Queue::compact`, tombstones kept for `grace`)
    /// on a background thread after every roll of this handle's writer,
    /// unless the previous pass is still running. Appends never wait for
    /// it; passes are counted in `Stats::compactions`, failed ones in
    /// `Stats::compaction_errors` (the next roll tries again). Not
    /// remembered in `metadata.json`: give it at every open.
    pub fn compact_on_roll(mut self, grace: std::time::Duration) -> Self {
        self.config.compact_on_roll = Some(u64::try_from(grace.as_micros()).unwrap_or(u64::MAX));
        self
    }

    /// Let several processes append to the queue at once, each opening it
    /// with this option (a process opened with `false` still excludes all
    /// others; one that does not say uses the value `metadata.json`
    /// remembers). Appends are written under a lock shared through
    /// `append.lock`, so sequences stay dense and each appender's messages
    /// keep their order. A process's I/O thread holds the lock for a burst
    /// of appends, during which `append` returns at once, as with one
    /// writer; otherwise (the first append of a burst, or while another
    /// process holds the lock) it returns once the message is written.
    /// Default false: one writer process, the fastest path.
    pub fn multi_writer(mut self, multi: bool) -> Self {
        self.config.multi_writer = multi;
        self.config.explicit.multi_writer = true;
        self
    }

    /// How appenders compress payloads (format 7): a payload of at least
    /// `min_size` bytes is stored compressed when that saves at least 5 %
    /// (LedgerQ's rule); a record can ask otherwise
    /// ([`crate::Compress`]). Default `None`: stored as given. Remembered in
    /// `metadata.json` like the options that shape the files.
    pub fn compression(mut self, compression: Option<Compression>) -> Self {
        self.config.compression = compression;
        self.config.explicit.compression = true;
        self
    }

    /// Largest payload this handle's readers decompress, in bytes. Default
    /// 100 MiB. A compressed payload that declares more, or that does not
    /// inflate to the size it declares, is [`Error::Corrupted`]: a
    /// decompression bomb never allocates past this bound.
    pub fn max_decompressed_size(mut self, bytes: usize) -> Self {
        self.config.max_decompressed = bytes;
        self
    }

    /// Encryption at rest (format 8): payloads are sealed with
    /// XChaCha20-Poly1305 under a key derived from this 32-byte key, and
    /// the key index stores keyed hashes of keys. Chosen when the queue is
    /// created: opening an encrypted queue without the key, or with
    /// another one, is [`Error::Encryption`]; giving a key to a queue
    /// created without one is too. Keys, headers, topics, tags, timestamps,
    /// sizes and counts stay in clear (see README, "Encryption at rest").
    /// Default `None`.
    pub fn encryption_key(mut self, key: Option<[u8; 32]>) -> Self {
        self.config.encryption_key = key.map(EncryptionKey);
        self
    }

    /// For reproducible test fixtures only, never for data: a new encrypted
    /// queue gets `queue_id` instead of a random one, and this handle seals
    /// with nonces derived from what it seals instead of random ones (see
    /// `format::crypto::QueueKey::with_synthetic_nonces`).
    #[doc(hidden)]
    pub fn synthetic_nonces_for_fixtures(mut self, queue_id: [u8; 16]) -> Self {
        self.config.fixture_queue_id = Some(queue_id);
        self
    }

    /// Indexes header field `def.name` (a secondary index, see
    /// `Queue::where_field`): each sealed data file gets a
    /// `NAME.field-FIELD` file listing, by value, the messages carrying
    /// each value. Declared indexes are remembered in `metadata.json` and
    /// kept by every later open (an open adds the indexes it gives to the
    /// remembered ones; declaring a name again with another type is an
    /// [`Error::InvalidConfig`]).
    pub fn index(mut self, def: FieldIndexDef) -> Self {
        // A list of its own: a clone of this builder keeps the one it had.
        let mut defs = self
            .config
            .fields
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        defs.push(def);
        self.config.fields = SharedDefs::new(std::sync::RwLock::new(defs));
        self
    }

    /// Makes the queue a typed queue (format 12) of events of `schema`
    /// (its fields; its `version` is ignored): a new queue records it as
    /// version 1; a typed queue whose current version has the same fields
    /// is opened as it is; a valid evolution (FORMAT.md "Evolution")
    /// records a new version, and rows of it go into a new data file.
    /// [`Error::Schema`] when the evolution is not allowed (naming the
    /// field and why), when the queue already holds untyped messages, when
    /// a read-only handle's schema is not the queue's current one, and when
    /// other writer processes have the queue open (`multi_writer`: a new
    /// version is declared with every writer closed). A typed queue opened
    /// without a schema uses its own.
    pub fn schema(mut self, schema: crate::format::typed::Schema) -> Self {
        self.config.schema = Some(schema);
        self
    }

    /// Checks the options and returns them, for `QueueBuilder::open` (in
    /// `queue/mod.rs`: the builder sits below the queue it opens).
    pub(crate) fn into_config(self) -> Result<Config> {
        self.validate()?;
        Ok(self.config)
    }

    fn validate(&self) -> Result<()> {
        let c = &self.config;
        {
            let defs = c.fields.read().unwrap_or_else(|e| e.into_inner());
            for (i, d) in defs.iter().enumerate() {
                if let Some(o) = defs[..i]
                    .iter()
                    .find(|o| o.name == d.name && o.kind != d.kind)
                {
                    return Err(Error::InvalidConfig(format!(
                        "index {:?} is declared as {:?} and as {:?}; an index keeps its type",
                        d.name,
                        o.kind.name(),
                        d.kind.name()
                    )));
                }
            }
        }
        if c.path.as_os_str().is_empty() {
            return Err(Error::InvalidConfig(
                "the queue path is empty: give the queue's directory".into(),
            ));
        }
        if !(MIN_FILE_SIZE..=MAX_FILE_SIZE).contains(&c.file_size) {
            return Err(Error::InvalidConfig(format!(
                "file_size {} must be between {MIN_FILE_SIZE} and {MAX_FILE_SIZE} bytes",
                c.file_size
            )));
        }
        if !c.file_size.is_multiple_of(8) {
            return Err(Error::InvalidConfig(format!(
                "file_size {} must be a multiple of 8",
                c.file_size
            )));
        }
        if c.index_interval == 0 {
            return Err(Error::InvalidConfig(
                "index_interval must be at least 1".into(),
            ));
        }
        if !(1..=MAX_CHANNEL_CAPACITY).contains(&c.channel_capacity) {
            return Err(Error::InvalidConfig(format!(
                "channel_capacity {} must be between 1 and {MAX_CHANNEL_CAPACITY}",
                c.channel_capacity
            )));
        }
        if let FlushMode::Batch { bytes, interval } = c.flush {
            if bytes == 0 && (interval.is_zero() || interval == Duration::MAX) {
                return Err(Error::InvalidConfig(
                    "batch flush needs bytes > 0 or a finite interval > 0".into(),
                ));
            }
        }
        c.key_index.validate()?;
        if let Some(comp) = &c.compression {
            comp.validate().map_err(Error::InvalidConfig)?;
        }
        if let Some(r) = &c.retention {
            r.validate()?;
        }
        c.roll.validate()
    }
}

impl Config {
    /// The part of the configuration the I/O thread writes with.
    pub(crate) fn writer_options(&self) -> WriterOptions {
        WriterOptions {
            path: self.path.clone(),
            file_size: self.file_size,
            roll: self.roll.clone(),
            flush: self.flush,
            index_interval: self.index_interval,
            clock: self.clock.clone(),
            key_index: self.key_index,
            fields: self.fields.clone(),
            build_indexes: crate::reader::typed_where::ensure_indexes,
            key: None,
            typed: None,
        }
    }

    /// The remembered form of this configuration's file-shaping options.
    pub(crate) fn stored(&self) -> StoredOptions {
        let mut roll = Vec::new();
        self.roll.leaves(&mut |r| {
            roll.push(match *r {
                RollStrategy::Size(n) => ("size".to_owned(), n),
                RollStrategy::Count(n) => ("count".to_owned(), n),
                RollStrategy::Period(RollPeriod::Daily) => ("daily".to_owned(), 0),
                RollStrategy::Period(RollPeriod::Hourly) => ("hourly".to_owned(), 0),
                RollStrategy::Period(RollPeriod::Minutely) => ("minutely".to_owned(), 0),
                RollStrategy::Any(_) => unreachable!("leaves are not Any"),
            })
        });
        StoredOptions {
            file_size: self.file_size,
            roll,
            index_interval: self.index_interval,
            key_index: (self.key_index.slots, self.key_index.items),
            retention: self.retention.map(|r| StoredRetention {
                max_age_us: r
                    .max_age
                    .map(|d| d.as_micros().min(u64::MAX as u128) as u64),
                max_bytes: r.max_bytes,
                max_files: r.max_files.map(|n| n as u64),
                protect_unconsumed: r.protect_unconsumed,
            }),
            multi_writer: self.multi_writer,
            compression: self.compression.map(|c| StoredCompression {
                codec: c.codec.name().to_owned(),
                level: c.level,
                min_size: c.min_size as u64,
            }),
            indexes: self
                .fields
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|d| (d.name.clone(), d.kind.name().to_string()))
                .collect(),
        }
    }

    /// Takes every option the caller did not give from `stored` (what
    /// `metadata.json` remembers), and checks the result.
    /// Metadata written before version 4 has no `options`: it remembers
    /// only the file size and sparse-index interval (its top-level
    /// fields), which an open that does not give them keeps.
    pub(crate) fn apply_before_v4(&mut self, meta: &Metadata, meta_path: &Path) -> Result<()> {
        if !(MIN_FILE_SIZE..=MAX_FILE_SIZE).contains(&meta.file_size)
            || !meta.file_size.is_multiple_of(8)
            || meta.index_interval == 0
        {
            return Err(Error::InvalidConfig(format!(
                "{}: remembered file_size {} or index_interval {} is out of range",
                meta_path.display(),
                meta.file_size,
                meta.index_interval
            )));
        }
        if !self.explicit.file_size {
            self.file_size = meta.file_size;
        }
        if !self.explicit.index_interval {
            self.index_interval = meta.index_interval;
        }
        Ok(())
    }

    pub(crate) fn apply_stored(&mut self, stored: &StoredOptions, meta_path: &Path) -> Result<()> {
        let bad = |what: String| {
            Error::InvalidConfig(format!("{}: remembered option {what}", meta_path.display()))
        };
        let e = self.explicit;
        if !e.file_size {
            self.file_size = stored.file_size;
        }
        if !e.roll {
            let mut rules = Vec::new();
            for (kind, n) in &stored.roll {
                rules.push(match kind.as_str() {
                    "size" => RollStrategy::Size(*n),
                    "count" => RollStrategy::Count(*n),
                    "daily" => RollStrategy::Period(RollPeriod::Daily),
                    "hourly" => RollStrategy::Period(RollPeriod::Hourly),
                    "minutely" => RollStrategy::Period(RollPeriod::Minutely),
                    other => return Err(bad(format!("roll {other:?} is unknown"))),
                });
            }
            self.roll = match rules.len() {
                0 => return Err(bad("roll has no rule".into())),
                1 => rules.remove(0),
                _ => RollStrategy::Any(rules),
            };
        }
        if !e.index_interval {
            self.index_interval = stored.index_interval;
        }
        if !e.key_index {
            self.key_index = KeyIndexConfig {
                slots: stored.key_index.0,
                items: stored.key_index.1,
            };
        }
        if !e.retention {
            self.retention = stored.retention.as_ref().map(|r| RetentionPolicy {
                max_age: r.max_age_us.map(Duration::from_micros),
                max_bytes: r.max_bytes,
                max_files: r.max_files.map(|n| n as usize),
                protect_unconsumed: r.protect_unconsumed,
            });
        }
        if !e.multi_writer {
            self.multi_writer = stored.multi_writer;
        }
        if !e.compression {
            self.compression = match &stored.compression {
                None => None,
                Some(c) => Some(Compression {
                    codec: Codec::from_name(&c.codec).ok_or_else(|| {
                        bad(format!("compression codec {:?} is unknown", c.codec))
                    })?,
                    level: c.level,
                    min_size: usize::try_from(c.min_size)
                        .map_err(|_| bad("compression min_size is too large".into()))?,
                }),
            };
        }
        {
            // Indexes add up: the remembered ones, then those given now.
            let mut defs = self.fields.write().unwrap_or_else(|e| e.into_inner());
            let given = std::mem::take(&mut *defs);
            for (name, kind) in &stored.indexes {
                defs.push(FieldIndexDef::new(name, kind).map_err(|e| bad(e.to_string()))?);
            }
            for d in given {
                if !defs.contains(&d) {
                    defs.push(d);
                }
            }
        }
        QueueBuilder {
            config: self.clone(),
        }
        .validate()
        .map_err(|err| bad(err.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(builder: QueueBuilder, words: &str) {
        match builder.validate() {
            Err(Error::InvalidConfig(msg)) => assert!(msg.contains(words), "{msg}"),
            other => panic!("expected InvalidConfig with {words:?}, got {other:?}"),
        }
    }

    #[test]
    fn sizes_are_bounded_before_anything_is_allocated() {
        let b = || QueueBuilder::new("/nonexistent/q");
        refused(b().channel_capacity(1 << 40), "65536");
        refused(b().channel_capacity(0), "channel_capacity");
        refused(b().file_size(MAX_FILE_SIZE + 8), "1099511627776");
        refused(b().index_interval(0), "index_interval");
        assert!(b()
            .channel_capacity(MAX_CHANNEL_CAPACITY)
            .validate()
            .is_ok());
    }

    #[test]
    fn empty_path_is_named() {
        refused(QueueBuilder::new(""), "path is empty");
    }

    #[test]
    fn batch_flush_must_be_able_to_fire() {
        let batch = |bytes, interval| {
            QueueBuilder::new("/nonexistent/q").flush_mode(FlushMode::Batch { bytes, interval })
        };
        refused(batch(0, Duration::ZERO), "bytes > 0");
        refused(batch(0, Duration::MAX), "bytes > 0");
        assert!(batch(1, Duration::MAX).validate().is_ok());
    }
}
