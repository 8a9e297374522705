//! The engine queues this process has open (`Core`: a queue and the
//! readers of the tailers made from it), and closing them all at
//! interpreter exit (`_close_all_at_exit`, registered with `atexit`).

use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};

use pyo3::prelude::*;

use super::exit;
use super::tailer::{ReaderSlot, Tailer};
use crate::storage::mapped::fork_generation;

/// An open engine queue and the readers of the tailers made from it, which
/// `close()` takes from them.
pub(crate) struct Core {
    pub(crate) queue: crate::Queue,
    readers: Mutex<Readers>,
    /// A typed queue's encoders and decoders (`typed.rs`).
    pub(crate) typed: super::typed::TypedCache,
}

#[derive(Default)]
struct Readers {
    slots: Vec<Weak<ReaderSlot>>,
    /// Dead entries are swept out when `slots` grows to this length.
    sweep_at: usize,
}

/// Every queue opened in this process (and the fork generation it was
/// opened in), for [`close_all`] at interpreter exit.
static OPEN: Mutex<Vec<(u64, Weak<Core>)>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl super::typed::TypedHandle for Core {
    fn queue(&self) -> &crate::Queue {
        &self.queue
    }
    fn typed(&self) -> &super::typed::TypedCache {
        &self.typed
    }
}

impl Core {
    pub(crate) fn new(queue: crate::Queue) -> Arc<Core> {
        let core = Arc::new(Core {
            queue,
            readers: Mutex::new(Readers::default()),
            typed: Default::default(),
        });
        let mut open = lock(&OPEN);
        open.retain(|(_, q)| q.strong_count() > 0);
        open.push((fork_generation(), Arc::downgrade(&core)));
        core
    }

    /// Remembers a tailer's reader, so that `close` can take it.
    pub(crate) fn adopt(&self, tailer: &Tailer) {
        let mut r = lock(&self.readers);
        if r.slots.len() >= r.sweep_at {
            r.slots.retain(|s| s.strong_count() > 0);
            r.sweep_at = (2 * r.slots.len()).max(64);
        }
        r.slots.push(tailer.slot());
    }

    /// Closes the engine queue (waking blocked calls), then takes the
    /// reader of every tailer made from it: their files are unmapped and
    /// named tailers' names released when this returns. Named tailers are
    /// not committed. The engine's error, if any, comes after all that.
    pub(crate) fn close(&self, py: Python<'_>) -> PyResult<()> {
        let result = exit::detach(py, || self.queue.close());
        let slots: Vec<_> = lock(&self.readers)
            .slots
            .drain(..)
            .filter_map(|s| s.upgrade())
            .collect();
        let exiting = exit::exiting();
        exit::detach(py, || {
            for slot in &slots {
                let taken = match slot.try_lock() {
                    Ok(mut guard) => guard.take(),
                    Err(TryLockError::Poisoned(p)) => p.into_inner().take(),
                    // At exit a daemon thread may be parked holding it for
                    // good; otherwise the call in progress ends soon (a
                    // blocked wait wakes: the queue is closed).
                    Err(TryLockError::WouldBlock) if exiting => None,
                    Err(TryLockError::WouldBlock) => lock(slot).take(),
                };
                drop(taken);
            }
        });
        lock(&OPEN).retain(|(_, q)| q.strong_count() > 0 && !std::ptr::eq(q.as_ptr(), self));
        Ok(result?)
    }
}

/// Closes every queue opened in this process and still open (see
/// [`close_all_at_exit`]); returns the first error.
pub(crate) fn close_all(py: Python<'_>) -> PyResult<()> {
    let generation = fork_generation();
    let cores: Vec<Arc<Core>> = lock(&OPEN)
        .iter()
        .filter(|(g, _)| *g == generation)
        .filter_map(|(_, q)| q.upgrade())
        .collect();
    let mut first_error = None;
    for core in &cores {
        if let Err(e) = core.close(py) {
            first_error.get_or_insert(e);
        }
    }
    // The last reference to a queue may be one of these: its drop joins
    // nothing more (closed above), so the GIL may stay held.
    drop(cores);
    first_error.map_or(Ok(()), Err)
}

/// Closes every queue this process has open, for `atexit`: what was
/// appended is written and synced, blocked calls wake, and threads other
/// than this one never re-enter the interpreter (see the module comment).
/// Raises the first error a close raised (after closing the others). Here,
/// not in `exit.rs`, which the queue and the handles use: exit stays below them.
#[pyfunction]
#[pyo3(name = "_close_all_at_exit")]
pub(crate) fn close_all_at_exit(py: Python<'_>) -> PyResult<()> {
    exit::begin();
    let result = close_all(py);
    exit::wait_for_returning_threads(py);
    result
}
