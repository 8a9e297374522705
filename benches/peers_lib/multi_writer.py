# ruff: noqa: RUF001  (the multiplication sign is meant in what this prints)
"""Several-writer section of the peer benchmark (issue 34): per-call appends.

Two cases, each in fresh processes, rounds interleaved, medians:

- one process, single-writer mode: ``app.append(b)`` in a loop (the anchor);
- 3 processes, each opening one queue with ``multi_writer=True`` and running
  the same loop, started together: the aggregate rate is every process's
  messages over the span from the first one's start to the last one's end.

Also one process in ``multi_writer`` mode alone (issue 34: it should lose at
most 20 % against the single-writer mode). Each loop's clock stops when its
last ``append`` returns (a final ``flush()`` is outside it, as in the
single-writer anchor). Run from ``benches/peers.py`` (``--multi-writer-only``
runs just this).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WRITERS = 3

CHILD = r"""
import json, sys, time, litemq
spec = json.loads(sys.argv[1])
q = litemq.Queue(spec["path"], multi_writer=spec["multi_writer"])
app = q.appender()
app.append(b"x")  # joins the writers before the clock starts
payload = b"p" * spec["size"]
while time.time() < spec["go"]:
    time.sleep(0.0005)
append = app.append
t0 = time.monotonic()
for _ in range(spec["n"]):
    append(payload)
t1 = time.monotonic()
app.flush()
q.close()
print(json.dumps({"start": t0, "end": t1}), flush=True)
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The section's options on the peers command line."""
    p.add_argument("--no-multi-writer", action="store_true", help="skip the multi-writer section")
    p.add_argument(
        "--multi-writer-only", action="store_true", help="run only the multi-writer section"
    )
    p.add_argument(
        "--mw-n", type=int, default=1_000_000, help="messages per case (default 1,000,000)"
    )
    p.add_argument("--mw-rounds", type=int, default=3, help="interleaved rounds (default 3)")


def _case(scratch: Path, procs: int, multi_writer: bool, n: int, size: int) -> float:
    """msg/s of `procs` processes together appending `n` messages in all."""
    import litemq

    with tempfile.TemporaryDirectory(dir=scratch) as d:
        path = str(Path(d) / "q")
        litemq.Queue(path, multi_writer=multi_writer).close()
        per = n // procs
        spec = {"path": path, "multi_writer": multi_writer, "size": size, "n": per}
        spec["go"] = time.time() + 1.0 + 0.2 * procs
        children = [
            subprocess.Popen(
                [sys.executable, "-c", CHILD, json.dumps(spec)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(procs)
        ]
        spans = []
        for c in children:
            out, _ = c.communicate(timeout=600)
            if c.returncode != 0:
                raise RuntimeError(f"writer process failed with {c.returncode}")
            spans.append(json.loads(out))
    start = min(s["start"] for s in spans)
    end = max(s["end"] for s in spans)
    return per * procs / (end - start)


CASES = (
    ("single", 1, False, "1 process, single writer, per-call append"),
    ("mw1", 1, True, "1 process, multi_writer=True, per-call append"),
    ("mw3", WRITERS, True, f"{WRITERS} processes, multi_writer=True, per-call append, aggregate"),
)


def run(
    scratch: Path, n: int, size: int, rounds: int, progress: Callable[[str], None]
) -> dict[str, Any]:
    """Interleaved rounds of every case; medians and the ratios issue 34 asks for."""
    rates: dict[str, list[float]] = {key: [] for key, *_ in CASES}
    for r in range(rounds):
        for key, procs, mw, label in CASES:
            rates[key].append(_case(scratch, procs, mw, n, size))
            progress(f"  multi-writer round {r + 1}: {label}: {rates[key][-1] / 1e6:.2f} M msg/s")
    med = {key: statistics.median(v) for key, v in rates.items()}
    return {
        "n": n,
        "size": size,
        "rounds": rounds,
        "rates": rates,
        "median": med,
        "ratio_mw3": med["mw3"] / med["single"],
        "ratio_mw1": med["mw1"] / med["single"],
    }


def lines(result: dict[str, Any]) -> list[str]:
    """The section as plain text."""
    med = result["median"]
    out = [
        f"Several writer processes (issue 34; {result['n']:,} × {result['size']} B per case, "
        f"medians of {result['rounds']} interleaved rounds):"
    ]
    for key, _, _, label in CASES:
        out.append(f"  {label:<68} {med[key] / 1e6:6.2f} M msg/s")
    ok3 = "MET" if result["ratio_mw3"] >= 0.5 else "MISSED"
    ok1 = "MET" if result["ratio_mw1"] >= 0.8 else "MISSED"
    out.append(
        f"  {ok3:<6} {WRITERS} processes together / one single writer: "
        f"{result['ratio_mw3']:.2f}× (goal ≥ 0.5×)"
    )
    out.append(
        f"  {ok1:<6} one process multi_writer / single writer: "
        f"{result['ratio_mw1']:.2f}× (goal ≥ 0.8×)"
    )
    return out
