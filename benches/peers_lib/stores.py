"""One adapter per store, all with the interface of :class:`Store`.

An adapter opens a store in a directory, appends chunks of payloads, makes
what it appended durable (``sync``), and reads every payload back in order.
The timing lives in ``phases``; an adapter only says how its store is used,
the way its documentation shows it.

Two kinds of append exist. A *per-call* store appends one message per call
in a plain Python loop (``PerCallStore``). A *batched* store hands 1,000
messages to one transaction or pipeline (``batched = True``); the phases
then always give it chunks of exactly 1,000.
"""

from __future__ import annotations

import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from itertools import chain
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any, ClassVar

BATCH = 1000
"""Messages per transaction, pipeline, batch call or durable sync."""


class Unavailable(Exception):
    """The store cannot run here (library missing, no redis-server...)."""


class Store:
    """A store under test. Subclasses set the class attributes and the methods."""

    key: ClassVar[str]
    """Stable identifier, used in the JSON and on the command line."""
    label: ClassVar[str]
    """Row label in the table."""
    append_api: ClassVar[str]
    """How appends are made, as a user would write it."""
    read_api: ClassVar[str]
    """How reads are made."""
    durable_how: ClassVar[str]
    """What the durable variant does."""
    batched: ClassVar[bool] = False
    is_litemq: ClassVar[bool] = False
    durable_only: ClassVar[bool] = False
    consuming_read: ClassVar[bool] = False
    """Reading removes messages (a work queue), so a read is also a write."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.path = Path()
        self.durable = False

    @classmethod
    def check(cls) -> None:
        """Raise :class:`Unavailable` when the store cannot run here."""

    def open(self, path: Path, durable: bool) -> None:
        self.path = path
        self.durable = durable
        self._open()

    def _open(self) -> None:
        raise NotImplementedError

    def append_chunk(self, payloads: list[bytes]) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        """Make every earlier append durable (called every 1,000 when durable)."""

    def reader(self, count: int) -> Iterator[bytes]:
        """Yield the first ``count`` payloads in order."""
        raise NotImplementedError

    def read_sync(self) -> None:
        """Make the reads so far durable (only consuming queues need it)."""

    def close(self) -> None:
        raise NotImplementedError

    def data_dir(self) -> Path:
        """The directory whose size is the store's bytes on disk."""
        return self.path

    def data_bytes(self) -> int | None:
        """Bytes of data written, where the store preallocates more than it uses."""
        return None


def _import(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        raise Unavailable(f"cannot import {module}: {exc}") from exc


class PerCallStore(Store):
    """A store appended one message per call: ``_open`` sets ``self._put``."""

    _put: Callable[[bytes], Any]

    def append_chunk(self, payloads: list[bytes]) -> None:
        put = self._put
        for payload in payloads:
            put(payload)


# --------------------------------------------------------------------------
# The plain-file baseline
# --------------------------------------------------------------------------

_FRAME = struct.Struct("<II")


class PlainFile(Store):
    """What a user writes by hand: a buffered file of length + CRC32 frames."""

    key = "file"
    label = "plain file (length + CRC32, Python loop)"
    append_api = "f.write(pack('<II', len(p), crc32(p)) + p) per message"
    read_api = "f.read(8) + f.read(len) per message, CRC checked"
    durable_how = "f.flush() + os.fsync() every 1,000"

    def _open(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.file = (self.path / "log.bin").open("ab")

    def append_chunk(self, payloads: list[bytes]) -> None:
        write = self.file.write
        pack = _FRAME.pack
        crc32 = zlib.crc32
        for payload in payloads:
            write(pack(len(payload), crc32(payload)) + payload)

    def sync(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())

    def reader(self, count: int) -> Iterator[bytes]:
        self.file.close()
        with (self.path / "log.bin").open("rb") as f:
            read = f.read
            unpack = _FRAME.unpack
            crc32 = zlib.crc32
            for _ in range(count):
                header = read(8)
                if len(header) < 8:
                    return
                length, crc = unpack(header)
                payload = read(length)
                if crc32(payload) != crc:
                    raise ValueError("CRC mismatch in plain file")
                yield payload

    def close(self) -> None:
        self.file.close()


# --------------------------------------------------------------------------
# lmdb
# --------------------------------------------------------------------------

_SEQ = struct.Struct(">Q")


class Lmdb(Store):
    """lmdb, one write transaction per 1,000 (``putmulti`` with MDB_APPEND)."""

    key = "lmdb"
    label = "lmdb (txn per 1,000)"
    append_api = "txn.cursor().putmulti(1,000 (8-byte BE seq, payload), append=True)"
    read_api = "for v in txn.cursor().iternext(keys=False)"
    durable_how = "sync=True: every commit fsyncs (the default run: sync=False)"
    batched = True

    @classmethod
    def check(cls) -> None:
        _import("lmdb")

    def _open(self) -> None:
        lmdb = _import("lmdb")
        self.env = lmdb.open(
            str(self.path),
            map_size=1 << 34,
            sync=self.durable,
            metasync=self.durable,
        )
        self.next = 0

    def append_chunk(self, payloads: list[bytes]) -> None:
        pack = _SEQ.pack
        start = self.next
        with self.env.begin(write=True) as txn:
            txn.cursor().putmulti(
                [(pack(start + i), p) for i, p in enumerate(payloads)], append=True
            )
        self.next = start + len(payloads)

    def reader(self, count: int) -> Iterator[bytes]:
        self.txn = self.env.begin()
        values: Iterator[bytes] = self.txn.cursor().iternext(keys=False, values=True)
        return values

    def close(self) -> None:
        txn = getattr(self, "txn", None)
        if txn is not None:
            txn.abort()
        self.env.close()


# --------------------------------------------------------------------------
# sqlite3 in WAL mode
# --------------------------------------------------------------------------


class Sqlite(Store):
    """The standard library's sqlite3, WAL, ``executemany`` per 1,000."""

    key = "sqlite"
    label = "sqlite3 WAL (executemany per 1,000)"
    append_api = "executemany('INSERT ... VALUES (?)', 1,000 rows); commit()"
    read_api = "for (p,) in execute('SELECT payload ... ORDER BY seq')"
    durable_how = "synchronous=FULL: every commit fsyncs the WAL (default run: NORMAL)"
    batched = True

    def _open(self) -> None:
        import sqlite3

        self.path.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path / "queue.db")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if self.durable else 'NORMAL'}")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS q (seq INTEGER PRIMARY KEY, payload BLOB NOT NULL)"
        )
        self.db.commit()

    def append_chunk(self, payloads: list[bytes]) -> None:
        self.db.executemany("INSERT INTO q (payload) VALUES (?)", [(p,) for p in payloads])
        self.db.commit()

    def reader(self, count: int) -> Iterator[bytes]:
        cursor = self.db.execute("SELECT payload FROM q ORDER BY seq")
        return map(itemgetter(0), cursor)

    def close(self) -> None:
        self.db.close()


# --------------------------------------------------------------------------
# Queue libraries from PyPI
# --------------------------------------------------------------------------


class Queuelib(PerCallStore):
    """Scrapy's queuelib ``FifoDiskQueue``: one ``os.write`` per push, no fsync."""

    key = "queuelib"
    label = "queuelib FifoDiskQueue"
    append_api = "q.push(p) per message"
    read_api = "q.pop() per message (consumes)"
    durable_how = "no fsync API: os.fsync(q.headf.fileno()) every 1,000 (reaches inside)"
    consuming_read = True

    @classmethod
    def check(cls) -> None:
        _import("queuelib")

    def _open(self) -> None:
        queuelib = _import("queuelib")
        self.q = queuelib.FifoDiskQueue(str(self.path))
        self._put = self.q.push

    def sync(self) -> None:
        os.fsync(self.q.headf.fileno())

    def reader(self, count: int) -> Iterator[bytes]:
        return iter(self.q.pop, None)

    def close(self) -> None:
        self.q.close()


class DiskcacheDeque(PerCallStore):
    """diskcache ``Deque`` (SQLite underneath), defaults."""

    key = "diskcache"
    label = "diskcache Deque"
    append_api = "d.append(p) per message"
    read_api = "d.popleft() per message (consumes)"
    durable_how = "sqlite_synchronous=2 (FULL) and d.transact() around every 1,000"
    consuming_read = True

    @classmethod
    def check(cls) -> None:
        _import("diskcache")

    def _open(self) -> None:
        diskcache = _import("diskcache")
        if self.durable:
            cache = diskcache.Cache(str(self.path), eviction_policy="none", sqlite_synchronous=2)
            self.deque = diskcache.Deque.fromcache(cache)
        else:
            self.deque = diskcache.Deque(directory=str(self.path))
        self._put = self.deque.append
        self._txn: Any = None
        self._begin()

    def _begin(self) -> None:
        # Durable: one transaction per 1,000 appends or pops, ended by sync().
        if self.durable:
            self._txn = self.deque.transact()
            self._txn.__enter__()

    def _end(self) -> None:
        if self._txn is not None:
            self._txn.__exit__(None, None, None)
            self._txn = None

    def sync(self) -> None:
        self._end()
        self._begin()

    read_sync = sync

    def reader(self, count: int) -> Iterator[bytes]:
        popleft = self.deque.popleft
        for _ in range(count):
            yield popleft()

    def close(self) -> None:
        self._end()
        self.deque.cache.close()


class PersistQueue(PerCallStore):
    """persist-queue's file-based ``Queue`` with its defaults."""

    key = "persistqueue"
    label = "persist-queue Queue"
    append_api = "q.put(p) per message (pickles; rewrites its info file per put)"
    read_api = "q.get_nowait() per message (consumes), task_done()"
    durable_how = "os.fsync(q.headf.fileno()) every 1,000 (it fsyncs only per 100-item chunk)"
    consuming_read = True

    @classmethod
    def check(cls) -> None:
        _import("persistqueue")

    def _open(self) -> None:
        persistqueue = _import("persistqueue")
        self.q = persistqueue.Queue(str(self.path / "q"), tempdir=str(self.path))
        self._put = self.q.put

    def sync(self) -> None:
        os.fsync(self.q.headf.fileno())

    def reader(self, count: int) -> Iterator[bytes]:
        get = self.q.get_nowait
        done = self.q.task_done
        for _ in range(count):
            payload = get()
            done()
            yield payload

    def close(self) -> None:
        # persist-queue has no close(); it closes its files when collected.
        for f in (self.q.headf, self.q.tailf):
            f.close()


class Litequeue(PerCallStore):
    """litequeue's ``LiteQueue`` (SQLite, WAL, synchronous=NORMAL)."""

    key = "litequeue"
    label = "litequeue LiteQueue"
    append_api = "q.put(p) per message"
    read_api = "m = q.pop(); q.done(m.message_id) per message (consumes)"
    durable_how = "PRAGMA synchronous=FULL; appends in one transaction per 1,000"
    consuming_read = True

    @classmethod
    def check(cls) -> None:
        _import("litequeue")

    def _open(self) -> None:
        litequeue = _import("litequeue")
        self.path.mkdir(parents=True, exist_ok=True)
        self.q = litequeue.LiteQueue(str(self.path / "queue.db"))
        self._put = self.q.put
        self._in_txn = False
        if self.durable:
            self.q.conn.execute("PRAGMA synchronous=FULL")

    def append_chunk(self, payloads: list[bytes]) -> None:
        if self.durable and not self._in_txn:
            self.q.conn.execute("BEGIN")
            self._in_txn = True
        super().append_chunk(payloads)

    def sync(self) -> None:
        if self._in_txn:
            self.q.conn.execute("COMMIT")
            self._in_txn = False

    def reader(self, count: int) -> Iterator[bytes]:
        self.sync()
        pop = self.q.pop
        done = self.q.done
        for _ in range(count):
            message = pop()
            if message is None:
                return
            done(message.message_id)
            yield message.data

    def close(self) -> None:
        self.sync()
        self.q.close()


# --------------------------------------------------------------------------
# Redis Streams (a server started by the benchmark, 127.0.0.1 only)
# --------------------------------------------------------------------------


class RedisStream(Store):
    """Redis Streams: pipelined XADD per 1,000, XRANGE pages of 1,000."""

    key = "redis"
    label = "Redis Streams (pipelined XADD, AOF)"
    append_api = "pipeline(transaction=False): 1,000 XADD q * p <payload>; execute()"
    read_api = "XRANGE q (last +  COUNT 1000, page after page"
    durable_how = "appendfsync always (default run: appendfsync everysec)"
    batched = True

    @classmethod
    def check(cls) -> None:
        _import("redis")

    def _open(self) -> None:
        redis = _import("redis")
        port = self.options.get("redis_port")
        if not port:
            raise Unavailable("no redis-server was started")
        self.client = redis.Redis(host="127.0.0.1", port=int(port))
        self.client.ping()
        self.client.config_set("appendfsync", "always" if self.durable else "everysec")

    def append_chunk(self, payloads: list[bytes]) -> None:
        pipe = self.client.pipeline(transaction=False)
        xadd = pipe.xadd
        for payload in payloads:
            xadd("q", {"p": payload})
        pipe.execute()

    def reader(self, count: int) -> Iterator[bytes]:
        xrange = self.client.xrange
        last = "-"
        while True:
            page = xrange("q", min=last, max="+", count=BATCH)
            if not page:
                return
            for _, fields in page:
                yield fields[b"p"]
            last = "(" + page[-1][0].decode()

    def close(self) -> None:
        self.client.close()

    def data_dir(self) -> Path:
        return Path(self.options["redis_dir"])


# --------------------------------------------------------------------------
# litemq
# --------------------------------------------------------------------------


def _litemq() -> Any:
    return _import("litemq")


class LitemqBase(Store):
    """Opens a ``litemq.Queue``: ``flush='async'``, or ``'sync'`` when ``sync_mode``."""

    is_litemq = True
    sync_mode: ClassVar[bool] = False

    @classmethod
    def check(cls) -> None:
        _litemq()

    def _open(self) -> None:
        litemq = _litemq()
        self.q = litemq.Queue(str(self.path), flush="sync" if self.sync_mode else "async")
        self.app = self.q.appender()

    def sync(self) -> None:
        self.app.flush()

    def data_bytes(self) -> int | None:
        # Header and frame bytes of the data files (the disk holds about that:
        # files are sparse, allocated as they fill and trimmed when sealed).
        self.app.flush()
        written: int = self.q.stats().data_bytes_written
        return written

    def reader(self, count: int) -> Iterator[bytes]:
        return map(attrgetter("payload"), self.q.tailer())

    def close(self) -> None:
        self.q.close()


class LitemqAppend(LitemqBase, PerCallStore):
    """litemq per-call ``append`` in a loop; read by iterating a tailer."""

    key = "litemq"
    label = "litemq append / tailer"
    append_api = "app.append(p) per message"
    read_api = "for msg in q.tailer(): msg.payload"
    durable_how = "app.flush() every 1,000 (returns once written and msync'd)"

    def _open(self) -> None:
        super()._open()
        self._put = self.app.append


class LitemqBatch(LitemqBase):
    """litemq ``append_batch`` of 1,000; read with ``read_arrow``."""

    key = "litemq_batch"
    label = "litemq append_batch / read_arrow"
    append_api = "app.append_batch(list of 1,000)"
    read_api = "q.read_arrow(start=s, max_rows=65536) until the end (Arrow RecordBatch)"
    durable_how = "app.flush() after every append_batch of 1,000"
    batched = True

    def _open(self) -> None:
        super()._open()
        # Load pyarrow now, so the read phase does not time its import.
        import pyarrow.compute  # noqa: F401

        self.q.read_arrow(max_rows=1)

    def append_chunk(self, payloads: list[bytes]) -> None:
        self.app.append_batch(payloads)

    def read_columns(self, count: int, deadline: float) -> tuple[int, int]:
        """Read ``count`` rows as Arrow batches; return (rows, payload bytes)."""
        import pyarrow.compute as pc

        rows = nbytes = 0
        start = self.q.first_seq
        while rows < count and time.perf_counter() < deadline:
            batch = self.q.read_arrow(start=start, max_rows=min(65536, count - rows))
            got = batch.num_rows
            if got == 0:
                break
            payload = batch.column(batch.schema.get_field_index("payload"))
            nbytes += pc.sum(pc.binary_length(payload)).as_py()
            rows += got
            start += got
        return rows, nbytes


class LitemqArrowAll(LitemqBatch):
    """litemq ``append_batch`` of 1,000; the whole queue read by one ``read_arrow()``."""

    key = "litemq_arrow_all"
    label = "litemq append_batch / read_arrow() whole"
    read_api = "q.read_arrow() of the whole queue in one call (Arrow RecordBatch)"

    def read_columns(self, count: int, deadline: float) -> tuple[int, int]:
        """One call for every row (the deadline cannot cut it short)."""
        import pyarrow.compute as pc

        batch = self.q.read_arrow(start=self.q.first_seq, max_rows=count)
        payload = batch.column(batch.schema.get_field_index("payload"))
        return batch.num_rows, pc.sum(pc.binary_length(payload)).as_py() or 0


class LitemqReadBatch(LitemqBase):
    """litemq ``append_batch`` of 1,000; read with ``tailer.read_batch(1000)``."""

    key = "litemq_read_batch"
    label = "litemq append_batch / read_batch"
    append_api = "app.append_batch(list of 1,000)"
    read_api = "t.read_batch(1000, timeout=0) until empty: msg.payload of each"
    durable_how = "app.flush() after every append_batch of 1,000"
    batched = True

    def append_chunk(self, payloads: list[bytes]) -> None:
        self.app.append_batch(payloads)

    def reader(self, count: int) -> Iterator[bytes]:
        t = self.q.tailer()
        read = t.read_batch
        payload = attrgetter("payload")
        return chain.from_iterable(
            map(payload, batch) for batch in iter(lambda: read(1000, timeout=0), [])
        )


class LitemqSyncThreads(LitemqBase, PerCallStore):
    """litemq ``flush='sync'``: each append durable on return; 4 threads group-commit."""

    key = "litemq_sync4"
    label = "litemq flush='sync', 4 threads"
    append_api = "app.append(p) per message from 4 threads sharing one appender"
    read_api = "for msg in q.tailer(): msg.payload"
    durable_how = "flush='sync': every append returns once durable; group commit"
    sync_mode = True
    durable_only = True
    threads = 4

    def _open(self) -> None:
        super()._open()
        self._put = self.app.append

    def sync(self) -> None:
        """Nothing to do: in sync mode every append is durable when it returns."""

    def append_threads(self, pool: list[bytes], total: int, deadline: float) -> int:
        """Append ``total`` messages from ``threads`` threads; return how many."""
        done = [0] * self.threads
        share = total // self.threads

        def run(index: int) -> None:
            put = self._put
            count = 0
            while count < share and time.perf_counter() < deadline:
                chunk = pool[: min(len(pool), share - count, 100)]
                for payload in chunk:
                    put(payload)
                count += len(chunk)
            done[index] = count

        workers = [threading.Thread(target=run, args=(i,)) for i in range(self.threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return sum(done)


STORES: list[type[Store]] = [
    LitemqAppend,
    LitemqBatch,
    LitemqArrowAll,
    LitemqReadBatch,
    LitemqSyncThreads,
    PlainFile,
    Lmdb,
    Sqlite,
    Queuelib,
    DiskcacheDeque,
    PersistQueue,
    Litequeue,
    RedisStream,
]
"""Every store, in table order."""

BY_KEY = {store.key: store for store in STORES}
