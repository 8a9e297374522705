//! Work queues: competing consumers over one queue, with acknowledgements,
//! redelivery and a dead-letter queue (Python: `Queue.work_queue(...)`).
//!
//! A named tailer is one cursor that one process holds. A work queue (a
//! *group*) hands each message of the queue to exactly one of any number of
//! handles, in any number of processes, which acknowledge jobs in any order.
//! Its state is a file in the queue directory,
//! `base/workqueues/<base32(name)>.wq` (layout: `format::work_queue` and
//! `docs/FORMAT.md`, "Work queues"), mapped shared by every handle and only
//! ever changed with 8-byte atomics (compare-and-swap): there is no server
//! and no lock.
//!
//! - the *low-water mark*: every sequence below it is finished (acked,
//!   dead-lettered, expired or gone); retention with `protect_unconsumed`
//!   keeps it;
//! - the *dispatch cursor*: every sequence below it was handed out at least
//!   once; the next new job is the cursor's;
//! - a ring of `window` slots, one per sequence of `low..low + window`
//!   (sequence `s` in slot `s mod window`): the job's state, its deliveries,
//!   its deadline (lease end, or when a nacked job is ready again), and who
//!   holds it. The ring bounds memory and disk however far acks run ahead:
//!   when the cursor reaches `low + window`, `get` hands out only
//!   redeliveries until the job at the mark is finished.
//!
//! `docs/DESIGN.md` ("Work queues") argues why no job is handed to two
//! workers at once and no ack is lost or doubled, whatever process dies when.
//!
//! The module in files: `state` (the state file: its atomics, its creation
//! and checks), `dispatch` (handing out jobs: new ones, by priority, by
//! key, redeliveries), `dead_letter` (jobs retired as dead or expired, and
//! the dead-letter sink), `admin` (listing groups and their pending jobs,
//! claiming and releasing a job by hand).

mod admin;
mod dead_letter;
mod dispatch;
mod state;

pub use admin::{list, read_pending, PendingJob, WorkQueueInfo};
pub use dead_letter::DeadLetterSink;
use dispatch::*;
use state::*;
pub use state::{min_low, remove, rewind_groups_past, state_path};

use super::lease::{self, Now};
use super::name;
use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::work_queue::{
    ClockWord, JobState, SlotWord, WqHeader, MAX_WINDOW, MIN_WINDOW, WQ_MAX_NAME_LEN, WQ_VERSION,
    W_ACKED, W_CURSOR, W_GONE, W_HINT, W_LOW,
};
use crate::reader::tailer::{OwnedMessage, Tailer};
use crate::reader::wait::WaitStrategy;
use crate::reader::wake::WakeSource;
use crate::storage::process::{identity, pid_namespace};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Directory, under the queue's base, that holds the state files.
pub const WORK_QUEUES_DIR: &str = "workqueues";

/// Suffix of state files.
pub const WQ_SUFFIX: &str = ".wq";

/// Largest `max_deliveries` (the count is one byte of the slot word).
pub const MAX_DELIVERIES: u8 = u8::MAX;

/// Longest visibility timeout or nack delay (the deadline is counted in
/// milliseconds of a boot's uptime in 40 bits; a year is far inside it and
/// far beyond any job).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(366 * 24 * 3600);

/// How often a handle looks through the ring for jobs to redeliver (expired
/// leases, dead workers, nacked jobs that are ready) while new jobs keep
/// coming; it also looks whenever it finds no new job, at most this often,
/// and at once after a nack.
pub const SCAN_EVERY: Duration = Duration::from_millis(20);

/// How to open a work queue.
#[derive(Clone)]
pub struct WorkQueueOptions {
    /// How long a job handed out stays leased: not acked by then, it is
    /// handed out again. Default 30 s; at most [`MAX_TIMEOUT`].
    pub visibility_timeout: Duration,
    /// Handouts a job gets; a job whose last lease ran out (or was nacked)
    /// after this many goes to the dead-letter queue (or, without one, is
    /// dropped and counted). 1..=255, default 5.
    pub max_deliveries: u8,
    /// Slots in the ring, for a group created now (a power of two,
    /// 16..=2^24; default 65,536: 2 MiB of state file, allocated when the
    /// group is created).
    /// Ignored when the group exists.
    pub window: u64,
    /// Where a new group starts: `Some(seq)` (at most the queue's end:
    /// `InvalidArgument` past it), or `None` for the queue's first message.
    /// Ignored when the group exists.
    pub start_seq: Option<u64>,
    /// Where dead-lettered jobs go (`None`: dropped and counted).
    pub dead_letter: Option<DeadLetterSink>,
    /// Send jobs whose message expired before a handout to `dead_letter`
    /// too (reason `expired`); otherwise they are only counted. Default false.
    pub dead_letter_expired: bool,
    /// Hand out higher priorities first (FIFO within a priority): the
    /// handle reads ahead over the window and picks the best job not yet
    /// handed out. Default false: sequence order, no read-ahead.
    pub priority: bool,
    /// With `priority`: a job whose message was written this long ago is
    /// handed out before higher priorities, oldest first, so that no job
    /// starves. Default 60 s; `None`: no bound.
    pub max_wait: Option<Duration>,
    /// Ordered delivery per key (SQS FIFO message groups): at most one job
    /// of a key in flight (leased, nacked, or being dead-lettered), and a
    /// key's jobs handed out in sequence order, each once the one before it
    /// is finished. Jobs without a key are not held back. The handle reads
    /// the keys ahead over the window. Every handle of a group should use
    /// the same setting. Not with `priority`. Default false.
    pub ordered_by_key: bool,
}

impl std::fmt::Debug for WorkQueueOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueueOptions")
            .field("visibility_timeout", &self.visibility_timeout)
            .field("max_deliveries", &self.max_deliveries)
            .field("window", &self.window)
            .field("start_seq", &self.start_seq)
            .field("dead_letter", &self.dead_letter.is_some())
            .field("dead_letter_expired", &self.dead_letter_expired)
            .field("priority", &self.priority)
            .field("max_wait", &self.max_wait)
            .field("ordered_by_key", &self.ordered_by_key)
            .finish()
    }
}

impl Default for WorkQueueOptions {
    fn default() -> Self {
        WorkQueueOptions {
            visibility_timeout: Duration::from_secs(30),
            max_deliveries: 5,
            window: 1 << 16,
            start_seq: None,
            dead_letter: None,
            dead_letter_expired: false,
            priority: false,
            max_wait: Some(Duration::from_secs(60)),
            ordered_by_key: false,
        }
    }
}

impl WorkQueueOptions {
    /// Checks every option against its range.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if self.visibility_timeout.is_zero() || self.visibility_timeout > MAX_TIMEOUT {
            return bad(format!(
                "visibility_timeout must be above 0 and at most {} s",
                MAX_TIMEOUT.as_secs()
            ));
        }
        if self.priority && self.ordered_by_key {
            return bad("a work queue is ordered by key or by priority, not both".to_string());
        }
        if self.max_deliveries == 0 {
            return bad(format!("max_deliveries must be 1 to {MAX_DELIVERIES}"));
        }
        if !self.window.is_power_of_two() || !(MIN_WINDOW..=MAX_WINDOW).contains(&self.window) {
            return bad(format!(
                "window must be a power of two from {MIN_WINDOW} to {MAX_WINDOW}, not {}",
                self.window
            ));
        }
        Ok(())
    }
}

/// What `ack` and `nack` need to know about a job handed out: its sequence,
/// which handout it was, and which group of which queue handed it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    /// The job's sequence in the queue (its id).
    pub seq: u64,
    /// Handouts so far, this one included (1 the first time).
    pub deliveries: u8,
    /// The group that handed it out: `ack`, `nack` and `extend` refuse a
    /// ticket of another group, or of another queue.
    pub origin: JobOrigin,
}

/// A queue's identity, as a handle knows it: its `queue_id` (see
/// `format::metadata::Metadata::queue_id`), or, for a read-only handle of
/// a queue no writer has given one yet, its `metadata.json` file (device,
/// inode) and creation time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueIdentity {
    /// The queue's `queue_id` (32 hex digits, as a number).
    Id(u128),
    /// A queue without a `queue_id` yet, opened read-only.
    File {
        /// Device of `metadata.json`.
        dev: u64,
        /// Inode of `metadata.json`.
        ino: u64,
        /// `created_us` of the queue.
        created_us: u64,
    },
}

/// Which group of which queue handed a job out: the queue's identity and
/// the state file's (its device and inode, its creation stamp and its
/// random group id), so that a group removed and created again, or a queue
/// deleted and created again at the same path, is another origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobOrigin {
    /// The queue.
    pub queue: QueueIdentity,
    /// Device and inode of the state file.
    pub file: (u64, u64),
    /// When the group was created, µs since the Unix epoch.
    pub epoch_us: u64,
    /// The group's random id (0 in a version-1 state file).
    pub group_id: u64,
}

/// A job: a message handed to this handle until it acks, nacks, or its lease
/// runs out.
#[derive(Debug, Clone)]
pub struct Job {
    /// What `ack` and `nack` take.
    pub ticket: Ticket,
    /// The message, copied out.
    pub message: OwnedMessage,
}

/// A handle on a work-queue group. `Send + Sync`: threads share a handle,
/// and `get`, `ack` and `nack` may run in several at once. A handle belongs
/// to the process that opened it (its jobs are leased in that process's
/// name): after `fork()`, open another one in the child.
///
/// ```no_run
/// # use std::time::Duration;
/// # let queue = litemq::QueueBuilder::new("/tmp/jobs").open()?;
/// let wq = queue.work_queue("thumbnails", litemq::WorkQueueOptions::default())?;
/// if let Some(job) = wq.get(Duration::from_secs(1), &mut || false)? {
///     println!("resize {:?}", job.message.payload);
///     wq.ack(job.ticket)?;
/// }
/// # Ok::<(), litemq::Error>(())
/// ```
pub struct WorkQueue {
    name: String,
    queue_path: PathBuf,
    state: StateFile,
    readers: Mutex<Readers>,
    catalog: Arc<Catalog>,
    options: WorkQueueOptions,
    /// This process's identity (`start_time << 22 | pid`), stored as owner.
    me: u64,
    /// What this handle stores in clock words (version 2): its clock's boot
    /// and this process's pid namespace.
    my_clock: ClockWord,
    /// What this handle's tickets carry.
    origin: JobOrigin,
    clock: Arc<dyn Clock>,
    wake: Arc<WakeSource>,
    wait: WaitStrategy,
    scan: Mutex<ScanState>,
    /// Sequences below this were removed by retention (learnt from reads).
    gone_below: AtomicU64,
}

impl std::fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.name)
            .field("path", &self.state.path)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the queue layer hands a work queue: the queue's readers, clock and
/// wake-up word (the consumers layer sits below the queue).
pub struct Handles {
    /// The queue's identity (jobs carry it).
    pub queue: QueueIdentity,
    /// Follows the dispatch cursor.
    pub scout: Tailer,
    /// Reads redeliveries and dead letters.
    pub random: Tailer,
    /// The queue's catalog (closed with the queue).
    pub catalog: Arc<Catalog>,
    /// The queue's clock (deadlines).
    pub clock: Arc<dyn Clock>,
    /// The queue's wake-up word (idle `get`s sleep on it).
    pub wake: Arc<WakeSource>,
    /// How `get` waits.
    pub wait: WaitStrategy,
    /// The queue's first sequence (asked only when the group is created).
    pub first_seq: u64,
}

impl WorkQueue {
    /// Opens (or creates) group `group` of the queue at `base`; `end` gives
    /// the queue's end (one past its last message) now.
    pub(crate) fn open(
        base: &Path,
        group: &str,
        options: WorkQueueOptions,
        handles: Handles,
        end: &dyn Fn() -> Result<u64>,
    ) -> Result<WorkQueue> {
        validate_name(group)?;
        options.validate()?;
        let path = state_path(base, group);
        if !path.exists() {
            if let Some(start) = options.start_seq {
                // It would read as a state ahead of its data (check_marks).
                let end = end()?;
                if start > end {
                    return Err(Error::InvalidArgument(format!(
                        "work queue {group:?} cannot start at {start}, past the queue's end ({end})"
                    )));
                }
            }
            let id = crate::format::crypto::new_queue_id();
            let header = WqHeader {
                version: WQ_VERSION,
                window: options.window,
                epoch_us: handles.clock.now_micros(),
                group_id: u64::from_le_bytes(id[..8].try_into().expect("8 bytes")).max(1),
                name: group.to_string(),
            };
            create(
                &path,
                &header,
                options.start_seq.unwrap_or(handles.first_seq),
            )?;
        }
        let header = read_header(&path)?;
        if header.name != group {
            return Err(Error::corrupted(
                &path,
                64,
                None,
                format!("state file holds group {:?}", header.name),
            ));
        }
        let me = identity(std::process::id()).ok_or_else(|| {
            Error::io(
                "read /proc/self/stat",
                "/proc/self/stat",
                std::io::Error::other("no identity for this process"),
            )
        })?;
        const { assert!(WQ_MAX_NAME_LEN == name::MAX_NAME_LEN) };
        let meta = std::fs::metadata(&path).map_err(|e| Error::io("stat", &path, e))?;
        let origin = JobOrigin {
            queue: handles.queue,
            file: (
                std::os::unix::fs::MetadataExt::dev(&meta),
                std::os::unix::fs::MetadataExt::ino(&meta),
            ),
            epoch_us: header.epoch_us,
            group_id: header.group_id,
        };
        let state = StateFile::map(path, &header)?;
        check_marks(&state, end)?;
        let now = Now::read(&*handles.clock, state.version, state.epoch_us);
        state.register_boot(&now);
        Ok(WorkQueue {
            name: group.to_string(),
            queue_path: base.to_path_buf(),
            state,
            readers: Mutex::new(Readers {
                scout: handles.scout,
                random: handles.random,
                ahead: Lookahead::default(),
                keys: KeysAhead::default(),
            }),
            catalog: handles.catalog,
            options,
            me,
            my_clock: ClockWord {
                boot: now.boot,
                pid_ns: pid_namespace(),
            },
            origin,
            clock: handles.clock,
            wake: handles.wake,
            wait: handles.wait,
            scan: Mutex::new(ScanState {
                next_at: Instant::now(),
                hint: u64::MAX,
                next_deadline_ms: 0,
            }),
            gone_below: AtomicU64::new(0),
        })
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The state file.
    pub fn path(&self) -> &Path {
        &self.state.path
    }

    /// The options this handle was opened with.
    pub fn options(&self) -> &WorkQueueOptions {
        &self.options
    }

    /// Slots in the ring.
    pub fn window(&self) -> u64 {
        self.state.window
    }

    /// Which group of which queue this handle's jobs come from.
    pub fn origin(&self) -> JobOrigin {
        self.origin
    }

    fn now(&self) -> Now {
        Now::read(&*self.clock, self.state.version, self.state.epoch_us)
    }

    /// Now on the clock this handle's deadlines count on (version 2: this
    /// boot's monotonic clock, in ms; version 1: wall-clock ms since the
    /// group's epoch).
    fn now_ms(&self) -> u64 {
        self.now().ms
    }

    /// How far ahead a deadline this handle cannot read on its own clock
    /// may lie (see `lease::deadline_passed`): a lease, one visibility
    /// timeout; a nacked job, the longest delay.
    fn bound_ms(&self, state: JobState) -> u64 {
        match state {
            JobState::Delayed => MAX_TIMEOUT.as_millis() as u64,
            _ => self.options.visibility_timeout.as_millis() as u64,
        }
    }

    /// Refuses a ticket another group (or another queue) handed out.
    fn check_origin(&self, t: &Ticket) -> Result<()> {
        if t.origin == self.origin {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "job {} was handed out by another work queue than {:?} of {} (another group, \
             or another queue, or this group or queue before it was removed and created again)",
            t.seq,
            self.name,
            self.queue_path.display()
        )))
    }

    fn deadline_after(&self, now_ms: u64, d: Duration) -> u64 {
        now_ms.saturating_add(d.as_millis() as u64)
    }

    fn check_open(&self) -> Result<()> {
        if self.catalog.is_closed() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Acknowledges a job: done for good. False when this handout's lease
    /// was lost (its deadline passed and the job was handed out again, or
    /// it was acked already): the job will be, or was, done by another.
    pub fn ack(&self, t: Ticket) -> Result<bool> {
        self.finish(t, |w| SlotWord {
            state: JobState::Acked,
            ..w
        })
    }

    /// Gives a job back: handed out again once `delay` has passed (counting
    /// toward `max_deliveries`). False when the lease was lost (as `ack`).
    pub fn nack(&self, t: Ticket, delay: Duration) -> Result<bool> {
        if delay > MAX_TIMEOUT {
            return Err(Error::InvalidArgument(format!(
                "nack delay must be at most {} s",
                MAX_TIMEOUT.as_secs()
            )));
        }
        let ready = self.deadline_after(self.now_ms(), delay);
        let done = self.finish(t, |w| SlotWord {
            state: JobState::Delayed,
            deadline_ms: ready,
            ..w
        })?;
        if done {
            // Other handles look through the ring at once, and waiters wake.
            self.state.add(W_HINT, 1);
            self.wake_waiters();
        }
        Ok(done)
    }

    /// Pushes a job's deadline to `timeout` from now (a long job's
    /// heartbeat). False when the lease was lost.
    pub fn extend(&self, t: Ticket, timeout: Duration) -> Result<bool> {
        if timeout.is_zero() || timeout > MAX_TIMEOUT {
            return Err(Error::InvalidArgument(format!(
                "timeout must be above 0 and at most {} s",
                MAX_TIMEOUT.as_secs()
            )));
        }
        self.check_origin(&t)?;
        let deadline = self.deadline_after(self.now_ms(), timeout);
        let st = &self.state;
        let i = st.slot(t.seq);
        loop {
            let (raw, word) = st.state_of(t.seq);
            if !self.holds(&word, t) {
                return Ok(false);
            }
            let new = SlotWord {
                deadline_ms: deadline,
                ..word
            }
            .encode();
            if st.cas(i, raw, new) {
                // The clock word and then the claim tag follow the word, so
                // a scan still trusts the owner and reads the deadline on
                // this handle's clock.
                if st.version >= 2 {
                    st.set_clock_boot(i, self.my_clock.boot);
                }
                st.store(i + 2, new);
                return Ok(true);
            }
        }
    }

    fn holds(&self, w: &SlotWord, t: Ticket) -> bool {
        w.state == JobState::Leased
            && w.deliveries == t.deliveries
            && t.seq >= self.state.load(W_LOW)
    }

    fn finish(&self, t: Ticket, to: impl Fn(SlotWord) -> SlotWord) -> Result<bool> {
        self.check_open()?;
        self.check_origin(&t)?;
        let st = &self.state;
        let i = st.slot(t.seq);
        let full_before = st.load(W_CURSOR) >= st.load(W_LOW).saturating_add(st.window);
        loop {
            let (raw, word) = st.state_of(t.seq);
            if !self.holds(&word, t) {
                return Ok(false);
            }
            let new = to(word);
            if st.cas(i, raw, new.encode()) {
                if new.state == JobState::Delayed && st.version >= 2 {
                    // The ready time counts on this handle's clock: say
                    // so (clock word, then tag, as a claim does).
                    st.set_clock_boot(i, self.my_clock.boot);
                    st.store(i + 2, new.encode());
                }
                if new.state == JobState::Acked {
                    st.add(W_ACKED, 1);
                    self.advance_low();
                    // A full ring has room again; an ordered group's next
                    // job of the key may be ready.
                    if full_before || self.options.ordered_by_key {
                        self.wake_waiters(); // room in the ring again
                    }
                }
                return Ok(true);
            }
        }
    }

    fn wake_waiters(&self) {
        if let Some(file) = self.wake.file() {
            file.bump();
        }
    }

    /// Moves the low-water mark over finished jobs (any handle may; each
    /// step is a compare-and-swap, so they never pass an unfinished one).
    fn advance_low(&self) {
        let st = &self.state;
        let gone_below = self.gone_below.load(Ordering::Relaxed);
        loop {
            let low = st.load(W_LOW);
            if low >= st.load(W_CURSOR) {
                return;
            }
            let (raw, word) = st.state_of(low);
            if !word.state.is_done() {
                // Removed by retention and held by nobody: gone.
                if low < gone_below && !word.state.is_owned() {
                    if st.cas(st.slot(low), raw, gone_word(low, word, st.window)) {
                        st.add(W_GONE, 1);
                    }
                    continue;
                }
                return;
            }
            let _ = st.cas(W_LOW, low, low + 1);
        }
    }

    /// Forces the state file to disk (msync): acks so far survive a
    /// machine crash.
    pub fn sync(&self) -> Result<()> {
        self.state
            .words
            .flush()
            .map_err(|e| Error::io("msync", &self.state.path, e))
    }
}
