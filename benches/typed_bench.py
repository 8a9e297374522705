"""Typed journals (issue 35): the three goals side by side in one run.

    LITEMQ_BENCH_N=10000000 nice .venv/bin/python benches/typed_bench.py

The issue's 6-field market-data schema (int64 time, str symbol, float64 price,
int64 size, int8 side, int64 id), N events (default 10,000,000; ``LITEMQ_BENCH_N``
scales it down):

1. ``append_batch`` of 1,000-row ``pyarrow.RecordBatch``es into a typed queue, until
   every row is written (flushed): rows/s (goal: at least 20 M/s);
2. ``read_arrow()`` of the whole queue against ``pyarrow.parquet.read_table`` of the
   same rows from an uncompressed Parquet file, best of 3 each, interleaved: rows/s
   and their ratio (goals: at least 50 M rows/s, at least 1x Parquet);
3. the queue's bytes on disk (its data files) against the Parquet file's (goal: at
   most 1.5x).

Asserts that the queue gives back the rows written (the typed columns equal the
RecordBatches'). Prints figures and ratios. Disk: about 2 x N x 45 B in a temp dir,
removed at the end. Figures are only meaningful from a release build of the extension.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import litemq

SCHEMA = pa.schema(
    [
        ("time", pa.int64()),
        ("symbol", pa.string()),
        ("price", pa.float64()),
        ("size", pa.int64()),
        ("side", pa.int8()),
        ("id", pa.int64()),
    ]
)
SYMBOLS = ["AAPL", "MSFT", "GOOG", "AMZN", "TSLA", "NVDA", "META", "BRK.B"]
BATCH_ROWS = 1000
FILE_SIZE = 256 << 20


def market_batch(first: int, rows: int) -> pa.RecordBatch:
    """Rows ``first..first + rows`` of the market data: prices in cents-like steps,
    symbols cycling, sizes and sides varying."""
    ids = pa.array(range(first, first + rows), pa.int64())
    return pa.RecordBatch.from_arrays(
        [
            pa.array(range(1_700_000_000_000_000 + first, 1_700_000_000_000_000 + first + rows)),
            pa.array([SYMBOLS[i % len(SYMBOLS)] for i in range(first, first + rows)]),
            pa.array([100.0 + (i % 5000) * 0.01 for i in range(first, first + rows)]),
            pa.array([(i * 7) % 500 for i in range(first, first + rows)], pa.int64()),
            pa.array([i % 2 for i in range(first, first + rows)], pa.int8()),
            ids,
        ],
        schema=SCHEMA,
    )


def bytes_under(path: Path) -> int:
    """Bytes of the files under ``path`` as stored (blocks allocated), so a data file's
    unwritten tail does not count."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def data_bytes(path: Path) -> int:
    """Bytes of the queue's data files as written (their lengths; format 11 grows
    them with their data)."""
    return sum(p.stat().st_size for p in path.rglob("*.data"))


def best_of(rounds: int, f):  # type: ignore[no-untyped-def]
    best = float("inf")
    out = None
    for _ in range(rounds):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    n = int(os.environ.get("LITEMQ_BENCH_N", "10000000"))
    n -= n % BATCH_ROWS
    tmp = Path(tempfile.mkdtemp(prefix="litemq-typed-bench-"))
    try:
        # The batches are built before the clock starts: the goal is append_batch's rate.
        distinct = [market_batch(i * BATCH_ROWS, BATCH_ROWS) for i in range(min(n // BATCH_ROWS, 100))]
        batches = [distinct[i % len(distinct)] for i in range(n // BATCH_ROWS)]
        qpath = tmp / "q"
        with litemq.Queue(qpath, schema=SCHEMA, file_size=FILE_SIZE) as q:
            app = q.appender()
            t = time.perf_counter()
            for b in batches:
                app.append_batch(b)
            app.flush()
            append_s = time.perf_counter() - t
        table = pa.Table.from_batches(batches)
        ppath = tmp / "market.parquet"
        pq.write_table(table, ppath, compression="none")

        with litemq.Queue(qpath, read_only=True) as q:

            def read_queue() -> pa.Table:
                return pa.Table.from_batches([q.read_arrow()])

            def read_parquet() -> pa.Table:
                return pq.read_table(ppath)

            times = {"queue": float("inf"), "parquet": float("inf")}
            got = None
            for _ in range(3):
                s, got = best_of(1, read_queue)
                times["queue"] = min(times["queue"], s)
                s, _ = best_of(1, read_parquet)
                times["parquet"] = min(times["parquet"], s)
        assert got is not None and got.num_rows == n, (got.num_rows if got else None, n)
        for name in SCHEMA.names:
            assert got.column(name).equals(table.column(name)), name

        queue_disk = data_bytes(qpath)
        parquet_disk = ppath.stat().st_size
        append_rate = n / append_s
        read_rate = n / times["queue"]
        parquet_rate = n / times["parquet"]
        print(f"rows: {n:,} (RecordBatches of {BATCH_ROWS:,})")
        print(
            f"append_batch: {append_s:.3f} s, {append_rate / 1e6:.1f} M rows/s "
            f"(goal >= 20): {'met' if append_rate >= 20e6 else 'NOT met'}"
        )
        print(
            f"read_arrow: {times['queue']:.3f} s, {read_rate / 1e6:.1f} M rows/s "
            f"(goal >= 50): {'met' if read_rate >= 50e6 else 'NOT met'}"
        )
        print(
            f"parquet read_table (uncompressed): {times['parquet']:.3f} s, "
            f"{parquet_rate / 1e6:.1f} M rows/s; read_arrow / parquet = "
            f"{read_rate / parquet_rate:.2f}x (goal >= 1): "
            f"{'met' if read_rate >= parquet_rate else 'NOT met'}"
        )
        print(
            f"on disk: queue data files {queue_disk / 1e6:.1f} MB "
            f"(allocated {bytes_under(qpath) / 1e6:.1f} MB incl. indexes), parquet "
            f"{parquet_disk / 1e6:.1f} MB; ratio {queue_disk / parquet_disk:.2f}x "
            f"(goal <= 1.5): {'met' if queue_disk <= 1.5 * parquet_disk else 'NOT met'}"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
