"""litemq on a real local Spark session: reads, writes, streams, exactly once under retries.

One session for the module, ``local[2,2]``: two cores, and a failed task is tried again once
(so a test can fail a task's first attempt on purpose and check the retry's effect).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")
pa = pytest.importorskip("pyarrow")

from pyspark.sql import functions as F  # noqa: E402

import litemq  # noqa: E402
import litemq.spark  # noqa: E402
from litemq.spark import dataset as ds  # noqa: E402
from spark_session import SPARK_MARKS, local_session  # noqa: E402

pytestmark = SPARK_MARKS

FEATURES = litemq.spark.features()
#: Data files are preallocated: keep the many queues these tests create small.
QUEUE_FILE_SIZE = 1 << 20
WRITE_FILE_SIZE = 256 << 10


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory):
    yield from local_session(tmp_path_factory, "litemq-tests")


# ------------------------------------------------------------------------------------------
# helpers


def make_queue(path: Path, n: int, *, start: int = 0, tag: str = "m") -> list[dict]:
    """Append ``n`` messages (every third with a key, every fifth with headers); return them."""
    expected = []
    with litemq.Queue(str(path), file_size=QUEUE_FILE_SIZE) as q:
        app = q.appender()
        for i in range(start, start + n):
            payload = f"{tag}-{i}".encode() + bytes([i % 256])
            key = f"k{i % 7}" if i % 3 == 0 else None
            headers = {"h": f"v{i}", "bin": bytes([1, 2, i % 256])} if i % 5 == 0 else None
            seq = app.append(payload, key=key, headers=headers)
            expected.append({"seq": seq, "payload": payload, "key": key, "headers": headers})
        app.flush()
    return expected


def as_bytes(v):
    if v is None:
        return None
    return v.encode() if isinstance(v, str) else bytes(v)


def norm_headers(h):
    if not h:
        return None
    return {k: as_bytes(v) for k, v in dict(h).items()}


def rows_of(df) -> list[dict]:
    """Collect with timestamps as µs integers (independent of any time zone)."""
    cols = [
        F.unix_micros("timestamp").alias("ts") if c == "timestamp" else F.col(c) for c in df.columns
    ]
    out = []
    for r in df.select(*cols).collect():
        d = r.asDict()
        for c in ("payload", "key"):
            if c in d and d[c] is not None:
                d[c] = bytes(d[c])
        if "headers" in d:
            d["headers"] = norm_headers(d["headers"])
        out.append(d)
    return out


def queue_contents(path: str) -> list[dict]:
    """Every message of every queue under ``path``, read with litemq itself (not Spark)."""
    out = []
    for ref in ds.discover_queues(path, allow_empty=True):
        with litemq.Queue(ref.path, read_only=True) as q:
            batch = q.read_arrow()
            for r in batch.to_pylist():
                r["queue"] = ref.name
                r["headers"] = norm_headers(r["headers"])
                out.append(r)
    return out


def fail_first_attempt(partition: int, after_rows: int, marker: Path):
    """A mapInArrow identity that fails the first attempt of one partition after some rows,
    leaving ``marker`` behind as proof that it did."""

    def ident(it):
        from pyspark import TaskContext

        tc = TaskContext.get()
        n = 0
        for batch in it:
            n += batch.num_rows
            if tc.partitionId() == partition and tc.attemptNumber() == 0 and n > after_rows:
                marker.write_text(f"failed attempt 0 of partition {partition} after {n} rows")
                raise RuntimeError("injected failure of a first task attempt")
            yield batch

    return ident


def staging_left(path: str) -> list[str]:
    root = os.path.join(path, ds.STAGING_DIR)
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


# ------------------------------------------------------------------------------------------
# reading


def test_read_queue_every_row(spark, tmp_path):
    qpath = tmp_path / "orders"
    expected = make_queue(qpath, 2500)
    df = spark.read.format("litemq").option("rowsPerPartition", 1000).load(str(qpath))
    assert df.schema == litemq.spark.SCHEMA
    assert df.rdd.getNumPartitions() >= 3  # 2500 rows, at most 1000 per partition
    got = sorted(rows_of(df), key=lambda r: r["seq"])
    assert len(got) == len(expected)
    with litemq.Queue(str(qpath), read_only=True) as q:
        for e, g in zip(expected, got, strict=True):
            assert g["seq"] == e["seq"]
            assert g["payload"] == e["payload"]
            assert g["key"] == as_bytes(e["key"])
            assert g["headers"] == norm_headers(e["headers"])
            assert g["queue"] == "orders"
            assert g["ts"] == q.get(e["seq"]).timestamp


def test_one_partition_per_data_file(spark, tmp_path):
    from litemq.spark.scan import file_starts

    qpath = tmp_path / "small-files"
    with litemq.Queue(str(qpath), file_size=64 * 1024) as q:
        app = q.appender()
        app.append_batch([f"message {i:06d}".encode() * 4 for i in range(5000)])
        app.flush()
    starts = file_starts(None, str(qpath))
    assert starts is not None
    assert len(starts) > 3
    assert starts[0] == 0
    df = spark.read.format("litemq").option("rowsPerPartition", 10**9).load(str(qpath))
    assert df.rdd.getNumPartitions() == len(starts)
    assert [r["payload"] for r in sorted(rows_of(df), key=lambda r: r["seq"])] == [
        f"message {i:06d}".encode() * 4 for i in range(5000)
    ]


def test_read_dataset_and_list_of_paths(spark, tmp_path):
    root = tmp_path / "dataset"
    a = make_queue(root / "a", 300, tag="a")
    b = make_queue(root / "nested" / "b", 200, tag="b")
    (root / "_staging" / "junk").mkdir(parents=True)  # never read
    got = rows_of(spark.read.format("litemq").load(str(root)))
    assert Counter(r["queue"] for r in got) == {"a": 300, "nested/b": 200}
    assert sorted((r["queue"], r["seq"], r["payload"]) for r in got) == sorted(
        [("a", e["seq"], e["payload"]) for e in a]
        + [("nested/b", e["seq"], e["payload"]) for e in b]
    )
    # A list of paths: a queue given directly is named by its directory.
    other = make_queue(tmp_path / "other", 10, tag="o")
    df = spark.read.format("litemq").load([str(root / "a"), str(tmp_path / "other")])
    got = rows_of(df)
    assert Counter(r["queue"] for r in got) == {"a": 300, "other": 10}
    assert sorted(r["payload"] for r in got if r["queue"] == "other") == sorted(
        e["payload"] for e in other
    )


def test_read_options_seq_time_key(spark, tmp_path):
    qpath = tmp_path / "q"
    expected = make_queue(qpath, 1200)

    def base():  # DataFrameReader.option mutates the reader: a new one each time
        return spark.read.format("litemq").option("rowsPerPartition", 500)

    got = rows_of(base().option("startSeq", 100).option("endSeq", 1050).load(str(qpath)))
    assert sorted(r["seq"] for r in got) == list(range(100, 1050))

    with litemq.Queue(str(qpath), read_only=True) as q:
        stamps = {s: q.get(s).timestamp for s in range(1200)}
    lo, hi = stamps[300], stamps[900]
    want = sorted(s for s, t in stamps.items() if lo <= t < hi)

    def iso(us: int) -> str:
        return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)).isoformat()

    for start, end in ((lo, hi), (iso(lo), iso(hi))):
        got = rows_of(base().option("startTime", start).option("endTime", end).load(str(qpath)))
        assert sorted(r["seq"] for r in got) == want

    df = base().option("key", "k3").load(str(qpath))
    assert df.rdd.getNumPartitions() == 1  # one lookup in the key index, not a scan
    got = rows_of(df)
    assert sorted(r["seq"] for r in got) == [e["seq"] for e in expected if e["key"] == "k3"]
    assert all(r["key"] == b"k3" for r in got)

    got = rows_of(base().option("key", "k3").option("startSeq", 600).load(str(qpath)))
    assert sorted(r["seq"] for r in got) == [
        e["seq"] for e in expected if e["key"] == "k3" and e["seq"] >= 600
    ]
    assert rows_of(base().option("key", "nope").load(str(qpath))) == []
    assert rows_of(base().option("startSeq", 5000).load(str(qpath))) == []
    with pytest.raises(Exception, match="endSeq=5 is before startSeq=10"):
        base().option("startSeq", 10).option("endSeq", 5).load(str(qpath))


def test_read_while_a_writer_appends(spark, tmp_path):
    """Tasks open queues read-only: a live writer (holding the lock) keeps appending."""
    qpath = tmp_path / "live"
    with litemq.Queue(str(qpath), file_size=QUEUE_FILE_SIZE) as q:
        app = q.appender()
        app.append_batch([b"x"] * 100)
        app.flush()
        assert spark.read.format("litemq").load(str(qpath)).count() == 100
        app.append_batch([b"y"] * 50)
        app.flush()
        df = spark.read.format("litemq").load(str(qpath))
        assert df.where("payload = X'79'").count() == 50
        assert df.count() == 150


def test_read_while_the_active_file_grows(spark, tmp_path):
    """Format 11: the active file is only as long as its data and a chunk, and grows while a
    read is planned and runs (a 1 MiB file grows 64 KiB, 128, 256, 512 KiB, 1 MiB). Every
    row read is one appended, in order of sequence, and the read never fails on frames
    published past the length the reader saw first (the JVM reader maps only what exists)."""
    import threading

    qpath = tmp_path / "growing"
    with litemq.Queue(str(qpath), file_size=QUEUE_FILE_SIZE) as q:
        app = q.appender()
        app.append_batch([b"%06d" % i + b"." * 500 for i in range(100)])
        app.flush()
        data = sorted(qpath.rglob("*.data"))[-1]
        first_len = data.stat().st_size
        assert first_len < QUEUE_FILE_SIZE
        done = threading.Event()

        def write() -> None:
            i = 100
            while not done.is_set() and i < 1500:
                app.append(b"%06d" % i + b"." * 500)
                i += 1
            app.flush()

        t = threading.Thread(target=write)
        t.start()
        try:
            counts = []
            for _ in range(3):
                rows = (
                    spark.read.format("litemq").load(str(qpath)).select("seq", "payload").collect()
                )
                seqs = [r.seq for r in rows]
                assert sorted(seqs) == list(range(len(seqs)))
                assert all(bytes(r.payload)[:6] == b"%06d" % r.seq for r in rows)
                counts.append(len(rows))
            assert counts[0] >= 100
        finally:
            done.set()
            t.join()
        assert data.stat().st_size > first_len or len(sorted(qpath.rglob("*.data"))) > 1
        assert spark.read.format("litemq").load(str(qpath)).count() == q.next_seq


def test_read_user_schema_subset(spark, tmp_path):
    qpath = tmp_path / "q"
    make_queue(qpath, 50)
    df = spark.read.format("litemq").schema("seq long, payload string").load(str(qpath))
    got = df.collect()
    assert sorted(r.seq for r in got) == list(range(50))
    with pytest.raises(Exception, match="cannot produce column 'bogus'"):
        spark.read.format("litemq").schema("seq long, bogus int").load(str(qpath)).collect()
    with pytest.raises(Exception, match="cannot produce column 'seq' as string"):
        spark.read.format("litemq").schema("seq string").load(str(qpath)).collect()


def test_read_bad_input(spark, tmp_path):
    qpath = tmp_path / "q"
    make_queue(qpath, 5)
    (tmp_path / "empty").mkdir()
    with pytest.raises(Exception, match="startSeq='abc' is not an integer"):
        spark.read.format("litemq").option("startSeq", "abc").load(str(qpath))
    with pytest.raises(Exception, match="startTime='yesterday' is not a time"):
        spark.read.format("litemq").option("startTime", "yesterday").load(str(qpath))
    with pytest.raises(Exception, match="path does not exist"):
        spark.read.format("litemq").load(str(tmp_path / "missing"))
    with pytest.raises(Exception, match="no queue found at"):
        spark.read.format("litemq").load(str(tmp_path / "empty"))


@pytest.mark.skipif(not FEATURES["filter_pushdown"], reason="filter pushdown needs PySpark 4.1+")
def test_filter_pushdown_prunes_and_is_exact(spark, tmp_path):
    root = tmp_path / "ds"
    make_queue(root / "a", 3000, tag="a")
    make_queue(root / "b", 1000, tag="b")
    with litemq.Queue(str(root / "a"), read_only=True) as q:
        t1500 = q.get(1500).timestamp
    ts_lit = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=t1500)

    def query(df):
        return (
            df.where((F.col("seq") >= 1000) & (F.col("seq") < 2500))
            .where(F.col("timestamp") >= F.lit(ts_lit))
            .where(F.col("queue") == "a")
        )

    plain = spark.read.format("litemq").option("rowsPerPartition", 500).load(str(root))
    expect = sorted((r["queue"], r["seq"]) for r in rows_of(query(plain)))
    assert expect  # (messages appended together may share a timestamp: 1500 is not the first)
    assert {q for q, _ in expect} == {"a"}
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        pushed_df = (
            spark.read.format("litemq")
            .option("rowsPerPartition", 500)
            .option("filterPushdown", "true")
            .load(str(root))
        )
        q = query(pushed_df)
        assert sorted((r["queue"], r["seq"]) for r in rows_of(q)) == expect
        assert q.rdd.getNumPartitions() < plain.rdd.getNumPartitions()
        keyed = pushed_df.where(F.col("key") == F.lit(b"k2")).where(F.col("queue") == "b")
        assert keyed.rdd.getNumPartitions() == 1
        assert sorted(r["seq"] for r in rows_of(keyed)) == sorted(
            r["seq"]
            for r in rows_of(plain.where((F.col("key") == F.lit(b"k2")) & (F.col("queue") == "b")))
        )
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


def make_topic_queue(path: Path, n: int) -> None:
    """``n`` messages: 2 % in topic "orders" (half of them tagged "paid", every other one in
    queue id 1), the rest in topic "audit", in no topic, or "orders-eu"; several sealed files
    (topic indexes built) and an active one."""
    with litemq.Queue(str(path), file_size=QUEUE_FILE_SIZE, roll={"count": 500}) as q:
        app = q.appender()
        for i in range(n):
            if i % 50 == 7:
                app.append(
                    b"o%d" % i,
                    topic="orders",
                    tags=["paid"] if i % 100 == 7 else ["new", "eu"],
                    queue_id=(i // 50) % 2,
                )
            elif i % 10 == 3:
                app.append(b"e%d" % i, topic="orders-eu")
            elif i % 3 == 0:
                app.append(b"a%d" % i, topic="audit", tags=["x"])
            else:
                app.append(b"p%d" % i)
        app.flush()


def collect_counting_scan(df) -> tuple[list[dict], int]:
    """The rows of ``df`` (as dicts) and how many rows its litemq scan produced: the
    ``numOutputRows`` metric of the BatchScan node, read after the collect."""
    rows = [r.asDict(recursive=True) for r in df.collect()]

    def scanned(plan) -> int:
        name = plan.nodeName()
        if name.startswith("AdaptiveSparkPlan"):
            return scanned(plan.executedPlan())
        total = 0
        if name.startswith("BatchScan"):
            total += int(plan.metrics().apply("numOutputRows").value())
        children = plan.children()
        for i in range(children.size()):
            total += scanned(children.apply(i))
        return total

    return rows, scanned(df._jdf.queryExecution().executedPlan())


def test_topic_columns_and_the_topic_option(spark, tmp_path):
    path = tmp_path / "t"
    make_topic_queue(path, 3000)
    df = spark.read.format("litemq").load(str(path))
    assert df.columns[-3:] == ["topic", "queue_id", "tags"]
    assert dict(df.dtypes)["tags"] == "array<string>"
    assert dict(df.dtypes)["queue_id"] == "int"
    got = {r["seq"]: (r["topic"], r["queue_id"], r["tags"]) for r in rows_of(df)}
    with litemq.Queue(str(path), read_only=True) as q:
        want = {m.seq: (m.topic, m.queue_id, list(m.tags)) for m in q.tailer(start=0)}
    assert got == want
    # The option reads only the topic's frames: the scan produces only its rows.
    everything, all_scanned = collect_counting_scan(df.where(F.col("topic") == "orders"))
    assert all_scanned == 3000
    only, scanned = collect_counting_scan(
        spark.read.format("litemq").option("topic", "orders").load(str(path))
    )
    assert sorted(r["seq"] for r in only) == sorted(r["seq"] for r in everything)
    assert len(only) == scanned == 60
    assert {r["seq"]: r["payload"] for r in only} == {r["seq"]: r["payload"] for r in everything}
    with pytest.raises(Exception, match="option topic"):
        spark.read.format("litemq").option("topic", "").load(str(path)).collect()


@pytest.mark.skipif(not FEATURES["filter_pushdown"], reason="filter pushdown needs PySpark 4.1+")
def test_topic_filters_are_pushed_down_and_exact(spark, tmp_path):
    root = tmp_path / "ds"
    make_topic_queue(root / "a", 3000)
    make_topic_queue(root / "b", 1000)
    plain = spark.read.format("litemq").option("rowsPerPartition", 700).load(str(root))
    queries = [
        lambda df: df.where(F.col("topic") == "orders"),
        lambda df: df.where(F.col("topic").isin("orders", "orders-eu")),
        lambda df: df.where(F.col("topic") == "orders").where(F.col("queue_id") == 1),
        lambda df: df.where(F.col("topic") == "orders").where(F.array_contains("tags", "paid")),
        lambda df: df.where(F.col("topic") == "nothing"),
        lambda df: df.where((F.col("topic") == "orders") & (F.col("queue") == "b")),
    ]
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        pushed = (
            spark.read.format("litemq")
            .option("rowsPerPartition", 700)
            .option("filterPushdown", "true")
            .load(str(root))
        )
        for query in queries:
            want, scanned_all = collect_counting_scan(query(plain))
            got, scanned = collect_counting_scan(query(pushed))
            key = lambda r: (r["queue"], r["seq"])  # noqa: E731
            assert sorted(got, key=key) == sorted(want, key=key)
            assert scanned_all == 4000
            # Only the topics' rows were read (and only those of queue b when asked).
            topics = {r["topic"] for r in want} or {"nothing"}
            assert scanned < scanned_all
            assert scanned <= sum(
                1 for r in rows_of(plain.select("topic", "queue")) if r["topic"] in topics
            )
        got, scanned = collect_counting_scan(pushed.where(F.col("topic") == "orders"))
        assert scanned == len(got) == 80
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


def test_a_copy_keeps_topics_queue_ids_and_tags(spark, tmp_path):
    src = tmp_path / "src"
    make_topic_queue(src, 400)
    spark.read.format("litemq").load(str(src)).write.format("litemq").option(
        "fileSize", WRITE_FILE_SIZE
    ).mode("append").save(str(tmp_path / "copy"))

    def fields(path: Path) -> list[tuple]:
        return sorted(
            (r["payload"], r["topic"], r["queue_id"], tuple(r["tags"]))
            for r in queue_contents(str(path))
        )

    assert fields(tmp_path / "copy") == fields(src)
    assert any(t == "orders" for _, t, _, _ in fields(tmp_path / "copy"))


# ------------------------------------------------------------------------------------------
# writing


def source_df(spark, n: int, parts: int = 4):
    rows = [
        (
            f"p{i}".encode(),
            f"key{i % 5}" if i % 2 else None,
            {"i": str(i).encode()} if i % 3 == 0 else None,
        )
        for i in range(n)
    ]
    schema = "payload binary, key string, headers map<string,binary>"
    return spark.createDataFrame(rows, schema).repartition(parts), rows


def test_write_append_and_overwrite(spark, tmp_path):
    out = str(tmp_path / "out")
    df, rows = source_df(spark, 1000)
    df.write.format("litemq").option("fileSize", WRITE_FILE_SIZE).mode("append").save(out)
    df.write.format("litemq").option("fileSize", WRITE_FILE_SIZE).mode("append").save(out)
    got = queue_contents(out)
    assert Counter((r["payload"], r["key"]) for r in got) == Counter(
        (p, k.encode() if k else None) for p, k, _ in rows * 2
    )
    by_payload = {r["payload"]: r for r in got}
    for p, _, h in rows:
        assert by_payload[p]["headers"] == norm_headers(h)
    assert len({r["queue"].split("/")[0] for r in got}) == 2  # one directory per job
    assert staging_left(out) == []
    # Spark reads what Spark wrote, as one dataset.
    assert spark.read.format("litemq").load(out).count() == 2000

    small, small_rows = source_df(spark, 10, parts=2)
    small.write.format("litemq").option("fileSize", WRITE_FILE_SIZE).mode("overwrite").save(out)
    assert sorted(r["payload"] for r in queue_contents(out)) == sorted(p for p, _, _ in small_rows)


def test_write_string_payload_and_copy_of_a_litemq_frame(spark, tmp_path):
    src = tmp_path / "src"
    make_queue(src, 100)
    spark.read.format("litemq").load(str(src)).write.format("litemq").option(
        "fileSize", WRITE_FILE_SIZE
    ).mode("append").save(str(tmp_path / "copy"))
    a = sorted(
        (r["payload"], r["key"], json.dumps(sorted((r["headers"] or {}).items()), default=str))
        for r in queue_contents(str(src))
    )
    b = sorted(
        (r["payload"], r["key"], json.dumps(sorted((r["headers"] or {}).items()), default=str))
        for r in queue_contents(str(tmp_path / "copy"))
    )
    assert a == b
    spark.range(20).select(F.col("id").cast("string").alias("payload")).write.format(
        "litemq"
    ).option("fileSize", WRITE_FILE_SIZE).mode("append").save(str(tmp_path / "text"))
    assert sorted(r["payload"] for r in queue_contents(str(tmp_path / "text"))) == sorted(
        str(i).encode() for i in range(20)
    )


def test_write_exactly_once_when_first_attempt_fails(spark, tmp_path):
    out = str(tmp_path / "out")
    df, rows = source_df(spark, 4000, parts=4)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        marker = tmp_path / "failed-once"
        flaky = df.mapInArrow(fail_first_attempt(1, 300, marker), df.schema)
        flaky.write.format("litemq").option("fileSize", WRITE_FILE_SIZE).mode("append").save(out)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert marker.exists()  # the first attempt did fail, after writing some rows
    got = queue_contents(out)
    assert Counter(r["payload"] for r in got) == Counter(
        p for p, _, _ in rows
    )  # none lost or doubled
    assert len({r["queue"] for r in got}) == 4
    assert staging_left(out) == []


def test_write_bad_input(spark, tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(Exception, match="no 'payload' column"):
        spark.range(3).write.format("litemq").option("fileSize", WRITE_FILE_SIZE).mode(
            "append"
        ).save(out)
    with pytest.raises(Exception, match="column 'payload' is bigint"):
        spark.range(3).withColumnRenamed("id", "payload").write.format("litemq").option(
            "fileSize", WRITE_FILE_SIZE
        ).mode("append").save(out)
    with pytest.raises(Exception, match=r"cannot write column\(s\) \['extra'\]"):
        spark.range(3).select(
            F.col("id").cast("string").alias("payload"), F.lit(1).alias("extra")
        ).write.format("litemq").option("fileSize", WRITE_FILE_SIZE).mode("append").save(out)
    with pytest.raises(Exception, match="column 'headers' is map<string,int>"):
        spark.range(3).select(
            F.col("id").cast("string").alias("payload"),
            F.create_map(F.lit("a"), F.lit(1)).alias("headers"),
        ).write.format("litemq").option("fileSize", WRITE_FILE_SIZE).mode("append").save(out)
    make_queue(tmp_path / "q", 3)
    with pytest.raises(Exception, match="is a queue"):
        spark.range(3).select(F.col("id").cast("string").alias("payload")).write.format(
            "litemq"
        ).mode("append").save(str(tmp_path / "q"))


def test_write_partitions_rdd_with_retry(spark, tmp_path):
    out = str(tmp_path / "out")
    rdd = spark.sparkContext.parallelize(range(2000), 4)

    marker = tmp_path / "failed-once"

    def render(it):
        from pyspark import TaskContext

        tc = TaskContext.get()
        for n, i in enumerate(it):
            if tc.partitionId() == 2 and tc.attemptNumber() == 0 and n == 250:
                marker.write_text("failed")
                raise RuntimeError("injected failure of a first task attempt")
            yield (f"r{i}".encode(), f"k{i % 3}")

    # 250 rows of partition 2 go through the write in its failed first attempt; make sure they
    # reach the staging queue before the failure by using small append chunks.
    from litemq.spark import write as w

    old = w.APPEND_CHUNK
    w.APPEND_CHUNK = 50
    try:
        res = litemq.spark.write_partitions(rdd, out, fn=render, file_size=WRITE_FILE_SIZE)
    finally:
        w.APPEND_CHUNK = old
    assert marker.exists()
    assert res.rows == 2000
    assert res.queues == 4
    got = queue_contents(out)
    assert Counter(r["payload"] for r in got) == Counter(f"r{i}".encode() for i in range(2000))
    assert all(r["key"] == f"k{int(r['payload'][1:]) % 3}".encode() for r in got)
    assert staging_left(out) == []


def test_write_partitions_dataframe_and_overwrite(spark, tmp_path):
    out = str(tmp_path / "out")
    df, _ = source_df(spark, 500, parts=3)
    res = litemq.spark.write_partitions(df, out, file_size=WRITE_FILE_SIZE)
    assert res.rows == 500
    res = litemq.spark.write_partitions(
        df.limit(7), out, mode="overwrite", file_size=WRITE_FILE_SIZE
    )
    assert res.rows == 7
    assert len(queue_contents(out)) == 7
    with pytest.raises(Exception, match="no 'payload' column"):
        litemq.spark.write_partitions(spark.range(3), out)


def test_commit_publishes_only_winners(tmp_path):
    """The protocol without Spark: two attempts of one partition, only the winner published."""
    st = ds.Staging(str(tmp_path), "job-x")
    st.prepare()
    paths = {}
    for part, attempt in ((0, 0), (0, 1), (1, 0)):
        p = st.attempt_path(part, attempt)
        with litemq.Queue(p, file_size=QUEUE_FILE_SIZE) as q:
            q.appender().append(f"{part}-{attempt}".encode())
        paths[part, attempt] = p
    published = st.publish([(0, paths[0, 1]), (1, paths[1, 0])], "job-x")
    assert published == str(tmp_path / "job-x")
    assert sorted(r["payload"] for r in queue_contents(str(tmp_path))) == [b"0-1", b"1-0"]
    assert staging_left(str(tmp_path)) == []
    # Orphans of a dead job go once they are old enough.
    orphan = ds.Staging(str(tmp_path), "job-dead")
    orphan.prepare()
    assert ds.clean_staging(str(tmp_path), older_than=3600) == []
    assert ds.clean_staging(str(tmp_path), older_than=0) == [orphan.root]


# ------------------------------------------------------------------------------------------
# streaming


def run_available_now(df, sink_format: str, out: str, checkpoint: str, **options):
    w = df.writeStream.format(sink_format).option("checkpointLocation", checkpoint)
    for k, v in options.items():
        w = w.option(k, v)
    q = w.trigger(availableNow=True).start(out)
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    return q


def test_stream_read_available_now_restart_exactly_once(spark, tmp_path):
    root = tmp_path / "in"
    make_queue(root / "a", 250, tag="a")
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    reader = spark.readStream.format("litemq").option("maxRecordsPerTrigger", 100)
    run = lambda: run_available_now(  # noqa: E731
        reader.load(str(root)).select("queue", "seq", "payload"), "parquet", out, ckpt
    )
    q = run()
    if FEATURES["admission_control"]:
        assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 3  # 250 rows, 100 a batch
    # More messages, and a queue that did not exist: the restarted query reads only those.
    make_queue(root / "a", 60, start=250, tag="a")
    make_queue(root / "b", 40, tag="b")
    run()
    got = spark.read.parquet(out).collect()
    assert Counter((r.queue, r.seq) for r in got) == Counter(
        [("a", i) for i in range(310)] + [("b", i) for i in range(40)]
    )
    offsets = sorted(
        (p for p in Path(ckpt, "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    last = json.loads(offsets[-1].read_text().splitlines()[-1])
    assert last == {"a": 310, "b": 40}
    assert list(last) == sorted(last)
    run()  # nothing new: nothing written
    assert spark.read.parquet(out).count() == 350


def test_stream_starting_offsets(spark, tmp_path):
    qpath = tmp_path / "in" / "a"
    make_queue(qpath, 30)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    df = (
        spark.readStream.format("litemq")
        .option("startingOffsets", json.dumps({"a": 25}))
        .load(str(tmp_path / "in"))
        .select("seq")
    )
    run_available_now(df, "parquet", out, ckpt)
    assert sorted(r.seq for r in spark.read.parquet(out).collect()) == list(range(25, 30))
    with pytest.raises(Exception, match="startingOffsets"):
        spark.readStream.format("litemq").option("startingOffsets", "[1]").load(
            str(tmp_path / "in")
        )


def test_stream_sink_idempotent_per_batch(spark, tmp_path):
    src = tmp_path / "src"
    expected = make_queue(src, 300)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    df = spark.readStream.format("litemq").option("maxRecordsPerTrigger", 100).load(str(src))
    run_available_now(
        df.select("payload", "key", "headers"), "litemq", out, ckpt, fileSize=WRITE_FILE_SIZE
    )
    got = queue_contents(out)
    assert Counter(r["payload"] for r in got) == Counter(e["payload"] for e in expected)
    batches = sorted(n for n in os.listdir(out) if n.startswith("stream-batch-"))
    assert len(batches) >= (3 if FEATURES["admission_control"] else 1)
    # Restart mid-stream: forget that the last batch was committed, as after a crash between
    # the sink's commit and the checkpoint's. Spark runs that batch again; the sink sees its
    # id is published and writes nothing twice.
    commits = sorted(
        (p for p in Path(ckpt, "commits").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    commits[-1].unlink()
    crc = Path(ckpt, "commits", f".{commits[-1].name}.crc")
    if crc.exists():
        crc.unlink()
    make_queue(src, 50, start=300)
    # PySpark 4.0 (AvailableNow emulated by Spark) only replays the batch on this run; 4.2+
    # also reads the new messages. A second run reads whatever is left.
    for _ in range(2):
        run_available_now(
            df.select("payload", "key", "headers"), "litemq", out, ckpt, fileSize=WRITE_FILE_SIZE
        )
    assert commits[-1].exists()  # Spark did run the forgotten batch again
    got = queue_contents(out)
    assert Counter(r["payload"] for r in got) == Counter(
        e["payload"]
        for e in expected
        + [{"payload": f"m-{i}".encode() + bytes([i % 256])} for i in range(300, 350)]
    )
    assert staging_left(out) == []
    # And Spark reads the sink's dataset back.
    assert spark.read.format("litemq").load(out).count() == 350


def test_admission_shares_rows_fairly():
    from litemq.spark.source import _share

    assert _share({"a": 1000, "b": 1000}, 100) == {"a": 50, "b": 50}
    assert _share({"a": 10, "b": 1000, "c": 0}, 100) == {"a": 10, "b": 90, "c": 0}
    assert _share({"a": 3, "b": 4}, 100) == {"a": 3, "b": 4}
    assert sum(_share({"a": 7, "b": 7, "c": 7}, 10).values()) == 10
