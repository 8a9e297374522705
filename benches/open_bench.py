"""What opening a queue and a first key lookup cost, against the same queue without keys.

    nice .venv/bin/python benches/open_bench.py [N]

Key lookups cover the whole queue: the positions no key-index file covers (before the
first file, between files) are read from the data unless ``metadata.json``'s
``key_index_clear`` says a writer found them to hold no keyed message (docs/FORMAT.md,
"Coverage of the key index"). This bench writes N unkeyed messages of 100 B (default
2,000,000) in 64 MiB files, then 2,000 keyed ones, and measures, best of 5, each in a
fresh process:

- ``writer open``: ``Queue(path)``, ``appender()`` (which starts the writer: lock, recovery,
  key-index check, metadata), ``close()``;
- ``writer open, no saved ranges``: the same after ``key_index_clear`` is removed from
  ``metadata.json`` (a queue written by an older build): the open reads the prefix;
- ``read-only first find``: ``Queue(path, read_only=True)`` and one ``find``;

and, as the baseline in the same run, ``writer open`` of a queue of the same N messages
with no key at all. To compare with another build, run it with ``PYTHONPATH`` pointing
at a copy of that build's ``litemq`` package. Disk: about 2 x N x 130 B in a temp dir,
removed at the end.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import litemq

ROUNDS = 5
BODY = b"x" * 100


def fill(path: Path, n: int, keyed: int) -> None:
    with litemq.Queue(path, file_size="64MiB") as q:
        app = q.appender()
        for start in range(0, n, 10_000):
            app.append_batch([BODY] * min(10_000, n - start))
        for i in range(keyed):
            app.append(BODY, key=f"k{i % 50}")
        app.flush()


CHILD = """
import sys, time, litemq
path, mode = sys.argv[1], sys.argv[2]
t = time.perf_counter()
if mode == "open":
    q = litemq.Queue(path)
    q.appender()  # the writer starts (lock, recovery, key-index check) at the first append
    q.close()
else:
    with litemq.Queue(path, read_only=True) as q:
        q.find("k7")
print(time.perf_counter() - t)
"""


def timed(path: Path, mode: str, before: object = None) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        if callable(before):
            before()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), mode],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        best = min(best, float(out))
    return best


def drop_saved_ranges(path: Path) -> None:
    meta_path = path / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta.pop("key_index_clear", None)
    meta_path.write_text(json.dumps(meta))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    tmp = Path(tempfile.mkdtemp(prefix="litemq-open-bench-"))
    try:
        plain, keyed = tmp / "plain", tmp / "keyed"
        fill(plain, n, 0)
        fill(keyed, n, 2_000)
        base = timed(plain, "open")
        rows = [
            ("writer open, no keys (baseline)", base),
            ("writer open", timed(keyed, "open")),
            (
                "writer open, no saved ranges",
                timed(keyed, "open", lambda: drop_saved_ranges(keyed)),
            ),
            ("read-only first find", timed(keyed, "find")),
        ]
        print(f"{n:,} unkeyed messages, then 2,000 keyed; best of {ROUNDS}, fresh processes")
        for name, secs in rows:
            print(f"  {name:34} {secs * 1e3:8.1f} ms   {secs / base:5.2f}x baseline")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
