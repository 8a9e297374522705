//! Named tailers (consumers) and work queues of the queue, and their
//! admin listings.

use crate::config::QueueBuilder;
use crate::consumers::work_queue::{
    DeadLetterSink, Handles, PendingJob, WorkQueue, WorkQueueInfo, WorkQueueOptions,
};
use crate::consumers::{Consumer, ConsumerInfo, ConsumerOptions};
use crate::error::{Error, Result};
use crate::format::record::Record;
use crate::reader::tailer::Start;
use std::path::Path;
use std::sync::Arc;

use super::Queue;

impl Queue {
    /// A consumer (a tailer with a name whose position persists): resumes
    /// at the position `name` last committed (in this or an earlier
    /// process), or starts where `options` say when the name is new. Pass a
    /// [`Start`] for the default options. See [`Consumer`].
    pub fn consumer(&self, name: &str, options: impl Into<ConsumerOptions>) -> Result<Consumer> {
        self.check_open()?;
        let options = options.into();
        Consumer::open(
            self.path(),
            name,
            options,
            self.tailer(Start::Beginning)?,
            self.clock().clone(),
            &|| self.first_seq(),
            &|| self.next_seq(),
        )
    }

    /// The queue's id (`queue_id` in `metadata.json`: 32 lowercase hex
    /// digits, drawn when the queue was created and kept by copies and
    /// restores). `None` only for a read-only handle of a queue that no
    /// writer of this version has opened yet (its work-queue jobs then
    /// know the queue by its `metadata.json` file).
    pub fn queue_id(&self) -> Option<String> {
        self.inner()
            .metadata
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .effective_queue_id()
            .map(str::to_owned)
    }

    /// A handle on work-queue group `name` (created when new): hands each
    /// message to exactly one of the handles that opened the group, in any
    /// process, until acked. See [`WorkQueue`].
    pub fn work_queue(&self, name: &str, options: WorkQueueOptions) -> Result<WorkQueue> {
        self.check_open()?;
        let handles = Handles {
            queue: self.inner().identity,
            scout: self.tailer(Start::Beginning)?,
            random: self.tailer(Start::Beginning)?,
            catalog: self.inner().catalog.clone(),
            clock: self.clock().clone(),
            wake: self.inner().wake.clone(),
            wait: self.inner().config.wait,
            first_seq: self.first_seq(),
        };
        let end = || {
            self.wait_visible()?;
            Ok(self.next_seq())
        };
        WorkQueue::open(self.path(), name, options, handles, &end)
    }

    /// A sink that appends dead-lettered jobs to the queue at `path`, opened
    /// (created when missing) for several writer processes, since every
    /// worker process may dead-letter: pass it as
    /// [`WorkQueueOptions::dead_letter`].
    pub fn dead_letter_sink(path: &Path) -> Result<DeadLetterSink> {
        Queue::dead_letter_sink_with_key(path, None, None)
    }

    /// [`Queue::dead_letter_sink`] for an encrypted queue or a typed one:
    /// the dead-letter queue is opened (or created) with the same `key`, so
    /// a job's payload never lands in clear in it, and with the source's
    /// current `schema`, so dead letters stay events (a work queue hands
    /// the sink rows of that version; an existing dead-letter queue evolves
    /// to it, or the open fails with [`crate::Error::Schema`]; one that
    /// holds untyped messages stays untyped, the rows going in as bytes).
    pub fn dead_letter_sink_with_key(
        path: &Path,
        key: Option<[u8; 32]>,
        schema: Option<crate::format::typed::Schema>,
    ) -> Result<DeadLetterSink> {
        let builder = QueueBuilder::new(path)
            .multi_writer(true)
            .encryption_key(key);
        let dlq = match schema {
            None => builder.open()?,
            Some(s) => match builder.clone().schema(s).open() {
                // One made untyped before (rows as bytes) stays so.
                Err(Error::Schema(_)) if holds_untyped_messages(path, key) => builder.open()?,
                r => r?,
            },
        };
        let appender = dlq.appender()?;
        Ok(Arc::new(move |record: &Record<'_>| {
            let _keep_open = &dlq;
            appender.append_record(record)?;
            appender.flush()
        }))
    }

    /// Every work-queue group with its figures. Works on read-only queues
    /// and takes no lock.
    pub fn work_queues(&self) -> Result<Vec<WorkQueueInfo>> {
        self.check_open()?;
        let next = self.next_seq();
        let catalog = &self.inner().catalog;
        let mut infos = crate::consumers::work_queue::list(
            self.path(),
            next,
            &|from, to| catalog.holes_between(from, to),
            &**self.clock(),
        )?;
        for info in &mut infos {
            if info.low < next {
                // The first message at or after the mark (a tailer steps
                // over holes key compaction left; `get` of one fails).
                info.oldest_timestamp =
                    self.tailer(Start::Seq(info.low))
                        .ok()
                        .and_then(|mut t| match t.read_next() {
                            Ok(Some(m)) if m.seq < next => Some(m.timestamp),
                            _ => None,
                        });
            }
        }
        Ok(infos)
    }

    /// Work-queue group `name`'s jobs handed out and not finished, oldest
    /// first, at most `limit` (see [`WorkQueue::pending`]). Works on
    /// read-only queues and takes no lock; `NotFound`-like
    /// `InvalidArgument` when the group does not exist.
    pub fn work_queue_pending(&self, name: &str, limit: usize) -> Result<Vec<PendingJob>> {
        self.check_open()?;
        crate::consumers::name::validate(name)?;
        let path = crate::consumers::work_queue::state_path(self.path(), name);
        crate::consumers::work_queue::read_pending(&path, &**self.clock(), limit)?.ok_or_else(
            || {
                Error::InvalidArgument(format!(
                    "no work queue named {name:?} in {}",
                    self.path().display()
                ))
            },
        )
    }

    /// Removes work-queue group `name` (its state file), so that it no
    /// longer holds back retention. Returns whether it existed.
    pub fn remove_work_queue(&self, name: &str) -> Result<bool> {
        self.check_open()?;
        crate::consumers::work_queue::remove(self.path(), name)
    }

    /// Every consumer with its committed position and lag. Works on
    /// read-only queues and takes no lock.
    pub fn consumers(&self) -> Result<Vec<ConsumerInfo>> {
        self.check_open()?;
        let next = self.next_seq();
        // After next_seq: first_seq refreshes the catalog if retention ran.
        let first = self.first_seq();
        let mut infos = crate::consumers::list(self.path(), &self.inner().catalog, first, next)?;
        // A consumer with a topic filter lags by its topic's messages only.
        for info in &mut infos {
            let Some(selector) = info.selector.clone() else {
                continue;
            };
            let mut t = self.tailer(Start::Beginning)?;
            t.select(selector);
            t.expect_published(next);
            t.seek(info.next_seq.max(first))?;
            let mut n = 0;
            while let Some(m) = t.read_next()? {
                if m.seq >= next {
                    break;
                }
                n += 1;
            }
            info.lag_messages = n;
        }
        Ok(infos)
    }

    /// Forgets consumer `name` (it must not be open anywhere), so that it no
    /// longer holds back retention. Returns whether it existed.
    pub fn remove_consumer(&self, name: &str) -> Result<bool> {
        self.check_open()?;
        crate::consumers::remove(self.path(), name)
    }
}

/// True when the queue at `path` is untyped and holds messages (a schema
/// cannot be declared on it).
fn holds_untyped_messages(path: &Path, key: Option<[u8; 32]>) -> bool {
    QueueBuilder::new(path)
        .read_only(true)
        .encryption_key(key)
        .open()
        .is_ok_and(|q| q.schema_versions().is_none() && q.next_seq() > q.first_seq())
}
