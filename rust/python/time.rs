//! Timestamps: µs since the Unix epoch (UTC) in the engine, `int` or aware
//! `datetime` in Python; waits: seconds (`float`) in Python, `Duration` in
//! the engine.

use std::time::Duration;

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyInt};

struct DateTimeTypes {
    datetime: Py<PyAny>,
    timedelta: Py<PyAny>,
    epoch: Py<PyAny>,
    one_us: Py<PyAny>,
}

static TYPES: PyOnceLock<DateTimeTypes> = PyOnceLock::new();

fn types(py: Python<'_>) -> PyResult<&'static DateTimeTypes> {
    TYPES.get_or_try_init(py, || {
        let module = py.import("datetime")?;
        let datetime = module.getattr("datetime")?;
        let timedelta = module.getattr("timedelta")?;
        let utc = module.getattr("timezone")?.getattr("utc")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("tzinfo", utc)?;
        let epoch = datetime.call((1970, 1, 1), Some(&kwargs))?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("microseconds", 1)?;
        let one_us = timedelta.call((), Some(&kwargs))?;
        Ok(DateTimeTypes {
            datetime: datetime.unbind(),
            timedelta: timedelta.unbind(),
            epoch: epoch.unbind(),
            one_us: one_us.unbind(),
        })
    })
}

/// A UTC-aware `datetime` for a timestamp in µs.
pub(crate) fn to_datetime(py: Python<'_>, micros: u64) -> PyResult<Bound<'_, PyAny>> {
    let t = types(py)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("microseconds", micros)?;
    let delta = t.timedelta.bind(py).call((), Some(&kwargs))?;
    t.epoch.bind(py).add(delta)
}

/// µs since the epoch from an `int` (already µs) or an aware `datetime`.
pub(crate) fn to_micros(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let py = obj.py();
    if obj.is_instance_of::<PyInt>() {
        return obj.extract::<u64>().map_err(|_| {
            PyValueError::new_err(format!(
                "{what} must be a non-negative number of microseconds since the epoch, got {obj}"
            ))
        });
    }
    let t = types(py)?;
    if !obj.is_instance(t.datetime.bind(py))? {
        let type_name = obj.get_type().name()?;
        return Err(PyTypeError::new_err(format!(
            "{what} must be a datetime or an int (µs since the epoch), not {type_name}"
        )));
    }
    if obj.call_method0("utcoffset")?.is_none() {
        return Err(PyValueError::new_err(format!(
            "{what} must be timezone-aware (e.g. datetime.now(timezone.utc)); got the naive {obj}"
        )));
    }
    let micros = obj.sub(t.epoch.bind(py))?.floor_div(t.one_us.bind(py))?;
    micros.extract::<u64>().map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must not be before 1970-01-01 UTC, got {obj}"
        ))
    })
}

/// Seconds as Python passes them: any real number (`float`, `int`, ...). An
/// int too large for a float counts as infinite, as `float(10**400)` cannot.
pub(crate) struct Seconds(pub f64);

impl<'a, 'py> FromPyObject<'a, 'py> for Seconds {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<f64>() {
            Ok(s) => Ok(Seconds(s)),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Ok(Seconds(if obj.gt(0)? {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            })),
            Err(e) => Err(e),
        }
    }
}

/// A wait in seconds as Python passes it (`None`: forever) to a `Duration`
/// (`None`: forever; `Some(ZERO)`: do not wait). Negative and NaN values
/// raise `ValueError`; `inf`, and any finite wait too long for a `Duration`
/// (over about 5.8e11 years), mean forever: such a wait never ends anyway.
pub(crate) fn timeout_arg(timeout: Option<Seconds>, what: &str) -> PyResult<Option<Duration>> {
    match timeout {
        None => Ok(None),
        Some(Seconds(s)) if s.is_nan() || s < 0.0 => Err(PyValueError::new_err(format!(
            "{what} must be a number of seconds >= 0 or None (wait forever), got {s}"
        ))),
        Some(Seconds(s)) => Ok(Duration::try_from_secs_f64(s).ok()),
    }
}
