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
    if not cols.key and not cols.headers:
        return payloads
    keys = batch.column("key").to_pylist() if cols.key else [None] * len(payloads)
    if not cols.headers:
        return [
            {"payload": p} if k is None else {"payload": p, "key": k}
            for p, k in zip(payloads, keys, strict=True)
        ]
    headers = batch.column("headers").to_pylist()
    out: list[Any] = []
    for p, k, h in zip(payloads, keys, headers, strict=True):
        rec: dict[str, Any] = {"payload": p}
        if k is not None:
            rec["key"] = k
        if h:
            rec["headers"] = dict(h)
        out.append(rec)
    return out


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
    q = None
    rows = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if q is None:
                q = _queue(path, file_size, queue_options)
                app = q.appender()
            items = _items(batch, cols)
            for i in range(0, len(items), APPEND_CHUNK):
                app.append_batch(items[i : i + APPEND_CHUNK])
            rows += batch.num_rows
        if q is not None:
            app.flush()
    finally:
        if q is not None:
            q.close()
    return rows


def record_from(obj: Any) -> Any:
    """One item for ``append_batch`` from what a user's partition function yields.

    Accepts a payload (bytes-like or str), a ``(payload, key)`` or ``(payload, key, headers)``
    tuple, a mapping or a pyspark ``Row`` with ``payload`` and optional ``key``/``headers``.
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
        payload = obj["payload"]
        rec: dict[str, Any] = {
            "payload": payload.encode("utf-8") if isinstance(payload, str) else payload
        }
        if obj.get("key") is not None:
            rec["key"] = obj["key"]
        if obj.get("headers"):
            rec["headers"] = dict(obj["headers"])
        return rec
    if isinstance(obj, tuple) and 2 <= len(obj) <= 3:
        payload = obj[0].encode("utf-8") if isinstance(obj[0], str) else obj[0]
        rec = {"payload": payload}
        if obj[1] is not None:
            rec["key"] = obj[1]
        if len(obj) == 3 and obj[2]:
            rec["headers"] = dict(obj[2])
        return rec
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
    q = None
    rows = 0
    buf: list[Any] = []
    try:
        for obj in records:
            buf.append(record_from(obj))
            if len(buf) >= APPEND_CHUNK:
                if q is None:
                    q = _queue(path, file_size, queue_options)
                    app = q.appender()
                app.append_batch(buf)
                rows += len(buf)
                buf = []
        if buf:
            if q is None:
                q = _queue(path, file_size, queue_options)
                app = q.appender()
            app.append_batch(buf)
            rows += len(buf)
        if q is not None:
            app.flush()
    finally:
        if q is not None:
            q.close()
    return rows
