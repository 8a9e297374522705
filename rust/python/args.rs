//! Argument types: each Python spelling an argument takes, parsed once, here,
//! as a `FromPyObject` type a `#[pymethods]` signature names (`Key`,
//! `Limit`, `Micros<name::Start>`, `SeqNum<name::Seq>`, `StartAt`; `topic.rs`
//! has `Tags` and `QueueId`), instead of `Option<&Bound<PyAny>>` and a parser called by hand.
//!
//! Arguments come wrapped in [`Arg`], which keeps the parse's error for the
//! method body to raise (`arg.get()?`): pyo3 would prefix a `TypeError` from
//! a `FromPyObject` with `argument 'x': `, and users (and tests) see the
//! messages below unchanged; it also keeps the order in which a call's
//! arguments are checked (a `queue_id` without a topic is refused before its
//! type is looked at).
//!
//! Messages name the argument: types that take several names carry it as a
//! marker type of [`name`].

use std::marker::PhantomData;

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString};

use super::time;

/// `type(obj).__name__`, for messages (`"?"` if the type has no name).
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// An argument parsed as `T` when the call is made; [`Arg::get`] raises the
/// parse's error as the parser phrased it (see the module comment).
pub(crate) struct Arg<T>(PyResult<T>);

impl<T> Arg<T> {
    /// The parsed value, or the error the parser raised.
    pub(crate) fn get(self) -> PyResult<T> {
        self.0
    }

    /// An optional argument: `None` (left out or given as None) stays `None`.
    pub(crate) fn opt(arg: Option<Self>) -> PyResult<Option<T>> {
        arg.map(Arg::get).transpose()
    }
}

impl<'a, 'py, T> FromPyObject<'a, 'py> for Arg<T>
where
    T: FromPyObject<'a, 'py>,
    T::Error: Into<PyErr>,
{
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Arg(T::extract(obj).map_err(Into::into)))
    }
}

/// The argument names messages use, as types (for [`Micros`], [`SeqNum`] and
/// the options' `Flag` and `Retention`).
pub(crate) mod name {
    /// An argument's name, for messages.
    pub(crate) trait Name {
        const NAME: &'static str;
    }

    macro_rules! names {
        ($($(#[$doc:meta])* $t:ident = $s:literal;)*) => {
            $(
                $(#[$doc])*
                pub(crate) enum $t {}
                impl Name for $t {
                    const NAME: &'static str = $s;
                }
            )*
        };
    }

    names! {
        /// `start=`.
        Start = "start";
        /// `end=`.
        End = "end";
        /// `when=`.
        When = "when";
        /// `seq=`.
        Seq = "seq";
        /// `offset=`.
        Offset = "offset";
        /// `verify_on_startup=`.
        VerifyOnStartup = "verify_on_startup";
        /// `read_only=`.
        ReadOnly = "read_only";
        /// `multi_writer=`.
        MultiWriter = "multi_writer";
        /// `retention=`.
        Retention = "retention";
        /// `policy=`.
        Policy = "policy";
        /// `expires_at=`.
        ExpiresAt = "expires_at";
    }
}

use name::Name;

/// µs since the epoch from an int (already µs) or an aware `datetime`
/// (`time::to_micros`), named `N` in messages.
pub(crate) struct Micros<N>(pub u64, pub PhantomData<N>);

impl<'a, 'py, N: Name> FromPyObject<'a, 'py> for Micros<N> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Micros(time::to_micros(&obj, N::NAME)?, PhantomData))
    }
}

/// A sequence number (`tailer::seq_arg`), named `N` in messages.
pub(crate) struct SeqNum<N>(pub u64, pub PhantomData<N>);

impl<'a, 'py, N: Name> FromPyObject<'a, 'py> for SeqNum<N> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(SeqNum(seq_arg(&obj, N::NAME)?, PhantomData))
    }
}

/// Where a new tailer starts: `"start"`, `"end"` or a sequence number.
pub(crate) struct StartAt(pub crate::Start);

impl<'a, 'py> FromPyObject<'a, 'py> for StartAt {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(StartAt(start_arg(&obj)?))
    }
}

/// The bytes of a key to look up (`find`, `get_latest`): `str` (as UTF-8)
/// or bytes-like.
pub(crate) struct Key(pub Vec<u8>);

impl<'a, 'py> FromPyObject<'a, 'py> for Key {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let key: &Bound<'py, PyAny> = &obj;
        if let Ok(s) = key.cast::<PyString>() {
            return Ok(Key(s.to_str()?.as_bytes().to_vec()));
        }
        super::buffer::bytes_arg(key, "key")
            .map(|b| Key(b.as_slice().to_vec()))
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "key must be str or bytes-like, not {}",
                    type_name(key)
                ))
            })
    }
}

/// `limit=`: at least 0; a limit beyond what memory could hold is no limit.
pub(crate) struct Limit(pub usize);

impl<'a, 'py> FromPyObject<'a, 'py> for Limit {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let obj: &Bound<'py, PyAny> = &obj;
        if obj.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err(
                "limit must be an int or None, not bool",
            ));
        }
        match obj.extract::<usize>() {
            Ok(n) => Ok(Limit(n)),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                if obj.lt(0)? {
                    Err(PyValueError::new_err(format!(
                        "limit must be >= 0, got {obj}"
                    )))
                } else {
                    Ok(Limit(usize::MAX))
                }
            }
            Err(_) => Err(PyTypeError::new_err(format!(
                "limit must be an int or None, not {}",
                type_name(obj)
            ))),
        }
    }
}

/// Where a new tailer starts: `"start"`, `"end"` or a sequence.
fn start_arg(start: &Bound<'_, PyAny>) -> PyResult<crate::Start> {
    if let Ok(s) = start.cast::<PyString>() {
        return match s.to_str()? {
            "start" => Ok(crate::Start::Beginning),
            "end" => Ok(crate::Start::End),
            other => Err(PyValueError::new_err(format!(
                "start must be \"start\", \"end\" or a sequence number, got {other:?}"
            ))),
        };
    }
    seq_arg(start, "start").map(crate::Start::Seq).map_err(|e| {
        if e.is_instance_of::<PyTypeError>(start.py()) {
            PyTypeError::new_err(format!(
                "start must be \"start\", \"end\" or an int, not {}",
                type_name(start)
            ))
        } else {
            e
        }
    })
}

/// A sequence number from a Python int (or anything with `__index__`):
/// `TypeError` for anything else (bool included), `ValueError` when it is negative or above 2**64 - 1 (where
/// pyo3's own conversion would raise `OverflowError`).
pub(crate) fn seq_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let py = obj.py();
    let type_error = || -> PyResult<PyErr> {
        Ok(PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            obj.get_type().name()?
        )))
    };
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(type_error()?);
    }
    match obj.extract::<u64>() {
        Ok(seq) => Ok(seq),
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => Err(PyValueError::new_err(format!(
            "{what} must be a sequence number from 0 to 2**64 - 1, got {obj}"
        ))),
        Err(_) => Err(type_error()?),
    }
}
