"""Typed journals (issue 35): the three goals side by side in one run.

    LITEMQ_BENCH_N=10000000 nice .venv/bin/python benches/typed_bench.py

The issue's 6-field market-data schema (int64 time, str symbol, float64 price,
int64 size, int8 side, int64 id), N distinct events (default 10,000,000;
``LITEMQ_BENCH_N`` scales it down), into two typed queues: rows stored as they are,
and row batches compressed with lz4 and with zstd (``compress_together=True``):

1. ``append_batch`` of 1,000-row ``pyarrow.RecordBatch``es until a reader sees the
   last row: rows/s (goal: at least 20 M/s); and until ``flush()`` has every row on
   disk (msync), beside it;
2. ``read_arrow()`` of the whole queue against ``pyarrow.parquet.read_table`` of the
   same rows from an uncompressed Parquet file (pyarrow's default writer otherwise:
   dictionary encoding where it pays), best of 3, interleaved: rows/s and their
   ratio (goals: at least 50 M rows/s, at least 1x Parquet);
3. the queue's bytes on disk (blocks allocated: data files and their indexes)
   against the Parquet file's (goal: at most 1.5x).

Asserts that both queues give back the rows written. Prints figures and ratios.
Disk: about N x 90 B in a temp dir, removed at the end; memory: about N x 200 B.
Figures are only meaningful from a release build of the extension.
"""

from __future__ import annotations

import os

# numpy (which pyarrow loads) starts OpenBLAS threads that spin for a while after
# each call: on a 2-core machine they took 5 % of the reads' samples.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
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
    """Rows ``first..first + rows`` of the market data, every row its own: times a
    microsecond apart, symbols from a list of 8, prices a random walk in cents, sizes
    1..1000, sides 0/1, ids counting (a seeded generator: the same rows every run)."""
    rng = np.random.default_rng(first)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.arange(first, first + rows, dtype=np.int64) + 1_700_000_000_000_000),
            pa.array(np.array(SYMBOLS, dtype=object)[rng.integers(0, len(SYMBOLS), rows)]),
            pa.array(np.round(100.0 + np.cumsum(rng.normal(0, 0.05, rows)), 2)),
            pa.array(rng.integers(1, 1001, rows, dtype=np.int64)),
            pa.array(rng.integers(0, 2, rows, dtype=np.int8)),
            pa.array(np.arange(first, first + rows, dtype=np.int64)),
        ],
        schema=SCHEMA,
    )


def bytes_under(path: Path) -> int:
    """Bytes of the files under ``path`` as stored (blocks allocated), so a data file's
    unwritten tail does not count."""
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def write_queue(
    path: Path, batches: list[pa.RecordBatch], codec: str | None
) -> tuple[float, float]:
    """Appends every batch (row batches compressed with ``codec``, ``compress_together``,
    unless it is None); returns the seconds until a reader sees the last row (as
    issue 34's "batches until visible") and until ``flush()`` has it on disk."""
    opts = {"compression": codec} if codec else {}
    n = sum(b.num_rows for b in batches)
    with litemq.Queue(path, schema=SCHEMA, file_size=FILE_SIZE, **opts) as q:
        app = q.appender()
        reader = litemq.Queue(path, read_only=True)
        t = time.perf_counter()
        for b in batches:
            app.append_batch(b, compress_together=codec is not None)
        while True:
            try:
                reader.get(n - 1)
                break
            except litemq.NotFoundError:
                time.sleep(0.00002)
        visible = time.perf_counter() - t
        app.flush()
        durable = time.perf_counter() - t
        reader.close()
        return visible, durable


def best_read(rounds: int, reads: dict[str, Callable[[], pa.Table]]) -> dict[str, float]:
    """Best time of each read over ``rounds`` rounds, the reads interleaved."""
    best = dict.fromkeys(reads, float("inf"))
    for _ in range(rounds):
        for name, read in reads.items():
            t = time.perf_counter()
            read()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    n = int(os.environ.get("LITEMQ_BENCH_N", "10000000"))
    n = max(BATCH_ROWS, n - n % BATCH_ROWS)
    tmp = Path(tempfile.mkdtemp(prefix="litemq-typed-bench-"))
    try:
        # Built before any clock starts: the goal is append_batch's rate.
        batches = [market_batch(i * BATCH_ROWS, BATCH_ROWS) for i in range(n // BATCH_ROWS)]
        table = pa.Table.from_batches(batches)
        kinds = {"stored": None, "lz4": "lz4", "zstd": "zstd"}
        paths = {kind: tmp / f"q-{kind}" for kind in kinds}
        append_s = {kind: write_queue(paths[kind], batches, c) for kind, c in kinds.items()}
        ppath, plain = tmp / "market.parquet", tmp / "market-plain.parquet"
        pq.write_table(table, ppath, compression="none")
        pq.write_table(table, plain, compression="none", use_dictionary=False)

        queues = {kind: litemq.Queue(p, read_only=True) for kind, p in paths.items()}
        try:
            for queue in queues.values():
                got = queue.read_arrow()
                assert got.num_rows == n, (got.num_rows, n)
                for name in SCHEMA.names:
                    assert got.column(name).equals(table.column(name).combine_chunks()), name
            del got
            reads: dict[str, Callable[[], pa.Table]] = {
                kind: queue.read_arrow for kind, queue in queues.items()
            }
            reads["parquet"] = lambda: pq.read_table(ppath)
            best = best_read(3, reads)
        finally:
            for queue in queues.values():
                queue.close()

        rate = {k: n / v for k, v in best.items()}
        disk = {kind: bytes_under(p) for kind, p in paths.items()}
        pbytes = ppath.stat().st_size
        print(f"rows: {n:,} in RecordBatches of {BATCH_ROWS:,}; best of 3 reads")
        for kind in kinds:
            a, d = (n / s for s in append_s[kind])
            print(
                f"[{kind}] append_batch {a / 1e6:.1f} M rows/s until visible (goal >= 20: "
                f"{verdict(a >= 20e6)}), {d / 1e6:.1f} M until flushed to disk; read_arrow {rate[kind] / 1e6:.1f} M rows/s (goal "
                f">= 50: {verdict(rate[kind] >= 50e6)}), {rate[kind] / rate['parquet']:.2f}x "
                f"parquet (goal >= 1: {verdict(rate[kind] >= rate['parquet'])}); on disk "
                f"{disk[kind] / 1e6:.1f} MB = {disk[kind] / pbytes:.2f}x parquet (goal <= "
                f"1.5: {verdict(disk[kind] <= 1.5 * pbytes)})"
            )
        print(
            f"[parquet, uncompressed] read_table {rate['parquet'] / 1e6:.1f} M rows/s; "
            f"{pbytes / 1e6:.1f} MB ({plain.stat().st_size / 1e6:.1f} MB without "
            "dictionary encoding)"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
