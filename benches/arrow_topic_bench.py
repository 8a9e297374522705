"""read_arrow of one topic: the engine's topic filter against a full read_arrow filtered
in pyarrow, measured in the same run.

    nice .venv/bin/python benches/arrow_topic_bench.py [N]

N messages (default 1,000,000) of 100 B; 1 % in topic "rare" (tagged "t"), the rest
spread over 64 other topics; 8 MiB files, so most files are sealed and have a topic index.
Read from a closed queue, best of 3 rounds each, interleaved:

1. ``q.read_arrow(topic="rare")``;
2. ``q.read_arrow()`` then ``batch.filter(pc.equal(batch["topic"], "rare"))``.

Asserts only that both give the same rows. Prints both times and their ratio. Disk: about
N x 150 B in a temp dir, removed at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import pyarrow.compute as pc

import litemq

PAYLOAD = b"x" * 100
FILE_SIZE = 8 << 20
BATCH = 10_000


def fill(path: str, n: int) -> int:
    """Writes n messages, 1 % of them in topic "rare"; returns how many that is."""
    rare = 0
    with litemq.Queue(path, file_size=FILE_SIZE) as q:
        app = q.appender()
        items = []
        for i in range(n):
            if i % 100 == 7:
                items.append({"payload": PAYLOAD, "topic": "rare", "tags": ["t"]})
                rare += 1
            else:
                items.append({"payload": PAYLOAD, "topic": f"topic-{i % 64}"})
            if len(items) == BATCH:
                app.append_batch(items)
                items = []
        if items:
            app.append_batch(items)
        app.flush()
    return rare


def topic_filter(path: str) -> tuple[float, list[int]]:
    with litemq.Queue(path, read_only=True) as q:
        t0 = time.perf_counter()
        batch = q.read_arrow(topic="rare")
        dt = time.perf_counter() - t0
        return dt, batch.column("seq").to_pylist()


def full_then_pyarrow(path: str) -> tuple[float, list[int]]:
    with litemq.Queue(path, read_only=True) as q:
        t0 = time.perf_counter()
        batch = q.read_arrow()
        kept = batch.filter(pc.fill_null(pc.equal(batch.column("topic"), "rare"), False))
        dt = time.perf_counter() - t0
        return dt, kept.column("seq").to_pylist()


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 1_000_000
    base = tempfile.mkdtemp(prefix="litemq-arrow-topic-bench-")
    try:
        path = os.path.join(base, "q")
        rare = fill(path, n)
        with litemq.Queue(path, read_only=True) as q:
            files = len(q.data_files())
        filtered, full = [], []
        for _ in range(3):
            dt, seqs = topic_filter(path)
            filtered.append(dt)
            dt_full, seqs_full = full_then_pyarrow(path)
            full.append(dt_full)
            assert seqs == seqs_full, (len(seqs), len(seqs_full))
            assert len(seqs) == rare, (len(seqs), rare)
        t_f, t_a = min(filtered), min(full)
        print(f"read_arrow of one topic ({rare:,} of {n:,} messages, 1 %, {files} data files):")
        print(f"  read_arrow(topic=...)              {t_f * 1e3:8.1f} ms")
        print(f"  read_arrow() + pyarrow filter      {t_a * 1e3:8.1f} ms")
        print(f"  ratio                              {t_a / t_f:8.1f}x")
    finally:
        shutil.rmtree(base)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
