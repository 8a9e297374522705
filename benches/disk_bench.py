"""Disk footprint of litemq: bytes allocated against bytes written.

Prints, for the scenarios of issue 13 ("Disk that matches the data"):

1. 1,000,000 messages of 100 bytes in files of the default size (1 GiB),
   measured after the queue is closed: allocated / written (goal <= 1.10).
2. 24 "hourly" files of 1,000 messages each (goal: under 5 MiB allocated in
   all). The Python API has no fake clock, so the hourly roll is simulated
   with ``roll="count:1000"`` and the default 1 GiB files: the same 24 files
   of 1,000 messages as 24 hours of an hourly queue would leave, each sealed
   file trimmed, the last one being written.
3. 300 keyed messages: bytes of key index (goal: under 256 KiB).
4. ``roll="count:1"`` with default-size files, 200 messages: what rolling
   every message costs.

"Allocated" is ``st_blocks * 512`` of every file under the queue directory
(data, sparse index, key index, metadata), "written" is the header and frame
bytes of the data files (``stats().data_bytes_written``). Run:
``.venv/bin/python benches/disk_bench.py [--dir DIR] [--messages N]``.
This is a measurement, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import litemq

MiB = 1 << 20


def allocated(path: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def apparent(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def million(base: Path, n: int) -> None:
    path = base / "million"
    payload = b"x" * 100
    t0 = time.perf_counter()
    with litemq.Queue(path) as q:
        app = q.appender()
        batch = [payload] * 1000
        for _ in range(n // 1000):
            app.append_batch(batch)
        app.flush()
        open_alloc = allocated(path)
    written = litemq.Queue(path, read_only=True).stats().data_bytes_written
    closed = allocated(path)
    print(
        f"1. {n:,} x 100 B, default 1 GiB files: {written / MiB:,.1f} MiB written, "
        f"{closed / MiB:,.1f} MiB allocated after close (ratio {closed / written:.3f}; "
        f"{open_alloc / MiB:,.1f} MiB while open, apparent {apparent(path) / MiB:,.0f} MiB) "
        f"[{time.perf_counter() - t0:.1f} s]"
    )
    shutil.rmtree(path)


def hourly(base: Path) -> None:
    path = base / "hourly"
    with litemq.Queue(path, roll="count:1000") as q:
        app = q.appender()
        for _ in range(24):
            app.append_batch([b"y" * 100] * 1000)
        app.flush()
        files = q.data_files()
        open_alloc = allocated(path)
    closed = allocated(path)
    written = sum(f.bytes_written for f in files)
    print(
        f"2. 24 files of 1,000 x 100 B (hourly simulated by count:1000), 1 GiB files: "
        f"{len(files)} files, {written / MiB:.2f} MiB written, {closed / MiB:.2f} MiB "
        f"allocated after close ({open_alloc / MiB:.2f} MiB while open; goal < 5 MiB)"
    )
    shutil.rmtree(path)


def keyed(base: Path) -> None:
    path = base / "keyed"
    with litemq.Queue(path, file_size="64KiB") as q:
        app = q.appender()
        for i in range(300):
            app.append(b"z" * 100, key=f"order-{i % 40}")
        app.flush()
    idx = path / "index"
    print(
        f"3. 300 keyed messages: key index {apparent(idx) / 1024:.0f} KiB long, "
        f"{allocated(idx) / 1024:.0f} KiB allocated (goal < 256 KiB); whole queue "
        f"{allocated(path) / 1024:.0f} KiB allocated"
    )
    shutil.rmtree(path)


def count_one(base: Path) -> None:
    path = base / "count1"
    with litemq.Queue(path, roll="count:1") as q:
        app = q.appender()
        for _ in range(200):
            app.append(b"w" * 100)
        app.flush()
        open_alloc = allocated(path)
    print(
        f"4. roll='count:1', default 1 GiB files, 200 messages: {open_alloc / 1024:.0f} KiB "
        f"allocated while open, {allocated(path) / 1024:.0f} KiB after close "
        f"(apparent {apparent(path) / MiB:,.0f} MiB)"
    )
    shutil.rmtree(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=None, help="where to create the queues")
    ap.add_argument("--messages", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        million(base, args.messages)
        hourly(base)
        keyed(base)
        count_one(base)


if __name__ == "__main__":
    main()
