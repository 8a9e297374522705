//! `metadata.json`: queue-wide settings and the clean-shutdown mark.

use serde::{Deserialize, Serialize};

/// Contents of `base/metadata.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    /// Format version of the queue's files.
    pub format_version: u32,
    /// When the queue was created, µs since the Unix epoch.
    pub created_us: u64,
    /// Largest size of new data files.
    pub file_size: u64,
    /// Sparse-index interval new files are written with.
    pub index_interval: u32,
    /// True only between a clean close and the next writer open: recovery
    /// may then skip zeroing the tail of the last file.
    pub clean_shutdown: bool,
    /// Next sequence at the last clean close. While `clean_shutdown` holds,
    /// the data must reach it: recovery refuses to open, and readers report
    /// damage, where the frames stop short of it.
    pub next_seq: u64,
    /// Process id of the last writer.
    pub writer_pid: u32,
    /// Every message at a position below this was in the key index at the
    /// last clean close: re-indexing after a crash starts here at the latest.
    #[serde(default)]
    pub key_index_upto: u64,
    /// The key index's last position at that close; if the index on disk
    /// ends elsewhere (files lost or rebuilt), `key_index_upto` is not trusted.
    #[serde(default)]
    pub key_index_last: Option<u64>,
    /// Data positions, as half-open `[start, end)` pairs, that a writer
    /// found to hold no keyed message where no key-index file covers them
    /// (before the first file, between two): the next open and read-only
    /// lookups need not read them again. Rewritten by every writer open
    /// (what it checked or kept) and clean close.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_index_clear: Vec<(u64, u64)>,
    /// The options that shape the queue's files, as the queue was created (or
    /// last opened with other ones): an open that does not give an option
    /// uses the value here. Absent in metadata written before version 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<StoredOptions>,
    /// Encryption at rest (format 8): absent when the queue is not
    /// encrypted. Fixed when the queue is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<StoredEncryption>,
    /// The queue's identity: 32 lowercase hex digits, random when the queue
    /// is created, never changed afterwards (a restored copy keeps it).
    /// Absent in metadata written before it existed: the next writer open
    /// adds it (an encrypted queue's `encryption.queue_id`, else a new
    /// random one). Jobs of work queues carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_id: Option<String>,
    /// A typed queue's schema (format 12): `{"versions": [...]}`, every
    /// version in order, the last current (`format::typed::SchemaVersions`).
    /// Absent for an untyped queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
}

impl Metadata {
    /// The queue's id as far as this metadata tells it: `queue_id`, else an
    /// encrypted queue's `encryption.queue_id`.
    pub fn effective_queue_id(&self) -> Option<&str> {
        self.queue_id
            .as_deref()
            .or(self.encryption.as_ref().map(|e| e.queue_id.as_str()))
    }
}

/// Whether `id` is a well-formed `queue_id`: 32 lowercase hex digits.
pub fn is_queue_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `"encryption"` in `metadata.json`: what an open checks a key against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredEncryption {
    /// The AEAD: `"xchacha20poly1305"`.
    pub cipher: String,
    /// The queue's random id (32 hex digits), bound into every sealed
    /// record's associated data.
    pub queue_id: String,
    /// HMAC-SHA256 of `"litemq v8 key check"` under the key (64 hex
    /// digits): a wrong key is told at open.
    pub key_check: String,
}

/// Options remembered in `metadata.json` (`"options"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredOptions {
    /// Largest size of a data file.
    pub file_size: u64,
    /// When to roll, as rules whichever comes first: `["size", bytes]`,
    /// `["count", messages]`, `["daily" | "hourly" | "minutely", 0]`.
    pub roll: Vec<(String, u64)>,
    /// Messages per sparse-index entry.
    pub index_interval: u32,
    /// Key-index geometry of the largest files: `[slots, items]`.
    pub key_index: (u32, u32),
    /// Retention policy, `null` to keep everything.
    pub retention: Option<StoredRetention>,
    /// Several writer processes.
    pub multi_writer: bool,
    /// Declared secondary indexes: header name to type (`"str"`, `"int"`).
    /// Absent before secondary indexes existed.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub indexes: std::collections::BTreeMap<String, String>,
    /// Payload compression; absent (`None`) when payloads are stored as
    /// given, and in metadata written before version 7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<StoredCompression>,
}

/// The compression option in `metadata.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCompression {
    /// `"zstd"`, `"lz4"` or `"gzip"`.
    pub codec: String,
    /// The codec's level.
    pub level: i32,
    /// Smallest payload compressed, in bytes.
    pub min_size: u64,
}

/// A retention policy in `metadata.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRetention {
    /// Microseconds; `null`: no age limit.
    pub max_age_us: Option<u64>,
    /// `RetentionPolicy::max_bytes`; `null`: no limit.
    pub max_bytes: Option<u64>,
    /// `RetentionPolicy::max_files`; `null`: no limit.
    pub max_files: Option<u64>,
    /// `RetentionPolicy::protect_unconsumed`.
    pub protect_unconsumed: bool,
}
