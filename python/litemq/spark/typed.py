"""Typed queues (``Queue(path, schema=...)``) as DataFrames: the columns ``seq``,
``timestamp``, ``queue``, then one per field of the queues' current schema, read with
``Queue.read_arrow`` (typed columns built in Rust). Filters on a schema column are pushed
down (PySpark 4.1+, ``filterPushdown``): the reader keeps only the rows where one of them
holds, and Spark checks every filter again."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .dataset import QueueRef
from .options import OptionError, ReadOptions
from .scan import (
    MAX_READ_ROWS,
    Bounds,
    Chunk,
    arrow_schema,
    open_queue,
    plan_chunks,
    seq_for_time,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["TypedReader", "typed_fields", "typed_schema"]

#: The columns every typed DataFrame has before the schema's.
RECORD_COLUMNS = ("seq", "timestamp", "queue")


def _spark_type(name: str) -> DataType:
    """The Spark type of a field type (docs/FORMAT.md's names). Unsigned integers take the
    next wider signed type (uint64: decimal(20, 0)), as Spark has no unsigned types."""
    simple: dict[str, DataType] = {
        "bool": BooleanType(),
        "int8": ByteType(),
        "int16": ShortType(),
        "int32": IntegerType(),
        "int64": LongType(),
        "uint8": ShortType(),
        "uint16": IntegerType(),
        "uint32": LongType(),
        "uint64": DecimalType(20, 0),
        "float32": FloatType(),
        "float64": DoubleType(),
        "timestamp_us": TimestampType(),
        "date32": DateType(),
        "string": StringType(),
        "binary": BinaryType(),
    }
    if name in simple:
        return simple[name]
    p, s = name[len("decimal128(") : -1].split(",")
    return DecimalType(int(p), int(s))


def typed_fields(refs: Sequence[QueueRef], key_file: str | None = None) -> dict[str, Any] | None:
    """The current schema fields (name to the stored field) shared by every queue of a
    load; None when none is typed. A load mixing typed and untyped queues, archives, or
    queues of different schemas is refused: one DataFrame has one schema."""
    found: list[tuple[str, list[dict[str, Any]] | None]] = []
    for r in refs:
        if r.archive:
            found.append((r.name, None))
            continue
        with open_queue(r.path, key_file) as q:
            doc = q._schema_doc()
        found.append((r.name, None if doc is None else doc[-1]["fields"]))
    typed = [(n, f) for n, f in found if f is not None]
    if not typed:
        return None
    if len(typed) != len(found):
        plain = [n for n, f in found if f is None]
        raise OptionError(
            f"litemq: a load of typed queues cannot hold untyped queues or archives "
            f"({', '.join(plain)}): read them apart"
        )
    first_name, first = typed[0]

    def shape(fields: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
        return [(f["name"], f["type"], f["nullable"]) for f in fields]

    for name, fields in typed[1:]:
        if shape(fields) != shape(first):
            raise OptionError(
                f"litemq: queues {first_name} and {name} have different schemas: read them apart"
            )
    return {f["name"]: f for f in first}


def typed_schema(fields: dict[str, Any]) -> StructType:
    """The DataFrame schema of a typed load."""
    out = StructType(
        [
            StructField("seq", LongType(), False),
            StructField("timestamp", TimestampType(), False),
            StructField("queue", StringType(), False),
        ]
    )
    for name, f in fields.items():
        out.add(StructField(name, _spark_type(f["type"]), bool(f["nullable"])))
    return out


def check_columns(schema: StructType, fields: dict[str, Any]) -> list[str]:
    """The columns a typed read produces, with a clear error for any other."""
    every = [*RECORD_COLUMNS, *fields]
    names = []
    for f in schema.fields:
        if f.name not in every:
            raise OptionError(
                f"litemq: cannot produce column {f.name!r}: this typed DataFrame has the "
                f"columns {', '.join(every)}"
            )
        names.append(f.name)
    return names


class TypedReader(DataSourceReader):
    """Plans one partition per data file (or per ``rowsPerPartition`` rows) of every typed
    queue and reads each with ``Queue.read_arrow`` (``where``: a pushed-down filter)."""

    def __init__(
        self,
        opts: ReadOptions,
        schema: StructType,
        columns: list[str],
        refs: list[QueueRef],
        fields: dict[str, Any],
    ) -> None:
        given = [
            n
            for n, v in (("key", opts.key), ("where", opts.where), ("topic", opts.topic))
            if v is not None
        ]
        if given:
            raise OptionError(
                f"litemq: option {', '.join(given)} does not apply to typed queues "
                f"(their messages have no key or topic of their own): filter on a column"
            )
        self.opts = opts
        self.schema = schema
        self.columns = columns
        self.refs = refs
        self.fields = fields
        self.bounds = (
            Bounds()
            .and_seq(opts.start_seq, opts.end_seq)
            .and_time(opts.start_time_us, opts.end_time_us)
        )
        #: ``(field, op, value)`` as ``read_arrow(where=...)`` takes, from a pushed filter.
        self.where: tuple[str, str, Any] | None = None

    def partitions(self) -> Sequence[InputPartition]:
        # Plain range chunks: the where filter is applied by the reader of each.
        bounds = replace(self.bounds, query=None, where=None)
        chunks = plan_chunks(
            self.refs, bounds, self.opts.rows_per_partition, (), self.opts.encryption_key_file
        )
        return [InputPartition((c, self.where)) for c in chunks]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        value = getattr(partition, "value", None)
        if value is None:
            return iter(())
        chunk, where = value
        return read_typed_chunk(
            chunk, self.columns, _target(self.schema), where, self.opts.batch_rows
        )


def _target(schema: StructType) -> pa.Schema:
    return arrow_schema(schema)


def read_typed_chunk(
    chunk: Chunk,
    columns: list[str],
    target: pa.Schema,
    where: tuple[str, str, Any] | None,
    batch_rows: int,
) -> Iterator[pa.RecordBatch]:
    """The chunk's rows (where ``where`` holds) as Spark's batches for ``target``."""
    import pyarrow as pa

    engine = ["seq", *(c for c in columns if c not in ("seq", "queue"))]
    with open_queue(chunk.path, chunk.key_file) as q:
        lo, hi = max(chunk.start, int(q.first_seq)), chunk.end
        if chunk.time_start_us is not None and lo < hi:
            lo = max(lo, seq_for_time(q, chunk.time_start_us))
        if chunk.time_end_us is not None and lo < hi:
            hi = min(hi, seq_for_time(q, chunk.time_end_us))
        while lo < hi:
            batch = q.read_arrow(
                start=lo, end=hi, max_rows=min(MAX_READ_ROWS, 1 << 20), columns=engine, where=where
            )
            n = batch.num_rows
            if n == 0:
                return
            lo = int(batch.column("seq")[n - 1].as_py()) + 1
            for i in range(0, n, batch_rows):
                part = batch.slice(i, batch_rows)
                arrays = []
                for name, fld in zip(columns, target, strict=True):
                    if name == "queue":
                        arr = pa.repeat(pa.scalar(chunk.name, pa.string()), part.num_rows)
                    else:
                        arr = part.column(name)
                    if arr.type != fld.type:
                        arr = arr.cast(fld.type)
                    arrays.append(arr)
                yield pa.RecordBatch.from_arrays(arrays, schema=target)


#: Spark filter classes to the ops of ``read_arrow(where=...)``.
_OPS = {
    "EqualTo": "=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "In": "in",
    "StringStartsWith": "prefix",
}

#: Field types whose Spark filter values convert to the field's Arrow type exactly
#: (a timestamp comes in the session's time zone, unknown here: not pushed).
_PUSHABLE = {
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "date32",
    "string",
    "binary",
}


def field_filter(f: Any, fields: dict[str, Any]) -> tuple[int, tuple[str, str, Any]] | None:
    """``(rank, where)`` for a Spark filter on a schema column, or None: equality and IN
    first (rank 0), then a prefix, then a comparison. Every row the filter keeps passes
    the where; Spark still checks the filter."""
    attr = getattr(f, "attribute", None)
    op = _OPS.get(type(f).__name__)
    if attr is None or len(attr) != 1 or op is None:
        return None
    field = fields.get(attr[0])
    if field is None:
        return None
    ftype = field["type"]
    if ftype not in _PUSHABLE and not ftype.startswith("decimal128("):
        return None
    value: Any = getattr(f, "value", None)
    if op == "in":
        values = [v for v in value or () if v is not None]  # null equals nothing
        return (0, (attr[0], "in", values))
    if value is None:
        return None
    if op == "prefix" and ftype != "string":
        return None
    rank = 0 if op == "=" else 1 if op == "prefix" else 2
    return (rank, (attr[0], op, value))


class TypedPushdownReader(TypedReader):
    """`TypedReader` with filter pushdown (PySpark 4.1+, option ``filterPushdown``): of
    the filters on schema columns, the best one (an equality or ``IN`` first, then a
    prefix, then a comparison) becomes the reads' ``where``; every filter is handed back
    to Spark, which checks it on the rows."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        candidates = []
        for f in filters:
            c = field_filter(f, self.fields)
            if c is not None:
                candidates.append(c)
            yield f
        if candidates:
            self.where = _best_where(candidates)


def _best_where(candidates: list[tuple[int, tuple[str, str, Any]]]) -> tuple[str, str, Any]:
    """The best-ranked filter; comparisons on the field of the first one join into one
    ``between`` (bounds included: Spark checks the strict ones again)."""
    rank, best = min(candidates, key=lambda c: c[0])
    if rank < 2:
        return best
    field = best[0]
    ops = [(op, v) for _, (n, op, v) in candidates if n == field]
    lows = [v for op, v in ops if op in (">", ">=")]
    highs = [v for op, v in ops if op in ("<", "<=")]
    if lows and highs:
        return (field, "between", (max(lows), min(highs)))
    return (field, ">=", max(lows)) if lows else (field, "<=", min(highs))
