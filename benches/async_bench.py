"""asyncio followers: what idle waiters cost, and how fast a wake-up arrives.

Prints, for `Tailer.read_next_async` (docs/DESIGN.md, "Waiting without a
thread"):

1. The CPU the whole process uses over 2 s while 1000 async followers wait
   on an idle queue, and the process's thread count (one watch thread per
   queue handle, not one per waiter).
2. The time from one append until all 1000 have woken and read it.
3. Append-to-awaited-read latency of one idle follower in the writing
   process (p50, p99 of 300 paced appends).

Run: ``.venv/bin/python benches/async_bench.py``. A measurement, not a test:
it prints figures and asserts nothing.
"""

from __future__ import annotations

import asyncio
import os
import resource
import tempfile
import time

import litemq


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main() -> None:
    with tempfile.TemporaryDirectory() as d, litemq.Queue(os.path.join(d, "q")) as q:
        app = q.appender()
        tailers = [q.tailer(start="end") for _ in range(1000)]
        tasks = [asyncio.create_task(t.read_next_async()) for t in tailers]
        await asyncio.sleep(0.2)
        c0, w0 = cpu_seconds(), time.monotonic()
        await asyncio.sleep(2)
        cpu, wall = cpu_seconds() - c0, time.monotonic() - w0
        threads = len(os.listdir("/proc/self/task"))
        print(
            f"1000 idle async followers: {cpu * 1000:.1f} ms CPU in {wall:.1f} s "
            f"(whole process), {threads} threads"
        )
        start = time.perf_counter()
        app.append(b"x")
        await asyncio.gather(*tasks)
        print(f"one append -> 1000 woken and read: {(time.perf_counter() - start) * 1000:.1f} ms")
        t = q.tailer(start="end")
        lat = []
        for _ in range(300):
            waiting = asyncio.create_task(t.read_next_async())
            await asyncio.sleep(0.002)
            start = time.perf_counter()
            app.append(b"y")
            await waiting
            lat.append((time.perf_counter() - start) * 1e6)
        lat.sort()
        print(
            f"append -> awaited read, one idle follower: p50 {lat[len(lat) // 2]:.0f} us, "
            f"p99 {lat[int(len(lat) * 0.99)]:.0f} us"
        )


if __name__ == "__main__":
    asyncio.run(main())
