//! [`TailWatch`]: one thread per queue handle that waits for new messages on
//! behalf of any number of waiters that hold no thread (asyncio tasks).
//!
//! A waiter registers the sequence it waits for with a [`Notify`]; the
//! watch's thread follows the tail of the queue (stepping over frames by
//! their lengths, no CRC: the waiter reads and checks the message itself)
//! and fires every registration whose message is published. While anyone is
//! registered, the thread sleeps on the queue's wake-up word exactly as a
//! blocking follower does (registered in `wake.ctl`'s waiter count, so
//! writers in any process wake it); while nobody is, it waits on a condition
//! variable and costs nothing, and it ends after [`IDLE_EXIT`] without
//! registrations. A thousand idle waiters are a thousand entries in a map.
//!
//! Race-free by the same argument as the blocking wait: the thread loads the
//! word, then looks at the tail, then sleeps unless the word moved; a
//! registration whose message the thread has already seen fires at once.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::tailer::Tailer;
use super::wait::{WaitStrategy, SLEEP_AT_MOST};
use super::wake::{WakeSource, RETRY};
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::notify::Notify;

/// How long the thread lingers without registrations before it ends (it
/// starts again with the next one).
pub const IDLE_EXIT: Duration = Duration::from_secs(1);
/// How often the thread polls the tail when the handle has no wake-up word
/// (a read-only handle that cannot write `wake.ctl`, not Linux); it asks
/// for the word again every [`RETRY`].
const POLL_EVERY: Duration = Duration::from_millis(1);

/// Identifies a registration, to cancel it.
pub type WatchId = u64;

#[derive(Debug)]
struct Registration {
    /// Fire once message `seq` is published.
    seq: u64,
    /// Who registered (closing it fires its registrations with `Closed`).
    owner: usize,
    notify: Notify,
}

#[derive(Debug, Default)]
struct State {
    waiting: BTreeMap<WatchId, Registration>,
    next_id: WatchId,
    /// Every sequence below this was published when the thread last looked.
    tail: u64,
    running: bool,
    closed: bool,
}

#[derive(Debug)]
struct Shared {
    catalog: Arc<Catalog>,
    wake: Arc<WakeSource>,
    state: Mutex<State>,
    cond: Condvar,
}

/// Waits for the tail of one queue handle on behalf of registered waiters;
/// see the module documentation. Cloning shares the watch.
///
/// ```
/// use std::sync::mpsc;
/// # let dir = tempfile::tempdir().unwrap();
/// let queue = litemq::QueueBuilder::new(dir.path()).open()?;
/// let (tx, rx) = mpsc::channel();
/// // Tell me when message 0 is published (owner 1 names the waiter).
/// queue.tail_watch().register(1, 0, litemq::Notify::new(move |r| tx.send(r.is_ok()).unwrap()))?;
/// queue.appender()?.append(b"hello")?;
/// assert!(rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap());
/// # Ok::<(), litemq::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct TailWatch {
    shared: Arc<Shared>,
}

impl TailWatch {
    pub(crate) fn new(catalog: Arc<Catalog>, wake: Arc<WakeSource>) -> TailWatch {
        TailWatch {
            shared: Arc::new(Shared {
                catalog,
                wake,
                state: Mutex::new(State::default()),
                cond: Condvar::new(),
            }),
        }
    }

    /// Calls `notify` (from the watch's thread, or from this call) once
    /// message `seq` is published, or with [`Error::Closed`] when the queue
    /// closes or `owner` is closed first. `owner` is any number naming the
    /// registering reader (see [`TailWatch::close_owner`]).
    pub fn register(&self, owner: usize, seq: u64, notify: Notify) -> Result<WatchId> {
        let mut s = self.lock();
        if s.closed {
            drop(s);
            notify.fire(Err(Error::Closed));
            return Err(Error::Closed);
        }
        let id = s.next_id;
        s.next_id += 1;
        if seq < s.tail {
            drop(s);
            notify.fire(Ok(()));
            return Ok(id);
        }
        s.waiting.insert(id, Registration { seq, owner, notify });
        if !s.running {
            s.running = true;
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name("litemq-watch".into())
                .spawn(move || run(&shared));
            if let Err(e) = spawned {
                s.running = false;
                let r = s.waiting.remove(&id);
                drop(s);
                drop(r);
                return Err(Error::io("spawn", self.shared.catalog.base(), e));
            }
        }
        self.shared.cond.notify_all();
        Ok(id)
    }

    /// Forgets registration `id` without calling it (no-op when it fired).
    pub fn cancel(&self, id: WatchId) {
        let taken = self.lock().waiting.remove(&id);
        if let Some(r) = taken {
            r.notify.dismiss();
        }
    }

    /// Fires every registration of `owner` with [`Error::Closed`].
    pub fn close_owner(&self, owner: usize) {
        let mut s = self.lock();
        let ids: Vec<WatchId> = s
            .waiting
            .iter()
            .filter(|(_, r)| r.owner == owner)
            .map(|(&id, _)| id)
            .collect();
        let taken: Vec<Registration> = ids.iter().filter_map(|id| s.waiting.remove(id)).collect();
        drop(s);
        for r in taken {
            r.notify.fire(Err(Error::Closed));
        }
    }

    /// Registrations waiting now.
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Fires every registration with [`Error::Closed`] and refuses new
    /// ones; the thread ends (within [`SLEEP_AT_MOST`]).
    pub(crate) fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        let taken = std::mem::take(&mut s.waiting);
        drop(s);
        self.shared.cond.notify_all();
        for (_, r) in taken {
            r.notify.fire(Err(Error::Closed));
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the tail and fires what it releases; false once there is
    /// nobody left to wait for (or the watch closed).
    fn publish(&self, tail: u64) -> bool {
        let mut s = self.lock();
        s.tail = s.tail.max(tail);
        let tail = s.tail;
        let ready: Vec<WatchId> = s
            .waiting
            .iter()
            .filter(|(_, r)| r.seq < tail)
            .map(|(&id, _)| id)
            .collect();
        let fired: Vec<Registration> = ready.iter().filter_map(|id| s.waiting.remove(id)).collect();
        let more = !s.closed && !s.waiting.is_empty();
        drop(s);
        for r in fired {
            r.notify.fire(Ok(()));
        }
        more
    }

    /// Fires everyone: with `Closed` when the queue closed, else with
    /// success (the watch's own reader failed: each waiter's read meets
    /// the problem itself and reports it).
    fn release_all(&self, closed: bool) {
        let taken = std::mem::take(&mut self.lock().waiting);
        for (_, r) in taken {
            r.notify
                .fire(if closed { Err(Error::Closed) } else { Ok(()) });
        }
    }
}

/// The watch's thread: follow the tail while anyone waits.
fn run(shared: &Shared) {
    let mut tailer = Tailer::new(shared.catalog.clone(), WaitStrategy::Default);
    let mut positioned = false;
    loop {
        // Nobody waiting: wait for a registration, without touching wake.ctl.
        {
            let mut s = shared.lock();
            while s.waiting.is_empty() && !s.closed {
                let (g, timeout) = shared
                    .cond
                    .wait_timeout(s, IDLE_EXIT)
                    .unwrap_or_else(|e| e.into_inner());
                s = g;
                if timeout.timed_out() && s.waiting.is_empty() {
                    s.running = false;
                    return;
                }
            }
            if s.closed {
                s.running = false;
                return;
            }
        }
        let file = shared.wake.file();
        let _registered = file.as_ref().map(|f| f.register());
        let polling_since = Instant::now();
        loop {
            let seen = file.as_ref().map(|f| f.current());
            let tail = if positioned {
                tailer.skip_to_end()
            } else {
                tailer.seek_end().map(|()| tailer.next_seq())
            };
            match tail {
                Ok(tail) => {
                    positioned = true;
                    if !shared.publish(tail) {
                        break;
                    }
                }
                Err(Error::Closed) => {
                    shared.lock().running = false;
                    shared.release_all(true);
                    return;
                }
                Err(_) => {
                    // Damage or I/O trouble at the tail: let every waiter
                    // read, and meet (and report) it itself.
                    shared.release_all(false);
                    positioned = false;
                    break;
                }
            }
            match (&file, seen) {
                (Some(f), Some(seen)) => {
                    f.sleep(seen, SLEEP_AT_MOST);
                }
                _ if polling_since.elapsed() >= RETRY => break, // try the word again
                _ => std::thread::sleep(POLL_EVERY),
            }
        }
    }
}
