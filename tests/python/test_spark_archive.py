"""Spark reads archives (``litemq archive``) like queues: same schema, options, partitioning
and CRC checks, through pyarrow.fs instead of mmap. One ``local[2]`` session for the module.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")
pa = pytest.importorskip("pyarrow")


import litemq  # noqa: E402
import litemq.spark  # noqa: E402
from conftest import S3Server  # noqa: E402
from spark_session import READER, SPARK_MARKS, local_session  # noqa: E402

pytestmark = SPARK_MARKS

FILE_SIZE = 64 * 1024


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from local_session(tmp_path_factory, "litemq-archive-tests")


def make_queue(path: Path, n: int, tag: str = "m") -> None:
    with litemq.Queue(path, file_size=FILE_SIZE) as q:
        app = q.appender()
        for i in range(n):
            app.append(
                f"{tag}-{i} ".encode() * 3,
                key=f"k{i % 7}" if i % 3 == 0 else None,
                headers={"h": f"v{i}"} if i % 5 == 0 else None,
            )
        app.flush()


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (
            r["queue"],
            r["seq"],
            r["timestamp"],
            r["key"],
            tuple(sorted((r["headers"] or {}).items())),
            bytes(r["payload"]),
        )
        for r in df.collect()
    )


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """A queue of several files and its archive; returns (queue, archive, end_seq)."""
    root = tmp_path_factory.mktemp("arch")
    q = root / "orders"
    make_queue(q, 3000)
    dest = root / "archive" / "orders"
    report = litemq.archive_queue(q, dest)
    assert report.end_seq is not None
    return q, dest, report.end_seq


def test_an_archive_reads_as_the_queue_it_came_from(spark: Any, archived: Any) -> None:
    q, dest, end = archived
    from_archive = spark.read.format("litemq").load(str(dest))
    from_queue = spark.read.format("litemq").option("endSeq", end).load(str(q))
    assert from_archive.schema == from_queue.schema
    assert from_archive.count() == end
    assert rows(from_archive) == rows(from_queue)
    # One partition per data file at least; rowsPerPartition cuts inside files.
    files = len(litemq.open_archive(dest).files)
    assert from_archive.rdd.getNumPartitions() == files
    cut = spark.read.format("litemq").option("rowsPerPartition", 100).load(str(dest))
    assert cut.rdd.getNumPartitions() > files
    assert rows(cut) == rows(from_queue)


def test_archive_options_narrow_like_a_queues(spark: Any, archived: Any) -> None:
    q, dest, end = archived

    def both(**opts: Any) -> tuple[list[Any], list[Any]]:
        a = spark.read.format("litemq").options(**opts).load(str(dest))
        lo = {**opts, "endSeq": min(int(opts.get("endSeq", end)), end)}
        b = spark.read.format("litemq").options(**lo).load(str(q))
        return rows(a), rows(b)

    a, b = both(startSeq=100, endSeq=1500)
    assert len(a) == 1400
    assert a == b
    a, b = both(key="k3")
    assert a
    assert a == b
    with litemq.Queue(q, read_only=True) as queue:
        ts = queue.read_arrow(start=500, end=1200, columns=["timestamp"]).column("timestamp")
        lo_us, hi_us = ts[0].value, ts[-1].value
    a, b = both(startTime=lo_us, endTime=hi_us)
    assert a
    assert a == b
    some = spark.read.format("litemq").schema("payload string, seq bigint").load(str(dest))
    assert some.columns == ["payload", "seq"]
    assert some.where("seq = 7").first()["payload"] == "m-7 " * 3


def test_a_directory_of_archives_on_s3_reads_as_a_dataset(
    spark: Any, s3_server: S3Server, tmp_path: Path
) -> None:
    bucket = s3_server.bucket("lmq-spark")
    expected = []
    for name in ("host-a/orders", "host-b/orders", "host-b/payments"):
        qp = tmp_path / name.replace("/", "-")
        make_queue(qp, 1200, tag=name)
        litemq.archive_queue(qp, s3_server.uri(bucket, f"journals/{name}"))
        end = litemq.open_archive(s3_server.uri(bucket, f"journals/{name}")).end_seq
        local = spark.read.format("litemq").option("endSeq", end).load(str(qp))
        expected += [(name, *r[1:]) for r in rows(local)]
    df = spark.read.format("litemq").load(s3_server.uri(bucket, "journals"))
    assert rows(df) == sorted(expected)
    assert {r["queue"] for r in df.select("queue").distinct().collect()} == {
        "host-a/orders",
        "host-b/orders",
        "host-b/payments",
    }


def test_damage_in_an_archive_fails_the_read(spark: Any, archived: Any, tmp_path: Path) -> None:
    q, _, _ = archived
    dest = tmp_path / "damaged"
    litemq.archive_queue(q, dest)
    f = litemq.open_archive(dest).files[0]
    raw = bytearray((dest / f.path).read_bytes())
    raw[4096 + 100] ^= 0x01
    (dest / f.path).write_bytes(bytes(raw))
    # The Python source checks the fetched file against its footer's frames_crc; the JVM
    # reader (which maps the archived file as a queue's) names the damaged frame.
    name = re.escape(Path(f.path).name)
    expected = (
        rf"corrupted data in \S*{name} at offset \d+ \(seq \d+\): CRC mismatch"
        if READER == "jvm"
        else r"CorruptedError|frames_crc"
    )
    with pytest.raises(Exception, match=expected):
        spark.read.format("litemq").load(str(dest)).count()


def test_archives_are_for_batch_reads_only(spark: Any, archived: Any, s3_server: S3Server) -> None:
    _, dest, _ = archived
    query = (
        spark.readStream.format("litemq")
        .load(str(dest))
        .writeStream.format("console")
        .option("checkpointLocation", str(dest.parent / "_ckpt"))
        .start()
    )
    try:
        with pytest.raises(Exception, match="is an archive"):
            query.awaitTermination(120)
    finally:
        query.stop()
    df = spark.read.format("litemq").load(str(dest)).select("payload")
    with pytest.raises(Exception, match="litemq archive"):
        df.write.format("litemq").mode("append").save(s3_server.uri("lmq-spark-w", "out"))


def test_pushed_filters_on_an_archive_give_the_same_rows(spark: Any, archived: Any) -> None:
    if not litemq.spark.features()["filter_pushdown"]:
        pytest.skip("filter pushdown needs PySpark 4.1")
    from pyspark.sql import functions as F

    _, dest, _ = archived

    def query(df: Any) -> Any:
        return df.where((F.col("seq") >= 700) & (F.col("seq") < 1900)).where(
            F.col("key") == F.lit(b"k3")
        )

    plain = spark.read.format("litemq").option("rowsPerPartition", 300).load(str(dest))
    expect = rows(query(plain))
    assert expect
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        pushed = (
            spark.read.format("litemq")
            .option("rowsPerPartition", 300)
            .option("filterPushdown", "true")
            .load(str(dest))
        )
        q = query(pushed)
        assert rows(q) == expect
        assert q.rdd.getNumPartitions() < plain.rdd.getNumPartitions()
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
