//! What travels from appenders to the I/O thread.

use std::sync::mpsc::SyncSender;

/// One message as the appender encoded it: the flags byte and everything
/// after the timestamp (optional fields, then payload). The I/O thread adds
/// the timestamp when it writes.
#[derive(Debug)]
pub struct Encoded {
    pub flags: u8,
    pub body: Vec<u8>,
}

/// Many messages in one allocation: bodies back to back, one `(flags, len)`
/// per message.
#[derive(Debug, Default)]
pub struct EncodedBatch {
    pub bodies: Vec<u8>,
    pub entries: Vec<(u8, u32)>,
}

/// A command for the I/O thread. Commands are handled in the order sent.
#[derive(Debug)]
pub enum Command {
    /// Write one message; `seq` is the sequence the appender assigned.
    Append { seq: u64, msg: Encoded },
    /// Write several messages with consecutive sequences from `first_seq`.
    Batch { first_seq: u64, batch: EncodedBatch },
    /// msync everything written so far, then raise the durable mark.
    Flush,
    /// Write what is queued, msync, record a clean shutdown and stop. The
    /// sender, if any, is told the final result.
    Shutdown { done: Option<SyncSender<()>> },
}
