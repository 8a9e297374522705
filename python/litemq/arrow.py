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
``payload``           ``binary`` (``large_binary`` when
                      several engine reads are joined)
====================  =================================  ==========================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["SCHEMA_FIELDS", "empty_batch", "record_batch", "schema"]

SCHEMA_FIELDS = ("seq", "timestamp", "key", "headers", "payload")


def schema() -> pa.Schema:
    """The schema of `Queue.read_arrow` batches."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("seq", pa.int64(), nullable=False),
            pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("key", pa.binary()),
            pa.field("headers", pa.map_(pa.string(), pa.binary())),
            pa.field("payload", pa.binary(), nullable=False),
        ]
    )


def empty_batch() -> pa.RecordBatch:
    """A batch with the schema and no rows."""
    import pyarrow as pa

    return pa.RecordBatch.from_pylist([], schema=schema())


def _validity(buf: bytes, nulls: int) -> Any:
    import pyarrow as pa

    return None if nulls == 0 else pa.py_buffer(buf)


def record_batch(cols: dict[str, Any]) -> pa.RecordBatch:
    """Wraps one engine batch (the dict `_read_batch` returns)."""
    import pyarrow as pa

    rows = int(cols["rows"])
    buf = pa.py_buffer
    seq = pa.Array.from_buffers(pa.int64(), rows, [None, buf(cols["seq"])])
    timestamp = pa.Array.from_buffers(
        pa.timestamp("us", tz="UTC"), rows, [None, buf(cols["timestamp"])]
    )
    key = pa.Array.from_buffers(
        pa.binary(),
        rows,
        [
            _validity(cols["key_valid"], cols["key_nulls"]),
            buf(cols["key_offsets"]),
            buf(cols["key_data"]),
        ],
        null_count=cols["key_nulls"],
    )
    entries = (len(cols["header_name_offsets"]) // 4) - 1
    entries = max(entries, 0)
    names = pa.Array.from_buffers(
        pa.string(),
        entries,
        [None, buf(cols["header_name_offsets"]), buf(cols["header_name_data"])],
    )
    values = pa.Array.from_buffers(
        pa.binary(),
        entries,
        [None, buf(cols["header_value_offsets"]), buf(cols["header_value_data"])],
    )
    map_type = pa.map_(pa.string(), pa.binary())
    pairs = pa.StructArray.from_arrays(
        [names, values], fields=[map_type.key_field, map_type.item_field]
    )
    headers = pa.Array.from_buffers(
        map_type,
        rows,
        [
            _validity(cols["headers_valid"], cols["headers_nulls"]),
            buf(cols["headers_offsets"]),
        ],
        null_count=cols["headers_nulls"],
        children=[pairs],
    )
    payload = pa.Array.from_buffers(
        pa.binary(),
        rows,
        [None, buf(cols["payload_offsets"]), buf(cols["payload_data"])],
    )
    return pa.RecordBatch.from_arrays([seq, timestamp, key, headers, payload], schema=schema())


def concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """Joins batches into one, widening binary columns to large_binary so
    that more than 2 GiB of payload fits."""
    import pyarrow as pa

    if len(batches) == 1:
        return batches[0]
    wide = pa.schema(
        [f.with_type(pa.large_binary()) if f.name in ("key", "payload") else f for f in schema()]
    )
    table = pa.Table.from_batches([b.cast(wide) for b in batches], schema=wide)
    return table.combine_chunks().to_batches()[0]
