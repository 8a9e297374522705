//! `WorkQueue` and `Job`: competing consumers over one queue (get from
//! `Queue.work_queue(...)`), and the dicts of `Queue.work_queues()`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::aio::Notifier;
use super::errors;
use super::exit;
use super::fork::ForkSafe;
use super::message::Message;
use super::results;
use super::time::{self, Seconds};
use crate::Ticket;

/// The queue's `next_seq`, as the handle that opened the work queue sees it
/// (after its own appends are visible).
pub(crate) type NextSeq = Box<dyn Fn() -> crate::Result<u64> + Send + Sync>;

/// Longest single wait with the GIL released; `get(timeout=None)` loops.
const FOREVER_CHUNK: Duration = Duration::from_secs(3600);

/// A job handed out by `WorkQueue.get()`: a message, its sequence (`id`,
/// also `seq`) and how many times it has been handed out (`deliveries`, 1
/// the first time). Pass it to `ack` when done, or `nack` to give it back.
///
/// >>> job = wq.get()
/// >>> job.id, job.deliveries, job.payload
/// (0, 1, b'resize cat.jpg')
#[pyclass(frozen, module = "litemq", name = "Job")]
pub(crate) struct Job {
    /// The message.
    #[pyo3(get)]
    message: Py<Message>,
    /// Handouts so far, this one included (1 the first time).
    #[pyo3(get)]
    deliveries: u8,
    group: String,
    /// The directory of the queue whose work queue handed it out.
    path: String,
    ticket: Ticket,
}

#[pymethods]
impl Job {
    /// The job's id: the message's sequence in the queue.
    #[getter]
    fn id(&self) -> u64 {
        self.ticket.seq
    }

    /// The message's sequence in the queue (the same as `id`).
    #[getter]
    fn seq(&self) -> u64 {
        self.ticket.seq
    }

    /// The message's payload.
    #[getter]
    fn payload(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.message.bind(py).getattr("payload").map(Bound::unbind)
    }

    /// The name of the work queue that handed the job out.
    #[getter]
    fn group(&self) -> &str {
        &self.group
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Job(id={}, deliveries={}, group={:?}, message={})",
            self.ticket.seq,
            self.deliveries,
            self.group,
            self.message.bind(py).repr()?
        ))
    }
}

/// A work queue (a group of competing consumers): hands each message of the
/// queue to exactly one `get()` among every handle that opened the group, in
/// any process, until acked. Get one from ``Queue.work_queue(name, ...)``.
///
/// A job not acked within ``visibility_timeout`` seconds, or whose worker
/// process died, is handed out again; ``nack(job, delay)`` gives it back at
/// once or after a delay. Past ``max_deliveries`` handouts a job goes to the
/// dead-letter queue with the reason and its original sequence in its
/// headers (``litemq.dlq.reason``, ``litemq.dlq.seq``, ...). Acks may come
/// in any order. State lives in the queue directory
/// (``workqueues/<name>.wq``), shared through a mapped file: no server.
///
/// >>> wq = q.work_queue("thumbnails", visibility_timeout=30)
/// >>> job = wq.get(timeout=1)
/// >>> make_thumbnail(job.payload)
/// >>> wq.ack(job)
/// True
#[pyclass(frozen, module = "litemq", name = "WorkQueue")]
pub(crate) struct WorkQueue {
    inner: ForkSafe<Mutex<Option<Arc<crate::WorkQueue>>>>,
    /// The `next_seq` of the queue handle it was opened from (for `stats`).
    next_seq: NextSeq,
    /// The queue handle's tail watch, for `get_async`.
    watch: crate::TailWatch,
    name: String,
    path: String,
}

impl WorkQueue {
    pub(crate) fn new(
        wq: crate::WorkQueue,
        next_seq: NextSeq,
        watch: crate::TailWatch,
        path: String,
    ) -> Self {
        WorkQueue {
            name: wq.name().to_string(),
            inner: ForkSafe::new(Mutex::new(Some(Arc::new(wq)))),
            next_seq,
            watch,
            path,
        }
    }

    /// Names this handle's registrations in the tail watch.
    fn owner(&self) -> usize {
        self as *const WorkQueue as usize
    }

    fn engine(&self) -> PyResult<Arc<crate::WorkQueue>> {
        self.inner
            .get()?
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(errors::closed)
    }

    /// The ticket of `job`, if this group of this queue handed it out: the
    /// job carries the queue's id and the group's (not a path, which may
    /// name another queue by now).
    fn ticket(&self, job: &Bound<'_, PyAny>) -> PyResult<Ticket> {
        let job = job
            .cast::<Job>()
            .map_err(|_| PyTypeError::new_err("expected a litemq.Job from WorkQueue.get()"))?
            .get();
        let origin = self.engine()?.origin();
        if job.group != self.name || job.ticket.origin != origin {
            let when = if job.group == self.name && job.path == self.path {
                " (before the queue or the group was removed and created again)"
            } else {
                ""
            };
            return Err(PyValueError::new_err(format!(
                "job {} was handed out by work queue {:?} of {:?}{when}, not {:?} of {:?}",
                job.ticket.seq, job.group, job.path, self.name, self.path
            )));
        }
        Ok(job.ticket)
    }
}

fn seconds(value: Seconds, what: &str) -> PyResult<Duration> {
    time::timeout_arg(Some(value), what)?
        .ok_or_else(|| PyValueError::new_err(format!("{what} must be finite")))
}

#[pymethods]
impl WorkQueue {
    /// The next job, waiting up to `timeout` seconds (None: until one
    /// comes) with the GIL released; None when the timeout passes. Ctrl-C
    /// interrupts the wait; the queue's ``close()`` ends it with ClosedError.
    #[pyo3(signature = (timeout=None))]
    fn get(&self, py: Python<'_>, timeout: Option<Seconds>) -> PyResult<Option<Job>> {
        let timeout = time::timeout_arg(timeout, "timeout")?;
        let wq = self.engine()?;
        let mut interrupted: Option<PyErr> = None;
        loop {
            let chunk = timeout.unwrap_or(FOREVER_CHUNK);
            let mut check = || {
                exit::attach(|py| match py.check_signals() {
                    Ok(()) => false,
                    Err(e) => {
                        interrupted = Some(e);
                        true
                    }
                })
                .unwrap_or(true)
            };
            let found = exit::detach(py, || wq.get_with(chunk, &mut check, &mut |m| m.to_owned()));
            if let Some(e) = interrupted.take() {
                return Err(e);
            }
            match found? {
                Some((ticket, message)) => {
                    let message = Py::new(py, Message::from_owned(py, message)?)?;
                    return Ok(Some(Job {
                        message,
                        deliveries: ticket.deliveries,
                        group: self.name.clone(),
                        path: self.path.clone(),
                        ticket,
                    }));
                }
                None if timeout.is_some() => return Ok(None),
                None => {}
            }
        }
    }

    /// `get` for asyncio: waits without a thread (a writer's publish wakes
    /// the task at once; redeliveries, acks that free a full ring and nacks
    /// are looked for at least every 50 ms). A cancelled wait takes no job.
    /// Closing the work queue or its queue ends the wait with ClosedError.
    ///
    /// >>> job = await wq.get_async(timeout=5)
    #[pyo3(signature = (timeout=None))]
    fn get_async<'py>(
        slf: Bound<'py, Self>,
        timeout: Option<Seconds>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let timeout = time::timeout_arg(timeout, "timeout")?.map(|d| d.as_secs_f64());
        py.import("litemq._wq_aio")?
            .getattr("get")?
            .call1((slf, timeout))
    }

    /// Registers `token` with the queue's tail watch, to be reported to
    /// `notifier` once a message is published after those published now
    /// (or the queue or this handle closes). Returns the registration.
    fn _watch(&self, py: Python<'_>, notifier: &Notifier, token: u64) -> PyResult<u64> {
        self.engine()?;
        let next_seq = &self.next_seq;
        let seq = exit::detach(py, next_seq)?;
        Ok(self
            .watch
            .register(self.owner(), seq, notifier.notify(token))?)
    }

    /// Forgets a registration made by `_watch`.
    fn _unwatch(&self, id: u64) {
        self.watch.cancel(id);
    }

    /// Marks a job done for good. False when its lease was lost (the
    /// visibility timeout passed and the job was handed out again, or it was
    /// finished already): another handout does, or did, the work.
    fn ack(&self, py: Python<'_>, job: &Bound<'_, PyAny>) -> PyResult<bool> {
        let ticket = self.ticket(job)?;
        let wq = self.engine()?;
        Ok(exit::detach(py, || wq.ack(ticket))?)
    }

    /// Gives a job back: handed out again after `delay` seconds (None or
    /// 0: at once); counts toward ``max_deliveries``. False when its lease
    /// was lost (as for `ack`).
    #[pyo3(signature = (job, delay=None))]
    fn nack(
        &self,
        py: Python<'_>,
        job: &Bound<'_, PyAny>,
        delay: Option<Seconds>,
    ) -> PyResult<bool> {
        let ticket = self.ticket(job)?;
        let delay = match delay {
            Some(d) => seconds(d, "delay")?,
            None => Duration::ZERO,
        };
        let wq = self.engine()?;
        Ok(exit::detach(py, || wq.nack(ticket, delay))?)
    }

    /// Pushes a job's lease to `timeout` seconds from now (a heartbeat for
    /// long jobs; default: the visibility timeout). False when the lease
    /// was lost.
    #[pyo3(signature = (job, timeout=None))]
    fn extend(
        &self,
        py: Python<'_>,
        job: &Bound<'_, PyAny>,
        timeout: Option<Seconds>,
    ) -> PyResult<bool> {
        let ticket = self.ticket(job)?;
        let wq = self.engine()?;
        let timeout = match timeout {
            Some(t) => seconds(t, "timeout")?,
            None => wq.options().visibility_timeout,
        };
        Ok(exit::detach(py, || wq.extend(ticket, timeout))?)
    }

    /// The jobs handed out and not finished, oldest first, at most `limit`
    /// (None: all), as dicts (Redis's ``XPENDING``): ``seq``, ``state``
    /// (``"leased"``, ``"delayed"``: nacked or released, ready again at
    /// ``deadline``; ``"dead_lettering"``; ``"pending"``: its first
    /// claimer died), ``deliveries``, ``pid`` and ``alive`` (the holder's
    /// process id and whether it runs; None when no process holds it or
    /// it cannot be judged), ``deadline`` (UTC datetime: when the lease
    /// ends or the job is ready again) and ``overdue`` (the deadline has
    /// passed: the next ``get`` hands it out again).
    ///
    /// >>> [(p["seq"], p["pid"], p["deliveries"]) for p in wq.pending()]
    /// [(0, 4242, 1)]
    #[pyo3(signature = (limit=None))]
    fn pending<'py>(
        &self,
        py: Python<'py>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        let wq = self.engine()?;
        let jobs = exit::detach(py, || wq.pending(limit.unwrap_or(usize::MAX)));
        pending_list(py, &jobs)
    }

    /// Takes job `seq` over for this handle (Redis's ``XCLAIM``) and returns
    /// it as ``get`` would (a new lease, one more delivery), or None when it
    /// cannot be claimed. Only a job handed out before and not finished is
    /// claimed; without `force`, only one ``get`` could hand out again now
    /// (lease ran out, holder died, nacked and ready, or released); with
    /// ``force=True``, also one a live (slow) worker holds, whose ``ack``
    /// then returns False. ``max_deliveries`` does not stop a claim; a job
    /// handed out 255 times, or being dead-lettered, is not claimed.
    ///
    /// >>> job = wq.claim(7, force=True)
    #[pyo3(signature = (seq, *, force=false))]
    fn claim(&self, py: Python<'_>, seq: u64, force: bool) -> PyResult<Option<Job>> {
        let wq = self.engine()?;
        let found = exit::detach(py, || wq.claim(seq, force))?;
        let Some(job) = found else {
            return Ok(None);
        };
        let message = Py::new(py, Message::from_owned(py, job.message)?)?;
        Ok(Some(Job {
            message,
            deliveries: job.ticket.deliveries,
            group: self.name.clone(),
            path: self.path.clone(),
            ticket: job.ticket,
        }))
    }

    /// Gives job `job` (a ``Job`` or a sequence) back at once, whoever
    /// holds it: ready for the next ``get``, its deliveries kept. The
    /// holder's ``ack`` then returns False. False when the job is neither
    /// leased nor nacked-and-waiting.
    fn release(&self, py: Python<'_>, job: &Bound<'_, PyAny>) -> PyResult<bool> {
        let seq = if job.is_instance_of::<Job>() {
            self.ticket(job)?.seq
        } else {
            job.extract::<u64>().map_err(|_| {
                PyTypeError::new_err("expected a litemq.Job or a job's sequence (int >= 0)")
            })?
        };
        let wq = self.engine()?;
        Ok(exit::detach(py, || wq.release(seq))?)
    }

    /// The group's figures now, as a dict: ``pending`` (waiting for a
    /// worker; holes key compaction left are no jobs), ``in_flight`` (leased now), ``acked``, ``dead_lettered``,
    /// ``expired``, ``redelivered``, ``gone`` (removed by retention before
    /// a handout), ``rewound`` (sequences the marks were moved back over:
    /// they were past the queue's end at an open), ``low`` (every job below is finished), ``cursor`` (every
    /// job below was handed out), ``window``, ``oldest_age`` (seconds since
    /// the oldest unfinished job's message was written, or None) and
    /// ``created_at``.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let wq = self.engine()?;
        let next_seq = &self.next_seq;
        let info = exit::detach(py, || next_seq().map(|next| wq.info(next)))?;
        results::work_queue_dict(py, &info)
    }

    /// Forces the state file to disk (msync): acks so far survive a
    /// machine crash (they survive a process crash at once).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let wq = self.engine()?;
        Ok(exit::detach(py, || wq.sync())?)
    }

    /// The group's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The lease length in seconds.
    #[getter]
    fn visibility_timeout(&self) -> PyResult<f64> {
        Ok(self.engine()?.options().visibility_timeout.as_secs_f64())
    }

    /// Handouts a job gets before it is dead-lettered.
    #[getter]
    fn max_deliveries(&self) -> PyResult<u8> {
        Ok(self.engine()?.options().max_deliveries)
    }

    /// Lets go of the handle (its files are unmapped). Jobs it holds stay
    /// leased until their deadline: ack or nack them first.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self
            .inner
            .get()?
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        exit::detach(py, || drop(taken));
        self.watch.close_owner(self.owner());
        Ok(())
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(self
            .inner
            .get()?
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.close(py)
    }

    fn __repr__(&self) -> String {
        let state = match self.inner.get() {
            Ok(m) if m.lock().unwrap_or_else(|e| e.into_inner()).is_none() => " (closed)",
            Ok(_) => "",
            Err(_) => " (from parent process)",
        };
        format!(
            "<litemq.WorkQueue {:?} of {:?}{state}>",
            self.name, self.path
        )
    }
}

/// The dicts of `WorkQueue.pending()` and `Queue._work_queue_pending()`.
pub(crate) fn pending_list<'py>(
    py: Python<'py>,
    jobs: &[crate::PendingJob],
) -> PyResult<Bound<'py, pyo3::types::PyList>> {
    let list = pyo3::types::PyList::empty(py);
    for j in jobs {
        let d = PyDict::new(py);
        d.set_item("seq", j.seq)?;
        let state = match j.state {
            crate::JobState::Leased => "leased",
            crate::JobState::Delayed => "delayed",
            crate::JobState::DeadLettering => "dead_lettering",
            _ => "pending",
        };
        d.set_item("state", state)?;
        d.set_item("deliveries", j.deliveries)?;
        d.set_item("pid", j.owner_pid)?;
        d.set_item("alive", j.owner_alive)?;
        let deadline = match j.deadline_ms {
            Some(ms) => Some(time::to_datetime(py, ms.saturating_mul(1000))?),
            None => None,
        };
        d.set_item("deadline", deadline)?;
        d.set_item("overdue", j.overdue)?;
        list.append(d)?;
    }
    Ok(list)
}
