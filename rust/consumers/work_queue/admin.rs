//! What tools and monitoring read: each group's figures, its pending jobs
//! (from a handle or straight from a state file, without a lock), and a job
//! claimed or released by hand.

use super::lease::{self, Now};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::work_queue::{
    slot_word, ClockWord, JobState, SlotWord, W_ACKED, W_CURSOR, W_DEAD, W_EXPIRED, W_GONE, W_HINT,
    W_LOW, W_REDELIVERED, W_REWOUND, W_TOP,
};
use crate::storage::mapped::Mapping;
use crate::storage::process::pid_namespace;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::*;

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

/// The header fields `summarize` needs.
pub(super) struct Geometry {
    pub(super) window: u64,
    pub(super) epoch_us: u64,
    pub(super) version: u64,
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

/// Counts how many sequences of `from..to` are holes (key compaction
/// dropped their messages: no jobs), as [`Catalog::holes_between`] does.
pub type HoleCount<'a> = &'a dyn Fn(u64, u64) -> u64;

/// Counts the states of a ring read through `load` (word index → value);
/// `bound_ms` as for `lease::deadline_passed`. The sequences past the ring's
/// top (never handed out) count as pending but for the holes `holes` finds
/// there.
pub(super) fn summarize(
    name: &str,
    geometry: Geometry,
    load: &dyn Fn(usize) -> u64,
    next_seq: u64,
    holes: HoleCount<'_>,
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
        pending: next_seq
            .saturating_sub(top)
            .saturating_sub(holes(top, next_seq)),
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
pub(super) fn list_pending(
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
/// process, read-only queues included), on `clock`; `holes` counts the
/// holes of a range (see [`summarize`]). Sorted by name.
pub fn list(
    base: &Path,
    next_seq: u64,
    holes: HoleCount<'_>,
    clock: &dyn Clock,
) -> Result<Vec<WorkQueueInfo>> {
    let mut out = Vec::new();
    for (group, path) in state_files(base)? {
        let Some(info) = read_info(&group, &path, next_seq, holes, clock)? else {
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
    holes: HoleCount<'_>,
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
        holes,
        &now,
        MAX_TIMEOUT.as_millis() as u64,
    )))
}

impl WorkQueue {
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
            let waiting =
                word.state == JobState::Delayed && self.deadline_passed(seq, raw, &word, &now);
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

    /// The group's figures now (`next_seq`: the queue's; `oldest`: reads
    /// the timestamp of a message).
    pub fn info(&self, next_seq: u64) -> WorkQueueInfo {
        let st = &self.state;
        let mut info = summarize(
            &self.name,
            Geometry::from(st),
            &|i| st.load(i),
            next_seq,
            &|from, to| self.catalog.holes_between(from, to),
            &self.now(),
            self.bound_ms(JobState::Leased),
        );
        if info.low < next_seq {
            // The first message at or after the mark: the scout steps over
            // holes key compaction left (`read_at` of one fails).
            let mut readers = lock(&self.readers);
            if let Ok(Some(m)) = super::dispatch::read_at(&mut readers.random, info.low) {
                if m.seq < next_seq {
                    info.oldest_timestamp = Some(m.timestamp);
                }
            }
        }
        info
    }
}
