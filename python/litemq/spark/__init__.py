"""litemq on Spark: read queues as DataFrames, write DataFrames as queues, stream both ways.

Needs the ``spark`` extra (PySpark 4.0 or later, with pyarrow)::

    import litemq.spark
    litemq.spark.register(spark)

    df = spark.read.format("litemq").load("/data/orders")          # a queue or a dataset
    df.write.format("litemq").mode("append").save("/data/copy")    # exactly once
    spark.readStream.format("litemq").load("/data/orders")         # offsets per queue
    litemq.spark.write_partitions(rdd, "/data/out")                 # mapPartitions writers

See ``docs/SPARK.md``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .commitlog import LiteMQCommitLogDataSource
from .dataset import (
    DATASET_MARKER,
    NoQueueError,
    QueueRef,
    Staging,
    clean_staging,
    discover_queues,
    new_job_id,
)
from .jar import jar_path
from .options import DEFAULT_WRITE_FILE_SIZE, OptionError, WriteOptions
from .source import (
    SCHEMA,
    LiteMQDataSource,
    StagedQueue,
    _prepare_dataset,
    _write_columns,
    features,
)
from .write import Columns, write_arrow, write_records

__all__ = [
    "DATASET_MARKER",
    "SCHEMA",
    "LiteMQCommitLogDataSource",
    "LiteMQDataSource",
    "NoQueueError",
    "OptionError",
    "QueueRef",
    "WriteResult",
    "clean_staging",
    "discover_queues",
    "features",
    "jar_path",
    "register",
    "write_partitions",
]


def register(spark: Any) -> None:
    """Register the ``litemq`` format with a SparkSession (once per session).

    Optional where the litemq wheel is installed: its ``pyspark_litemq``
    module lets Spark find the format by itself.

    Example::

        litemq.spark.register(spark)
        spark.read.format("litemq").load("/data/orders").show()
    """
    spark.dataSource.register(LiteMQDataSource)
    spark.dataSource.register(LiteMQCommitLogDataSource)  # LiteMQ broker stores


@dataclass(frozen=True)
class WriteResult:
    """What :func:`write_partitions` published."""

    path: str | None  # the job's directory in the dataset (None when no row was written)
    rows: int
    queues: int


def write_partitions(
    data: Any,
    path: str | os.PathLike[str],
    *,
    fn: Callable[[Iterator[Any]], Iterable[Any]] | None = None,
    mode: str = "append",
    file_size: int = DEFAULT_WRITE_FILE_SIZE,
    index_interval: int | None = None,
) -> WriteResult:
    """Write every partition of a DataFrame or RDD to the dataset at ``path``, exactly once.

    Each task attempt appends its partition to its own staging queue and returns the queue's
    path as its result. Spark hands the driver exactly one result per partition (a failed
    attempt's result never arrives; of speculative copies, only the first to finish counts),
    so the driver publishes exactly those queues, in one rename, and deletes every other
    attempt's queue.

    ``data`` is a DataFrame (columns ``payload`` and optional ``key``, ``headers``, as for
    ``df.write.format("litemq")``) or an RDD. With ``fn``, each partition's iterator goes
    through ``fn`` first, as in ``rdd.mapPartitions(fn)``: this is where a job that writes
    from ``mapPartitions`` puts its per-partition logic. What the RDD (or ``fn``) yields can be
    a payload (bytes-like or str), ``(payload, key)``, ``(payload, key, headers)``, a dict or a
    Row with those fields.

    Example::

        def enrich(rows):
            client = make_client()                 # once per partition
            for r in rows:
                yield (client.render(r).encode(), r.order_id)

        litemq.spark.write_partitions(orders_df, "/data/rendered", fn=enrich)
    """
    if mode not in ("append", "overwrite"):
        raise OptionError(f"litemq: mode={mode!r}: expected 'append' or 'overwrite'")
    opts = WriteOptions.parse(
        {"path": os.fspath(path), "fileSize": str(file_size)}
        | ({"indexInterval": str(index_interval)} if index_interval else {})
    )
    from pyspark.sql import DataFrame

    is_df = isinstance(data, DataFrame)
    if is_df and fn is None:
        cols = _write_columns(data.schema)
    elif not is_df and not hasattr(data, "mapPartitionsWithIndex"):
        raise TypeError(
            f"litemq: write_partitions takes a DataFrame or an RDD, not {type(data).__name__}"
        )
    _prepare_dataset(opts.path)
    job = f"job-{new_job_id()}"
    staging = Staging(opts.path, job)
    try:
        if is_df and fn is None:
            results = data.mapInArrow(
                _arrow_task(staging, cols, opts),
                "partition int, attempt int, path string, rows long",
            ).collect()
            staged = [StagedQueue(r.partition, r.attempt, r.path, r.rows) for r in results]
        else:
            rdd = data.rdd if is_df else data
            staged = rdd.mapPartitionsWithIndex(_records_task(staging, opts, fn)).collect()
    except BaseException:
        staging.discard()
        raise
    winners = [(s.partition, s.path) for s in staged if s.path]
    published = staging.publish(winners, job, overwrite=mode == "overwrite")
    clean_staging(opts.path, keep=[job])
    return WriteResult(
        path=published if winners else None,
        rows=sum(s.rows for s in staged),
        queues=len(winners),
    )


def _arrow_task(staging: Staging, cols: Columns, opts: WriteOptions) -> Callable[..., Any]:
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        tc = TaskContext.get()
        assert tc is not None, "runs in a Spark task"
        partition, attempt = tc.partitionId(), tc.attemptNumber()
        path = staging.attempt_path(partition, attempt, tc.taskAttemptId())
        rows = write_arrow(
            path, batches, cols, file_size=opts.file_size, queue_options=opts.queue_options
        )
        yield pa.RecordBatch.from_pydict(
            {
                "partition": pa.array([partition], pa.int32()),
                "attempt": pa.array([attempt], pa.int32()),
                "path": pa.array([path if rows else None], pa.string()),
                "rows": pa.array([rows], pa.int64()),
            }
        )

    return task


def _records_task(
    staging: Staging, opts: WriteOptions, fn: Callable[[Iterator[Any]], Iterable[Any]] | None
) -> Callable[[int, Iterator[Any]], Iterator[StagedQueue]]:
    def task(index: int, records: Iterator[Any]) -> Iterator[StagedQueue]:
        from pyspark import TaskContext

        tc = TaskContext.get()
        attempt = tc.attemptNumber() if tc is not None else 0
        tid = tc.taskAttemptId() if tc is not None else None
        path = staging.attempt_path(index, attempt, tid)
        source = fn(records) if fn is not None else records
        rows = write_records(
            path, source, file_size=opts.file_size, queue_options=opts.queue_options
        )
        yield StagedQueue(index, attempt, path if rows else None, rows)

    return task
