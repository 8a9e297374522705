//! What travels from appenders to the I/O thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A bundle: messages as appenders encoded them, handed to the I/O thread
/// together, in one allocation: each message's body (optional fields, then
/// payload) back to back, and one `(flags, len)` per message. The I/O thread
/// adds the timestamp when it writes. ("Batch" is the flush mode, Python's
/// `litemq.Batch`; a bundle is what the hand-off sends, up to 1024 messages
/// or 64 KiB, or one `append_batch` call.)
#[derive(Debug, Default)]
pub struct Bundle {
    pub bodies: Vec<u8>,
    pub entries: Vec<(u8, u32)>,
    /// Sequences beyond one per entry: an entry that is a batch record
    /// (format 9, `record::EXT_BATCH`) stands for its `count` members.
    pub extra_seqs: u64,
    /// With several writer processes: where the I/O thread reports the
    /// sequences the bundle got (they are known only once it is written).
    pub slot: Option<Arc<BundleSlot>>,
}

impl Bundle {
    /// How many sequences the bundle's messages take.
    pub fn seqs(&self) -> u64 {
        self.entries.len() as u64 + self.extra_seqs
    }
}

/// The sequence a bundle's first message got, for appenders waiting on it.
#[derive(Debug)]
pub struct BundleSlot {
    /// Ticket of the bundle's first message (see `Handoff`).
    pub first_ticket: u64,
    first_seq: AtomicU64,
}

impl BundleSlot {
    pub fn new(first_ticket: u64) -> Arc<BundleSlot> {
        Arc::new(BundleSlot {
            first_ticket,
            first_seq: AtomicU64::new(u64::MAX),
        })
    }

    /// Set by the I/O thread before it counts the bundle as written.
    pub fn set_first_seq(&self, seq: u64) {
        self.first_seq.store(seq, Ordering::Release);
    }

    /// The sequence of the message with `ticket`, once written.
    pub fn seq_of(&self, ticket: u64) -> Option<u64> {
        let first = self.first_seq.load(Ordering::Acquire);
        (first != u64::MAX).then(|| first + (ticket - self.first_ticket))
    }
}

/// A command for the I/O thread. Commands are handled in the order sent.
#[derive(Debug)]
pub enum Command {
    /// Write several messages with consecutive tickets from `first_ticket`
    /// (tickets are sequences unless several processes write).
    Write { first_ticket: u64, bundle: Bundle },
    /// msync everything written so far, then raise the durable mark.
    Flush,
    /// Seal the active file (when it holds a message) so that the next
    /// message starts a new one, then do what `Flush` does; the outcome is
    /// sent back on the channel.
    Roll(crossbeam_channel::Sender<crate::error::Result<()>>),
    /// Write what is queued, msync everything and stop.
    Shutdown,
}
