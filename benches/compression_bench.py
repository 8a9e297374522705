"""Compression: on-disk size and append throughput on a JSON-events data set.

    .venv/bin/python benches/compression_bench.py [N]

The data set is generated here (seeded): N JSON events of about 200 bytes
with repeated field names, ids, timestamps, a few enums and a free-text
field, one event per message. Measured, each into a fresh temp dir:

1. on-disk bytes (frames written, ``DataFileInfo.bytes_written``) of a litemq
   queue without compression and with ``compression="zstd"`` (level 1 and 3),
   ``"lz4"``, ``"gzip"``: each message compressed on its own;
2. the same rows as gzip'd JSON lines (level 6) and as Parquet with zstd
   (pyarrow, the events parsed into typed columns);
3. append throughput from Python, best of 3: ``append_batch`` of 1,000
   messages at a time, and one ``append`` per message, plain and with zstd
   level 1;
4. batches compressed together (format 9, ``append_batch(...,
   compress_together=True)``, blocks of up to 64 KiB): on-disk bytes with
   zstd 1, 3, 9 and 15 and lz4, append throughput with zstd 1 next to plain
   ``append_batch`` in the same run, and random ``get(seq)`` throughput on a
   batch-compressed queue against a plain one and a per-message zstd one
   (20,000 gets at seeded random sequences, best of 3).

Prints figures and ratios; asserts only that every payload reads back. Disk:
a few times N x 200 B, removed at the end.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq

import litemq

FILE_SIZE = 64 << 20
KINDS = ["page_view", "click", "add_to_cart", "purchase", "login", "logout"]
PAGES = ["/", "/search", "/product/42", "/cart", "/checkout", "/account", "/help"]
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "shoppers",
    "browse",
    "red",
    "shoes",
]


def events(n: int) -> list[dict[str, object]]:
    rng = random.Random(20)
    t0 = 1_764_000_000_000_000
    return [
        {
            "event_id": 10_000_000 + i,
            "ts": t0 + i * 1_000 + rng.randrange(1_000),
            "user_id": f"user-{rng.randrange(50_000):05d}",
            "session": f"{rng.getrandbits(64):016x}",
            "kind": rng.choice(KINDS),
            "page": rng.choice(PAGES),
            "price_cents": rng.randrange(100, 50_000) if rng.random() < 0.2 else None,
            "country": rng.choice(["FR", "DE", "US", "GB", "JP", "BR"]),
            "note": " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 9))),
        }
        for i in range(n)
    ]


def on_disk(path: str) -> int:
    with litemq.Queue(path, read_only=True) as q:
        return sum(f.bytes_written for f in q.data_files())


def write_queue(
    path: str, payloads: list[bytes], together: bool = False, **options: object
) -> float:
    """Appends in batches of 1,000 (compressed together with `together`);
    returns seconds (flush included)."""
    with litemq.Queue(path, file_size=FILE_SIZE, **options) as q:  # type: ignore[arg-type]
        app = q.appender()
        t0 = time.perf_counter()
        for i in range(0, len(payloads), 1000):
            app.append_batch(payloads[i : i + 1000], compress_together=together)
        app.flush()
        return time.perf_counter() - t0


def write_together(path: str, payloads: list[bytes], **options: object) -> float:
    return write_queue(path, payloads, True, **options)


def random_gets(path: str, n: int, gets: int = 20_000) -> float:
    """Best of 3 seconds for `gets` `get(seq)` calls at seeded random sequences."""
    rng = random.Random(5)
    seqs = [rng.randrange(n) for _ in range(gets)]
    best = float("inf")
    with litemq.Queue(path, read_only=True) as q:
        get = q.get
        for _ in range(3):
            t0 = time.perf_counter()
            for s in seqs:
                get(s)
            best = min(best, time.perf_counter() - t0)
    return best


def append_each(path: str, payloads: list[bytes], **options: object) -> float:
    with litemq.Queue(path, file_size=FILE_SIZE, **options) as q:  # type: ignore[arg-type]
        app = q.appender()
        append = app.append
        t0 = time.perf_counter()
        for p in payloads:
            append(p)
        app.flush()
        return time.perf_counter() - t0


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    rows = events(n)
    payloads = [json.dumps(r, separators=(",", ":")).encode() for r in rows]
    raw = sum(len(p) for p in payloads)
    tmp = tempfile.mkdtemp(prefix="litemq-compression-")
    try:
        print(f"{n:,} JSON events, {raw / n:.0f} B on average, {raw / 1e6:.1f} MB of JSON")
        sizes: dict[str, int] = {}
        for name, opts in [
            ("litemq, none", {}),
            ("litemq, zstd 1", {"compression": "zstd", "compression_level": 1}),
            ("litemq, zstd 3", {"compression": "zstd"}),
            ("litemq, lz4", {"compression": "lz4"}),
            ("litemq, gzip 6", {"compression": "gzip"}),
            ("together, zstd 1", {"compression": "zstd", "compression_level": 1}),
            ("together, zstd 3", {"compression": "zstd"}),
            ("together, lz4", {"compression": "lz4"}),
            ("together, zstd 9", {"compression": "zstd", "compression_level": 9}),
            ("together, zstd 15", {"compression": "zstd", "compression_level": 15}),
        ]:
            path = os.path.join(tmp, name.replace(", ", "-").replace(" ", ""))
            write_queue(path, payloads, name.startswith("together"), **opts)
            sizes[name] = on_disk(path)
            with litemq.Queue(path, read_only=True) as q:
                assert [m.payload for m in q.tailer()] == payloads, name
            shutil.rmtree(path)
        jsonl = b"\n".join(payloads) + b"\n"
        sizes["gzip'd JSON lines (6)"] = len(gzip.compress(jsonl, 6))
        table = pa.Table.from_pylist(rows)
        pq_path = os.path.join(tmp, "events.parquet")
        pq.write_table(table, pq_path, compression="zstd")
        sizes["Parquet + zstd"] = os.path.getsize(pq_path)
        parquet = sizes["Parquet + zstd"]
        print(f"\n{'on disk':<24} {'bytes':>13} {'B/event':>8} {'x Parquet':>10}")
        for name, size in sizes.items():
            print(f"{name:<24} {size:>13,} {size / n:>8.1f} {size / parquet:>10.2f}")

        print(f"\n{'append (best of 3)':<34} {'msgs/s':>12}")
        for label, fn, opts in [
            ("append_batch(1000), none", write_queue, {}),
            (
                "append_batch(1000), zstd 1",
                write_queue,
                {"compression": "zstd", "compression_level": 1},
            ),
            (
                "append_batch(1000), together zstd 1",
                write_together,
                {"compression": "zstd", "compression_level": 1},
            ),
            ("append() each, none", append_each, {}),
            ("append() each, zstd 1", append_each, {"compression": "zstd", "compression_level": 1}),
        ]:
            best = float("inf")
            for r in range(3):
                path = os.path.join(tmp, f"t{r}")
                best = min(best, fn(path, payloads, **opts))
                shutil.rmtree(path)
            print(f"{label:<34} {n / best:>12,.0f}")

        print(f"\n{'random get(seq), 20,000':<34} {'gets/s':>12}")
        for label, together, opts in [
            ("plain", False, {}),
            ("per-message zstd 1", False, {"compression": "zstd", "compression_level": 1}),
            ("together zstd 1", True, {"compression": "zstd", "compression_level": 1}),
        ]:
            path = os.path.join(tmp, "gets")
            write_queue(path, payloads, together, **opts)
            with litemq.Queue(path, read_only=True) as q:
                assert q.get(n // 2).payload == payloads[n // 2]
            print(f"{label:<34} {20_000 / random_gets(path, n):>12,.0f}")
            shutil.rmtree(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
