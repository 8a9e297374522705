"""Reading newest first: ``q.tailer(direction="backward")`` and ``q.last(n)``."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

import litemq
from conftest import SMALL_FILE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

#: Enough 200-byte messages to fill several SMALL_FILE data files.
N = 1500


def payload(i: int) -> bytes:
    return b"%06d" % i + b"." * 194


@pytest.fixture
def filled(queue: litemq.Queue) -> litemq.Queue:
    queue.appender().append_batch(payload(i) for i in range(N))
    assert len(queue.data_files()) >= 4
    return queue


def test_backward_from_the_end_yields_newest_first_across_files(filled: litemq.Queue) -> None:
    t = filled.tailer(start="end", direction="backward")
    assert t.direction == "backward"
    got = list(t)
    assert [m.seq for m in got] == list(range(N - 1, -1, -1))
    assert [m.payload for m in got] == [payload(i) for i in range(N - 1, -1, -1)]
    # Read down to seq 0: it stands below it, and stays there.
    assert t.next_seq == -1
    assert t.read_next() is None


def test_backward_from_a_sequence_starts_there(filled: litemq.Queue) -> None:
    t = filled.tailer(start=700, direction="backward")
    assert t.next_seq == 700
    assert [m.seq for m in t.read_batch(5, timeout=0)] == [700, 699, 698, 697, 696]
    t.seek(1200)
    msg = t.read_next()
    assert msg is not None
    assert (msg.seq, msg.payload) == (1200, payload(1200))
    t.seek_end()
    msg = t.read_next()
    assert msg is not None
    assert msg.seq == N - 1


def test_backward_seek_time_goes_to_the_newest_message_before_it(queue: litemq.Queue) -> None:
    app = queue.appender()
    for i in range(5):
        app.append(b"%d" % i)
        app.flush()  # written (and stamped) now, not in one bundle with the next
        time.sleep(0.002)
    stamps = [m.timestamp for m in queue.tailer()]
    assert len(set(stamps)) == 5
    t = queue.tailer(start="end", direction="backward")
    t.seek_time(stamps[3])
    assert [m.seq for m in t] == [2, 1, 0]
    t.seek_time(stamps[0])  # nothing before the first
    assert t.read_next() is None


def test_backward_from_the_start_reads_only_the_oldest(filled: litemq.Queue) -> None:
    assert [m.seq for m in filled.tailer(start="start", direction="backward")] == [0]


def test_backward_on_an_empty_queue_reads_nothing(queue: litemq.Queue) -> None:
    assert list(queue.tailer(start="end", direction="backward")) == []


def test_a_backward_tailer_never_waits(filled: litemq.Queue) -> None:
    # Forward, these would wait forever for a message; backward, nothing
    # older is ever written, so they return what is there and stop.
    t = filled.tailer(start=2, direction="backward")
    assert [m.seq for m in t.follow()] == [2, 1, 0]
    assert t.read_next(timeout=None) is None
    assert t.read_batch(10, timeout=None) == []


@pytest.mark.asyncio
async def test_read_next_async_on_a_backward_tailer_returns_without_waiting(
    filled: litemq.Queue,
) -> None:
    t = filled.tailer(start=1, direction="backward")
    got = [m.seq async for m in t.follow_async()]
    assert got == [1, 0]
    assert await t.read_next_async() is None


def test_backward_stops_at_what_retention_kept(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append_batch(payload(i) for i in range(N))
        t = q.tailer(start="end", direction="backward")
        report = q.apply_retention(litemq.Retention(max_files=2))
        assert report.first_seq > 0
        seqs = [m.seq for m in t]
        assert seqs == list(range(N - 1, report.first_seq - 1, -1))


def test_backward_reads_a_queue_written_before_the_dense_index(tmp_path: Path) -> None:
    # Format 4 files have no NAME.offsets: each step back scans from the
    # sparse index instead, with the same result.
    src = FIXTURES / "queue-v4" / "queue"
    shutil.copytree(src, tmp_path / "q")
    with litemq.Queue(tmp_path / "q", read_only=True) as q:
        forward = [(m.seq, m.payload) for m in q.tailer()]
        assert len(forward) > 3
        backward = [(m.seq, m.payload) for m in q.tailer(start="end", direction="backward")]
        assert backward == forward[::-1]
        assert [m.seq for m in q.last(2)] == [s for s, _ in forward[-2:]]


def test_bad_directions_are_refused(queue: litemq.Queue) -> None:
    with pytest.raises(ValueError, match="direction"):
        queue.tailer(direction="sideways")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="named tailer reads forward"):
        queue.tailer(name="billing", direction="backward")  # type: ignore[call-overload]
    assert queue.tailer().direction == "forward"


def test_last_returns_the_last_n_oldest_first(filled: litemq.Queue) -> None:
    got = filled.last(3)
    assert [m.seq for m in got] == [N - 3, N - 2, N - 1]
    assert [m.payload for m in got] == [payload(i) for i in range(N - 3, N)]
    assert [m.seq for m in filled.last(N + 10)] == list(range(N))
    assert filled.last(0) == []


def test_last_on_an_empty_queue_and_bad_counts(queue: litemq.Queue) -> None:
    assert queue.last(5) == []
    with pytest.raises(ValueError, match="n must be >= 0"):
        queue.last(-1)
    with pytest.raises(TypeError, match="n must be an int"):
        queue.last("3")  # type: ignore[arg-type]
