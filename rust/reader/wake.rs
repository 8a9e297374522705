//! Where a queue handle's followers find the wake-up word (`wake.ctl`).
//!
//! A writer's handle has the file its I/O thread bumps. A read-only handle
//! opens it on first need and, when it cannot (no file yet: the queue was
//! last written by an older litemq, or no writer has opened it since; the
//! file or directory is not writable, so a follower cannot register; another
//! version), tries again at most once per [`RETRY`], polling meanwhile.
//!
//! A follower that slept on the word until its timeout and then found a
//! message although the word had not moved has *missed* a wake-up: a writer
//! published without bumping (an older litemq appending to the same queue),
//! or the file was replaced under this handle. Three misses in a row make
//! this handle poll for [`RETRY`] and then open the file afresh.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::storage::wake::{Opened, WakeFile, CAN_SLEEP};

/// How long a handle polls before it tries the control file again.
pub const RETRY: Duration = Duration::from_secs(1);
/// Missed wake-ups in a row after which a handle stops trusting its file.
const MISSES: u32 = 3;

#[derive(Debug)]
struct State {
    file: Option<Arc<WakeFile>>,
    /// When the file was last tried (or dropped); `None`: never.
    tried: Option<Instant>,
}

/// The wake-up word of one queue handle, shared by its tailers.
#[derive(Debug)]
pub struct WakeSource {
    dir: PathBuf,
    /// The writer's own file (never reopened by path: the I/O thread bumps
    /// this one); `None` once the handle is closed.
    own: Mutex<Option<Arc<WakeFile>>>,
    /// Set by [`WakeSource::close`]: no file is opened again.
    closed: std::sync::atomic::AtomicBool,
    state: Mutex<State>,
    misses: AtomicU32,
}

impl WakeSource {
    /// A writer's handle: followers sleep on the file its I/O thread bumps
    /// (`None`: the writer has no usable file, followers poll).
    pub fn writer(dir: PathBuf, own: Option<Arc<WakeFile>>) -> WakeSource {
        WakeSource {
            dir,
            state: Mutex::new(State {
                file: own.clone(),
                tried: Some(Instant::now()),
            }),
            own: Mutex::new(own),
            closed: std::sync::atomic::AtomicBool::new(false),
            misses: AtomicU32::new(0),
        }
    }

    /// A read-only handle: the file is opened when a follower first waits.
    pub fn reader(dir: PathBuf) -> WakeSource {
        WakeSource {
            dir,
            own: Mutex::new(None),
            closed: std::sync::atomic::AtomicBool::new(false),
            state: Mutex::new(State {
                file: None,
                tried: None,
            }),
            misses: AtomicU32::new(0),
        }
    }

    /// The file to sleep on, or `None` to poll.
    pub fn file(&self) -> Option<Arc<WakeFile>> {
        if !CAN_SLEEP || self.closed.load(Ordering::Acquire) {
            return None;
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.file.is_some() {
            return s.file.clone();
        }
        if s.tried.is_some_and(|t| t.elapsed() < RETRY) {
            return None;
        }
        s.tried = Some(Instant::now());
        let own = self.own.lock().unwrap_or_else(|e| e.into_inner()).clone();
        s.file = match own {
            Some(own) => Some(own),
            // Any failure (permissions, another version, damage) means
            // polling; the next try is a second away.
            None => match WakeFile::open(&self.dir) {
                Ok(Opened::Ok(f)) => Some(Arc::new(f)),
                _ => None,
            },
        };
        s.file.clone()
    }

    /// Lets go of the file (the queue handle is closed): a closed queue maps
    /// nothing. Tailers holding a clone drop it at their next call, when
    /// they find the queue closed.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.own.lock().unwrap_or_else(|e| e.into_inner()).take();
        let file = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .file
            .take();
        // Followers of this handle asleep on the word wake now and find the
        // queue closed (others re-check and sleep again); with nobody asleep
        // the file is left as it is.
        if let Some(f) = file.filter(|f| f.waiters() > 0) {
            f.bump();
        }
    }

    /// A follower slept on the word and was woken (or found it moved).
    pub fn hit(&self) {
        self.misses.store(0, Ordering::Relaxed);
    }

    /// A follower found a message after sleeping to its timeout with the
    /// word unchanged (see the module comment).
    pub fn missed(&self) {
        if self.misses.fetch_add(1, Ordering::Relaxed) + 1 < MISSES {
            return;
        }
        self.misses.store(0, Ordering::Relaxed);
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.file = None;
        s.tried = Some(Instant::now());
    }
}
