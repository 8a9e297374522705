"""`Queue.read_arrow` reading several data files at once on threads.

What a user relies on: a read spread over threads returns exactly what a
serial read returns (every column, in sequence order, whatever the cuts,
codecs, encryption, batches or holes), a damaged sealed file is still a
CorruptedError naming it (the earliest one when two are damaged), and a read
beside a writer that rolls files is consistent. ``LITEMQ_READ_THREADS=1``
gives the serial read each parallel one is compared with.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import litemq

#: Small files: a few hundred messages each, so a read spans many.
FILE = 64 * 1024
KEY = bytes(range(32))


def payload(i: int) -> bytes:
    return f"{i:08d}".encode() * (1 + i % 13)


def read(q: litemq.Queue, threads: int | str, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> Any:
    monkeypatch.setenv("LITEMQ_READ_THREADS", str(threads))
    batch = q.read_arrow(**kw)
    batch.validate(full=True)
    return batch


def same_as_serial(q: litemq.Queue, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> pa.RecordBatch:
    """Reads with 1 thread and with 2, 3, 5 and "auto" (the cores), asserting
    the batches are equal."""
    serial = read(q, 1, monkeypatch, **kw)
    for threads in (2, 3, 5, "auto"):
        got = read(q, threads, monkeypatch, **kw)
        assert got.schema == serial.schema
        for name in serial.schema.names:
            assert got.column(name).equals(serial.column(name)), (threads, kw, name)
        assert got.equals(serial), (threads, kw)
    return serial


def fill_mixed(q: litemq.Queue, n: int) -> None:
    """Messages with and without every optional field, some compressed."""
    app = q.appender()
    for i in range(n):
        kw: dict[str, Any] = {}
        if i % 3 == 0:
            kw["key"] = f"k{i % 50}"
        if i % 5 == 1:
            kw["headers"] = {"h": str(i), "n": b"\x00" * (i % 4)}
        if i % 7 == 2:
            kw["topic"] = "orders"
            kw["tags"] = ["paid"] if i % 2 else ["new", "eu"]
        if i % 11 == 3:
            kw["priority"] = 1 + i % 9
        if i % 13 == 4:
            kw["ttl"] = timedelta(days=365)
        if i % 17 == 5:
            kw["compress"] = "zstd"
        app.append(payload(i), **kw)
    app.flush()


def test_parallel_read_is_the_serial_read(qpath: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 3000
    with litemq.Queue(qpath, file_size=FILE, indexes={"h": "str"}) as q:
        fill_mixed(q, n)
        assert len(q.data_files()) >= 5
        whole = same_as_serial(q, monkeypatch)
        assert whole.num_rows == n
        assert whole.column("seq").to_pylist() == list(range(n))
        assert whole.column("payload").to_pylist() == [payload(i) for i in range(n)]
        same_as_serial(q, monkeypatch, raw=True)
        same_as_serial(q, monkeypatch, columns=["payload", "seq"])
        same_as_serial(q, monkeypatch, columns=["tags", "expires_at", "codec", "raw_len"])
        same_as_serial(q, monkeypatch, columns=["seq"], fields=["h"])
        same_as_serial(q, monkeypatch, fields=["h"])
        # Cuts inside files: start, end and max_rows at odd places.
        for start, end, max_rows in [
            (7, None, None),
            (0, 2999, None),
            (123, 2457, None),
            (5, None, 1001),
            (400, 2600, 1777),
            (1, 3, None),
        ]:
            got = same_as_serial(q, monkeypatch, start=start, end=end, max_rows=max_rows)
            stop = min(n if end is None else end, start + (max_rows or n))
            assert got.column("seq").to_pylist() == list(range(start, stop))


@pytest.mark.parametrize(
    "opts",
    [
        {"compression": "zstd"},
        {"compression": "lz4"},
        {"encryption_key": KEY},
        {"encryption_key": KEY, "compression": "gzip"},
    ],
    ids=["zstd", "lz4", "encrypted", "encrypted-gzip"],
)
def test_compressed_and_encrypted_files(
    qpath: Path, monkeypatch: pytest.MonkeyPatch, opts: dict[str, Any]
) -> None:
    n = 5000
    with litemq.Queue(qpath, file_size=FILE, **opts) as q:
        fill_mixed(q, n)
        assert len(q.data_files()) >= 4
        whole = same_as_serial(q, monkeypatch)
        assert whole.column("payload").to_pylist() == [payload(i) for i in range(n)]
        same_as_serial(q, monkeypatch, raw=True)
        same_as_serial(q, monkeypatch, start=333, end=4222, max_rows=3500)


def test_batches_compressed_together(qpath: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 6000
    with litemq.Queue(qpath, file_size=FILE, compression="zstd") as q:
        app = q.appender()
        for lo in range(0, n, 100):
            items: list[Any] = [
                {"payload": payload(i), "headers": {"i": str(i)}} if i % 4 else payload(i)
                for i in range(lo, lo + 100)
            ]
            app.append_batch(items, compress_together=True)
        app.flush()
        assert len(q.data_files()) >= 3
        whole = same_as_serial(q, monkeypatch)
        assert whole.column("payload").to_pylist() == [payload(i) for i in range(n)]
        # Cuts inside batches and inside files.
        same_as_serial(q, monkeypatch, start=150, end=5950, max_rows=4321)
        same_as_serial(q, monkeypatch, raw=True, start=1, end=n - 1)


def test_compacted_queue_with_holes(qpath: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 4000
    with litemq.Queue(qpath, file_size=FILE) as q:
        app = q.appender()
        for i in range(n):
            # Keyed messages superseded later are dropped: holes in every file.
            app.append(payload(i), key=f"k{i % 300}" if i % 2 else None)
        app.flush()
        app.roll()
        assert q.compact(grace=0).records_dropped > 0
        kept = [m.seq for m in q.tailer()]
        assert len(kept) < n
        assert kept[-1] == n - 1
        whole = same_as_serial(q, monkeypatch)
        assert whole.column("seq").to_pylist() == kept
        assert whole.column("payload").to_pylist() == [payload(i) for i in kept]
        got = same_as_serial(q, monkeypatch, start=kept[100], end=kept[1500])
        assert got.column("seq").to_pylist() == kept[100:1500]
        # max_rows counts rows: the caller reads on past the holes.
        got = same_as_serial(q, monkeypatch, start=kept[10], max_rows=1200)
        assert got.column("seq").to_pylist() == kept[10:1210]


def sealed_queue(qpath: Path, n: int = 4000) -> list[Path]:
    """A closed queue over many 64 KiB files; its data files, oldest first."""
    with litemq.Queue(qpath, file_size=FILE) as q:
        q.appender().append_batch([i.to_bytes(4, "little") * 25 for i in range(n)])
        q.appender().flush()
    files = sorted(qpath.rglob("*.data"))
    assert len(files) >= 8
    return files


def flip(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x40
    path.write_bytes(bytes(raw))


# A padding byte after the first frame (100-byte message: 121 bytes padded to
# 128) that no frame CRC covers: only the footer's CRC of the file finds it.
PADDING = 4096 + 124


@pytest.mark.parametrize("which", [1, -3], ids=["early-file", "late-file"])
def test_damaged_sealed_file_among_many(
    qpath: Path, monkeypatch: pytest.MonkeyPatch, which: int
) -> None:
    files = sealed_queue(qpath)
    flip(files[which], PADDING)
    for threads in (1, 2, 3):
        monkeypatch.setenv("LITEMQ_READ_THREADS", str(threads))
        with litemq.Queue(qpath, read_only=True) as q:
            with pytest.raises(litemq.CorruptedError) as info:
                q.read_arrow()
            assert Path(info.value.file).name == files[which].name, threads
            assert "footer" in info.value.reason


def test_first_damaged_file_wins(qpath: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = sealed_queue(qpath)
    flip(files[1], PADDING)
    flip(files[-2], PADDING)
    monkeypatch.setenv("LITEMQ_READ_THREADS", "2")
    for _ in range(5):
        with litemq.Queue(qpath, read_only=True) as q:
            with pytest.raises(litemq.CorruptedError) as info:
                q.read_arrow()
            assert Path(info.value.file).name == files[1].name
    # Past the first damaged file, the second is the one reported.
    with litemq.Queue(qpath, read_only=True) as q:
        start = litemq_first_seq_of(q, files[2])
        with pytest.raises(litemq.CorruptedError) as info:
            q.read_arrow(start=start)
        assert Path(info.value.file).name == files[-2].name


def litemq_first_seq_of(q: litemq.Queue, path: Path) -> int:
    for f in q.data_files():
        if Path(f.path).name == path.name:
            return int(f.first_seq)
    raise AssertionError(path)


def test_read_beside_a_writer_rolling_files(qpath: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITEMQ_READ_THREADS", "3")
    n = 20_000
    done = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            with litemq.Queue(qpath, file_size=FILE) as w:
                app = w.appender()
                for lo in range(0, n, 200):
                    app.append_batch([payload(i) for i in range(lo, lo + 200)])
                    app.flush()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            done.set()

    with litemq.Queue(qpath, file_size=FILE) as _:
        pass  # created before the reader opens it
    writer = threading.Thread(target=write)
    writer.start()
    reads = 0

    def check(b: pa.RecordBatch) -> None:
        seqs = b.column("seq").to_pylist()
        assert seqs == list(range(len(seqs)))
        assert b.column("payload").to_pylist() == [payload(i) for i in seqs]

    try:
        with litemq.Queue(qpath, read_only=True) as q:
            while not done.is_set() or reads == 0:
                check(q.read_arrow())
                reads += 1
            final = q.read_arrow()
            check(final)
            assert final.num_rows == n
    finally:
        writer.join()
    assert not errors, errors
