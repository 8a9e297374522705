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
//! With several writer processes a message's sequence is known only once
//! the I/O thread has written it under the append lock. The handoff then
//! numbers messages with *tickets* (this process's own count) and hangs a
//! [`BundleSlot`] on each bundle, where the I/O thread reports the sequences.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;

use super::command::{Bundle, BundleSlot, Command};

/// A pending bundle is sent once it holds this many messages…
const BUNDLE_MESSAGES: usize = 1024;
/// …or this many bytes.
const BUNDLE_BYTES: usize = 64 * 1024;

#[derive(Debug)]
struct State {
    /// Sequence the next message gets.
    next_seq: u64,
    /// Messages with sequences `pending_first..next_seq`, not yet sent.
    pending: Bundle,
    pending_first: u64,
    tx: Option<Sender<Command>>,
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
    /// The I/O thread is about to block, or blocked, on the channel.
    io_sleeping: AtomicBool,
    /// Several writer processes: numbers are tickets, bundles carry slots.
    tickets: bool,
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
    Disconnected,
}

impl Handoff {
    /// `next_seq` is the first sequence, or the first ticket (0) when
    /// `tickets` (several writer processes).
    pub fn new(tx: Sender<Command>, next_seq: u64, tickets: bool) -> Handoff {
        Handoff {
            state: Mutex::new(State {
                next_seq,
                pending: Bundle::default(),
                pending_first: next_seq,
                tx: Some(tx),
            }),
            spare: Mutex::new(Vec::new()),
            has_pending: AtomicBool::new(false),
            io_sleeping: AtomicBool::new(false),
            tickets,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds one message, written by `encode` into the bundle's body buffer;
    /// returns its sequence (or ticket, and the bundle's slot). With
    /// `direct`, the message is sent at once (sync mode: the caller is
    /// about to wait for it).
    pub fn push(
        &self,
        flags: u8,
        direct: bool,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(u64, Option<Arc<BundleSlot>>), SendError> {
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
        let slot = self.tickets.then(|| {
            let first = s.pending_first;
            s.pending
                .slot
                .get_or_insert_with(|| BundleSlot::new(first))
                .clone()
        });
        let full =
            s.pending.entries.len() >= BUNDLE_MESSAGES || s.pending.bodies.len() >= BUNDLE_BYTES;
        if direct || full || self.io_sleeping.load(Ordering::SeqCst) {
            self.send_pending(&mut s)?;
            self.has_pending.store(false, Ordering::Release);
        } else {
            self.has_pending.store(true, Ordering::Release);
        }
        Ok((seq, slot))
    }

    /// Sends a whole bundle as one command (after whatever is pending);
    /// returns its sequences (or tickets, and its slot).
    pub fn push_bundle(
        &self,
        mut bundle: Bundle,
    ) -> Result<(Range<u64>, Option<Arc<BundleSlot>>), SendError> {
        let mut s = self.lock();
        if s.tx.is_none() {
            return Err(SendError::Closed);
        }
        let n = bundle.entries.len() as u64;
        let first = s.next_seq;
        if n == 0 {
            return Ok((first..first, None));
        }
        let slot = self.tickets.then(|| BundleSlot::new(first));
        bundle.slot = slot.clone();
        self.send_pending(&mut s)?;
        self.has_pending.store(false, Ordering::Release);
        let tx = s.tx.as_ref().ok_or(SendError::Closed)?;
        tx.send(Command::Write {
            first_ticket: first,
            bundle,
        })
        .map_err(|_| SendError::Disconnected)?;
        s.next_seq += n;
        s.pending_first = s.next_seq;
        Ok((first..first + n, slot))
    }

    /// Sequence the next message will get: every one below is assigned.
    pub fn assigned(&self) -> u64 {
        self.lock().next_seq
    }

    /// Sends what is pending, then `Flush`; returns the sequence every
    /// earlier message is below.
    pub fn request_flush(&self) -> Result<u64, SendError> {
        let mut s = self.lock();
        self.send_pending(&mut s)?;
        self.has_pending.store(false, Ordering::Release);
        let tx = s.tx.as_ref().ok_or(SendError::Closed)?;
        tx.send(Command::Flush)
            .map_err(|_| SendError::Disconnected)?;
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
            let _ = tx.send(Command::Shutdown);
        }
        true
    }

    fn spare_bundle(&self) -> Bundle {
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
        let tx = s.tx.as_ref().ok_or(SendError::Closed)?;
        tx.send(Command::Write {
            first_ticket: first_seq,
            bundle,
        })
        .map_err(|_| SendError::Disconnected)
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
