"""A typed queue's `read_arrow` on several threads.

What a user relies on: the read spread over threads (cut at equal shares of
the sequences, anywhere in a file) returns exactly what a serial read
returns, for every type, nulls, bare rows and row batches stored or
compressed, rows of older schema versions, compacted files with holes and
any range; a damaged frame is still a CorruptedError naming it; and the
default (``LITEMQ_READ_THREADS`` unset: the cores, for ranges of at least
2 x 262,144 rows) is the serial read too.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import litemq
from test_arrow_parallel import FILE, same_as_serial
from test_typed import EVERY

UTC = dt.UTC


def row(i: int) -> dict[str, Any]:
    """Row ``i`` of EVERY: a value in each field, nulls where ``i % 7 == 3``."""
    if i % 7 == 3:
        return dict.fromkeys(EVERY.names)
    return {
        "flag": i % 3 == 0,
        "small": i % 30_000 - 15_000,
        "big": 2**63 + i,
        "ratio": i / 8,
        "at": dt.datetime(2026, 12, 2, tzinfo=UTC) + dt.timedelta(microseconds=i),
        "day": dt.date(2026, 1, 1) + dt.timedelta(days=i % 300),
        "amount": Decimal(i) / 100,
        "name": "é" * (i % 5) + str(i),
        "blob": bytes(i % 9),
    }


def fill(q: litemq.Queue, n: int) -> list[dict[str, Any]]:
    """``n`` rows as single appends, stored row batches and compressed ones."""
    rows = [row(i) for i in range(n)]
    app = q.appender()
    i = 0
    while i < n:
        k = min(n - i, 1 + i % 97)
        part = rows[i : i + k]
        if i % 3 == 0:
            for r in part:
                app.append(r, key=f"k{i % 40}" if i % 2 else None)
        else:
            app.append_batch(
                pa.RecordBatch.from_pylist(part, schema=EVERY), compress_together=i % 3 == 2
            )
        i += k
    app.flush()
    return rows


def test_parallel_typed_read_is_the_serial_read(
    qpath: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 4000
    with litemq.Queue(qpath, schema=EVERY, file_size=FILE, compression="lz4") as q:
        rows = fill(q, n)
        assert len(q.data_files()) >= 4
        whole = same_as_serial(q, monkeypatch)
        assert whole.select(EVERY.names).to_pylist() == rows
        same_as_serial(q, monkeypatch, columns=["name", "seq", "flag"])
        same_as_serial(q, monkeypatch, where=("small", ">", 0))
        for start, end, max_rows in [(7, None, None), (123, 2457, None), (400, 2600, 1777)]:
            got = same_as_serial(q, monkeypatch, start=start, end=end, max_rows=max_rows)
            stop = min(n if end is None else end, start + (max_rows or n))
            assert got.column("seq").to_pylist() == list(range(start, stop))


def test_rows_of_older_versions_and_holes(qpath: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = pa.schema([pa.field("small", pa.int16()), pa.field("name", pa.string())])
    with litemq.Queue(qpath, schema=old, file_size=FILE) as q:
        app = q.appender()
        for i in range(1500):
            app.append({"small": i % 1000, "name": f"n{i}"}, key=f"k{i % 200}")
        app.flush()
    with litemq.Queue(qpath, schema=EVERY, file_size=FILE, compression="zstd") as q:
        fill(q, 1500)
        q.appender().roll()
        assert q.compact(grace=0).records_dropped > 0
        kept = [m.seq for m in q.tailer()]
        whole = same_as_serial(q, monkeypatch)
        assert whole.column("seq").to_pylist() == kept
        # The first version's rows: its fields widened, the others null.
        assert whole.column("small").type == pa.int16()
        assert whole.column("flag").null_count >= sum(1 for s in kept if s < 1500)


def test_a_damaged_row_is_reported_by_every_read(
    qpath: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with litemq.Queue(qpath, schema=EVERY, file_size=FILE, compression="lz4") as q:
        fill(q, 3000)
        target = q.data_files()[-2]
        path, seq = Path(target.path), int(target.first_seq)
    raw = bytearray(path.read_bytes())
    raw[4096 + 20] ^= 0x40  # inside the file's first frame
    path.write_bytes(bytes(raw))
    for threads in (1, 2, 3):
        monkeypatch.setenv("LITEMQ_READ_THREADS", str(threads))
        with litemq.Queue(qpath, read_only=True) as q:
            with pytest.raises(litemq.CorruptedError) as info:
                q.read_arrow()
            assert Path(info.value.file).name == path.name, threads
            if info.value.seq is not None:
                assert info.value.seq >= seq


def test_the_default_reads_large_ranges_on_the_cores(
    qpath: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 600_000  # two parts of 262,144 rows or more
    schema = pa.schema([pa.field("i", pa.int64()), pa.field("s", pa.string())])
    with litemq.Queue(qpath, schema=schema, file_size=8 << 20) as q:
        app = q.appender()
        for lo in range(0, n, 50_000):
            ids = pa.array(range(lo, lo + 50_000), pa.int64())
            app.append_batch(
                pa.record_batch([ids, pa.compute.cast(ids, pa.string())], schema=schema)
            )
        app.flush()
        monkeypatch.setenv("LITEMQ_READ_THREADS", "1")
        serial = q.read_arrow()
        monkeypatch.delenv("LITEMQ_READ_THREADS")
        got = q.read_arrow()
        got.validate(full=True)
        assert got.equals(serial)
        assert got.column("i").to_pylist() == list(range(n))
