//! litemq: an embedded, persistent, append-only message queue (a journal).
//!
//! An [`Appender`] hands messages over a bounded channel to the queue's I/O
//! thread, which writes CRC-64 framed records into sparse, memory-mapped
//! data files. [`Tailer`]s in this or other processes read them back straight
//! from the mapping, seek by sequence or time, and never see a torn frame.
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! let queue = litemq::QueueBuilder::new(dir.path().join("orders")).open()?;
//! let appender = queue.appender()?;
//! let seq = appender.append(b"order 1")?;
//! let mut tailer = queue.tailer(litemq::Start::Seq(seq))?;
//! let msg = tailer.read_next()?.expect("written above");
//! assert_eq!(msg.payload, b"order 1");
//! # Ok::<(), litemq::Error>(())
//! ```
//!
//! Layout, from the bottom up: `format/` encodes and decodes bytes (no I/O),
//! `storage/` owns the mapped files (most of the engine's `unsafe`),
//! `index/` the sparse and key indexes, `catalog/` the list of data files
//! that the reader and the writer share, `reader/` tailers and `writer/`
//! the appender and I/O thread (peers: neither imports the other), then
//! `consumers/` (named tailers, work queues), `retention.rs` and
//! `recovery.rs`, and `queue/` ties them together. Each layer imports only
//! those below it (`tests/rust/layers.rs` checks). `docs/DESIGN.md` opens
//! with the layer diagram and explains the threads; `docs/FORMAT.md` the
//! bytes.

mod catalog;
mod clock;
mod compact;
mod config;
mod consumers;
mod error;
pub mod format;
pub mod index;
mod notify;
mod queue;
mod reader;
mod recovery;
mod retention;
mod storage;
mod writer;

#[cfg(feature = "python")]
mod python;

pub use clock::{Clock, ManualClock, Monotonic, SystemClock};
#[doc(hidden)]
pub use compact::CompactStep;
pub use compact::{CompactOptions, CompactReport};
pub use config::{
    FlushMode, QueueBuilder, RollPeriod, RollStrategy, DEFAULT_COMPACT_GRACE, MAX_CHANNEL_CAPACITY,
    MAX_FILE_SIZE, MAX_INDEX_INTERVAL, MIN_FILE_SIZE,
};
pub use consumers::work_queue::{
    DeadLetterSink, Job, JobOrigin, PendingJob, QueueIdentity, Ticket, WorkQueue, WorkQueueInfo,
    WorkQueueOptions,
};
pub use consumers::{AutoReset, Consumer, ConsumerInfo, ConsumerOptions};
pub use error::{Error, Result};
pub use format::compression::{Codec, Compression};
pub use format::fields::FieldKind;
pub use format::record::{Compress, HeaderField, HeaderIter, Record, TagIter};
pub use format::work_queue::JobState;
pub use format::FORMAT_VERSION;
pub use index::fields::{FieldIndexDef, FieldQuery, IndexState, KeyPredicate};
pub use index::key_index::KeyIndexConfig;
pub use notify::Notify;
pub use queue::{reindex, reindex_with_key, writer_pid, DataFileInfo, Queue, Stats};
pub use reader::archived;
pub use reader::backward::BackwardTailer;
pub use reader::columns::{ColumnSet, Columns, FieldColumn};
pub use reader::spare;
pub use reader::tailer::{BareMessage, Message, OnMismatch, OwnedMessage, RunFrame, Start, Tailer};
pub use reader::topic::TopicSelector;
pub use reader::topics_summary::TopicInfo;
pub use reader::typed::{TypedBatch, TypedOp, TypedPredicate};
pub use reader::wait::WaitStrategy;
pub use reader::watch::{TailWatch, WatchId};
pub use recovery::RecoveryReport;
pub use retention::{RetentionPolicy, RetentionReport};
pub use storage::mapped::Mapping;
pub use writer::appender::Appender;
