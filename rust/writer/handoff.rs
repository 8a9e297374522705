//! The hand-off between appending threads and the I/O thread.
//!
//! A channel operation per message would cap throughput at the cost of a
//! channel send, an allocation and often a futex wake-up. Instead appenders
//! copy messages into one pending bundle under a short lock; a bundle is sent
//! down the bounded channel when it is full, when the I/O thread is asleep,
//! or before a flush. While the I/O thread is awake it takes the pending
//! bundle itself as soon as its channel is empty, so a lone message waits
//! only as long as the I/O thread's current work. Sequences are assigned
//! under the same lock, so they reach the I/O thread in order.
//!
//! While the I/O thread sleeps, waking it would put a second wake-up (the
//! I/O thread's, then the followers') between a lone `append` and a reader
//! in another process. So in `Async` and `Batch` modes with one writer
//! process, an appender that finds the I/O thread asleep writes the pending
//! bundle itself, under the I/O thread's own lock (see
//! `io_thread::IoThread::write_direct`): one thread at a time still writes
//! the files, in sequence order. A long run of appends closer together than
//! [`DIRECT_GAP`] ([`DIRECT_BURST`]) wakes the I/O thread instead, which then
//! spins and takes them while the appenders go on (the pipeline of a busy
//! writer).
//!
//! With several writer processes a message's sequence is known only once
//! the I/O thread has written it under the append lock. The handoff then
//! numbers messages with *tickets* (this process's own count) and hangs a
//! [`BundleSlot`] on each bundle, where the I/O thread reports the sequences.
//! While this process's I/O thread holds the append lock across bundles (a
//! *lease*, see `io_thread`), it tells the hand-off how tickets map to
//! sequences (`seq = ticket + delta`, fixed while nobody else can write), and
//! appends get their sequence at once, as with one writer process, without
//! waiting for the write.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::command::{Bundle, BundleSlot, Command};

/// A pending bundle is sent once it holds this many messages…
const BUNDLE_MESSAGES: usize = 1024;
/// …or this many bytes.
const BUNDLE_BYTES: usize = 64 * 1024;
/// Appends that find the I/O thread asleep less than this apart form a run…
pub const DIRECT_GAP: Duration = Duration::from_micros(20);
/// …and once a run is this long, appenders wake the I/O thread instead of
/// writing themselves: appends are coming fast, and the I/O thread writing
/// them while the appenders go on beats each appender writing its own. A
/// short burst (a few messages at once, then a pause) is written by its
/// appenders without waking anyone but the followers.
pub const DIRECT_BURST: u32 = 32;

#[derive(Debug)]
struct State {
    /// Sequence the next message gets.
    next_seq: u64,
    /// Messages with sequences `pending_first..next_seq`, not yet sent.
    pending: Bundle,
    pending_first: u64,
    tx: Option<Sender<Command>>,
    /// When the last append that found the I/O thread asleep was made, and
    /// how many such appends came in a row, each within `DIRECT_GAP` of the
    /// one before.
    last_asleep: Option<Instant>,
    asleep_run: u32,
    /// A [`Handoff::flush_direct`] came after the last bundle: the caller
    /// appends and flushes in turn, so the next bundle that finds the I/O
    /// thread asleep is written on the caller's thread too (otherwise the
    /// I/O thread writes bundles, overlapping with the caller's next one).
    flushed: bool,
    /// Several writer processes, while this process's I/O thread holds the
    /// append lock: the sequence of ticket `t` is `t + delta` (see
    /// [`Handoff::grant_lease`]). `None`: sequences are known once written.
    lease: Option<u64>,
}

#[derive(Debug)]
pub struct Handoff {
    state: Mutex<State>,
    /// Emptied bundles returned by the I/O thread, reused to avoid
    /// allocation. A lock of its own: the I/O thread must never wait for
    /// `state`, which an appender may hold while blocked on a full channel.
    spare: Mutex<Vec<Bundle>>,
    /// The pending bundle is not empty (read by the I/O thread without the lock).
    has_pending: AtomicBool,
    /// The I/O thread is about to block, or blocked, on the channel, and
    /// nothing was sent since it said so. Set by the I/O thread (with the
    /// channel empty); cleared by the I/O thread when it wakes and by every
    /// send (under `state`): true under `state` means the I/O thread holds
    /// no command it has not written.
    io_sleeping: AtomicBool,

    /// Several writer processes: numbers are tickets, bundles carry slots.
    tickets: bool,
    /// `State::lease` is set (read without the lock, a hint for callers
    /// deciding whether an append may wait).
    leased: AtomicBool,
    /// The I/O thread's state, for appenders to write while it sleeps (set
    /// by the I/O thread when the mode allows it; dead once it has ended).
    direct: OnceLock<Weak<dyn DirectWriter>>,
}

/// What an appender's write through the sleeping I/O thread's state did.
#[derive(Debug)]
pub enum Direct {
    /// Written and published.
    Written,
    /// Written and published; the flush mode wants a sync now.
    SyncDue,
    /// The write failed: the writer is poisoned.
    Failed,
}

/// The I/O thread's state as appenders see it, to write a pending bundle
/// themselves while the I/O thread sleeps (implemented by
/// `io_thread::IoCell`; a trait, so the hand-off does not import the I/O
/// thread that imports it).
pub trait DirectWriter: Send + Sync {
    /// Writes `pending` (replaced by `spare()`) starting at `first` when the
    /// I/O thread has let go of its state and the bundle can be written
    /// here; `None` (nothing taken) otherwise.
    fn write_pending(
        &self,
        first: u64,
        pending: &mut Bundle,
        spare: &mut dyn FnMut() -> Bundle,
    ) -> Option<Direct>;

    /// Syncs everything written and raises the durable mark (`Flush`) when
    /// the I/O thread has let go of its state: `Some(true)` done,
    /// `Some(false)` the sync failed (the writer is poisoned), `None` not
    /// done here.
    fn sync_written(&self) -> Option<bool>;
}

/// How an append's sequence is known.
#[derive(Debug)]
pub enum Numbered {
    /// One writer process: the number returned is the sequence.
    Seq,
    /// Several writer processes, under a lease: the sequence is the ticket
    /// plus this.
    Lease(u64),
    /// Several writer processes: known once the I/O thread has written the
    /// bundle, from its slot.
    Slot(Arc<BundleSlot>),
}

/// What [`Handoff::prepare_sleep`] found.
#[derive(Debug)]
pub enum Sleep {
    /// Nothing pending: block on the channel; appenders send directly now.
    Ok,
    /// A bundle slipped in: write it instead of sleeping.
    Work(u64, Bundle),
    /// An appender holds the lock (it is sending): don't sleep.
    Busy,
}

/// Why a send failed: the caller maps it to `Closed` or the poison cause.
#[derive(Debug)]
pub enum SendError {
    Closed,
    /// The I/O thread is gone, or a write or sync made on the caller's
    /// thread failed: the writer is poisoned.
    Disconnected,
    /// The appender wrote the bundle (whose first message is `seq`) itself
    /// and the write failed: the writer is poisoned.
    Failed {
        seq: u64,
    },
}

impl Handoff {
    /// True with several writer processes (numbers are tickets).
    pub fn shared_writers(&self) -> bool {
        self.tickets
    }

    /// `next_seq` is the first sequence, or the first ticket (0) when
    /// `tickets` (several writer processes).
    pub fn new(tx: Sender<Command>, next_seq: u64, tickets: bool) -> Handoff {
        Handoff {
            state: Mutex::new(State {
                next_seq,
                pending: Bundle::default(),
                pending_first: next_seq,
                tx: Some(tx),
                last_asleep: None,
                asleep_run: 0,
                flushed: false,
                lease: None,
            }),
            spare: Mutex::new(Vec::new()),
            has_pending: AtomicBool::new(false),
            io_sleeping: AtomicBool::new(false),
            tickets,
            leased: AtomicBool::new(false),
            direct: OnceLock::new(),
        }
    }

    /// Lets appenders write pending bundles themselves while the I/O thread
    /// sleeps (called once by the I/O thread, when its mode allows it).
    pub fn allow_direct(&self, cell: Weak<dyn DirectWriter>) {
        let _ = self.direct.set(cell);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds one message, written by `encode` into the bundle's body buffer;
    /// returns its sequence (or ticket, and either the bundle's slot or,
    /// under a lease, what to add to the ticket for its sequence). With
    /// `direct`, the message is sent at once (sync mode: the caller is
    /// about to wait for it).
    pub fn push(
        &self,
        flags: u8,
        direct: bool,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(u64, Numbered), SendError> {
        let mut s = self.lock();
        if s.tx.is_none() {
            return Err(SendError::Closed);
        }
        let start = s.pending.bodies.len();
        encode(&mut s.pending.bodies);
        let len = (s.pending.bodies.len() - start) as u32;
        s.pending.entries.push((flags, len));
        let seq = s.next_seq;
        s.next_seq += 1;
        let numbered = match s.lease {
            _ if !self.tickets => Numbered::Seq,
            Some(delta) => Numbered::Lease(delta),
            None => {
                let first = s.pending_first;
                Numbered::Slot(
                    s.pending
                        .slot
                        .get_or_insert_with(|| BundleSlot::new(first))
                        .clone(),
                )
            }
        };
        let full =
            s.pending.entries.len() >= BUNDLE_MESSAGES || s.pending.bodies.len() >= BUNDLE_BYTES;
        if direct || full {
            self.send_pending(&mut s)?;
            self.has_pending.store(false, Ordering::Release);
        } else if self.io_sleeping.load(Ordering::SeqCst) {
            if !self.write_direct(&mut s)? {
                self.send_pending(&mut s)?;
            }
            self.has_pending.store(false, Ordering::Release);
        } else {
            self.has_pending.store(true, Ordering::Release);
        }
        Ok((seq, numbered))
    }

    /// With the I/O thread asleep: writes the pending bundle on this thread,
    /// when allowed (see the module's doc). False: not written, send it.
    fn write_direct(&self, s: &mut State) -> Result<bool, SendError> {
        let now = Instant::now();
        let close = s
            .last_asleep
            .replace(now)
            .is_some_and(|t| now.duration_since(t) < DIRECT_GAP);
        s.asleep_run = if close {
            s.asleep_run.saturating_add(1)
        } else {
            0
        };
        if s.asleep_run >= DIRECT_BURST {
            return Ok(false);
        }
        let Some(cell) = self.direct.get().and_then(Weak::upgrade) else {
            return Ok(false);
        };
        // `io_sleeping` under this lock says the I/O thread holds no unwritten
        // command; an empty channel says none waits in it: nothing older than
        // the pending bundle is unwritten.
        if !s.tx.as_ref().is_some_and(|tx| tx.is_empty()) {
            return Ok(false);
        }
        let first_seq = s.pending_first;
        let Some(done) = cell.write_pending(first_seq, &mut s.pending, &mut || self.spare_bundle())
        else {
            return Ok(false);
        };
        s.pending_first = s.next_seq;
        match done {
            Direct::Written => Ok(true),
            Direct::SyncDue => {
                // Batch mode's byte or time limit is reached: the I/O thread
                // syncs (the channel is empty, so this never blocks).
                if let Some(tx) = &s.tx {
                    let _ = tx.try_send(Command::Flush);
                    self.io_sleeping.store(false, Ordering::SeqCst);
                }
                Ok(true)
            }
            Direct::Failed => Err(SendError::Failed { seq: first_seq }),
        }
    }

    /// Sends a whole bundle as one command (after whatever is pending);
    /// returns its sequences (or tickets, and its slot).
    pub fn push_bundle(&self, mut bundle: Bundle) -> Result<(Range<u64>, Numbered), SendError> {
        let mut s = self.lock();
        if s.tx.is_none() {
            return Err(SendError::Closed);
        }
        let n = bundle.seqs();
        let first = s.next_seq;
        if n == 0 {
            return Ok((first..first, Numbered::Seq));
        }
        let slot = match s.lease {
            _ if !self.tickets => Numbered::Seq,
            Some(delta) => Numbered::Lease(delta),
            None => {
                let slot = BundleSlot::new(first);
                bundle.slot = Some(slot.clone());
                Numbered::Slot(slot)
            }
        };
        self.send_pending(&mut s)?;
        self.has_pending.store(false, Ordering::Release);
        if std::mem::take(&mut s.flushed) && self.io_sleeping.load(Ordering::SeqCst) {
            // Appends and flushes in turn: written here, as a lone append
            // is, instead of waking the I/O thread (see `flushed`).
            s.pending = bundle;
            s.next_seq += n;
            if self.write_direct(&mut s)? {
                return Ok((first..first + n, slot));
            }
            self.send_pending(&mut s)?;
            return Ok((first..first + n, slot));
        }
        self.send(
            s.tx.as_ref(),
            Command::Write {
                first_ticket: first,
                bundle,
            },
        )?;
        s.next_seq += n;
        s.pending_first = s.next_seq;
        Ok((first..first + n, slot))
    }

    /// Several writer processes: the I/O thread holds the append lock and
    /// keeps it until it has written every ticket assigned before the
    /// matching [`Handoff::revoke_lease`], so ticket `t` (from now on, and
    /// any assigned but not yet written) gets sequence `t + delta`. Never
    /// waits (the I/O thread must not wait for `state`): false when an
    /// appender holds the lock; the I/O thread tries again later.
    /// Returns the first ticket numbered under it, `None` when not granted.
    pub fn grant_lease(&self, delta: u64) -> Option<u64> {
        let mut s = self.state.try_lock().ok()?;
        s.lease = Some(delta);
        self.leased.store(true, Ordering::Release);
        Some(s.next_seq)
    }

    /// Ends the lease: appends from now on wait for their write. Returns
    /// the first ticket not covered (the I/O thread writes every ticket
    /// below it before it lets the append lock go), or `None` when an
    /// appender holds the lock (try again later).
    pub fn revoke_lease(&self) -> Option<u64> {
        let mut s = self.state.try_lock().ok()?;
        s.lease = None;
        self.leased.store(false, Ordering::Release);
        Some(s.next_seq)
    }

    /// True when an append gets its number without waiting for its write
    /// (one writer process, or a lease held; may change at any moment).
    pub fn numbers_now(&self) -> bool {
        !self.tickets || self.leased.load(Ordering::Acquire)
    }

    /// Sequence the next message will get: every one below is assigned.
    pub fn assigned(&self) -> u64 {
        self.lock().next_seq
    }

    /// Sends what is pending, then `Flush`; returns the sequence every
    /// earlier message is below.
    pub fn request_flush(&self) -> Result<u64, SendError> {
        self.request(Command::Flush)
    }

    /// As [`Handoff::request_flush`], but while the I/O thread sleeps the
    /// caller writes what is pending and syncs on its own thread, under the
    /// I/O thread's lock, instead of waking it and waiting for it to wake
    /// the caller back (two thread switches per flush, each a wait for a
    /// core on a busy machine). For a caller that blocks until durable.
    pub fn flush_direct(&self) -> Result<u64, SendError> {
        let mut s = self.lock();
        if s.tx.is_none() {
            return Err(SendError::Closed);
        }
        s.flushed = true;
        let Some(cell) = self.direct.get().and_then(Weak::upgrade) else {
            return self.request_locked(s, Command::Flush);
        };
        // As in `write_direct`: asleep with an empty channel, the I/O thread
        // holds nothing unwritten, so once the pending bundle is written
        // here every message below `target` is written.
        if !self.io_sleeping.load(Ordering::SeqCst)
            || !s.tx.as_ref().is_some_and(|tx| tx.is_empty())
        {
            return self.request_locked(s, Command::Flush);
        }
        if !s.pending.entries.is_empty() {
            let first = s.pending_first;
            match cell.write_pending(first, &mut s.pending, &mut || self.spare_bundle()) {
                None => return self.request_locked(s, Command::Flush),
                // The writer is poisoned: the flush fails with its cause
                // (as for a failed sync below; these appends had returned).
                Some(Direct::Failed) => return Err(SendError::Disconnected),
                Some(Direct::Written | Direct::SyncDue) => {
                    s.pending_first = s.next_seq;
                    self.has_pending.store(false, Ordering::Release);
                }
            }
        }
        let target = s.next_seq;
        // Appenders go on while this one syncs; what they add is past `target`.
        drop(s);
        match cell.sync_written() {
            Some(true) => Ok(target),
            Some(false) => Err(SendError::Disconnected),
            // The I/O thread woke meanwhile: it syncs.
            None => self.request(Command::Flush),
        }
    }

    /// Sends what is pending, then `Roll`, which answers on `done`.
    pub fn request_roll(
        &self,
        done: crossbeam_channel::Sender<crate::error::Result<()>>,
    ) -> Result<u64, SendError> {
        self.request(Command::Roll(done))
    }

    fn request(&self, cmd: Command) -> Result<u64, SendError> {
        self.request_locked(self.lock(), cmd)
    }

    fn request_locked(
        &self,
        mut s: std::sync::MutexGuard<'_, State>,
        cmd: Command,
    ) -> Result<u64, SendError> {
        self.send_pending(&mut s)?;
        self.has_pending.store(false, Ordering::Release);
        self.send(s.tx.as_ref(), cmd)?;
        Ok(s.next_seq)
    }

    /// Sends what is pending and `Shutdown`, then closes the channel.
    /// False when already closed.
    pub fn shutdown(&self) -> bool {
        let mut s = self.lock();
        if s.tx.is_none() {
            return false;
        }
        let _ = self.send_pending(&mut s);
        if let Some(tx) = s.tx.take() {
            let _ = self.send(Some(&tx), Command::Shutdown);
        }
        true
    }

    /// An emptied bundle to fill (one the I/O thread wrote and handed back,
    /// with its buffers' capacity), or a new one.
    pub fn spare_bundle(&self) -> Bundle {
        self.spare
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default()
    }

    fn send_pending(&self, s: &mut State) -> Result<(), SendError> {
        if s.pending.entries.is_empty() {
            return Ok(());
        }
        let replacement = self.spare_bundle();
        let bundle = std::mem::replace(&mut s.pending, replacement);
        let first_seq = s.pending_first;
        s.pending_first = s.next_seq;
        self.send(
            s.tx.as_ref(),
            Command::Write {
                first_ticket: first_seq,
                bundle,
            },
        )
    }

    /// Sends a command (under `state`). The I/O thread will wake for it, so
    /// it no longer counts as asleep: appenders must not write past it.
    fn send(&self, tx: Option<&Sender<Command>>, cmd: Command) -> Result<(), SendError> {
        let tx = tx.ok_or(SendError::Closed)?;
        let sent = tx.send(cmd).map_err(|_| SendError::Disconnected);
        self.io_sleeping.store(false, Ordering::SeqCst);
        sent
    }

    // ---- the I/O thread's side ----

    /// Takes the pending bundle, if any: `(first_seq, bundle)`. Never waits:
    /// when an appender holds the lock, it is sending, so there is other work.
    pub fn take_pending(&self) -> Option<(u64, Bundle)> {
        if !self.has_pending.load(Ordering::Acquire) {
            return None;
        }
        let mut s = self.state.try_lock().ok()?;
        self.take_locked(&mut s)
    }

    fn take_locked(&self, s: &mut State) -> Option<(u64, Bundle)> {
        if s.pending.entries.is_empty() {
            return None;
        }
        // Bundles sent earlier hold earlier sequences: the I/O thread must
        // drain the channel first. Appenders only send under this lock, so
        // an empty channel here means nothing older is in flight.
        if !s.tx.as_ref().is_none_or(|tx| tx.is_empty()) {
            return None;
        }
        let replacement = self.spare_bundle();
        let bundle = std::mem::replace(&mut s.pending, replacement);
        let first = s.pending_first;
        s.pending_first = s.next_seq;
        self.has_pending.store(false, Ordering::Release);
        Some((first, bundle))
    }

    /// Hands an emptied bundle back for reuse.
    pub fn recycle(&self, mut bundle: Bundle) {
        if bundle.bodies.capacity() > 4 * BUNDLE_BYTES {
            return; // a huge bundle: let it go rather than hold its memory
        }
        bundle.bodies.clear();
        bundle.entries.clear();
        bundle.built = None;
        bundle.extra_seqs = 0;
        bundle.batch_keys.clear();
        bundle.slot = None;
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < 4 {
            spare.push(bundle);
        }
    }

    /// Announces that the I/O thread is going to block on the channel.
    pub fn prepare_sleep(&self) -> Sleep {
        self.io_sleeping.store(true, Ordering::SeqCst);
        // Taking the lock orders this check after any appender's critical
        // section that did not yet see `io_sleeping`: no message is stranded.
        let Ok(mut s) = self.state.try_lock() else {
            self.io_sleeping.store(false, Ordering::SeqCst);
            return Sleep::Busy;
        };
        // A command still in the channel: not asleep (appenders could
        // otherwise write past it while the I/O thread holds it unwritten).
        if !s.tx.as_ref().is_none_or(|tx| tx.is_empty()) {
            self.io_sleeping.store(false, Ordering::SeqCst);
            return Sleep::Busy;
        }
        match self.take_locked(&mut s) {
            Some((first, bundle)) => {
                self.io_sleeping.store(false, Ordering::SeqCst);
                Sleep::Work(first, bundle)
            }
            None => Sleep::Ok,
        }
    }

    pub fn woke(&self) {
        self.io_sleeping.store(false, Ordering::SeqCst);
    }

    /// True when appenders have messages waiting.
    pub fn has_pending(&self) -> bool {
        self.has_pending.load(Ordering::Acquire)
    }
}
