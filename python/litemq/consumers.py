"""`ConsumerInfo`: a named tailer as `Queue.consumers()` lists it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

__all__ = ["ConsumerInfo"]


@dataclass(frozen=True)
class ConsumerInfo:
    """A named tailer's committed position and how far it is behind.

    - ``name``: the name given to ``Queue.tailer(name=...)``;
    - ``next_seq``: committed position, the sequence it reads next;
    - ``lag_messages``: messages still in the queue at or after ``next_seq``
      (messages retention deleted before the tailer read them are not
      counted: a tailer behind ``first_seq`` counts from it, nor are the
      holes key compaction left); for a tailer
      with a topic filter, only the messages its filter selects;
    - ``lag_bytes``: bytes of the queue's frames still on disk from
      ``next_seq`` on (exact for what was published when the listing looked;
      every topic's, with a topic filter too: what the tailer still passes);
    - ``topic``, ``queue_id``, ``tags``: the topic filter the name remembers
      (``None``, ``None``, ``[]`` without one);
    - ``committed_at``: when the position was last committed (UTC);
    - ``created_at``: when the name was first opened (UTC).

    >>> [(c.name, c.lag_messages) for c in q.consumers()]
    [('billing', 0), ('audit', 1200)]
    """

    name: str
    next_seq: int
    lag_messages: int
    lag_bytes: int
    committed_at: datetime
    created_at: datetime
    topic: str | None = None
    queue_id: int | None = None
    tags: list[str] = field(default_factory=list)
