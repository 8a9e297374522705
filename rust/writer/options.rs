//! The writer's options: when to roll, when to sync, and the file geometry
//! the I/O thread writes with. The queue's `Config` (in `config.rs`, above the
//! writer) holds them and hands the writer a [`WriterOptions`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::frame::DATA_HEADER_LEN;
use crate::index::key_index::KeyIndexConfig;

/// A calendar period (UTC) after which the writer starts a new data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollPeriod {
    /// Each minute.
    Minutely,
    /// Each hour.
    Hourly,
    /// Each day (midnight UTC).
    Daily,
}

impl RollPeriod {
    /// Length of the period in microseconds.
    pub fn micros(self) -> u64 {
        match self {
            RollPeriod::Minutely => 60_000_000,
            RollPeriod::Hourly => 3_600_000_000,
            RollPeriod::Daily => 86_400_000_000,
        }
    }
}

/// When to start a new data file. A file is also rolled whenever the next
/// frame does not fit, whatever the strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollStrategy {
    /// Roll once the file holds this many bytes (header included).
    Size(u64),
    /// Roll when a message's timestamp falls in a later UTC period than the
    /// file's first message.
    Period(RollPeriod),
    /// Roll after this many messages.
    Count(u64),
    /// Roll when any of these would.
    Any(Vec<RollStrategy>),
}

impl RollStrategy {
    /// Rejects strategies that can never hold a message or never roll.
    pub(crate) fn validate(&self) -> Result<()> {
        match self {
            RollStrategy::Size(n) if *n <= DATA_HEADER_LEN as u64 => Err(Error::InvalidConfig(
                format!("roll size {n} must exceed the {DATA_HEADER_LEN}-byte file header"),
            )),
            RollStrategy::Count(0) => {
                Err(Error::InvalidConfig("roll count must be at least 1".into()))
            }
            RollStrategy::Any(v) => v.iter().try_for_each(RollStrategy::validate),
            _ => Ok(()),
        }
    }

    /// Visits every leaf strategy.
    pub(crate) fn leaves(&self, f: &mut dyn FnMut(&RollStrategy)) {
        match self {
            RollStrategy::Any(v) => v.iter().for_each(|s| s.leaves(f)),
            s => f(s),
        }
    }
}

/// When written bytes are forced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushMode {
    /// The OS writes pages back when it likes; `flush()` forces it.
    Async,
    /// An append returns only once its bytes are msync'd. Appends waiting at
    /// the same time share one msync (group commit).
    Sync,
    /// msync once this many bytes are pending or this much time has passed
    /// (`Duration::MAX`: by bytes only). One of them must be able to fire.
    Batch {
        /// Sync once this many bytes are pending (0: by time only).
        bytes: u64,
        /// Sync once this long has passed since the last sync.
        interval: Duration,
    },
}

/// What the I/O thread needs of the queue's configuration.
#[derive(Debug, Clone)]
pub(crate) struct WriterOptions {
    /// The queue's directory.
    pub path: PathBuf,
    /// Size new data files may grow to.
    pub file_size: u64,
    /// When to start a new data file.
    pub roll: RollStrategy,
    /// When written bytes are forced to disk.
    pub flush: FlushMode,
    /// One sparse-index entry every this many messages.
    pub index_interval: u32,
    /// Where timestamps come from.
    pub clock: Arc<dyn Clock>,
    /// Geometry of new key-index files.
    pub key_index: KeyIndexConfig,
    /// Declared secondary indexes, built for each file sealed.
    pub fields: crate::index::fields::SharedDefs,
    /// What builds them.
    pub build_indexes: super::derived::BuildIndexes,
    /// The queue's encryption key (encryption at rest): the writer seals
    /// records and hashes keys with it. The queue checks it against
    /// `metadata.json` at open and hands it over here.
    pub key: Option<Arc<crate::format::crypto::QueueKey>>,
    /// A typed queue's current schema version (format 12): new files
    /// record it in their header and hold only rows of it.
    pub typed: Option<Arc<crate::format::header::TypedFile>>,
}
