"""``litemq import-ledgerq DIR QUEUE``: a LedgerQ queue directory's entries into a
litemq queue (see :mod:`litemq.interop.ledgerq` and docs/FORMAT.md, "LedgerQ segments (read)").
"""

from __future__ import annotations

import argparse
from typing import IO, Any

from litemq.cli.common import _Failure, _ProgressCallback
from litemq.interop.ledgerq import LedgerQError, import_ledgerq, segments

__all__ = ["register"]


def register(sub: Any) -> None:
    """Adds ``import-ledgerq`` to the ``litemq`` parser's subparsers."""
    help = (
        "append the entries of a LedgerQ queue directory to a litemq queue "
        "(every CRC-32C checked; priority, expiry, headers and tombstones mapped)"
    )
    p: argparse.ArgumentParser = sub.add_parser("import-ledgerq", help=help, description=help)
    p.add_argument("path", metavar="DIR", help="the LedgerQ directory (its *.log segments)")
    p.add_argument("queue", metavar="QUEUE", help="the litemq queue (created if missing)")
    p.set_defaults(run=cmd_import_ledgerq)


def cmd_import_ledgerq(args: argparse.Namespace, out: IO[str]) -> int:
    """Imports with a progress bar (segment bytes); prints every skip and index problem."""
    try:
        found = segments(args.path)
    except OSError as e:
        raise _Failure(f"cannot read {args.path}: {e.strerror or e}") from e
    if not found:
        raise _Failure(f"{args.path}: no LedgerQ segment (*.log named by a 20-digit offset)")
    report = _ProgressCallback("importing")
    try:
        result = import_ledgerq(args.path, args.queue, progress=report)
    except LedgerQError as e:
        raise _Failure(str(e)) from e
    report.done()
    for s in result.skipped:
        out.write(f"SKIPPED {s}\n")
    for s in result.index_problems:
        out.write(f"INDEX {s}\n")
    line = (
        f"OK: {result.imported:,} messages and {result.tombstones:,} tombstones imported from "
        f"{result.entries:,} entries in {result.segments} segments of {args.path} into {args.queue}"
    )
    if result.skipped:
        line += f"; {len(result.skipped)} skipped (above)"
    out.write(line + "\n")
    return 0
