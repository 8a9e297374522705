"""``litemq`` subcommands for LiteMQ broker stores (see :mod:`litemq.interop.litemq_store`).

litemq read-commitlog FILE [--format text|json]
                                      every record of one commit-log file, as LiteMQ's
                                      read_commitlog tool prints them, then totals
litemq import-litemq STORE QUEUE      append a LiteMQ store's records to a litemq queue
litemq export-litemq QUEUE STORE [--file-size SIZE] [--naming index|offset] [--topic T]
                                      write a litemq queue as a new LiteMQ store
"""

from __future__ import annotations

import argparse
import base64
import json
import mmap
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from litemq.cli.common import _Failure, _ProgressCallback
from litemq.interop.litemq_store import (
    DEFAULT_CONSUME_QUEUE_FILE_SIZE,
    DEFAULT_FILE_SIZE,
    LiteMQRecord,
    SkipReport,
    _Mapped,
    _walk,
    _zero_until,
    export_queue,
    import_store,
)
from litemq.options import parse_size

__all__ = ["register"]

_BODY_SHOWN = 200  # bytes of the body the text output shows, as read_commitlog does


def register(sub: Any) -> None:
    """Adds the LiteMQ store subcommands to the ``litemq`` parser's subparsers."""

    def command(name: str, help: str, path: str, path_help: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
        p.add_argument("path", metavar=path, help=path_help)
        return p

    p = command(
        "read-commitlog",
        "print every record of a LiteMQ commit-log file, as LiteMQ's read_commitlog does",
        "FILE",
        "a commit-log file (data/broker/commitlog/00000000000000000000)",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text for people (default), json (one object) for programs",
    )
    p.set_defaults(run=cmd_read_commitlog)

    p = command(
        "import-litemq",
        "append the records of a LiteMQ store to a litemq queue (topic and tags as the messages' own, every other field in litemq.* headers)",
        "STORE",
        "the LiteMQ store (data/broker, holding commitlog/)",
    )
    p.add_argument("queue", metavar="QUEUE", help="the litemq queue (created if missing)")
    p.set_defaults(run=cmd_import)

    p = command(
        "export-litemq",
        "write a litemq queue as a new LiteMQ store (imported records come back byte for byte)",
        "QUEUE",
        "the litemq queue",
    )
    p.add_argument("store", metavar="STORE", help="the LiteMQ store to create")
    p.add_argument(
        "--file-size",
        type=_size_arg,
        default=DEFAULT_FILE_SIZE,
        metavar="SIZE",
        help="commit-log file size (default 1GiB, LiteMQ's)",
    )
    p.add_argument(
        "--consume-queue-file-size",
        type=_size_arg,
        default=DEFAULT_CONSUME_QUEUE_FILE_SIZE,
        metavar="SIZE",
        help="consume queue file size (default 600000000, LiteMQ's)",
    )
    p.add_argument(
        "--naming",
        choices=("index", "offset"),
        default="index",
        help="name files by their index (LiteMQ, default) or by their first offset (RocketMQ)",
    )
    p.add_argument(
        "--topic",
        default="litemq",
        help="the topic of messages that were not imported from LiteMQ (default litemq)",
    )
    p.set_defaults(run=cmd_export)


def _size_arg(text: str) -> int:
    try:
        return parse_size(text, "size")
    except (ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _rfc3339(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):
        return "out of range"


def _go_list(items: tuple[str, ...]) -> str:
    return "[" + " ".join(items) + "]"


def _go_map(pairs: tuple[tuple[str, str], ...]) -> str:
    # Go's fmt prints a map with its keys sorted.
    d = dict(pairs)
    return "map[" + " ".join(f"{k}:{d[k]}" for k in sorted(d)) + "]"


def _shown(text: str) -> str:
    """A string as the terminal can take it (bytes that were not UTF-8 become U+FFFD)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _print_text(n: int, pos: int, size: int, r: LiteMQRecord, out: IO[str]) -> None:
    w = out.write
    w(f"\n=== Message #{n} (offset: {pos}, size: {size} bytes) ===\n")
    w(f"MessageID:     {_shown(r.message_id)}\n")
    w(f"Topic:         {_shown(r.topic)}\n")
    w(f"QueueID:       {r.queue_id}\n")
    w(f"QueueOffset:   {r.queue_offset}\n")
    w(f"CommitLogOffset: {r.commit_log_offset}\n")
    w(f"StoreSize:     {r.store_size}\n")
    if r.tags:
        w(f"Tags:          {_shown(_go_list(r.tags))}\n")
    if r.keys:
        w(f"Keys:          {_shown(_go_list(r.keys))}\n")
    if r.properties:
        w(f"Properties:    {_shown(_go_map(r.properties))}\n")
    w(f"MessageType:   {r.message_type}\n")
    w(f"Priority:      {r.priority}\n")
    w(f"Reliability:   {r.reliability}\n")
    if r.delay_time > 0:
        w(f"DelayTime:     {r.delay_time} (deliver at: {_rfc3339(r.delay_time)})\n")
    if r.transaction_id:
        w(f"TransactionID: {_shown(r.transaction_id)}\n")
    if r.sharding_key:
        w(f"ShardingKey:   {_shown(r.sharding_key)}\n")
    if r.broadcast == 1:
        w("Broadcast:     true\n")
    w(f"BornTimestamp: {r.born_timestamp} ({_rfc3339(r.born_timestamp)})\n")
    if r.born_host:
        w(f"BornHost:      {_shown(r.born_host)}\n")
    if r.store_host:
        w(f"StoreHost:     {_shown(r.store_host)}\n")
    if r.store_timestamp > 0:
        w(f"StoreTimestamp: {r.store_timestamp} ({_rfc3339(r.store_timestamp)})\n")
    if r.body:
        text = r.body[:_BODY_SHOWN].decode("utf-8", "replace")
        more = "..." if len(r.body) > _BODY_SHOWN else ""
        w(f"Body:          {text}{more} ({len(r.body)} bytes)\n")
    else:
        w("Body:          (empty)\n")


def _json_record(n: int, pos: int, size: int, r: LiteMQRecord) -> dict[str, Any]:
    try:
        body, body_encoding = r.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, body_encoding = base64.b64encode(r.body).decode("ascii"), "base64"
    return {
        "message": n,
        "offset": pos,
        "size": size,
        "message_id": _shown(r.message_id),
        "topic": _shown(r.topic),
        "tags": [_shown(t) for t in r.tags],
        "keys": [_shown(k) for k in r.keys],
        "properties": [[_shown(k), _shown(v)] for k, v in r.properties],
        "body": body,
        "body_encoding": body_encoding,
        "message_type": r.message_type,
        "priority": r.priority,
        "reliability": r.reliability,
        "delay_time": r.delay_time,
        "transaction_id": _shown(r.transaction_id),
        "status": r.status,
        "sharding_key": _shown(r.sharding_key),
        "broadcast": r.broadcast,
        "born_timestamp": r.born_timestamp,
        "born_host": _shown(r.born_host),
        "store_host": _shown(r.store_host),
        "queue_id": r.queue_id,
        "queue_offset": r.queue_offset,
        "commit_log_offset": r.commit_log_offset,
        "store_size": r.store_size,
        "store_timestamp": r.store_timestamp,
        "consume_start_time": r.consume_start_time,
        "consume_end_time": r.consume_end_time,
        "consume_count": r.consume_count,
        "trailing": r.trailing.hex(),
    }


def cmd_read_commitlog(args: argparse.Namespace, out: IO[str]) -> int:
    """Prints one commit-log file's records (offsets are in the file), what it skipped, totals.

    The text is read_commitlog's (times in UTC, where the Go tool uses the local zone); what
    it could not read is shown where it lies, as ``=== Skipped N bytes (offset: X) ===``
    with its reason and first bytes, and reading goes on. JSON is one object:
    ``file``, ``size``, ``messages`` (every field), ``skipped``, ``end_of_records``,
    ``total_messages``, ``total_size``.
    """
    path = Path(args.path)
    if path.is_dir():
        raise _Failure(f"{path}: a directory; give one commit-log file (commitlog/000…000)")
    if not path.exists():
        raise _Failure(f"{path}: no such file")
    m = _Mapped(str(path))
    try:
        data = m.data
        size = len(data)
        skipped: list[SkipReport] = []
        shown = 0
        messages: list[dict[str, Any]] = []
        total = 0
        end = 0  # where the last record or skipped region ends
        text = args.format == "text"
        if text:
            out.write(f"=== CommitLog File Reader ===\nFile: {args.path}\nSize: {size} bytes\n\n")
        n = 0
        for pos, rsize, record in _walk(str(path), data, skipped):
            if text:
                shown = _print_skips(skipped, shown, data, out)
            n += 1
            total += rsize
            end = pos + rsize
            if text:
                _print_text(n, pos, rsize, record, out)
            else:
                messages.append(_json_record(n, pos, rsize, record))
        if text:
            _print_skips(skipped, shown, data, out)
        for s in skipped:
            end = max(end, s.offset + s.length)
        tail = end < size and _zero_until(data, end) == size
    finally:
        m.close()
    if text:
        if tail:
            out.write(f"\nReached end of valid messages at offset {end}\n")
        out.write(f"\n=== Summary ===\nTotal messages: {n}\nTotal size: {total} bytes\n")
        if skipped:
            lost = sum(s.length for s in skipped)
            out.write(f"Skipped: {lost} bytes in {len(skipped)} places\n")
    else:
        report = {
            "file": args.path,
            "size": size,
            "messages": messages,
            "skipped": [
                {"offset": s.offset, "length": s.length, "reason": s.reason} for s in skipped
            ],
            "end_of_records": end,
            "total_messages": n,
            "total_size": total,
        }
        out.write(json.dumps(report, ensure_ascii=False) + "\n")
    return 0


def _print_skips(
    skipped: list[SkipReport], shown: int, data: bytes | mmap.mmap, out: IO[str]
) -> int:
    for s in skipped[shown:]:
        raw = data[s.offset : s.offset + min(100, s.length)]
        out.write(
            f"\n=== Skipped {s.length} bytes (offset: {s.offset}) ===\nReason: {s.reason}\n"
            f"Raw data (first 100 bytes): {raw.hex()}\n"
        )
    return len(skipped)


def cmd_import(args: argparse.Namespace, out: IO[str]) -> int:
    """Appends the store's records to the queue, with a progress bar (commit-log bytes)."""
    report = _ProgressCallback("importing")
    result = import_store(args.path, args.queue, progress=report)
    report.done()
    for s in result.skipped:
        out.write(f"SKIPPED {s}\n")
    line = f"OK: {result.records:,} records imported from {args.path} into {args.queue}"
    if result.first_seq is not None:
        line += f" (seq {result.first_seq:,}..{result.first_seq + result.records - 1:,})"
    if result.skipped:
        lost = sum(s.length for s in result.skipped)
        line += f"; {lost:,} bytes in {len(result.skipped)} places could not be read (above)"
    out.write(line + "\n")
    return 0


def cmd_export(args: argparse.Namespace, out: IO[str]) -> int:
    """Writes the queue as a new LiteMQ store, with a progress bar (messages)."""
    if not Path(args.path).exists():
        raise _Failure(f"{args.path}: no such queue (the directory does not exist)")
    report = _ProgressCallback("exporting")
    count = export_queue(
        args.path,
        args.store,
        topic=args.topic,
        progress=report,
        file_size=args.file_size,
        consume_queue_file_size=args.consume_queue_file_size,
        naming=args.naming,
    )
    report.done()
    files = len(os.listdir(Path(args.store) / "commitlog")) if count else 0
    out.write(f"OK: {count:,} records written to {args.store} ({files} commit-log files)\n")
    sys.stdout.flush()
    return 0
