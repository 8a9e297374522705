"""Restore: an archive (``litemq archive``) rebuilt into a local queue that writes on.

:func:`restore` (``litemq restore ARCHIVE QUEUE``) fetches every file the archive's manifest
lists and checks it before it joins the queue: its listed length and CRC-64, and for a data
file every frame by its own CRC, its sequences counted to its footer, and its header and
footer against the manifest (``litemq._litemq._verify_sealed``, the engine's walk). Named
tailer positions and work-queue marks come back from the manifest where it holds them.

The queue is built in a hidden sibling directory (``.NAME.restoring``), each file written
under a temporary name and renamed once whole and fsynced, and the directory is renamed to
the queue's name last: a queue that opens is whole, and a restore that stops (killed, a
network error) is resumed by running it again, which keeps the files already restored
whose bytes are still the listed ones.

>>> report = restore("s3://bucket/journals/orders", "/data/orders")
>>> report.next_seq  # the restored queue's writer appends here
2418
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import IO, TYPE_CHECKING, Any

from litemq._litemq import CorruptedError, _crc64, _verify_sealed
from litemq.archive import (
    READ_CHUNK,
    Archive,
    ArchiveError,
    ArchiveFile,
    _check_listed,
    _join,
    _Progress,
    open_archive,
)

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["RestoreReport", "restore"]

#: Suffix of a file being restored; a queue's writer deletes leftover ``*.tmp`` files.
_PART = ".restore.tmp"
#: Kinds restored first to last: data files with their indexes, then the rest.
_ORDER = {"data": 0, "index": 0, "offsets": 0, "key_index": 1, "metadata": 2}


@dataclass
class RestoreReport:
    """What one ``restore`` run did.

    - ``archive``, ``queue``: where from, where to;
    - ``restored``: files fetched, checked and written in this run (paths relative to the
      archive and the queue);
    - ``bytes_restored``: their bytes;
    - ``skipped``: files an interrupted earlier run had restored, found whole and kept;
    - ``first_seq``, ``next_seq``: the restored queue's messages (``next_seq`` is where its
      writer appends next);
    - ``consumers``: named tailers restored, with their committed position;
    - ``work_queues``: work queues restored, with their ``low`` mark.
    """

    archive: str
    queue: str
    restored: list[str] = field(default_factory=list)
    bytes_restored: int = 0
    skipped: int = 0
    first_seq: int = 0
    next_seq: int = 0
    consumers: dict[str, int] = field(default_factory=dict)
    work_queues: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def restore(
    archive: str | os.PathLike[str],
    queue: str | os.PathLike[str],
    *,
    filesystem: pafs.FileSystem | None = None,
    encryption_key: bytes | None = None,
    progress: IO[str] | None = None,
    on_file: Callable[[str], None] | None = None,
) -> RestoreReport:
    """Rebuild the queue at ``queue`` (a local path) from the archive at ``archive`` (a
    path or URI, as ``open_archive`` takes).

    Every listed file is fetched and checked before it is written: its length and CRC-64
    must be the manifest's, and a data file must pass the engine's walk of every frame (each
    frame's CRC, the sequences to the footer's ``end_seq``) and name in its header and footer
    what its manifest entry says. The archived ``metadata.json`` is kept (options,
    encryption, ``queue_id``, any other key) with ``clean_shutdown`` false and the key-index
    marks cleared, so the first writer runs recovery and levels the key index. Named tailers
    and work queues the manifest lists are created at their recorded position (a work queue
    at its ``low`` mark: jobs above it that were acked come back, as after a crash), clamped
    to the restored messages. The queue then opens as a normal writer and appends at
    ``next_seq``, the archive's ``end_seq``.

    ``queue`` must not exist (or be an empty directory): FileExistsError otherwise. Raises
    ArchiveError naming the file when one fails its checks, and when the archive has a gap
    (a queue cannot hold one); nothing appears at ``queue`` then. Run again after a failure
    or an interruption: files already restored and whole are kept (``skipped``).
    ``encryption_key`` is an encrypted queue's key (the files are copied sealed; the key is
    checked, as ``open_archive`` checks it). ``on_file`` is called with each relative path
    restored (tests use it to stop a run).
    """
    src = os.fspath(archive)
    dst = os.path.abspath(os.fspath(queue))
    if os.path.lexists(dst) and not (os.path.isdir(dst) and not os.listdir(dst)):
        raise FileExistsError(
            17, f"litemq: {dst} exists: restore builds a new queue, it does not overwrite", dst
        )
    a = open_archive(src, filesystem, encryption_key)
    if a.gaps:
        start, end = a.gaps[0]
        raise ArchiveError(
            f"litemq: archive {src} lacks sequences {start}..{end} (deleted before they were "
            "archived): a queue cannot hold a gap, so it cannot be restored whole"
        )
    parent, name = os.path.split(dst.rstrip(os.sep))
    staging = os.path.join(parent, f".{name}.restoring")
    os.makedirs(staging, exist_ok=True)
    report = RestoreReport(archive=src, queue=dst, first_seq=a.first_seq, next_seq=a.end_seq)

    listed = sorted(
        a._by_path.values(), key=lambda f: (_ORDER[f.kind], int(f.file_number or 0), f.path)
    )
    # Indexes follow their data file (same stem): sort data files by sequence, each followed
    # by its indexes, so a run stopped midway has restored a prefix.
    listed = _data_first(a, listed)
    bar = _Progress(len(listed), sum(f.size for f in listed), progress, verb="restoring")
    for f in listed:
        target = os.path.join(staging, *f.path.split("/"))
        if f.kind == "metadata":
            data = _metadata(a, f, report.next_seq)
            _write_whole(target, data)
            report.restored.append(f.path)
            report.bytes_restored += len(data)
        elif _already_restored(target, f):
            report.skipped += 1
        else:
            data = _fetch_checked(a, f)
            _write_whole(target, data)
            report.restored.append(f.path)
            report.bytes_restored += len(data)
            if on_file is not None:
                on_file(f.path)
        bar.step(f.size, f.path)
    bar.done()
    _restore_positions(a, staging, encryption_key, report)
    if os.path.isdir(dst):
        os.rmdir(dst)  # empty (checked above); rename does not replace a mount point
    os.rename(staging, dst)
    _fsync_dir(parent or ".")
    return report


def _data_first(a: Archive, listed: list[ArchiveFile]) -> list[ArchiveFile]:
    """Data files oldest first, each followed by its sparse and dense index, then the rest."""
    out: list[ArchiveFile] = []
    for f in a.files:
        out.append(f)
        stem = f.path[: -len(".data")]
        for kind in ("index", "offsets"):
            e = a._by_path.get(f"{stem}.{kind}")
            if e is not None:
                out.append(e)
    seen = {f.path for f in out}
    out.extend(f for f in listed if f.path not in seen)
    return out


def _fetch_checked(a: Archive, f: ArchiveFile) -> bytes:
    """The bytes of ``f`` with its listed length and CRC-64; a data file also walked frame
    by frame (every CRC) and checked against its entry. ArchiveError naming the file."""
    data = a.read_listed(f)
    if f.kind != "data":
        return data
    path = _join(a._root, f.path)
    try:
        _verify_sealed(data, path)
    except CorruptedError as e:
        raise ArchiveError(f"litemq: archived file {path} fails its checks: {e}") from e
    a._check_ends(f, path, data[:64], data[-128:])
    return data


def _already_restored(target: str, f: ArchiveFile) -> bool:
    """A file an interrupted run restored: under its final name (so it was checked, written
    whole and fsynced before the rename) and still of its listed length and CRC-64."""
    try:
        if os.path.getsize(target) != f.size:
            return False
        crc: int | None = None
        with open(target, "rb") as fh:
            while piece := fh.read(READ_CHUNK):
                crc = _crc64(piece, crc)
        _check_listed(target, f, f.size, _crc64(b"") if crc is None else crc)
    except (OSError, ArchiveError):
        return False
    return True


def _metadata(a: Archive, f: ArchiveFile, next_seq: int) -> bytes:
    """The archived ``metadata.json`` for the restored queue: every key kept (options,
    encryption, ``queue_id``, ...) but the marks of the source's last close, which describe
    files the restored queue does not have: no clean shutdown (recovery runs at the first
    open), no key-index marks (the index is levelled from its own last entry)."""
    raw = a.read_listed(f)
    try:
        meta = json.loads(raw)
    except ValueError as e:
        raise ArchiveError(f"litemq: archived metadata.json of {a.uri} does not parse: {e}") from e
    if not isinstance(meta, dict):
        raise ArchiveError(f"litemq: archived metadata.json of {a.uri} is not a JSON object")
    meta.update(
        clean_shutdown=False,
        next_seq=next_seq,
        writer_pid=0,
        key_index_upto=0,
        key_index_last=None,
    )
    return (json.dumps(meta, indent=2) + "\n").encode()


def _restore_positions(
    a: Archive, staging: str, encryption_key: bytes | None, report: RestoreReport
) -> None:
    """Named tailers and work queues as the manifest recorded them, clamped to the restored
    messages (a position past ``end_seq`` counted messages the archive never got)."""
    from litemq.queue import Queue

    consumers = a._manifest.consumers
    wqs = a._manifest.work_queues
    if not consumers and not wqs:
        return
    lo, hi = report.first_seq, report.next_seq

    def clamp(seq: int) -> int:
        return min(max(seq, lo), hi)

    with Queue(staging, read_only=True, encryption_key=encryption_key) as q:
        for name, seq in sorted(consumers.items()):
            with q.tailer(name=name, start=clamp(seq)) as t:
                t.seek(clamp(seq))  # a run resumed finds the tailer already made
                t.commit()
            report.consumers[name] = clamp(seq)
        existing = {w.name for w in q.work_queues()}
        for name, w in sorted(wqs.items()):
            if name not in existing:
                q.work_queue(name, start=clamp(w["low"]), window=w["window"]).close()
            report.work_queues[name] = clamp(w["low"])


def _write_whole(path: str, data: bytes) -> None:
    """``data`` at ``path``, all or nothing: a temporary file written and fsynced, renamed
    over, and the directory fsynced."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    part = path + _PART
    with open(part, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(part, path)
    _fsync_dir(os.path.dirname(path))


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
