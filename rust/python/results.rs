//! The engine's results as the Python classes users see, converted once,
//! here: `Stats` (with its `RecoveryReport`), `DataFileInfo`, `ConsumerInfo`,
//! `TopicInfo`, `WorkQueueInfo`, `RetentionReport` and `CompactReport`.
//!
//! The classes are the frozen dataclasses of `litemq.stats`, `consumers`,
//! `topics`, `work_queue`, `retention` and `compaction` (their fields and
//! docs are declared there, once, for Python; the engine's structs are the
//! Rust declaration): these functions build them from the engine's structs,
//! field by field, with nothing in between for Python to reshape. Two are
//! also handed out as plain dicts, from the same fields: `WorkQueue.stats()`
//! and the report of `Queue._delete_files_before`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use super::time;

/// The result classes, looked up once.
struct Classes {
    stats: Py<PyType>,
    recovery: Py<PyType>,
    data_file: Py<PyType>,
    consumer: Py<PyType>,
    topic: Py<PyType>,
    work_queue: Py<PyType>,
    retention: Py<PyType>,
    compact: Py<PyType>,
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
            stats: class("litemq.stats", "Stats")?,
            recovery: class("litemq.stats", "RecoveryReport")?,
            data_file: class("litemq.stats", "DataFileInfo")?,
            consumer: class("litemq.consumers", "ConsumerInfo")?,
            topic: class("litemq.topics", "TopicInfo")?,
            work_queue: class("litemq.work_queue", "WorkQueueInfo")?,
            retention: class("litemq.retention", "RetentionReport")?,
            compact: class("litemq.compaction", "CompactReport")?,
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
    d.set_item("messages", s.messages)?;
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

/// `litemq.ConsumerInfo` of a named tailer (`Queue.consumers()`).
pub(crate) fn consumer<'py>(
    py: Python<'py>,
    info: &crate::ConsumerInfo,
) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item("name", &info.name)?;
    d.set_item("next_seq", info.next_seq)?;
    d.set_item("lag_messages", info.lag_messages)?;
    d.set_item("lag_bytes", info.lag_bytes)?;
    let sel = info.selector.as_ref();
    d.set_item("topic", sel.and_then(|s| s.topic.as_deref()))?;
    d.set_item("queue_id", sel.and_then(|s| s.queue_id))?;
    d.set_item("tags", sel.map(|s| s.tags.clone()).unwrap_or_default())?;
    d.set_item("committed_at", time::to_datetime(py, info.committed_at)?)?;
    d.set_item("created_at", time::to_datetime(py, info.created_at)?)?;
    classes(py)?.consumer.bind(py).call((), Some(&d))
}

/// `litemq.TopicInfo` of a topic stream (`Queue.topics()`).
pub(crate) fn topic<'py>(py: Python<'py>, t: &crate::TopicInfo) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item("topic", (!t.topic.is_empty()).then_some(t.topic.as_str()))?;
    d.set_item("queue_id", t.queue_id)?;
    d.set_item("count", t.count)?;
    d.set_item("first_seq", t.first_seq)?;
    d.set_item("last_seq", t.last_seq)?;
    d.set_item("last_timestamp", t.last_timestamp)?;
    d.set_item("first_offset", t.first_offset)?;
    d.set_item("last_offset", t.last_offset)?;
    classes(py)?.topic.bind(py).call((), Some(&d))
}

/// A work queue's figures as a dict (`WorkQueue.stats()`).
pub(crate) fn work_queue_dict<'py>(
    py: Python<'py>,
    info: &crate::WorkQueueInfo,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &info.name)?;
    d.set_item("pending", info.pending)?;
    d.set_item("in_flight", info.in_flight)?;
    d.set_item("acked", info.acked)?;
    d.set_item("dead_lettered", info.dead_lettered)?;
    d.set_item("expired", info.expired)?;
    d.set_item("redelivered", info.redelivered)?;
    d.set_item("gone", info.gone)?;
    d.set_item("rewound", info.rewound)?;
    d.set_item("low", info.low)?;
    d.set_item("cursor", info.cursor)?;
    d.set_item("window", info.window)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    d.set_item(
        "oldest_age",
        info.oldest_timestamp
            .map(|t| now.saturating_sub(t) as f64 / 1e6),
    )?;
    d.set_item("created_at", time::to_datetime(py, info.created_at)?)?;
    Ok(d)
}

/// `litemq.WorkQueueInfo` of a work queue (`Queue.work_queues()`).
pub(crate) fn work_queue<'py>(
    py: Python<'py>,
    info: &crate::WorkQueueInfo,
) -> PyResult<Bound<'py, PyAny>> {
    let d = work_queue_dict(py, info)?;
    classes(py)?.work_queue.bind(py).call((), Some(&d))
}

/// A retention report as a dict (`Queue._delete_files_before`).
pub(crate) fn retention_dict<'py>(
    py: Python<'py>,
    report: &crate::RetentionReport,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let paths = |ps: &[std::path::PathBuf]| -> Vec<String> {
        ps.iter().map(|p| p.display().to_string()).collect()
    };
    d.set_item("deleted_files", paths(&report.deleted_files))?;
    d.set_item(
        "deleted_key_index_files",
        paths(&report.deleted_key_index_files),
    )?;
    d.set_item("deleted_bytes", report.deleted_bytes)?;
    d.set_item("first_seq", report.first_seq)?;
    d.set_item("protected_files", report.protected_files)?;
    Ok(d)
}

/// `litemq.RetentionReport` of a retention pass (`Queue.apply_retention()`).
pub(crate) fn retention<'py>(
    py: Python<'py>,
    report: &crate::RetentionReport,
) -> PyResult<Bound<'py, PyAny>> {
    let d = retention_dict(py, report)?;
    classes(py)?.retention.bind(py).call((), Some(&d))
}

/// `litemq.CompactReport` of a key-compaction pass (`Queue.compact()`).
pub(crate) fn compact<'py>(
    py: Python<'py>,
    report: &crate::CompactReport,
) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item("files_examined", report.files_examined)?;
    d.set_item("files_rewritten", report.files_rewritten)?;
    d.set_item("records_dropped", report.records_dropped)?;
    d.set_item("tombstones_dropped", report.tombstones_dropped)?;
    d.set_item("bytes_before", report.bytes_before)?;
    d.set_item("bytes_after", report.bytes_after)?;
    classes(py)?.compact.bind(py).call((), Some(&d))
}
