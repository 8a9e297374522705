//! Interpreter exit with threads inside litemq calls.
//!
//! Python (before 3.14) ends a daemon thread that re-attaches to the
//! interpreter once finalization has begun with `pthread_exit`, which
//! unwinds through Rust frames and aborts the process ("FATAL: exception not
//! rethrown"). A thread blocked in `follow()`, `read_next(timeout=...)`, a
//! sync `append` or `flush()` re-attaches exactly so when its call returns.
//!
//! So litemq ends its part before finalization. `litemq.queue` registers
//! `open_queues::close_all_at_exit` with `atexit` (handlers run before finalization
//! begins, after non-daemon threads are joined). It marks the exit, closes
//! every open queue (writing and syncing what was appended; blocked calls
//! wake), and waits for the threads that were already on their way back
//! into the interpreter. From then on a thread other than the exiting one
//! whose litemq call returns parks instead of re-attaching (what Python 3.14
//! does to such threads): it never runs Python again, and the process exits
//! normally around it.
//!
//! The handshake with [`detach`] (and [`attach`], for callbacks such as the
//! Ctrl-C check inside a blocking wait): a returning thread counts itself in
//! `REATTACHING`, then reads `EXITING`; the exit handler sets `EXITING`,
//! then waits for `REATTACHING` to drain (with the GIL released, so those
//! threads can attach and count themselves out). Sequentially consistent
//! on both sides, so each sees the other's write: a thread either parks or
//! is waited for.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// Set by `open_queues::close_all_at_exit`: the interpreter is about to finalize.
static EXITING: AtomicBool = AtomicBool::new(false);
/// The thread that runs the exit handlers (and then finalization).
static EXIT_THREAD: Mutex<Option<ThreadId>> = Mutex::new(None);
/// Threads whose litemq call returned and that are re-attaching.
static REATTACHING: AtomicUsize = AtomicUsize::new(0);

/// Longest the exit handler waits for returning threads to re-attach.
const REATTACH_WAIT: Duration = Duration::from_secs(5);

/// True in a thread that must not attach to the interpreter again: it is
/// exiting, and this is not the thread that finalizes.
pub(crate) fn exiting_elsewhere() -> bool {
    EXITING.load(SeqCst)
        && *EXIT_THREAD.lock().unwrap_or_else(|e| e.into_inner())
            != Some(std::thread::current().id())
}

/// True once the exit handler ran, in any thread.
pub(crate) fn exiting() -> bool {
    EXITING.load(SeqCst)
}

/// Blocks this thread for good (the process is exiting around it).
fn park_forever() -> ! {
    loop {
        std::thread::park();
    }
}

/// `py.detach(f)` that never re-attaches a thread to an interpreter about
/// to finalize: such a thread parks when `f` returns.
pub(crate) fn detach<T, F>(py: Python<'_>, f: F) -> T
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    let out = py.detach(|| {
        let out = f();
        REATTACHING.fetch_add(1, SeqCst);
        if exiting_elsewhere() {
            REATTACHING.fetch_sub(1, SeqCst);
            park_forever();
        }
        out
    });
    REATTACHING.fetch_sub(1, SeqCst);
    out
}

/// `Python::attach(f)` from a thread that released the GIL (a callback
/// inside [`detach`]), under the same handshake: `None`, without attaching,
/// once the interpreter is about to finalize.
pub(crate) fn attach<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    REATTACHING.fetch_add(1, SeqCst);
    let out = (!exiting_elsewhere()).then(|| Python::attach(f));
    REATTACHING.fetch_sub(1, SeqCst);
    out
}

/// Marks the exit (from the thread that will finalize).
pub(crate) fn begin() {
    *EXIT_THREAD.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current().id());
    EXITING.store(true, SeqCst);
}

/// Waits, with the GIL released, until every thread that was already
/// re-attaching when the exit began has attached (bounded, in case one
/// cannot get the GIL).
pub(crate) fn wait_for_returning_threads(py: Python<'_>) {
    py.detach(|| {
        let deadline = Instant::now() + REATTACH_WAIT;
        while REATTACHING.load(SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}
