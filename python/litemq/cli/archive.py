"""``litemq archive QUEUE DEST`` and ``litemq restore ARCHIVE QUEUE``.

    litemq archive PATH DEST [--delete-local] [--format text|json] [--progress | --no-progress]
                             [--follow [--every SECONDS]]
    litemq restore ARCHIVE QUEUE [--format text|json] [--progress | --no-progress]

DEST and ARCHIVE are a path or a URI ``pyarrow.fs`` understands (``file://``, ``s3://``,
``gs://``, ``hdfs://``). ``archive`` prints a summary (``--format json``: one JSON object;
``--json`` is its deprecated alias); with
``--follow`` it keeps running, archiving again every ``--every`` seconds (default 5), so each
file reaches the archive within that long of being sealed, until SIGINT or SIGTERM, when it
finishes the run in progress and exits 0. ``restore`` rebuilds a queue from an archive
(``litemq.restore``). A progress bar goes to stderr when it is a terminal (``--progress``
forces it). Registered by ``litemq.cli``.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from collections.abc import Callable
from typing import IO, Any

from litemq.cli.common import _key_file

__all__ = ["cmd_archive", "cmd_restore", "register"]

#: Seconds between two runs of ``archive --follow`` unless ``--every`` says otherwise.
FOLLOW_EVERY = 5.0


def cmd_archive(args: argparse.Namespace, out: IO[str]) -> int:
    if args.json:
        import sys

        sys.stderr.write("litemq: warning: --json is deprecated: use --format json\n")
    args.json = args.json or args.format == "json"
    if args.follow or args.every is not None:
        return _follow(args, out)
    report = _archive_once(args)
    if args.json:
        out.write(json.dumps(report.to_json()) + "\n")
        return 0
    _print_report(report, args, out)
    return 0


def _archive_once(args: argparse.Namespace, progress: bool | None = None) -> Any:
    from litemq.archive import _main_progress, archive_queue

    return archive_queue(
        args.path,
        args.dest,
        delete_local=args.delete_local,
        progress=_main_progress(args.progress if progress is None else progress),
        encryption_key_file=_key_file(),
    )


def _print_report(report: Any, args: argparse.Namespace, out: IO[str]) -> None:
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


def _follow(args: argparse.Namespace, out: IO[str]) -> int:
    """Archive again every ``--every`` seconds until SIGINT or SIGTERM; print a run only when
    it copied something (``--json``: one JSON object per such run), and a last line."""
    every = FOLLOW_EVERY if args.every is None else args.every
    stop = threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        stop.set()  # the run in progress finishes (its manifest is written), then we leave

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    runs = copied = 0
    report = None
    try:
        while not stop.is_set():
            report = _archive_once(args, progress=False if args.progress is None else None)
            runs += 1
            copied += len(report.copied)
            if report.copied or report.deleted_local:
                if args.json:
                    out.write(json.dumps(report.to_json()) + "\n")
                else:
                    _print_report(report, args, out)
                out.flush()
            stop.wait(every)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    held = (
        "nothing archived yet"
        if report is None or report.first_seq is None
        else f"sequences {report.first_seq}..{report.end_seq}"
    )
    line = f"stopped after {runs} runs: {copied} files copied; the archive holds {held}"
    if args.json:
        out.write(json.dumps({"stopped": True, "runs": runs, "copied": copied}) + "\n")
    else:
        out.write(line + "\n")
    return 0


def _seconds_arg(text: str) -> float:
    try:
        s = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not s > 0:
        raise argparse.ArgumentTypeError(f"--every must be more than 0 seconds, got {text}")
    return s


def cmd_restore(args: argparse.Namespace, out: IO[str]) -> int:
    from litemq.archive import _main_progress, key_from_file
    from litemq.archive_restore import restore

    report = restore(
        args.path,
        args.queue,
        encryption_key=key_from_file(_key_file()),
        progress=_main_progress(args.progress),
    )
    if args.format == "json":
        out.write(json.dumps(report.to_json()) + "\n")
        return 0
    out.write(
        f"restored {report.queue} from {report.archive}: {len(report.restored)} files "
        f"({report.bytes_restored:,} bytes), {report.skipped} kept from an earlier run; "
        f"sequences {report.first_seq}..{report.next_seq}, the writer appends at "
        f"{report.next_seq}\n"
    )
    for name, seq in sorted(report.consumers.items()):
        out.write(f"named tailer {name}: at {seq}\n")
    for name, low in sorted(report.work_queues.items()):
        out.write(f"work queue {name}: every job below {low} finished\n")
    return 0


def register(
    command: Callable[[str, str], argparse.ArgumentParser],
    sub: Any,
) -> None:
    """Adds ``archive`` and ``restore`` to the ``litemq`` command (``command`` makes a
    subparser with PATH, ``sub`` is the subparsers object)."""
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
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text for people (default), json (one object per run) for programs",
    )
    p.add_argument("--json", action="store_true", help="deprecated: --format json")
    p.add_argument(
        "--follow",
        action="store_true",
        help="keep running: archive again every --every seconds (each sealed file ships "
        "within that long), until SIGINT or SIGTERM",
    )
    p.add_argument(
        "--every",
        type=_seconds_arg,
        metavar="SECONDS",
        help=f"with --follow (implies it): seconds between runs (default {FOLLOW_EVERY:g})",
    )
    with_progress(p)
    p.set_defaults(run=cmd_archive)

    help = "rebuild a queue from an archive: every file checked, named tailers and work queues"
    r: argparse.ArgumentParser = sub.add_parser("restore", help=help, description=help)
    r.add_argument("path", metavar="ARCHIVE", help="the archive: a path or a pyarrow.fs URI")
    r.add_argument("queue", metavar="QUEUE", help="the new queue's directory (must not exist)")
    r.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text for people (default), json (one object) for programs",
    )
    with_progress(r)
    r.set_defaults(run=cmd_restore)


def with_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
