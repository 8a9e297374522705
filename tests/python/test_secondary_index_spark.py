"""Spark reads through a secondary index: ``.option("where", "customer=c7")`` returns exactly
the rows a Spark filter on ``headers["customer"]`` returns, in one small task per queue.

PySpark (4.3 probed) hands a Python data source only ``IsNotNull(headers)`` for a filter on
``headers["customer"]``, so the index is reached through the option, not through pushdown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import litemq

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import functions as F  # noqa: E402

import litemq.spark  # noqa: E402
from spark_session import local_session  # noqa: E402


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from local_session(tmp_path_factory, "litemq-secondary-index")


def test_where_option_reads_through_the_index_exactly(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "ds"
    for name, n in (("a", 2500), ("b", 700)):
        with litemq.Queue(
            str(root / name),
            file_size=256 << 10,
            roll="count:400",
            indexes={"customer": "str", "price": "int"},
        ) as q:
            app = q.appender()
            for i in range(n):
                app.append(
                    f"{name}{i}".encode(),
                    headers={"customer": f"c{i % 9}", "price": str(i % 50)},
                )
    plain = spark.read.format("litemq").load(str(root))
    want = sorted(
        (r["queue"], r["seq"])
        for r in plain.where(F.col("headers")["customer"] == F.lit(b"c7")).collect()
    )
    assert len(want) == len([i for i in range(2500) if i % 9 == 7]) + len(
        [i for i in range(700) if i % 9 == 7]
    )
    indexed = spark.read.format("litemq").option("where", "customer=c7").load(str(root))
    assert indexed.rdd.getNumPartitions() == 2  # one small task per queue
    assert sorted((r["queue"], r["seq"]) for r in indexed.collect()) == want
    priced = spark.read.format("litemq").option("where", "price=13").option("endSeq", 300)
    got = sorted((r["queue"], r["seq"]) for r in priced.load(str(root)).collect())
    assert got == sorted((q, i) for q in ("a", "b") for i in range(13, 300, 50))
    with pytest.raises(Exception, match="FIELD=VALUE"):
        spark.read.format("litemq").option("where", "customer").load(str(root))
    with pytest.raises(Exception, match="no index on 'region'"):
        spark.read.format("litemq").option("where", "region=eu").load(str(root)).collect()
    # An archive has no secondary indexes: refused, not silently unfiltered.
    litemq.archive_queue(root / "a", tmp_path / "arch")
    with pytest.raises(Exception, match="needs a queue's secondary indexes"):
        spark.read.format("litemq").option("where", "customer=c7").load(
            str(tmp_path / "arch")
        ).collect()
