//! The options `litemq.Queue(...)` takes, parsed once from their Python
//! spellings into the engine's types: one parser per concept, here.
//!
//! - sizes: an int or `"64MiB"` ([`size`]), counts: an int or `"1000"`
//!   ([`count`]), durations: a `timedelta`, seconds or `"7d"` ([`age`]);
//! - `roll` ([`Roll`] → [`RollStrategy`]), `flush` ([`Flush`] →
//!   [`FlushMode`]), `wait` ([`Wait`] → [`WaitStrategy`]), `key_index`
//!   ([`KeyIndex`] → [`KeyIndexConfig`]), `retention` ([`retention`] →
//!   [`RetentionPolicy`]), and the integer and flag options.
//!
//! `litemq.Batch` and `litemq.Retention` stay Python dataclasses (plain data
//! holders, public since the first release); they validate themselves at
//! construction by calling [`batch_seconds`] and [`retention_tuple`], and
//! `litemq.options`' `parse_*` functions, part of the public Python API,
//! call the `_parse_*` functions below for their normalised forms.
//!
//! A wrong type raises `TypeError`, a wrong value `ConfigError` (a
//! `ValueError`) whose message names the option and, for a number, its
//! limits: the messages `options.py` gave when it parsed the options itself.

//!
//! One file per concern: `values.rs` (sizes, counts, ints, flags,
//! durations), `modes.rs` (roll, flush, wait, key_index), `retention.rs`,
//! `codec.rs` (compression and encryption), `open.rs` (the keywords of
//! `Queue(...)`, as argument types, into a `QueueBuilder`); the
//! `_parse_*` functions `litemq.options` calls are here.

mod codec;
mod modes;
mod open;
mod retention;
mod values;

use pyo3::prelude::*;

pub(crate) use codec::{
    encryption_key, Codec, CompressionLevel, CompressionMinSize, EncryptionKey,
};
use modes::batch;
pub(crate) use modes::{Flush, KeyIndex, Roll, Wait};
pub(crate) use open::{
    ChannelCapacity, CompactOnRoll, FileSize, Flag, IndexInterval, Indexes, MaxDecompressedSize,
    OpenArgs, Opening, Retention, DEFAULT_COMPACT_GRACE,
};
use retention::{retention_fields, RetentionFields};
pub(crate) use values::{age, int_in, size};
use values::{is_int, U64_MAX};

// -- for litemq.options and litemq.retention --------------------------------

/// `litemq.options.parse_size`: bytes from an int or `"64MiB"`. An int is
/// returned as given once checked (without a `maximum` it may exceed 128 bits).
#[pyfunction]
#[pyo3(signature = (value, what="size", maximum=Some(U64_MAX)))]
pub(crate) fn _parse_size<'py>(
    value: &Bound<'py, PyAny>,
    what: &str,
    maximum: Option<u64>,
) -> PyResult<Bound<'py, PyAny>> {
    let n = size(value, what, maximum)?;
    if is_int(value) {
        return Ok(value.clone());
    }
    Ok(n.into_pyobject(value.py())?.into_any())
}

/// `litemq.options.parse_roll`: `[(kind, value), ...]`.
#[pyfunction]
pub(crate) fn _parse_roll(spec: &Bound<'_, PyAny>) -> PyResult<Vec<(&'static str, u64)>> {
    Ok(spec.extract::<Roll>()?.rules())
}

/// `litemq.options.parse_flush`: `(mode, bytes, interval_seconds)`.
#[pyfunction]
pub(crate) fn _parse_flush(spec: &Bound<'_, PyAny>) -> PyResult<(&'static str, u64, f64)> {
    Ok(match spec.extract::<Flush>()? {
        Flush::Async => ("async", 0, 0.0),
        Flush::Sync => ("sync", 0, 0.0),
        Flush::Batch { bytes, seconds } => ("batch", bytes, seconds),
    })
}

/// `litemq.options.parse_wait`: the strategy's name.
#[pyfunction]
pub(crate) fn _parse_wait(spec: &Bound<'_, PyAny>) -> PyResult<&'static str> {
    Ok(spec.extract::<Wait>()?.name())
}

/// `litemq.options.parse_key_index`: `(slots, items)`.
#[pyfunction]
pub(crate) fn _parse_key_index(spec: &Bound<'_, PyAny>) -> PyResult<(u32, u32)> {
    let KeyIndex(config) = spec.extract()?;
    Ok((config.slots, config.items))
}

/// `litemq.retention.parse_age`: the duration in microseconds.
#[pyfunction]
#[pyo3(signature = (value, what="max_age"))]
pub(crate) fn _parse_age(value: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    age(value, what)
}

/// `litemq.Batch`'s check: `(bytes, interval_seconds)`.
#[pyfunction]
pub(crate) fn _check_batch(
    bytes: &Bound<'_, PyAny>,
    interval: &Bound<'_, PyAny>,
) -> PyResult<(u64, f64)> {
    batch(bytes, interval)
}

/// `litemq.Retention.to_tuple`: `(max_age_us, max_bytes, max_files,
/// protect_unconsumed)`, every field checked.
#[pyfunction]
pub(crate) fn _retention_tuple(policy: &Bound<'_, PyAny>) -> PyResult<RetentionFields> {
    retention_fields(policy)
}

/// Adds the `_parse_*` functions to the module, and `DEFAULT_COMPACT_GRACE_US`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let grace_us = u64::try_from(DEFAULT_COMPACT_GRACE.as_micros()).unwrap_or(u64::MAX);
    m.add("DEFAULT_COMPACT_GRACE_US", grace_us)?;
    m.add_function(wrap_pyfunction!(_parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(_parse_roll, m)?)?;
    m.add_function(wrap_pyfunction!(_parse_flush, m)?)?;
    m.add_function(wrap_pyfunction!(_parse_wait, m)?)?;
    m.add_function(wrap_pyfunction!(_parse_key_index, m)?)?;
    m.add_function(wrap_pyfunction!(_parse_age, m)?)?;
    m.add_function(wrap_pyfunction!(_check_batch, m)?)?;
    m.add_function(wrap_pyfunction!(_retention_tuple, m)?)?;
    Ok(())
}
