"""First ``read_arrow()`` of a whole queue in a fresh process, many times (issue 34).

A queue of ``--n`` 100-byte messages is written once; then ``--runs`` fresh
processes each open it read-only and time one ``q.read_arrow()`` of all of it,
with ``os.times()`` around the call (user and system CPU) as well as the wall
clock. The read used to be bimodal: about 40 ms, or 250-430 ms with most of it
system time (the kernel zeroing huge pages the column buffers had been advised
to use). Each run prints its figures; the summary gives min / median / max and
how many runs took more than twice the fastest.

    .venv/bin/python benches/first_read_bench.py --runs 20

``--compare DIR`` runs the same processes alternately with ``PYTHONPATH=DIR``
(another build of ``litemq``, e.g. a copy of main's ``python/``), so that both
builds see the same minutes of a noisy machine.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def child(path: str) -> None:
    import pyarrow  # noqa: F401  (imported before the clock starts: not part of the read)

    import litemq

    q = litemq.Queue(path, read_only=True)
    t0 = os.times()
    w0 = time.perf_counter()
    batch = q.read_arrow()
    wall = time.perf_counter() - w0
    t1 = os.times()
    rows = batch.num_rows
    del batch
    q.close()
    print(f"{wall} {t1.user - t0.user} {t1.system - t0.system} {rows}")


def fill(path: str, n: int) -> None:
    import litemq

    pool = [random.Random(34).randbytes(100) for _ in range(1000)]
    with litemq.Queue(path) as q:
        app = q.appender()
        for _ in range(n // 1000):
            app.append_batch(pool)
        app.flush()


def run(path: str, pythonpath: str | None) -> tuple[float, float, float, int]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run(
        [sys.executable, __file__, "--child", path],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.split()
    return float(out[0]), float(out[1]), float(out[2]), int(out[3])


def summary(label: str, runs: list[tuple[float, float, float, int]]) -> None:
    walls = [r[0] for r in runs]
    fast = min(walls)
    slow = sum(1 for w in walls if w > 2 * fast)
    rows = runs[0][3]
    print(
        f"{label}: {len(runs)} runs, wall min {fast * 1e3:.1f} / median "
        f"{statistics.median(walls) * 1e3:.1f} / max {max(walls) * 1e3:.1f} ms "
        f"({rows / statistics.median(walls) / 1e6:.1f} M rows/s median, "
        f"{rows / max(walls) / 1e6:.1f} M rows/s slowest); "
        f"user median {statistics.median(r[1] for r in runs) * 1e3:.0f} ms, "
        f"sys median {statistics.median(r[2] for r in runs) * 1e3:.0f} / max "
        f"{max(r[2] for r in runs) * 1e3:.0f} ms; runs over 2x the fastest: {slow}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--compare", metavar="DIR", help="PYTHONPATH of a second build, alternated")
    ap.add_argument("--child", metavar="PATH", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return 0
    base = tempfile.mkdtemp(prefix="first-read-")
    try:
        path = os.path.join(base, "q")
        fill(path, args.n)
        builds: list[tuple[str, str | None]] = [("this build", None)]
        if args.compare:
            builds.append((args.compare, args.compare))
        results: dict[str, list[tuple[float, float, float, int]]] = {b: [] for b, _ in builds}
        for i in range(args.runs):
            for label, pythonpath in builds:
                r = run(path, pythonpath)
                results[label].append(r)
                print(
                    f"  {i:2} {label:12.12} wall {r[0] * 1e3:6.1f} ms  user {r[1] * 1e3:4.0f} ms"
                    f"  sys {r[2] * 1e3:4.0f} ms  {r[3] / r[0] / 1e6:5.1f} M rows/s",
                    flush=True,
                )
        for label, _ in builds:
            summary(label, results[label])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
