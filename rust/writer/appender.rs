//! The appender: assigns sequences on the caller's thread and hands
//! messages to the I/O thread.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;

use super::command::{Command, Encoded, EncodedBatch};
use super::shared::WriterShared;
use crate::config::FlushMode;
use crate::error::{Error, Result};
use crate::format::record::{Record, RECORD_FIXED_LEN};
use crate::storage::mapped::fork_generation;

#[derive(Debug)]
struct SendState {
    next_seq: u64,
    tx: Option<Sender<Command>>,
}

#[derive(Debug)]
pub(crate) struct AppenderInner {
    /// Sequence assignment and sending happen under one lock, so sequences
    /// reach the I/O thread in order even with many appending threads.
    send: Mutex<SendState>,
    shared: Arc<WriterShared>,
    flush: FlushMode,
    max_record_len: usize,
    fork_gen: u64,
}

/// Appends messages to a queue. Cheap to clone; share it between threads.
///
/// ```no_run
/// # let queue = litemq::QueueBuilder::new("/tmp/q").open()?;
/// let appender = queue.appender()?;
/// let first = appender.append(b"hello")?;
/// let rest = appender.append_batch([&b"a"[..], b"b"])?;
/// assert_eq!(rest.start, first + 1);
/// appender.flush()?; // durable once this returns
/// # Ok::<(), litemq::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Appender {
    inner: Arc<AppenderInner>,
}

impl Appender {
    pub(crate) fn new(
        tx: Sender<Command>,
        next_seq: u64,
        shared: Arc<WriterShared>,
        flush: FlushMode,
        max_record_len: usize,
    ) -> Appender {
        Appender {
            inner: Arc::new(AppenderInner {
                send: Mutex::new(SendState {
                    next_seq,
                    tx: Some(tx),
                }),
                shared,
                flush,
                max_record_len,
                fork_gen: fork_generation(),
            }),
        }
    }

    /// Appends one message with just a payload; returns its sequence.
    pub fn append(&self, payload: &[u8]) -> Result<u64> {
        self.check_size(payload.len())?;
        let msg = Encoded {
            flags: 0,
            body: payload.to_vec(),
        };
        self.send(1, |seq| Command::Append { seq, msg })
    }

    /// Appends one message with key and headers; returns its sequence.
    pub fn append_record(&self, record: &Record<'_>) -> Result<u64> {
        record.validate().map_err(Error::InvalidArgument)?;
        let mut body = Vec::new();
        record.encode_fields(&mut body);
        body.extend_from_slice(record.payload);
        self.check_size(body.len())?;
        let msg = Encoded {
            flags: record.flags(),
            body,
        };
        self.send(1, |seq| Command::Append { seq, msg })
    }

    /// Appends payloads in one command; returns their sequences.
    pub fn append_batch<'a, I>(&self, payloads: I) -> Result<Range<u64>>
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut batch = EncodedBatch::default();
        for p in payloads {
            self.check_size(p.len())?;
            batch.bodies.extend_from_slice(p);
            batch.entries.push((0, p.len() as u32));
        }
        self.send_batch(batch)
    }

    /// Appends records (with keys or headers) in one command.
    pub fn append_records(&self, records: &[Record<'_>]) -> Result<Range<u64>> {
        let mut batch = EncodedBatch::default();
        for r in records {
            r.validate().map_err(Error::InvalidArgument)?;
            let start = batch.bodies.len();
            r.encode_fields(&mut batch.bodies);
            batch.bodies.extend_from_slice(r.payload);
            let len = batch.bodies.len() - start;
            self.check_size(len)?;
            batch.entries.push((r.flags(), len as u32));
        }
        self.send_batch(batch)
    }

    /// Appends an already encoded batch (the Python bindings build one
    /// while walking a list, without an intermediate `Vec<&[u8]>`).
    pub fn append_encoded(&self, batch: EncodedBatch) -> Result<Range<u64>> {
        for &(_, len) in &batch.entries {
            self.check_size(len as usize)?;
        }
        self.send_batch(batch)
    }

    fn send_batch(&self, batch: EncodedBatch) -> Result<Range<u64>> {
        let n = batch.entries.len() as u64;
        if n == 0 {
            let next = self
                .inner
                .send
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .next_seq;
            return Ok(next..next);
        }
        let first = self.send(n, |first_seq| Command::Batch { first_seq, batch })?;
        Ok(first..first + n)
    }

    /// Returns once every message appended before this call is written and
    /// msync'd, or the error that stopped the writer.
    pub fn flush(&self) -> Result<()> {
        self.check_alive()?;
        let target = {
            let state = self.inner.send.lock().unwrap_or_else(|e| e.into_inner());
            let target = state.next_seq;
            if self.inner.shared.durable() >= target {
                return Ok(());
            }
            let tx = state.tx.as_ref().ok_or(Error::Closed)?;
            tx.send(Command::Flush)
                .map_err(|_| self.inner.shared.poison_error())?;
            target
        };
        self.inner.shared.wait_durable(target)
    }

    /// Largest body (key, headers and payload) one message may have.
    pub fn max_message_len(&self) -> usize {
        self.inner.max_record_len - RECORD_FIXED_LEN
    }

    fn check_size(&self, body_len: usize) -> Result<()> {
        if body_len > self.max_message_len() {
            return Err(Error::InvalidArgument(format!(
                "message of {body_len} bytes exceeds the limit of {} bytes for this file size",
                self.max_message_len()
            )));
        }
        Ok(())
    }

    fn check_alive(&self) -> Result<()> {
        if fork_generation() != self.inner.fork_gen {
            return Err(Error::Forked);
        }
        self.inner.shared.check()
    }

    fn send(&self, count: u64, make: impl FnOnce(u64) -> Command) -> Result<u64> {
        self.check_alive()?;
        let seq = {
            let mut state = self.inner.send.lock().unwrap_or_else(|e| e.into_inner());
            let seq = state.next_seq;
            let tx = state.tx.as_ref().ok_or(Error::Closed)?;
            tx.send(make(seq))
                .map_err(|_| self.inner.shared.poison_error())?;
            state.next_seq += count;
            seq
        };
        if self.inner.flush == FlushMode::Sync {
            self.inner.shared.wait_durable(seq + count)?;
        }
        Ok(seq)
    }

    /// Stops accepting appends and tells the I/O thread to finish. Returns
    /// false when it was already closed.
    pub(crate) fn shut(&self) -> bool {
        let mut state = self.inner.send.lock().unwrap_or_else(|e| e.into_inner());
        match state.tx.take() {
            Some(tx) => {
                let _ = tx.send(Command::Shutdown { done: None });
                true
            }
            None => false,
        }
    }

    pub(crate) fn forked(&self) -> bool {
        fork_generation() != self.inner.fork_gen
    }
}
