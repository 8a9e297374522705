"""Appending Spark rows to a staging queue, on an executor. No pyspark import."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Columns", "record_from", "write_arrow", "write_records"]

#: Columns the sink reads; other columns a litemq DataFrame has are assigned by the engine
#: on append and are ignored when such a DataFrame is written again.
IGNORED_COLUMNS = ("seq", "timestamp", "queue")
#: Rows passed to ``append_batch`` at a time.
APPEND_CHUNK = 65_536


@dataclass(frozen=True)
class Columns:
    """Which optional columns the written DataFrame has."""

    key: bool = False
    headers: bool = False
    topic: bool = False
    queue_id: bool = False
    tags: bool = False


def _queue(path: str, file_size: int, queue_options: Mapping[str, Any]) -> Any:
    import litemq

    os.makedirs(os.path.dirname(path), exist_ok=True)
    return litemq.Queue(path, file_size=file_size, **dict(queue_options))


def _payloads(col: pa.Array) -> list[Any]:
    import pyarrow as pa

    if col.null_count:
        raise ValueError("litemq: column 'payload' has a null value; every message needs a payload")
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary() if pa.types.is_string(col.type) else pa.large_binary())
    payloads: list[Any] = col.to_pylist()
    return payloads


def _items(batch: pa.RecordBatch, cols: Columns) -> list[Any]:
    payloads = _payloads(batch.column("payload"))
    if cols.topic or cols.queue_id or cols.tags:
        return _topic_items(batch, cols, payloads)
    if not cols.key and not cols.headers:
        return payloads
    keys = batch.column("key").to_pylist() if cols.key else [None] * len(payloads)
    if not cols.headers:
        return [
            {"payload": p} if k is None else {"payload": p, "key": k}
            for p, k in zip(payloads, keys, strict=True)
        ]
    headers = batch.column("headers").to_pylist()
    return [_record(p, k, h) for p, k, h in zip(payloads, keys, headers, strict=True)]


def _topic_items(batch: pa.RecordBatch, cols: Columns, payloads: list[Any]) -> list[Any]:
    """``append_batch`` items with a topic, queue id and tags (a null topic or queue id and
    a null or empty tag list are left out)."""
    n = len(payloads)

    def column(name: str, on: bool) -> list[Any]:
        return batch.column(name).to_pylist() if on else [None] * n

    keys, headers = column("key", cols.key), column("headers", cols.headers)
    topics, queue_ids, tags = (
        column("topic", cols.topic),
        column("queue_id", cols.queue_id),
        column("tags", cols.tags),
    )
    items = []
    for i in range(n):
        rec = _record(payloads[i], keys[i], headers[i])
        if topics[i] is not None:
            rec["topic"] = topics[i]
        if queue_ids[i]:  # 0 (the default stream) or null: left out
            rec["queue_id"] = queue_ids[i]
        if tags[i]:
            rec["tags"] = tags[i]
        items.append(rec)
    return items


def _record(payload: Any, key: Any, headers: Any) -> dict[str, Any]:
    """An ``append_batch`` item; a str payload is encoded, empty key and headers left out."""
    rec: dict[str, Any] = {
        "payload": payload.encode("utf-8") if isinstance(payload, str) else payload
    }
    if key is not None:
        rec["key"] = key
    if headers:
        rec["headers"] = dict(headers)
    return rec


def _append_chunks(
    path: str, chunks: Iterable[list[Any]], file_size: int, queue_options: Mapping[str, Any]
) -> int:
    """Appends every chunk to a new queue at ``path``, created at the first non-empty one;
    flushes and closes it before returning the number of rows (no queue for zero rows), so a
    commit message is only sent for durable data."""
    q = None
    rows = 0
    try:
        for chunk in chunks:
            if not chunk:
                continue
            if q is None:
                q = _queue(path, file_size, queue_options)
                app = q.appender()
            app.append_batch(chunk)
            rows += len(chunk)
        if q is not None:
            app.flush()
    finally:
        if q is not None:
            q.close()
    return rows


def write_arrow(
    path: str,
    batches: Iterable[pa.RecordBatch],
    cols: Columns,
    *,
    file_size: int,
    queue_options: Mapping[str, Any] = {},
) -> int:
    """Append every row of ``batches`` to a new queue at ``path`` (created on the first row).

    Returns the number of rows; no queue is created for zero rows. The queue is flushed and
    closed before returning, so a commit message is only sent for durable data.
    """

    def chunks() -> Iterable[list[Any]]:
        for batch in batches:
            items = _items(batch, cols) if batch.num_rows else []
            for i in range(0, len(items), APPEND_CHUNK):
                yield items[i : i + APPEND_CHUNK]

    return _append_chunks(path, chunks(), file_size, queue_options)


def record_from(obj: Any) -> Any:
    """One item for ``append_batch`` from what a user's partition function yields.

    Accepts a payload (bytes-like or str), a ``(payload, key)`` or ``(payload, key, headers)``
    tuple, a mapping or a pyspark ``Row`` with ``payload`` and optional ``key``, ``headers``,
    ``topic``, ``queue_id`` and ``tags``.
    """
    if isinstance(obj, str):
        return obj.encode("utf-8")
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return obj
    as_dict = getattr(obj, "asDict", None)  # pyspark Row (a tuple subclass): check first
    if callable(as_dict):
        obj = as_dict()
    if isinstance(obj, Mapping):
        if "payload" not in obj:
            raise ValueError(f"litemq: record has no 'payload' field: {sorted(obj)}")
        rec = _record(obj["payload"], obj.get("key"), obj.get("headers"))
        for name in ("topic", "queue_id", "tags"):
            if obj.get(name):
                rec[name] = obj[name]
        return rec
    if isinstance(obj, tuple) and 2 <= len(obj) <= 3:
        return _record(obj[0], obj[1], obj[2] if len(obj) == 3 else None)
    raise TypeError(
        "litemq: cannot write a record of type "
        f"{type(obj).__name__}: expected bytes, str, (payload, key[, headers]), a dict or a Row"
    )


def write_records(
    path: str,
    records: Iterable[Any],
    *,
    file_size: int,
    queue_options: Mapping[str, Any] = {},
) -> int:
    """Like :func:`write_arrow` for Python records (see :func:`record_from`)."""

    def chunks() -> Iterable[list[Any]]:
        buf: list[Any] = []
        for obj in records:
            buf.append(record_from(obj))
            if len(buf) >= APPEND_CHUNK:
                yield buf
                buf = []
        yield buf

    return _append_chunks(path, chunks(), file_size, queue_options)
