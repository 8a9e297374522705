//! The I/O thread: the only writer of the queue's files in this process
//! (or, while it sleeps, an appender holding its state, see below).
//!
//! It takes commands off the channel, drains whatever else is queued (up to
//! a bound), writes every frame, and then syncs according to the flush mode.
//! Syncing once per drained group is the group commit: every `Sync` append
//! that arrived while the previous msync ran shares the next one.
//!
//! Its state lives in an [`IoCell`], a mutex the I/O thread holds whenever
//! it is not asleep. While it sleeps, an appender may take the lock and
//! write a pending bundle itself ([`IoThread::write_direct`], see `Handoff`):
//! whoever holds the lock is the one thread writing the files.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use std::sync::atomic::Ordering::Relaxed;

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};

use super::active::{ActiveFile, RollLimits, Sealed};
use super::append_lock::AppendLock;
use super::command::{BatchKeys, Bundle, Command};
use super::derived::DerivedBuilder;
use super::handoff::{Direct, DirectWriter, Handoff, Sleep};
use super::options::{FlushMode, WriterOptions};
use super::prefault::PrefaultThread;
use super::shared::WriterShared;
use crate::catalog::{Catalog, FileInfo};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::crypto::QueueKey;
use crate::format::frame::{self, frame_size};
use crate::format::header::DataHeader;
use crate::format::position;
use crate::format::record::{self, FLAG_KEY, RECORD_FIXED_LEN};
use crate::index::key_index::KeyIndexWriter;
use crate::storage::fsutil::sync_dir_chain;
use crate::storage::layout::FileId;
use crate::storage::wake::WakeFile;

mod catch_up;

/// In `Sync` mode, most commands handled before a sync even when more keep coming.
const DRAIN_LIMIT: usize = 4096;
/// How long the I/O thread polls channel and pending bundle before it
/// sleeps, when appenders write while it sleeps. Short: an append that finds
/// it asleep is written by the appender itself (no wake-up), so spinning
/// only pays while appends keep coming this close together, which it then
/// takes as they come.
pub const IDLE_SPIN: Duration = Duration::from_micros(20);
/// Otherwise (`Sync` mode, several writer processes: every append wakes a
/// sleeping I/O thread), polls before it sleeps: half spins, half yields.
const IDLE_SPINS: u32 = 2_000;
/// Several writer processes: a writer process keeps the append lock across
/// bundles (a lease: its appends get sequences at once, as a single
/// writer's do) until it goes idle, or another writer has waited for it and
/// it has held it this long…
pub const LEASE_QUANTUM: Duration = Duration::from_micros(500);
/// …or, waited for or not, this long (writers of older versions never say
/// they wait).
pub const LEASE_MAX: Duration = Duration::from_millis(20);
/// After letting go for a waiting writer, how long this one waits for it to
/// take the lock before competing again.
const LEASE_YIELD: Duration = Duration::from_micros(200);
/// Sealed files whose pages may still be dirty (async mode) kept for the next
/// flush; beyond this the oldest is synced at once.
pub(crate) const MAX_UNSYNCED_SEALED: usize = 4;

/// Where the writer resumes, as found by recovery.
#[derive(Debug)]
pub struct Resume {
    pub active: Option<ActiveFile>,
    pub last_id: Option<FileId>,
    pub next_file_number: u64,
    pub next_seq: u64,
    pub last_timestamp: u64,
}

impl Resume {
    /// A queue without data files.
    pub fn empty() -> Resume {
        Resume {
            active: None,
            last_id: None,
            next_file_number: 1,
            next_seq: 0,
            last_timestamp: 0,
        }
    }
}

/// Deletes old files after a roll (the queue's retention policy, set by the
/// queue, which sits above the writer): given the catalog and the time,
/// returns the data files deleted, or `None` when another pass held the
/// retention lock (that pass does the work; the I/O thread must not wait).
pub type AfterRoll = Box<dyn FnMut(&Catalog, u64) -> Result<Option<Vec<PathBuf>>> + Send>;

/// Reads the queue's data for the key index's catch-up after a writer
/// process died holding the append lock (see `catch_up`): reading is the
/// reader's, which sits beside the writer, so the queue (above both) passes
/// it in.
pub struct KeyData {
    /// Adds the keyed messages at or after a position to the key-index
    /// writer; returns how many.
    pub add_from: AddKeysFrom,
    /// Whether a range of positions holds a keyed message.
    pub has_keys: HasKeys,
}

/// See [`KeyData::add_from`].
pub type AddKeysFrom = Box<dyn FnMut(&mut KeyIndexWriter, u64) -> Result<u64> + Send>;
/// See [`KeyData::has_keys`].
pub type HasKeys = Box<dyn FnMut(std::ops::Range<u64>) -> Result<bool> + Send>;

/// The I/O thread's state, shared with appenders that write while it sleeps.
pub type IoCell = Mutex<IoThread>;

/// The I/O thread's state is what appenders write through while it sleeps
/// (they only see it as a [`DirectWriter`]).
impl DirectWriter for IoCell {
    fn write_pending(
        &self,
        first: u64,
        pending: &mut Bundle,
        spare: &mut dyn FnMut() -> Bundle,
    ) -> Option<Direct> {
        // Taken only when the I/O thread has let go of it to sleep (a
        // poisoned lock is declined too: the I/O thread reports that).
        let Ok(mut io) = self.try_lock() else {
            return None;
        };
        if !io.can_write_direct(pending) {
            return None;
        }
        let bundle = std::mem::replace(pending, spare());
        Some(io.write_direct(first, bundle))
    }

    fn sync_written(&self) -> Option<bool> {
        // As in `write_pending`: only while the I/O thread sleeps.
        let Ok(mut io) = self.try_lock() else {
            return None;
        };
        if io.failed.is_some() {
            return None;
        }
        Some(io.sync_direct())
    }
}

/// Where this process's lease on the append lock stands.
#[derive(Debug, Default)]
struct LeaseState {
    /// When the lock was taken.
    since: Option<Instant>,
    /// The hand-off numbers appends from this ticket on with the lease
    /// (`Handoff::grant_lease` succeeded), as `ticket + delta`.
    granted: Option<(u64, u64)>,
    /// Revoked: every ticket below this is written before the lock goes.
    end: Option<u64>,
    /// The lock was let go for a waiting writer: let it in first.
    yielded: bool,
}

/// What the I/O thread found while spinning for work.
enum Idle {
    Work,
    Sleep,
}

pub struct IoThread {
    base: PathBuf,
    config: WriterOptions,
    clock: Arc<dyn Clock>,
    rx: Receiver<Command>,
    handoff: Arc<Handoff>,
    shared: Arc<WriterShared>,
    /// The queue's wake-up word, bumped after frames are published.
    wake: Option<Arc<WakeFile>>,
    catalog: Arc<Catalog>,
    active: Option<ActiveFile>,
    last_id: Option<FileId>,
    next_file_number: u64,
    next_seq: u64,
    /// Messages this process has written, counted as the appenders number
    /// them: equal to `next_seq` with one writer process, from 0 with several.
    tickets: u64,
    /// Tickets whose frames are in the data file, counted as they are
    /// published (`tickets` moves per bundle): on a failure, every append
    /// below this may be stored although it was not done
    /// (`Error::MaybeStored`).
    frames_out: u64,
    /// Keys of staged frames, added to the key index once the frames are
    /// published (see [`IoThread::publish`]).
    pending_keys: PendingKeys,
    /// Several writer processes: the lock taken per bundle, and the key-index
    /// generation this process has seen (see `catch_up`).
    append_lock: Option<Arc<AppendLock>>,
    key_gen_seen: u64,
    /// The append lock, kept across bundles (see [`LEASE_QUANTUM`]).
    lease: Option<catch_up::Held>,
    lease_state: LeaseState,
    last_ts: u64,
    sealed_unsynced: Vec<(PathBuf, File)>,
    /// `Async` mode: directories that gained a file since the last sync,
    /// fsync'd by the next one (so a flushed message's file keeps its name).
    dirs_unsynced: Vec<PathBuf>,
    key_index: KeyIndexWriter,
    prefault: PrefaultThread,
    /// Writes the derived indexes (topics, fields) of each file sealed.
    derived: DerivedBuilder,
    roll: RollLimits,
    last_sync: Instant,
    after_roll: Option<AfterRoll>,
    /// Reads the data for the key index's catch-up (several writers).
    key_data: KeyData,
    /// A write an appender made while the I/O thread slept failed: the
    /// thread stops with this error when it wakes.
    failed: Option<Error>,
    /// Appenders write while this thread sleeps (see `run`).
    direct: bool,
    /// Reused buffer for a sealed record body (encryption at rest).
    sealed: Vec<u8>,
}

impl IoThread {
    #[expect(
        clippy::too_many_arguments,
        reason = "everything the thread owns, handed over once at start"
    )]
    pub fn new(
        config: WriterOptions,
        rx: Receiver<Command>,
        handoff: Arc<Handoff>,
        shared: Arc<WriterShared>,
        catalog: Arc<Catalog>,
        resume: Resume,
        key_index: KeyIndexWriter,
        append_lock: Option<Arc<AppendLock>>,
        after_roll: Option<AfterRoll>,
        key_data: KeyData,
    ) -> IoThread {
        let mut prefault = PrefaultThread::start();
        if let Some(a) = &resume.active {
            prefault.set_file(a);
        }
        let derived = DerivedBuilder::start(
            config.path.clone(),
            catalog.clone(),
            config.fields.clone(),
            config.build_indexes,
        );
        IoThread {
            roll: RollLimits::new(&config.roll),
            base: config.path.clone(),
            clock: config.clock.clone(),
            config,
            rx,
            handoff,
            wake: shared.wake(),
            shared,
            catalog,
            active: resume.active,
            last_id: resume.last_id,
            next_file_number: resume.next_file_number,
            next_seq: resume.next_seq,
            tickets: if append_lock.is_some() {
                0
            } else {
                resume.next_seq
            },
            frames_out: if append_lock.is_some() {
                0
            } else {
                resume.next_seq
            },
            pending_keys: PendingKeys::default(),
            append_lock,
            // Unlike any recorded generation: the first bundle reloads the index.
            key_gen_seen: u64::MAX,
            lease: None,
            lease_state: LeaseState::default(),
            last_ts: resume.last_timestamp,
            sealed_unsynced: Vec::new(),
            dirs_unsynced: Vec::new(),
            key_index,
            prefault,
            derived,
            last_sync: Instant::now(),
            after_roll,
            key_data,
            failed: None,
            direct: false,
            sealed: Vec::new(),
        }
    }

    /// Runs until `Shutdown` (or every sender is gone). On an error the
    /// writer is poisoned, waiters are woken, and the error is returned. A
    /// panic poisons it too, with [`Error::Internal`] (as fjall's journal
    /// poisons on unwind): nobody may wait forever for a dead thread.
    pub fn run(mut self) -> Result<()> {
        let shared = self.shared.clone();
        let handoff = self.handoff.clone();
        let rx = self.rx.clone();
        // Appenders may write while this thread sleeps, except when a sync
        // follows every write (`Sync`: the group commit is this thread's)
        // or the append lock is taken per bundle (several writer processes).
        let direct = self.config.flush != FlushMode::Sync && self.append_lock.is_none();
        self.direct = direct;
        let cell = Arc::new(Mutex::new(self));
        if direct {
            // Weak: once this thread ends and drops `cell`, nobody writes.
            let direct: std::sync::Weak<dyn DirectWriter> =
                Arc::downgrade(&cell) as std::sync::Weak<IoCell>;
            handoff.allow_direct(direct);
        }
        let _guard = PoisonOnUnwind(shared.clone());
        let served =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve(&cell, &rx, &handoff)));
        let result = served.unwrap_or_else(|payload| {
            Err(Error::Internal(format!(
                "the I/O thread panicked: {}",
                panic_message(payload.as_ref())
            )))
        });
        if let Err(e) = &result {
            let written = cell.lock().unwrap_or_else(|e| e.into_inner()).frames_out;
            shared.poison_written(Arc::new(e.clone()), written);
        }
        result
    }

    /// Spins a little for work (work usually follows work), then tells
    /// appenders it is going to sleep. `Idle::Sleep`: block on the channel.
    fn idle(&mut self, rx: &Receiver<Command>) -> Result<Idle> {
        // A waiting writer gets the lock now rather than after the spin.
        self.end_lease(false);
        let start = Instant::now();
        let mut round = 0u32;
        loop {
            if !rx.is_empty() || self.handoff.has_pending() {
                return Ok(Idle::Work);
            }
            round = round.wrapping_add(1);
            if self.direct {
                std::hint::spin_loop();
                if round.is_multiple_of(32) && start.elapsed() >= IDLE_SPIN {
                    break;
                }
            } else if round < IDLE_SPINS / 2 {
                std::hint::spin_loop();
            } else if round < IDLE_SPINS {
                std::thread::yield_now();
            } else {
                break;
            }
        }
        // Never asleep holding the append lock: the others would wait.
        if self.lease.is_some() && !self.end_lease(true) {
            return Ok(Idle::Work);
        }
        match self.handoff.prepare_sleep() {
            Sleep::Ok => Ok(Idle::Sleep),
            Sleep::Work(first, bundle) => {
                self.write_bundle(first, bundle)?;
                Ok(Idle::Work)
            }
            Sleep::Busy => Ok(Idle::Work),
        }
    }

    /// True when an appender may write `bundle` now, on its own thread: it
    /// fits the active file without a roll (rolls, with their file creation
    /// and retention, stay on the I/O thread).
    pub fn can_write_direct(&self, bundle: &Bundle) -> bool {
        // A batch (format 9) may need a roll to a version-9 file or for its
        // members' index room: the I/O thread writes it.
        if self.failed.is_some() || bundle.entries.is_empty() || has_batch(bundle) {
            return false;
        }
        let Some(a) = self.active.as_ref() else {
            return false;
        };
        if a.header.schema_version != self.schema_version() {
            return false; // a roll to a file of the current schema version first
        }
        let sealed = self.config.key.is_some();
        // Every frame of the bundle, one after the other, without a roll.
        let (mut pos, mut count) = (a.write_pos, a.count());
        for &(flags, len) in &bundle.entries {
            // Sealed, the record is longer and needs a version-8 file; a
            // tombstone is never sealed but counted as if (a roll at most early).
            let (flags, ext, len) = if sealed {
                (
                    flags | record::FLAG_EXTENSION,
                    record::EXT_ENCRYPTED,
                    len as usize + record::sealed_growth(flags),
                )
            } else {
                (flags, 0, len as usize)
            };
            let record_len = RECORD_FIXED_LEN + len;
            if a.must_roll_at(
                (pos, count),
                (flags, ext, record_len),
                self.last_ts,
                &self.roll,
            ) {
                return false;
            }
            pos += frame_size(record_len);
            count += 1;
        }
        true
    }

    /// `Command::Flush` on an appender's thread while the I/O thread sleeps
    /// (the caller holds the [`IoCell`] lock): syncs everything written and
    /// raises the durable mark. False: the sync failed and poisoned the
    /// writer, as it does on the I/O thread, which then stops when it wakes.
    pub fn sync_direct(&mut self) -> bool {
        let synced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.sync_all()));
        let err = match synced {
            Ok(Ok(())) => return true,
            Ok(Err(e)) => e,
            Err(payload) => Error::Internal(format!(
                "an appender syncing for the I/O thread panicked: {}",
                panic_message(payload.as_ref())
            )),
        };
        self.shared
            .poison_written(Arc::new(err.clone()), self.frames_out);
        self.failed = Some(err);
        false
    }

    /// Writes a bundle on an appender's thread while the I/O thread sleeps
    /// (the caller holds the [`IoCell`] lock). A failure poisons the writer,
    /// as it does on the I/O thread, which then stops when it wakes.
    pub fn write_direct(&mut self, first: u64, bundle: Bundle) -> Direct {
        let wrote = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.write_bundle(first, bundle)
        }));
        let err = match wrote {
            Ok(Ok(())) => {
                self.shared.counters.appender_writes.fetch_add(1, Relaxed);
                return if self.sync_due(false) {
                    Direct::SyncDue
                } else {
                    Direct::Written
                };
            }
            Ok(Err(e)) => e,
            Err(payload) => Error::Internal(format!(
                "an appender writing for the I/O thread panicked: {}",
                panic_message(payload.as_ref())
            )),
        };
        self.shared
            .poison_written(Arc::new(err.clone()), self.frames_out);
        self.failed = Some(err);
        Direct::Failed
    }

    /// Several writer processes, holding the append lock: grants the
    /// hand-off the lease when it does not have it yet, and lets the lock go
    /// when it is due (`idle`, or held [`LEASE_QUANTUM`] while another
    /// writer waits, or [`LEASE_MAX`]). Letting go first revokes the lease,
    /// then waits until every ticket numbered under it is written. True
    /// when the lock is not held (any more).
    fn end_lease(&mut self, idle: bool) -> bool {
        let (Some(lock), Some(_)) = (self.append_lock.as_ref(), self.lease.as_ref()) else {
            return true;
        };
        if self.lease_state.end.is_none() {
            let held = self
                .lease_state
                .since
                .map_or(Duration::ZERO, |t| t.elapsed());
            let wanted = lock.wanted();
            let due = idle || (wanted && held >= LEASE_QUANTUM) || held >= LEASE_MAX;
            if !due {
                if self.lease_state.granted.is_none() {
                    let delta = self.next_seq - self.tickets;
                    self.lease_state.granted =
                        self.handoff.grant_lease(delta).map(|from| (from, delta));
                }
                return false;
            }
            // An appender holds the hand-off's lock for a moment (or, blocked
            // on a full channel, until this thread drains it): when idle,
            // try for a little while, else again later.
            let start = Instant::now();
            let end = loop {
                match self.handoff.revoke_lease() {
                    Some(end) => break end,
                    None if idle && start.elapsed() < Duration::from_millis(1) => {
                        std::thread::yield_now()
                    }
                    None => return false,
                }
            };
            self.lease_state.end = Some(end);
            self.lease_state.yielded = wanted;
        }
        if self.lease_state.end.is_some_and(|end| self.tickets < end) {
            return false; // numbered under the lease, not written yet
        }
        let tail = self.tail();
        if let Some(held) = self.lease.take() {
            held.release(tail);
        }
        self.lease_state.since = None;
        self.lease_state.granted = None;
        self.lease_state.end = None;
        true
    }

    fn handle(&mut self, cmd: Command) -> Result<()> {
        match cmd {
            Command::Write {
                first_ticket,
                bundle,
            } => self.write_bundle(first_ticket, bundle),
            Command::Flush => {
                // Several writer processes: a flush also lets the append
                // lock go (recording the tail), before the sync that lets
                // the caller return: a process that appends and flushes in
                // turn takes it once per flush, whatever the timing, and
                // `append.lock` holds the same bytes run after run.
                self.end_lease(true);
                self.sync_all()
            }
            Command::Roll(done) => {
                let outcome = self.roll_now();
                let _ = done.send(outcome.clone());
                outcome
            }
            Command::Shutdown => Ok(()),
        }
    }

    /// `Command::Roll`: seals the active file when it holds a message, then
    /// syncs everything. With several writer processes the active file is
    /// shared and rolled under the append lock by whoever fills it
    /// (`Appender::roll` refuses before asking).
    fn roll_now(&mut self) -> Result<()> {
        if self.append_lock.is_none() && self.active.as_ref().is_some_and(|a| a.count() > 0) {
            let ts = self.timestamp();
            self.roll(ts)?;
        }
        self.sync_all()
    }

    fn idle_timeout(&self) -> Duration {
        match self.config.flush {
            FlushMode::Batch { interval, .. } if !interval.is_zero() => {
                interval.min(Duration::from_millis(100))
            }
            _ => Duration::from_millis(100),
        }
    }

    fn expect_ticket(&self, ticket: u64) -> Result<()> {
        if ticket != self.tickets {
            return Err(Error::Corrupted {
                path: self.base.clone(),
                offset: 0,
                seq: Some(ticket),
                reason: format!(
                    "internal: appender sent ticket {ticket}, writer expected {}",
                    self.tickets
                ),
            });
        }
        Ok(())
    }

    /// The schema version new rows are written in (0: an untyped queue).
    /// One version per file: an active file of another version (the queue
    /// evolved, or was given its schema while empty) is rolled before the
    /// next frame.
    fn schema_version(&self) -> u32 {
        self.config.typed.as_ref().map_or(0, |t| t.schema.version)
    }

    /// Timestamps never go backwards within a queue, even if the clock does.
    fn timestamp(&mut self) -> u64 {
        self.last_ts = self.clock.now_micros().max(self.last_ts);
        self.last_ts
    }

    fn write_bundle(&mut self, first_ticket: u64, mut bundle: Bundle) -> Result<()> {
        self.expect_ticket(first_ticket)?;
        // Several writer processes: one of them at a time, holding the
        // append lock across bundles while it has work (a lease).
        if let Some(lock) = self.append_lock.clone() {
            if self.lease.is_none() {
                if bundle.slot.is_none() {
                    // Numbered under a lease, which is kept until written.
                    return Err(Error::Internal(format!(
                        "ticket {first_ticket} was numbered under a lease no longer held"
                    )));
                }
                if std::mem::take(&mut self.lease_state.yielded) {
                    lock.let_others_in(LEASE_YIELD);
                }
                let held = self.lock_tail(lock)?;
                self.lease = Some(held);
                self.lease_state = LeaseState {
                    since: Some(Instant::now()),
                    ..LeaseState::default()
                };
            }
        }
        let first_seq = self.next_seq;
        if let Some((from, delta)) = self.lease_state.granted {
            // Appenders were told these sequences: never write elsewhere.
            if first_ticket >= from && first_ticket + delta != first_seq {
                return Err(Error::Internal(format!(
                    "ticket {first_ticket} was numbered {} under the lease but falls at {first_seq}",
                    first_ticket + delta
                )));
            }
        }
        let ts = match bundle.built {
            // Built by the appender: its time, unless older than the last.
            Some(t) => {
                self.last_ts = self.last_ts.max(t);
                self.last_ts
            }
            None => self.timestamp(),
        };
        // A bundle's frames are built into the active file's stage and
        // published together (or in `ActiveFile::stage_full` steps); one
        // that fails part-way leaves none of its staged frames behind.
        let (bytes, keys) = match self
            .write_entries(ts, &mut bundle)
            .and_then(|done| self.publish().map(|()| done))
        {
            Ok(done) => done,
            Err(e) => {
                if let Some(a) = self.active.as_mut() {
                    a.drop_staged();
                }
                self.pending_keys.clear();
                return Err(e);
            }
        };
        if self.lease.is_some() {
            self.key_gen_seen = self.key_gen_seen.wrapping_add(u64::from(keys));
        }
        if let Some(slot) = &bundle.slot {
            slot.set_first_seq(first_seq);
        }
        self.tickets += bundle.seqs();
        self.shared.set_written(self.tickets);
        if self.lease.is_some() {
            self.end_lease(false);
        }
        // Every frame of the batch is published: wake followers sleeping on
        // the word in any process (no system call when nobody sleeps).
        if let Some(w) = &self.wake {
            w.bump();
        }
        self.shared.counters.bytes_written.fetch_add(bytes, Relaxed);
        if let Some(a) = &self.active {
            self.prefault.advance(a.write_pos);
        }
        self.handoff.recycle(bundle);
        Ok(())
    }

    /// Writes (stages) every message of `bundle`; returns the bytes of its
    /// records and whether any had a key.
    fn write_entries(&mut self, ts: u64, bundle: &mut Bundle) -> Result<(u64, bool)> {
        if let Some(built) = bundle.built {
            return self
                .write_built(ts, built != ts, bundle)
                .map(|b| (b, false));
        }
        let mut at = 0usize;
        let mut bytes = 0u64;
        let mut keys = false;
        // Once per bundle: cloning the key's `Arc` (two atomic
        // read-modify-writes) per message cost as much as a copy.
        let key = self.config.key.clone();
        let mut batch_keys = BatchKeys::default();
        for &(flags, len) in &bundle.entries {
            let body = &mut bundle.bodies[at..at + len as usize];
            at += len as usize;
            if record::body_is_batch(flags, body) {
                let members = batch_keys.next(&bundle.batch_keys);
                keys |= !members.is_empty();
                self.write_batch(ts, body, &members)?;
            } else {
                self.write(key.as_deref(), flags, ts, body)?;
            }
            keys |= flags & FLAG_KEY != 0;
            bytes += (RECORD_FIXED_LEN + body.len()) as u64;
        }
        Ok((bytes, keys))
    }

    /// Writes (stages) the frames an appender built (plain records, no
    /// key: see `Appender::append_batch`), stamped again with `ts` first
    /// when `restamp`; returns the bytes of their records.
    fn write_built(&mut self, ts: u64, restamp: bool, bundle: &mut Bundle) -> Result<u64> {
        let mut at = 0usize;
        let mut bytes = 0u64;
        for &(flags, len) in &bundle.entries {
            let record_len = RECORD_FIXED_LEN + len as usize;
            let built = &mut bundle.bodies[at..at + frame_size(record_len)];
            at += built.len();
            if restamp {
                frame::restamp(built, ts);
            }
            self.roll_if_due(flags, 0, record_len, ts)?;
            let active = self.active.as_mut().expect("roll leaves an active file");
            active.allocate_for(record_len)?;
            active.write_built(built, record_len, flags, ts);
            self.next_seq += 1;
            if active.stage_full() {
                self.publish()?;
            }
            bytes += record_len as u64;
        }
        Ok(bytes)
    }

    /// Publishes the active file's staged frames
    /// ([`ActiveFile::publish`]), counts them written, then adds their
    /// keys to the key index: it never gets ahead of the data.
    fn publish(&mut self) -> Result<()> {
        if let Some(a) = self.active.as_mut() {
            a.publish(&mut self.frames_out)?;
        }
        self.pending_keys.add_to(&mut self.key_index)
    }

    /// Writes one message of a bundle; `key` is the queue's encryption key
    /// (`Catalog::key`, looked up once per bundle).
    fn write(&mut self, key: Option<&QueueKey>, flags: u8, ts: u64, body: &[u8]) -> Result<()> {
        let Some(key) = key else {
            // Appenders write no extension bit newer than format 7, whose
            // extension flag already asks for a version-7 file.
            return self.write_record(flags, 0, ts, body);
        };
        // Encryption at rest: sealed here, where the sequence is known in
        // every mode (with several writer processes, only under the append
        // lock), since it is bound into the associated data.
        let mut sealed = std::mem::take(&mut self.sealed);
        sealed.clear();
        let (flags, ext) = record::seal_body(key, self.next_seq, flags, ts, body, &mut sealed);
        let wrote = self.write_record(flags, ext, ts, &sealed);
        self.sealed = sealed;
        wrote
    }

    /// Writes a batch record (format 9) an appender built: its first
    /// sequence goes in here, where it is known, then one frame with the
    /// ordinary write path, then the members' other sequences are counted
    /// and indexed (each dense entry points at the batch frame), and the
    /// keys of its keyed members (`keys`, in member order, handed along by
    /// the appender: this thread has only the compressed block) go into the
    /// key index, each at the batch frame's position.
    fn write_batch(&mut self, ts: u64, body: &mut [u8], keys: &[&[u8]]) -> Result<()> {
        let count = record::seqs_of_body_batch(body);
        if self
            .active
            .as_ref()
            .is_some_and(|a| a.count() > 0 && !a.has_room_for_seqs(count))
        {
            self.roll(ts)?; // its indexes have no room for every member
        }
        if !keys.is_empty() {
            // As for a keyed record: a key-index file that cannot be made
            // fails the append before the frame is written. (Keys beyond
            // what the current index file holds start the next one after
            // the frame; if that fails, the writer is poisoned and the next
            // open indexes the batch from the data.)
            self.key_index.reserve(ts)?;
        }
        record::set_batch_first_seq(body, self.next_seq);
        // A row batch's extension byte (format 12) asks for a version-12 file.
        let ext = body[0];
        self.write_record(record::FLAG_EXTENSION, ext, ts, body)?;
        // Its members' index entries point at the frame: published first.
        self.publish()?;
        let active = self
            .active
            .as_mut()
            .expect("write_record leaves an active file");
        let at = active.write_pos - crate::format::frame::frame_size(RECORD_FIXED_LEN + body.len());
        active.add_batch_members(at, count - 1, ts)?;
        let pos = position::encode(active.header.file_number, at as u64);
        self.next_seq += count - 1;
        self.frames_out += count - 1;
        // Added after the frame: the key index never gets ahead of the
        // data. Every keyed member gets an item, all at the frame's
        // position (FORMAT.md, "Key index files": positions never decrease).
        for key in keys {
            match &self.config.key {
                Some(k) => self.key_index.add(&k.index_key(key), pos, ts)?,
                None => self.key_index.add(key, pos, ts)?,
            }
        }
        Ok(())
    }

    fn write_record(&mut self, flags: u8, ext: u8, ts: u64, body: &[u8]) -> Result<()> {
        let record_len = RECORD_FIXED_LEN + body.len();
        self.roll_if_due(flags, ext, record_len, ts)?;
        let keyed = flags & FLAG_KEY != 0;
        if keyed {
            // Whatever can fail in the key index (creating or unsealing a
            // file) happens before the frame is written: an append that
            // fails here is not stored. (Keys staged before it that fill
            // the current index file start the next one when they are
            // added; if that fails, the writer is poisoned and the next
            // open indexes those frames from the data, as for a batch.)
            self.key_index.reserve(ts)?;
        }
        let active = self.active.as_mut().expect("roll leaves an active file");
        active.allocate_for(record_len)?;
        let offset = active.write_frame(flags, ts, body);
        self.next_seq += 1;
        if keyed {
            let key = record::key_of_body(body).expect("appender encoded the key");
            let pos = position::encode(active.header.file_number, offset as u64);
            match &self.config.key {
                // The index holds keyed hashes: it leaks no key hashes.
                Some(k) => self.pending_keys.push(&k.index_key(key), pos, ts),
                None => self.pending_keys.push(key, pos, ts),
            }
        }
        if active.stage_full() {
            self.publish()?;
        }
        Ok(())
    }

    /// Rolls when a frame with a `record_len`-byte record (`flags`, `ext`)
    /// written at `ts` must go to a new file (or there is no active file).
    fn roll_if_due(&mut self, flags: u8, ext: u8, record_len: usize, ts: u64) -> Result<()> {
        let roll = match &self.active {
            None => true,
            Some(a) => {
                a.must_roll(flags, ext, record_len, ts, &self.roll)
                    || a.header.schema_version != self.schema_version()
            }
        };
        if roll {
            self.roll(ts)?;
        }
        Ok(())
    }

    /// Seals the active file (end-of-file marker first), then creates the next.
    fn roll(&mut self, ts: u64) -> Result<()> {
        self.publish()?; // what the bundle staged so far goes in the old file
        let durable = self.config.flush != FlushMode::Async;
        if let Some(old) = self.active.take() {
            // The prefault thread lets go of the file before it is trimmed.
            self.prefault.clear();
            let header = old.header;
            if let Some(sealed) = old.seal(durable)? {
                self.keep_unsynced(sealed)?;
            }
            if let Some(id) = self.last_id {
                self.derived.submit(FileInfo { id, header });
            }
            self.shared
                .counters
                .rolls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let id = match self.last_id {
            Some(prev) => prev.successor(ts),
            None => FileId::first_of_day(ts),
        };
        let header = DataHeader {
            first_seq: self.next_seq,
            created_us: ts,
            file_number: self.next_file_number,
            file_size: self.config.file_size,
            index_interval: self.config.index_interval,
            version: crate::format::FORMAT_VERSION,
            schema_version: self.schema_version(),
        };
        let schema = self.config.typed.as_ref().map(|t| &t.schema);
        let active = ActiveFile::create(&self.base, id, header, schema, durable)?;
        let dir = id.parent(&self.base);
        if !durable && !self.dirs_unsynced.contains(&dir) {
            self.dirs_unsynced.push(dir);
        }
        self.prefault.set_file(&active);
        if let Some(t) = &self.config.typed {
            self.catalog.add_typed(header.file_number, t.clone());
        }
        self.catalog.add(id, header);
        self.last_id = Some(id);
        self.next_file_number += 1;
        self.active = Some(active);
        self.apply_retention(ts);
        // Unmap key-index files retention deleted (here or in another process).
        self.key_index.forget_deleted();
        Ok(())
    }

    /// Remembers a file this process leaves with pages possibly dirty, for
    /// the next flush; beyond `MAX_UNSYNCED_SEALED` the oldest is synced now.
    pub(super) fn keep_unsynced(&mut self, old: Sealed) -> Result<()> {
        self.sealed_unsynced.push((old.path, old.file));
        if self.sealed_unsynced.len() > MAX_UNSYNCED_SEALED {
            let (path, f) = self.sealed_unsynced.remove(0);
            if !is_unlinked(&f) {
                f.sync_data()
                    .map_err(|e| Error::io("fdatasync", &path, e))?;
                // Its name too: recovery checks only the newest files for
                // missing ones (see recovery::cut_at_first_gap).
                let dir = path.parent().unwrap_or(&self.base);
                sync_dir_chain(&self.base, dir)?;
            }
        }
        Ok(())
    }

    /// Deletes old files per the retention policy, right after a roll (the
    /// only time a file becomes deletable). A failure does not poison the
    /// writer: nothing written is at risk; it is counted, and the next
    /// roll or `Queue::apply_retention` tries again and reports it.
    fn apply_retention(&mut self, now_us: u64) {
        let Some(after_roll) = self.after_roll.as_mut() else {
            return;
        };
        match after_roll(&self.catalog, now_us) {
            Ok(Some(deleted_files)) if !deleted_files.is_empty() => {
                // Don't keep deleted files' space pinned by our dup'd fds.
                self.sealed_unsynced
                    .retain(|(path, _)| !deleted_files.contains(path));
                self.shared
                    .counters
                    .retention_deleted
                    .fetch_add(deleted_files.len() as u64, Relaxed);
            }
            Ok(_) => {}
            Err(_) => {
                self.shared.counters.retention_errors.fetch_add(1, Relaxed);
            }
        }
    }

    /// Syncs when the flush mode says so. `Sync` syncs once per drained
    /// group (`group_done`): every append that waited meanwhile shares it.
    fn sync_if_due(&mut self, group_done: bool) -> Result<()> {
        if self.sync_due(group_done) {
            self.sync_all()?;
        }
        Ok(())
    }

    fn sync_due(&self, group_done: bool) -> bool {
        match self.config.flush {
            FlushMode::Async => false,
            FlushMode::Sync => group_done && self.shared.durable() < self.tickets,
            FlushMode::Batch { bytes, interval } => {
                let pending = self.active.as_ref().map_or(0, |a| a.unsynced()) as u64;
                (pending > 0 || !self.sealed_unsynced.is_empty())
                    && ((bytes > 0 && pending >= bytes) || self.last_sync.elapsed() >= interval)
            }
        }
    }

    /// msyncs the active file and any sealed file still dirty, then raises
    /// the durable mark to everything written.
    fn sync_all(&mut self) -> Result<()> {
        for (path, f) in self.sealed_unsynced.drain(..) {
            if is_unlinked(&f) {
                continue; // deleted by retention elsewhere: nothing to keep
            }
            f.sync_data().map_err(|e| Error::io("fdatasync", path, e))?;
        }
        if let Some(a) = self.active.as_mut() {
            if a.unsynced() > 0 || self.shared.durable() < self.tickets {
                // Only the data: recovery rebuilds sparse-index entries from
                // it, so syncing the index too would double the disk writes
                // of every group commit for nothing.
                a.sync()?;
                self.shared
                    .counters
                    .syncs
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        for dir in self.dirs_unsynced.drain(..) {
            sync_dir_chain(&self.base, &dir)?;
        }
        self.last_sync = Instant::now();
        self.shared
            .counters
            .durable_seq
            .store(self.next_seq, Relaxed);
        self.shared.set_durable(self.tickets);
        Ok(())
    }

    fn shutdown(&mut self) -> Result<()> {
        // Whatever is still queued was sent before Shutdown: write it too.
        while let Ok(cmd) = self.rx.try_recv() {
            self.handle(cmd)?;
        }
        if let Some((first, bundle)) = self.handoff.take_pending() {
            self.write_bundle(first, bundle)?;
        }
        self.sync_all()?;
        // The derived indexes of the files sealed here are written before close returns.
        self.derived.finish();
        // Several writer processes: the index and the tail are shared; bring
        // them level under the lock so the last to close records them right.
        let held = match (self.lease.take(), self.append_lock.clone()) {
            (Some(held), _) => Some(held),
            (None, Some(lock)) => Some(self.lock_tail(lock)?),
            (None, None) => None,
        };
        self.key_index.close()?;
        if self.append_lock.is_none() {
            // One writer: nobody writes past our tail, so what is allocated
            // past it can go.
            if let Some(a) = &self.active {
                self.prefault.clear();
                a.release_unused();
            }
        }
        let upto = match &self.active {
            Some(a) => a.end_position(),
            None => position::encode(self.next_file_number, 0),
        };
        self.shared
            .set_indexed_upto(upto, self.key_index.last_position());
        if let Some(held) = held {
            // close sealed the index file others append to: they must reload.
            self.key_gen_seen = self.key_gen_seen.wrapping_add(1);
            held.release(self.tail());
        }
        Ok(())
    }
}

/// The I/O thread's loop: holds the [`IoCell`] lock except while asleep.
fn serve(cell: &IoCell, rx: &Receiver<Command>, handoff: &Handoff) -> Result<()> {
    let mut io = lock(cell)?;
    let mut since_sync = 0usize;
    loop {
        // Work first: queued commands, then whatever appenders have
        // pending. Only when both are empty does the thread wait.
        match rx.try_recv() {
            Ok(Command::Shutdown) => return io.shutdown(),
            Ok(cmd) => {
                io.handle(cmd)?;
                since_sync += 1;
            }
            Err(TryRecvError::Disconnected) => return io.shutdown(),
            Err(TryRecvError::Empty) => match handoff.take_pending() {
                Some((first, bundle)) => {
                    io.write_bundle(first, bundle)?;
                    since_sync += 1;
                }
                None => {
                    io.sync_if_due(true)?;
                    since_sync = 0;
                    if let Idle::Work = io.idle(rx)? {
                        continue;
                    }
                    // Asleep: appenders may take the lock and write.
                    let timeout = io.idle_timeout();
                    drop(io);
                    let got = rx.recv_timeout(timeout);
                    handoff.woke();
                    io = lock(cell)?;
                    if let Some(e) = io.failed.take() {
                        return Err(e);
                    }
                    match got {
                        Ok(Command::Shutdown) | Err(RecvTimeoutError::Disconnected) => {
                            return io.shutdown()
                        }
                        Ok(cmd) => {
                            io.handle(cmd)?;
                            since_sync += 1;
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                    }
                    continue;
                }
            },
        }
        if since_sync >= DRAIN_LIMIT {
            io.sync_if_due(true)?;
            since_sync = 0;
        } else {
            io.sync_if_due(false)?;
        }
    }
}

/// Takes the I/O thread's state. Poisoned only by a panic that escaped an
/// appender's write (they catch theirs): stop as after a panic here.
/// True when `bundle` holds a batch record (format 9).
fn has_batch(bundle: &Bundle) -> bool {
    let mut at = 0usize;
    bundle.entries.iter().any(|&(flags, len)| {
        let body = &bundle.bodies[at..at + len as usize];
        at += len as usize;
        record::body_is_batch(flags, body)
    })
}

fn lock(cell: &IoCell) -> Result<MutexGuard<'_, IoThread>> {
    cell.lock()
        .map_err(|_| Error::Internal("a thread panicked while writing".into()))
}

/// Poisons the writer if the I/O thread unwinds past it (a panic that
/// `run` did not catch, such as one while dropping the thread's state).
struct PoisonOnUnwind(Arc<WriterShared>);

impl Drop for PoisonOnUnwind {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0
                .poison(Arc::new(Error::Internal("the I/O thread panicked".into())));
        }
    }
}

/// The text of a panic payload (`panic!` with a literal or a format).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// True when `f`'s file has no name left (retention in another process or
/// thread deleted it): syncing it is pointless and holding it pins its space.
fn is_unlinked(f: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    f.metadata().is_ok_and(|m| m.nlink() == 0)
}

/// Keys of staged frames, waiting for them to be published: `(key bytes
/// in `bytes`, position, timestamp)`, in frame order.
#[derive(Debug, Default)]
struct PendingKeys {
    bytes: Vec<u8>,
    items: Vec<(std::ops::Range<usize>, u64, u64)>,
}

impl PendingKeys {
    fn push(&mut self, key: &[u8], position: u64, ts: u64) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.items.push((start..self.bytes.len(), position, ts));
    }

    fn add_to(&mut self, index: &mut KeyIndexWriter) -> Result<()> {
        for (key, position, ts) in self.items.drain(..) {
            index.add(&self.bytes[key], position, ts)?;
        }
        self.bytes.clear();
        Ok(())
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.items.clear();
    }
}
