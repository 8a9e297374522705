//! Module functions that work on a queue's directory without a `Queue`
//! handle: `writer_pid` and `reindex`.

use std::path::PathBuf;

use pyo3::prelude::*;

use super::args::Arg;
use super::exit;
use super::options;
use crate::KeyIndexConfig;

/// Pid of the process holding the writer lock of the queue at `path`, or
/// None when no live process holds it.
///
/// >>> litemq._litemq.writer_pid("/tmp/orders")
/// 4242
#[pyfunction]
pub(crate) fn writer_pid(path: PathBuf) -> Option<u32> {
    crate::writer_pid(&path)
}

/// Rebuilds every key-index file of the queue at `path` from its data
/// files (takes the writer lock). `progress(seq)` is called as the scan
/// passes sequences. An encrypted queue needs its key (`encryption_key` or
/// `encryption_key_file`, as for `Queue`). Returns the number of keys indexed.
///
/// >>> litemq._litemq.reindex("/tmp/orders")
/// 1200
#[pyfunction]
#[pyo3(signature = (
    path, progress=None, slots=None, items=None, encryption_key=None, encryption_key_file=None
))]
pub(crate) fn reindex(
    py: Python<'_>,
    path: PathBuf,
    progress: Option<Py<PyAny>>,
    slots: Option<u32>,
    items: Option<u32>,
    encryption_key: Option<Arg<options::EncryptionKey>>,
    encryption_key_file: Option<PathBuf>,
) -> PyResult<u64> {
    let key = options::encryption_key(encryption_key, encryption_key_file)?;
    let mut config = KeyIndexConfig::default();
    if let Some(n) = slots {
        config.slots = n;
    }
    if let Some(n) = items {
        config.items = n;
    }
    let mut failed: Option<PyErr> = None;
    let mut report = |seq: u64| {
        if let (Some(cb), None) = (&progress, &failed) {
            exit::attach(|py| {
                if let Err(e) = cb.call1(py, (seq,)).and_then(|_| py.check_signals()) {
                    failed = Some(e);
                }
            });
        }
    };
    let keys = exit::detach(py, || {
        crate::queue::reindex_with_key(&path, config, key, &mut report)
    });
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(keys?)
}
