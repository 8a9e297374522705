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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::record::{Compress, HeaderField, Record};
use crate::format::work_queue::{
    decode_header, encode_header, file_len, lap_of, slot_word, ClockWord, JobState, SlotWord,
    WqHeader, BOOT_ENTRIES, MAX_WINDOW, MIN_WINDOW, WQ_HEADER_LEN, WQ_MAX_NAME_LEN, WQ_VERSION,
    W_ACKED, W_BOOTS, W_BOOT_NEXT, W_CURSOR, W_DEAD, W_EXPIRED, W_GONE, W_HINT, W_LOW,
    W_REDELIVERED, W_REWOUND, W_TOP,
};
use crate::reader::catalog::Catalog;
use crate::reader::tailer::{Message, OwnedMessage, Tailer};
use crate::reader::wait::{Sleeper, Slept, WaitStrategy, Waiter, SLEEP_AT_MOST};
use crate::reader::wake::WakeSource;
use crate::storage::fsutil::sync_dir;
use crate::storage::mapped::{preallocate, Mapping, WordFile};
use crate::storage::process::{identity, pid_namespace};

use super::lease::{self, Now};
use super::name;

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

/// Header of a dead-lettered message: why (`max_deliveries`).
pub const DLQ_REASON: &str = "litemq.dlq.reason";
/// Header of a dead-lettered message: its sequence in the source queue.
pub const DLQ_SEQ: &str = "litemq.dlq.seq";
/// Header of a dead-lettered message: the work-queue group.
pub const DLQ_GROUP: &str = "litemq.dlq.group";
/// Header of a dead-lettered message: the source queue's directory.
pub const DLQ_QUEUE: &str = "litemq.dlq.queue";
/// Header of a dead-lettered message: handouts it had.
pub const DLQ_DELIVERIES: &str = "litemq.dlq.deliveries";

/// Where dead-lettered messages go: appends one record and returns once it
/// is written (the queue layer builds it from a queue opened for several
/// writer processes).
pub type DeadLetterSink = Arc<dyn Fn(&Record<'_>) -> Result<()> + Send + Sync>;

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

/// How a job ends without an ack.
#[derive(Debug, Clone, Copy)]
enum Retire {
    /// Past `max_deliveries`.
    Dead,
    /// Its message expired before a handout.
    Expired,
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

/// Figures of one group, as `litemq wq stats` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkQueueInfo {
    /// The group's name.
    pub name: String,
    /// Every sequence below it is finished.
    pub low: u64,
    /// Every sequence below it was handed out at least once.
    pub cursor: u64,
    /// Slots in the ring.
    pub window: u64,
    /// Jobs waiting for a worker: published and never handed out, released,
    /// nacked (ready or not), or leased past their deadline.
    pub pending: u64,
    /// Jobs leased to a worker now (deadline not passed).
    pub in_flight: u64,
    /// Acks since the group was created.
    pub acked: u64,
    /// Jobs dead-lettered (or dropped) after `max_deliveries`.
    pub dead_lettered: u64,
    /// Jobs that expired before a worker got them.
    pub expired: u64,
    /// Handouts after the first.
    pub redelivered: u64,
    /// Jobs retention removed before a worker got them.
    pub gone: u64,
    /// Sequences the marks were moved back over at an open because they
    /// were past the queue's end (a machine crash lost the data's tail and
    /// kept the state file's header page): their jobs were lost with it.
    pub rewound: u64,
    /// µs timestamp of the oldest unfinished job's message, if any.
    pub oldest_timestamp: Option<u64>,
    /// When the group was created, µs since the epoch.
    pub created_at: u64,
}

/// One job handed out and not finished, as [`WorkQueue::pending`] and
/// `litemq wq PATH pending NAME` show it (Redis's `XPENDING`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingJob {
    /// The job's sequence (its id).
    pub seq: u64,
    /// `Leased` (held by a worker), `Delayed` (nacked or released: handed
    /// out again at `deadline_ms`), `DeadLettering` (being written to the
    /// dead-letter queue), or `Pending` (handed out before, now waiting: its
    /// first claimer died before recording its lease).
    pub state: JobState,
    /// Handouts so far.
    pub deliveries: u8,
    /// The holder's process id (leased or dead-lettering jobs whose claim
    /// is complete; `None` otherwise).
    pub owner_pid: Option<u32>,
    /// Whether the holder still runs (`None`: no holder, or one of another
    /// pid namespace, which cannot be judged).
    pub owner_alive: Option<bool>,
    /// When the lease ends, or when a nacked job is ready again: wall-clock
    /// ms since the Unix epoch (`None` for `Pending`).
    pub deadline_ms: Option<u64>,
    /// Whether that deadline has passed (a lease past it is handed out
    /// again by the next `get` that looks through the ring).
    pub overdue: bool,
}

/// The state file, mapped.
struct StateFile {
    words: WordFile,
    window: u64,
    epoch_us: u64,
    /// Layout version (1 or 2): how deadlines count.
    version: u64,
    path: PathBuf,
}

impl StateFile {
    fn word(&self, i: usize) -> &AtomicU64 {
        &self.words.words()[i]
    }
    fn load(&self, i: usize) -> u64 {
        u64::from_le(self.word(i).load(Ordering::Acquire))
    }
    fn store(&self, i: usize, v: u64) {
        self.word(i).store(v.to_le(), Ordering::Release)
    }
    fn cas(&self, i: usize, old: u64, new: u64) -> bool {
        self.word(i)
            .compare_exchange(
                old.to_le(),
                new.to_le(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }
    fn fetch_max(&self, i: usize, n: u64) {
        let _ = self
            .word(i)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (u64::from_le(w) < n).then_some(n.to_le())
            });
    }
    fn add(&self, i: usize, n: u64) {
        let _ = self
            .word(i)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(u64::from_le(w).wrapping_add(n).to_le())
            });
    }
    /// Word index of the state word of `seq`'s slot (owner +1, claim tag +2).
    fn slot(&self, seq: u64) -> usize {
        slot_word((seq & (self.window - 1)) as usize)
    }
    fn state_of(&self, seq: u64) -> (u64, SlotWord) {
        let raw = self.load(self.slot(seq));
        (raw, SlotWord::for_seq(raw, seq, self.window))
    }

    /// Version 2: records (or corrects) in the boot table the wall-clock
    /// time of this boot's monotonic zero, which processes of other boots
    /// read this boot's deadlines by. An entry more than a second off (the
    /// wall clock was stepped since, say from an early-boot clock to NTP
    /// time) is rewritten; a new boot takes the next entry round robin.
    fn register_boot(&self, now: &Now) {
        if self.version < 2 {
            return;
        }
        let base = now.boot_base();
        let boot = u64::from(now.boot);
        for e in 0..BOOT_ENTRIES {
            let at = W_BOOTS + 2 * e;
            if self.load(at) == boot {
                if self.load(at + 1).abs_diff(base) > 1000 {
                    self.store(at + 1, base);
                }
                return;
            }
        }
        let at = W_BOOTS
            + 2 * (self.word(W_BOOT_NEXT).fetch_add(1, Ordering::AcqRel) as usize % BOOT_ENTRIES);
        // The base first: a reader that finds the key reads a base of this boot.
        self.store(at, 0);
        self.store(at + 1, base);
        self.store(at, boot);
    }

    /// Version 2: stores boot `boot` into the clock half of slot word `i`'s
    /// clock word (the owner's namespace stays).
    fn set_clock_boot(&self, i: usize, boot: u32) {
        let _ = self
            .word(i + 3)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                let c = ClockWord {
                    boot,
                    ..ClockWord::decode(u64::from_le(w))
                };
                Some(c.encode().to_le())
            });
    }
}

/// The per-handle readers: one follows the cursor (new jobs), one seeks
/// (redeliveries, dead letters); and, for a priority group, what the scout
/// read ahead.
struct Readers {
    scout: Tailer,
    random: Tailer,
    ahead: Lookahead,
    keys: KeysAhead,
}

/// The keys an ordered group's handle has read over the ring: `seq -> key`
/// for every sequence from the low-water mark to `next` (holes and
/// messages without a key: `None`).
#[derive(Debug, Default)]
struct KeysAhead {
    next: u64,
    of: BTreeMap<u64, Option<Vec<u8>>>,
}

/// Jobs a priority group's handle has read ahead of the cursor and not seen
/// handed out yet.
#[derive(Debug, Default)]
struct Lookahead {
    /// The next sequence to read.
    next: u64,
    /// `(255 - priority, seq)`: the first is the job to hand out.
    by_rank: BTreeSet<(u8, u64)>,
    /// `seq -> (priority, timestamp)`: the first is the oldest.
    by_seq: BTreeMap<u64, (u8, u64)>,
}

impl Lookahead {
    fn insert(&mut self, seq: u64, priority: u8, timestamp: u64) {
        self.by_rank.insert((u8::MAX - priority, seq));
        self.by_seq.insert(seq, (priority, timestamp));
    }

    fn remove(&mut self, seq: u64) {
        if let Some((priority, _)) = self.by_seq.remove(&seq) {
            self.by_rank.remove(&(u8::MAX - priority, seq));
        }
    }

    /// Forgets every job below `cursor` (handed out at least once).
    fn forget_below(&mut self, cursor: u64) {
        while let Some((&seq, _)) = self.by_seq.first_key_value() {
            if seq >= cursor {
                break;
            }
            self.remove(seq);
        }
        self.next = self.next.max(cursor);
    }

    /// The job to hand out: the oldest when it was written `max_wait` ago or
    /// more, else the highest priority (the oldest among equals).
    fn choose(&self, now_us: u64, max_wait: Option<Duration>) -> Option<u64> {
        if let (Some(bound), Some((&seq, &(_, written)))) =
            (max_wait, self.by_seq.first_key_value())
        {
            if written.saturating_add(bound.as_micros() as u64) <= now_us {
                return Some(seq);
            }
        }
        self.by_rank.first().map(|&(_, seq)| seq)
    }
}

/// Messages a priority handle reads ahead per `get` at most (it reads the
/// rest of the window over the following calls).
const READ_AHEAD: usize = 4096;

struct ScanState {
    /// When the next periodic scan is due (real time: dead owners).
    next_at: Instant,
    /// The nack counter at the last scan.
    hint: u64,
    /// The earliest deadline (ms since the epoch, queue clock) the last
    /// complete scan passed over: a scan is due once it has come.
    next_deadline_ms: u64,
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

/// The message at `seq` or the first after it (holes), read by `scout`,
/// which seeks only when it is not there already (read-ahead moves on).
fn read_at(scout: &mut Tailer, seq: u64) -> Result<Option<Message<'_>>> {
    if scout.next_seq() != seq {
        scout.seek(seq)?;
    }
    scout.read_next()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Path of the state file of group `group` in the queue at `base`.
pub fn state_path(base: &Path, group: &str) -> PathBuf {
    let mut f = name::encode(group.as_bytes());
    f.push_str(WQ_SUFFIX);
    base.join(WORK_QUEUES_DIR).join(f)
}

fn group_of_file(file: &str) -> Option<String> {
    let stem = file.strip_suffix(WQ_SUFFIX)?;
    let group = String::from_utf8(name::decode(stem)?).ok()?;
    name::validate(&group).ok()?;
    (name::encode(group.as_bytes()) == stem).then_some(group)
}

fn validate_name(group: &str) -> Result<()> {
    name::validate(group).map_err(|e| match e {
        Error::InvalidArgument(m) => {
            Error::InvalidArgument(m.replacen("consumer name", "work queue name", 1))
        }
        other => other,
    })
}

/// Writes a complete state file under a temporary name and links it into
/// place (fails with EEXIST when another process created it first): the
/// file appears whole or not at all. The slots are zeros with their disk
/// blocks allocated (a hole written through the mapping on a full disk
/// would be SIGBUS; here it is `ENOSPC`, op `preallocate`).
fn create(path: &Path, header: &WqHeader, start: u64) -> Result<()> {
    let dir = path.parent().expect("state files live in a directory");
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    let mut tmp = path.as_os_str().to_owned();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    tmp.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = PathBuf::from(tmp);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::io("create", &tmp, e))?;
        preallocate(&f, file_len(header.window)).map_err(|e| Error::io("preallocate", &tmp, e))?;
        f.write_all(&encode_header(header, start))
            .map_err(|e| Error::io("write", &tmp, e))?;
        f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => sync_dir(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(Error::io("link", path, e)),
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    result
}

/// Reads and checks the immutable header of the state file at `path`.
fn read_header(path: &Path) -> Result<WqHeader> {
    let f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    let len = f.metadata().map_err(|e| Error::io("stat", path, e))?.len();
    let mut b = vec![0u8; WQ_HEADER_LEN.min(len as usize)];
    f.read_exact_at(&mut b, 0)
        .map_err(|e| Error::io("read", path, e))?;
    let h = decode_header(&b).map_err(|(at, why)| Error::corrupted(path, at as u64, None, why))?;
    if len != file_len(h.window) {
        return Err(Error::corrupted(
            path,
            0,
            None,
            format!(
                "state file is {len} bytes; a window of {} needs {}",
                h.window,
                file_len(h.window)
            ),
        ));
    }
    Ok(h)
}

/// Checks the marks against each other and against the queue's end, and
/// moves marks past the end back to it.
///
/// `low <= cursor` always holds (the mark passes only sequences below the
/// cursor): a file where it does not is refused as corrupted. A cursor (or
/// priority top) past the queue's end claims jobs the queue does not have:
/// a machine crash lost the data's tail but kept the state file's header
/// page (its pages reach the disk on their own schedule), or the data files
/// were replaced. Left alone, every message written since at those
/// sequences would be skipped without a word. The marks move back to the
/// end (`low` only when it is past it too), the slots of every sequence
/// from the end on are cleared (they describe the lost jobs), and the
/// `rewound` counter grows by how far the state was ahead. Jobs below the
/// end keep their state.
///
/// The marks are loaded before the end is asked for: a job handed out is in
/// the files, so a live group is never taken for one ahead of its data. The
/// repair runs under an exclusive `flock` on the state file and checks
/// again first, so two handles opening at once repair once.
fn check_marks(st: &StateFile, end: &dyn Fn() -> Result<u64>) -> Result<()> {
    let refused = |low: u64, cursor: u64| {
        Error::corrupted(
            &st.path,
            (W_LOW * 8) as u64,
            None,
            format!("low-water mark {low} is past the dispatch cursor {cursor}"),
        )
    };
    let marks = || (st.load(W_LOW), st.load(W_CURSOR), st.load(W_TOP));
    let (low, cursor, top) = marks();
    if low > cursor {
        return Err(refused(low, cursor));
    }
    if cursor.max(top) <= end()? {
        return Ok(());
    }
    let file = std::fs::File::open(&st.path).map_err(|e| Error::io("open", &st.path, e))?;
    file.lock().map_err(|e| Error::io("lock", &st.path, e))?;
    let (low, cursor, top) = marks();
    if low > cursor {
        return Err(refused(low, cursor));
    }
    let end = end()?;
    let ahead = cursor.max(top);
    if ahead <= end {
        return Ok(()); // another handle repaired it
    }
    let low = low.min(end);
    // Slots first, marks after: a repair cut short is done again in full
    // by the next open (the marks still say so).
    for seq in end..low.saturating_add(st.window) {
        let i = st.slot(seq);
        for w in i..i + 3 {
            if st.load(w) != 0 {
                st.store(w, 0);
            }
        }
    }
    st.store(W_TOP, top.min(end));
    st.store(W_LOW, low);
    st.store(W_CURSOR, cursor.min(end));
    st.add(W_REWOUND, ahead - end);
    st.words
        .flush()
        .map_err(|e| Error::io("msync", &st.path, e))
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
        let words = WordFile::open_existing(&path, (file_len(header.window) / 8) as usize)?;
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
        let state = StateFile {
            words,
            window: header.window,
            epoch_us: header.epoch_us,
            version: header.version,
            path,
        };
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

    /// Hands out the next job, waiting up to `timeout` (and returning
    /// `None` early when `interrupt`, polled at least every 50 ms, says so).
    pub fn get(
        &self,
        timeout: Duration,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Job>> {
        self.get_with(timeout, interrupt, &mut |m| m.to_owned())
            .map(|o| o.map(|(ticket, message)| Job { ticket, message }))
    }

    /// As [`WorkQueue::get`], passing the message, borrowed from the
    /// mapping, to `f` instead of copying it out.
    pub fn get_with<R>(
        &self,
        timeout: Duration,
        interrupt: &mut dyn FnMut() -> bool,
        f: &mut dyn FnMut(&Message<'_>) -> R,
    ) -> Result<Option<(Ticket, R)>> {
        self.check_open()?;
        if let Some(found) = self.try_get(f)? {
            return Ok(Some(found));
        }
        if timeout.is_zero() {
            return Ok(None);
        }
        let start = Instant::now();
        let file = match self.wait {
            WaitStrategy::Default => self.wake.file(),
            WaitStrategy::BusySpin => None,
        };
        if let Some(file) = file {
            let mut sleeper = Sleeper::default();
            let mut check = || {
                self.check_open()?;
                self.try_get(f)
            };
            return match sleeper.wait(&file, timeout, interrupt, &mut check)? {
                Slept::Found { value, .. } => Ok(Some(value)),
                Slept::Nothing => Ok(None),
            };
        }
        // No wake-up word: poll with back-off.
        let mut waiter = Waiter::new(self.wait);
        let mut last_interrupt = start;
        loop {
            waiter.wait();
            self.check_open()?;
            if let Some(found) = self.try_get(f)? {
                return Ok(Some(found));
            }
            let now = Instant::now();
            if now.duration_since(start) >= timeout {
                return Ok(None);
            }
            if now.duration_since(last_interrupt) >= SLEEP_AT_MOST {
                last_interrupt = now;
                if interrupt() {
                    return Ok(None);
                }
            }
        }
    }

    /// One attempt, without waiting: a redelivery when a scan is due, else
    /// the job at the cursor.
    fn try_get<R>(&self, f: &mut dyn FnMut(&Message<'_>) -> R) -> Result<Option<(Ticket, R)>> {
        if self.scan_due() {
            if let Some(found) = self.scan(f)? {
                return Ok(Some(found));
            }
        }
        if self.options.priority {
            self.next_by_priority(f)
        } else if self.options.ordered_by_key {
            self.next_by_key(f)
        } else {
            self.next_new(f)
        }
    }

    /// True when this handle should look through the ring now: a nack
    /// happened since it last looked, a deadline it saw then has come, or
    /// [`SCAN_EVERY`] passed (which finds dead owners, and deadlines of
    /// leases other handles made since).
    fn scan_due(&self) -> bool {
        let mut s = lock(&self.scan);
        let hint = self.state.load(W_HINT);
        let now = Instant::now();
        if hint != s.hint || now >= s.next_at || self.now_ms() >= s.next_deadline_ms {
            s.hint = hint;
            s.next_at = now + SCAN_EVERY;
            s.next_deadline_ms = u64::MAX; // the scan sets it
            return true;
        }
        false
    }

    /// Records how a scan ended: `Some(earliest)` when it looked at every
    /// slot, `None` when it stopped at a job it handed out (the next get
    /// looks again).
    fn scanned(&self, earliest: Option<u64>) {
        lock(&self.scan).next_deadline_ms = earliest.unwrap_or(0);
    }

    /// Claims the job at the dispatch cursor, if it is published and the
    /// ring has room.
    fn next_new<R>(&self, f: &mut dyn FnMut(&Message<'_>) -> R) -> Result<Option<(Ticket, R)>> {
        let st = &self.state;
        loop {
            let low = st.load(W_LOW);
            let c = st.load(W_CURSOR);
            if c >= low.saturating_add(st.window) {
                self.advance_low();
                if st.load(W_LOW) == low {
                    return Ok(None); // the ring is full: only redeliveries
                }
                continue;
            }
            let mut readers = lock(&self.readers);
            let scout = &mut readers.scout;
            let read = if scout.next_seq() == c {
                scout.read_next()
            } else {
                match scout.seek(c) {
                    Ok(()) => scout.read_next(),
                    Err(e) => Err(e),
                }
            };
            let msg = match read {
                Ok(Some(m)) => m,
                Ok(None) => return Ok(None),
                Err(Error::NotFound { first, next, .. }) if c < first => {
                    // Retention removed messages never handed out: skip them.
                    self.gone_below.fetch_max(first, Ordering::Relaxed);
                    let _ = st.cas(W_CURSOR, c, first.min(next));
                    self.advance_low();
                    continue;
                }
                Err(Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            if msg.seq != c {
                // Key compaction dropped `c..msg.seq` (holes): no jobs. The
                // cursor passes those within the ring (the rest next time).
                let to = msg.seq.min(low.saturating_add(st.window));
                drop(readers);
                self.holes(c, to);
                if st.cas(W_CURSOR, c, to) {
                    self.advance_low();
                }
                continue;
            }
            if !st.cas(W_CURSOR, c, c + 1) {
                continue; // another worker took it
            }
            // The first handout of `c` is ours, unless a scan found its slot
            // pending first (it does after a worker died between moving the
            // cursor and claiming the slot).
            let (raw, word) = st.state_of(c);
            if word.state != JobState::Pending {
                continue;
            }
            let now = self.now_ms();
            if self.is_expired(&msg) {
                drop(readers);
                self.expire(c, raw, word, now)?;
                continue;
            }
            if let Some(ticket) = self.lease(c, raw, word, now) {
                return Ok(Some((ticket, f(&msg))));
            }
        }
    }

    /// Marks the pending slots of `from..to` gone: key compaction dropped
    /// those messages (holes), so they are no jobs. A slot a worker holds
    /// is left alone (its ack or nack settles it).
    fn holes(&self, from: u64, to: u64) {
        let st = &self.state;
        let horizon = st.load(W_LOW).saturating_add(st.window);
        for seq in from..to.min(horizon) {
            let (raw, word) = st.state_of(seq);
            if word.state == JobState::Pending
                && st.cas(st.slot(seq), raw, gone_word(seq, word, st.window))
            {
                st.add(W_GONE, 1);
            }
        }
    }

    /// Marks `seq` gone (its message was removed or compacted away) if its
    /// slot still holds `raw`, whatever state that is: a job held by a
    /// worker that has no message any more is finished too (its late ack
    /// or nack then finds it finished and returns false).
    fn gone(&self, seq: u64, raw: u64, word: SlotWord) -> bool {
        let st = &self.state;
        let done = st.cas(st.slot(seq), raw, gone_word(seq, word, st.window));
        if done {
            st.add(W_GONE, 1);
        }
        done
    }

    fn is_expired(&self, m: &Message<'_>) -> bool {
        m.expires_at().is_some_and(|t| t <= self.clock.now_micros())
    }

    /// A priority group's next job: the best one read ahead (see
    /// [`Lookahead::choose`]) whose slot is still pending, claimed ahead of
    /// the cursor; the cursor then moves over every slot claimed.
    fn next_by_priority<R>(
        &self,
        f: &mut dyn FnMut(&Message<'_>) -> R,
    ) -> Result<Option<(Ticket, R)>> {
        let st = &self.state;
        loop {
            let low = st.load(W_LOW);
            let cursor = st.load(W_CURSOR);
            let horizon = low.saturating_add(st.window);
            let mut guard = lock(&self.readers);
            let r = &mut *guard;
            r.ahead.forget_below(cursor);
            let mut budget = READ_AHEAD;
            while r.ahead.next < horizon && budget > 0 {
                budget -= 1;
                let seq = r.ahead.next;
                let read = read_at(&mut r.scout, seq);
                match read {
                    Ok(Some(m)) if m.seq != seq => {
                        // Key compaction dropped `seq..m.seq` (holes): those
                        // within the ring are no jobs (the rest next time).
                        let to = m.seq.min(horizon);
                        self.holes(seq, to);
                        r.ahead.next = to;
                    }
                    Ok(Some(m)) => {
                        r.ahead.insert(seq, m.priority(), m.timestamp);
                        r.ahead.next = seq + 1;
                    }
                    Ok(None) => break,
                    Err(Error::NotFound { first, next, .. }) if seq < first => {
                        // Retention removed messages never handed out.
                        self.gone_below.fetch_max(first, Ordering::Relaxed);
                        r.ahead.next = first.min(next);
                        if cursor < first {
                            let _ = st.cas(W_CURSOR, cursor, first.min(next));
                        }
                    }
                    Err(Error::NotFound { .. }) => break,
                    Err(e) => return Err(e),
                }
            }
            let Some(seq) = r
                .ahead
                .choose(self.clock.now_micros(), self.options.max_wait)
            else {
                return Ok(None);
            };
            r.ahead.remove(seq);
            let (raw, word) = st.state_of(seq);

            if word.state != JobState::Pending {
                continue; // handed out by another handle meanwhile
            }
            let msg = match r.random.read_at(seq) {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(Error::Compacted { .. }) => {
                    self.holes(seq, seq + 1);
                    continue;
                }
                Err(Error::NotFound { first, .. }) if seq < first => continue,
                Err(e) => return Err(e),
            };
            let now = self.now_ms();
            if self.is_expired(&msg) {
                drop(guard);
                self.expire(seq, raw, word, now)?;
                self.advance_cursor();
                continue;
            }
            if let Some(ticket) = self.lease(seq, raw, word, now) {
                let out = f(&msg);
                drop(guard);
                st.fetch_max(W_TOP, seq + 1);
                self.advance_cursor();
                return Ok(Some((ticket, out)));
            }
        }
    }

    /// An ordered group's next new job: the first pending one (in sequence
    /// order) that is the oldest unfinished job of its key, or has no key;
    /// claimed ahead of the cursor, which then moves over every slot
    /// claimed. A key's job is considered only once every job of that key
    /// before it was seen finished, and a finished job never comes back,
    /// so two handles never hold jobs of one key at once. Redeliveries are
    /// the scan's (a job handed out was the oldest unfinished of its key).
    fn next_by_key<R>(&self, f: &mut dyn FnMut(&Message<'_>) -> R) -> Result<Option<(Ticket, R)>> {
        let st = &self.state;
        loop {
            let low = st.load(W_LOW);
            let cursor = st.load(W_CURSOR);
            let horizon = low.saturating_add(st.window);
            let mut guard = lock(&self.readers);
            let r = &mut *guard;
            r.keys.of = r.keys.of.split_off(&low);
            r.keys.next = r.keys.next.max(low);
            let mut budget = READ_AHEAD;
            while r.keys.next < horizon && budget > 0 {
                budget -= 1;
                let seq = r.keys.next;
                let read = read_at(&mut r.scout, seq);
                match read {
                    Ok(Some(m)) if m.seq != seq => {
                        // Key compaction dropped `seq..m.seq` (holes).
                        let to = m.seq.min(horizon);
                        self.holes(seq, to);
                        for s in seq..to {
                            r.keys.of.insert(s, None);
                        }
                        r.keys.next = to;
                    }
                    Ok(Some(m)) => {
                        r.keys.of.insert(seq, m.key.map(<[u8]>::to_vec));
                        r.keys.next = seq + 1;
                    }
                    Ok(None) => break,
                    Err(Error::NotFound { first, next, .. }) if seq < first => {
                        // Retention removed messages never handed out.
                        self.gone_below.fetch_max(first, Ordering::Relaxed);
                        r.keys.next = first.min(next);
                        if cursor < first {
                            let _ = st.cas(W_CURSOR, cursor, first.min(next));
                        }
                    }
                    Err(Error::NotFound { .. }) => break,
                    Err(e) => return Err(e),
                }
            }
            let mut held: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
            let mut found = None;
            for seq in low..r.keys.next.min(horizon) {
                let (raw, word) = st.state_of(seq);
                if word.state.is_done() {
                    continue;
                }
                if let Some(Some(key)) = r.keys.of.get(&seq) {
                    if !held.insert(key.as_slice()) {
                        continue; // an earlier job of its key is not finished
                    }
                }
                if word.state == JobState::Pending {
                    found = Some((seq, raw, word));
                    break;
                }
            }
            let Some((seq, raw, word)) = found else {
                return Ok(None);
            };
            let msg = match r.random.read_at(seq) {
                Ok(Some(m)) => m,
                Ok(None) => return Ok(None),
                Err(Error::Compacted { .. }) => {
                    self.holes(seq, seq + 1);
                    continue;
                }
                Err(Error::NotFound { first, .. }) if seq < first => {
                    self.gone_below.fetch_max(first, Ordering::Relaxed);
                    drop(guard);
                    self.gone(seq, raw, word);
                    self.advance_low();
                    continue;
                }
                Err(e) => return Err(e),
            };
            let now = self.now_ms();
            if self.is_expired(&msg) {
                drop(guard);
                self.expire(seq, raw, word, now)?;
                self.advance_cursor();
                continue;
            }
            if let Some(ticket) = self.lease(seq, raw, word, now) {
                let out = f(&msg);
                drop(guard);
                st.fetch_max(W_TOP, seq + 1);
                self.advance_cursor();
                return Ok(Some((ticket, out)));
            }
        }
    }

    /// Moves the cursor over slots no longer pending (a priority group
    /// claims ahead of it).
    fn advance_cursor(&self) {
        let st = &self.state;
        loop {
            let c = st.load(W_CURSOR);
            if c >= st.load(W_LOW).saturating_add(st.window) {
                return;
            }
            if st.state_of(c).1.state == JobState::Pending {
                return;
            }
            let _ = st.cas(W_CURSOR, c, c + 1);
        }
    }

    /// Compare-and-swap of `seq`'s slot from `raw` to a lease for this
    /// process; then the owner and the claim tag.
    fn lease(&self, seq: u64, raw: u64, word: SlotWord, now_ms: u64) -> Option<Ticket> {
        let deliveries = word.deliveries.saturating_add(1);
        let deadline_ms = self.deadline_after(now_ms, self.options.visibility_timeout);
        let new = SlotWord {
            lap: lap_of(seq, self.state.window),
            state: JobState::Leased,
            deliveries,
            deadline_ms,
        }
        .encode();
        if !self.claim_slot(seq, raw, new) {
            return None;
        }
        // This handle looks again when its own lease runs out.
        let mut scan = lock(&self.scan);
        scan.next_deadline_ms = scan.next_deadline_ms.min(deadline_ms);
        drop(scan);
        if word.deliveries > 0 {
            self.state.add(W_REDELIVERED, 1);
        }
        Some(Ticket {
            seq,
            deliveries,
            origin: self.origin,
        })
    }

    /// Moves `seq`'s state word from `raw` to `new` (a state this process
    /// owns), then records the owner and, last, the claim tag: a scan trusts
    /// the owner only when the tag equals the state word.
    fn claim_slot(&self, seq: u64, raw: u64, new: u64) -> bool {
        let i = self.state.slot(seq);
        if !self.state.cas(i, raw, new) {
            return false;
        }
        self.state.store(i + 1, self.me);
        if self.state.version >= 2 {
            self.state.store(i + 3, self.my_clock.encode());
            self.state.register_boot(&self.now());
        }
        self.state.store(i + 2, new);
        true
    }

    /// Looks through `low..cursor` for a job to hand out again: pending
    /// (its first claimer died), nacked and ready, or leased past its
    /// deadline or by a process that is gone. Oldest first. Jobs past
    /// `max_deliveries` are dead-lettered on the way.
    fn scan<R>(&self, f: &mut dyn FnMut(&Message<'_>) -> R) -> Result<Option<(Ticket, R)>> {
        self.advance_low();
        let st = &self.state;
        let (low, cursor) = (st.load(W_LOW), st.load(W_CURSOR));
        // A priority group claims ahead of the cursor, up to the top.
        let top = st.load(W_TOP).max(cursor);
        let clock_now = self.now();
        let now = clock_now.ms;
        let mut gone: HashMap<(u64, u32), bool> = HashMap::new();
        let mut earliest = u64::MAX;
        for seq in low..top.min(low.saturating_add(st.window)) {
            let (raw, word) = st.state_of(seq);
            // At or past the cursor, a pending job was never handed out: it
            // is a new job, not a redelivery.
            let fresh = seq >= cursor && word.state == JobState::Pending;
            if fresh || !self.redeliverable(seq, raw, word, &clock_now, &mut gone) {
                if matches!(
                    word.state,
                    JobState::Leased | JobState::Delayed | JobState::DeadLettering
                ) {
                    earliest = earliest.min(word.deadline_ms);
                }
                continue;
            }
            if word.deliveries >= self.options.max_deliveries {
                if let Err(e) = self.dead_letter(seq, raw, word, now) {
                    self.scanned(None);
                    return Err(e);
                }
                continue;
            }
            let mut readers = lock(&self.readers);
            let msg = match readers.random.read_at(seq) {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(Error::Compacted { .. }) => {
                    // Dropped by key compaction, maybe while it was leased
                    // (nacked since, or its lease ran out): no job any more.
                    self.gone(seq, raw, word);
                    continue;
                }
                Err(Error::NotFound { first, .. }) if seq < first => {
                    self.gone_below.fetch_max(first, Ordering::Relaxed);
                    self.gone(seq, raw, word);
                    continue;
                }
                Err(e) => {
                    self.scanned(None);
                    return Err(e);
                }
            };
            if self.is_expired(&msg) {
                drop(readers);
                if let Err(e) = self.expire(seq, raw, word, now) {
                    self.scanned(None);
                    return Err(e);
                }
                continue;
            }
            if let Some(ticket) = self.lease(seq, raw, word, now) {
                self.scanned(None);
                return Ok(Some((ticket, f(&msg))));
            }
        }
        self.scanned(Some(earliest));
        self.advance_low();
        Ok(None)
    }

    fn redeliverable(
        &self,
        seq: u64,
        raw: u64,
        word: SlotWord,
        now: &Now,
        gone: &mut HashMap<(u64, u32), bool>,
    ) -> bool {
        let passed = || {
            let st = &self.state;
            let load = |i: usize| st.load(i);
            let bound = self.bound_ms(word.state);
            lease::deadline_passed(&load, st.version, st.slot(seq), raw, &word, now, bound)
        };
        match word.state {
            JobState::Pending => true,
            JobState::Delayed => passed(),
            JobState::Leased | JobState::DeadLettering => {
                passed() || self.owner_gone(seq, raw, gone)
            }
            _ => false,
        }
    }

    /// Whether the process holding `seq` (state word `raw`) is gone. Only
    /// trusted when the claim tag equals the state word (the owner word is
    /// then the one this claim stored); a claim in progress is left to its
    /// deadline.
    fn owner_gone(&self, seq: u64, raw: u64, gone: &mut HashMap<(u64, u32), bool>) -> bool {
        let i = self.state.slot(seq);
        if self.state.load(i + 2) != raw {
            return false;
        }
        let owner = self.state.load(i + 1);
        // Version 1 has no clock word: its 0 reads "our namespace".
        let pid_ns = ClockWord::decode(self.state.load(i + 3)).pid_ns;
        if owner == self.me && (pid_ns == 0 || pid_ns == self.my_clock.pid_ns) {
            return false;
        }
        *gone
            .entry((owner, pid_ns))
            .or_insert_with(|| lease::owner_gone(owner, pid_ns))
    }

    /// Sends a job past `max_deliveries` to the dead-letter queue (or drops
    /// it without one): claims it as `DeadLettering` for a visibility
    /// timeout, appends it, then marks it dead. A process that dies in
    /// between leaves the claim to expire, and the next one appends it
    /// again: the dead-letter queue gets it at least once.
    fn dead_letter(&self, seq: u64, raw: u64, word: SlotWord, now_ms: u64) -> Result<()> {
        let sink = self.options.dead_letter.as_ref();
        self.retire(seq, raw, word, now_ms, Retire::Dead, sink)
    }

    /// Marks a job whose message expired before a handout: `Expired`,
    /// through the dead-letter queue when `dead_letter_expired` says so.
    fn expire(&self, seq: u64, raw: u64, word: SlotWord, now_ms: u64) -> Result<()> {
        let sink = self
            .options
            .dead_letter
            .as_ref()
            .filter(|_| self.options.dead_letter_expired);
        self.retire(seq, raw, word, now_ms, Retire::Expired, sink)
    }

    fn retire(
        &self,
        seq: u64,
        raw: u64,
        word: SlotWord,
        now_ms: u64,
        why: Retire,
        sink: Option<&DeadLetterSink>,
    ) -> Result<()> {
        let st = &self.state;
        let (end, counter, reason) = match why {
            Retire::Dead => (JobState::Dead, W_DEAD, "max_deliveries"),
            Retire::Expired => (JobState::Expired, W_EXPIRED, "expired"),
        };
        let owned = if sink.is_some() {
            let owned = SlotWord {
                lap: lap_of(seq, st.window),
                state: JobState::DeadLettering,
                deadline_ms: self.deadline_after(now_ms, self.options.visibility_timeout),
                ..word
            }
            .encode();
            if !self.claim_slot(seq, raw, owned) {
                return Ok(());
            }
            owned
        } else {
            raw
        };
        if let Some(sink) = sink {
            let mut readers = lock(&self.readers);
            match readers.random.read_at(seq) {
                Ok(Some(m)) => {
                    let seq_text = seq.to_string();
                    let deliveries = word.deliveries.to_string();
                    let queue = self.queue_path.to_string_lossy();
                    let ours = [
                        (DLQ_REASON, reason),
                        (DLQ_SEQ, seq_text.as_str()),
                        (DLQ_GROUP, self.name.as_str()),
                        (DLQ_QUEUE, queue.as_ref()),
                        (DLQ_DELIVERIES, deliveries.as_str()),
                    ];
                    // The message's own headers first, as many as leave room for ours.
                    let mut headers: Vec<HeaderField<'_>> = m
                        .headers()
                        .take(crate::format::record::MAX_HEADERS - ours.len())
                        .collect();
                    headers.extend(ours.iter().map(|&(name, value)| HeaderField {
                        name,
                        value: value.as_bytes(),
                        value_is_text: true,
                    }));
                    let tags: Vec<&str> = m.tags().collect();
                    // Topic, tags and priority go along; an expiry would
                    // hide the dead letter from readers that skip expired ones.
                    let record = Record {
                        payload: m.payload,
                        key: m.key,
                        key_is_text: m.key_is_text(),
                        headers: &headers,
                        topic: m.topic(),
                        queue_id: m.queue_id(),
                        tags: &tags,
                        expires_at: None,
                        priority: m.priority(),
                        // The dead-letter queue compresses as it is configured.
                        compress: Compress::Queue,
                        tombstone: m.is_tombstone(),
                    };
                    sink(&record)?;
                }
                Ok(None) => return Ok(()),
                Err(Error::NotFound { first, .. }) if seq < first => {}
                Err(Error::Compacted { .. }) => {
                    // Key compaction dropped it: nothing to dead-letter.
                    drop(readers);
                    if self.gone(seq, owned, word) {
                        self.advance_low();
                    }
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        let done = SlotWord {
            lap: lap_of(seq, st.window),
            state: end,
            deliveries: word.deliveries,
            deadline_ms: 0,
        }
        .encode();
        if st.cas(st.slot(seq), owned, done) {
            st.add(counter, 1);
            self.advance_low();
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

    /// The jobs handed out and not finished, oldest first, at most `limit`
    /// (Redis's `XPENDING`): leased ones with their holder and deadline,
    /// nacked or released ones with when they are ready again.
    pub fn pending(&self, limit: usize) -> Vec<PendingJob> {
        let st = &self.state;
        list_pending(
            Geometry::from(st),
            &|i| st.load(i),
            &self.now(),
            self.bound_ms(JobState::Leased),
            limit,
        )
    }

    /// Takes job `seq` over for this handle (Redis's `XCLAIM`): a new lease
    /// of a visibility timeout, one more delivery, the job handed out as
    /// `get` would. Only a job handed out before and not finished is
    /// claimed. Without `force`, only one a `get` could hand out again now
    /// (its lease ran out, its holder died, it was nacked and is ready, or
    /// released); with `force`, also one a live worker holds or a nacked
    /// one not ready yet (that worker's `ack`, `nack` and `extend` then
    /// return false). A job being dead-lettered is never claimed, nor one
    /// handed out 255 times (deliveries tell a handout's ticket from the
    /// next); `max_deliveries` does not stop a claim. `None` when the job is not
    /// claimable (finished, never handed out, or held and not `force`).
    pub fn claim(&self, seq: u64, force: bool) -> Result<Option<Job>> {
        self.check_open()?;
        let st = &self.state;
        let mut gone: HashMap<(u64, u32), bool> = HashMap::new();
        loop {
            let (low, cursor) = (st.load(W_LOW), st.load(W_CURSOR));
            let top = st.load(W_TOP).max(cursor);
            if seq < low || seq >= top.min(low.saturating_add(st.window)) {
                return Ok(None);
            }
            let (raw, word) = st.state_of(seq);
            let now = self.now();
            // A handout's ticket is told from the next by its deliveries,
            // which stop at 255: a job handed out that often is not claimed.
            let takes = word.deliveries < MAX_DELIVERIES
                && match word.state {
                    // At or past the cursor, a pending job was never handed out.
                    JobState::Pending => seq < cursor,
                    JobState::Leased | JobState::Delayed => {
                        force || self.redeliverable(seq, raw, word, &now, &mut gone)
                    }
                    _ => false,
                };
            if !takes {
                return Ok(None);
            }
            let mut readers = lock(&self.readers);
            let msg = match readers.random.read_at(seq) {
                Ok(Some(m)) => m,
                Ok(None) => return Ok(None),
                Err(Error::Compacted { .. }) => {
                    drop(readers);
                    self.gone(seq, raw, word);
                    self.advance_low();
                    return Ok(None);
                }
                Err(Error::NotFound { first, .. }) if seq < first => {
                    drop(readers);
                    self.gone_below.fetch_max(first, Ordering::Relaxed);
                    self.gone(seq, raw, word);
                    self.advance_low();
                    return Ok(None);
                }
                Err(e) => return Err(e),
            };
            if let Some(ticket) = self.lease(seq, raw, word, now.ms) {
                return Ok(Some(Job {
                    ticket,
                    message: msg.to_owned(),
                }));
            }
            // The slot changed meanwhile: look again.
        }
    }

    /// Gives job `seq` back at once, whoever holds it (SQS's visibility
    /// timeout set to 0): a leased job, or a nacked one still waiting, is
    /// ready for the next `get`, its deliveries kept (the next handout
    /// counts toward `max_deliveries`). The holder's `ack`, `nack` and
    /// `extend` then return false. False when the job is neither leased nor
    /// nacked and still delayed (finished, ready already, never handed out,
    /// or being dead-lettered).
    pub fn release(&self, seq: u64) -> Result<bool> {
        self.check_open()?;
        let st = &self.state;
        loop {
            let low = st.load(W_LOW);
            if seq < low || seq >= low.saturating_add(st.window) {
                return Ok(false);
            }
            let (raw, word) = st.state_of(seq);
            let now = self.now();
            let waiting = word.state == JobState::Delayed && {
                let load = |i: usize| st.load(i);
                let bound = self.bound_ms(JobState::Delayed);
                lease::deadline_passed(&load, st.version, st.slot(seq), raw, &word, &now, bound)
            };
            if !matches!(word.state, JobState::Leased | JobState::Delayed) || waiting {
                return Ok(false);
            }
            let new = SlotWord {
                state: JobState::Delayed,
                deadline_ms: now.ms,
                ..word
            }
            .encode();
            let i = st.slot(seq);
            if st.cas(i, raw, new) {
                if st.version >= 2 {
                    st.set_clock_boot(i, self.my_clock.boot);
                    st.store(i + 2, new);
                }
                st.add(W_HINT, 1);
                self.wake_waiters();
                return Ok(true);
            }
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

    /// The group's figures now (`next_seq`: the queue's; `oldest`: reads
    /// the timestamp of a message).
    pub fn info(&self, next_seq: u64) -> WorkQueueInfo {
        let st = &self.state;
        let mut info = summarize(
            &self.name,
            Geometry::from(st),
            &|i| st.load(i),
            next_seq,
            &self.now(),
            self.bound_ms(JobState::Leased),
        );
        if info.low < next_seq {
            let mut readers = lock(&self.readers);
            if let Ok(Some(m)) = readers.random.read_at(info.low) {
                info.oldest_timestamp = Some(m.timestamp);
            }
        }
        info
    }
}

fn gone_word(seq: u64, word: SlotWord, window: u64) -> u64 {
    SlotWord {
        lap: lap_of(seq, window),
        state: JobState::Gone,
        ..word
    }
    .encode()
}

/// The header fields `summarize` needs.
struct Geometry {
    window: u64,
    epoch_us: u64,
    version: u64,
}

impl From<&StateFile> for Geometry {
    fn from(st: &StateFile) -> Geometry {
        Geometry {
            window: st.window,
            epoch_us: st.epoch_us,
            version: st.version,
        }
    }
}

/// Counts the states of a ring read through `load` (word index → value);
/// `bound_ms` as for `lease::deadline_passed`.
fn summarize(
    name: &str,
    geometry: Geometry,
    load: &dyn Fn(usize) -> u64,
    next_seq: u64,
    now: &Now,
    bound_ms: u64,
) -> WorkQueueInfo {
    let Geometry {
        window,
        epoch_us,
        version,
    } = geometry;
    let (low, cursor) = (load(W_LOW), load(W_CURSOR));
    let top = load(W_TOP).max(cursor);
    let mut info = WorkQueueInfo {
        name: name.to_string(),
        low,
        cursor,
        window,
        acked: load(W_ACKED),
        dead_lettered: load(W_DEAD),
        expired: load(W_EXPIRED),
        redelivered: load(W_REDELIVERED),
        gone: load(W_GONE),
        rewound: load(W_REWOUND),
        created_at: epoch_us,
        pending: next_seq.saturating_sub(top),
        ..WorkQueueInfo::default()
    };
    for seq in low..top.min(low.saturating_add(window)) {
        let i = slot_word((seq & (window - 1)) as usize);
        let raw = load(i);
        let word = SlotWord::for_seq(raw, seq, window);
        let passed = || lease::deadline_passed(load, version, i, raw, &word, now, bound_ms);
        match word.state {
            JobState::Leased | JobState::DeadLettering if !passed() => info.in_flight += 1,
            s if !s.is_done() => info.pending += 1,
            _ => {}
        }
    }
    info
}

/// The jobs of a ring read through `load` that were handed out and are not
/// finished, oldest first, at most `limit`; `bound_ms` as for
/// `lease::deadline_passed`.
fn list_pending(
    geometry: Geometry,
    load: &dyn Fn(usize) -> u64,
    now: &Now,
    bound_ms: u64,
    limit: usize,
) -> Vec<PendingJob> {
    let Geometry {
        window,
        epoch_us,
        version,
    } = geometry;
    let (low, cursor) = (load(W_LOW), load(W_CURSOR));
    let top = load(W_TOP).max(cursor);
    let mine = pid_namespace();
    let mut out = Vec::new();
    for seq in low..top.min(low.saturating_add(window)) {
        if out.len() >= limit {
            break;
        }
        let i = slot_word((seq & (window - 1)) as usize);
        let raw = load(i);
        let word = SlotWord::for_seq(raw, seq, window);
        let fresh = word.state == JobState::Pending && (seq >= cursor || word.deliveries == 0);
        if word.state.is_done() || (fresh && seq >= cursor) {
            continue;
        }
        let (mut owner_pid, mut owner_alive) = (None, None);
        if word.state.is_owned() && load(i + 2) == raw {
            let owner = load(i + 1);
            let pid_ns = ClockWord::decode(load(i + 3)).pid_ns;
            owner_pid = Some(crate::storage::process::pid_of(owner));
            if pid_ns == 0 || (pid_ns == mine && mine != u32::MAX) {
                owner_alive = Some(!lease::owner_gone(owner, pid_ns));
            }
        }
        let (deadline_ms, overdue) = if word.state == JobState::Pending {
            (None, true)
        } else {
            let bound = match word.state {
                JobState::Delayed => MAX_TIMEOUT.as_millis() as u64,
                _ => bound_ms,
            };
            (
                Some(lease::deadline_wall_ms(
                    load,
                    version,
                    i,
                    raw,
                    &word,
                    now,
                    epoch_us / 1000,
                )),
                lease::deadline_passed(load, version, i, raw, &word, now, bound),
            )
        };
        out.push(PendingJob {
            seq,
            state: word.state,
            deliveries: word.deliveries,
            owner_pid,
            owner_alive,
            deadline_ms,
            overdue,
        });
    }
    out
}

/// Group `group`'s jobs handed out and not finished (see
/// [`WorkQueue::pending`]), read without opening a handle (any process,
/// read-only queues included), on `clock`; `None` when the group does not
/// exist. A lease whose clock this process cannot read is taken as running
/// for at most [`MAX_TIMEOUT`].
pub fn read_pending(
    path: &Path,
    clock: &dyn Clock,
    limit: usize,
) -> Result<Option<Vec<PendingJob>>> {
    let header = match read_header(path) {
        Ok(h) => h,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let map = match Mapping::open(path) {
        Ok(m) => m,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let now = Now::read(clock, header.version, header.epoch_us);
    let geometry = Geometry {
        window: header.window,
        epoch_us: header.epoch_us,
        version: header.version,
    };
    Ok(Some(list_pending(
        geometry,
        &|i| map.load_u64(i * 8),
        &now,
        MAX_TIMEOUT.as_millis() as u64,
        limit,
    )))
}

/// Every group of the queue at `base`, read without opening a handle (any
/// process, read-only queues included), on `clock`. Sorted by name.
pub fn list(base: &Path, next_seq: u64, clock: &dyn Clock) -> Result<Vec<WorkQueueInfo>> {
    let mut out = Vec::new();
    for (group, path) in state_files(base)? {
        let Some(info) = read_info(&group, &path, next_seq, clock)? else {
            continue;
        };
        out.push(info);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// One group's figures, read without opening a handle, on `clock`; `None`
/// when it does not exist. A lease whose clock this process cannot read
/// counts as in flight for at most [`MAX_TIMEOUT`] (the handles' visibility
/// timeout is not known here).
pub fn read_info(
    group: &str,
    path: &Path,
    next_seq: u64,
    clock: &dyn Clock,
) -> Result<Option<WorkQueueInfo>> {
    let header = match read_header(path) {
        Ok(h) => h,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let map = match Mapping::open(path) {
        Ok(m) => m,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let _ = group;
    let now = Now::read(clock, header.version, header.epoch_us);
    let geometry = Geometry {
        window: header.window,
        epoch_us: header.epoch_us,
        version: header.version,
    };
    Ok(Some(summarize(
        &header.name,
        geometry,
        &|i| map.load_u64(i * 8),
        next_seq,
        &now,
        MAX_TIMEOUT.as_millis() as u64,
    )))
}

fn state_files(base: &Path) -> Result<Vec<(String, PathBuf)>> {
    let dir = base.join(WORK_QUEUES_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read directory", &dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
        if let Some(group) = entry.file_name().to_str().and_then(group_of_file) {
            out.push((group, entry.path()));
        }
    }
    Ok(out)
}

/// Word `w` of the state file `f` (at `path`), read without mapping it.
fn read_word(f: &std::fs::File, path: &Path, w: usize) -> Result<u64> {
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, (w * 8) as u64)
        .map_err(|e| Error::io("read", path, e))?;
    Ok(u64::from_le_bytes(b))
}

/// The smallest low-water mark of the queue's work queues, if any: what
/// `protect_unconsumed` retention must keep.
pub fn min_low(base: &Path) -> Result<Option<u64>> {
    let mut min: Option<u64> = None;
    for (_, path) in state_files(base)? {
        let f = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        let low = read_word(&f, &path, W_LOW)?;
        min = Some(min.map_or(low, |m| m.min(low)));
    }
    Ok(min)
}

/// Checks every group's marks against the queue's end `end` when a writer
/// opens the queue, before anything is appended: a machine crash may have
/// lost the data's tail and kept a state file's header page, and once new
/// messages reach the old marks the state looks consistent and they would
/// be skipped. Groups ahead of the data are repaired as a handle's open does
/// ([`check_marks`]); the others are only read (no state file is mapped for
/// writing, so a full disk does not stop the writer). Returns how many
/// groups were moved back.
pub fn rewind_groups_past(base: &Path, end: u64) -> Result<usize> {
    let mut rewound = 0;
    for (_, path) in state_files(base)? {
        let f = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        if read_word(&f, &path, W_CURSOR)?.max(read_word(&f, &path, W_TOP)?) <= end {
            continue;
        }
        let header = read_header(&path)?;
        let words = WordFile::open_existing(&path, (file_len(header.window) / 8) as usize)?;
        let state = StateFile {
            words,
            window: header.window,
            epoch_us: header.epoch_us,
            version: header.version,
            path,
        };
        check_marks(&state, &|| Ok(end))?;
        rewound += 1;
    }
    Ok(rewound)
}

/// Removes group `group` (its state file). Returns whether it existed.
/// Handles still open keep working on the unlinked file until closed.
pub fn remove(base: &Path, group: &str) -> Result<bool> {
    validate_name(group)?;
    let path = state_path(base, group);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("remove", &path, e)),
    }
}
