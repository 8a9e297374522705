"""Write path of issue 15: ``append_batch(1000)`` until a reader sees the last,
and ``append_batch(1000)`` + ``flush()`` each, against lmdb in the same run.

Each case runs in a fresh process (``--case``); the driver interleaves the
cases over ``--rounds`` rounds and prints each case's median, with the CPU
each thread of the litemq process spent per message (``/proc``), which a
busy machine moves less than it moves wall time. ``PYTHONPATH`` picks the
litemq build measured (e.g. a copy of main's ``python/litemq`` for "before").

    .venv/bin/python benches/write_path_bench.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

CASES = ("batch", "durable", "lmdb", "lmdb_sync")


def thread_cpu() -> dict[str, float]:
    """CPU seconds per thread of this process, keyed ``name:tid``."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        name = st[st.index("(") + 1 : st.rindex(")")]
        fields = st[st.rindex(")") + 2 :].split()
        out[f"{name}:{tid}"] = (int(fields[11]) + int(fields[12])) / tick
    return out


def cpu_per_msg(before: dict[str, float], n: int) -> str:
    parts = []
    for k, v in thread_cpu().items():
        d = v - before.get(k, 0.0)
        if d > 0.005:
            parts.append(f"{k.split(':')[0]} {d / n * 1e9:.0f}")
    return ", ".join(parts)


def run_case(case: str, n: int) -> tuple[float, str]:
    """Messages per second of one case, and its CPU per message by thread."""
    pool = [random.Random(8).randbytes(100) for _ in range(1000)]
    base = tempfile.mkdtemp(prefix="write-path-")
    try:
        if case.startswith("lmdb"):
            import lmdb

            sync = case == "lmdb_sync"
            env = lmdb.open(base, map_size=1 << 34, sync=sync, metasync=sync)
            pack = struct.Struct(">Q").pack
            count = n // 4 if sync else n
            t0 = time.perf_counter()
            for b in range(count // 1000):
                with env.begin(write=True) as txn:
                    items = [(pack(b * 1000 + i), p) for i, p in enumerate(pool)]
                    txn.cursor().putmulti(items, append=True)
            rate = count / (time.perf_counter() - t0)
            env.close()
            return rate, ""
        import litemq

        q = litemq.Queue(os.path.join(base, "q"), flush="async")
        app = q.appender()
        app.append_batch(pool)
        app.flush()
        if case == "durable":
            count = n // 4
            c0 = thread_cpu()
            t0 = time.perf_counter()
            for _ in range(count // 1000):
                app.append_batch(pool)
                app.flush()
            rate = count / (time.perf_counter() - t0)
        else:
            count = n
            reader = litemq.Queue(os.path.join(base, "q"), read_only=True)
            last = count + 999
            c0 = thread_cpu()
            t0 = time.perf_counter()
            for _ in range(count // 1000):
                app.append_batch(pool)
            while True:  # until a reader in another handle sees the last
                try:
                    reader.get(last)
                    break
                except litemq.NotFoundError:
                    time.sleep(0.00002)
            rate = count / (time.perf_counter() - t0)
            reader.close()
        cpu = cpu_per_msg(c0, count)
        q.close()
        return rate, cpu
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="messages (durable: n/4)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--case", choices=CASES, help="run one case here (the driver's child)")
    args = ap.parse_args()
    if args.case:
        rate, cpu = run_case(args.case, args.n)
        print(f"{rate} {cpu}")
        return 0
    rates: dict[str, list[float]] = {c: [] for c in CASES}
    for _ in range(args.rounds):
        for case in CASES:
            cmd = [sys.executable, __file__, "--case", case, "--n", str(args.n)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            got, _, per_thread = out.strip().partition(" ")
            rates[case].append(float(got))
            print(
                f"  {case:10} {float(got) / 1e6:6.2f} M msg/s  cpu ns/msg: {per_thread}", flush=True
            )
    med = {c: statistics.median(v) for c, v in rates.items()}
    for case in CASES:
        print(f"{case:10} median {med[case] / 1e6:6.2f} M msg/s")
    print(
        f"append_batch until seen / lmdb txn per 1,000: {med['batch'] / med['lmdb']:.2f}x (goal 5x)"
    )
    print(
        f"append_batch + flush / lmdb sync on:          {med['durable'] / med['lmdb_sync']:.2f}x (goal 2x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
