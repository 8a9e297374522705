"""Option spellings accepted by `litemq.Queue` and what they normalise to."""

from __future__ import annotations

from datetime import timedelta

import pytest

import litemq
from litemq.options import parse_flush, parse_roll, parse_size, parse_wait


@pytest.mark.parametrize(
    ("spec", "rules"),
    [
        ("daily", [("daily", 0)]),
        ("Hourly", [("hourly", 0)]),
        ("minutely", [("minutely", 0)]),
        (1 << 20, [("size", 1 << 20)]),
        ("size:64MiB", [("size", 64 << 20)]),
        ("size:4096", [("size", 4096)]),
        ("count:1000", [("count", 1000)]),
        (["hourly", "count:5"], [("hourly", 0), ("count", 5)]),
        (("daily", 1 << 30), [("daily", 0), ("size", 1 << 30)]),
        (
            {"period": "hourly", "size": "256MiB", "count": 10},
            [("hourly", 0), ("size", 256 << 20), ("count", 10)],
        ),
    ],
)
def test_roll_spellings(spec: litemq.options.RollSpec, rules: list[tuple[str, int]]) -> None:
    assert parse_roll(spec) == rules


@pytest.mark.parametrize(
    ("text", "n"),
    [("4096", 4096), ("64KiB", 65536), ("64k", 65536), ("1 GiB", 1 << 30), ("2m", 2 << 20), (7, 7)],
)
def test_sizes(text: str | int, n: int) -> None:
    assert parse_size(text) == n


def test_flush_and_wait_spellings() -> None:
    assert parse_flush("async") == ("async", 0, 0.0)
    assert parse_flush("sync") == ("sync", 0, 0.0)
    assert parse_flush(litemq.Batch(bytes=4096, interval=0.5)) == ("batch", 4096, 0.5)
    assert parse_flush(litemq.Batch(interval=timedelta(milliseconds=20))) == (
        "batch",
        1 << 20,
        0.02,
    )
    assert parse_wait("busy-spin") == "busy-spin"
    assert litemq.Batch() == litemq.Batch(bytes=1 << 20, interval=0.01)


def test_size_roll_really_rolls_by_size(qpath: object) -> None:
    with litemq.Queue(qpath, file_size="256KiB", roll="size:80KiB") as q:  # type: ignore[arg-type]
        app = q.appender()
        app.append_batch([b"z" * 1000] * 400)
        app.flush()
        assert q.stats()["files"] >= 4
        assert [m.seq for m in q.tailer()] == list(range(400))
