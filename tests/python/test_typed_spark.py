"""Typed queues in Spark: the DataFrame has the schema's columns (after seq, timestamp and
queue), typed, and filters on them are pushed down to the reader (PySpark 4.1+)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import litemq

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402

import litemq.spark  # noqa: E402
from spark_session import SPARK_MARKS, local_session  # noqa: E402

pytestmark = SPARK_MARKS

MARKET = pa.schema(
    [
        pa.field("time", pa.int64(), nullable=False),
        pa.field("symbol", pa.string(), nullable=False),
        pa.field("price", pa.float64(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("side", pa.int8(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("fee", pa.decimal128(8, 2)),
        pa.field("day", pa.date32()),
    ]
)
SYMBOLS = ("AAPL", "MSFT", "GOOG", "AMZN")


def rows(n: int, start: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [
            {
                "time": 1_764_667_800_000_000 + i,
                "symbol": SYMBOLS[i % 4],
                "price": 100 + i / 8,
                "size": i,
                "side": (-1, 1)[i % 2],
                "id": i,
                "fee": None if i % 5 == 0 else Decimal(i % 100) / 4,
                "day": dt.date(2026, 12, 1 + i % 2),
            }
            for i in range(start, start + n)
        ],
        schema=MARKET,
    )


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    yield from local_session(tmp_path_factory, "litemq-typed")


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("typed") / "ds"
    for name, n in (("a", 3000), ("b", 500)):
        with litemq.Queue(
            str(root / name), schema=MARKET, file_size=256 << 10, roll="count:1000"
        ) as q:
            for start in range(0, n, 1000):  # a row batch is never split: one per file
                q.appender().append_batch(rows(min(1000, n - start), start))
    return root


def test_a_typed_queue_reads_as_its_schema_columns(spark, market: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.read.format("litemq").load(str(market / "a"))
    assert df.columns == ["seq", "timestamp", "queue", *MARKET.names]
    types = {f.name: f.dataType for f in df.schema.fields}
    assert types["side"] == T.ByteType()
    assert types["fee"] == T.DecimalType(8, 2)
    assert types["day"] == T.DateType()
    assert types["symbol"] == T.StringType()
    assert not df.schema["symbol"].nullable
    assert df.schema["fee"].nullable
    got = df.orderBy("seq").select(*MARKET.names).collect()
    want = rows(3000).to_pylist()
    assert [r.asDict() for r in got] == want
    assert df.rdd.getNumPartitions() >= 3  # one per data file


def test_a_dataset_of_typed_queues_and_a_projection(spark, market: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.read.format("litemq").load(str(market))
    counts = {r["queue"]: r["count"] for r in df.groupBy("queue").count().collect()}
    assert counts == {"a": 3000, "b": 500}
    msft = df.where(F.col("symbol") == "MSFT").select("queue", "id", "price")
    assert msft.count() == 750 + 125
    assert df.where(F.col("fee").isNull()).count() == 600 + 100


def _scan_rows(df) -> int:  # type: ignore[no-untyped-def]
    """Rows the litemq scan handed Spark in the last run of ``df`` (the BatchScan node's
    ``numOutputRows``), before Spark's own filter."""
    found = []

    def walk(node) -> None:  # type: ignore[no-untyped-def]
        if node.nodeName().startswith("BatchScan"):
            found.append(int(node.metrics().apply("numOutputRows").value()))
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(df._jdf.queryExecution().executedPlan())
    assert len(found) == 1, found
    return found[0]


def test_filters_on_schema_columns_are_pushed_down(spark, market: Path) -> None:  # type: ignore[no-untyped-def]
    if not litemq.spark.features()["filter_pushdown"]:
        pytest.skip("filter pushdown needs PySpark 4.1")
    plain = spark.read.format("litemq").load(str(market))
    c = F.col
    filters = [
        c("symbol") == "GOOG",
        c("symbol").isin("AAPL", "AMZN"),
        c("symbol").startswith("MS"),
        c("id") > 2990,
        (c("price") >= 150) & (c("price") < 151),
        c("side") == -1,
        c("day") == dt.date(2026, 12, 2),
    ]
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        pushed = spark.read.format("litemq").option("filterPushdown", "true").load(str(market))
        wants = []
        for cond in filters:
            want = sorted((r["queue"], r["seq"]) for r in plain.where(cond).collect())
            q = pushed.where(cond)
            got = sorted((r["queue"], r["seq"]) for r in q.collect())
            assert got == want, cond
            assert want, cond
            # Filtered in the reader: only the rows the pushed filter keeps left the scan.
            assert _scan_rows(q) < 3500 * 3 // 4, cond
            wants.append(want)
        # With indexes on the columns (a selective filter then reads only the
        # rows an index lists), the same rows.
        for name in ("a", "b"):
            with litemq.Queue(str(market / name)) as q:
                for field in ("id", "symbol", "side", "day"):
                    q.add_index(field)
        for cond, want in zip(filters, wants, strict=True):
            got = sorted((r["queue"], r["seq"]) for r in pushed.where(cond).collect())
            assert got == want, cond
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


def test_a_load_mixing_typed_and_untyped_queues_is_refused(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "mixed"
    with litemq.Queue(str(root / "typed"), schema=MARKET) as q:
        q.appender().append_batch(rows(3))
    with litemq.Queue(str(root / "plain")) as q:
        q.appender().append(b"x")
    with pytest.raises(Exception, match="cannot hold untyped queues"):
        spark.read.format("litemq").load(str(root)).collect()
