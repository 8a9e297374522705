//! [`Notify`]: a one-shot completion callback the engine calls from its own
//! threads (the I/O thread, a tail watcher), for callers that must not block
//! a thread per wait (the Python bindings' asyncio bridge).

use crate::error::{Error, Result};

/// A callback run exactly once: with the outcome when the awaited event
/// happens, or with [`Error::Closed`] when it is dropped first (its queue
/// closed, the engine let go of it), so a waiter is never left hanging.
///
/// It runs on an engine thread, which it must not hold up: it should only
/// record the outcome and wake its owner (push to a list, write a byte).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// let seen = Arc::new(Mutex::new(None));
/// let s = seen.clone();
/// let n = litemq::Notify::new(move |r| *s.lock().unwrap() = Some(r.is_ok()));
/// drop(n); // never fired: reports Closed
/// assert_eq!(*seen.lock().unwrap(), Some(false));
/// ```
pub struct Notify(Option<Box<dyn FnOnce(Result<()>) + Send>>);

impl Notify {
    /// Wraps `f`.
    pub fn new(f: impl FnOnce(Result<()>) + Send + 'static) -> Notify {
        Notify(Some(Box::new(f)))
    }

    /// Runs the callback with `outcome`.
    pub fn fire(mut self, outcome: Result<()>) {
        if let Some(f) = self.0.take() {
            f(outcome);
        }
    }
}

impl Notify {
    /// Lets go of the callback without running it (its owner stopped
    /// listening).
    pub fn dismiss(mut self) {
        self.0 = None;
    }
}

impl Drop for Notify {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f(Err(Error::Closed));
        }
    }
}

impl std::fmt::Debug for Notify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notify")
    }
}
