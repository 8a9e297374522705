"""The read path of issue 15 against lmdb's cursor scan, in one run.

    nice .venv/bin/python benches/read_path_bench.py [N]

N messages (default 1,000,000) of 100 B in two queues: one in a single data file that
stays active (the default 1 GiB file: every frame is checked by its own CRC) and one in
32 MiB files, mostly sealed (checked by their footer CRC). Each case reads every message,
summing the payload lengths, best of 5 in one process; rates by wall clock and by the
process's CPU time (``time.process_time``), which on a machine shared with other work
moves much less than the wall clock:

- ``iterate``: ``sum(map(len, map(attrgetter("payload"), q.tailer())))``;
- ``read_batch``: ``t.read_batch(1000, timeout=0)`` until empty, ``m.payload`` of each;
- ``read_batch(payloads=True)``: the same, the payloads themselves;
- ``read_arrow()``: the whole queue in one call, then ``pc.binary_length`` summed;
- ``read_arrow(), threads``: the same with ``LITEMQ_READ_THREADS=auto`` (files read on
  up to ``min(cores, files)`` threads; compare its wall-clock rate: its CPU time adds up
  every thread's; an older build reads serially here);
- ``read_arrow(65,536)``: calls of 65,536 rows;
- ``lmdb``: ``txn.cursor().iternext(keys=False, values=True)`` (when lmdb is installed).

To compare with another build, run it with ``PYTHONPATH`` pointing at a copy of that
build's ``litemq`` package (``read_batch(payloads=True)`` is skipped where it is missing).
Disk: about 3 x N x 130 B in a temp dir, removed at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import chain
from operator import attrgetter
from pathlib import Path

import pyarrow.compute as pc

import litemq

SIZE = 100
ROUNDS = 5


def fill(path: Path, n: int, file_size: int | None) -> None:
    pool = [os.urandom(SIZE // 2).hex().encode() for _ in range(1000)]
    opts = {} if file_size is None else {"file_size": file_size}
    with litemq.Queue(path, **opts) as q:
        app = q.appender()
        for _ in range(n // 1000):
            app.append_batch(pool)
        app.flush()
    # Written back before anything is timed: the writeback of a fresh
    # 130 MB queue otherwise runs beside the first cases.
    os.sync()


def cases(q: litemq.Queue) -> dict[str, Callable[[], int]]:
    payload = attrgetter("payload")

    def iterate() -> int:
        return sum(map(len, map(payload, q.tailer())))

    def batches() -> int:
        read = q.tailer().read_batch
        pages = iter(lambda: read(1000, timeout=0), [])
        return sum(map(len, chain.from_iterable(map(payload, b) for b in pages)))

    def payloads() -> int:
        read = q.tailer().read_batch
        pages = iter(lambda: read(1000, timeout=0, payloads=True), [])
        return sum(map(len, chain.from_iterable(pages)))

    def arrow_whole() -> int:
        b = q.read_arrow()
        return int(pc.sum(pc.binary_length(b.column("payload"))).as_py())

    def arrow_threads() -> int:
        os.environ["LITEMQ_READ_THREADS"] = "auto"
        try:
            return arrow_whole()
        finally:
            del os.environ["LITEMQ_READ_THREADS"]

    def arrow_chunks() -> int:
        start, total = q.first_seq, 0
        while (b := q.read_arrow(start=start, max_rows=65536)).num_rows:
            total += int(pc.sum(pc.binary_length(b.column("payload"))).as_py())
            start += b.num_rows
        return total

    return {
        "iterate": iterate,
        "read_batch": batches,
        "read_batch(payloads=True)": payloads,
        "read_arrow()": arrow_whole,
        "read_arrow(), threads": arrow_threads,
        "read_arrow(65,536)": arrow_chunks,
    }


def measure(name: str, run: Callable[[], int], n: int) -> None:
    wall = cpu = float("inf")
    for _ in range(ROUNDS):
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            got = run()
        except TypeError as e:  # an older build without the case's argument
            print(f"  {name:28} skipped: {e}")
            return
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
        assert got == n * SIZE, (name, got)
    print(f"  {name:28} {n / wall / 1e6:6.2f} M/s wall {n / cpu / 1e6:6.2f} M/s cpu")


def lmdb_scan(path: Path, n: int) -> None:
    try:
        import lmdb  # type: ignore[import-not-found]
    except ImportError:
        print("  lmdb not installed")
        return
    env = lmdb.open(str(path), map_size=1 << 32, sync=False)
    value = os.urandom(SIZE)
    with env.begin(write=True) as txn:
        for i in range(n):
            txn.put(i.to_bytes(8, "big"), value)
    os.sync()

    def scan() -> int:
        with env.begin() as txn:
            return sum(map(len, txn.cursor().iternext(keys=False, values=True)))

    measure("lmdb cursor scan", scan, n)
    env.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    n -= n % 1000
    tmp = Path(tempfile.mkdtemp(prefix="litemq-read-path-"))
    try:
        print(f"litemq from {Path(litemq.__file__).parent}; {n:,} x {SIZE} B")
        for label, file_size in (("active file", None), ("32 MiB files", 32 << 20)):
            path = tmp / label.replace(" ", "-")
            fill(path, n, file_size)
            print(label)
            with litemq.Queue(path, read_only=True) as q:
                q.read_arrow(max_rows=1)  # pyarrow loaded before timing
                for name, run in cases(q).items():
                    measure(name, run, n)
        lmdb_scan(tmp / "lmdb", n)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
