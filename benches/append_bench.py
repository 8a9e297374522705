"""Append throughput of whichever ``litemq`` this interpreter imports, as a whole process.

Meant to be timed from outside against another build, run in turn, for example:

    farm-bench -n 15 --vs "OLD/.venv/bin/python benches/append_bench.py batch 5000000" \\
        -- .venv/bin/python benches/append_bench.py batch 5000000

Modes: ``batch`` (``append_batch`` of 1,000 x 64 B), ``single`` (``append()`` x 64 B),
``big`` (``append()`` x 64 KiB). Each run opens a fresh queue (default options) in a temp
dir, appends, flushes, closes, prints its own msg/s (and GB/s for ``big``) and removes the
dir. Without arguments it runs every mode once with small counts. A measurement, not a
test: it asserts nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import litemq

SIZES = {"batch": 64, "single": 64, "big": 65536}
DEFAULT_N = {"batch": 2_000_000, "single": 1_000_000, "big": 5_000}


def run(mode: str, n: int) -> None:
    """Appends ``n`` messages in ``mode`` to a fresh queue and prints the rate."""
    d = tempfile.mkdtemp(prefix="litemq-append-bench-")
    try:
        payload = b"x" * SIZES[mode]
        t0 = time.perf_counter()
        with litemq.Queue(os.path.join(d, "q")) as q:
            app = q.appender()
            if mode == "batch":
                batch = [payload] * 1000
                for _ in range(n // 1000):
                    app.append_batch(batch)
            else:
                for _ in range(n):
                    app.append(payload)
            app.flush()
        dt = time.perf_counter() - t0
        gbs = f" {n * SIZES[mode] / dt / 1e9:.2f} GB/s" if mode == "big" else ""
        print(f"{mode}: {n / dt / 1e6:.2f} M msg/s{gbs} ({dt:.2f} s incl. open and close)")
    finally:
        shutil.rmtree(d)


def main(argv: list[str]) -> int:
    if not argv:
        for mode, n in DEFAULT_N.items():
            run(mode, n)
        return 0
    if len(argv) != 2 or argv[0] not in SIZES:
        print(__doc__, file=sys.stderr)
        return 2
    run(argv[0], int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
