"""Spark reads a compacted queue: exactly the survivors, whatever the partitioning, holes
(sequences key compaction dropped) giving no row and no error."""

from __future__ import annotations

from pathlib import Path

import pytest

import litemq

pyspark = pytest.importorskip("pyspark")

import litemq.spark  # noqa: E402
from spark_session import SPARK_MARKS, local_session  # noqa: E402

pytestmark = SPARK_MARKS


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from local_session(tmp_path_factory, "litemq-compaction")


def test_spark_reads_the_survivors_of_a_compacted_queue(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "ds"
    n = 3000
    with litemq.Queue(str(root / "q"), file_size=256 << 10, roll="count:400") as q:
        app = q.appender()
        for i in range(n):
            if i % 5 == 0:
                app.append(f"free{i}".encode())  # no key: always kept
            else:
                app.append(f"v{i}".encode(), key=f"k{i % 13}")
        app.flush()
        active = q.data_files()[-1].first_seq
        q.compact(grace=0)
        kept = [m.seq for m in q.tailer()]
    latest = {f"k{i % 13}": i for i in range(n) if i % 5}
    assert kept == [i for i in range(n) if i % 5 == 0 or i >= active or latest[f"k{i % 13}"] == i]
    for rows in (None, "97"):
        reader = spark.read.format("litemq")
        if rows is not None:
            reader = reader.option("rowsPerPartition", rows)
        got = sorted(r["seq"] for r in reader.load(str(root)).select("seq").collect())
        assert got == kept, rows
