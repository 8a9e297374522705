"""Latency from ``append`` in one process to a tailer in another (litemq).

The writer stamps ``time.monotonic_ns()`` (CLOCK_MONOTONIC, one clock for
every process on the machine) into the first 8 bytes of each 100-byte
payload just before ``append``; a tailer in a second process follows the
queue and records ``monotonic_ns() - stamp`` for every message it gets. The
writer paces itself at a fixed rate (a burst every millisecond, sleeping in
between) so the figure is the delivery latency, not the time a backlog takes
to drain. A zero stamp ends the run. The first 1 % is warm-up, left out.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

PERCENTILES = [50.0, 90.0, 99.0, 99.9, 99.99]


def writer(spec: dict[str, Any]) -> int:
    import litemq

    n, size, rate = spec["messages"], spec["size"], spec["rate"]
    pad = bytes(size - 8)
    with litemq.Queue(spec["path"]) as q:
        append = q.appender().append
        now = time.monotonic_ns
        interval = 1e9 / rate
        burst = max(1, rate // 1000)  # one burst per millisecond, sleeping between
        start = now()
        for i in range(0, n, burst):
            left = start + int(i * interval) - now()
            if left > 0:
                time.sleep(left / 1e9)
            for _ in range(min(burst, n - i)):
                append(now().to_bytes(8, "little") + pad)
        append(bytes(size))
        q.appender().flush()
    return 0


def tailer(spec: dict[str, Any]) -> int:
    import litemq

    q = litemq.Queue(spec["path"], read_only=True)
    t = q.tailer(start="end")
    deltas = array("q")
    now = time.monotonic_ns
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for msg in t.follow():
        payload = msg.payload
        stamp = int.from_bytes(payload[:8], "little")
        if stamp == 0:
            break
        deltas.append(now() - stamp)
    q.close()
    Path(spec["out"]).write_bytes(deltas.tobytes())
    return 0


def percentile(sorted_values: array[int] | list[int], p: float) -> int:
    if not sorted_values:
        return 0
    index = min(len(sorted_values) - 1, max(0, round(p / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


def measure(script: str, messages: int, size: int, rate: int, parent: str | None) -> dict[str, Any]:
    """Run a writer and a tailer process; return percentiles in ns and the sorted sample."""
    import litemq

    tmp = Path(tempfile.mkdtemp(prefix="peers-latency-", dir=parent))
    path = str(tmp / "queue")
    with litemq.Queue(path):
        pass  # create it, so the read-only tailer can open it
    spec = {"path": path, "messages": messages, "size": size, "rate": rate}
    out = tmp / "deltas.bin"
    tail = subprocess.Popen(
        [sys.executable, script, "_latency-tailer", json.dumps({**spec, "out": str(out)})],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert tail.stdout is not None
        line = tail.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"latency tailer did not start: {line!r}")
        write = subprocess.run(
            [sys.executable, script, "_latency-writer", json.dumps(spec)],
            timeout=3 * messages / rate + 60,
        )
        if write.returncode != 0:
            raise RuntimeError(f"latency writer exited with {write.returncode}")
        tail.wait(timeout=60)
    finally:
        if tail.poll() is None:
            tail.kill()  # by its pid
            tail.wait()
    deltas = array("q")
    deltas.frombytes(out.read_bytes())
    shutil.rmtree(tmp, ignore_errors=True)
    warm = len(deltas) // 100
    sample = sorted(deltas[warm:])
    result: dict[str, Any] = {
        "messages": messages,
        "received": len(deltas),
        "measured": len(sample),
        "rate": rate,
        "percentiles_ns": {str(p): percentile(sample, p) for p in PERCENTILES},
        "max_ns": sample[-1] if sample else 0,
        "mean_ns": sum(sample) / len(sample) if sample else 0,
    }
    result["_sample"] = sample
    return result
