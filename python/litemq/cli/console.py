"""``litemq append PATH``: write messages from a shell (the ``kafka-console-producer``
or ``XADD`` of litemq). Registered by `litemq.cli`.

    litemq append PATH [--input lines|json|raw] [--key K] [--topic T] [--header NAME=VALUE]...
                       [--compress] [--file-size SIZE] [--format text|json]

``--input lines`` (the default) appends each line of standard input as one message (without
its newline); ``json`` reads JSON Lines, one object per message, in the shape ``dump --format
json`` prints (``payload`` with ``payload_encoding``, ``key`` with ``key_encoding``,
``headers``, ``topic``, ``tags``, ``priority``, ``expires_at``, ``tombstone``), so ``dump
--format json`` piped into ``append --input json`` copies messages; ``raw`` appends all of
standard input as one message. Each message is appended as it is read; a line that is not
valid stops the command with status 1, naming the line and what was appended before it.

On a typed queue (``Queue(path, schema=...)``) a message is an event: with ``lines`` each
line is a JSON object of the schema's fields, with ``json`` the ``value`` of the object
(the event as ``dump --format json`` prints it: times and dates in ISO 8601, decimals as
strings, bytes as ``{"base64": ...}`` or text); ``raw`` is refused (``SchemaError``).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from collections.abc import Callable, Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import IO, TYPE_CHECKING, Any

from litemq.cli.common import _Failure, _key_file

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["cmd_append", "register"]


def _decode(value: Any, encoding: Any, what: str) -> str | bytes:
    """A JSON value and its ``*_encoding`` as `dump --format json` writes them: text (str),
    utf-8 (bytes given as text) or base64 (bytes)."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, not {type(value).__name__}")
    if encoding in (None, "text"):
        return value
    if encoding == "utf-8":
        return value.encode("utf-8")
    if encoding == "base64":
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            raise ValueError(f"{what} is not valid base64") from None
    raise ValueError(f"{what}: unknown encoding {encoding!r} (text, utf-8 or base64)")


def _header(name: str, value: Any) -> str | bytes:
    if isinstance(value, dict) and len(value) == 1:
        [(encoding, text)] = value.items()
        return _decode(text, encoding, f"header {name!r}")
    return _decode(value, None, f"header {name!r}")


def _json_object(line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj


def _field_value(value: Any, t: pa.DataType, name: str) -> Any:
    """A JSON value of a typed queue's field of type `t`, as ``dump --format json`` prints
    it (times and dates in ISO 8601, decimals as strings, bytes as ``{"base64": ...}`` or
    text), as the field's events take it; anything else as it is (the queue checks it)."""
    import pyarrow as pa

    if not isinstance(value, str | dict):
        return value
    if pa.types.is_timestamp(t) and isinstance(value, str):
        return datetime.fromisoformat(value)
    if pa.types.is_date(t) and isinstance(value, str):
        return date.fromisoformat(value)
    if pa.types.is_decimal(t) and isinstance(value, str):
        return Decimal(value)
    if pa.types.is_binary(t):
        data = _header(name, value)
        return data.encode("utf-8") if isinstance(data, str) else data
    return value


def _typed_event(obj: Any, schema: pa.Schema) -> dict[str, Any]:
    """The event of a typed queue that JSON object `obj` gives."""
    if not isinstance(obj, dict):
        raise ValueError("an event of a typed queue is a JSON object of its fields")
    types = {f.name: f.type for f in schema}
    return {k: _field_value(v, types[k], k) if k in types else v for k, v in obj.items()}


def _from_json(line: str, schema: pa.Schema | None = None) -> dict[str, Any]:
    """The ``append`` arguments of one JSON line (``tombstone`` is taken out by the caller):
    on a typed queue (`schema`), its ``value`` is the event."""
    obj = _json_object(line)
    call: dict[str, Any]
    if schema is not None and not obj.get("tombstone"):
        if "value" not in obj:
            raise ValueError(
                'a typed queue takes events: no "value" (dump --format json prints it)'
            )
        call = {"payload": _typed_event(obj["value"], schema)}
    else:
        payload = obj.get("payload", "")
        encoding = obj.get("payload_encoding", "utf-8")
        data = _decode(payload, "utf-8" if encoding == "text" else encoding, "payload")
        call = {"payload": data}
    if obj.get("key") is not None:
        call["key"] = _decode(obj["key"], obj.get("key_encoding"), "key")
    headers = obj.get("headers") or {}
    if not isinstance(headers, dict):
        raise ValueError("headers must be an object")
    if headers:
        call["headers"] = {str(k): _header(k, v) for k, v in headers.items()}
    for name in ("topic", "priority", "expires_at"):
        if obj.get(name) is not None:
            call[name] = obj[name]
    if obj.get("queue_id"):
        call["queue_id"] = obj["queue_id"]
    if obj.get("tags"):
        call["tags"] = obj["tags"]
    call["tombstone"] = bool(obj.get("tombstone"))
    return call


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    for line in stream:
        yield line[:-1] if line.endswith(b"\n") else line


def _header_arg(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--header takes NAME=VALUE, got {text!r}")
    return name, value


def cmd_append(args: argparse.Namespace, out: IO[str]) -> int:
    from litemq.queue import Queue

    common: dict[str, Any] = {}
    if args.key is not None:
        common["key"] = args.key
    if args.header:
        common["headers"] = dict(args.header)
    if args.topic is not None:
        common["topic"] = args.topic
    if args.compress:
        common["compress"] = True
    stdin: IO[bytes] = sys.stdin.buffer
    first: int | None = None
    count = 0
    with Queue(args.path, file_size=args.file_size, encryption_key_file=_key_file()) as q:
        app = q.appender()

        def appended(seq: int) -> None:
            nonlocal first, count
            first = seq if first is None else first
            count += 1

        schema = q.schema
        if args.input == "raw":
            appended(app.append(stdin.read(), **common))
        for number, line in enumerate(_lines(stdin) if args.input != "raw" else (), 1):
            if args.input == "lines" and schema is None:
                appended(app.append(line, **common))
                continue
            if not line.strip():
                continue
            try:
                if args.input == "lines":  # a typed queue's event, a JSON object
                    event = _typed_event(_json_object(line.decode("utf-8")), schema)
                    appended(app.append(event, **common))
                    continue
                call = {**common, **_from_json(line.decode("utf-8"), schema)}
                if call.pop("tombstone"):
                    if call.get("key") is None:
                        raise ValueError("a tombstone needs a key")
                    appended(app.delete(call["key"]))
                else:
                    appended(app.append(call.pop("payload"), **call))
            except (ValueError, TypeError, UnicodeDecodeError, ArithmeticError) as e:
                app.flush()
                done = (
                    "nothing appended before it"
                    if first is None
                    else f"{count} message{'s' if count != 1 else ''} appended before it "
                    f"(sequences {first}..{first + count})"
                )
                raise _Failure(f"{args.path}: standard input line {number}: {e}; {done}") from None
        app.flush()
    end = first + count if first is not None else None
    if args.format == "json":
        out.write(json.dumps({"appended": count, "first_seq": first, "end_seq": end}) + "\n")
    elif first is None:
        out.write("OK: nothing appended (standard input was empty)\n")
    else:
        plural = "message" if count == 1 else "messages"
        out.write(f"OK: {count} {plural} appended, sequences {first}..{end}\n")
    return 0


def register(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Adds ``append`` to the ``litemq`` command (`command` makes a subcommand that takes
    the queue's PATH)."""
    p = command(
        "append",
        "append messages read from standard input (opens the queue as its writer; "
        "creates it if missing)",
    )
    p.add_argument(
        "--input",
        choices=("lines", "json", "raw"),
        default="lines",
        help="lines: one message per line (default); json: JSON Lines as dump --format json "
        "prints them; raw: all of standard input as one message",
    )
    p.add_argument("--key", metavar="KEY", help="the key of every message (lines, raw)")
    p.add_argument("--topic", metavar="TOPIC", help="the topic of every message")
    p.add_argument(
        "--header",
        action="append",
        type=_header_arg,
        metavar="NAME=VALUE",
        help="a header on every message (repeat for more)",
    )
    p.add_argument(
        "--compress", action="store_true", help="compress payloads (with the queue's codec)"
    )
    p.add_argument(
        "--file-size",
        metavar="SIZE",
        help="size of the data files the writer creates (e.g. 64MiB); remembered in the "
        "queue's metadata like Queue(file_size=)",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="the summary: text for people (default), json (one object) for programs",
    )
    p.set_defaults(run=cmd_append)
