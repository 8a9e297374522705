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

use std::time::Duration;

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple, PyType};

use super::errors::config_error;
use crate::{FlushMode, KeyIndexConfig, RetentionPolicy, RollPeriod, RollStrategy, WaitStrategy};

/// Largest size or count any option takes: the engine holds them in 64 bits.
const U64_MAX: u64 = u64::MAX;

/// The Python classes options are given as, looked up once.
struct Classes {
    batch: Py<PyType>,
    retention: Py<PyType>,
    timedelta: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
    CLASSES.get_or_try_init(py, || {
        let class = |module: &str, name: &str| -> PyResult<Py<PyType>> {
            Ok(py
                .import(module)?
                .getattr(name)?
                .cast_into::<PyType>()?
                .unbind())
        };
        Ok(Classes {
            batch: class("litemq.options", "Batch")?,
            retention: class("litemq.retention", "Retention")?,
            timedelta: class("datetime", "timedelta")?,
        })
    })
}

/// `type(obj).__name__`, for messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// `repr(obj)`, for messages.
fn repr(obj: &Bound<'_, PyAny>) -> String {
    obj.repr().map(|r| r.to_string()).unwrap_or_default()
}

/// `str(x)` of a Python float (`1e+300`, `nan`, `0.5`), for messages.
fn float_str(py: Python<'_>, x: f64) -> String {
    PyFloat::new(py, x).to_string()
}

/// A Python int, sorted by what the options care about.
enum Int {
    /// Below zero.
    Negative,
    /// 0 to `u128::MAX`.
    Value(u128),
    /// Larger than `u128::MAX`.
    Huge,
}

/// The value of `obj`, a Python int (`PyInt` checked by the caller).
fn int_value(obj: &Bound<'_, PyAny>) -> PyResult<Int> {
    match obj.extract::<u128>() {
        Ok(v) => Ok(Int::Value(v)),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
            Ok(if obj.lt(0)? { Int::Negative } else { Int::Huge })
        }
        Err(e) => Err(e),
    }
}

/// Whether `obj` is an int and not a bool (`isinstance(x, int)`, minus `bool`).
fn is_int(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>()
}

const UNITS: [(&str, u128); 14] = [
    ("", 1),
    ("b", 1),
    ("k", 1 << 10),
    ("kb", 1 << 10),
    ("kib", 1 << 10),
    ("m", 1 << 20),
    ("mb", 1 << 20),
    ("mib", 1 << 20),
    ("g", 1 << 30),
    ("gb", 1 << 30),
    ("gib", 1 << 30),
    ("t", 1 << 40),
    ("tb", 1 << 40),
    ("tib", 1 << 40),
];

/// Whether Python's `str.strip()` and `\s` take `c` for white space: Unicode
/// white space, and the separators `\x1c` to `\x1f`.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Where the run of digits at the start of `t` ends. Digits are Unicode
/// decimal digits, as Python's `\d` and `int()` take them: non-ASCII ones
/// are converted by Python (`number`), which refuses the numeric characters
/// that are not decimal digits (`²`, `½`).
fn digits_end(t: &str) -> usize {
    t.find(|c: char| !c.is_numeric()).unwrap_or(t.len())
}

/// `int(digits)` or `float(digits)` (`number`) of a run of Unicode digits,
/// `None` when Python refuses it.
fn number<'py>(
    py: Python<'py>,
    digits: &str,
    number: &Bound<'py, PyType>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match number.call1((digits,)) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_instance_of::<PyValueError>(py) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `"64MiB"`, `" 4096 "`, `"1 g"`: digits, then an optional unit, spaces
/// around either. `None` when the text is not of that form; the value
/// saturates at `u128::MAX`.
fn size_text(py: Python<'_>, text: &str) -> PyResult<Option<u128>> {
    let t = text.trim_matches(is_space);
    let end = digits_end(t);
    let unit = t[end..].trim_start_matches(is_space);
    if end == 0 || !unit.chars().all(|c| c.is_ascii_alphabetic()) {
        return Ok(None);
    }
    let unit = unit.to_ascii_lowercase();
    let Some((_, factor)) = UNITS.iter().find(|(name, _)| *name == unit) else {
        return Ok(None);
    };
    let digits = &t[..end];
    let n = if digits.is_ascii() {
        digits.bytes().fold(0u128, |n, d| {
            n.saturating_mul(10).saturating_add(u128::from(d - b'0'))
        })
    } else {
        match number(py, digits, &py.get_type::<PyInt>())? {
            None => return Ok(None),
            Some(v) => match int_value(&v)? {
                Int::Value(n) => n,
                Int::Negative | Int::Huge => u128::MAX,
            },
        }
    };
    Ok(Some(n.saturating_mul(*factor)))
}

/// Bytes from an int or a string such as `"64MiB"`, `"1g"`, `"4096"`:
/// positive and at most `maximum` (`None`: the caller checks the bound; the
/// value saturates at `u128::MAX`).
pub(crate) fn size(obj: &Bound<'_, PyAny>, what: &str, maximum: Option<u64>) -> PyResult<u128> {
    let n = if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int or a string like '64MiB', not bool"
        )));
    } else if obj.is_instance_of::<PyInt>() {
        match int_value(obj)? {
            Int::Negative => 0,
            Int::Value(v) => v,
            Int::Huge => u128::MAX,
        }
    } else if let Ok(s) = obj.cast::<PyString>() {
        size_text(obj.py(), s.to_str()?)?.ok_or_else(|| {
            config_error(format!(
                "{what} must be a number of bytes like 4096 or '64MiB', got {}",
                repr(obj)
            ))
        })?
    } else {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int or a string like '64MiB', not {}",
            type_name(obj)
        )));
    };
    if n == 0 {
        return Err(config_error(format!(
            "{what} must be positive, got {}",
            repr(obj)
        )));
    }
    match maximum {
        Some(max) if n > u128::from(max) => Err(config_error(format!(
            "{what} must be at most {max} bytes, got {}",
            repr(obj)
        ))),
        _ => Ok(n),
    }
}

/// A size in `min..=max` (a `file_size`), named `what` in errors.
pub(crate) fn size_in(obj: &Bound<'_, PyAny>, what: &str, min: u64, max: u64) -> PyResult<u64> {
    let n = size(obj, what, None)?;
    match u64::try_from(n) {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => {
            let got = if n == u128::MAX {
                repr(obj)
            } else {
                n.to_string()
            };
            Err(config_error(format!(
                "{what} must be between {min} and {max}, got {got}"
            )))
        }
    }
}

/// A whole number 1 to 2**64 - 1 from an int or a string (`int(s)`
/// spellings: `"1000"`, `" 1_000 "`).
pub(crate) fn count(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let value = if is_int(obj) {
        obj.clone()
    } else if obj.is_instance_of::<PyString>() {
        match obj.py().get_type::<PyInt>().call1((obj,)) {
            Ok(v) => v,
            Err(e) if e.is_instance_of::<PyValueError>(obj.py()) => {
                return Err(config_error(format!(
                    "{what} must be a whole number, got {}",
                    repr(obj)
                )))
            }
            Err(e) => return Err(e),
        }
    } else {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            type_name(obj)
        )));
    };
    match int_value(&value)? {
        Int::Value(n) if n >= 1 && n <= u128::from(U64_MAX) => Ok(n as u64),
        _ => Err(config_error(format!(
            "{what} must be between 1 and {U64_MAX}, got {}",
            repr(obj)
        ))),
    }
}

/// An integer option in `min..=max` (`index_interval`, `channel_capacity`);
/// anything else is a `ConfigError` naming the limits (a `TypeError` when
/// not an int).
pub(crate) fn int_in(obj: &Bound<'_, PyAny>, what: &str, min: u64, max: u64) -> PyResult<u64> {
    if !is_int(obj) {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            type_name(obj)
        )));
    }
    match int_value(obj)? {
        Int::Value(n) if n >= u128::from(min) && n <= u128::from(max) => Ok(n as u64),
        _ => Err(config_error(format!(
            "{what} must be between {min} and {max}, got {obj}"
        ))),
    }
}

/// `True` or `False`, nothing else.
pub(crate) fn flag(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<bool> {
    match obj.cast::<PyBool>() {
        Ok(b) => Ok(b.is_true()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be True or False, not {}",
            type_name(obj)
        ))),
    }
}

/// `str(timedelta(microseconds=2**64 - 1))`: the longest age, for messages.
fn max_age_str(py: Python<'_>) -> String {
    classes(py)
        .and_then(|c| {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("microseconds", U64_MAX)?;
            Ok(c.timedelta.bind(py).call((), Some(&kwargs))?.to_string())
        })
        .unwrap_or_else(|_| format!("{U64_MAX} µs"))
}

/// Whole microseconds in `seconds` (finite, >= 0), rounded as
/// `timedelta(seconds=...)` rounds: the fraction to the nearest µs, ties to
/// even. `None` beyond `u64::MAX` µs.
fn seconds_to_micros(seconds: f64) -> Option<u64> {
    if seconds.is_nan() || seconds >= 1e14 {
        return None; // over 3 million years: beyond u64::MAX µs anyway
    }
    let whole = seconds.trunc();
    let scaled = (seconds - whole) * 1e6;
    let mut us = whole as u128 * 1_000_000 + scaled.trunc() as u128;
    let left = scaled - scaled.trunc();
    let mut round = left.round();
    if (round - left).abs() == 0.5 {
        let odd = (us % 2) as f64;
        round = 2.0 * ((left + odd) * 0.5).round() - odd;
    }
    us += round as u128;
    u64::try_from(us).ok()
}

/// A duration in microseconds (1 to 2**64 - 1) from a `timedelta`, seconds
/// (int or float) or a string such as `"7d"`, `"12h"`, `"30m"`, `"45s"`,
/// `"2w"` (a bare number is seconds).
pub(crate) fn age(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let py = obj.py();
    let too_long = |got: String| {
        config_error(format!(
            "{what} must be at most {}, got {got}",
            max_age_str(py)
        ))
    };
    let not_positive = || config_error(format!("{what} must be positive, got {}", repr(obj)));
    let from_seconds = |seconds: f64| -> PyResult<u64> {
        if seconds < 0.0 {
            return Err(not_positive());
        }
        match seconds_to_micros(seconds) {
            None => Err(too_long(format!("{} seconds", float_str(py, seconds)))),
            Some(0) => Err(not_positive()),
            Some(us) => Ok(us),
        }
    };
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a timedelta, seconds or a string like '7d', not bool"
        )));
    }
    let timedelta = classes(py)?.timedelta.bind(py);
    if obj.is_instance(timedelta)? {
        let one_us = timedelta.call1((0, 0, 1))?;
        return match int_value(&obj.floor_div(one_us)?)? {
            Int::Value(0) | Int::Negative => Err(not_positive()),
            Int::Value(us) if us <= u128::from(U64_MAX) => Ok(us as u64),
            _ => Err(too_long(repr(obj))),
        };
    }
    if obj.is_instance_of::<PyInt>() {
        return match int_value(obj)? {
            Int::Negative | Int::Value(0) => Err(not_positive()),
            Int::Value(s) => match s.checked_mul(1_000_000).map(u64::try_from) {
                Some(Ok(us)) => Ok(us),
                _ => Err(too_long(format!("{obj} seconds"))),
            },
            Int::Huge => Err(too_long(format!("{obj} seconds"))),
        };
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let seconds = f.value();
        if !seconds.is_finite() {
            return Err(config_error(format!(
                "{what} must be a finite number of seconds, got {}",
                float_str(py, seconds)
            )));
        }
        return from_seconds(seconds);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        let bad = || {
            config_error(format!(
                "{what} must be a duration like '7d', '12h', '30m', '45s' or '2w', got {}",
                repr(obj)
            ))
        };
        let text = s.to_str()?.to_lowercase();
        let t = text.trim_matches(is_space);
        let int_end = digits_end(t);
        if int_end == 0 {
            return Err(bad());
        }
        let mut number_end = int_end;
        if t[int_end..].starts_with('.') {
            number_end = int_end + 1 + digits_end(&t[int_end + 1..]);
        }
        let unit: u32 = match t[number_end..].trim_start_matches(is_space) {
            "" | "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86400,
            "w" => 7 * 86400,
            _ => return Err(bad()),
        };
        let digits = &t[..number_end];
        let number: f64 = if digits.is_ascii() {
            digits.parse().map_err(|_| bad())?
        } else {
            match number(py, digits, &py.get_type::<PyFloat>())? {
                Some(v) => v.extract()?,
                None => return Err(bad()),
            }
        };
        return from_seconds(number * f64::from(unit));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a timedelta, seconds or a string like '7d', not {}",
        type_name(obj)
    )))
}

/// The `roll` option: `"daily"`, `"hourly"`, `"minutely"` (UTC), an int or
/// `"size:64MiB"` (bytes), `"count:N"` (messages), or a dict
/// (`{"period": ..., "size": ..., "count": ...}`) or list/tuple of rules,
/// any of which rolls.
pub(crate) struct Roll(pub RollStrategy);

fn period(text: &str) -> Option<RollPeriod> {
    match text {
        "minutely" => Some(RollPeriod::Minutely),
        "hourly" => Some(RollPeriod::Hourly),
        "daily" => Some(RollPeriod::Daily),
        _ => None,
    }
}

fn roll_size(obj: &Bound<'_, PyAny>) -> PyResult<RollStrategy> {
    Ok(RollStrategy::Size(
        size(obj, "roll size", Some(U64_MAX))? as u64
    ))
}

/// One rule of a roll option (a string or an int).
fn roll_rule(rule: &Bound<'_, PyAny>) -> PyResult<RollStrategy> {
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
    fn rules(&self) -> Vec<(&'static str, u64)> {
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
fn interval_seconds(interval: &Bound<'_, PyAny>) -> PyResult<f64> {
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
fn batch(bytes: &Bound<'_, PyAny>, interval: &Bound<'_, PyAny>) -> PyResult<(u64, f64)> {
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
    fn name(&self) -> &'static str {
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

/// A `litemq.Retention`'s fields, checked: `(max_age_us, max_bytes,
/// max_files, protect_unconsumed)`.
type RetentionFields = (Option<u64>, Option<u64>, Option<u64>, bool);

fn retention_fields(policy: &Bound<'_, PyAny>) -> PyResult<RetentionFields> {
    let optional = |name: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        let value = policy.getattr(name)?;
        Ok((!value.is_none()).then_some(value))
    };
    let max_age = optional("max_age")?
        .map(|v| age(&v, "max_age"))
        .transpose()?;
    let max_bytes = optional("max_bytes")?
        .map(|v| size(&v, "max_bytes", Some(U64_MAX)).map(|n| n as u64))
        .transpose()?;
    let max_files = match optional("max_files")? {
        None => None,
        Some(files) if !is_int(&files) => {
            return Err(PyTypeError::new_err(format!(
                "max_files must be an int, not {}",
                type_name(&files)
            )))
        }
        Some(files) => match int_value(&files)? {
            Int::Negative | Int::Value(0) => {
                return Err(config_error(format!(
                    "max_files must be at least 1 (the file being written stays), got {files}"
                )))
            }
            Int::Value(n) if n <= u128::from(U64_MAX) => Some(n as u64),
            _ => {
                return Err(config_error(format!(
                    "max_files must be at most {U64_MAX}, got {files}"
                )))
            }
        },
    };
    let protect = policy.getattr("protect_unconsumed")?;
    let protect_unconsumed = match protect.cast::<PyBool>() {
        Ok(b) => b.is_true(),
        Err(_) => {
            return Err(PyTypeError::new_err(format!(
                "protect_unconsumed must be True or False, not {}",
                type_name(&protect)
            )))
        }
    };
    Ok((max_age, max_bytes, max_files, protect_unconsumed))
}

/// The engine's policy for a `litemq.Retention` given as `what` (the
/// `retention` option, `apply_retention`'s `policy`).
pub(crate) fn retention(policy: &Bound<'_, PyAny>, what: &str) -> PyResult<RetentionPolicy> {
    let py = policy.py();
    if !policy.is_instance(classes(py)?.retention.bind(py))? {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a litemq.Retention(...), not {}",
            type_name(policy)
        )));
    }
    let (max_age_us, max_bytes, max_files, protect_unconsumed) = retention_fields(policy)?;
    let policy = RetentionPolicy {
        max_age: max_age_us.map(Duration::from_micros),
        max_bytes,
        max_files: max_files.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        protect_unconsumed,
    };
    policy.validate()?;
    Ok(policy)
}

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

/// Adds the `_parse_*` functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
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

/// The `compression=` option with its level and smallest size: a codec name
/// (`"zstd"`, `"lz4"`, `"gzip"`), or False / `"none"` for none.
pub(crate) fn compression(
    codec: &Bound<'_, PyAny>,
    level: Option<&Bound<'_, PyAny>>,
    min_size: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<crate::Compression>> {
    let off = match codec.cast::<PyBool>() {
        Ok(b) if !b.is_true() => true,
        Ok(_) => {
            return Err(PyTypeError::new_err(
                "compression must be a codec name (\"zstd\", \"lz4\", \"gzip\"), \
                 False or \"none\", not True",
            ))
        }
        Err(_) => false,
    };
    let name: String = if off {
        "none".into()
    } else {
        codec.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "compression must be a codec name (\"zstd\", \"lz4\", \"gzip\"), False or \
                 \"none\", not {}",
                codec
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?
    };
    if name == "none" {
        if level.is_some() || min_size.is_some() {
            return Err(config_error(
                "compression_level and compression_min_size need a codec",
            ));
        }
        return Ok(None);
    }
    let codec = crate::Codec::from_name(&name).ok_or_else(|| {
        config_error(format!(
            "compression {name:?} is unknown: give \"zstd\", \"lz4\", \"gzip\" or \"none\""
        ))
    })?;
    let mut c = crate::Compression::new(codec);
    if let Some(l) = level {
        if !is_int(l) {
            return Err(PyTypeError::new_err("compression_level must be an int"));
        }
        c.level = l
            .extract::<i32>()
            .map_err(|_| config_error("compression_level is out of range"))?;
    }
    if let Some(m) = min_size {
        c.min_size = size_in(m, "compression_min_size", 0, u32::MAX.into())? as usize;
    }
    c.validate().map_err(config_error)?;
    Ok(Some(c))
}

/// The `encryption_key=` / `encryption_key_file=` options: 32 bytes given
/// as a bytes-like object, or read from a file holding the 32 raw bytes or
/// 64 hex digits (surrounding white space ignored). Both at once, or a key
/// of another length, is a `ConfigError`.
pub(crate) fn encryption_key(
    key: Option<&Bound<'_, PyAny>>,
    file: Option<std::path::PathBuf>,
) -> PyResult<Option<[u8; 32]>> {
    let bytes = match (key, file) {
        (Some(_), Some(_)) => {
            return Err(config_error(
                "give encryption_key or encryption_key_file, not both",
            ))
        }
        (None, None) => return Ok(None),
        (Some(k), None) => super::buffer::bytes_arg(k, "encryption_key")
            .map_err(|_| PyTypeError::new_err("encryption_key must be bytes-like (32 bytes)"))?
            .as_slice()
            .to_vec(),
        (None, Some(path)) => {
            let raw = std::fs::read(&path).map_err(|e| {
                pyo3::exceptions::PyOSError::new_err((
                    e.raw_os_error().unwrap_or(0),
                    e.to_string(),
                    path.display().to_string(),
                ))
            })?;
            if raw.len() == 32 {
                raw
            } else {
                std::str::from_utf8(&raw)
                    .ok()
                    .and_then(|t| crate::format::crypto::from_hex(t.trim()))
                    .ok_or_else(|| {
                        config_error(format!(
                            "encryption_key_file {} must hold 32 bytes or 64 hex digits",
                            path.display()
                        ))
                    })?
            }
        }
    };
    let n = bytes.len();
    bytes
        .try_into()
        .map(Some)
        .map_err(|_| config_error(format!("encryption_key must be 32 bytes, not {n}")))
}
