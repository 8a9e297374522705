//! The values options are made of: sizes (an int or `"64MiB"`), counts,
//! bounded ints, flags and durations (a `timedelta`, seconds or `"7d"`), and
//! the Python classes options are given as.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString, PyType};

use super::super::args::type_name;
use super::super::errors::config_error;

/// Largest size or count any option takes: the engine holds them in 64 bits.
pub(super) const U64_MAX: u64 = u64::MAX;

/// The Python classes options are given as, looked up once.
pub(super) struct Classes {
    pub(super) batch: Py<PyType>,
    pub(super) retention: Py<PyType>,
    pub(super) timedelta: Py<PyType>,
}

pub(super) static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

pub(super) fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
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

/// `repr(obj)`, for messages.
pub(super) fn repr(obj: &Bound<'_, PyAny>) -> String {
    obj.repr().map(|r| r.to_string()).unwrap_or_default()
}

/// `str(x)` of a Python float (`1e+300`, `nan`, `0.5`), for messages.
pub(super) fn float_str(py: Python<'_>, x: f64) -> String {
    PyFloat::new(py, x).to_string()
}

/// A Python int, sorted by what the options care about.
pub(super) enum Int {
    /// Below zero.
    Negative,
    /// 0 to `u128::MAX`.
    Value(u128),
    /// Larger than `u128::MAX`.
    Huge,
}

/// The value of `obj`, a Python int (`PyInt` checked by the caller).
pub(super) fn int_value(obj: &Bound<'_, PyAny>) -> PyResult<Int> {
    match obj.extract::<u128>() {
        Ok(v) => Ok(Int::Value(v)),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
            Ok(if obj.lt(0)? { Int::Negative } else { Int::Huge })
        }
        Err(e) => Err(e),
    }
}

/// Whether `obj` is an int and not a bool (`isinstance(x, int)`, minus `bool`).
pub(super) fn is_int(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>()
}

pub(super) const UNITS: [(&str, u128); 14] = [
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
pub(super) fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Where the run of digits at the start of `t` ends. Digits are Unicode
/// decimal digits, as Python's `\d` and `int()` take them: non-ASCII ones
/// are converted by Python (`number`), which refuses the numeric characters
/// that are not decimal digits (`²`, `½`).
pub(super) fn digits_end(t: &str) -> usize {
    t.find(|c: char| !c.is_numeric()).unwrap_or(t.len())
}

/// `int(digits)` or `float(digits)` (`number`) of a run of Unicode digits,
/// `None` when Python refuses it.
pub(super) fn number<'py>(
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
pub(super) fn size_text(py: Python<'_>, text: &str) -> PyResult<Option<u128>> {
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
pub(super) fn max_age_str(py: Python<'_>) -> String {
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
pub(super) fn seconds_to_micros(seconds: f64) -> Option<u64> {
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
