//! The prefault thread: keeps page tables of the active data file populated
//! ahead of the I/O thread's write position.
//!
//! Writing through a fresh mapping takes a page fault for every 4 KiB, and a
//! fault costs more than copying the page. Chronicle Queue "pretouches" for
//! the same reason. This thread asks the kernel to populate the next few MiB
//! (`MADV_POPULATE_WRITE`) while the I/O thread copies, so large appends run
//! at memory speed and the I/O thread never stalls on a batch of faults.
//!
//! It also allocates the file's disk blocks a chunk ahead of the writer
//! (`ChunkAllocator::ahead`, past the file's length, which only the writer
//! changes), and populates only allocated pages below the length: a page
//! populated in a hole would allocate it, with no way to report a full
//! disk, and a page past the end of the file does not exist.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::active::ActiveFile;
use crate::storage::alloc::ChunkAllocator;
use crate::storage::mapped::Prefaulter;

/// The active file as the prefault thread sees it: a generation number
/// bumped per file, its mapping and its allocator.
type Current = (u64, Prefaulter, Arc<ChunkAllocator>);

/// How far ahead of the write position pages are kept populated.
const AHEAD: usize = 8 << 20;
/// Populated per call.
const STEP: usize = 1 << 20;
/// The longest sleep of a thread with nothing to do: the writer wakes it
/// when it nears the end of what is populated or allocated ahead, and a new
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
            Some((self.generation, a.map.prefaulter(), a.alloc.clone()));
        if let Some(h) = &self.handle {
            h.thread().unpark();
        }
    }

    /// No active file (it is being sealed or closed). The thread may still
    /// hold the old file, but populates it only through its allocator's
    /// `while_open`, which `ChunkAllocator::close` shuts before the file is
    /// trimmed or its unused tail punched out.
    pub fn clear(&mut self) {
        self.generation += 1;
        *self.shared.file.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Where the I/O thread writes now. Wakes the thread when it sleeps
    /// caught up and the writer has come near the end of what it populated
    /// or allocated ahead: one wake-up per few MiB written, none while the
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
    let mut current: Option<Current> = None;
    let mut populated = 0usize;
    while !shared.stop.load(Ordering::Relaxed) {
        let latest = shared
            .file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if latest.as_ref().map(|l| l.0) != current.as_ref().map(|c| c.0) {
            current = latest;
            populated = shared.write_pos.load(Ordering::Relaxed) & !(STEP - 1);
        }
        let Some((_, p, alloc)) = &current else {
            std::thread::park_timeout(IDLE_PARK); // `set_file` wakes it
            continue;
        };
        let pos = shared.write_pos.load(Ordering::Relaxed);
        if populated < pos {
            populated = pos & !(STEP - 1);
        }
        alloc.ahead(pos);
        // Only bytes the file has (its writer grew it over them) may be
        // populated: past end of file a mapping has no pages.
        let end = alloc.allocated().min(alloc.extended());
        let limit = end.min(p.mapped_len()).min(pos + AHEAD);
        if populated < limit {
            let step = STEP.min(limit - populated);
            match alloc.while_open(|| p.populate(populated, step)) {
                Some(true) => {}
                // The kernel can't: let pages fault in; check again later.
                Some(false) => std::thread::park_timeout(Duration::from_millis(50)),
                // Sealed or closed: wait for the next file.
                None => std::thread::park_timeout(Duration::from_millis(5)),
            }
            populated += step;
        } else {
            // Caught up: nothing to do before the writer has used half of
            // what is populated ahead or nears the allocated end (all of
            // the file populated: nothing until the next file).
            let wake_at = if limit >= p.mapped_len() {
                usize::MAX
            } else if limit >= alloc.extended() {
                // Nothing more to populate before the writer grows the
                // file (it passes the current end just after).
                alloc.extended().min(alloc.ahead_from())
            } else if limit >= alloc.allocated() {
                // Nothing more to populate before more is allocated.
                alloc.ahead_from()
            } else {
                populated.saturating_sub(AHEAD / 2).min(alloc.ahead_from())
            };
            if wake_at <= pos {
                // Allocation failed (a full disk): the writer's own
                // allocation reports it; look again soon.
                std::thread::park_timeout(Duration::from_micros(500));
                continue;
            }
            park_until(shared, wake_at);
        }
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
