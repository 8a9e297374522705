"""Indexes on schema fields (issue 35): ``where()`` on a typed queue with and
without an index on the field, against pyarrow reading the same rows from
Parquet with a filter, in one run.

    LITEMQ_BENCH_N=10000000 nice .venv/bin/python benches/typed_where_bench.py

N events (default 10,000,000; ``LITEMQ_BENCH_N`` scales it down) of the issue's
6-field market-data schema, stored rows, 16 MiB data files (all sealed but the
last). ``symbol`` is one of 8 tickers, except every 1,000th row, ``RARE``
(0.1 %, spread over every file); ``id`` is a random permutation of 0..N (no
order a zone map could use). Each query, best of 3, interleaved:

- ``q.where(field, "=", v)`` without an index (each call decodes the field of
  every row), then with one (``q.add_index(field)``: sealed files answer from
  their index files), returning the messages; and ``q.read_arrow(where=...)``
  likewise, returning a RecordBatch of every column (with the index it reads
  only the rows the index lists);
- ``pyarrow.parquet.read_table(path, filters=[(field, "==", v)])`` of the same
  rows (uncompressed, 1 M-row row groups, statistics on), returning a table.

Asserts that all three find the same rows. Prints times, ratios and the time
``add_index`` took to build each index. Disk: about N x 100 B in a temp dir,
removed at the end. Figures are only meaningful from a release build.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import litemq
from typed_bench import SCHEMA
from typed_bench import SYMBOLS as TICKERS

SYMBOLS = np.array(TICKERS)
BATCH_ROWS = 100_000


def table(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    seq = np.arange(n)
    symbol = SYMBOLS[seq % len(SYMBOLS)].astype(object)
    symbol[seq % 1000 == 999] = "RARE"
    return pa.table(
        {
            "time": 1_764_667_800_000_000 + seq,
            "symbol": pa.array(symbol, pa.string()),
            "price": 100.0 + (seq % 5000) / 100,
            "size": (seq * 7) % 1000,
            "side": pa.array(np.where(seq % 2 == 0, 1, -1), pa.int8()),
            "id": rng.permutation(n),
        },
        schema=SCHEMA,
    )


def best(f: Callable[[], object], rounds: int = 3) -> tuple[float, object]:
    times, out = [], None
    for _ in range(rounds):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    n = int(os.environ.get("LITEMQ_BENCH_N", "10000000"))
    base = Path(tempfile.mkdtemp(prefix="litemq-where-bench-"))
    try:
        data = table(n)
        parquet = base / "rows.parquet"
        pq.write_table(data, parquet, compression="none", row_group_size=1 << 20)
        with litemq.Queue(base / "q", schema=SCHEMA, file_size=16 << 20) as q:
            app = q.appender()
            for b in data.to_batches(BATCH_ROWS):
                app.append_batch(b)
            app.flush()
            sealed = len(q.data_files()) - 1
            print(f"{n:,} rows, {sealed} sealed data files + the active one")
            rare_id = int(data.column("id")[n // 2].as_py())
            queries = [("symbol", "RARE"), ("id", rare_id)]
            scans, arrow_scans = {}, {}
            for field, value in queries:
                scans[field] = best(lambda f=field, v=value: q.where(f, "=", v))
                arrow_scans[field] = best(lambda f=field, v=value: q.read_arrow(where=(f, "=", v)))[
                    0
                ]
            for field, _ in queries:
                t = time.perf_counter()
                q.add_index(field)
                print(f"add_index({field!r}): {time.perf_counter() - t:.2f} s")
            print()
            print(
                f"{'where(field, =, value)':<24} {'rows':>7} {'no index':>10} "
                f"{'index':>10} {'Parquet':>10} {'index/scan':>11} {'Parquet/index':>14}"
            )
            for field, value in queries:
                t_idx, found = best(lambda f=field, v=value: q.where(f, "=", v))
                t_pq, pq_rows = best(
                    lambda f=field, v=value: pq.read_table(parquet, filters=[(f, "==", v)])
                )
                t_scan, scanned = scans[field]
                seqs = [m.seq for m in found]  # type: ignore[attr-defined]
                assert seqs == [m.seq for m in scanned]  # type: ignore[attr-defined]
                assert len(seqs) == pq_rows.num_rows  # type: ignore[attr-defined]
                ids = sorted(m.value["id"] for m in found)  # type: ignore[attr-defined]
                assert ids == sorted(pq_rows.column("id").to_pylist())  # type: ignore[attr-defined]
                print(
                    f"{field + ' = ' + str(value):<24} {len(seqs):>7,} {t_scan * 1e3:>8.1f}ms "
                    f"{t_idx * 1e3:>8.2f}ms {t_pq * 1e3:>8.1f}ms {t_scan / t_idx:>10.0f}x "
                    f"{t_pq / t_idx:>13.1f}x"
                )
                t_arrow, got = best(lambda f=field, v=value: q.read_arrow(where=(f, "=", v)))
                assert got.column("seq").to_pylist() == seqs  # type: ignore[attr-defined]
                t_arrow_scan = arrow_scans[field]
                print(
                    f"{'  read_arrow(where=)':<24} {len(seqs):>7,} {t_arrow_scan * 1e3:>8.1f}ms "
                    f"{t_arrow * 1e3:>8.2f}ms {t_pq * 1e3:>8.1f}ms "
                    f"{t_arrow_scan / t_arrow:>10.0f}x {t_pq / t_arrow:>13.1f}x"
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
