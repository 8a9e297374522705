"""Topics and tags in one queue: a tailer of one topic reads only its
messages (in order, with the queue's sequences), in this process and
another, across files whose topic index is built, missing or not built yet;
named tailers per topic resume; `Queue.topics()` counts every stream.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE, spawn_python


def _shape(i: int) -> dict[str, object]:
    """The fields message i is appended with."""
    if i % 10 == 0:
        return {"topic": "orders", "tags": ["paid", "eu"]}
    if i % 10 == 1:
        return {"topic": "orders", "queue_id": 1, "tags": ["refund"]}
    if i % 10 == 2:
        return {"topic": "audit"}
    if i % 10 == 3:
        return {"tags": ["paid"]}
    return {}


def _fill(q: litemq.Queue, start: int, stop: int) -> None:
    app = q.appender()
    for i in range(start, stop):
        assert app.append(f"m{i}".encode(), **_shape(i)) == i  # type: ignore[arg-type]
    app.flush()


def _want(
    n: int, topic: str | None, tags: list[str] | None = None, queue_id: int | None = None
) -> list[int]:
    out = []
    for i in range(n):
        s = _shape(i)
        if topic is not None and s.get("topic") != topic:
            continue
        if queue_id is not None and s.get("queue_id", 0) != queue_id:
            continue
        if tags and not set(tags) & set(s.get("tags", [])):  # type: ignore[call-overload]
            continue
        if topic is None and not tags:
            continue
        out.append(i)
    return out


CASES = [
    ("orders", None, None),
    ("orders", ["paid"], None),
    ("orders", None, 1),
    ("audit", None, None),
    ("nothing", None, None),
    (None, ["paid"], None),
]


@pytest.mark.parametrize(("topic", "tags", "queue_id"), CASES)
def test_a_topic_tailer_reads_only_its_topic(
    qpath: Path, topic: str | None, tags: list[str] | None, queue_id: int | None
) -> None:
    n = 2000
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 300}) as q:
        _fill(q, 0, n)
        got = [m.seq for m in q.tailer(topic=topic, tags=tags, queue_id=queue_id)]
        assert got == _want(n, topic, tags, queue_id)
        for m in q.tailer(topic=topic, tags=tags, queue_id=queue_id):
            assert m.payload == f"m{m.seq}".encode()
    # Reopened read-only: sealed files are read through their topic indexes.
    assert list(qpath.rglob("*.topics"))
    with litemq.Queue(qpath, read_only=True) as q:
        got = [m.seq for m in q.tailer(topic=topic, tags=tags, queue_id=queue_id)]
        assert got == _want(n, topic, tags, queue_id)


def test_topics_lists_every_stream(qpath: Path) -> None:
    n = 1000
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 300}) as q:
        _fill(q, 0, n)
        app = q.appender()
        app.append(b"plain")
        app.flush()
        infos = {(t.topic, t.queue_id): t for t in q.topics()}
        assert set(infos) == {("audit", 0), ("orders", 0), ("orders", 1), (None, 0)}
        orders = infos[("orders", 0)]
        assert (orders.count, orders.first_seq, orders.last_seq) == (100, 0, 990)
        assert orders.last_timestamp == q.get(990).timestamp
        assert infos[(None, 0)].count == 100
        assert isinstance(orders, litemq.TopicInfo)
    with litemq.Queue(qpath, read_only=True) as q:
        assert {(t.topic, t.queue_id): t for t in q.topics()} == infos


def test_named_topic_tailer_resumes(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        _fill(q, 0, 100)
        with q.tailer(name="audit-reader", topic="audit") as c:
            assert [c.read_next().seq for _ in range(3)] == [2, 12, 22]
            c.commit()
    with (
        litemq.Queue(qpath, file_size=SMALL_FILE) as q,
        q.tailer(name="audit-reader", topic="audit") as c,
    ):
        assert c.read_next().seq == 32


def test_follow_a_topic_from_another_process(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 50}) as q:
        _fill(q, 0, 10)
        child = spawn_python(
            """
            import sys, litemq
            with litemq.Queue(sys.argv[1], read_only=True) as q:
                t = q.tailer(topic="orders", tags=["paid"])
                print("ready", flush=True)
                for m in t.follow(idle_timeout=10):
                    print(m.seq, flush=True)
                    if m.seq >= 390:
                        break
            """,
            str(qpath),
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        _fill(q, 10, 400)
        # Read through the same buffered stream as readline() above:
        # communicate() reads the pipes' descriptors and would miss what
        # readline() buffered already.
        seqs = [int(line) for line in child.stdout]
        child.communicate(timeout=60)  # waits, closes the pipes
        assert child.returncode == 0
        assert seqs == list(range(0, 400, 10))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"topic": ""}, ValueError, "must be 1 to 255 bytes"),
        ({"tags": "paid"}, TypeError, "not a single str"),
        ({"queue_id": 1}, ValueError, "queue_id needs a topic"),
        ({"topic": "t", "queue_id": -1}, ValueError, "between 0 and 65535"),
    ],
)
def test_bad_selectors_are_typed_errors(
    queue: litemq.Queue, kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        queue.tailer(**kwargs)  # type: ignore[call-overload]


def test_roll_seals_the_active_file_so_its_topics_are_indexed(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        _fill(q, 0, 50)
        app = q.appender()
        before = len(q.data_files())
        app.roll()
        assert len(q.data_files()) == before + 1
        app.roll()  # nothing written since: no new file
        assert len(q.data_files()) == before + 1
        _fill(q, 50, 60)
        assert [m.seq for m in q.tailer(topic="audit")] == _want(60, "audit")
    assert len(list(qpath.rglob("*.topics"))) == 1
    with litemq.Queue(qpath, read_only=True) as q:
        assert [m.seq for m in q.tailer(topic="audit")] == _want(60, "audit")


def test_roll_is_refused_with_several_writers(qpath: Path) -> None:
    with litemq.Queue(qpath, multi_writer=True) as q:
        q.appender().append(b"x")
        with pytest.raises(ValueError, match="several writer processes"):
            q.appender().roll()
