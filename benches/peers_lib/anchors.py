# ruff: noqa: RUF001  (the multiplication sign is meant in what this prints)
"""Raw-write anchors (issue 34): what a Python program pays to write the same bytes itself.

Two litemq cases, each beside the raw write it replaces, in the same run:

- *durable batches*: ``app.append_batch(1,000 payloads)`` + ``app.flush()``
  each, against ``os.write(fd, b"".join(1,000 payloads))`` +
  ``os.fdatasync(fd)`` each, on a file opened ``O_WRONLY|O_CREAT|O_APPEND``;
- *batches until visible*: ``app.append_batch(1,000 payloads)`` until a
  reader in another handle (``read_only=True``) sees the last message,
  against ``f.write(b"".join(1,000 payloads))`` on a file opened ``"wb"``
  (the bytes are in the page cache, where any reader sees them, when
  ``write`` returns; ``f.close()`` is inside the timing).

Every case runs in a fresh process, rounds interleaved (raw, litemq, raw,
litemq, ...), the median of each case reported, and the ratio litemq /
anchor of the medians. The payloads are 1,000 distinct random ones, reused.

The durable anchor also runs with payloads as long as litemq's frames (128
bytes for 100-byte payloads: length, flags, timestamp, CRC, padding): the
same bytes reach the disk, so litemq's ratio to it is what its format leaves
for everything else (PERFORMANCE.md, "Frames written with pwrite"). Not for
the write until visible: there the anchor's ``b"".join`` of 128,000 bytes
pays page faults at every call (glibc gives a freed block past 128 KiB of
heap back to the kernel), 14 M msg/s against 22 to 31 M with 100-byte
payloads, which measures the allocator, not the bytes.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CASES = (
    "raw_durable",
    "litemq_durable",
    "raw_durable_frames",
    "raw_write",
    "litemq_batch",
)
PAIRS = (
    ("durable batches of 1,000", "litemq_durable", "raw_durable", 0.9),
    ("batches of 1,000 until visible", "litemq_batch", "raw_write", 1.0),
)
LABELS = {
    "raw_durable": "os.write(b''.join(1,000)) + os.fdatasync",
    "litemq_durable": "append_batch(1,000) + flush()",
    "raw_durable_frames": "the same, payloads as long as frames",
    "raw_write": "f.write(b''.join(1,000))",
    "litemq_batch": "append_batch(1,000) until a reader sees the last",
}
# The anchor written again with payloads as long as litemq's frames.
SAME_BYTES = {"raw_durable": "raw_durable_frames"}


def frame_len(size: int) -> int:
    """Bytes of litemq's frame around a plain ``size``-byte payload
    (FORMAT.md: length 4, flags 1, timestamp 8, payload, CRC 8, padded to 8)."""
    return (4 + 1 + 8 + size + 8 + 7) // 8 * 8


def _pool(size: int) -> list[bytes]:
    rng = random.Random(34)
    return [rng.randbytes(size) for _ in range(1000)]


def measure(case: str, n: int, size: int, base: str) -> float:
    """Messages per second of ``case`` (``n`` messages), in this process."""
    if case.endswith("_frames"):
        case, size = case.removesuffix("_frames"), frame_len(size)
    pool = _pool(size)
    batches = max(1, n // 1000)
    count = batches * 1000
    if case == "raw_durable":
        fd = os.open(os.path.join(base, "raw"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        t0 = time.perf_counter()
        for _ in range(batches):
            os.write(fd, b"".join(pool))
            os.fdatasync(fd)
        took = time.perf_counter() - t0
        os.close(fd)
        return count / took
    if case == "raw_write":
        t0 = time.perf_counter()
        with open(os.path.join(base, "raw"), "wb") as f:
            for _ in range(batches):
                f.write(b"".join(pool))
        return count / (time.perf_counter() - t0)
    import litemq

    path = os.path.join(base, "q")
    with litemq.Queue(path) as q:
        app = q.appender()
        if case == "litemq_durable":
            t0 = time.perf_counter()
            for _ in range(batches):
                app.append_batch(pool)
                app.flush()
            return count / (time.perf_counter() - t0)
        reader = litemq.Queue(path, read_only=True)
        last = count - 1
        t0 = time.perf_counter()
        for _ in range(batches):
            app.append_batch(pool)
        while True:
            try:
                reader.get(last)
                break
            except litemq.NotFoundError:
                time.sleep(0.00002)
        took = time.perf_counter() - t0
        reader.close()
        return count / took


def child(argv: list[str]) -> int:
    """``anchors.py CASE N SIZE DIR``: print one case's rate."""
    case, n, size, base = argv[0], int(argv[1]), int(argv[2]), argv[3]
    print(measure(case, n, size, base))
    return 0


def run(
    n: int,
    size: int,
    rounds: int,
    parent: str | None,
    progress: Callable[[str], None],
    python: str = sys.executable,
) -> dict[str, Any]:
    """Every case in ``rounds`` interleaved rounds, each in a fresh process."""
    rates: dict[str, list[float]] = {c: [] for c in CASES}
    errors: dict[str, str] = {}
    here = str(Path(__file__).resolve())
    for r in range(rounds):
        for case in CASES:
            if case in errors:
                continue
            base = tempfile.mkdtemp(prefix=f"anchors-{case}-", dir=parent)
            try:
                os.sync()  # the last case's writeback does not land on this one's syncs
                done = subprocess.run(
                    [python, here, case, str(n), str(size), base],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
            finally:
                shutil.rmtree(base, ignore_errors=True)
            if done.returncode != 0:
                errors[case] = done.stderr.strip()[-500:] or f"exited with {done.returncode}"
                continue
            rate = float(done.stdout.split()[-1])
            rates[case].append(rate)
            progress(f"    round {r + 1}: {LABELS[case]:<50} {rate / 1e6:6.2f} M msg/s")
    medians = {c: statistics.median(v) for c, v in rates.items() if v}
    return {
        "n": n,
        "size": size,
        "rounds": rounds,
        "rates": rates,
        "median": medians,
        "errors": errors,
    }


def lines(result: dict[str, Any]) -> list[str]:
    """The cases with their medians, and litemq's ratio to each anchor."""
    med = result.get("median", {})
    out = [
        f"Raw-write anchors (issue 34): {result['n']:,} × {result['size']} B, "
        f"{result['rounds']} interleaved rounds, medians, each case a fresh process"
    ]
    for title, mine, anchor, goal in PAIRS:
        out.append(f"  {title}:")
        same = SAME_BYTES.get(anchor)
        for case in (anchor, mine, same):
            if case is None:
                continue
            got = med.get(case)
            figure = (
                f"{got / 1e6:6.2f} M msg/s" if got else "failed: " + result["errors"].get(case, "?")
            )
            runs = ", ".join(f"{r / 1e6:.2f}" for r in result["rates"].get(case, []))
            out.append(f"    {LABELS[case]:<50} {figure}  ({runs})")
        got = med.get(same) if same else None
        if med.get(mine) and med.get(anchor):
            ratio = med[mine] / med[anchor]
            verdict = "met" if ratio >= goal else "not met"
            out.append(f"    litemq / anchor {ratio:.2f}× (goal ≥ {goal:g}×: {verdict})")
        if med.get(mine) and got:
            out.append(
                f"    litemq / the same bytes written raw {med[mine] / got:.2f}× "
                f"(frames of {frame_len(result['size'])} B)"
            )
    return out


def markdown_section(result: dict[str, Any]) -> list[str]:
    """The section of docs/PERFORMANCE.md: what was run, and the table."""
    if "error" in result:
        return ["## Raw-write anchors (issue 34)", "", f"Not measured: {result['error']}", ""]
    return [
        "## Raw-write anchors (issue 34)",
        "",
        f"{result['n']:,} messages of {result['size']} bytes (1,000 distinct random payloads, "
        "reused), each case in a fresh process, "
        f"{result['rounds']} rounds interleaved (anchor, litemq, anchor, litemq), medians. "
        "The anchor is what a Python program pays to write the same payloads itself: "
        "`os.write` of the joined 1,000 to a file opened `O_APPEND`, then `os.fdatasync`; "
        'or `f.write` of the joined 1,000 to a file opened `"wb"` (visible to any '
        "reader when it returns). litemq's batches until visible are timed until a "
        "read-only handle `get`s the last message; its durable batches are "
        "`append_batch` then `flush()` on a queue opened with the defaults. The durable "
        f"anchor runs again with payloads of {frame_len(result['size'])} bytes, as long as "
        "litemq's frames: the same bytes written raw.",
        "",
        *markdown(result),
        "",
    ]


def markdown(result: dict[str, Any]) -> list[str]:
    """A table of the same, for docs/PERFORMANCE.md."""
    med = result.get("median", {})
    out = [
        "| case | litemq | raw-write anchor | ratio | goal | the same bytes written raw | ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def rate(x: float | None) -> str:
        return f"{x / 1e6:.2f} M msg/s" if x else "—"

    def ratio(x: float | None, y: float | None) -> str:
        return f"{x / y:.2f}×" if x and y else "—"

    for title, mine, anchor, goal in PAIRS:
        same = SAME_BYTES.get(anchor)
        a, b, c = med.get(mine), med.get(anchor), med.get(same) if same else None
        out.append(
            f"| {title}: `{LABELS[mine]}` vs `{LABELS[anchor]}` | {rate(a)} | {rate(b)} "
            f"| {ratio(a, b)} | ≥ {goal:g}× | {rate(c)} | {ratio(a, c)} |"
        )
    return out


if __name__ == "__main__":
    sys.exit(child(sys.argv[1:]))
