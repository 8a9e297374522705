"""``spark.read.format("litemq-commitlog")``: a LiteMQ broker store's commit log as a DataFrame.

One row per record with every field of the record (see :mod:`litemq.interop.litemq_store`), plus
where it lies; one partition per commit-log file::

    import litemq.spark
    litemq.spark.register(spark)
    df = spark.read.format("litemq-commitlog").load("data/broker")
    df.groupBy("topic").count().show()

Options: ``failOnDamage`` (``false``): by default a damaged region of a file is passed over,
as :class:`litemq.interop.litemq_store.LiteMQStore` does (``litemq read-commitlog`` shows what); with
``true`` the task reading that file fails and names the damage.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from litemq.interop.litemq_store import (
    CommitLogFile,
    LiteMQRecord,
    LiteMQStore,
    LiteMQStoreError,
    SkipReport,
    _Mapped,
    _walk,
)

from .options import OptionError

__all__ = ["COMMITLOG_SCHEMA", "LiteMQCommitLogDataSource"]


def _f(name: str, t: Any, nullable: bool = False) -> StructField:
    return StructField(name, t, nullable)


#: The columns of a ``litemq-commitlog`` DataFrame: where the record lies, then its fields in
#: the record's order. Times are LiteMQ's milliseconds since the epoch, as stored.
COMMITLOG_SCHEMA = StructType(
    [
        _f("file", StringType()),
        _f("offset", LongType()),
        _f("file_offset", LongType()),
        _f("size", LongType()),
        _f("message_id", StringType()),
        _f("topic", StringType()),
        _f("tags", ArrayType(StringType(), False)),
        _f("keys", ArrayType(StringType(), False)),
        _f("properties", MapType(StringType(), StringType(), False)),
        _f("body", BinaryType()),
        _f("message_type", IntegerType()),
        _f("priority", IntegerType()),
        _f("reliability", IntegerType()),
        _f("delay_time", LongType()),
        _f("transaction_id", StringType()),
        _f("status", IntegerType()),
        _f("sharding_key", StringType()),
        _f("broadcast", IntegerType()),
        _f("born_timestamp", LongType()),
        _f("born_host", StringType()),
        _f("store_host", StringType()),
        _f("queue_id", LongType()),
        _f("queue_offset", LongType()),
        _f("commit_log_offset", LongType()),
        _f("store_size", LongType()),
        _f("store_timestamp", LongType()),
        _f("consume_start_time", LongType()),
        _f("consume_end_time", LongType()),
        _f("consume_count", LongType()),
        _f("trailing", BinaryType()),
    ]
)


def _s(text: str) -> str:
    """Spark strings are UTF-8: bytes that were not valid UTF-8 become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _row(f: CommitLogFile, pos: int, size: int, r: LiteMQRecord) -> tuple[Any, ...]:
    return (
        f.path,
        f.start + pos,
        pos,
        size,
        _s(r.message_id),
        _s(r.topic),
        [_s(t) for t in r.tags],
        [_s(k) for k in r.keys],
        {_s(k): _s(v) for k, v in r.properties},  # a name said twice keeps its last value
        r.body,
        r.message_type,
        r.priority,
        r.reliability,
        r.delay_time,
        _s(r.transaction_id),
        r.status,
        _s(r.sharding_key),
        r.broadcast,
        r.born_timestamp,
        _s(r.born_host),
        _s(r.store_host),
        r.queue_id,
        r.queue_offset,
        r.commit_log_offset,
        r.store_size,
        r.store_timestamp,
        r.consume_start_time,
        r.consume_end_time,
        r.consume_count,
        r.trailing,
    )


def _parse_bool(options: Mapping[str, str], name: str) -> bool:
    value = str(options.get(name, "false")).strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"litemq-commitlog: {name}={value!r}: expected true or false")
    return value == "true"


class LiteMQCommitLogDataSource(DataSource):
    """``spark.read.format("litemq-commitlog").load(store)``: every record, every field.

    ``store`` is a LiteMQ store's directory (holding ``commitlog/``) or a commit-log
    directory. One partition per commit-log file.
    """

    @classmethod
    def name(cls) -> str:
        return "litemq-commitlog"

    def _store(self) -> LiteMQStore:
        path = self.options.get("path")
        if not path:
            raise OptionError("litemq-commitlog: give the store's directory: .load('data/broker')")
        return LiteMQStore(path)

    def schema(self) -> StructType:
        self._store().close()  # a path without a store fails at load(), not in a task
        _parse_bool(self.options, "failOnDamage")
        return COMMITLOG_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        if [f.name for f in schema.fields] != COMMITLOG_SCHEMA.fieldNames():
            raise OptionError(
                "litemq-commitlog: the schema is fixed (select columns after load()): "
                + ", ".join(COMMITLOG_SCHEMA.fieldNames())
            )
        with self._store() as store:
            files = list(store.files)
        return _CommitLogReader(files, _parse_bool(self.options, "failOnDamage"))


class _CommitLogReader(DataSourceReader):
    def __init__(self, files: list[CommitLogFile], fail_on_damage: bool) -> None:
        self.files = files
        self.fail_on_damage = fail_on_damage

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(f) for f in self.files]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        f: CommitLogFile | None = getattr(partition, "value", None)
        if f is None:  # a store without files: Spark reads one empty partition
            return
        m = _Mapped(f.path)
        skipped: list[SkipReport] = []
        try:
            for pos, size, record in _walk(f.path, m.data, skipped):
                if skipped and self.fail_on_damage:
                    break
                yield _row(f, pos, size, record)
        finally:
            m.close()
        if skipped and self.fail_on_damage:
            raise LiteMQStoreError(
                "litemq-commitlog: failOnDamage: " + "; ".join(str(s) for s in skipped)
            )
