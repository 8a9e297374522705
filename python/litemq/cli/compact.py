"""``litemq compact``: key compaction from a shell.

litemq compact PATH [--grace 1d] [--format text|json]
                              keep only the latest message of every key in
                              the sealed files; tombstones go once older
                              than the grace period (progress bar on a
                              terminal; opens the queue read-only, so it
                              runs beside a live writer)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import IO, Any

from litemq.cli.common import _open, _ProgressCallback
from litemq.compaction import DEFAULT_GRACE

__all__ = ["register"]


def _cmd_compact(args: argparse.Namespace, out: IO[str]) -> int:
    step = _ProgressCallback("compacting")
    with _open(args.path) as q:
        report = q.compact(grace=args.grace, progress=step)
    step.done()
    if args.format == "json":
        d = dataclasses.asdict(report)
        d["bytes_reclaimed"] = report.bytes_reclaimed
        out.write(json.dumps(d) + "\n")
    else:
        out.write(
            f"OK: {report.files_rewritten} of {report.files_examined} sealed files rewritten, "
            f"{report.records_dropped} messages dropped "
            f"({report.tombstones_dropped} tombstones), "
            f"{report.bytes_before} -> {report.bytes_after} bytes on disk\n"
        )
    return 0


def register(sub: Any) -> None:
    """Adds ``compact`` to the ``litemq`` parser's subparsers."""
    p = sub.add_parser(
        "compact", help="keep only the latest message of every key (Kafka's compacted topics)"
    )
    p.add_argument("path", metavar="PATH", help="the queue's directory")
    p.add_argument(
        "--grace",
        default=DEFAULT_GRACE,
        metavar="AGE",
        help=f"keep a key's last tombstone this long (default {DEFAULT_GRACE}; e.g. 12h, 0)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=_cmd_compact)
