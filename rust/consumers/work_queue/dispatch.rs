//! Handing out jobs: the next new message (in order, by priority or by
//! key), redeliveries found by scanning the ring, and the lease taken on
//! each.

use super::lease::{self, Now};
use crate::error::{Error, Result};
use crate::format::work_queue::{
    lap_of, ClockWord, JobState, SlotWord, W_CURSOR, W_GONE, W_HINT, W_LOW, W_REDELIVERED, W_TOP,
};
use crate::reader::tailer::{Message, Tailer};
use crate::reader::wait::{Sleeper, Slept, WaitStrategy, Waiter, SLEEP_AT_MOST};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::*;

/// The per-handle readers: one follows the cursor (new jobs), one seeks
/// (redeliveries, dead letters); and, for a priority group, what the scout
/// read ahead.
pub(super) struct Readers {
    pub(super) scout: Tailer,
    pub(super) random: Tailer,
    pub(super) ahead: Lookahead,
    pub(super) keys: KeysAhead,
}

/// The keys an ordered group's handle has read over the ring: `seq -> key`
/// for every sequence from the low-water mark to `next` (holes and
/// messages without a key: `None`).
#[derive(Debug, Default)]
pub(super) struct KeysAhead {
    pub(super) next: u64,
    pub(super) of: BTreeMap<u64, Option<Vec<u8>>>,
}

/// Jobs a priority group's handle has read ahead of the cursor and not seen
/// handed out yet.
#[derive(Debug, Default)]
pub(super) struct Lookahead {
    /// The next sequence to read.
    pub(super) next: u64,
    /// `(255 - priority, seq)`: the first is the job to hand out.
    pub(super) by_rank: BTreeSet<(u8, u64)>,
    /// `seq -> (priority, timestamp)`: the first is the oldest.
    pub(super) by_seq: BTreeMap<u64, (u8, u64)>,
}

/// What a scan did with the pending job it read ([`WorkQueue::take`]).
enum Took<R> {
    /// Its message had expired (at `now_ms`): to be expired.
    Expired { now_ms: u64 },
    /// Leased to this handle; `f`'s result.
    Leased(Ticket, R),
    /// Its slot changed meanwhile (another handle took it).
    Lost,
}

impl Lookahead {
    pub(super) fn insert(&mut self, seq: u64, priority: u8, timestamp: u64) {
        self.by_rank.insert((u8::MAX - priority, seq));
        self.by_seq.insert(seq, (priority, timestamp));
    }

    pub(super) fn remove(&mut self, seq: u64) {
        if let Some((priority, _)) = self.by_seq.remove(&seq) {
            self.by_rank.remove(&(u8::MAX - priority, seq));
        }
    }

    /// Forgets every job below `cursor` (handed out at least once).
    pub(super) fn forget_below(&mut self, cursor: u64) {
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
    pub(super) fn choose(&self, now_us: u64, max_wait: Option<Duration>) -> Option<u64> {
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
pub(super) const READ_AHEAD: usize = 4096;

pub(super) struct ScanState {
    /// When the next periodic scan is due (real time: dead owners).
    pub(super) next_at: Instant,
    /// The nack counter at the last scan.
    pub(super) hint: u64,
    /// The earliest deadline (ms since the epoch, queue clock) the last
    /// complete scan passed over: a scan is due once it has come.
    pub(super) next_deadline_ms: u64,
}

/// The message at `seq` or the first after it (holes), read by `scout`,
/// which seeks only when it is not there already (read-ahead moves on).
pub(super) fn read_at(scout: &mut Tailer, seq: u64) -> Result<Option<Message<'_>>> {
    if scout.next_seq() != seq {
        scout.seek(seq)?;
    }
    scout.read_next()
}

impl WorkQueue {
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
    pub(super) fn try_get<R>(
        &self,
        f: &mut dyn FnMut(&Message<'_>) -> R,
    ) -> Result<Option<(Ticket, R)>> {
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
    pub(super) fn scan_due(&self) -> bool {
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
    pub(super) fn scanned(&self, earliest: Option<u64>) {
        lock(&self.scan).next_deadline_ms = earliest.unwrap_or(0);
    }

    /// Claims the job at the dispatch cursor, if it is published and the
    /// ring has room.
    pub(super) fn next_new<R>(
        &self,
        f: &mut dyn FnMut(&Message<'_>) -> R,
    ) -> Result<Option<(Ticket, R)>> {
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
    pub(super) fn holes(&self, from: u64, to: u64) {
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
    pub(super) fn gone(&self, seq: u64, raw: u64, word: SlotWord) -> bool {
        let st = &self.state;
        let done = st.cas(st.slot(seq), raw, gone_word(seq, word, st.window));
        if done {
            st.add(W_GONE, 1);
        }
        done
    }

    pub(super) fn is_expired(&self, m: &Message<'_>) -> bool {
        m.expires_at().is_some_and(|t| t <= self.clock.now_micros())
    }

    /// A priority group's next job: the best one read ahead (see
    /// [`Lookahead::choose`]) whose slot is still pending, claimed ahead of
    /// the cursor; the cursor then moves over every slot claimed.
    pub(super) fn next_by_priority<R>(
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
                        r.ahead.next = self.removed_below(cursor, first, next);
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
            let took = self.take(seq, raw, word, &msg, f);
            drop(guard);
            if let Some(got) = self.settle(seq, raw, word, took)? {
                return Ok(Some(got));
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
    pub(super) fn next_by_key<R>(
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
                        r.keys.next = self.removed_below(cursor, first, next);
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
            let took = self.take(seq, raw, word, &msg, f);
            drop(guard);
            if let Some(got) = self.settle(seq, raw, word, took)? {
                return Ok(Some(got));
            }
        }
    }

    /// A scan read ahead to messages retention removed (those below
    /// `first`, the queue's first now; `next` its end) never handed out:
    /// they are gone, and the cursor (read as `cursor`) moves over them.
    /// Returns where reading ahead goes on.
    fn removed_below(&self, cursor: u64, first: u64, next: u64) -> u64 {
        self.gone_below.fetch_max(first, Ordering::Relaxed);
        if cursor < first {
            let _ = self.state.cas(W_CURSOR, cursor, first.min(next));
        }
        first.min(next)
    }

    /// A scan's pending job `seq` (slot `raw`, read as `word`), its message
    /// `msg` read: expired, or leased to this handle with `f` called on it
    /// (both while the caller holds the readers' lock, which `msg` borrows
    /// from), or lost to another handle meanwhile. The caller drops the
    /// lock, then [`WorkQueue::settle`]s.
    fn take<R>(
        &self,
        seq: u64,
        raw: u64,
        word: SlotWord,
        msg: &Message<'_>,
        f: &mut dyn FnMut(&Message<'_>) -> R,
    ) -> Took<R> {
        let now = self.now_ms();
        if self.is_expired(msg) {
            return Took::Expired { now_ms: now };
        }
        match self.lease(seq, raw, word, now) {
            Some(ticket) => Took::Leased(ticket, f(msg)),
            None => Took::Lost,
        }
    }

    /// What follows [`WorkQueue::take`] once the readers' lock is dropped
    /// (expiring through the dead-letter queue takes it again): an expired job is
    /// expired, a leased one raises the top mark; the cursor moves over
    /// either. `Some` when the scan is done (a job leased), `None` when it
    /// looks again.
    fn settle<R>(
        &self,
        seq: u64,
        raw: u64,
        word: SlotWord,
        took: Took<R>,
    ) -> Result<Option<(Ticket, R)>> {
        match took {
            Took::Expired { now_ms } => {
                self.expire(seq, raw, word, now_ms)?;
                self.advance_cursor();
                Ok(None)
            }
            Took::Leased(ticket, out) => {
                self.state.fetch_max(W_TOP, seq + 1);
                self.advance_cursor();
                Ok(Some((ticket, out)))
            }
            Took::Lost => Ok(None),
        }
    }

    /// Moves the cursor over slots no longer pending (a priority group
    /// claims ahead of it).
    pub(super) fn advance_cursor(&self) {
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
    pub(super) fn lease(&self, seq: u64, raw: u64, word: SlotWord, now_ms: u64) -> Option<Ticket> {
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
    pub(super) fn claim_slot(&self, seq: u64, raw: u64, new: u64) -> bool {
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
    pub(super) fn scan<R>(
        &self,
        f: &mut dyn FnMut(&Message<'_>) -> R,
    ) -> Result<Option<(Ticket, R)>> {
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

    pub(super) fn redeliverable(
        &self,
        seq: u64,
        raw: u64,
        word: SlotWord,
        now: &Now,
        gone: &mut HashMap<(u64, u32), bool>,
    ) -> bool {
        let passed = || self.deadline_passed(seq, raw, &word, now);
        match word.state {
            JobState::Pending => true,
            JobState::Delayed => passed(),
            JobState::Leased | JobState::DeadLettering => {
                passed() || self.owner_gone(seq, raw, gone)
            }
            _ => false,
        }
    }

    /// Whether the deadline of `seq`'s slot (state word `raw`, read as
    /// `word`) has passed by `now`, on the clock that wrote it (see
    /// `lease::deadline_passed`; bounded by [`WorkQueue::bound_ms`] of its
    /// state).
    pub(super) fn deadline_passed(&self, seq: u64, raw: u64, word: &SlotWord, now: &Now) -> bool {
        let st = &self.state;
        let load = |i: usize| st.load(i);
        let bound = self.bound_ms(word.state);
        lease::deadline_passed(&load, st.version, st.slot(seq), raw, word, now, bound)
    }

    /// Whether the process holding `seq` (state word `raw`) is gone. Only
    /// trusted when the claim tag equals the state word (the owner word is
    /// then the one this claim stored); a claim in progress is left to its
    /// deadline.
    pub(super) fn owner_gone(
        &self,
        seq: u64,
        raw: u64,
        gone: &mut HashMap<(u64, u32), bool>,
    ) -> bool {
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
}
