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
//! (`ChunkAllocator::ahead`), and populates only allocated pages: a page
//! populated in a hole would allocate it, with no way to report a full disk.

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

#[derive(Debug, Default)]
struct Shared {
    /// The active file's mapping and a generation number bumped per file.
    file: Mutex<Option<Current>>,
    write_pos: AtomicUsize,
    stop: AtomicBool,
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
    }

    /// No active file (it is being sealed or closed). The thread may still
    /// hold the old file, but populates it only through its allocator's
    /// `while_open`, which `ChunkAllocator::close` shuts before the file is
    /// trimmed or its unused tail punched out.
    pub fn clear(&mut self) {
        self.generation += 1;
        *self.shared.file.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Where the I/O thread writes now.
    pub fn advance(&self, write_pos: usize) {
        self.shared.write_pos.store(write_pos, Ordering::Relaxed);
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
            std::thread::park_timeout(Duration::from_millis(5));
            continue;
        };
        let pos = shared.write_pos.load(Ordering::Relaxed);
        if populated < pos {
            populated = pos & !(STEP - 1);
        }
        alloc.ahead(pos);
        let limit = alloc.allocated().min(p.mapped_len()).min(pos + AHEAD);
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
            std::thread::park_timeout(Duration::from_micros(500));
        }
    }
}
