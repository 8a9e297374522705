"""Arrow record batches from the engine's column buffers.

The engine fills Arrow-layout buffers (validity bitmaps, i32 offsets, data)
in Rust; this module wraps them with ``pyarrow.Array.from_buffers`` without a
Python object per message. ``pyarrow`` is imported here only, so litemq works
without it until ``read_arrow`` is called.

Schema (also in README.md):

====================  =================================  ==========================
column                type                               notes
====================  =================================  ==========================
``seq``               ``int64``                          never null
``timestamp``         ``timestamp[us, tz=UTC]``          when it was written
``key``               ``binary``                         null without a key; text
                                                         keys as UTF-8 bytes
``headers``           ``map<string, binary>``            null without headers
``payload``           ``binary`` (``large_binary`` when  decompressed; as stored
                      several engine reads are joined)   with ``raw=True``
``topic``             ``string``                         null without a topic
``queue_id``          ``int32``                          0 unless sharded
``tags``              ``list<string>``                   empty list without tags
``priority``          ``uint8``                          0 when none was given
``expires_at``        ``timestamp[us, tz=UTC]``          null when it never expires
``codec``             ``string``                         ``raw=True`` only (unless
                                                         named): null when stored
                                                         uncompressed, else
                                                         ``zstd``/``lz4``/``gzip``
``raw_len``           ``int64``                          ``raw=True`` only (unless
                                                         named): the decompressed
                                                         size
``key_text``          ``string``                         only when named: the key
                                                         when it was given as a
                                                         ``str``, else null
``headers_text``      ``map<string, string>``            only when named: the
                                                         headers, a value given as
                                                         ``str`` as a string, one
                                                         given as bytes null
====================  =================================  ==========================

The schema depends only on the arguments of the call, never on the messages
read: ``key`` and ``headers`` are always binary (every key and value, as
bytes), and ``key_text``/``headers_text`` give what the record says was
text (``Message.key`` is a ``str`` for it) as strings. They share the
binary columns' buffers, so naming both costs no copy. `TEXT_FIELDS` is the
default columns with the text ones in place of ``key`` and ``headers``.

``read_arrow(columns=[...])`` builds only the columns named, in that order;
the engine then skips the others (no payload copied when ``payload`` is
left out).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow as pa

__all__ = [
    "DEFAULT_FIELDS",
    "RAW_FIELDS",
    "SCHEMA_FIELDS",
    "SKIPPED_METADATA",
    "TEXT_FIELDS",
    "Damage",
    "column_names",
    "empty_batch",
    "field_names",
    "record_batch",
    "schema",
    "skipped",
    "tailer_reader",
    "with_skipped",
]

#: Every column, in schema order.
SCHEMA_FIELDS = (
    "seq",
    "timestamp",
    "key",
    "headers",
    "payload",
    "topic",
    "queue_id",
    "tags",
    "priority",
    "expires_at",
    "codec",
    "raw_len",
    "key_text",
    "headers_text",
)
#: ... and with ``raw=True``: the stored form's codec and size as well.
RAW_FIELDS = SCHEMA_FIELDS[:-2]
#: The columns of ``read_arrow()`` without ``columns=``.
DEFAULT_FIELDS = RAW_FIELDS[:-2]
#: The default columns with text keys and header values as strings:
#: ``key_text`` and ``headers_text`` in place of ``key`` and ``headers``.
TEXT_FIELDS = tuple(
    {"key": "key_text", "headers": "headers_text"}.get(n, n) for n in DEFAULT_FIELDS
)


def column_names(columns: Any, raw: bool = False) -> tuple[str, ...]:
    """Checks a ``columns`` argument: names from `SCHEMA_FIELDS`, each once
    (None: `DEFAULT_FIELDS`, or `RAW_FIELDS` when ``raw``, in schema order)."""
    if columns is None:
        return RAW_FIELDS if raw else DEFAULT_FIELDS
    if isinstance(columns, (str, bytes)):
        raise TypeError("columns must be a list of column names, not a single string")
    try:
        names = tuple(columns)
    except TypeError:
        raise TypeError(
            f"columns must be a list of column names, not {type(columns).__name__}"
        ) from None
    for name in names:
        if name not in SCHEMA_FIELDS:
            raise ValueError(f"unknown column {name!r}; the columns are {', '.join(SCHEMA_FIELDS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"columns names a column twice: {list(names)}")
    return names


def field_names(fields: Any, declared: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """Checks a ``fields`` argument: names of declared indexes, each once, as
    ``(name, type)`` pairs (None: none)."""
    if fields is None:
        return ()
    if isinstance(fields, (str, bytes)):
        raise TypeError("fields must be a list of index names, not a single string")
    names = tuple(fields)
    for name in names:
        if name not in declared:
            raise ValueError(
                f"no index on {name!r}: fields names declared indexes ({', '.join(declared)})"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"fields names an index twice: {list(names)}")
    return tuple((n, declared[n]) for n in names)


def schema(
    columns: tuple[str, ...] = DEFAULT_FIELDS, fields: tuple[tuple[str, str], ...] = ()
) -> pa.Schema:
    """The schema of `Queue.read_arrow` batches (of the columns named, then
    one per field: ``(name, "str" | "int")``)."""
    import pyarrow as pa

    full = _full_schema()
    base = full if columns == SCHEMA_FIELDS else pa.schema([full.field(c) for c in columns])
    for name, kind in fields:
        base = base.append(pa.field(name, pa.int64() if kind == "int" else pa.string()))
    return base


def _full_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("seq", pa.int64(), nullable=False),
            pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("key", pa.binary()),
            pa.field("headers", pa.map_(pa.string(), pa.binary())),
            pa.field("payload", pa.binary(), nullable=False),
            pa.field("topic", pa.string()),
            pa.field("queue_id", pa.int32(), nullable=False),
            pa.field("tags", pa.list_(pa.string()), nullable=False),
            pa.field("priority", pa.uint8(), nullable=False),
            pa.field("expires_at", pa.timestamp("us", tz="UTC")),
            pa.field("codec", pa.string()),
            pa.field("raw_len", pa.int64(), nullable=False),
            pa.field("key_text", pa.string()),
            pa.field("headers_text", pa.map_(pa.string(), pa.string())),
        ]
    )


def empty_batch(
    columns: tuple[str, ...] = DEFAULT_FIELDS, fields: tuple[tuple[str, str], ...] = ()
) -> pa.RecordBatch:
    """A batch with the schema (of the columns named) and no rows."""
    import pyarrow as pa

    return pa.RecordBatch.from_pylist([], schema=schema(columns, fields))


def _validity(buf: bytes, nulls: int) -> Any:
    import pyarrow as pa

    return None if nulls == 0 else pa.py_buffer(buf)


def record_batch(
    cols: dict[str, Any],
    columns: tuple[str, ...] = DEFAULT_FIELDS,
    fields: tuple[tuple[str, str], ...] = (),
) -> pa.RecordBatch:
    """Wraps one engine batch (the dict `_read_batch` returns), with the
    columns named (the engine filled those) and its field columns."""
    import pyarrow as pa

    rows = int(cols["rows"])
    buf = pa.py_buffer
    built: dict[str, Any] = {}
    built["seq"] = pa.Array.from_buffers(pa.int64(), rows, [None, buf(cols["seq"])])
    built["timestamp"] = pa.Array.from_buffers(
        pa.timestamp("us", tz="UTC"), rows, [None, buf(cols["timestamp"])]
    )
    if "key" in columns:
        built["key"] = pa.Array.from_buffers(
            pa.binary(),
            rows,
            [
                _validity(cols["key_valid"], cols["key_nulls"]),
                buf(cols["key_offsets"]),
                buf(cols["key_data"]),
            ],
            null_count=cols["key_nulls"],
        )
    if "key_text" in columns:
        built["key_text"] = pa.Array.from_buffers(
            pa.string(),
            rows,
            [_bits(cols["key_text"], rows), buf(cols["key_offsets"]), buf(cols["key_data"])],
        )
    if "headers" in columns:
        built["headers"] = _headers(cols, rows)
    if "headers_text" in columns:
        built["headers_text"] = _headers(cols, rows, text=True)
    if "payload" in columns:
        built["payload"] = pa.Array.from_buffers(
            pa.binary(),
            rows,
            [None, buf(cols["payload_offsets"]), buf(cols["payload_data"])],
        )
    if "topic" in columns:
        built["topic"] = _strings(cols, rows, "topic")
    if "queue_id" in columns:
        built["queue_id"] = pa.Array.from_buffers(pa.int32(), rows, [None, buf(cols["queue_id"])])
    if "tags" in columns:
        entries = max(len(cols["tag_offsets"]) // 4 - 1, 0)
        tags = pa.Array.from_buffers(
            pa.string(), entries, [None, buf(cols["tag_offsets"]), buf(cols["tag_data"])]
        )
        built["tags"] = pa.Array.from_buffers(
            pa.list_(pa.string()), rows, [None, buf(cols["tags_offsets"])], children=[tags]
        )
    if "priority" in columns:
        built["priority"] = pa.Array.from_buffers(pa.uint8(), rows, [None, buf(cols["priority"])])
    if "expires_at" in columns:
        built["expires_at"] = pa.Array.from_buffers(
            pa.timestamp("us", tz="UTC"),
            rows,
            [_validity(cols["expires_valid"], cols["expires_nulls"]), buf(cols["expires_at"])],
            null_count=cols["expires_nulls"],
        )
    if "codec" in columns:
        built["codec"] = _strings(cols, rows, "codec")
    if "raw_len" in columns:
        built["raw_len"] = pa.Array.from_buffers(pa.int64(), rows, [None, buf(cols["raw_len"])])
    arrays = [built[c] for c in columns]
    for f in cols.get("fields", ()):
        valid = _validity(f["valid"], f["nulls"])
        if f["kind"] == "int":
            arrays.append(
                pa.Array.from_buffers(
                    pa.int64(), rows, [valid, buf(f["ints"])], null_count=f["nulls"]
                )
            )
        else:
            arrays.append(
                pa.Array.from_buffers(
                    pa.string(),
                    rows,
                    [valid, buf(f["offsets"]), buf(f["data"])],
                    null_count=f["nulls"],
                )
            )
    return pa.RecordBatch.from_arrays(arrays, schema=schema(columns, fields))


def _strings(cols: dict[str, Any], rows: int, name: str) -> pa.Array:
    """A nullable string column: ``{name}_valid``, ``_nulls``, ``_offsets``, ``_data``."""
    import pyarrow as pa

    nulls = cols[f"{name}_nulls"]
    return pa.Array.from_buffers(
        pa.string(),
        rows,
        [
            _validity(cols[f"{name}_valid"], nulls),
            pa.py_buffer(cols[f"{name}_offsets"]),
            pa.py_buffer(cols[f"{name}_data"]),
        ],
        null_count=nulls,
    )


def _bits(bitmap: bytes, n: int) -> Any:
    """A validity buffer of ``n`` bits from an engine bitmap (its bits past
    the last set one may be missing: they are 0)."""
    import pyarrow as pa

    need = (n + 7) // 8
    if len(bitmap) < need:
        bitmap = bytes(bitmap) + bytes(need - len(bitmap))
    return pa.py_buffer(bitmap)


def _headers(cols: dict[str, Any], rows: int, text: bool = False) -> pa.Array:
    """The ``headers`` column (``text``: ``headers_text``, values given as
    bytes null)."""
    import pyarrow as pa

    buf = pa.py_buffer
    entries = (len(cols["header_name_offsets"]) // 4) - 1
    entries = max(entries, 0)
    names = pa.Array.from_buffers(
        pa.string(),
        entries,
        [None, buf(cols["header_name_offsets"]), buf(cols["header_name_data"])],
    )
    value_type = pa.string() if text else pa.binary()
    values = pa.Array.from_buffers(
        value_type,
        entries,
        [
            _bits(cols["header_value_text"], entries) if text else None,
            buf(cols["header_value_offsets"]),
            buf(cols["header_value_data"]),
        ],
    )
    map_type = pa.map_(pa.string(), value_type)
    pairs = pa.StructArray.from_arrays(
        [names, values], fields=[map_type.key_field, map_type.item_field]
    )
    return pa.Array.from_buffers(
        map_type,
        rows,
        [
            _validity(cols["headers_valid"], cols["headers_nulls"]),
            buf(cols["headers_offsets"]),
        ],
        null_count=cols["headers_nulls"],
        children=[pairs],
    )


def concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """Joins batches into one, widening binary columns to large_binary so
    that more than 2 GiB of payload fits."""
    import pyarrow as pa

    if len(batches) == 1:
        return batches[0]
    wide = pa.schema(
        [
            f.with_type(pa.large_binary()) if f.name in ("key", "payload") else f
            for f in batches[0].schema
        ]
    )
    table = pa.Table.from_batches([b.cast(wide) for b in batches], schema=wide)
    return table.combine_chunks().to_batches()[0]


#: The schema metadata key under which ``read_arrow(on_damage="skip")``
#: lists the ranges it skipped (a JSON list of `Damage` objects).
SKIPPED_METADATA = b"litemq.skipped"


@dataclass(frozen=True)
class Damage:
    """Sequences ``[start, end)`` that ``read_arrow(on_damage="skip")`` left
    out: a damaged frame (``file`` and ``reason`` as the ``CorruptedError``
    gave them) and the messages it stood for."""

    start: int
    end: int
    file: str | None
    reason: str | None


def with_skipped(batch: pa.RecordBatch, skipped: list[Damage]) -> pa.RecordBatch:
    """``batch`` with ``skipped`` in its schema metadata (an empty list when
    nothing was skipped, so the key says the read skipped damage)."""
    meta = dict(batch.schema.metadata or {})
    meta[SKIPPED_METADATA] = json.dumps([asdict(d) for d in skipped]).encode()
    return batch.replace_schema_metadata(meta)


def skipped(data: Any) -> list[Damage]:
    """The ranges a ``read_arrow(on_damage="skip")`` skipped, from its batch
    (or a table or schema made from it); empty when none were."""
    schema_ = data if hasattr(data, "metadata") and not hasattr(data, "schema") else data.schema
    raw = (schema_.metadata or {}).get(SKIPPED_METADATA)
    if raw is None:
        return []
    return [Damage(**d) for d in json.loads(raw)]


def tailer_reader(
    tailer: Any, batch_size: int = 65_536, columns: Sequence[str] | None = None
) -> pa.RecordBatchReader:
    """A plain tailer's messages from its position to the end of what is
    published when each batch is read, as a ``pyarrow.RecordBatchReader`` of
    at most ``batch_size`` rows a batch; reading moves the tailer past them.
    ``columns`` as ``Queue.read_arrow`` takes them (None: its default ones;
    on a typed queue ``seq``, ``timestamp`` and the schema's fields, typed).
    A named, backward or topic tailer raises TypeError (read
    ``q.arrow_reader(start=t.next_seq, topic=...)`` instead)."""
    import pyarrow as pa

    schema_json = tailer._schema_json()
    if schema_json is not None:
        return _typed_tailer_reader(tailer, batch_size, columns, schema_json)
    names = column_names(columns)
    # The first read here, not in the stream: a tailer that cannot export
    # raises its TypeError to the caller (pyarrow would wrap it).
    first = tailer._read_columns(batch_size, list(names))

    def batches() -> Any:
        cols = first
        while int(cols["rows"]):
            yield record_batch(cols, names)
            cols = tailer._read_columns(batch_size, list(names))

    return pa.RecordBatchReader.from_batches(schema(names), batches())


def _typed_tailer_reader(
    tailer: Any, batch_size: int, columns: Sequence[str] | None, schema_json: str
) -> pa.RecordBatchReader:
    """`tailer_reader` of a typed queue (`schema_json`: its schema versions)."""
    import pyarrow as pa

    from litemq import _typed

    fields = {f["name"]: f for f in json.loads(schema_json)["versions"][-1]["fields"]}
    names = _typed.column_names(columns, fields)
    read = [n for n in names if n in fields]
    first = tailer._read_typed_columns(batch_size, read)

    def batches() -> Any:
        cols = first
        while int(cols["rows"]):
            yield _typed.record_batch(cols, names, read, fields)
            cols = tailer._read_typed_columns(batch_size, read)

    return pa.RecordBatchReader.from_batches(_typed.arrow_schema(names, fields), batches())


def tailer_stream(tailer: Any, requested_schema: object | None = None) -> object:
    """``Tailer.__arrow_c_stream__``: `tailer_reader`'s stream."""
    return tailer_reader(tailer).__arrow_c_stream__(requested_schema)
