"""Spark reading litemq versus Spark reading Parquet, and ``read_arrow`` without Spark.

Writes N 100-byte messages (random bytes, so Parquet cannot compress them away) to one queue,
writes the same rows to a Parquet file, then in one local[2] Spark session runs the same query
over both: count the rows and sum the payload lengths, so every payload byte reaches Spark.
Prints rows per second for each and the ratio; also ``Queue.read_arrow`` rows per second.

It also measures the ceiling (issue 15): what Spark's Python data-source path carries when a
reader hands it ready-made Arrow batches. Before timing, litemq's own reader is run in the
driver and the batches it yields (same partitions, rows, columns, types and batch sizes) are
written to an Arrow IPC file; a minimal data source maps that file once per Python worker and
yields those batches, doing no I/O per query. The query then runs over it too, for all columns
and for the narrow schema 'payload binary', and litemq's rows/s are given as a fraction of the
ceiling's. The cases take turns in every round (best of --repeats counts), so noise from
other work on the machine falls on all of them. The ceiling files take about as much disk as
the queue; everything is in a temporary directory, removed at the end.

    python benches/spark_bench.py              # 10 million messages (about 1.3 GB on disk)
    python benches/spark_bench.py --n 1000000  # quicker

Targets: Spark on litemq at least 0.9x the ceiling (issue 15), at least half the rows/s of
Spark on Parquet (issue 6); ``read_arrow`` at least 20 million rows/s.

    python benches/spark_bench.py --cluster --n 2000000

    python benches/spark_bench.py --jvm        # the JVM reader (issue 32), below

``--jvm`` (issue 32) compares the JVM reader (the jar, ``make jar``) with the Python source
and Parquet of the same rows, in one local[2] session with the jar on the classpath: queries
Qa ``sum(length(payload)), sum(seq)`` over ``seq, payload``; every column; payload only.
The queue is written in sealed 64 MiB files (so the JVM reader checks each file's
``frames_crc`` once). Rows/s (best of --repeats, the cases interleaved) and CPU seconds per
query, and each reader's ratio against Parquet in the same run. Default 200,000 messages;
``LITEMQ_BENCH_N=2000000`` (or ``--n``) for the issue's 2 M x 100 B.

    python benches/spark_bench.py --stream --n 2000000   # streaming in the JVM (issue 32)

``--stream`` (issue 32) times ``Trigger.AvailableNow`` queries over the queue (one micro-batch,
foreachBatch computing Qa's aggregate; from ``start()`` to the query's end, a fresh checkpoint
each run) through the JVM stream and through the Python streaming source, with the schema
``seq bigint, payload binary`` (a stream reads the columns of its schema: Spark prunes no
columns of a streaming scan) and with every column, beside the batch reads of the same rows
(Parquet, the JVM reader), interleaved in one session with the jar. Default 200,000 messages.

    python benches/spark_bench.py --typed      # a typed queue in the JVM reader (issue 35)

``--typed`` (issue 35) writes the issue's 6-field market data (int64 time, string symbol,
float64 price, int64 size, int8 side, int64 id) to a typed queue (``append_batch`` of Arrow
record batches: row batches, stored, in sealed 64 MiB files) and the same rows to Parquet
(pyarrow's default, snappy), then in one local[2] session with the jar runs queries over 3 of
the 6 columns through the JVM reader and over the Parquet file: ``time, price, size``;
``symbol, price, size``; and ``price, size`` where ``side = 1`` (pushed down on both sides:
``filterPushdown=true`` for litemq). Medians of --repeats (default 5), the cases interleaved
after a warm-up round, CPU seconds of the driver's process tree, and the ratio against
Parquet. Default 2,000,000 rows (``LITEMQ_BENCH_N`` or ``--n``).

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
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    litemq.spark.register(spark)
    return spark


def tree_cpu_seconds() -> float | None:
    """CPU seconds (user + system) used so far by this process and every live descendant:
    the Spark JVM and its Python workers (Linux /proc; None elsewhere)."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        children: dict[int, list[int]] = {}
        cpu: dict[int, int] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            pid = int(name)
            children.setdefault(int(fields[1]), []).append(pid)
            cpu[pid] = int(fields[11]) + int(fields[12])
    except OSError:
        return None
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / tick


def time_query(df: Any, n: int, repeats: int) -> float:
    return time_query_cpu(df, n, repeats)[0]


def time_query_cpu(df: Any, n: int, repeats: int) -> tuple[float, float | None]:
    """Best rows/s of the query, and the least CPU seconds (driver, JVM, Python workers) a
    run of it took."""
    from pyspark.sql import functions as F

    best, least_cpu = 0.0, None
    for _ in range(repeats):
        c0 = tree_cpu_seconds()
        t0 = time.perf_counter()
        row = df.agg(F.count("*").alias("n"), F.sum(F.length("payload")).alias("b")).collect()[0]
        dt = time.perf_counter() - t0
        c1 = tree_cpu_seconds()
        assert row.n == n, (row.n, n)
        assert row.b == n * PAYLOAD, (row.b, n * PAYLOAD)
        best = max(best, n / dt)
        if c0 is not None and c1 is not None:
            least_cpu = c1 - c0 if least_cpu is None else min(least_cpu, c1 - c0)
    return best, least_cpu


def time_interleaved(
    dfs: dict[str, Any], n: int, repeats: int, warmup: int = 1
) -> tuple[dict[str, float], dict[str, float | None]]:
    """Best rows/s and least CPU seconds of each DataFrame's query, the cases taking turns in
    every round, so that noise from other work on the machine spreads over all of them.
    ``warmup`` untimed rounds first: the JVM compiles the hot paths, Python workers start."""
    for _ in range(warmup):
        for df in dfs.values():
            time_query(df, n, 1)
    best = dict.fromkeys(dfs, 0.0)
    cpu: dict[str, float | None] = dict.fromkeys(dfs)
    for _ in range(repeats):
        for name, df in dfs.items():
            rate, used = time_query_cpu(df, n, 1)
            best[name] = max(best[name], rate)
            prev = cpu[name]
            cpu[name] = used if prev is None or used is None else min(prev, used)
    return best, cpu


def build_ceiling(qpath: str, apath: str, options: dict[str, Any], schema: Any) -> None:
    """Hand the ceiling source the exact batches litemq's reader yields for ``schema``.

    Runs litemq's own reader in the driver, before any timing: the same partitions, the same
    batches (rows, columns, Arrow types, sizes), written to one Arrow IPC file at ``apath``
    with each partition's batch range in its schema metadata. The ceiling's reader then maps
    that file once per Python worker and yields those batches as they are, so a query over it
    costs Spark's Python data-source path alone.
    """
    import json

    import pyarrow as pa

    from litemq.spark.source import LiteMQDataSource, _arrow_schema

    source = LiteMQDataSource({**{k: str(v) for k, v in options.items()}, "path": qpath})
    reader = source.reader(schema)
    spans: list[list[int]] = []
    target = _arrow_schema(schema)
    done = 0
    with pa.OSFile(apath, "wb") as sink:
        writer = None
        for part in reader.partitions():
            lo = done
            batches: Any = reader.read(part)  # Arrow record batches
            for batch in batches:
                if writer is None:
                    writer = pa.ipc.new_file(sink, batch.schema)
                assert batch.schema.equals(target), (batch.schema, target)
                writer.write_batch(batch)
                done += 1
            spans.append([lo, done])
        assert writer is not None
        writer.close()
    with open(apath + ".json", "w") as f:
        json.dump(spans, f)


def ceiling_source() -> Any:
    """A minimal Python data source: partition i yields batches [lo, hi) of a mapped IPC file.

    No I/O per query: each Python worker maps the file once (the first query it serves) and
    keeps the batches, zero-copy views of the page cache, in a per-process cache that outlives
    the reader objects Spark unpickles for every task.
    """
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class CeilingReader(DataSourceReader):
        def __init__(self, path: str) -> None:
            import json

            self.path = path
            with open(path + ".json") as f:
                self.spans = [tuple(s) for s in json.load(f)]

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(s) for s in self.spans]

        def read(self, partition: InputPartition) -> Any:
            import types

            import pyarrow as pa

            cache = sys.modules.setdefault(
                "_litemq_ceiling_cache", types.ModuleType("_litemq_ceiling_cache")
            ).__dict__
            batches = cache.get(self.path)
            if batches is None:
                f = pa.ipc.open_file(pa.memory_map(self.path))
                batches = [f.get_batch(i) for i in range(f.num_record_batches)]
                cache[self.path] = batches
            lo, hi = partition.value
            return iter(batches[lo:hi])

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "litemq_ceiling"

        def reader(self, schema: Any) -> DataSourceReader:
            return CeilingReader(self.options["path"])

    return CeilingSource


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


def build_sealed(qpath: str, ppath: str, n: int) -> None:
    """N messages in sealed 64 MiB files (the last one rolled), and the same rows as Parquet
    with the columns both have (seq, timestamp, key, headers, payload)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import litemq

    chunk = 500_000
    t0 = time.perf_counter()
    with litemq.Queue(qpath, file_size=64 * 1024 * 1024) as q:
        app = q.appender()
        done = 0
        while done < n:
            k = min(chunk, n - done)
            blob = os.urandom(k * PAYLOAD)
            app.append_batch([blob[i * PAYLOAD : (i + 1) * PAYLOAD] for i in range(k)])
            done += k
        app.flush()
        app.roll()
        app.flush()
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
    print(f"setup: {n:,} messages and their Parquet copy in {time.perf_counter() - t0:.1f} s")


#: The --jvm queries: name, the columns read, the aggregate (every one sums over all rows).
JVM_QUERIES: dict[str, tuple[list[str], list[str]]] = {
    "Qa seq, payload": (
        ["seq", "payload"],
        ["count(*) AS n", "sum(length(payload)) AS b", "sum(seq) AS s"],
    ),
    "every column": (
        ["seq", "timestamp", "key", "headers", "payload"],
        [
            "count(*) AS n",
            "sum(length(payload)) AS b",
            "sum(seq) AS s",
            "max(timestamp) AS t",
            "count(key) AS k",
            "count(headers) AS h",
        ],
    ),
    "payload only": (["payload"], ["count(*) AS n", "sum(length(payload)) AS b"]),
}


def jvm_bench(args: argparse.Namespace) -> None:
    from pyspark.sql import SparkSession

    import litemq.spark

    n = args.n
    work = args.dir or tempfile.mkdtemp(prefix="litemq-jvm-bench-")
    qpath, ppath = os.path.join(work, "queue"), os.path.join(work, "rows.parquet")
    try:
        build_sealed(qpath, ppath, n)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("litemq-jvm-bench")
            .config("spark.jars", litemq.spark.jar_path())
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "2g")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        litemq.spark.register(spark)
        readers = {
            "jvm": lambda: spark.read.format("litemq").load(qpath),
            "python": lambda: spark.read.format("litemq").option("reader", "python").load(qpath),
            "parquet": lambda: spark.read.parquet(ppath),
        }
        cases = {}
        for qname, (cols, agg) in JVM_QUERIES.items():
            for rname, make in readers.items():
                cases[(qname, rname)] = (make(), cols, agg)
        want = n * PAYLOAD

        def run(case: Any) -> tuple[float, float | None]:
            base, cols, agg = case
            c0 = tree_cpu_seconds()
            t0 = time.perf_counter()
            # A new DataFrame per run: collecting the same one again would reuse its shuffle
            # output (Spark skips the finished map stage) and time nothing.
            row = base.select(*cols).selectExpr(*agg).collect()[0]
            dt = time.perf_counter() - t0
            c1 = tree_cpu_seconds()
            assert row.n == n, (row, n)
            assert row.b == want, (row, want)
            return dt, (None if c0 is None or c1 is None else c1 - c0)

        for df in cases.values():  # warm-up: JIT, Python workers
            run(df)
        times: dict[Any, list[float]] = {k: [] for k in cases}
        cpus: dict[Any, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeats):
            for k, df in cases.items():
                dt, cpu = run(df)
                times[k].append(dt)
                if cpu is not None:
                    cpus[k].append(cpu)
        spark.stop()
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    import statistics

    import pyspark

    print(
        f"\n{n:,} messages of {PAYLOAD} bytes in sealed 64 MiB files; PySpark "
        f"{pyspark.__version__}, local[2] on {os.cpu_count()} cores; cases interleaved, "
        f"1 warm-up round, medians of {args.repeats}\n"
    )
    print(f"{'query':<16} {'reader':<8} {'rows/s':>13} {'CPU s':>7}  vs Parquet (rows/s, CPU)")
    for qname in JVM_QUERIES:
        pq_t = statistics.median(times[(qname, "parquet")])
        pq_c = statistics.median(cpus[(qname, "parquet")]) if cpus[(qname, "parquet")] else None
        for rname in readers:
            t = statistics.median(times[(qname, rname)])
            c = statistics.median(cpus[(qname, rname)]) if cpus[(qname, rname)] else None
            ratio = f"{pq_t / t:.2f}x"
            if c and pq_c:
                ratio += f", {pq_c / c:.2f}x"
            print(
                f"{qname:<16} {rname:<8} {n / t:>13,.0f} "
                f"{(c if c is not None else float('nan')):>7.2f}  {ratio}"
            )


#: The --typed queries: name, the columns read, a filter (or None), the aggregate.
TYPED_QUERIES: dict[str, tuple[list[str], str | None, list[str]]] = {
    "time, price, size": (
        ["time", "price", "size"],
        None,
        ["count(*) AS n", "sum(size) AS s", "max(time) AS t", "sum(price * size) AS v"],
    ),
    "symbol, price, size": (
        ["symbol", "price", "size"],
        None,
        ["count(*) AS n", "sum(size) AS s", "sum(length(symbol)) AS l", "sum(price * size) AS v"],
    ),
    "price, size where side = 1": (
        ["price", "size", "side"],
        "side = 1",
        ["count(*) AS n", "sum(size) AS s", "sum(price * size) AS v"],
    ),
}


def build_typed(qpath: str, ppath: str, n: int) -> None:
    """N rows of the issue's market data in a typed queue (sealed 64 MiB files) and, the same
    rows, in a Parquet file."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import litemq

    schema = pa.schema(
        [
            pa.field("time", pa.int64(), nullable=False),
            pa.field("symbol", pa.string(), nullable=False),
            pa.field("price", pa.float64(), nullable=False),
            pa.field("size", pa.int64(), nullable=False),
            pa.field("side", pa.int8(), nullable=False),
            pa.field("id", pa.int64(), nullable=False),
        ]
    )
    rng = np.random.default_rng(35)
    names = np.array([f"S{i:03d}" for i in range(500)], dtype=object)
    chunk = 500_000
    t0 = time.perf_counter()
    writer = pq.ParquetWriter(ppath, schema)
    with litemq.Queue(qpath, schema=schema, file_size=64 * 1024 * 1024) as q:
        app = q.appender()
        for at in range(0, n, chunk):
            k = min(chunk, n - at)
            table = pa.table(
                {
                    "time": pa.array(1_700_000_000_000_000 + np.arange(at, at + k) * 1000),
                    "symbol": pa.array(names[rng.integers(0, len(names), k)], pa.string()),
                    "price": pa.array(np.round(rng.uniform(1, 500, k), 2)),
                    "size": pa.array(rng.integers(1, 10_000, k)),
                    "side": pa.array(rng.choice(np.array([-1, 1], dtype=np.int8), k)),
                    "id": pa.array(np.arange(at, at + k)),
                },
                schema=schema,
            )
            for b in table.to_batches(max_chunksize=1000):
                app.append_batch(b)
            writer.write_table(table, row_group_size=chunk)
        app.flush()
        app.roll()
        app.flush()
    writer.close()
    print(f"setup: {n:,} typed rows and their Parquet copy in {time.perf_counter() - t0:.1f} s")


def typed_bench(args: argparse.Namespace) -> None:
    import statistics

    import pyspark
    from pyspark.sql import SparkSession

    import litemq.spark

    n = args.n
    work = args.dir or tempfile.mkdtemp(prefix="litemq-typed-bench-")
    qpath, ppath = os.path.join(work, "queue"), os.path.join(work, "rows.parquet")
    try:
        build_typed(qpath, ppath, n)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("litemq-typed-bench")
            .config("spark.jars", litemq.spark.jar_path())
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "2g")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        litemq.spark.register(spark)
        readers = {
            "jvm": lambda: spark.read.format("litemq").option("filterPushdown", "true").load(qpath),
            "parquet": lambda: spark.read.parquet(ppath),
        }
        plan = readers["jvm"]()._jdf.queryExecution().executedPlan().toString()
        assert "litemq (JVM reader)" in plan, plan
        results: dict[Any, Any] = {}

        def run(key: Any) -> tuple[float, float | None]:
            (qname, rname) = key
            cols, cond, agg = TYPED_QUERIES[qname]
            c0 = tree_cpu_seconds()
            t0 = time.perf_counter()
            df = readers[rname]().select(*cols)
            if cond:
                df = df.where(cond)
            row = df.selectExpr(*agg).collect()[0]
            dt = time.perf_counter() - t0
            c1 = tree_cpu_seconds()
            # Both readers see the same rows (float sums may differ in the last bits).
            got = (row.n, row.s)
            assert results.setdefault(qname, got) == got, (qname, rname, got, results[qname])
            return dt, (None if c0 is None or c1 is None else c1 - c0)

        cases = [(q, r) for q in TYPED_QUERIES for r in readers]
        for _ in range(args.warmup):
            for k in cases:
                run(k)
        times: dict[Any, list[float]] = {k: [] for k in cases}
        cpus: dict[Any, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeats):
            for k in cases:
                dt, cpu = run(k)
                times[k].append(dt)
                if cpu is not None:
                    cpus[k].append(cpu)
        spark.stop()
        qbytes = sum(
            os.path.getsize(os.path.join(d, f))
            for d, _, fs in os.walk(qpath)
            for f in fs
            if f.endswith(".data")
        )
        pbytes = os.path.getsize(ppath)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    print(
        f"\n{n:,} rows of 6 fields (data files {qbytes / 1e6:,.1f} MB, Parquet {pbytes / 1e6:,.1f} MB); "
        f"PySpark {pyspark.__version__}, local[2] on {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}; cases interleaved, {args.warmup} warm-up round(s), medians "
        f"of {args.repeats}\n"
    )
    print(f"{'query':<28} {'reader':<8} {'rows/s':>13} {'CPU s':>7}  vs Parquet (rows/s, CPU)")
    for qname in TYPED_QUERIES:
        pq_t = statistics.median(times[(qname, "parquet")])
        pq_c = statistics.median(cpus[(qname, "parquet")]) if cpus[(qname, "parquet")] else None
        for rname in readers:
            t = statistics.median(times[(qname, rname)])
            c = statistics.median(cpus[(qname, rname)]) if cpus[(qname, rname)] else None
            ratio = f"{pq_t / t:.2f}x"
            if c and pq_c:
                ratio += f", {pq_c / c:.2f}x"
            print(
                f"{qname:<28} {rname:<8} {n / t:>13,.0f} "
                f"{(c if c is not None else float('nan')):>7.2f}  {ratio}"
            )


#: The --stream aggregate, run on every micro-batch (foreachBatch) and on the batch reads.
STREAM_AGG = ["count(*) AS n", "sum(length(payload)) AS b", "sum(seq) AS s"]


def stream_bench(args: argparse.Namespace) -> None:
    """``Trigger.AvailableNow`` over the whole queue through the JVM stream and the Python
    streaming source (one micro-batch each: no maxRecordsPerTrigger), against the batch reads
    of the same rows (Parquet, the JVM reader), Qa's aggregate everywhere."""
    import statistics

    import pyspark
    from pyspark.sql import SparkSession

    import litemq.spark

    n = args.n
    work = args.dir or tempfile.mkdtemp(prefix="litemq-stream-bench-")
    qpath, ppath = os.path.join(work, "queue"), os.path.join(work, "rows.parquet")
    want = n * PAYLOAD
    try:
        build_sealed(qpath, ppath, n)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("litemq-stream-bench")
            .config("spark.jars", litemq.spark.jar_path())
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "2g")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        litemq.spark.register(spark)

        def stream(reader: str, schema: str | None) -> Any:
            def run() -> None:
                ckpt = tempfile.mkdtemp(prefix="ckpt-", dir=work)
                got: list[tuple[int, int]] = []

                def each(df: Any, batch_id: int) -> None:
                    row = df.selectExpr(*STREAM_AGG).collect()[0]
                    got.append((row.n, row.b or 0))

                rs = spark.readStream.format("litemq").option("reader", reader)
                if schema:
                    rs = rs.schema(schema)
                q = (
                    rs.load(qpath)
                    .writeStream.foreachBatch(each)
                    .option("checkpointLocation", ckpt)
                    .trigger(availableNow=True)
                    .start()
                )
                q.awaitTermination()
                assert q.exception() is None, q.exception()
                described = q.recentProgress[-1]["sources"][0]["description"]
                assert ("JVM reader" in described) == (reader == "jvm"), described
                assert sum(g[0] for g in got) == n, got
                assert sum(g[1] for g in got) == want, got
                shutil.rmtree(ckpt)

            return run

        def batch(make: Any) -> Any:
            def run() -> None:
                row = make().select("seq", "payload").selectExpr(*STREAM_AGG).collect()[0]
                assert row.n == n, row
                assert row.b == want, row

            return run

        narrow = "seq bigint, payload binary"
        cases = {
            "stream JVM, seq+payload": stream("jvm", narrow),
            "stream Python, seq+payload": stream("python", narrow),
            "stream JVM, all columns": stream("jvm", None),
            "stream Python, all columns": stream("python", None),
            "batch JVM, Qa": batch(lambda: spark.read.format("litemq").load(qpath)),
            "batch Parquet, Qa": batch(lambda: spark.read.parquet(ppath)),
        }

        def timed(run: Any) -> tuple[float, float | None]:
            c0 = tree_cpu_seconds()
            t0 = time.perf_counter()
            run()
            dt = time.perf_counter() - t0
            c1 = tree_cpu_seconds()
            return dt, (None if c0 is None or c1 is None else c1 - c0)

        for _ in range(args.warmup):
            for run in cases.values():
                timed(run)
        times: dict[str, list[float]] = {k: [] for k in cases}
        cpus: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.repeats):
            for k, run in cases.items():
                dt, cpu = timed(run)
                times[k].append(dt)
                if cpu is not None:
                    cpus[k].append(cpu)
        spark.stop()
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    print(
        f"\n{n:,} messages of {PAYLOAD} bytes in sealed 64 MiB files; PySpark "
        f"{pyspark.__version__}, local[2] on {os.cpu_count()} cores; streams are "
        f"Trigger.AvailableNow queries from start() to their end, a fresh checkpoint each, "
        f"foreachBatch running {', '.join(STREAM_AGG)}; cases interleaved, {args.warmup} "
        f"warm-up round(s), medians of {args.repeats}\n"
    )
    base = "batch Parquet, Qa"
    pq_t = statistics.median(times[base])
    pq_c = statistics.median(cpus[base]) if cpus[base] else None
    print(f"{'read':<28} {'rows/s':>13} {'CPU s':>7}  vs batch Parquet (rows/s, CPU)")
    for k in cases:
        t = statistics.median(times[k])
        c = statistics.median(cpus[k]) if cpus[k] else None
        ratio = f"{pq_t / t:.2f}x" + (f", {pq_c / c:.2f}x" if c and pq_c else "")
        cpu_s = f"{c:7.2f}" if c is not None else "    n/a"
        print(f"{k:<28} {n / t:>13,.0f} {cpu_s}  {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000, help="messages (default 10 million)")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each Spark query; best counts")
    ap.add_argument(
        "--warmup", type=int, default=1, help="untimed rounds of every query first (default 1)"
    )
    ap.add_argument("--rows-per-partition", type=int, default=None, help="litemq rowsPerPartition")
    ap.add_argument("--batch-rows", type=int, default=None, help="litemq batchRows")
    ap.add_argument(
        "--cluster", action="store_true", help="1 worker against 2 on a standalone cluster"
    )
    ap.add_argument(
        "--jvm", action="store_true", help="the JVM reader against the Python source and Parquet"
    )
    ap.add_argument(
        "--stream",
        action="store_true",
        help="AvailableNow streams: the JVM stream against the Python one and batch reads",
    )
    ap.add_argument(
        "--typed",
        action="store_true",
        help="a typed queue of market data in the JVM reader against Parquet (issue 35)",
    )
    args = ap.parse_args()
    if args.typed:
        if "--n" not in sys.argv:
            args.n = int(os.environ.get("LITEMQ_BENCH_N", "2000000"))
        if "--repeats" not in sys.argv:
            args.repeats = 5
        typed_bench(args)
        return
    if args.stream:
        if "--n" not in sys.argv:
            args.n = int(os.environ.get("LITEMQ_BENCH_N", "200000"))
        stream_bench(args)
        return
    if args.jvm:
        if "--n" not in sys.argv:
            args.n = int(os.environ.get("LITEMQ_BENCH_N", "200000"))
        if "--repeats" not in sys.argv:
            args.repeats = 5
        jvm_bench(args)
        return
    if args.cluster:
        cluster_bench(args)
        return

    work = args.dir or tempfile.mkdtemp(prefix="litemq-spark-bench-")
    qpath, ppath = os.path.join(work, "queue"), os.path.join(work, "rows.parquet")
    try:
        build(qpath, ppath, args.n)
        arrow_rate = bench_read_arrow(qpath, args.n)
        spark = spark_session()
        spark.dataSource.register(ceiling_source())
        opts: dict[str, Any] = {}
        if args.rows_per_partition:
            opts["rowsPerPartition"] = args.rows_per_partition
        if args.batch_rows:
            opts["batchRows"] = args.batch_rows
        lq = spark.read.format("litemq").options(**opts).load(qpath)
        # Spark prunes Parquet to the payload column; give litemq the same narrow schema.
        lq_narrow = spark.read.format("litemq").schema("payload binary").options(**opts).load(qpath)
        pq_df = spark.read.parquet(ppath)
        partitions = lq.rdd.getNumPartitions()
        # The ceilings: the very batches litemq's reader yields for each schema, made before
        # any timing and handed to Spark as they are by a minimal Python data source.
        ceil = {}
        for name, df in (("all", lq), ("narrow", lq_narrow)):
            apath = os.path.join(work, f"ceiling-{name}.arrow")
            t0 = time.perf_counter()
            build_ceiling(qpath, apath, opts, df.schema)
            print(f"setup: ceiling batches ({name}) made in {time.perf_counter() - t0:.1f} s")
            ceil[name] = spark.read.format("litemq_ceiling").schema(df.schema).load(apath)
            assert ceil[name].rdd.getNumPartitions() == partitions
        rates, cpu = time_interleaved(
            {
                "parquet": pq_df,
                "litemq": lq,
                "ceiling": ceil["all"],
                "litemq_narrow": lq_narrow,
                "ceiling_narrow": ceil["narrow"],
            },
            args.n,
            args.repeats,
            args.warmup,
        )
        spark.stop()
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)

    import pyspark

    print(
        f"\n{args.n:,} messages of {PAYLOAD} bytes; PySpark {pyspark.__version__}, local[2] on "
        f"{os.cpu_count()} cores; litemq read in {partitions} partitions; cases interleaved, "
        f"{args.warmup} untimed round(s), then best of {args.repeats}\n"
    )
    pq_rate = rates["parquet"]
    rows = [
        ("Spark <- Parquet (count, sum(length(payload)))", pq_rate, ""),
        (
            "Spark <- litemq, all columns",
            rates["litemq"],
            f"{rates['litemq'] / pq_rate:.2f}x Parquet, "
            f"{rates['litemq'] / rates['ceiling']:.2f}x ceiling",
        ),
        (
            "Spark <- ceiling, all columns (ready Arrow batches)",
            rates["ceiling"],
            f"{rates['ceiling'] / pq_rate:.2f}x Parquet",
        ),
        (
            "Spark <- litemq, schema 'payload binary'",
            rates["litemq_narrow"],
            f"{rates['litemq_narrow'] / pq_rate:.2f}x Parquet, "
            f"{rates['litemq_narrow'] / rates['ceiling_narrow']:.2f}x ceiling",
        ),
        (
            "Spark <- ceiling, schema 'payload binary'",
            rates["ceiling_narrow"],
            f"{rates['ceiling_narrow'] / pq_rate:.2f}x Parquet",
        ),
        ("Queue.read_arrow (no Spark), 1M-row batches", arrow_rate, ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'read':<{width}}  {'rows/s':>14}  ratio")
    for name, rate, ratio in rows:
        print(f"{name:<{width}}  {rate:>14,.0f}  {ratio}")
    if all(v is not None for v in cpu.values()):
        # Less noisy than wall-clock on a shared machine: what each query costs in CPU.
        print(f"\nCPU seconds per query (driver + JVM + Python workers, least of {args.repeats}):")
        for name, used in cpu.items():
            print(f"  {name:<15} {used:6.2f} s  ({1e9 * (used or 0) / args.n:,.0f} ns/row)")
        for a, b in (("litemq", "ceiling"), ("litemq_narrow", "ceiling_narrow")):
            print(f"  {b} / {a} CPU: {(cpu[b] or 0) / (cpu[a] or 1):.2f}")
    met = "met" if rates["litemq"] >= 0.9 * rates["ceiling"] else "NOT met"
    print(
        f"\ntargets: Spark on litemq >= 0.9x ceiling (issue 15): {met}; "
        f"Spark on litemq >= 0.5x Parquet: "
        f"{'met' if rates['litemq'] >= 0.5 * pq_rate else 'NOT met'}; "
        f"read_arrow >= 20M rows/s: {'met' if arrow_rate >= 20e6 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
