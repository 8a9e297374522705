//! What travels from appenders to the I/O thread.

/// Messages as appenders encoded them, in one allocation: each message's
/// body (optional fields, then payload) back to back, and one `(flags, len)`
/// per message. The I/O thread adds the timestamp when it writes.
#[derive(Debug, Default)]
pub struct EncodedBatch {
    pub bodies: Vec<u8>,
    pub entries: Vec<(u8, u32)>,
}

/// A command for the I/O thread. Commands are handled in the order sent.
#[derive(Debug)]
pub enum Command {
    /// Write several messages with consecutive sequences from `first_seq`.
    Batch { first_seq: u64, batch: EncodedBatch },
    /// msync everything written so far, then raise the durable mark.
    Flush,
    /// Write what is queued, msync everything and stop.
    Shutdown,
}
