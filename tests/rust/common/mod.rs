//! Helpers shared by the integration tests.
#![allow(
    dead_code,
    reason = "every test crate includes this module and uses a different part of it"
)]

pub mod wq;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use litemq::{Clock, ManualClock, Queue, QueueBuilder, Start};

/// A small-file builder so tests roll often.
pub fn small(path: &Path) -> QueueBuilder {
    QueueBuilder::new(path)
        .file_size(64 * 1024)
        .index_interval(4)
}

/// A read-only handle on the queue at `path`, as another process opens it.
pub fn read_only(path: &Path) -> Queue {
    QueueBuilder::new(path).read_only(true).open().unwrap()
}

pub fn clock_at(micros: u64) -> Arc<ManualClock> {
    Arc::new(ManualClock::new(micros))
}

/// A clock that panics once armed (`.0` set): whoever writes (the I/O
/// thread, or an appender writing its own bundle) asks it for the time of
/// each bundle but one of frames `append_batch` built, whose appender asked
/// it before handing them over.
#[derive(Debug, Default)]
pub struct PanicClock(pub AtomicBool);

impl Clock for PanicClock {
    fn now_micros(&self) -> u64 {
        if self.0.load(Ordering::SeqCst) {
            panic!("clock armed to panic");
        }
        1_700_000_000_000_000
    }
}

/// Runs `f` on another thread; fails the test if it has not returned
/// within 10 s (a waiter that is never woken).
pub fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("the call never returned: nobody woke it")
}

/// How many messages the [`small`] queue at `base` stores, read by another
/// (read-only) handle; they must be numbered `0..n` with no gap.
pub fn count_stored(base: &Path) -> u64 {
    let q = small(base).read_only(true).open().unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    let mut n = 0;
    while let Some(m) = t.read_next().unwrap() {
        assert_eq!(m.seq, n);
        n += 1;
    }
    n
}

/// Every payload from `start`, as owned vectors.
pub fn read_all(q: &Queue, start: Start) -> Vec<(u64, Vec<u8>)> {
    let mut t = q.tailer(start).unwrap();
    let mut out = Vec::new();
    while let Some(m) = t.read_next().unwrap() {
        out.push((m.seq, m.payload.to_vec()));
    }
    out
}

/// Deterministic payload for sequence `i`, of varying length.
pub fn payload(i: u64) -> Vec<u8> {
    let len = (i * 37 % 300) as usize;
    (0..len).map(|j| (i as usize + j) as u8).collect()
}

/// Data files of a queue, oldest first.
pub fn data_files(base: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = walk(base)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "data"))
        .collect();
    v.sort_by_key(|p| {
        let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
        let (d, c) = stem.split_once('-').unwrap();
        (d.parse::<u64>().unwrap(), c.parse::<u64>().unwrap())
    });
    v
}

fn walk(p: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// A small deterministic generator (splitmix64) for randomized tests: a
/// failing run prints its seed and can be replayed exactly.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    /// Uniform-ish in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// True `percent` times in 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// splitmix64's finalizer.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// An integer from the environment, if set.
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// `SOAK=1`: run the long versions of randomized tests.
pub fn soak() -> bool {
    std::env::var("SOAK").is_ok_and(|v| v == "1")
}

/// A command that runs only the `#[ignore]`d test `entry` of this test
/// binary, in a process of its own: how these tests get a second process (a
/// writer to SIGKILL, a reader beside a writer, a process that holds a lock).
/// It runs `/proc/self/exe`, which in the child still names the binary this
/// test process runs: `target/` is shared, and a concurrent `cargo test` may
/// replace the binary's path under us. (A private copy per test process
/// did the same, but statics are never dropped, so each run left a 43 MB
/// copy per test binary in /tmp.) Start it with [`spawn_child`] or
/// [`output_of_child`].
pub fn child_test(entry: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.args([
        "--exact",
        entry,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    cmd
}

/// Spawns a [`child_test`] command.
pub fn spawn_child(cmd: &mut std::process::Command) -> std::process::Child {
    cmd.spawn().unwrap()
}

/// Runs a [`child_test`] command to the end and returns its output.
pub fn output_of_child(cmd: &mut std::process::Command) -> std::process::Output {
    cmd.output().unwrap()
}

/// Copies the tree at `from` into `to` (created if missing), recursively.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}
