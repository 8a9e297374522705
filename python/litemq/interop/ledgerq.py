"""LedgerQ segments, read: the entries of a LedgerQ queue directory, checked and
mapped onto litemq messages (``litemq import-ledgerq DIR QUEUE``).

The layout, as we read it, is in docs/FORMAT.md, "LedgerQ segments (read)":
``{base:020d}.log`` segment files (a 64-byte header, then entries) and
``{base:020d}.idx`` sparse indexes, little-endian, every header and entry
checked by its CRC-32C. Nothing here writes LedgerQ files.

>>> report = import_ledgerq("/var/lib/ledgerq/orders", "/tmp/orders")
>>> report.imported, report.skipped
(1000, [])
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from litemq._litemq import LiteMQError, _crc32c

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED",
    "ImportReport",
    "LedgerQEntry",
    "LedgerQError",
    "import_ledgerq",
    "read_index",
    "read_segment",
    "segments",
]

SEGMENT_MAGIC = 0x4C445151  # "LDQQ"
INDEX_MAGIC = 0x4C445149  # "LDQI"
SEGMENT_HEADER_LEN = 64
INDEX_HEADER_LEN = 32
INDEX_ENTRY_LEN = 24
#: Length word, type, flags, message id, timestamp: what every entry starts with.
ENTRY_FIXED_LEN = 22
#: The smallest length word: the fixed fields and the CRC.
MIN_ENTRY_LEN = ENTRY_FIXED_LEN + 4
VERSION = 1

TYPE_DATA = 1
TYPE_TOMBSTONE = 2
TYPE_CHECKPOINT = 3
FLAG_COMPRESSED = 0x01
FLAG_ENCRYPTED = 0x02
FLAG_TTL = 0x04
FLAG_HEADERS = 0x08
FLAG_PRIORITY = 0x10
KNOWN_FLAGS = 0x1F
COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
SEGMENT_FLAG_ENCRYPTED = 0x02
#: LedgerQ's MaxDecompressedSize: a payload that inflates past it is skipped.
DEFAULT_MAX_DECOMPRESSED = 100 << 20


class LedgerQError(LiteMQError, ValueError):
    """A LedgerQ file is not what the format says (the message says where and why).

    ``reason`` is the message without its place; ``path`` the file (None when the
    bytes were handed over, not read from a file); ``offset`` the byte of the entry
    in its segment, when the fault is in an entry.
    """

    def __init__(
        self, reason: str, *, path: str | os.PathLike[str] | None = None, offset: int | None = None
    ) -> None:
        if path is not None:
            message = f"{path}: {reason}"
        elif offset is not None:
            message = f"entry at {offset}: {reason}"
        else:
            message = reason
        super().__init__(message)
        self.reason = reason
        self.path = path
        self.offset = offset


@dataclass(frozen=True, slots=True)
class LedgerQEntry:
    """One entry of a segment, its CRC checked, its fields decoded."""

    offset: int
    type: int
    flags: int
    msg_id: int
    timestamp_ns: int
    priority: int
    expires_at_ns: int | None
    headers: dict[str, str | bytes]
    compression: int | None
    payload: bytes


@dataclass
class ImportReport:
    """What an import read, appended and skipped (each skip with its reason)."""

    segments: int = 0
    entries: int = 0
    imported: int = 0
    tombstones: int = 0
    skipped: list[str] = field(default_factory=list)
    skipped_bytes: int = 0
    index_problems: list[str] = field(default_factory=list)


def segments(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """``(base offset, path)`` of every ``{base:020d}.log`` file, by base offset."""
    out = []
    for p in Path(directory).iterdir():
        if p.suffix == ".log" and p.stem.isdigit() and len(p.stem) == 20 and p.is_file():
            out.append((int(p.stem), p))
    return sorted(out)


def _check_header(data: bytes, path: Path) -> tuple[int, int]:
    """Checks a segment header; returns its base offset and flags."""
    if len(data) < SEGMENT_HEADER_LEN:
        raise LedgerQError("shorter than the 64-byte segment header", path=path)
    (stored,) = struct.unpack_from("<I", data, 60)
    if _crc32c(data[:60]) != stored:
        raise LedgerQError("segment header CRC-32C mismatch", path=path)
    magic, version, flags, base = struct.unpack_from("<IHHQ", data, 0)
    if magic != SEGMENT_MAGIC:
        raise LedgerQError(f"magic {magic:#010x} is not a LedgerQ segment's", path=path)
    if version != VERSION:
        raise LedgerQError(f"segment version {version} (this reader knows 1)", path=path)
    return base, flags


def _entry_bounds(data: bytes, at: int, length: int) -> tuple[int, int] | None:
    """``(crc_at, next_entry_at)`` for the entry at `at` whose CRC checks, else None.

    LedgerQ writes a length word that counts itself (the 22-byte fixed part
    includes it), the CRC-32C at ``at + length - 4`` over ``[at, crc_at)``,
    then 4 zero bytes: the next entry starts at ``at + 4 + length``. The
    seed's own wording (the length excludes the word) puts the CRC at
    ``at + length`` instead; both framings agree on where the next entry is,
    and the one whose CRC matches is taken.
    """
    end = at + 4 + length
    if end > len(data):
        return None
    for crc_at in (at + length - 4, at + length):
        (stored,) = struct.unpack_from("<I", data, crc_at)
        if _crc32c(data[at:crc_at]) == stored:
            return crc_at, end
    return None


def _parse_entry(data: bytes, at: int, crc_at: int) -> LedgerQEntry:
    kind, flags, msg_id, ts = struct.unpack_from("<BBQq", data, at + 4)
    pos = at + ENTRY_FIXED_LEN
    priority = 0
    expires = None
    headers: dict[str, str | bytes] = {}
    compression = None

    def need(n: int, what: str) -> None:
        if pos + n > crc_at:
            raise LedgerQError(f"{what} runs past the entry", offset=at)

    if flags & FLAG_PRIORITY:
        need(1, "priority")
        priority = data[pos]
        pos += 1
    if flags & FLAG_TTL:
        need(8, "expiry")
        (expires,) = struct.unpack_from("<q", data, pos)
        pos += 8
    if flags & FLAG_HEADERS:
        need(2, "header count")
        (count,) = struct.unpack_from("<H", data, pos)
        pos += 2
        for _ in range(count):
            parts = []
            for what in ("header name", "header value"):
                need(2, what)
                (n,) = struct.unpack_from("<H", data, pos)
                pos += 2
                need(n, what)
                parts.append(data[pos : pos + n])
                pos += n
            name, value = parts
            try:
                text: str | bytes = value.decode()
            except UnicodeDecodeError:
                text = value
            headers[name.decode(errors="backslashreplace")] = text
    if flags & FLAG_COMPRESSED:
        need(1, "compression type")
        compression = data[pos]
        pos += 1
    return LedgerQEntry(
        offset=at,
        type=kind,
        flags=flags,
        msg_id=msg_id,
        timestamp_ns=ts,
        priority=priority,
        expires_at_ns=expires,
        headers=headers,
        compression=compression,
        payload=data[pos:crc_at],
    )


def read_segment(
    path: str | os.PathLike[str], skipped: list[str] | None = None
) -> Iterator[LedgerQEntry]:
    """The entries of one segment file, each checked by its CRC-32C.

    A header that does not check raises `LedgerQError`. Reading stops at a
    zero length word or the end of the file; an entry whose CRC does not
    match (or that runs past the file) stops the segment, since what
    follows cannot be framed: it is reported in `skipped` with the bytes left.
    """
    path = Path(path)
    data = path.read_bytes()
    _check_header(data, path)
    at = SEGMENT_HEADER_LEN
    while at + 4 <= len(data):
        (length,) = struct.unpack_from("<I", data, at)
        if length == 0:
            break
        bounds = _entry_bounds(data, at, length) if length >= MIN_ENTRY_LEN else None
        if bounds is None:
            if skipped is not None:
                what = "runs past the end" if at + 4 + length > len(data) else "fails its CRC-32C"
                skipped.append(
                    f"{path.name}: entry at offset {at} {what}; "
                    f"{len(data) - at} bytes from there not read"
                )
            return
        crc_at, nxt = bounds
        yield _parse_entry(data, at, crc_at)
        at = nxt


def read_index(path: str | os.PathLike[str]) -> list[tuple[int, int, int]]:
    """``(msg_id, file_offset, timestamp_ns)`` of a ``.idx`` file; its header checked."""
    path = Path(path)
    data = path.read_bytes()
    if len(data) < INDEX_HEADER_LEN:
        raise LedgerQError("shorter than the 32-byte index header", path=path)
    (stored,) = struct.unpack_from("<I", data, 28)
    if _crc32c(data[:28]) != stored:
        raise LedgerQError("index header CRC-32C mismatch", path=path)
    magic, version, _pad, _base, count = struct.unpack_from("<IHHQQ", data, 0)
    if magic != INDEX_MAGIC or version != VERSION:
        raise LedgerQError(f"not a version-1 LedgerQ index (magic {magic:#010x})", path=path)
    if INDEX_HEADER_LEN + count * INDEX_ENTRY_LEN > len(data):
        raise LedgerQError(f"{count} entries declared, the file holds fewer", path=path)
    return [
        struct.unpack_from("<QQq", data, INDEX_HEADER_LEN + i * INDEX_ENTRY_LEN)
        for i in range(count)
    ]


def _inflate(payload: bytes, limit: int) -> bytes:
    """A gzip payload decompressed, refusing more than `limit` bytes."""
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(payload, limit + 1)
    if len(out) > limit:
        raise LedgerQError(f"decompresses past the limit of {limit} bytes")
    if not d.eof:
        raise LedgerQError("gzip stream is truncated")
    return out


def import_ledgerq(
    directory: str | os.PathLike[str],
    queue: str | os.PathLike[str],
    *,
    progress: Callable[[int, int], None] | None = None,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED,
) -> ImportReport:
    """Appends the entries of every segment in `directory` to the litemq queue at `queue`.

    Data entries become messages: the payload (gzip-compressed ones
    decompressed; the queue's own ``compression`` option then applies),
    ``priority``, ``expires_at`` (ns to µs) and the headers, plus the headers
    ``ledgerq.msg_id`` and ``ledgerq.timestamp`` (ns since the epoch, as
    text: litemq stamps its own time). Tombstones become tombstones
    (``Appender.delete``) whose key is their payload, or ``ledgerq:<msg_id>``
    when it is empty. Checkpoints, encrypted entries and segments, unknown
    types, flags or codecs, and damaged entries are skipped and reported.
    Index files are checked (header CRC, each entry at the offset and
    message id it names) and reported on; the import does not need them.
    `progress(done, total)` is called with segment bytes.
    """
    import litemq

    report = ImportReport()
    found = segments(directory)
    total = sum(p.stat().st_size for _, p in found)
    done = 0
    with litemq.Queue(queue) as q:
        app = q.appender()
        for _base, path in found:
            report.segments += 1
            head = path.read_bytes()[:SEGMENT_HEADER_LEN]
            try:
                _base_offset, seg_flags = _check_header(head, path)
            except LedgerQError as err:
                report.skipped.append(str(err))
                report.skipped_bytes += path.stat().st_size
                continue
            if seg_flags & SEGMENT_FLAG_ENCRYPTED:
                report.skipped.append(f"{path.name}: encrypted segment")
                report.skipped_bytes += path.stat().st_size
                continue
            read: dict[int, int] = {}
            batch: list[dict[str, object]] = []
            for entry in read_segment(path, report.skipped):
                report.entries += 1
                read[entry.offset] = entry.msg_id
                item = _message(entry, path.name, report, max_decompressed_size)
                if item is None:
                    continue
                if item.get("tombstone"):
                    if batch:
                        app.append_batch(batch)
                        batch = []
                    app.delete(item["key"])  # type: ignore[arg-type]
                    report.tombstones += 1
                    continue
                batch.append(item)
                report.imported += 1
                if len(batch) >= 1000:
                    app.append_batch(batch)
                    batch = []
            if batch:
                app.append_batch(batch)
            _check_index(path, read, report)
            done += path.stat().st_size
            if progress is not None:
                progress(done, total)
        app.flush()
    return report


def _message(
    e: LedgerQEntry, where: str, report: ImportReport, limit: int
) -> dict[str, object] | None:
    """The append_batch item for an entry, or None (with the reason reported)."""

    def skip(why: str) -> None:
        report.skipped.append(f"{where}: entry {e.msg_id} at offset {e.offset}: {why}")

    if e.type == TYPE_CHECKPOINT:
        skip("checkpoint (LedgerQ's own bookkeeping)")
        return None
    if e.type not in (TYPE_DATA, TYPE_TOMBSTONE):
        skip(f"unknown entry type {e.type}")
        return None
    if e.flags & ~KNOWN_FLAGS:
        skip(f"unknown flags {e.flags:#04x}")
        return None
    if e.flags & FLAG_ENCRYPTED:
        skip("encrypted payload")
        return None
    payload = e.payload
    if e.compression not in (None, COMPRESSION_NONE):
        if e.compression != COMPRESSION_GZIP:
            skip(f"unknown compression type {e.compression}")
            return None
        try:
            payload = _inflate(payload, limit)
        except (LedgerQError, zlib.error) as err:
            skip(f"gzip payload: {err}")
            return None
    if e.type == TYPE_TOMBSTONE:
        key: str | bytes = payload if payload else f"ledgerq:{e.msg_id}"
        return {"tombstone": True, "key": key}
    headers: dict[str, str | bytes] = dict(e.headers)
    headers["ledgerq.msg_id"] = str(e.msg_id)
    headers["ledgerq.timestamp"] = str(e.timestamp_ns)
    bad = [n for n in headers if not 1 <= len(n.encode()) <= 255]
    if len(headers) > 255 or bad:
        skip("headers litemq cannot hold (more than 255, or a name of 0 or over 255 bytes)")
        return None
    item: dict[str, object] = {"payload": payload, "headers": headers}
    if e.priority:
        item["priority"] = e.priority
    if e.expires_at_ns is not None and e.expires_at_ns > 0:
        item["expires_at"] = e.expires_at_ns // 1000
    return item


def _check_index(segment: Path, read: dict[int, int], report: ImportReport) -> None:
    """Checks the segment's index against the entries read (offset -> msg id)."""
    idx = segment.with_suffix(".idx")
    if not idx.exists():
        return
    try:
        entries = read_index(idx)
    except LedgerQError as e:
        report.index_problems.append(str(e))
        return
    wrong = [(m, off) for m, off, _ts in entries if read.get(off) != m]
    if wrong:
        m, off = wrong[0]
        report.index_problems.append(
            f"{idx.name}: {len(wrong)} of {len(entries)} entries do not point at their "
            f"message (first: msg {m} at offset {off})"
        )
