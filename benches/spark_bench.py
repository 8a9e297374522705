"""Spark reading litemq versus Spark reading Parquet, and ``read_arrow`` without Spark.

Writes N 100-byte messages (random bytes, so Parquet cannot compress them away) to one queue,
writes the same rows to a Parquet file, then in one local[2] Spark session runs the same query
over both: count the rows and sum the payload lengths, so every payload byte reaches Spark.
Prints rows per second for each and the ratio; also ``Queue.read_arrow`` rows per second.

    python benches/spark_bench.py              # 10 million messages (about 1.3 GB on disk)
    python benches/spark_bench.py --n 1000000  # quicker

Targets (issue 6): Spark on litemq at least half the rows/s of Spark on Parquet;
``read_arrow`` at least 20 million rows/s.

    python benches/spark_bench.py --cluster --n 2000000

``--cluster`` (issue 21) instead reads the queue, and an archive of it (``litemq archive``
to a local directory, read through pyarrow.fs), on a Spark standalone cluster on this
machine with 1 worker and then 2 (one core and 512 MiB each; ``tests/python/
spark_cluster.py`` starts them) and prints rows/s of each and the ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any

PAYLOAD = 100


def build(qpath: str, ppath: str, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import litemq

    chunk = 500_000
    t0 = time.perf_counter()
    with litemq.Queue(qpath) as q:
        app = q.appender()
        done = 0
        while done < n:
            k = min(chunk, n - done)
            blob = os.urandom(k * PAYLOAD)
            app.append_batch([blob[i * PAYLOAD : (i + 1) * PAYLOAD] for i in range(k)])
            done += k
        app.flush()
    t1 = time.perf_counter()
    with litemq.Queue(qpath, read_only=True) as q:
        writer = None
        s = 0
        while s < n:
            b = q.read_arrow(start=s, end=min(n, s + chunk))
            if writer is None:
                writer = pq.ParquetWriter(ppath, b.schema)
            writer.write_table(pa.Table.from_batches([b]), row_group_size=chunk)
            s += b.num_rows
        assert writer is not None
        writer.close()
    t2 = time.perf_counter()
    print(f"setup: {n:,} messages appended in {t1 - t0:.1f} s, Parquet written in {t2 - t1:.1f} s")


def bench_read_arrow(qpath: str, n: int, batch: int = 1_000_000) -> float:
    import litemq

    best = 0.0
    with litemq.Queue(qpath, read_only=True) as q:
        for _ in range(3):
            t0 = time.perf_counter()
            s = rows = 0
            while s < n:
                b = q.read_arrow(start=s, max_rows=batch)
                rows += b.num_rows
                s += b.num_rows
            dt = time.perf_counter() - t0
            assert rows == n
            best = max(best, rows / dt)
    return best


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import litemq.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("litemq-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    litemq.spark.register(spark)
    return spark


def time_query(df: Any, n: int, repeats: int) -> float:
    from pyspark.sql import functions as F

    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        row = df.agg(F.count("*").alias("n"), F.sum(F.length("payload")).alias("b")).collect()[0]
        dt = time.perf_counter() - t0
        assert row.n == n, (row.n, n)
        assert row.b == n * PAYLOAD, (row.b, n * PAYLOAD)
        best = max(best, n / dt)
    return best


def cluster_bench(args: argparse.Namespace) -> None:
    """Rows/s of a full read on a standalone cluster of 1 worker, then of 2."""
    sys.path.insert(
        0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python")
    )
    from pathlib import Path

    from pyspark.sql import SparkSession

    import litemq
    import litemq.spark
    from spark_cluster import StandaloneCluster, free_port

    work = args.dir or tempfile.mkdtemp(prefix="litemq-spark-cluster-bench-")
    qpath, apath = os.path.join(work, "queue"), os.path.join(work, "archive")
    rpp = args.rows_per_partition or 250_000
    results = []
    try:
        t0 = time.perf_counter()
        with litemq.Queue(qpath, file_size=64 << 20) as q:
            app = q.appender()
            blob = os.urandom(args.n * PAYLOAD)
            app.append_batch([blob[i * PAYLOAD : (i + 1) * PAYLOAD] for i in range(args.n)])
            app.flush()
        report = litemq.archive_queue(qpath, apath)
        archived = int(report.end_seq or 0) - int(report.first_seq or 0)
        print(
            f"setup: {args.n:,} messages, archive of {archived:,} (sealed files) in "
            f"{time.perf_counter() - t0:.1f} s"
        )
        os.environ["PYSPARK_PYTHON"] = sys.executable
        for workers in (1, 2):
            cluster = StandaloneCluster(Path(work) / f"cluster-{workers}", workers=workers).start()
            try:
                spark = (
                    SparkSession.builder.master(cluster.master_url)
                    .appName(f"litemq-bench-{workers}")
                    .config("spark.driver.host", "127.0.0.1")
                    .config("spark.driver.bindAddress", "127.0.0.1")
                    .config("spark.driver.memory", "1g")
                    .config("spark.executor.memory", "512m")
                    .config("spark.executor.cores", "1")
                    .config("spark.cores.max", str(workers))
                    .config("spark.pyspark.python", sys.executable)
                    .config("spark.ui.port", str(free_port()))
                    .getOrCreate()
                )
                spark.sparkContext.setLogLevel("ERROR")
                litemq.spark.register(spark)
                read = spark.read.format("litemq").option("rowsPerPartition", rpp)
                q_rate = time_query(read.load(qpath), args.n, args.repeats)
                a_rate = time_query(read.load(apath), archived, args.repeats)
                results.append((workers, q_rate, a_rate))
                spark.stop()
            finally:
                cluster.stop()
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    import pyspark

    print(
        f"\n{args.n:,} messages of {PAYLOAD} bytes; PySpark {pyspark.__version__}, standalone "
        f"cluster on {os.cpu_count()} cores, 1 core per worker, rowsPerPartition {rpp}\n"
    )
    print(f"{'workers':>7}  {'queue rows/s':>14}  {'archive rows/s':>14}")
    for workers, q_rate, a_rate in results:
        print(f"{workers:>7}  {q_rate:>14,.0f}  {a_rate:>14,.0f}")
    (_, q1, a1), (_, q2, a2) = results
    print(f"\n2 workers / 1 worker: queue {q2 / q1:.2f}x, archive {a2 / a1:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000, help="messages (default 10 million)")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each Spark query; best counts")
    ap.add_argument("--rows-per-partition", type=int, default=None, help="litemq rowsPerPartition")
    ap.add_argument("--batch-rows", type=int, default=None, help="litemq batchRows")
    ap.add_argument(
        "--cluster", action="store_true", help="1 worker against 2 on a standalone cluster"
    )
    args = ap.parse_args()
    if args.cluster:
        cluster_bench(args)
        return

    work = args.dir or tempfile.mkdtemp(prefix="litemq-spark-bench-")
    qpath, ppath = os.path.join(work, "queue"), os.path.join(work, "rows.parquet")
    try:
        build(qpath, ppath, args.n)
        arrow_rate = bench_read_arrow(qpath, args.n)
        spark = spark_session()
        reader = spark.read.format("litemq")
        if args.rows_per_partition:
            reader = reader.option("rowsPerPartition", args.rows_per_partition)
        if args.batch_rows:
            reader = reader.option("batchRows", args.batch_rows)
        lq = reader.load(qpath)
        # Spark prunes Parquet to the payload column; give litemq the same narrow schema.
        lq_narrow = (
            spark.read.format("litemq")
            .schema("payload binary")
            .options(
                **({"rowsPerPartition": args.rows_per_partition} if args.rows_per_partition else {})
            )
            .load(qpath)
        )
        pq_df = spark.read.parquet(ppath)
        partitions = lq.rdd.getNumPartitions()
        pq_rate = time_query(pq_df, args.n, args.repeats)
        lq_rate = time_query(lq, args.n, args.repeats)
        lq_narrow_rate = time_query(lq_narrow, args.n, args.repeats)
        spark.stop()
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    import pyspark

    print(
        f"\n{args.n:,} messages of {PAYLOAD} bytes; PySpark {pyspark.__version__}, local[2]; "
        f"litemq read in {partitions} partitions\n"
    )
    rows = [
        ("Spark <- Parquet (count, sum(length(payload)))", pq_rate, ""),
        ("Spark <- litemq, all columns", lq_rate, f"{lq_rate / pq_rate:.2f}x Parquet"),
        (
            "Spark <- litemq, schema 'payload binary'",
            lq_narrow_rate,
            f"{lq_narrow_rate / pq_rate:.2f}x Parquet",
        ),
        ("Queue.read_arrow (no Spark), 1M-row batches", arrow_rate, ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'read':<{width}}  {'rows/s':>14}  ratio")
    for name, rate, ratio in rows:
        print(f"{name:<{width}}  {rate:>14,.0f}  {ratio}")
    print(
        f"\ntargets: Spark on litemq >= 0.5x Parquet: {'met' if lq_rate >= 0.5 * pq_rate else 'NOT met'}; "
        f"read_arrow >= 20M rows/s: {'met' if arrow_rate >= 20e6 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
