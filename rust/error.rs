//! The one error type of the engine.

use std::path::PathBuf;
use std::sync::Arc;

/// Result alias used throughout litemq.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, with the context a user needs to act on it.
///
/// `Clone`, so that the error that poisoned a writer can be handed to every
/// caller that waits on it (I/O errors are shared behind an `Arc`).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed (`op` names it, `path` the file).
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// The call that failed (`"open"`, `"msync"`, `"rename"`, ...).
        op: &'static str,
        /// The file or directory it was called on.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: Arc<std::io::Error>,
    },

    /// Bytes on disk do not decode: a CRC mismatch, a bad length, a bad header.
    #[error("corrupted data in {} at offset {offset}{}: {reason}", path.display(), seq.map(|s| format!(" (seq {s})")).unwrap_or_default())]
    Corrupted {
        /// The file.
        path: PathBuf,
        /// Byte offset in it of what failed (a frame, a header, an entry).
        offset: u64,
        /// The sequence of the message there, when it is known.
        seq: Option<u64>,
        /// Which check failed.
        reason: String,
    },

    /// Another process holds the writer lock of this queue.
    #[error("queue {} is locked by {}", path.display(), pid.map(|p| format!("process {p}")).unwrap_or_else(|| "another process".into()))]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// The holder, when the lock file names it.
        pid: Option<u32>,
    },

    /// The queue (or the handle) was used after `close`.
    #[error("queue is closed")]
    Closed,

    /// An earlier write failed on the I/O thread; nothing after it was written.
    #[error("writer is poisoned by an earlier failure: {cause}")]
    Poisoned {
        /// The failure that poisoned the writer.
        cause: Arc<Error>,
    },

    /// The I/O thread failed (`cause`) after it had written this append's
    /// frame (or, for a batch, some of its frames) but before the append was
    /// done: the message may be in the queue (readable now, and after a
    /// reopen) although it was not made durable as asked. Retrying may store
    /// it twice; read the queue to find out. The writer is poisoned.
    #[error("the writer failed after this append was written, so it may be stored{}: {cause}", seq.map(|s| format!(" (seq {s})")).unwrap_or_default())]
    MaybeStored {
        /// The append's sequence (a batch's first), when it is known.
        seq: Option<u64>,
        /// The failure.
        cause: Arc<Error>,
    },

    /// A configuration value is out of range or inconsistent.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    /// A value passed to a call is out of range (too large a payload, a bad key).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A typed queue's schema, an evolution of it, or an event refused by
    /// it (FORMAT.md "Typed records"): the message names the field and why.
    #[error("schema: {0}")]
    Schema(String),

    /// The file was written by a newer (or unknown) format version.
    #[error("{} has format version {found}; this litemq reads version {supported}", path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version it has.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },

    /// A write was attempted on a queue opened read-only.
    #[error("queue is opened read-only")]
    ReadOnly,

    /// The sequence is outside the range the queue holds.
    #[error("sequence {seq} is not in the queue (it holds {first}..{next})")]
    NotFound {
        /// The sequence asked for.
        seq: u64,
        /// The oldest sequence kept.
        first: u64,
        /// The sequence the next message gets.
        next: u64,
    },

    /// The sequence is in the queue's range, but key compaction dropped its
    /// message (a later message with the same key superseded it, or it was
    /// a tombstone past its grace period): the sequence is a hole.
    #[error("sequence {seq} was compacted away (a later message with its key superseded it)")]
    Compacted {
        /// The sequence asked for.
        seq: u64,
    },

    /// Encryption at rest: the queue is encrypted and no key was given, or
    /// a key was given for a queue created without encryption (the message
    /// says which).
    #[error("{}: {reason}", path.display())]
    Encryption {
        /// The queue (or archive) directory.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// Encryption at rest: the key given is not the queue's (its check
    /// value in `metadata.json` does not match).
    #[error("{}: wrong encryption key (it does not match the queue's key check value)", path.display())]
    WrongKey {
        /// The queue (or archive) directory.
        path: PathBuf,
    },

    /// The queue was opened in a parent process; its I/O thread did not survive `fork()`.
    #[error("queue was opened before fork(); open it again in the child process")]
    Forked,

    /// A bug in litemq: a thread of the engine panicked (the message says
    /// where). A writer whose I/O thread panicked is poisoned with this cause.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The OS error number behind an [`Error::Io`] (or its poisoning cause).
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            Error::Poisoned { cause } | Error::MaybeStored { cause, .. } => cause.errno(),
            _ => None,
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    pub(crate) fn corrupted(
        path: impl Into<PathBuf>,
        offset: u64,
        seq: Option<u64>,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corrupted {
            path: path.into(),
            offset,
            seq,
            reason: reason.into(),
        }
    }
}
