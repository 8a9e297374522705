//! Jobs retired without an ack: dead-lettered after `max_deliveries`
//! (copied to the dead-letter sink, with headers saying why) or expired.

use crate::error::{Error, Result};
use crate::format::record::{Compress, HeaderField, Record};
use crate::format::work_queue::{lap_of, JobState, SlotWord, W_DEAD, W_EXPIRED};
use std::sync::Arc;

use super::*;

/// Header of a dead-lettered message: why (`max_deliveries`).
pub const DLQ_REASON: &str = "litemq.dlq.reason";

/// Header of a dead-lettered message: its sequence in the source queue.
pub const DLQ_SEQ: &str = "litemq.dlq.seq";

/// Header of a dead-lettered message: the work-queue group.
pub const DLQ_GROUP: &str = "litemq.dlq.group";

/// Header of a dead-lettered message: the source queue's directory.
pub const DLQ_QUEUE: &str = "litemq.dlq.queue";

/// Header of a dead-lettered message: handouts it had.
pub const DLQ_DELIVERIES: &str = "litemq.dlq.deliveries";

/// Where dead-lettered messages go: appends one record and returns once it
/// is written (the queue layer builds it from a queue opened for several
/// writer processes).
pub type DeadLetterSink = Arc<dyn Fn(&Record<'_>) -> Result<()> + Send + Sync>;

/// How a job ends without an ack.
#[derive(Debug, Clone, Copy)]
pub(super) enum Retire {
    /// Past `max_deliveries`.
    Dead,
    /// Its message expired before a handout.
    Expired,
}

impl WorkQueue {
    /// Sends a job past `max_deliveries` to the dead-letter queue (or drops
    /// it without one): claims it as `DeadLettering` for a visibility
    /// timeout, appends it, then marks it dead. A process that dies in
    /// between leaves the claim to expire, and the next one appends it
    /// again: the dead-letter queue gets it at least once.
    pub(super) fn dead_letter(
        &self,
        seq: u64,
        raw: u64,
        word: SlotWord,
        now_ms: u64,
    ) -> Result<()> {
        let sink = self.options.dead_letter.as_ref();
        self.retire(seq, raw, word, now_ms, Retire::Dead, sink)
    }

    /// Marks a job whose message expired before a handout: `Expired`,
    /// through the dead-letter queue when `dead_letter_expired` says so.
    pub(super) fn expire(&self, seq: u64, raw: u64, word: SlotWord, now_ms: u64) -> Result<()> {
        let sink = self
            .options
            .dead_letter
            .as_ref()
            .filter(|_| self.options.dead_letter_expired);
        self.retire(seq, raw, word, now_ms, Retire::Expired, sink)
    }

    pub(super) fn retire(
        &self,
        seq: u64,
        raw: u64,
        word: SlotWord,
        now_ms: u64,
        why: Retire,
        sink: Option<&DeadLetterSink>,
    ) -> Result<()> {
        let st = &self.state;
        let (end, counter, reason) = match why {
            Retire::Dead => (JobState::Dead, W_DEAD, "max_deliveries"),
            Retire::Expired => (JobState::Expired, W_EXPIRED, "expired"),
        };
        let owned = if sink.is_some() {
            let owned = SlotWord {
                lap: lap_of(seq, st.window),
                state: JobState::DeadLettering,
                deadline_ms: self.deadline_after(now_ms, self.options.visibility_timeout),
                ..word
            }
            .encode();
            if !self.claim_slot(seq, raw, owned) {
                return Ok(());
            }
            owned
        } else {
            raw
        };
        if let Some(sink) = sink {
            let mut readers = lock(&self.readers);
            let versions = readers.random.schema_versions();
            match readers.random.read_at(seq) {
                Ok(Some(m)) => {
                    let seq_text = seq.to_string();
                    let deliveries = word.deliveries.to_string();
                    let queue = self.queue_path.to_string_lossy();
                    let ours = [
                        (DLQ_REASON, reason),
                        (DLQ_SEQ, seq_text.as_str()),
                        (DLQ_GROUP, self.name.as_str()),
                        (DLQ_QUEUE, queue.as_ref()),
                        (DLQ_DELIVERIES, deliveries.as_str()),
                    ];
                    // The message's own headers first, as many as leave room for ours.
                    let mut headers: Vec<HeaderField<'_>> = m
                        .headers()
                        .take(crate::format::record::MAX_HEADERS - ours.len())
                        .collect();
                    headers.extend(ours.iter().map(|&(name, value)| HeaderField {
                        name,
                        value: value.as_bytes(),
                        value_is_text: true,
                    }));
                    let tags: Vec<&str> = m.tags().collect();
                    // A typed queue's row of an older schema version goes
                    // in the current one (the dead-letter queue's).
                    let converted = match versions {
                        Some(vs) if m.schema_version() != 0 => {
                            let current = vs.current().filter(|c| c.version != m.schema_version());
                            match (vs.get(m.schema_version()), current) {
                                (Some(from), Some(to)) => {
                                    Some(crate::format::typed::convert_row(from, m.payload, to)?)
                                }
                                _ => None,
                            }
                        }
                        _ => None,
                    };
                    // Topic, tags and priority go along; an expiry would
                    // hide the dead letter from readers that skip expired ones.
                    let record = Record {
                        payload: converted.as_deref().unwrap_or(m.payload),
                        key: m.key,
                        key_is_text: m.key_is_text(),
                        headers: &headers,
                        topic: m.topic(),
                        queue_id: m.queue_id(),
                        tags: &tags,
                        expires_at: None,
                        priority: m.priority(),
                        // The dead-letter queue compresses as it is configured.
                        compress: Compress::Queue,
                        tombstone: m.is_tombstone(),
                    };
                    sink(&record)?;
                }
                Ok(None) => return Ok(()),
                Err(Error::NotFound { first, .. }) if seq < first => {}
                Err(Error::Compacted { .. }) => {
                    // Key compaction dropped it: nothing to dead-letter.
                    drop(readers);
                    if self.gone(seq, owned, word) {
                        self.advance_low();
                    }
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        let done = SlotWord {
            lap: lap_of(seq, st.window),
            state: end,
            deliveries: word.deliveries,
            deadline_ms: 0,
        }
        .encode();
        if st.cas(st.slot(seq), owned, done) {
            st.add(counter, 1);
            self.advance_low();
        }
        Ok(())
    }
}
