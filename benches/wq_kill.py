"""Work queues under fire: worker processes drain N jobs while one of them is
SIGKILLed every few seconds and replaced; at the end every job must have
been acked exactly once, and none lost (issue 18).

    .venv/bin/python benches/wq_kill.py                  # 1,000,000 jobs, 4 workers, kill every 0.5 s
    .venv/bin/python benches/wq_kill.py --jobs 200000 --every 0.5

Workers log "try SEQ DELIVERIES" before each ack and "ok SEQ DELIVERIES"
after an ack that returned True. Checked at the end: no sequence has two
"ok" lines (an ack is never applied twice), every sequence has an "ok" or
a "try" (a worker killed between its ack and its log line leaves only the
"try"), and the group's state file says every job below N is finished,
none dead-lettered, none in flight. The visibility timeout is 60 s: jobs of
killed workers come back because their process is gone. `make test` runs
the same check with 20,000 jobs (tests/python/test_work_queue.py).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

WORKER = """
import sys, time, litemq
path, log, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
q = litemq.Queue(path, read_only=True)
wq = q.work_queue("jobs", visibility_timeout=60, max_deliveries=255)
with open(log, "a", buffering=1) as out:  # a line survives a SIGKILL once written
    print("ready", flush=True)
    while True:
        job = wq.get(timeout=0.1)
        if job is None:
            if wq.stats()["low"] >= total:
                break
            continue
        out.write(f"try {job.id} {job.deliveries}\\n")
        if wq.ack(job):
            out.write(f"ok {job.id} {job.deliveries}\\n")
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--every", type=float, default=0.5, help="seconds between kills")
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    import litemq

    scratch = Path(tempfile.mkdtemp(prefix="litemq-wq-kill-", dir=args.dir))
    qpath, logs = scratch / "q", scratch / "logs"
    logs.mkdir()
    workers: list[subprocess.Popen[str]] = []
    n = 0

    def start() -> None:
        nonlocal n
        w = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(qpath), str(logs / f"w{n}.log"), str(args.jobs)],
            stdout=subprocess.PIPE,
            text=True,
        )
        n += 1
        if w.stdout is None or w.stdout.readline().strip() != "ready":
            raise RuntimeError("a worker did not start")
        workers.append(w)

    try:
        t0 = time.monotonic()
        with litemq.Queue(qpath, file_size="256MiB") as q:
            app = q.appender()
            for i in range(0, args.jobs, 1000):
                app.append_batch([f"job {j}".encode() for j in range(i, min(args.jobs, i + 1000))])
            app.flush()
        print(f"filled {args.jobs:,} jobs in {time.monotonic() - t0:.1f} s", flush=True)
        t0 = time.monotonic()
        for _ in range(args.workers):
            start()
        kills = 0
        while any(w.poll() is None for w in workers):
            time.sleep(args.every)
            live = [w for w in workers if w.poll() is None]
            with litemq.Queue(qpath, read_only=True) as q:
                done = q.work_queues()[0].low >= args.jobs
            if live and not done:
                victim = live[kills % len(live)]
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                kills += 1
                start()
        took = time.monotonic() - t0
        for w in workers:
            if w.stdout is not None:
                w.stdout.close()
        oks: Counter[int] = Counter()
        tried: set[int] = set()
        for log in logs.iterdir():
            for line in log.read_text().splitlines():
                parts = line.split()
                if len(parts) != 3:
                    continue
                if parts[0] == "ok":
                    oks[int(parts[1])] += 1
                else:
                    tried.add(int(parts[1]))
        with litemq.Queue(qpath, read_only=True) as q:
            [info] = q.work_queues()
        twice = [s for s, c in oks.items() if c > 1]
        missing = set(range(args.jobs)) - set(oks) - tried
        print(
            f"{args.jobs:,} jobs, {args.workers} workers, {kills} SIGKILLs, {took:.1f} s; "
            f"acks logged {sum(oks.values()):,}, acked twice {len(twice)}, never seen {len(missing)}; "
            f"state: low {info.low:,}, acked {info.acked:,}, redelivered {info.redelivered:,}, "
            f"in flight {info.in_flight}, pending {info.pending}, dead {info.dead_lettered}"
        )
        ok = (
            not twice
            and not missing
            and (info.low, info.cursor, info.in_flight, info.pending, info.dead_lettered)
            == (args.jobs, args.jobs, 0, 0, 0)
        )
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
