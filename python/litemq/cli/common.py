"""What the ``litemq`` command and its sub-command modules share: the
user-phrased error, opening a queue read-only, the progress bar, and printing
a message (``dump``, ``tail``, ``get``, ``where``).

Its own module so that `litemq.cli.main` and the modules it registers
(`litemq.cli.index`, `litemq.cli.litemq_store`, `litemq.cli.ledgerq`, ...) all
import it, and none imports another back.
"""

from __future__ import annotations

import base64
import json
import os
import string
import sys
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from litemq._litemq import Message
from litemq.queue import Queue

__all__ = [
    "KEY_FILE_ENV",
    "_Failure",
    "_Progress",
    "_ProgressCallback",
    "_iso",
    "_json_record",
    "_key_file",
    "_open",
    "_print_message",
    "_show_bytes",
]


class _Failure(Exception):
    """An error already phrased for the user."""


KEY_FILE_ENV = "LITEMQ_ENCRYPTION_KEY_FILE"


def _key_file() -> str | None:
    """The encryption key file the commands open queues with: the file named by
    ``LITEMQ_ENCRYPTION_KEY_FILE`` (32 bytes or 64 hex digits), if set. An environment
    variable rather than an option, so that no key path lands in shell history or ``ps``."""
    return os.environ.get(KEY_FILE_ENV) or None


def _open(path: str) -> Queue:
    if not Path(path).exists():
        raise _Failure(f"{path}: no such queue (the directory does not exist)")
    return Queue(path, read_only=True, encryption_key_file=_key_file())


class _Progress:
    """A one-line progress bar on stderr, drawn only when it is a terminal."""

    def __init__(self, total: int, label: str = "verifying") -> None:
        self.label = label
        self.total = max(total, 1)
        self.enabled = sys.stderr.isatty()
        self.last = -1

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        pct = min(100, done * 100 // self.total)
        if pct != self.last:
            self.last = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\r{self.label} [{bar:<25}] {pct:3d}% ({done:,}/{self.total:,})")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


class _ProgressCallback:
    """A ``progress(done, total)`` callback for the engine's long calls: draws a
    `_Progress` bar, made at the first call (when the total is known)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar: _Progress | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = _Progress(total, self.label)
        self.bar.update(done)

    def done(self) -> None:
        if self.bar is not None:
            self.bar.done()


_PRINTABLE = set(string.printable.encode()) - set(b"\t\n\r\x0b\x0c")


def _iso(micros: int) -> str:
    """ISO 8601 UTC with microseconds: 2026-11-21T23:45:12.123456Z."""
    dt = datetime.fromtimestamp(micros // 1_000_000, tz=UTC).replace(microsecond=micros % 1_000_000)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _show_bytes(data: bytes, limit: int | None = 200) -> str:
    """Text when printable UTF-8, else a bytes literal; long values cut."""
    shown = data if limit is None else data[:limit]
    try:
        text = shown.decode("utf-8")
        ok = text.isprintable()
    except UnicodeDecodeError:
        ok = False
    out = text if ok else repr(shown)
    if limit is not None and len(data) > limit:
        out += f"... ({len(data)} bytes)"
    return out


def _encoded(value: bytes | str) -> tuple[str, str]:
    """(text, encoding) for JSON: str as is, bytes as UTF-8 when valid, else base64."""
    if isinstance(value, str):
        return value, "text"
    try:
        return value.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(value).decode("ascii"), "base64"


def _json_value(v: Any) -> Any:
    """A value of a typed event in JSON: times and dates in ISO 8601, decimals as
    strings (exact), bytes as ``{"base64": ...}``, the rest as they are."""
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, bytes):
        return {"base64": base64.b64encode(v).decode("ascii")}
    return v


def _event(msg: Message) -> dict[str, Any] | None:
    """The event of a typed queue's message as JSON values (None when untyped)."""
    value = msg.value
    return None if value is None else {k: _json_value(v) for k, v in value.items()}


def _json_record(msg: Message) -> dict[str, Any]:
    payload, payload_encoding = _encoded(msg.payload)
    record: dict[str, Any] = {
        "seq": msg.seq,
        "timestamp": msg.timestamp,
        "time": _iso(msg.timestamp),
        "payload": payload,
        "payload_encoding": payload_encoding,
        "key": None,
        "key_encoding": None,
        "headers": {},
        "topic": msg.topic,
        "queue_id": msg.queue_id,
        "tags": list(msg.tags),
        "priority": msg.priority,
        "expires_at": msg.expires_at,
        "compression": msg.compression,
        "tombstone": msg.tombstone,
    }
    event = _event(msg)
    if event is not None:
        record["value"] = event
    if msg.key is not None:
        record["key"], record["key_encoding"] = _encoded(msg.key)
    for name, value in msg.headers.items():
        text, encoding = _encoded(value)
        record["headers"][name] = text if encoding == "text" else {encoding: text}
    return record


def _hexdump(data: bytes, out: IO[str]) -> None:
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if b in _PRINTABLE else "." for b in chunk)
        out.write(f"  {at:08x}  {hexes:<47}  |{text}|\n")


def _print_message(msg: Message, fmt: str, out: IO[str]) -> None:
    if fmt == "json":
        out.write(json.dumps(_json_record(msg), ensure_ascii=False) + "\n")
        return
    parts = [f"{msg.seq:>10}", _iso(msg.timestamp)]
    if msg.key is not None:
        key = msg.key if isinstance(msg.key, str) else _show_bytes(msg.key, 80)
        parts.append(f"key={key!r}" if isinstance(msg.key, str) else f"key={key}")
    headers = msg.headers
    if headers:
        shown = ", ".join(
            f"{k}={v!r}" if isinstance(v, str) else f"{k}={_show_bytes(v, 40)}"
            for k, v in headers.items()
        )
        parts.append("{" + shown + "}")
    if msg.topic is not None:
        parts.append(f"topic={msg.topic!r}" + (f"/{msg.queue_id}" if msg.queue_id else ""))
    if msg.tags:
        parts.append("tags=" + ",".join(msg.tags))
    if msg.priority:
        parts.append(f"priority={msg.priority}")
    if msg.expires_at is not None:
        parts.append(f"expires={_iso(msg.expires_at)}")
    if msg.compression is not None:
        parts.append(f"compressed={msg.compression}")
    if msg.tombstone:
        parts.append("tombstone")
    if fmt == "hex":
        parts.append(f"{len(msg.payload)} bytes")
        out.write("  ".join(parts) + "\n")
        _hexdump(msg.payload, out)
        return
    event = _event(msg)
    shown = _show_bytes(msg.payload) if event is None else json.dumps(event, ensure_ascii=False)
    parts.append(shown)
    out.write("  ".join(parts) + "\n")
