//! The asyncio bridge's native half: `_Notifier`, a socket pair an event
//! loop watches with `loop.add_reader`, and a list of finished waits.
//!
//! Engine threads (a queue's `TailWatch`, the I/O thread) finish a wait by
//! pushing `(token, outcome)` and writing one byte: no GIL, no Python, so an
//! engine thread is never held up by the interpreter. The loop's reader
//! callback (`litemq._aio`) drains the list and resolves its futures in the
//! loop's own thread. One notifier serves every wait of one event loop.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::Notify;

#[derive(Debug)]
struct Inner {
    done: Mutex<Vec<(u64, crate::Result<()>)>>,
    /// Written by engine threads (a byte per empty-to-non-empty change).
    tx: UnixStream,
    /// Read by the event loop.
    rx: UnixStream,
}

impl Inner {
    fn push(&self, token: u64, outcome: crate::Result<()>) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        let was_empty = done.is_empty();
        done.push((token, outcome));
        drop(done);
        if was_empty {
            // Non-blocking: a full socket already holds a wake-up.
            let _ = (&self.tx).write(&[1]);
        }
    }
}

/// Where engine threads report finished waits to one event loop (see
/// `litemq._aio`). Private: `Tailer.read_next_async` and friends use it.
#[pyclass(frozen, module = "litemq", name = "_Notifier")]
pub(crate) struct Notifier {
    inner: Arc<Inner>,
}

impl Notifier {
    /// A callback that reports `token`'s outcome to this notifier.
    pub(crate) fn notify(&self, token: u64) -> Notify {
        let inner = self.inner.clone();
        Notify::new(move |outcome| inner.push(token, outcome))
    }
}

#[pymethods]
impl Notifier {
    #[new]
    fn new() -> PyResult<Self> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(Notifier {
            inner: Arc::new(Inner {
                done: Mutex::new(Vec::new()),
                tx,
                rx,
            }),
        })
    }

    /// The descriptor to watch for reading.
    fn fileno(&self) -> i32 {
        self.inner.rx.as_raw_fd()
    }

    /// The waits finished since the last call: `(token, None)` for a wait
    /// that succeeded, `(token, exception)` for one that failed.
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        // Read the wake-up bytes first, then take the list: a push after the
        // take writes a new byte (the list was empty again).
        let mut buf = [0u8; 256];
        while matches!((&self.inner.rx).read(&mut buf), Ok(n) if n > 0) {}
        let done = std::mem::take(&mut *self.inner.done.lock().unwrap_or_else(|e| e.into_inner()));
        let out = PyList::empty(py);
        for (token, outcome) in done {
            let err: Option<PyErr> = outcome.err().map(PyErr::from);
            out.append((token, err.map(|e| e.into_value(py))))?;
        }
        Ok(out)
    }
}
