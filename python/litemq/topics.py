"""`TopicInfo`: a topic stream as `Queue.topics()` lists it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TopicInfo"]


@dataclass(frozen=True)
class TopicInfo:
    """One topic stream (a topic and a queue id) with messages in the queue.

    - ``topic``: the topic (None for messages that carry tags but no topic);
    - ``queue_id``: the stream of the topic (0 unless the topic is sharded);
    - ``count``: its messages still in the queue;
    - ``first_seq``, ``last_seq``: sequences of its first and last message;
    - ``last_timestamp``: timestamp of its last message (µs since the epoch);
    - ``first_offset``, ``last_offset``: topic offsets (``Message.topic_offset``)
      of its first and last message. Offsets count the messages still in the
      queue, so ``first_offset`` is 0 and ``last_offset`` is ``count - 1``
      (retention deleting old files renumbers; see README "Topics and tags").

    >>> [(t.topic, t.count) for t in q.topics()]
    [('audit', 120), ('orders', 4000)]
    """

    topic: str | None
    queue_id: int
    count: int
    first_seq: int
    last_seq: int
    last_timestamp: int
    first_offset: int
    last_offset: int
