"""The ``litemq`` command's parser and its built-in sub-commands (the commands
are listed in `litemq.cli`); the others register from their modules beside it.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, Literal, NoReturn

from litemq import _litemq
from litemq._litemq import LiteMQError, Message
from litemq.cli import archive as cli_archive
from litemq.cli import compact, console, index, ledgerq, litemq_store
from litemq.cli import wq as cli_wq
from litemq.cli.common import (
    KEY_FILE_ENV,
    _Failure,
    _iso,
    _key_file,
    _open,
    _print_message,
    _Progress,
)
from litemq.options import parse_size
from litemq.retention import Retention, parse_age

__all__ = ["main"]


def _time_arg(text: str) -> int:
    """µs since the epoch from an int or an ISO 8601 time (UTC if no zone)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: use ISO 8601 (2026-11-21T10:00:00Z) or µs since the epoch"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - datetime(1970, 1, 1, tzinfo=UTC)) // _ONE_US


_ONE_US = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)


def _seq_arg(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a sequence number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"sequence numbers are >= 0, got {n}")
    return n


def _count_arg(text: str) -> int:
    n = _seq_arg(text)
    return n


def _allocated(p: Path) -> int:
    """Bytes of disk a file holds (its blocks), not its apparent length."""
    return p.stat().st_blocks * 512


def _dataset_queues(root: Path) -> list[Path]:
    """The queues under ``root`` (a dataset, as Spark writes one: a directory of
    queues), depth first and sorted, skipping hidden and ``_`` entries as readers do."""
    found: list[Path] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return found
    for e in entries:
        if e.name.startswith(("_", ".")) or not e.is_dir():
            continue
        p = Path(e.path)
        if (p / "metadata.json").is_file():
            found.append(p)
        else:
            found.extend(_dataset_queues(p))
    return found


def _info_dataset(base: Path, queues: list[Path], args: argparse.Namespace, out: IO[str]) -> int:
    """`info` of a directory of queues: one line per queue."""
    rows: list[dict[str, Any]] = []
    for path in queues:
        with _open(str(path)) as q:
            rows.append(
                {
                    "name": str(path.relative_to(base)),
                    "path": str(path.resolve()),
                    "messages": len(q),
                    "first_seq": q.first_seq,
                    "next_seq": q.next_seq,
                }
            )
    info: dict[str, Any] = {
        "path": str(base.resolve()),
        "dataset": True,
        "messages": sum(r["messages"] for r in rows),
        "queues": rows,
    }
    if args.format == "json":
        out.write(json.dumps(info) + "\n")
        return 0
    out.write(f"path      {info['path']}\n")
    out.write(f"dataset   {len(rows)} queues, {info['messages']:,} messages\n")
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        out.write(
            f"  {r['name']:<{width}}  {r['messages']:>12,} messages  "
            f"sequences [{r['first_seq']}, {r['next_seq']})\n"
        )
    return 0


def cmd_info(args: argparse.Namespace, out: IO[str]) -> int:
    base = Path(args.path)
    if base.is_dir() and not (base / "metadata.json").exists():
        queues = _dataset_queues(base)
        if queues:
            return _info_dataset(base, queues, args, out)
    with _open(args.path) as q:
        first, nxt = q.first_seq, q.next_seq
        files = q.data_files()
        index_files = sorted(p for p in base.rglob("*.index") if p.is_file())
        first_time = last_time = None
        if nxt > first:
            # Tailers step over compaction's holes; `get` of one raises.
            oldest = next(iter(q.tailer(start=first)), None)
            newest = next(iter(q.tailer(start="end", direction="backward")), None)
            first_time = None if oldest is None else oldest.timestamp
            last_time = None if newest is None else newest.timestamp
        info: dict[str, Any] = {
            "path": str(base.resolve()),
            # Holes left by key compaction are sequences without a message.
            "messages": len(q),
            "first_seq": first,
            "next_seq": nxt,
            "first_time": None if first_time is None else _iso(first_time),
            "last_time": None if last_time is None else _iso(last_time),
            "writer_pid": _litemq.writer_pid(base),
            "data_files": [
                {
                    "file": str(Path(f.path).relative_to(base)),
                    "bytes": f.bytes_written,
                    "allocated": f.bytes_allocated,
                    "size": f.size,
                }
                for f in files
            ],
            "index_files": len(index_files),
            "bytes_written": sum(f.bytes_written for f in files),
            "disk_bytes": sum(_allocated(p) for p in base.rglob("*") if p.is_file()),
            "options": _options(base),
        }
        schema_json = q._schema_json()
        if schema_json is not None:
            info["schema"] = json.loads(schema_json)
    if args.format == "json":
        out.write(json.dumps(info) + "\n")
        return 0
    writer = info["writer_pid"]
    rows = [
        ("path", info["path"]),
        ("messages", f"{info['messages']:,}"),
        ("sequences", f"{first}..{nxt}" if nxt > first else f"none (next is {nxt})"),
        ("time range", f"{info['first_time']} .. {info['last_time']}" if first_time else "-"),
        ("writer", f"pid {writer}" if writer is not None else "none (not locked)"),
        ("data files", str(len(files))),
        ("index files", str(len(index_files))),
        (
            "disk usage",
            f"{_human(info['disk_bytes'])} allocated, {_human(info['bytes_written'])} of data",
        ),
    ]
    if info["options"]:
        rows.append(("options", " ".join(f"{k}={v}" for k, v in info["options"].items())))
    versions = (info.get("schema") or {}).get("versions") or []
    for v in reversed(versions):
        rows.append(("schema" if v is versions[-1] else "", _schema_line(v)))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out.write(f"{key:<{width}}  {value}\n")
    for f in info["data_files"]:
        out.write(
            f"  {f['file']}  {_human(f['bytes'])} written, {_human(f['allocated'])} allocated\n"
        )
    return 0


def _schema_line(version: dict[str, Any]) -> str:
    """One schema version as `info` prints it: ``version N: name type, ...``,
    ``?`` after a nullable field's type, its former names in parentheses."""
    parts = []
    for f in version["fields"]:
        text = f"{f['name']} {f['type']}{'?' if f['nullable'] else ''}"
        if f.get("aliases"):
            text += f" (was {', '.join(f['aliases'])})"
        parts.append(text)
    return f"version {version['version']}: {', '.join(parts)}"


def _options(base: Path) -> dict[str, Any]:
    """The options the queue was created with (metadata.json), as `info` shows them."""
    try:
        meta = json.loads((base / "metadata.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in (meta.get("options") or {}).items() if v is not None}


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _limited(messages: Iterable[Message], limit: int | None) -> Iterable[Message]:
    if limit is None:
        yield from messages
        return
    for i, msg in enumerate(messages):
        if i >= limit:
            return
        yield msg


def _selector(args: argparse.Namespace) -> dict[str, Any]:
    """The ``tailer`` arguments of ``--topic`` and ``--tag``."""
    return {"topic": args.topic, "tags": args.tag or None}


def _read_past_damage(t: _litemq.Tailer, skip: bool) -> Iterable[Message]:
    """The tailer's messages; a damaged frame raises, or with `skip` is reported on
    stderr (file, offset, sequence) and read past."""
    while True:
        try:
            msg = t.read_next()
        except _litemq.CorruptedError as e:
            if not skip:
                raise _Failure(f"{e} (--skip-damaged reads past damaged data)") from None
            at = f" (seq {e.seq})" if e.seq is not None else ""
            sys.stderr.write(
                f"litemq: skipped damaged data in {e.file} at offset {e.offset}{at}: {e.reason}\n"
            )
            if not t.skip_damaged():
                raise _Failure(f"the rest of {e.file} cannot be walked past the damage") from None
            continue
        if msg is None:
            return
        yield msg


def cmd_dump(args: argparse.Namespace, out: IO[str]) -> int:
    with _open(args.path) as q:
        start = q.first_seq if args.start is None else max(args.start, q.first_seq)
        with q.tailer(start=start, **_selector(args)) as t:
            for msg in _limited(_read_past_damage(t, args.skip_damaged), args.limit):
                _print_message(msg, args.format, out)
    return 0


def cmd_tail(args: argparse.Namespace, out: IO[str]) -> int:
    if args.name is not None:
        return _tail_named(args, out)
    if args.since is not None:
        return _tail_since(args, out)
    if args.lines is None:
        args.lines = 10
    with _open(args.path) as q:
        selector = _selector(args)
        # Without a topic the last N are the last N sequences; with one,
        # the topic is read and its last N kept.
        plain = selector["topic"] is None and selector["tags"] is None
        start = max(q.first_seq, q.next_seq - args.lines) if plain else None
        with q.tailer(start=start, **selector) as t:
            for msg in collections.deque(t, maxlen=args.lines):
                _print_message(msg, args.format, out)
            out.flush()
            if args.follow:
                for msg in t.follow():
                    _print_message(msg, args.format, out)
                    out.flush()
    return 0


def _print_all(t: _litemq.Tailer, args: argparse.Namespace, out: IO[str]) -> None:
    """Every message `t` reads (at most ``-n``), then with ``-f`` each new one."""
    for msg in _limited(t, args.lines):
        _print_message(msg, args.format, out)
    out.flush()
    if args.follow:
        for msg in t.follow():
            _print_message(msg, args.format, out)
            out.flush()


def _tail_since(args: argparse.Namespace, out: IO[str]) -> int:
    """``tail --since T``: every message written at or after T (at most ``-n``)."""
    with _open(args.path) as q, q.tailer(**_selector(args)) as t:
        t.seek_time(args.since)
        _print_all(t, args, out)
    return 0


def _tail_named(args: argparse.Namespace, out: IO[str]) -> int:
    """``tail --name NAME``: a named tailer's messages from its committed position,
    each committed once printed (and flushed), so the next run starts after it."""
    with _open(args.path) as q, q.tailer(name=args.name, **_selector(args)) as c:
        if args.since is not None:
            c.seek_time(args.since)
        printed = 0
        for msg in c if args.follow and args.lines is None else _limited(c, args.lines):
            _print_message(msg, args.format, out)
            out.flush()
            c.commit()
            printed += 1
        if args.follow and (args.lines is None or printed < args.lines):
            for msg in c.follow():
                _print_message(msg, args.format, out)
                out.flush()
                c.commit()
    return 0


def cmd_topics(args: argparse.Namespace, out: IO[str]) -> int:
    with _open(args.path) as q:
        infos = q.topics()
    if args.format == "json":
        for t in infos:
            out.write(json.dumps(dataclasses.asdict(t), ensure_ascii=False) + "\n")
        return 0
    if not infos:
        out.write("no topics\n")
        return 0
    width = max(len(t.topic or "(tags only)") for t in infos)
    out.write(
        f"{'topic':<{width}}  queue  {'messages':>10}  {'first':>10}  {'last':>10}  "
        f"{'offsets':>17}  last written\n"
    )
    for t in infos:
        name = t.topic or "(tags only)"
        # Half-open, as every range the CLI prints.
        offsets = f"{t.first_offset}..{t.last_offset + 1}"
        out.write(
            f"{name:<{width}}  {t.queue_id:>5}  {t.count:>10}  {t.first_seq:>10}  "
            f"{t.last_seq:>10}  {offsets:>17}  {_iso(t.last_timestamp)}\n"
        )
    return 0


def cmd_get(args: argparse.Namespace, out: IO[str]) -> int:
    with _open(args.path) as q:
        _print_message(q.get(args.seq), args.format, out)
    return 0


def cmd_find(args: argparse.Namespace, out: IO[str]) -> int:
    key: str | bytes = args.key
    if args.hex_key:
        try:
            key = bytes.fromhex(args.key)
        except ValueError:
            raise _Failure(f"--hex-key: {args.key!r} is not hexadecimal") from None
    with _open(args.path) as q:
        for msg in q.find(key, start=args.start, end=args.end, limit=args.limit):
            _print_message(msg, args.format, out)
    return 0


def cmd_verify(args: argparse.Namespace, out: IO[str]) -> int:
    """Checks every frame up to the tail seen when it starts.

    Beside a live writer, messages appended meanwhile are not checked (the
    summary counts them); files retention deletes meanwhile are counted too.
    """
    bad = 0
    checked = 0
    deleted = 0
    compacted = 0  # sequences in holes key compaction left (their frames are checked)
    with _open(args.path) as q:
        first, end = q.first_seq, q.next_seq
        progress = _Progress(end - first)
        with q.tailer() as t:
            while t.next_seq < end:
                at = t.next_seq
                try:
                    msg = t.read_next()
                except _litemq.CorruptedError as e:
                    bad += 1
                    progress.enabled and sys.stderr.write("\n")
                    out.write(
                        f"BAD seq={e.seq if e.seq is not None else at} "
                        f"file={e.file} offset={e.offset}: {e.reason}\n"
                    )
                    if not t.skip_damaged():
                        out.write(f"stopped: the rest of {e.file} cannot be walked\n")
                        break
                    continue
                except _litemq.NotFoundError as e:
                    # Retention deleted the files holding `at` meanwhile.
                    if e.first is None or e.first <= at:
                        raise
                    resume = min(e.first, end)
                    deleted += resume - at
                    if resume >= end:
                        break
                    t.seek(resume)
                    continue
                if msg is None:
                    break
                compacted += min(msg.seq, end) - at
                if msg.seq >= end:
                    break
                checked += 1
                if checked % 65536 == 0:
                    progress.update(checked)
        progress.update(checked)
        progress.done()
        later = max(q.next_seq - end, 0)
        bad_indexes = index.check_indexes(q, out)
    unreachable = (end - first) - checked - bad - deleted - compacted
    status = "OK" if bad == 0 and bad_indexes == 0 and unreachable <= 0 else "FAILED"
    line = f"{status}: {checked:,} frames checked, {bad} bad"
    if bad_indexes:
        line += f", {bad_indexes} damaged index files"
    if unreachable > 0:
        line += f", {unreachable:,} unreachable"
    if compacted:
        line += f", {compacted:,} compacted away (holes)"
    if deleted:
        line += f", {deleted:,} deleted by retention meanwhile"
    if later:
        line += f" (up to seq {end - 1:,}; {later:,} appended since, not checked)"
    out.write(line + "\n")
    return 0 if status == "OK" else 1


def cmd_reindex(args: argparse.Namespace, out: IO[str]) -> int:
    if not Path(args.path).exists():
        raise _Failure(f"{args.path}: no such queue (the directory does not exist)")
    with _open(args.path) as q:
        first, nxt, messages = q.first_seq, q.next_seq, len(q)
    # The queue holds first..next (retention deleted what came before; key
    # compaction's holes are sequences without a message).
    total = nxt - first
    progress = _Progress(total, "reindexing")
    keys = _litemq.reindex(
        args.path, lambda seq: progress.update(seq - first), encryption_key_file=_key_file()
    )
    progress.update(total)
    progress.done()
    out.write(f"OK: {keys:,} keys indexed from {messages:,} messages\n")
    return 0


def _consumer_action(args: argparse.Namespace, out: IO[str]) -> int:
    """``consumers PATH reset NAME --to ...`` and ``consumers PATH delete NAME``."""
    try:
        return _consumer_action_on(args, out)
    except _litemq.LockedError as e:
        raise _Failure(
            f"{args.path}: named tailer {args.name!r} is open ({e}); close it, then "
            f"{args.action} it"
        ) from None


def _consumer_action_on(args: argparse.Namespace, out: IO[str]) -> int:
    with _open(args.path) as q:
        known = {c.name: c for c in q.consumers()}
        if args.name not in known:
            raise _Failure(f"{args.path}: no named tailer {args.name!r}")
        if args.action == "delete":
            q.remove_consumer(args.name)
            out.write(f"{args.name}: deleted\n")
            return 0
        c = known[args.name]
        to = args.to.strip()
        start: int | Literal["start", "end"]
        if to in ("earliest", "latest"):
            start = "start" if to == "earliest" else "end"
        elif to.isdigit():
            start = int(to)
        else:
            try:
                start = q.seq_for_time(_time_arg(to))
            except argparse.ArgumentTypeError as e:
                raise _Failure(f"--to: {e}; or a sequence, earliest or latest") from None
        # Starts the name over at `start`, keeping its topic filter.
        t = q.tailer(
            start,
            name=args.name,
            reset=True,
            topic=c.topic,
            queue_id=c.queue_id,
            tags=c.tags or None,
        )
        seq = t.committed_seq
        t.close()
    out.write(f"{args.name}: next_seq {seq}\n")
    return 0


def _consumers_usage(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments of ``consumers``, if anything."""
    if args.action is None:
        if args.name is not None or args.to is not None:
            return "consumers: NAME and --to go with reset or delete"
        return None
    if args.name is None:
        return f"consumers {args.action}: NAME is required"
    if args.action == "reset" and args.to is None:
        return "consumers reset: --to SEQ|TIME|earliest|latest is required"
    if args.action == "delete" and args.to is not None:
        return "consumers delete: --to goes with reset"
    return None


def cmd_consumers(args: argparse.Namespace, out: IO[str]) -> int:
    if args.action is not None:
        return _consumer_action(args, out)
    with _open(args.path) as q:
        consumers = q.consumers()
        first, nxt = q.first_seq, q.next_seq
    if args.format == "json":
        for c in consumers:
            record = {
                "name": c.name,
                "next_seq": c.next_seq,
                "lag_messages": c.lag_messages,
                "lag_bytes": c.lag_bytes,
                "deleted_unread": max(first - c.next_seq, 0),
                "committed_at": c.committed_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "created_at": c.created_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return 0
    if not consumers:
        out.write(f"no named tailers (queue next_seq {nxt})\n")
        return 0
    rows = [("NAME", "NEXT_SEQ", "LAG", "LAG_BYTES", "COMMITTED", "CREATED")]
    for c in consumers:
        rows.append(
            (
                c.name,
                str(c.next_seq),
                f"{c.lag_messages:,}",
                _human(c.lag_bytes),
                c.committed_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                c.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(f"{v:<{w}}" for v, w in zip(r, widths, strict=True)).rstrip() + "\n")
    for c in consumers:
        if c.next_seq < first:
            out.write(
                f"note: {c.name}: retention deleted {first - c.next_seq:,} messages it had "
                f"not read ({c.next_seq}..{first}); it raises NotFoundError until it seeks\n"
            )
    return 0


def _age_arg(text: str) -> timedelta:
    """A duration such as 7d, 12h, 30m, 45s, 2w (a bare number is seconds)."""
    try:
        return parse_age(text, "--max-age")
    except (ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_AGE = re.compile(r"\d+(\.\d+)?\s*[a-zA-Z]+")


def _when_arg(option: str) -> Callable[[str], int]:
    """An option's type for a time: µs since the epoch from an age before now (10m, 2h,
    7d, as ``retain --max-age`` takes), an ISO 8601 time or µs since the epoch."""

    def parse(text: str) -> int:
        stripped = text.strip()
        if not _AGE.fullmatch(stripped):
            return _time_arg(text)
        try:
            age = parse_age(stripped, option)
        except (ValueError, TypeError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return (datetime.now(tz=UTC) - datetime(1970, 1, 1, tzinfo=UTC) - age) // _ONE_US

    parse.__name__ = "time"
    return parse


def _size_arg(text: str) -> int:
    try:
        return parse_size(text, "--max-bytes")
    except (ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _files_arg(text: str) -> int:
    n = _seq_arg(text)
    if n < 1:
        raise argparse.ArgumentTypeError(
            "--max-files must be at least 1 (the file being written stays)"
        )
    return n


def cmd_retain(args: argparse.Namespace, out: IO[str]) -> int:
    policy = Retention(
        max_age=args.max_age,
        max_bytes=args.max_bytes,
        max_files=args.max_files,
        protect_unconsumed=args.protect_unconsumed,
    )
    with _open(args.path) as q:
        report = q.apply_retention(policy)
    if args.format == "json":
        record = {
            "deleted_files": report.deleted_files,
            "deleted_key_index_files": report.deleted_key_index_files,
            "deleted_bytes": report.deleted_bytes,
            "first_seq": report.first_seq,
            "protected_files": report.protected_files,
        }
        out.write(json.dumps(record) + "\n")
        return 0
    for f in report.deleted_files + report.deleted_key_index_files:
        out.write(f"deleted {f}\n")
    line = (
        f"OK: {len(report.deleted_files)} data files deleted ({_human(report.deleted_bytes)}), "
        f"first_seq now {report.first_seq}"
    )
    if report.protected_files:
        line += f"; {report.protected_files} kept for named tailers that have not consumed them"
    out.write(line + "\n")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="litemq",
        description="Look into litemq queues, and append to them. Commands that only read "
        "(info, dump, tail, get, find, where, verify, ...) open the queue read-only and run "
        "beside a live writer; append, reindex, index add/drop and the imports open it as "
        "its writer (they fail with LockedError while another writer runs). Ranges are printed half-open: 0..12 is 0 to 11.",
    )
    parser.add_argument("--version", action="version", version=f"litemq {_litemq.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("path", metavar="PATH", help="the queue's directory")
        return p

    def with_format(p: argparse.ArgumentParser, choices: Sequence[str]) -> None:
        p.add_argument(
            "--format",
            choices=choices,
            default="text",
            help="text for people (default), json (one object per line) for programs",
        )

    p = command("info", "files, sizes, sequence and time range, writer pid, schema")
    with_format(p, ("text", "json"))
    p.set_defaults(run=cmd_info)

    def with_topic(p: argparse.ArgumentParser) -> None:
        p.add_argument("--topic", metavar="TOPIC", help="only this topic's messages")
        p.add_argument(
            "--tag",
            action="append",
            metavar="TAG",
            help="only messages with this tag (repeat: any of them)",
        )

    p = command("dump", "print messages in sequence order")
    p.add_argument("--from", dest="start", type=_seq_arg, metavar="SEQ", help="first sequence")
    p.add_argument("--limit", type=_count_arg, metavar="N", help="at most N messages")
    p.add_argument(
        "--skip-damaged",
        action="store_true",
        help="read past damaged frames, naming each on stderr (default: stop with an error)",
    )
    with_topic(p)
    with_format(p, ("text", "json", "hex"))
    p.set_defaults(run=cmd_dump)

    p = command("tail", "print the last messages; with -f, keep printing new ones")
    p.add_argument("-f", "--follow", action="store_true", help="wait for new messages")
    p.add_argument(
        "-n",
        "--lines",
        type=_count_arg,
        metavar="N",
        help="the last N (default 10); with --since or --name, at most N",
    )
    p.add_argument(
        "--since",
        type=_when_arg("--since"),
        metavar="T",
        help="every message written at or after T: an age (10m, 2h, 7d) or a time",
    )
    p.add_argument(
        "--name",
        metavar="NAME",
        help="read as the named tailer NAME from its committed position, committing each "
        "message once printed",
    )
    with_topic(p)
    with_format(p, ("text", "json", "hex"))
    p.set_defaults(run=cmd_tail)

    p = command("topics", "list topic streams: messages, first and last sequence, topic offsets")
    with_format(p, ("text", "json"))
    p.set_defaults(run=cmd_topics)

    p = command("verify", "check the CRC of every frame; exit 1 if any is bad")
    p.set_defaults(run=cmd_verify)

    p = command("reindex", "rebuild the key index from the data files (not beside a writer)")
    p.set_defaults(run=cmd_reindex)

    p = command("get", "print one message by sequence")
    p.add_argument("seq", type=_seq_arg, metavar="SEQ")
    with_format(p, ("text", "json", "hex"))
    p.set_defaults(run=cmd_get)

    p = command("find", "print the messages with a key, from the key index")
    p.add_argument("key", metavar="KEY", help="the key (text; see --hex-key)")
    p.add_argument("--hex-key", action="store_true", help="KEY is hexadecimal bytes")
    p.add_argument(
        "--start",
        type=_when_arg("--start"),
        metavar="T",
        help="written at or after T: a time, or an age before now (1h, 7d)",
    )
    p.add_argument(
        "--end",
        type=_when_arg("--end"),
        metavar="T",
        help="written before T: a time, or an age before now (1h, 7d)",
    )
    p.add_argument("--limit", type=_count_arg, metavar="N", help="at most N messages")
    with_format(p, ("text", "json", "hex"))
    p.set_defaults(run=cmd_find)

    p = command(
        "consumers",
        "list named tailers (committed position, lag, last commit); reset or delete one",
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("reset", "delete"),
        metavar="reset|delete",
        help="reset NAME --to ...: move a named tailer (not open anywhere); delete NAME",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the named tailer")
    p.add_argument(
        "--to",
        metavar="SEQ|TIME|earliest|latest",
        help="with reset: a sequence, an ISO 8601 time (the first message at or after it), "
        "earliest (the oldest message kept) or latest (after the newest)",
    )
    with_format(p, ("text", "json"))
    p.set_defaults(run=cmd_consumers, usage_problem=_consumers_usage)

    p = command(
        "retain",
        "delete old data files now, per the limits given (safe beside a live writer)",
    )
    p.add_argument("--max-age", type=_age_arg, metavar="AGE", help="e.g. 7d, 12h, 30m, 45s")
    p.add_argument("--max-bytes", type=_size_arg, metavar="SIZE", help="e.g. 10G, 512MiB")
    p.add_argument("--max-files", type=_files_arg, metavar="N", help="keep at most N data files")
    p.add_argument(
        "--protect-unconsumed",
        action="store_true",
        help="never delete a file a named tailer has not consumed",
    )
    with_format(p, ("text", "json"))
    p.set_defaults(run=cmd_retain, needs_limit=True)

    cli_wq.register(command)
    console.register(command)  # append
    litemq_store.register(sub)  # read-commitlog, import-litemq, export-litemq
    ledgerq.register(sub)  # import-ledgerq
    index.register(sub)  # index add/drop/list, where
    compact.register(sub)  # compact
    cli_archive.register(command, sub)
    return parser


def _encryption_failure(e: _litemq.EncryptionError, path: str) -> str:
    """An `EncryptionError` phrased for the command line: the key comes from the
    environment variable, not from an ``encryption_key=`` argument."""
    if isinstance(e, _litemq.WrongKeyError):
        return f"{path}: the key in {KEY_FILE_ENV} is not this queue's (wrong encryption key)"
    if _key_file() is None:
        return (
            f"{path}: the queue is encrypted: set {KEY_FILE_ENV} to a file holding its key "
            "(32 bytes or 64 hex digits)"
        )
    if "created without encryption" in str(e):
        return (
            f"{path}: the queue is not encrypted (encryption is chosen when a queue is "
            f"created): unset {KEY_FILE_ENV}"
        )
    return f"{path}: {e}"


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"litemq: error: {message}\n")
    raise SystemExit(1)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the ``litemq`` command; returns the exit status.

    >>> main(["get", "/tmp/orders", "0"])
             0  2026-11-21T23:45:12.123456Z  order 1
    0
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "needs_limit", False) and (
        args.max_age is None and args.max_bytes is None and args.max_files is None
    ):
        parser.error("retain needs at least one of --max-age, --max-bytes, --max-files")
    usage_problem = getattr(args, "usage_problem", None)
    if usage_problem is not None and (problem := usage_problem(args)):
        parser.error(problem)
    out = sys.stdout
    try:
        status: int = args.run(args, out)
        out.flush()
        return status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `litemq dump ... | head`: the reader left; that is not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except _Failure as e:
        _fail(str(e))
    except _litemq.EncryptionError as e:
        _fail(_encryption_failure(e, str(args.path)))
    except (LiteMQError, OSError, ValueError, TypeError) as e:
        _fail(f"{args.path}: {e}" if str(args.path) not in str(e) else str(e))


if __name__ == "__main__":
    sys.exit(main())
