"""``make demo``: litemq end to end, in two processes.

One process writes a million 100-byte messages as fast as a Python loop can,
then a steady trickle (20,000 a second); a second process follows the queue
live (read-only, as another program would) and measures how long each message
took from ``append`` to being seen there. Then the writer fetches a
few messages by sequence and reads everything back. A small table sums it up.

    python -m litemq.demo [--messages N] [--size BYTES] [--path DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import litemq

__all__ = ["main"]

_STAMP = struct.Struct("<q")  # the writer's clock (ns) at append, first 8 bytes


def _percentile(sorted_values: list[int], p: float) -> int:
    if not sorted_values:
        return 0
    at = min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))
    return sorted_values[at]


def follow(path: str, count: int, paced: int) -> None:
    """The second process: follow the queue until `count` messages, then
    `paced` more, arrived; report latencies of each phase separately."""
    total = count + paced
    latencies = [0] * total
    with litemq.Queue(path, read_only=True) as q:
        t = q.tailer()
        print("ready", flush=True)
        now = time.time_ns
        unpack = _STAMP.unpack_from
        expected = 0
        in_order = True
        started = 0
        elapsed = 0.0
        for msg in t.follow(idle_timeout=60):
            seen = now()
            if expected == 0:
                started = seen
            in_order = in_order and msg.seq == expected
            latencies[expected] = seen - unpack(msg.payload)[0]
            expected += 1
            if expected == count:
                elapsed = (seen - started) / 1e9
            if expected == total:
                break
    full, slow = sorted(latencies[:count]), sorted(latencies[count:])
    print(
        json.dumps(
            {
                "received": expected,
                "in_order": in_order,
                "seconds": elapsed,
                "full": [_percentile(full, p) / 1000 for p in (50, 99, 99.9)],
                "paced": [_percentile(slow, p) / 1000 for p in (50, 99, 99.9)],
            }
        ),
        flush=True,
    )


def _us(value: float) -> str:
    return f"{value / 1000:>8.2f} ms" if value >= 10_000 else f"{value:>8.1f} µs"


def _row(step: str, messages: int, seconds: float) -> str:
    rate = messages / seconds if seconds > 0 else float("inf")
    return f"  {step:<34} {messages:>11,} {seconds:>9.3f} s {rate / 1e6:>8.2f} M msg/s"


def run(path: Path, count: int, size: int, paced: int = 20_000, rate: int = 20_000) -> int:
    """The writer: start the follower, write, fetch, read back, print the table."""
    if size < _STAMP.size:
        raise SystemExit(f"--size must be at least {_STAMP.size} bytes")
    padding = b"x" * (size - _STAMP.size)
    print(f"litemq demo: {count:,} messages of {size} bytes into {path}")
    with litemq.Queue(path, file_size="256MiB") as q:
        follower = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "litemq.demo",
                "--follow",
                str(path),
                "--messages",
                str(count),
                "--paced",
                str(paced),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert follower.stdout is not None
        if follower.stdout.readline().strip() != "ready":
            follower.kill()
            raise SystemExit("the follower process did not start")
        print(f"  follower process {follower.pid} is following the queue live")

        try:
            app = q.appender()
            append = app.append
            pack = _STAMP.pack
            now = time.time_ns
            started = time.perf_counter()
            for _ in range(count):
                append(pack(now()) + padding)
            appended = time.perf_counter() - started
            app.flush()
            durable = time.perf_counter() - started

            # Then a steady trickle, to see latency when the reader is not behind
            # (a pause first lets it catch up with the burst).
            time.sleep(1.0)
            gap = 1e9 / rate
            next_at = float(time.time_ns())
            for _ in range(paced):
                while now() < next_at:
                    pass
                append(pack(now()) + padding)
                next_at += gap
            app.flush()
        except BaseException:
            follower.kill()
            follower.communicate()
            raise
        out, _ = follower.communicate(timeout=600)
        if follower.returncode != 0:
            raise SystemExit(f"the follower failed with status {follower.returncode}")
        seen = json.loads(out.strip().splitlines()[-1])

        total_count = count + paced
        probes = [0, count // 3, count // 2, total_count - 1]
        started = time.perf_counter()
        fetched = [q.get(seq) for seq in probes]
        get_seconds = time.perf_counter() - started

        started = time.perf_counter()
        total = 0
        n = 0
        for msg in q.tailer():
            total += len(msg.payload)
            n += 1
        read_seconds = time.perf_counter() - started
        stats = q.stats()

    print()
    print(f"  {'step':<34} {'messages':>11} {'time':>11} {'throughput':>14}")
    print(_row("append (writer, Python loop)", count, appended))
    print(_row("append + flush to disk", count, durable))
    print(_row("follow live (second process)", count, seen["seconds"]))
    print(_row("read back (tailer, payloads)", n, read_seconds))
    print(
        f"  get by sequence: {len(fetched)} lookups, {get_seconds / len(fetched) * 1e6:,.1f} µs each"
    )
    print()
    print("  latency append -> seen in the other process      p50        p99      p99.9")
    for label, values in (
        (f"full speed ({count:,} messages)", seen["full"]),
        (f"paced at {rate:,}/s ({paced:,} messages)", seen["paced"]),
    ):
        p50, p99, p999 = values
        print(f"    {label:<44} {_us(p50)} {_us(p99)} {_us(p999)}")
    print()
    for msg in fetched:
        stamp = _STAMP.unpack_from(msg.payload)[0]
        print(
            f"  get({msg.seq:>9,}) -> {len(msg.payload)} bytes, written {msg.datetime:%H:%M:%S.%f} UTC "
            f"(appended at {stamp})"
        )
    print()
    ok = (
        seen["received"] == total_count
        and seen["in_order"]
        and n == total_count
        and total == total_count * size
        and [m.seq for m in fetched] == probes
    )
    print(
        f"  {stats.files} data file(s), {stats.disk_bytes / 2**20:,.0f} MiB on disk; "
        f"every message seen once, in order, by both readers: {'yes' if ok else 'NO'}"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """Runs the demo (or, with ``--follow``, its second process).

    >>> main(["--messages", "1000"])
    0
    """
    parser = argparse.ArgumentParser(prog="python -m litemq.demo", description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes (default 100)")
    parser.add_argument("--path", help="queue directory (default: a new temporary one)")
    parser.add_argument(
        "--paced", type=int, default=20_000, help="then this many at 20,000/s (default 20,000)"
    )
    parser.add_argument("--follow", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.follow:
        try:
            follow(args.follow, args.messages, args.paced)
        except BrokenPipeError:
            return 1  # the writer went away
        return 0
    tmp = None if args.path else Path(tempfile.mkdtemp(prefix="litemq-demo-"))
    try:
        path = Path(args.path) if args.path else Path(str(tmp)) / "queue"
        return run(path, args.messages, args.size, args.paced)
    except (litemq.LiteMQError, OSError) as e:
        print(f"demo failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
