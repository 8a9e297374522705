//! How the queue writes: `roll` ([`Roll`] → `RollStrategy`), `flush`
//! ([`Flush`] → `FlushMode`, with `litemq.Batch`), `wait` ([`Wait`] →
//! `WaitStrategy`) and `key_index` ([`KeyIndex`] → `KeyIndexConfig`).

use std::time::Duration;

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple};

use super::super::args::type_name;
use super::super::errors::config_error;
use super::values::*;
use crate::{FlushMode, KeyIndexConfig, RollPeriod, RollStrategy, WaitStrategy};

/// The `roll` option: `"daily"`, `"hourly"`, `"minutely"` (UTC), an int or
/// `"size:64MiB"` (bytes), `"count:N"` (messages), or a dict
/// (`{"period": ..., "size": ..., "count": ...}`) or list/tuple of rules,
/// any of which rolls.
pub(crate) struct Roll(pub RollStrategy);

pub(super) fn period(text: &str) -> Option<RollPeriod> {
    match text {
        "minutely" => Some(RollPeriod::Minutely),
        "hourly" => Some(RollPeriod::Hourly),
        "daily" => Some(RollPeriod::Daily),
        _ => None,
    }
}

pub(super) fn roll_size(obj: &Bound<'_, PyAny>) -> PyResult<RollStrategy> {
    Ok(RollStrategy::Size(
        size(obj, "roll size", Some(U64_MAX))? as u64
    ))
}

/// One rule of a roll option (a string or an int).
pub(super) fn roll_rule(rule: &Bound<'_, PyAny>) -> PyResult<RollStrategy> {
    const EXPECTED: &str = "roll must be a period name, a size, 'count:N', or a combination";
    if rule.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!("{EXPECTED}, not bool")));
    }
    if rule.is_instance_of::<PyInt>() {
        return roll_size(rule);
    }
    let Ok(s) = rule.cast::<PyString>() else {
        return Err(PyTypeError::new_err(format!(
            "{EXPECTED}, not {}",
            type_name(rule)
        )));
    };
    let text = s.to_str()?.trim_matches(is_space).to_lowercase();
    if let Some(p) = period(&text) {
        return Ok(RollStrategy::Period(p));
    }
    let py = rule.py();
    match text.split_once(':') {
        Some((kind, value)) if kind.trim_matches(is_space) == "count" => {
            Ok(RollStrategy::Count(count(
                PyString::new(py, value.trim_matches(is_space)).as_any(),
                "roll count",
            )?))
        }
        Some((kind, value)) if kind.trim_matches(is_space) == "size" => {
            roll_size(PyString::new(py, value.trim_matches(is_space)).as_any())
        }
        _ => Err(config_error(format!(
            "roll rule {} is not one of 'minutely', 'hourly', 'daily', \
             'size:N', 'count:N' or an int (bytes)",
            repr(rule)
        ))),
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Roll {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let spec: &Bound<'py, PyAny> = &obj;
        let mut rules = Vec::new();
        if let Ok(mapping) = spec.cast::<PyMapping>() {
            for item in mapping.items()?.iter() {
                let (key, value) = item.extract::<(Bound<'py, PyAny>, Bound<'py, PyAny>)>()?;
                rules.push(if key.eq("period")? {
                    let p = value
                        .cast::<PyString>()
                        .ok()
                        .and_then(|s| s.to_str().ok().and_then(|s| period(&s.to_lowercase())));
                    RollStrategy::Period(p.ok_or_else(|| {
                        config_error(format!(
                            "roll period must be one of ('minutely', 'hourly', 'daily'), got {}",
                            repr(&value)
                        ))
                    })?)
                } else if key.eq("size")? {
                    roll_size(&value)?
                } else if key.eq("count")? {
                    RollStrategy::Count(count(&value, "roll count")?)
                } else {
                    return Err(config_error(format!(
                        "unknown roll key {} (expected period, size, count)",
                        repr(&key)
                    )));
                });
            }
            if rules.is_empty() {
                return Err(config_error(
                    "roll dict needs at least one of period, size, count",
                ));
            }
        } else if spec.is_instance_of::<PyList>() || spec.is_instance_of::<PyTuple>() {
            for rule in spec.try_iter()? {
                rules.push(roll_rule(&rule?)?);
            }
            if rules.is_empty() {
                return Err(config_error("roll needs at least one rule"));
            }
        } else {
            rules.push(roll_rule(spec)?);
        }
        Ok(Roll(if rules.len() == 1 {
            rules.remove(0)
        } else {
            RollStrategy::Any(rules)
        }))
    }
}

impl Roll {
    /// `[(kind, value), ...]`, the normalised form `litemq.options.parse_roll`
    /// returns (kinds: size, count, minutely, hourly, daily; 0 for a period).
    pub(super) fn rules(&self) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        self.0.leaves(&mut |leaf| {
            out.push(match leaf {
                RollStrategy::Size(n) => ("size", *n),
                RollStrategy::Count(n) => ("count", *n),
                RollStrategy::Period(RollPeriod::Minutely) => ("minutely", 0),
                RollStrategy::Period(RollPeriod::Hourly) => ("hourly", 0),
                RollStrategy::Period(RollPeriod::Daily) => ("daily", 0),
                RollStrategy::Any(_) => unreachable!("leaves are not Any"),
            });
        });
        out
    }
}

/// The `flush` option: `"async"`, `"sync"` or a `litemq.Batch`.
pub(crate) enum Flush {
    /// `"async"`.
    Async,
    /// `"sync"`.
    Sync,
    /// `litemq.Batch(bytes=..., interval=...)`, checked.
    Batch {
        /// Sync once this many bytes are pending (0: by time only).
        bytes: u64,
        /// The interval in seconds as given (`inf`: by bytes only).
        seconds: f64,
    },
}

impl Flush {
    /// The engine's flush mode. An interval too long for a `Duration` (or
    /// `inf`) means "by bytes only".
    pub(crate) fn mode(&self) -> FlushMode {
        match *self {
            Flush::Async => FlushMode::Async,
            Flush::Sync => FlushMode::Sync,
            Flush::Batch { bytes, seconds } => FlushMode::Batch {
                bytes,
                interval: Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX),
            },
        }
    }
}

/// A `litemq.Batch`'s interval in seconds: a `timedelta`, or seconds (int
/// or float; an int beyond any float is as long as `inf`).
pub(super) fn interval_seconds(interval: &Bound<'_, PyAny>) -> PyResult<f64> {
    let py = interval.py();
    if interval.is_instance(classes(py)?.timedelta.bind(py))? {
        return interval.call_method0("total_seconds")?.extract();
    }
    if interval.is_instance_of::<PyFloat>() || is_int(interval) {
        return match interval.extract::<f64>() {
            Ok(s) => Ok(s),
            Err(e) if e.is_instance_of::<PyOverflowError>(py) => Ok(if interval.gt(0)? {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            }),
            Err(e) => Err(e),
        };
    }
    Err(PyTypeError::new_err(format!(
        "Batch interval must be seconds (float) or a timedelta, not {}",
        type_name(interval)
    )))
}

/// Checks a `litemq.Batch`'s fields: `bytes` 0 to 2**64 - 1, `interval` >= 0,
/// and one of them able to fire. Returns `(bytes, seconds)`.
pub(super) fn batch(bytes: &Bound<'_, PyAny>, interval: &Bound<'_, PyAny>) -> PyResult<(u64, f64)> {
    let py = bytes.py();
    if !is_int(bytes) {
        return Err(PyTypeError::new_err(format!(
            "Batch bytes must be an int, not {}",
            type_name(bytes)
        )));
    }
    let n = match int_value(bytes)? {
        Int::Value(n) if n <= u128::from(U64_MAX) => n as u64,
        _ => {
            return Err(config_error(format!(
                "Batch bytes must be between 0 and {U64_MAX}, got {bytes}"
            )))
        }
    };
    let seconds = interval_seconds(interval)?;
    if seconds.is_nan() || seconds < 0.0 {
        return Err(config_error(format!(
            "Batch interval must be a number of seconds >= 0, got {}",
            float_str(py, seconds)
        )));
    }
    if n == 0 && (seconds == 0.0 || seconds == f64::INFINITY) {
        return Err(config_error(format!(
            "Batch needs bytes > 0 or a finite interval > 0 (got bytes=0, interval={})",
            float_str(py, seconds)
        )));
    }
    Ok((n, seconds))
}

impl<'a, 'py> FromPyObject<'a, 'py> for Flush {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let spec: &Bound<'py, PyAny> = &obj;
        let py = spec.py();
        const EXPECTED: &str = "flush must be 'async', 'sync' or litemq.Batch(...)";
        if spec.is_instance(classes(py)?.batch.bind(py))? {
            let (bytes, seconds) = batch(&spec.getattr("bytes")?, &spec.getattr("interval")?)?;
            return Ok(Flush::Batch { bytes, seconds });
        }
        let Ok(s) = spec.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "{EXPECTED}, not {}",
                type_name(spec)
            )));
        };
        match s.to_str()? {
            "async" => Ok(Flush::Async),
            "sync" => Ok(Flush::Sync),
            _ => Err(config_error(format!("{EXPECTED}, got {}", repr(spec)))),
        }
    }
}

/// The `wait` option: `"default"` or `"busy-spin"`.
pub(crate) struct Wait(pub WaitStrategy);

impl<'a, 'py> FromPyObject<'a, 'py> for Wait {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let spec: &Bound<'py, PyAny> = &obj;
        let Ok(s) = spec.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "wait must be 'default' or 'busy-spin', not {}",
                type_name(spec)
            )));
        };
        match s.to_str()? {
            "default" => Ok(Wait(WaitStrategy::Default)),
            "busy-spin" => Ok(Wait(WaitStrategy::BusySpin)),
            _ => Err(config_error(format!(
                "wait must be 'default' or 'busy-spin', got {}",
                repr(spec)
            ))),
        }
    }
}

impl Wait {
    pub(super) fn name(&self) -> &'static str {
        match self.0 {
            WaitStrategy::Default => "default",
            WaitStrategy::BusySpin => "busy-spin",
        }
    }
}

/// The `key_index` option: `{"slots": S, "items": I}`, either left out for
/// its default, each 1 to 2**32 - 1 (the engine checks the file size).
pub(crate) struct KeyIndex(pub KeyIndexConfig);

impl<'a, 'py> FromPyObject<'a, 'py> for KeyIndex {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let spec: &Bound<'py, PyAny> = &obj;
        let py = spec.py();
        if spec.cast::<PyMapping>().is_err() {
            return Err(PyTypeError::new_err(format!(
                "key_index must be a dict with slots and items, not {}",
                type_name(spec)
            )));
        }
        let unknown = PyList::empty(py);
        for key in spec.try_iter()? {
            let key = key?;
            if !(key.eq("slots")? || key.eq("items")? || unknown.contains(&key)?) {
                unknown.append(key)?;
            }
        }
        if !unknown.is_empty() {
            unknown.sort()?;
            return Err(config_error(format!(
                "unknown key_index keys {} (expected slots, items)",
                repr(unknown.as_any())
            )));
        }
        let defaults = KeyIndexConfig::default();
        let slots = spec.call_method1("get", ("slots", defaults.slots))?;
        let items = spec.call_method1("get", ("items", defaults.items))?;
        let slots = count(&slots, "key_index slots")?;
        let items = count(&items, "key_index items")?;
        match (u32::try_from(slots), u32::try_from(items)) {
            (Ok(slots), Ok(items)) => Ok(KeyIndex(KeyIndexConfig { slots, items })),
            _ => Err(config_error(
                "key_index slots and items must be below 2**32",
            )),
        }
    }
}
