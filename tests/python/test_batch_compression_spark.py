"""Spark reads a queue of batches compressed together (format 9): every member a row, with
its payload and fields, whatever the partitioning (cuts fall inside batches), and a
DataFrame written back reads the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import litemq

pyspark = pytest.importorskip("pyspark")

import litemq.spark  # noqa: E402
from spark_session import SPARK_MARKS, local_session  # noqa: E402

pytestmark = SPARK_MARKS


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from local_session(tmp_path_factory, "litemq-batches")


def event(i: int) -> bytes:
    return json.dumps({"event_id": i, "user": f"u{i % 17}", "kind": "click"}).encode()


def test_spark_reads_every_member_of_every_batch(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "ds"
    n = 5000
    with litemq.Queue(str(root / "q"), file_size=256 << 10, compression="zstd") as q:
        app = q.appender()
        app.append(b"plain before")
        for at in range(0, n, 700):
            items = [
                {"payload": event(i), "headers": {"n": str(i)}} if i % 3 == 0 else event(i)
                for i in range(at, min(at + 700, n))
            ]
            app.append_batch(items, compress_together=True)
            if at == 2100:
                app.roll()
        app.append(b"plain after")
        app.flush()
        local = q.read_arrow(columns=["seq", "timestamp", "headers", "payload"]).to_pylist()
    assert len(local) == n + 2
    for rows in (None, "333"):
        reader = spark.read.format("litemq")
        if rows is not None:
            reader = reader.option("rowsPerPartition", rows)
        df = reader.load(str(root)).select("seq", "timestamp", "headers", "payload")
        got = sorted((r.asDict() for r in df.collect()), key=lambda r: r["seq"])
        assert [r["seq"] for r in got] == [r["seq"] for r in local], rows
        assert [bytes(r["payload"]) for r in got] == [r["payload"] for r in local], rows
        # The session's time zone is UTC (spark_session): Spark gives naive UTC times.
        assert [r["timestamp"] for r in got] == [
            r["timestamp"].replace(tzinfo=None) for r in local
        ], rows
        assert [dict(r["headers"] or {}) for r in got] == [
            dict(r["headers"] or {}) for r in local
        ], rows
