"""Random ``get(seq)`` from a read-only handle against lmdb's ``txn.get``, in one run.

    nice .venv/bin/python benches/get_bench.py [N]

N messages (default 1,000,000) of 100 B in two queues: one in a single data file that
stays active (the default 1 GiB file), and one in 32 MiB files, mostly sealed, which
is where a ``get`` checks that the file it keeps mapped was not deleted or replaced
by another process (docs/DESIGN.md, "Cached reader"). Each queue is opened
``read_only=True``, as another process opens it. 200,000 random sequences, drawn
before timing, are read one ``get`` at a time, best of 3; then lmdb (when installed)
stores the same N values under 8-byte big-endian keys and ``txn.get`` reads the same
sequences' keys, made before timing, in the same minutes. Rates by wall clock and by
the process's CPU time.

To compare with another build, run it with ``PYTHONPATH`` pointing at a copy of that
build's ``litemq`` package; ``--keep DIR`` reuses (or leaves) the queues in DIR, so
queues written by one build can be read by another (``--keep`` on a queue written
by a build before format 10 measures the check of older files).
Disk: about 3 x N x 130 B in a temp dir, removed at the end (not with ``--keep``).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import litemq
from read_path_bench import SIZE, fill  # the same queues as the scans

GETS = 200_000
ROUNDS = 3


def measure(name: str, run: Callable[[], None]) -> float:
    wall = cpu = float("inf")
    for _ in range(ROUNDS):
        c0, t0 = time.process_time(), time.perf_counter()
        run()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    rate = GETS / wall
    print(f"  {name:34} {rate / 1e6:6.3f} M gets/s wall {GETS / cpu / 1e6:6.3f} M/s cpu")
    return rate


def litemq_gets(path: Path, seqs: list[int]) -> float:
    with litemq.Queue(path, read_only=True) as q:
        get = q.get

        def run() -> None:
            for s in seqs:
                get(s)

        for s in seqs[:1000]:  # the files mapped once
            get(s)
        return measure(f"litemq get, {path.name}", run)


def lmdb_gets(path: Path, n: int, seqs: list[int]) -> float | None:
    try:
        import lmdb  # type: ignore[import-not-found]
    except ImportError:
        print("  lmdb not installed")
        return None
    if not path.exists():
        env = lmdb.open(str(path), map_size=1 << 32, sync=False)
        pool = [os.urandom(SIZE // 2).hex().encode() for _ in range(1000)]
        with env.begin(write=True) as txn:
            for i in range(n):
                txn.put(i.to_bytes(8, "big"), pool[i % 1000])
        env.close()
    env = lmdb.open(str(path), readonly=True, lock=False)
    keys = [s.to_bytes(8, "big") for s in seqs]
    try:
        with env.begin() as txn:
            get = txn.get

            def run() -> None:
                for k in keys:
                    get(k)

            return measure("lmdb txn.get", run)
    finally:
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="write (or reuse) the queues here")
    args = ap.parse_args()
    n = args.n - args.n % 1000
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="litemq-get-"))
    tmp.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    seqs = [rng.randrange(n) for _ in range(GETS)]
    try:
        print(f"litemq from {Path(litemq.__file__).parent}; {n:,} x {SIZE} B")
        rates = {}
        for label, file_size in (("one-active-file", None), ("32MiB-files", 32 << 20)):
            path = tmp / label
            if not path.exists():
                fill(path, n, file_size)
            rates[label] = litemq_gets(path, seqs)
        base = lmdb_gets(tmp / "lmdb", n, seqs)
        if base:
            for label, rate in rates.items():
                print(f"  {label}: {rate / base:.2f}x lmdb (goal, issue 34: >= 2x)")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
