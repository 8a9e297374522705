"""``litemq archive QUEUE DEST``: copy a queue's sealed files to shared storage.

    litemq archive PATH DEST [--delete-local] [--json] [--progress | --no-progress]

DEST is a path or a URI ``pyarrow.fs`` understands (``file://``, ``s3://``, ``gs://``,
``hdfs://``). Prints a summary (``--json``: one JSON object); a progress bar goes to stderr
when it is a terminal (``--progress`` forces it). Registered by ``litemq.cli``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import IO

__all__ = ["cmd_archive", "register"]


def cmd_archive(args: argparse.Namespace, out: IO[str]) -> int:
    from litemq.archive import _main_progress, archive_queue
    from litemq.cli_common import _key_file

    report = archive_queue(
        args.path,
        args.dest,
        delete_local=args.delete_local,
        progress=_main_progress(args.progress),
        encryption_key_file=_key_file(),
    )
    if args.json:
        out.write(json.dumps(report.to_json()) + "\n")
        return 0
    span = (
        "nothing archived yet"
        if report.first_seq is None
        else f"sequences {report.first_seq}..{report.end_seq}"
    )
    line = (
        f"archived {report.queue} to {report.dest}: {len(report.copied)} files copied "
        f"({report.bytes_copied:,} bytes), {report.skipped} already archived"
    )
    if report.redone:
        line += f", {len(report.redone)} partial copies redone"
    if report.adopted:
        line += f", {len(report.adopted)} earlier copies checked and kept"
    out.write(f"{line}; the archive holds {span}\n")
    for end, start in report.gaps:
        out.write(f"warning: sequences {end}..{start} are missing from the archive\n")
    if args.delete_local:
        out.write(f"deleted {len(report.deleted_local)} local data files")
        if report.protected_files:
            out.write(
                f"; kept {report.protected_files} for named tailers that have not consumed them"
            )
        out.write("\n")
    return 0


def register(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Adds ``archive`` to the ``litemq`` command (``command`` makes a subparser with PATH)."""
    p = command(
        "archive",
        "copy sealed data files and their indexes to DEST (a path or s3://, gs://, hdfs:// URI), "
        "check every copy, write the manifest last",
    )
    p.add_argument("dest", metavar="DEST", help="archive location: a path or a pyarrow.fs URI")
    p.add_argument(
        "--delete-local",
        action="store_true",
        help="then delete local data files that are archived and consumed by every named "
        "tailer (never the file being written)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    p.set_defaults(run=cmd_archive)
