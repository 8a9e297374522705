//! The engine's results as the Python classes users see, converted once,
//! here: `Stats` (with its `RecoveryReport`) and `DataFileInfo`.
//!
//! The classes are the frozen dataclasses of `litemq.stats` (their fields and
//! docs are declared there, once, for Python; the engine's structs are the
//! Rust declaration): these functions build them from the engine's structs,
//! field by field, with nothing in between for Python to reshape.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use super::time;

/// The result classes, looked up once.
struct Classes {
    stats: Py<PyType>,
    recovery: Py<PyType>,
    data_file: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
    CLASSES.get_or_try_init(py, || {
        let module = py.import("litemq.stats")?;
        let class = |name: &str| -> PyResult<Py<PyType>> {
            Ok(module.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        Ok(Classes {
            stats: class("Stats")?,
            recovery: class("RecoveryReport")?,
            data_file: class("DataFileInfo")?,
        })
    })
}

/// `litemq.RecoveryReport` of the engine's report.
fn recovery<'py>(py: Python<'py>, r: &crate::RecoveryReport) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item("cut_bytes", r.cut_bytes)?;
    d.set_item("cut_at", r.cut_at)?;
    d.set_item("cut_reason", r.cut_reason.as_deref())?;
    d.set_item("repaired_end_marker", r.repaired_end_marker)?;
    d.set_item("index_entries_rebuilt", r.index_entries_rebuilt)?;
    d.set_item("dense_entries_rebuilt", r.dense_entries_rebuilt)?;
    d.set_item("frames_verified", r.frames_verified)?;
    let dropped = r.dropped_files.iter().map(|p| p.display().to_string());
    d.set_item("dropped_files", PyTuple::new(py, dropped)?)?;
    d.set_item("finished_seals", r.finished_seals)?;
    d.set_item("restored_length", r.restored_length)?;
    classes(py)?.recovery.bind(py).call((), Some(&d))
}

/// `litemq.Stats` of the engine's figures.
pub(crate) fn stats<'py>(py: Python<'py>, s: &crate::Stats) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item("first_seq", s.first_seq)?;
    d.set_item("next_seq", s.next_seq)?;
    d.set_item("messages", s.next_seq - s.first_seq)?;
    d.set_item("files", s.files)?;
    d.set_item("disk_bytes", s.disk_bytes)?;
    d.set_item("data_bytes_written", s.data_bytes_written)?;
    d.set_item("data_bytes_allocated", s.data_bytes_allocated)?;
    d.set_item("index_bytes_allocated", s.index_bytes_allocated)?;
    d.set_item("durable_seq", s.durable_seq)?;
    d.set_item("syncs", s.syncs)?;
    d.set_item("rolls", s.rolls)?;
    d.set_item("compactions", s.compactions)?;
    d.set_item("compaction_errors", s.compaction_errors)?;
    d.set_item("bytes_written", s.bytes_written)?;
    d.set_item("appender_writes", s.appender_writes)?;
    d.set_item("takeovers", s.takeovers)?;
    d.set_item("wake_word", s.wake_word)?;
    d.set_item("waiters", s.waiters)?;
    d.set_item("wake_calls", s.wake_calls)?;
    d.set_item("woken", s.woken)?;
    d.set_item("waiter_resets", s.waiter_resets)?;
    d.set_item("read_only", s.read_only)?;
    d.set_item("recovery", recovery(py, &s.recovery)?)?;
    classes(py)?.stats.bind(py).call((), Some(&d))
}

/// `litemq.DataFileInfo` of one data file.
pub(crate) fn data_file<'py>(
    py: Python<'py>,
    f: &crate::DataFileInfo,
) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item("path", f.path.display().to_string())?;
    d.set_item("file_number", f.file_number)?;
    d.set_item("first_seq", f.first_seq)?;
    d.set_item("end_seq", f.end_seq)?;
    d.set_item("created", time::to_datetime(py, f.created_us)?)?;
    d.set_item("size", f.size)?;
    d.set_item("bytes_written", f.bytes_written)?;
    d.set_item("bytes_allocated", f.bytes_allocated)?;
    d.set_item("index_bytes_allocated", f.index_bytes_allocated)?;
    classes(py)?.data_file.bind(py).call((), Some(&d))
}
