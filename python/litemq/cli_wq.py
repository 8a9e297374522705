"""``litemq wq PATH [stats] [NAME]``: work queues' figures (pending, in flight,
acked, dead-lettered, oldest age). Registered by `litemq.cli`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import IO

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
    from litemq.cli_common import _key_file

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


def register(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Adds ``wq`` to the ``litemq`` command (`command` makes a subcommand
    that takes the queue's PATH)."""
    p = command("wq", "work queues: pending, in flight, acked, dead-lettered, oldest age")
    p.add_argument(
        "action", nargs="?", choices=("stats",), default="stats", help="what to show (stats)"
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="one work queue (default: all)")
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text for people (default), json (one object per line) for programs",
    )
    p.set_defaults(run=cmd_wq)
