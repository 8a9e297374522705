"""Spark reads through a secondary index: ``.option("where", "customer=c7")`` returns exactly
the rows a Spark filter on ``headers["customer"]`` returns, in one small task per queue; and
each indexed header is a typed top-level column whose filters are pushed down to the index.

PySpark (4.3 probed) hands a Python data source only ``IsNotNull(headers)`` for a filter on
``headers["customer"]``; a filter on the flattened ``customer`` column reaches it whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import litemq

pyspark = pytest.importorskip("pyspark")
from pyspark.sql import functions as F  # noqa: E402

import litemq.spark  # noqa: E402
from spark_session import SPARK_MARKS, local_session  # noqa: E402

pytestmark = SPARK_MARKS


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


def _scan_rows(df) -> int:  # type: ignore[no-untyped-def]
    """Rows the litemq scan handed Spark in the last run of ``df`` (Spark's own
    ``numOutputRows`` metric of the BatchScan node), before Spark's filter."""
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


def _fill_priced(path: Path, n: int, tag: str) -> None:
    with litemq.Queue(
        str(path),
        file_size=256 << 10,
        roll="count:300",
        indexes={"customer": "str", "price": "int", "queue": "str"},
    ) as q:
        app = q.appender()
        for i in range(n):
            headers: dict[str, str | bytes] = {"queue": f"{tag}{i % 3}"}
            if i % 10 == 0:
                headers["customer"] = b"c7"  # bytes: not indexed by a str index, null column
            elif i % 10 != 5:  # i % 10 == 5: no customer at all
                headers["customer"] = f"c{i % 9}"
            if i % 4 == 0:
                headers["price"] = i.to_bytes(8, "little", signed=True)
            elif i % 4 == 1:
                headers["price"] = str(i)
            elif i % 4 == 2:
                headers["price"] = "n/a"  # not an int: null column
            app.append(f"{tag}{i}".encode(), headers=headers)


def _customer(i: int) -> str | None:
    return None if i % 10 in (0, 5) else f"c{i % 9}"


def _price(i: int) -> int | None:
    return i if i % 4 in (0, 1) else None


def test_indexed_headers_are_typed_columns_and_their_filters_use_the_index(
    spark, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "ds"
    sizes = {"a": 2400, "b": 900}
    for name, n in sizes.items():
        _fill_priced(root / name, n, name)
    plain = spark.read.format("litemq").load(str(root))
    fields = {f.name: f.dataType.simpleString() for f in plain.schema.fields}
    # "queue" is taken by the queue's name: the header's column is header_queue.
    # The flattened columns come after the record-field columns.
    assert list(fields)[6:] == ["topic", "queue_id", "tags", "customer", "price", "header_queue"]
    assert (fields["customer"], fields["price"], fields["header_queue"]) == (
        "string",
        "bigint",
        "string",
    )
    rows = plain.select("queue", "seq", "customer", "price", "header_queue").collect()
    assert len(rows) == sum(sizes.values())
    for r in rows:
        i = r["seq"]
        assert (r["customer"], r["price"], r["header_queue"]) == (
            _customer(i),
            _price(i),
            f"{r['queue']}{i % 3}",
        )

    c = F.col
    filters = [
        c("customer") == "c7",
        c("customer").isin("c1", "c4"),
        c("customer").startswith("c1"),
        c("price") > 2000,
        (c("price") >= 100) & (c("price") < 140),
        c("price") <= 8,
        c("price") == 777,
        c("header_queue") == "b2",
        (c("customer") == "c3") & (c("price") > 1000),
    ]
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        pushed = spark.read.format("litemq").option("filterPushdown", "true").load(str(root))
        for cond in filters:
            want = sorted((r["queue"], r["seq"]) for r in plain.where(cond).collect())
            q = pushed.where(cond)
            got = q.collect()
            assert sorted((r["queue"], r["seq"]) for r in got) == want, cond
            # Read through the index: only rows that can match left the scan.
            assert _scan_rows(q) < sum(sizes.values()) // 4, cond
        assert plain.where(c("customer") == "c7").count() == len(
            [i for n in sizes.values() for i in range(n) if _customer(i) == "c7"]
        )
        # A comparison the index cannot take (not a literal of the column's type) is left to
        # Spark: every row is scanned, the answer is the same.
        odd = pushed.where(c("price") > c("seq"))
        assert sorted(r["seq"] for r in odd.collect()) == sorted(
            r["seq"] for r in plain.where(c("price") > c("seq")).collect()
        )
        assert _scan_rows(odd) == sum(sizes.values())
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")

    # A DataFrame read with the flattened columns writes back (they are derived, not written).
    copy = tmp_path / "copy"
    plain.where(c("queue") == "b").write.format("litemq").mode("append").save(str(copy))
    back = spark.read.format("litemq").load(str(copy))
    assert back.count() == sizes["b"]
    assert "customer" not in back.columns  # the copies have no indexes


def test_flattened_columns_are_the_indexes_every_queue_declares_alike(
    spark, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "ds"
    with litemq.Queue(str(root / "a"), indexes={"customer": "str", "price": "int"}) as q:
        q.appender().append(b"x", headers={"customer": "c1", "price": "5"})
    with litemq.Queue(str(root / "b"), indexes={"customer": "str", "price": "str"}) as q:
        q.appender().append(b"y", headers={"customer": "c2", "price": "5"})
    df = spark.read.format("litemq").load(str(root))
    # price is an int index in one queue and a str index in the other: no column.
    assert df.columns == [
        *("seq", "timestamp", "key", "headers", "payload", "queue", "topic", "queue_id", "tags"),
        "customer",
    ]
    assert sorted(r["customer"] for r in df.collect()) == ["c1", "c2"]
    with pytest.raises(Exception, match="cannot produce column 'customer' as bigint"):
        spark.read.format("litemq").schema("seq long, customer long").load(str(root)).collect()
