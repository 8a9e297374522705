//! The keywords of `litemq.Queue(path, ...)`, as argument types, and
//! [`OpenArgs::builder`], which parses them all (in the order of the
//! signature's checks) into a `QueueBuilder` before anything is opened.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use super::super::args::name::{self, Name};
use super::super::args::Arg;
use super::super::fields;
use super::codec::{
    compression, encryption_key, Codec, CompressionLevel, CompressionMinSize, EncryptionKey,
};
use super::modes::{Flush, KeyIndex, Roll, Wait};
use super::retention::retention;
use super::values::{age, flag, int_in, size_in};
use crate::{
    FieldIndexDef, FlushMode, QueueBuilder, RetentionPolicy, MAX_CHANNEL_CAPACITY, MAX_FILE_SIZE,
    MAX_INDEX_INTERVAL, MIN_FILE_SIZE,
};

/// How long `compact=True` keeps a key's last tombstone (and the default
/// `grace` of `Queue.compact`, which `litemq.compaction` reads from the
/// module as `DEFAULT_COMPACT_GRACE_US`): the engine's default.
pub(crate) use crate::config::DEFAULT_COMPACT_GRACE;

/// `True` or `False`, named `N` in messages.
pub(crate) struct Flag<N>(pub bool, pub PhantomData<N>);

impl<'a, 'py, N: Name> FromPyObject<'a, 'py> for Flag<N> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Flag(flag(&obj, N::NAME)?, PhantomData))
    }
}

/// `file_size=`: bytes (an int or `"64MiB"`), `MIN_FILE_SIZE` to `MAX_FILE_SIZE`.
pub(crate) struct FileSize(pub u64);

impl<'a, 'py> FromPyObject<'a, 'py> for FileSize {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(FileSize(size_in(
            &obj,
            "file_size",
            MIN_FILE_SIZE,
            MAX_FILE_SIZE,
        )?))
    }
}

/// `index_interval=`: 1 to `MAX_INDEX_INTERVAL`.
pub(crate) struct IndexInterval(pub u32);

impl<'a, 'py> FromPyObject<'a, 'py> for IndexInterval {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let n = int_in(&obj, "index_interval", 1, MAX_INDEX_INTERVAL.into())?;
        Ok(IndexInterval(n as u32))
    }
}

/// `channel_capacity=`: 1 to `MAX_CHANNEL_CAPACITY`.
pub(crate) struct ChannelCapacity(pub usize);

impl<'a, 'py> FromPyObject<'a, 'py> for ChannelCapacity {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let n = int_in(&obj, "channel_capacity", 1, MAX_CHANNEL_CAPACITY as u64)?;
        Ok(ChannelCapacity(n as usize))
    }
}

/// `max_decompressed_size=`: bytes, at least 1.
pub(crate) struct MaxDecompressedSize(pub usize);

impl<'a, 'py> FromPyObject<'a, 'py> for MaxDecompressedSize {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let n = size_in(&obj, "max_decompressed_size", 1, usize::MAX as u64)?;
        Ok(MaxDecompressedSize(n as usize))
    }
}

/// A `litemq.Retention`, checked, named `N` in messages (`retention=`,
/// `apply_retention(policy)`).
pub(crate) struct Retention<N>(pub RetentionPolicy, pub PhantomData<N>);

impl<'a, 'py, N: Name> FromPyObject<'a, 'py> for Retention<N> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Retention(retention(&obj, N::NAME)?, PhantomData))
    }
}

/// `compact=`: key compaction after every roll. True keeps tombstones
/// [`DEFAULT_COMPACT_GRACE`], a duration is their grace; False: only
/// `compact()` (as None).
pub(crate) struct CompactOnRoll(pub Option<Duration>);

impl<'a, 'py> FromPyObject<'a, 'py> for CompactOnRoll {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = obj.cast::<PyBool>() {
            return Ok(CompactOnRoll(b.is_true().then_some(DEFAULT_COMPACT_GRACE)));
        }
        Ok(CompactOnRoll(Some(Duration::from_micros(age(
            &obj, "compact",
        )?))))
    }
}

/// `indexes=`: `{"customer": "str", "price": "int"}`.
pub(crate) struct Indexes(pub Vec<FieldIndexDef>);

impl<'a, 'py> FromPyObject<'a, 'py> for Indexes {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Indexes(fields::indexes_arg(&obj)?))
    }
}

/// Every keyword of `litemq.Queue(path, ...)` but the path; `None`: left
/// out (or None), the engine's default.
pub(crate) struct OpenArgs {
    pub file_size: Option<Arg<FileSize>>,
    pub roll: Option<Arg<Roll>>,
    pub flush: Option<Arg<Flush>>,
    pub index_interval: Option<Arg<IndexInterval>>,
    pub verify_on_startup: Option<Arg<Flag<name::VerifyOnStartup>>>,
    pub read_only: Option<Arg<Flag<name::ReadOnly>>>,
    pub channel_capacity: Option<Arg<ChannelCapacity>>,
    pub wait: Option<Arg<Wait>>,
    pub key_index: Option<Arg<KeyIndex>>,
    pub retention: Option<Arg<Retention<name::Retention>>>,
    pub multi_writer: Option<Arg<Flag<name::MultiWriter>>>,
    pub indexes: Option<Arg<Indexes>>,
    pub compression: Option<Arg<Codec>>,
    pub compression_level: Option<Arg<CompressionLevel>>,
    pub compression_min_size: Option<Arg<CompressionMinSize>>,
    pub max_decompressed_size: Option<Arg<MaxDecompressedSize>>,
    pub compact: Option<Arg<CompactOnRoll>>,
    pub encryption_key: Option<Arg<EncryptionKey>>,
    pub encryption_key_file: Option<PathBuf>,
    /// `schema=`: one schema version's JSON (`litemq.schema.to_json`).
    pub schema: Option<String>,
}

/// What [`OpenArgs::builder`] makes: the builder, and what the handle keeps.
pub(crate) struct Opening {
    pub builder: QueueBuilder,
    pub read_only: bool,
    /// `flush="sync"`: appends wait for the I/O thread.
    pub sync_flush: bool,
}

impl OpenArgs {
    /// Parses every option (the first bad one raises) into a builder for
    /// the queue at `path`. The writer lock is taken at the first append
    /// (or add_index): a handle that only reads never locks a writer out.
    pub(crate) fn builder(self, path: &Path) -> PyResult<Opening> {
        let verify_on_startup = Arg::opt(self.verify_on_startup)?.is_some_and(|Flag(b, _)| b);
        let read_only = Arg::opt(self.read_only)?.is_some_and(|Flag(b, _)| b);
        let multi_writer = Arg::opt(self.multi_writer)?.map(|Flag(b, _)| b);
        let mut builder = QueueBuilder::new(path)
            .verify_on_startup(verify_on_startup)
            .read_only(read_only)
            .lock_on_first_write(true);
        if let Some(m) = multi_writer {
            builder = builder.multi_writer(m);
        }
        if let Some(FileSize(n)) = Arg::opt(self.file_size)? {
            builder = builder.file_size(n);
        }
        if let Some(Roll(roll)) = Arg::opt(self.roll)? {
            builder = builder.roll(roll);
        }
        let mut sync_flush = false;
        if let Some(flush) = Arg::opt(self.flush)? {
            let mode = flush.mode();
            sync_flush = mode == FlushMode::Sync;
            builder = builder.flush_mode(mode);
        }
        if let Some(IndexInterval(n)) = Arg::opt(self.index_interval)? {
            builder = builder.index_interval(n);
        }
        if let Some(ChannelCapacity(n)) = Arg::opt(self.channel_capacity)? {
            builder = builder.channel_capacity(n);
        }
        if let Some(Wait(wait)) = Arg::opt(self.wait)? {
            builder = builder.wait_strategy(wait);
        }
        if let Some(KeyIndex(config)) = Arg::opt(self.key_index)? {
            builder = builder.key_index(config);
        }
        if let Some(Retention(policy, _)) = Arg::opt(self.retention)? {
            builder = builder.retention(policy);
        }
        if let Some(CompactOnRoll(Some(grace))) = Arg::opt(self.compact)? {
            builder = builder.compact_on_roll(grace);
        }
        if let Some(codec) = self.compression {
            builder = builder.compression(compression(
                codec,
                self.compression_level,
                self.compression_min_size,
            )?);
        } else if self.compression_level.is_some() || self.compression_min_size.is_some() {
            return Err(PyTypeError::new_err(
                "compression_level and compression_min_size need compression= (the codec) \
                 in the same call",
            ));
        }
        if let Some(MaxDecompressedSize(n)) = Arg::opt(self.max_decompressed_size)? {
            builder = builder.max_decompressed_size(n);
        }
        if let Some(key) = encryption_key(self.encryption_key, self.encryption_key_file)? {
            builder = builder.encryption_key(Some(key));
        }
        if let Some(json) = &self.schema {
            builder = builder.schema(super::super::typed::parse_new(json)?);
        }
        if let Some(Indexes(defs)) = Arg::opt(self.indexes)? {
            for def in defs {
                builder = builder.index(def);
            }
        }
        Ok(Opening {
            builder,
            read_only,
            sync_flush,
        })
    }
}
