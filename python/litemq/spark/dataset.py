"""Datasets: directories of queues, and how Spark jobs publish new queues into them.

This module does not import pyspark: it is plain file-system work that the driver and the
executors share.

Layout of a dataset written by Spark::

    <dataset>/
        _litemq_dataset                    marker: this directory is a litemq dataset
        job-20251121T224512Z-1a2b3c4d/     one directory per committed write job
            part-00000/                    one queue per Spark partition
            part-00001/
        stream-batch-000000000007/         one directory per committed streaming micro-batch
            part-00000/
        _staging/                          work in progress; never read
            <job id>/attempts/p00000-a0-...  one queue per task attempt
            <job id>/publish/                the winners, renamed into place at commit

A job becomes visible by one ``rename(2)`` of its ``publish`` directory into the dataset, so
readers see all of its queues or none. Names starting with ``_`` or ``.`` are never read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from litemq._litemq import LiteMQError
from litemq.archive import find_archives, is_archive_uri

__all__ = [
    "DATASET_MARKER",
    "STAGING_DIR",
    "NoQueueError",
    "QueueRef",
    "Staging",
    "clean_staging",
    "discover_queues",
    "is_hidden",
    "is_queue",
    "mark_dataset",
    "new_job_id",
]

#: File at the root of a dataset written by Spark; a dataset with no queue yet still reads
#: as an empty DataFrame instead of "no queue here".
DATASET_MARKER = "_litemq_dataset"
#: Directory (inside the dataset, so renames stay on one file system) for uncommitted work.
STAGING_DIR = "_staging"
#: A staging directory untouched for this long belongs to a dead job (see ``clean_staging``).
DEFAULT_ORPHAN_SECONDS = 24 * 3600

_YEAR_DIR = re.compile(r"^\d{4}$")
#: The engine's per-queue metadata file (rust/storage/layout.rs).
METADATA_FILE = "metadata.json"
#: The manifest at the root of an archive (``litemq.archive.MANIFEST``).
ARCHIVE_MANIFEST = "_litemq_archive.json"


class NoQueueError(LiteMQError, FileNotFoundError):
    """A path given to the Spark source holds no litemq queue (``filename``: the path)."""


@dataclass(frozen=True, order=True)
class QueueRef:
    """One queue found under the paths a user gave: its ``queue`` column value and its path."""

    name: str
    path: str
    #: An archive written by ``litemq archive`` (read through ``pyarrow.fs``), not a queue.
    archive: bool = False


def is_hidden(name: str) -> bool:
    """Entries named ``_x`` or ``.x`` are bookkeeping (staging, markers), never data."""
    return name.startswith(("_", "."))


def is_queue(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is the root directory of a litemq queue.

    A queue root holds the engine's ``metadata.json`` and its data files under
    ``YYYY/MM/DD/``; a dataset (a directory of queues) holds neither directly.
    """
    p = Path(path)
    if not p.is_dir() or (p / ARCHIVE_MANIFEST).exists():
        return False  # an archive holds a copy of metadata.json and data files: not a queue
    if (p / METADATA_FILE).is_file():
        return True
    # A queue whose metadata file is missing still has data files under YYYY/MM/DD/.
    try:
        years = [e for e in os.scandir(p) if e.is_dir() and _YEAR_DIR.match(e.name)]
    except OSError:
        return False
    for year in years:
        for month in _subdirs(year.path):
            for day in _subdirs(month):
                if any(f.endswith(".data") for f in os.listdir(day)):
                    return True
    return False


def _subdirs(path: str) -> list[str]:
    try:
        return [e.path for e in os.scandir(path) if e.is_dir()]
    except OSError:
        return []


def _walk_queues(root: str) -> Iterable[str]:
    """Every queue under ``root`` (depth first, sorted), skipping hidden entries."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return
    for e in entries:
        if is_hidden(e.name) or not e.is_dir(follow_symlinks=True):
            continue
        if is_queue(e.path):
            yield e.path
        else:
            yield from _walk_queues(e.path)


def discover_queues(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    allow_empty: bool = False,
) -> list[QueueRef]:
    """Expand ``paths`` (a queue, a dataset directory, or a list of either) into queues.

    Archives written by ``litemq archive`` count as queues (``QueueRef.archive``): a URI
    (``s3://…``, ``file://…``) names an archive or a directory of archives, and so does a
    local directory holding a manifest, or holding archives and no queue.

    A queue's ``name`` is its path relative to the dataset it was found in, or its directory
    name when it was given directly. If two queues would get the same name (two lists entries
    ending in the same directory name), every name is the queue's absolute path instead.

    Raises :class:`NoQueueError` naming the path when a path does not exist or holds no queue
    (a dataset written by Spark that has no queue yet is allowed: it reads as empty).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise NoQueueError(errno.ENOENT, "litemq: no path given (use .load(path))")
    found: list[QueueRef] = []
    for raw in paths:
        if is_archive_uri(raw):
            archives = find_archives(os.fspath(raw))
            if not archives:
                raise NoQueueError(
                    errno.ENOENT,
                    f"litemq: no archive found at {os.fspath(raw)} (no {ARCHIVE_MANIFEST} there "
                    "or below: run `litemq archive QUEUE DEST` first)",
                    os.fspath(raw),
                )
            found.extend(QueueRef(n, u, archive=True) for n, u in archives)
            continue
        p = os.path.abspath(os.fspath(raw))
        if os.path.isfile(os.path.join(p, ARCHIVE_MANIFEST)):
            found.extend(QueueRef(n, u, archive=True) for n, u in find_archives(p))
            continue
        if not os.path.exists(p):
            raise NoQueueError(errno.ENOENT, f"litemq: path does not exist: {p}", p)
        if is_queue(p):
            found.append(QueueRef(os.path.basename(p.rstrip(os.sep)), p))
            continue
        if not os.path.isdir(p):
            raise NoQueueError(
                errno.ENOENT, f"litemq: not a queue or a directory of queues: {p}", p
            )
        inner = [QueueRef(os.path.relpath(q, p), q) for q in _walk_queues(p)]
        if not inner:
            inner = [QueueRef(n, u, archive=True) for n, u in find_archives(p)]
        if not inner and not allow_empty and not os.path.exists(os.path.join(p, DATASET_MARKER)):
            raise NoQueueError(
                errno.ENOENT,
                f"litemq: no queue found at {p} (expected a queue directory, "
                "or a directory of queues written by Spark)",
                p,
            )
        found.extend(inner)
    names = [r.name for r in found]
    if len(set(names)) != len(names):
        found = [QueueRef(r.path, r.path, r.archive) for r in found]
    paths_seen = [r.path for r in found]
    if len(set(paths_seen)) != len(paths_seen):
        dup = sorted({x for x in paths_seen if paths_seen.count(x) > 1})
        raise ValueError(f"litemq: the same queue is named twice in the paths: {dup}")
    return sorted(found)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _rmtree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def mark_dataset(path: str) -> None:
    """Create the dataset marker (idempotent): an empty dataset then reads as empty."""
    marker = os.path.join(path, DATASET_MARKER)
    if not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write("litemq dataset: a directory of queues written by Spark\n")


def new_job_id() -> str:
    """Sortable and unique: UTC time to the second plus 8 random hex digits."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Staging:
    """The staging area of one write (a batch job, or one micro-batch of a stream).

    Task attempts write queues under ``attempts/``; :meth:`publish` moves the winners into
    ``publish/part-NNNNN`` and renames ``publish`` to ``<dataset>/<target>`` in one step.
    """

    dataset: str
    job_id: str

    @property
    def root(self) -> str:
        return os.path.join(self.dataset, STAGING_DIR, self.job_id)

    def attempt_path(self, partition: int, attempt: int, task_attempt_id: int | None = None) -> str:
        """A directory for one task attempt's queue; unique even for speculative copies."""
        tid = "" if task_attempt_id is None else f"-t{task_attempt_id}"
        name = f"p{partition:05d}-a{attempt}{tid}-{uuid.uuid4().hex[:8]}"
        return os.path.join(self.root, "attempts", name)

    def prepare(self) -> None:
        os.makedirs(os.path.join(self.root, "attempts"), exist_ok=True)
        mark_dataset(self.dataset)

    def publish(
        self,
        winners: Sequence[tuple[int, str]],
        target: str,
        *,
        overwrite: bool = False,
        skip_if_exists: bool = False,
    ) -> str | None:
        """Make the winners' queues visible as ``<dataset>/<target>/part-NNNNN``.

        ``winners`` are ``(partition, staging queue path)``, one per partition. Everything
        else in this staging area (failed and speculative attempts) is deleted. With
        ``overwrite``, every visible entry of the dataset is removed first (moved to the
        staging area, then deleted after the publish). With ``skip_if_exists``, a target that
        already exists means this write was committed before (a streaming batch replayed after
        a restart): nothing is published. Returns the published path, or None.
        """
        final = os.path.join(self.dataset, target)
        try:
            if skip_if_exists and os.path.exists(final):
                return None
            by_partition: dict[int, str] = {}
            for partition, path in winners:
                if partition in by_partition:
                    raise RuntimeError(
                        f"litemq: two committed attempts for partition {partition}: "
                        f"{by_partition[partition]} and {path}"
                    )
                by_partition[partition] = path
            publish = os.path.join(self.root, "publish")
            os.makedirs(publish, exist_ok=True)
            for partition, path in sorted(by_partition.items()):
                os.rename(path, os.path.join(publish, f"part-{partition:05d}"))
            _fsync_dir(publish)
            if overwrite:
                trash = os.path.join(self.root, "trash")
                os.makedirs(trash, exist_ok=True)
                for e in os.scandir(self.dataset):
                    if not is_hidden(e.name):
                        os.rename(e.path, os.path.join(trash, e.name))
            published: str | None = None
            if by_partition or overwrite:
                os.rename(publish, final)  # the commit point: all of the job's queues at once
                published = final
            _fsync_dir(self.dataset)
            return published
        finally:
            self.discard()

    def discard(self) -> None:
        """Delete this staging area (abort, or after publishing)."""
        _rmtree(self.root)


def clean_staging(
    dataset: str | os.PathLike[str],
    *,
    older_than: float = DEFAULT_ORPHAN_SECONDS,
    keep: Iterable[str] = (),
) -> list[str]:
    """Delete staging directories left by dead jobs; return the ones deleted.

    A staging directory is an orphan when nothing in it (its own entry, its ``attempts``
    directory, nor any attempt directory) was modified for ``older_than`` seconds. Every
    Spark write calls this on the driver with the default of one day, so a crashed driver's
    staging data goes away by itself. Pass ``older_than=0`` to remove every staging directory
    of a dataset that nothing writes to.
    """
    root = os.path.join(os.fspath(dataset), STAGING_DIR)
    keep = set(keep)
    now = time.time()
    removed: list[str] = []
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return removed
    for e in entries:
        if e.name in keep:
            continue
        newest = _newest_mtime(e.path)
        if now - newest >= older_than:
            _rmtree(e.path)
            removed.append(e.path)
    return removed


def _newest_mtime(path: str) -> float:
    attempts = os.path.join(path, "attempts")
    candidates = [path, attempts]
    with contextlib.suppress(OSError):
        candidates += [e.path for e in os.scandir(attempts)]
    newest = 0.0
    for p in candidates:
        with contextlib.suppress(OSError):
            newest = max(newest, os.stat(p).st_mtime)
    return newest
