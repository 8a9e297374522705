"""Messages per second from Python, next to a plain-Python baseline.

    python benches/python_bench.py [--messages N] [--size BYTES] [--repeat R]

For 100-byte messages it measures litemq's `append` in a Python loop,
`append_batch` (lists of 1,000), and iterating a tailer (reading each
payload), and, in the same run, a plain Python loop that writes length +
CRC32 framed records to a buffered file and reads them back, checking each
CRC. Writes count as done when the data is in the page cache (litemq: every
message published to readers; baseline: the buffered file flushed to the
OS); neither waits for the disk. Each figure is the best of R repeats.
Nothing here asserts on time: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import litemq

HEADER = struct.Struct("<II")  # length, crc32


def baseline_write(path: Path, payloads: list[bytes]) -> None:
    crc32 = zlib.crc32
    pack = HEADER.pack
    with open(path, "wb", buffering=1 << 20) as f:
        write = f.write
        for p in payloads:
            write(pack(len(p), crc32(p)))
            write(p)
        f.flush()


def baseline_read(path: Path) -> int:
    crc32 = zlib.crc32
    unpack = HEADER.unpack
    n = 0
    with open(path, "rb", buffering=1 << 20) as f:
        read = f.read
        while True:
            header = read(8)
            if len(header) < 8:
                break
            length, crc = unpack(header)
            payload = read(length)
            if crc32(payload) != crc:
                raise ValueError(f"bad CRC in record {n}")
            n += 1
    return n


def wait_published(q: litemq.Queue, n: int) -> None:
    """Until every appended message is visible to readers (not yet durable)."""
    while q.next_seq < n:
        time.sleep(0.0002)


def litemq_append(path: Path, payloads: list[bytes]) -> None:
    with litemq.Queue(path, file_size="1GiB") as q:
        append = q.appender().append
        for p in payloads:
            append(p)
        wait_published(q, len(payloads))


def litemq_batch(path: Path, payloads: list[bytes]) -> None:
    with litemq.Queue(path, file_size="1GiB") as q:
        append_batch = q.appender().append_batch
        chunks = [payloads[i : i + 1000] for i in range(0, len(payloads), 1000)]
        for chunk in chunks:
            append_batch(chunk)
        wait_published(q, len(payloads))


def litemq_iterate(path: Path) -> int:
    with litemq.Queue(path, read_only=True) as q:
        n = 0
        for msg in q.tailer():
            msg.payload  # noqa: B018 - a reader touches the payload
            n += 1
        return n


def best_of(repeat: int, run: Callable[[], object], setup: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(repeat):
        setup()
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    n, size = args.messages, args.size
    payloads = [os.urandom(8) + b"x" * (size - 8) for _ in range(n)]

    root = Path(tempfile.mkdtemp(prefix="litemq-bench-"))
    try:
        base_file = root / "baseline.bin"
        qdir = root / "queue"

        def fresh() -> None:
            shutil.rmtree(qdir, ignore_errors=True)
            base_file.unlink(missing_ok=True)

        def nothing() -> None:
            pass

        results: list[tuple[str, float, float]] = []
        t_base_write = best_of(args.repeat, lambda: baseline_write(base_file, payloads), fresh)
        t_base_read = best_of(args.repeat, lambda: baseline_read(base_file), nothing)
        t_append = best_of(args.repeat, lambda: litemq_append(qdir, payloads), fresh)
        t_batch = best_of(args.repeat, lambda: litemq_batch(qdir, payloads), fresh)
        assert litemq_iterate(qdir) == n
        t_iter = best_of(args.repeat, lambda: litemq_iterate(qdir), nothing)
        results = [
            ("append, Python loop", t_append, t_base_write),
            ("append_batch (1,000 per call)", t_batch, t_base_write),
            ("iterate a tailer (payload read)", t_iter, t_base_read),
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(
        f"litemq {litemq.__version__}, Python {sys.version.split()[0]}: {n:,} messages of {size} bytes, best of {args.repeat}"
    )
    print(f"  {'':<34} {'litemq':>14} {'baseline':>14} {'ratio':>7}")
    for name, t, base in results:
        print(f"  {name:<34} {n / t / 1e6:>9.2f} M/s {n / base / 1e6:>9.2f} M/s {base / t:>6.2f}x")
    print(
        "  baseline: buffered file, length + CRC32 framing, written "
        f"({n / t_base_write / 1e6:.2f} M/s) then read back ({n / t_base_read / 1e6:.2f} M/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
