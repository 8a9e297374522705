# ruff: noqa: RUF001  (the multiplication sign is meant in what this prints)
"""Work-queue section of the peer benchmark (issue 18): get + ack per job.

A queue is filled with jobs first; then 1 or 4 worker processes, started
together, take jobs one at a time and acknowledge each until none is left
(or the cap runs out):

- litemq: ``job = wq.get(timeout=0)`` then ``wq.ack(job)``
  (``q.work_queue("bench")`` on a read-only handle, as workers open it);
- persist-queue: ``q.get_nowait()`` then ``q.task_done()`` (its file
  ``Queue`` is not process-safe: 1 worker only);
- litequeue: ``m = q.pop()`` then ``q.done(m.message_id)``;
- diskcache: ``Deque.popleft()`` (it has no acknowledgement).

The rate is every worker's jobs over the span from the first worker's start
to the last one's end. Run from ``benches/peers.py --work-queue``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

STORES = ("litemq", "persistqueue", "litequeue", "diskcache")
PROCESS_SAFE = {"litemq", "litequeue", "diskcache"}
LABELS = {
    "litemq": "litemq work_queue (get + ack)",
    "persistqueue": "persist-queue Queue (get_nowait + task_done)",
    "litequeue": "litequeue (pop + done)",
    "diskcache": "diskcache Deque (popleft)",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The section's options on the peers command line."""
    p.add_argument("--no-work-queue", action="store_true", help="skip the work-queue section")
    p.add_argument("--work-queue-only", action="store_true", help="run only the work-queue section")
    p.add_argument("--wq-n", type=int, default=1_000_000, help="litemq jobs (default 1,000,000)")
    p.add_argument("--wq-peer-n", type=int, default=100_000, help="jobs per peer (default 100,000)")


def fill(store: str, path: Path, n: int, size: int) -> None:
    """Puts `n` jobs of `size` bytes into a new store at `path`."""
    payload = b"j" * size
    if store == "litemq":
        import litemq

        with litemq.Queue(path) as q:
            app = q.appender()
            for i in range(0, n, 1000):
                app.append_batch([payload] * min(1000, n - i))
            app.flush()
    elif store == "persistqueue":
        import persistqueue

        q = persistqueue.Queue(str(path / "q"), tempdir=str(path))
        for _ in range(n):
            q.put(payload)
        for f in (q.headf, q.tailf):
            f.close()
    elif store == "litequeue":
        import litequeue

        path.mkdir(parents=True, exist_ok=True)
        lq = litequeue.LiteQueue(str(path / "queue.db"))
        lq.conn.execute("BEGIN")
        for _ in range(n):
            lq.put(payload.decode())
        lq.conn.execute("COMMIT")
        lq.conn.close()
    elif store == "diskcache":
        import diskcache

        d = diskcache.Deque(directory=str(path))
        d.extend([payload] * n)
        d.cache.close()


def work(store: str, path: Path, cap: float) -> dict[str, Any]:
    """One worker: opens the store, waits for "go" on stdin, then takes and
    acknowledges jobs until none is left or `cap` seconds passed."""
    done = 0
    if store == "litemq":
        import litemq

        q = litemq.Queue(path, read_only=True)
        wq = q.work_queue("bench")
        get, ack = wq.get, wq.ack

        def step() -> bool:
            job = get(0)
            if job is None:
                return False
            ack(job)
            return True
    elif store == "persistqueue":
        import persistqueue

        pq = persistqueue.Queue(str(path / "q"), tempdir=str(path))
        pget, pdone = pq.get_nowait, pq.task_done

        def step() -> bool:
            try:
                pget()
            except persistqueue.Empty:
                return False
            pdone()
            return True
    elif store == "litequeue":
        import litequeue

        lq = litequeue.LiteQueue(str(path / "queue.db"))
        pop, ldone = lq.pop, lq.done

        def step() -> bool:
            m = pop()
            if m is None:
                return False
            ldone(m.message_id)
            return True
    else:
        import diskcache

        dq = diskcache.Deque(directory=str(path))
        popleft = dq.popleft

        def step() -> bool:
            try:
                popleft()
            except IndexError:
                return False
            return True

    print("ready", flush=True)
    sys.stdin.readline()
    start = time.time()
    stop = time.monotonic() + cap
    while step():
        done += 1
        if done % 1024 == 0 and time.monotonic() > stop:
            break
    return {"jobs": done, "start": start, "end": time.time()}


def measure(store: str, base: Path, n: int, size: int, workers: int, cap: float) -> dict[str, Any]:
    """Fills a fresh store with `n` jobs and drains it with `workers` processes."""
    path = Path(tempfile.mkdtemp(prefix=f"wq-{store}-", dir=base)) / "store"
    fill(store, path, n, size)
    here = Path(__file__).resolve().parent.parent
    code = (
        f"import sys, json; sys.path.insert(0, {str(here)!r}); "
        "from peers_lib.work_queue import work; from pathlib import Path; "
        f"print(json.dumps(work({store!r}, Path({str(path)!r}), {cap!r})))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{store} worker did not start")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=cap + 120)
            lines = [line for line in out.splitlines() if line.startswith("{")]
            if p.returncode != 0 or not lines:
                last = (err.strip().splitlines() or ["(no message)"])[-1]
                raise RuntimeError(f"a worker exited with {p.returncode}: {last}")
            results.append(json.loads(lines[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    jobs = sum(r["jobs"] for r in results)
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {
        "store": store,
        "workers": workers,
        "jobs": jobs,
        "filled": n,
        "seconds": span,
        "rate": jobs / span if span > 0 else 0.0,
        "capped": jobs < n,
    }


def run(
    base: Path, n: int, peer_n: int, size: int, cap: float, progress: Any
) -> list[dict[str, Any]]:
    """Every store with 1 and (where process-safe) 4 workers."""
    out = []
    for store in STORES:
        for workers in (1, 4):
            if workers > 1 and store not in PROCESS_SAFE:
                out.append({"store": store, "workers": workers, "skipped": "not process-safe"})
                continue
            count = n if store == "litemq" else peer_n
            progress(f"  work queue: {store} × {workers} worker(s), {count:,} jobs ...")
            try:
                r = measure(store, base, count, size, workers, cap)
            except ImportError as exc:
                r = {"store": store, "workers": workers, "skipped": str(exc)}
            except Exception as exc:
                r = {"store": store, "workers": workers, "error": f"{type(exc).__name__}: {exc}"}
            out.append(r)
            if "rate" in r:
                progress(f"  work queue: {store} × {workers}: {r['rate']:,.0f} jobs/s")
    return out


def lines(results: list[dict[str, Any]]) -> list[str]:
    """A table of the results, with litemq's ratio to each peer."""
    rates = {(r["store"], r["workers"]): r.get("rate") for r in results}
    out = ["work queue: get + ack per job (jobs/s; × = litemq's rate over this one's)"]
    for r in results:
        label = f"{LABELS[r['store']]} × {r['workers']}"
        if "rate" not in r:
            out.append(f"  {label:<52} {r.get('skipped') or r.get('error')}")
            continue
        mine = rates.get(("litemq", r["workers"]))
        ratio = f"{mine / r['rate']:,.1f}×" if mine and r["store"] != "litemq" else ""
        capped = " (capped)" if r["capped"] else ""
        out.append(f"  {label:<52} {r['rate']:>12,.0f}{capped}  {ratio}")
    pq = rates.get(("persistqueue", 1))
    one, four = rates.get(("litemq", 1)), rates.get(("litemq", 4))
    if pq and one:
        out.append(f"  goal ≥ 100× persist-queue (1 worker): {one / pq:,.0f}×")
    if four:
        out.append(f"  goal ≥ 300,000 jobs/s with 4 workers: {four:,.0f}")
    return out


def markdown(results: list[dict[str, Any]]) -> list[str]:
    """The section of docs/PERFORMANCE.md."""
    body = [line[2:] for line in lines(results)[1:]]
    return [
        "## Work queues: get + ack per job (issue 18)",
        "",
        "Each store is filled first, then 1 or 4 worker processes started together take "
        "jobs one at a time and acknowledge each: litemq `job = wq.get(timeout=0)`, "
        "`wq.ack(job)` (`q.work_queue(...)` on a read-only handle); persist-queue "
        "`get_nowait()`, `task_done()` (its file `Queue` is not process-safe: 1 worker "
        "only); litequeue `pop()`, `done(id)`; diskcache `Deque.popleft()` (no "
        "acknowledgement). Jobs/s over the span from the first worker's start to the "
        "last one's end; × is litemq's rate over the store's with as many workers.",
        "",
        "```text",
        *body,
        "```",
        "",
    ]
