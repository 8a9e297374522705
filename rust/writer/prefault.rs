//! The prefault thread: keeps page tables of the active data file populated
//! ahead of the I/O thread's write position.
//!
//! Writing through a fresh mapping takes a page fault for every 4 KiB, and a
//! fault costs more than copying the page. Chronicle Queue "pretouches" for
//! the same reason. This thread asks the kernel to populate the next few MiB
//! (`MADV_POPULATE_WRITE`) while the I/O thread copies, so large appends run
//! at memory speed and the I/O thread never stalls on a batch of faults.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::storage::mapped::Prefaulter;

/// How far ahead of the write position pages are kept populated.
const AHEAD: usize = 8 << 20;
/// Populated per call.
const STEP: usize = 1 << 20;

#[derive(Debug, Default)]
struct Shared {
    /// The active file's mapping and a generation number bumped per file.
    file: Mutex<Option<(u64, Prefaulter)>>,
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

    /// A new active file, written from `write_pos`.
    pub fn set_file(&mut self, p: Prefaulter, write_pos: usize) {
        self.generation += 1;
        self.shared.write_pos.store(write_pos, Ordering::Relaxed);
        *self.shared.file.lock().unwrap_or_else(|e| e.into_inner()) = Some((self.generation, p));
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
    let mut current: Option<(u64, Prefaulter)> = None;
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
        let Some((_, p)) = &current else {
            std::thread::park_timeout(Duration::from_millis(5));
            continue;
        };
        let pos = shared.write_pos.load(Ordering::Relaxed);
        if populated < pos {
            populated = pos & !(STEP - 1);
        }
        if populated < p.mapped_len() && populated < pos + AHEAD {
            if !p.populate(populated, STEP) {
                // The kernel can't: let pages fault in; check again later.
                std::thread::park_timeout(Duration::from_millis(50));
            }
            populated += STEP;
        } else {
            std::thread::park_timeout(Duration::from_micros(500));
        }
    }
}
