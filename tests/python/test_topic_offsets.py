"""Topic offsets (issue 17): each message of a topic stream (topic and queue
id) has a dense offset 0, 1, 2, ... (RocketMQ's consume-queue offset), the
same whether a file's topic index is built, missing, damaged or not built
yet; tailers seek by it, named tailers per topic resume with it, and
`find(key, topic=...)` answers only that topic.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE


def _shape(i: int) -> dict[str, object]:
    """The fields message i is appended with."""
    if i % 10 == 0:
        return {"topic": "orders", "tags": ["paid", "eu"] if i % 20 == 0 else ["eu"]}
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
        assert app.append(f"m{i}".encode(), key=f"k{i % 7}", **_shape(i)) == i  # type: ignore[arg-type]
    app.flush()


def _stream(i: int) -> tuple[str | None, int] | None:
    s = _shape(i)
    if "topic" not in s and "tags" not in s:
        return None
    return (s.get("topic"), s.get("queue_id", 0))  # type: ignore[return-value]


def _offsets(n: int) -> dict[int, int]:
    """The model: seq -> offset within its stream, for every topic message."""
    seen: dict[tuple[str | None, int], int] = {}
    out = {}
    for i in range(n):
        st = _stream(i)
        if st is None:
            continue
        out[i] = seen.get(st, 0)
        seen[st] = out[i] + 1
    return out


SELECTORS: list[dict[str, object]] = [
    {"topic": "orders"},
    {"topic": "orders", "tags": ["paid"]},
    {"topic": "orders", "queue_id": 1},
    {"topic": "audit"},
    {"tags": ["paid"]},
]


def _check(q: litemq.Queue, n: int) -> None:
    model = _offsets(n)
    for sel in SELECTORS:
        got = [(m.seq, m.topic_offset) for m in q.tailer(**sel)]  # type: ignore[call-overload]
        assert got, sel
        assert got == [(seq, model[seq]) for seq, _ in got], sel


def test_offsets_are_dense_per_stream_whatever_the_indexes(qpath: Path) -> None:
    n = 2000
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 300}) as q:
        _fill(q, 0, n)
        _check(q, n)  # sealed files (indexed or not yet) and the active file
        orders = [m.topic_offset for m in q.tailer(topic="orders", queue_id=0)]
        assert orders == list(range(n // 10))
        assert q.get(10).topic_offset is None  # not read through a topic tailer
        assert next(iter(q.tailer())).topic_offset is None
    assert list(qpath.rglob("*.topics"))
    with litemq.Queue(qpath, read_only=True) as q:
        _check(q, n)
    # Indexes lost (a crash before they were built) or damaged: the data
    # files are read instead, with the same offsets.
    files = sorted(qpath.rglob("*.topics"))
    files[0].unlink()
    damaged = bytearray(files[1].read_bytes())
    damaged[-5] ^= 0xFF
    files[1].write_bytes(bytes(damaged))
    with litemq.Queue(qpath, read_only=True) as q:
        _check(q, n)


def test_seek_topic_offset(qpath: Path) -> None:
    n = 1500
    model = _offsets(n)
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 300}) as q:
        _fill(q, 0, n)
        t = q.tailer(topic="orders", queue_id=1)
        for k in (0, 1, 29, 30, 31, 149):
            t.seek_topic_offset(k)
            m = t.read_next()
            assert m is not None
            assert (m.topic_offset, m.seq) == (k, 10 * k + 1)
            assert model[m.seq] == k
        # The stream's count: after its last message, where the next comes.
        t.seek_topic_offset(150)
        assert t.read_next() is None
        app = q.appender()
        app.append(b"new", topic="orders", queue_id=1)
        app.flush()
        m = t.read_next()
        assert m is not None
        assert (m.seq, m.topic_offset) == (n, 150)
        with pytest.raises(ValueError, match="past the end"):
            t.seek_topic_offset(152)
        # A selector without queue_id seeks in queue id 0; tags do not
        # change what an offset counts.
        paid = q.tailer(topic="orders", tags=["paid"])
        paid.seek_topic_offset(3)  # seq 30 has no "paid": the next paid one
        m = paid.read_next()
        assert m is not None
        assert (m.seq, m.topic_offset) == (40, 4)
        with pytest.raises(ValueError, match="needs a topic"):
            q.tailer().seek_topic_offset(0)
        with pytest.raises(ValueError, match="needs a topic"):
            q.tailer(tags=["paid"]).seek_topic_offset(0)
        # A topic with no message yet: offset 0 is where its first will be.
        none = q.tailer(topic="nothing")
        none.seek_topic_offset(0)
        assert none.read_next() is None


def test_topics_reports_first_and_last_offsets(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 300}) as q:
        _fill(q, 0, 1000)
        infos = {(t.topic, t.queue_id): t for t in q.topics()}
        orders = infos[("orders", 0)]
        assert (orders.first_offset, orders.last_offset) == (0, 99)
        t = q.tailer(topic="orders")
        t.seek_topic_offset(orders.last_offset)
        m = t.read_next()
        assert m is not None
        assert m.seq == orders.last_seq


def test_named_topic_tailers_resume_with_their_offsets(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 100}) as q:
        _fill(q, 0, 500)
        with q.tailer(name="orders", topic="orders", queue_id=0) as c:
            assert [c.read_next().topic_offset for _ in range(3)] == [0, 1, 2]
            c.commit()
        with q.tailer(name="audit", topic="audit") as c:
            c.seek_topic_offset(20)
            assert c.read_next().seq == 202
            c.commit()
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 100}) as q:
        with q.tailer(name="orders", topic="orders", queue_id=0) as c:
            m = c.read_next()
            assert (m.seq, m.topic_offset) == (30, 3)
        with q.tailer(name="audit", topic="audit") as c:
            m = c.read_next()
            assert (m.seq, m.topic_offset) == (212, 21)


def test_offsets_after_retention_count_the_kept_messages(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 100}) as q:
        _fill(q, 0, 500)
        report = q.apply_retention(litemq.Retention(max_files=3))
        first = report.first_seq
        assert first == 200
        # Documented: offsets count the messages still in the queue.
        got = [(m.seq, m.topic_offset) for m in q.tailer(topic="audit")]
        assert got == [(s, k) for k, s in enumerate(range(first + 2, 500, 10))]
        t = q.tailer(topic="audit")
        t.seek_topic_offset(0)
        assert t.read_next().seq == first + 2
        info = {(i.topic, i.queue_id): i for i in q.topics()}[("audit", 0)]
        assert (info.first_offset, info.last_offset, info.count) == (0, 29, 30)


def test_find_by_key_in_a_topic(qpath: Path) -> None:
    n = 700
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 200}) as q:
        _fill(q, 0, n)
        every = [m.seq for m in q.find("k3")]
        assert every == [i for i in range(n) if i % 7 == 3]
        orders = [m.seq for m in q.find("k3", topic="orders")]
        assert orders == [i for i in every if _shape(i).get("topic") == "orders"]
        assert orders  # the key is in several topics: the filter did something
        q1 = [m.seq for m in q.find("k3", topic="orders", queue_id=1)]
        assert q1 == [i for i in every if i % 10 == 1]
        paid = [m.seq for m in q.find("k3", topic="orders", tags=["paid"])]
        assert paid == [i for i in every if i % 20 == 0]
        assert [m.seq for m in q.find("k3", topic="orders", limit=2)] == orders[:2]
        assert q.find("k3", topic="nothing") == []
        with pytest.raises(ValueError, match="queue_id needs a topic"):
            q.find("k3", queue_id=1)


def test_a_topic_read_checks_frames_damaged_after_the_handle_verified_the_file(
    qpath: Path,
) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 200}) as q:
        _fill(q, 0, 600)
    with litemq.Queue(qpath, read_only=True) as q:
        # A bulk read verifies each sealed file by its footer CRC; a topic
        # read of a verified file trusts that instead of each frame's CRC.
        assert len(list(q.tailer())) == 600
        assert [m.seq for m in q.tailer(topic="audit")][:2] == [2, 12]
        file, offset = q.get(12).position  # type: ignore[misc]
        with open(file, "r+b") as f:  # the same file, written to: checked again
            f.seek(offset + 8)
            byte = f.read(1)
            f.seek(offset + 8)
            f.write(bytes([byte[0] ^ 0x01]))
        with pytest.raises(litemq.CorruptedError):
            list(q.tailer(topic="audit"))


def test_offsets_do_not_go_back_when_retention_runs_during_a_read(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, roll={"count": 100}) as q:
        _fill(q, 0, 500)
        t = q.tailer(topic="audit")
        got = [t.read_next() for _ in range(25)]  # into the third file
        assert [(m.seq, m.topic_offset) for m in got][-1] == (242, 24)
        assert q.apply_retention(litemq.Retention(max_files=3)).first_seq == 200
        rest = [(m.seq, m.topic_offset) for m in t]
        assert rest == [(s, (s - 2) // 10) for s in range(252, 500, 10)]
