//! `Queue` (native part): opens a queue and hands out appenders and tailers.
//! The Python class `litemq.Queue` subclasses it (for its signature and
//! docs); the options are parsed by `options/`, the open queues kept by
//! `open_queues.rs`.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::appender::Appender;
use super::args::{name, Arg, Key, Limit, Micros, SeqNum, StartAt};
use super::consumer::Consumer;
use super::errors;
use super::exit;
use super::fields;
use super::fork::ForkSafe;
use super::message::Message;
use super::open_queues::Core;
use super::options;
use super::results;
use super::tailer::{Plain, Reader, Tailer};
use super::time;
use super::topic::{self, QueueId, Tags};
use super::typed::Decoders;
use super::work_queue::{self, WorkQueue};
use crate::{ConsumerOptions, DeadLetterSink, WorkQueueOptions};

/// The native queue. Use `litemq.Queue`, its subclass, which documents the options.
#[pyclass(frozen, subclass, module = "litemq._litemq", name = "Queue")]
pub(crate) struct Queue {
    inner: ForkSafe<Arc<Core>>,
    path: String,
    read_only: bool,
    /// Appends wait for the I/O thread (`Sync` flushes, or several writer
    /// processes): release the GIL while they do.
    blocking_appends: bool,
}

/// `(start, end, limit)` of `find` and `where`.
type Range = (Option<u64>, Option<u64>, Option<usize>);

/// `start=`, `end=` and `limit=` of `find` and `where`, raising the first
/// bad one in the order they were always checked: `limit`, `start`, `end`.
fn range_args(
    start: Option<Arg<Micros<name::Start>>>,
    end: Option<Arg<Micros<name::End>>>,
    limit: Option<Arg<Limit>>,
) -> PyResult<Range> {
    let limit = Arg::opt(limit)?.map(|Limit(n)| n);
    let start = Arg::opt(start)?.map(|Micros(us, _)| us);
    let end = Arg::opt(end)?.map(|Micros(us, _)| us);
    Ok((start, end, limit))
}

impl Queue {
    fn core(&self) -> PyResult<&Arc<Core>> {
        self.inner.get()
    }

    fn queue(&self) -> PyResult<&crate::Queue> {
        Ok(&self.core()?.queue)
    }

    /// A typed queue's encoders and decoders (None: untyped), for the
    /// schema versions the engine knows now.
    pub(crate) fn typed(&self, py: Python<'_>) -> PyResult<Option<Arc<Decoders>>> {
        let core = self.core()?;
        core.typed.get(py, &core.queue)
    }

    /// `(field, op, value)` of a typed `where` as the engine's predicate;
    /// SchemaError on an untyped queue.
    fn typed_predicate(
        &self,
        py: Python<'_>,
        field: &str,
        op: &str,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<crate::TypedPredicate> {
        let d = self
            .typed(py)?
            .ok_or_else(|| crate::Error::Schema("the queue has no schema".into()))?;
        super::typed::predicate(&d, field, op, value)
    }

    /// The queue, or `ClosedError` once closed (for the calls that would
    /// otherwise answer from the files as last seen).
    fn open_queue(&self) -> PyResult<&crate::Queue> {
        let queue = self.queue()?;
        if queue.is_closed() {
            return Err(errors::closed());
        }
        Ok(queue)
    }
}

#[pymethods]
impl Queue {
    #[new]
    #[pyo3(signature = (
        path, *, file_size=None, roll=None, flush=None, index_interval=None,
        verify_on_startup=None, read_only=None, channel_capacity=None, wait=None,
        key_index=None, retention=None, multi_writer=None, indexes=None, compression=None,
        compression_level=None, compression_min_size=None, max_decompressed_size=None,
        compact=None,
        encryption_key=None, encryption_key_file=None, schema=None,
    ))]
    #[expect(
        clippy::too_many_arguments,
        reason = "one argument per keyword of Queue.__init__"
    )]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        file_size: Option<Arg<options::FileSize>>,
        roll: Option<Arg<options::Roll>>,
        flush: Option<Arg<options::Flush>>,
        index_interval: Option<Arg<options::IndexInterval>>,
        verify_on_startup: Option<Arg<options::Flag<name::VerifyOnStartup>>>,
        read_only: Option<Arg<options::Flag<name::ReadOnly>>>,
        channel_capacity: Option<Arg<options::ChannelCapacity>>,
        wait: Option<Arg<options::Wait>>,
        key_index: Option<Arg<options::KeyIndex>>,
        retention: Option<Arg<options::Retention<name::Retention>>>,
        multi_writer: Option<Arg<options::Flag<name::MultiWriter>>>,
        indexes: Option<Arg<options::Indexes>>,
        compression: Option<Arg<options::Codec>>,
        compression_level: Option<Arg<options::CompressionLevel>>,
        compression_min_size: Option<Arg<options::CompressionMinSize>>,
        max_decompressed_size: Option<Arg<options::MaxDecompressedSize>>,
        compact: Option<Arg<options::CompactOnRoll>>,
        encryption_key: Option<Arg<options::EncryptionKey>>,
        encryption_key_file: Option<PathBuf>,
        schema: Option<String>,
    ) -> PyResult<Self> {
        // Every option is parsed (options/) before anything is opened.
        let options::Opening {
            builder,
            read_only,
            sync_flush,
        } = options::OpenArgs {
            file_size,
            roll,
            flush,
            index_interval,
            verify_on_startup,
            read_only,
            channel_capacity,
            wait,
            key_index,
            retention,
            multi_writer,
            indexes,
            compression,
            compression_level,
            compression_min_size,
            max_decompressed_size,
            compact,
            encryption_key,
            encryption_key_file,
            schema: schema.clone(),
        }
        .builder(&path)?;
        let queue = exit::detach(py, || builder.open())?;
        if let (Some(json), false) = (&schema, read_only) {
            declare_now(py, &queue, json)?;
        }
        // `Sync` flushes, or several writers (given or remembered): an append
        // returns once written.
        let blocking_appends = sync_flush || queue.is_multi_writer();
        let core = Core::new(queue);
        if core.queue.schema_versions().is_some() {
            super::typed::register(core.clone());
        }
        Ok(Queue {
            inner: ForkSafe::new(core),
            path: path.display().to_string(),
            read_only,
            blocking_appends,
        })
    }

    /// Refuses pickling and copying: a queue handle holds open files, the
    /// writer lock and an I/O thread, which cannot move to another process.
    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(format!(
            "a litemq.Queue cannot be pickled or copied: it holds open files, the writer \
             lock and an I/O thread; pass its path ({:?}) and open litemq.Queue(path) \
             in the other process",
            self.path
        )))
    }

    /// An appender for writing messages (raises ReadOnlyError when read-only).
    ///
    /// >>> app = q.appender()
    fn appender(&self, py: Python<'_>) -> PyResult<Appender> {
        // The first one takes the writer lock and recovers: without the GIL.
        let queue = self.queue()?;
        let app = exit::detach(py, || queue.appender())?;
        let typed = self.typed(py)?;
        let encrypted = queue.encryption_key().is_some();
        Ok(Appender::new(app, self.blocking_appends, self.path.clone()).typed(typed, encrypted))
    }

    /// A tailer starting at `start`: "start" (the first message, default),
    /// "end" (only messages written from now on) or a sequence number.
    ///
    /// With `name`, a named tailer (`Consumer`) that resumes where that name
    /// last committed, in this or an earlier process; `start` then only
    /// says where a new name begins. `auto_commit=True` commits as it reads.
    ///
    /// With `topic` (and optionally `queue_id` and `tags`), it returns only
    /// that topic's messages (of that stream; carrying any of the tags),
    /// reading only them where the topic index allows; `tags` alone
    /// filters every message by its tags. Sequence numbers stay the queue's;
    /// each message also carries its `topic_offset` in its topic stream, and
    /// `seek_topic_offset(n)` moves by it.
    /// `skip_expired=True` skips messages whose expiry (`ttl`/`expires_at`
    /// at append) has passed.
    ///
    /// `direction="backward"` reads newest first: from `start` (then
    /// "end", the newest message, is the usual start; "start" reads only
    /// the oldest) down to the oldest message, across files.
    ///
    /// >>> t = q.tailer(start=100)
    /// >>> billing = q.tailer(name="billing", start="end")
    /// >>> paid = q.tailer(topic="orders", tags=["paid"])
    /// >>> [m.seq for m in q.tailer(start="end", direction="backward")]
    /// [2, 1, 0]
    #[pyo3(signature = (
        start=None, *, name=None, auto_commit=false, direction="forward",
        topic=None, tags=None, queue_id=None, skip_expired=false,
        reset=false, auto_reset="error"
    ))]
    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the Python keyword arguments"
    )]
    fn tailer(
        &self,
        py: Python<'_>,
        start: Option<Arg<StartAt>>,
        name: Option<&str>,
        auto_commit: bool,
        direction: &str,
        topic: Option<String>,
        tags: Option<Arg<Tags>>,
        queue_id: Option<Arg<QueueId>>,
        skip_expired: bool,
        reset: bool,
        auto_reset: &str,
    ) -> PyResult<Py<PyAny>> {
        let selector = topic::selector_arg(topic, tags, queue_id)?;
        let auto_reset = match auto_reset {
            "error" => crate::AutoReset::Error,
            "earliest" => crate::AutoReset::Earliest,
            "latest" => crate::AutoReset::Latest,
            other => {
                return Err(PyValueError::new_err(format!(
                    "auto_reset must be \"earliest\", \"latest\" or \"error\", got {other:?}"
                )))
            }
        };
        if name.is_none() && (reset || auto_reset != crate::AutoReset::Error) {
            return Err(PyValueError::new_err(
                "reset= and auto_reset= need a named tailer: q.tailer(name=..., ...)",
            ));
        }
        let start = Arg::opt(start)?.map_or(crate::Start::Beginning, |StartAt(s)| s);
        let core = self.core()?;
        let queue = &core.queue;
        match direction {
            "forward" => {}
            "backward" if selector.is_some() => {
                return Err(PyValueError::new_err(
                    "a backward tailer reads every message: drop topic=/tags=/queue_id= \
                     or direction=\"backward\"",
                ))
            }
            "backward" if skip_expired => {
                return Err(PyValueError::new_err(
                    "a backward tailer reads every message: drop skip_expired=True \
                     or direction=\"backward\"",
                ))
            }
            "backward" if name.is_some() => {
                return Err(PyValueError::new_err(
                    "a named tailer reads forward: drop name= or direction=\"backward\"",
                ))
            }
            "backward" => {
                let b = exit::detach(py, || queue.backward_tailer(start))?;
                let t = Tailer::new(Reader::Backward(b), self.path.clone(), queue.tail_watch());
                core.adopt(&t);
                return Ok(Py::new(py, t)?.into_any());
            }
            other => {
                return Err(PyValueError::new_err(format!(
                    "direction must be \"forward\" or \"backward\", got {other:?}"
                )))
            }
        }
        let Some(name) = name else {
            if auto_commit {
                return Err(PyValueError::new_err(
                    "auto_commit needs a named tailer: q.tailer(name=..., auto_commit=True)",
                ));
            }
            let mut tailer = queue.tailer(start)?;
            if let Some(s) = selector {
                tailer.select(s);
            }
            if skip_expired {
                tailer.skip_expired(queue.clock().clone());
            }
            let t = Tailer::new(
                Reader::Plain(Plain::new(tailer)),
                self.path.clone(),
                queue.tail_watch(),
            );
            core.adopt(&t);
            return Ok(Py::new(py, t)?.into_any());
        };
        let options = ConsumerOptions {
            start_if_new: start,
            auto_commit,
            auto_reset,
            reset,
        };
        let mut c = match exit::detach(py, || queue.consumer(name, options)) {
            Ok(c) => c,
            Err(e @ crate::Error::Locked { .. }) => {
                return Err(errors::consumer_busy(py, name, &e))
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(s) = selector {
            c.select(s)?;
        }
        if skip_expired {
            c.skip_expired(queue.clock().clone());
        }
        let t = Tailer::new(Reader::Named(c), self.path.clone(), queue.tail_watch());
        core.adopt(&t);
        Ok(Consumer::create(py, t)?.into_any())
    }

    /// A work queue (competing consumers): hands each message to exactly
    /// one `get()` among every handle of group `name`, in any process, until
    /// acked; see `litemq.WorkQueue`. `visibility_timeout` (seconds, default
    /// 30): a job not acked by then is handed out again (so is a job whose
    /// worker process died); `max_deliveries` (1-255, default 5): handouts
    /// before a job is dead-lettered; `dead_letter`: None (drop and count),
    /// a directory (a litemq queue, opened for several writer processes,
    /// with this queue's encryption key and, if typed, its current schema)
    /// or an open `litemq.Queue`. For a new group: `start` ("start", "end" or
    /// a sequence up to the queue's end, `ValueError` past it) and `window` (slots in its ring, a power of two, default
    /// 65,536: in-flight plus acked-ahead jobs; a full ring makes `get` wait).
    /// `priority=True` hands out higher message priorities first (FIFO within
    /// one), looking ahead over the window; `max_wait` (seconds, default 60,
    /// ``math.inf``: no bound) serves a job written that long ago first, whatever its
    /// priority. Expired messages are never handed out: they are counted, and
    /// with `dead_letter_expired=True` dead-lettered (reason ``expired``).
    /// ``ordered_by="key"`` delivers in order per key (SQS FIFO message
    /// groups): at most one job of a key in flight, a key's jobs in sequence
    /// order; jobs without a key are not held back (not with `priority`).
    ///
    /// >>> wq = q.work_queue("thumbnails", visibility_timeout=60, dead_letter="thumbs.dlq")
    #[pyo3(signature = (name, *, visibility_timeout=None, max_deliveries=5, dead_letter=None, start=None, window=None, priority=false, max_wait=60.0, dead_letter_expired=false, ordered_by=None))]
    #[expect(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn work_queue(
        &self,
        py: Python<'_>,
        name: &str,
        visibility_timeout: Option<time::Seconds>,
        max_deliveries: i64,
        dead_letter: Option<Arg<DeadLetter<'_>>>,
        start: Option<Arg<StartAt>>,
        window: Option<u64>,
        priority: bool,
        max_wait: f64,
        dead_letter_expired: bool,
        ordered_by: Option<&str>,
    ) -> PyResult<WorkQueue> {
        let core = self.core()?.clone();
        let mut options = WorkQueueOptions::default();
        if let Some(t) = visibility_timeout {
            options.visibility_timeout = time::timeout_arg(Some(t), "visibility_timeout")?
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    PyValueError::new_err(
                        "visibility_timeout must be a finite number of seconds > 0",
                    )
                })?;
        }
        options.max_deliveries = u8::try_from(max_deliveries)
            .ok()
            .filter(|&m| m > 0)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "max_deliveries must be 1 to 255, got {max_deliveries}"
                ))
            })?;
        if let Some(w) = window {
            options.window = w;
        }
        options.priority = priority;
        options.ordered_by_key = match ordered_by {
            None => false,
            Some("key") => true,
            Some(other) => {
                return Err(PyValueError::new_err(format!(
                    "ordered_by must be \"key\" or None, got {other:?}"
                )))
            }
        };
        options.dead_letter_expired = dead_letter_expired;
        // `inf` (or any wait too long for a Duration): no bound.
        options.max_wait = time::timeout_arg(Some(time::Seconds(max_wait)), "max_wait")?;
        options.start_seq = match Arg::opt(start)?.map_or(crate::Start::Beginning, |StartAt(s)| s) {
            crate::Start::Beginning => None,
            crate::Start::End => Some(exit::detach(py, || {
                core.queue.wait_visible().map(|()| core.queue.next_seq())
            })?),
            crate::Start::Seq(s) => Some(s),
        };
        options.dead_letter = match Arg::opt(dead_letter)? {
            None => None,
            Some(d) => {
                let queue = self.queue()?;
                let schema = queue.schema_versions().and_then(|v| v.current().cloned());
                Some(d.sink(py, queue.encryption_key(), schema)?)
            }
        };
        let queue = &core.queue;
        let wq = exit::detach(py, || queue.work_queue(name, options))?;
        let watch = core.queue.tail_watch();
        let next_seq: work_queue::NextSeq = Box::new(move || {
            core.queue.wait_visible()?;
            Ok(core.queue.next_seq())
        });
        Ok(WorkQueue::new(wq, next_seq, watch, self.path.clone()))
    }

    /// Every work queue with its figures, each a `litemq.WorkQueueInfo`
    /// (`litemq.Queue.work_queues`).
    fn _work_queues<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let queue = self.queue()?;
        let infos = exit::detach(py, || {
            queue.wait_visible().and_then(|()| queue.work_queues())
        })?;
        infos.iter().map(|i| results::work_queue(py, i)).collect()
    }

    /// Work queue `name`'s jobs handed out and not finished, as dicts
    /// (`litemq wq PATH pending NAME`; see `WorkQueue.pending`).
    #[pyo3(signature = (name, limit=None))]
    fn _work_queue_pending<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let queue = self.queue()?;
        let jobs = exit::detach(py, || {
            queue.work_queue_pending(name, limit.unwrap_or(usize::MAX))
        })?;
        work_queue::pending_list(py, &jobs)
    }

    /// Every topic stream with its count and range, each a
    /// `litemq.TopicInfo` (`litemq.Queue.topics`).
    fn _topics<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let queue = self.queue()?;
        let infos = exit::detach(py, || queue.topics())?;
        infos.iter().map(|i| results::topic(py, i)).collect()
    }

    /// Forgets work queue `name` (removes its state file), so that it no
    /// longer holds back retention. Returns whether it existed. Handles
    /// still open go on with the removed file: close them first.
    fn remove_work_queue(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        let queue = self.queue()?;
        Ok(exit::detach(py, || queue.remove_work_queue(name))?)
    }

    /// Every named tailer with its committed position and lag, each a
    /// `litemq.ConsumerInfo` (`litemq.Queue.consumers`).
    fn _consumers<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let queue = self.queue()?;
        // Read-your-writes: lag counts what this process appended.
        let infos = exit::detach(py, || queue.wait_visible().and_then(|()| queue.consumers()))?;
        infos.iter().map(|i| results::consumer(py, i)).collect()
    }

    /// The first sequence whose message was written at or after `when` (a
    /// timezone-aware datetime, or µs since the epoch), or `next_seq` when
    /// there is none yet: Kafka's offsetsForTimes. Timestamps never
    /// decrease within a queue, so `seq_for_time(a)` up to `seq_for_time(b)`
    /// are the messages written in `[a, b)`.
    ///
    /// >>> q.seq_for_time(datetime(2026, 1, 1, tzinfo=timezone.utc))
    /// 0
    fn seq_for_time(&self, py: Python<'_>, when: Arg<Micros<name::When>>) -> PyResult<u64> {
        let Micros(micros, _) = when.get()?;
        let queue = self.queue()?;
        // Read-your-writes: what this process appended counts.
        Ok(exit::detach(py, || {
            queue
                .wait_visible()
                .and_then(|()| queue.seq_for_time(micros))
        })?)
    }

    /// Forgets the named tailer `name` (it must not be open anywhere), so
    /// that it no longer holds back retention. Returns whether it existed.
    ///
    /// >>> q.remove_consumer("billing")
    /// True
    fn remove_consumer(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        let queue = self.queue()?;
        Ok(exit::detach(py, || queue.remove_consumer(name))?)
    }

    /// Runs a retention pass with `policy` (None: the queue's own) and
    /// returns its `litemq.RetentionReport` (`litemq.Queue.apply_retention`).
    #[pyo3(signature = (policy=None))]
    fn _apply_retention<'py>(
        &self,
        py: Python<'py>,
        policy: Option<Arg<options::Retention<name::Policy>>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let queue = self.queue()?;
        let report = match Arg::opt(policy)? {
            Some(options::Retention(p, _)) => exit::detach(py, || queue.apply_retention_with(&p))?,
            None => exit::detach(py, || queue.apply_retention())?,
        };
        results::retention(py, &report)
    }

    /// Runs a key-compaction pass (`litemq.Queue.compact` wraps it): tombstones
    /// that are their key's latest message go once `grace_us` old. Returns
    /// its `litemq.CompactReport`. `progress`, when given, is called with
    /// `(files done, files)` (an exception it raises is reported when the
    /// pass is over; the pass itself completes).
    #[pyo3(signature = (grace_us, progress=None))]
    fn _compact<'py>(
        &self,
        py: Python<'py>,
        grace_us: u64,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let queue = self.queue()?;
        let opts = crate::CompactOptions {
            grace_us,
            ..Default::default()
        };
        let mut failed: Option<PyErr> = None;
        let report = exit::detach(py, || {
            queue.compact(&opts, &mut |done, total| {
                if let (Some(cb), None) = (&progress, &failed) {
                    Python::attach(|py| {
                        if let Err(e) = cb.call1(py, (done, total)) {
                            failed = Some(e);
                        }
                    });
                }
            })
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        results::compact(py, &report)
    }

    /// Deletes the oldest data files whose messages all lie below `before`
    /// (never the last file, never one a named tailer has not consumed) and
    /// returns the report as a dict, like `_apply_retention`; for
    /// `litemq archive --delete-local`.
    fn _delete_files_before<'py>(
        &self,
        py: Python<'py>,
        before: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let queue = self.queue()?;
        let report = exit::detach(py, || queue.delete_files_before(before))?;
        results::retention_dict(py, &report)
    }

    /// The data files, oldest first, each a `litemq.DataFileInfo`
    /// (`litemq.Queue.data_files`).
    fn _data_files<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let queue = self.queue()?;
        let files = exit::detach(py, || {
            queue.wait_visible().and_then(|()| queue.data_files())
        })?;
        files.iter().map(|f| results::data_file(py, f)).collect()
    }

    /// The message with sequence `seq` (NotFoundError, an IndexError, if the
    /// queue does not hold it; ValueError outside 0..2**64 - 1; CorruptedError
    /// if it does but damage on disk is in the way).
    ///
    /// >>> q.get(42).seq
    /// 42
    fn get(&self, py: Python<'_>, seq: Arg<SeqNum<name::Seq>>) -> PyResult<Message> {
        let SeqNum(seq, _) = seq.get()?;
        // Built from the frame in place: one copy of the payload.
        self.queue()?
            .get_with(seq, |m| Message::from_borrowed(py, m))?
    }

    /// The last message appended with `key` (through the key index), or
    /// None when there is none or the last one is a tombstone
    /// (`Appender.delete(key)`): the key's latest value, as a compacted
    /// Kafka topic reads it. Members of batches compressed together count
    /// by their own sequence.
    ///
    /// >>> q.get_latest("customer-7").payload
    /// b'order 12'
    fn get_latest(&self, py: Python<'_>, key: Arg<Key>) -> PyResult<Option<Message>> {
        let queue = self.queue()?;
        let Key(key) = key.get()?;
        let found = exit::detach(py, || queue.get_latest(&key))?;
        found.map(|m| Message::from_owned(py, m)).transpose()
    }

    /// Messages whose key is exactly `key`, in sequence order, written in
    /// `[start, end)` (aware datetimes or µs since the epoch), at most
    /// `limit` (>= 0; None: all). Answered from the key index. A `str` key
    /// matches the same messages as its UTF-8 bytes. CorruptedError if the
    /// index points into a data file missing from the middle of the queue.
    /// With `topic` (and optionally `queue_id` and `tags`, as in `tailer`),
    /// only the messages of that topic (stream; carrying any of the tags)
    /// with that key, each compared exactly; `limit` counts those. Members
    /// of batches compressed together (`append_batch(...,
    /// compress_together=True)`) with the key are found too.
    ///
    /// >>> [m.seq for m in q.find("customer-7")]
    /// [0, 12]
    /// >>> [m.seq for m in q.find("customer-7", topic="refunds")]
    /// [12]
    #[pyo3(signature = (key, start=None, end=None, limit=None, *, topic=None, tags=None, queue_id=None))]
    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the Python keyword arguments"
    )]
    fn find(
        &self,
        py: Python<'_>,
        key: Arg<Key>,
        start: Option<Arg<Micros<name::Start>>>,
        end: Option<Arg<Micros<name::End>>>,
        limit: Option<Arg<Limit>>,
        topic: Option<String>,
        tags: Option<Arg<Tags>>,
        queue_id: Option<Arg<QueueId>>,
    ) -> PyResult<Vec<Message>> {
        let queue = self.queue()?;
        let Key(key) = key.get()?;
        let selector = topic::selector_arg(topic, tags, queue_id)?;
        let (start, end, limit) = range_args(start, end, limit)?;
        let found = exit::detach(py, || match &selector {
            Some(s) => queue.find_in_topic(&key, s, start, end, limit),
            None => queue.find(&key, start, end, limit),
        })?;
        found
            .into_iter()
            .map(|m| Message::from_owned(py, m))
            .collect()
    }

    /// The declared secondary indexes: header name to type ("str" or
    /// "int").
    ///
    /// >>> q.indexes
    /// {'customer': 'str'}
    #[getter]
    fn indexes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        fields::indexes_dict(py, &self.queue()?.indexes())
    }

    /// Declares a secondary index on header `name` ("str": text headers;
    /// "int": a text header holding a signed 64-bit integer in decimal, or
    /// a bytes header of 8 bytes little-endian) and builds it now for every
    /// sealed data file; remembered in metadata.json. Returns how many
    /// sealed files have the index afterwards. Declaring an index again with
    /// the same type builds only what is missing; with another type raises
    /// ConfigError. `type` defaults to "str".
    ///
    /// On a typed queue, an index named like a schema field (or an alias of
    /// one) indexes that field's values, read from the rows (in batches
    /// too; nulls are not listed), for `where` on it: `type` is then the
    /// field's ("str" for string and binary, "int" for bool, integer,
    /// timestamp and date fields; another one raises SchemaError, as does
    /// a float, decimal or uint64 field, which have no index).
    ///
    /// >>> q.add_index("customer", "str")
    /// 3
    /// `progress`, when given, is called with `(files done, files)` after
    /// each sealed file (an exception it raises is reported when the build
    /// is over; the index is declared and built all the same).
    #[pyo3(
        signature = (name, r#type=None, *, progress=None),
        text_signature = "(self, /, name, type=None, *, progress=None)"
    )]
    fn add_index(
        &self,
        py: Python<'_>,
        name: &str,
        r#type: Option<&str>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<usize> {
        let queue = self.queue()?;
        let field_kind = queue.schema_versions().and_then(|v| {
            let c = v.current()?;
            c.fields[c.find(name)?].ty.index_kind()
        });
        let kind = r#type.unwrap_or(field_kind.map_or("str", |k| k.name()));
        let def = crate::FieldIndexDef::new(name, kind)?;
        let mut failed: Option<PyErr> = None;
        let wrote = exit::detach(py, || {
            queue.add_index(def, &mut |done, total| {
                if let (Some(cb), None) = (&progress, &failed) {
                    Python::attach(|py| {
                        if let Err(e) = cb.call1(py, (done, total)) {
                            failed = Some(e);
                        }
                    });
                }
            })
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(wrote),
        }
    }

    /// Forgets the secondary index on header `name` and deletes its index
    /// files (the declaration leaves metadata.json first, then the files go:
    /// a crash in between leaves files nobody reads, deleted with their data
    /// file or by dropping the name again). Returns how many index files it
    /// deleted. `where` on the field then raises ValueError until the index
    /// is added again (which builds it anew). A name neither declared nor
    /// with files left raises ValueError; a read-only handle ReadOnlyError.
    ///
    /// >>> q.drop_index("customer")
    /// 3
    fn drop_index(&self, py: Python<'_>, name: &str) -> PyResult<usize> {
        let queue = self.queue()?;
        Ok(exit::detach(py, || queue.drop_index(name))?)
    }

    /// Every secondary index file of every sealed data file as dicts of
    /// `file`, `field` and `state` ("ok", "missing", "damaged"), for
    /// `litemq verify`.
    fn _check_indexes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let queue = self.queue()?;
        let found = exit::detach(py, || queue.check_indexes())?;
        let list = PyList::empty(py);
        for (file, field, state) in found {
            let d = PyDict::new(py);
            d.set_item("file", file.display().to_string())?;
            d.set_item("field", field)?;
            d.set_item(
                "state",
                match state {
                    crate::IndexState::Valid => "ok",
                    crate::IndexState::Missing => "missing",
                    crate::IndexState::Damaged => "damaged",
                },
            )?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// Messages whose header `field` (a declared index) satisfies `op`:
    /// "=" `value`, "between" `(low, high)` (both included), "in" a list of
    /// values, ">=" / "<=" a bound (included), "prefix" (str indexes) — in
    /// sequence order, written in
    /// `[start, end)` (aware datetimes or µs since the epoch), at most
    /// `limit`. Sealed files are read through their index (a file whose
    /// min/max excludes the query is skipped unread); the active file
    /// through an in-memory index this handle extends at each query; files
    /// whose index is missing or damaged are scanned. Every message returned
    /// is checked against the query.
    ///
    /// >>> [m.seq for m in q.where("customer", "=", "c7")]
    /// [0, 12]
    #[pyo3(name = "where", signature = (field, op, value, *, start=None, end=None, limit=None))]
    #[expect(
        clippy::too_many_arguments,
        reason = "one argument per keyword of Queue.where"
    )]
    fn where_(
        &self,
        py: Python<'_>,
        field: &str,
        op: &str,
        value: &Bound<'_, PyAny>,
        start: Option<Arg<Micros<name::Start>>>,
        end: Option<Arg<Micros<name::End>>>,
        limit: Option<Arg<Limit>>,
    ) -> PyResult<Vec<Message>> {
        let queue = self.queue()?;
        let Some(def) = queue.indexes().into_iter().find(|d| d.name == field) else {
            return Err(PyValueError::new_err(format!(
                "no index on {field:?}: declare it with q.add_index({field:?}, \"str\") \
                 or Queue(..., indexes={{{field:?}: \"str\"}})"
            )));
        };
        let query = fields::query_arg(def, op, value)?;
        let (start, end, limit) = range_args(start, end, limit)?;
        let found = exit::detach(py, || queue.query_field(query, start, end, limit))?;
        found
            .into_iter()
            .map(|m| Message::from_owned(py, m))
            .collect()
    }

    /// Sequence number of the oldest message held.
    ///
    /// >>> q.first_seq, q.next_seq, len(q)
    /// (0, 3, 3)
    #[getter]
    fn first_seq(&self) -> PyResult<u64> {
        Ok(self.open_queue()?.first_seq())
    }

    /// Sequence number the next appended message gets.
    #[getter]
    fn next_seq(&self) -> PyResult<u64> {
        Ok(self.open_queue()?.next_seq())
    }

    /// The queue's directory.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// The queue's id: 32 lowercase hex digits (``queue_id`` in
    /// metadata.json), drawn when the queue was created and kept for good,
    /// by copies and restores too. None only for a read-only handle of a
    /// queue no writer of this version has opened yet.
    ///
    /// >>> len(q.queue_id)
    /// 32
    #[getter]
    fn queue_id(&self) -> PyResult<Option<String>> {
        Ok(self.queue()?.queue_id())
    }

    /// Whether the queue was opened with read_only=True.
    #[getter]
    fn read_only(&self) -> bool {
        self.read_only
    }

    /// The messages the queue keeps: `next_seq - first_seq` less the
    /// sequences key compaction's holes stand for (the messages a tailer
    /// reads from `first_seq`).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let q = self.open_queue()?;
        Ok(exit::detach(py, || q.len()) as usize)
    }

    /// A typed queue's schema versions as metadata.json's `schema` object
    /// (JSON text); None for an untyped queue.
    fn _schema_json(&self) -> PyResult<Option<String>> {
        Ok(self
            .queue()?
            .schema_versions()
            .map(|v| v.to_json_value().to_string()))
    }

    /// A typed queue's columns of messages `[start, end)`, at most
    /// `max_rows`, for `litemq.Queue.read_arrow`: `rows`, `next` (the
    /// sequence to read on from), `seq` and `timestamp` (i64 words), and
    /// `columns`, one `(validity or None, data, offsets or None)` per field
    /// named in `fields`, in Arrow's layout, handed over without a copy.
    fn _read_typed<'py>(
        &self,
        py: Python<'py>,
        start: u64,
        end: u64,
        max_rows: usize,
        fields: Vec<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let queue = self.queue()?;
        let b = exit::detach(py, || queue.read_typed(start, end, max_rows, Some(&fields)))?;
        super::typed::typed_columns(py, b)
    }

    /// `_read_typed`'s columns of the rows of sequences `seqs` (ascending:
    /// what `_typed_where` returned), for `litemq.Queue.read_arrow` with
    /// `where` on an indexed field (`Queue::read_typed_seqs`).
    fn _read_typed_seqs<'py>(
        &self,
        py: Python<'py>,
        seqs: Vec<u64>,
        fields: Vec<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        if seqs.windows(2).any(|w| w[0] >= w[1]) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "seqs must be strictly ascending",
            ));
        }
        let queue = self.queue()?;
        let b = exit::detach(py, || queue.read_typed_seqs(&seqs, Some(&fields)))?;
        super::typed::typed_columns(py, b)
    }

    /// The sequences in `[start, end)` of a typed queue's messages whose
    /// schema field `field` satisfies `op` `value` (`Queue::typed_where`:
    /// only that field is decoded), for `litemq.Queue.where`.
    fn _typed_where(
        &self,
        py: Python<'_>,
        field: &str,
        op: &str,
        value: &Bound<'_, PyAny>,
        start: u64,
        end: u64,
    ) -> PyResult<Vec<u64>> {
        let queue = self.queue()?;
        let pred = self.typed_predicate(py, field, op, value)?;
        Ok(exit::detach(py, || queue.typed_where(&pred, start, end))?)
    }

    /// `_typed_where` when an index declared on the field answers the
    /// comparison exactly, else `None` with nothing read
    /// (`Queue::typed_where_indexed`), for `litemq.Queue.read_arrow` with
    /// `where`.
    fn _typed_where_indexed(
        &self,
        py: Python<'_>,
        field: &str,
        op: &str,
        value: &Bound<'_, PyAny>,
        start: u64,
        end: u64,
    ) -> PyResult<Option<Vec<u64>>> {
        let queue = self.queue()?;
        let pred = self.typed_predicate(py, field, op, value)?;
        Ok(exit::detach(py, || {
            queue.typed_where_indexed(&pred, start, end)
        })?)
    }

    /// Counters and sizes, a `litemq.Stats` (`litemq.Queue.stats`).
    fn _stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        results::stats(py, &self.open_queue()?.stats())
    }

    /// Columns of messages `[start, end)` in Arrow layout, at most
    /// `max_rows`; used by `litemq.Queue.read_arrow`. `columns` names the
    /// columns to fill (`None`: all), `raw` keeps payloads as stored;
    /// `topic`, `tags` and `queue_id` keep only that topic's messages (as
    /// `tailer(topic=...)`). `fields` adds a column per declared index
    /// named (the header's first value the index would index); `where_`,
    /// `(field, op, value)` as for `where`, keeps only the messages where
    /// it holds (not with a topic). The dict's `next` is the sequence to
    /// read on from (past any holes key compaction left).
    #[pyo3(signature = (start, end, max_rows, columns=None, raw=false, topic=None, tags=None, queue_id=None, fields=None, where_=None))]
    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the Python caller's keyword arguments"
    )]
    fn _read_batch<'py>(
        &self,
        py: Python<'py>,
        start: u64,
        end: u64,
        max_rows: usize,
        columns: Option<Vec<String>>,
        raw: bool,
        topic: Option<String>,
        tags: Option<Arg<Tags>>,
        queue_id: Option<Arg<QueueId>>,
        fields: Option<Vec<String>>,
        where_: Option<(String, String, Bound<'py, PyAny>)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let queue = self.queue()?;
        let cols = super::batch::column_set(columns, raw)?;
        let selector = topic::selector_arg(topic, tags, queue_id)?;
        let declared = queue.indexes();
        let declared_def = |name: &str| {
            declared
                .iter()
                .find(|d| d.name == name)
                .cloned()
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "no index on {name:?}: declare it with q.add_index({name:?}, \"str\") \
                         or Queue(..., indexes={{{name:?}: \"str\"}})"
                    ))
                })
        };
        let defs = fields
            .unwrap_or_default()
            .iter()
            .map(|n| declared_def(n))
            .collect::<PyResult<Vec<_>>>()?;
        let query = match &where_ {
            Some((field, op, value)) => Some(fields::query_arg(declared_def(field)?, op, value)?),
            None => None,
        };
        if selector.is_some() && query.is_some() {
            return Err(PyValueError::new_err(
                "read_arrow takes a topic filter or where, not both in one read",
            ));
        }
        let (b, next) = exit::detach(py, || match selector {
            Some(s) => queue.read_column_selected((start, end, max_rows), cols, s, &defs),
            None => queue.read_field_columns(query, start, end, max_rows, cols, &defs),
        })?;
        let d = PyDict::new(py);
        super::batch::fill_columns(&d, b)?;
        d.set_item("next", next)?;
        Ok(d)
    }

    /// Writes and flushes everything, stops the I/O thread, releases the
    /// writer lock and closes every tailer and named tailer made from the
    /// queue (named tailers without committing; close them first to commit
    /// with auto_commit): their files are unmapped and their names free
    /// when this returns, and a call blocked in `follow()` or `read_next`
    /// wakes with ClosedError. Idempotent; later calls on the queue and its
    /// tailers and appenders raise ClosedError. A poisoned writer is closed
    /// all the same, then its PoisonedError is raised.
    ///
    /// >>> q.close()
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.core()?.close(py)
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(self.queue()?.is_closed())
    }

    fn __repr__(&self) -> String {
        match self.queue() {
            Ok(q) if q.is_closed() => format!("litemq.Queue({:?}) (closed)", self.path),
            Ok(q) => format!(
                "litemq.Queue({:?}, first_seq={}, next_seq={}{})",
                self.path,
                q.first_seq(),
                q.next_seq(),
                if self.read_only {
                    ", read_only=True"
                } else {
                    ""
                }
            ),
            Err(_) => format!("litemq.Queue({:?}) (from parent process)", self.path),
        }
    }
}

/// Declares a schema that differs from the queue's current one now rather
/// than at the first write (the engine's writer declares it when it starts):
/// an incompatible one raises `SchemaError` from `Queue(...)`, and a new
/// version is what `schema` shows from the open on. Declaring is a write:
/// the handle takes the writer lock here.
fn declare_now(py: Python<'_>, queue: &crate::Queue, json: &str) -> PyResult<()> {
    let declared = super::typed::parse_new(json)?;
    let current = queue.schema_versions();
    let same = current
        .as_ref()
        .and_then(|v| v.current())
        .is_some_and(|c| c.same_fields(&declared));
    if same {
        return Ok(());
    }
    if let Some(v) = &current {
        // Refused before the writer starts (and locks): the reason names the field.
        v.declare(&declared).map_err(crate::Error::from)?;
    }
    exit::detach(py, || queue.appender().map(drop))?;
    Ok(())
}

/// `dead_letter=`: where dead-lettered jobs go, a directory (opened as a
/// queue for several writer processes) or an open `litemq.Queue`.
enum DeadLetter<'py> {
    Queue(Bound<'py, Queue>),
    Path(PathBuf),
}

impl<'a, 'py> FromPyObject<'a, 'py> for DeadLetter<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(q) = obj.cast::<Queue>() {
            return Ok(DeadLetter::Queue(q.to_owned()));
        }
        obj.extract()
            .map(DeadLetter::Path)
            .map_err(|_| PyTypeError::new_err("dead_letter must be None, a path or a litemq.Queue"))
    }
}

impl DeadLetter<'_> {
    /// The sink: the queue's appender, or the directory opened with the
    /// source queue's encryption `key` and `schema` if it has them.
    fn sink(
        self,
        py: Python<'_>,
        key: Option<[u8; 32]>,
        schema: Option<crate::format::typed::Schema>,
    ) -> PyResult<DeadLetterSink> {
        match self {
            DeadLetter::Queue(q) => {
                let appender = q.get().open_queue()?.appender()?;
                Ok(Arc::new(move |record: &crate::Record<'_>| {
                    appender.append_record(record)?;
                    appender.flush()
                }))
            }
            DeadLetter::Path(path) => Ok(exit::detach(py, || {
                crate::Queue::dead_letter_sink_with_key(&path, key, schema)
            })?),
        }
    }
}
