"""Topic, tags, queue id, priority and expiry on a message (format 6).

Each field is given at append (one message or a batch), stored in the
record, and read back the same by every reader: `get`, a tailer, `find`,
another process. Bad values are typed errors that store nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import litemq
from conftest import run_python


def test_fields_round_trip_through_every_reader(queue: litemq.Queue) -> None:
    app = queue.appender()
    plain = app.append(b"plain")
    full = app.append(
        b"paid",
        key="customer-7",
        headers={"source": "web"},
        topic="orders",
        tags=["paid", "eu"],
        queue_id=2,
        priority=7,
        expires_at=1_900_000_000_000_000,
    )
    app.flush()
    for msg in (queue.get(full), next(iter(queue.tailer(full))), queue.find("customer-7")[0]):
        assert msg.seq == full
        assert (msg.topic, msg.tags, msg.queue_id) == ("orders", ("paid", "eu"), 2)
        assert (msg.priority, msg.expires_at) == (7, 1_900_000_000_000_000)
        assert (msg.key, msg.headers, msg.payload) == ("customer-7", {"source": "web"}, b"paid")
    p = queue.get(plain)
    assert (p.topic, p.tags, p.queue_id, p.priority, p.expires_at) == (None, (), 0, 0, None)
    assert "topic='orders'" in repr(queue.get(full))
    assert "tags=('paid', 'eu')" in repr(queue.get(full))
    assert queue.get(full) != queue.get(full - 1)


def test_fields_are_part_of_equality(queue: litemq.Queue) -> None:
    app = queue.appender()
    a = app.append(b"x", topic="a")
    app.flush()
    assert queue.get(a) == queue.get(a)
    assert queue.get(a) == next(iter(queue.tailer(a)))


def test_ttl_and_expires_at(queue: litemq.Queue) -> None:
    app = queue.appender()
    before = int(datetime.now(UTC).timestamp() * 1_000_000)
    by_ttl = app.append(b"a", ttl=timedelta(minutes=5))
    by_seconds = app.append(b"b", ttl=1.5)
    by_text = app.append(b"c", ttl="2h")
    when = datetime(2030, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    by_datetime = app.append(b"d", expires_at=when)
    app.flush()
    after = int(datetime.now(UTC).timestamp() * 1_000_000)
    for seq, ttl_us in ((by_ttl, 300_000_000), (by_seconds, 1_500_000), (by_text, 7_200_000_000)):
        at = queue.get(seq).expires_at
        assert at is not None
        assert before + ttl_us <= at <= after + ttl_us
    assert queue.get(by_datetime).expires_at == int(when.timestamp()) * 1_000_000 + 6


def test_batch_items_take_the_same_fields(queue: litemq.Queue) -> None:
    app = queue.appender()
    seqs = app.append_batch(
        [
            b"plain",
            {"payload": b"t", "topic": "orders", "tags": ("a",), "priority": 3},
            {"payload": b"e", "expires_at": 5, "queue_id": 1, "topic": "s"},
        ]
    )
    app.flush()
    msgs = [queue.get(s) for s in seqs]
    assert [m.topic for m in msgs] == [None, "orders", "s"]
    assert [m.tags for m in msgs] == [(), ("a",), ()]
    assert [m.priority for m in msgs] == [0, 3, 0]
    assert [m.expires_at for m in msgs] == [None, None, 5]
    assert [m.queue_id for m in msgs] == [0, 0, 1]


def test_any_number_of_tags_keeps_its_order(queue: litemq.Queue) -> None:
    # A message keeps a few tags inline and more in a list: both ways, and
    # from any iterable, they come back as given.
    app = queue.appender()
    lists = [[f"t{j}" for j in range(n)] for n in (0, 1, 3, 4, 5, 9, 255)]
    seqs = [app.append(b"x", topic="orders", tags=tags) for tags in lists]
    seqs.append(app.append(b"y", tags=(t for t in ("g1", "g2", "g3", "g4", "g5"))))
    batch = app.append_batch([{"payload": b"b", "tags": tags} for tags in lists])
    app.flush()
    want = [tuple(t) for t in lists]
    assert [queue.get(s).tags for s in seqs] == [*want, ("g1", "g2", "g3", "g4", "g5")]
    assert [queue.get(s).tags for s in batch] == want


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"topic": ""}, ValueError, 'topic "" must be 1 to 255 bytes'),
        ({"topic": "x" * 256}, ValueError, "must be 1 to 255 bytes"),
        ({"topic": "a\nb"}, ValueError, "control characters"),
        ({"topic": 5}, TypeError, "topic must be str, not int"),
        ({"tags": "paid"}, TypeError, "not a single str"),
        ({"tags": [b"paid"]}, TypeError, "tags must be str, not bytes"),
        ({"tags": [""]}, ValueError, 'tag "" must be 1 to 255 bytes'),
        ({"tags": ["t"] * 256}, ValueError, "256 tags; the limit is 255"),
        ({"queue_id": 1}, ValueError, "queue_id 1 needs a topic"),
        ({"topic": "t", "queue_id": 65536}, ValueError, "queue_id must be between 0 and 65535"),
        ({"priority": 256}, ValueError, "priority must be between 0 and 255"),
        ({"priority": -1}, ValueError, "priority must be between 0 and 255"),
        ({"priority": 1.5}, TypeError, "priority must be an int"),
        ({"ttl": 0}, ValueError, "ttl must be positive"),
        ({"ttl": 1, "expires_at": 5}, TypeError, "ttl or expires_at, not both"),
        ({"expires_at": datetime(2030, 1, 1)}, ValueError, "timezone-aware"),
        ({"expires_at": -1}, ValueError, "non-negative"),
    ],
)
def test_bad_fields_are_typed_errors_and_store_nothing(
    queue: litemq.Queue, kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    app = queue.appender()
    with pytest.raises(error, match=match):
        app.append(b"x", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        app.append_batch([b"ok", {"payload": b"x", **kwargs}])
    assert app.append(b"after") == 0
    app.flush()
    assert len(queue) == 1


def test_unknown_batch_entry_names_the_known_ones(queue: litemq.Queue) -> None:
    with pytest.raises(TypeError, match="expected payload, key, headers, topic, tags"):
        queue.appender().append_batch([{"payload": b"x", "topics": "t"}])


def test_fields_read_from_another_process(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=64 * 1024) as q:
        app = q.appender()
        app.append(b"x", topic="été", tags=["ü"], priority=255)
        app.flush()
    out = run_python(
        """
        import sys, litemq
        with litemq.Queue(sys.argv[1], read_only=True) as q:
            m = q.get(0)
            print(m.topic, ",".join(m.tags), m.priority)
        """,
        str(qpath),
    )
    assert out.stdout.split() == ["été", "ü", "255"]


def test_fields_survive_pickling(queue: litemq.Queue) -> None:
    import pickle

    app = queue.appender()
    seq = app.append(b"x", topic="orders", tags=["a", "b"], queue_id=3, priority=4, expires_at=9)
    plain = app.append(b"y")
    app.flush()
    for s in (seq, plain):
        msg = queue.get(s)
        back = pickle.loads(pickle.dumps(msg))
        assert back == msg
        assert (back.topic, back.tags, back.queue_id, back.priority, back.expires_at) == (
            msg.topic,
            msg.tags,
            msg.queue_id,
            msg.priority,
            msg.expires_at,
        )


def test_a_backward_tailer_does_not_take_a_topic(queue: litemq.Queue) -> None:
    with pytest.raises(ValueError, match="backward tailer reads every message"):
        queue.tailer(start="end", direction="backward", topic="orders")
