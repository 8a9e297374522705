"""How much of the machine other processes took while a store ran.

Figures from a shared machine are only as good as its quiet. Before each
store the benchmark waits (a bounded time) for the other processes to go
quiet, and afterwards records the share of all cores they used during the
run: busy time from ``/proc/stat`` less the CPU time of the benchmark's own
processes (the worker, and ``redis-server`` where it runs).
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1


def _machine() -> tuple[float, float]:
    """(busy seconds, total seconds) summed over all cores since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already in user time
    return (total - idle) / TICK, total / TICK


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a live process, 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Meter:
    """``with Meter(pids) as m:`` then ``m.others``: share of all cores others used."""

    def __init__(self, pids: list[int] | None = None) -> None:
        self.pids = pids or []
        self.others = 0.0

    def __enter__(self) -> Meter:
        self.busy0, self.total0 = _machine()
        self.own0 = _children_cpu() + sum(_process_cpu(p) for p in self.pids)
        return self

    def __exit__(self, *exc: object) -> None:
        busy, total = _machine()
        own = _children_cpu() + sum(_process_cpu(p) for p in self.pids) - self.own0
        elapsed = total - self.total0
        if elapsed > 0:
            self.others = max(0.0, min(1.0, (busy - self.busy0 - own) / elapsed))


def others_now(sample: float = 0.5) -> float:
    """Share of all cores busy over ``sample`` seconds (this process is idle meanwhile)."""
    busy0, total0 = _machine()
    time.sleep(sample)
    busy, total = _machine()
    return (busy - busy0) / (total - total0) if total > total0 else 0.0


def wait_quiet(max_wait: float, threshold: float = 0.15) -> tuple[float, float]:
    """Wait up to ``max_wait`` s until others use less than ``threshold`` of the cores.

    Returns (seconds waited, the share others used in the last sample).
    """
    if max_wait <= 0:
        return 0.0, 0.0
    start = time.monotonic()
    share = others_now()
    while share > threshold and time.monotonic() - start < max_wait:
        share = others_now()
    return time.monotonic() - start, share
