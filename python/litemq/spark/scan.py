"""Planning and reading: which sequence ranges of which queues each Spark task reads.

No pyspark here: the pyspark classes in ``source.py`` call these functions on the driver
(planning) and on executors (reading), so they can be tested without a Spark session.
"""

from __future__ import annotations

import bisect
import functools
import glob
import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .dataset import QueueRef

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = [
    "COLUMNS",
    "TEXT_COLUMNS",
    "Bounds",
    "Chunk",
    "arrow_schema",
    "field_columns",
    "open_queue",
    "plan_chunks",
    "queue_range",
    "read_chunk",
    "seq_for_time",
    "split_range",
]

#: Columns of a litemq DataFrame, in order: the engine's Arrow columns plus ``queue``, then
#: the message's topic fields.
COLUMNS = ("seq", "timestamp", "key", "headers", "payload", "queue", "topic", "queue_id", "tags")
#: ... and the columns a read schema may name besides: text keys and header values as
#: strings (``Queue.read_arrow``'s ``key_text`` and ``headers_text``).
TEXT_COLUMNS = ("key_text", "headers_text")
#: Partition boundaries fall on multiples of this (the engine's default sparse-index
#: interval), so a task starts reading at an indexed position.
INDEX_ALIGN = 1024
#: Bytes to ask the engine for per ``read_arrow`` call while reading a chunk.
READ_BYTES = 32 * 1024 * 1024
#: ... and never more rows than this per call.
MAX_READ_ROWS = 1 << 20


@dataclass(frozen=True)
class Chunk:
    """What one Spark task reads: ``[start, end)`` of one queue, or one key's messages."""

    name: str
    path: str
    start: int
    end: int
    keys: tuple[bytes, ...] = ()  # not empty: read these keys' messages through the key index
    time_start_us: int | None = None
    time_end_us: int | None = None
    archive: bool = False  # ``path`` is an archive (read through pyarrow.fs), not a queue
    where: tuple[str, str] | None = None  # (header, value): read through its secondary index
    topics: tuple[str, ...] = ()  # not empty: only these topics' messages (topic indexes)
    fields: tuple[str, ...] = ()  # indexed headers to read as flattened columns
    # (field, op, value) as Queue.where takes: only the messages where it holds, read through
    # the field's secondary index (pushed-down filters on a flattened column).
    query: tuple[str, str, Any] | None = None
    key_file: str | None = None  # encryption at rest: the key file (option encryptionKeyFile)


def field_columns(
    refs: Sequence[QueueRef], key_file: str | None = None
) -> dict[str, tuple[str, str]]:
    """The flattened columns of a load: column name to ``(index name, "str" | "int")``.

    One per secondary index that every queue of the load declares, with the same type (a
    queue without it could not say which of its messages carry an indexable value); none
    when the load holds an archive (archives keep no index). A column is named after its
    header, or, when that name is taken (``seq``, ``timestamp``, ``key``, ``headers``,
    ``payload``, ``queue``, or another column), ``header_`` + the name, repeated until free.
    """
    if not refs or any(r.archive for r in refs):
        return {}
    common: dict[str, str] | None = None
    for r in refs:
        with open_queue(r.path, key_file) as q:
            declared = dict(q.indexes)
        common = (
            declared
            if common is None
            else {n: k for n, k in common.items() if declared.get(n) == k}
        )
    out: dict[str, tuple[str, str]] = {}
    taken = {*COLUMNS, *TEXT_COLUMNS}
    for name in sorted(common or {}):
        col = name
        while col in taken:
            col = "header_" + col
        taken.add(col)
        out[col] = (name, (common or {})[name])
    return out


@dataclass(frozen=True)
class Bounds:
    """Everything that narrows a read: options and pushed filters, intersected.

    Sequences are ``[seq_lo, seq_hi)``; times ``[time_lo_us, time_hi_us)`` in µs UTC;
    ``keys`` (if not None) the only keys wanted; ``queues`` (if not None) the only queue names;
    ``topics`` (if not None) the only topics wanted.
    ``empty`` is set when the bounds contradict each other (nothing can match).
    """

    seq_lo: int | None = None
    seq_hi: int | None = None
    time_lo_us: int | None = None
    time_hi_us: int | None = None
    keys: frozenset[bytes] | None = None
    queues: frozenset[str] | None = None
    where: tuple[str, str] | None = None
    topics: frozenset[str] | None = None
    query: tuple[str, str, Any] | None = None  # pushed down to a field's secondary index
    empty: bool = False

    def and_seq(self, lo: int | None = None, hi: int | None = None) -> Bounds:
        nlo = _max(self.seq_lo, lo)
        nhi = _min(self.seq_hi, hi)
        return replace(self, seq_lo=nlo, seq_hi=nhi)

    def and_time(self, lo: int | None = None, hi: int | None = None) -> Bounds:
        return replace(
            self, time_lo_us=_max(self.time_lo_us, lo), time_hi_us=_min(self.time_hi_us, hi)
        )

    def and_keys(self, keys: frozenset[bytes]) -> Bounds:
        new = keys if self.keys is None else self.keys & keys
        return replace(self, keys=new, empty=self.empty or not new)

    def and_topics(self, topics: frozenset[str]) -> Bounds:
        new = topics if self.topics is None else self.topics & topics
        return replace(self, topics=new, empty=self.empty or not new)

    def and_queues(self, names: frozenset[str]) -> Bounds:
        new = names if self.queues is None else self.queues & names
        return replace(self, queues=new, empty=self.empty or not new)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def open_queue(path: str, key_file: str | None = None) -> Any:
    """Open a queue for reading. Read-only handles may coexist with a live writer. An
    encrypted queue needs ``key_file`` (option ``encryptionKeyFile``), read where it runs."""
    import litemq

    return litemq.Queue(path, read_only=True, encryption_key_file=key_file)


def _key_bytes(key_file: str | None) -> bytes | None:
    """The key in ``key_file`` (32 raw bytes or 64 hex digits), for archives."""
    from litemq.archive import key_from_file

    return key_from_file(key_file)


def queue_range(q: Any) -> tuple[int, int]:
    return int(q.first_seq), int(q.next_seq)


def _us_to_datetime(us: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)


def seq_for_time(q: Any, us: int) -> int:
    """The first sequence whose timestamp is >= ``us`` (``next_seq`` if none).

    Timestamps never decrease within a queue, so ``[seq_for_time(a), seq_for_time(b))`` is
    exactly the messages stored in ``[a, b)``. Uses the tailer's O(log n) ``seek_time``.
    """
    fast = getattr(q, "seq_for_time", None)
    if callable(fast):
        return int(fast(us))
    t = q.tailer(start=int(q.first_seq))
    t.seek_time(_us_to_datetime(us))
    nxt = getattr(t, "next_seq", None)
    if isinstance(nxt, int):
        return nxt
    msg = t.read_next(timeout=0)
    return int(q.next_seq) if msg is None else int(msg.seq)


#: Data-file header fields used for planning (docs/FORMAT.md: "LMQDATA\0" magic, then
#: little-endian fields; first_seq at byte 16).
_DATA_MAGIC = b"LMQDATA\0"
_FIRST_SEQ_AT = 16


def file_starts(q: Any, path: str) -> list[int] | None:
    """First sequence of each data file of the queue at ``path``, sorted, or None.

    Uses the engine's ``Queue.data_files()`` when it has one; otherwise reads the 64-byte
    header of each ``YYYY/MM/DD/*.data`` file. Only where partitions are cut depends on this,
    never which rows are read (the ranges stay contiguous), so an unreadable or unknown header
    just means no cut there.
    """
    fn = getattr(q, "data_files", None)
    if callable(fn):
        try:
            return sorted({int(f.first_seq) for f in fn()})
        except (TypeError, KeyError, ValueError, AttributeError):
            pass
    starts: set[int] = set()
    for data in glob.glob(os.path.join(glob.escape(path), "[0-9]" * 4, "*", "*", "*.data")):
        try:
            with open(data, "rb") as f:
                head = f.read(_FIRST_SEQ_AT + 8)
        except OSError:
            continue
        if len(head) == _FIRST_SEQ_AT + 8 and head.startswith(_DATA_MAGIC):
            starts.add(int.from_bytes(head[_FIRST_SEQ_AT:], "little"))
    return sorted(starts) or None


def split_range(
    start: int, end: int, rows_per_partition: int, file_starts: Sequence[int] | None = None
) -> list[tuple[int, int]]:
    """Split ``[start, end)`` into contiguous ranges for parallel reads.

    Cut at every data-file start (one partition per file), then cut ranges longer than
    ``rows_per_partition`` at multiples of the sparse-index interval.
    """
    if end <= start:
        return []
    cuts = {start, end}
    if file_starts:
        i = bisect.bisect_right(file_starts, start)
        while i < len(file_starts) and file_starts[i] < end:
            cuts.add(file_starts[i])
            i += 1
    step = rows_per_partition
    if step >= INDEX_ALIGN:
        step -= step % INDEX_ALIGN
    ordered = sorted(cuts)
    out: list[tuple[int, int]] = []
    for lo, hi in itertools.pairwise(ordered):
        s = lo
        while hi - s > rows_per_partition:
            nxt = (s // step + 1) * step
            out.append((s, nxt))
            s = nxt
        out.append((s, hi))
    return out


def plan_chunks(
    refs: Sequence[QueueRef],
    bounds: Bounds,
    rows_per_partition: int,
    fields: tuple[str, ...] = (),
    key_file: str | None = None,
) -> list[Chunk]:
    """The chunks a batch read needs, in queue then sequence order; each reads the
    flattened columns of ``fields``."""
    if bounds.empty:
        return []
    chunks: list[Chunk] = []
    for ref in refs:
        if bounds.queues is not None and ref.name not in bounds.queues:
            continue
        if ref.archive:
            chunks.extend(plan_archive_chunks(ref, bounds, rows_per_partition, key_file))
            continue
        with open_queue(ref.path, key_file) as q:
            first, nxt = queue_range(q)
            lo = first if bounds.seq_lo is None else max(first, bounds.seq_lo)
            hi = nxt if bounds.seq_hi is None else min(nxt, bounds.seq_hi)
            if bounds.keys is not None or bounds.where is not None or bounds.query is not None:
                # Keys are answered by the key index, a header value by its secondary
                # index: one small task per queue.
                if lo < hi:
                    chunks.append(
                        Chunk(
                            ref.name,
                            ref.path,
                            lo,
                            hi,
                            keys=tuple(sorted(bounds.keys or ())),
                            where=bounds.where,
                            time_start_us=bounds.time_lo_us,
                            time_end_us=bounds.time_hi_us,
                            topics=tuple(sorted(bounds.topics or ())),
                            fields=fields,
                            query=None if bounds.keys is not None else bounds.query,
                            key_file=key_file,
                        )
                    )
                continue
            if bounds.time_lo_us is not None and lo < hi:
                lo = max(lo, seq_for_time(q, bounds.time_lo_us))
            if bounds.time_hi_us is not None and lo < hi:
                hi = min(hi, seq_for_time(q, bounds.time_hi_us))
            if lo >= hi:
                continue
            starts = file_starts(q, ref.path)
        topics = tuple(sorted(bounds.topics or ()))
        chunks.extend(
            Chunk(ref.name, ref.path, s, e, topics=topics, fields=fields, key_file=key_file)
            for s, e in split_range(lo, hi, rows_per_partition, starts)
        )
    return chunks


def plan_archive_chunks(
    ref: QueueRef, bounds: Bounds, rows_per_partition: int, key_file: str | None = None
) -> list[Chunk]:
    """Chunks of an archive: its data files' ranges within the bounds, cut like a queue's.

    Files whose time range misses ``[time_lo, time_hi)`` are skipped; the rows of the others
    are checked against the times (and keys) when read: an archive has no tailer to seek
    by time and no key index to look up (its key-index files are kept, not read).
    """
    from litemq.archive import open_archive

    if bounds.where is not None:
        raise ValueError(
            f"litemq: option where needs a queue's secondary indexes; {ref.path} is an archive "
            "(filter on headers in Spark instead)"
        )
    a = open_archive(ref.path, encryption_key=_key_bytes(key_file))
    lo_t, hi_t = bounds.time_lo_us, bounds.time_hi_us
    keys = tuple(sorted(bounds.keys)) if bounds.keys is not None else ()
    out: list[Chunk] = []
    for f in a.files:
        first, end = int(f.first_seq or 0), int(f.end_seq or 0)
        lo = first if bounds.seq_lo is None else max(first, bounds.seq_lo)
        hi = end if bounds.seq_hi is None else min(end, bounds.seq_hi)
        if lo >= hi:
            continue
        if lo_t is not None and int(f.last_ts or 0) < lo_t:
            continue
        if hi_t is not None and int(f.first_ts or 0) >= hi_t:
            continue
        topics = tuple(sorted(bounds.topics or ()))
        out.extend(
            Chunk(
                ref.name,
                ref.path,
                s,
                e,
                keys,
                lo_t,
                hi_t,
                archive=True,
                topics=topics,
                key_file=key_file,
            )
            for s, e in split_range(lo, hi, rows_per_partition, [first])
        )
    return out


def read_archive_chunk(chunk: Chunk, shaper: Shaper, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """An archive chunk's rows (the times and keys it names checked row by row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    a = _archive(chunk.path, chunk.key_file)
    if a.first_seq > chunk.start or a.end_seq < chunk.end:  # planned on a newer manifest
        _archive.cache_clear()
        a = _archive(chunk.path, chunk.key_file)
    # iter_batches accounts for every sequence of the chunk or raises ArchiveError (a
    # manifest that lies, a file that is not the one listed): the check open_archive's
    # readers share. Rows may still be fewer than sequences: holes key compaction left.
    for batch in a.iter_batches(chunk.start, chunk.end):
        mask = None
        if chunk.time_start_us is not None or chunk.time_end_us is not None:
            ts = batch.column("timestamp").cast(pa.int64())
            if chunk.time_start_us is not None:
                mask = pc.greater_equal(ts, chunk.time_start_us)
            if chunk.time_end_us is not None:
                m2 = pc.less(ts, chunk.time_end_us)
                mask = m2 if mask is None else pc.and_(mask, m2)
        if chunk.keys:
            m3 = pc.fill_null(
                pc.is_in(
                    batch.column("key"), value_set=pa.array(chunk.keys, batch.column("key").type)
                ),
                False,
            )
            mask = m3 if mask is None else pc.and_(mask, m3)
        if chunk.topics:  # an archive has no topic index to read: every row is checked
            m4 = pc.fill_null(
                pc.is_in(batch.column("topic"), value_set=pa.array(chunk.topics, pa.string())),
                False,
            )
            mask = m4 if mask is None else pc.and_(mask, m4)
        if mask is not None:
            batch = batch.filter(mask)
        for i in range(0, batch.num_rows, batch_rows):
            yield shaper.shape(batch.slice(i, batch_rows), chunk.name)


@functools.lru_cache(maxsize=16)
def _archive(uri: str, key_file: str | None = None) -> Any:
    """One ``Archive`` (its manifest read once) per archive and Python worker."""
    from litemq.archive import open_archive

    return open_archive(uri, encryption_key=_key_bytes(key_file))


@dataclass
class Shaper:
    """Turns the engine's record batches into the batches Spark expects for ``schema``."""

    columns: list[str]
    target: pa.Schema
    #: Flattened columns: column name to the index (and engine column) it shows.
    fields: dict[str, str] = field(default_factory=dict)
    _queue_cache: dict[str, Any] = field(default_factory=dict)

    def engine_columns(self) -> list[str]:
        """The columns to ask ``read_arrow`` for: those Spark wants (``queue`` is added
        here), and ``seq`` always (reads go on from the last row's)."""
        return [
            "seq",
            *(c for c in self.columns if c not in ("seq", "queue") and c not in self.fields),
        ]

    def queue_column(self, queue_name: str, n: int) -> pa.Array:
        """``n`` times ``queue_name``: a slice of one array kept per queue and grown when
        needed, so a batch costs no allocation for this column (its rows are all alike)."""
        import pyarrow as pa

        arr = self._queue_cache.get(queue_name)
        if arr is None or len(arr) < n:
            arr = pa.repeat(pa.scalar(queue_name, pa.string()), max(n, 1 << 16))
            self._queue_cache[queue_name] = arr
        return arr.slice(0, n)

    def shape(self, batch: pa.RecordBatch, queue_name: str) -> pa.RecordBatch:
        import pyarrow as pa

        n = batch.num_rows
        arrays = []
        for name, fld in zip(self.columns, self.target, strict=True):
            if name == "queue":
                arr = self.queue_column(queue_name, n)
            else:
                arr = batch.column(self.fields.get(name, name))
            if arr.type != fld.type:
                arr = arr.cast(fld.type)
            arrays.append(arr)
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)


def _find(q: Any, key: bytes, time_lo: int | None, time_hi: int | None) -> list[Any]:
    start = None if time_lo is None else _us_to_datetime(time_lo)
    end = None if time_hi is None else _us_to_datetime(time_hi)
    return list(q.find(key, start=start, end=end))


def _where_query(q: Any, where: tuple[str, str]) -> tuple[str, str, Any]:
    """The ``where`` option (``(header, value as text)``) as a query on the queue's index:
    the value read as an int for an int index."""
    name, text = where
    kind = q.indexes.get(name)
    if kind is None:
        raise ValueError(
            f"litemq: option where={name}=...: queue {q.path} has no index on {name!r} "
            f"(declare it with Queue.add_index)"
        )
    try:
        value: Any = int(text) if kind == "int" else text
    except ValueError:
        raise ValueError(f"litemq: option where: {name!r} is an int index; got {text!r}") from None
    return (name, "=", value)


def read_chunk(chunk: Chunk, shaper: Shaper, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Yield the chunk's rows as record batches of at most ``batch_rows`` rows."""
    if chunk.archive:
        yield from read_archive_chunk(chunk, shaper, batch_rows)
        return
    fields = list(chunk.fields)
    with open_queue(chunk.path, chunk.key_file) as q:
        lo, hi = max(chunk.start, int(q.first_seq)), chunk.end
        t_lo, t_hi = chunk.time_start_us, chunk.time_end_us
        columns = shaper.engine_columns()
        if chunk.keys:
            found: set[int] = set()
            for key in chunk.keys:
                for m in _find(q, key, t_lo, t_hi):
                    # The index answers by time; check every bound here as well.
                    if (
                        (not chunk.topics or m.topic in chunk.topics)
                        and lo <= m.seq < hi
                        and (t_lo is None or m.timestamp >= t_lo)
                        and (t_hi is None or m.timestamp < t_hi)
                    ):
                        found.add(m.seq)
            # Few rows: one engine read each, for the same columns as a scan.
            for s in sorted(found):
                batch = q.read_arrow(start=s, end=s + 1, columns=columns, fields=fields)
                yield shaper.shape(batch, chunk.name)
            return
        query = chunk.query
        if chunk.where is not None:
            query = _where_query(q, chunk.where)
        if query is not None:
            # Timestamps never decrease within a queue: a time range is a sequence range.
            if t_lo is not None and lo < hi:
                lo = max(lo, seq_for_time(q, t_lo))
            if t_hi is not None and lo < hi:
                hi = min(hi, seq_for_time(q, t_hi))
            if chunk.topics and "topic" not in columns:
                columns = [*columns, "topic"]
            while lo < hi:
                batch = q.read_arrow(
                    start=lo,
                    end=hi,
                    max_rows=MAX_READ_ROWS,
                    columns=columns,
                    fields=fields,
                    where=query,
                )
                n = batch.num_rows
                if n == 0:
                    return
                lo = int(batch.column("seq")[n - 1].as_py()) + 1
                if chunk.topics:
                    batch = _keep_topics(batch, chunk.topics)
                for i in range(0, batch.num_rows, batch_rows):
                    yield shaper.shape(batch.slice(i, batch_rows), chunk.name)
            return
        s = lo
        if chunk.topics:
            yield from _read_topics(q, chunk, s, shaper, batch_rows)
            return
        # Ask the engine for about READ_BYTES per call (few calls, bounded memory whatever the
        # message size), and hand Spark slices of batch_rows rows.
        want = batch_rows
        while s < chunk.end:
            batch = q.read_arrow(
                start=s, end=chunk.end, max_rows=want, columns=columns, fields=fields
            )
            n = batch.num_rows
            if n == 0:
                # Only holes (sequences key compaction dropped) up to chunk.end.
                return
            for i in range(0, n, batch_rows):
                yield shaper.shape(batch.slice(i, batch_rows), chunk.name)
            s = int(batch.column("seq")[n - 1].as_py()) + 1  # past any holes too
            per_row = max(1, batch.nbytes // n)
            want = max(batch_rows, min(MAX_READ_ROWS, READ_BYTES // per_row))


def _keep_topics(batch: pa.RecordBatch, topics: Sequence[str]) -> pa.RecordBatch:
    """The rows of ``batch`` whose ``topic`` is one of ``topics`` (exact)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return batch.filter(pc.is_in(batch.column("topic"), value_set=pa.array(list(topics))))


def _read_topics(
    q: Any, chunk: Chunk, start: int, shaper: Shaper, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """The chunk's messages of ``chunk.topics``, topic by topic, each read through the
    engine's topic filter (files without the topic skipped, sealed files read where their
    topic index says, every row compared exactly)."""
    columns = shaper.engine_columns()  # always with seq: the next read starts after the last
    fields = list(chunk.fields)
    for topic in chunk.topics:
        s, want = start, batch_rows
        while s < chunk.end:
            batch = q.read_arrow(
                start=s, end=chunk.end, max_rows=want, columns=columns, topic=topic, fields=fields
            )
            n = batch.num_rows
            if n == 0:  # no more of the topic before chunk.end
                break
            for i in range(0, n, batch_rows):
                yield shaper.shape(batch.slice(i, batch_rows), chunk.name)
            s = int(batch.column("seq")[n - 1].as_py()) + 1
            per_row = max(1, batch.nbytes // n)
            want = max(batch_rows, min(MAX_READ_ROWS, READ_BYTES // per_row))


def arrow_schema(schema: StructType) -> Any:
    """The Arrow schema of a Spark schema, timestamps in UTC (the Python source's and the typed
    reader's batches are built against it)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # pragma: no cover - signature without timezone
        return to_arrow_schema(schema)
