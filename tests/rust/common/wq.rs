//! Helpers of the work-queue tests (`tests/rust/work_queue*.rs`): a
//! queue on a manual clock, and the state file's words read and written
//! the way a worker would.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{clock_at, payload, small};
use litemq::{ManualClock, Queue, WorkQueueOptions};

pub const T0: u64 = 1_800_000_000_000_000;

pub fn fill(q: &Queue, n: u64) {
    let app = q.appender().unwrap();
    for i in 0..n {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
}

/// A small queue (see `common::small`) in a temporary directory, on a
/// manual clock at [`T0`], holding `n` messages: where most tests start.
pub fn fixture(n: u64) -> (tempfile::TempDir, Arc<ManualClock>, Queue) {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = small(dir.path()).clock(clock.clone()).open().unwrap();
    if n > 0 {
        fill(&q, n);
    }
    (dir, clock, q)
}

pub fn options(window: u64) -> WorkQueueOptions {
    WorkQueueOptions {
        visibility_timeout: Duration::from_secs(10),
        window,
        ..WorkQueueOptions::default()
    }
}

pub fn state_file(base: &Path) -> PathBuf {
    let dir = base.join("workqueues");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.pop().unwrap()
}

pub fn write_word(path: &Path, word: usize, value: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&value.to_le_bytes(), (word * 8) as u64)
        .unwrap();
}

pub fn read_word(path: &Path, word: usize) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, (word * 8) as u64).unwrap();
    u64::from_le_bytes(b)
}

pub fn never(_: &mut ()) -> bool {
    false
}

pub fn get_now(wq: &litemq::WorkQueue) -> Option<litemq::Job> {
    wq.get(Duration::ZERO, &mut || never(&mut ())).unwrap()
}

/// An identity (`start_time << 22 | pid`) no live process has.
pub const DEAD_OWNER: u64 = (12_345 << 22) | ((1 << 22) - 1);
