"""Batches out: `Queue.iter_batches(n)`, for consumers that work in chunks."""

from __future__ import annotations

import pytest

import litemq


@pytest.fixture
def hundred(queue: litemq.Queue) -> litemq.Queue:
    queue.appender().append_batch(b"%03d" % i for i in range(100))
    return queue


def test_iter_batches_yields_every_message_in_lists_of_at_most_n(hundred: litemq.Queue) -> None:
    batches = list(hundred.iter_batches(30))
    assert [len(b) for b in batches] == [30, 30, 30, 10]
    assert [m.seq for b in batches for m in b] == list(range(100))
    assert [m.payload for m in batches[-1]] == [b"%03d" % i for i in range(90, 100)]


def test_iter_batches_from_start_to_end(hundred: litemq.Queue) -> None:
    batches = list(hundred.iter_batches(7, start=10, end=25))
    assert [len(b) for b in batches] == [7, 7, 1]
    assert [m.seq for b in batches for m in b] == list(range(10, 25))
    assert list(hundred.iter_batches(5, start="end")) == []
    assert list(hundred.iter_batches(5, start=50, end=50)) == []


def test_iter_batches_sees_what_is_appended_while_it_runs(hundred: litemq.Queue) -> None:
    it = hundred.iter_batches(60)
    assert len(next(it)) == 60
    app = hundred.appender()
    app.append(b"late")
    app.flush()  # readers see an append once the I/O thread wrote it: flush() waits for that
    rest = list(it)
    assert [m.seq for b in rest for m in b] == list(range(60, 101))


def test_iter_batches_refuses_bad_sizes_at_the_call(hundred: litemq.Queue) -> None:
    with pytest.raises(ValueError, match="n must be at least 1"):
        hundred.iter_batches(0)
    with pytest.raises(TypeError, match="n must be an int"):
        hundred.iter_batches(2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="end must be >= 0"):
        hundred.iter_batches(2, end=-1)
