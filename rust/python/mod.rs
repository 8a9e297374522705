//! Python bindings: the private native module `litemq._litemq`.
//!
//! Thin on purpose: these files convert types and errors and release the
//! GIL around blocking calls; behaviour lives in the engine, and the
//! Pythonic surface (Arrow, the CLI) in `python/litemq/`. Arguments are
//! parsed once, by argument types (`args.rs`, `options/`; docs/DESIGN.md,
//! "The bindings and the Python package").
//! One file per concept: `queue.rs`, `open_queues.rs` (the queues a process
//! has open, closed at exit), `maintenance.rs` (`writer_pid`, `reindex`),
//! `appender.rs`, `tailer.rs`, `consumer.rs` (named tailers, retention
//! reports), `work_queue.rs` (work queues and their jobs), `topic.rs`,
//! `fields.rs` (secondary indexes), `args.rs` (argument types), `options/`
//! (the options of `litemq.Queue`), `results.rs` (`Stats`, `DataFileInfo`),
//! `message.rs`, `errors.rs` (the exception tree), `buffer.rs` (bytes in,
//! zero-copy views out), `time.rs` (datetimes), `typed.rs`
//! (typed queues: events to rows and rows to dicts), `batch.rs` (Arrow buffers),
//! `archive.rs` (CRC-64 and decoding of archived data files), `fork.rs`
//! (handles used after `fork()`), `exit.rs` (threads in litemq calls at
//! interpreter exit), `aio.rs` (the asyncio bridge's socket).

mod aio;
mod appender;
mod archive;
mod args;
mod batch;
mod buffer;
mod consumer;
mod errors;
mod exit;
mod fields;
mod fork;
mod maintenance;
mod message;
mod open_queues;
mod options;
mod queue;
mod results;
mod tailer;
mod time;
mod topic;
mod typed;
mod work_queue;

use pyo3::prelude::*;

use crate::format::record::{MAX_HEADERS, MAX_HEADER_NAME_LEN, MAX_HEADER_VALUE_LEN, MAX_KEY_LEN};

/// CRC-32C (Castagnoli) of a bytes-like object, for reading LedgerQ segments.
#[pyfunction]
fn _crc32c(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u32> {
    let data = buffer::bytes_arg(data, "data")?;
    let bytes = data.as_slice();
    Ok(exit::detach(py, || crate::format::crc::crc32c(bytes)))
}

/// Frees the column memory kept from `read_arrow` results Python has let
/// go of (see `reader::spare`); returns how many bytes that was.
///
/// >>> litemq.release_memory() >= 0
/// True
#[pyfunction]
fn release_memory() -> usize {
    crate::reader::spare::release()
}

#[pymodule]
#[pyo3(name = "_litemq")]
fn litemq_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_KEY_LEN", MAX_KEY_LEN)?;
    m.add("MAX_HEADERS", MAX_HEADERS)?;
    m.add("MAX_HEADER_NAME_LEN", MAX_HEADER_NAME_LEN)?;
    m.add("MAX_HEADER_VALUE_LEN", MAX_HEADER_VALUE_LEN)?;
    errors::register(m)?;
    options::register(m)?;
    m.add_function(wrap_pyfunction!(release_memory, m)?)?;
    m.add_function(wrap_pyfunction!(maintenance::writer_pid, m)?)?;
    m.add_function(wrap_pyfunction!(maintenance::reindex, m)?)?;
    m.add_function(wrap_pyfunction!(open_queues::close_all_at_exit, m)?)?;
    m.add_function(wrap_pyfunction!(message::_restore_message, m)?)?;
    m.add_function(wrap_pyfunction!(archive::_crc64, m)?)?;
    m.add_function(wrap_pyfunction!(archive::_sealed_summary, m)?)?;
    m.add_function(wrap_pyfunction!(archive::_verify_sealed, m)?)?;
    m.add_function(wrap_pyfunction!(archive::_sealed_ends, m)?)?;
    m.add_function(wrap_pyfunction!(archive::_dense_header, m)?)?;
    m.add_function(wrap_pyfunction!(archive::_decode_sealed, m)?)?;
    m.add_function(wrap_pyfunction!(archive::_check_archive_key, m)?)?;
    m.add_function(wrap_pyfunction!(archive::_decode_frames, m)?)?;
    m.add_function(wrap_pyfunction!(archive::_dense_offset, m)?)?;
    m.add_function(wrap_pyfunction!(typed::_typed_rows, m)?)?;
    archive::register_layout(m)?;
    m.add_function(wrap_pyfunction!(_crc32c, m)?)?;
    m.add_class::<queue::Queue>()?;
    m.add_class::<appender::Appender>()?;
    m.add_class::<tailer::Tailer>()?;
    m.add_class::<tailer::Follow>()?;
    m.add_class::<consumer::Consumer>()?;
    m.add_class::<message::Message>()?;
    m.add_class::<buffer::PayloadView>()?;
    m.add_class::<work_queue::WorkQueue>()?;
    m.add_class::<work_queue::Job>()?;
    m.add_class::<aio::Notifier>()?;
    Ok(())
}
