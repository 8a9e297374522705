"""Timing of the append and read phases, memory and disk measurement.

Every phase is capped by time: a store that has not finished ``n`` messages
when the cap runs out stops there, and its figure is the rate it reached
(messages measured / seconds), marked ``capped`` with the count it measured.

Memory is the process's peak resident set (``VmHWM``), reset before each
phase by writing ``5`` to ``/proc/self/clear_refs``, so each phase reports
its own peak; file pages a store maps (litemq, lmdb) count in it as they do
for the kernel. Where the reset is refused, ``ru_maxrss`` of the process
(peak since it started) stands in, and the result says so.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from .stores import BATCH, LitemqBatch, LitemqSyncThreads, Store


@dataclass
class Phase:
    """What one phase measured."""

    count: int = 0
    seconds: float = 0.0
    capped: bool = False
    peak_rss: int = 0
    """Peak resident set during the phase, bytes."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rate"] = self.rate
        return out


def _status_bytes(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> bool:
    """Reset VmHWM; False when the kernel refuses (then ru_maxrss is used)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss() -> int:
    """Peak resident set in bytes since the last reset (or since start)."""
    hwm = _status_bytes("VmHWM")
    return hwm or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss() -> int:
    return _status_bytes("VmRSS")


def disk_usage(path: Path) -> tuple[int, int]:
    """(allocated bytes, apparent bytes) of every file under ``path``."""
    allocated = apparent = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            allocated += st.st_blocks * 512
            apparent += st.st_size
    return allocated, apparent


def _measured(run: Callable[[], tuple[int, bool]], extra: dict[str, Any] | None = None) -> Phase:
    reset_peak()
    start = time.perf_counter()
    count, capped = run()
    seconds = time.perf_counter() - start
    return Phase(count, seconds, capped, peak_rss(), extra or {})


def run_append(store: Store, pool: list[bytes], n: int, cap: float) -> Phase:
    """Append up to ``n`` messages from ``pool`` (reused cyclically)."""
    durable = store.durable

    def run() -> tuple[int, bool]:
        deadline = time.perf_counter() + cap
        if isinstance(store, LitemqSyncThreads):
            count = store.append_threads(pool, n, deadline)
            return count, count < n - n % store.threads
        count = 0
        unsynced = 0
        # Per-call stores start with small chunks so that a slow one stops
        # close to the cap; batched stores always get whole batches.
        chunk = BATCH if store.batched else 1
        append = store.append_chunk
        clock = time.perf_counter
        while count < n:
            if clock() >= deadline:
                return count, True
            size = min(chunk, n - count)
            t0 = clock()
            append(pool[:size])
            count += size
            unsynced += size
            if durable and unsynced >= BATCH:
                store.sync()
                unsynced = 0
            if not store.batched:
                spent = clock() - t0
                chunk = min(BATCH, max(1, int(size * 0.05 / spent) if spent > 0 else BATCH))
        if durable and unsynced:
            store.sync()
        return count, False

    return _measured(run)


def run_read(store: Store, count: int, size: int, cap: float) -> Phase:
    """Read back ``count`` messages in order; checks the payload bytes."""
    extra: dict[str, Any] = {}

    def run() -> tuple[int, bool]:
        deadline = time.perf_counter() + cap
        if isinstance(store, LitemqBatch):
            got, nbytes = store.read_columns(count, deadline)
            extra["payload_bytes"] = nbytes
            return got, got < count
        it = store.reader(count)
        got = nbytes = 0
        chunk = 1 if store.consuming_read else BATCH
        clock = time.perf_counter
        unsynced = 0
        while got < count:
            if clock() >= deadline:
                extra["payload_bytes"] = nbytes
                return got, True
            want = min(chunk, count - got)
            t0 = clock()
            # sum(map(len, ...)) consumes at C speed and checks the sizes.
            part = sum(map(len, islice(it, want)))
            nbytes += part
            got_now = part // size
            got += got_now
            unsynced += got_now
            if store.durable and store.consuming_read and unsynced >= BATCH:
                store.read_sync()
                unsynced = 0
            if got_now < want:
                break
            spent = clock() - t0
            chunk = min(BATCH, max(1, int(want * 0.05 / spent) if spent > 0 else BATCH))
        if store.durable and store.consuming_read and unsynced:
            store.read_sync()
        extra["payload_bytes"] = nbytes
        return got, False

    phase = _measured(run, extra)
    if phase.extra.get("payload_bytes") != phase.count * size:
        phase.extra["error"] = (
            f"read {phase.extra.get('payload_bytes')} payload bytes for {phase.count} messages"
        )
    return phase
