//! Fork safety for the bindings.
//!
//! The engine's I/O thread does not survive `fork()`: a child that kept using
//! (or even dropping) a handle opened by its parent would wait forever on a
//! thread that does not exist. The engine counts forks (a `pthread_atfork`
//! child handler bumps a generation, so `os.fork()`, `multiprocessing` and
//! any other fork are seen); every handle remembers the generation it was
//! opened in. A handle from an older generation raises `ForkedError` on use
//! and is leaked, not dropped, when the child collects it.

use pyo3::prelude::*;

use super::errors;
use crate::storage::mapped::fork_generation;

#[inline]
fn current() -> u64 {
    fork_generation()
}

/// An engine handle that refuses to be used, and is never dropped, in a
/// process forked after it was opened.
pub(crate) struct ForkSafe<T> {
    value: Option<T>,
    generation: u64,
}

impl<T> ForkSafe<T> {
    pub(crate) fn new(value: T) -> Self {
        ForkSafe {
            value: Some(value),
            generation: current(),
        }
    }

    /// The handle, or `ForkedError` in a child process.
    #[inline]
    pub(crate) fn get(&self) -> PyResult<&T> {
        if self.generation != current() {
            return Err(errors::forked());
        }
        Ok(self
            .value
            .as_ref()
            .expect("the value is only taken in Drop"))
    }
}

impl<T> Drop for ForkSafe<T> {
    fn drop(&mut self) {
        if self.generation != current() {
            // The parent's threads are gone here; dropping could wait on them.
            std::mem::forget(self.value.take());
        }
    }
}
