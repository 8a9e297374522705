"""`WorkQueueInfo`: a work queue as `Queue.work_queues()` lists it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["WorkQueueInfo"]


@dataclass(frozen=True)
class WorkQueueInfo:
    """A work queue's figures (``litemq wq stats NAME`` prints them).

    - ``name``: the name given to ``Queue.work_queue(name)``;
    - ``pending``: jobs waiting for a worker (never handed out, nacked, or
      leased past their deadline; holes key compaction left are no jobs);
    - ``in_flight``: jobs leased to a worker now;
    - ``acked``, ``dead_lettered``: jobs finished either way since creation;
    - ``expired``: jobs whose message expired before a worker got it;
    - ``redelivered``: handouts after the first;
    - ``gone``: jobs retention deleted before a worker got them (or key
      compaction dropped: holes are counted here too, also a job a worker
      held whose message compaction dropped, once it was nacked or its
      lease ran out);
    - ``low``: every job below this sequence is finished (retention with
      ``protect_unconsumed`` keeps it); ``cursor``: every job below it was
      handed out at least once; ``window``: slots in the group's ring;
    - ``oldest_age``: seconds since the oldest unfinished job's message was
      written, or None;
    - ``created_at``: when the group was created (UTC);
    - ``rewound``: sequences the marks were moved back over because they were
      past the queue's end when a handle opened the group (a machine crash
      lost the data's tail but kept the state file's header page): the jobs
      there were lost with the data; 0 unless that happened.

    >>> [(w.name, w.pending, w.in_flight) for w in q.work_queues()]
    [('thumbnails', 120, 4)]
    """

    name: str
    pending: int
    in_flight: int
    acked: int
    dead_lettered: int
    expired: int
    redelivered: int
    gone: int
    low: int
    cursor: int
    window: int
    oldest_age: float | None
    created_at: datetime
    rewound: int
