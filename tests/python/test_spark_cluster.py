"""litemq on a real Spark standalone cluster: a master and two workers on 127.0.0.1, each
worker with its own executor JVM and Python workers (``spark_cluster.py``).

What local mode cannot show: speculative task attempts (local mode disables speculation),
an executor killed with SIGKILL in the middle of a write (batch, and streaming then restarted
from its checkpoint), and tasks of one read spread over two executors. Skipped, saying so,
only when Java is missing.

Cost on the 2-core reference machine (measured with ``nice``, other sessions' tests
running beside): about 30 to 40 s to start the cluster and the session, then 4 to 55 s
per test; the whole module takes 2 to 3 minutes (107 s in one run) and about 2.5 GiB of
memory (driver 512 MiB, three 256 MiB daemons, two 512 MiB executors, Python workers).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")
pa = pytest.importorskip("pyarrow")

from pyspark.sql import SparkSession  # noqa: E402

import litemq  # noqa: E402
import litemq.spark  # noqa: E402
from conftest import S3Server  # noqa: E402
from spark_cluster import ClusterUnavailable, StandaloneCluster, free_port  # noqa: E402
from spark_session import READER  # noqa: E402

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

WRITE_FILE_SIZE = 128 * 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    c = StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2)
    try:
        c.start()
    except ClusterUnavailable as e:
        pytest.skip(f"no Spark standalone cluster: {e}")
    try:
        yield c
    finally:
        c.stop()  # raises if any process it started is left


@pytest.fixture(scope="module")
def spark(cluster: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = SparkSession.builder
    if READER == "jvm":  # the JVM reader: the driver serves the jar to both executors
        builder = builder.config("spark.jars", litemq.spark.jar_path())
    session = (
        builder.master(cluster.master_url)
        .appName("litemq-cluster-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "512m")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.ui.enabled", "true")  # its REST API tells which attempts ran where
        .config("spark.ui.port", str(free_port()))
        .config("spark.speculation", "true")
        .config("spark.speculation.interval", "100ms")
        .config("spark.speculation.quantile", "0.5")
        .config("spark.speculation.multiplier", "2")
        .config("spark.speculation.minTaskRuntime", "1s")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("wh")))
        # Executors unpack native libraries (lz4-java) into java.io.tmpdir and
        # delete them at exit: the ones these tests SIGKILL would leave theirs
        # in /tmp.
        .config(
            "spark.executor.extraJavaOptions",
            f"-Djava.io.tmpdir={tmp_path_factory.mktemp('executor-tmp')}",
        )
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    litemq.spark.register(session)
    yield session
    session.stop()


# ------------------------------------------------------------------------------------------
# helpers


def rest(spark: SparkSession, path: str) -> Any:
    """The driver's monitoring REST API (``/api/v1/applications/<app>/<path>``)."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/{path}"
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def tasks_per_executor(spark: SparkSession) -> dict[str, int]:
    return {
        e["id"]: int(e["totalTasks"]) for e in rest(spark, "allexecutors") if e["id"] != "driver"
    }


def all_tasks(spark: SparkSession) -> list[dict[str, Any]]:
    out = []
    for stage in rest(spark, "stages"):
        out += rest(spark, f"stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=10000")
    return out


def dataset_payloads(path: Path) -> Counter[bytes]:
    """Every payload of every visible queue of a dataset, read by the engine."""
    from litemq.spark.dataset import discover_queues

    seen: Counter[bytes] = Counter()
    for ref in discover_queues(str(path), allow_empty=True):
        with litemq.Queue(ref.path, read_only=True) as q:
            seen.update(q.read_arrow(columns=["payload"]).column("payload").to_pylist())
    return seen


def make_queue(path: Path, n: int, tag: str) -> None:
    with litemq.Queue(path, file_size=64 * 1024) as q:
        app = q.appender()
        for i in range(n):
            app.append(f"{tag}-{i}".encode(), key=f"k{i % 5}" if i % 2 else None)
        app.flush()


def marking_fn(markers: str, slow: dict[int, float], until_copy: bool = False) -> Any:
    """A ``mapInArrow`` function that records each task attempt (partition, attempt number,
    executor pid) in ``markers`` and, in attempt 0 of the partitions in ``slow``, sleeps
    that many seconds after handing over its first batch (so the write is under way). With
    ``until_copy``, the sleep ends early, 2 s after another attempt of the same partition
    (a speculative copy) has started."""

    def executor_of(pid: int) -> int | None:
        """The executor JVM above this Python worker (its parent chain). Defined in here so
        that cloudpickle ships it by value: executors cannot import this test module."""
        while pid > 1:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"CoarseGrainedExecutorBackend" in f.read():
                        return pid
                with open(f"/proc/{pid}/stat") as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                return None
        return None

    def fn(batches: Any) -> Any:
        from pyspark import TaskContext

        tc = TaskContext.get()
        p, a = tc.partitionId(), tc.attemptNumber()
        executor = executor_of(os.getpid())
        Path(markers, f"p{p}-a{a}-e{executor}-{os.getpid()}").touch()
        for i, b in enumerate(batches):
            yield b
            if i == 0 and a == 0 and p in slow:
                end = time.monotonic() + slow[p]
                waiting = until_copy
                while time.monotonic() < end:
                    time.sleep(0.1)
                    copies = [n for n in os.listdir(markers) if n.startswith(f"p{p}-a")]
                    if waiting and len(copies) > 1:
                        end = min(end, time.monotonic() + 2)
                        waiting = False

    return fn


def rows_df(spark: SparkSession, n: int, partitions: int) -> Any:
    # Small Arrow batches, so that a partition hands the writer several.
    return spark.range(0, n, 1, numPartitions=partitions).selectExpr(
        "CAST(CONCAT('row-', CAST(id AS STRING)) AS BINARY) AS payload"
    )


# ------------------------------------------------------------------------------------------
# tests


def test_a_read_of_many_queues_runs_on_both_workers_and_equals_the_engines_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    expected: list[tuple[str, int, bytes]] = []
    for i in range(6):
        name = f"q{i}"
        make_queue(tmp_path / "data" / name, 2500, name)
        with litemq.Queue(tmp_path / "data" / name, read_only=True) as q:
            b = q.read_arrow(columns=["seq", "payload"])
            expected += zip(
                [name] * b.num_rows,
                b.column("seq").to_pylist(),
                b.column("payload").to_pylist(),
                strict=True,
            )
    before = tasks_per_executor(spark)
    df = spark.read.format("litemq").option("rowsPerPartition", 1024).load(str(tmp_path / "data"))
    got = sorted((r["queue"], r["seq"], bytes(r["payload"])) for r in df.collect())
    assert got == sorted(expected)
    after = tasks_per_executor(spark)
    ran = [e for e, n in after.items() if n > before.get(e, 0)]
    assert len(ran) == 2, f"tasks ran on executors {ran} only: {after}"


def test_batch_write_with_speculation_is_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    n, parts = 40_000, 8
    # One partition, chosen at random, is slow until Spark starts a speculative copy of it
    # (at most 60 s); the others are slowed a little, at random. Only one: two slow tasks
    # would hold both executors' only cores, leaving none for a copy.
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    slow = {p: rng.uniform(0, 0.5) for p in range(parts)}
    slow[rng.randrange(parts)] = 60.0
    markers = tmp_path / "markers"
    markers.mkdir()
    out = tmp_path / "out"
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    df = rows_df(spark, n, parts).mapInArrow(
        marking_fn(str(markers), slow, until_copy=True), "payload binary"
    )
    started = {t["taskId"] for t in all_tasks(spark)}
    df.write.format("litemq").mode("append").option("fileSize", WRITE_FILE_SIZE).save(str(out))
    # The status store is fed by the listener bus, asynchronously: give it a moment.
    deadline = time.monotonic() + 10
    while True:
        new = [t for t in all_tasks(spark) if t["taskId"] not in started]
        speculative = [t for t in new if t.get("speculative")]
        if speculative or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert speculative, f"no speculative attempt ran (seed {seed})"
    # The slowed partitions had two attempts running at once, each writing its own queue.
    attempts = Counter(m.name.split("-")[0] for m in markers.iterdir())
    assert max(attempts.values()) >= 2, attempts
    seen = dataset_payloads(out)
    assert len(seen) == n
    assert set(seen.values()) == {1}, [k for k, c in seen.items() if c > 1][:5]
    assert spark.read.format("litemq").load(str(out)).count() == n


def test_an_executor_killed_mid_write_loses_and_doubles_nothing(
    spark: SparkSession, cluster: StandaloneCluster, tmp_path: Path
) -> None:
    n, parts = 30_000, 6
    markers = tmp_path / "markers"
    markers.mkdir()
    out = tmp_path / "out"
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    df = rows_df(spark, n, parts).mapInArrow(
        marking_fn(str(markers), dict.fromkeys(range(parts), 6.0)), "payload binary"
    )
    killed: list[int] = []
    stop = threading.Event()

    def kill_one_executor_mid_task() -> None:
        # /proc and kill(2) only: Spark calls stay on the test's thread.
        while not stop.is_set():
            started = {
                int(m.name.split("-")[2][1:]) for m in markers.iterdir() if "-eNone" not in m.name
            }
            busy = sorted(started & set(cluster.executor_pids()))
            if len(busy) == 2:  # both executors are in the middle of a (6 s) task
                os.kill(busy[0], signal.SIGKILL)
                killed.append(busy[0])
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_one_executor_mid_task)
    killer.start()
    try:
        df.write.format("litemq").mode("append").option("fileSize", WRITE_FILE_SIZE).save(str(out))
    finally:
        stop.set()
        killer.join()
    assert killed, "no executor was caught mid-write"
    victim = killed[0]
    # The victim's task was run again elsewhere.
    retried = [
        m.name for m in markers.iterdir() if f"-e{victim}-" not in m.name and "-a0-" not in m.name
    ]
    assert retried, sorted(m.name for m in markers.iterdir())
    seen = dataset_payloads(out)
    assert len(seen) == n
    assert set(seen.values()) == {1}


def test_a_stream_survives_a_killed_executor_and_a_restart_from_its_checkpoint(
    spark: SparkSession, cluster: StandaloneCluster, tmp_path: Path
) -> None:
    n = 12_000
    source = tmp_path / "source"
    with litemq.Queue(source, file_size=256 * 1024) as q:
        app = q.appender()
        app.append_batch([f"row-{i}".encode() for i in range(n)])
        app.flush()
    markers = tmp_path / "markers"
    markers.mkdir()
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def start() -> Any:
        # Every task's first attempt dawdles 1.5 s: micro-batches of 3,000 rows in 3 tasks
        # take a few seconds each, long enough to be interrupted.
        df = (
            spark.readStream.format("litemq")
            .option("maxRecordsPerTrigger", 3000)
            .option("rowsPerPartition", 1024)
            .load(str(source))
            .select("payload")
            .mapInArrow(marking_fn(str(markers), dict.fromkeys(range(64), 1.5)), "payload binary")
        )
        return (
            df.writeStream.format("litemq")
            .option("checkpointLocation", str(ckpt))
            .option("fileSize", WRITE_FILE_SIZE)
            .trigger(availableNow=True)
            .start(str(out))
        )

    def published() -> int:
        return (
            len([e for e in os.listdir(out) if e.startswith("stream-batch-")])
            if out.exists()
            else 0
        )

    query = start()
    # Kill one executor while both run a task of the first micro-batch.
    victim = None
    deadline = time.monotonic() + 120
    while victim is None and time.monotonic() < deadline and query.isActive:
        started = {
            int(m.name.split("-")[2][1:]) for m in markers.iterdir() if "-eNone" not in m.name
        }
        busy = sorted(started & set(cluster.executor_pids()))
        if len(busy) == 2:
            victim = busy[0]
            os.kill(victim, signal.SIGKILL)
        time.sleep(0.1)
    assert victim is not None, "no executor was caught mid-batch"
    # Then stop the query in the middle of a later batch, as a driver that goes away would.
    while published() < 2 and query.isActive and time.monotonic() < deadline:
        time.sleep(0.1)
    query.stop()
    first_run = published()
    assert first_run < 4, "the query finished before it could be stopped midway"
    query = start()
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    assert published() == 4  # 12,000 rows in micro-batches of at most 3,000
    seen = dataset_payloads(out)
    assert len(seen) == n
    assert set(seen.values()) == {1}


def test_queues_of_two_hosts_archived_to_s3_read_on_the_cluster(
    spark: SparkSession, s3_server: S3Server, tmp_path: Path
) -> None:
    # The recipe of docs/SPARK.md: each "host" archives its queues to one bucket; the
    # cluster's executors read them back through pyarrow.fs (moto's S3 on 127.0.0.1).
    bucket = s3_server.bucket("lmq-cluster")
    expected: list[tuple[str, int, bytes]] = []
    for host in ("host-a", "host-b"):
        for name in ("orders", "payments"):
            q = tmp_path / host / name
            make_queue(q, 2500, f"{host}/{name}")
            report = litemq.archive_queue(q, s3_server.uri(bucket, f"journals/{host}/{name}"))
            assert report.end_seq
            with litemq.Queue(q, read_only=True) as queue:
                b = queue.read_arrow(end=report.end_seq, columns=["seq", "payload"])
            expected += [
                (f"{host}/{name}", s, p)
                for s, p in zip(
                    b.column("seq").to_pylist(), b.column("payload").to_pylist(), strict=True
                )
            ]
    before = tasks_per_executor(spark)
    df = spark.read.format("litemq").load(s3_server.uri(bucket, "journals"))
    got = sorted((r["queue"], r["seq"], bytes(r["payload"])) for r in df.collect())
    assert got == sorted(expected)
    after = tasks_per_executor(spark)
    assert len([e for e, n in after.items() if n > before.get(e, 0)]) == 2
