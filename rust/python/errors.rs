//! The Python exception tree, and the one conversion from engine errors.
//!
//! ```text
//! LiteMQError
//! ├── CorruptedError            .file .offset .seq .reason
//! ├── LockedError               .file .pid (writer lock or a consumer name)
//! ├── ClosedError
//! ├── PoisonedError             .cause (the original exception, also __cause__)
//! │   └── MaybeStoredError      .seq: the failed append may be stored anyway
//! ├── ConfigError               also a ValueError
//! ├── SchemaError               also a ValueError: a typed queue's schema, an
//! │                             evolution of it, or an event it refuses
//! ├── UnsupportedVersionError   .file .found .supported
//! ├── ReadOnlyError
//! ├── NotFoundError             also an IndexError; .seq .first .next
//! │   └── CompactedError        .seq: key compaction dropped that message (a hole)
//! ├── ForkedError
//! ├── EncryptionError           .file: encrypted queue without its key, or a
//! │   │                         key for a queue created without encryption
//! │   └── WrongKeyError         .file: the key is not the queue's
//! └── InternalError             a bug: a thread of the engine panicked
//! ```
//! I/O failures are not in the tree: they become `OSError` built from
//! `(errno, message, filename)`, so Python picks `FileNotFoundError`,
//! `PermissionError`, ... as it does for its own calls. Bad argument values
//! are `ValueError`, bad types `TypeError`.
//!
//! The classes are created with `type(name, bases, namespace)` because some
//! have two bases, which `create_exception!` cannot express.

use pyo3::exceptions::{PyException, PyIndexError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::Error;

struct Types {
    base: Py<PyType>,
    corrupted: Py<PyType>,
    locked: Py<PyType>,
    closed: Py<PyType>,
    poisoned: Py<PyType>,
    config: Py<PyType>,
    unsupported_version: Py<PyType>,
    read_only: Py<PyType>,
    not_found: Py<PyType>,
    forked: Py<PyType>,
    maybe_stored: Py<PyType>,
    compacted: Py<PyType>,
    internal: Py<PyType>,
    encryption: Py<PyType>,
    wrong_key: Py<PyType>,
    schema: Py<PyType>,
}

static TYPES: PyOnceLock<Types> = PyOnceLock::new();

fn new_type(
    py: Python<'_>,
    name: &str,
    bases: &[&Bound<'_, PyType>],
    doc: &str,
    attrs: &[&str],
) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "litemq")?;
    namespace.set_item("__doc__", doc)?;
    for attr in attrs {
        namespace.set_item(*attr, py.None())?;
    }
    let bases = PyTuple::new(py, bases)?;
    let class = py.get_type::<PyType>().call1((name, bases, namespace))?;
    Ok(class.cast_into::<PyType>()?.unbind())
}

fn create(py: Python<'_>) -> PyResult<Types> {
    let base = new_type(
        py,
        "LiteMQError",
        &[&py.get_type::<PyException>()],
        "Base class of every error litemq raises itself (OS failures are OSError).",
        &[],
    )?;
    let b = base.bind(py);
    let value_error = py.get_type::<PyValueError>();
    let index_error = py.get_type::<PyIndexError>();
    let poisoned = new_type(
        py,
        "PoisonedError",
        &[b],
        "An earlier write failed; the writer refuses further work.\n\n\
         Attribute: cause, the original exception (also set as __cause__).",
        &["cause"],
    )?;
    let not_found = new_type(
        py,
        "NotFoundError",
        &[b, &index_error],
        "The sequence is not in the queue (also an IndexError).\n\n\
         Attributes: seq (int), first (int), next (int): the queue holds [first, next).",
        &["seq", "first", "next"],
    )?;
    let encryption = new_type(
        py,
        "EncryptionError",
        &[b],
        "Encryption at rest: the queue is encrypted and no encryption_key was\n\
         given, or a key was given for a queue created without encryption.\n\n\
         Attribute: file (str): the queue's directory.",
        &["file"],
    )?;
    Ok(Types {
        schema: new_type(
            py,
            "SchemaError",
            &[b, &value_error],
            "A typed queue refused a schema, an evolution of its schema, or an event\n\
             (also a ValueError). The message names the field and says why.",
            &[],
        )?,
        compacted: new_type(
            py,
            "CompactedError",
            &[not_found.bind(py)],
            "The sequence is in the queue's range, but key compaction dropped its\n\
             message (a later message with the same key superseded it, or it was a\n\
             tombstone past its grace period): a hole. A NotFoundError (and an\n\
             IndexError), so code that handles missing sequences handles it too.\n\n\
             Attribute: seq (int); first and next are None.",
            &["seq"],
        )?,
        wrong_key: new_type(
            py,
            "WrongKeyError",
            &[encryption.bind(py)],
            "The encryption_key given is not the queue's (its key check value in\n\
             metadata.json does not match); an EncryptionError.\n\n\
             Attribute: file (str): the queue's directory.",
            &["file"],
        )?,
        encryption,
        maybe_stored: new_type(
            py,
            "MaybeStoredError",
            &[poisoned.bind(py)],
            "The writer failed after this append was written (a PoisonedError):\n\
             the message may be in the queue although the append raised, so a\n\
             retry may store it twice. Read the queue to find out.\n\n\
             Attributes: seq (int or None): the append's sequence (a batch's\n\
             first); cause, the original exception (also __cause__).",
            &["cause", "seq"],
        )?,
        internal: new_type(
            py,
            "InternalError",
            &[b],
            "A bug in litemq: a thread of the engine panicked. A writer whose\n\
             I/O thread panicked is poisoned with this as its cause.",
            &[],
        )?,
        corrupted: new_type(
            py,
            "CorruptedError",
            &[b],
            "Bytes on disk do not decode (bad CRC, bad length, bad header).\n\n\
             Attributes: file (str), offset (int), seq (int or None), reason (str).",
            &["file", "offset", "seq", "reason"],
        )?,
        locked: new_type(
            py,
            "LockedError",
            &[b],
            "Another process (or handle) holds a lock: this queue's writer lock, or\n\
             the named tailer's name (one open handle per name).\n\n\
             Attributes: file (str), pid (int or None): the process that holds it.",
            &["file", "pid"],
        )?,
        closed: new_type(
            py,
            "ClosedError",
            &[b],
            "The queue, appender or tailer was used after close().",
            &[],
        )?,
        poisoned,
        config: new_type(
            py,
            "ConfigError",
            &[b, &value_error],
            "An option passed to Queue() is invalid (also a ValueError).",
            &[],
        )?,
        unsupported_version: new_type(
            py,
            "UnsupportedVersionError",
            &[b],
            "A file was written by a format version this litemq cannot read.\n\n\
             Attributes: file (str), found (int), supported (int).",
            &["file", "found", "supported"],
        )?,
        read_only: new_type(
            py,
            "ReadOnlyError",
            &[b],
            "A write was attempted on a queue opened with read_only=True.",
            &[],
        )?,
        not_found,
        forked: new_type(
            py,
            "ForkedError",
            &[b],
            "A queue, appender or tailer opened before os.fork() was used in the child.\n\n\
             Open the queue again in the child process.",
            &[],
        )?,
        base,
    })
}

fn types(py: Python<'_>) -> PyResult<&'static Types> {
    TYPES.get_or_try_init(py, || create(py))
}

/// Creates the classes and adds them to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let t = types(py)?;
    for class in [
        &t.base,
        &t.corrupted,
        &t.locked,
        &t.closed,
        &t.poisoned,
        &t.config,
        &t.unsupported_version,
        &t.read_only,
        &t.not_found,
        &t.forked,
        &t.maybe_stored,
        &t.compacted,
        &t.internal,
        &t.encryption,
        &t.wrong_key,
        &t.schema,
    ] {
        let class = class.bind(py);
        m.add(class.name()?, class)?;
    }
    Ok(())
}

/// Instantiates `class(message)` and sets `attrs` on the instance.
fn raise(
    py: Python<'_>,
    class: &Py<PyType>,
    message: String,
    attrs: &[(&str, Bound<'_, PyAny>)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let value = class.bind(py).call1((message,))?;
        for (name, attr) in attrs {
            value.setattr(*name, attr)?;
        }
        Ok(PyErr::from_value(value))
    };
    build().unwrap_or_else(|e| e)
}

/// Strips std's " (os error N)" suffix: Python prints the errno itself.
fn strerror(source: &std::io::Error) -> String {
    let text = source.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// An errno for I/O errors the engine made itself (no OS call behind them),
/// so that Python still picks the matching OSError subclass.
fn kind_errno(kind: std::io::ErrorKind) -> Option<i32> {
    use std::io::ErrorKind as K;
    Some(match kind {
        K::NotFound => libc::ENOENT,
        K::PermissionDenied => libc::EACCES,
        K::AlreadyExists => libc::EEXIST,
        K::NotADirectory => libc::ENOTDIR,
        K::IsADirectory => libc::EISDIR,
        K::StorageFull => libc::ENOSPC,
        K::TimedOut => libc::ETIMEDOUT,
        K::Interrupted => libc::EINTR,
        K::WouldBlock => libc::EAGAIN,
        K::InvalidInput => libc::EINVAL,
        _ => return None,
    })
}

/// The Python exception for an engine error.
pub(crate) fn to_pyerr(py: Python<'_>, err: &Error) -> PyErr {
    let t = match types(py) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let message = err.to_string();
    let path_str = |p: &std::path::Path| p.display().to_string();
    match err {
        Error::Io { op, path, source } => {
            let text = format!("{op} failed: {}", strerror(source));
            match source.raw_os_error().or_else(|| kind_errno(source.kind())) {
                Some(errno) => PyOSError::new_err((errno, text, path_str(path))),
                None => PyOSError::new_err(format!("{text}: {}", path.display())),
            }
        }
        Error::Corrupted {
            path,
            offset,
            seq,
            reason,
        } => {
            let err = raise(
                py,
                &t.corrupted,
                message,
                &[
                    ("file", path_str(path).into_pyobject(py).unwrap().into_any()),
                    ("offset", offset.into_pyobject(py).unwrap().into_any()),
                    ("seq", seq.into_pyobject(py).unwrap().into_any()),
                    ("reason", reason.into_pyobject(py).unwrap().into_any()),
                ],
            );
            add_note(py, &err, format!("file: {}", path.display()));
            add_note(py, &err, format!("offset: {offset}"));
            if let Some(seq) = seq {
                add_note(py, &err, format!("seq: {seq}"));
            }
            add_note(
                py,
                &err,
                "a tailer steps over the damage with skip_damaged() (what it skips is lost)",
            );
            err
        }
        Error::Locked { path, pid } => {
            // The writer lock names the queue's directory (a named tailer's,
            // its position file): say how to read, or write from several processes.
            let message = if path.is_dir() {
                format!(
                    "{message}: a queue has one writer process at a time. To only read, open \
                     it with read_only=True (a litemq.Queue that never appends takes no lock \
                     either: the lock is taken at its first append); for several writer \
                     processes, open every writer with multi_writer=True"
                )
            } else {
                message
            };
            let err = raise(
                py,
                &t.locked,
                message,
                &[
                    ("file", path_str(path).into_pyobject(py).unwrap().into_any()),
                    ("pid", pid.into_pyobject(py).unwrap().into_any()),
                ],
            );
            add_note(py, &err, format!("file: {}", path.display()));
            err
        }
        Error::Closed => raise(py, &t.closed, message, &[]),
        Error::Poisoned { cause } => {
            let cause = to_pyerr(py, cause);
            let err = raise(
                py,
                &t.poisoned,
                message,
                &[("cause", cause.value(py).clone().into_any())],
            );
            err.set_cause(py, Some(cause));
            err
        }
        Error::InvalidConfig(_) => raise(py, &t.config, message, &[]),
        Error::InvalidArgument(what) => PyValueError::new_err(what.clone()),
        Error::Schema(_) => raise(py, &t.schema, message, &[]),
        Error::UnsupportedVersion {
            path,
            found,
            supported,
        } => {
            let err = raise(
                py,
                &t.unsupported_version,
                message,
                &[
                    ("file", path_str(path).into_pyobject(py).unwrap().into_any()),
                    ("found", found.into_pyobject(py).unwrap().into_any()),
                    ("supported", supported.into_pyobject(py).unwrap().into_any()),
                ],
            );
            add_note(py, &err, format!("file: {}", path.display()));
            err
        }
        Error::ReadOnly => raise(py, &t.read_only, message, &[]),
        Error::NotFound { seq, first, next } => raise(
            py,
            &t.not_found,
            message,
            &[
                ("seq", seq.into_pyobject(py).unwrap().into_any()),
                ("first", first.into_pyobject(py).unwrap().into_any()),
                ("next", next.into_pyobject(py).unwrap().into_any()),
            ],
        ),
        Error::Compacted { seq } => raise(
            py,
            &t.compacted,
            message,
            &[("seq", seq.into_pyobject(py).unwrap().into_any())],
        ),
        Error::MaybeStored { seq, cause } => {
            let cause = to_pyerr(py, cause);
            let err = raise(
                py,
                &t.maybe_stored,
                message,
                &[
                    ("cause", cause.value(py).clone().into_any()),
                    ("seq", seq.into_pyobject(py).unwrap().into_any()),
                ],
            );
            err.set_cause(py, Some(cause));
            err
        }
        Error::Forked => raise(py, &t.forked, message, &[]),
        Error::Internal(_) => raise(py, &t.internal, message, &[]),
        Error::Encryption { path, .. } => raise(
            py,
            &t.encryption,
            message,
            &[(
                "file",
                path_str(path).into_pyobject(py).expect("str").into_any(),
            )],
        ),
        Error::WrongKey { path } => raise(
            py,
            &t.wrong_key,
            message,
            &[(
                "file",
                path_str(path).into_pyobject(py).expect("str").into_any(),
            )],
        ),
    }
}

/// Adds `note` to the exception's `__notes__` (shown under the traceback):
/// where the problem is, for errors that know it.
fn add_note(py: Python<'_>, err: &PyErr, note: impl Into<String>) {
    // Best effort: a failure here must not replace the error being raised.
    let _ = err.value(py).call_method1("add_note", (note.into(),));
}

impl From<Error> for PyErr {
    fn from(err: Error) -> PyErr {
        Python::attach(|py| to_pyerr(py, &err))
    }
}

/// `LockedError` for a named tailer that is open elsewhere, phrased in
/// terms of the name rather than of its position file.
pub(crate) fn consumer_busy(py: Python<'_>, name: &str, err: &Error) -> PyErr {
    let Error::Locked { path, pid } = err else {
        return to_pyerr(py, err);
    };
    let t = match types(py) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let holder = match pid {
        Some(pid) => format!("process {pid}"),
        None => "another handle".to_string(),
    };
    raise(
        py,
        &t.locked,
        format!(
            "named tailer {name:?} is already open in {holder} (one handle per name; position file {})",
            path.display()
        ),
        &[
            ("file", path.display().to_string().into_pyobject(py).unwrap().into_any()),
            ("pid", pid.into_pyobject(py).unwrap().into_any()),
        ],
    )
}

/// `ConfigError` with `message` as is, for an option refused at the Python
/// boundary (`options.rs`): the message names the option and its limit,
/// without the engine's "invalid configuration: " prefix.
pub(crate) fn config_error(message: impl Into<String>) -> PyErr {
    Python::attach(|py| match types(py) {
        Ok(t) => raise(py, &t.config, message.into(), &[]),
        Err(e) => e,
    })
}

/// `ForkedError`, for handles used in a child process.
pub(crate) fn forked() -> PyErr {
    Error::Forked.into()
}

/// `ClosedError`, for handles closed on the Python side.
pub(crate) fn closed() -> PyErr {
    Error::Closed.into()
}

/// Whether `err` is a `litemq.SchemaError`.
pub(crate) fn is_schema(py: Python<'_>, err: &PyErr) -> bool {
    types(py).is_ok_and(|t| err.is_instance(py, t.schema.bind(py)))
}
