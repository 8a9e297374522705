//! `Consumer`: a named tailer (a `Tailer` subclass) whose position persists
//! in the queue's `consumers/` directory, and the conversions for
//! `Queue.consumers()` and retention.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use super::args::{name, Arg, SeqNum};
use super::exit;
use super::tailer::{Reader, Tailer};
use super::time;

/// A named tailer: get one from ``Queue.tailer(name=...)``.
///
/// Reads like any `Tailer` (iteration, ``read_next``, ``follow``, seeks).
/// ``commit()`` records that every message read so far is done; opening the
/// same name again, in this or a later process, resumes there. Delivery is
/// at-least-once: after a crash the consumer sees again what it read since
/// its last commit, never less. With ``auto_commit=True`` each read first
/// commits the messages read before it, and ``close()`` commits the rest.
///
/// As a context manager it closes on a clean exit, and on an exception is
/// dropped without committing, so the failed message comes back. One handle
/// per name at a time, across processes: a second open raises
/// `LockedError` naming the holder's pid.
///
/// >>> with q.tailer(name="billing") as t:
/// ...     for msg in t:
/// ...         bill(msg)
/// ...         t.commit()
#[pyclass(frozen, extends = Tailer, module = "litemq", name = "Consumer")]
pub(crate) struct Consumer {
    name: String,
}

impl Consumer {
    /// The Python object for a tailer reading with an engine consumer.
    pub(crate) fn create(py: Python<'_>, tailer: Tailer) -> PyResult<Py<Consumer>> {
        let name = tailer.with(py, |reader| match reader {
            Reader::Named(c) => Ok(c.name().to_string()),
            Reader::Plain(_) | Reader::Backward(_) => {
                Err(PyTypeError::new_err("not a named tailer"))
            }
        })?;
        let init = PyClassInitializer::from(tailer).add_subclass(Consumer { name });
        Py::new(py, init)
    }

    /// Runs `f` on the open engine consumer.
    fn with<R>(
        slf: &PyRef<'_, Self>,
        py: Python<'_>,
        f: impl FnOnce(&mut crate::Consumer) -> PyResult<R>,
    ) -> PyResult<R> {
        let base: &Tailer = slf.as_super();
        base.with(py, |reader| match reader {
            Reader::Named(c) => f(c),
            Reader::Plain(_) | Reader::Backward(_) => {
                Err(PyTypeError::new_err("not a named tailer"))
            }
        })
    }
}

#[pymethods]
impl Consumer {
    /// Persists the position: every message read so far is done, and a
    /// reopened consumer starts at ``next_seq``. Cheap (one 32-byte store
    /// into a mapped file): commit after every message if you like. It
    /// survives the death of the process at once; with ``durable=True`` it
    /// is also flushed to disk (msync) and survives a machine crash.
    ///
    /// With ``seq``, commits that position instead (Kafka's commit of an
    /// offset): a reopened consumer starts at ``seq``, whatever was read,
    /// and this handle's reading position does not move. ``seq`` may be up
    /// to the queue's ``next_seq``; past it raises ValueError.
    ///
    /// >>> msg = t.read_next(); handle(msg); t.commit()
    /// >>> t.commit(msg.seq)  # handle it again after a restart
    #[pyo3(signature = (seq=None, *, durable=false))]
    fn commit(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        seq: Option<Arg<SeqNum<name::Seq>>>,
        durable: bool,
    ) -> PyResult<()> {
        let seq = Arg::opt(seq)?.map(|SeqNum(s, _)| s);
        Self::with(&slf, py, |c| {
            match (seq, durable) {
                (Some(seq), _) => exit::detach(py, || c.commit_seq(seq))?,
                (None, true) => exit::detach(py, || c.commit_durable())?,
                (None, false) => c.commit()?,
            }
            if durable && seq.is_some() {
                exit::detach(py, || c.sync())?;
            }
            Ok(())
        })
    }

    /// The consumer's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The last committed position: where a reopened consumer starts.
    ///
    /// >>> t.commit(); t.committed_seq == t.next_seq
    /// True
    #[getter]
    fn committed_seq(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<u64> {
        Self::with(&slf, py, |c| Ok(c.committed_seq()))
    }

    /// When the position was last committed (UTC datetime).
    #[getter]
    fn committed_at<'py>(slf: PyRef<'_, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let micros = Self::with(&slf, py, |c| Ok(c.committed_at()))?;
        time::to_datetime(py, micros)
    }

    /// Whether reads commit what was read before them.
    #[getter]
    fn auto_commit(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<bool> {
        Self::with(&slf, py, |c| Ok(c.auto_commit()))
    }

    fn __repr__(slf: PyRef<'_, Self>, py: Python<'_>) -> String {
        let base: &Tailer = slf.as_super();
        let path = base.path().to_string();
        match base.lock(py) {
            Ok(guard) => match guard.as_ref() {
                Some(Reader::Named(c)) => format!(
                    "<litemq.Consumer {:?} for {:?} at seq {} (committed {})>",
                    slf.name,
                    path,
                    c.next_seq(),
                    c.committed_seq()
                ),
                _ => format!("<litemq.Consumer {:?} for {:?} (closed)>", slf.name, path),
            },
            Err(_) => format!(
                "<litemq.Consumer {:?} for {:?} (from parent process)>",
                slf.name, path
            ),
        }
    }
}
