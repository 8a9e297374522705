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
    /// The keys of batch records' members, which the I/O thread indexes
    /// without decompressing the block: for each batch entry, in entry
    /// order, `count:u32` then `count` times `len:u16 | key` (one per keyed
    /// member, tombstones included, in member order).
    pub batch_keys: Vec<u8>,
    /// With several writer processes: where the I/O thread reports the
    /// sequences the bundle got (they are known only once it is written).
    pub slot: Option<Arc<BundleSlot>>,
    /// `Some(timestamp)`: `bodies` holds the messages' whole frames, built
    /// by the appender with this timestamp (`frame::encode_record_into`,
    /// each padded: `entries` still gives each body's length), which the
    /// I/O thread copies into the file as they are (and stamps again only
    /// when the timestamp is older than the queue's last).
    pub built: Option<u64>,
}

impl Bundle {
    /// How many sequences the bundle's messages take.
    pub fn seqs(&self) -> u64 {
        self.entries.len() as u64 + self.extra_seqs
    }

    /// Records the keys of the next batch entry's keyed members (see
    /// [`Bundle::batch_keys`]).
    pub fn push_batch_keys<'a>(&mut self, keys: impl Iterator<Item = &'a [u8]>) {
        let at = self.batch_keys.len();
        self.batch_keys.extend_from_slice(&0u32.to_le_bytes());
        let mut n = 0u32;
        for k in keys {
            self.batch_keys
                .extend_from_slice(&(k.len() as u16).to_le_bytes());
            self.batch_keys.extend_from_slice(k);
            n += 1;
        }
        self.batch_keys[at..at + 4].copy_from_slice(&n.to_le_bytes());
    }
}

/// Reads [`Bundle::batch_keys`] back, one batch entry after the other.
#[derive(Debug, Default)]
pub struct BatchKeys {
    at: usize,
}

impl BatchKeys {
    /// The keys of the next batch entry's keyed members, in member order.
    pub fn next<'a>(&mut self, all: &'a [u8]) -> Vec<&'a [u8]> {
        let n = crate::format::le_u32(all, self.at).unwrap_or(0);
        self.at += 4;
        let mut keys = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let len = crate::format::le_u16(all, self.at).unwrap_or(0) as usize;
            keys.push(&all[self.at + 2..self.at + 2 + len]);
            self.at += 2 + len;
        }
        keys
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
