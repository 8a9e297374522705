//! The prefault thread: allocates the active data file's disk blocks a
//! chunk ahead of the I/O thread's write position
//! (`ChunkAllocator::ahead`, past the file's length, which only the writer
//! changes), so the writer rarely waits for `fallocate`.
//!
//! Until 2026-12-02 it also populated the mapping's pages ahead of the
//! writer (`MADV_POPULATE_WRITE`, Chronicle Queue's "pretouch"), which the
//! writer's stores into the mapping needed. Frames are now written with
//! `pwrite` (`ActiveFile::publish`), which copies into fresh page-cache
//! pages without the kernel zeroing them first; populating would zero
//! them, on this thread, for nothing (PERFORMANCE.md, "Frames written with
//! pwrite").

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::active::ActiveFile;
use crate::storage::alloc::ChunkAllocator;

/// The active file as the prefault thread sees it: a generation number
/// bumped per file, and its allocator.
type Current = (u64, Arc<ChunkAllocator>);

/// The longest sleep of a thread with nothing to do: the writer wakes it
/// when it nears the end of what is allocated ahead, and a new
/// file wakes it, so this only bounds how long a missed wake-up could last.
const IDLE_PARK: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
struct Shared {
    /// The active file's mapping and a generation number bumped per file.
    file: Mutex<Option<Current>>,
    write_pos: AtomicUsize,
    stop: AtomicBool,
    /// The thread is caught up and sleeps until the write position reaches
    /// `wake_at` (see [`PrefaultThread::advance`]).
    parked: AtomicBool,
    wake_at: AtomicUsize,
}

/// The I/O thread's handle on the prefault thread.
#[derive(Debug)]
pub struct PrefaultThread {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
    generation: u64,
}

impl PrefaultThread {
    pub fn start() -> PrefaultThread {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("litemq-prefault".into())
            .spawn(move || run(&s))
            .ok();
        PrefaultThread {
            shared,
            handle,
            generation: 0,
        }
    }

    /// A new active file, written from its `write_pos`.
    pub fn set_file(&mut self, a: &ActiveFile) {
        self.generation += 1;
        self.shared.write_pos.store(a.write_pos, Ordering::Relaxed);
        *self.shared.file.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((self.generation, a.alloc.clone()));
        if let Some(h) = &self.handle {
            h.thread().unpark();
        }
    }

    /// No active file (it is being sealed or closed). The thread may still
    /// hold the old file's allocator, which allocates nothing once
    /// `ChunkAllocator::close` shut it (before the file is trimmed or its
    /// unused tail punched out).
    pub fn clear(&mut self) {
        self.generation += 1;
        *self.shared.file.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Where the I/O thread writes now. Wakes the thread when it sleeps
    /// caught up and the writer has come within half a chunk of what it
    /// allocated ahead: one wake-up per chunk written, none while the
    /// writer is idle.
    pub fn advance(&self, write_pos: usize) {
        let s = &self.shared;
        s.write_pos.store(write_pos, Ordering::SeqCst);
        if s.parked.load(Ordering::SeqCst)
            && write_pos >= s.wake_at.load(Ordering::Relaxed)
            && s.parked.swap(false, Ordering::SeqCst)
        {
            if let Some(h) = &self.handle {
                h.thread().unpark();
            }
        }
    }
}

impl Drop for PrefaultThread {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

fn run(shared: &Shared) {
    while !shared.stop.load(Ordering::Relaxed) {
        let current = shared
            .file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some((_, alloc)) = &current else {
            std::thread::park_timeout(IDLE_PARK); // `set_file` wakes it
            continue;
        };
        let pos = shared.write_pos.load(Ordering::Relaxed);
        alloc.ahead(pos);
        // Nothing to do before the writer is within half a chunk of the
        // allocated end (`usize::MAX`: the whole file is allocated).
        let wake_at = alloc.ahead_from();
        if wake_at <= pos {
            // Allocation failed (a full disk): the writer's own
            // allocation reports it; look again soon.
            std::thread::park_timeout(Duration::from_micros(500));
            continue;
        }
        park_until(shared, wake_at);
    }
}

/// Sleeps until [`PrefaultThread::advance`] passes `wake_at`, a new file
/// comes, the thread is stopped, or [`IDLE_PARK`] passes. `parked` is set
/// before the write position is looked at again, and `advance` stores the
/// position before it looks at `parked` (both sequentially consistent), so
/// an advance past `wake_at` either is seen here or unparks the thread.
fn park_until(shared: &Shared, wake_at: usize) {
    shared.wake_at.store(wake_at, Ordering::Relaxed);
    shared.parked.store(true, Ordering::SeqCst);
    if shared.write_pos.load(Ordering::SeqCst) < wake_at && !shared.stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(IDLE_PARK);
    }
    shared.parked.store(false, Ordering::SeqCst);
}
