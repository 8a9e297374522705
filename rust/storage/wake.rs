//! The wake-up word: a small shared control file (`wake.ctl`) that lets
//! followers in any process sleep until a writer publishes frames.
//!
//! The file is 64 bytes (layout in `docs/FORMAT.md`, "wake.ctl"): a magic, a
//! version, a 32-bit *wake word* every writer process bumps after it
//! publishes frames, and a *waiter count* of followers registered to sleep on
//! it. A follower registers (increments the count), re-checks the tail and
//! sleeps on the word with `FUTEX_WAIT` (a shared futex: the kernel keys it by
//! the file's inode and offset, so every process mapping the file meets on
//! it). A writer bumps the word and calls `FUTEX_WAKE` only when the count is
//! non-zero, so a queue nobody waits on costs the writer one atomic add and a
//! load per batch, and no system call.
//!
//! Like `mapped.rs`, this module may use `unsafe`: it views a shared file
//! mapping as atomics and makes the futex system call. The mapping is only
//! ever accessed through `AtomicU32`/`AtomicU64` views (never through plain
//! references to the bytes), so accesses in this process never race; other
//! processes use the same views (see `docs/DESIGN.md`, "Waiting for the
//! writer").
//!
//! Nothing in the file is data: it is never synced, and a writer recreates it
//! when it is missing or damaged. Its contents are trusted only for waking.
#![expect(
    unsafe_code,
    reason = "atomic views of a shared mapping and the futex system call"
)]

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, Result};

/// Name of the control file in the queue directory.
pub const WAKE_FILE: &str = "wake.ctl";
/// Bytes of the control file.
pub const WAKE_FILE_LEN: usize = 64;
/// `LMQWAKE\0`.
pub const WAKE_MAGIC: [u8; 8] = *b"LMQWAKE\0";
/// Version of the control file's layout (independent of the data format).
pub const WAKE_VERSION: u32 = 1;

const MAGIC_AT: usize = 0;
const VERSION_AT: usize = 8;
const WORD_AT: usize = 16;
const WAITERS_AT: usize = 24;

/// A waiter count is taken for stale (left by followers that died while
/// registered) when this many wakes in a row, spread over at least
/// [`STALE_AFTER`], found nobody asleep: the writer then resets it to 0.
const STALE_WAKES: u64 = 16;
const STALE_AFTER: Duration = Duration::from_secs(1);

/// True when this platform can sleep on the word (Linux futexes). Elsewhere
/// writers still bump the word, and followers poll with the back-off.
pub const CAN_SLEEP: bool = cfg!(target_os = "linux");

/// How a sleep on the word ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// Woken by a writer, or the word had already moved.
    Changed,
    /// The timeout passed with the word unchanged.
    TimedOut,
    /// A signal arrived (the caller may want to check for Ctrl-C).
    Interrupted,
}

/// Figures about this process's wakes, for `Queue::stats`.
#[derive(Debug, Default)]
struct WakeCounters {
    /// `FUTEX_WAKE` calls this process made.
    calls: AtomicU64,
    /// Followers those calls woke.
    woken: AtomicU64,
    /// Stale waiter counts this process reset.
    resets: AtomicU64,
    /// Empty wakes in a row (nobody was asleep) and when the run began (µs
    /// since `epoch`, + 1; 0: no run). Only the I/O thread writes these.
    empty_run: AtomicU64,
    empty_since: AtomicU64,
}

/// The mapped control file.
///
/// Invariant: `map` is a live shared mapping of [`WAKE_FILE_LEN`] bytes,
/// page-aligned (mmap returns page-aligned memory), owned by `self` and
/// unmapped only on drop; every access to its bytes goes through the atomic
/// views below: bytes 0..16 as two `AtomicU64`, bytes 16..64 as `AtomicU32`.
#[derive(Debug)]
pub struct WakeFile {
    map: MmapRaw,
    epoch: Instant,
    counters: WakeCounters,
}

/// What opening an existing control file found.
#[derive(Debug)]
pub enum Opened {
    Ok(WakeFile),
    /// No file (an older writer made the queue, or none has opened it since).
    Missing,
    /// Not a control file (wrong size or magic): damage, or never finished.
    Damaged(String),
    /// A control file of another version: left alone (followers poll).
    OtherVersion,
}

impl WakeFile {
    /// Opens `dir/wake.ctl` read-write as a writer: a missing or damaged
    /// file is replaced by a fresh one (word 0, no waiters). A valid file is
    /// kept as it is, waiter count included: followers may be asleep on it
    /// across a writer's restart. `None`: the file has another version,
    /// which this writer leaves alone (and does not bump).
    pub fn create_or_open(dir: &Path) -> Result<Option<WakeFile>> {
        match WakeFile::open(dir)? {
            Opened::Ok(f) => return Ok(Some(f)),
            Opened::OtherVersion => return Ok(None),
            Opened::Missing | Opened::Damaged(_) => {}
        }
        let path = dir.join(WAKE_FILE);
        let tmp = dir.join(format!("{WAKE_FILE}.tmp"));
        let mut bytes = [0u8; WAKE_FILE_LEN];
        bytes[MAGIC_AT..MAGIC_AT + 8].copy_from_slice(&WAKE_MAGIC);
        bytes[VERSION_AT..VERSION_AT + 4].copy_from_slice(&WAKE_VERSION.to_le_bytes());
        // Written whole under a temporary name and renamed, so no process
        // ever maps a half-written file. Never synced: nothing in it is data.
        let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
        f.write_all(&bytes)
            .map_err(|e| Error::io("write", &tmp, e))?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &path, e))?;
        match WakeFile::open(dir)? {
            Opened::Ok(f) => Ok(Some(f)),
            Opened::OtherVersion => Ok(None), // replaced meanwhile by another litemq
            Opened::Missing => Err(Error::io(
                "open",
                &path,
                std::io::Error::from(std::io::ErrorKind::NotFound),
            )),
            Opened::Damaged(why) => Err(Error::corrupted(&path, 0, None, why)),
        }
    }

    /// Opens an existing `dir/wake.ctl` read-write (a follower must be able
    /// to register). Permission errors (a read-only directory or file) are
    /// errors for the caller to fall back on polling.
    pub fn open(dir: &Path) -> Result<Opened> {
        let path = dir.join(WAKE_FILE);
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Opened::Missing),
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", &path, e))?
            .len();
        if len != WAKE_FILE_LEN as u64 {
            return Ok(Opened::Damaged(format!(
                "{WAKE_FILE} is {len} bytes, not {WAKE_FILE_LEN}"
            )));
        }
        let map = MmapOptions::new()
            .len(WAKE_FILE_LEN)
            .map_raw(&file)
            .map_err(|e| Error::io("mmap", &path, e))?;
        let f = WakeFile {
            map,
            epoch: Instant::now(),
            counters: WakeCounters::default(),
        };
        let magic = u64::from_le(f.u64_at(MAGIC_AT).load(Ordering::Acquire));
        if magic != u64::from_le_bytes(WAKE_MAGIC) {
            return Ok(Opened::Damaged(format!(
                "{WAKE_FILE} has magic {:02X?}",
                magic.to_le_bytes()
            )));
        }
        // The version and the 4 zero bytes after it.
        let version = u64::from_le(f.u64_at(VERSION_AT).load(Ordering::Acquire));
        if version != u64::from(WAKE_VERSION) {
            return Ok(Opened::OtherVersion);
        }
        Ok(Opened::Ok(f))
    }

    /// The 8 bytes at `offset` (0 or 8) as an atomic.
    fn u64_at(&self, offset: usize) -> &AtomicU64 {
        assert!(offset == MAGIC_AT || offset == VERSION_AT);
        // SAFETY: `offset` is 0 or 8, inside the 64-byte live mapping owned
        // by `self` (type invariant), so the reference cannot outlive it;
        // the base is page-aligned, so the address is 8-aligned; AtomicU64
        // has u64's layout and every bit pattern is valid; bytes 0..16 are
        // only ever accessed through this view.
        unsafe { &*self.map.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// The 4 bytes at `offset` (16..64, aligned to 4) as an atomic.
    fn u32_at(&self, offset: usize) -> &AtomicU32 {
        assert!(offset >= 16 && offset + 4 <= WAKE_FILE_LEN && offset.is_multiple_of(4));
        // SAFETY: checked above to lie in bytes 16..64 of the live mapping
        // owned by `self`, 4-aligned (the base is page-aligned); AtomicU32
        // has u32's layout and every bit pattern is valid; bytes 16..64 are
        // only ever accessed through this view.
        unsafe { &*self.map.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    fn word(&self) -> &AtomicU32 {
        self.u32_at(WORD_AT)
    }

    fn waiters_word(&self) -> &AtomicU32 {
        self.u32_at(WAITERS_AT)
    }

    /// The wake word now (compare with [`WakeFile::sleep`]'s `seen`).
    pub fn current(&self) -> u32 {
        u32::from_le(self.word().load(Ordering::Acquire))
    }

    /// Followers registered to sleep, in every process.
    pub fn waiters(&self) -> u32 {
        u32::from_le(self.waiters_word().load(Ordering::Relaxed))
    }

    /// `FUTEX_WAKE` calls this process made, followers they woke, and stale
    /// waiter counts it reset.
    pub fn counters(&self) -> (u64, u64, u64) {
        let c = &self.counters;
        (
            c.calls.load(Ordering::Relaxed),
            c.woken.load(Ordering::Relaxed),
            c.resets.load(Ordering::Relaxed),
        )
    }

    /// Called by a writer after it published frames (their length words
    /// stored with release ordering): moves the word on and wakes sleepers,
    /// making the system call only when someone is registered.
    pub fn bump(&self) {
        // The word is a counter whose value only matters as "changed"; it is
        // stored little-endian like every word, so the add is done on the
        // decoded value with a compare-and-swap on big-endian hosts.
        if cfg!(target_endian = "little") {
            self.word().fetch_add(1, Ordering::SeqCst);
        } else {
            let _ = self
                .word()
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                    Some(u32::from_le(w).wrapping_add(1).to_le())
                });
        }
        // Pairs with the fence in `register`: either this load sees the
        // follower registered (and wakes it), or the follower's re-check
        // after registering sees the frames published before this fence.
        fence(Ordering::SeqCst);
        let waiters = self.waiters();
        if waiters == 0 {
            self.counters.empty_run.store(0, Ordering::Relaxed);
            return;
        }
        let woken = futex_wake(self.word());
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        self.counters.woken.fetch_add(woken, Ordering::Relaxed);
        if woken > 0 {
            self.counters.empty_run.store(0, Ordering::Relaxed);
        } else {
            self.note_empty_wake(waiters);
        }
    }

    /// A wake found nobody asleep although `waiters` are registered. A live
    /// follower is asleep whenever it is registered, but for the few
    /// microseconds of its re-check: many empty wakes in a row over a second
    /// mean the count is left over from followers that died registered
    /// (killed mid-wait). Reset it, so the writer stops paying a system call
    /// per batch. Should a live follower be registered after all, it loses
    /// its wake-up once and finds the message at its next re-check (at most
    /// 100 ms later, see `reader::wait`).
    fn note_empty_wake(&self, waiters: u32) {
        let c = &self.counters;
        let now = self.epoch.elapsed().as_micros() as u64 + 1;
        let run = c.empty_run.fetch_add(1, Ordering::Relaxed) + 1;
        if run == 1 {
            c.empty_since.store(now, Ordering::Relaxed);
            return;
        }
        let since = c.empty_since.load(Ordering::Relaxed);
        if run >= STALE_WAKES && now.saturating_sub(since) >= STALE_AFTER.as_micros() as u64 {
            if self
                .waiters_word()
                .compare_exchange(waiters.to_le(), 0, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                c.resets.fetch_add(1, Ordering::Relaxed);
            }
            c.empty_run.store(0, Ordering::Relaxed);
        }
    }

    /// Registers the caller as a follower about to sleep; the registration
    /// ends when the guard drops. After this, re-check the tail, then
    /// [`sleep`](WakeFile::sleep) with the word read *before* the re-check.
    pub fn register(&self) -> Registration<'_> {
        self.add_waiters(true);
        // Pairs with the fence in `bump`.
        fence(Ordering::SeqCst);
        Registration { file: self }
    }

    fn add_waiters(&self, up: bool) {
        // Never below 0: a writer may have reset a count it took for stale.
        let _ = self
            .waiters_word()
            .fetch_update(Ordering::SeqCst, Ordering::Relaxed, |w| {
                let n = u32::from_le(w);
                let n = if up {
                    n.saturating_add(1)
                } else {
                    n.checked_sub(1)?
                };
                Some(n.to_le())
            });
    }

    /// Sleeps until the word is no longer `seen`, a writer wakes the
    /// sleepers, `timeout` passes or a signal arrives. Spurious returns are
    /// possible: the caller re-checks the tail either way.
    pub fn sleep(&self, seen: u32, timeout: Duration) -> Woke {
        if self.current() != seen {
            return Woke::Changed;
        }
        futex_wait(self.word(), seen.to_le(), timeout)
    }
}

/// A follower's registration in the waiter count (see [`WakeFile::register`]).
/// Dropping it (returning, unwinding) deregisters; only a process killed
/// while registered leaves its count behind, which writers heal.
#[derive(Debug)]
pub struct Registration<'a> {
    file: &'a WakeFile,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.file.add_waiters(false);
    }
}

#[cfg(target_os = "linux")]
fn futex_wait(word: &AtomicU32, expected_raw: u32, timeout: Duration) -> Woke {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, 4-aligned AtomicU32 in a live shared
    // mapping for the duration of the call (the borrow keeps `WakeFile`
    // alive). FUTEX_WAIT without FUTEX_PRIVATE_FLAG, because the word is
    // shared between processes through the file; the kernel only reads the
    // word and `ts`, which outlives the call. A relative timeout.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected_raw,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if rc == 0 {
        return Woke::Changed;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ETIMEDOUT) => Woke::TimedOut,
        Some(libc::EINTR) => Woke::Interrupted,
        // EAGAIN: the word had already moved.
        _ => Woke::Changed,
    }
}

#[cfg(target_os = "linux")]
fn futex_wake(word: &AtomicU32) -> u64 {
    // SAFETY: `word` is a valid, 4-aligned AtomicU32 in a live shared
    // mapping; FUTEX_WAKE (shared, as in `futex_wait`) only uses its address
    // as the key and touches no memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    rc.max(0) as u64
}

#[cfg(not(target_os = "linux"))]
fn futex_wait(_word: &AtomicU32, _expected_raw: u32, timeout: Duration) -> Woke {
    // Not reached: followers only sleep where `CAN_SLEEP`.
    std::thread::sleep(timeout.min(Duration::from_millis(1)));
    Woke::TimedOut
}

#[cfg(not(target_os = "linux"))]
fn futex_wake(_word: &AtomicU32) -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_file_has_the_documented_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = WakeFile::create_or_open(dir.path()).unwrap().unwrap();
        let bytes = std::fs::read(dir.path().join(WAKE_FILE)).unwrap();
        assert_eq!(bytes.len(), WAKE_FILE_LEN);
        assert_eq!(&bytes[0..8], b"LMQWAKE\0");
        assert_eq!(&bytes[8..12], &1u32.to_le_bytes());
        assert!(bytes[12..].iter().all(|&b| b == 0));
        f.bump();
        let bytes = std::fs::read(dir.path().join(WAKE_FILE)).unwrap();
        assert_eq!(&bytes[16..20], &1u32.to_le_bytes(), "the word is bumped");
        let r = f.register();
        let bytes = std::fs::read(dir.path().join(WAKE_FILE)).unwrap();
        assert_eq!(&bytes[24..28], &1u32.to_le_bytes(), "the waiter count");
        drop(r);
        assert_eq!(f.waiters(), 0);
    }

    #[test]
    fn a_damaged_file_is_replaced_by_a_writer_and_refused_by_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(WAKE_FILE), [7u8; WAKE_FILE_LEN]).unwrap();
        assert!(matches!(
            WakeFile::open(dir.path()).unwrap(),
            Opened::Damaged(_)
        ));
        let f = WakeFile::create_or_open(dir.path()).unwrap().unwrap();
        assert_eq!((f.current(), f.waiters()), (0, 0));
        let mut v2 = std::fs::read(dir.path().join(WAKE_FILE)).unwrap();
        v2[8] = 2;
        std::fs::write(dir.path().join(WAKE_FILE), &v2).unwrap();
        assert!(matches!(
            WakeFile::open(dir.path()).unwrap(),
            Opened::OtherVersion
        ));
        assert!(WakeFile::create_or_open(dir.path()).unwrap().is_none());
        assert_eq!(
            std::fs::read(dir.path().join(WAKE_FILE)).unwrap(),
            v2,
            "another version's file is left alone"
        );
    }

    #[test]
    fn a_count_never_goes_below_zero() {
        let dir = tempfile::tempdir().unwrap();
        let f = WakeFile::create_or_open(dir.path()).unwrap().unwrap();
        let r = f.register();
        f.waiters_word().store(0, Ordering::SeqCst); // as a writer's reset does
        drop(r);
        assert_eq!(f.waiters(), 0);
    }
}
