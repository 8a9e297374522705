"""Archives: a queue's sealed files copied to shared storage, and read back without mmap.

Queues live on each host's local disk; sealed data files never change, so they can travel.
:func:`archive_queue` (``litemq archive QUEUE DEST``) copies a queue's sealed data files, with
their sparse and dense indexes and its sealed key-index files, to a destination that
``pyarrow.fs`` understands (a local or mounted path, ``file://``, ``s3://``, ``gs://``,
``hdfs://``), checks every copy by reading it back, and writes a manifest last.
:func:`open_archive` reads an archive with ranged reads through the same file-system layer,
decoding frames in the engine (``litemq._litemq``), with the CRC checks of a local read.

Layout of an archive (one queue)::

    DEST/
        _litemq_archive.json             the manifest: every file, its size and CRC-64
        metadata.json                    the queue's metadata, for reference
        2026/11/21/20261121-0001.data    sealed data files, byte for byte
        2026/11/21/20261121-0001.index   their sparse index, the used entries only
        2026/11/21/20261121-0001.offsets their dense index, the used entries only
        index/20261121224512345.idx      sealed key-index files (not the newest)

Readers trust only what the manifest lists, so a run killed mid-upload leaves nothing a
reader would see half-written; the next run finds the unlisted copies, checks them against
the local files and uploads again whatever does not match. docs/FORMAT.md ("Archives") is
the contract.

>>> report = archive_queue("/data/orders", "s3://bucket/journals/orders")
>>> open_archive("s3://bucket/journals/orders").read_arrow(start=0, end=10).num_rows
10
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import struct
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from litemq import arrow
from litemq._litemq import (
    CorruptedError,
    LiteMQError,
    _check_archive_key,
    _crc64,
    _decode_frames,
    _decode_sealed,
    _dense_entry_range,
    _dense_header,
    _dense_offset,
    _frame_next,
    _index_header_len,
    _index_used_len,
    _key_index_trailer_len,
    _key_index_trailer_sealed,
    _sealed_ends,
    _sealed_summary,
    _typed_rows,
)
from litemq.stats import DataFileInfo

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

__all__ = [
    "MANIFEST",
    "Archive",
    "ArchiveError",
    "ArchiveFile",
    "ArchiveReport",
    "archive_queue",
    "find_archives",
    "is_archive_uri",
    "open_archive",
]

#: The manifest's name at the archive's root; written last, replaced whole.
MANIFEST = "_litemq_archive.json"
#: Version of the manifest's layout.
ARCHIVE_VERSION = 1
#: The manifest is rewritten after this many uploaded files, so a long run that is killed
#: keeps most of its work listed.
MANIFEST_EVERY = 32

#: Bytes of a data file's header that hold its fields, and of a sealed file's footer.
_DATA_HEADER_USED = 64
#: The whole header of a data file: a typed file's schema is in it (format 12).
_DATA_HEADER_LEN = 4096
_FOOTER = 128


class ArchiveError(LiteMQError):
    """An archive cannot be written or read: a copy that does not match its source after
    upload, a manifest that does not parse, a file the manifest lists that is missing."""


#: The kinds of file a manifest lists.
_KINDS = ("data", "index", "offsets", "key_index", "metadata")
#: What a data file's entry says of it, from its header and footer.
_DATA_FIELDS = (
    "file_number",
    "first_seq",
    "end_seq",
    "first_ts",
    "last_ts",
    "frames_end",
    "frames_crc",
)
#: Of those, what every data file's entry must carry (what a reader checks the file against).
_DATA_REQUIRED = ("file_number", "first_seq", "end_seq", "frames_end", "frames_crc")


def _malformed(manifest: str, why: str) -> ArchiveError:
    return ArchiveError(f"litemq: archive manifest {manifest} is malformed: {why}")


def _is_u64(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64


def _plain_relative(rel: str) -> bool:
    """``rel`` names a file inside the archive: relative, ``/``-separated, no ``.``/``..``."""
    parts = rel.split("/")
    return (
        bool(rel)
        and "\\" not in rel
        and "\x00" not in rel
        and all(p not in ("", ".", "..") for p in parts)
    )


@dataclass(frozen=True)
class ArchiveFile:
    """One file of an archive as the manifest lists it.

    ``path`` is relative to the archive's root (``2026/11/21/20261121-0001.data``);
    ``kind`` is ``data``, ``index`` (sparse), ``offsets`` (dense), ``key_index`` or
    ``metadata``; ``size`` and ``crc64`` describe the archived bytes. Data files also carry
    ``file_number``, ``first_seq``, ``end_seq`` (one past the last), ``first_ts`` and
    ``last_ts`` (µs), ``frames_end`` and ``frames_crc`` from their footer.
    """

    path: str
    kind: str
    size: int
    crc64: int
    file_number: int | None = None
    first_seq: int | None = None
    end_seq: int | None = None
    first_ts: int | None = None
    last_ts: int | None = None
    frames_end: int | None = None
    frames_crc: int | None = None

    @classmethod
    def from_json(cls, d: Any, manifest: str = MANIFEST) -> ArchiveFile:
        """The entry ``d`` of the manifest at ``manifest``, checked: ArchiveError naming the
        manifest and the entry when a key is missing or of the wrong type, ``path`` is not a
        plain relative path inside the archive, or ``kind`` is not one of the five."""
        if not isinstance(d, dict):
            raise _malformed(manifest, f"a files entry is {type(d).__name__}, not an object")
        rel = d.get("path")
        if not isinstance(rel, str) or not _plain_relative(rel):
            raise _malformed(manifest, f"files entry path {rel!r} is not a relative path")
        kind = d.get("kind")
        if kind not in _KINDS:
            raise _malformed(manifest, f"files entry {rel}: kind {kind!r} is not one of {_KINDS}")
        values: dict[str, int | None] = {}
        for key in ("size", "crc64", *_DATA_FIELDS):
            v = d.get(key)
            required = key in ("size", "crc64") or (kind == "data" and key in _DATA_REQUIRED)
            if v is None and not required:
                values[key] = None
                continue
            if not _is_u64(v):
                raise _malformed(
                    manifest,
                    f"files entry {rel}: {key} is {v!r}, not an integer in 0..2^64"
                    + (" (required)" if required and v is None else ""),
                )
            values[key] = v
        f = cls(rel, kind, **values)  # type: ignore[arg-type]
        if kind == "data" and int(f.end_seq or 0) < int(f.first_seq or 0):
            raise _malformed(
                manifest,
                f"files entry {rel}: end_seq {f.end_seq} is before first_seq {f.first_seq}",
            )
        return f

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class ArchiveReport:
    """What one ``archive_queue`` run did.

    - ``copied``: files uploaded and verified in this run (relative paths);
    - ``bytes_copied``: their bytes;
    - ``skipped``: files the manifest already listed (copied by an earlier run);
    - ``redone``: files found at the destination but not listed (a killed run's work)
      whose bytes did not match the local file, and were uploaded again;
    - ``adopted``: such files whose bytes matched, listed without a new upload;
    - ``first_seq``, ``end_seq``: the sequences the archive's data files cover;
    - ``gaps``: ``(end_seq, first_seq)`` pairs where archived files do not follow each
      other (the queue deleted files before they were archived);
    - ``deleted_local``: local data files deleted after the copy (``delete_local``);
    - ``protected_files``: archived files kept locally because a named tailer has not
      consumed them;
    - ``manifest``: the manifest's path at the destination.
    """

    queue: str
    dest: str
    copied: list[str] = field(default_factory=list)
    bytes_copied: int = 0
    skipped: int = 0
    redone: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    first_seq: int | None = None
    end_seq: int | None = None
    gaps: list[tuple[int, int]] = field(default_factory=list)
    deleted_local: list[str] = field(default_factory=list)
    protected_files: int = 0
    manifest: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------
# file systems


def is_archive_uri(path: str | os.PathLike[str]) -> bool:
    """True for a URI (``s3://…``, ``file://…``): a location only an archive can be at."""
    return "://" in os.fspath(path)


@functools.lru_cache(maxsize=32)
def _from_uri(uri: str) -> tuple[pafs.FileSystem, str]:
    import pyarrow.fs as pafs

    fs, path = pafs.FileSystem.from_uri(uri)
    return fs, path.rstrip("/")


def resolve(
    dest: str | os.PathLike[str], filesystem: pafs.FileSystem | None = None
) -> tuple[pafs.FileSystem, str]:
    """The ``pyarrow.fs`` file system and path of ``dest`` (a path or URI). Query options of
    a URI go to the file system (``s3://b/p?endpoint_override=http://127.0.0.1:9000``)."""
    import pyarrow.fs as pafs

    text = os.fspath(dest)
    if filesystem is not None:
        return filesystem, text.rstrip("/")
    if is_archive_uri(text):
        return _from_uri(text)
    return pafs.LocalFileSystem(), os.path.abspath(text)


def _join(root: str, rel: str) -> str:
    return f"{root}/{rel}" if root else rel


def _read_all(fs: pafs.FileSystem, path: str) -> bytes:
    with fs.open_input_file(path) as f:
        return bytes(f.read())


def _read_range(fs: pafs.FileSystem, path: str, offset: int, length: int) -> bytes:
    with fs.open_input_file(path) as f:
        return bytes(f.read_at(length, offset))


#: Bytes per read when a copy is checked piece by piece.
READ_CHUNK = 8 << 20


def _crc64_of(fs: pafs.FileSystem, path: str) -> tuple[int, int]:
    """Length and CRC-64 of the file at ``path``, read in pieces (a copy may be large)."""
    crc: int | None = None
    size = 0
    with fs.open_input_stream(path) as f:
        while True:
            piece = f.read(READ_CHUNK)
            if not piece:
                break
            crc = _crc64(piece, crc)
            size += len(piece)
    return size, (_crc64(b"") if crc is None else crc)


def _write(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Write ``data`` to ``path``, durably: an object store's PUT is, once it returns; on a
    file system the file and its directory are fsynced, so that a manifest written later
    never lists a file a power loss could take back (and ``--delete-local`` never deletes
    the only durable copy)."""
    parent = path.rsplit("/", 1)[0]
    if parent and parent != path:
        fs.create_dir(parent, recursive=True)
    with fs.open_output_stream(path) as out:
        out.write(data)
    _sync_local(fs, path)


def _sync_local(fs: pafs.FileSystem, path: str) -> None:
    import pyarrow.fs as pafs

    if not isinstance(fs, pafs.LocalFileSystem):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Readers see the old bytes or the new, never a part: an object store's PUT is atomic;
    on a file system, write a temporary (fsynced) then rename it over, and fsync the
    directory."""
    import pyarrow.fs as pafs

    if isinstance(fs, pafs.LocalFileSystem):
        tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        _write(fs, tmp, data)
        os.replace(tmp, path)
        _sync_local(fs, path)
        return
    _write(fs, path, data)


def _exists(fs: pafs.FileSystem, path: str) -> int | None:
    """The size of the file at ``path``, or None if there is none."""
    import pyarrow.fs as pafs

    info = fs.get_file_info(path)
    if info.type != pafs.FileType.File:
        return None
    return int(info.size) if info.size is not None else None


# ------------------------------------------------------------------------------------------
# the manifest


@dataclass(frozen=True)
class _Manifest:
    """A manifest that parsed and checked out: every entry well-formed, each path once, the
    data files' sequence ranges following each other but for the gaps it declares."""

    doc: dict[str, Any]
    #: Every listed file by its relative path.
    files: dict[str, ArchiveFile]
    #: The data files, oldest first.
    data: list[ArchiveFile]
    #: ``(end_seq, first_seq)`` where listed data files do not follow each other (the queue
    #: deleted files before they were archived); the writer declares each one.
    gaps: list[tuple[int, int]]
    #: Named tailers' committed positions when the manifest was written (version 1 manifests
    #: from before restore existed have none).
    consumers: dict[str, int]
    #: Work queues' ``low`` marks and ``window`` when the manifest was written.
    work_queues: dict[str, dict[str, int]]


def _load_manifest(fs: pafs.FileSystem, root: str) -> _Manifest | None:
    """The manifest at ``root``, checked (ArchiveError when it is malformed or lies about its
    sequences), or None when there is none."""
    path = _join(root, MANIFEST)
    if _exists(fs, path) is None:
        return None
    return _parse_manifest(_read_all(fs, path), path)


def _parse_manifest(raw: bytes, path: str) -> _Manifest:
    try:
        m = json.loads(raw)
    except ValueError as e:  # UnicodeDecodeError is one too
        raise ArchiveError(f"litemq: archive manifest {path} does not parse: {e}") from None
    if not isinstance(m, dict) or m.get("litemq_archive") != ARCHIVE_VERSION:
        raise ArchiveError(
            f"litemq: {path} is not a litemq archive manifest of version {ARCHIVE_VERSION}"
        )
    listed = m.get("files", [])
    if not isinstance(listed, list):
        raise _malformed(path, f"files is {type(listed).__name__}, not a list")
    files: dict[str, ArchiveFile] = {}
    for d in listed:
        f = ArchiveFile.from_json(d, path)
        if f.path in files:
            raise _malformed(path, f"{f.path} is listed twice")
        files[f.path] = f
    gaps_doc = m.get("gaps", [])
    if not isinstance(gaps_doc, list) or not all(
        isinstance(g, list) and len(g) == 2 and all(_is_u64(x) for x in g) for g in gaps_doc
    ):
        raise _malformed(path, f"gaps is {gaps_doc!r}, not a list of [end_seq, first_seq] pairs")
    declared = {(int(a), int(b)) for a, b in gaps_doc}
    # A manifest written before `gaps` existed declares none: its gaps are
    # taken from the files (reads across them still raise; see check_covers).
    undeclared_ok = "gaps" not in m
    data = sorted(
        (f for f in files.values() if f.kind == "data"), key=lambda f: int(f.first_seq or 0)
    )
    gaps: list[tuple[int, int]] = []
    for a, b in itertools.pairwise(data):
        a_end, b_first = int(a.end_seq or 0), int(b.first_seq or 0)
        if int(b.file_number or 0) <= int(a.file_number or 0):
            raise _malformed(
                path,
                f"{b.path} (file number {b.file_number}) holds later sequences than "
                f"{a.path} (file number {a.file_number})",
            )
        if b_first < a_end:
            raise _malformed(
                path,
                f"{a.path} (sequences {a.first_seq}..{a_end}) and {b.path} "
                f"({b_first}..{b.end_seq}) overlap",
            )
        if b_first > a_end:
            if not undeclared_ok and (a_end, b_first) not in declared:
                raise _malformed(
                    path,
                    f"sequences {a_end}..{b_first} between {a.path} and {b.path} are missing "
                    "and not declared in gaps",
                )
            gaps.append((a_end, b_first))
    for key, want in (
        ("first_seq", data[0].first_seq if data else None),
        ("end_seq", data[-1].end_seq if data else None),
    ):
        if key in m and m[key] != want:
            raise _malformed(path, f"{key} is {m[key]!r}, its data files say {want}")
    consumers = m.get("consumers", {})
    if not isinstance(consumers, dict) or not all(
        isinstance(k, str) and _is_u64(v) for k, v in consumers.items()
    ):
        raise _malformed(path, "consumers is not an object of name: next_seq")
    wqs = m.get("work_queues", {})
    if not isinstance(wqs, dict) or not all(
        isinstance(k, str)
        and isinstance(v, dict)
        and _is_u64(v.get("low"))
        and _is_u64(v.get("window"))
        for k, v in wqs.items()
    ):
        raise _malformed(path, "work_queues is not an object of name: {low, window}")
    return _Manifest(m, files, data, gaps, dict(consumers), {k: dict(v) for k, v in wqs.items()})


def _manifest_bytes(
    queue: str,
    files: dict[str, ArchiveFile],
    source: str,
    consumers: dict[str, int] | None = None,
    work_queues: dict[str, dict[str, int]] | None = None,
) -> bytes:
    data = sorted((f for f in files.values() if f.kind == "data"), key=lambda f: f.first_seq or 0)
    gaps = [
        [int(a.end_seq or 0), int(b.first_seq or 0)]
        for a, b in itertools.pairwise(data)
        if a.end_seq != b.first_seq
    ]
    m: dict[str, Any] = {
        "litemq_archive": ARCHIVE_VERSION,
        "queue": queue,
        "source": source,
        "host": os.uname().nodename,
        "updated": datetime.now(UTC).isoformat(timespec="seconds"),
        "first_seq": data[0].first_seq if data else None,
        "end_seq": data[-1].end_seq if data else None,
        "gaps": gaps,
        "files": [files[k].to_json() for k in sorted(files)],
    }
    if consumers is not None:
        m["consumers"] = consumers
    if work_queues is not None:
        m["work_queues"] = work_queues
    return (json.dumps(m, indent=1) + "\n").encode()


# ------------------------------------------------------------------------------------------
# writing


class _Progress:
    """A one-line progress bar on stderr (only when enabled)."""

    def __init__(
        self, total_files: int, total_bytes: int, stream: IO[str] | None, verb: str = "archiving"
    ) -> None:
        self.verb = verb
        self.total_files = total_files
        self.total_bytes = max(total_bytes, 1)
        self.stream = stream
        self.files = 0
        self.bytes = 0
        self.last = 0.0

    def step(self, nbytes: int, name: str) -> None:
        """One more file done, of ``nbytes`` (as counted in ``total_bytes``)."""
        self.files += 1
        self.bytes += nbytes
        self.draw(name)

    def draw(self, name: str, force: bool = False) -> None:
        now = time.monotonic()
        if self.stream is None or (not force and now - self.last < 0.1):
            return
        self.last = now
        frac = min(self.bytes / self.total_bytes, 1.0)
        bar = "#" * int(frac * 30)
        self.stream.write(
            f"\r{self.verb} [{bar:<30}] {self.files}/{self.total_files} files "
            f"{self.bytes / 2**20:,.1f}/{self.total_bytes / 2**20:,.1f} MiB  {name[-40:]:<40}"
        )
        self.stream.flush()

    def done(self) -> None:
        if self.stream is not None:
            self.draw("done", force=True)
            self.stream.write("\n")
            self.stream.flush()


def _used_index_bytes(path: str, kind: str, rows: int) -> bytes | None:
    """The header and used entries of a sealed file's sparse (``index``) or dense
    (``offsets``) index; the rest of the file is a hole of zeros (docs/FORMAT.md). The
    engine says how many bytes those are (``_index_used_len``)."""
    try:
        with open(path, "rb") as f:
            head = f.read(_index_header_len(kind))
            used = int(_index_used_len(kind, head, rows))
            return head + f.read(max(used - len(head), 0))
    except FileNotFoundError:
        return None


def _key_index_sealed(path: str) -> bool:
    """A key-index file's trailer says ``sealed`` (state 1 at trailer offset 32)."""
    size = int(_key_index_trailer_len())
    try:
        with open(path, "rb") as f:
            f.seek(-size, os.SEEK_END)
            trailer = f.read(size)
    except OSError:
        return False
    return bool(_key_index_trailer_sealed(trailer))


@dataclass
class _Upload:
    rel: str
    kind: str
    local: str
    data_meta: dict[str, Any] | None = None


def archive_queue(
    queue: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    delete_local: bool = False,
    filesystem: pafs.FileSystem | None = None,
    progress: IO[str] | None = None,
    on_file: Callable[[str], None] | None = None,
    encryption_key: bytes | None = None,
    encryption_key_file: str | os.PathLike[str] | None = None,
) -> ArchiveReport:
    """Copy the sealed files of the queue at ``queue`` to the archive at ``dest``.

    Every sealed data file (all but the last, which the writer may still append to) goes
    with its sparse and dense index (their used entries), the sealed key-index files (all but
    the newest) and ``metadata.json``. Each copy is read back and checked: its CRC-64 must
    equal the local file's, and a data file's header, footer and ``frames_crc`` must check
    out (on the local file, before it leaves). Only then is it listed in the manifest, which
    is written last (and every ``MANIFEST_EVERY`` files), so readers see whole, checked files
    only. One file is held in memory at a time; copies are read back in ``READ_CHUNK`` pieces.

    Idempotent and resumable: files the manifest lists are skipped; a file at the
    destination that it does not list (a killed run's) is checked against the local file
    and uploaded again unless it matches. With ``delete_local``, once the manifest is
    written, local data files whose messages are all archived are deleted as a retention
    pass would (oldest first, never the last file, never one a named tailer has not
    consumed). ``progress`` is a stream for a progress bar (e.g. ``sys.stderr``);
    ``on_file`` is called with each relative path uploaded (tests use it to stop a run).
    An encrypted queue needs its ``encryption_key`` (or ``encryption_key_file``) to be opened;
    its files are copied as they are (sealed), and reading the archive needs the key too
    (`open_archive`).

    Raises ArchiveError when a copy does not match after upload (nothing is listed for it),
    CorruptedError when a local sealed file fails its own checks.
    """
    from litemq.queue import Queue

    src = os.path.abspath(os.fspath(queue))
    fs, root = resolve(dest, filesystem)
    report = ArchiveReport(queue=src, dest=os.fspath(dest), manifest=_join(root, MANIFEST))
    existing = _load_manifest(fs, root)
    listed: dict[str, ArchiveFile] = {} if existing is None else dict(existing.files)
    name = os.path.basename(src.rstrip(os.sep))

    with Queue(
        src,
        read_only=True,
        encryption_key=encryption_key,
        encryption_key_file=encryption_key_file,
    ) as q:
        # Positions as the run starts (they only move on): what a restore sets them to.
        consumers = {c.name: c.next_seq for c in q.consumers()}
        work_queues = {w.name: {"low": w.low, "window": w.window} for w in q.work_queues()}
        data_files = q.data_files()
        sealed = data_files[:-1]
        todo: list[_Upload] = []
        for info in sealed:
            rel = os.path.relpath(info.path, src).replace(os.sep, "/")
            rows = info.end_seq - info.first_seq
            meta = {"rows": rows}
            if rel in listed:
                report.skipped += 1
            else:
                todo.append(_Upload(rel, "data", info.path, meta))
            for kind in ("index", "offsets"):
                irel = rel[: -len(".data")] + "." + kind
                if irel not in listed:
                    todo.append(_Upload(irel, kind, os.path.join(src, irel), meta))
        kdir = os.path.join(src, "index")
        with contextlib.suppress(FileNotFoundError):
            keys = sorted(n for n in os.listdir(kdir) if n.endswith(".idx"))
            for n in keys[:-1]:
                rel = f"index/{n}"
                if rel not in listed and _key_index_sealed(os.path.join(kdir, n)):
                    todo.append(_Upload(rel, "key_index", os.path.join(kdir, n)))

        sizes = {}
        for u in todo:
            with contextlib.suppress(OSError):
                sizes[u.rel] = os.path.getsize(u.local)
        bar = _Progress(len(todo), sum(sizes.values()), progress)
        since_manifest = 0
        for u in todo:
            entry = _upload_one(fs, root, u, report)
            if entry is not None:
                listed[entry.path] = entry
                report.bytes_copied += entry.size if u.rel in report.copied else 0
                since_manifest += 1
                if on_file is not None:
                    on_file(u.rel)
            bar.step(sizes.get(u.rel, 0), u.rel)
            if since_manifest >= MANIFEST_EVERY:
                _write_atomically(
                    fs, report.manifest, _manifest_bytes(name, listed, src, consumers, work_queues)
                )
                since_manifest = 0
        bar.done()
        meta_path = os.path.join(src, "metadata.json")
        if os.path.exists(meta_path):
            with open(meta_path, "rb") as fh:
                meta_bytes = fh.read()
            _write(fs, _join(root, "metadata.json"), meta_bytes)
            listed["metadata.json"] = ArchiveFile(
                "metadata.json", "metadata", len(meta_bytes), _crc64(meta_bytes)
            )
        _write_atomically(
            fs, report.manifest, _manifest_bytes(name, listed, src, consumers, work_queues)
        )

        data = sorted(
            (f for f in listed.values() if f.kind == "data"), key=lambda f: f.first_seq or 0
        )
        if data:
            report.first_seq, report.end_seq = data[0].first_seq, data[-1].end_seq
            for a, b in itertools.pairwise(data):
                if a.end_seq != b.first_seq:
                    report.gaps.append((int(a.end_seq or 0), int(b.first_seq or 0)))
        if delete_local:
            _delete_archived(q, src, sealed, listed, fs, root, report)
    return report


def _upload_one(
    fs: pafs.FileSystem, root: str, u: _Upload, report: ArchiveReport
) -> ArchiveFile | None:
    """Upload (or adopt) one file and check the copy; its manifest entry, or None if the
    local file is gone (retention deleted it meanwhile) or absent (no dense index in an
    older format version)."""
    rows = int(u.data_meta["rows"]) if u.data_meta else 0
    if u.kind in ("index", "offsets"):
        local = _used_index_bytes(u.local, u.kind, rows)
    else:
        try:
            with open(u.local, "rb") as f:
                local = f.read()
        except FileNotFoundError:
            return None
    if local is None:
        return None
    summary: dict[str, Any] | None = None
    if u.kind == "data":
        summary = _sealed_summary(local, u.local)  # the source itself must be sound
    crc = _crc64(local)
    path = _join(root, u.rel)
    there = _exists(fs, path)
    if there is not None:
        # Not in the manifest: a killed run's upload, whole or partial. Keep it only if it
        # is exactly the local file.
        if there == len(local) and _crc64_of(fs, path) == (len(local), crc):
            report.adopted.append(u.rel)
        else:
            report.redone.append(u.rel)
            there = None
    if there is None:
        _write(fs, path, local)
        report.copied.append(u.rel)
    _verify_copy(fs, path, len(local), crc)
    entry = ArchiveFile(u.rel, u.kind, len(local), crc)
    if summary is not None:
        entry = ArchiveFile(
            u.rel,
            u.kind,
            len(local),
            crc,
            file_number=int(summary["file_number"]),
            first_seq=int(summary["first_seq"]),
            end_seq=int(summary["end_seq"]),
            first_ts=int(summary["first_ts"]),
            last_ts=int(summary["last_ts"]),
            frames_end=int(summary["frames_end"]),
            frames_crc=int(summary["frames_crc"]),
        )
    return entry


def _check_listed(path: str, f: ArchiveFile, size: int, crc: int) -> None:
    """Bytes of ``size`` and CRC-64 ``crc`` read from ``path`` are the file entry ``f``
    lists: ArchiveError naming the file otherwise."""
    if size != f.size or crc != f.crc64:
        raise ArchiveError(
            f"litemq: archived file {path} is not what the manifest lists: {size} bytes with "
            f"CRC-64 {crc:#018x}, the manifest says {f.size} bytes with {f.crc64:#018x}"
        )


def _verify_copy(fs: pafs.FileSystem, path: str, size: int, crc: int) -> None:
    """Read the copy back, in pieces: the same length and CRC-64 as the local bytes (whose
    header, footer and ``frames_crc`` were checked before the upload), so the copy is those
    bytes, footer and ``frames_crc`` included."""
    got_size, got = _crc64_of(fs, path)
    if got_size != size:
        raise ArchiveError(
            f"litemq: archived copy {path} is {got_size} bytes after upload, expected {size}"
        )
    if got != crc:
        raise ArchiveError(
            f"litemq: archived copy {path} does not match its source after upload "
            f"(CRC-64 {got:#018x}, expected {crc:#018x})"
        )


def _delete_archived(
    q: Any,
    src: str,
    sealed: list[DataFileInfo],
    listed: dict[str, ArchiveFile],
    fs: pafs.FileSystem,
    root: str,
    report: ArchiveReport,
) -> None:
    """Delete local data files whose messages are all archived (a prefix, oldest first)."""
    before: int | None = None
    for info in sealed:
        rel = os.path.relpath(info.path, src).replace(os.sep, "/")
        entry = listed.get(rel)
        if entry is None or entry.end_seq != info.end_seq:
            break
        # Listed means checked after upload; make sure it is still there, whole.
        if _exists(fs, _join(root, rel)) != entry.size:
            break
        before = info.end_seq
    if before is None:
        return
    r = q._delete_files_before(before)
    report.deleted_local = [str(p) for p in r["deleted_files"]]
    report.protected_files = int(r["protected_files"])


# ------------------------------------------------------------------------------------------
# reading


class Archive:
    """An archived queue, read through ``pyarrow.fs`` without mmap.

    ``first_seq`` and ``end_seq`` bound what the manifest lists (``end_seq`` is one past the
    last archived message); ``files`` are its data files, oldest first. Reads check what a
    local read checks: a whole data file by its footer's ``frames_crc``, a range by each
    frame's CRC; damage raises CorruptedError naming the file.

    >>> a = open_archive("s3://bucket/journals/orders")
    >>> a.read_arrow(columns=["seq", "payload"]).num_rows == a.end_seq - a.first_seq
    True
    """

    def __init__(
        self,
        uri: str | os.PathLike[str],
        filesystem: pafs.FileSystem | None = None,
        encryption_key: bytes | None = None,
    ) -> None:
        self.uri = os.fspath(uri)
        self._fs, self._root = resolve(uri, filesystem)
        m = _load_manifest(self._fs, self._root)
        if m is None:
            raise FileNotFoundError(
                2,
                f"litemq: no archive at {self.uri}: no {MANIFEST} (an archive is readable once "
                "`litemq archive` has written its manifest)",
                self.uri,
            )
        self._manifest = m
        #: The manifest as parsed JSON (checked: see docs/FORMAT.md, "Archives").
        self.manifest = m.doc
        self._by_path = m.files
        #: The data files, oldest first; their sequence ranges follow each other but for the
        #: ``gaps`` the manifest declares.
        self.files = m.data
        self.gaps = m.gaps
        self.name = str(m.doc.get("queue") or os.path.basename(self._root))
        # Files whose two ends (header, footer) were checked against the manifest, and dense
        # indexes whose header was: once per file and Archive.
        self._checked: set[str] = set()
        # The headers of data files read by ranges, fetched once per file and Archive: a
        # typed file's ranges are decoded with the schema its header holds.
        self._heads: dict[str, bytes] = {}
        # Encryption at rest: the archived metadata.json says whether the queue was
        # encrypted; its key is checked here, as opening the queue would check it.
        self._unlock: tuple[bytes, bytes | None] | None = None
        # A typed queue's schema versions (metadata.json's "schema"), None when untyped.
        self._schema: dict[str, Any] | None = None
        if "metadata.json" in self._by_path:
            meta = self.read_listed(self._by_path["metadata.json"])
            self._schema = _schema_of(meta)
            key = None if encryption_key is None else bytes(encryption_key)
            if _check_archive_key(meta, key, self.uri) or key is not None:
                self._unlock = (meta, key)

    def __repr__(self) -> str:
        return (
            f"litemq.Archive({self.uri!r}, files={len(self.files)}, "
            f"first_seq={self.first_seq}, end_seq={self.end_seq})"
        )

    @property
    def first_seq(self) -> int:
        """The first archived sequence (0 for an empty archive)."""
        return int(self.files[0].first_seq or 0) if self.files else 0

    @property
    def end_seq(self) -> int:
        """One past the last archived sequence."""
        return int(self.files[-1].end_seq or 0) if self.files else 0

    def __len__(self) -> int:
        return sum(int(f.end_seq or 0) - int(f.first_seq or 0) for f in self.files)

    def file_for(self, seq: int) -> ArchiveFile | None:
        """The data file holding ``seq``, if archived."""
        for f in self.files:
            if int(f.first_seq or 0) <= seq < int(f.end_seq or 0):
                return f
        return None

    def read_arrow(
        self,
        start: int | None = None,
        end: int | None = None,
        max_rows: int | None = None,
        columns: Sequence[str] | None = None,
        *,
        raw: bool = False,
    ) -> pa.RecordBatch:
        """Archived messages ``[start, end)`` as one ``pyarrow.RecordBatch``, with the schema
        of ``Queue.read_arrow`` (``columns`` picks some; ``raw=True`` keeps payloads as
        stored and adds ``codec`` and ``raw_len``). An archive of a typed queue reads as
        ``Queue.read_arrow`` of the queue does: ``seq``, ``timestamp`` and the fields of the
        newest schema version its ``metadata.json`` lists, typed (``columns`` picks among
        them); with ``raw=True`` it has the untyped columns, ``payload`` holding each row's
        bytes."""
        if not isinstance(raw, bool):
            raise TypeError(f"raw must be a bool, not {type(raw).__name__}")
        lo = self.first_seq if start is None else max(int(start), self.first_seq)
        hi = self.end_seq if end is None else min(int(end), self.end_seq)
        if max_rows is not None:
            hi = min(hi, lo + int(max_rows))
        if self._schema is not None and not raw:
            return self._read_typed(lo, hi, columns)
        names = arrow.column_names(columns, raw)
        batches = list(self.iter_batches(lo, hi, names, raw=raw))
        if not batches:
            return arrow.empty_batch(names)
        return arrow.concat(batches)

    def arrow_reader(
        self,
        batch_size: int | None = None,
        start: int | None = None,
        end: int | None = None,
        columns: Sequence[str] | None = None,
        *,
        raw: bool = False,
    ) -> pa.RecordBatchReader:
        """`read_arrow`'s rows as a ``pyarrow.RecordBatchReader``, a data file
        read when the consumer asks for its rows (batches of at most
        ``batch_size`` rows; None: about one per data file); typed for a typed
        queue's archive, as `read_arrow` is."""
        import pyarrow as pa

        if not isinstance(raw, bool):
            raise TypeError(f"raw must be a bool, not {type(raw).__name__}")
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
        ):
            raise ValueError(f"batch_size must be an int > 0, not {batch_size!r}")
        lo = self.first_seq if start is None else max(int(start), self.first_seq)
        hi = self.end_seq if end is None else min(int(end), self.end_seq)
        if self._schema is not None and not raw:
            schema, parts = self._typed_batches(lo, hi, columns)
        else:
            names = arrow.column_names(columns, raw)
            schema, parts = arrow.schema(names), self.iter_batches(lo, hi, names, raw=raw)

        def batches() -> Iterator[pa.RecordBatch]:
            for b in parts:
                if batch_size is None:
                    yield b
                else:
                    yield from (b.slice(i, batch_size) for i in range(0, b.num_rows, batch_size))

        return pa.RecordBatchReader.from_batches(schema, batches())

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow C stream of every archived message (`read_arrow`'s
        default columns), for ``pa.table(a)``, ``pl.from_arrow(a)`` and DuckDB."""
        return self.arrow_reader().__arrow_c_stream__(requested_schema)

    def check_covers(self, start: int, end: int) -> None:
        """ArchiveError unless the archive's data files hold every sequence of
        ``[start, end)`` (nothing when it is empty): the one check a reader of a range makes
        (``iter_batches``, the Spark source), so a manifest cannot make a read come back
        short without an error."""
        if start >= end:
            return
        inside = self.first_seq <= start and end <= self.end_seq
        holes = [(a, b) for a, b in self.gaps if a < end and start < b]
        if inside and not holes:
            return
        held = f"{self.first_seq}..{self.end_seq}" if self.files else "nothing"
        raise ArchiveError(
            f"litemq: archive {self.uri} does not hold sequences [{start}, {end}): it holds "
            f"{held}"
            + (
                "".join(f", without {a}..{b} (deleted before they were archived)" for a, b in holes)
                if holes
                else ""
            )
        )

    def _read_typed(self, lo: int, hi: int, columns: Sequence[str] | None) -> pa.RecordBatch:
        """`read_arrow` of a typed queue's archive (see `_typed_batches`)."""
        import pyarrow as pa

        schema, batches = self._typed_batches(lo, hi, columns)
        parts = list(batches)
        if not parts:
            return pa.RecordBatch.from_pylist([], schema=schema)
        return arrow.concat(parts)

    def _typed_batches(
        self, lo: int, hi: int, columns: Sequence[str] | None
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """The schema and batches (one per file read, or part of one) of a typed queue's
        archive: ``seq``, ``timestamp`` and the newest schema version's fields (``columns``
        picks among them), each file's rows read in its own version (its header says which)
        and shown in the newest, as ``Queue.read_arrow`` shows them; tombstones are not
        rows. The range is checked against the manifest at once, the files read lazily."""
        from litemq import _typed

        assert self._schema is not None
        versions = self._schema["versions"]
        fields = {f["name"]: f for f in versions[-1]["fields"]}
        names = _typed.column_names(columns, fields)
        read = [n for n in names if n in fields]
        doc = json.dumps(self._schema)
        self.check_covers(lo, hi)

        def batches() -> Iterator[pa.RecordBatch]:
            for f in self.files:
                a, b = max(lo, int(f.first_seq or 0)), min(hi, int(f.end_seq or 0))
                if a >= b:
                    continue
                head = self._head(f, self._data_path(f))
                at = _SCHEMA_VERSION_AT
                version = int.from_bytes(head[at : at + 4], "little")
                for batch in self.read_file(f, a, b, ("seq", "timestamp", "payload")):
                    yield _typed_part(batch, doc, version, read, names, fields, f.path)

        return _typed.arrow_schema(names, fields), batches()

    def iter_batches(
        self,
        start: int,
        end: int,
        columns: tuple[str, ...] = arrow.DEFAULT_FIELDS,
        *,
        raw: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Record batches of ``[start, end)``, about one per data file read. Every sequence
        of the range is accounted for: the listed files cover it (ArchiveError when it
        reaches past the archive or into a gap the manifest declares), and each file is
        read to the end of its part or raises."""
        self.check_covers(start, end)
        for f in self.files:
            lo, hi = max(start, int(f.first_seq or 0)), min(end, int(f.end_seq or 0))
            if lo < hi:
                yield from self.read_file(f, lo, hi, columns, raw=raw)

    def read_listed(self, f: ArchiveFile) -> bytes:
        """The bytes of listed file ``f``, fetched whole and checked against its entry (length
        and CRC-64): ArchiveError naming the file otherwise."""
        path = _join(self._root, f.path)
        data = _read_all(self._fs, path)
        _check_listed(path, f, len(data), _crc64(data))
        return data

    def _check_ends(self, f: ArchiveFile, path: str, head: bytes, tail: bytes) -> None:
        """The header (``head``, the file's first bytes) and footer (``tail``, its last 128)
        of archived data file ``f`` say what its manifest entry says: ArchiveError naming the
        file otherwise (a manifest naming another file, a file put in another's place)."""
        seen = _sealed_ends(head, tail, f.size, path)
        wrong = [
            f"{k} {seen[k]} (the manifest says {getattr(f, k)})"
            for k in _DATA_REQUIRED
            if k in seen and seen[k] != getattr(f, k)
        ]
        if wrong:
            raise ArchiveError(
                f"litemq: archived file {path} is not the file the manifest lists there: "
                + ", ".join(wrong)
            )
        self._checked.add(f.path)

    def _check_ends_ranged(self, f: ArchiveFile, path: str) -> None:
        if f.path in self._checked:
            return
        if f.size < _DATA_HEADER_USED + _FOOTER:
            raise CorruptedError(
                f"litemq: archived file {path} is listed with {f.size} bytes, too few for a "
                "sealed data file"
            )
        tail = _read_range(self._fs, path, f.size - _FOOTER, _FOOTER)
        self._check_ends(f, path, self._head(f, path), tail)

    def _head(self, f: ArchiveFile, path: str) -> bytes:
        """The header of archived data file ``f`` (its first 4 KiB), fetched once."""
        head = self._heads.get(f.path)
        if head is None:
            head = _read_range(self._fs, path, 0, min(_DATA_HEADER_LEN, f.size - _FOOTER))
            self._heads[f.path] = head
        return head

    def _data_path(self, f: ArchiveFile) -> str:
        return _join(self._root, f.path)

    def read_file(
        self,
        f: ArchiveFile,
        start: int,
        end: int,
        columns: tuple[str, ...] = arrow.DEFAULT_FIELDS,
        *,
        raw: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Messages ``[start, end)`` of archived data file ``f`` (payloads as stored with
        ``raw``)."""
        first, last = int(f.first_seq or 0), int(f.end_seq or 0)
        start, end = max(start, first), min(end, last)
        if start >= end:
            return
        flags: dict[str, Any] = {"columns": list(columns), "raw": raw}
        path = self._data_path(f)
        # All of a file: fetch it whole and check its footer's frames_crc once. Part of one
        # (a Spark partition cut by rowsPerPartition, a small range): fetch only its bytes,
        # found through the dense index, and check each frame's own CRC; fetching the whole
        # file for each part would multiply the bytes read.
        if start == first and end == last:
            yield from self._read_whole(f, path, start, end, columns, flags)
            return
        self._check_ends_ranged(f, path)
        span = self._range_of(f, start, end)
        if span is None:  # no usable dense index: fetch the file
            yield from self._read_whole(f, path, start, end, columns, flags)
            return
        lo_off, hi_off = span
        # Four bytes more: the length word at the end. In a compacted file a
        # dense entry of a sequence key compaction dropped points into a hole,
        # where the bytes are zeros: such an entry (at either end) sends us to
        # the whole file.
        buf = _read_range(self._fs, path, lo_off, hi_off - lo_off + 4)
        if not any(buf[:4]) or not any(buf[-4:]):
            yield from self._read_whole(f, path, start, end, columns, flags)
            return
        buf = buf[:-4]
        seq, at = start, lo_off
        while seq < end:
            cols = _decode_frames(
                buf[at - lo_off :],
                path,
                at,
                seq,
                end - seq,
                unlock=self._unlock,
                head=self._head(f, path),
                **flags,
            )
            n = int(cols["rows"])
            if n == 0 and int(cols["next_seq"]) == seq:
                raise CorruptedError(f"litemq: no message decoded at {path} offset {at}")
            yield arrow.record_batch(cols, columns)
            seq = int(cols["next_seq"])  # past holes (key compaction) too
            at = int(cols["next_offset"])

    def _read_whole(
        self,
        f: ArchiveFile,
        path: str,
        start: int,
        end: int,
        columns: tuple[str, ...],
        flags: dict[str, Any],
    ) -> Iterator[pa.RecordBatch]:
        data = _read_all(self._fs, path)
        if len(data) != f.size:
            raise CorruptedError(
                f"litemq: archived file {path} is {len(data)} bytes, the manifest says {f.size}"
            )
        self._check_ends(f, path, data[:_DATA_HEADER_USED], data[-_FOOTER:])
        seq = start
        while seq < end:
            cols = _decode_sealed(data, path, seq, end, end - seq, unlock=self._unlock, **flags)
            n = int(cols["rows"])
            nxt = int(cols["next_seq"])
            if n == 0 and nxt <= seq:
                raise CorruptedError(f"litemq: no message decoded in {path} at seq {seq}")
            if n:
                yield arrow.record_batch(cols, columns)
            seq = nxt  # past holes (key compaction) too

    def _range_of(self, f: ArchiveFile, start: int, end: int) -> tuple[int, int] | None:
        """Byte range ``[offset of start, offset of end)`` from the dense index, checked;
        None when there is no dense index or an entry fails its check."""
        rel = f.path[: -len(".data")] + ".offsets"
        entry = self._by_path.get(rel)
        if entry is None:
            return None
        first = int(f.first_seq or 0)
        opath = _join(self._root, rel)
        if rel not in self._checked:
            names = _dense_header(_read_range(self._fs, opath, 0, _index_header_len("offsets")))
            if names is None:  # damaged: an index is never the truth, read the whole file
                return None
            if names != (f.file_number, f.first_seq):
                raise ArchiveError(
                    f"litemq: archived dense index {opath} belongs to file number {names[0]} "
                    f"from sequence {names[1]}, not to {f.path} (file number {f.file_number} "
                    f"from sequence {f.first_seq}) as the manifest says"
                )
            self._checked.add(rel)

        def offset_of(seq: int) -> int | None:
            at, size = _dense_entry_range(seq, first)
            if at + size > entry.size:
                return None
            (word,) = struct.unpack("<Q", _read_range(self._fs, opath, at, size))
            off = _dense_offset(word, seq, f.size)
            return None if off is None else int(off)

        lo = offset_of(start)
        hi = int(f.frames_end or 0) if end >= int(f.end_seq or 0) else offset_of(end)
        if hi is not None and end < int(f.end_seq or 0) and offset_of(end - 1) == hi:
            # `end - 1` and `end` share a frame: a batch (format 9), whose
            # members' entries all point at it. The range ends after it.
            after = _frame_next(hi, _read_range(self._fs, self._data_path(f), hi, 4))
            hi = None if after is None else int(after)
        if lo is None or hi is None or hi <= lo:
            return None
        return lo, hi


def open_archive(
    uri: str | os.PathLike[str],
    filesystem: pafs.FileSystem | None = None,
    encryption_key: bytes | None = None,
) -> Archive:
    """Open the archive at ``uri`` (a path, ``file://``, ``s3://``, ... as ``pyarrow.fs``
    understands) for reading. FileNotFoundError when it has no manifest. An archive of an
    encrypted queue needs the queue's ``encryption_key`` (EncryptionError without it,
    WrongKeyError with another one)."""
    return Archive(uri, filesystem, encryption_key)


def find_archives(uri: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``(name, archive uri)`` of the archive at ``uri`` or of every archive below it
    (skipping names that start with ``_`` or ``.``), sorted by name. An archive given
    directly is named after its last path component; one found below, by its path relative
    to ``uri`` (as the Spark source names queues)."""
    import pyarrow.fs as pafs

    text = os.fspath(uri).rstrip("/")
    fs, root = resolve(text)
    if _exists(fs, _join(root, MANIFEST)) is not None:
        return [(os.path.basename(root.rstrip("/")) or root, text)]
    try:
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    except FileNotFoundError:
        return []
    found = []
    for info in infos:
        if info.type != pafs.FileType.File or not info.path.endswith("/" + MANIFEST):
            continue
        rel = info.path[len(root) :].strip("/")[: -len(MANIFEST)].strip("/")
        if any(part.startswith(("_", ".")) for part in rel.split("/")):
            continue
        found.append((rel, _with_path(text, rel)))
    return sorted(found)


def _with_path(uri: str, rel: str) -> str:
    """``uri`` with ``/rel`` appended to its path (before any ``?query``)."""
    base, sep, query = uri.partition("?")
    return f"{base.rstrip('/')}/{rel}{sep}{query}"


def key_from_file(key_file: str | os.PathLike[str] | None) -> bytes | None:
    """The key in ``key_file`` (32 raw bytes or 64 hex digits), as ``open_archive`` takes
    it; None for None."""
    if key_file is None:
        return None
    with open(key_file, "rb") as f:
        raw = f.read()
    return raw if len(raw) == 32 else bytes.fromhex(raw.decode("ascii").strip())


def _main_progress(enabled: bool | None) -> IO[str] | None:
    if enabled is None:
        enabled = sys.stderr.isatty()
    return sys.stderr if enabled else None


#: Bytes 52..56 of a data file's header: the schema version of its rows (0: untyped).
_SCHEMA_VERSION_AT = 52


def _schema_of(meta: bytes) -> dict[str, Any] | None:
    """metadata.json's ``schema`` object (its versions), None for an untyped queue."""
    try:
        doc = json.loads(meta)
    except ValueError:
        return None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    return schema if isinstance(schema, dict) and schema.get("versions") else None


def _typed_part(
    batch: pa.RecordBatch,
    doc: str,
    version: int,
    read: list[str],
    names: tuple[str, ...],
    fields: dict[str, dict[str, Any]],
    path: str,
) -> pa.RecordBatch:
    """The typed batch of one file's untyped ``seq``, ``timestamp``, ``payload`` batch."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from litemq import _typed

    payload = batch.column("payload").cast(pa.large_binary())
    _, offsets, data = payload.buffers()
    seq = batch.column("seq")
    if seq.offset:
        seq = pa.concat_arrays([seq])  # the buffer from the column's first row
    seqs = seq.buffers()[1][: 8 * len(seq)]
    cols = _typed_rows(doc, version, read, b"" if data is None else data, offsets, seqs, path)
    keep = pa.array(cols["keep"], pa.bool_())
    cols["seq"] = pc.filter(batch.column("seq"), keep).buffers()[1]
    cols["timestamp"] = pc.filter(batch.column("timestamp"), keep).buffers()[1]
    return _typed.record_batch(cols, names, read, fields)
