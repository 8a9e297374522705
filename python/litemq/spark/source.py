"""The ``litemq`` Spark data source: batch and streaming reads and writes (PySpark 4.x).

PySpark's Python Data Source API (``pyspark.sql.datasource``) grew over 4.x; what this module
uses from each version:

- 4.0: ``DataSource``, ``DataSourceReader`` (partitions, Arrow record batches),
  ``DataSourceArrowWriter`` with commit/abort, ``DataSourceStreamReader``,
  ``DataSourceStreamWriter``.
- 4.1: filter pushdown (``DataSourceReader.pushFilters``, behind the Spark setting
  ``spark.sql.python.filterPushdown.enabled``), ``DataSourceStreamArrowWriter``.
- 4.2: admission control (``latestOffset(start, limit)``, ``getDefaultReadLimit``) and
  ``SupportsTriggerAvailableNow``.

Features a version lacks are left out, never emulated in a way that could be wrong.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyspark.sql.datasource as _ds
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .dataset import (
    QueueRef,
    Staging,
    clean_staging,
    discover_queues,
    is_queue,
    mark_dataset,
    new_job_id,
)
from .options import OptionError, ReadOptions, StreamReadOptions, WriteOptions, parse_time_us
from .scan import (
    COLUMNS,
    TEXT_COLUMNS,
    Bounds,
    Chunk,
    Shaper,
    arrow_schema,
    field_columns,
    file_starts,
    plan_chunks,
    read_chunk,
    split_range,
)
from .typed import TypedPushdownReader, TypedReader, typed_fields, typed_schema
from .typed import check_columns as check_typed_columns
from .write import IGNORED_COLUMNS, Columns, write_arrow, write_records

try:  # 4.2+
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        ReadMinRows,
    )

    _HAS_ADMISSION = True
except ImportError:  # pragma: no cover - older PySpark
    _HAS_ADMISSION = False

_HAS_FILTERS = hasattr(_ds, "Filter")  # 4.1+
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_HAS_STREAM_ARROW_WRITER = hasattr(_ds, "DataSourceStreamArrowWriter")  # 4.1+

# Base classes that depend on the PySpark version; type checkers see the 4.0 ones.
if TYPE_CHECKING:
    _BatchWriterBase = DataSourceWriter
    _StreamWriterBase = DataSourceStreamWriter
    _AvailableNow = object
else:
    _BatchWriterBase = getattr(_ds, "DataSourceArrowWriter", DataSourceWriter)
    _StreamWriterBase = getattr(_ds, "DataSourceStreamArrowWriter", DataSourceStreamWriter)
    try:
        from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
    except ImportError:  # pragma: no cover - PySpark before 4.2
        _AvailableNow = object

__all__ = ["SCHEMA", "LiteMQDataSource", "features"]

#: The schema of a litemq DataFrame.
SCHEMA = StructType(
    [
        StructField("seq", LongType(), False),
        StructField("timestamp", TimestampType(), False),
        StructField("key", BinaryType(), True),
        StructField("headers", MapType(StringType(), BinaryType(), True), True),
        StructField("payload", BinaryType(), False),
        StructField("queue", StringType(), False),
        StructField("topic", StringType(), True),
        StructField("queue_id", IntegerType(), False),
        StructField("tags", ArrayType(StringType(), False), False),
    ]
)

# What a user-given read schema may declare for each column (binary may be read as UTF-8 text).
_READ_TYPES: dict[str, tuple[type[DataType], ...]] = {
    "seq": (LongType,),
    "timestamp": (TimestampType,),
    "key": (BinaryType, StringType),
    "key_text": (StringType,),
    "payload": (BinaryType, StringType),
    "queue": (StringType,),
    "topic": (StringType,),
    "queue_id": (IntegerType, LongType),
}


def features() -> dict[str, bool]:
    """Which optional features the installed PySpark offers to this source."""
    return {
        "filter_pushdown": _HAS_FILTERS,
        "admission_control": _HAS_ADMISSION,
        "trigger_available_now": _HAS_ADMISSION,
        "arrow_stream_writer": _HAS_STREAM_ARROW_WRITER,
    }


#: Metadata key of a flattened header column (its value: the index's name); the writer
#: ignores columns carrying it, so a DataFrame read from litemq can be written back.
FIELD_METADATA = "litemq.indexedHeader"


def _schema_with(fields: dict[str, tuple[str, str]]) -> StructType:
    """SCHEMA, then one column per flattened indexed header (see `field_columns`)."""
    out = StructType(list(SCHEMA.fields))
    for col, (name, kind) in fields.items():
        out.add(
            StructField(
                col,
                LongType() if kind == "int" else StringType(),
                True,
                metadata={FIELD_METADATA: name},
            )
        )
    return out


def _check_read_schema(
    schema: StructType, fields: dict[str, tuple[str, str]] | None = None
) -> list[str]:
    """The column names to produce; a clear error for anything the source cannot produce."""
    fields = fields or {}
    names = []
    for f in schema.fields:
        if f.name in fields:
            want: type[DataType] = LongType if fields[f.name][1] == "int" else StringType
            if not isinstance(f.dataType, want):
                raise OptionError(
                    f"litemq: cannot produce column {f.name!r} as {f.dataType.simpleString()}: "
                    f"it shows the {fields[f.name][1]} index {fields[f.name][0]!r}, expected "
                    f"{want().simpleString()}"
                )
            names.append(f.name)
            continue
        if f.name not in COLUMNS and f.name not in TEXT_COLUMNS:
            raise OptionError(
                f"litemq: cannot produce column {f.name!r}: a litemq DataFrame has the columns "
                f"{', '.join([*COLUMNS, *fields])} (and {', '.join(TEXT_COLUMNS)} when named)"
            )
        if f.name == "headers":
            ok = (
                isinstance(f.dataType, MapType)
                and isinstance(f.dataType.keyType, StringType)
                and isinstance(f.dataType.valueType, (BinaryType, StringType))
            )
        elif f.name == "headers_text":
            ok = (
                isinstance(f.dataType, MapType)
                and isinstance(f.dataType.keyType, StringType)
                and isinstance(f.dataType.valueType, StringType)
            )
        elif f.name == "tags":
            ok = isinstance(f.dataType, ArrayType) and isinstance(
                f.dataType.elementType, StringType
            )
        else:
            ok = isinstance(f.dataType, _READ_TYPES[f.name])
        if not ok:
            expected = (
                "map<string,binary>"
                if f.name == "headers"
                else "map<string,string>"
                if f.name == "headers_text"
                else "array<string>"
                if f.name == "tags"
                else " or ".join(t.typeName() for t in _READ_TYPES[f.name])
            )
            raise OptionError(
                f"litemq: cannot produce column {f.name!r} as {f.dataType.simpleString()}: "
                f"expected {expected}"
            )
        names.append(f.name)
    return names


def _write_columns(schema: StructType) -> Columns:
    """Check a DataFrame to be written, on the driver, before any task runs."""
    fields = {f.name: f for f in schema.fields}
    if "payload" not in fields:
        raise OptionError(
            "litemq: the DataFrame has no 'payload' column (it has: "
            f"{', '.join(fields) or 'no columns'}); rename or build one, e.g. "
            "df.withColumnRenamed('value', 'payload')"
        )
    ptype = fields["payload"].dataType
    if not isinstance(ptype, (BinaryType, StringType)):
        raise OptionError(
            f"litemq: column 'payload' is {ptype.simpleString()}; expected binary or string "
            "(e.g. F.to_json(...) or .cast('binary'))"
        )
    if "key" in fields and not isinstance(fields["key"].dataType, (BinaryType, StringType)):
        raise OptionError(
            f"litemq: column 'key' is {fields['key'].dataType.simpleString()}; expected "
            "binary or string"
        )
    if "headers" in fields:
        ht = fields["headers"].dataType
        if not (
            isinstance(ht, MapType)
            and isinstance(ht.keyType, StringType)
            and isinstance(ht.valueType, (BinaryType, StringType))
        ):
            raise OptionError(
                f"litemq: column 'headers' is {ht.simpleString()}; expected "
                "map<string,string> or map<string,binary>"
            )
    if "topic" in fields and not isinstance(fields["topic"].dataType, StringType):
        raise OptionError(
            f"litemq: column 'topic' is {fields['topic'].dataType.simpleString()}; expected string"
        )
    if "queue_id" in fields and not isinstance(
        fields["queue_id"].dataType, (IntegerType, LongType, ShortType, ByteType)
    ):
        raise OptionError(
            f"litemq: column 'queue_id' is {fields['queue_id'].dataType.simpleString()}; "
            "expected an integer"
        )
    if "tags" in fields and not (
        isinstance(fields["tags"].dataType, ArrayType)
        and isinstance(fields["tags"].dataType.elementType, StringType)
    ):
        raise OptionError(
            f"litemq: column 'tags' is {fields['tags'].dataType.simpleString()}; "
            "expected array<string>"
        )
    written = ("payload", "key", "headers", "topic", "queue_id", "tags")
    extra = [
        n
        for n, f in fields.items()
        if n not in (*written, *IGNORED_COLUMNS) and FIELD_METADATA not in (f.metadata or {})
    ]
    if extra:
        raise OptionError(
            f"litemq: cannot write column(s) {extra}: a message has payload, key, headers, "
            "topic, queue_id and tags (seq, timestamp and queue are assigned on append); drop "
            "the others or put them in headers"
        )
    return Columns(
        key="key" in fields,
        headers="headers" in fields,
        topic="topic" in fields,
        queue_id="queue_id" in fields,
        tags="tags" in fields,
    )


class LiteMQDataSource(DataSource):
    """``spark.read.format("litemq")``: queues and datasets of queues as DataFrames.

    Example::

        import litemq.spark
        litemq.spark.register(spark)
        df = spark.read.format("litemq").option("startSeq", 100).load("/data/orders")
        df.write.format("litemq").mode("append").save("/data/orders-copy")
    """

    @classmethod
    def name(cls) -> str:
        return "litemq"

    def schema(self) -> StructType:
        # Validate options and paths now: this runs on the driver when the DataFrame is defined.
        # The same load serves batch and streaming reads: check both sets of options.
        if "paths" in self.options or "path" in self.options:
            opts = ReadOptions.parse(self.options)
            StreamReadOptions.parse(self.options, streaming=False)
            # A path without a queue fails at load(), not later.
            refs = discover_queues(opts.paths)
            typed = typed_fields(refs, opts.encryption_key_file)
            if typed is not None:
                return typed_schema(typed)
            return _schema_with(field_columns(refs, opts.encryption_key_file))
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = ReadOptions.parse(self.options)
        refs = discover_queues(opts.paths)
        typed = typed_fields(refs, opts.encryption_key_file)
        if typed is not None:
            return _typed_reader(opts, schema, refs, typed)
        fields = field_columns(refs, opts.encryption_key_file)
        columns = _check_read_schema(schema, fields)
        if opts.filter_pushdown:
            if not _HAS_FILTERS:
                raise OptionError(
                    "litemq: filterPushdown needs PySpark 4.1 or later (this is "
                    f"{_pyspark_version()}); read without it and filter in Spark"
                )
            return _PushdownReader(opts, schema, columns, refs, fields)
        return LiteMQReader(opts, schema, columns, refs, fields)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = StreamReadOptions.parse(self.options)
        refs = discover_queues(opts.paths)
        if typed_fields(refs, opts.encryption_key_file) is not None:
            raise OptionError(
                "litemq: streaming reads of typed queues are not supported yet: "
                "read them in batches (spark.read)"
            )
        fields = field_columns(refs, opts.encryption_key_file)
        columns = _check_read_schema(schema, fields)
        archived = [r.path for r in refs if r.archive]
        if archived:
            raise OptionError(
                f"litemq: streaming reads follow live queues; {archived[0]} is an archive "
                "(read archives with spark.read, in batch)"
            )
        return LiteMQStreamReader(opts, schema, columns, refs, fields)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts = WriteOptions.parse(self.options)
        cols = _write_columns(schema)
        _prepare_dataset(opts.path)
        return LiteMQWriter(opts, cols, overwrite, new_job_id())

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = WriteOptions.parse(self.options)
        cols = _write_columns(schema)
        if overwrite:
            raise OptionError(
                "litemq: the streaming sink appends (outputMode 'append' or 'update'); "
                "'complete' would rewrite the dataset on every batch"
            )
        _prepare_dataset(opts.path)
        return LiteMQStreamWriter(opts, cols)


def _pyspark_version() -> str:
    import pyspark

    return f"PySpark {pyspark.__version__}"


def _prepare_dataset(path: str) -> None:
    if is_queue(path):
        raise OptionError(
            f"litemq: {path} is a queue; Spark writes datasets (directories of queues). "
            "Write to a new or dataset directory, then read both with .load([queue, dataset])"
        )
    if os.path.exists(path) and not os.path.isdir(path):
        raise OptionError(f"litemq: {path} exists and is not a directory")
    os.makedirs(path, exist_ok=True)
    mark_dataset(path)


# --------------------------------------------------------------------------------------------
# Batch read


class LiteMQReader(DataSourceReader):
    """Plans one partition per data file (or per ``rowsPerPartition`` rows) of every queue."""

    def __init__(
        self,
        opts: ReadOptions,
        schema: StructType,
        columns: list[str],
        refs: list[QueueRef],
        fields: dict[str, tuple[str, str]],
    ) -> None:
        self.opts = opts
        self.schema = schema
        self.columns = columns
        self.refs = refs
        # The flattened columns read (column name to index name and type).
        self.fields = {c: fields[c] for c in columns if c in fields}
        b = (
            Bounds()
            .and_seq(opts.start_seq, opts.end_seq)
            .and_time(opts.start_time_us, opts.end_time_us)
        )
        if opts.key is not None:
            b = b.and_keys(frozenset([opts.key]))
        if opts.topic is not None:
            b = b.and_topics(frozenset([opts.topic]))
        if opts.where is not None:
            b = replace(b, where=opts.where)
        self.bounds = b

    def partitions(self) -> Sequence[InputPartition]:
        chunks = plan_chunks(
            self.refs,
            self.bounds,
            self.opts.rows_per_partition,
            tuple(name for name, _ in self.fields.values()),
            self.opts.encryption_key_file,
        )
        return [InputPartition(c) for c in chunks]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        chunk = getattr(partition, "value", None)
        if chunk is None:  # nothing planned: Spark reads one empty partition (None on 4.0)
            return iter(())
        return read_chunk(
            chunk, _shaper(self.columns, self.schema, self.fields), self.opts.batch_rows
        )


def _typed_reader(
    opts: ReadOptions, schema: StructType, refs: list[QueueRef], typed: dict[str, Any]
) -> DataSourceReader:
    """The reader of a load of typed queues (`litemq.spark.typed`)."""
    columns = check_typed_columns(schema, typed)
    if opts.filter_pushdown:
        if not _HAS_FILTERS:
            raise OptionError(
                "litemq: filterPushdown needs PySpark 4.1 or later (this is "
                f"{_pyspark_version()}); read without it and filter in Spark"
            )
        return TypedPushdownReader(opts, schema, columns, refs, typed)
    return TypedReader(opts, schema, columns, refs, typed)


def _shaper(columns: list[str], schema: StructType, fields: dict[str, tuple[str, str]]) -> Shaper:
    return Shaper(columns, arrow_schema(schema), {c: fields[c][0] for c in columns if c in fields})


if _HAS_FILTERS:
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
        StringStartsWith,
    )

    class _PushdownReader(LiteMQReader):
        """Uses filters on seq, timestamp, key, queue, topic and the flattened indexed
        headers to skip data (PySpark 4.1+).

        seq, key, queue and topic (``=`` and ``IN`` on topic: only that topic's frames are
        read, through the topic indexes) filters are applied exactly and not evaluated
        again; timestamp filters only narrow the range read and are handed back to Spark,
        which checks them.
        Filters on a flattened header column (``=``, ``IN``, ``>``, ``>=``, ``<``, ``<=``,
        ``startswith``) pick the messages through the header's secondary index (one filter
        per read: an equality or ``IN`` first, then a prefix, then the range of the
        comparisons on one column) and are handed back to Spark too, which checks them on
        the column: the index lists a message under every value of the header, the column
        shows the first.
        """

        def pushFilters(self, filters: list[Any]) -> Any:
            candidates: list[tuple[int, str, str, Any]] = []
            for f in filters:
                q = self._field_query(f)
                if q is not None:
                    candidates.append(q)
                    yield f  # Spark checks it on the column
                elif not self._push(f):
                    yield f
            if candidates:
                self.bounds = replace(self.bounds, query=_best_query(candidates))

        def _field_query(self, f: Any) -> tuple[int, str, str, Any] | None:
            """``(rank, index, op, value)`` for a filter on a flattened header column: a
            query (for `Queue.where`) that every row passing the filter passes, or None."""
            attr = getattr(f, "attribute", None)
            if attr is None or len(attr) != 1 or attr[0] not in self.fields:
                return None
            name, kind = self.fields[attr[0]]
            value: Any = getattr(f, "value", None)
            ok = _is_int if kind == "int" else (lambda v: isinstance(v, str))
            if isinstance(f, EqualTo) and ok(value):
                return (0, name, "=", value)
            if isinstance(f, In):
                values = [v for v in value or () if v is not None]  # null equals nothing
                return (0, name, "in", values) if all(ok(v) for v in values) else None
            if isinstance(f, StringStartsWith) and kind == "str" and isinstance(value, str):
                return (1, name, "prefix", value)
            if not ok(value):
                return None
            if isinstance(f, GreaterThanOrEqual):
                return (2, name, ">=", value)
            if isinstance(f, LessThanOrEqual):
                return (2, name, "<=", value)
            # Strict bounds: the next int, or (strings) the bound itself: Spark re-checks.
            if isinstance(f, GreaterThan):
                if kind == "int":
                    return (2, name, ">=", value + 1) if value < _I64_MAX else (0, name, "in", [])
                return (2, name, ">=", value)
            if isinstance(f, LessThan):
                if kind == "int":
                    return (2, name, "<=", value - 1) if value > _I64_MIN else (0, name, "in", [])
                return (2, name, "<=", value)
            return None

        def _push(self, f: Any) -> bool:
            attr = getattr(f, "attribute", None)
            if attr is None or len(attr) != 1:
                return False
            col: str = attr[0]
            value: Any = getattr(f, "value", None)
            b = self.bounds
            if col == "seq" and isinstance(value, int) and not isinstance(value, bool):
                if isinstance(f, EqualTo):
                    self.bounds = b.and_seq(value, value + 1)
                elif isinstance(f, GreaterThan):
                    self.bounds = b.and_seq(value + 1, None)
                elif isinstance(f, GreaterThanOrEqual):
                    self.bounds = b.and_seq(value, None)
                elif isinstance(f, LessThan):
                    self.bounds = b.and_seq(None, value)
                elif isinstance(f, LessThanOrEqual):
                    self.bounds = b.and_seq(None, value + 1)
                else:
                    return False
                return True
            if col == "seq" and isinstance(f, In) and value and all(_is_int(v) for v in value):
                self.bounds = b.and_seq(min(value), max(value) + 1)
                return False  # only narrowed: Spark keeps the IN
            if col == "timestamp":
                self._push_time(f, value)
                return False  # never trusted to be exact: Spark evaluates it again
            if col == "topic" and isinstance(f, (EqualTo, In)):
                topics = (value,) if isinstance(f, EqualTo) else value
                if not topics or not all(isinstance(v, str) and v for v in topics):
                    return False  # a null (or an empty name) matches no message: Spark decides
                self.bounds = b.and_topics(frozenset(topics))
                return True
            if col in ("key", "queue"):
                values: tuple[Any, ...] | None = (
                    (value,) if isinstance(f, EqualTo) else value if isinstance(f, In) else None
                )
                if not values or any(v is None for v in values):
                    return False
                if col == "key":
                    keys = frozenset(
                        v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values
                    )
                    self.bounds = b.and_keys(keys)
                else:
                    self.bounds = b.and_queues(frozenset(str(v) for v in values))
                return True
            return False

        def _push_time(self, f: Any, value: Any) -> None:
            from datetime import datetime

            if not isinstance(value, datetime):
                return
            us = parse_time_us(value)
            # A naive datetime is in the session's time zone, which the worker cannot see:
            # widen by a day each way so the narrowed range always contains the answer.
            slack = 0 if value.tzinfo is not None else 86_400_000_000
            if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
                self.bounds = self.bounds.and_time(us - slack, None)
            elif isinstance(f, (LessThan, LessThanOrEqual)):
                self.bounds = self.bounds.and_time(None, us + 1 + slack)
            elif isinstance(f, EqualTo):
                self.bounds = self.bounds.and_time(us - slack, us + 1 + slack)

    def _is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and _I64_MIN <= v <= _I64_MAX

    def _best_query(candidates: list[tuple[int, str, str, Any]]) -> tuple[str, str, Any]:
        """One query from the filters' (all of them hold on a row Spark keeps): the
        best-ranked; comparisons on the index of the first one join into one range."""
        rank, name, op, value = min(candidates, key=lambda c: c[0])
        if rank < 2:
            return (name, op, value)
        lows = [v for r, n, o, v in candidates if n == name and o == ">="]
        highs = [v for r, n, o, v in candidates if n == name and o == "<="]
        if lows and highs:
            lo, hi = max(lows), min(highs)
            return (name, "between", (lo, hi)) if lo <= hi else (name, "in", [])
        return (name, ">=", max(lows)) if lows else (name, "<=", min(highs))

else:  # pragma: no cover - PySpark 4.0
    _PushdownReader = LiteMQReader  # type: ignore[misc,assignment]


# --------------------------------------------------------------------------------------------
# Batch write


@dataclass
class StagedQueue(WriterCommitMessage):
    """A task attempt's result: the staging queue it wrote (None for an empty partition)."""

    partition: int
    attempt: int
    path: str | None
    rows: int


def _task_ids() -> tuple[int, int, int | None]:
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:  # pragma: no cover - only outside Spark tasks
        return 0, 0, None
    return tc.partitionId(), tc.attemptNumber(), tc.taskAttemptId()


class LiteMQWriter(_BatchWriterBase):
    """Each task attempt writes its own staging queue; the driver publishes the winners.

    Spark's commit coordinator passes ``commit`` one message per partition, from the attempt
    it let commit; failed, killed and speculative losers' queues stay in the staging area and
    are deleted with it. The job's queues appear in the dataset in one rename.
    """

    def __init__(self, opts: WriteOptions, cols: Columns, overwrite: bool, job_id: str) -> None:
        self.opts = opts
        self.cols = cols
        self.overwrite = overwrite
        self.job_id = job_id

    @property
    def staging(self) -> Staging:
        return Staging(self.opts.path, f"job-{self.job_id}")

    def write(self, iterator: Iterator[Any]) -> StagedQueue:
        partition, attempt, tid = _task_ids()
        path = self.staging.attempt_path(partition, attempt, tid)
        rows = _write_any(path, iterator, self.cols, self.opts)
        return StagedQueue(partition, attempt, path if rows else None, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        winners = _winners(messages)
        self.staging.publish(winners, f"job-{self.job_id}", overwrite=self.overwrite)
        clean_staging(self.opts.path, keep=[f"job-{self.job_id}"])

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.staging.discard()


def _winners(messages: list[WriterCommitMessage | None]) -> list[tuple[int, str]]:
    return [
        (m.partition, m.path) for m in messages if isinstance(m, StagedQueue) and m.path is not None
    ]


def _write_any(path: str, iterator: Iterator[Any], cols: Columns, opts: WriteOptions) -> int:
    """Arrow batches (Arrow writers) or Rows (PySpark 4.0's row-based stream writer)."""
    import pyarrow as pa

    it = iter(iterator)
    first = next(it, None)
    if first is None:
        return 0

    def chained() -> Iterator[Any]:
        yield first
        yield from it

    if isinstance(first, pa.RecordBatch):
        return write_arrow(
            path, chained(), cols, file_size=opts.file_size, queue_options=opts.queue_options
        )
    return write_records(
        path, chained(), file_size=opts.file_size, queue_options=opts.queue_options
    )


# --------------------------------------------------------------------------------------------
# Streaming read

_BATCH_ID_PROPERTY = "streaming.sql.batchId"


class LiteMQStreamReader(DataSourceStreamReader, _AvailableNow):
    """Offsets are ``{queue name: next sequence}``, keys sorted; new queues start at 0."""

    def __init__(
        self,
        opts: StreamReadOptions,
        schema: StructType,
        columns: list[str],
        refs: list[QueueRef],
        fields: dict[str, tuple[str, str]],
    ) -> None:
        self.opts = opts
        self.schema = schema
        self.columns = columns
        self.fields = {c: fields[c] for c in columns if c in fields}
        self.paths = {r.name: r.path for r in refs}
        self.target: dict[str, int] | None = None

    # driver side ---------------------------------------------------------------------------

    def _refresh(self) -> dict[str, int]:
        """Every queue's next sequence now (and pick up queues created since the last call)."""
        from .scan import open_queue

        refs = discover_queues(self.opts.paths)
        self.paths.update({r.name: r.path for r in refs})
        out = {}
        for r in refs:
            with open_queue(r.path, self.opts.encryption_key_file) as q:
                out[r.name] = int(q.next_seq)
        return dict(sorted(out.items()))

    def initialOffset(self) -> dict[str, int]:
        current = self._refresh()
        if self.opts.starting == "latest":
            return current
        if isinstance(self.opts.starting, dict):
            return dict(sorted(self.opts.starting.items()))
        return dict.fromkeys(current, 0)

    def latestOffset(
        self, start: dict[str, int] | None = None, limit: Any = None
    ) -> dict[str, int]:
        current = self._refresh()
        if self.target is not None:
            current = {n: min(v, self.target[n]) for n, v in current.items() if n in self.target}
        start = start or {}
        end = {n: max(v, int(start.get(n, 0))) for n, v in current.items()}
        for n, v in start.items():  # a queue that disappeared keeps its offset
            end.setdefault(n, int(v))
        end = dict(sorted(end.items()))
        if limit is None or not _HAS_ADMISSION or isinstance(limit, ReadAllAvailable):
            return end
        backlog = {n: end[n] - int(start.get(n, 0)) for n in end}
        if isinstance(limit, ReadMinRows):
            if self.target is None and sum(backlog.values()) < limit.min_rows:
                return dict(sorted((n, int(v)) for n, v in start.items()))
            return end
        if isinstance(limit, ReadMaxRows):
            grant = _share(backlog, limit.max_rows)
            return dict(sorted((n, int(start.get(n, 0)) + grant[n]) for n in end))
        return end  # ReadMaxFiles / ReadMaxBytes: not meaningful for a queue

    def getDefaultReadLimit(self) -> Any:
        if _HAS_ADMISSION and self.opts.max_records_per_trigger:
            return ReadMaxRows(self.opts.max_records_per_trigger)
        return ReadAllAvailable() if _HAS_ADMISSION else None

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._refresh()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        missing = [n for n in end if n not in self.paths]
        if missing:
            self._refresh()
        out = []
        for name in sorted(end):
            s, e = int((start or {}).get(name, 0)), int(end[name])
            if e <= s:
                continue
            if name not in self.paths:
                raise FileNotFoundError(
                    f"litemq: queue {name!r} of the checkpointed offsets is gone from "
                    f"{self.opts.paths}"
                )
            starts = file_starts(None, self.paths[name])
            for lo, hi in split_range(s, e, self.opts.rows_per_partition, starts):
                chunk = Chunk(
                    name,
                    self.paths[name],
                    lo,
                    hi,
                    fields=tuple(n for n, _ in self.fields.values()),
                    key_file=self.opts.encryption_key_file,
                )
                out.append(InputPartition(chunk))
        return out

    def commit(self, end: dict[str, int]) -> None:
        pass

    def stop(self) -> None:
        pass

    # executor side -------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_chunk(
            partition.value,
            _shaper(self.columns, self.schema, self.fields),
            self.opts.batch_rows,
        )


def _share(backlog: dict[str, int], budget: int) -> dict[str, int]:
    """Split ``budget`` rows fairly over queues with a backlog (water filling), deterministic."""
    grant = dict.fromkeys(backlog, 0)
    left = {n: b for n, b in backlog.items() if b > 0}
    while budget > 0 and left:
        each = max(1, budget // len(left))
        for n in sorted(left):
            take = min(each, left[n], budget)
            grant[n] += take
            left[n] -= take
            budget -= take
            if budget == 0:
                break
        left = {n: b for n, b in left.items() if b > 0}
    return grant


# --------------------------------------------------------------------------------------------
# Streaming write


class LiteMQStreamWriter(_StreamWriterBase):
    """The streaming sink: one staging area per micro-batch; committing batch N twice
    publishes it once. Arrow batches on PySpark 4.1+, rows on 4.0."""

    def __init__(self, opts: WriteOptions, cols: Columns) -> None:
        self.opts = opts
        self.cols = cols
        self.writer_id = new_job_id()

    def _batch_dir(self, batch_id: int) -> str:
        return f"{self.opts.sink_id}-batch-{batch_id:012d}"

    def write(self, iterator: Iterator[Any]) -> StagedQueue:
        from pyspark import TaskContext

        partition, attempt, tid = _task_ids()
        tc = TaskContext.get()
        batch = tc.getLocalProperty(_BATCH_ID_PROPERTY) if tc is not None else None
        area = self._batch_dir(int(batch)) if batch else f"{self.opts.sink_id}-w{self.writer_id}"
        path = Staging(self.opts.path, area).attempt_path(partition, attempt, tid)
        rows = _write_any(path, iterator, self.cols, self.opts)
        return StagedQueue(partition, attempt, path if rows else None, rows)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        name = self._batch_dir(batchId)
        winners = _winners(messages)
        Staging(self.opts.path, name).publish(winners, name, skip_if_exists=True)
        self._clean_older(batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        Staging(self.opts.path, self._batch_dir(batchId)).discard()
        for _, path in _winners(messages):
            shutil.rmtree(path, ignore_errors=True)

    def _clean_older(self, batch_id: int) -> None:
        """Staging areas of earlier batches of this sink belong to crashed runs."""
        prefix = f"{self.opts.sink_id}-batch-"
        root = os.path.join(self.opts.path, "_staging")
        try:
            names = os.listdir(root)
        except FileNotFoundError:
            return
        for n in names:
            if (
                n.startswith(prefix)
                and n[len(prefix) :].isdigit()
                and int(n[len(prefix) :]) < batch_id
            ):
                Staging(self.opts.path, n).discard()
        clean_staging(self.opts.path)
