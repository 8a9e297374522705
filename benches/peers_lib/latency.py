"""Latency from ``append`` in one process to a tailer in another (litemq).

The writer stamps ``time.monotonic_ns()`` (CLOCK_MONOTONIC, one clock for
every process on the machine) into the first 8 bytes of each 100-byte
payload just before ``append``; a tailer in a second process follows the
queue and records ``monotonic_ns() - stamp`` for every message it gets. The
writer paces itself at a fixed rate (a burst every millisecond, sleeping in
between) so the figure is the delivery latency, not the time a backlog takes
to drain. A zero stamp ends the run. The first 1 % is warm-up, left out.

`follow_vs_pipe` measures the same path against an ``os.pipe`` between a
writer and a reader process started the same way (blocking ``os.read``), at
several rates, and the follower's CPU (its own ``getrusage``, from the first
message it received to the last, divided by that wall time).
"""

from __future__ import annotations

import json
import os
import resource
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
    with litemq.Queue(spec["path"]) as q:
        _paced(n, rate, q.appender().append, size)
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


# --------------------------------------------------------------------------
# append -> follow() in another process, against an os.pipe between the same
# two kinds of process (issue 15: "followers that sleep without losing
# microseconds"). Same pacing, same 100-byte stamped payloads; the follower
# also reports the CPU it used (getrusage of its own process, every thread)
# from the first message it received to the last.
# --------------------------------------------------------------------------

TRANSPORTS = ("pipe", "litemq")


def _paced(n: int, rate: int, send: Any, size: int) -> None:
    pad = bytes(size - 8)
    now = time.monotonic_ns
    interval = 1e9 / rate
    burst = max(1, rate // 1000)  # one burst per millisecond, sleeping between
    start = now()
    for i in range(0, n, burst):
        left = start + int(i * interval) - now()
        if left > 0:
            time.sleep(left / 1e9)
        for _ in range(min(burst, n - i)):
            send(now().to_bytes(8, "little") + pad)
    send(bytes(size))


def follow_writer(spec: dict[str, Any]) -> int:
    n, size, rate = spec["messages"], spec["size"], spec["rate"]
    if spec["transport"] == "pipe":
        fd = spec["fd"]
        _paced(n, rate, lambda b: os.write(fd, b), size)
        os.close(fd)
        return 0
    import litemq

    with litemq.Queue(spec["path"]) as q:
        app = q.appender()
        _paced(n, rate, app.append, size)
        app.flush()
    return 0


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def follow_reader(spec: dict[str, Any]) -> int:
    size = spec["size"]
    deltas = array("q")
    now = time.monotonic_ns
    first_cpu = first_wall = 0.0
    extra: dict[str, Any] = {}
    if spec["transport"] == "pipe":
        fd = spec["fd"]
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        buf = b""
        while True:
            while len(buf) < size:
                chunk = os.read(fd, size - len(buf))  # blocks until the writer writes
                if not chunk:
                    raise RuntimeError("pipe closed before the end marker")
                buf += chunk
            stamp = int.from_bytes(buf[:8], "little")
            buf = b""
            if stamp == 0:
                break
            deltas.append(now() - stamp)
            if len(deltas) == 1:
                first_cpu, first_wall = _cpu_seconds(), time.monotonic()
    else:
        import litemq

        q = litemq.Queue(spec["path"], read_only=True, wait=spec.get("wait", "default"))
        t = q.tailer(start="end")
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        for msg in t.follow():
            stamp = int.from_bytes(msg.payload[:8], "little")
            if stamp == 0:
                break
            deltas.append(now() - stamp)
            if len(deltas) == 1:
                first_cpu, first_wall = _cpu_seconds(), time.monotonic()
        extra["wake_word"] = q.stats().wake_word
        q.close()
    cpu, wall = _cpu_seconds() - first_cpu, time.monotonic() - first_wall
    Path(spec["out"]).write_bytes(deltas.tobytes())
    Path(spec["out"] + ".json").write_text(json.dumps({"cpu_s": cpu, "wall_s": wall, **extra}))
    return 0


def follow_once(
    script: str, transport: str, messages: int, size: int, rate: int, tmp: Path
) -> dict[str, Any]:
    """One writer and one follower process over `transport`; percentiles in ns."""
    spec: dict[str, Any] = {
        "transport": transport,
        "messages": messages,
        "size": size,
        "rate": rate,
    }
    read_fd = write_fd = -1
    if transport == "pipe":
        read_fd, write_fd = os.pipe()
    else:
        import litemq

        spec["path"] = str(tmp / f"queue-{rate}")
        with litemq.Queue(spec["path"]):
            pass  # create it, so the read-only follower can open it
    out = tmp / f"{transport}-{rate}.bin"
    reader = subprocess.Popen(
        [
            sys.executable,
            script,
            "_follow-reader",
            json.dumps({**spec, "fd": read_fd, "out": str(out)}),
        ],
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=(read_fd,) if read_fd >= 0 else (),
    )
    try:
        assert reader.stdout is not None
        line = reader.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"follower did not start: {line!r}")
        write = subprocess.run(
            [sys.executable, script, "_follow-writer", json.dumps({**spec, "fd": write_fd})],
            timeout=3 * messages / rate + 60,
            pass_fds=(write_fd,) if write_fd >= 0 else (),
        )
        if transport == "pipe":
            os.close(write_fd)  # the reader sees EOF if the writer died early
            write_fd = -1
        if write.returncode != 0:
            raise RuntimeError(f"{transport} writer exited with {write.returncode}")
        reader.wait(timeout=60)
    finally:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                os.close(fd)
        if reader.poll() is None:
            reader.kill()  # by its pid
            reader.wait()
    deltas = array("q")
    deltas.frombytes(out.read_bytes())
    usage = json.loads(Path(str(out) + ".json").read_text())
    warm = len(deltas) // 100
    sample = sorted(deltas[warm:])
    return {
        "transport": transport,
        "rate": rate,
        "messages": messages,
        "received": len(deltas),
        "p50_ns": percentile(sample, 50.0),
        "p99_ns": percentile(sample, 99.0),
        "p999_ns": percentile(sample, 99.9),
        "cpu": usage["cpu_s"] / usage["wall_s"] if usage["wall_s"] > 0 else 0.0,
        **({"wake_word": usage["wake_word"]} if "wake_word" in usage else {}),
    }


def follow_vs_pipe(
    script: str,
    rates: list[int],
    seconds: float,
    size: int,
    rounds: int,
    parent: str | None,
    progress: Any = None,
) -> dict[str, Any]:
    """Every (transport, rate) case `rounds` times, interleaved; the median of each figure."""
    tmp = Path(tempfile.mkdtemp(prefix="peers-follow-", dir=parent))
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        for _ in range(rounds):
            for rate in rates:
                for transport in TRANSPORTS:
                    messages = max(1000, int(rate * seconds))
                    r = follow_once(script, transport, messages, size, rate, tmp)
                    runs.setdefault(f"{transport}/{rate}", []).append(r)
                    if progress:
                        progress(
                            f"  follow {transport:>6} at {rate:>6,}/s: p50 {r['p50_ns'] / 1e3:7.1f}"
                            f" µs  p99 {r['p99_ns'] / 1e3:8.1f} µs  CPU {r['cpu']:6.1%}"
                        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cases = {}
    for key, rs in runs.items():
        mid = dict(rs[0])
        for field in ("p50_ns", "p99_ns", "p999_ns", "cpu"):
            values = sorted(r[field] for r in rs)
            mid[field] = values[len(values) // 2]
        mid["rounds"] = len(rs)
        cases[key] = mid
    return {"rates": rates, "seconds": seconds, "rounds": rounds, "cases": cases}


def follow_goals(follow: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 15's goals for followers, each with its figures and verdict."""
    out: list[dict[str, Any]] = []
    cases = follow["cases"]
    for rate in follow["rates"]:
        mine, pipe = cases.get(f"litemq/{rate}"), cases.get(f"pipe/{rate}")
        if not mine or not pipe:
            continue
        out.append(
            {
                "goal": f"p50 at {rate:,} msg/s ≤ the pipe's",
                "litemq": mine["p50_ns"],
                "peer": pipe["p50_ns"],
                "verdict": "PASS" if mine["p50_ns"] <= pipe["p50_ns"] else "FAIL",
            }
        )
        out.append(
            {
                "goal": f"p99 at {rate:,} msg/s ≤ 2 times the pipe's",
                "litemq": mine["p99_ns"],
                "peer": pipe["p99_ns"],
                "verdict": "PASS" if mine["p99_ns"] <= 2 * pipe["p99_ns"] else "FAIL",
            }
        )
        if rate == 1000:
            out.append(
                {
                    "goal": "follower CPU at 1,000 msg/s ≤ 2 % of a core",
                    "litemq": mine["cpu"],
                    "peer": pipe["cpu"],
                    "verdict": "PASS" if mine["cpu"] <= 0.02 else "FAIL",
                }
            )
    return out
