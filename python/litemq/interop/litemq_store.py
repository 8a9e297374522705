"""Read and write LiteMQ broker stores: ``commitlog/`` and ``consumequeue/``, byte for byte.

A LiteMQ broker (a Go message broker modelled on RocketMQ; not this project) keeps every
message of every topic in one commit log, a run of files named by 20-digit numbers, each a
sequence of ``u32 length | record`` with the record encoded big-endian behind the magic
``0x4C4D5101``; per topic and queue id it keeps a consume queue of 24-byte entries pointing
into the commit log. ``docs/FORMAT.md`` ("LiteMQ broker stores") describes every byte.

>>> from litemq.interop.litemq_store import LiteMQRecord, LiteMQStore, StoreWriter
>>> with StoreWriter("/tmp/broker", file_size=1 << 20) as w:
...     w.append(LiteMQRecord(message_id="m-1", topic="orders", tags=("paid",), body=b"hi"))
0
>>> with LiteMQStore("/tmp/broker") as store:
...     for stored in store.records():
...         print(stored.offset, stored.record.topic, stored.record.body)
...     print(store.skipped)
0 orders b'hi'
[]

Reading is liberal, as a reader of files written by a foreign, crashing program must be:
bytes left inside a record after its last field are kept (``LiteMQRecord.trailing``; LiteMQ's
own encoder leaves six zero bytes there), a zero-filled tail of a preallocated file ends the
file, and a partly written record, a garbage length or an undecodable record is skipped and
reported in ``LiteMQStore.skipped`` (file, offset, length, reason); reading goes on at the next
record it can find. Only asking for something that is not there raises
(:class:`RecordNotFoundError`, :class:`StoreNotFoundError`).

Strings are UTF-8; bytes that are not valid UTF-8 are decoded with ``surrogateescape`` so that
encoding the record again gives back the same bytes.
"""

from __future__ import annotations

import enum
import mmap
import os
import re
import struct
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from litemq._litemq import LiteMQError, PoisonedError

__all__ = [
    "CONSUME_QUEUE_ENTRY_SIZE",
    "DEFAULT_CONSUME_QUEUE_FILE_SIZE",
    "DEFAULT_FILE_SIZE",
    "HEADER_PREFIX",
    "MAGIC",
    "MIN_RECORD_SIZE",
    "PROPERTIES_HEADER",
    "PROPERTY_PREFIX",
    "CommitLogFile",
    "ConsumeQueueEntry",
    "HeaderError",
    "ImportReport",
    "LiteMQRecord",
    "LiteMQStore",
    "LiteMQStoreError",
    "MessageStatus",
    "MessageType",
    "QueueMessage",
    "RecordDecodeError",
    "RecordEncodeError",
    "RecordNotFoundError",
    "SkipReport",
    "StoreExistsError",
    "StoreNotFoundError",
    "StoreWriter",
    "StoredRecord",
    "WriterPoisonedError",
    "decode_record",
    "export_queue",
    "import_store",
    "is_imported",
    "record_from_message",
    "record_to_message",
    "tag_hash",
]

#: The first four bytes of every record: "LMQ" and format version 1.
MAGIC = 0x4C4D5101
_MAGIC_BYTES = MAGIC.to_bytes(4, "big")
#: A consume queue entry: commit-log offset i64, size i32, tag hash u32, timestamp i64.
CONSUME_QUEUE_ENTRY_SIZE = 24
#: LiteMQ's defaults (configs/broker.toml): 1 GiB commit-log files, 600 MB consume queues.
DEFAULT_FILE_SIZE = 1 << 30
DEFAULT_CONSUME_QUEUE_FILE_SIZE = 600_000_000

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_ENTRY = struct.Struct(">qiIq")
# After the body: type, priority, reliability (u8 each), delay time (i64).
_AFTER_BODY = struct.Struct(">BBBq")
# After the store host: queue id u32, queue offset i64, commit-log offset i64, store size u32,
# store timestamp i64, consume start and end i64, consume count u32.
_STORE_FIELDS = struct.Struct(">IqqIqqqI")
_FILLED = struct.Struct(">qqI")  # queue offset, commit-log offset, store size
#: The smallest record: every string, list and body empty.
MIN_RECORD_SIZE = 4 + 2 + 2 + 4 + 4 + 4 + 4 + _AFTER_BODY.size + 2 + 1 + 2 + 1 + 8 + 2 + 2
MIN_RECORD_SIZE += _STORE_FIELDS.size
_NAME = re.compile(r"^[0-9]{20}$")
_CHUNK = 1 << 20


class LiteMQStoreError(LiteMQError):
    """Base of the errors of :mod:`litemq.interop.litemq_store`."""


class StoreNotFoundError(LiteMQStoreError, FileNotFoundError):
    """The path holds no LiteMQ store (no ``commitlog/`` directory, no commit-log file)."""


class RecordNotFoundError(LiteMQStoreError, LookupError):
    """What was asked for is not in the store: no record at an offset, no such consume queue."""


class RecordDecodeError(LiteMQStoreError, ValueError):
    """Bytes that do not decode as a record; ``at`` is the offset in the record of the field."""

    def __init__(self, reason: str, at: int) -> None:
        super().__init__(f"{reason} (at byte {at} of the record)")
        self.reason = reason
        self.at = at


class RecordEncodeError(LiteMQStoreError, ValueError):
    """A value the format cannot hold: a string over 65,535 bytes, a number out of range."""


class StoreExistsError(LiteMQStoreError, FileExistsError):
    """The writer's directory already holds a commit log."""


class HeaderError(LiteMQStoreError, ValueError):
    """A litemq message's headers do not describe a LiteMQ record."""


class MessageType(enum.IntEnum):
    """``LiteMQRecord.message_type`` as LiteMQ defines it (other values are read as ints)."""

    NORMAL = 0
    DELAY = 1
    TRANSACTION = 2
    BROADCAST = 3
    ORDER = 4


class MessageStatus(enum.IntEnum):
    """``LiteMQRecord.status`` as LiteMQ's code defines it (``pkg/protocol/message.go``).

    LiteMQ's storage document lists 2 as Committed and 3 as Rollback; the code that writes
    the records says 2 is Rollback and 3 Commit, and adds 4, Dead: the code is followed here.
    """

    NORMAL = 0
    PREPARED = 1
    ROLLBACK = 2
    COMMIT = 3
    DEAD = 4


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@dataclass(frozen=True, slots=True)
class LiteMQRecord:
    """One LiteMQ message as its record stores it: every field, in the record's order.

    Times are milliseconds since the Unix epoch, as LiteMQ writes them. ``properties`` keeps
    the pairs in the record's order (LiteMQ writes a Go map, in no set order);
    :attr:`properties_dict` gives them as a dict. ``trailing`` holds bytes found in the record
    after its last field (LiteMQ's Go encoder sizes its buffer 6 bytes too large, so records
    it writes end with six zero bytes): kept so that :meth:`encode` gives the same bytes back.
    """

    message_id: str = ""
    topic: str = ""
    tags: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    message_type: int = MessageType.NORMAL
    priority: int = 0
    reliability: int = 0
    delay_time: int = 0
    transaction_id: str = ""
    status: int = MessageStatus.NORMAL
    sharding_key: str = ""
    broadcast: int = 0
    born_timestamp: int = 0
    born_host: str = ""
    store_host: str = ""
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    store_size: int = 0
    store_timestamp: int = 0
    consume_start_time: int = 0
    consume_end_time: int = 0
    consume_count: int = 0
    trailing: bytes = b""

    @property
    def properties_dict(self) -> dict[str, str]:
        """The properties as a dict (a name written twice keeps its last value, as in LiteMQ)."""
        return dict(self.properties)

    @property
    def encoded_size(self) -> int:
        """The record's length in bytes, without the 4-byte length prefix."""
        return len(self.encode())

    def encode(self) -> bytes:
        """The record's bytes (without the length prefix), as LiteMQ's ``Message.Encode``.

        Raises :class:`LiteMQStoreError` (a ``ValueError`` too) for a value the format cannot
        hold: a string over 65,535 bytes, an integer out of its field's range.
        """
        out = bytearray(_MAGIC_BYTES)
        try:
            _put_str(out, self.message_id, "message_id")
            _put_str(out, self.topic, "topic")
            for name, items in (("tags", self.tags), ("keys", self.keys)):
                out += _U32.pack(len(items))
                for item in items:
                    _put_str(out, item, name)
            out += _U32.pack(len(self.properties))
            for pname, value in self.properties:
                _put_str(out, pname, "property name")
                _put_str(out, value, "property value")
            out += _U32.pack(len(self.body))
            out += self.body
            out += _AFTER_BODY.pack(
                self.message_type, self.priority, self.reliability, self.delay_time
            )
            _put_str(out, self.transaction_id, "transaction_id")
            out.append(self.status)
            _put_str(out, self.sharding_key, "sharding_key")
            out.append(self.broadcast)
            out += _I64.pack(self.born_timestamp)
            _put_str(out, self.born_host, "born_host")
            _put_str(out, self.store_host, "store_host")
            out += _STORE_FIELDS.pack(
                self.queue_id,
                self.queue_offset,
                self.commit_log_offset,
                self.store_size,
                self.store_timestamp,
                self.consume_start_time,
                self.consume_end_time,
                self.consume_count,
            )
        except (struct.error, ValueError, OverflowError) as e:
            raise RecordEncodeError(f"cannot encode the record {self.message_id!r}: {e}") from None
        out += self.trailing
        return bytes(out)


def _put_str(out: bytearray, text: str, what: str) -> None:
    raw = _raw(text)
    if len(raw) > 0xFFFF:
        raise ValueError(f"{what} is {len(raw):,} bytes; the format holds up to 65,535")
    out += _U16.pack(len(raw))
    out += raw


class _Cursor:
    """Reads a record's fields in order; a field past the end is a RecordDecodeError."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 4

    def take(self, n: int, what: str) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise RecordDecodeError(
                f"{what} ({n:,} bytes) runs past the record's end ({len(self.data):,} bytes)",
                self.pos,
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def unpack(self, st: struct.Struct, what: str) -> tuple[int, ...]:
        return st.unpack(self.take(st.size, what))

    def string(self, what: str) -> str:
        (n,) = self.unpack(_U16, f"{what} length")
        return _text(self.take(n, what))

    def strings(self, what: str) -> tuple[str, ...]:
        (count,) = self.unpack(_U32, f"{what} count")
        if count * 2 > len(self.data) - self.pos:
            raise RecordDecodeError(
                f"{what} count {count:,} cannot fit in the {len(self.data) - self.pos:,} "
                "bytes left",
                self.pos - 4,
            )
        return tuple(self.string(what[:-1]) for _ in range(count))


def decode_record(data: bytes) -> LiteMQRecord:
    """Decode one record (the bytes after its length prefix), as LiteMQ's ``Decode``.

    Bytes after the last field are kept in ``trailing``. Raises :class:`RecordDecodeError`
    for a wrong magic or a field that runs past the end.
    """
    data = bytes(data)
    if len(data) < 4:
        raise RecordDecodeError(f"a record is at least 4 bytes, got {len(data)}", 0)
    magic = int.from_bytes(data[:4], "big")
    if magic != MAGIC:
        raise RecordDecodeError(f"magic is 0x{magic:08X}, not 0x{MAGIC:08X}", 0)
    c = _Cursor(data)
    message_id = c.string("message id")
    topic = c.string("topic")
    tags = c.strings("tags")
    keys = c.strings("keys")
    (count,) = c.unpack(_U32, "properties count")
    if count * 4 > len(data) - c.pos:
        raise RecordDecodeError(
            f"properties count {count:,} cannot fit in the {len(data) - c.pos:,} bytes left",
            c.pos - 4,
        )
    properties = tuple(
        (c.string("property name"), c.string("property value")) for _ in range(count)
    )
    (body_len,) = c.unpack(_U32, "body length")
    body = c.take(body_len, "body")
    message_type, priority, reliability, delay_time = c.unpack(_AFTER_BODY, "message type")
    transaction_id = c.string("transaction id")
    (status,) = c.take(1, "message status")
    sharding_key = c.string("sharding key")
    (broadcast,) = c.take(1, "broadcast flag")
    (born_timestamp,) = c.unpack(_I64, "born timestamp")
    born_host = c.string("born host")
    store_host = c.string("store host")
    store = c.unpack(_STORE_FIELDS, "queue id and the store fields")
    return LiteMQRecord(
        message_id=message_id,
        topic=topic,
        tags=tags,
        keys=keys,
        properties=properties,
        body=body,
        message_type=message_type,
        priority=priority,
        reliability=reliability,
        delay_time=delay_time,
        transaction_id=transaction_id,
        status=status,
        sharding_key=sharding_key,
        broadcast=broadcast,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_host=store_host,
        queue_id=store[0],
        queue_offset=store[1],
        commit_log_offset=store[2],
        store_size=store[3],
        store_timestamp=store[4],
        consume_start_time=store[5],
        consume_end_time=store[6],
        consume_count=store[7],
        trailing=data[c.pos :],
    )


def tag_hash(tags: Iterable[str]) -> int:
    """The consume queue's tag hash: 32-bit FNV-1a over each tag's UTF-8 and a zero byte.

    0 for a message without tags (LiteMQ's ``calculateTagHash``).
    """
    h = 0x811C9DC5
    seen = False
    for tag in tags:
        seen = True
        for b in _raw(tag) + b"\x00":
            h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h if seen else 0


@dataclass(frozen=True, slots=True)
class SkipReport:
    """Bytes the reader could not read as records, and why; reading went on after them."""

    file: str  # the file's path
    offset: int  # in the file
    length: int  # bytes skipped
    reason: str

    def __str__(self) -> str:
        return f"{self.file} offset {self.offset}: skipped {self.length:,} bytes: {self.reason}"


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record where it lies: global commit-log ``offset``, its file, and its ``size``.

    ``size`` counts the 4-byte length prefix, as the consume queue's size does.
    """

    offset: int
    file: str
    file_offset: int
    size: int
    record: LiteMQRecord


@dataclass(frozen=True, slots=True)
class ConsumeQueueEntry:
    """One 24-byte consume queue entry; ``index`` is its position in the consume queue."""

    index: int
    offset: int
    size: int
    tag_hash: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CommitLogFile:
    """A commit-log (or consume queue) file and the global offset of its first byte."""

    path: str
    start: int
    size: int


def _numbered_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _NAME.match(p.name) and p.is_file())


def _layout(files: list[Path]) -> tuple[list[CommitLogFile], Literal["index", "offset"]]:
    """Each file's global start offset, and how the files are named.

    LiteMQ names files by their index (00…00, 00…01, …; every file preallocated to the same
    size, so file i starts at i * file size); RocketMQ-style stores name them by their first
    offset, a multiple of the file size. Names all smaller than the file size are indexes
    (gaps allowed: files deleted); anything else is read as offsets.
    """
    sizes = [p.stat().st_size for p in files]
    numbers = [int(p.name) for p in files]
    full = max(sizes, default=0)
    if all(n < full for n in numbers):
        out = [
            CommitLogFile(str(p), n * full, s)
            for p, n, s in zip(files, numbers, sizes, strict=True)
        ]
        return out, "index"
    return [
        CommitLogFile(str(p), n, s) for p, n, s in zip(files, numbers, sizes, strict=True)
    ], "offset"


class _Mapped:
    """A file's bytes, read-only: an mmap (closed by close()) or b"" for an empty file."""

    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            self.data: mmap.mmap | bytes = (
                mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
            )
        finally:
            os.close(fd)

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()


def _zero_until(data: mmap.mmap | bytes, start: int) -> int:
    """The offset of the first non-zero byte at or after start (len(data) if none)."""
    end = len(data)
    at = start
    while at < end:
        chunk = data[at : min(at + _CHUNK, end)]
        stripped = chunk.lstrip(b"\x00")
        if stripped:
            return at + len(chunk) - len(stripped)
        at += len(chunk)
    return end


def _boundary(data: mmap.mmap | bytes, at: int) -> bool:
    """Whether a record may end at `at`: the file's end, a zero tail, or the next record."""
    end = len(data)
    if at == end:
        return True
    if data[at : at + 4] == b"\x00\x00\x00\x00" or at + 4 > end:
        return _zero_until(data, at) == end
    return at + 8 <= end and data[at + 4 : at + 8] == _MAGIC_BYTES


def _resync(data: mmap.mmap | bytes, after: int) -> int:
    """The first offset past `after` where a plausible record starts (len(data) if none).

    Plausible: a length that fits in the file, then the magic, then bytes that decode.
    """
    end = len(data)
    search = after + 5
    while True:
        found = data.find(_MAGIC_BYTES, search)
        if found < 0:
            return end
        (length,) = _U32.unpack(data[found - 4 : found])
        if MIN_RECORD_SIZE <= length <= end - found:
            try:
                decode_record(data[found : found + length])
                return found - 4
            except RecordDecodeError:
                pass
        search = found + 1


def _nonzero_end(data: mmap.mmap | bytes, start: int) -> int:
    """The offset just past the last non-zero byte at or after start (start if none)."""
    at = len(data)
    while at > start:
        lo = max(start, at - _CHUNK)
        kept = data[lo:at].rstrip(b"\x00")
        if kept:
            return lo + len(kept)
        at = lo
    return start


def _skip_to(data: mmap.mmap | bytes, pos: int) -> int:
    """Where reading goes on after damage at pos: the next record, else the zero tail.

    Without a next record, the skip ends at the last non-zero byte: a preallocated file's
    zero tail after it is not damage (a record being written by a live broker has its
    length before its bytes, so it shows as a few bytes, not as the rest of the file).
    """
    resume = _resync(data, pos)
    if resume < len(data):
        return resume
    return max(_nonzero_end(data, pos), pos + 1)


def _walk(
    path: str, data: mmap.mmap | bytes, skipped: list[SkipReport]
) -> Iterator[tuple[int, int, LiteMQRecord]]:
    """(file offset, size with prefix, record) of each record in one commit-log file."""
    end = len(data)
    pos = 0
    while pos < end:
        if end - pos < 4:
            if _zero_until(data, pos) < end:
                skipped.append(SkipReport(path, pos, end - pos, "a partial length at the end"))
            return
        (length,) = _U32.unpack(data[pos : pos + 4])
        if length == 0:
            # The zero-filled tail of a preallocated file: the end of its records.
            nonzero = _zero_until(data, pos)
            if nonzero == end:
                return
            resume = _skip_to(data, pos)
            skipped.append(
                SkipReport(
                    path,
                    pos,
                    resume - pos,
                    f"non-zero bytes at offset {nonzero} after a zero length",
                )
            )
            pos = resume
            continue
        if length > end - pos - 4:
            resume = _skip_to(data, pos)
            skipped.append(
                SkipReport(
                    path,
                    pos,
                    resume - pos,
                    f"a record of {length:,} bytes runs past the end of the file "
                    f"({end - pos - 4:,} bytes left): a partly written record or a garbage "
                    "length",
                )
            )
            pos = resume
            continue
        try:
            record = decode_record(data[pos + 4 : pos + 4 + length])
        except RecordDecodeError as e:
            nxt = pos + 4 + length
            resume = nxt if _boundary(data, nxt) else _skip_to(data, pos)
            skipped.append(
                SkipReport(path, pos, resume - pos, f"a record of {length:,} bytes: {e}")
            )
            pos = resume
            continue
        yield pos, 4 + length, record
        pos += 4 + length


class LiteMQStore:
    """A LiteMQ broker store, read-only: its commit log and consume queues.

    ``path`` is the store's directory (``data/broker``, holding ``commitlog/`` and
    ``consumequeue/``) or a commit-log directory itself. Iterating :meth:`records` walks the
    commit log across its files; :meth:`messages` walks one topic and queue id through its
    consume queue; :meth:`get` reads the record at a commit-log offset. What could not be read
    is listed in :attr:`skipped` (each report once, however often it is read).

    Files are mapped read-only. Reading beside a running broker is fine (it appends into
    preallocated files; a record it is writing shows as a skip at the end), but a file
    truncated while mapped (LiteMQ's ``Truncate`` at recovery) makes any mapped reader fail
    with SIGBUS: read a stopped broker's store, or a copy.

    Example::

        with LiteMQStore("data/broker") as store:
            for stored in store.messages("orders", queue_id=0):
                print(stored.offset, stored.record.keys, stored.record.body)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise StoreNotFoundError(f"{self.path}: no such directory")
        commitlog = self.path / "commitlog"
        if commitlog.is_dir():
            self.commitlog_dir = commitlog
        elif _numbered_files(self.path):
            self.commitlog_dir = self.path
        else:
            raise StoreNotFoundError(
                f"{self.path}: not a LiteMQ store (no commitlog/ directory, no commit-log file)"
            )
        self.consumequeue_dir = self.path / "consumequeue"
        self.files, self.naming = _layout(_numbered_files(self.commitlog_dir))
        self.skipped: list[SkipReport] = []
        self._seen: set[SkipReport] = set()
        self._open: dict[str, _Mapped] = {}

    def __repr__(self) -> str:
        return f"LiteMQStore({str(self.path)!r}, files={len(self.files)}, naming={self.naming!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Unmaps the files :meth:`get` and :meth:`messages` keep open."""
        for m in self._open.values():
            m.close()
        self._open.clear()

    def _report(self, found: list[SkipReport]) -> None:
        for r in found:
            if r not in self._seen:
                self._seen.add(r)
                self.skipped.append(r)

    def _mapped(self, path: str) -> mmap.mmap | bytes:
        m = self._open.get(path)
        if m is None:
            m = self._open[path] = _Mapped(path)
        return m.data

    def records(self, start: int = 0) -> Iterator[StoredRecord]:
        """Every record of the commit log in offset order, from global offset ``start``.

        ``start`` need not be a record's offset: records that begin before it are left out.
        """
        for f in self.files:
            if f.start + f.size <= start:
                continue
            yield from (r for r in self.file_records(f) if r.offset >= start)

    def file_records(self, f: CommitLogFile) -> Iterator[StoredRecord]:
        """The records of one commit-log file (one of :attr:`files`)."""
        m = _Mapped(f.path)
        found: list[SkipReport] = []
        try:
            for pos, size, record in _walk(f.path, m.data, found):
                self._report(found)
                found.clear()
                yield StoredRecord(f.start + pos, f.path, pos, size, record)
            self._report(found)
        finally:
            m.close()

    def get(self, offset: int) -> StoredRecord:
        """The record at global commit-log ``offset``.

        Raises :class:`RecordNotFoundError` when no file holds the offset or no whole,
        decodable record starts there.
        """
        for f in self.files:
            if f.start <= offset < f.start + f.size:
                break
        else:
            raise RecordNotFoundError(f"{self.path}: no commit-log file holds offset {offset}")
        data = self._mapped(f.path)
        pos = offset - f.start
        if pos + 4 > len(data):
            raise RecordNotFoundError(f"{f.path}: no record at offset {offset}: end of file")
        (length,) = _U32.unpack(data[pos : pos + 4])
        if length == 0 or pos + 4 + length > len(data):
            what = "a zero length" if length == 0 else f"a length of {length:,} past the end"
            raise RecordNotFoundError(f"{f.path}: no record at offset {offset}: {what}")
        try:
            record = decode_record(data[pos + 4 : pos + 4 + length])
        except RecordDecodeError as e:
            raise RecordNotFoundError(f"{f.path}: no record at offset {offset}: {e}") from None
        return StoredRecord(offset, f.path, pos, 4 + length, record)

    def topics(self) -> dict[str, list[int]]:
        """Topic → its queue ids, from the consume queue directories."""
        out: dict[str, list[int]] = {}
        if not self.consumequeue_dir.is_dir():
            return out
        for topic_dir in sorted(self.consumequeue_dir.iterdir()):
            if not topic_dir.is_dir():
                continue
            ids = sorted(
                int(q.name) for q in topic_dir.iterdir() if q.is_dir() and q.name.isdigit()
            )
            if ids:
                out[topic_dir.name] = ids
        return out

    def consume_queue(self, topic: str, queue_id: int = 0) -> Iterator[ConsumeQueueEntry]:
        """The entries of one consume queue, in order; a zero-filled tail ends a file.

        Raises :class:`RecordNotFoundError` when the store has no such consume queue.
        """
        directory = self.consumequeue_dir / topic / str(queue_id)
        files = _numbered_files(directory) if topic not in ("", ".", "..") else []
        if not files:
            known = ", ".join(f"{t}/{q}" for t, qs in self.topics().items() for q in qs)
            raise RecordNotFoundError(
                f"{self.path}: no consume queue for topic {topic!r} queue {queue_id} "
                f"(there are: {known or 'none'})"
            )
        layout, _ = _layout(files)
        return self._entries(layout)

    def _entries(self, layout: list[CommitLogFile]) -> Iterator[ConsumeQueueEntry]:
        n = CONSUME_QUEUE_ENTRY_SIZE
        for f in layout:
            m = _Mapped(f.path)
            found: list[SkipReport] = []
            try:
                data = m.data
                whole = len(data) - len(data) % n
                for pos in range(0, whole, n):
                    offset, size, th, ts = _ENTRY.unpack(data[pos : pos + n])
                    if size == 0 and offset == 0 and th == 0 and ts == 0:
                        nonzero = _zero_until(data, pos)
                        if nonzero < len(data):
                            found.append(
                                SkipReport(
                                    f.path,
                                    pos,
                                    len(data) - pos,
                                    f"non-zero bytes at offset {nonzero} after an empty entry",
                                )
                            )
                        break
                    if size <= 0:
                        found.append(SkipReport(f.path, pos, n, f"an entry of size {size}"))
                        continue
                    yield ConsumeQueueEntry((f.start + pos) // n, offset, size, th, ts)
                else:
                    if whole < len(data) and _zero_until(data, whole) < len(data):
                        found.append(
                            SkipReport(
                                f.path, whole, len(data) - whole, "a partial entry at the end"
                            )
                        )
                self._report(found)
            finally:
                m.close()

    def messages(self, topic: str, queue_id: int = 0) -> Iterator[StoredRecord]:
        """The records of one topic and queue id, in consume queue order.

        An entry that points where no record is (or a record of another size) is reported in
        :attr:`skipped` and passed over.
        """
        for e in self.consume_queue(topic, queue_id):
            try:
                stored = self.get(e.offset)
            except RecordNotFoundError as err:
                self._report([self._entry_skip(topic, queue_id, e, str(err))])
                continue
            if stored.size != e.size:
                reason = f"the record there is {stored.size} bytes, the entry says {e.size}"
                self._report([self._entry_skip(topic, queue_id, e, reason)])
                continue
            yield stored

    def _entry_skip(self, topic: str, queue_id: int, e: ConsumeQueueEntry, why: str) -> SkipReport:
        where = str(self.consumequeue_dir / topic / str(queue_id))
        return SkipReport(
            where,
            e.index * CONSUME_QUEUE_ENTRY_SIZE,
            CONSUME_QUEUE_ENTRY_SIZE,
            f"entry {e.index} points at commit-log offset {e.offset}: {why}",
        )


def _safe_topic(topic: str) -> bool:
    return topic not in ("", ".", "..") and "/" not in topic and "\x00" not in topic


class _RollingFile:
    """Files named by 20 digits in one directory, each ``file_size`` bytes once rolled."""

    def __init__(
        self, directory: Path, file_size: int, naming: str, preallocate: bool, unit: int
    ) -> None:
        self.directory = directory
        self.file_size = file_size
        self.naming = naming
        self.preallocate = preallocate
        self.unit = unit  # a file's usable length is a multiple of it (24 for consume queues)
        self.index = -1
        self.pos = 0
        self.fh: int | None = None

    def _roll(self) -> None:
        if self.fh is not None:
            # A file left behind is full size, so that file i starts at i * file size.
            os.ftruncate(self.fh, self.file_size)
        self.close()
        self.index += 1
        self.pos = 0
        number = self.index if self.naming == "index" else self.index * self.file_size
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{number:020d}"
        self.fh = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        if self.preallocate:
            os.ftruncate(self.fh, self.file_size)

    def write(self, data: bytes) -> int:
        """Writes data whole into the current file or a new one; returns its global offset."""
        if self.fh is None or self.pos + len(data) > self.file_size - self.file_size % self.unit:
            self._roll()
        assert self.fh is not None
        done = 0
        while done < len(data):  # pwrite may write less than asked
            done += os.pwrite(self.fh, data[done:], self.pos + done)
        at = self.index * self.file_size + self.pos
        self.pos += len(data)
        return at

    def next_offset(self, size: int) -> int:
        """The global offset a write of `size` bytes would land at."""
        if self.fh is None or self.pos + size > self.file_size - self.file_size % self.unit:
            return (self.index + 1) * self.file_size
        return self.index * self.file_size + self.pos

    def close(self) -> None:
        """Forces the file to disk and closes it (closed even when the fsync fails)."""
        if self.fh is not None:
            fh, self.fh = self.fh, None
            try:
                os.fsync(fh)
            finally:
                os.close(fh)


class WriterPoisonedError(LiteMQStoreError, PoisonedError):
    """A write of the :class:`StoreWriter` failed earlier: the store is incomplete.

    ``cause`` is the first failure; every later call raises this.
    """


@dataclass
class StoreWriter:
    """Writes a LiteMQ store: commit-log files and one consume queue per topic and queue id.

    Records are written as given (:meth:`append`), byte for byte; :meth:`append_new` first
    fills the store fields the way the format describes them (commit-log offset, store size
    with its prefix, queue offset). A record goes whole into a file: when it does not fit in
    what is left, the writer starts the next file, named by its index (``naming="index"``, as
    LiteMQ does: 00…00, 00…01, …) or by its first offset (``naming="offset"``, as RocketMQ
    does). Files are preallocated to ``file_size`` (zero-filled), as LiteMQ's are; with
    ``preallocate=False`` the last file ends at its last record. The store's directory must
    not hold a commit log yet. Files are forced to disk (fsync) when left and at
    :meth:`close`. A write that fails (a full disk) poisons the writer: it raises, and every
    later :meth:`append` raises :class:`WriterPoisonedError`.

    Example::

        with StoreWriter("/tmp/broker", file_size=64 << 20) as w:
            w.append_new(LiteMQRecord(message_id="1", topic="orders", body=b"{...}"))
    """

    path: str | os.PathLike[str]
    file_size: int = DEFAULT_FILE_SIZE
    consume_queue_file_size: int = DEFAULT_CONSUME_QUEUE_FILE_SIZE
    naming: Literal["index", "offset"] = "index"
    preallocate: bool = True
    consume_queues: bool = True
    count: int = field(default=0, init=False)
    _log: _RollingFile = field(init=False, repr=False)
    _queues: dict[tuple[str, int], _RollingFile] = field(init=False, repr=False)
    _queue_counts: dict[tuple[str, int], int] = field(init=False, repr=False)
    _failed: BaseException | None = field(default=None, init=False, repr=False)
    _closed: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.naming not in ("index", "offset"):
            raise RecordEncodeError(f"naming={self.naming!r}: expected 'index' or 'offset'")
        if self.file_size < MIN_RECORD_SIZE + 4:
            raise RecordEncodeError(f"file_size={self.file_size}: at least {MIN_RECORD_SIZE + 4}")
        if self.consume_queue_file_size < CONSUME_QUEUE_ENTRY_SIZE:
            raise RecordEncodeError(
                f"consume_queue_file_size={self.consume_queue_file_size}: at least "
                f"{CONSUME_QUEUE_ENTRY_SIZE}"
            )
        root = Path(self.path)
        commitlog = root / "commitlog"
        if _numbered_files(commitlog):
            raise StoreExistsError(f"{commitlog}: already holds a commit log; write to a new store")
        commitlog.mkdir(parents=True, exist_ok=True)  # an empty store is still a store
        self._log = _RollingFile(commitlog, self.file_size, self.naming, self.preallocate, 1)
        self._queues = {}
        self._queue_counts = {}

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def append(self, record: LiteMQRecord) -> int:
        """Writes the record as it is; returns its global commit-log offset.

        Its consume queue (``consumequeue/{topic}/{queue_id}/``) gets an entry with the
        offset and size where it landed, the hash of its tags and its store timestamp.
        Raises :class:`LiteMQStoreError` (a ``ValueError``) for a record larger than a file,
        or, with consume queues on, a topic that cannot be a directory name.
        """
        data = record.encode()
        return self._write(record, data)

    def append_new(self, record: LiteMQRecord) -> int:
        """Fills the store fields, then writes the record (see :meth:`append`).

        ``commit_log_offset`` becomes where it lands, ``store_size`` its size with the
        length prefix, ``queue_offset`` its consume queue entry's byte offset (entry index *
        24, as LiteMQ's document has it).
        """
        data = record.encode()
        size = 4 + len(data)
        at = self._log.next_offset(size)
        entries = self._queue_counts.get((record.topic, record.queue_id), 0)
        # Fixed-width fields: patch them in place of encoding the record again.
        # queue offset, commit-log offset, store size follow the queue id (see _STORE_FIELDS).
        k = len(data) - len(record.trailing) - _STORE_FIELDS.size + 4
        filled = _FILLED.pack(entries * CONSUME_QUEUE_ENTRY_SIZE, at, size)
        return self._write(record, data[:k] + filled + data[k + _FILLED.size :])

    def _write(self, record: LiteMQRecord, data: bytes) -> int:
        if self._failed is not None:
            err = WriterPoisonedError(
                f"{self.path}: an earlier write failed ({self._failed}); the store is "
                "incomplete: write it again"
            )
            err.cause = self._failed
            raise err
        if self._closed:
            raise LiteMQStoreError(f"{self.path}: the writer is closed")
        if len(data) + 4 > self.file_size:
            raise RecordEncodeError(
                f"record {record.message_id!r} takes {len(data) + 4:,} bytes with its length, "
                f"more than a file ({self.file_size:,} bytes)"
            )
        if self.consume_queues and not _safe_topic(record.topic):
            raise RecordEncodeError(
                f"record {record.message_id!r}: topic {record.topic!r} cannot name a consume "
                "queue directory (empty, '.', '..', or holding '/' or NUL); "
                "write with consume_queues=False"
            )
        if not 0 <= record.queue_id <= 0xFFFFFFFF:
            raise RecordEncodeError(f"queue_id {record.queue_id} out of range")
        try:
            return self._write_unchecked(record, data)
        except BaseException as e:
            # The record may be in the commit log and not in its consume queue.
            self._failed = e
            raise

    def _write_unchecked(self, record: LiteMQRecord, data: bytes) -> int:
        at = self._log.write(_U32.pack(len(data)) + data)
        self.count += 1
        if self.consume_queues:
            key = (record.topic, record.queue_id)
            q = self._queues.get(key)
            if q is None:
                directory = Path(self.path) / "consumequeue" / record.topic / str(record.queue_id)
                q = self._queues[key] = _RollingFile(
                    directory,
                    self.consume_queue_file_size,
                    self.naming,
                    self.preallocate,
                    CONSUME_QUEUE_ENTRY_SIZE,
                )
            entry = _ENTRY.pack(at, 4 + len(data), tag_hash(record.tags), record.store_timestamp)
            q.write(entry)
            self._queue_counts[key] = self._queue_counts.get(key, 0) + 1
        return at

    def close(self) -> None:
        """Forces the files to disk and closes them; raises the first fsync failure.

        Closing again does nothing; :meth:`append` after ``close`` raises.
        """
        if self._closed:
            return
        self._closed = True
        first: BaseException | None = None
        for f in [self._log, *self._queues.values()]:
            try:
                f.close()
            except OSError as e:
                first = first or e
        if first is not None:
            raise first


# --- litemq queues <-> LiteMQ records -------------------------------------------------------

#: Every LiteMQ field a record imported into a litemq queue keeps in its headers.
HEADER_PREFIX = "litemq."
#: A property goes into its own header, ``litemq.property.NAME``, when it can (a name of 1 to
#: 239 bytes of UTF-8, said once); else all the properties go into ``litemq.properties``.
PROPERTY_PREFIX = "litemq.property."
PROPERTIES_HEADER = "litemq.properties"
_STRING_FIELDS = (
    "message_id",
    "topic",
    "transaction_id",
    "sharding_key",
    "born_host",
    "store_host",
)
_INT_FIELDS = (
    "message_type",
    "priority",
    "reliability",
    "delay_time",
    "status",
    "broadcast",
    "born_timestamp",
    "queue_id",
    "queue_offset",
    "commit_log_offset",
    "store_size",
    "store_timestamp",
    "consume_start_time",
    "consume_end_time",
    "consume_count",
)
_MAX_HEADER_VALUE = 0xFFFF
_MAX_HEADER_NAME = 255
_MAX_HEADERS = 255


def _header_text(text: str) -> str | bytes:
    """A string for a header: itself when it is valid UTF-8, else its raw bytes."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _raw(text)


def _json(value: object) -> str:
    import json

    try:
        out = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        out.encode("utf-8")
        return out
    except UnicodeEncodeError:  # bytes that are not UTF-8: escape them (\udcXX)
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class QueueMessage:
    """A LiteMQ record as a litemq message: what :func:`record_to_message` makes of it.

    ``topic``, ``tags`` and ``queue_id`` are the message's own fields (litemq format 6) when
    the record's fit them; :meth:`append_to` appends it.
    """

    payload: bytes
    key: str | bytes | None
    headers: dict[str, str | bytes]
    topic: str | None = None
    tags: tuple[str, ...] = ()
    queue_id: int = 0

    def append_to(self, appender: Any) -> int:
        """Appends the message with an :class:`litemq.Appender`; returns its sequence."""
        fields: dict[str, Any] = {}
        if self.topic is not None:
            fields["topic"] = self.topic
            if self.queue_id:
                fields["queue_id"] = self.queue_id
        if self.tags:
            fields["tags"] = self.tags
        return int(appender.append(self.payload, self.key, self.headers, **fields))


_MAX_NAME = 255  # litemq topic names and tags: 1 to 255 bytes of UTF-8, no control character
_MAX_TAGS = 255
_MAX_QUEUE_ID = 0xFFFF


def _litemq_name(text: str) -> bool:
    """Whether a LiteMQ string can be a litemq topic name or tag as it is."""
    try:
        n = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # bytes that were not UTF-8
        return False
    return 1 <= n <= _MAX_NAME and not any(unicodedata.category(c) == "Cc" for c in text)


def record_to_message(record: LiteMQRecord) -> QueueMessage:
    """The litemq message that holds every field of ``record``; :func:`record_from_message`
    gives the record back.

    The payload is the body; the key the first key (none when the record has no key or an
    empty first key). The topic, its queue id and the tags become the message's own
    ``topic``, ``queue_id`` and ``tags`` when litemq can hold them as they are (a topic and
    tags of 1 to 255 bytes of UTF-8 without control characters, up to 255 tags, a queue id
    up to 65,535); what it cannot hold goes into headers like every other field (see
    docs/FORMAT.md, "LiteMQ broker stores"): ``litemq.message_id``, ``litemq.keys`` (a JSON
    array), the properties, the numbers in decimal, ``litemq.trailing`` when the record had
    bytes after its last field. Raises :class:`RecordEncodeError` when a field cannot fit a
    header (over 65,535 bytes).
    """
    topic = record.topic if _litemq_name(record.topic) else None
    native_qid = topic is not None and record.queue_id <= _MAX_QUEUE_ID
    native_tags = len(record.tags) <= _MAX_TAGS and all(_litemq_name(t) for t in record.tags)
    headers: dict[str, str | bytes] = {}
    headers[HEADER_PREFIX + "message_id"] = _header_text(record.message_id)
    if topic is None:
        headers[HEADER_PREFIX + "topic"] = _header_text(record.topic)
    if not native_tags:
        headers[HEADER_PREFIX + "tags"] = _json(list(record.tags))
    headers[HEADER_PREFIX + "keys"] = _json(list(record.keys))
    names = [_raw(n) for n, _ in record.properties]
    fixed = 2 + 2 + len(_STRING_FIELDS) - 2 + len(_INT_FIELDS) + 1
    one_each = (
        len(set(names)) == len(names)
        and len(names) + fixed <= _MAX_HEADERS
        and all(
            n and len(n) + len(PROPERTY_PREFIX) <= _MAX_HEADER_NAME and _valid_utf8(n)
            for n in names
        )
    )
    if one_each:
        for pname, value in record.properties:
            headers[PROPERTY_PREFIX + pname] = _header_text(value)
    elif record.properties:
        headers[PROPERTIES_HEADER] = _json([list(p) for p in record.properties])
    for name in _STRING_FIELDS[2:]:
        headers[HEADER_PREFIX + name] = _header_text(getattr(record, name))
    for name in _INT_FIELDS:
        if name == "queue_id" and native_qid:
            continue
        headers[HEADER_PREFIX + name] = str(getattr(record, name))
    if record.trailing:
        headers[HEADER_PREFIX + "trailing"] = record.trailing
    for hname, hvalue in headers.items():
        size = len(hvalue.encode("utf-8") if isinstance(hvalue, str) else hvalue)
        if size > _MAX_HEADER_VALUE:
            raise RecordEncodeError(
                f"record {record.message_id!r}: header {hname} would take {size:,} bytes, "
                f"more than a litemq header holds ({_MAX_HEADER_VALUE:,})"
            )
    key: str | bytes | None = None
    if record.keys and record.keys[0]:
        key = _header_text(record.keys[0])
    return QueueMessage(
        record.body,
        key,
        headers,
        topic=topic,
        tags=record.tags if native_tags else (),
        queue_id=record.queue_id if native_qid else 0,
    )


def _valid_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def is_imported(headers: Mapping[str, str | bytes]) -> bool:
    """Whether a litemq message's headers hold a LiteMQ record (``litemq.message_id``)."""
    return HEADER_PREFIX + "message_id" in headers


def record_from_message(message: Any, *, topic: str = "litemq") -> LiteMQRecord:
    """The LiteMQ record a litemq message stands for; the reverse of :func:`record_to_message`.

    ``message`` is a :class:`litemq.Message` (or a :class:`QueueMessage`). A message
    imported from a LiteMQ store gives back its record, every field as it was (topic, tags
    and queue id from the message's own fields unless headers hold them). Any other message
    becomes a new record: message id its sequence number, its topic (``topic`` when it has
    none), tags and queue id, its key as the only key, its headers as properties, born and
    store timestamps its timestamp (in ms), LiteMQ's defaults for a new message (priority 3,
    reliability 1); the store fields are left for :meth:`StoreWriter.append_new` to fill.
    """

    def text(value: str | bytes) -> str:
        return value if isinstance(value, str) else _text(bytes(value))

    payload: bytes = bytes(message.payload)
    key: str | bytes | None = message.key
    headers: Mapping[str, str | bytes] = message.headers
    own_topic: str | None = getattr(message, "topic", None)
    own_tags: tuple[str, ...] = tuple(getattr(message, "tags", ()))
    own_queue_id: int = getattr(message, "queue_id", 0)
    if not is_imported(headers):
        keys = () if key is None else (text(key),)
        ms = getattr(message, "timestamp", 0) // 1000
        return LiteMQRecord(
            message_id=str(getattr(message, "seq", 0)),
            topic=own_topic if own_topic is not None else topic,
            tags=own_tags,
            keys=keys,
            properties=tuple((n, text(v)) for n, v in headers.items()),
            body=payload,
            priority=3,
            reliability=1,
            born_timestamp=ms,
            store_timestamp=ms,
            queue_id=own_queue_id,
        )
    import json

    fields: dict[str, Any] = {
        "topic": own_topic or "",
        "tags": own_tags,
        "queue_id": own_queue_id,
    }
    properties: list[tuple[str, str]] = []
    for name, value in headers.items():
        if name.startswith(PROPERTY_PREFIX):
            properties.append((name[len(PROPERTY_PREFIX) :], text(value)))
        elif name == PROPERTIES_HEADER:
            properties.extend((str(n), str(v)) for n, v in json.loads(text(value)))
        elif not name.startswith(HEADER_PREFIX):
            properties.append((name, text(value)))  # a header added after the import
        else:
            field_name = name[len(HEADER_PREFIX) :]
            if field_name in _STRING_FIELDS:
                fields[field_name] = text(value)
            elif field_name in _INT_FIELDS:
                fields[field_name] = int(text(value))
            elif field_name in ("tags", "keys"):
                fields[field_name] = tuple(str(s) for s in json.loads(text(value)))
            elif field_name == "trailing":
                fields[field_name] = bytes(value) if isinstance(value, bytes) else _raw(value)
            else:
                raise HeaderError(
                    f"header {name}: not a LiteMQ field this version knows; export would drop it"
                )
    return LiteMQRecord(body=payload, properties=tuple(properties), **fields)


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What :func:`import_store` did."""

    records: int  # appended to the queue
    first_seq: int | None  # the first appended message's sequence (None when none)
    skipped: tuple[SkipReport, ...]  # what the store held that could not be read


def import_store(
    store: str | os.PathLike[str],
    queue: str | os.PathLike[str],
    *,
    progress: Callable[[int, int], None] | None = None,
    **queue_options: Any,
) -> ImportReport:
    """Append every record of a LiteMQ store's commit log to a litemq queue, in offset order.

    Each record becomes one message as :func:`record_to_message` maps it (nothing is lost:
    :func:`export_queue` writes the same records back). ``progress(done, total)`` is called
    with commit-log bytes read so far. ``queue_options`` go to :class:`litemq.Queue`.

    A record whose fields cannot fit litemq headers (a value over 65,535 bytes) stops the
    import with :class:`RecordEncodeError`, naming the record and what was appended before.
    """
    from litemq.queue import Queue

    with LiteMQStore(store) as s, Queue(queue, **queue_options) as q:
        total = sum(f.size for f in s.files)
        app = q.appender()
        first: int | None = None
        count = 0
        for stored in s.records():
            try:
                message = record_to_message(stored.record)
            except RecordEncodeError as e:
                app.flush()
                done = "none" if first is None else f"seq {first}..{first + count - 1}"
                raise RecordEncodeError(
                    f"{stored.file} offset {stored.file_offset}: {e}; the import stopped "
                    f"there, {count:,} records appended before it ({done})"
                ) from e
            seq = message.append_to(app)
            if first is None:
                first = seq
            count += 1
            if progress is not None and count % 1024 == 0:
                progress(stored.offset + stored.size, total)
        app.flush()
        if progress is not None:
            progress(total, total)
        return ImportReport(count, first, tuple(s.skipped))


def export_queue(
    queue: str | os.PathLike[str],
    store: str | os.PathLike[str],
    *,
    topic: str = "litemq",
    progress: Callable[[int, int], None] | None = None,
    **writer_options: Any,
) -> int:
    """Write every message of a litemq queue to a new LiteMQ store; returns the count.

    Messages imported by :func:`import_store` are written back as the records they were,
    byte for byte; other messages become new records (see :func:`record_from_message`;
    ``topic`` is the topic of those without one) with the store fields filled. ``writer_options`` go to
    :class:`StoreWriter` (``file_size``, ``naming``, ...): give the original store's
    ``file_size`` to get its files back byte for byte. ``progress(done, total)`` counts
    messages.
    """
    from litemq.queue import Queue

    with Queue(queue, read_only=True) as q, StoreWriter(store, **writer_options) as w:
        first, end = q.first_seq, q.next_seq
        total = end - first
        with q.tailer(first) as t:
            for msg in t:
                if msg.seq >= end:
                    break
                record = record_from_message(msg, topic=topic)
                if is_imported(msg.headers):
                    w.append(record)
                else:
                    w.append_new(record)
                if progress is not None and w.count % 1024 == 0:
                    progress(w.count, total)
        if progress is not None:
            progress(w.count, total)
        return w.count
