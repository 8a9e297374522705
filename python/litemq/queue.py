"""`litemq.Queue`: the queue a user opens."""

from __future__ import annotations

import atexit
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from litemq import _litemq, _typed, arrow
from litemq import schema as _schema
from litemq.compaction import DEFAULT_GRACE, CompactReport
from litemq.consumers import ConsumerInfo
from litemq.options import FlushSpec, RollSpec, WaitSpec
from litemq.retention import Retention, RetentionReport, parse_age
from litemq.stats import DataFileInfo, Stats
from litemq.topics import TopicInfo
from litemq.work_queue import WorkQueueInfo

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["Queue"]

# At interpreter exit, close every queue still open before finalization
# begins: what was appended is written and synced, and daemon threads blocked
# in litemq calls (follow, read_next, a sync append, flush) never re-enter
# the interpreter (they stay parked while the process exits).
atexit.register(_litemq._close_all_at_exit)


class Queue(_litemq.Queue):
    """A persistent, append-only message queue stored in a directory.

    Opens the queue at `path`, creating it when missing (in a new or empty
    directory only: `FileExistsError` otherwise). One process at a time
    may write (a second one gets `LockedError` naming the first one's pid)
    unless every writer opens it with ``multi_writer=True`` (remembered: a
    plain open of such a queue joins the writers); any number of
    processes may read, also with ``read_only=True``, which takes no lock.
    The writer lock is taken at the first ``appender()`` (or ``add_index``,
    ``drop_index``), not at open: a handle that only reads never locks a
    writer out, and a collision raises `LockedError` there.

    Options (keywords; the defaults suit most uses):

    - ``file_size`` (``"1GiB"``): largest size of a data file (sparse: disk is
      allocated as it fills, a sealed file is trimmed); an int or a
      string like ``"64MiB"``; 64 KiB to 1 TiB, a multiple of 8. Bounds the
      largest message.
    - ``roll`` (``"daily"``): when to start a new data file: ``"daily"``,
      ``"hourly"``, ``"minutely"`` (UTC), an int or ``"size:64MiB"`` (bytes),
      ``"count:N"`` (messages), or a dict/list combining them
      (``{"period": "hourly", "count": 1_000_000}``: whichever comes first).
      A full file always rolls.
    - ``flush`` (``"async"``): ``"async"``, ``"sync"`` or
      ``litemq.Batch(bytes=..., interval=...)``; see `litemq.Batch`.
    - ``index_interval`` (``1024``): one sparse-index entry per this many
      messages (1 to 2**32 - 1); ``seek_time`` scans at most this many (a
      ``get`` or ``seek`` by sequence is one probe of the dense index; in
      files written before format 5 it scans at most this many).
    - ``verify_on_startup`` (``False``): check the CRC of every frame on open
      (the writer then starts, and locks, at open).
    - ``read_only`` (``False``): read without taking the writer lock.
    - ``multi_writer`` (``False``, or as remembered): let several processes append at once, each
      opening the queue with this flag. Sequences stay dense and each
      appender's messages keep their order. A process holds the shared
      append lock for a burst of appends: then `append` returns at once, as
      with one writer; otherwise (the first append of a burst, or while
      another process holds the lock) it returns once the message is
      written. See docs/GUARANTEES.md.
    - ``channel_capacity`` (``256``): bundles of appends (a bundle is handed
      over at 1,024 messages or 64 KiB, or sooner) queued ahead of the I/O
      thread before `append` waits (backpressure); 1 to 65,536.
    - ``wait`` (``"default"``): how blocking reads wait. ``"default"`` spins a
      few µs, then sleeps on the queue's wake-up word (``wake.ctl``) until a
      writer in any process publishes (a handle that cannot write ``wake.ctl``
      polls with back-off up to 1 ms); ``"busy-spin"`` never sleeps and keeps
      a core busy per waiting follower (on 2 cores it starves the writer).
    - ``key_index`` (``{"slots": 2**20, "items": 2**21}``): geometry of the
      largest key-index files (hash slots, items per file; each below 2**32,
      a file at most 4 GiB); the first file has 4096 items and each next one
      4 times more, up to this; see docs/FORMAT.md.
    - ``retention`` (``None``: keep everything): a `litemq.Retention` saying
      which old data files to delete when the writer rolls to a new file and
      on `apply_retention`.
    - ``compression`` (``None``: as remembered, else none): ``"zstd"``,
      ``"lz4"`` or ``"gzip"`` compresses payloads on the appending thread; a
      payload is stored compressed only when that saves at least 5 %.
      ``False`` or ``"none"`` turns a remembered codec off. Readers
      decompress transparently (``Message.compression`` tells the codec);
      ``append(..., compress=...)`` overrides it per message.
    - ``compression_level`` (zstd ``3``, -7 to 22; gzip ``6``, 0 to 9; lz4
      has none): the codec's level; needs ``compression``.
    - ``compression_min_size`` (``64``): smaller payloads are stored as
      given; needs ``compression``.
    - ``max_decompressed_size`` (``"100MiB"``): largest payload this handle
      decompresses; a compressed payload that declares more, or does not
      inflate to the size it declares, raises `CorruptedError` (a
      decompression bomb never allocates past it); its appenders store longer
      payloads uncompressed. Not remembered.
    - ``compact`` (``None``): ``True`` or a tombstone grace (a ``timedelta``,
      seconds, ``"12h"``): after every roll the writer runs key compaction
      (`compact`) on a background thread; ``True`` keeps tombstones a day.
      Not remembered.
    - ``encryption_key`` (``None``): 32 bytes; encryption at rest (format 8):
      payloads are sealed with XChaCha20-Poly1305 on the I/O thread (after
      compression), each with a random nonce and its sequence and the queue's
      id bound in, and the key index stores keyed hashes of keys. Chosen when
      the queue is created: every later open (readers too) needs the same key
      (`EncryptionError` without it, `WrongKeyError` with another one). Keys,
      headers, topics, tags, timestamps, sizes and counts stay in clear; see
      the README's "Encryption at rest".
    - ``encryption_key_file`` (``None``): the key read from a file instead
      (32 raw bytes, or 64 hex digits); not with ``encryption_key``.

    - ``schema`` (``None``: as stored, else untyped): makes the queue a
      *typed journal*: a ``pyarrow.Schema``, a dataclass type or a
      ``msgspec.Struct`` type (mapped as `litemq.schema` says). Messages are
      then events of it (``append(event)``, ``append_batch`` of events or of
      a ``pyarrow.RecordBatch``/``Table``), stored as compact rows
      (docs/FORMAT.md, "Typed records") and read back as typed columns by
      `read_arrow` and as dicts by ``Message.value``. Remembered; a later
      open with another schema evolves it (a nullable field added, an int
      widened, a field renamed with aliases) or raises `SchemaError`
      saying why. See the README's "Typed journals".
    - ``indexes`` (``None``): secondary indexes on header fields, a dict of
      header name to ``"str"`` or ``"int"`` (``{"customer": "str"}``); each
      sealed data file gets one index file per field, read by `where`. On a
      typed queue, an index named like a schema field indexes that field's
      values (``"str"`` for string and binary fields, ``"int"`` for bool,
      integer, timestamp and date ones; other types have none).
      Remembered, and added to by later opens and `add_index`; see the
      README's "Secondary indexes".

    A value outside an option's range raises `ConfigError` naming the limit.

    ``file_size``, ``roll``, ``index_interval``, ``key_index``, ``retention``,
    ``multi_writer`` and ``compression`` (with its level and minimum size) are remembered in ``metadata.json`` when the queue is
    created: opening it again without one of them uses the remembered value,
    not the default. A different value may be given for any of them (every
    file records its own size, index interval and key-index geometry); it is
    remembered from then on and applies to files created from then on
    (``file_size``, ``index_interval``, ``key_index``), to the file being
    written from its next message (``roll``), or from this open
    (``retention``, ``multi_writer``, ``compression``). ``litemq info`` shows the remembered
    values.

    Named tailers (``q.tailer(name="billing")``) resume where they last
    committed, in this or a later process; see `litemq.Consumer`.

    ``close()`` (or leaving ``with``) writes and syncs what was appended,
    releases the writer lock and closes every tailer and named tailer made
    from the queue (named tailers without committing), unmapping their
    files; later calls on any of them raise `ClosedError`. Queues still open
    at interpreter exit are closed by an ``atexit`` hook.

    >>> with litemq.Queue("/tmp/orders") as q:
    ...     q.appender().append(b"order 1")
    ...     [m.payload for m in q.tailer()]
    0
    [b'order 1']
    """

    def __new__(
        cls,
        path: str | os.PathLike[str],
        *,
        file_size: int | str | None = None,
        roll: RollSpec | None = None,
        flush: FlushSpec = "async",
        index_interval: int | None = None,
        verify_on_startup: bool = False,
        read_only: bool = False,
        channel_capacity: int | None = None,
        wait: WaitSpec = "default",
        key_index: Mapping[str, int] | None = None,
        retention: Retention | None = None,
        multi_writer: bool | None = None,
        indexes: Mapping[str, Literal["str", "int"]] | None = None,
        compression: Literal["zstd", "lz4", "gzip", "none", False] | None = None,
        compression_level: int | None = None,
        compression_min_size: int | str | None = None,
        max_decompressed_size: int | str | None = None,
        compact: bool | timedelta | float | str | None = None,
        encryption_key: bytes | None = None,
        encryption_key_file: str | os.PathLike[str] | None = None,
        schema: _schema.SchemaLike | None = None,
    ) -> Self:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        schema_json = None if schema is None else _schema.to_json(schema)
        # The options are checked and converted once, by the native module.
        return super().__new__(
            cls,
            os.fspath(path),
            file_size=file_size,
            roll=roll,
            flush=flush,
            index_interval=index_interval,
            verify_on_startup=verify_on_startup,
            read_only=read_only,
            channel_capacity=channel_capacity,
            wait=wait,
            key_index=key_index,
            retention=retention,
            multi_writer=multi_writer,
            indexes=indexes,
            compression=compression,
            compression_level=compression_level,
            compression_min_size=compression_min_size,
            max_decompressed_size=max_decompressed_size,
            compact=compact,
            encryption_key=encryption_key,
            encryption_key_file=(
                None if encryption_key_file is None else os.fspath(encryption_key_file)
            ),
            schema=schema_json,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> _litemq.Tailer:
        """Iterates every message available now (a new tailer from the start).

        >>> [m.seq for m in q]
        [0, 1, 2]
        """
        return self.tailer()

    def iter_batches(
        self,
        n: int,
        start: int | Literal["start", "end"] | None = None,
        end: int | None = None,
    ) -> Iterator[list[_litemq.Message]]:
        """Messages from `start` (as in `tailer`) up to `end` (exclusive;
        None: whatever is there when the iteration gets to it) in lists of
        at most `n`, in order; for consumers that process in chunks. Never
        waits for new messages. Each list is one `Tailer.read_batch`: a
        sealed file read in bulk is checked once by its footer's CRC.

        >>> [[m.seq for m in b] for b in q.iter_batches(2)]
        [[0, 1], [2]]
        """
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be an int, not {type(n).__name__}")
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        stop = None if end is None else _seq_arg(end, "end")
        tailer = self.tailer(start)
        return _batches(tailer, n, stop)

    def last(self, n: int) -> list[_litemq.Message]:
        """The last `n` messages (fewer when the queue holds fewer), oldest
        first, as ``tail -n`` prints lines; `reversed` gives newest first.

        Cheap whatever the queue's size: one seek by sequence (a probe of
        the dense index) and `n` reads.

        >>> [m.payload for m in q.last(2)]
        [b'b', b'c']
        """
        n = _seq_arg(n, "n")
        if n == 0:
            return []
        end = self.next_seq
        start = max(self.first_seq, end - n)
        if start >= end:
            return []
        with self.tailer(start) as t:
            return t.read_batch(end - start, timeout=0)

    def stats(self) -> Stats:
        """Counters and sizes, for monitoring: a `litemq.Stats`.

        >>> s = q.stats()
        >>> (s.messages, s.files, s.recovery.cut_bytes)
        (3, 1, 0)
        """
        return self._stats()

    def data_files(self) -> list[DataFileInfo]:
        """The data files, oldest first, each a `litemq.DataFileInfo`.

        >>> [f.first_seq for f in q.data_files()]
        [0, 50, 100]
        """
        return self._data_files()

    def consumers(self) -> list[ConsumerInfo]:
        """Every named tailer with its committed position and lag, by name.

        Works on read-only queues and takes no lock.

        >>> [(c.name, c.next_seq, c.lag_messages) for c in q.consumers()]
        [('billing', 120, 0)]
        """
        return self._consumers()

    def work_queues(self) -> list[WorkQueueInfo]:
        """Every work queue (``work_queue(name)`` group) with its figures, by name.

        Works on read-only queues and takes no lock.

        >>> [(w.name, w.pending, w.in_flight) for w in q.work_queues()]
        [('thumbnails', 120, 4)]
        """
        return self._work_queues()

    def topics(self) -> list[TopicInfo]:
        """Every topic stream (topic and queue id) with messages in the queue,
        ordered by topic then queue id: how many, first and last sequence,
        first and last topic offset (``Message.topic_offset``).

        Sealed files are counted from their topic index, without reading
        their messages; the active file (and a file whose index is not built
        yet) is read. Works on read-only queues.

        >>> [(t.topic, t.queue_id, t.count) for t in q.topics()]
        [('orders', 0, 2)]
        """
        return self._topics()

    def apply_retention(self, policy: Retention | None = None) -> RetentionReport:
        """Deletes old data files now, per `policy` or, when None, the queue's
        ``retention`` option (without one, nothing is deleted).

        Allowed on read-only queues, beside a writer in another process: only
        sealed files are deleted, never the one being written. A tailer that
        is reading a deleted file keeps reading it until it moves on.

        >>> q.apply_retention(litemq.Retention(max_files=2)).first_seq
        100
        """
        return self._apply_retention(policy)

    def compact(
        self,
        grace: timedelta | float | str = DEFAULT_GRACE,
        progress: Callable[[int, int], object] | None = None,
    ) -> CompactReport:
        """Key compaction (Kafka's compacted topics): rewrites the sealed data
        files keeping, for every key, only its latest message in the whole
        queue. A tombstone (`Appender.delete`) that is its key's latest message
        stays until it is `grace` old (a ``timedelta``, seconds, or a string
        like ``"1d"``; default a day; 0: no grace), so readers see the deletion, then goes
        too. Messages without a key are always kept; so is everything in the
        file being written. Batches compressed together are never split: a
        member that is its key's latest drops the older messages of that key,
        a superseded member stays readable by iteration, and a tombstone that
        deletes a key some batch member holds is kept past its grace.

        A dropped message becomes a *hole*: its sequence stays in the queue's
        range (``first_seq``, ``next_seq`` and ``len`` do not change), tailers,
        ``read_arrow``, consumers and work queues step over it, and
        ``q[seq]`` / `get` raises `CompactedError` (a `NotFoundError`).
        `get_latest` and `find` answer exactly as before, from the survivors.

        Crash-safe (each file is rewritten under a temp name, fsynced and
        renamed); a tailer in the middle of a file keeps reading that file as
        it was. Allowed on read-only queues and beside a writer in another
        process; waits while a retention pass runs (and retention waits for
        it). `progress`, when given, is called with ``(files done, files)``.

        >>> q.compact(grace="1h").records_dropped
        9900
        """
        no_grace = (not isinstance(grace, str) and grace in (0, timedelta(0))) or grace == "0"
        grace_us = 0 if no_grace else parse_age(grace, "grace") // timedelta(microseconds=1)
        return self._compact(grace_us, progress)

    @property
    def schema(self) -> pa.Schema | None:
        """A typed queue's current schema as a ``pyarrow.Schema`` (the types
        `read_arrow` returns; a field's former names in its metadata
        ``b"aliases"``, the version in the schema metadata
        ``b"litemq.version"``); None for an untyped queue.

        >>> q.schema.names
        ['time', 'symbol', 'price', 'size', 'side', 'id']
        """
        versions = self._schema_doc()
        return None if versions is None else _schema.to_arrow(versions[-1])

    def schema_versions(self) -> list[pa.Schema]:
        """Every version of a typed queue's schema, oldest first (the last is
        `schema`); empty for an untyped queue.

        >>> [s.metadata[b"litemq.version"] for s in q.schema_versions()]
        [b'1', b'2']
        """
        return [_schema.to_arrow(v) for v in self._schema_doc() or []]

    def _schema_doc(self) -> list[dict[str, Any]] | None:
        """The schema versions as stored (metadata.json's ``schema.versions``)."""
        text = self._schema_json()
        if text is None:
            return None
        versions: list[dict[str, Any]] = json.loads(text)["versions"]
        return versions

    def where(
        self,
        field: str,
        op: str,
        value: Any,
        *,
        start: datetime | int | None = None,
        end: datetime | int | None = None,
        limit: int | None = None,
    ) -> list[_litemq.Message]:
        """Messages whose header `field` (a declared index) or, on a typed
        queue, whose schema field `field` satisfies `op`, in sequence order,
        written in ``[start, end)`` (aware datetimes or µs since the epoch),
        at most `limit`.

        Header indexes: "=" `value`, "between" ``(low, high)`` (both
        included), "in" a list of values, ">=" / "<=" a bound (included),
        "prefix" (str indexes). Sealed files are read through their index (a
        file whose min/max excludes the query is skipped unread); the active
        file through an in-memory index this handle extends at each query;
        files whose index is missing or damaged are scanned. Every message
        returned is checked against the query.

        Schema fields (no index needed): the same ops and "!=", "<", ">",
        compared as the field's type (a null never matches); the engine
        decodes only that field of each row. With an index on the field
        (``add_index("symbol")``, or ``indexes=``: an index named like a
        schema field indexes that field), sealed files are answered by their
        index files unread, the active file by an in-memory index this
        handle extends at each query, files without a valid index are read;
        "!=", and "<" / ">" on strings and binary, read every file.

        >>> [m.seq for m in q.where("customer", "=", "c7")]
        [0, 12]
        >>> [m.value["price"] for m in q.where("symbol", "=", "AAPL", limit=1)]
        [189.5]
        """
        fields = self._schema_fields()
        if fields and field not in fields and field not in self.indexes:
            raise ValueError(
                f"where: {field!r} is not a field of the queue's schema ({', '.join(fields)}) "
                f"nor a declared index"
            )
        if field not in fields:
            where: list[_litemq.Message] = super().where(
                field, op, value, start=start, end=end, limit=limit
            )
            return where
        lo, hi, _ = self._range(None, None, None, start, end)
        seqs = self._typed_where(field, op, value, lo, hi)
        if limit is not None:
            seqs = seqs[: _seq_arg(limit, "limit")]
        return [self.get(s) for s in seqs]

    def _schema_fields(self) -> dict[str, dict[str, Any]]:
        """The current schema's fields by name (empty when untyped)."""
        versions = self._schema_doc()
        return {} if versions is None else {f["name"]: f for f in versions[-1]["fields"]}

    def read_arrow(
        self,
        start: int | None = None,
        end: int | None = None,
        max_rows: int | None = None,
        columns: Sequence[str] | None = None,
        *,
        topic: str | None = None,
        tags: Iterable[str] | None = None,
        queue_id: int | None = None,
        raw: bool = False,
        fields: Sequence[str] | None = None,
        where: tuple[str, str, Any] | None = None,
        start_time: datetime | int | None = None,
        end_time: datetime | int | None = None,
        on_damage: Literal["raise", "skip"] = "raise",
    ) -> pa.RecordBatch:
        """Messages ``[start, end)`` as one ``pyarrow.RecordBatch``.

        Columns: ``seq`` int64, ``timestamp`` timestamp[us, UTC], ``key``
        binary (null without a key), ``headers`` map<string, binary> (null
        without headers), ``payload`` binary, ``topic`` string (null
        without a topic), ``queue_id`` int32, ``tags`` list<string> (empty
        without tags), ``priority`` uint8, ``expires_at`` timestamp[us, UTC]
        (null when the message never expires); with ``raw=True`` also
        ``codec`` string (null when stored uncompressed, else ``"zstd"``,
        ``"lz4"`` or ``"gzip"``) and ``raw_len`` int64 (the decompressed
        size). ``columns`` picks some of them (``codec`` and ``raw_len``
        too without ``raw``), in the order given; those left out are not
        built.

        ``payload`` is decompressed; with ``raw=True`` it holds the bytes as
        stored (compressed when ``codec`` says so). Each compressed payload
        is still checked to decompress within the queue's limit.

        ``topic``, ``tags`` and ``queue_id`` keep only the messages
        ``q.tailer(topic=..., tags=..., queue_id=...)`` returns (``tags``:
        any of them; compared exactly), reading only that topic's frames: a
        sealed file whose footer says it holds no topic is skipped, one with
        a topic index is read only where the index lists the topic, the
        active file frame by frame. ``max_rows`` then counts the rows kept.

        Built from buffers the engine fills and hands over without a copy,
        with no Python object per message. Every frame read is CRC-checked:
        a sealed file read (at least a quarter of it) in one call is
        verified once per queue handle by the CRC-64 in its footer, other
        frames each by their own CRC; damage raises CorruptedError naming
        the file. Needs pyarrow.

        Large columns (1 MiB or more) of a batch Python has let go of are
        kept, up to a sixteenth of the machine's memory and at most 1 GiB per
        process (``LITEMQ_KEPT_MEMORY_MIB`` sets another bound, ``0`` keeps
        nothing), and filled by the next read instead of fresh memory (which
        the kernel must zero first);
        `litemq.release_memory` frees them.

        The GIL is released while the engine reads. With the environment
        variable ``LITEMQ_READ_THREADS`` set (``auto``: the cores; or a
        number, at most 16), a read without ``topic``/``tags``/``queue_id``/
        ``where`` whose range crosses a data file's start reads several
        files at once on up to ``min(threads, files in the range)`` threads
        and joins the parts in sequence order into the one batch; unset or
        ``1``, it reads on the calling thread (the default: see
        docs/PERFORMANCE.md). Rows, cuts and errors are the serial read's:
        when two files are damaged, the earlier one is reported. A typed
        queue's read is cut at equal shares of its sequences, anywhere in a
        file, and with the variable unset reads ranges of 524,288 rows or
        more on the cores (``LITEMQ_READ_THREADS=1`` keeps it serial).

        ``fields`` (names of declared indexes) adds one column per field,
        named after it, after the others: the message's first value of that
        header the index indexes (see `where`), ``string`` for a str index,
        ``int64`` for an int index, null when it has none. ``where``, a
        ``(field, op, value)`` tuple as `where` takes, keeps only the
        messages where it holds, read through the index as `where` reads
        (``max_rows`` then counts the rows returned).

        ``start_time`` and ``end_time`` (a ``datetime``, or microseconds
        since the epoch, as `Tailer.seek_time` takes) narrow the range to the
        messages from the first one written at or after ``start_time`` to
        the first one written at or after ``end_time`` (excluded), found as
        ``seek_time`` finds them.

        ``on_damage="skip"`` steps over damaged frames instead of raising:
        the messages a damaged frame stood for are left out (as
        `Tailer.skip_damaged` steps over them) and the batch's schema
        metadata lists each range skipped (`litemq.arrow.skipped` reads
        it). Damage that no frame holds (a sealed file's footer CRC failing
        where every frame checks out) still raises ``CorruptedError``.

        A typed queue (``Queue(path, schema=...)``) returns ``seq``,
        ``timestamp`` and one column per field of its current schema, of the
        field's Arrow type (`schema`; rows of older schema versions are shown
        in the current one: a field they lack is null), built in Rust from
        the rows; ``columns`` picks among those, and ``where``, ``(field, op,
        value)`` with op one of ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``,
        ``between``, ``in``, ``prefix``, keeps the rows where a schema field
        satisfies it (no index needed; ``max_rows`` counts the rows kept;
        with an index on the field, a comparison it answers exactly that
        keeps at most an eighth of the range reads only the rows it lists).
        ``topic``, ``tags``, ``queue_id``, ``raw``, ``fields`` and
        ``on_damage="skip"`` raise ``ValueError`` there.

        ``key_text`` and ``headers_text``, named in ``columns``, give text
        keys and header values as strings (`litemq.arrow.TEXT_FIELDS`: the
        default columns with them in place of ``key`` and ``headers``).

        >>> q.read_arrow(max_rows=2).column("seq").to_pylist()
        [0, 1]
        >>> q.read_arrow(columns=["seq", "payload"]).schema.names
        ['seq', 'payload']
        >>> q.read_arrow(topic="orders", tags={"paid"}, columns=["seq"]).num_rows
        1
        """
        if on_damage not in ("raise", "skip"):
            raise ValueError(f"on_damage must be 'raise' or 'skip', not {on_damage!r}")
        typed = self._schema_fields()
        if typed:
            _typed_only(topic, tags, queue_id, raw, fields, on_damage)
            tplan = self._typed_plan(
                typed, start, end, max_rows, columns, where, start_time, end_time
            )
            parts = list(self._typed_batches(tplan, None))
            return arrow.concat(parts) if parts else _typed.empty_batch(tplan.names, typed)
        if on_damage == "skip" and (
            raw or fields or where is not None or topic or tags is not None or queue_id is not None
        ):
            raise ValueError(
                "on_damage='skip' reads every message of the range as a tailer does: "
                "not with topic, tags, queue_id, where, fields or raw"
            )
        plan = self._arrow_plan(
            start,
            end,
            max_rows,
            columns,
            topic,
            tags,
            queue_id,
            raw,
            fields,
            where,
            start_time,
            end_time,
        )
        skipped: list[arrow.Damage] = []
        batches = list(self._arrow_batches(plan, None, skipped if on_damage == "skip" else None))
        out = arrow.empty_batch(plan.names, plan.extra) if not batches else arrow.concat(batches)
        if on_damage == "skip":
            out = arrow.with_skipped(out, skipped)
        return out

    def arrow_reader(
        self,
        batch_size: int = 65_536,
        start: int | None = None,
        end: int | None = None,
        columns: Sequence[str] | None = None,
        *,
        start_time: datetime | int | None = None,
        end_time: datetime | int | None = None,
        topic: str | None = None,
        tags: Iterable[str] | None = None,
        queue_id: int | None = None,
        raw: bool = False,
        fields: Sequence[str] | None = None,
    ) -> pa.RecordBatchReader:
        """`read_arrow`'s rows (the same arguments) as a
        ``pyarrow.RecordBatchReader`` of batches of at most ``batch_size``
        rows, each read when the consumer asks for it: a range larger than
        memory streams. The range (``end``, or the end of the queue at this
        call) is fixed when the reader is made; damage raises
        ``CorruptedError`` from the batch that meets it.

        DuckDB, polars and pyarrow read the reader (it exports the Arrow C
        stream interface); so does the queue itself (``pa.table(q)``,
        ``pl.from_arrow(q)``, ``duckdb.sql("select * from q")``: every
        message, the default columns).

        >>> [b.num_rows for b in q.arrow_reader(batch_size=2, end=5)]
        [2, 2, 1]
        """
        import pyarrow as pa

        size = _seq_arg(batch_size, "batch_size")
        if size == 0:
            raise ValueError("batch_size must be > 0")
        typed = self._schema_fields()
        if typed:
            _typed_only(topic, tags, queue_id, raw, fields, "raise")
            tplan = self._typed_plan(typed, start, end, None, columns, None, start_time, end_time)
            return pa.RecordBatchReader.from_batches(
                _typed.arrow_schema(tplan.names, typed), self._typed_batches(tplan, size)
            )
        plan = self._arrow_plan(
            start,
            end,
            None,
            columns,
            topic,
            tags,
            queue_id,
            raw,
            fields,
            None,
            start_time,
            end_time,
        )
        return pa.RecordBatchReader.from_batches(
            arrow.schema(plan.names, plan.extra), self._arrow_batches(plan, size, None)
        )

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow C stream of every message (the default columns of
        `read_arrow`), for ``pa.table(q)``, ``pl.from_arrow(q)`` and DuckDB."""
        return self.arrow_reader().__arrow_c_stream__(requested_schema)

    def _typed_plan(
        self,
        typed: dict[str, dict[str, Any]],
        start: int | None,
        end: int | None,
        max_rows: int | None,
        columns: Sequence[str] | None,
        where: tuple[str, str, Any] | None,
        start_time: datetime | int | None,
        end_time: datetime | int | None,
    ) -> _TypedPlan:
        """A typed queue's `read_arrow` arguments, checked once."""
        names = _typed.column_names(columns, typed)
        read = [n for n in names if n in typed]
        if where is not None:
            if not (isinstance(where, tuple) and len(where) == 3):
                raise TypeError("where must be a (field, op, value) tuple")
            if where[0] not in typed:
                raise ValueError(
                    f"where: {where[0]!r} is not a field of the queue's schema ({', '.join(typed)})"
                )
            if where[0] not in read:
                read.append(where[0])
        lo, hi, remaining = self._range(start, end, max_rows, start_time, end_time)
        return _TypedPlan(lo, hi, remaining, names, read, where, typed)

    def _typed_batches(self, plan: _TypedPlan, batch_size: int | None) -> Iterator[pa.RecordBatch]:
        """The record batches of a typed read, each of at most ``batch_size``
        rows; with ``where``, the rows it keeps (``remaining`` counts them)."""
        if plan.where is not None and (seqs := self._indexed_where(plan)) is not None:
            step = max(1, len(seqs) if batch_size is None else batch_size)
            for k in range(0, len(seqs), step):
                cols: dict[str, Any] = self._read_typed_seqs(seqs[k : k + step], plan.read)
                if int(cols["rows"]):
                    batch = _typed.record_batch(
                        cols, tuple(plan.read_names), plan.read, plan.fields
                    )
                    yield batch.select(list(plan.names))
            return
        lo, hi, remaining = plan.lo, plan.hi, plan.remaining
        where_type = (
            None if plan.where is None else _schema.arrow_type(plan.fields[plan.where[0]]["type"])
        )
        while remaining > 0 and lo < hi:
            want = remaining if batch_size is None else min(remaining, batch_size)
            if plan.where is not None:
                want = max(want, 65_536)
            cols = self._read_typed(lo, hi, want, plan.read)
            rows = int(cols["rows"])
            if rows:
                batch = _typed.record_batch(cols, tuple(plan.read_names), plan.read, plan.fields)
                if plan.where is not None and where_type is not None:
                    batch = batch.filter(_typed.where_mask(batch, plan.where, where_type))
                    batch = batch.slice(0, min(batch.num_rows, remaining))
                    batch = batch.select(list(plan.names))
                if batch.num_rows:
                    remaining -= batch.num_rows
                    yield batch
            after = int(cols["next"])
            if after <= lo and rows == 0:
                break
            lo = after

    def _indexed_where(self, plan: _TypedPlan) -> list[int] | None:
        """The sequences a typed read's ``where`` keeps, at most ``remaining``,
        from the index declared on its field, when the index answers the
        comparison exactly and they are at most an eighth of the range (past
        that, reading the range and filtering it is cheaper); else None."""
        assert plan.where is not None
        if plan.remaining == 0:
            return None
        field, op, value = plan.where
        seqs = self._typed_where_indexed(field, op, value, plan.lo, plan.hi)
        if seqs is None or len(seqs) * 8 > plan.hi - plan.lo:
            return None
        return seqs[: plan.remaining]

    def _range(
        self,
        start: int | None,
        end: int | None,
        max_rows: int | None,
        start_time: datetime | int | None,
        end_time: datetime | int | None,
    ) -> tuple[int, int, int]:
        """``(lo, hi, rows at most)`` of a read's range arguments."""
        first, nxt = self.first_seq, self.next_seq
        lo = first if start is None else _seq_arg(start, "start")
        hi = nxt if end is None else _seq_arg(end, "end")
        if start_time is not None:
            lo = max(lo, self._seq_at_time(start_time))
        if end_time is not None:
            hi = min(hi, self._seq_at_time(end_time))
        lo, hi = max(lo, first), min(hi, nxt)
        remaining = max(hi - lo, 0)
        if max_rows is not None:
            remaining = min(remaining, _seq_arg(max_rows, "max_rows"))
        return lo, hi, remaining

    def _arrow_plan(
        self,
        start: int | None,
        end: int | None,
        max_rows: int | None,
        columns: Sequence[str] | None,
        topic: str | None,
        tags: Iterable[str] | None,
        queue_id: int | None,
        raw: bool,
        fields: Sequence[str] | None,
        where: tuple[str, str, Any] | None,
        start_time: datetime | int | None,
        end_time: datetime | int | None,
    ) -> _ArrowPlan:
        """The arguments of a `read_arrow`, checked once: the range, columns
        and engine flags."""
        if not isinstance(raw, bool):
            raise TypeError(f"raw must be a bool, not {type(raw).__name__}")
        names = arrow.column_names(columns, raw)
        extra = arrow.field_names(fields, self.indexes)
        flags: dict[str, Any] = {}
        if extra:
            flags["fields"] = [n for n, _ in extra]
        if where is not None:
            if not (isinstance(where, tuple) and len(where) == 3):
                raise TypeError("where must be a (field, op, value) tuple")
            flags["where_"] = where
        lo, hi, remaining = self._range(start, end, max_rows, start_time, end_time)
        if topic is not None or tags is not None or queue_id is not None:
            flags.update(topic=topic, tags=tags, queue_id=queue_id)
        return _ArrowPlan(lo, hi, remaining, names, extra, raw, flags)

    def _seq_at_time(self, when: datetime | int) -> int:
        """The sequence of the first message written at or after ``when``
        (the next sequence when there is none), as `Tailer.seek_time` finds it."""
        with self.tailer() as t:
            t.seek_time(when)
            return t.next_seq

    def _arrow_batches(
        self, plan: _ArrowPlan, batch_size: int | None, skipped: list[arrow.Damage] | None
    ) -> Iterator[pa.RecordBatch]:
        """The record batches of ``plan``, each of at most ``batch_size`` rows
        (None: as large as the engine makes them). With ``skipped`` (a list),
        damage is stepped over and appended to it instead of raised."""
        lo, hi, remaining = plan.lo, plan.hi, plan.remaining
        while remaining > 0 and lo < hi:
            want = remaining if batch_size is None else min(remaining, batch_size)
            try:
                cols: dict[str, Any] = self._read_batch(
                    lo, hi, want, columns=list(plan.names), raw=plan.raw, **plan.flags
                )
            except _litemq.CorruptedError as e:
                if skipped is None:
                    raise
                # Read on as a tailer does: frame by frame, up to the damage.
                cols = self._read_as_tailer(lo, min(want, hi - lo), plan.names, e, skipped)
            rows = int(cols["rows"])
            if rows:
                yield arrow.record_batch(cols, plan.names, plan.extra)
            after = int(cols["next"])
            if after <= lo and rows == 0:
                break
            lo = after  # past the rows read and any holes among them
            remaining -= rows

    def _read_as_tailer(
        self,
        lo: int,
        rows: int,
        names: tuple[str, ...],
        error: _litemq.CorruptedError,
        skipped: list[arrow.Damage],
    ) -> dict[str, Any]:
        """After a bulk read from ``lo`` failed with ``error``: the rows a
        tailer reads from ``lo`` (at most ``rows``) up to the damaged frame,
        or, when it stands at it, none, the frame stepped over
        (`Tailer.skip_damaged`) and recorded in ``skipped``. ``error`` again
        when a tailer meets no damage there (a footer CRC failing outside
        every frame) or cannot step over it."""
        try:
            with self.tailer(lo) as t:
                try:
                    cols: dict[str, Any] = t._read_columns(rows, list(names))
                except _litemq.CorruptedError as at:
                    bad = t.next_seq
                    if not t.skip_damaged() or t.next_seq <= bad:
                        raise error from at
                    skipped.append(arrow.Damage(bad, t.next_seq, at.file, at.reason))
                    return {"rows": 0, "next": t.next_seq}
                if int(cols["rows"]) == 0:
                    raise error
                cols["next"] = t.next_seq
                return cols
        except _litemq.CorruptedError as again:
            if again is error:
                raise
            raise error from again

    def to_pandas(
        self,
        start: int | None = None,
        end: int | None = None,
        max_rows: int | None = None,
        columns: Sequence[str] | None = None,
        *,
        topic: str | None = None,
        tags: Iterable[str] | None = None,
        queue_id: int | None = None,
        raw: bool = False,
    ) -> pd.DataFrame:
        """`read_arrow` (with the same arguments) as a pandas DataFrame (needs
        pyarrow and pandas).

        >>> q.to_pandas().columns.tolist()[:5]
        ['seq', 'timestamp', 'key', 'headers', 'payload']
        """
        batch = self.read_arrow(
            start, end, max_rows, columns, topic=topic, tags=tags, queue_id=queue_id, raw=raw
        )
        return batch.to_pandas()


@dataclass(frozen=True)
class _ArrowPlan:
    """A checked `Queue.read_arrow` call: sequences ``[lo, hi)``, at most
    ``remaining`` rows, the columns and the engine's keyword flags."""

    lo: int
    hi: int
    remaining: int
    names: tuple[str, ...]
    extra: tuple[tuple[str, str], ...]
    raw: bool
    flags: dict[str, Any]


@dataclass(frozen=True)
class _TypedPlan:
    """A checked `Queue.read_arrow` of a typed queue: sequences ``[lo, hi)``,
    at most ``remaining`` rows (kept by ``where``), the columns returned,
    the schema fields read (``where``'s too) and the current fields."""

    lo: int
    hi: int
    remaining: int
    names: tuple[str, ...]
    read: list[str]
    where: tuple[str, str, Any] | None
    fields: dict[str, dict[str, Any]]

    @property
    def read_names(self) -> list[str]:
        """The columns a read builds: those returned, then ``where``'s field."""
        return list(self.names) + [n for n in self.read if n not in self.names]


def _typed_only(
    topic: str | None,
    tags: Iterable[str] | None,
    queue_id: int | None,
    raw: bool,
    fields: Sequence[str] | None,
    on_damage: str,
) -> None:
    """Refuses the arguments of an untyped read on a typed queue."""
    given = [
        name
        for name, v in (
            ("topic", topic),
            ("tags", tags),
            ("queue_id", queue_id),
            ("fields", fields),
        )
        if v is not None
    ]
    if raw:
        given.append("raw")
    if on_damage != "raise":
        given.append("on_damage")
    if given:
        raise ValueError(
            f"read_arrow of a typed queue returns seq, timestamp and the schema's fields: "
            f"{', '.join(given)} do not apply (read them with a tailer)"
        )


def _batches(tailer: _litemq.Tailer, n: int, stop: int | None) -> Iterator[list[_litemq.Message]]:
    with tailer:
        while True:
            want = n if stop is None else min(n, stop - tailer.next_seq)
            if want <= 0:
                return
            batch = tailer.read_batch(want, timeout=0)
            if not batch:
                return
            yield batch


def _seq_arg(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{what} must be >= 0, got {value}")
    return value
