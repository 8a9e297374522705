"""Topics: reading one topic, and appending with a topic and tags, against the baselines
measured in the same run.

    .venv/bin/python benches/topics_bench.py [N]

1. Reading one topic that holds 1 % of N messages (100 B payloads, 64 other topics share
   the rest; 8 MiB files, so most files are sealed and indexed): ``q.tailer(topic=...)``
   against reading every message and keeping the topic's in Python (``msg.topic == ...``).
   Both read the same closed queue, best of 3 rounds each, interleaved: first each
   round on a freshly opened handle (cold: every page of the files is mapped anew),
   then with new tailers on one long-lived handle (warm: the handle keeps sealed
   files' mappings for its tailers), as an application that keeps its queue open.
2. Per-call ``append()`` of 100 B with ``topic=`` and two ``tags=`` against a plain
   ``append()`` of the same payload, each into a fresh queue, best of 3, interleaved.

Prints figures and ratios; asserts only that both reads return the same messages. Disk:
about N x 150 B in a temp dir, removed at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import litemq

PAYLOAD = b"x" * 100
FILE_SIZE = 8 << 20


def fill(path: str, n: int) -> int:
    """Writes n messages, 1 % of them in topic "rare"; returns how many that is."""
    rare = 0
    with litemq.Queue(path, file_size=FILE_SIZE) as q:
        app = q.appender()
        for i in range(n):
            if i % 100 == 7:
                app.append(PAYLOAD, topic="rare", tags=["t"])
                rare += 1
            else:
                app.append(PAYLOAD, topic=f"topic-{i % 64}")
        app.flush()
    return rare


def read_topic(path: str) -> tuple[float, list[int]]:
    with litemq.Queue(path, read_only=True) as q:
        t0 = time.perf_counter()
        seqs = [m.seq for m in q.tailer(topic="rare")]
        return time.perf_counter() - t0, seqs


def read_topic_warm(q: litemq.Queue) -> tuple[float, list[int]]:
    t0 = time.perf_counter()
    seqs = [m.seq for m in q.tailer(topic="rare")]
    return time.perf_counter() - t0, seqs


def read_all_and_filter_warm(q: litemq.Queue) -> tuple[float, list[int]]:
    t0 = time.perf_counter()
    seqs = [m.seq for m in q.tailer() if m.topic == "rare"]
    return time.perf_counter() - t0, seqs


def read_all_and_filter(path: str) -> tuple[float, list[int]]:
    with litemq.Queue(path, read_only=True) as q:
        t0 = time.perf_counter()
        seqs = [m.seq for m in q.tailer() if m.topic == "rare"]
        return time.perf_counter() - t0, seqs


def append_rate(base: str, n: int, fields: bool) -> float:
    path = tempfile.mkdtemp(dir=base)
    try:
        with litemq.Queue(os.path.join(path, "q"), file_size=FILE_SIZE) as q:
            app = q.appender()
            tags = ["paid", "eu"]
            t0 = time.perf_counter()
            if fields:
                for _ in range(n):
                    app.append(PAYLOAD, topic="orders", tags=tags)
            else:
                for _ in range(n):
                    app.append(PAYLOAD)
            app.flush()
            return n / (time.perf_counter() - t0)
    finally:
        shutil.rmtree(path)


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 1_000_000
    base = tempfile.mkdtemp(prefix="litemq-topics-bench-")
    try:
        path = os.path.join(base, "q")
        rare = fill(path, n)
        topic_times, all_times = [], []
        for _ in range(3):
            dt, seqs = read_topic(path)
            topic_times.append(dt)
            dt_all, seqs_all = read_all_and_filter(path)
            all_times.append(dt_all)
            assert seqs == seqs_all, (len(seqs), len(seqs_all))
            assert len(seqs) == rare, (len(seqs), rare)
        t_topic, t_all = min(topic_times), min(all_times)
        print(f"read one topic ({rare:,} of {n:,} messages, 1 %):")
        print(
            f"  q.tailer(topic=...)          {rare / t_topic / 1e6:8.2f} M msg/s  {t_topic * 1e3:8.1f} ms"
        )
        print(
            f"  read all, filter in Python   {rare / t_all / 1e6:8.2f} M msg/s  {t_all * 1e3:8.1f} ms"
        )
        print(f"  ratio                        {t_all / t_topic:8.1f}x faster (goal >= 50x)")
        warm_topic, warm_all = [], []
        with litemq.Queue(path, read_only=True) as q:
            read_topic_warm(q)
            read_all_and_filter_warm(q)
            for _ in range(3):
                dt, seqs = read_topic_warm(q)
                warm_topic.append(dt)
                dt_all, seqs_all = read_all_and_filter_warm(q)
                warm_all.append(dt_all)
                assert seqs == seqs_all
                assert len(seqs) == rare
        w_topic, w_all = min(warm_topic), min(warm_all)
        print("  new tailers on one open handle (warm):")
        print(
            f"  q.tailer(topic=...)          {rare / w_topic / 1e6:8.2f} M msg/s  {w_topic * 1e3:8.1f} ms"
        )
        print(
            f"  read all, filter in Python   {rare / w_all / 1e6:8.2f} M msg/s  {w_all * 1e3:8.1f} ms"
        )
        print(f"  ratio                        {w_all / w_topic:8.1f}x faster (goal >= 50x)")
        m = max(n // 2, 1)
        plain, topical = [], []
        for _ in range(3):
            plain.append(append_rate(base, m, fields=False))
            topical.append(append_rate(base, m, fields=True))
        p, t = max(plain), max(topical)
        print(f"per-call append of 100 B ({m:,} messages):")
        print(f"  plain                        {p / 1e6:8.2f} M msg/s")
        print(f"  topic + 2 tags               {t / 1e6:8.2f} M msg/s")
        print(f"  cost                         {p / t:8.2f}x a plain append (goal <= 1.3x)")
    finally:
        shutil.rmtree(base)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
