"""Typed queues' Arrow side: a ``pyarrow.RecordBatch``/``Table`` given to
``append_batch`` as the Arrow buffers of each schema field (the engine
encodes the rows from them, no Python object per row), and the typed
columns of ``read_arrow``.

A batch whose columns are the schema's fields, in order and of exactly its
types, never comes here: the engine reads it through Arrow's C data
interface (``__arrow_c_array__``). `arrow_batches` takes the others: columns
in another order or of other types (cast), missing nullable ones (nulls).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from litemq._litemq import SchemaError
from litemq.schema import arrow_type

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ColumnIn", "arrow_batches", "is_arrow_data"]

#: One schema field's column as ``encode_columns`` takes it: validity
#: bitmap (None: no nulls), the array's offset in elements, the data buffer,
#: the offsets buffer (string/binary), whether offsets are 64-bit.
ColumnIn = tuple[Any, int, Any, Any, bool]

_VAR = ("string", "binary")


def is_arrow_data(obj: object) -> bool:
    """True for a ``pyarrow.RecordBatch`` or ``pyarrow.Table``."""
    if not type(obj).__module__.startswith("pyarrow"):
        return False
    import pyarrow as pa

    return isinstance(obj, pa.RecordBatch | pa.Table)


@lru_cache(maxsize=16)
def _targets(version_json: str) -> tuple[tuple[str, Any, bool, bool], ...]:
    """Per field of a schema version: name, Arrow type, nullable, var-sized."""
    version = json.loads(version_json)
    return tuple(
        (f["name"], arrow_type(f["type"]), bool(f["nullable"]), f["type"] in _VAR)
        for f in version["fields"]
    )


def arrow_batches(
    data: pa.RecordBatch | pa.Table, version_json: str
) -> Iterator[tuple[int, list[ColumnIn]]]:
    """Each record batch of ``data`` as ``(rows, columns)``, the columns in
    the schema's field order, each cast to the field's Arrow type when it
    differs (a cast that would lose data raises `SchemaError` naming the
    field). A column the schema lacks, or a non-nullable field without a
    column, raises `SchemaError` naming it."""
    import pyarrow as pa

    targets = _targets(version_json)
    names = data.schema.names
    known = {name for name, *_ in targets}
    for name in names:
        if name not in known:
            raise SchemaError(
                f"column {name!r} is not a field of the queue's schema "
                f"(its fields: {', '.join(n for n, *_ in targets)})"
            )
    # The usual batch has the schema's columns in its order: taken by position.
    in_order = names == [name for name, *_ in targets]
    batches = data.to_batches() if isinstance(data, pa.Table) else [data]
    for batch in batches:
        rows = batch.num_rows
        if rows == 0:
            continue
        arrays = batch.columns if in_order else [_lookup(batch, t) for t in targets]
        yield rows, [_column(arr, t) for arr, t in zip(arrays, targets, strict=True)]


def _lookup(batch: pa.RecordBatch, target: tuple[str, Any, bool, bool]) -> pa.Array:
    """The column of field ``target`` (nulls when the batch lacks a nullable one)."""
    import pyarrow as pa

    name, t, nullable, _ = target
    idx = batch.schema.get_field_index(name)
    if idx >= 0:
        return batch.column(idx)
    if not nullable:
        raise SchemaError(f"field {name!r} is not nullable and the batch has no column for it")
    return pa.nulls(batch.num_rows, t)


def _column(arr: pa.Array, target: tuple[str, Any, bool, bool]) -> ColumnIn:
    name, t, nullable, var = target
    if arr.type != t:
        arr = _cast(arr, name, t)
    nulls = arr.null_count
    if nulls and not nullable:
        raise SchemaError(f"field {name!r} is not nullable and its column holds nulls")
    bufs = arr.buffers()
    validity = bufs[0] if nulls else None
    if var:
        return (validity, arr.offset, bufs[2], bufs[1], False)
    return (validity, arr.offset, bufs[1], None, False)


def _cast(arr: pa.Array, name: str, target: Any) -> pa.Array:
    import pyarrow as pa

    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    try:
        return arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaError(f"field {name!r}: column of type {arr.type} is not {target}: {e}") from e


#: The columns every typed read has before the schema's fields.
RECORD_COLUMNS = ("seq", "timestamp")


def column_names(columns: Any, fields: dict[str, dict[str, Any]]) -> tuple[str, ...]:
    """Checks ``read_arrow(columns=...)`` of a typed queue: ``seq``,
    ``timestamp`` and the current schema's fields, each once (None: all, in
    that order)."""
    every = RECORD_COLUMNS + tuple(fields)
    if columns is None:
        return every
    if isinstance(columns, (str, bytes)):
        raise TypeError("columns must be a list of column names, not a single string")
    names = tuple(columns)
    for name in names:
        if name not in every:
            raise ValueError(
                f"unknown column {name!r}; a typed queue's columns are {', '.join(every)}"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"columns names a column twice: {list(names)}")
    return names


def arrow_schema(names: tuple[str, ...], fields: dict[str, dict[str, Any]]) -> pa.Schema:
    """The schema of a typed read's batch with columns ``names``."""
    import pyarrow as pa

    out = []
    for n in names:
        if n == "seq":
            out.append(pa.field("seq", pa.int64(), nullable=False))
        elif n == "timestamp":
            out.append(pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False))
        else:
            f = fields[n]
            out.append(pa.field(n, arrow_type(f["type"]), bool(f["nullable"])))
    return pa.schema(out)


def record_batch(
    cols: dict[str, Any],
    names: tuple[str, ...],
    read: list[str],
    fields: dict[str, dict[str, Any]],
) -> pa.RecordBatch:
    """The batch of columns ``names`` from the engine's buffers ``cols``
    (``read``: the schema fields it filled, in its ``columns`` order),
    without a copy."""
    import pyarrow as pa

    rows = int(cols["rows"])
    arrays: dict[str, pa.Array] = {
        "seq": pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(cols["seq"])]),
        "timestamp": pa.Array.from_buffers(
            pa.timestamp("us", tz="UTC"), rows, [None, pa.py_buffer(cols["timestamp"])]
        ),
    }
    for name, (validity, data, offsets) in zip(read, cols["columns"], strict=True):
        t = arrow_type(fields[name]["type"])
        bufs = [None if validity is None else pa.py_buffer(validity)]
        if offsets is not None:
            bufs.append(pa.py_buffer(offsets))
        bufs.append(pa.py_buffer(data))
        arrays[name] = pa.Array.from_buffers(t, rows, bufs)
    schema = arrow_schema(names, fields)
    return pa.RecordBatch.from_arrays([arrays[n] for n in names], schema=schema)


_COMPARE = {
    "=": "equal",
    "==": "equal",
    "!=": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}


def where_mask(batch: pa.RecordBatch, where: tuple[str, str, Any], t: pa.DataType) -> pa.Array:
    """The rows of ``batch`` where ``(field, op, value)`` holds (a null
    never does), ``value`` taken as the field's type ``t``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    field, op, value = where
    col = batch.column(field)

    def scalar(v: Any) -> pa.Scalar:
        try:
            return pa.scalar(v, type=t)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
            raise ValueError(f"where: {v!r} is not a value of field {field!r} ({t}): {e}") from e

    if op in _COMPARE:
        mask = getattr(pc, _COMPARE[op])(col, scalar(value))
    elif op == "between":
        if not (isinstance(value, tuple | list) and len(value) == 2):
            raise ValueError("where: 'between' takes a (low, high) pair")
        lo, hi = value
        mask = pc.and_(pc.greater_equal(col, scalar(lo)), pc.less_equal(col, scalar(hi)))
    elif op == "in":
        if isinstance(value, str | bytes):
            raise ValueError("where: 'in' takes a list of values")
        mask = pc.is_in(col, value_set=pa.array([scalar(v).as_py() for v in value], type=t))
    elif op == "prefix":
        if not pa.types.is_string(t):
            raise ValueError(f"where: 'prefix' compares strings; field {field!r} is {t}")
        mask = pc.starts_with(col, pattern=str(value))
    else:
        raise ValueError(f"where: unknown op {op!r} (=, !=, <, <=, >, >=, between, in, prefix)")
    return pc.fill_null(mask, False)


def empty_batch(names: tuple[str, ...], fields: dict[str, dict[str, Any]]) -> pa.RecordBatch:
    """A typed read's batch of no rows."""
    import pyarrow as pa

    schema = arrow_schema(names, fields)
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)
