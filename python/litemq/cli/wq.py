"""``litemq wq PATH [stats] [NAME]``: work queues' figures (pending, in flight,
acked, dead-lettered, oldest age); ``litemq wq PATH pending NAME``: the jobs
in flight (Redis's XPENDING); ``litemq wq PATH replay NAME --from DLQ``: the
group's dead-lettered jobs appended back to the queue. Registered by
`litemq.cli`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Callable
from datetime import datetime
from typing import IO, Any

from litemq._litemq import Message, NotFoundError
from litemq.cli.common import _key_file
from litemq.queue import Queue
from litemq.work_queue import WorkQueueInfo

__all__ = ["register"]


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _record(w: WorkQueueInfo) -> dict[str, object]:
    return {
        "name": w.name,
        "pending": w.pending,
        "in_flight": w.in_flight,
        "acked": w.acked,
        "dead_lettered": w.dead_lettered,
        "expired": w.expired,
        "redelivered": w.redelivered,
        "gone": w.gone,
        "rewound": w.rewound,
        "low": w.low,
        "cursor": w.cursor,
        "window": w.window,
        "oldest_age": w.oldest_age,
        "created_at": w.created_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }


def cmd_wq(args: argparse.Namespace, out: IO[str]) -> int:
    if args.action == "pending":
        return _cmd_pending(args, out)
    if args.action == "replay":
        return _cmd_replay(args, out)
    with Queue(args.path, read_only=True, encryption_key_file=_key_file()) as q:
        groups = q.work_queues()
    if args.name is not None:
        groups = [w for w in groups if w.name == args.name]
        if not groups:
            raise SystemExit(f"litemq: error: no work queue named {args.name!r} in {args.path}")
    if args.format == "json":
        for w in groups:
            out.write(json.dumps(_record(w), ensure_ascii=False) + "\n")
        return 0
    if not groups:
        out.write("no work queues\n")
        return 0
    head = ("NAME", "PENDING", "IN_FLIGHT", "ACKED", "DEAD", "EXPIRED", "REDELIVERED", "OLDEST")
    rows = [head]
    for w in groups:
        rows.append(
            (
                w.name,
                f"{w.pending:,}",
                f"{w.in_flight:,}",
                f"{w.acked:,}",
                f"{w.dead_lettered:,}",
                f"{w.expired:,}",
                f"{w.redelivered:,}",
                _age(w.oldest_age),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        out.write("  ".join(f"{v:<{n}}" for v, n in zip(r, widths, strict=True)).rstrip() + "\n")
    return 0


def _need_name(args: argparse.Namespace) -> str:
    if args.name is None:
        raise SystemExit(f"litemq: error: wq {args.action} needs the work queue's NAME")
    name: str = args.name
    return name


def _time(t: datetime | None) -> str | None:
    return None if t is None else t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _cmd_pending(args: argparse.Namespace, out: IO[str]) -> int:
    name = _need_name(args)
    with Queue(args.path, read_only=True, encryption_key_file=_key_file()) as q:
        if name not in {w.name for w in q.work_queues()}:
            raise SystemExit(f"litemq: error: no work queue named {name!r} in {args.path}")
        jobs = q._work_queue_pending(name, args.limit)
    if args.format == "json":
        for j in jobs:
            rec = dict(j, deadline=_time(j["deadline"]))
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return 0
    if not jobs:
        out.write("no jobs in flight\n")
        return 0
    head = ("SEQ", "STATE", "DELIVERIES", "PID", "ALIVE", "DEADLINE", "OVERDUE")
    rows = [head]
    for j in jobs:
        alive = {True: "yes", False: "no", None: "-"}[j["alive"]]
        deadline = _time(j["deadline"]) or "-"
        rows.append(
            (
                str(j["seq"]),
                j["state"],
                str(j["deliveries"]),
                "-" if j["pid"] is None else str(j["pid"]),
                alive,
                deadline,
                "yes" if j["overdue"] else "no",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        out.write("  ".join(f"{v:<{n}}" for v, n in zip(r, widths, strict=True)).rstrip() + "\n")
    return 0


_DLQ_PREFIX = "litemq.dlq."


def _same_queue(recorded: str | bytes | None, path: str) -> bool:
    if not isinstance(recorded, str):
        return False
    try:
        return os.path.samefile(recorded, path)
    except OSError:
        return os.path.realpath(recorded) == os.path.realpath(path)


def _event_of(q: Queue, m: Message, args: argparse.Namespace) -> dict[str, Any]:
    """The event that replaying dead letter `m` appends to typed queue `q`: its value when
    the dead-letter queue is typed too, else (a dead-letter queue a work queue created holds
    the job's row as bytes) the event of the job it names (``litemq.dlq.seq``), once its
    row is checked to be the dead letter's. SystemExit when neither gives it."""
    value = m.value
    if value is not None:
        return value
    header = m.headers.get("litemq.dlq.seq")
    source = header if isinstance(header, str) else "?"
    original = None
    if source.isdigit():
        with contextlib.suppress(NotFoundError):  # retention or compaction took it
            original = q.get(int(source))
    if original is None or original.payload != m.payload or original.value is None:
        raise SystemExit(
            f"litemq: error: dead letter {m.seq} in {args.dead_letter} holds a row of typed "
            f"queue {args.path} as bytes, and job {source} is no longer there to read its "
            "event: nothing replayed"
        )
    return original.value


def _cmd_replay(args: argparse.Namespace, out: IO[str]) -> int:
    """Appends group NAME's dead letters (those whose ``litemq.dlq.group``
    header names it, and whose ``litemq.dlq.queue`` is this queue) back to
    the queue as new messages, and records how far it read in a consumer of
    the dead-letter queue (``litemq.replay.NAME``), so that running it again
    replays only what was dead-lettered since. A dead letter of NAME
    recorded for a path that is not this queue (a worker's relative path,
    another queue) stops the replay before anything is appended, unless
    ``--any-queue``. At least once: a crash between the appends and the
    commit replays those again next time. On a typed queue each dead letter
    is appended as its event (`_event_of`)."""
    name = _need_name(args)
    if args.dead_letter is None:
        raise SystemExit("litemq: error: wq replay needs --from DLQ, the dead-letter queue")
    key_file = _key_file()
    with Queue(args.path, read_only=True, encryption_key_file=key_file) as q:
        if name not in {w.name for w in q.work_queues()}:
            raise SystemExit(f"litemq: error: no work queue named {name!r} in {args.path}")
    replayed: list[dict[str, int]] = []
    with Queue(args.dead_letter, read_only=True, encryption_key_file=key_file) as dlq:
        reader = dlq.tailer(name=f"litemq.replay.{name}"[:128])
        todo = []
        elsewhere: dict[str, int] = {}
        for m in reader:
            h = m.headers
            if m.tombstone or h.get("litemq.dlq.group") != name:
                continue
            recorded = h.get("litemq.dlq.queue")
            if not args.any_queue and not _same_queue(recorded, args.path):
                where = recorded if isinstance(recorded, str) else repr(recorded)
                elsewhere[where] = elsewhere.get(where, 0) + 1
                continue
            todo.append(m)
        if elsewhere:
            listed = ", ".join(f"{n} for {p!r}" for p, n in sorted(elsewhere.items()))
            raise SystemExit(
                f"litemq: error: dead letters of {name!r} in {args.dead_letter} name another "
                f"queue than {args.path} ({listed}; a relative path is the worker's); nothing "
                "replayed; pass --any-queue to replay them here too"
            )
        with Queue(args.path, encryption_key_file=key_file) as q:
            payloads: list[Any] = [m.payload for m in todo]
            if q.schema is not None:
                payloads = [_event_of(q, m, args) for m in todo]
            app = q.appender()
            for m, payload in zip(todo, payloads, strict=True):
                h = m.headers
                headers = {k: v for k, v in h.items() if not k.startswith(_DLQ_PREFIX)}
                seq = app.append(
                    payload,
                    m.key,
                    headers or None,
                    topic=m.topic,
                    tags=m.tags or None,
                    priority=m.priority,
                )
                source = h.get("litemq.dlq.seq")
                replayed.append(
                    {
                        "dead_letter_seq": m.seq,
                        "source_seq": int(source) if isinstance(source, str) else -1,
                        "seq": seq,
                    }
                )
            app.flush()
        reader.commit(durable=True)
    if args.format == "json":
        for r in replayed:
            out.write(json.dumps(r) + "\n")
        return 0
    out.write(f"replayed {len(replayed)} jobs of {name!r} from {args.dead_letter}\n")
    for r in replayed:
        out.write(f"  dead letter {r['dead_letter_seq']} (job {r['source_seq']}) -> {r['seq']}\n")
    return 0


def register(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Adds ``wq`` to the ``litemq`` command (`command` makes a subcommand
    that takes the queue's PATH)."""
    p = command("wq", "work queues: pending, in flight, acked, dead-lettered, oldest age")
    p.add_argument(
        "action",
        nargs="?",
        choices=("stats", "pending", "replay"),
        default="stats",
        help="stats (the default): figures; pending: jobs in flight of NAME (holder, "
        "deliveries, deadline); replay: append NAME's dead letters (--from DLQ) back to the queue",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="one work queue (default: all)")
    p.add_argument("--limit", type=int, default=None, help="pending: list at most this many jobs")
    p.add_argument(
        "--from",
        dest="dead_letter",
        metavar="DLQ",
        default=None,
        help="replay: the dead-letter queue to replay from",
    )
    p.add_argument(
        "--any-queue",
        action="store_true",
        help="replay: also dead letters whose litemq.dlq.queue header names another path",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text for people (default), json (one object per line) for programs",
    )
    p.set_defaults(run=cmd_wq)
