//! `Tailer` (a reader position, itself the iterator) and `Follow` (the
//! blocking iterator from `Tailer.follow()`). A named tailer
//! (`consumer.rs`) is a Python subclass of `Tailer` whose reader is an
//! engine `Consumer` instead of a plain `Tailer`: see [`Reader`].

use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::aio::Notifier;
use super::args::{name, type_name, Arg, Micros, SeqNum};
use super::errors;
use super::exit;
use super::fork::ForkSafe;
use super::message::Message;
use super::time;
use crate::reader::tailer::{OnMismatch, RunFrame};

/// What a Python tailer reads with: a plain engine tailer, or a named
/// consumer (a tailer whose position persists).
pub(crate) enum Reader {
    Plain(Plain),
    Named(crate::Consumer),
    /// Newest first (`direction="backward"`): never waits.
    Backward(crate::BackwardTailer),
}

/// A plain engine tailer, and the messages `__next__` read ahead with it.
///
/// `__next__` reads a run of messages at a time (`crate::Tailer::read_run_frames`:
/// one tight loop over the frames of a file, each checked as any read
/// checks it) and hands them out one per call. The engine tailer then
/// stands after the run; everything else that reads or moves it, or tells
/// where it is, goes through [`Plain::settled`], which gives back the
/// messages not handed out first: to the user the position is always that
/// of the last message `__next__` returned.
pub(crate) struct Plain {
    tailer: crate::Tailer,
    /// Read and checked, not handed out yet: the next one last.
    ahead: Vec<Py<Message>>,
    /// How many messages the next run may read.
    run: usize,
}

/// The first run's length: a tailer read with a single `next()` (then
/// moved) builds few messages for nothing.
const FIRST_RUN: usize = 8;

/// The longest run: the run's setup, and the engine's checks of a read,
/// are paid once per this many messages.
const MAX_RUN: usize = 128;

/// A run stops once its records reach this many bytes, so that a tailer
/// of large messages does not hold many of them ahead.
const RUN_BYTES: usize = 64 << 10;

impl Plain {
    pub(crate) fn new(tailer: crate::Tailer) -> Plain {
        Plain {
            tailer,
            ahead: Vec::new(),
            run: FIRST_RUN,
        }
    }

    /// The engine tailer, standing at the first message not handed out.
    fn settled(&mut self) -> &mut crate::Tailer {
        if let Some(first) = self.ahead.last() {
            let first = first.get();
            self.tailer.rewind_run(first.seq(), first.frame_at());
            self.ahead.clear();
            self.run = FIRST_RUN;
        }
        &mut self.tailer
    }

    /// The sequence the next read returns.
    fn next_seq(&self) -> u64 {
        self.ahead
            .last()
            .map_or_else(|| self.tailer.next_seq(), |m| m.get().seq())
    }

    /// The next message for `__next__`: the next one read ahead, or, with
    /// none left, the first of a new run, or (where no run can start: the
    /// end of the data or of a file, a filter, a compressed, encrypted or
    /// batched message, a hole, a tombstone) one read alone.
    #[inline]
    fn next(&mut self, py: Python<'_>) -> PyResult<Option<Py<Message>>> {
        match self.ahead.pop() {
            Some(m) => Ok(Some(m)),
            None => self.read(py),
        }
    }

    /// [`Plain::next`] with nothing read ahead.
    #[inline(never)]
    fn read(&mut self, py: Python<'_>) -> PyResult<Option<Py<Message>>> {
        if let Some(m) = self.read_ahead(py) {
            return Ok(Some(m));
        }
        match self.tailer.read_next() {
            Ok(Some(m)) => Ok(Some(Py::new(py, Message::from_borrowed(py, &m)?)?)),
            Ok(None) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The next message read ahead, reading a run when none is left and
    /// one can start; `None` when the message is to be read alone.
    fn next_ahead(&mut self, py: Python<'_>) -> Option<Py<Message>> {
        self.ahead.pop().or_else(|| self.read_ahead(py))
    }

    /// Reads a run, when one can start, into `ahead`, and takes its first
    /// message. A run that fails, or a message that does not convert, ends
    /// it before that message, which the caller then reads alone and so
    /// reports as a read of it always did.
    fn read_ahead(&mut self, py: Python<'_>) -> Option<Py<Message>> {
        // Sized by the first record, so that a run of large messages stops
        // before the frame that would pass `RUN_BYTES` is checked, not after.
        let first = self.tailer.run_start()?;
        let max = (RUN_BYTES / first.max(1)).clamp(1, self.run);
        let mut bytes = 0usize;
        let ahead = &mut self.ahead;
        let taken = self
            .tailer
            .read_run_frames(max, OnMismatch::CheckFrames, &mut |f| {
                if bytes >= RUN_BYTES {
                    return false;
                }
                bytes += f.record.len();
                // `run_message` spelled out: called here (inlined even so),
                // iteration measured 2-3 % slower (benches/read_path_bench.py,
                // alternating builds), its `Option<PyResult<_>>` going through
                // memory.
                let msg = match f.bare() {
                    Some(b) => Message::bare(py, f.seq, &b, f.mapping(), f.offset()),
                    None => match f.message().map(|m| Message::from_borrowed(py, &m)) {
                        Some(Ok(msg)) => msg,
                        Some(Err(_)) | None => return false,
                    },
                };
                match Py::new(py, msg) {
                    Ok(msg) => {
                        ahead.push(msg);
                        true
                    }
                    Err(_) => false,
                }
            });
        if taken.is_ok_and(|n| n > 0) {
            self.run = (self.run * 2).min(MAX_RUN);
        }
        self.ahead.reverse();
        self.ahead.pop()
    }
}

/// The `Message` of a frame a run read; `None` when the frame is not
/// plain (the run stops before it).
// Inlined: returned through memory, the 80-byte value was read back in
// wider loads than it was written with, a store-forwarding stall per
// message (`perf annotate` of the run loop).
#[inline(always)]
fn run_message(py: Python<'_>, f: &RunFrame<'_>) -> Option<PyResult<Message>> {
    match f.bare() {
        Some(b) => Some(Ok(Message::bare(py, f.seq, &b, f.mapping(), f.offset()))),
        None => f.message().map(|m| Message::from_borrowed(py, &m)),
    }
}

impl Reader {
    fn read_next(&mut self) -> crate::Result<Option<crate::Message<'_>>> {
        match self {
            Reader::Plain(p) => p.settled().read_next(),
            Reader::Named(c) => c.read_next(),
            Reader::Backward(b) => b.read_next(),
        }
    }

    fn read_next_until(
        &mut self,
        timeout: Duration,
        interrupt: &mut dyn FnMut() -> bool,
    ) -> crate::Result<Option<crate::Message<'_>>> {
        match self {
            Reader::Plain(p) => p.settled().read_next_until(timeout, interrupt),
            Reader::Named(c) => c.read_next_until(timeout, interrupt),
            // Nothing older is ever written: there is nothing to wait for.
            Reader::Backward(b) => b.read_next(),
        }
    }

    /// A run of frames of one file read in bulk (plain tailers; a named
    /// tailer reads one at a time, `take`ing none here).
    fn read_run_frames(
        &mut self,
        max: usize,
        take: &mut dyn FnMut(&RunFrame<'_>) -> bool,
    ) -> crate::Result<usize> {
        match self {
            Reader::Plain(p) => p
                .settled()
                .read_run_frames(max, OnMismatch::CheckFrames, take),
            Reader::Named(_) | Reader::Backward(_) => Ok(0),
        }
    }

    fn seek(&mut self, seq: u64) -> crate::Result<()> {
        match self {
            Reader::Plain(p) => p.settled().seek(seq),
            Reader::Named(c) => c.seek(seq),
            Reader::Backward(b) => b.seek(seq),
        }
    }

    fn seek_time(&mut self, micros: u64) -> crate::Result<()> {
        match self {
            Reader::Plain(p) => p.settled().seek_time(micros),
            Reader::Named(c) => c.seek_time(micros),
            Reader::Backward(b) => b.seek_time(micros),
        }
    }

    fn seek_topic_offset(&mut self, offset: u64) -> crate::Result<()> {
        match self {
            Reader::Plain(p) => p.settled().seek_topic_offset(offset),
            Reader::Named(c) => c.seek_topic_offset(offset),
            Reader::Backward(_) => Err(crate::Error::InvalidArgument(
                "seeking by topic offset needs a topic tailer (q.tailer(topic=...))".into(),
            )),
        }
    }

    fn seek_end(&mut self) -> crate::Result<()> {
        match self {
            Reader::Plain(p) => p.settled().seek_end(),
            Reader::Named(c) => c.seek_end(),
            Reader::Backward(b) => b.seek_end(),
        }
    }

    fn skip_damaged(&mut self) -> crate::Result<bool> {
        match self {
            Reader::Plain(p) => p.settled().skip_damaged(),
            Reader::Named(c) => c.skip_damaged(),
            Reader::Backward(b) => b.skip_damaged(),
        }
    }

    /// The sequence the next read returns (a backward tailer past its
    /// oldest message: -1 below it).
    fn next_seq(&self) -> i128 {
        match self {
            Reader::Plain(p) => i128::from(p.next_seq()),
            Reader::Named(c) => i128::from(c.next_seq()),
            Reader::Backward(b) => b.next_seq().map_or(-1, i128::from),
        }
    }

    fn is_backward(&self) -> bool {
        matches!(self, Reader::Backward(_))
    }
}

/// A tailer's reader: `None` once closed, by the tailer or by its queue
/// (which keeps a weak reference, see `open_queues::Core`).
pub(crate) type ReaderSlot = Mutex<Option<Reader>>;

/// Longest single wait handed to the engine when waiting "forever"; the loop
/// around it makes the wait unbounded.
const FOREVER_CHUNK: Duration = Duration::from_secs(3600);

/// A reader position in a queue; get one from `Queue.tailer()`.
///
/// Iterating a tailer yields every message available now, then stops; later
/// iterations continue where it left off. `read_next(timeout=...)` and
/// `follow()` wait for new messages. Blocking waits release the GIL and
/// return within about 100 ms of Ctrl-C (KeyboardInterrupt). Closing the
/// queue closes its tailers: a blocked wait wakes with ClosedError.
///
/// >>> t = q.tailer()
/// >>> [m.payload for m in t]
/// [b'a', b'b']
/// >>> t.read_next(timeout=1.0) is None     # nothing new within 1 s
/// True
#[pyclass(frozen, subclass, module = "litemq", name = "Tailer")]
pub(crate) struct Tailer {
    /// `None` once closed. The mutex makes a tailer usable from several
    /// threads; it is only ever waited on with the GIL released.
    inner: ForkSafe<Arc<ReaderSlot>>,
    path: String,
    /// The queue handle's tail watch, for waits without a thread (asyncio).
    watch: crate::TailWatch,
}

impl Tailer {
    pub(crate) fn new(inner: Reader, path: String, watch: crate::TailWatch) -> Self {
        Tailer {
            inner: ForkSafe::new(Arc::new(Mutex::new(Some(inner)))),
            path,
            watch,
        }
    }

    /// Names this tailer's registrations in the tail watch.
    fn owner(&self) -> usize {
        self.inner
            .get()
            .map_or(0, |slot| Arc::as_ptr(slot) as usize)
    }

    /// A weak reference to the reader, for the queue's `close()`.
    pub(crate) fn slot(&self) -> Weak<ReaderSlot> {
        match self.inner.get() {
            Ok(slot) => Arc::downgrade(slot),
            Err(_) => Weak::new(),
        }
    }

    /// The queue's directory.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Locks the tailer without ever blocking while holding the GIL.
    #[inline(always)]
    pub(crate) fn lock<'a>(&'a self, py: Python<'_>) -> PyResult<MutexGuard<'a, Option<Reader>>> {
        if let Ok(guard) = self.inner.get()?.try_lock() {
            return Ok(guard);
        }
        self.lock_contended(py)
    }

    /// [`Tailer::lock`] when the lock is held or poisoned.
    #[inline(never)]
    fn lock_contended<'a>(&'a self, py: Python<'_>) -> PyResult<MutexGuard<'a, Option<Reader>>> {
        let mutex = self.inner.get()?;
        loop {
            match mutex.try_lock() {
                Ok(guard) => return Ok(guard),
                Err(TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
                // At exit its holder may be a daemon thread parked for good
                // (see `exit`): the finalizing thread must not wait for it.
                Err(TryLockError::WouldBlock) if exit::exiting() && !exit::exiting_elsewhere() => {
                    return Err(errors::closed())
                }
                Err(TryLockError::WouldBlock) => exit::detach(py, || drop(mutex.lock())),
            }
        }
    }

    /// Runs `f` on the open tailer.
    pub(crate) fn with<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Reader) -> PyResult<R>,
    ) -> PyResult<R> {
        let mut guard = self.lock(py)?;
        let tailer = guard.as_mut().ok_or_else(errors::closed)?;
        f(tailer)
    }

    /// The next message, waiting up to `timeout` (`None`: forever) with the
    /// GIL released, checking for signals (Ctrl-C) about every 50 ms. The
    /// queue's `close()` wakes it with ClosedError.
    pub(crate) fn wait(
        &self,
        py: Python<'_>,
        timeout: Option<Duration>,
    ) -> PyResult<Option<Py<Message>>> {
        let mut guard = self.lock(py)?;
        let tailer = guard.as_mut().ok_or_else(errors::closed)?;
        // What is there already comes without a wait, read ahead as
        // `__next__` reads it (`follow()` through a backlog).
        if let Reader::Plain(p) = tailer {
            if let Some(m) = p.next_ahead(py) {
                return Ok(Some(m));
            }
        }
        let mut interrupted: Option<PyErr> = None;
        loop {
            let chunk = timeout.unwrap_or(FOREVER_CHUNK);
            let mut check = || {
                // At exit (`None`) the wait gives up: the thread parks.
                exit::attach(|py| match py.check_signals() {
                    Ok(()) => false,
                    Err(e) => {
                        interrupted = Some(e);
                        true
                    }
                })
                .unwrap_or(true)
            };
            let backward = tailer.is_backward();
            let found = exit::detach(py, || tailer.read_next_until(chunk, &mut check));
            if let Some(e) = interrupted.take() {
                return Err(e);
            }
            match found {
                Ok(Some(m)) => return Ok(Some(Py::new(py, Message::from_borrowed(py, &m)?)?)),
                Ok(None) if timeout.is_some() || backward => return Ok(None),
                Ok(None) => {}
                Err(crate::Error::Closed) => {
                    // The queue closed under the wait: let go of the files now.
                    let taken = guard.take();
                    exit::detach(py, || drop(taken));
                    return Err(errors::closed());
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl Tailer {
    /// Appends to `out` the messages available now, up to `max` in all,
    /// each as `item` says (a `Message`, or only its payload).
    /// An error after some messages were read is left for the next call
    /// (the tailer stays at the message that failed).
    fn drain<'py>(
        &self,
        py: Python<'py>,
        max: usize,
        out: &mut Vec<Bound<'py, PyAny>>,
        item: Item,
    ) -> PyResult<()> {
        let mut failed: Option<PyErr> = None;
        self.with(py, |reader| {
            while out.len() < max && failed.is_none() {
                let want = max - out.len();
                let taken = reader.read_run_frames(want, &mut |f| match item.of_frame(py, f) {
                    Some(Ok(m)) => {
                        out.push(m);
                        true
                    }
                    Some(Err(e)) => {
                        failed = Some(e);
                        false
                    }
                    None => false,
                });
                match taken {
                    Ok(0) => {}
                    Ok(_) => continue,
                    Err(e) if out.is_empty() => return Err(e.into()),
                    Err(_) => return Ok(()),
                }
                if failed.is_some() {
                    break;
                }
                let converted = match reader.read_next() {
                    Ok(Some(m)) => {
                        let seq = m.seq;
                        item.of(py, &m).map_err(|e| (e, Some(seq)))
                    }
                    Ok(None) => break,
                    Err(e) => Err((e.into(), None)),
                };
                match converted {
                    Ok(m) => out.push(m),
                    Err((e, _)) if out.is_empty() => return Err(e),
                    Err((e, seq)) => {
                        // Keep what was read; the failing message is read
                        // (and fails) again on the next call.
                        if let Some(seq) = seq {
                            if reader.seek(seq).is_err() {
                                return Err(e);
                            }
                        }
                        break;
                    }
                }
            }
            Ok(())
        })?;
        match failed {
            // A message that did not convert is left unread: with others
            // read before it, they are returned and it fails next time.
            Some(e) if out.is_empty() => Err(e),
            _ => Ok(()),
        }
    }
}

/// What `read_batch` returns of each message.
#[derive(Clone, Copy)]
enum Item {
    /// The `Message`.
    Message,
    /// The payload as `bytes` (copied out of the mapping; decompressed or
    /// opened when it was stored so).
    Payload,
}

impl Item {
    /// The item of a message read alone.
    fn of<'py>(self, py: Python<'py>, m: &crate::Message<'_>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Item::Message => Ok(Bound::new(py, Message::from_borrowed(py, m)?)?.into_any()),
            Item::Payload => Ok(PyBytes::new(py, m.payload).into_any()),
        }
    }

    /// The item of a frame a run read (a bare record read from its bytes);
    /// `None` when the frame is not plain (the run stops before it).
    #[inline]
    fn of_frame<'py>(
        self,
        py: Python<'py>,
        f: &RunFrame<'_>,
    ) -> Option<PyResult<Bound<'py, PyAny>>> {
        match self {
            Item::Message => run_message(py, f).map(|m| Bound::new(py, m?).map(Bound::into_any)),
            Item::Payload => match f.bare() {
                Some(b) => Some(Ok(PyBytes::new(py, b.payload).into_any())),
                None => f
                    .message()
                    .map(|m| Ok(PyBytes::new(py, m.payload).into_any())),
            },
        }
    }
}

/// `max_messages` of `read_batch`: an int of at least 1.
fn max_messages_arg(obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(
            "max_messages must be an int, not bool",
        ));
    }
    let n: i128 = obj.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "max_messages must be an int, not {}",
            type_name(obj)
        ))
    })?;
    if n < 1 {
        return Err(PyValueError::new_err(format!(
            "max_messages must be at least 1, got {n}"
        )));
    }
    Ok(n.min(usize::MAX as i128) as usize)
}

#[pymethods]
impl Tailer {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next available message; stops (StopIteration) when none is
    /// available right now. Never waits.
    ///
    /// >>> next(q.tailer()).seq
    /// 0
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<Message>>> {
        // Each arm converts the engine's message where it lands: passing the
        // 152-byte `Result<Option<Message>>` up through `Reader::read_next`
        // cost two or three memcpys per message (`perf`, tailer iteration).
        fn convert(
            py: Python<'_>,
            next: crate::Result<Option<crate::Message<'_>>>,
        ) -> PyResult<Option<Py<Message>>> {
            match next {
                Ok(Some(m)) => Ok(Some(Py::new(py, Message::from_borrowed(py, &m)?)?)),
                Ok(None) => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
        self.with(py, |reader| match reader {
            Reader::Plain(p) => p.next(py),
            Reader::Named(c) => convert(py, c.read_next()),
            Reader::Backward(b) => convert(py, b.read_next()),
        })
    }

    /// The next message, or None if none came within `timeout` seconds.
    ///
    /// `timeout=0` (the default) does not wait; `timeout=None` waits forever,
    /// as do `inf` and any timeout too long to represent. A negative or NaN
    /// timeout raises ValueError.
    ///
    /// >>> msg = t.read_next(timeout=1.0)
    #[pyo3(signature = (timeout=Some(time::Seconds(0.0))), text_signature = "(self, timeout=0.0)")]
    fn read_next(
        &self,
        py: Python<'_>,
        timeout: Option<time::Seconds>,
    ) -> PyResult<Option<Py<Message>>> {
        match time::timeout_arg(timeout, "timeout")? {
            Some(d) if d.is_zero() => self.__next__(py),
            wait => self.wait(py, wait),
        }
    }

    /// Up to `max_messages` messages as a list, in order, in one call.
    ///
    /// Returns at once with every message available now (at most
    /// `max_messages`); when none is, waits up to `timeout` seconds for the
    /// first (`None`, the default: forever; `0`: not at all) and returns it
    /// with whatever else is available then: an empty list means the timeout
    /// passed. A read that meets damage after some messages returns those;
    /// the next call raises CorruptedError.
    ///
    /// With `payloads=True` the list holds each message's payload
    /// (`bytes`, as `Message.payload` gives it) instead of the message: no
    /// `Message` is built, the fastest way to read a queue's payloads in
    /// Python (a tombstone's payload is `b""`).
    ///
    /// >>> [m.seq for m in t.read_batch(1000, timeout=0)]
    /// [0, 1, 2]
    /// >>> t.seek(0); t.read_batch(1000, timeout=0, payloads=True)
    /// [b'a', b'b', b'c']
    #[pyo3(signature = (max_messages, timeout=None, *, payloads=false))]
    fn read_batch<'py>(
        &self,
        py: Python<'py>,
        max_messages: &Bound<'py, PyAny>,
        timeout: Option<time::Seconds>,
        payloads: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let max = max_messages_arg(max_messages)?;
        let wait = time::timeout_arg(timeout, "timeout")?;
        let item = if payloads {
            Item::Payload
        } else {
            Item::Message
        };
        let mut out = Vec::with_capacity(max.min(4096));
        self.drain(py, max, &mut out, item)?;
        if out.is_empty() && wait.is_none_or(|d| !d.is_zero()) {
            if let Some(m) = self.wait(py, wait)? {
                out.push(if payloads {
                    m.get().payload(py).into_bound(py).into_any()
                } else {
                    m.into_bound(py).into_any()
                });
                self.drain(py, max, &mut out, item)?;
            }
        }
        PyList::new(py, out)
    }

    /// An iterator that waits for each next message, forever, or until no
    /// message has come for `idle_timeout` seconds.
    ///
    /// >>> for msg in t.follow():          # Ctrl-C to stop
    /// ...     handle(msg)
    #[pyo3(signature = (idle_timeout=None))]
    fn follow(slf: Bound<'_, Self>, idle_timeout: Option<time::Seconds>) -> PyResult<Follow> {
        Ok(Follow {
            tailer: slf.unbind(),
            idle: time::timeout_arg(idle_timeout, "idle_timeout")?,
        })
    }

    /// The next message, awaited: `read_next` for asyncio. Returns None
    /// when none came within `timeout` seconds (`None`, the default:
    /// waits forever).
    ///
    /// No thread per waiter: one thread per queue handle sleeps on the
    /// queue's wake-up word for every waiting task, and a socket registered
    /// with the event loop (`loop.add_reader`) carries the wake-up. A
    /// cancelled read consumes nothing: the next read returns the message.
    /// Closing the tailer or its queue ends the wait with ClosedError.
    ///
    /// >>> msg = await t.read_next_async(timeout=5.0)
    #[pyo3(signature = (timeout=None))]
    fn read_next_async<'py>(
        slf: Bound<'py, Self>,
        timeout: Option<time::Seconds>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let timeout = time::timeout_arg(timeout, "timeout")?.map(|d| d.as_secs_f64());
        py.import("litemq._aio")?
            .getattr("read_next")?
            .call1((slf, timeout))
    }

    /// An async iterator that awaits each next message, forever, or until
    /// no message has come for `idle_timeout` seconds (see `read_next_async`).
    ///
    /// >>> async for msg in t.follow_async():
    /// ...     await handle(msg)
    #[pyo3(signature = (idle_timeout=None))]
    fn follow_async<'py>(
        slf: Bound<'py, Self>,
        idle_timeout: Option<time::Seconds>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let idle = time::timeout_arg(idle_timeout, "idle_timeout")?.map(|d| d.as_secs_f64());
        py.import("litemq._aio")?
            .getattr("FollowAsync")?
            .call1((slf, idle))
    }

    /// Registers `token` with the queue's tail watch, to be reported to
    /// `notifier` once the message at `next_seq` is published (or the
    /// tailer or queue closes). Returns the registration, for `_unwatch`.
    fn _watch(&self, py: Python<'_>, notifier: &Notifier, token: u64) -> PyResult<u64> {
        let seq = self.with(py, |t| {
            if t.is_backward() {
                return Err(PyValueError::new_err(
                    "a backward tailer never waits: nothing older is ever written",
                ));
            }
            Ok(t.next_seq() as u64)
        })?;
        Ok(self
            .watch
            .register(self.owner(), seq, notifier.notify(token))?)
    }

    /// Forgets a registration made by `_watch` (a cancelled or timed-out wait).
    fn _unwatch(&self, id: u64) {
        self.watch.cancel(id);
    }

    /// Refuses pickling and copying: a tailer maps its queue's files.
    fn __reduce__(&self, py: Python<'_>) -> PyResult<()> {
        let at = self
            .lock(py)
            .ok()
            .and_then(|g| g.as_ref().map(|r| r.next_seq()));
        let at = at.map_or_else(|| "t.next_seq".to_string(), |s| s.to_string());
        Err(PyTypeError::new_err(format!(
            "a litemq.Tailer cannot be pickled or copied: it maps the queue's files; \
             pass the queue's path ({:?}) and the position ({at}), and open \
             litemq.Queue(path, read_only=True).tailer(start=...) in the other process \
             (a named tailer: pass its name; messages themselves pickle)",
            self.path
        )))
    }

    /// Moves to sequence `seq`: the next read returns that message
    /// (ValueError outside 0..2**64 - 1, NotFoundError if not in the queue).
    ///
    /// >>> t.seek(500); t.read_next().seq
    /// 500
    fn seek(&self, py: Python<'_>, seq: Arg<SeqNum<name::Seq>>) -> PyResult<()> {
        let SeqNum(seq, _) = seq.get()?;
        self.with(py, |tailer| Ok(tailer.seek(seq)?))
    }

    /// Moves to the first message written at or after `when`, an aware
    /// `datetime` or an int of µs since the epoch.
    ///
    /// >>> t.seek_time(datetime(2026, 11, 21, tzinfo=timezone.utc))
    fn seek_time(&self, py: Python<'_>, when: Arg<Micros<name::When>>) -> PyResult<()> {
        let Micros(micros, _) = when.get()?;
        self.with(py, |tailer| Ok(tailer.seek_time(micros)?))
    }

    /// Moves to message `offset` of the tailer's topic stream (its
    /// `Message.topic_offset`): the tailer's topic and queue id (0 when it
    /// was opened without `queue_id`). `offset` equal to the stream's count
    /// moves after its last message; a larger one, or a tailer opened
    /// without `topic=`, raises ValueError.
    ///
    /// >>> t = q.tailer(topic="orders"); t.seek_topic_offset(2)
    /// >>> t.read_next().topic_offset
    /// 2
    fn seek_topic_offset(&self, py: Python<'_>, offset: Arg<SeqNum<name::Offset>>) -> PyResult<()> {
        let SeqNum(offset, _) = offset.get()?;
        self.with(py, |tailer| Ok(tailer.seek_topic_offset(offset)?))
    }

    /// Moves past the last message: the next read returns the next one written.
    ///
    /// >>> t.seek_end(); t.read_next() is None
    /// True
    fn seek_end(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |tailer| Ok(tailer.seek_end()?))
    }

    /// The sequence number the next read returns. A backward tailer that
    /// read the oldest message stands one below it (-1 when that was 0).
    #[getter]
    fn next_seq(&self, py: Python<'_>) -> PyResult<i128> {
        self.with(py, |tailer| Ok(tailer.next_seq()))
    }

    /// ``"forward"`` (oldest first, the default) or ``"backward"`` (newest
    /// first; such a tailer never waits: `read_next(timeout=...)`,
    /// `follow()` and `read_next_async()` return what is there and stop).
    #[getter]
    fn direction(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |t| {
            Ok(if t.is_backward() {
                "backward"
            } else {
                "forward"
            })
        })
    }

    /// The Arrow C stream of the messages from here to the end of what is
    /// published now, with `read_arrow`'s default columns (no copy of the
    /// data); reading it moves the tailer past them. What `pa.table(t)`,
    /// `pl.from_arrow(t)` and DuckDB read (see `litemq.arrow.tailer_reader`).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        slf: &Bound<'py, Self>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("litemq.arrow")?
            .getattr("tailer_stream")?
            .call1((slf, requested_schema))
    }

    /// The next rows, at most `max_rows`, up to the end of what is
    /// published now, as the Arrow column buffers `litemq.arrow` wraps; the
    /// tailer moves past them. What `__arrow_c_stream__` reads: a plain
    /// forward tailer without a topic filter (others raise TypeError).
    #[pyo3(signature = (max_rows, columns=None))]
    fn _read_columns<'py>(
        &self,
        py: Python<'py>,
        max_rows: usize,
        columns: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let cols = super::batch::column_set(columns, false)?;
        let b = self.with(py, |reader| match reader {
            Reader::Plain(p) if p.tailer.selector().is_none() => {
                let t = p.settled();
                Ok(exit::detach(py, || {
                    crate::Columns::read_as_tailer(t, u64::MAX, max_rows, cols)
                })?)
            }
            _ => Err(PyTypeError::new_err(
                "a named, backward or topic tailer does not export Arrow: read \
                 q.arrow_reader(start=t.next_seq, topic=...) instead",
            )),
        })?;
        let d = pyo3::types::PyDict::new(py);
        super::batch::fill_columns(&d, b)?;
        Ok(d)
    }

    /// A typed queue's schema versions as metadata.json's `schema` object
    /// (JSON text), for the typed Arrow export of a plain tailer; None for
    /// an untyped queue or another kind of tailer (which exports no Arrow).
    fn _schema_json(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(py, |reader| {
            Ok(match reader {
                Reader::Plain(p) => p
                    .settled()
                    .schema_versions()
                    .map(|v| v.to_json_value().to_string()),
                _ => None,
            })
        })
    }

    /// `_read_columns` of a typed queue: the next rows, at most
    /// `max_rows`, up to the end of what is published now, as the dict of
    /// `Queue._read_typed` (`fields`: the schema's fields to fill); the
    /// tailer moves past them. A plain forward tailer without a topic
    /// filter (others raise TypeError).
    fn _read_typed_columns<'py>(
        &self,
        py: Python<'py>,
        max_rows: usize,
        fields: Vec<String>,
    ) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let b = self.with(py, |reader| match reader {
            Reader::Plain(p) if p.tailer.selector().is_none() => {
                let t = p.settled();
                Ok(exit::detach(py, || t.read_typed(max_rows, &fields))?)
            }
            _ => Err(PyTypeError::new_err(
                "a named, backward or topic tailer does not export Arrow: read \
                 q.arrow_reader(start=t.next_seq) instead",
            )),
        })?;
        super::typed::typed_columns(py, b)
    }

    /// Steps over damage at the current position, after a read raised
    /// CorruptedError: a frame whose length is intact is skipped by its
    /// length; a hole (a zeroed page, a lost write) is skipped to the next
    /// frame that checks out and whose sequence is known (from the sparse
    /// index or the next file). The messages in between are lost. Returns
    /// False when there is nothing to step over (the end of the data) or no
    /// later frame can be numbered.
    ///
    /// >>> try:
    /// ...     msg = t.read_next()
    /// ... except litemq.CorruptedError:
    /// ...     t.skip_damaged()
    /// True
    fn skip_damaged(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |reader| Ok(reader.skip_damaged()?))
    }

    /// Releases the tailer's files; later calls raise ClosedError. A named
    /// tailer with ``auto_commit=True`` commits what it read first.
    ///
    /// >>> t.close(); t.closed
    /// True
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        // Async waits on this tailer end with ClosedError.
        self.watch.close_owner(self.owner());
        let taken = self.lock(py)?.take();
        match taken {
            Some(Reader::Named(c)) => Ok(exit::detach(py, || c.close())?),
            _ => Ok(()),
        }
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.lock(py)?.is_none())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Closes the tailer. A named tailer leaving on an exception is dropped
    /// without committing anything, so what it read since its last commit
    /// (the message that failed included) is delivered again.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            let taken = self.lock(py)?.take();
            exit::detach(py, || drop(taken));
            return Ok(());
        }
        self.close(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match self.lock(py) {
            Ok(guard) => match guard.as_ref() {
                Some(t) if t.is_backward() => format!(
                    "<litemq.Tailer for {:?} at seq {} backward>",
                    self.path,
                    t.next_seq()
                ),
                Some(t) => format!(
                    "<litemq.Tailer for {:?} at seq {}>",
                    self.path,
                    t.next_seq()
                ),
                None => format!("<litemq.Tailer for {:?} (closed)>", self.path),
            },
            Err(_) => format!("<litemq.Tailer for {:?} (from parent process)>", self.path),
        }
    }
}

/// The iterator returned by `Tailer.follow()`: each step waits for the next
/// message (Ctrl-C interrupts the wait).
///
/// >>> for msg in q.tailer(start="end").follow(idle_timeout=5.0):
/// ...     print(msg.seq)
#[pyclass(frozen, module = "litemq", name = "Follow")]
pub(crate) struct Follow {
    tailer: Py<Tailer>,
    idle: Option<Duration>,
}

#[pymethods]
impl Follow {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<Message>>> {
        self.tailer.get().wait(py, self.idle)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("<litemq.Follow over {}>", self.tailer.get().__repr__(py))
    }

    /// Refuses pickling and copying, as its tailer does.
    fn __reduce__(&self, py: Python<'_>) -> PyResult<()> {
        self.tailer.get().__reduce__(py)
    }
}
