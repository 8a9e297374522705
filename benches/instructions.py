"""Instructions per operation of the hot paths, counted by valgrind's callgrind, for two builds.

    .venv/bin/python benches/instructions.py BEFORE_DIR AFTER_DIR [--messages N]

BEFORE_DIR and AFTER_DIR each hold a ``litemq`` package (a copy of ``python/litemq`` with
the extension of the build to measure; build both the same way, e.g. ``cargo build
--release --lib --features python`` and ``target/release/liblitemq.so`` copied in as
``_litemq.abi3.so``). A wall clock on a shared 2-core machine moves 20 % between runs of
one build; a count of executed instructions does not, so a refactoring that must stay
within a few percent is checked here (docs/PERFORMANCE.md, "Instructions per operation").

N messages of 100 B (default 1,000,000) are written once in 32 MiB files; then, for each
build, a fresh process under callgrind does one operation K times, and the same script
doing none gives the baseline subtracted: iterate (``next(it).payload``),
``read_batch(1000)``, ``read_arrow(max_rows=...)``, random ``get`` and ``seek`` on a
read-only handle. Writes are not counted here: the appending thread waits for the I/O
thread, so its count depends on timing (the same build counted 554 M and 665 M
instructions for 100,000 appends). Needs valgrind; takes a few minutes. Disk: about
N x 130 B in a temp dir, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Operation -> how many times it runs, and the baseline it is measured against.
OPS = {
    "iterate": (100_000, "none"),
    "read_batch": (200_000, "none"),
    "read_arrow": (200_000, "none"),
    "get": (20_000, "none_seq"),
    "seek": (20_000, "none_seq"),
}

CHILD = r"""
import random, sys
import litemq
qdir, op, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
q = litemq.Queue(qdir, read_only=True)
rng = random.Random(1)
total = len(q)
seqs = [rng.randrange(total) for _ in range(n)] if op in ("get", "seek", "none_seq") else []
if op == "iterate":
    it = iter(q.tailer())
    for _ in range(n):
        next(it).payload
elif op == "read_batch":
    t = q.tailer()
    for _ in range(n // 1000):
        t.read_batch(1000, timeout=0)
elif op == "read_arrow":
    q.read_arrow(max_rows=n)
elif op == "get":
    for s in seqs:
        q.get(s)
elif op == "seek":
    t = q.tailer()
    for s in seqs:
        t.seek(s)
"""


def fill(path: Path, n: int) -> None:
    import litemq

    payloads = [os.urandom(50).hex().encode() for _ in range(1000)]
    with litemq.Queue(path, file_size=32 << 20) as q:
        app = q.appender()
        for _ in range(n // 1000):
            app.append_batch(payloads)
        app.flush()


def count(build: Path, qdir: Path, op: str, n: int) -> int:
    """Instructions the whole child process executed."""
    env = dict(os.environ, PYTHONPATH=str(build), PYTHONHASHSEED="0")
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            *(sys.executable, "-c", CHILD, str(qdir), op, str(n)),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    m = re.search(r"Collected : (\d+)", out.stderr)
    if m is None:
        raise RuntimeError(f"no callgrind total in: {out.stderr[-2000:]}")
    return int(m.group(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--messages", type=int, default=1_000_000)
    a = p.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    tmp = Path(tempfile.mkdtemp(prefix="litemq-instr-"))
    try:
        qdir = tmp / "q"
        fill(qdir, a.messages)
        counts: dict[tuple[str, str], int] = {}
        for build in (a.before, a.after):
            for base, n in (("none", 0), ("none_seq", 20_000)):
                counts[(str(build), base)] = count(build, qdir, base, n)
        print(f"{'operation':12} {'before':>10} {'after':>10}  instructions per op")
        for op, (n, base) in OPS.items():
            per = []
            for build in (a.before, a.after):
                total = count(build, qdir, op, n)
                per.append((total - counts[(str(build), base)]) / n)
            change = 100 * (per[1] / per[0] - 1)
            print(f"{op:12} {per[0]:10.0f} {per[1]:10.0f}  {change:+.2f} %")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
